"""The searches every power statement shares: the least drop a test detects with a given
power, and the least number of units that reaches it."""

from __future__ import annotations

import math
from collections.abc import Callable

#: Largest case count :func:`cases_for_mde` will recommend; beyond it the answer is "not reachable".
CASES_CAP = 1_000_000


#: Absolute tolerance, in units of the effect size, of :func:`minimum_detectable_effect`.
MDE_TOLERANCE = 1e-5


def least_drop(reach: Callable[[float], float], top: float, power: float) -> float:
    """The least drop in ``[0, top]`` whose power ``reach(d)`` is at least ``power``, for a
    power that rises with the drop: bisection, an upper bound within ``MDE_TOLERANCE``. ``0``
    when no drop is needed, ``inf`` when even ``top`` falls short (or ``top`` is 0)."""
    if reach(0.0) >= power:
        return 0.0
    lo, hi = 0.0, top
    if hi <= 0.0 or reach(hi) < power:
        return math.inf
    while hi - lo > MDE_TOLERANCE:
        mid = (lo + hi) / 2.0
        if reach(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def least_n(enough: Callable[[int], bool], start: int) -> int:
    """The least n > ``start`` with ``enough(n)``, for a property that once true stays true
    as n grows: doubling, then bisection. ``CASES_CAP`` when even that many fall short."""
    lo, hi = start, min(max(2 * start, 1), CASES_CAP)
    while not enough(hi):
        if hi >= CASES_CAP:
            return CASES_CAP
        lo, hi = hi, min(2 * hi, CASES_CAP)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi
