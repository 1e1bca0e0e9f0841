"""The gate's binomial, hypergeometric and t distributions in plain Python, against scipy.stats
(an independent implementation: Boost's binomial, Cephes' t) on a grid, bounds included."""

from __future__ import annotations

import math

import pytest
import scipy.stats

from evalgate.analysis.distributions import (
    betainc,
    binom_pmf,
    binom_sf,
    hypergeom_pmf,
    t_cdf,
    t_ppf,
)

REL = 1e-10


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 40, 301, 1000, 100_000])
@pytest.mark.parametrize("p", [0.0, 0.01, 0.25, 1 / 3, 0.5, 0.9, 1.0])
def test_binomial_tail_and_mass_match_scipy(n: int, p: float) -> None:
    for k in [-3, -1, 0, 1, 2, n // 3, n // 2, n - 2, n - 1, n, n + 3]:
        for mine, theirs in (
            (binom_sf(k, n, p), float(scipy.stats.binom.sf(k, n, p))),
            (binom_pmf(k, n, p), float(scipy.stats.binom.pmf(k, n, p))),
        ):
            assert mine == pytest.approx(theirs, rel=REL, abs=1e-300), (k, n, p)


def test_binomial_far_tail_keeps_its_relative_accuracy() -> None:
    # P(Bin(1000, 1/2) > 900) is about 1e-193: a sum of differences would lose it entirely.
    assert binom_sf(900, 1000, 0.5) == pytest.approx(scipy.stats.binom.sf(900, 1000, 0.5), rel=REL)
    # By hand: P(Bin(10, 1/2) >= 9) = (10 + 1) / 1024.
    assert binom_sf(8, 10, 0.5) == pytest.approx(11 / 1024, rel=1e-14)
    assert binom_pmf(2.5, 5, 0.5) == 0.0


def test_hypergeometric_mass_is_exact_counts() -> None:
    # 3 draws from 10 with 4 successes: C(4, 2) C(6, 1) / C(10, 3) = 36 / 120.
    assert hypergeom_pmf(2, 10, 4, 3) == 36 / 120
    assert hypergeom_pmf(4, 10, 4, 3) == 0.0
    assert sum(hypergeom_pmf(x, 10, 4, 3) for x in range(4)) == pytest.approx(1.0, rel=1e-15)


@pytest.mark.parametrize("df", [1, 2, 5, 19, 53, 200, 5000])
def test_t_matches_scipy(df: int) -> None:
    for q in [0.005, 0.025, 0.2, 0.5, 0.95, 0.999]:
        assert t_ppf(q, df) == pytest.approx(float(scipy.stats.t.ppf(q, df)), rel=REL, abs=1e-12)
    for x in [-30.0, -3.0, -0.5, 0.0, 1.7, 12.0]:
        assert t_cdf(x, df) == pytest.approx(float(scipy.stats.t.cdf(x, df)), rel=REL)


def test_t_known_answers() -> None:
    # df = 1 is Cauchy: F(x) = 1/2 + atan(x) / pi; df = 2: F(x) = 1/2 + x / (2 sqrt(2 + x^2)).
    for x in (-4.0, -1.0, 0.3, 2.0):
        assert t_cdf(x, 1) == pytest.approx(0.5 + math.atan(x) / math.pi, rel=1e-13)
        assert t_cdf(x, 2) == pytest.approx(0.5 + x / (2 * math.sqrt(2 + x * x)), rel=1e-13)
    assert t_ppf(0.75, 1) == pytest.approx(1.0, rel=1e-13)  # tan(pi / 4)
    assert t_ppf(0.0, 3) == -math.inf and t_ppf(1.0, 3) == math.inf


def test_incomplete_beta_known_answers() -> None:
    # I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b.
    for x in (0.0, 0.1, 0.5, 0.97, 1.0):
        assert betainc(1.0, 1.0, x) == pytest.approx(x, abs=1e-15)
        assert betainc(3.5, 1.0, x) == pytest.approx(x**3.5, abs=1e-15)
        assert betainc(1.0, 7.0, x) == pytest.approx(1 - (1 - x) ** 7, abs=1e-15)
