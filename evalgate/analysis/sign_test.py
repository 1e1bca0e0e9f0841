"""The sign test on broken and fixed cases, exact, and its power.

Vocabulary, for a candidate prompt compared case by case with a baseline:

* *broken* (``b``): cases the baseline passed and the candidate fails;
* *fixed* (``c``): cases the baseline failed and the candidate passes;
* *flip rate* (``f``): the share of cases whose pass/fail changes between two runs of the *same*
  prompt, i.e. the noise floor of the model under test.

Under H0 (the change does nothing) each changed case is broken or fixed with probability 1/2
whatever the case, so ``b`` given ``b + c`` is ``Bin(b + c, 1/2)`` and every p-value here is
an exact binomial tail (analysis.distributions, plain Python).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist, fmean

from evalgate.analysis.checks import P_SLACK, check_count, check_probability
from evalgate.analysis.distributions import binom_pmf, binom_sf
from evalgate.analysis.search import least_drop, least_n


def sign_test_two_sided(fixed: int, broken: int) -> float:
    """Exact two-sided binomial sign test on the changed cases.

    Under H0 (the change does nothing) each changed case is equally likely to be fixed or broken,
    so ``fixed ~ Bin(fixed + broken, 1/2)``; the p-value is
    ``scipy.stats.binomtest(k, fixed + broken, 0.5, alternative="two-sided").pvalue``. At
    p = 1/2 this is ``min(1, 2 * P(X <= min(fixed, broken)))``. No changed cases: ``1.0``.
    """
    check_count("fixed", fixed)
    check_count("broken", broken)
    m = fixed + broken
    if m == 0:
        return 1.0
    # Passing the smaller count makes the result exactly symmetric in the two arguments.
    k = min(fixed, broken)
    # At p = 1/2 the two tails are mirror images: P(X <= k) = P(X >= m - k).
    return min(1.0, 2.0 * binom_sf(m - k - 1, m, 0.5))


def sign_test_worse(broken: int, fixed: int, mid_p: bool = False) -> float:
    """One-sided exact McNemar test that the candidate is worse than the baseline.

    With ``X ~ Bin(b + c, 1/2)`` (b = broken, c = fixed), ``p = P(X >= b)``; the mid-p variant
    is ``P(X > b) + P(X = b) / 2`` (Lancaster 1961; Fagerland, Lydersen & Laake 2013, "The
    McNemar test for binary matched-pairs data: mid-p and asymptotic are better than exact
    conditional", BMC Med Res Methodol 13:91). ``b + c == 0``: ``1.0``.
    """
    check_count("broken", broken)
    check_count("fixed", fixed)
    m = broken + fixed
    if m == 0:
        return 1.0
    if mid_p:
        p = binom_sf(broken, m, 0.5) + 0.5 * binom_pmf(broken, m, 0.5)
    else:
        p = binom_sf(broken - 1, m, 0.5)
    return float(min(1.0, max(0.0, p)))


def broke_more_than_noise(broken: int, flips: int, repeats: int) -> float:
    """P-value that the candidate broke more cases than run-to-run noise explains.

    ``p = P(Bin(b + F, 1/(1 + R)) >= b)`` with ``b = broken`` and ``F`` the cases that flipped
    over ``R`` repeats of the baseline. This is the conditional test for comparing two Poisson
    counts (Przyborowski & Wilenski 1940): given ``b + F``, ``b ~ Bin(b + F, λ_b / (λ_b + λ_F))``.

    Under H0 the candidate is the baseline plus noise. A case that passes with probability π is
    broken (baseline pass, candidate fail) with probability π(1 - π), and flips somewhere in R
    repeats with probability 1 - π^R - (1 - π)^R, which is R·π(1 - π) when π is near 0 or 1
    and exactly 2·π(1 - π) for R = 2; so λ_F ≈ R·λ_b and the share is ``1/(1 + R)``. (The
    share ``1/(1 + 2R)`` first specified assumed twice as many flips; in simulation at f = 0.10
    it warned on 56-61% of unchanged prompts.) ``broken == 0``: ``1.0``.
    """
    check_count("broken", broken)
    check_count("flips", flips)
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats!r}")
    if broken == 0:
        return 1.0
    share = 1.0 / (1.0 + repeats)
    return float(min(1.0, max(0.0, binom_sf(broken - 1, broken + flips, share))))


def flip_rate(outcomes: Sequence[Sequence[bool]]) -> float:
    """Share of cases whose pass/fail differs between two runs of the same prompt.

    ``outcomes[case][repeat]``: the chance that two repeats of a case, drawn at random, differ,
    averaged over the cases. A case with ``k`` passes out of ``R`` differs in ``k(R - k)`` of its
    ``R(R - 1)/2`` pairs of repeats. With every case repeated R times this is the average over
    the pairs of repeats of the share of cases that differ, ``sum k(R - k) / (cases R(R-1)/2)``.
    Cases may have unequal repeats (a merged or edited run): one with fewer than two says
    nothing of its noise and is left out. No cases: ``0.0``; none with two repeats: ValueError.
    """
    if len(outcomes) == 0:
        return 0.0
    rates = []
    for row in outcomes:
        r = len(row)
        if r >= 2:
            k = sum(bool(x) for x in row)
            rates.append(k * (r - k) / (r * (r - 1) / 2.0))
    if not rates:
        raise ValueError("flip_rate needs at least 2 repeats of some case")
    return fmean(rates)


def _critical_broken(m: int, alpha: float, start: int | None = None) -> int:
    """Smallest ``b`` with ``P(Bin(m, 1/2) >= b) <= alpha`` (``m + 1``: never), searched from
    ``start`` (the answer for a smaller ``m``, or the normal approximation's).

    Rejection is non-strict (``p <= alpha``), the same rule as comparing
    :func:`sign_test_worse` with alpha. For alpha = 0.05 strict and non-strict agree, because a
    one-sided sign-test p-value is a multiple of ``2**-m`` and ``0.05 * 2**m`` is never an
    integer.
    """
    limit = alpha * (1.0 + P_SLACK)
    if start is None:
        start = math.floor(m / 2.0 + NormalDist().inv_cdf(1.0 - alpha) * math.sqrt(m) / 2.0)
    k = min(max(start, 0), m + 1)
    while k > 0 and binom_sf(k - 2, m, 0.5) <= limit:
        k -= 1
    while k <= m and binom_sf(k - 1, m, 0.5) > limit:
        k += 1
    return k


def sign_test_power(n: int, flip: float, drop: float, alpha: float) -> float:
    """Exact power of the one-sided sign test (:func:`minimum_detectable_effect` model)."""
    changed = flip + drop
    if changed <= 0.0:
        # No case can change, so b = c = 0 and the p-value is 1: never rejects for alpha < 1.
        return 0.0
    changed = min(changed, 1.0)
    p_broken = min(1.0, (flip / 2.0 + drop) / changed)
    mean, sd = n * changed, math.sqrt(n * changed * (1.0 - changed))
    # Beyond 10 sd + 40 from its mean a binomial's tails hold less than 1e-20 (Chernoff).
    lo = max(0, math.floor(mean - 10.0 * sd - 40.0))
    hi = min(n, math.ceil(mean + 10.0 * sd + 40.0))
    limit = alpha * (1.0 + P_SLACK)
    total = 0.0
    k = _critical_broken(lo, alpha)
    tail, half = binom_sf(k - 1, lo, p_broken), binom_sf(k - 1, lo, 0.5)
    # P(M = m) by its ratio to P(M = m - 1), from an exact mass at lo and every 256 steps.
    ratio = changed / (1.0 - changed) if changed < 1.0 else math.inf
    weight = 0.0
    for m in range(lo, hi + 1):
        if m == lo or m % 256 == 0 or not 0.0 < weight < math.inf or math.isinf(ratio):
            weight = binom_pmf(m, n, changed)
        else:
            weight *= (n - m + 1) / m * ratio
        if m > lo:
            # One more changed case: P(Bin(m, q) >= k) = P(Bin(m - 1, q) >= k) + q P(= k - 1)
            # at both q = p_broken (the power) and q = 1/2 (the critical value), and k_crit(m)
            # never falls as m grows: each step is a few masses instead of two tails.
            tail += p_broken * binom_pmf(k - 1, m - 1, p_broken)
            half += 0.5 * binom_pmf(k - 1, m - 1, 0.5)
            while k <= m and half > limit:
                half -= binom_pmf(k, m, 0.5)
                tail -= binom_pmf(k, m, p_broken)
                k += 1
            if abs(half - limit) < 1e-9 * limit or m % 256 == 0:
                # Near the boundary, or now and then against rounding: exact tails.
                k = _critical_broken(m, alpha, k)
                tail, half = binom_sf(k - 1, m, p_broken), binom_sf(k - 1, m, 0.5)
        if weight > 0.0 and k <= m:
            total += weight * max(0.0, tail)
    return min(1.0, total)


def check_power_args(flip: float, alpha: float, power: float) -> None:
    check_probability("flip_rate", flip, open_low=False)
    check_probability("alpha", alpha)
    check_probability("power", power)


def minimum_detectable_effect(
    n: int, flip_rate: float, alpha: float = 0.05, power: float = 0.80
) -> float:
    """Smallest drop in pass rate that the one-sided exact sign test detects with ``power``.

    Model: each of ``n`` paired cases independently is broken with probability ``f/2 + d``,
    fixed with probability ``f/2`` and unchanged otherwise (a trinomial; ``f`` is the flip rate,
    so with ``d = 0`` the candidate is the baseline plus noise). The test rejects when
    ``P(Bin(b + c, 1/2) >= b) <= alpha`` (:func:`sign_test_worse`, non-strict; for alpha = 0.05
    strict gives the same answers, see :func:`_critical_broken`). Its power is computed exactly:

        power(d) = sum_m P(M = m) * P(B >= k_crit(m) | M = m)

    with ``M = b + c ~ Bin(n, f + d)``, ``B | M = m ~ Bin(m, (f/2 + d)/(f + d))`` and
    ``k_crit(m)`` the smallest ``b`` that rejects (Lachin 1992, "Power and sample size
    evaluation for the McNemar test with application to matched case-control studies", Stat Med
    11:1239-1251, computed exactly instead of by the normal approximation).

    ``power(d)`` is non-decreasing in ``d``: raising ``d`` only turns unchanged cases into broken
    ones, and one more broken case never raises the p-value. So a bracketing search on ``d``
    in ``[0, 1 - f]`` (:func:`least_drop`) finds the smallest ``d`` with ``power(d) >= power``;
    the result is an upper
    bound within ``MDE_TOLERANCE`` (1e-5) of it. Returns ``math.inf`` when even ``d = 1 - f``
    (every case that is not fixed by noise breaks) does not reach ``power``, e.g. ``n < 5`` at
    ``f = 0``, where no outcome gives p <= 0.05.

    Known answers (alpha 0.05, power 0.8): n=100, f=0 -> 0.066; n=30, f=0 -> 0.214;
    n=100, f=0.10 -> 0.121; n=300, f=0.10 -> 0.059; n=1000, f=0.05 -> 0.022.
    """
    check_count("n", n)
    check_power_args(flip_rate, alpha, power)
    return least_drop(lambda d: sign_test_power(n, flip_rate, d, alpha), 1.0 - flip_rate, power)


def cases_for_mde(target: float, flip_rate: float, alpha: float = 0.05, power: float = 0.80) -> int:
    """Smallest number of cases whose minimum detectable effect is at most ``target``.

    Because power is non-decreasing in the drop ``d``, "MDE(n) <= target" is the same as
    "power(n, target) >= power", which needs one power evaluation per ``n`` instead of a
    bisection. The search doubles ``n`` until it qualifies, then bisects, which assumes power is
    non-decreasing in ``n``. The discrete test does not guarantee that (one more case can be a
    fixed one), but a scan of every n <= 600 for f in {0, 0.02, 0.1, 0.3} and d in
    {0.03, 0.1, 0.2} found no decrease: averaging over M = b + c smooths the sawtooth away.
    Returns ``CASES_CAP`` (1,000,000) when even that many cases fall short.
    ``minimum_detectable_effect(result, ...)`` is then ``<= target + MDE_TOLERANCE``.
    """
    check_power_args(flip_rate, alpha, power)
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target must be in (0, 1], got {target!r}")
    # The largest possible drop is 1 - f; asking to detect more is asking to detect that.
    drop = min(target, 1.0 - flip_rate)

    def enough(n: int) -> bool:
        return sign_test_power(n, flip_rate, drop, alpha) >= power

    return least_n(enough, 0)
