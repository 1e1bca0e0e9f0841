"""What the gate answers: the verdict (pass, fail or inconclusive) with its reasons, the
paired cases, the routes' tests and the power statement that justify it. Models only."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evalgate.analysis import power as power_model
from evalgate.analysis.intervals import PairedDifference
from evalgate.analysis.noise import NoiseFloor
from evalgate.analysis.summary import Rate

VerdictKind = Literal["pass", "fail", "inconclusive"]


#: Clusters below which cluster-level tests and intervals are flagged as unreliable.
FEW_CLUSTERS = 20


class PairedCase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    category: str | None
    group: str | None
    expected: str
    baseline_answer: str
    candidate_answer: str
    baseline_score: float | None
    candidate_score: float | None
    message: str
    # Why the candidate's first failing repeat failed, when its scorer says (which criterion
    # of an all_of, where a trajectory went wrong).
    candidate_reason: str | None = None


class CategoryTest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    category: str
    n: int
    baseline: Rate
    candidate: Rate
    broken: int
    fixed: int
    p_value: float
    p_holm: float
    critical: bool


class RouteTest(BaseModel):
    """One way a suite can fail, with its share of the familywise alpha."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # "paired", "format", "category <name>" or "noise".
    route: str
    # The share of the suite's alpha (the suite's weights sum to 1).
    weight: float
    p_value: float
    # Weighted-Holm adjusted over the family (one suite, or every suite of a pull request).
    p_adjusted: float
    failed: bool
    # What a failure says, before its p-values.
    finding: str


class PowerModel(BaseModel):
    """What the minimum detectable effect is computed from, for the test that runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The units the gate counts (cases, or scenario groups) and the cases in them.
    n: int
    cases: int
    # How far a group's cases flip together in the baseline (analysis.power: 1 over cases).
    design_effect: float
    flip_rate: float
    baseline_draws: int
    candidate_draws: int
    power: float
    tolerance: float

    @property
    def effective_units(self) -> float:
        return self.cases / self.design_effect

    def counted_for(self, effective: int) -> int:
        """The units the gate counts that give ``effective`` effective units."""
        return power_model.counted_for(effective, self.cases, self.n, self.design_effect)


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: VerdictKind
    reasons: list[str]
    warnings: list[str]
    baseline_run: str | None
    candidate_run: str
    test: str
    unit: Literal["case", "group"]
    n_tested: int
    broken: list[PairedCase]
    fixed: list[PairedCase]
    unchanged: int
    unstable: list[PairedCase]
    regression_failures: list[PairedCase]
    edited: list[str]
    only_candidate: list[str]
    only_baseline: list[str]
    errored: list[str]
    p_value: float | None
    noise_p: float | None
    noise: NoiseFloor | None
    mde: float | None
    cases_needed: int | None
    format_broken: int
    format_fixed: int
    format_p: float | None
    categories: list[CategoryTest]
    baseline_accuracy: Rate | None
    candidate_accuracy: Rate
    difference: PairedDifference | None
    # The familywise alpha of every fail route, and the tests that share it.
    alpha: float
    routes: list[RouteTest]
    family_tests: int
    # The one-sided upper confidence bound on the drop (a fraction; negative: a gain) and how.
    drop_bound: float | None
    bound_method: str | None
    tolerance: float
    # Cases that, at the observed rates, would bring the bound under the tolerance.
    cases_to_decide: int | None
    # The parts the kind is settled from (see _settle).
    rule_failures: list[str]
    mismatch: list[str]
    blockers: list[str]
    notes: list[str]
    power_model: PowerModel | None
    # The bound's numbers at another alpha (the pull request's, when suites set different
    # alphas): not part of what is reported.
    rebound: Callable[[float], dict[str, object]] | None = Field(default=None, exclude=True)
    # Over groups, the case-level test's p-value on the same pairs, for what would decide it.
    case_level_p: float | None = Field(default=None, exclude=True)


def _rate(scores: Sequence[float]) -> Rate:
    return Rate.of(sum(scores), len(scores))


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


@dataclass
class _Findings:
    """What the steps of :func:`decide` find, gathered for :func:`_settle`."""

    warnings: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    mismatch: list[str] = field(default_factory=list)
    rule_failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def overrule(verdict: Verdict, kind: VerdictKind, reasons: Sequence[str]) -> Verdict:
    """The verdict made ``kind`` for reasons found outside the comparison (a judge below its
    floor, a judge change that lowered agreement); what the comparison said becomes a warning."""
    if not reasons:
        return verdict
    kept = list(verdict.reasons) if verdict.kind == kind else []
    said = [f"the comparison alone says {verdict.kind}: {r}" for r in verdict.reasons]
    warnings = verdict.warnings + ([] if verdict.kind == kind else said)
    return verdict.model_copy(
        update={"kind": kind, "reasons": [*reasons, *kept], "warnings": warnings}
    )
