"""The measured noise floor of a run with repeats: which cases flip when nothing changed."""

from __future__ import annotations

import math
from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from evalgate.analysis.stats import conditional_mde, flip_rate
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
    mde: float
    alpha: float
    power: float


@lru_cache(maxsize=4096)  # a power search whose arguments repeat across runs
def _mde(n: int, f: float, alpha: float, power: float, repeats: int) -> float:
    if n == 0:
        return 1.0
    # f >= 1/2 (e.g. one case and two repeats that disagree): the model has nothing settled.
    if f >= 0.5:
        return math.inf
    return conditional_mde(n, f, alpha, power, repeats, 1)


def measure_noise(run: Run, *, alpha: float = 0.05, power: float = 0.80) -> NoiseFloor | None:
    """The noise floor of a run made with repeats >= 2 (None for a single run).

    Its MDE is that of the default paired test (the exact conditional test) for a candidate
    run once against a baseline with this run's repeats, at ``alpha``.

    Only cases whose every repeat was scored count; the regression split is left out of every
    estimate, as is the holdout (measured separately).
    """
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
    return NoiseFloor(
        repeats=repeats,
        n=len(cases),
        flip_rate=f,
        flips=len(unstable),
        unstable=unstable,
        mde=_mde(len(cases), f, alpha, power, repeats),
        alpha=alpha,
        power=power,
    )
