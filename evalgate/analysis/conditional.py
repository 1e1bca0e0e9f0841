"""The exact conditional test over every repeat (1:R and K:R matched sets), and its power.

A case run R times on the baseline and K times on the candidate is a matched set; under H0
its R + K draws are exchangeable whatever its own pass rate, so given its total passes the
candidate's share is hypergeometric and the candidate's grand total has an exact null law, a
convolution computed here in plain Python. For R = K = 1 it is the sign test
(analysis.sign_test).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist, fmean, stdev

from evalgate.analysis.checks import check_count
from evalgate.analysis.distributions import binom_pmf, binom_sf, hypergeom_pmf, t_cdf
from evalgate.analysis.search import least_drop, least_n
from evalgate.analysis.sign_test import (
    cases_for_mde,
    check_power_args,
    minimum_detectable_effect,
    sign_test_power,
)

#: One case's draws: (baseline passes, baseline draws, candidate passes, candidate draws).
MatchedSet = tuple[int, int, int, int]


def _check_matched(case: MatchedSet) -> None:
    bp, r, cp, k = case
    if r < 1 or k < 1 or not 0 <= bp <= r or not 0 <= cp <= k:
        raise ValueError(f"a matched set needs 0 <= passes <= draws >= 1 on both sides, got {case}")


def convolve(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """The pmf of the sum of independent draws from ``a`` and ``b`` (both indexed from 0)."""
    out = [0.0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                out[i + j] += x * y
    return out


def power_of(pmf: Sequence[float], times: int) -> list[float]:
    """The pmf of the sum of ``times`` independent draws from ``pmf`` (repeated squaring)."""
    result = [1.0]
    square = list(pmf)
    while times:
        if times & 1:
            result = convolve(result, square)
        times >>= 1
        if times:
            square = convolve(square, square)
    return result


def conditional_null(cases: Sequence[MatchedSet]) -> tuple[list[float], int, int]:
    """The exact null distribution of the candidate's total passes, given every case's total.

    Returns ``(pmf, offset, observed)``: ``pmf[j]`` is ``P(T = offset + j)`` under H0 and
    ``observed`` is the candidate's total passes. See :func:`conditional_test_worse`. Cases of
    the same shape (draws on each side, total passes) share one law, so the convolution is over
    a few shapes, each raised to its count by repeated squaring, instead of case by case.
    """
    shapes: dict[tuple[int, int, int], int] = {}
    observed = 0
    offset = 0
    for case in cases:
        _check_matched(case)
        bp, r, cp, k = case
        observed += cp
        s = bp + cp
        low, high = max(0, s - r), min(s, k)
        if low == high:  # every draw passed or failed: the case carries no information
            offset += low
            continue
        shapes[(r, k, s)] = shapes.get((r, k, s), 0) + 1
    pmf = [1.0]
    for (r, k, s), count in sorted(shapes.items()):
        low, high = max(0, s - r), min(s, k)
        offset += low * count
        if k == 1:
            # One candidate draw: Bernoulli(s / (r + 1)), so the count's sum is binomial.
            part = [binom_pmf(j, count, s / (r + 1)) for j in range(count + 1)]
        else:
            one = [hypergeom_pmf(x, r + k, s, k) for x in range(low, high + 1)]
            part = power_of(one, count)
        pmf = convolve(pmf, part)
    return pmf, offset, observed


def conditional_test_worse(cases: Sequence[MatchedSet], mid_p: bool = False) -> float:
    """Exact one-sided conditional test that the candidate passes less often than the baseline.

    Each case is a matched set: R baseline draws and K candidate draws of the same case, scored
    pass/fail. Under H0 (the change does nothing) a case's R + K draws are exchangeable, whatever
    its own pass rate; so given its total passes ``s``, the candidate's passes are
    hypergeometric, ``X ~ Hyp(R + K, s, K)`` (for K = 1, Bernoulli ``s / (R + 1)``), independently
    across cases. The statistic is the candidate's total ``T = sum X``, whose exact null law is
    the convolution of those hypergeometrics (a Poisson-binomial for K = 1), and
    ``p = P(T <= t_observed)``; mid-p: ``P(T < t) + P(T = t) / 2``. This is the test for 1:R
    matched sets of Miettinen (1969, "Individual matching with multiple controls in the case of
    all-or-none responses", Biometrics 25:339-355), extended to K:R by conditioning on each
    set's total (Mantel & Haenszel 1959). For R = K = 1 it is the exact sign test. Cases whose
    draws all agree (s = 0 or s = R + K) have a fixed X and leave the p-value unchanged.
    No informative case: ``1.0``.
    """
    return lower_tail(*conditional_null(cases), mid_p=mid_p)


def lower_tail(pmf: Sequence[float], offset: int, observed: int, *, mid_p: bool = False) -> float:
    """``P(T <= observed)`` (mid-p: ``P(T < observed) + P(T = observed) / 2``) for a total
    ``T`` whose law is ``pmf`` from ``offset`` on; ``1.0`` when the law is one point (no
    informative case)."""
    if len(pmf) == 1:
        return 1.0
    j = observed - offset
    below = math.fsum(pmf[:j])
    at = pmf[j]
    return float(min(1.0, max(0.0, below + (0.5 * at if mid_p else at))))


def conditional_residuals(cases: Sequence[MatchedSet]) -> list[float]:
    """Per case, the candidate's passes minus their null expectation given the case's total.

    ``X - K s / (R + K)``: the score contributions of :func:`conditional_test_worse`. They sum
    to ``T - E0[T]`` and have mean zero under H0, case by case.
    """
    out = []
    for case in cases:
        _check_matched(case)
        bp, r, cp, k = case
        out.append(cp - k * (bp + cp) / (r + k))
    return out


def clustered_test_worse(totals: Sequence[float]) -> float:
    """One-sided cluster-level t test that the mean of per-cluster totals is below zero.

    ``totals`` holds one number per cluster (e.g. the sum over a scenario's cases of
    :func:`conditional_residuals`). Clusters are independent while cases inside one may be
    correlated, so the clusters are the units: ``t = mean / (sd / sqrt(C))`` on ``C - 1``
    degrees of freedom, ``p = P(t_{C-1} <= t)`` (the cluster-robust score test with the small-
    sample t reference of Cameron & Miller 2015, JHR 50:317, sec. VI). All totals zero: ``1.0``;
    fewer than two clusters: ``1.0`` (no spread can be estimated).
    """
    x = [float(v) for v in totals]
    c = len(x)
    if c < 2 or not any(v != 0.0 for v in x):
        return 1.0
    sd = stdev(x)
    mean = fmean(x)
    if sd == 0.0:
        return 0.0 if mean < 0 else 1.0
    t = mean / (sd / math.sqrt(c))
    return t_cdf(t, c - 1)


#: Half a pass: the mean shortfall of the exact test's whole-number critical value below the
#: normal approximation's (conditional_power).
LATTICE_CORRECTION = 0.5


#: Below this many expected noisy cases conditional_power sums over their count too; past it
#: the count is taken at its mean (its spread then moves the power by well under a point).
SUMMED_NOISY_CASES: float = 40
#: Mass of each binomial left out of conditional_power's sums (both tails together).
_WINDOW_TAIL = 1e-10


def _binom_window(n: int, p: float) -> tuple[int, list[float]]:
    """``(lo, pmf)``: the masses of ``Bin(n, p)`` at ``lo, lo + 1, ...`` covering all but
    about ``_WINDOW_TAIL`` of it, walked out from the mode by the ratio of neighbours."""
    if p <= 0.0 or n == 0:
        return 0, [1.0]
    if p >= 1.0:
        return n, [1.0]
    mode = min(n, math.floor((n + 1) * p))
    at = binom_pmf(mode, n, p)
    odds = p / (1.0 - p)
    up, down = [at], []
    k, mass = mode, at
    while k < n and mass > _WINDOW_TAIL * at:
        mass *= (n - k) / (k + 1) * odds
        k += 1
        up.append(mass)
    k, mass = mode, at
    while k > 0 and mass > _WINDOW_TAIL * at:
        mass *= k / (n - k + 1) / odds
        k -= 1
        down.append(mass)
    return mode - len(down), [*reversed(down), *up]


def conditional_power(
    n: int,
    flip_rate: float,
    drop: float,
    alpha: float = 0.05,
    baseline_draws: int = 1,
    candidate_draws: int = 1,
) -> float:
    """Power of :func:`conditional_test_worse` with R baseline and K candidate draws a case.

    For R = K = 1 the test is the sign test and its power is computed exactly (the trinomial of
    :func:`minimum_detectable_effect`); with no noise (f = 0) too, from the binomial count of
    broken cases. Otherwise under this model: a share ``u = 2f`` of cases is noisy with pass
    rate 1/2 on both sides (so two runs differ on a share ``f`` of cases), a share ``d`` passes
    every baseline draw and fails every candidate draw (a true drop of ``d``), the rest are
    settled. With ``N = R + K``, a noisy case's score ``X - K s / N`` has mean 0 and variance
    ``vn = K R / (4 N)`` under the null and the model alike (its draws are exchangeable); a
    broken one scores ``-K R / N`` with null variance ``vb = K^2 R^2 / (N^2 (N - 1))``. Given
    ``b`` broken and ``m`` noisy cases the test rejects with probability about
    ``Phi((b K R / N - z_alpha sqrt(m vn + b vb) - 1/2) / sqrt(m vn))`` (the noisy cases' sum
    is near normal, and with none the test rejects exactly when ``C(N, K)^-b <= alpha``); the
    power is that averaged exactly over ``b ~ Bin(n, d)``, and over ``m ~ Bin(n - b, u / (1 -
    d))`` while its mean is under ``SUMMED_NOISY_CASES`` (past it ``m`` is taken at its mean,
    within a quarter of a point of the full sum from 40 to 3,000 units). The candidate's total
    is a whole number, so the test's critical value is the normal one rounded down, half a pass
    below it on average: the ``1/2``. Counting the broken cases exactly is what matters: their
    count decides the test, and it is skewed; the closed form with both counts at their means,
    ``Phi((n |m| - z_alpha sqrt(n v0) - 1/2) / sqrt(n v1))``, was 4 to 6 points off at 40
    cases with two candidate draws and 4.7 points off the model at 400 cases with a flip rate
    of 0.5% (``python -m benchmarks.power`` prints both differences).
    benchmarks/gate_simulation.py --power-grid checks it against simulated pull requests.
    """
    check_count("n", n)
    r, k = baseline_draws, candidate_draws
    if r < 1 or k < 1:
        raise ValueError(f"draws must be >= 1, got {r} and {k}")
    if r == 1 and k == 1:
        return sign_test_power(n, flip_rate, drop, alpha)
    if n == 0:
        return 0.0
    big_n = r + k
    if flip_rate == 0.0:
        # No noise: only broken cases are informative, each with null probability
        # 1 / C(R + K, K) of the candidate failing every draw, so the test rejects once
        # B >= b* = the smallest b with C(R + K, K)^-b <= alpha; exactly, B ~ Bin(n, d).
        return binom_sf(_least_broken(big_n, k, alpha) - 1, n, min(1.0, drop))
    u = min(1.0, 2.0 * flip_rate)
    d = max(0.0, min(drop, 1.0 - u))
    z = NormalDist().inv_cdf(1.0 - alpha)
    shift = k * r / big_n
    vn = k * r / (4.0 * big_n)
    vb = (k * r) ** 2 / (big_n**2 * (big_n - 1))
    least = _least_broken(big_n, k, alpha)
    cdf = NormalDist().cdf

    def rejects(b: int, m: float) -> float:
        if m <= 0.0:
            return 1.0 if b >= least else 0.0
        spread = m * vn
        shortfall = b * shift - z * math.sqrt(spread + b * vb) - LATTICE_CORRECTION
        return cdf(shortfall / math.sqrt(spread))

    total = 0.0
    b_lo, b_mass = _binom_window(n, d)
    noisy_share = u / (1.0 - d) if d < 1.0 else 0.0
    for b, pb in enumerate(b_mass, start=b_lo):
        if (n - b) * noisy_share >= SUMMED_NOISY_CASES:
            total += pb * rejects(b, (n - b) * noisy_share)
            continue
        m_lo, m_mass = _binom_window(n - b, noisy_share)
        total += pb * math.fsum(pm * rejects(b, m) for m, pm in enumerate(m_mass, start=m_lo))
    return min(1.0, max(0.0, total))


def _least_broken(draws: int, candidate_draws: int, alpha: float) -> int:
    """The fewest broken cases (every baseline draw passes, every candidate draw fails) that
    alone reject: ``C(R + K, K)^-b <= alpha``."""
    return math.ceil(math.log(alpha) / -math.log(math.comb(draws, candidate_draws)) - 1e-12)


def conditional_mde(
    n: int,
    flip_rate: float,
    alpha: float = 0.05,
    power: float = 0.80,
    baseline_draws: int = 1,
    candidate_draws: int = 1,
) -> float:
    """Smallest drop :func:`conditional_test_worse` detects with ``power`` (see its power).

    R = K = 1: :func:`minimum_detectable_effect` (exact). Otherwise :func:`least_drop` on
    :func:`conditional_power`, which is increasing in the drop (more broken cases, each of
    which raises the rejection chance); ``inf`` when no drop reaches ``power``.
    """
    if baseline_draws == 1 and candidate_draws == 1:
        return minimum_detectable_effect(n, flip_rate, alpha, power)
    check_count("n", n)
    check_power_args(flip_rate, alpha, power)

    def reach(d: float) -> float:
        return conditional_power(n, flip_rate, d, alpha, baseline_draws, candidate_draws)

    return least_drop(reach, max(0.0, 1.0 - min(1.0, 2.0 * flip_rate)), power)


def conditional_cases_for(
    target: float,
    flip_rate: float,
    alpha: float = 0.05,
    power: float = 0.80,
    baseline_draws: int = 1,
    candidate_draws: int = 1,
) -> int:
    """Smallest n whose :func:`conditional_mde` is at most ``target`` (``CASES_CAP`` if none)."""
    if baseline_draws == 1 and candidate_draws == 1:
        return cases_for_mde(target, flip_rate, alpha, power)
    check_power_args(flip_rate, alpha, power)

    def enough(n: int) -> bool:
        drop = min(target, 1.0 - min(1.0, 2.0 * flip_rate))
        return conditional_power(n, flip_rate, drop, alpha, baseline_draws, candidate_draws) >= (
            power
        )

    return least_n(enough, 0)
