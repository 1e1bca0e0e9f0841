"""Known answers of evalgate.analysis.calibration, from 2x2 tables worked by hand.

Tables are written (a, b, c, d): a both pass, b judge pass / human fail, c judge fail / human
pass, d both fail. Every number below is worked out in the comment beside it, independently of
the code under test.
"""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.analysis.calibration import (
    Table,
    agreement,
    agreement_change,
    bootstrap_kappa,
    cohen_kappa,
    gwet_ac1,
    mcnemar,
    rogan_gladen,
)

Z975 = 1.959963984540054  # Phi^-1(0.975), standard normal tables


def table(a: int, b: int, c: int, d: int) -> Table:
    return Table(both_pass=a, judge_only=b, human_only=c, both_fail=d)


def pairs_of(a: int, b: int, c: int, d: int) -> list[tuple[bool, bool]]:
    return [(True, True)] * a + [(True, False)] * b + [(False, True)] * c + [(False, False)] * d


def test_kappa_and_its_interval_on_a_balanced_table() -> None:
    # (40, 5, 10, 45), n = 100: po = 0.85; judge passes 0.45, humans 0.50;
    # pe = 0.45*0.50 + 0.55*0.50 = 0.50; kappa = (0.85 - 0.50) / 0.50 = 0.70.
    # Fleiss-Cohen-Everitt, 1 - kappa = 0.3:
    #   A = 0.40 (1 - (0.45+0.50) 0.3)^2 + 0.45 (1 - (0.55+0.50) 0.3)^2
    #     = 0.40 * 0.715^2 + 0.45 * 0.685^2 = 0.20449 + 0.21115125 = 0.41564125
    #   B = 0.09 [0.05 (0.50+0.55)^2 + 0.10 (0.50+0.45)^2] = 0.09 * 0.145375 = 0.01308375
    #   C = (0.70 - 0.50*0.3)^2 = 0.55^2 = 0.3025
    #   var = (A + B - C) / (100 * 0.5^2) = 0.126225 / 25 = 0.005049; se = 0.0710563
    k = cohen_kappa(table(40, 5, 10, 45))
    assert k is not None
    assert k.value == pytest.approx(0.70, abs=1e-12)
    assert k.se == pytest.approx(math.sqrt(0.005049), abs=1e-9)
    assert k.low == pytest.approx(0.70 - Z975 * math.sqrt(0.005049), abs=1e-9)  # 0.56073
    assert k.high == pytest.approx(0.70 + Z975 * math.sqrt(0.005049), abs=1e-9)  # 0.83927
    # AC1: q = (0.45 + 0.50)/2 = 0.475, pe = 2*0.475*0.525 = 0.49875,
    # AC1 = (0.85 - 0.49875) / 0.50125 = 0.700748...
    assert gwet_ac1(table(40, 5, 10, 45)) == pytest.approx(0.35125 / 0.50125, abs=1e-12)


def test_prevalence_paradox_kappa_low_ac1_high() -> None:
    # (80, 10, 5, 5), n = 100: the raters agree on 85% of items, but nearly all are passes.
    # Judge passes 0.90, humans 0.85: pe = 0.90*0.85 + 0.10*0.15 = 0.78,
    # kappa = (0.85 - 0.78) / 0.22 = 0.31818 (would read as "fair" agreement).
    # AC1: q = 0.875, pe = 2*0.875*0.125 = 0.21875, AC1 = 0.63125 / 0.78125 = 0.808.
    t = table(80, 10, 5, 5)
    k = cohen_kappa(t)
    assert k is not None
    assert k.value == pytest.approx(0.07 / 0.22, abs=1e-12)
    assert gwet_ac1(t) == pytest.approx(0.808, abs=1e-12)
    assert k.value < 0.4 < 0.8 < (gwet_ac1(t) or 0)


def test_negative_kappa_when_agreement_is_below_chance() -> None:
    # (90, 5, 5, 0): po = 0.90, both pass 0.95: pe = 0.95^2 + 0.05^2 = 0.905,
    # kappa = (0.90 - 0.905) / 0.095 = -0.0526; AC1: pe = 2*0.95*0.05 = 0.095,
    # AC1 = 0.805 / 0.905 = 0.8895.
    t = table(90, 5, 5, 0)
    k = cohen_kappa(t)
    assert k is not None
    assert k.value == pytest.approx(-0.005 / 0.095, abs=1e-12)
    assert gwet_ac1(t) == pytest.approx(0.805 / 0.905, abs=1e-12)


def test_kappa_is_undefined_when_both_raters_pass_everything() -> None:
    # pe = 1*1 + 0*0 = 1: kappa's denominator is zero. AC1: q = 1, pe = 0, AC1 = po = 1.
    assert cohen_kappa(table(20, 0, 0, 0)) is None
    assert gwet_ac1(table(20, 0, 0, 0)) == 1.0
    assert cohen_kappa(table(0, 0, 0, 0)) is None
    assert gwet_ac1(table(0, 0, 0, 0)) is None


def test_perfect_agreement_keeps_an_honest_low_end() -> None:
    # (30, 0, 0, 20): po = 1, so kappa = 1; 1 - kappa = 0 makes A = p11 + p22 = 1, B = 0,
    # C = 1: var = 0, which would claim certainty. The low end comes from Wilson instead: at
    # p = 1 the Wilson low end is 1 / (1 + z^2/n) = 1 / (1 + 3.8415/50) = 0.92865; with
    # pe = 0.6^2 + 0.4^2 = 0.52, kappa's low end is (0.92865 - 0.52) / 0.48 = 0.8514.
    k = cohen_kappa(table(30, 0, 0, 20))
    assert k is not None
    assert (k.value, k.high, k.se) == pytest.approx((1.0, 1.0, 0.0), abs=1e-12)
    assert k.low == pytest.approx((1 / (1 + Z975**2 / 50) - 0.52) / 0.48, abs=1e-12)
    assert k.low == pytest.approx(0.8514, abs=1e-4)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 60), st.integers(0, 60), st.integers(0, 60), st.integers(0, 60))
def test_kappa_equals_the_closed_2x2_form(a: int, b: int, c: int, d: int) -> None:
    # For a 2x2 table kappa = 2(ad - bc) / ((a+b)(b+d) + (a+c)(c+d)) (Fleiss et al. 2003, 18.1).
    denominator = (a + b) * (b + d) + (a + c) * (c + d)
    k = cohen_kappa(table(a, b, c, d))
    if denominator == 0:
        assert k is None
        return
    assert k is not None
    assert k.value == pytest.approx(2 * (a * d - b * c) / denominator, abs=1e-9)
    assert -1.0 <= k.low <= k.value <= k.high <= 1.0


def test_mcnemar_names_the_lean() -> None:
    # b = 5 lenient, c = 10 strict: two-sided exact p = 2 P(Bin(15, 1/2) <= 5)
    # = 2 (1 + 15 + 105 + 455 + 1365 + 3003) / 32768 = 9888 / 32768 = 0.30176: no lean.
    bias = mcnemar(table(40, 5, 10, 45))
    assert (bias.lenient, bias.strict) == (5, 10)
    assert bias.p_value == pytest.approx(9888 / 32768, abs=1e-12)
    assert bias.lean == "balanced"
    # b = 12, c = 1: p = 2 (1 + 13) / 8192 = 0.003418: the judge passes what people fail.
    assert mcnemar(table(40, 12, 1, 45)).p_value == pytest.approx(28 / 8192, abs=1e-12)
    assert mcnemar(table(40, 12, 1, 45)).lean == "lenient"
    assert mcnemar(table(40, 1, 12, 45)).lean == "strict"


def agresti_coull_variance(x: int, m: int) -> float:
    # Agresti & Coull (1998): q = (x + z²/2) / (m + z²), variance q(1 - q) / (m + z²).
    q = (x + Z975**2 / 2) / (m + Z975**2)
    return q * (1 - q) / (m + Z975**2)


def test_rogan_gladen_with_its_delta_method_interval() -> None:
    # Labels: 50 human passes of which the judge passes 45 (Se = 0.9), 50 human fails of which
    # it fails 40 (Sp = 0.8): table (45, 10, 5, 40). A run of 200 cases the judge passed 120
    # (p = 0.6). pi = (0.6 + 0.8 - 1) / (0.9 + 0.8 - 1) = 0.4 / 0.7 = 0.571429.
    # var = [V(120, 200) + pi^2 V(45, 50) + (1 - pi)^2 V(40, 50)] / 0.7^2, with z² = 3.8415:
    #   V(120, 200): q = 121.92 / 203.84 = 0.59812, V = 0.24036 / 203.84 = 0.0011792
    #   V(45, 50):   q = 46.921 / 53.841 = 0.87146, V = 0.11202 / 53.841 = 0.0020805
    #   V(40, 50):   q = 41.921 / 53.841 = 0.77859, V = 0.17239 / 53.841 = 0.0032018
    #   var = [0.0011792 + 0.00067934 + 0.00058807] / 0.49 = 0.00244661 / 0.49 = 0.0049931
    result = rogan_gladen(120, 200, table(45, 10, 5, 40))
    assert result is not None
    pi = 0.4 / 0.7
    var = (
        agresti_coull_variance(120, 200)
        + pi * pi * agresti_coull_variance(45, 50)
        + (1 - pi) ** 2 * agresti_coull_variance(40, 50)
    ) / 0.49
    assert var == pytest.approx(0.0049931, abs=2e-7)
    assert (result.sensitivity, result.specificity) == pytest.approx((0.9, 0.8))
    assert result.raw == pytest.approx(0.6)
    assert result.value == pytest.approx(pi, abs=1e-12)
    assert result.low == pytest.approx(pi - Z975 * math.sqrt(var), abs=1e-9)  # 0.43293
    assert result.high == pytest.approx(pi + Z975 * math.sqrt(var), abs=1e-9)  # 0.70993


def test_a_perfect_judge_still_has_an_interval() -> None:
    # Se = 23/23 and Sp = 9/9 give plug-in variances of 0; the adjusted ones do not:
    # p = 1, pi = 1; var = [V(143, 143) + V(23, 23)] / 1 (the Sp term has (1 - pi)^2 = 0).
    result = rogan_gladen(143, 143, table(23, 0, 0, 9))
    assert result is not None and result.value == 1.0
    var = agresti_coull_variance(143, 143) + agresti_coull_variance(23, 23)
    assert result.low == pytest.approx(1 - Z975 * math.sqrt(var), abs=1e-9)
    assert result.low < 0.95


def test_rogan_gladen_refuses_what_it_cannot_read() -> None:
    assert rogan_gladen(5, 10, table(10, 0, 0, 0)) is None  # no human fail: Sp unmeasured
    assert rogan_gladen(5, 10, table(5, 5, 5, 5)) is None  # Se + Sp = 1: a coin
    assert rogan_gladen(0, 0, table(5, 1, 1, 5)) is None
    # A raw rate below the judge's false-pass rate clips at 0: Sp = 0.8, p = 0.1.
    clipped = rogan_gladen(10, 100, table(45, 10, 5, 40))
    assert clipped is not None and clipped.value == 0.0


def test_agreement_report_with_groups() -> None:
    pairs = pairs_of(3, 1, 0, 2)
    groups = ["g1", "g1", "g1", "g2", "g2", "g2"]
    # Items in order: (T,T) g1, (T,T) g1, (T,T) g1, (T,F) g2, (F,F) g2, (F,F) g2.
    report = agreement(pairs, groups)
    assert report.n == 6
    assert report.agreement.hits == 5
    assert report.judge_pass.hits == 4 and report.human_pass.hits == 3
    assert [(g.group, g.n, g.agreement.hits) for g in report.groups] == [("g1", 3, 3), ("g2", 3, 2)]
    assert report.kappa_interval.startswith("analytic")


def test_agreement_change_between_two_judges() -> None:
    # 8 items the old judge got right and the new one wrong, 1 the reverse, 11 unchanged:
    # one-sided p = P(Bin(9, 1/2) >= 8) = (9 + 1) / 512 = 0.01953: a significant drop.
    base = [True] * 8 + [False] + [True] * 11
    head = [False] * 8 + [True] + [True] * 11
    change = agreement_change(base, head)
    assert (change.lost, change.gained) == (8, 1)
    assert change.p_value == pytest.approx(10 / 512, abs=1e-12)
    assert change.kind == "dropped"
    assert change.base.hits == 19 and change.head.hits == 12
    # 2 lost, 1 gained: p = P(Bin(3, 1/2) >= 2) = 4/8: a drop that is not proven.
    unproven = agreement_change([True, True, False, True], [False, False, True, True])
    assert unproven.p_value == pytest.approx(0.5)
    assert unproven.kind == "unproven"
    assert agreement_change([False, True], [True, True]).kind == "not_dropped"


# --------------------------------------------------------------------------- bootstrap interval


def exact_bootstrap_kappas(cells: tuple[int, int, int, int]) -> list[tuple[Fraction, Fraction]]:
    """Every value kappa takes over the bootstrap's resamples of ``cells``' n items, with its
    exact probability, by enumeration: a resample is multinomial(n; a/n, b/n, c/n, d/n) over the
    four cells. A resample with every item in one agreeing cell (chance agreement 1) counts as
    kappa 1, as the code documents."""
    n = sum(cells)
    p = [Fraction(x, n) for x in cells]
    mass: dict[Fraction, Fraction] = {}
    for xa in range(n + 1):
        for xb in range(n + 1 - xa):
            for xc in range(n + 1 - xa - xb):
                x = (xa, xb, xc, n - xa - xb - xc)
                prob = Fraction(math.factorial(n))
                for xi, pi in zip(x, p, strict=True):
                    prob *= pi**xi / math.factorial(xi)
                judge, human = Fraction(x[0] + x[1], n), Fraction(x[0] + x[2], n)
                pe = judge * human + (1 - judge) * (1 - human)
                kappa = Fraction(1) if pe == 1 else (Fraction(x[0] + x[3], n) - pe) / (1 - pe)
                mass[kappa] = mass.get(kappa, Fraction(0)) + prob
    return sorted(mass.items())


def quantile(dist: list[tuple[Fraction, Fraction]], q: Fraction) -> tuple[Fraction, float]:
    """The smallest value whose cumulative probability reaches q, and how far (in probability)
    the nearer edge of its step is from q."""
    below = Fraction(0)
    for value, prob in dist:
        if below + prob >= q:
            return value, float(min(q - below, below + prob - q))
        below += prob
    raise AssertionError("the probabilities do not add up to 1")


def test_the_bootstrap_interval_is_the_exact_bootstraps_quantiles() -> None:
    # (2, 1, 2, 1), n = 6: judge passes 3/6, humans 4/6, pe = 1/2 * 2/3 + 1/2 * 1/3 = 1/2,
    # po = 3/6, kappa = 0. Its bootstrap distribution, enumerated over the 84 multinomial
    # resamples, has its 2.5% quantile at -2/3 (cumulative 0.0099 below it, 0.0562 with it) and
    # its 97.5% quantile at 2/3 (0.938 below, 0.984 with it). With 20,000 resamples the
    # empirical quantiles are those atoms: the nearest step edge is 0.0094 away, over 8
    # standard errors of an empirical share at 2.5% (sqrt(0.025 * 0.975 / 20000) = 0.0011).
    dist = exact_bootstrap_kappas((2, 1, 2, 1))
    assert sum(p for _, p in dist) == 1
    low, low_margin = quantile(dist, Fraction(1, 40))
    high, high_margin = quantile(dist, Fraction(39, 40))
    assert (low, high) == (Fraction(-2, 3), Fraction(2, 3))
    assert min(low_margin, high_margin) > 0.009
    k = bootstrap_kappa(pairs_of(2, 1, 2, 1), resamples=20_000, seed=3, method="percentile")
    assert k is not None
    assert k.value == pytest.approx(0.0, abs=1e-12)
    assert k.low == pytest.approx(-2 / 3, abs=1e-12)
    assert k.high == pytest.approx(2 / 3, abs=1e-12)
    # Its standard error is the bootstrap distribution's SD: sqrt(E[k^2] - E[k]^2) exactly.
    mean = sum(v * p for v, p in dist)
    sd = math.sqrt(float(sum(v * v * p for v, p in dist) - mean * mean))
    assert k.se == pytest.approx(sd, rel=0.03)


def test_the_bca_interval_is_the_exact_bootstraps_adjusted_quantiles() -> None:
    # (1, 1, 2, 1), n = 5: judge passes 2/5, humans 3/5, pe = 6/25 + 6/25 = 12/25, po = 2/5,
    # kappa = (10/25 - 12/25) / (13/25) = -2/13. BCa (Efron & Tibshirani 1993, 14.3) moves the
    # percentile interval's 2.5% and 97.5% to Phi(z0 + (z0 + z)/(1 - acc (z0 + z))) for
    # z = -/+1.96, with z0 = Phi^-1(P(k* < kappa) + P(k* = kappa)/2) from the exact bootstrap
    # distribution and the acceleration acc = sum U^3 / (6 (sum U^2)^1.5) over the jackknife,
    # U_i = (n - 1)(mean - kappa_(i)). The five leave-one-out tables, by hand:
    #   drop a -> (0, 1, 2, 1): judge 1/4, humans 2/4, pe = 1/8 + 3/8 = 1/2, po = 1/4: -1/2
    #   drop b -> (1, 0, 2, 1): judge 1/4, humans 3/4, pe = 3/16 + 3/16 = 3/8, po = 1/2: 1/5
    #   drop c -> (1, 1, 1, 1), twice: pe = 1/2, po = 1/2: 0
    #   drop d -> (1, 1, 2, 0): judge 2/4, humans 3/4, pe = 3/8 + 1/8 = 1/2, po = 1/4: -1/2
    loo = [Fraction(-1, 2), Fraction(1, 5), Fraction(0), Fraction(0), Fraction(-1, 2)]
    mean = sum(loo) / 5
    u = [4 * (mean - x) for x in loo]
    acc = float(sum(x**3 for x in u)) / (6 * float(sum(x**2 for x in u)) ** 1.5)
    dist = exact_bootstrap_kappas((1, 1, 2, 1))
    kappa = Fraction(-2, 13)
    below = sum(p for v, p in dist if v < kappa) + sum(p for v, p in dist if v == kappa) / 2
    z0 = NormalDist().inv_cdf(float(below))
    ends = [NormalDist().cdf(z0 + (z0 + z) / (1 - acc * (z0 + z))) for z in (-Z975, Z975)]
    assert ends == pytest.approx([0.0203, 0.9690], abs=1e-4)  # not the percentile's 2.5%, 97.5%
    (low, low_margin), (high, high_margin) = (quantile(dist, Fraction(e)) for e in ends)
    # The adjusted quantiles are atoms with at least 0.008 of probability to either side: far
    # beyond the Monte Carlo error of 20,000 resamples (about 0.001).
    assert (low, high) == (Fraction(-12, 13), Fraction(8, 13))
    assert min(low_margin, high_margin) > 0.008
    k = bootstrap_kappa(pairs_of(1, 1, 2, 1), resamples=20_000, seed=3, method="bca")
    assert k is not None
    assert k.value == pytest.approx(-2 / 13, abs=1e-12)
    assert (k.low, k.high) == pytest.approx((-12 / 13, 8 / 13), abs=1e-12)


def test_bca_falls_back_to_the_percentile_interval_when_its_acceleration_is_undefined() -> None:
    # (0, 5, 5, 0): the judge disagrees with every label, kappa = -1. Every leave-one-out table
    # is (0, 4, 5, 0) or (0, 5, 4, 0), with the same kappa: the jackknife has no spread and
    # BCa's acceleration is 0 / 0. The percentile interval stands in, no warning escapes.
    k = bootstrap_kappa(pairs_of(0, 5, 5, 0), seed=1)
    p = bootstrap_kappa(pairs_of(0, 5, 5, 0), seed=1, method="percentile")
    assert k is not None and p is not None
    assert k.value == -1.0 and (k.low, k.high) == (p.low, p.high)
    assert k.low == -1.0 and k.high < 0.0


def test_the_bootstrap_is_seeded() -> None:
    pairs = pairs_of(40, 5, 10, 45)
    first = bootstrap_kappa(pairs, seed=7)
    assert first == bootstrap_kappa(pairs, seed=7)
    assert first != bootstrap_kappa(pairs, seed=8)


def test_the_bootstrap_resamples_groups_not_labels() -> None:
    # Each of (20, 3, 5, 22)'s 50 items labelled twice (two phrasings of one reply, one group):
    # kappa is unchanged by doubling every cell, and a resample of the 50 groups is a resample
    # of the 50 items with every count doubled, drawn by the same seeded generator. So the group
    # bootstrap of the 100 labels is exactly the item bootstrap of the 50 items; a bootstrap of
    # the 100 labels one by one would be narrower (about 1/sqrt(2) as wide), claiming more
    # certainty than 50 independent judgements give.
    once = pairs_of(20, 3, 5, 22)
    twice = [p for p in once for _ in range(2)]
    groups = [f"g{i // 2}" for i in range(len(twice))]
    grouped = bootstrap_kappa(twice, groups, seed=5)
    single = bootstrap_kappa(once, seed=5)
    naive = bootstrap_kappa(twice, seed=5)
    assert grouped is not None and single is not None and naive is not None
    assert (grouped.low, grouped.high) == pytest.approx((single.low, single.high), abs=1e-12)
    assert naive.high - naive.low < 0.8 * (grouped.high - grouped.low)


def test_the_bootstrap_at_full_agreement_keeps_the_wilson_low_end() -> None:
    # Every resample of (30, 0, 0, 20) agrees fully (kappa 1): no spread to read. The low end
    # is the analytic one's: Wilson's low end of 50/50 is 50 / (50 + z^2) = 0.92865, pe =
    # 0.6 * 0.6 + 0.4 * 0.4 = 0.52, so (0.92865 - 0.52) / 0.48 = 0.85136.
    k = bootstrap_kappa(pairs_of(30, 0, 0, 20))
    assert k is not None and k.high == 1.0
    wilson_low = 50 / (50 + Z975**2)
    assert k.low == pytest.approx((wilson_low - 0.52) / 0.48, abs=1e-9)
    assert bootstrap_kappa(pairs_of(30, 0, 0, 0)) is None  # one verdict for all: no kappa


def test_the_agreement_report_names_its_interval() -> None:
    pairs = pairs_of(40, 5, 10, 45)
    analytic = agreement(pairs)
    assert analytic.kappa_interval.startswith("analytic (Fleiss, Cohen & Everitt 1969)")
    singles = agreement(pairs, [str(i) for i in range(100)], interval="bootstrap", seed=2)
    assert singles.kappa_interval.startswith(
        "bootstrap (BCa, 2000 resamples of the labels' items, seed 2)"
    )
    assert singles.kappa == bootstrap_kappa(pairs, [str(i) for i in range(100)], seed=2)
    paired = agreement(pairs, [str(i // 2) for i in range(100)], interval="bootstrap")
    assert "resamples of the labels' groups" in paired.kappa_interval
