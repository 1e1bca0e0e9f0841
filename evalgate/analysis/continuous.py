"""Tests and intervals on continuous paired differences: the sign-flip permutation test,
Wilcoxon's signed-rank test (Pratt's treatment of zeros) and the cluster bootstrap. numpy and
scipy (imported on first use) do the work; the gate imports this module only for scores that
are not pass/fail."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

from evalgate.analysis.checks import check_probability
from evalgate.analysis.lazy_scipy import stats

Alternative = Literal["less", "greater", "two-sided"]


BootstrapMethod = Literal["percentile", "bca"]


#: Number of nonzero differences up to which the permutation test enumerates all 2**k sign flips.
EXACT_PERMUTATION_MAX = 16


class BootstrapInterval(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    low: float
    high: float
    se: float  # the standard deviation of the bootstrap distribution


def cluster_bootstrap(
    counts: Sequence[Sequence[float]],
    statistic: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    method: BootstrapMethod = "percentile",
) -> BootstrapInterval:
    """A bootstrap interval of a statistic of summed counts, resampling whole clusters.

    Each row of ``counts`` is one cluster's counts (a group's cells of a table, say; a row per
    item when items are independent). A resample draws as many rows as there are, with
    replacement, and sums them; ``statistic`` maps summed counts of shape ``(..., k)`` to the
    statistic, shape ``(...)``. Resampling clusters rather than rows' parts keeps together what
    is correlated within one. ``scipy.stats.bootstrap`` does the resampling (seeded, so the
    interval is the same each time), with the percentile or the BCa interval.
    """
    check_probability("confidence", confidence)
    rows = np.asarray(counts, dtype=np.float64)
    if rows.ndim != 2 or len(rows) == 0:
        raise ValueError("counts must be a non-empty table of clusters by counts")

    def of(index: NDArray[np.float64], axis: int = -1) -> NDArray[np.float64]:
        picked = rows[np.asarray(index, dtype=np.intp)]  # (..., clusters, k)
        return statistic(picked.sum(axis=-2))

    if method == "bca" and len(rows) > 1:
        # BCa's acceleration is 0 / 0 when every jackknife value is the same (a table such as
        # (0, m, m, 0)); scipy would answer NaN, or noise from rounding: the percentile
        # interval stands in.
        leave_out = np.array([[j for j in range(len(rows)) if j != i] for i in range(len(rows))])
        jackknife = of(leave_out)
        if np.ptp(jackknife) <= 1e-9 * max(1.0, float(np.max(np.abs(jackknife)))):
            method = "percentile"
    with warnings.catch_warnings():
        # A degenerate bootstrap (scipy's DegenerateDataWarning, a RuntimeWarning) is read below.
        warnings.simplefilter("ignore", RuntimeWarning)
        result = stats.bootstrap(
            (np.arange(len(rows)),),
            of,
            vectorized=True,
            n_resamples=resamples,
            confidence_level=confidence,
            method="BCa" if method == "bca" else "percentile",
            rng=np.random.default_rng(seed),
        )
    low, high = (float(x) for x in result.confidence_interval)
    if not (math.isfinite(low) and math.isfinite(high)):
        tail = (1.0 - confidence) / 2.0
        low, high = (float(x) for x in np.quantile(result.bootstrap_distribution, [tail, 1 - tail]))
    return BootstrapInterval(low=low, high=high, se=float(result.standard_error))


def _tail_count(
    sums: NDArray[np.float64], observed: float, tol: float, alternative: Alternative
) -> int:
    if alternative == "less":
        return int(np.count_nonzero(sums <= observed + tol))
    if alternative == "greater":
        return int(np.count_nonzero(sums >= observed - tol))
    return int(np.count_nonzero(np.abs(sums) >= abs(observed) - tol))


def paired_permutation_test(
    diffs: Sequence[float],
    seed: int,
    n_resamples: int = 10_000,
    alternative: Alternative = "less",
) -> float:
    """Sign-flip permutation test on the mean paired difference (candidate - baseline).

    Under H0 each difference is as likely to be ``+d`` as ``-d``, so the null distribution of the
    mean is that of ``sum(s_i * d_i) / n`` over random signs ``s_i = ±1`` (Fisher 1935, "The
    Design of Experiments", section 21; Good 2005, "Permutation, Parametric and Bootstrap Tests
    of Hypotheses", ch. 3). Zero differences do not change under a flip and are left out.

    * ``k <= 16`` nonzero differences: all ``2**k`` sign vectors are enumerated and
      ``p = count / 2**k`` (the observed signs are one of them, so ``p >= 2**-k``).
    * otherwise ``n_resamples`` seeded random sign vectors, ``p = (1 + count) / (1 + n_resamples)``
      (Phipson & Smyth 2010, "Permutation p-values should never be zero", SAGAMB 9:39).

    ``count`` is the number of sign vectors at least as extreme as the observed one: sum ``<=``
    observed for ``"less"`` (candidate worse), ``>=`` for ``"greater"``, ``|sum| >= |observed|``
    for ``"two-sided"``. All differences zero (or none): ``1.0``.
    """
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples!r}")
    d = np.asarray(diffs, dtype=np.float64)
    if not np.all(np.isfinite(d)):
        raise ValueError("diffs must be finite numbers")
    magnitudes = np.abs(d[d != 0.0])
    k = int(magnitudes.size)
    if k == 0:
        return 1.0
    observed = float(np.sum(d))
    # Sums of the same terms in another order differ by rounding; a tie must still count as a tie.
    tol = 1e-10 * float(np.sum(magnitudes))

    if k <= EXACT_PERMUTATION_MAX:
        bits = (np.arange(1 << k, dtype=np.int64)[:, None] >> np.arange(k, dtype=np.int64)) & 1
        sums = (1.0 - 2.0 * bits) @ magnitudes
        return _tail_count(sums, observed, tol, alternative) / (1 << k)

    rng = np.random.default_rng(seed)
    count = 0
    # Chunks bound memory at about a million signs whatever n_resamples and k are.
    rows = max(1, 2**20 // k)
    done = 0
    while done < n_resamples:
        size = min(rows, n_resamples - done)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, k))
        count += _tail_count(signs @ magnitudes, observed, tol, alternative)
        done += size
    return (1 + count) / (1 + n_resamples)


def wilcoxon_pratt(diffs: Sequence[float], alternative: Alternative = "less") -> float:
    """Wilcoxon signed-rank test on paired differences, zeros handled by Pratt's method.

    The p-value of ``scipy.stats.wilcoxon(diffs, zero_method="pratt", alternative=alternative)``
    (default ``method="auto"``). Pratt (1959, "Remarks on zeros and ties in the Wilcoxon signed
    rank procedures", JASA 54:655-667) ranks the zeros with the rest and then drops their ranks,
    which keeps the test consistent when many cases score the same under both prompts. All
    differences zero (or none): ``1.0``.

    One branch is computed here instead of by scipy, with the same result: for at most 13
    differences with ties or zeros (the usual case for pass/fail scores), scipy (1.17) runs an
    exact sign-flip permutation test of ``W+`` that calls its statistic once for each of the
    ``2**n`` sign vectors, which takes seconds. :func:`_pratt_exact` does the same enumeration
    as one matrix product (tests check it against scipy).
    """
    d = np.asarray(diffs, dtype=np.float64)
    if d.size == 0 or not np.any(d != 0.0):
        return 1.0
    has_ties = np.unique(np.abs(d)).size < d.size
    if d.size <= _SCIPY_WILCOXON_PERMUTATION_MAX and (has_ties or np.any(d == 0.0)):
        return _pratt_exact(d, alternative)
    result = stats.wilcoxon(d, zero_method="pratt", alternative=alternative)
    return float(min(1.0, max(0.0, result.pvalue)))


# scipy.stats.wilcoxon(method="auto") switches to an exact permutation test at this size.
_SCIPY_WILCOXON_PERMUTATION_MAX = 13


def _pratt_exact(d: NDArray[np.float64], alternative: Alternative) -> float:
    """Exact sign-flip distribution of Pratt's ``W+``, as scipy's ``permutation_test`` gives it.

    ``W+`` is the sum of the ranks of ``|d|`` (zeros ranked, average ranks for ties) over the
    positive ``d``. Flipping signs leaves the ranks alone and zeros at zero, so ``W+`` over all
    sign vectors is ``bits @ ranks`` for the nonzero entries. Two-sided is scipy's convention,
    ``min(1, 2 * min(p_less, p_greater))``.
    """
    ranks = stats.rankdata(np.abs(d))
    nonzero = d != 0.0
    r = ranks[nonzero]
    observed = float(np.sum(ranks[d > 0.0]))
    k = int(r.size)
    bits = (np.arange(1 << k, dtype=np.int64)[:, None] >> np.arange(k, dtype=np.int64)) & 1
    null = bits @ r
    # Ranks are multiples of 1/2 and the sums are exact, so ties compare exactly.
    total = 1 << k
    p_less = int(np.count_nonzero(null <= observed)) / total
    p_greater = int(np.count_nonzero(null >= observed)) / total
    if alternative == "less":
        return p_less
    if alternative == "greater":
        return p_greater
    return min(1.0, 2.0 * min(p_less, p_greater))
