"""Known answers and properties of the analysis package's tests, intervals and power.

Every known answer says where its number comes from. Numbers are checked against arithmetic done
independently of the code under test (math.comb, closed forms, hand enumeration) or against the
issue text that specified them, never against a previous run of the same function.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from scipy import stats as scipy_stats

from evalgate.analysis.best_of import expected_max_normal, max_normal_quantile, simulate_best_of
from evalgate.analysis.conditional import (
    SUMMED_NOISY_CASES,
    clustered_test_worse,
    conditional_cases_for,
    conditional_mde,
    conditional_power,
    conditional_residuals,
    conditional_test_worse,
)
from evalgate.analysis.continuous import Alternative, paired_permutation_test, wilcoxon_pratt
from evalgate.analysis.intervals import (
    clustered_se,
    mean_and_se,
    paired_difference,
    standard_error,
    wilson_interval,
)
from evalgate.analysis.margin import (
    TANGO_CORRECTION,
    cases_to_rule_out,
    t_upper_drop,
    tango_upper_drop,
    tango_z,
)
from evalgate.analysis.multiplicity import holm_adjust, weighted_holm
from evalgate.analysis.search import CASES_CAP, MDE_TOLERANCE
from evalgate.analysis.sign_test import (
    _critical_broken,
    broke_more_than_noise,
    cases_for_mde,
    flip_rate,
    minimum_detectable_effect,
    sign_test_power,
    sign_test_two_sided,
    sign_test_worse,
)

Z975 = 1.959963984540054  # Phi^-1(0.975), standard normal tables

# Few examples and no deadline: the whole file should run in a few seconds, and scipy's first
# call on a busy CI runner can exceed hypothesis's default 200 ms deadline.
PROPERTY = settings(max_examples=40, deadline=None)


def binom_sf_by_hand(k: int, n: int, p: float) -> float:
    """P(Bin(n, p) >= k) summed term by term with math.comb."""
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(max(k, 0), n + 1))


def wilson_by_hand(x: float, n: int, z: float = Z975) -> tuple[float, float]:
    # Wilson (1927): (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)
    p = x / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    denominator = 1 + z * z / n
    return ((centre - half) / denominator, (centre + half) / denominator)


# ------------------------------------------------------------------------------------------
# wilson_interval
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "n", "expected"),
    [
        # Issue text, confirmed with the Wilson formula by hand: 0.5555..., 0.8582...
        (22, 30, (0.556, 0.858)),
        # Issue text, same formula: 0.5907..., 0.8821...
        (23, 30, (0.591, 0.882)),
    ],
)
def test_wilson_known_answers(successes: int, n: int, expected: tuple[float, float]) -> None:
    low, high = wilson_interval(successes, n)
    assert (round(low, 3), round(high, 3)) == expected
    assert (low, high) == pytest.approx(wilson_by_hand(successes, n), abs=1e-12)


def test_wilson_fractional_successes_and_empty() -> None:
    # Sum of mean scores, e.g. 10 cases averaging 0.75 -> 7.5 "successes".
    assert wilson_interval(7.5, 10) == pytest.approx(wilson_by_hand(7.5, 10), abs=1e-12)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    # 99%: z = 2.5758293035489 from normal tables.
    assert wilson_interval(22, 30, 0.99) == pytest.approx(
        wilson_by_hand(22, 30, 2.5758293035489), abs=1e-9
    )


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        wilson_interval(31, 30)
    with pytest.raises(ValueError):
        wilson_interval(-1, 30)
    with pytest.raises(ValueError):
        wilson_interval(3, 30, confidence=1.0)


@PROPERTY
@given(
    n=st.integers(min_value=1, max_value=10_000),
    share=st.floats(min_value=0.0, max_value=1.0),
    confidence=st.floats(min_value=0.5, max_value=0.999),
)
def test_wilson_contains_estimate_and_stays_in_unit_interval(
    n: int, share: float, confidence: float
) -> None:
    successes = share * n
    low, high = wilson_interval(successes, n, confidence)
    assert 0.0 <= low <= successes / n + 1e-12
    assert successes / n - 1e-12 <= high <= 1.0


# ------------------------------------------------------------------------------------------
# Sign tests
# ------------------------------------------------------------------------------------------


def test_sign_test_two_sided_known_answers() -> None:
    # 18 fixed, 0 broken: 2 * 0.5**18 = 7.63e-06.
    assert sign_test_two_sided(18, 0) == pytest.approx(2 * 0.5**18, rel=1e-9)
    assert sign_test_two_sided(18, 0) == pytest.approx(7.63e-06, rel=1e-3)
    # 5 and 0: 2 * 0.5**5 = 0.0625.
    assert sign_test_two_sided(5, 0) == pytest.approx(0.0625, rel=1e-12)
    # 7 vs 3 of 10: 2 * P(X <= 3) = 2 * (1 + 10 + 45 + 120) / 1024 = 0.34375.
    assert sign_test_two_sided(7, 3) == pytest.approx(352 / 1024, rel=1e-12)
    assert sign_test_two_sided(0, 0) == 1.0
    # 5 vs 5: the observation is the centre of the distribution.
    assert sign_test_two_sided(5, 5) == 1.0


@PROPERTY
@given(st.integers(0, 300), st.integers(0, 300))
def test_sign_test_two_sided_symmetric_and_a_probability(fixed: int, broken: int) -> None:
    p = sign_test_two_sided(fixed, broken)
    assert 0.0 <= p <= 1.0
    assert p == sign_test_two_sided(broken, fixed)


@PROPERTY
@given(st.integers(0, 40), st.integers(0, 40))
def test_sign_test_two_sided_matches_binomial_sum(fixed: int, broken: int) -> None:
    m = fixed + broken
    expected = (
        1.0 if m == 0 else min(1.0, 2 * (1 - binom_sf_by_hand(min(fixed, broken) + 1, m, 0.5)))
    )
    assert sign_test_two_sided(fixed, broken) == pytest.approx(expected, abs=1e-12)


def test_sign_test_worse_known_answers() -> None:
    # 5 broken, 0 fixed: P(X >= 5 | Bin(5, 1/2)) = 1/32.
    assert sign_test_worse(5, 0) == pytest.approx(1 / 32, rel=1e-12)
    # 3 broken, 1 fixed: P(X >= 3 | Bin(4, 1/2)) = (4 + 1)/16; mid-p = 1/16 + 4/16/2 = 3/16.
    assert sign_test_worse(3, 1) == pytest.approx(5 / 16, rel=1e-12)
    assert sign_test_worse(3, 1, mid_p=True) == pytest.approx(3 / 16, rel=1e-12)
    assert sign_test_worse(0, 0) == 1.0
    assert sign_test_worse(0, 0, mid_p=True) == 1.0
    # No broken cases: P(X >= 0) = 1.
    assert sign_test_worse(0, 7) == 1.0


@PROPERTY
@given(st.integers(0, 200), st.integers(0, 200))
def test_sign_test_worse_properties(broken: int, fixed: int) -> None:
    exact = sign_test_worse(broken, fixed)
    mid = sign_test_worse(broken, fixed, mid_p=True)
    assert 0.0 <= mid <= exact <= 1.0
    if broken <= fixed:
        # The candidate broke no more than it fixed: never evidence that it is worse.
        assert exact >= 0.5


@PROPERTY
@given(st.integers(0, 40), st.integers(0, 40))
def test_sign_test_worse_matches_binomial_sum(broken: int, fixed: int) -> None:
    m = broken + fixed
    expected = 1.0 if m == 0 else binom_sf_by_hand(broken, m, 0.5)
    assert sign_test_worse(broken, fixed) == pytest.approx(expected, abs=1e-12)


def test_broke_more_than_noise_known_answers() -> None:
    # b = 3, F = 2, R = 2: share 1/3, P(Bin(5, 1/3) >= 3) = (10*4 + 5*2 + 1) / 3**5 = 51/243.
    assert broke_more_than_noise(3, 2, 2) == pytest.approx(51 / 243, rel=1e-12)
    # b = 3, F = 2, R = 1: share 1/2, P(Bin(5, 1/2) >= 3) = (10 + 5 + 1) / 32 = 1/2.
    assert broke_more_than_noise(3, 2, 1) == pytest.approx(0.5, rel=1e-12)
    # b = 4, F = 0, R = 2: share 1/3, P(Bin(4, 1/3) >= 4) = 1/81.
    assert broke_more_than_noise(4, 0, 2) == pytest.approx(1 / 81, rel=1e-12)
    assert broke_more_than_noise(0, 10, 3) == 1.0
    with pytest.raises(ValueError):
        broke_more_than_noise(1, 1, 0)


@PROPERTY
@given(st.integers(0, 100), st.integers(0, 100), st.integers(1, 10))
def test_broke_more_than_noise_properties(broken: int, flips: int, repeats: int) -> None:
    p = broke_more_than_noise(broken, flips, repeats)
    assert 0.0 <= p <= 1.0
    # More baseline noise can only make the same number of breaks less surprising.
    assert broke_more_than_noise(broken, flips + 1, repeats) >= p - 1e-12


# ------------------------------------------------------------------------------------------
# flip_rate
# ------------------------------------------------------------------------------------------


def test_flip_rate_known_answers() -> None:
    # Two repeats: case 1 differs, case 2 does not -> 1/2.
    assert flip_rate([[True, False], [True, True]]) == 0.5
    # Three repeats of one case: pairs (0,1) same, (0,2) and (1,2) differ -> 2/3.
    assert flip_rate([[True, True, False]]) == pytest.approx(2 / 3)
    assert flip_rate([]) == 0.0
    assert flip_rate([[False, False, False], [True, True, True]]) == 0.0


def test_flip_rate_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError):
        flip_rate([[True], [False]])


def test_flip_rate_with_unequal_repeats_is_the_chance_two_repeats_of_a_case_differ() -> None:
    # A merged or edited run: "10" differs in its 1 pair (1), "101" in 2 of its 3 pairs (2/3),
    # "1" has no pair and says nothing: the mean over the two cases that can flip is 5/6.
    assert flip_rate([[True, False], [True, False, True], [True]]) == pytest.approx(5 / 6)


@PROPERTY
@given(
    st.integers(2, 5).flatmap(
        lambda r: st.lists(st.lists(st.booleans(), min_size=r, max_size=r), min_size=1, max_size=20)
    )
)
def test_flip_rate_matches_pairwise_definition(outcomes: list[list[bool]]) -> None:
    repeats = len(outcomes[0])
    pair_rates = [
        sum(row[i] != row[j] for row in outcomes) / len(outcomes)
        for i, j in itertools.combinations(range(repeats), 2)
    ]
    assert flip_rate(outcomes) == pytest.approx(sum(pair_rates) / len(pair_rates))


# ------------------------------------------------------------------------------------------
# Minimum detectable effect
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "f", "expected"),
    [
        # All five from the issue text (one-sided alpha 0.05, power 0.8), to +-0.002.
        (100, 0.0, 0.066),
        (100, 0.10, 0.121),
        (300, 0.10, 0.059),
        (1000, 0.05, 0.022),
        (30, 0.0, 0.214),
    ],
)
def test_mde_known_answers(n: int, f: float, expected: float) -> None:
    assert minimum_detectable_effect(n, f) == pytest.approx(expected, abs=0.002)


def test_mde_with_no_noise_is_a_binomial_tail() -> None:
    # With f = 0 nothing is fixed, so b = m and the test rejects iff b >= 5 (0.5**5 <= 0.05 <
    # 0.5**4): power(d) = P(Bin(n, d) >= 5). Check the answer straddles 0.8 by hand.
    d = minimum_detectable_effect(100, 0.0)
    assert binom_sf_by_hand(5, 100, d) >= 0.8
    assert binom_sf_by_hand(5, 100, d - 2 * MDE_TOLERANCE) < 0.8
    # n = 5: power is d**5, so the MDE is 0.8 ** (1/5) = 0.95635.
    assert minimum_detectable_effect(5, 0.0) == pytest.approx(0.8**0.2, abs=2e-5)
    # n = 4: even four broken out of four gives p = 1/16 > 0.05. Nothing is detectable.
    assert minimum_detectable_effect(4, 0.0) == math.inf


def test_mde_exact_power_matches_brute_force_trinomial() -> None:
    # Sum the trinomial over every (b, c) by hand for a small n and compare.
    n, f, d, alpha = 12, 0.2, 0.25, 0.05
    p_broken, p_fixed = f / 2 + d, f / 2
    power = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if binom_sf_by_hand(b, b + c, 0.5) <= alpha:
                u = n - b - c
                power += (
                    math.factorial(n)
                    / (math.factorial(b) * math.factorial(c) * math.factorial(u))
                    * p_broken**b
                    * p_fixed**c
                    * (1 - p_broken - p_fixed) ** u
                )
    assert sign_test_power(n, f, d, alpha) == pytest.approx(power, abs=1e-12)


@pytest.mark.parametrize(
    ("n", "f", "d"), [(300, 0.1, 0.05), (700, 0.02, 0.01), (2_000, 0.3, 0.02), (5_000, 0.0, 0.004)]
)
def test_sign_test_power_matches_scipy_over_large_suites(n: int, f: float, d: float) -> None:
    # Past 256 changed cases, and starting far above zero, the masses come by their ratios and
    # are made exact again every 256 steps: the sum must still be scipy's, written out as
    # sum over m of P(M = m) P(B >= k_crit(m) | m).
    alpha = 0.05
    changed, p_broken = f + d, (f / 2 + d) / (f + d)
    m = np.arange(n + 1)
    # k_crit(m): the least b with P(Bin(m, 1/2) >= b) <= alpha, one past scipy's isf (the
    # least x with P(X > x) <= alpha)
    k_crit = scipy_stats.binom.isf(alpha, m, 0.5) + 1
    expected = float(
        np.sum(scipy_stats.binom.pmf(m, n, changed) * scipy_stats.binom.sf(k_crit - 1, m, p_broken))
    )
    assert sign_test_power(n, f, d, alpha) == pytest.approx(expected, rel=1e-11, abs=1e-14)


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.1, 1 / 32, 1 / 1024])
def test_critical_broken_is_the_sign_test_rule(alpha: float) -> None:
    # k_crit(m) is the smallest b with sign_test_worse(b, m - b) <= alpha (m + 1 if none).
    expected = [
        next(
            (b for b in range(mm + 1) if binom_sf_by_hand(b, mm, 0.5) <= alpha * (1 + 1e-12)),
            mm + 1,
        )
        for mm in range(80)
    ]
    assert [_critical_broken(m, alpha) for m in range(80)] == expected


def test_mde_monotone_in_n_and_in_flip_rate() -> None:
    by_n = [minimum_detectable_effect(n, 0.1) for n in (30, 100, 300, 1000, 3000)]
    assert by_n == sorted(by_n, reverse=True)
    assert len(set(by_n)) == len(by_n)
    by_f = [minimum_detectable_effect(300, f) for f in (0.0, 0.02, 0.05, 0.1, 0.2, 0.4)]
    assert by_f == sorted(by_f)
    assert len(set(by_f)) == len(by_f)


def test_mde_for_ten_thousand_cases() -> None:
    # No timing asserted (a shared machine stretches it): the sum over changed cases is a few
    # masses a step (analysis.sign_test), which keeps this call a fraction of a second.
    d = minimum_detectable_effect(10_000, 0.1)
    # Normal approximation (Connor 1987, Biometrics 43:207): d ≈ (1.645 + 0.842) *
    # sqrt((f + d) / n), whose fixed point at f = 0.1, n = 10,000 is d = 0.0082.
    assert d == pytest.approx(0.0082, abs=0.0003)


def test_cases_for_mde() -> None:
    n = cases_for_mde(0.066, 0.0)
    assert minimum_detectable_effect(n, 0.0) <= 0.066 + MDE_TOLERANCE
    assert minimum_detectable_effect(n - 1, 0.0) > 0.066
    # The 300 cases at f = 0.10 detect 0.059, so about 300 are needed for 0.06.
    n = cases_for_mde(0.06, 0.10)
    assert 280 <= n <= 300
    assert minimum_detectable_effect(n, 0.10) <= 0.06 + MDE_TOLERANCE
    assert minimum_detectable_effect(n - 1, 0.10) > 0.06
    # 1e-4 at f = 0.1 needs about (2.49 / 1e-4)**2 * 0.1 = 6e7 cases: beyond the cap.
    assert cases_for_mde(1e-4, 0.1) == CASES_CAP
    with pytest.raises(ValueError):
        cases_for_mde(0.0, 0.1)


# ------------------------------------------------------------------------------------------
# Holm
# ------------------------------------------------------------------------------------------


def test_holm_known_answer() -> None:
    # Sorted 0.01, 0.03, 0.04 -> 3*0.01, 2*0.03, max(1*0.04, 0.06) = 0.03, 0.06, 0.06.
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    # 4 * 0.5 = 2 is capped at 1.
    assert holm_adjust([0.5, 0.6, 0.9, 0.7]) == [1.0, 1.0, 1.0, 1.0]
    assert holm_adjust([]) == []
    with pytest.raises(ValueError):
        holm_adjust([0.5, 1.5])


@PROPERTY
@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=30))
def test_holm_properties(raw: list[float]) -> None:
    adjusted = holm_adjust(raw)
    assert len(adjusted) == len(raw)
    for p, a in zip(raw, adjusted, strict=True):
        assert p <= a <= 1.0
    for (p1, a1), (p2, a2) in itertools.combinations(zip(raw, adjusted, strict=True), 2):
        if p1 <= p2:
            assert a1 <= a2
        if p2 <= p1:
            assert a2 <= a1


# ------------------------------------------------------------------------------------------
# Permutation and Wilcoxon tests
# ------------------------------------------------------------------------------------------


def test_permutation_exact_matches_hand_enumeration() -> None:
    # diffs -1, -2, +0.5: the eight sums ±1 ±2 ±0.5 are
    # 3.5, 2.5, -0.5, -1.5, 1.5, 0.5, -2.5, -3.5; observed -2.5.
    diffs = [-1.0, -2.0, 0.5]
    assert paired_permutation_test(diffs, seed=0, alternative="less") == 2 / 8
    assert paired_permutation_test(diffs, seed=0, alternative="greater") == 7 / 8
    assert paired_permutation_test(diffs, seed=0, alternative="two-sided") == 4 / 8
    # Zeros do not move under a sign flip and change nothing.
    assert paired_permutation_test([0.0, *diffs, 0.0], seed=0) == 2 / 8
    assert paired_permutation_test([0.0, 0.0], seed=0) == 1.0
    assert paired_permutation_test([], seed=0) == 1.0


def test_permutation_counts_ties_despite_rounding() -> None:
    # 0.1 + 0.2 != 0.3 in floating point; the sign vector (+, +, -) sums to exactly 0 in
    # real arithmetic, as does the observed data, so both must count as ties.
    diffs = [0.1, 0.2, -0.3]
    # The eight sums of ±0.1 ±0.2 ±0.3: +++ .6, ++- 0, +-+ .2, +-- -.4, -++ .4, -+- -.2,
    # --+ 0, --- -.6; five are >= 0 and five are <= 0.
    assert paired_permutation_test(diffs, seed=0, alternative="greater") == 5 / 8
    assert paired_permutation_test(diffs, seed=0, alternative="less") == 5 / 8


@PROPERTY
@given(
    st.lists(st.integers(-5, 5).map(float), min_size=0, max_size=8),
    st.sampled_from(["less", "greater", "two-sided"]),
)
def test_permutation_exact_matches_brute_force(
    diffs: list[float], alternative: Alternative
) -> None:
    nonzero = [d for d in diffs if d != 0]
    if not nonzero:
        expected = 1.0
    else:
        observed = sum(diffs)
        sums = [
            sum(sign * abs(d) for sign, d in zip(signs, nonzero, strict=True))
            for signs in itertools.product((1, -1), repeat=len(nonzero))
        ]
        if alternative == "less":
            hits = sum(t <= observed for t in sums)
        elif alternative == "greater":
            hits = sum(t >= observed for t in sums)
        else:
            hits = sum(abs(t) >= abs(observed) for t in sums)
        expected = hits / len(sums)
    assert paired_permutation_test(diffs, seed=1, alternative=alternative) == expected


def test_permutation_monte_carlo_is_seeded() -> None:
    rng = np.random.default_rng(123)
    diffs = (rng.normal(-0.1, 1.0, size=40)).tolist()
    first = paired_permutation_test(diffs, seed=7, n_resamples=2000)
    assert first == paired_permutation_test(diffs, seed=7, n_resamples=2000)
    assert 0.0 < first <= 1.0
    # Every diff negative: only the observed signs reach the observed sum, and a random draw hits
    # them with chance 2**-40, so p = (1 + 0) / (1 + 2000).
    assert paired_permutation_test([-1.0] * 40, seed=3, n_resamples=2000) == 1 / 2001


def test_permutation_monte_carlo_agrees_with_exact() -> None:
    # 17 nonzero diffs: Monte Carlo path. Exact by enumerating 2**17 sign vectors here.
    diffs = np.array([-3, -2, -2, -1, -1, -1, -1, 1, 1, -4, 2, -1, -3, 1, -2, -1, 1], dtype=float)
    bits = (np.arange(2**17)[:, None] >> np.arange(17)) & 1
    exact = float(np.mean((1 - 2 * bits) @ np.abs(diffs) <= diffs.sum() + 1e-9))
    mc = paired_permutation_test(diffs.tolist(), seed=11, n_resamples=20_000)
    # Binomial SE of the estimate is sqrt(p(1-p)/20000) < 0.0036.
    assert mc == pytest.approx(exact, abs=0.015)


def test_wilcoxon_pratt_known_answers() -> None:
    # Five negative differences with distinct magnitudes: W+ = 0 is 1 of 2**5 sign patterns.
    assert wilcoxon_pratt([-1.0, -2.0, -3.0, -4.0, -5.0]) == pytest.approx(1 / 32)
    assert wilcoxon_pratt([0.0, 0.0, 0.0]) == 1.0
    assert wilcoxon_pratt([]) == 1.0
    # Twelve +1 and one -1: all ranks tie at 7, W+ = 7 * (number positive). Two-sided exact:
    # 2 * P(Bin(13, 1/2) >= 12) = 2 * (13 + 1) / 2**13 = 0.00341796875.
    start = time.perf_counter()
    assert wilcoxon_pratt([1.0] * 12 + [-1.0], alternative="two-sided") == 28 / 8192
    assert time.perf_counter() - start < 0.1


@pytest.mark.parametrize(
    "diffs",
    [
        [1.0, -1.0, 0.0, 2.0, 2.0, -3.0],  # ties and a zero: the exact permutation branch
        [0.0, 0.0, -1.0, -1.0, -2.0, 1.0, -3.0, -3.0],
        [-0.5, 1.5, -2.5, 3.5, -4.5],  # no ties: scipy's exact distribution
        [float(x) for x in range(-8, 12)],  # 20 values with a zero: normal approximation
    ],
)
@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
def test_wilcoxon_pratt_matches_scipy(diffs: list[float], alternative: Alternative) -> None:
    expected = scipy_stats.wilcoxon(diffs, zero_method="pratt", alternative=alternative).pvalue
    assert wilcoxon_pratt(diffs, alternative=alternative) == pytest.approx(expected, abs=1e-12)


@PROPERTY
@given(
    st.lists(st.integers(-3, 3).map(float), min_size=1, max_size=30),
    st.sampled_from(["less", "greater", "two-sided"]),
)
def test_wilcoxon_pratt_is_a_probability(diffs: list[float], alternative: Alternative) -> None:
    p = wilcoxon_pratt(diffs, alternative=alternative)
    assert 0.0 <= p <= 1.0


# ------------------------------------------------------------------------------------------
# Means, standard errors, paired differences
# ------------------------------------------------------------------------------------------


def test_standard_error_known_answers() -> None:
    # Issue text: per-case SD 0.33 on 200 cases gives SE 0.0233.
    assert standard_error(0.33, 200) == pytest.approx(0.0233, abs=5e-5)
    # 0.33 / sqrt(86) = 0.0356, the "SE 0.036 on 86 cases".
    assert standard_error(0.33, 86) == pytest.approx(0.0356, abs=5e-5)
    with pytest.raises(ValueError):
        standard_error(0.33, 0)


def test_mean_and_se_known_answer() -> None:
    # [1, 2, 3, 4]: mean 2.5, var_ddof1 = (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3,
    # SE = sqrt(5/3 / 4) = sqrt(5/12).
    mean, se = mean_and_se([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5
    assert se == pytest.approx(math.sqrt(5 / 12))
    mean, se = mean_and_se([0.7])
    assert mean == 0.7
    assert math.isnan(se)
    with pytest.raises(ValueError):
        mean_and_se([])


def test_clustered_se_known_answer() -> None:
    # Residuals -1.5, -0.5, 0.5, 1.5 in clusters {a, a, b, b}: cluster sums -2 and 2,
    # SE = sqrt(2/1 * (4 + 4)) / 4 = 1.0 (Miller 2024, clustered SE formula).
    assert clustered_se([-1.5, -0.5, 0.5, 1.5], ["a", "a", "b", "b"]) == pytest.approx(1.0)
    mean, se = mean_and_se([1.0, 2.0, 3.0, 4.0], groups=["a", "a", "b", "b"])
    assert mean == 2.5
    assert se == pytest.approx(1.0)
    # Interleaved clusters {a, b, a, b}: sums -1 and 1, SE = sqrt(2 * 2) / 4 = 0.5.
    assert clustered_se([-1.5, -0.5, 0.5, 1.5], ["a", "b", "a", "b"]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        clustered_se([1.0, 2.0], ["a"])


def test_clustered_se_with_one_cluster_falls_back_to_ordinary_se() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert mean_and_se(values, groups=["x"] * 4) == mean_and_se(values)
    assert math.isnan(clustered_se([0.0], ["x"]))


@PROPERTY
@given(st.lists(st.floats(min_value=-1.0, max_value=1.0), min_size=2, max_size=50))
def test_singleton_clusters_equal_the_ordinary_se(values: list[float]) -> None:
    # C = n: sqrt(n/(n-1) * sum r²) / n = sqrt(sum r² / (n(n-1))) = sqrt(var_ddof1 / n).
    mean, se = mean_and_se(values, groups=[str(i) for i in range(len(values))])
    assert se == pytest.approx(float(np.std(values, ddof=1)) / math.sqrt(len(values)), abs=1e-12)
    assert mean == pytest.approx(float(np.mean(values)))


def test_paired_difference_known_answer() -> None:
    # diffs 1, 0, 0, 1: mean 0.5, var_ddof1 = 4 * 0.25 / 3 = 1/3, SE = sqrt(1/12).
    result = paired_difference([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0])
    se = math.sqrt(1 / 12)
    assert result.n == 4
    assert result.mean == pytest.approx(0.5)
    assert result.se == pytest.approx(se)
    assert result.low == pytest.approx(0.5 - Z975 * se)
    # 0.5 + 1.96 * 0.289 = 1.066 is more than a difference of two scores in [0, 1] can be.
    assert result.high == 1.0
    with pytest.raises(ValidationError):
        result.mean = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        paired_difference([1.0], [1.0, 0.0])


def test_paired_difference_clustered_uses_t_with_clusters_minus_one_df() -> None:
    # diffs 0, .1, .2, .3, .4, .5 in clusters {a, a, b, b, c, c}: mean .25; residual sums per
    # cluster -.4, 0, .4; SE = sqrt(3/2 * .32) / 6 = 0.11547. t(0.975, 2 df) = 4.302653
    # (published t table), so the interval is .25 -+ 0.49683.
    cand = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    result = paired_difference(cand, [0.1] * 6, ["a", "a", "b", "b", "c", "c"])
    assert result.mean == pytest.approx(0.25)
    assert result.se == pytest.approx(math.sqrt(1.5 * 0.32) / 6)
    half = 4.302653 * math.sqrt(1.5 * 0.32) / 6
    assert (result.low, result.high) == pytest.approx((0.25 - half, 0.25 + half), abs=1e-6)


def test_expected_max_normal_known_answers() -> None:
    # Issue text: E[max of 400 standard normals] = 2.97.
    assert expected_max_normal(400) == pytest.approx(2.97, abs=0.01)
    # Closed forms (David & Nagaraja): n=2 -> 1/sqrt(pi), n=3 -> 3/(2 sqrt(pi)).
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-8)
    assert expected_max_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), abs=1e-8)
    assert expected_max_normal(1) == 0.0


def test_max_normal_quantile_known_answers() -> None:
    # Issue text: 95th percentile of the max of 400 standard normals = 3.66.
    assert max_normal_quantile(400, 0.95) == pytest.approx(3.66, abs=0.01)
    # n = 1 is the normal itself: Phi^-1(0.975) = 1.96.
    assert max_normal_quantile(1, 0.975) == pytest.approx(Z975, abs=1e-9)


def test_simulate_best_of_known_answers() -> None:
    # Issue text: 400 candidates worth 0.79, SE 0.0233 -> mean best 0.859, 95th pct 0.875.
    # Independent arithmetic: 0.79 + 0.0233 * 2.97 = 0.859, 0.79 + 0.0233 * 3.66 = 0.875.
    mean, p95 = simulate_best_of(400, 0.79, 200, 0.33, seed=2024)
    assert mean == pytest.approx(0.859, abs=0.002)
    assert p95 == pytest.approx(0.875, abs=0.002)
    assert simulate_best_of(400, 0.79, 200, 0.33, seed=2024) == (mean, p95)


# ------------------------------------------------------------------------------------------
# The exact conditional test over every repeat
# ------------------------------------------------------------------------------------------


def conditional_by_enumeration(cases: list[tuple[int, int, int, int]]) -> float:
    """P(T <= t_observed) by listing, for every case, each way of picking which K of its R + K
    draws are the candidate's (all equally likely when the draws are exchangeable), and
    multiplying the cases' laws out: the permutation definition, with no hypergeometric."""
    laws = []
    observed = 0
    for bp, r, cp, k in cases:
        draws = [1] * (bp + cp) + [0] * (r + k - bp - cp)
        picks = list(itertools.combinations(range(r + k), k))
        law: dict[int, float] = {}
        for pick in picks:
            x = sum(draws[i] for i in pick)
            law[x] = law.get(x, 0.0) + 1.0 / len(picks)
        laws.append(law)
        observed += cp
    total = 0.0
    for combo in itertools.product(*(law.items() for law in laws)):
        if sum(x for x, _ in combo) <= observed:
            total += math.prod(p for _, p in combo)
    return total


def test_conditional_test_known_answers_by_hand() -> None:
    # 1:2 sets. A case with 1 pass in its 3 draws: the candidate's draw passes with 1/3; with 2
    # passes, 2/3. Both candidate draws failed: p = P(X1 = 0) P(X2 = 0) = (2/3)(1/3) = 2/9.
    assert conditional_test_worse([(1, 2, 0, 1), (2, 2, 0, 1)]) == pytest.approx(2 / 9)
    # 2:2: 2 passes in 4 draws, both the candidate's failed: C(2,0) C(2,2) / C(4,2) = 1/6.
    assert conditional_test_worse([(2, 2, 0, 2)]) == pytest.approx(1 / 6)
    # Mid-p: P(T < t) + P(T = t)/2; here T = 0 is the smallest value: (1/6)/2.
    assert conditional_test_worse([(2, 2, 0, 2)], mid_p=True) == pytest.approx(1 / 12)
    # Settled cases (every draw alike) change nothing; none informative: 1.
    assert conditional_test_worse([(2, 2, 0, 2), (3, 3, 1, 1), (0, 3, 0, 1)]) == pytest.approx(
        1 / 6
    )
    assert conditional_test_worse([(3, 3, 1, 1), (0, 2, 0, 2)]) == 1.0
    assert conditional_test_worse([]) == 1.0


def test_conditional_test_is_the_sign_test_for_one_draw_a_side() -> None:
    # 1:1: a changed case has s = 1 and X ~ Bernoulli(1/2), so T counts the fixed ones.
    for broken, fixed in ((5, 0), (5, 2), (3, 9), (0, 4), (12, 11)):
        sets = [(1, 1, 0, 1)] * broken + [(0, 1, 1, 1)] * fixed + [(1, 1, 1, 1)] * 7
        assert conditional_test_worse(sets) == pytest.approx(sign_test_worse(broken, fixed))
        assert conditional_test_worse(sets, mid_p=True) == pytest.approx(
            sign_test_worse(broken, fixed, mid_p=True)
        )


def test_conditional_test_matches_enumeration_of_the_permutations() -> None:
    rng = np.random.default_rng(5)
    for _ in range(30):
        cases = []
        for _ in range(int(rng.integers(1, 6))):
            r, k = int(rng.integers(1, 4)), int(rng.integers(1, 3))
            cases.append((int(rng.integers(0, r + 1)), r, int(rng.integers(0, k + 1)), k))
        assert conditional_test_worse(cases) == pytest.approx(
            conditional_by_enumeration(cases), abs=1e-12
        )


def test_conditional_test_many_cases_of_one_shape_by_repeated_squaring() -> None:
    # 40 sets of 2:2 with s = 2: each X ~ (1, 4, 1)/6 on 0, 1, 2. The sum of 40 is checked
    # against 40 direct convolutions with numpy.
    law = np.array([1, 4, 1]) / 6
    direct = np.ones(1)
    for _ in range(40):
        direct = np.convolve(direct, law)
    cases = [(1, 2, 1, 2)] * 25 + [(2, 2, 0, 2)] * 15  # observed T = 25
    assert conditional_test_worse(cases) == pytest.approx(float(np.sum(direct[:26])), rel=1e-10)


def test_conditional_residuals_have_mean_zero_given_the_total() -> None:
    # 1:2 with s = 1: X - 1/3; 2:2 with s = 3: X - 2 * 3/4.
    assert conditional_residuals([(1, 2, 0, 1), (1, 2, 2, 2)]) == pytest.approx([-1 / 3, 0.5])
    with pytest.raises(ValueError, match="matched set"):
        conditional_residuals([(3, 2, 0, 1)])


def test_clustered_test_worse_known_answer() -> None:
    # Totals -1, -1, 0, 1 ... by hand: mean -0.25, sd sqrt((0.5625*2 + 0.0625 + 1.5625)/3)
    # = sqrt(2.75/3) = 0.957427; t = -0.25 / (0.957427 / 2) = -0.522233 on 3 df.
    t = -0.25 / (math.sqrt(2.75 / 3) / 2)
    assert t == pytest.approx(-0.522233, abs=1e-6)
    assert clustered_test_worse([-1, -1, 0, 1]) == pytest.approx(scipy_stats.t.cdf(t, 3))
    assert clustered_test_worse([0.0, 0.0]) == 1.0
    assert clustered_test_worse([-1.0]) == 1.0
    assert clustered_test_worse([-1.0, -1.0]) == 0.0  # every cluster worse by the same


def test_conditional_power_for_one_draw_a_side_is_the_exact_sign_test_power() -> None:
    mde = minimum_detectable_effect(300, 0.10)
    assert conditional_power(300, 0.10, mde, baseline_draws=1) >= 0.80
    assert conditional_mde(300, 0.10) == mde


def test_conditional_power_written_out() -> None:
    # R = 2, K = 1, f = 0.09, d = 0.047: u = 0.18; a broken case scores -2/3 with null
    # variance 4/18 (K R / N = 2/3; K^2 R^2 / (N^2 (N - 1)) = 4/18), a noisy one 0 with
    # variance 2/12 (K R / (4 N)); z = 1.644854. Given b broken and m noisy cases the test
    # rejects with Phi((2b/3 - z sqrt(m/6 + 2b/9) - 1/2) / sqrt(m/6)) (the 1/2: the exact test's
    # whole-number critical value falls half a pass short on average), or, with m = 0, exactly
    # when 3^-b <= alpha. Summed here with scipy's binomial and normal: over b always; over m
    # while its mean (n - b) u / (1 - d) is under SUMMED_NOISY_CASES, else at that mean.
    n, d, u, z = 300, 0.047, 0.18, 1.644854
    share = u / (1 - d)

    def rejects(b: int, m: float) -> float:
        if m == 0:
            return 1.0 if 3.0**-b <= 0.05 else 0.0
        shift = 2 * b / 3 - z * math.sqrt(m / 6 + 2 * b / 9) - 0.5
        return float(scipy_stats.norm.cdf(shift / math.sqrt(m / 6)))

    by_rule = full = 0.0
    for b in range(n + 1):
        pb = scipy_stats.binom.pmf(b, n, d)
        if pb < 1e-300:
            continue
        summed = sum(
            scipy_stats.binom.pmf(m, n - b, share) * rejects(b, m) for m in range(n - b + 1)
        )
        full += pb * summed
        mean = (n - b) * share
        by_rule += pb * (rejects(b, mean) if mean >= SUMMED_NOISY_CASES else summed)
    got = conditional_power(n, 0.09, d, baseline_draws=2)
    assert got == pytest.approx(by_rule, abs=1e-6)
    assert got == pytest.approx(full, abs=0.0025)  # the docstring's "a quarter of a point"
    assert 0.79 < got < 0.81
    # More repeats buy power; so does a looser alpha.
    assert conditional_power(n, 0.09, d, baseline_draws=5) > got
    assert conditional_power(n, 0.09, d, 0.01, baseline_draws=2) < got


def test_conditional_power_with_one_noisy_case_or_none_counts_the_broken_exactly() -> None:
    # n = 3, R = 2, K = 1, f = 0.01 (u = 0.02), d = 0.5, alpha 0.05: a broken case alone has
    # null probability 1/3 of failing its candidate draw, so 3 broken (1/27) reject and 2 (1/9)
    # do not. By hand over b broken (Bin(3, 0.5)) and m noisy (Bin(3 - b, 0.02 / 0.5)):
    # b = 3 (m = 0): 1/8, rejects. b = 2, m = 1: Phi((4/3 - z sqrt(1/6 + 4/9) - 1/2) /
    # sqrt(1/6)). b = 1, m <= 2 and b = 0: far below (Phi of less than -1.5 at most).
    z = 1.644854
    two_and_one = scipy_stats.norm.cdf(
        (4 / 3 - z * math.sqrt(1 / 6 + 4 / 9) - 0.5) / math.sqrt(1 / 6)
    )
    by_hand = 1 / 8 + (3 / 8) * 0.04 * two_and_one
    rest = 0.0
    for b in (0, 1):
        for m in range(1, 3 - b + 1):
            weight = scipy_stats.binom.pmf(b, 3, 0.5) * scipy_stats.binom.pmf(m, 3 - b, 0.04)
            shift = 2 * b / 3 - z * math.sqrt(m / 6 + 2 * b / 9) - 0.5
            rest += weight * scipy_stats.norm.cdf(shift / math.sqrt(m / 6))
    got = conditional_power(3, 0.01, 0.5, baseline_draws=2)
    assert got == pytest.approx(by_hand + rest, abs=1e-7)  # z to 7 digits
    assert 0.125 < got < 0.14


def test_conditional_power_at_small_n_agrees_with_a_simulation_of_its_model() -> None:
    """Where the closed form was 4 to 5 points off (40 cases, R = K = 2, a 15-point drop, at
    the one-suite alpha share): the model simulated (1,000 runs, seeded) and the exact test."""
    rng = np.random.default_rng(23)
    n, f, d, sims = 40, 0.05, 0.15, 1000
    hits = 0
    for _ in range(sims):
        kind = rng.random(n)
        sets = []
        for x in kind:
            if x < 2 * f:
                sets.append((int(rng.binomial(2, 0.5)), 2, int(rng.binomial(2, 0.5)), 2))
            elif x < 2 * f + d:
                sets.append((2, 2, 0, 2))
            else:
                sets.append((2, 2, 2, 2))
        hits += conditional_test_worse(sets) <= 0.045
    expected = conditional_power(n, f, d, 0.045, baseline_draws=2, candidate_draws=2)
    # The closed form says 0.850 here; the simulation is about 0.89 (3 SDs at 1,000 runs: 0.03).
    assert abs(hits / sims - expected) < 3 * math.sqrt(expected * (1 - expected) / sims)
    assert expected > 0.87


def test_conditional_power_agrees_with_a_small_simulation_of_its_model() -> None:
    """The approximation against the model it assumes, simulated (400 runs, seeded): share
    2f noisy cases at pass rate 1/2, share d always broken, the rest settled."""
    rng = np.random.default_rng(17)
    n, f, d, sims = 300, 0.09, 0.047, 400
    hits = 0
    for _ in range(sims):
        kind = rng.random(n)
        noisy, broken = kind < 2 * f, (kind >= 2 * f) & (kind < 2 * f + d)
        settled_pass = rng.random(n) < 0.8
        base = np.where(noisy[:, None], rng.random((n, 2)) < 0.5, (broken | settled_pass)[:, None])
        cand = np.where(noisy, rng.random(n) < 0.5, settled_pass & ~broken)
        sets = [(int(b.sum()), 2, int(c), 1) for b, c in zip(base, cand, strict=True)]
        hits += conditional_test_worse(sets) <= 0.05
    expected = conditional_power(n, f, d, baseline_draws=2)
    # 3 Monte Carlo SDs at 400 runs is about 0.057.
    assert abs(hits / sims - expected) < 3 * math.sqrt(expected * (1 - expected) / sims)


def test_conditional_cases_for_meets_the_mde() -> None:
    n = conditional_cases_for(0.05, 0.09, baseline_draws=2)
    assert conditional_mde(n, 0.09, baseline_draws=2) <= 0.05 + MDE_TOLERANCE
    assert conditional_mde(n - 1, 0.09, baseline_draws=2) > 0.05


# ------------------------------------------------------------------------------------------
# Non-inferiority: Tango's score bound, the t bound
# ------------------------------------------------------------------------------------------


def test_tango_z_at_zero_is_mcnemar() -> None:
    # Z(0) = (b - c) / sqrt(b + c).
    assert tango_z(9, 4, 50, 0.0) == pytest.approx(5 / math.sqrt(13))


def test_tango_restricted_mle_maximises_the_constrained_likelihood() -> None:
    """The p01 inside Z is the multinomial MLE under p10 - p01 = D0; checked by a grid search
    over the likelihood b log(p01 + D0) + c log p01 + (n - b - c) log(1 - 2 p01 - D0)."""
    for b, c, n, d0 in ((9, 4, 50, 0.05), (2, 7, 40, 0.10), (0, 0, 40, 0.05), (12, 1, 300, 0.02)):
        grid = np.linspace(1e-7, (1 - d0) / 2 - 1e-7, 400_001)
        with np.errstate(divide="ignore"):
            loglik = b * np.log(grid + d0) + (c * np.log(grid) if c else 0.0)
            loglik = loglik + (n - b - c) * np.log(1 - 2 * grid - d0)
        p01 = float(grid[int(np.argmax(loglik))])
        z = (b - c - n * d0) / math.sqrt(n * (2 * p01 + d0 * (1 - d0)))
        assert tango_z(b, c, n, d0) == pytest.approx(z, abs=1e-4)


def test_tango_bound_when_nothing_changed() -> None:
    # b = c = 0: p01~ = 0, so Z(D0) = (g - n D0) / sqrt(n D0 (1 - D0)) with g the correction.
    # Z = -z squared: (n D0 - g)² = z² n D0 (1 - D0), i.e. (n + z²) D0² - (2g + z²) D0 + g²/n
    # = 0, whose larger root is the bound; g = 0 gives Tango's own z²/(n + z²).
    z = 1.6448536269514722
    for n in (20, 40, 300):
        assert tango_upper_drop(0, 0, n, correction=0.0) == pytest.approx(
            z * z / (n + z * z), abs=1e-8
        )
        g = 1.25
        a, b, c = n + z * z, 2 * g + z * z, g * g / n
        root = (b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
        assert tango_upper_drop(0, 0, n) == pytest.approx(root, abs=1e-8)
    # n = 40: 21.3 points at n = 20, 11.4 at 40, 1.6 at 300 (the root above, by hand).
    assert tango_upper_drop(0, 0, 40) == pytest.approx(0.113860, abs=1e-6)
    # Uncorrected, 52 cases rule out 5 points: n > z² 0.95 / 0.05 = 51.4.
    assert tango_upper_drop(0, 0, 51, correction=0.0) > 0.05
    assert tango_upper_drop(0, 0, 52, correction=0.0) < 0.05
    # Corrected: Z(0.05) < -z is 0.05 n - 1.25 > z sqrt(0.0475 n); with x = sqrt(n),
    # x > (z sqrt(0.0475) + sqrt(z² 0.0475 + 0.25)) / 0.1 = 9.7373, n > 94.81: 95 cases.
    assert tango_upper_drop(0, 0, 94) > 0.05 > tango_upper_drop(0, 0, 95)
    assert cases_to_rule_out(0, 0, 40, 0.05, 0.05) == 95


def _pass_size(n: int, margin: float, alpha: float, correction: float) -> float:
    """The largest chance, over the nuisance, that a true drop of exactly ``margin`` passes.

    One draw a side (R = K = 1): each case is broken (p10), fixed (p01) or the same, so
    (b, c) is trinomial with p10 = p01 + margin. The gate passes when the bound is under the
    margin; P(pass) = sum over those (b, c) of n! / (b! c! (n - b - c)!) p10^b p01^c
    p00^(n - b - c), at p01 on a grid over [0, (1 - margin) / 2] that includes both ends.
    """
    passes = [
        (b, c)
        for b in range(n + 1)
        for c in range(n + 1 - b)
        if tango_upper_drop(b, c, n, alpha, correction) < margin
    ]
    b = np.array([x for x, _ in passes], dtype=float)
    c = np.array([y for _, y in passes], dtype=float)
    coef = np.array([math.comb(n, x) * math.comb(n - x, y) for x, y in passes], dtype=float)
    worst = 0.0
    for p01 in np.linspace(0.0, (1.0 - margin) / 2.0, 241):
        p10, p00 = p01 + margin, max(0.0, 1.0 - 2.0 * p01 - margin)
        # numpy's 0.0 ** 0 is 1: a count of zero contributes nothing whatever its probability.
        size = float(np.sum(coef * p10**b * p01**c * p00 ** (n - b - c)))
        worst = max(worst, size)
    return worst


@pytest.mark.parametrize("n", [10, 20, 40])
def test_tango_bound_passes_a_drop_at_the_margin_at_most_alpha(n: int) -> None:
    # Exact enumeration of the trinomial (see _pass_size): the corrected bound passes a true
    # 5-point drop with probability at most alpha = 5% at every nuisance value on the grid.
    assert _pass_size(n, 0.05, 0.05, TANGO_CORRECTION) <= 0.05


def test_tango_bound_uncorrected_passes_the_margin_too_often() -> None:
    # The same enumeration without the correction: 5.75% at n = 20 (the figure).
    assert _pass_size(20, 0.05, 0.05, 0.0) == pytest.approx(0.0575, abs=5e-4)


def test_tango_bound_inverts_the_test() -> None:
    bound = tango_upper_drop(9, 4, 300)
    assert tango_z(9, 4, 300, bound, TANGO_CORRECTION) == pytest.approx(-1.6448536, abs=1e-5)
    # More breaks: a higher bound; more fixes: a lower one; never past 1.
    assert tango_upper_drop(15, 4, 300) > bound > tango_upper_drop(9, 10, 300)
    assert tango_upper_drop(40, 0, 40) == 1.0


def test_t_upper_drop_known_answer() -> None:
    # diffs: -1 x 2, 0 x 8: mean -0.2, sd sqrt((2 * 0.64 + 8 * 0.04) / 9) = sqrt(1.6/9);
    # SE = sd / sqrt(10); t(0.95, 9) = 1.833113 (t table): bound 0.2 + 1.833113 * SE.
    diffs = [-1.0, -1.0] + [0.0] * 8
    se = math.sqrt(1.6 / 9) / math.sqrt(10)
    assert t_upper_drop(diffs) == pytest.approx(0.2 + 1.833113 * se, abs=1e-6)
    assert t_upper_drop([-1.0]) == 1.0
    assert t_upper_drop([-1.0, -1.0, -1.0]) == 1.0  # clipped: a drop cannot pass 100 points


def test_weighted_holm_known_answers() -> None:
    # Equal weights: Holm.
    assert weighted_holm([0.01, 0.04, 0.03], [1, 1, 1]) == pytest.approx(
        holm_adjust([0.01, 0.04, 0.03])
    )
    # Weights 0.9 / 0.1, p = 0.03, 0.004: ratios 0.0333, 0.04. First 0.03/0.9 * 1 = 0.0333;
    # then max(0.0333, 0.1 * 0.004/0.1) = 0.0333.
    assert weighted_holm([0.03, 0.004], [0.9, 0.1]) == pytest.approx([1 / 30, 1 / 30])
    # A zero weight never rejects.
    assert weighted_holm([0.0, 0.5], [0.0, 1.0]) == pytest.approx([1.0, 0.5])


def test_conditional_power_without_noise_is_binomial() -> None:
    # f = 0, R = 2, K = 1: a broken case's candidate draw fails with null probability 1/3, so
    # p = (1/3)^B and the test rejects from B = 3 (1/27 <= 0.05 < 1/9). Power at n = 143,
    # d = 0.03: P(Bin(143, 0.03) >= 3), summed by hand with math.comb.
    by_hand = 1 - sum(math.comb(143, j) * 0.03**j * 0.97 ** (143 - j) for j in range(3))
    assert conditional_power(143, 0.0, 0.03, baseline_draws=2) == pytest.approx(by_hand)
