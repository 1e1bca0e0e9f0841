"""The measured noise floor of a run with repeats: which cases flip when nothing changed."""

from collections import Counter
from typing import Literal

from pydantic import BaseModel, ConfigDict

from evalgate.analysis import power
from evalgate.analysis.sign_test import flip_rate
from evalgate.config.models import GatePolicy
from evalgate.runs.schema import PASS_AT, Run


class UnstableCase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    category: str | None
    passes: int
    repeats: int


class NoiseFloor(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repeats: int
    n: int
    # f: the share of cases whose pass/fail differs between two runs, averaged over run pairs.
    flip_rate: float
    # F: the number of cases that flipped at least once over the repeats.
    flips: int
    unstable: list[UnstableCase]
    # The minimum detectable effect of the gate's paired test for a candidate run once against
    # this run, over the units the gate would count (cases, or scenario groups when cases
    # share a group), at the paired test's alpha share in a one-suite pull request (``level``).
    mde: float
    unit: Literal["case", "group"]
    units: int
    # How far the cases of a group flip together (analysis.power.design_effect: 1 when they
    # flip independently, the group size when they move as one; 1 over cases) and the
    # effective units the MDE counts, cases / design_effect.
    design_effect: float = 1.0
    effective_units: float = 0.0
    level: float
    alpha: float
    power: float

    @property
    def counted(self) -> str:
        """What the MDE counts, e.g. "54 scenario groups, 52 effective units at a design effect
        of 2.73" (how far a group's cases flip together: analysis.power)."""
        if self.unit == "case":
            return f"{self.units} cases"
        return (
            f"{self.units} scenario groups, {self.effective_units:.0f} effective units at a "
            f"design effect of {self.design_effect:.2f}"
        )


def detectable_drop(
    units: float, flip: float, alpha: float, target: float, r: int, k: int
) -> float:
    """The MDE the gate states for ``units`` effective units at flip rate ``flip``, one-sided
    ``alpha``, with ``r`` baseline and ``k`` candidate draws a case: one power model for every
    number shown (analysis.power.mde, remembered: its arguments repeat)."""
    return power.mde(units, flip, alpha, target, r, k)


def measure_noise(run: Run, policy: GatePolicy | None = None) -> NoiseFloor | None:
    """The noise floor of a run made with repeats >= 2 (None for a single run).

    Its MDE is the one the gate would state for a candidate run once against this run under
    ``policy`` (default: the default policy): the same test (the exact conditional test over
    this run's repeats, or the sign test), the same unit (scenario groups when the cases share
    groups and ``unit`` is auto, or as set), at the paired test's share of alpha
    (``paired_alpha_share``: the format route always shares it) in a one-suite pull request.

    Only cases whose every repeat was scored count; the regression split is left out of every
    estimate, as is the holdout (measured separately).
    """
    policy = policy or GatePolicy()
    cases = [c for c in run.cases if c.error is None and c.split == "dev"]
    outcomes = [[(o.score or 0.0) >= PASS_AT for o in c.outcomes] for c in cases]
    # A merged or edited run can give cases unequal repeats: the rate counts the cases repeated
    # at least twice, and the power model the repeats every one of them has.
    counted = [len(o) for o in outcomes if len(o) >= 2]
    if run.repeats < 2 or (cases and not counted):
        return None
    f = flip_rate(outcomes) if counted else 0.0
    repeats = min(counted, default=run.repeats)
    unstable = [
        UnstableCase(
            id=c.id,
            category=c.category,
            passes=sum(outcome),
            repeats=len(outcome),
        )
        for c, outcome in zip(cases, outcomes, strict=True)
        if len(set(outcome)) > 1
    ]
    # The gate's unit rule: groups when some case names one and a group holds several cases.
    groups = [c.group or c.id for c in cases]
    clustered = any(c.group for c in cases) and len(set(groups)) < len(groups)
    unit: Literal["case", "group"] = (
        "group" if policy.unit == "group" or (policy.unit == "auto" and clustered) else "case"
    )
    units = len(set(groups)) if unit == "group" else len(cases)
    effect = 1.0
    if unit == "group":
        sizes = list(Counter(groups).values())
        effect = power.bounded_effect(power.design_effect(outcomes, groups), sizes)
    effective = len(cases) / effect
    binary = all(o.score in (0.0, 1.0) for c in cases for o in c.outcomes if o.error is None)
    r = repeats if binary and policy.test == "conditional" else 1
    level = policy.alpha * policy.paired_alpha_share
    return NoiseFloor(
        repeats=repeats,
        n=len(cases),
        flip_rate=f,
        flips=len(unstable),
        unstable=unstable,
        mde=detectable_drop(effective, f, level, policy.power, r, 1),
        unit=unit,
        units=units,
        design_effect=effect,
        effective_units=effective,
        level=level,
        alpha=policy.alpha,
        power=policy.power,
    )
