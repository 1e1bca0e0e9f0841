"""The gate's decision: paired comparison + policy -> verdict with reasons. Pure.

Pairs the candidate with the baseline case by case (dev split only; regression cases must
never fail and are judged alone; the holdout never enters a PR gate). A verdict has three
outcomes:

* ``fail``: a regression case failed, or a fail route rejected: the paired test (the candidate
  is worse), format validity, a critical category, or the noise check when it is set to fail.
  The routes of a suite, and of every suite of one pull request (:func:`decide_pull_request`),
  share one familywise alpha by weighted Holm, so an unchanged prompt fails a pull request at
  most alpha of the time however many suites and routes it has.
* ``pass``: nothing failed and the data rule out a drop of ``tolerance`` or more (a one-sided
  upper confidence bound on the drop below the margin: a non-inferiority test).
* ``inconclusive``: otherwise (not shown worse, not shown within the margin), or when the runs
  cannot be compared (another model or scorer, incomplete runs, too many unpaired cases).

The paired test for pass/fail scores is, by default, the exact conditional test over every
repeat of both runs (stats.conditional_test_worse): given a case's total passes over its R
baseline and K candidate draws, the candidate's share is hypergeometric under no change,
whatever the case's own pass rate, so no case needs to be left out as unstable and every
repeat a baseline paid for is used. With scenario groups the default unit is the group: whole
runs are permuted within each group (analysis.run_permutation), which stays exact when
phrasings of one scenario move together. Continuous scores are tested the same way over every
repeat (the run totals are sums of scores), or by Wilcoxon over matched repeats.

``test: sign`` keeps the sign test over matched repeats. Why it uses matched repeats: the sign
test is exact when, for an unchanged prompt, a case's baseline and candidate scores are
exchangeable, so each side's score is the mean over the same number of repeats, k = the
smaller repeat count. Leaving out the cases that flipped between the very repeats being
compared would keep only the settled cases, which the candidate's noise can only break (about
98% false fails at a flip rate of 10%); so a case is left out as unstable only when it flipped
between baseline repeats that the comparison does not use.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from statistics import fmean
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evalgate.analysis import power as power_model
from evalgate.analysis.conditional import MatchedSet, conditional_test_worse
from evalgate.analysis.intervals import PairedDifference, paired_difference
from evalgate.analysis.margin import cases_to_rule_out, t_upper_drop, tango_upper_drop
from evalgate.analysis.multiplicity import holm_adjust, weighted_holm
from evalgate.analysis.noise import NoiseFloor, detectable_drop, measure_noise
from evalgate.analysis.provenance import differences
from evalgate.analysis.run_permutation import Block, run_permutation_test_worse
from evalgate.analysis.search import CASES_CAP
from evalgate.analysis.sequential import sequential_e_value
from evalgate.analysis.sign_test import broke_more_than_noise, sign_test_worse
from evalgate.analysis.summary import Rate
from evalgate.config.models import GatePolicy
from evalgate.limits import label
from evalgate.runs.resume import cases_not_run
from evalgate.runs.schema import PASS_AT, CaseResult, Outcome, Run
from evalgate.trajectory import expected_label

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


def _passed(o: Outcome) -> bool:
    return (o.score or 0.0) >= PASS_AT


def _tally(outcomes: Sequence[Outcome], k: int) -> tuple[float, int, int]:
    """The summed score, the passes and the replies in format over the first ``k`` outcomes:
    one loop, as the gate runs it for every case of both runs."""
    total, passes, formats = 0.0, 0, 0
    for o in outcomes[:k]:
        score = o.score or 0.0
        total += score
        passes += score >= PASS_AT
        formats += bool(o.format_ok)
    return total, passes, formats


@dataclass(frozen=True)
class _Pair:
    """A baseline and a candidate case, compared over ``kb`` and ``kc`` of their repeats."""

    base: CaseResult
    cand: CaseResult
    kb: int
    kc: int
    base_score: float
    cand_score: float
    # Passes and replies in the asked-for format, over the compared repeats.
    base_passes: int
    cand_passes: int
    base_formats: int
    cand_formats: int

    @classmethod
    def of(cls, base: CaseResult, cand: CaseResult, matched: bool) -> _Pair:
        if matched:
            kb = kc = min(len(base.outcomes), len(cand.outcomes))
        else:
            kb, kc = len(base.outcomes), len(cand.outcomes)
        b_total, b_passes, b_formats = _tally(base.outcomes, kb)
        c_total, c_passes, c_formats = _tally(cand.outcomes, kc)
        return cls(
            base=base,
            cand=cand,
            kb=kb,
            kc=kc,
            base_score=b_total / kb,
            cand_score=c_total / kc,
            base_passes=b_passes,
            cand_passes=c_passes,
            base_formats=b_formats,
            cand_formats=c_formats,
        )

    @property
    def diff(self) -> float:
        return self.cand_score - self.base_score

    @property
    def base_format(self) -> float:
        return self.base_formats / self.kb

    @property
    def cand_format(self) -> float:
        return self.cand_formats / self.kc

    def matched_set(self, which: Literal["score", "format"]) -> MatchedSet:
        if which == "score":
            return (self.base_passes, self.kb, self.cand_passes, self.kc)
        return (self.base_formats, self.kb, self.cand_formats, self.kc)

    def held_out_flipped(self) -> bool:
        """Whether the case flipped between baseline repeats that the comparison does not use."""
        held = {_passed(o) for o in self.base.outcomes[self.kb :]}
        return len(held) > 1

    def group(self) -> str:
        return self.cand.group or self.cand.id


def _paired(base: CaseResult | None, cand: CaseResult, pair: _Pair | None = None) -> PairedCase:
    return PairedCase(
        id=cand.id,
        category=cand.category,
        group=cand.group,
        expected=expected_label(cand.expected),
        baseline_answer=label(base.answer) if base else "",
        candidate_answer=label(cand.answer),
        baseline_score=pair.base_score if pair else (base.score if base else None),
        candidate_score=pair.cand_score if pair else cand.score,
        message=cand.message(),
        candidate_reason=next(
            (o.reason for o in cand.outcomes if o.reason and (o.score or 0.0) < 0.5), None
        ),
    )


def _is_binary(runs: Sequence[Run]) -> bool:
    return all(
        o.score in (0.0, 1.0) for r in runs for c in r.cases for o in c.outcomes if o.error is None
    )


def _rate(scores: Sequence[float]) -> Rate:
    return Rate.of(sum(scores), len(scores))


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


_mde = detectable_drop  # the one power model the noise floor states too


_units_for = power_model.units_for  # effective units; PowerModel.counted_for converts them


def route_weights(policy: GatePolicy, others: int) -> tuple[float, float]:
    """The paired test's share of a suite's alpha and each other fail route's share."""
    if others == 0:
        return 1.0, 0.0
    return policy.paired_alpha_share, (1.0 - policy.paired_alpha_share) / others


# --------------------------------------------------------------------------------------------
# The paired tests
# --------------------------------------------------------------------------------------------


def _binary_p(
    pairs: Sequence[_Pair],
    which: Literal["score", "format"],
    policy: GatePolicy,
    unit: Literal["case", "group"],
) -> float:
    """One-sided p-value that the candidate passes (or keeps the format) less often."""
    if policy.test == "conditional":
        if unit == "group":
            return run_permutation_test_worse(_blocks(pairs, which), mid_p=policy.mid_p)
        return conditional_test_worse([p.matched_set(which) for p in pairs], mid_p=policy.mid_p)
    value: Callable[[_Pair], float] = (
        (lambda p: p.diff) if which == "score" else (lambda p: p.cand_format - p.base_format)
    )
    if unit == "group":
        by_group: dict[str, list[float]] = defaultdict(list)
        for pair in pairs:
            by_group[pair.group()].append(value(pair))
        diffs = [fmean(v) for v in by_group.values()]
    else:
        diffs = [value(p) for p in pairs]
    broken = sum(1 for d in diffs if d < 0)
    fixed = sum(1 for d in diffs if d > 0)
    return sign_test_worse(broken, fixed, mid_p=policy.mid_p)


def _blocks(
    pairs: Sequence[_Pair], which: Literal["score", "format", "value"], unit: str = "group"
) -> list[Block]:
    """Each scenario group's (or case's) run totals: per baseline and per candidate repeat, the
    group's passes, replies in format or summed scores in that repeat, over the repeats every
    case of the group has (a merged run can give cases unequal repeats)."""
    by_group: dict[str, list[_Pair]] = defaultdict(list)
    for pair in pairs:
        by_group[pair.group() if unit == "group" else pair.cand.id].append(pair)
    hit: Callable[[Outcome], float] = (
        _passed
        if which == "score"
        else (lambda o: bool(o.format_ok))
        if which == "format"
        else (lambda o: o.score or 0.0)
    )
    blocks: list[Block] = []
    for rows in by_group.values():
        r, k = min(p.kb for p in rows), min(p.kc for p in rows)
        base = [sum(hit(p.base.outcomes[i]) for p in rows) for i in range(r)]
        cand = [sum(hit(p.cand.outcomes[i]) for p in rows) for i in range(k)]
        blocks.append((base, cand))
    return blocks


def _test_name(policy: GatePolicy, binary: bool, unit: str, units: int, r: int, k: int) -> str:
    mid = " (mid-p)" if policy.mid_p else ""
    if binary and policy.test == "conditional":
        repeats = f"{r} baseline and {k} candidate repeats a case"
        if unit == "group":
            return (
                f"exact group-level conditional test{mid} over {units} scenario groups (whole "
                f"runs permuted within each group; {repeats})"
            )
        return f"exact conditional test{mid} over {repeats}"
    if binary or unit == "group":
        name = f"one-sided exact sign test{mid}"
        return name + (f", over {units} scenario groups" if unit == "group" else "")
    if policy.continuous_test == "wilcoxon":
        return "Wilcoxon signed-rank (Pratt)"
    over = f"within each of {units} scenario groups" if unit == "group" else "within each case"
    return f"permutation test of the scores, whole runs permuted {over} ({r} and {k} repeats)"


def _continuous_p(diffs: Sequence[float], policy: GatePolicy) -> float:
    # numpy and scipy only for scores that are not pass/fail.
    from evalgate.analysis.continuous import wilcoxon_pratt

    return wilcoxon_pratt(list(diffs), alternative="less")


def _drop_bound(pairs: Sequence[_Pair], binary: bool, unit: str, alpha: float) -> tuple[float, str]:
    """The one-sided ``1 - alpha`` upper bound on the drop, and the method's name."""
    diffs = [p.diff for p in pairs]
    groups = [p.group() for p in pairs] if unit == "group" else None
    if not binary:
        # A t bound alone passes two identical scores (SE 0). Scores in [0, 1] give d² <= |d|,
        # so Tango's bound on the summed losses and gains bounds the variance from above too:
        # the larger of the two is kept.
        losses = sum(max(0.0, -d) for d in diffs)
        gains = sum(max(0.0, d) for d in diffs)
        how = "cluster-robust t bound" if groups else "t bound"
        bound = max(
            t_upper_drop(diffs, groups, alpha), tango_upper_drop(losses, gains, len(diffs), alpha)
        )
        return bound, f"the larger of the {how} and Tango's score bound on the score changes"
    # Expected discordant pairs between one random baseline and one random candidate draw.
    b = sum(p.base_score * (1.0 - p.cand_score) for p in pairs)
    c = sum(p.cand_score * (1.0 - p.base_score) for p in pairs)
    bound = tango_upper_drop(b, c, len(pairs), alpha)
    if groups is None:
        return bound, "Tango's score bound"
    # Cases of one scenario move together: the bound must hold at the group level too.
    return max(bound, t_upper_drop(diffs, groups, alpha)), (
        "the larger of Tango's score bound and the cluster-robust t bound"
    )


# --------------------------------------------------------------------------------------------
# The decision
# --------------------------------------------------------------------------------------------


@dataclass
class _Findings:
    """What the steps of :func:`decide` find, gathered for :func:`_settle`."""

    warnings: list[str] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)
    mismatch: list[str] = field(default_factory=list)
    rule_failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class _Pairing:
    """The dev cases of a candidate matched with the baseline's, and what could not be."""

    pairs: list[_Pair]
    edited: list[str]
    only_candidate: list[str]
    only_baseline: list[str]
    unstable: list[PairedCase]


Route = tuple[str, float, str]


def decide(baseline: Run | None, candidate: Run, policy: GatePolicy) -> Verdict:
    """The verdict for a candidate run against a baseline run, with every reason.

    The suite's fail routes form one familywise family here; :func:`decide_pull_request`
    widens the family to every suite of a pull request. The steps: the candidate's own rules,
    the two runs' provenance, the pairing, the paired test with its unit, the other fail routes
    (noise, format, critical categories), and the numbers that report the comparison.
    """
    found = _Findings()
    dev = [c for c in candidate.cases if c.split == "dev"]
    regression_failures = _candidate_rules(candidate, found)
    numbers = _empty_numbers(policy, dev)

    def result() -> Verdict:
        draft = Verdict(
            kind="inconclusive",
            reasons=[],
            warnings=found.warnings,
            baseline_run=baseline.name if baseline else None,
            candidate_run=candidate.name,
            regression_failures=regression_failures,
            errored=sorted(c.id for c in candidate.cases if c.error is not None),
            rule_failures=found.rule_failures,
            mismatch=found.mismatch,
            blockers=found.blockers,
            notes=found.notes,
            **numbers,
        )
        return _settle(draft, [r.weight for r in draft.routes])

    if baseline is None:
        found.blockers.insert(0, "no usable baseline: there is nothing to compare against")
        return result()
    _provenance(baseline, candidate, found)
    binary = _is_binary([baseline, candidate])
    conditional = binary and policy.test == "conditional"
    # The sign test and Wilcoxon need each side's score over the same number of repeats.
    matched = policy.test == "sign" if binary else policy.continuous_test == "wilcoxon"
    noise = measure_noise(baseline, policy)
    if noise is None:
        found.warnings.append(
            "the baseline has no repeats, so the noise floor is not measured: the MDE assumes "
            "a noise-free model; make baselines with "
            f"--repeats {max(2, policy.baseline_repeats)}"
        )
    pairing = _pair_cases(baseline, dev, policy, matched, found)
    pairs = pairing.pairs
    unit, groups, n_units = _unit_of(pairs, policy, found)
    r = max((p.kb for p in pairs), default=1)
    k = max((p.kc for p in pairs), default=1)
    if candidate.allocation is not None:
        # Adaptive repeats: most cases were sent once; the power model must not assume more.
        k = min((p.kc for p in pairs), default=1)
    p_value, test = _paired_test(pairs, policy, binary, unit, n_units, (r, k), candidate)
    if conditional and unit == "group":
        numbers["case_level_p"] = _binary_p(pairs, "score", policy, "case")
    broken = [_paired(p.base, p.cand, p) for p in pairs if p.diff < 0]
    fixed = [_paired(p.base, p.cand, p) for p in pairs if p.diff > 0]
    routes: list[Route] = [
        (
            "paired",
            p_value,
            f"significantly worse: broke {len(broken)}, fixed {len(fixed)} ({test})",
        )
    ]
    noise_p = _noise_route(pairs, noise, policy, routes, found)
    if candidate.calls_saved:
        e_value = sequential_e_value(len(broken), len(fixed))
        found.notes.append(
            f"the sequential test's e-value crossed its threshold, so the run stopped early and "
            f"saved {candidate.calls_saved} calls (largest e = "
            f"{candidate.sequential_e_max or e_value:.3g})"
        )
    numbers.update(_format_and_category_routes(pairs, policy, unit, routes))
    numbers.update(
        test=test,
        unit=unit,
        n_tested=n_units,
        broken=broken,
        fixed=fixed,
        unchanged=len(pairs) - len(broken) - len(fixed),
        unstable=pairing.unstable,
        edited=pairing.edited,
        only_candidate=pairing.only_candidate,
        only_baseline=pairing.only_baseline,
        p_value=p_value,
        noise_p=noise_p,
        noise=noise,
        routes=_route_tests(routes, policy),
        baseline_accuracy=_rate([p.base_score for p in pairs]),
        power_model=PowerModel(
            n=n_units,
            cases=len(pairs),
            design_effect=_design_effect(pairs, unit, groups),
            flip_rate=noise.flip_rate if noise else 0.0,
            baseline_draws=r if conditional else 1,
            candidate_draws=k if conditional else 1,
            power=policy.power,
            tolerance=policy.tolerance,
        ),
    )
    if pairs:
        numbers.update(_bounds(pairs, binary, unit, groups, policy))
        numbers["rebound"] = partial(_rebound, pairs, binary, unit, groups, policy)
    else:
        found.blockers.append("no case could be paired with the baseline")
    return result()


def _candidate_rules(candidate: Run, found: _Findings) -> list[PairedCase]:
    """What the candidate fails on its own: regression cases, and an incomplete run."""
    regression = [c for c in candidate.cases if c.split == "regression"]
    failures = [_paired(None, c) for c in regression if c.passed is False]
    for failure in failures:
        found.rule_failures.append(
            f"regression case {failure.id} failed (expected {failure.expected}, answered "
            f"{failure.candidate_answer}); regression cases must never fail"
        )
    if candidate.budget_stop is not None:
        found.blockers.append(
            f"the candidate run is incomplete: {candidate.budget_stop}; raise the budget and "
            "resume it with `evalgate run VERSION --resume RUN`"
        )
    elif candidate.interrupted:
        found.blockers.append(
            f"the candidate run is incomplete: it was interrupted with "
            f"{cases_not_run(candidate)} of {len(candidate.cases)} cases not run; resume it "
            "with `evalgate run VERSION --resume RUN`"
        )
    elif candidate.incomplete:
        found.blockers.append(
            f"the candidate run is incomplete: {candidate.errors} of {len(candidate.cases)} "
            "cases errored; re-run it"
        )
    return failures


def _empty_numbers(policy: GatePolicy, dev: Sequence[CaseResult]) -> dict[str, object]:
    """The verdict's numbers before anything is compared (what a verdict without a baseline
    reports)."""
    return dict(
        test="none",
        unit="group" if policy.unit == "group" else "case",
        n_tested=0,
        broken=[],
        fixed=[],
        unchanged=0,
        unstable=[],
        edited=[],
        only_candidate=[],
        only_baseline=[],
        p_value=None,
        noise_p=None,
        noise=None,
        mde=None,
        cases_needed=None,
        format_broken=0,
        format_fixed=0,
        format_p=None,
        categories=[],
        baseline_accuracy=None,
        candidate_accuracy=_rate([c.score or 0.0 for c in dev if c.error is None]),
        difference=None,
        alpha=policy.alpha,
        routes=[],
        family_tests=0,
        drop_bound=None,
        bound_method=None,
        tolerance=policy.tolerance,
        cases_to_decide=None,
        power_model=None,
    )


def _provenance(baseline: Run, candidate: Run, found: _Findings) -> None:
    """What makes the two runs incomparable (another model, another scorer) or unusable."""
    d = differences(baseline, candidate)
    if d.model is not None:
        found.mismatch.append(
            f"baseline and candidate used different models ({d.model[0]} vs {d.model[1]})"
        )
    if d.scorer_changed:
        found.mismatch.append(
            "baseline and candidate were scored differently (scorer config changed)"
        )
    if d.tools_changed:
        # Like a prompt edit, a change of what answers the agent's calls is what is gated.
        found.warnings.append(
            "the candidate's tools differ from the baseline's (tools:, agent: or the files the "
            "tool command runs): the verdict gates that change together with the prompt's"
        )
    if "A" in d.incomplete:
        missing = cases_not_run(baseline)
        found.blockers.append(
            f"the baseline run is incomplete ({missing} of {len(baseline.cases)} cases not run)"
            if missing
            else f"the baseline run is incomplete ({baseline.errors} of {len(baseline.cases)} "
            "errored)"
        )


def _pair_cases(
    baseline: Run,
    dev: Sequence[CaseResult],
    policy: GatePolicy,
    matched: bool,
    found: _Findings,
) -> _Pairing:
    """Each dev case with the baseline's case of the same id and content; new, edited,
    errored and (when the baseline's held-out repeats show it) unstable cases left out."""
    base_by_id = {c.id: c for c in baseline.cases if c.split == "dev"}
    edited: list[str] = []
    only_candidate: list[str] = []
    pairs: list[_Pair] = []
    unstable: list[PairedCase] = []
    kept_unstable = 0
    for cand in dev:
        base = base_by_id.get(cand.id)
        if base is None:
            only_candidate.append(cand.id)
        elif base.hash != cand.hash:
            edited.append(cand.id)
        elif base.error is not None or cand.error is not None:
            continue
        else:
            pair = _Pair.of(base, cand, matched=matched)
            if matched and policy.exclude_unstable and pair.held_out_flipped():
                unstable.append(_paired(base, cand, pair))
            else:
                # Flipped, but only where the held-out repeats cannot show it (too few of them).
                kept_unstable += base.flipped and len(base.outcomes) - pair.kb < 2
                pairs.append(pair)
    if kept_unstable and policy.exclude_unstable and matched:
        k = min((p.kb for p in pairs), default=1)
        found.warnings.append(
            f"{kept_unstable} cases that flipped between the baseline's repeats stay in the test: "
            "leaving them out of a comparison with those same repeats would bias it towards "
            "'worse' (only the settled cases would be left, and noise can only break a settled "
            f"pass); a baseline with --repeats {k + 2} lets the gate leave them out"
        )
    unpaired = len(only_candidate) + len(edited)
    if dev and unpaired / len(dev) > policy.max_unpaired_share:
        found.blockers.append(
            f"{unpaired} of {len(dev)} candidate cases have no unchanged counterpart in the "
            f"baseline (new or edited), over the {_pct(policy.max_unpaired_share)}% allowed: "
            "refresh the baseline"
        )
    if edited:
        found.warnings.append(
            f"{len(edited)} cases were edited since the baseline and are left out"
        )
    only_baseline = sorted(set(base_by_id) - {c.id for c in dev})
    return _Pairing(pairs, edited, only_candidate, only_baseline, unstable)


def _design_effect(
    pairs: Sequence[_Pair], unit: Literal["case", "group"], groups: list[str]
) -> float:
    """How far the baseline's cases flip together within groups (1 when the unit is the case):
    the power model counts cases / this many effective units."""
    if unit == "case" or not pairs:
        return 1.0
    outcomes = [[_passed(o) for o in p.base.outcomes[: p.kb]] for p in pairs]
    measured = power_model.design_effect(outcomes, groups)
    return power_model.bounded_effect(measured, list(Counter(groups).values()))


def _unit_of(
    pairs: Sequence[_Pair], policy: GatePolicy, found: _Findings
) -> tuple[Literal["case", "group"], list[str], int]:
    """What the test counts (cases, or scenario groups when cases cluster), each pair's group,
    and how many units there are."""
    groups = [p.group() for p in pairs]
    # Groups of one case each (a group field that falls back to the case id) cluster nothing.
    clustered = any(p.cand.group for p in pairs) and len(set(groups)) < len(groups)
    unit: Literal["case", "group"] = (
        "group" if policy.unit == "group" or (policy.unit == "auto" and clustered) else "case"
    )
    n_units = len(set(groups)) if unit == "group" else len(pairs)
    if unit == "group" and pairs and n_units < FEW_CLUSTERS:
        found.warnings.append(
            f"only {n_units} scenario groups: the cluster-robust bound is unreliable under "
            f"{FEW_CLUSTERS} and the group-level test has little power; add scenarios, or set "
            "gate.unit: case if the groups are labels only"
        )
    return unit, groups, n_units


def _paired_test(
    pairs: Sequence[_Pair],
    policy: GatePolicy,
    binary: bool,
    unit: Literal["case", "group"],
    n_units: int,
    draws: tuple[int, int],
    candidate: Run,
) -> tuple[float, str]:
    """The paired test's one-sided p-value that the candidate is worse, and the test's name."""
    if binary:
        p_value = _binary_p(pairs, "score", policy, unit)
    elif policy.continuous_test == "permutation":
        # Every repeat of both runs: for R = K = 1 and cases this is the sign-flip test.
        p_value = run_permutation_test_worse(_blocks(pairs, "value", unit), seed=policy.seed)
    elif unit == "group":
        by_group: dict[str, list[float]] = defaultdict(list)
        for pair in pairs:
            by_group[pair.group()].append(pair.diff)
        p_value = _continuous_p([fmean(v) for v in by_group.values()], policy)
    else:
        p_value = _continuous_p([p.diff for p in pairs], policy)
    test = _test_name(policy, binary, unit, n_units, *draws)
    if candidate.allocation is not None:
        test += f"; {candidate.allocation}"
    if candidate.sequential_e_max is not None:
        # The paired test's alpha is split between the e-value watched during the run and the
        # final test (Bonferroni): 1 / max E is an anytime-valid p-value (Ville's inequality).
        p_value = min(1.0, 2.0 * min(p_value, 1.0 / max(candidate.sequential_e_max, 1.0)))
        test += ", alpha split with the sequential e-value"
    return p_value, test


def _noise_route(
    pairs: Sequence[_Pair],
    noise: NoiseFloor | None,
    policy: GatePolicy,
    routes: list[Route],
    found: _Findings,
) -> float | None:
    """Whether the PR broke more cases than the baseline's own flips predict: a fail route
    (``noise_check: fail``) or a warning; its p-value, or None when not measured."""
    if noise is None or policy.noise_check == "off":
        return None
    # The share 1/(1 + R) is exact for R = 2 and 3 (1 - pi^R - (1 - pi)^R = R pi (1 - pi)
    # there, and it is smaller beyond), comparing one candidate draw with one baseline
    # draw: so the first candidate draw is compared with the first baseline repeat, and
    # flips are counted over the first R = min(repeats, 3) repeats, whatever K is.
    used = min(noise.repeats, 3)
    first_broken = sum(
        1 for p in pairs if _passed(p.base.outcomes[0]) and not _passed(p.cand.outcomes[0])
    )
    flips = sum(1 for p in pairs if len({_passed(o) for o in p.base.outcomes[:used]}) > 1)
    noise_p = broke_more_than_noise(first_broken, flips, used)
    message = (
        f"the PR broke {first_broken} cases (its first draw against the baseline's first "
        f"repeat), more than the baseline's noise predicts ({flips} flips over {used} "
        "repeats)"
    )
    if policy.noise_check == "fail":
        routes.append(("noise", noise_p, message))
    elif noise_p < policy.alpha:
        found.warnings.append(f"{message}; p = {noise_p:.2g}")
    return noise_p


def _format_and_category_routes(
    pairs: Sequence[_Pair],
    policy: GatePolicy,
    unit: Literal["case", "group"],
    routes: list[Route],
) -> dict[str, object]:
    """The format-validity route and one route per critical category, added to ``routes``;
    the numbers the verdict reports of them."""
    fmt_broken = sum(1 for p in pairs if p.cand_format < p.base_format)
    fmt_fixed = sum(1 for p in pairs if p.cand_format > p.base_format)
    format_p = _binary_p(pairs, "format", policy, unit)
    routes.append(
        (
            "format",
            format_p,
            f"format validity dropped: {fmt_broken} cases lost the asked-for format, "
            f"{fmt_fixed} gained it",
        )
    )
    categories = _category_tests(pairs, policy, unit)
    routes += [
        (
            f"category {row.category}",
            row.p_value,
            f"critical category {row.category} regressed: broke {row.broken}, fixed {row.fixed}",
        )
        for row in categories
        if row.critical
    ]
    return dict(
        format_broken=fmt_broken,
        format_fixed=fmt_fixed,
        format_p=format_p,
        categories=categories,
    )


def _route_tests(routes: Sequence[Route], policy: GatePolicy) -> list[RouteTest]:
    """The suite's fail routes with their weights: the paired test's share, the rest even."""
    w_paired, w_other = route_weights(policy, len(routes) - 1)
    weights = [w_paired] + [w_other] * (len(routes) - 1)
    return [
        RouteTest(route=name, weight=w, p_value=p, p_adjusted=p, failed=False, finding=finding)
        for (name, p, finding), w in zip(routes, weights, strict=True)
    ]


def _bounds(
    pairs: Sequence[_Pair],
    binary: bool,
    unit: Literal["case", "group"],
    groups: list[str],
    policy: GatePolicy,
) -> dict[str, object]:
    """The candidate's accuracy, the paired difference, the bound on the drop and, when the
    bound is over the tolerance, the cases that would bring it under. Over the same compared
    cases and repeats as the test, so the candidate's accuracy minus the baseline's is the
    paired difference."""
    base_scores = [p.base_score for p in pairs]
    cand_scores = [p.cand_score for p in pairs]
    bound, method = _drop_bound(pairs, binary, unit, policy.alpha)
    numbers: dict[str, object] = dict(
        candidate_accuracy=_rate(cand_scores),
        difference=paired_difference(cand_scores, base_scores, groups if unit == "group" else None),
        drop_bound=bound,
        bound_method=method,
    )
    if binary and bound >= policy.tolerance:
        b = sum(p.base_score * (1.0 - p.cand_score) for p in pairs)
        c = sum(p.cand_score * (1.0 - p.base_score) for p in pairs)
        # The count scales Tango's bound. Where the cluster-robust bound is the larger, more
        # cases of the same groups would not bring it under: no count then (nor one no larger
        # than the suite, which would say the suite already decides).
        if tango_upper_drop(b, c, len(pairs), policy.alpha) >= bound - 1e-12:
            needed = cases_to_rule_out(b, c, len(pairs), policy.tolerance, policy.alpha)
            numbers["cases_to_decide"] = needed if len(pairs) < needed < CASES_CAP else None
    return numbers


def _rebound(
    pairs: Sequence[_Pair],
    binary: bool,
    unit: Literal["case", "group"],
    groups: list[str],
    policy: GatePolicy,
    alpha: float,
) -> dict[str, object]:
    """The bound's numbers at ``alpha`` instead of the suite's own."""
    numbers = _bounds(pairs, binary, unit, groups, policy.model_copy(update={"alpha": alpha}))
    return {"cases_to_decide": None} | numbers


def _settle(
    v: Verdict,
    weights: Sequence[float],
    adjusted: Sequence[float] | None = None,
    family: int | None = None,
) -> Verdict:
    """The verdict's kind and reasons from its parts.

    ``weights`` are the routes' shares of alpha. The routes' p-values are adjusted by weighted
    Holm over the suite alone, unless ``adjusted`` (over a ``family`` of tests across suites,
    :func:`decide_pull_request`) is given. One function on purpose: the order of the rules
    (blockers, then rule failures, then the adjusted routes, then the bound) is the policy,
    and reads best top to bottom.
    """
    if adjusted is None:
        adjusted = weighted_holm([r.p_value for r in v.routes], weights) if v.routes else []
    family = len(weights) if family is None else family
    # Exact p-values are sums of floating-point terms: one equal to alpha up to rounding (1/32
    # at alpha 0.03125) must not fail, since the rule is p < alpha.
    limit = v.alpha * (1.0 - 1e-12)
    routes = [
        r.model_copy(update={"p_adjusted": adj, "failed": adj < limit})
        for r, adj in zip(v.routes, adjusted, strict=True)
    ]
    level = {r.route: v.alpha * w for r, w in zip(v.routes, weights, strict=True)}
    failed = [
        f"{r.finding} (p = {r.p_value:.2g}; weighted Holm over {family} tests: "
        f"{r.p_adjusted:.2g} < {v.alpha:g})"
        for r in routes
        if r.failed
    ]
    warnings = [w for w in v.warnings if not w.startswith("underpowered")]
    mde, needed = None, None
    pm = v.power_model
    if pm is not None:
        paired_level = level.get("paired", v.alpha)
        mde = _mde(
            pm.effective_units,
            pm.flip_rate,
            paired_level,
            pm.power,
            pm.baseline_draws,
            pm.candidate_draws,
        )
        if mde > pm.tolerance and pm.flip_rate < 1.0:
            needed = pm.counted_for(
                _units_for(
                    pm.tolerance,
                    pm.flip_rate,
                    paired_level,
                    pm.power,
                    pm.baseline_draws,
                    pm.candidate_draws,
                )
            )
            more = f"; about {needed} {v.unit}s would bring that under" if needed else " over"
            warnings.append(
                f"underpowered: with {pm.n} {v.unit}s and a flip rate of {_pct(pm.flip_rate)}%, "
                f"this suite detects only drops of {_pct(mde)} points or more "
                f"({_pct(pm.power)}% power at its alpha share {paired_level:.3g}){more} the "
                f"{_pct(pm.tolerance)}-point tolerance"
            )
    bound = v.drop_bound
    said = (
        f"the data rule out drops above {_pct(bound)} points ({v.bound_method}, one-sided "
        f"{_pct(1 - v.alpha)}%)"
        if bound is not None
        else None
    )
    kind: VerdictKind
    if v.rule_failures or (failed and not v.mismatch):
        kind, reasons = "fail", v.rule_failures + failed + v.notes
    elif v.mismatch or v.blockers:
        kind, reasons = "inconclusive", v.mismatch + v.blockers
        if failed:
            reasons.append(
                "the tests found the candidate worse, but runs made with another model or "
                "scorer cannot tell the prompt's effect apart: make a fresh baseline"
            )
    elif bound is not None and bound < v.tolerance:
        kind = "pass"
        reasons = [
            f"not worse: {said}, within the {_pct(v.tolerance)}-point tolerance; no "
            f"significant drop (p = {v.p_value:.2g})"
        ]
    else:
        kind = "inconclusive"
        decide_by = (
            f"; about {v.cases_to_decide} cases at the observed rates would rule it out"
            if v.cases_to_decide
            else _what_would_show_it(v, level.get("paired", v.alpha))
            if bound is not None and v.difference is not None and -v.difference.mean >= v.tolerance
            else "; the spread between scenario groups holds the bound up: more groups, not more "
            "cases of the same groups, would narrow it"
            if v.bound_method is not None and "cluster" in v.bound_method
            else ""
        )
        reasons = [
            f"not shown to be worse, nor within the {_pct(v.tolerance)}-point tolerance: "
            f"{said}, not the tolerance (p = {v.p_value:.2g} for a drop){decide_by}"
        ]
    return v.model_copy(
        update={
            "kind": kind,
            "reasons": reasons,
            "routes": routes,
            "family_tests": family,
            "warnings": warnings,
            "mde": mde,
            "cases_needed": needed,
        }
    )


def _what_would_show_it(v: Verdict, level: float) -> str:
    """What would decide a verdict whose observed drop is at or over the tolerance but not
    significant: how many units would show a drop that size, and, over groups, what the cases
    tested one by one say."""
    assert v.difference is not None
    drop = min(1.0, -v.difference.mean)
    said = (
        f"; what would decide it: the observed drop of {_pct(drop)} points is not significant "
        f"over {v.n_tested} {v.unit}s"
    )
    pm = v.power_model
    if pm is not None and drop > 0.0 and pm.flip_rate < 0.5:
        needed = pm.counted_for(
            _units_for(drop, pm.flip_rate, level, pm.power, pm.baseline_draws, pm.candidate_draws)
        )
        if needed < CASES_CAP:
            said += (
                f"; about {needed} {v.unit}s would show a drop this size "
                f"{_pct(pm.power)}% of the time"
            )
    if v.unit == "group" and v.case_level_p is not None:
        said += (
            f"; if the scenario groups are labels only, gate.unit: case tests the cases one by "
            f"one (p = {v.case_level_p:.2g} here)"
        )
    return said


class SuiteVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str
    verdict: Verdict


class PullRequestVerdict(BaseModel):
    """One decision for a pull request: every suite's fail routes share one familywise alpha."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: VerdictKind
    alpha: float
    tests: int
    suites: list[SuiteVerdict]

    def line(self) -> str:
        counts = {k: sum(1 for s in self.suites if s.verdict.kind == k) for k in _ORDER}
        parts = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        return (
            f"pull request: {self.kind.upper()} ({len(self.suites)} suites: {parts}; "
            f"{self.tests} tests share alpha {self.alpha:g})"
        )


_ORDER: tuple[VerdictKind, ...] = ("fail", "inconclusive", "pass")


def decide_pull_request(parts: Sequence[tuple[str, Verdict]]) -> PullRequestVerdict:
    """Re-settle every suite's verdict with one familywise alpha over all suites and routes.

    Each suite gets an equal share of alpha, split among its routes as in :func:`decide`
    (weighted Holm: a suite whose routes all fail to reject passes its share on). The alpha is
    the smallest of the suites' alphas, and a suite that set a larger one has its pass bound
    computed again at it, so the fail routes and the bounds use one alpha. A pass needs every
    suite to rule out its drop: an intersection-union test, level alpha without adjustment. The pull request fails when any
    suite fails, else is inconclusive when any suite is, else passes.
    """
    if not parts:
        raise ValueError("a pull request verdict needs at least one suite")
    alpha = min(v.alpha for _, v in parts)
    share = 1.0 / max(1, sum(1 for _, v in parts if v.routes))
    family = [(i, r) for i, (_, v) in enumerate(parts) for r in v.routes]
    weights = [r.weight * share for _, r in family]
    adjusted = weighted_holm([r.p_value for _, r in family], weights) if family else []
    by_suite: dict[int, list[float]] = defaultdict(list)
    for (i, _), adj in zip(family, adjusted, strict=True):
        by_suite[i].append(adj)
    suites = []
    for i, (name, v) in enumerate(parts):
        # One alpha for the whole pull request: the pass bound too, not the suite's own.
        again = v.rebound(alpha) if v.rebound is not None and v.alpha != alpha else {}
        settled = _settle(
            v.model_copy(update={"alpha": alpha, **again}),
            [r.weight * share for r in v.routes],
            adjusted=by_suite[i],
            family=len(family),
        )
        suites.append(SuiteVerdict(suite=name, verdict=settled))
    kinds = {s.verdict.kind for s in suites}
    kind = next(k for k in _ORDER if k in kinds)
    return PullRequestVerdict(kind=kind, alpha=alpha, tests=len(family), suites=suites)


def sequential_threshold(policy: GatePolicy, others: int) -> float:
    """The e-value at which a monitored run stops with a certain fail.

    The paired test's alpha share ``alpha * w`` is split in two: half for the e-value watched
    during the run, half for the final test, so the paired route's p-value
    ``2 min(p_final, 1 / max E)`` is at most ``alpha * w`` once ``E >= 2 / (alpha * w)``, which
    weighted Holm rejects at its first step whatever the other routes say.
    """
    w_paired, _ = route_weights(policy, others)
    return 2.0 / (policy.alpha * w_paired)


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


class SequentialMonitor:
    """Watches candidate scores arrive and says when a fail verdict is already certain.

    It pairs each case's first candidate draw with the baseline's first repeat (same id and
    content, dev split) and keeps the broken / fixed counts; the run may stop once the mixture
    e-value reaches :func:`sequential_threshold`, which is anytime-valid (see
    stats.sequential_e_value). Outcomes are fed to the test in case-file order, not in the
    order calls complete (which can depend on the outcome: a refusal returns faster): an
    early completion waits in a buffer until every case before it has arrived. A case is left
    out as unstable only when it flipped between baseline repeats the comparison does not use.
    """

    def __init__(self, baseline: Run, case_hashes: dict[str, str], policy: GatePolicy) -> None:
        self.baseline: dict[str, float] = {}
        categories = set()
        for c in baseline.cases:
            if c.split != "dev" or c.error is not None or case_hashes.get(c.id) != c.hash:
                continue
            categories.add(c.category or "(none)")
            held = {_passed(o) for o in c.outcomes[1:]}
            if policy.exclude_unstable and len(held) > 1:
                continue
            self.baseline[c.id] = c.outcomes[0].score or 0.0
        others = 1 + len(categories & set(policy.critical_categories))
        others += policy.noise_check == "fail"
        self.threshold = sequential_threshold(policy, others)
        self.order = list(case_hashes)
        self.arrived: dict[str, float | None] = {}
        self.next = 0
        self.broken = 0
        self.fixed = 0
        self.e_max = 1.0

    def observe(self, case_id: str, score: float | None, repeat: int = 0) -> bool:
        if repeat != 0 or case_id in self.arrived:
            return self.e_max >= self.threshold
        self.arrived[case_id] = score
        while self.next < len(self.order) and self.order[self.next] in self.arrived:
            ready = self.order[self.next]
            self.next += 1
            base = self.baseline.get(ready)
            value = self.arrived[ready]
            if base is None or value is None:
                continue
            if value < base:
                self.broken += 1
            elif value > base:
                self.fixed += 1
            else:
                continue
            self.e_max = max(self.e_max, sequential_e_value(self.broken, self.fixed))
        return self.e_max >= self.threshold


def _category_tests(
    pairs: Sequence[_Pair], policy: GatePolicy, unit: Literal["case", "group"]
) -> list[CategoryTest]:
    by_cat: dict[str, list[_Pair]] = defaultdict(list)
    for pair in pairs:
        by_cat[pair.cand.category or "(none)"].append(pair)
    names = sorted(by_cat)
    raw = []
    for name in names:
        rows = by_cat[name]
        b = sum(1 for p in rows if p.diff < 0)
        c = sum(1 for p in rows if p.diff > 0)
        raw.append((b, c, _binary_p(rows, "score", policy, unit)))
    adjusted = holm_adjust([p for _, _, p in raw]) if raw else []
    critical = set(policy.critical_categories)
    return [
        CategoryTest(
            category=name,
            n=len(by_cat[name]),
            baseline=_rate([p.base_score for p in by_cat[name]]),
            candidate=_rate([p.cand_score for p in by_cat[name]]),
            broken=b,
            fixed=c,
            p_value=p,
            p_holm=adj,
            critical=name in critical,
        )
        for name, (b, c, p), adj in zip(names, raw, adjusted, strict=True)
    ]
