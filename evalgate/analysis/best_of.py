"""The best of N noisy runs: what picking the highest of N scores of the same prompt is worth
by chance (the expected maximum of N standard normals, its quantiles, and a simulation)."""

from __future__ import annotations

import math

import numpy as np

from evalgate.analysis.checks import check_probability
from evalgate.analysis.intervals import standard_error
from evalgate.analysis.lazy_scipy import integrate, stats


def expected_max_normal(n: int) -> float:
    """``E[max of n iid standard normals]`` by numerical integration.

    The max has density ``n * phi(x) * Phi(x)**(n-1)``, so the mean is
    ``∫ x * n * phi(x) * Phi(x)**(n-1) dx`` (David & Nagaraja 2003, "Order Statistics", eq.
    2.1.5), evaluated with ``scipy.integrate.quad``. Known: n=400 -> 2.97.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    if n == 1:
        return 0.0

    def integrand(x: float) -> float:
        # log Phi keeps Phi(x)**(n-1) from underflowing in the left tail for large n.
        log_density = math.log(n) + stats.norm.logpdf(x) + (n - 1) * stats.norm.logcdf(x)
        return float(x * math.exp(log_density))

    # quad over (-inf, inf) can step over a narrow peak far from 0, so integrate over a finite
    # range holding all but ~1e-20 of the mass and tell quad where the peak is.
    low = -10.0
    high = float(stats.norm.isf(1e-20 / n)) + 1.0
    peak = max_normal_quantile(n, 0.5)
    value, _ = integrate.quad(integrand, low, high, points=[peak], limit=200)
    return float(value)


def max_normal_quantile(n: int, q: float) -> float:
    """The ``q``-quantile of the max of ``n`` iid standard normals: ``Phi^-1(q ** (1/n))``.

    ``P(max <= x) = Phi(x)**n``. Computed as ``isf(-expm1(log(q)/n))`` so that ``1 - q**(1/n)``
    keeps its digits when ``n`` is large. Known: n=400, q=0.95 -> 3.66.
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    check_probability("q", q)
    return float(stats.norm.isf(-math.expm1(math.log(q) / n)))


def simulate_best_of(
    n_candidates: int,
    true_score: float,
    n_cases: int,
    per_case_sd: float,
    seed: int,
    n_sims: int = 20_000,
) -> tuple[float, float]:
    """Monte Carlo mean and 95th percentile of the best observed score of equal candidates.

    Every candidate is truly worth ``true_score`` and is observed as
    ``true_score + N(0, SE**2)`` with ``SE = per_case_sd / sqrt(n_cases)``; picking the best of
    ``n_candidates`` inflates the winner by about ``SE * E[max of n normals]``
    (:func:`expected_max_normal`). The draws are brute force rather than through the max's
    distribution, so the simulation is an independent check on the closed forms. Known:
    SE 0.0233 (0.33 on 200 cases), 400 candidates worth 0.79 -> mean 0.859, 95th pct 0.875.
    """
    if n_candidates < 1:
        raise ValueError(f"n_candidates must be >= 1, got {n_candidates!r}")
    if n_sims < 1:
        raise ValueError(f"n_sims must be >= 1, got {n_sims!r}")
    se = standard_error(per_case_sd, n_cases)
    rng = np.random.default_rng(seed)
    best = np.empty(n_sims, dtype=np.float64)
    rows = max(1, 2**20 // n_candidates)
    for start in range(0, n_sims, rows):
        size = min(rows, n_sims - start)
        best[start : start + size] = rng.standard_normal((size, n_candidates)).max(axis=1)
    best = true_score + se * best
    return (float(np.mean(best)), float(np.quantile(best, 0.95)))
