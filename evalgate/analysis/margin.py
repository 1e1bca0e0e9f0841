"""Non-inferiority: one-sided upper confidence bounds on the drop in pass rate (Tango's score
bound for pass/fail pairs, a t bound for scores and groups), and the cases that would bring
the bound under a margin."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

from evalgate.analysis.checks import check_probability
from evalgate.analysis.distributions import t_ppf
from evalgate.analysis.intervals import PairedDifference, mean_and_se, paired_difference
from evalgate.analysis.search import CASES_CAP, least_n

# Tango's Z is a normal approximation to a lattice count: with m cases changed, b - c takes
# the values -m, -m + 2, ..., m, steps of 2. Shifting its numerator by half a step (1, the
# correction of McNemar's statistic, Edwards 1948) keeps the size of the pass decision at most
# alpha over n = 10-600 by exact enumeration, but with no room (4.99%); 1.25 leaves some
# (worst 4.89% at a 5-point margin, alpha 5%). benchmarks/margin_size.py prints the table,
# docs/statistics.md derives it.
TANGO_CORRECTION = 1.25


def tango_z(broken: float, fixed: float, n: int, drop: float, correction: float = 0.0) -> float:
    """Tango's score statistic for H0 "the paired drop in pass rate is ``drop``".

    For paired pass/fail with ``b`` cases broken (baseline pass, candidate fail) and ``c`` fixed
    out of ``n``, the drop is ``D = p10 - p01``. Tango (1998, "Equivalence test and confidence
    interval for the difference in proportions for the paired-sample design", Stat Med
    17:891-908)::

        Z(D0) = (b - c - n D0) / sqrt(n (2 p01~ + D0 (1 - D0)))

    with ``p01~`` the maximum-likelihood ``p01`` under ``p10 - p01 = D0``, the positive root of
    ``2n p² + (-b - c + (2n - b + c) D0) p - c D0 (1 - D0) = 0``. Negative Z: the data say the
    drop is below D0. At ``D0 = 0`` it is McNemar's ``(b - c) / sqrt(b + c)``. ``b`` and ``c``
    may be fractional (expected discordant counts over repeats, as the gate's bound uses them).
    ``correction`` is added to the numerator (a continuity correction towards not rejecting:
    :data:`TANGO_CORRECTION` for the bound the gate uses; 0 gives Tango's statistic itself).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    if broken < 0 or fixed < 0 or broken + fixed > n + 1e-9:
        raise ValueError(f"need 0 <= broken, fixed and broken + fixed <= n, got {broken}, {fixed}")
    if not -1.0 < drop < 1.0:
        raise ValueError(f"drop must be in (-1, 1), got {drop!r}")
    b, c = broken, fixed
    a = 2.0 * n
    bb = -b - c + (2.0 * n - b + c) * drop
    cc = -c * drop * (1.0 - drop)
    p01 = (-bb + math.sqrt(max(0.0, bb * bb - 4.0 * a * cc))) / (2.0 * a)
    var = n * (2.0 * p01 + drop * (1.0 - drop))
    num = b - c - n * drop + correction
    if var <= 0.0:
        return 0.0 if num == 0 else math.copysign(math.inf, num)
    return num / math.sqrt(var)


def tango_upper_drop(
    broken: float,
    fixed: float,
    n: int,
    alpha: float = 0.05,
    correction: float = TANGO_CORRECTION,
) -> float:
    """One-sided ``1 - alpha`` upper confidence bound on the drop, by inverting :func:`tango_z`.

    The bound is the drop ``D0`` at which ``Z(D0) = -z_{1-alpha}`` (Z with its numerator
    shifted by ``correction``): every larger drop is rejected at level alpha. Found by bisection
    (Z decreases in D0 past the observed drop) within 1e-9; capped at 1. Known: no case changed
    of n gives ``Z(D0) = (g - n D0) / sqrt(n D0 (1 - D0))`` with ``g`` the correction, which is
    ``-z`` at the larger root of ``(n + z²) D0² - (2g + z²) D0 + g² / n = 0`` (``z² / (n + z²)``
    uncorrected).
    """
    check_probability("alpha", alpha)
    z = NormalDist().inv_cdf(1.0 - alpha)
    lo = (broken - fixed) / n if n else -1.0
    lo = max(-1.0 + 1e-12, min(lo, 1.0 - 1e-12))
    hi = 1.0 - 1e-12
    if tango_z(broken, fixed, n, hi, correction) > -z:
        return 1.0
    if tango_z(broken, fixed, n, lo, correction) <= -z:
        return lo
    while hi - lo > 1e-9:
        mid = (lo + hi) / 2.0
        if tango_z(broken, fixed, n, mid, correction) <= -z:
            hi = mid
        else:
            lo = mid
    return hi


def t_upper_drop(
    diffs: Sequence[float], groups: Sequence[str] | None = None, alpha: float = 0.05
) -> float:
    """One-sided ``1 - alpha`` upper bound on the drop ``-mean(diffs)``, from a t interval.

    ``diffs`` are candidate - baseline per case. The SE is the ordinary one or, with
    ``groups``, cluster-robust (:func:`clustered_se`) on ``C - 1`` degrees of freedom (n - 1
    without groups). Clipped to [-1, 1]. Fewer than two units: ``1.0`` (nothing ruled out).
    """
    check_probability("alpha", alpha)
    n = len(diffs)
    units = len(set(groups)) if groups is not None else n
    if units < 2:
        return 1.0
    mean, se = mean_and_se(diffs, groups)
    if not math.isfinite(se):
        return 1.0
    q = t_ppf(1.0 - alpha, units - 1)
    return float(min(1.0, max(-1.0, -mean + q * se)))


def upper_drop(
    base: Sequence[float],
    cand: Sequence[float],
    groups: Sequence[str] | None,
    binary: bool,
    alpha: float,
    correction: float = TANGO_CORRECTION,
) -> tuple[float, str]:
    """The one-sided ``1 - alpha`` upper bound on the paired drop ``mean(base - cand)``, and
    the method's name: the bound the gate's pass needs (docs/statistics.md). ``base[i]`` and
    ``cand[i]`` are case i's scores (its pass rates over repeats, for pass/fail); ``groups``
    one label per case when cases of a group move together."""
    diffs = [float(c) - float(b) for b, c in zip(base, cand, strict=True)]
    if not binary:
        # A t bound alone passes two identical scores (SE 0). Scores in [0, 1] give d² <= |d|,
        # so Tango's bound on the summed losses and gains bounds the variance from above too:
        # the larger of the two is kept.
        losses = sum(max(0.0, -d) for d in diffs)
        gains = sum(max(0.0, d) for d in diffs)
        how = "cluster-robust t bound" if groups else "t bound"
        bound = max(
            t_upper_drop(diffs, groups, alpha),
            tango_upper_drop(losses, gains, len(diffs), alpha, correction),
        )
        return bound, f"the larger of the {how} and Tango's score bound on the score changes"
    # Expected discordant pairs between one random baseline and one random candidate draw.
    b = sum(x * (1.0 - y) for x, y in zip(base, cand, strict=True))
    c = sum(y * (1.0 - x) for x, y in zip(base, cand, strict=True))
    bound = tango_upper_drop(b, c, len(diffs), alpha, correction)
    if groups is None:
        return bound, "Tango's score bound"
    # Cases of one scenario move together: the bound must hold at the group level too.
    return max(bound, t_upper_drop(diffs, groups, alpha)), (
        "the larger of Tango's score bound and the cluster-robust t bound"
    )


def difference_interval(
    base: Sequence[float], cand: Sequence[float], groups: Sequence[str] | None, binary: bool
) -> tuple[float, float]:
    """The two-sided 95% interval on the paired difference ``mean(cand - base)``:
    :func:`upper_drop` on the drop and on the gain (the two sides' roles swapped), one-sided
    at 97.5% each, with no continuity shift: Tango's own score interval for pass/fail pairs
    (near its nominal coverage; the 1.25 shift the pass bound carries to keep its size under
    alpha would make a "95%" interval cover 99.6 to 100% at small discordant counts). Unlike
    mean ± q·SE it does not shrink to a point when nothing changed."""
    low = -upper_drop(base, cand, groups, binary, 0.025, 0.0)[0]
    high = upper_drop(cand, base, groups, binary, 0.025, 0.0)[0]
    return low, high


def scored_difference(
    base: Sequence[float], cand: Sequence[float], groups: Sequence[str] | None, binary: bool
) -> PairedDifference:
    """The paired difference as reports show it: mean and SE (cluster-robust with ``groups``)
    of :func:`intervals.paired_difference`, with :func:`difference_interval`'s ends."""
    low, high = difference_interval(base, cand, groups, binary)
    difference = paired_difference(list(cand), list(base), groups)
    return difference.model_copy(update={"low": low, "high": high})


def cases_to_rule_out(broken: float, fixed: float, n: int, margin: float, alpha: float) -> int:
    """Cases that would make :func:`tango_upper_drop` fall below ``margin`` at the same rates.

    Holding ``b / n`` and ``c / n`` fixed, Z(margin) is ``A sqrt(n') + g / sqrt(n' V)`` (A < 0
    and the per-case variance V depend on the rates only, g is the correction), which falls
    as n' grows: the least n' whose bound is under the margin is found by bisection. When the
    observed drop is already at or above the margin no number of cases will do: ``CASES_CAP``.
    """
    if broken - fixed >= n * margin:
        return CASES_CAP

    def enough(m: int) -> bool:
        return tango_upper_drop(broken * m / n, fixed * m / n, m, alpha) < margin

    return n if enough(n) else least_n(enough, n)
