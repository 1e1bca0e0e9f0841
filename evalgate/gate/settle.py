"""The familywise settlement: every fail route of a suite (and of every suite of a pull
request) at one alpha by weighted Holm, the pass bound at the level left, and what would
decide an inconclusive verdict."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from evalgate.analysis.margin import cases_to_rule_out, scored_difference, tango_upper_drop
from evalgate.analysis.multiplicity import weighted_holm
from evalgate.analysis.search import CASES_CAP
from evalgate.config.models import GatePolicy
from evalgate.gate.pairing import _Pair
from evalgate.gate.routes import _drop_bound, _mde, _units_for
from evalgate.gate.verdict import Verdict, VerdictKind, _pct, _rate


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
    difference = scored_difference(
        base_scores, cand_scores, groups if unit == "group" else None, binary
    )
    numbers: dict[str, object] = dict(
        candidate_accuracy=_rate(cand_scores),
        difference=difference,
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
            # The power model counts effective units (analysis.power): over groups, say so.
            counted = f"{pm.n} {v.unit}" + ("" if pm.n == 1 else "s")
            if v.unit == "group":
                counted += (
                    f" ({pm.effective_units:.0f} effective units, design effect "
                    f"{pm.design_effect:.2f})"
                )
            at = f"{_pct(pm.power)}% power at its alpha share {paired_level:.3g}"
            # An infinite MDE: not even every case the suite has breaking reaches that power.
            reach = (
                f"this suite detects no drop, however large, with {at}"
                if math.isinf(mde)
                else f"this suite detects only drops of {_pct(mde)} points or more ({at})"
            )
            warnings.append(
                f"underpowered: with {counted} and a flip rate of {_pct(pm.flip_rate)}%, "
                f"{reach}{more} the {_pct(pm.tolerance)}-point tolerance"
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
