"""The fail routes of one suite and the test each runs: the paired test (sign, conditional,
group-level or continuous), the noise check, format validity and the critical categories;
their shares of the suite's alpha, the upper bound on the drop, and the unit the power counts."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from statistics import fmean
from typing import Literal

from evalgate.analysis import power as power_model
from evalgate.analysis.conditional import conditional_test_worse
from evalgate.analysis.margin import upper_drop
from evalgate.analysis.multiplicity import holm_adjust
from evalgate.analysis.noise import NoiseFloor, detectable_drop
from evalgate.analysis.run_permutation import run_permutation_test_worse
from evalgate.analysis.sign_test import broke_more_than_noise, sign_test_worse
from evalgate.config.models import GatePolicy
from evalgate.gate.pairing import _blocks, _Pair, _passed
from evalgate.gate.verdict import (
    FEW_CLUSTERS,
    CategoryTest,
    RouteTest,
    _Findings,
    _rate,
)
from evalgate.runs.schema import Run

_mde = detectable_drop  # the one power model the noise floor states too


_units_for = power_model.units_for  # effective units; PowerModel.counted_for converts them


def route_weights(policy: GatePolicy, others: int) -> tuple[float, float]:
    """The paired test's share of a suite's alpha and each other fail route's share."""
    if others == 0:
        return 1.0, 0.0
    return policy.paired_alpha_share, (1.0 - policy.paired_alpha_share) / others


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
    groups = [p.group() for p in pairs] if unit == "group" else None
    return upper_drop(
        [p.base_score for p in pairs], [p.cand_score for p in pairs], groups, binary, alpha
    )


Route = tuple[str, float, str]


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
