"""The exact distributions the gate's tests need, in plain Python: the binomial's mass and
tail, the hypergeometric's mass, the regularised incomplete beta function and Student's t.

The gate runs on every pull request, and importing numpy and scipy.stats for a handful of
binomial tails costs more than a second of CPU; these few functions give the same numbers
(to about 1e-13, tests/analysis/test_distributions.py checks them against scipy on a grid)
with the standard library alone. The binomial tail and t come from the regularised
incomplete beta function ``I_x(a, b)``, evaluated by its continued fraction (DLMF 8.17.22,
Lentz's algorithm as in Press et al. 2007, "Numerical Recipes", 3rd ed., sec. 6.4), which
keeps its relative accuracy far into either tail.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

_EPS = 1e-16
#: Trials up to which the binomial at p = 1/2 is summed in exact integers.
EXACT_HALF_MAX = 200
_TINY = 1e-300
_MAX_TERMS = 100_000


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of ``I_x(a, b)`` (modified Lentz), for x < (a + 1) / (a + b + 2),
    where it converges fast."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, _MAX_TERMS):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"the incomplete beta fraction did not converge at a={a}, b={b}, x={x}")


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function ``I_x(a, b)`` for a, b > 0, x in [0, 1]."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


# Stirling's series for log(n!) - log(sqrt(2 pi n) (n/e)^n), and the deviance term, as in
# Loader (2000, "Fast and accurate computation of binomial probabilities"): the binomial's
# mass to a few ulps at any n, where a difference of log-gammas loses digits as n grows.
_S = (1.0 / 12, 1.0 / 360, 1.0 / 1260, 1.0 / 1680, 1.0 / 1188)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _stirling_error(n: float) -> float:
    if n <= 15.0:
        return math.lgamma(n + 1.0) - (n + 0.5) * math.log(n) + n - _LOG_SQRT_2PI
    nn = n * n
    return (_S[0] - (_S[1] - (_S[2] - (_S[3] - _S[4] / nn) / nn) / nn) / nn) / n


def _deviance(x: float, mean: float) -> float:
    """``x log(x / mean) + mean - x``, without the cancellation when x is near the mean."""
    if abs(x - mean) < 0.1 * (x + mean):
        v = (x - mean) / (x + mean)
        s = (x - mean) * v
        term = 2.0 * x * v
        j = 1
        while True:
            term *= v * v
            nxt = s + term / (2 * j + 1)
            if nxt == s:
                return s
            s, j = nxt, j + 1
    return x * math.log(x / mean) + mean - x


def binom_pmf(k: float, n: int, p: float) -> float:
    """``P(X = k)`` for ``X ~ Bin(n, p)`` (0 off the support and at a fractional ``k``)."""
    if k < 0 or k > n or k != math.floor(k):
        return 0.0
    x = int(k)
    if p <= 0.0:
        return 1.0 if x == 0 else 0.0
    if p >= 1.0:
        return 1.0 if x == n else 0.0
    if p == 0.5 and n <= EXACT_HALF_MAX:
        return math.comb(n, x) / (1 << n)
    q = 1.0 - p
    if n == 0:
        return 1.0
    if x == 0:
        return math.exp(-_deviance(n, n * q) - n * p if p < 0.1 else n * math.log(q))
    if x == n:
        return math.exp(-_deviance(n, n * p) - n * q if q < 0.1 else n * math.log(p))
    log_mass = (
        _stirling_error(n)
        - _stirling_error(x)
        - _stirling_error(n - x)
        - _deviance(x, n * p)
        - _deviance(n - x, n * q)
    )
    return math.exp(log_mass - 0.5 * (math.log(2.0 * math.pi * x) + math.log1p(-x / n)))


def binom_sf(k: float, n: int, p: float) -> float:
    """``P(X > k)`` for ``X ~ Bin(n, p)``: ``I_p(k + 1, n - k)`` (DLMF 8.17.5), whose front
    factor ``p^(k+1) (1-p)^(n-k) / B(k + 1, n - k)`` is ``(n - k) p P(X = k)``."""
    k = math.floor(k)
    if k < 0:
        return 1.0
    if k >= n:
        return 0.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    if p == 0.5 and n <= EXACT_HALF_MAX:
        # The sign test's tails: whole numbers over 2^n, so a p-value of exactly 1/2 or 1/32
        # is exactly that (a ratio of integers is correctly rounded).
        if k >= n // 2:
            return sum(math.comb(n, j) for j in range(k + 1, n + 1)) / (1 << n)
        return 1.0 - sum(math.comb(n, j) for j in range(k + 1)) / (1 << n)
    a, b = k + 1.0, float(n - k)
    front = (n - k) * p * binom_pmf(k, n, p)
    if p < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, p) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - p) / b


def hypergeom_pmf(x: int, total: int, successes: int, draws: int) -> float:
    """``P(X = x)`` for ``draws`` items drawn without replacement from ``total`` of which
    ``successes`` succeed: exact integer counts, divided once."""
    if x < 0 or x > draws or x > successes or draws - x > total - successes:
        return 0.0
    ways = math.comb(successes, x) * math.comb(total - successes, draws - x)
    return ways / math.comb(total, draws)


def t_cdf(x: float, df: float) -> float:
    """``P(T <= x)`` for Student's t on ``df`` degrees of freedom (DLMF 8.17.2 with
    ``I_{df / (df + x^2)}(df / 2, 1 / 2)``, the two tails' share, or beside the centre its
    complement ``I_{x^2 / (df + x^2)}(1 / 2, df / 2)``)."""
    if df <= 0:
        raise ValueError(f"df must be > 0, got {df!r}")
    if math.isnan(x):
        return math.nan
    if math.isinf(x):
        return 1.0 if x > 0 else 0.0
    x2 = x * x
    if x2 < df:
        # Near the centre df / (df + x^2) rounds towards 1 and the tails' form loses the
        # digits; the centre's share, I_{x^2 / (df + x^2)}(1/2, df / 2), keeps them.
        centre = 0.5 * betainc(0.5, df / 2.0, x2 / (df + x2))
        return 0.5 + centre if x > 0 else 0.5 - centre
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + x2))
    return 1.0 - tail if x > 0 else tail


def t_pdf(x: float, df: float) -> float:
    """The density of Student's t on ``df`` degrees of freedom at ``x``."""
    half = (df + 1.0) / 2.0
    log_norm = math.lgamma(half) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - half * math.log1p(x * x / df))


def _t_start(q: float, df: float) -> float:
    """A first guess at the ``q`` quantile of t (q > 1/2): exact for df 1 and 2, else the
    Cornish-Fisher expansion about the normal quantile (Abramowitz and Stegun 26.7.5)."""
    if df == 1.0:
        return math.tan(math.pi * (q - 0.5))
    if df == 2.0:
        return (2.0 * q - 1.0) / math.sqrt(2.0 * q * (1.0 - q))
    z = NormalDist().inv_cdf(q)
    z2 = z * z
    g1 = z * (z2 + 1.0) / 4.0
    g2 = z * ((5.0 * z2 + 16.0) * z2 + 3.0) / 96.0
    g3 = z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / 384.0
    g4 = z * ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / 92160.0
    return z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df


@functools.lru_cache(maxsize=256)
def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t on ``df`` degrees of freedom: the least double ``x``
    with ``t_cdf(x) >= q``. Newton's steps on :func:`t_cdf` inside a bracket that each step
    narrows (a step that leaves it bisects instead), then bisection over the last few ulps.
    Cached: the gate asks for the same two or three quantiles over and over."""
    if not 0.0 < q < 1.0:
        if q == 0.0:
            return -math.inf
        if q == 1.0:
            return math.inf
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    if q <= 0.5:
        return 0.0 if q == 0.5 else -t_ppf(1.0 - q, df)
    lo, hi = 0.0, math.inf
    x = _t_start(q, df)
    for _ in range(200):
        gap = t_cdf(x, df) - q
        if gap < 0.0:
            lo = x
        else:
            hi = x
        density = t_pdf(x, df)
        step = gap / density if density > 0.0 else math.inf
        nxt = x - step
        if abs(nxt - x) <= 4.0 * _EPS * abs(x):
            break
        if not lo < nxt < hi:
            nxt = 2.0 * lo + 1.0 if math.isinf(hi) else (lo + hi) / 2.0
            if nxt in (lo, hi):
                break
        x = nxt
    # To the bit: a bracket a few ulps wide around x (wider while the cdf is flat there), then
    # bisection to two adjacent doubles.
    width = math.ulp(x)
    lo, hi = x, x
    while t_cdf(hi, df) < q:
        hi, width = x + width, 2.0 * width
    while lo > 0.0 and t_cdf(lo, df) >= q:
        lo, width = max(0.0, x - width), 2.0 * width
    while True:
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            return hi
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
