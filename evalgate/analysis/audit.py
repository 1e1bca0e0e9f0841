"""Audit a searched prompt: the honest held-out number beside the fitted one. Pure.

A prompt chosen as the best of N candidates on the tuning cases carries a fitted score: the
selection itself inflates it by about ``SE x E[max of N standard normals]`` even when every
candidate is worth the same. The audit scores the candidate and the baseline once each on the
holdout, pairs them case by case, and says how much of the reported gain selection alone
explains. Holdout detail stays aggregate.
"""

from __future__ import annotations

import math
from statistics import fmean, pstdev

from pydantic import BaseModel, ConfigDict

from evalgate.analysis.best_of import simulate_best_of
from evalgate.analysis.continuous import paired_permutation_test
from evalgate.analysis.intervals import PairedDifference, standard_error
from evalgate.analysis.margin import scored_difference
from evalgate.analysis.sign_test import sign_test_two_sided
from evalgate.analysis.summary import Rate
from evalgate.errors import UserError
from evalgate.runs.schema import Run

CANNOT_SEE = [
    "grader preferences that the tuning and holdout cases share (a judge's or a labeller's "
    "taste is the same on both sides)",
    "cost and latency beyond the calls measured here",
    "whether a person can read and edit the candidate prompt",
]


class Selection(BaseModel):
    """What selection alone predicts for N candidates tried on the tuning cases."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    searched: int
    tuning_cases: int
    per_case_sd: float
    se: float
    expected_inflation: float
    inflation_p95: float
    reported_gain: float | None
    share_explained: float | None


class CallCost(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: float
    output_tokens: float
    latency_s: float


class AuditReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    candidate: str
    baseline: str
    fitted_score: float | None
    baseline_fitted_score: float | None
    candidate_holdout: Rate
    baseline_holdout: Rate
    gain: PairedDifference
    better: int
    worse: int
    p_value: float
    test: str
    significant: bool
    selection: Selection | None
    baseline_gap: float | None
    candidate_per_call: CallCost
    baseline_per_call: CallCost
    recommendation: str
    cannot_see: list[str]


def _per_call(run: Run) -> CallCost:
    outcomes = [o for c in run.cases for o in c.outcomes if o.error is None]
    if not outcomes:
        return CallCost(input_tokens=0, output_tokens=0, latency_s=0)
    return CallCost(
        input_tokens=fmean(
            o.input_tokens + o.cache_read_tokens + o.cache_write_tokens for o in outcomes
        ),
        output_tokens=fmean(o.output_tokens for o in outcomes),
        latency_s=fmean(o.latency_s for o in outcomes),
    )


def selection_inflation(
    searched: int,
    tuning_cases: int,
    per_case_sd: float,
    true_score: float,
    reported_gain: float | None,
    seed: int,
) -> Selection:
    """Expected inflation of the best of ``searched`` equal candidates, by seeded simulation."""
    mean_best, p95 = simulate_best_of(searched, true_score, tuning_cases, per_case_sd, seed)
    inflation = mean_best - true_score
    share = None
    if reported_gain is not None and reported_gain > 0:
        share = min(1.0, inflation / reported_gain)
    return Selection(
        searched=searched,
        tuning_cases=tuning_cases,
        per_case_sd=per_case_sd,
        se=standard_error(per_case_sd, tuning_cases),
        expected_inflation=inflation,
        inflation_p95=p95 - true_score,
        reported_gain=reported_gain,
        share_explained=share,
    )


def audit(
    candidate: Run,
    baseline: Run,
    *,
    fitted_score: float | None = None,
    baseline_fitted_score: float | None = None,
    searched: int | None = None,
    tuning_cases: int | None = None,
    per_case_sd: float | None = None,
    alpha: float = 0.05,
    seed: int = 0,
) -> AuditReport:
    """The audit of a candidate against a baseline, both scored on the same holdout cases."""
    base = {c.hash: c for c in baseline.cases if c.split == "holdout" and c.error is None}
    pairs = [
        (base[c.hash], c)
        for c in candidate.cases
        if c.split == "holdout" and c.error is None and c.hash in base
    ]
    if not pairs:
        # Every holdout case errored on one side, or the two were run on other cases: there is
        # no held-out gain to state (it was a ValueError from the mean of nothing).
        errored = sum(
            1
            for run in (baseline, candidate)
            for c in run.cases
            if c.split == "holdout" and c.error
        )
        raise UserError(
            "no holdout case was scored in both runs"
            + (f" ({errored} holdout cases errored)" if errored else ""),
            fix="re-run the audit once the model answers; the ledger has counted these reads",
        )
    cand_scores = [c.score or 0.0 for _, c in pairs]
    base_scores = [b.score or 0.0 for b, _ in pairs]
    groups = [c.group or c.id for _, c in pairs]
    # Clustered only when cases carry scenario groups (a case alone is its own group).
    clusters = groups if any(c.group for _, c in pairs) else None
    binary = all(s in (0.0, 1.0) for s in cand_scores + base_scores)
    # With the gate's score interval (it does not shrink to a point when nothing changed).
    gain = scored_difference(base_scores, cand_scores, clusters, binary)
    better = sum(1 for x, y in zip(base_scores, cand_scores, strict=True) if y > x)
    worse = sum(1 for x, y in zip(base_scores, cand_scores, strict=True) if y < x)
    if binary:
        p = sign_test_two_sided(better, worse)
        test = "exact two-sided sign test"
    else:
        diffs = [y - x for x, y in zip(base_scores, cand_scores, strict=True)]
        p = paired_permutation_test(diffs, seed=seed, alternative="two-sided")
        test = "two-sided paired sign-flip permutation test"
    significant = p < alpha and gain.mean > 0
    selection = None
    if searched is not None and tuning_cases is not None:
        sd = per_case_sd if per_case_sd is not None else (pstdev(cand_scores) if pairs else 0.5)
        reference = baseline_fitted_score
        if reference is None:
            reference = fmean(base_scores) if base_scores else None
        reported = None
        if fitted_score is not None and reference is not None:
            reported = fitted_score - reference
        true = fmean(cand_scores) if cand_scores else (fitted_score or 0.0)
        selection = selection_inflation(searched, tuning_cases, sd, true, reported, seed)
    baseline_gap = None
    if baseline_fitted_score is not None and base_scores:
        baseline_gap = baseline_fitted_score - fmean(base_scores)
    cand_cost, base_cost = _per_call(candidate), _per_call(baseline)
    recommendation = _recommend(
        significant, p < alpha and gain.mean < 0, gain, cand_cost, base_cost, candidate, baseline
    )
    return AuditReport(
        candidate=candidate.prompt.name,
        baseline=baseline.prompt.name,
        fitted_score=fitted_score,
        baseline_fitted_score=baseline_fitted_score,
        candidate_holdout=Rate.of(sum(cand_scores), len(cand_scores)),
        baseline_holdout=Rate.of(sum(base_scores), len(base_scores)),
        gain=gain,
        better=better,
        worse=worse,
        p_value=p,
        test=test,
        significant=significant,
        selection=selection,
        baseline_gap=baseline_gap,
        candidate_per_call=cand_cost,
        baseline_per_call=base_cost,
        recommendation=recommendation,
        cannot_see=CANNOT_SEE,
    )


def _recommend(
    significant: bool,
    worse: bool,
    gain: PairedDifference,
    cand: CallCost,
    base: CallCost,
    candidate: Run,
    baseline: Run,
) -> str:
    extra_in = cand.input_tokens - base.input_tokens
    # Rounded before the sign is given, so a difference under half a millisecond reads +0.
    extra_ms = round(1000 * (cand.latency_s - base.latency_s)) or 0
    cost_note = (
        f"The candidate sends {round(extra_in) or 0:+d} input tokens per call "
        f"({cand.input_tokens:.0f} vs {base.input_tokens:.0f}) and takes "
        f"{extra_ms:+d} ms per call."
    )
    if significant:
        return (
            f"Adopt {candidate.prompt.name}: it is better on the holdout by "
            f"{100 * gain.mean:.1f} points (95% CI {100 * gain.low:.1f} to "
            f"{100 * gain.high:.1f}). {cost_note}"
        )
    if worse:
        return (
            f"Keep {baseline.prompt.name}: {candidate.prompt.name} is worse on the holdout by "
            f"{-100 * gain.mean:.1f} points (95% CI {100 * gain.low:.1f} to "
            f"{100 * gain.high:.1f}). {cost_note}"
        )
    if math.isnan(gain.se):
        return f"Keep {baseline.prompt.name}: too few holdout cases to tell. {cost_note}"
    return (
        f"Keep {baseline.prompt.name}: the held-out gain of {100 * gain.mean:+.1f} points "
        f"(95% CI {100 * gain.low:.1f} to {100 * gain.high:.1f}) is not significant, and a tie "
        f"goes to the prompt a person can maintain. {cost_note}"
    )
