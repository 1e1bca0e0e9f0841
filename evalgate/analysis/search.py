"""The searches every power statement shares: the least drop a test detects with a given
power, and the least number of units that reaches it."""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

#: Largest case count :func:`cases_for_mde` will recommend; beyond it the answer is "not reachable".
CASES_CAP = 1_000_000


#: Absolute tolerance, in units of the effect size, of :func:`minimum_detectable_effect`.
MDE_TOLERANCE = 1e-5

# Powers this close to 0 or 1 are read as this close: the probit of 0 or 1 is infinite.
_PROBIT_EDGE = 1e-15
_PROBIT = NormalDist().inv_cdf


def _probit_gap(value: float, power: float) -> float:
    """How far ``value`` is above ``power`` on the probit scale, where a power curve is close
    to a straight line in the drop (a normal test's power is Phi(d sqrt(n) / sd - z)); its
    sign is that of ``value - power`` always."""
    edge = min(max(value, _PROBIT_EDGE), 1.0 - _PROBIT_EDGE)
    gap = _PROBIT(edge) - _PROBIT(power)
    if (gap >= 0.0) != (value >= power):
        return math.copysign(_PROBIT_EDGE, value - power) if value != power else 0.0
    return gap


def least_drop(reach: Callable[[float], float], top: float, power: float) -> float:
    """The least drop in ``[0, top]`` whose power ``reach(d)`` is at least ``power``, for a
    power that rises with the drop: an upper bound within ``MDE_TOLERANCE``. ``0`` when no drop
    is needed, ``inf`` when even ``top`` falls short (or ``top`` is 0).

    Brent's method (Brent 1973, "Algorithms for Minimization without Derivatives", ch. 4, in
    the form of scipy's brentq): inverse quadratic interpolation and secant steps inside a
    bracket ``reach(lo) < power <= reach(hi)``, bisecting whenever a step would not shrink it
    fast enough. A power here is a smooth curve in the drop, where this takes a handful of
    calls against bisection's seventeen; where it is not, it is never much worse."""
    f_lo = _probit_gap(reach(0.0), power)
    if f_lo >= 0.0:
        return 0.0
    if top <= 0.0:
        return math.inf
    f_hi = _probit_gap(reach(top), power)
    if f_hi < 0.0:
        return math.inf
    # (x_cur, f_cur) the best point so far, (x_blk, f_blk) the other end of the bracket,
    # (x_pre, f_pre) the point before; s_pre, s_cur the last two steps.
    x_pre, f_pre, x_cur, f_cur = 0.0, f_lo, top, f_hi
    x_blk, f_blk, s_pre, s_cur = 0.0, 0.0, 0.0, 0.0
    delta = MDE_TOLERANCE / 2.0
    for _ in range(1_000):
        if f_pre != 0.0 and f_cur != 0.0 and (f_pre < 0.0) != (f_cur < 0.0):
            x_blk, f_blk = x_pre, f_pre
            s_pre = s_cur = x_cur - x_pre
        if abs(f_blk) < abs(f_cur):
            x_pre, x_cur, x_blk = x_cur, x_blk, x_cur
            f_pre, f_cur, f_blk = f_cur, f_blk, f_cur
        s_bis = (x_blk - x_cur) / 2.0
        if f_cur == 0.0 or abs(s_bis) < delta:
            # the bracket is under the tolerance wide: its end that reaches the power
            return x_cur if f_cur >= 0.0 else x_blk
        if abs(s_pre) > delta and abs(f_cur) < abs(f_pre):
            if x_pre == x_blk:  # secant
                s_try = -f_cur * (x_cur - x_pre) / (f_cur - f_pre)
            else:  # inverse quadratic
                d_pre = (f_pre - f_cur) / (x_pre - x_cur)
                d_blk = (f_blk - f_cur) / (x_blk - x_cur)
                s_try = -f_cur * (f_blk * d_blk - f_pre * d_pre) / (d_blk * d_pre * (f_blk - f_pre))
            if 2.0 * abs(s_try) < min(abs(s_pre), 3.0 * abs(s_bis) - delta):
                s_pre, s_cur = s_cur, s_try
            else:
                s_pre = s_cur = s_bis
        else:
            s_pre = s_cur = s_bis
        x_pre, f_pre = x_cur, f_cur
        x_cur += s_cur if abs(s_cur) > delta else math.copysign(delta, s_bis)
        f_cur = _probit_gap(reach(x_cur), power)
    raise ArithmeticError("the least drop's search did not converge")


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
