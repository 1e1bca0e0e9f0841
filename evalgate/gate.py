"""The gate's decision: paired comparison + policy -> verdict with reasons. Pure.

Pairs the candidate with the baseline case by case (dev split only; regression cases must
never fail and are judged alone; the holdout never enters a PR gate). Ties are dropped; the
default test is the one-sided exact sign test (McNemar) that the candidate is worse. The
baseline's repeats give the noise floor: unstable cases are shown apart, the minimum detectable
effect says what a pass can and cannot rule out, and when the data cannot decide the verdict
is "inconclusive" with the reason.

Why the comparison uses matched repeats. The sign test (and the sign-flip permutation test) is
exact when, for an unchanged prompt, a case's baseline and candidate scores are exchangeable.
Each side's score is therefore the mean over the same number of repeats, k = the smaller repeat
count (a baseline made with 2 repeats against a candidate run once compares one repeat with
one). Comparing the candidate's single reply with the mean of two baseline replies is not
exchangeable. Leaving out the cases that flipped between the very repeats being compared is
worse: it keeps exactly the cases whose baseline looked settled, so the candidate's ordinary
noise can only "break" the many settled passes and rarely "fix" a settled failure. With a flip
rate of 10% that fails about 98% of unchanged prompts (benchmarks/gate_simulation.py). So a case
is left out as unstable only when it flipped between baseline repeats that the comparison does
not use (k + 2 or more baseline repeats); the choice is then independent of the compared pair
and the test stays exact. Every unstable case is still listed in the noise floor.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import fmean
from typing import Literal

from pydantic import BaseModel, ConfigDict

from evalgate.config import GatePolicy
from evalgate.noise import NoiseFloor, measure_noise
from evalgate.runs import CaseResult, Outcome, Run
from evalgate.stats import (
    PairedDifference,
    broke_more_than_noise,
    cases_for_mde,
    holm_adjust,
    minimum_detectable_effect,
    paired_difference,
    paired_permutation_test,
    sequential_e_value,
    sign_test_worse,
    wilcoxon_pratt,
)
from evalgate.summary import Rate
from evalgate.trajectory import show_expected

VerdictKind = Literal["pass", "fail", "inconclusive"]


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


def _mean_score(outcomes: Sequence[Outcome]) -> float:
    # A plain sum: statistics.fmean costs more than the rest of the gate on 10,000 cases.
    return sum(o.score or 0.0 for o in outcomes) / len(outcomes)


def _text(value: object) -> str:
    return "(none)" if value is None else str(value)


@dataclass(frozen=True)
class _Pair:
    """A baseline and a candidate case compared over the same number of repeats, ``k``."""

    base: CaseResult
    cand: CaseResult
    k: int
    base_score: float
    cand_score: float
    base_format: bool
    cand_format: bool

    @classmethod
    def of(cls, base: CaseResult, cand: CaseResult) -> _Pair:
        k = min(len(base.outcomes), len(cand.outcomes))
        b, c = base.outcomes[:k], cand.outcomes[:k]
        return cls(
            base=base,
            cand=cand,
            k=k,
            base_score=_mean_score(b),
            cand_score=_mean_score(c),
            base_format=all(bool(o.format_ok) for o in b),
            cand_format=all(bool(o.format_ok) for o in c),
        )

    @property
    def diff(self) -> float:
        return self.cand_score - self.base_score

    def held_out_flipped(self) -> bool:
        """Whether the case flipped between baseline repeats that the comparison does not use."""
        held = {(o.score or 0.0) >= 0.5 for o in self.base.outcomes[self.k :]}
        return len(held) > 1


def _paired(base: CaseResult | None, cand: CaseResult, k: int | None = None) -> PairedCase:
    def score(case: CaseResult) -> float | None:
        if k is None or case.error is not None:
            return case.score
        return _mean_score(case.outcomes[:k])

    return PairedCase(
        id=cand.id,
        category=cand.category,
        group=cand.group,
        expected=_text(show_expected(cand.expected)),
        baseline_answer=_text(base.answer) if base else "",
        candidate_answer=_text(cand.answer),
        baseline_score=score(base) if base else None,
        candidate_score=score(cand),
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


# The power searches cost ~0.05-0.15 s each and their arguments repeat (one suite's n, a flip
# rate that is a count over n), so they are remembered.
@lru_cache(maxsize=4096)
def _mde(n: int, flip: float, alpha: float, power: float) -> float:
    if n == 0:
        return 1.0
    # Every case flipping (possible with one case and two repeats) leaves nothing to detect with.
    if flip >= 1.0:
        return math.inf
    return minimum_detectable_effect(n, flip, alpha, power)


@lru_cache(maxsize=4096)
def _cases_for(target: float, flip: float, alpha: float, power: float) -> int:
    return cases_for_mde(target, flip, alpha, power)


def _p_worse(diffs: Sequence[float], binary: bool, policy: GatePolicy) -> tuple[float, str]:
    """One-sided p-value that the candidate is worse, and the test's name."""
    broken = sum(1 for d in diffs if d < 0)
    fixed = sum(1 for d in diffs if d > 0)
    if binary:
        name = "one-sided exact sign test" + (" (mid-p)" if policy.mid_p else "")
        return sign_test_worse(broken, fixed, mid_p=policy.mid_p), name
    if policy.continuous_test == "wilcoxon":
        return wilcoxon_pratt(list(diffs), alternative="less"), "Wilcoxon signed-rank (Pratt)"
    return (
        paired_permutation_test(list(diffs), seed=policy.seed, alternative="less"),
        "paired sign-flip permutation test",
    )


def decide(baseline: Run | None, candidate: Run, policy: GatePolicy) -> Verdict:
    """The verdict for a candidate run against a baseline run, with every reason."""
    reasons: list[str] = []
    warnings: list[str] = []
    inconclusive: list[str] = []

    cand_cases = candidate.cases
    regression = [c for c in cand_cases if c.split == "regression"]
    regression_failures = [_paired(None, c) for c in regression if c.passed is False]
    errored = sorted(c.id for c in cand_cases if c.error is not None)
    dev = [c for c in cand_cases if c.split == "dev"]
    candidate_accuracy = _rate([c.score or 0.0 for c in dev if c.error is None])

    for failure in regression_failures:
        reasons.append(
            f"regression case {failure.id} failed (expected {failure.expected}, answered "
            f"{failure.candidate_answer}); regression cases must never fail"
        )
    if candidate.incomplete:
        inconclusive.append(
            f"the candidate run is incomplete: {candidate.errors} of {len(cand_cases)} cases "
            f"errored{' (interrupted)' if candidate.interrupted else ''}; re-run it"
        )

    def result(kind: VerdictKind, **numbers: object) -> Verdict:
        defaults: dict[str, object] = dict(
            test="none",
            unit=policy.unit,
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
            candidate_accuracy=candidate_accuracy,
            difference=None,
        )
        defaults.update(numbers)
        return Verdict(
            kind=kind,
            reasons=reasons
            if kind == "fail"
            else (inconclusive if kind == "inconclusive" else reasons),
            warnings=warnings,
            baseline_run=baseline.name if baseline else None,
            candidate_run=candidate.name,
            regression_failures=regression_failures,
            errored=errored,
            **defaults,
        )

    if baseline is None:
        if reasons:
            return result("fail")
        inconclusive.insert(0, "no usable baseline: there is nothing to compare against")
        return result("inconclusive")

    if (baseline.model.backend, baseline.model.name) != (
        candidate.model.backend,
        candidate.model.name,
    ):
        inconclusive.append(
            f"baseline and candidate used different models ({baseline.model.backend}/"
            f"{baseline.model.name} vs {candidate.model.backend}/{candidate.model.name})"
        )
    if baseline.scorer_sha256 != candidate.scorer_sha256:
        inconclusive.append(
            "baseline and candidate were scored differently (scorer config changed)"
        )
    if baseline.incomplete:
        inconclusive.append(
            f"the baseline run is incomplete ({baseline.errors} of {len(baseline.cases)} errored)"
        )

    base_by_id = {c.id: c for c in baseline.cases if c.split == "dev"}
    noise = measure_noise(baseline, alpha=policy.alpha, power=policy.power)
    if noise is None:
        warnings.append(
            "the baseline has no repeats, so the noise floor is not measured: unstable cases "
            "cannot be told apart and the MDE assumes a noise-free model; make baselines with "
            f"--repeats {max(2, policy.baseline_repeats)}"
        )

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
            pair = _Pair.of(base, cand)
            if policy.exclude_unstable and pair.held_out_flipped():
                unstable.append(_paired(base, cand, pair.k))
            else:
                # Flipped, but only where the held-out repeats cannot show it (too few of them).
                kept_unstable += base.flipped and len(base.outcomes) - pair.k < 2
                pairs.append(pair)
    if kept_unstable and policy.exclude_unstable:
        k = min((p.k for p in pairs), default=1)
        warnings.append(
            f"{kept_unstable} cases that flipped between the baseline's repeats stay in the test: "
            "leaving them out of a comparison with those same repeats would bias it towards "
            "'worse' (only the settled cases would be left, and noise can only break a settled "
            f"pass); a baseline with --repeats {k + 2} lets the gate leave them out"
        )
    only_baseline = sorted(set(base_by_id) - {c.id for c in dev})
    unpaired = len(only_candidate) + len(edited)
    if dev and unpaired / len(dev) > policy.max_unpaired_share:
        inconclusive.append(
            f"{unpaired} of {len(dev)} candidate cases have no unchanged counterpart in the "
            f"baseline (new or edited), over the {_pct(policy.max_unpaired_share)}% allowed: "
            "refresh the baseline"
        )
    if edited:
        warnings.append(f"{len(edited)} cases were edited since the baseline and are left out")

    binary = _is_binary([baseline, candidate])
    if policy.unit == "group":
        by_group: dict[str, list[float]] = defaultdict(list)
        for pair in pairs:
            by_group[pair.cand.group or pair.cand.id].append(pair.diff)
        diffs = [fmean(v) for v in by_group.values()]
        # Group means are fractions even for binary cases: only their sign matters here.
        p_value, test = _p_worse(diffs, True, policy)
        test = f"{test}, over {len(diffs)} scenario groups"
    else:
        diffs = [pair.diff for pair in pairs]
        p_value, test = _p_worse(diffs, binary, policy)
    broken = [_paired(p.base, p.cand, p.k) for p in pairs if p.diff < 0]
    fixed = [_paired(p.base, p.cand, p.k) for p in pairs if p.diff > 0]
    unchanged = len(pairs) - len(broken) - len(fixed)
    n_units = len(diffs)

    flip = noise.flip_rate if noise else 0.0
    # measure_noise already computed the MDE at its n with the same alpha and power.
    if noise is not None and noise.n == n_units:
        mde = noise.mde
    else:
        mde = _mde(n_units, flip, policy.alpha, policy.power)
    needed = None
    if mde > policy.tolerance:
        if flip < 1.0:
            needed = _cases_for(policy.tolerance, flip, policy.alpha, policy.power)
        more = f"; about {needed} {policy.unit}s would bring that under" if needed else " over"
        warnings.append(
            f"underpowered: with {n_units} {policy.unit}s and a flip rate of {_pct(flip)}%, this "
            f"suite detects only drops of {_pct(mde)} points or more (80% power){more} the "
            f"{_pct(policy.tolerance)}-point tolerance"
        )

    noise_p = None
    if noise is not None and policy.noise_check != "off":
        noise_p = broke_more_than_noise(len(broken), noise.flips, noise.repeats)
        if noise_p < policy.alpha:
            message = (
                f"the PR broke {len(broken)} cases, more than the baseline's noise predicts "
                f"({noise.flips} flips over {noise.repeats} repeats; p = {noise_p:.2g})"
            )
            (reasons if policy.noise_check == "fail" else warnings).append(message)

    if candidate.calls_saved:
        # Calls already in flight when the test decided finish and are scored, so the e-value
        # over every paired case is not the one that stopped the run (it may even be lower).
        e_value = sequential_e_value(len(broken), len(fixed))
        reasons.append(
            f"the sequential test's e-value reached 1/alpha = {1 / policy.alpha:g}, so the run "
            f"stopped early and saved {candidate.calls_saved} calls (e = {e_value:.3g} over "
            f"the {len(pairs)} paired cases scored)"
        )
    if p_value < policy.alpha:
        reasons.insert(
            0,
            f"significantly worse: broke {len(broken)}, fixed {len(fixed)} "
            f"({test}, p = {p_value:.2g} < {policy.alpha:g})",
        )

    fmt_broken = sum(1 for p in pairs if p.base_format and not p.cand_format)
    fmt_fixed = sum(1 for p in pairs if p.cand_format and not p.base_format)
    format_p = sign_test_worse(fmt_broken, fmt_fixed, mid_p=policy.mid_p)
    if format_p < policy.alpha:
        reasons.append(
            f"format validity dropped: {fmt_broken} replies lost the asked-for format, "
            f"{fmt_fixed} gained it (p = {format_p:.2g})"
        )

    categories = _category_tests(pairs, policy)
    for row in categories:
        if row.critical and row.p_holm < policy.alpha:
            reasons.append(
                f"critical category {row.category} regressed: broke {row.broken}, fixed "
                f"{row.fixed} (Holm-adjusted p = {row.p_holm:.2g})"
            )

    # The three numbers, over the same compared cases and repeats as the test, so that the
    # candidate's accuracy minus the baseline's is the paired difference.
    base_scores = [p.base_score for p in pairs]
    cand_scores = [p.cand_score for p in pairs]
    groups = [p.cand.group or p.cand.id for p in pairs]
    has_groups = any(p.cand.group for p in pairs)
    difference = (
        paired_difference(cand_scores, base_scores, groups if has_groups else None)
        if pairs
        else None
    )
    numbers: dict[str, object] = dict(
        test=test,
        n_tested=n_units,
        broken=broken,
        fixed=fixed,
        unchanged=unchanged,
        unstable=unstable,
        edited=edited,
        only_candidate=only_candidate,
        only_baseline=only_baseline,
        p_value=p_value,
        noise_p=noise_p,
        noise=noise,
        mde=mde,
        cases_needed=needed,
        format_broken=fmt_broken,
        format_fixed=fmt_fixed,
        format_p=format_p,
        categories=categories,
        baseline_accuracy=_rate(base_scores),
    )
    if pairs:
        numbers.update(candidate_accuracy=_rate(cand_scores), difference=difference)
    if not pairs and not reasons:
        inconclusive.append("no case could be paired with the baseline")
    if reasons:
        return result("fail", **numbers)
    if inconclusive:
        return result("inconclusive", **numbers)
    reasons.append(
        f"no significant drop (p = {p_value:.2g}); this suite detects drops of "
        f"{_pct(mde)} points or more with 80% power, so a smaller drop cannot be ruled out"
    )
    return result("pass", **numbers)


class SequentialMonitor:
    """Watches candidate scores arrive and says when a fail verdict is already certain.

    It pairs each scored case with the baseline (same id and content, dev split) and keeps the
    broken / fixed counts; the run may stop once the mixture e-value reaches 1/alpha, which is
    anytime-valid (see stats.sequential_e_value). The candidate is run once, so, as in
    ``decide`` (see the module docstring), it is compared with the baseline's first repeat,
    and a case is left out as unstable only when it flipped between the other repeats: leaving
    out every case that flipped would keep the settled passes, which noise can only break.
    """

    def __init__(self, baseline: Run, case_hashes: dict[str, str], policy: GatePolicy) -> None:
        self.threshold = 1.0 / policy.alpha
        self.baseline: dict[str, float] = {}
        for c in baseline.cases:
            if c.split != "dev" or c.error is not None or case_hashes.get(c.id) != c.hash:
                continue
            held = {(o.score or 0.0) >= 0.5 for o in c.outcomes[1:]}
            if policy.exclude_unstable and len(held) > 1:
                continue
            self.baseline[c.id] = c.outcomes[0].score or 0.0
        self.broken = 0
        self.fixed = 0

    def observe(self, case_id: str, score: float | None) -> bool:
        base = self.baseline.get(case_id)
        if base is None or score is None:
            return False
        if score < base:
            self.broken += 1
        elif score > base:
            self.fixed += 1
        return sequential_e_value(self.broken, self.fixed) >= self.threshold


def _category_tests(pairs: Sequence[_Pair], policy: GatePolicy) -> list[CategoryTest]:
    by_cat: dict[str, list[_Pair]] = defaultdict(list)
    for pair in pairs:
        by_cat[pair.cand.category or "(none)"].append(pair)
    names = sorted(by_cat)
    raw = []
    for name in names:
        rows = by_cat[name]
        b = sum(1 for p in rows if p.diff < 0)
        c = sum(1 for p in rows if p.diff > 0)
        raw.append((b, c, sign_test_worse(b, c, mid_p=policy.mid_p)))
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
