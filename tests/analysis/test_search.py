"""The least-drop search: an upper bound within the tolerance of the least drop that reaches a
power, for smooth power curves and for steps, in fewer calls than bisection on a smooth one;
and t's quantile: the least double whose cdf reaches q."""

from __future__ import annotations

import math

import pytest
import scipy.stats

from evalgate.analysis import distributions
from evalgate.analysis.distributions import t_cdf, t_ppf
from evalgate.analysis.search import MDE_TOLERANCE, least_drop
from evalgate.analysis.sign_test import sign_test_power

# Bisection halves [0, 1] until it is under the tolerance wide: ceil(log2(1 / 1e-5)) = 17 calls,
# plus the two ends.
BISECTION_CALLS = math.ceil(math.log2(1.0 / MDE_TOLERANCE)) + 2


def _counted(reach):  # type: ignore[no-untyped-def]
    calls: list[float] = []

    def counted(d: float) -> float:
        calls.append(d)
        return float(reach(d))

    return counted, calls


@pytest.mark.parametrize("n", [5, 12, 52, 100, 400])
@pytest.mark.parametrize("flip", [0.0, 0.04, 0.2])
@pytest.mark.parametrize("power", [0.5, 0.8, 0.95])
def test_the_least_drop_is_an_upper_bound_within_the_tolerance(
    n: int, flip: float, power: float
) -> None:
    def reach(d: float) -> float:
        return sign_test_power(n, flip, d, 0.05)

    found = least_drop(reach, 1.0 - flip, power)
    if math.isinf(found):
        assert reach(1.0 - flip) < power
        return
    assert reach(found) >= power
    assert found == 0.0 or reach(max(0.0, found - MDE_TOLERANCE)) < power


def test_a_smooth_power_takes_fewer_calls_than_bisection() -> None:
    counted, calls = _counted(lambda d: sign_test_power(52, 0.0, d, 0.045))
    found = least_drop(counted, 1.0, 0.8)
    assert counted(found) >= 0.8 > counted(found - MDE_TOLERANCE)
    assert len(calls) - 2 < BISECTION_CALLS * 0.75, calls


@pytest.mark.parametrize("step", [0.0000001, 0.3, 0.7777777, 0.99999])
def test_a_power_that_jumps_is_found_to_the_tolerance(step: float) -> None:
    # A step has no slope to follow: the search must still close its bracket on the jump.
    counted, calls = _counted(lambda d: 1.0 if d >= step else 0.0)
    found = least_drop(counted, 1.0, 0.8)
    assert step <= found <= step + MDE_TOLERANCE
    assert len(calls) <= 2 * BISECTION_CALLS


def test_the_ends_of_the_search() -> None:
    assert least_drop(lambda d: 0.9, 1.0, 0.8) == 0.0
    assert least_drop(lambda d: 0.1 + d / 2, 1.0, 0.8) == math.inf
    assert least_drop(lambda d: 0.1, 0.0, 0.8) == math.inf
    # exactly the power at the top
    assert least_drop(lambda d: 0.8 if d >= 1.0 else 0.0, 1.0, 0.8) == 1.0


# (Past some 10^4 degrees of freedom the incomplete beta's log-gamma front loses digits of
# its own; a suite has as many as it has groups.)
@pytest.mark.parametrize("df", [1, 1.5, 2, 3, 7, 52, 53, 1_000, 5_000])
@pytest.mark.parametrize("q", [0.5000001, 0.6, 0.9, 0.95, 0.975, 0.995, 0.9999, 1 - 1e-9])
def test_t_quantile_is_the_least_double_whose_cdf_reaches_q(df: float, q: float) -> None:
    x = distributions.t_ppf.__wrapped__(q, df)  # uncached
    assert t_cdf(x, df) >= q > t_cdf(math.nextafter(x, -math.inf), df)
    assert -t_ppf(1.0 - q, df) == x
    # q itself is known to half an ulp: near the centre, or far in a tail, that is many ulps
    # of x (the quantile's condition), which bounds any two correct answers' distance.
    spread = 4.0 * math.ulp(q) / distributions.t_pdf(x, df)
    assert x == pytest.approx(float(scipy.stats.t.ppf(q, df)), rel=1e-10, abs=spread)


def test_t_quantile_of_the_median_is_zero() -> None:
    assert t_ppf(0.5, 5) == 0.0


@pytest.mark.parametrize("df", [3, 50, 5_000])
def test_t_cdf_keeps_its_digits_beside_the_centre(df: float) -> None:
    # There df / (df + x^2) rounds towards 1: at df 5,000 and x 2.5e-7 the tails' form gave
    # exactly 1/2.
    for x in (2.5e-7, 1e-3, 0.25, 1.0, math.sqrt(df) * 0.999, math.sqrt(df) * 1.001):
        expected = float(scipy.stats.t.cdf(x, df))
        assert t_cdf(x, df) == pytest.approx(expected, rel=1e-13)
        assert t_cdf(-x, df) == pytest.approx(1.0 - expected, rel=1e-13)
