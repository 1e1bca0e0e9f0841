"""Argument checks shared by the tests and the power model: probabilities and counts."""

from __future__ import annotations

from statistics import NormalDist

# One-sided sign-test p-values are dyadic rationals computed in floating point; this relative
# slack makes a p-value equal to alpha (e.g. 1/32 at alpha = 0.03125) count as p <= alpha.
P_SLACK = 1e-12


def check_probability(name: str, value: float, *, open_low: bool = True) -> None:
    low_ok = value > 0.0 if open_low else value >= 0.0
    if not (low_ok and value < 1.0):
        interval = "(0, 1)" if open_low else "[0, 1)"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")


def check_count(name: str, value: int) -> None:
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")


def two_sided_z(confidence: float) -> float:
    check_probability("confidence", confidence)
    # The standard library's normal quantile: no scipy import for an interval.
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)
