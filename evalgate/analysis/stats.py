"""The statistics behind the gates: intervals, paired tests, noise models and power.

This is the only module of evalgate that imports scipy, so the rest of the package can be read,
typed and tested without it. Every function is pure: numbers in, floats or small frozen models
out. Anything random takes an explicit ``seed`` and draws from ``numpy.random.default_rng(seed)``,
so a report computed twice from the same run is identical.

Vocabulary used throughout, for a candidate prompt compared case by case with a baseline:

* *broken* (``b``): cases the baseline passed and the candidate fails;
* *fixed* (``c``): cases the baseline failed and the candidate passes;
* *flip rate* (``f``): the share of cases whose pass/fail changes between two runs of the *same*
  prompt, i.e. the noise floor of the model under test.
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Callable, Sequence
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict


class _LazyModule:
    """A scipy module imported on first use: most CLI calls and the action's start-up reach
    their first model request without paying for scipy's import (about 1.5 s of CPU)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


integrate: Any = _LazyModule("scipy.integrate")
special: Any = _LazyModule("scipy.special")
stats: Any = _LazyModule("scipy.stats")
_ufuncs: Any = _LazyModule("scipy.special._ufuncs")


# The binomial tail and mass, and Student's t, as the gate computes them on every pull
# request. scipy.stats.binom's sf and pmf are Boost's binomial ufuncs that scipy.special holds
# (``_binom_sf``, ``_binom_pmf``) with the support's bounds around them, and t's cdf and ppf
# are scipy.special's stdtr and stdtrit: called directly, they give the same numbers bit for
# bit (tests/analysis/test_stats.py checks it on a grid) without importing scipy.stats, which
# alone costs the PR job's process 47 MB more than scipy.special.
def _binom_sf(k: Any, n: Any, p: Any) -> Any:
    """``scipy.stats.binom.sf(k, n, p)``: P(X > k)."""
    k = np.floor(np.asarray(k, dtype=np.float64))
    inside = _ufuncs._binom_sf(np.clip(k, 0, n), n, p)
    return np.where(k < 0, 1.0, np.where(k >= n, 0.0, inside))[()]


def _binom_pmf(k: Any, n: Any, p: Any) -> Any:
    """``scipy.stats.binom.pmf(k, n, p)``: P(X = k)."""
    k = np.asarray(k, dtype=np.float64)
    inside = _ufuncs._binom_pmf(np.clip(k, 0, n), n, p)
    return np.where((k < 0) | (k > n) | (k != np.floor(k)), 0.0, inside)[()]


def _t_ppf(q: float, df: float) -> float:
    """``scipy.stats.t.ppf(q, df)``."""
    return float(special.stdtrit(df, q))


def _t_cdf(x: float, df: float) -> float:
    """``scipy.stats.t.cdf(x, df)``."""
    return float(special.stdtr(df, x))


__all__ = [
    "CASES_CAP",
    "MDE_TOLERANCE",
    "Alternative",
    "BootstrapMethod",
    "PairedDifference",
    "broke_more_than_noise",
    "cases_for_mde",
    "cluster_bootstrap",
    "clustered_se",
    "expected_max_normal",
    "flip_rate",
    "holm_adjust",
    "max_normal_quantile",
    "mean_and_se",
    "minimum_detectable_effect",
    "paired_difference",
    "paired_permutation_test",
    "sign_test_two_sided",
    "sign_test_worse",
    "simulate_best_of",
    "standard_error",
    "wilcoxon_pratt",
    "wilson_interval",
]

Alternative = Literal["less", "greater", "two-sided"]
BootstrapMethod = Literal["percentile", "bca"]

#: Largest case count :func:`cases_for_mde` will recommend; beyond it the answer is "not reachable".
CASES_CAP = 1_000_000

#: Absolute tolerance, in units of the effect size, of :func:`minimum_detectable_effect`.
MDE_TOLERANCE = 1e-5

#: Number of nonzero differences up to which the permutation test enumerates all 2**k sign flips.
EXACT_PERMUTATION_MAX = 16

# Binomial tail mass ignored on each side when summing the power over m = b + c. 1e-15 is below
# double precision relative to a power of order 0.1-1, so the truncated sum equals the full one,
# while n = 1,000,000 needs a few thousand terms instead of a million.
_TAIL = 1e-15

# One-sided sign-test p-values are dyadic rationals computed in floating point; this relative
# slack makes a p-value equal to alpha (e.g. 1/32 at alpha = 0.03125) count as p <= alpha.
_P_SLACK = 1e-12


# --------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------


def _check_probability(name: str, value: float, *, open_low: bool = True) -> None:
    low_ok = value > 0.0 if open_low else value >= 0.0
    if not (low_ok and value < 1.0):
        interval = "(0, 1)" if open_low else "[0, 1)"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")


def _check_count(name: str, value: int) -> None:
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")


def _two_sided_z(confidence: float) -> float:
    _check_probability("confidence", confidence)
    # The standard library's normal quantile: no scipy import for an interval.
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


# --------------------------------------------------------------------------------------------
# Intervals and standard errors
# --------------------------------------------------------------------------------------------


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion ``successes / n``.

    With ``p = successes / n`` and ``z`` the two-sided normal quantile for ``confidence``::

        centre = (p + z²/(2n)) / (1 + z²/n)
        half   = z / (1 + z²/n) * sqrt(p(1 - p)/n + z²/(4n²))

    (Wilson 1927, "Probable inference, the law of succession, and statistical inference",
    JASA 22:209-212; Agresti & Coull 1998, eq. 2.) ``successes`` may be fractional, e.g. the
    sum of per-case mean scores in [0, 1]. ``n == 0`` carries no information: ``(0.0, 1.0)``.
    """
    _check_count("n", n)
    if n == 0:
        return (0.0, 1.0)
    if not 0.0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n={n}], got {successes!r}")
    z = _two_sided_z(confidence)
    p = successes / n
    z2n = z * z / n
    centre = (p + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * math.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n))
    # Clamp only against rounding: mathematically the interval is always inside [0, 1].
    return (max(0.0, centre - half), min(1.0, centre + half))


def standard_error(per_case_sd: float, n: int) -> float:
    """Standard error of a mean of ``n`` independent cases: ``sd / sqrt(n)``."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    if per_case_sd < 0:
        raise ValueError(f"per_case_sd must be >= 0, got {per_case_sd!r}")
    return per_case_sd / math.sqrt(n)


def clustered_se(residuals: Sequence[float], groups: Sequence[str]) -> float:
    """Cluster-robust standard error of a mean, given residuals ``r_i = x_i - mean(x)``.

    Miller (2024), "Adding Error Bars to Evals: A Statistical Approach to Language Model
    Evaluations", arXiv:2411.00640, clustered standard errors (with the usual C/(C-1) factor)::

        SE = sqrt( C/(C-1) * sum_over_clusters (sum of r_i in the cluster)² ) / n

    where ``C`` is the number of clusters and ``n`` the number of observations. Questions that
    share a passage, a template or a source are correlated, and ignoring that understates the SE.

    With fewer than two clusters the between-cluster spread cannot be estimated at all, so the
    function falls back to treating every observation as its own cluster (``C = n``), which is
    exactly the ordinary sample SE ``sqrt(sum r² / (n(n-1)))`` = ``sqrt(var_ddof1 / n)``; this
    keeps ``mean_and_se(x, groups)`` equal to ``mean_and_se(x)`` in that case. That fallback
    understates the uncertainty if the observations really are correlated. A single observation
    gives ``nan``: one number says nothing about spread, and NaN compares false, so no gate can
    call a one-case difference significant.
    """
    if len(residuals) != len(groups):
        raise ValueError(
            f"residuals and groups must have the same length, got {len(residuals)} and "
            f"{len(groups)}"
        )
    n = len(residuals)
    if n == 0:
        raise ValueError("clustered_se needs at least one residual")
    r = np.asarray(residuals, dtype=np.float64)
    labels = list(dict.fromkeys(groups))
    if len(labels) < 2:
        if n < 2:
            return math.nan
        return float(math.sqrt(float(np.sum(r * r)) / (n * (n - 1))))
    index = {label: i for i, label in enumerate(labels)}
    codes = np.fromiter((index[g] for g in groups), dtype=np.intp, count=n)
    sums = np.bincount(codes, weights=r, minlength=len(labels))
    c = len(labels)
    return float(math.sqrt(c / (c - 1) * float(np.sum(sums * sums))) / n)


def mean_and_se(
    values: Sequence[float], groups: Sequence[str] | None = None
) -> tuple[float, float]:
    """Mean of ``values`` and its standard error.

    Without ``groups``: the ordinary sample SE ``sqrt(var_ddof1 / n)`` (``nan`` for a single
    value). With ``groups`` (one label per value): the cluster-robust SE of :func:`clustered_se`.
    """
    n = len(values)
    if n == 0:
        raise ValueError("mean_and_se needs at least one value")
    x = np.asarray(values, dtype=np.float64)
    mean = float(np.mean(x))
    residuals = x - mean
    if groups is not None:
        return (mean, clustered_se(residuals.tolist(), groups))
    if n < 2:
        return (mean, math.nan)
    return (mean, float(math.sqrt(float(np.sum(residuals * residuals)) / (n * (n - 1)))))


class PairedDifference(BaseModel):
    """Mean of candidate - baseline per case, its SE and a normal confidence interval."""

    model_config = ConfigDict(frozen=True)

    mean: float
    se: float
    low: float
    high: float
    n: int


def paired_difference(
    candidate: Sequence[float],
    baseline: Sequence[float],
    groups: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> PairedDifference:
    """Paired difference of means, ``mean(candidate - baseline) ± q * SE``, inside [-1, 1].

    Pairing removes the between-case variance that both prompts share, so the interval is
    tighter than one for two independent means whenever the prompts' scores are positively
    correlated across cases (Miller 2024, arXiv:2411.00640, "paired differences"). The SE is
    the ordinary one, or cluster-robust when ``groups`` is given (:func:`mean_and_se`); ``q``
    is the two-sided normal quantile for ``confidence``, or with ``C >= 2`` clusters the t
    quantile with ``C - 1`` degrees of freedom. The interval is clipped to [-1, 1], the range
    of a difference of two scores in [0, 1].
    """
    if len(candidate) != len(baseline):
        raise ValueError(
            f"candidate and baseline must have the same length, got {len(candidate)} and "
            f"{len(baseline)}"
        )
    diffs = np.asarray(candidate, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    mean, se = mean_and_se(diffs.tolist(), groups)
    clusters = len(set(groups)) if groups is not None else 0
    if clusters >= 2:
        # Few clusters make the sandwich SE noisy: t with C - 1 degrees of freedom (Cameron &
        # Miller 2015, "A practitioner's guide to cluster-robust inference", JHR 50:317, sec. VI).
        q = float(_t_ppf(0.5 + confidence / 2.0, clusters - 1))
    else:
        q = _two_sided_z(confidence)
    # Scores lie in [0, 1], so a difference of means lies in [-1, 1]: so does its interval.
    low = max(-1.0, mean - q * se) if math.isfinite(se) else -1.0
    high = min(1.0, mean + q * se) if math.isfinite(se) else 1.0
    return PairedDifference(mean=mean, se=se, low=low, high=high, n=len(candidate))


# --------------------------------------------------------------------------------------------
# Sign tests on broken / fixed counts
# --------------------------------------------------------------------------------------------


def sign_test_two_sided(fixed: int, broken: int) -> float:
    """Exact two-sided binomial sign test on the changed cases.

    Under H0 (the change does nothing) each changed case is equally likely to be fixed or broken,
    so ``fixed ~ Bin(fixed + broken, 1/2)``; the p-value is
    ``scipy.stats.binomtest(k, fixed + broken, 0.5, alternative="two-sided").pvalue``. At
    p = 1/2 this is ``min(1, 2 * P(X <= min(fixed, broken)))``. No changed cases: ``1.0``.
    """
    _check_count("fixed", fixed)
    _check_count("broken", broken)
    m = fixed + broken
    if m == 0:
        return 1.0
    # Passing the smaller count makes the result exactly symmetric in the two arguments.
    k = min(fixed, broken)
    return float(min(1.0, stats.binomtest(k, m, 0.5, alternative="two-sided").pvalue))


def sign_test_worse(broken: int, fixed: int, mid_p: bool = False) -> float:
    """One-sided exact McNemar test that the candidate is worse than the baseline.

    With ``X ~ Bin(b + c, 1/2)`` (b = broken, c = fixed), ``p = P(X >= b)``; the mid-p variant
    is ``P(X > b) + P(X = b) / 2`` (Lancaster 1961; Fagerland, Lydersen & Laake 2013, "The
    McNemar test for binary matched-pairs data: mid-p and asymptotic are better than exact
    conditional", BMC Med Res Methodol 13:91). ``b + c == 0``: ``1.0``.
    """
    _check_count("broken", broken)
    _check_count("fixed", fixed)
    m = broken + fixed
    if m == 0:
        return 1.0
    if mid_p:
        p = _binom_sf(broken, m, 0.5) + 0.5 * _binom_pmf(broken, m, 0.5)
    else:
        p = _binom_sf(broken - 1, m, 0.5)
    return float(min(1.0, max(0.0, p)))


def broke_more_than_noise(broken: int, flips: int, repeats: int) -> float:
    """P-value that the candidate broke more cases than run-to-run noise explains.

    ``p = P(Bin(b + F, 1/(1 + R)) >= b)`` with ``b = broken`` and ``F`` the cases that flipped
    over ``R`` repeats of the baseline. This is the conditional test for comparing two Poisson
    counts (Przyborowski & Wilenski 1940): given ``b + F``, ``b ~ Bin(b + F, λ_b / (λ_b + λ_F))``.

    Under H0 the candidate is the baseline plus noise. A case that passes with probability π is
    broken (baseline pass, candidate fail) with probability π(1 - π), and flips somewhere in R
    repeats with probability 1 - π^R - (1 - π)^R, which is R·π(1 - π) when π is near 0 or 1
    and exactly 2·π(1 - π) for R = 2; so λ_F ≈ R·λ_b and the share is ``1/(1 + R)``. (The
    share ``1/(1 + 2R)`` first specified assumed twice as many flips; in simulation at f = 0.10
    it warned on 56-61% of unchanged prompts.) ``broken == 0``: ``1.0``.
    """
    _check_count("broken", broken)
    _check_count("flips", flips)
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats!r}")
    if broken == 0:
        return 1.0
    share = 1.0 / (1.0 + repeats)
    return float(min(1.0, max(0.0, _binom_sf(broken - 1, broken + flips, share))))


def flip_rate(outcomes: Sequence[Sequence[bool]]) -> float:
    """Share of cases whose pass/fail differs between two runs of the same prompt.

    ``outcomes[case][repeat]``: the chance that two repeats of a case, drawn at random, differ,
    averaged over the cases. A case with ``k`` passes out of ``R`` differs in ``k(R - k)`` of its
    ``R(R - 1)/2`` pairs of repeats. With every case repeated R times this is the average over
    the pairs of repeats of the share of cases that differ, ``sum k(R - k) / (cases R(R-1)/2)``.
    Cases may have unequal repeats (a merged or edited run): one with fewer than two says
    nothing of its noise and is left out. No cases: ``0.0``; none with two repeats: ValueError.
    """
    if len(outcomes) == 0:
        return 0.0
    rates = []
    for row in outcomes:
        r = len(row)
        if r >= 2:
            k = sum(bool(x) for x in row)
            rates.append(k * (r - k) / (r * (r - 1) / 2.0))
    if not rates:
        raise ValueError("flip_rate needs at least 2 repeats of some case")
    return float(np.mean(rates))


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
    _check_probability("confidence", confidence)
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


# --------------------------------------------------------------------------------------------
# Power of the one-sided sign test
# --------------------------------------------------------------------------------------------


def _critical_broken(m: NDArray[np.int64], alpha: float) -> NDArray[np.int64]:
    """Smallest ``b`` with ``P(Bin(m, 1/2) >= b) <= alpha``, for each ``m`` (``m + 1``: never).

    Rejection is non-strict (``p <= alpha``), the same rule as comparing
    :func:`sign_test_worse` with alpha. For alpha = 0.05 strict and non-strict agree, because a
    one-sided sign-test p-value is a multiple of ``2**-m`` and ``0.05 * 2**m`` is never an
    integer.
    """
    limit = alpha * (1.0 + _P_SLACK)
    # scipy's discrete isf is the smallest k with sf(k) <= alpha, and sf(k) = P(X >= k + 1).
    start = np.asarray(stats.binom.isf(alpha, m, 0.5), dtype=np.float64)
    k: NDArray[np.int64] = np.where(np.isnan(start), m, start).astype(np.int64) + 1
    k = np.clip(k, 0, m + 1)
    # isf works in floating point; walk each k to the exact boundary of the rule above.
    while True:
        lower = (k > 0) & (_binom_sf(k - 2, m, 0.5) <= limit)
        if not lower.any():
            break
        k = k - lower
    while True:
        higher = (k <= m) & (_binom_sf(k - 1, m, 0.5) > limit)
        if not higher.any():
            break
        k = k + higher
    return k


def _sign_test_power(n: int, flip: float, drop: float, alpha: float) -> float:
    """Exact power of the one-sided sign test (:func:`minimum_detectable_effect` model)."""
    changed = flip + drop
    if changed <= 0.0:
        # No case can change, so b = c = 0 and the p-value is 1: never rejects for alpha < 1.
        return 0.0
    changed = min(changed, 1.0)
    p_broken = min(1.0, (flip / 2.0 + drop) / changed)
    lo = int(stats.binom.ppf(_TAIL, n, changed))
    hi = int(stats.binom.isf(_TAIL, n, changed))
    m = np.arange(max(0, lo - 1), min(n, hi + 1) + 1, dtype=np.int64)
    weight = _binom_pmf(m, n, changed)
    k = _critical_broken(m, alpha)
    reject = _binom_sf(k - 1, m, p_broken)
    return float(min(1.0, np.sum(weight * reject)))


def _check_power_args(flip: float, alpha: float, power: float) -> None:
    _check_probability("flip_rate", flip, open_low=False)
    _check_probability("alpha", alpha)
    _check_probability("power", power)


def minimum_detectable_effect(
    n: int, flip_rate: float, alpha: float = 0.05, power: float = 0.80
) -> float:
    """Smallest drop in pass rate that the one-sided exact sign test detects with ``power``.

    Model: each of ``n`` paired cases independently is broken with probability ``f/2 + d``,
    fixed with probability ``f/2`` and unchanged otherwise (a trinomial; ``f`` is the flip rate,
    so with ``d = 0`` the candidate is the baseline plus noise). The test rejects when
    ``P(Bin(b + c, 1/2) >= b) <= alpha`` (:func:`sign_test_worse`, non-strict; for alpha = 0.05
    strict gives the same answers, see :func:`_critical_broken`). Its power is computed exactly:

        power(d) = sum_m P(M = m) * P(B >= k_crit(m) | M = m)

    with ``M = b + c ~ Bin(n, f + d)``, ``B | M = m ~ Bin(m, (f/2 + d)/(f + d))`` and
    ``k_crit(m)`` the smallest ``b`` that rejects (Lachin 1992, "Power and sample size
    evaluation for the McNemar test with application to matched case-control studies", Stat Med
    11:1239-1251, computed exactly instead of by the normal approximation).

    ``power(d)`` is non-decreasing in ``d``: raising ``d`` only turns unchanged cases into broken
    ones, and one more broken case never raises the p-value. So bisection on ``d`` in
    ``[0, 1 - f]`` finds the smallest ``d`` with ``power(d) >= power``; the result is an upper
    bound within ``MDE_TOLERANCE`` (1e-5) of it. Returns ``math.inf`` when even ``d = 1 - f``
    (every case that is not fixed by noise breaks) does not reach ``power``, e.g. ``n < 5`` at
    ``f = 0``, where no outcome gives p <= 0.05.

    Known answers (alpha 0.05, power 0.8): n=100, f=0 -> 0.066; n=30, f=0 -> 0.214;
    n=100, f=0.10 -> 0.121; n=300, f=0.10 -> 0.059; n=1000, f=0.05 -> 0.022.
    """
    _check_count("n", n)
    _check_power_args(flip_rate, alpha, power)
    return least_drop(lambda d: _sign_test_power(n, flip_rate, d, alpha), 1.0 - flip_rate, power)


def cases_for_mde(target: float, flip_rate: float, alpha: float = 0.05, power: float = 0.80) -> int:
    """Smallest number of cases whose minimum detectable effect is at most ``target``.

    Because power is non-decreasing in the drop ``d``, "MDE(n) <= target" is the same as
    "power(n, target) >= power", which needs one power evaluation per ``n`` instead of a
    bisection. The search doubles ``n`` until it qualifies, then bisects, which assumes power is
    non-decreasing in ``n``. The discrete test does not guarantee that (one more case can be a
    fixed one), but a scan of every n <= 600 for f in {0, 0.02, 0.1, 0.3} and d in
    {0.03, 0.1, 0.2} found no decrease: averaging over M = b + c smooths the sawtooth away.
    Returns ``CASES_CAP`` (1,000,000) when even that many cases fall short.
    ``minimum_detectable_effect(result, ...)`` is then ``<= target + MDE_TOLERANCE``.
    """
    _check_power_args(flip_rate, alpha, power)
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target must be in (0, 1], got {target!r}")
    # The largest possible drop is 1 - f; asking to detect more is asking to detect that.
    drop = min(target, 1.0 - flip_rate)

    def enough(n: int) -> bool:
        return _sign_test_power(n, flip_rate, drop, alpha) >= power

    return least_n(enough, 0)


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
    if not enough(CASES_CAP):
        return CASES_CAP
    lo, hi = start, min(max(2 * start, 1), CASES_CAP)
    while not enough(hi):
        lo, hi = hi, min(2 * hi, CASES_CAP)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


# --------------------------------------------------------------------------------------------
# Multiple comparisons and tests on continuous paired differences
# --------------------------------------------------------------------------------------------


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values, returned in the original order.

    Sort ascending, ``p_(1) <= ... <= p_(m)``; then
    ``adj_(i) = min(1, max_{j <= i} (m - j + 1) * p_(j))``. Rejecting where ``adj <= alpha``
    controls the family-wise error rate at alpha (Holm 1979, "A simple sequentially rejective
    multiple test procedure", Scand J Statist 6:65-70). The running maximum keeps the adjusted
    values in the same order as the raw ones.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.size == 0:
        return []
    if np.any(np.isnan(p)) or np.any(p < 0.0) or np.any(p > 1.0):
        raise ValueError(f"p-values must be in [0, 1], got {list(p_values)!r}")
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = (m - np.arange(m)) * p[order]
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(scaled))
    adjusted = np.empty(m, dtype=np.float64)
    adjusted[order] = adjusted_sorted
    return [float(x) for x in adjusted]


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


# --------------------------------------------------------------------------------------------
# Best-of-n selection ("winner's curse")
# --------------------------------------------------------------------------------------------


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
    _check_probability("q", q)
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


# --------------------------------------------------------------------------------------------
# Anytime-valid sequential test
# --------------------------------------------------------------------------------------------


def sequential_e_value(broken: int, fixed: int) -> float:
    """Mixture e-value against "the candidate is no worse", on the broken / fixed counts so far.

    Under H0 each changed case is broken with probability 1/2. The e-value mixes the likelihood
    ratio of "broken with probability theta" over theta ~ Uniform(1/2, 1)::

        E = 2 * integral_{1/2}^{1} theta^b (1 - theta)^c d theta / (1/2)^(b + c)
          = 2^(b + c + 1) * B(b + 1, c + 1) * P(Beta(b + 1, c + 1) > 1/2)

    A mixture of likelihood ratios is a nonnegative martingale under H0 with expectation 1, so
    by Ville's inequality P(E ever reaches 1/alpha) <= alpha, however often it is looked at
    (Ramdas et al. 2023, "Game-theoretic statistics and safe anytime-valid inference", sec. 3).
    A run may therefore stop as soon as E >= 1/alpha and still fail at level alpha.

    The Beta tail is ``P(Bin(b + c + 1, 1/2) <= b) = sum_{j<=b} C(b + c + 1, j) / 2^(b + c + 1)``,
    so ``E = B(b + 1, c + 1) * sum_{j<=b} C(b + c + 1, j)``, summed in logs: the tail itself
    underflows past about a thousand changed cases (and a floor on it would turn many fixed
    cases into a huge e-value). Values beyond e^700 are capped there.
    """
    _check_count("broken", broken)
    _check_count("fixed", fixed)
    n = broken + fixed + 1
    j = np.arange(broken + 1, dtype=np.float64)
    log_binomials = special.gammaln(n + 1) - special.gammaln(j + 1) - special.gammaln(n + 1 - j)
    top = float(np.max(log_binomials))
    log_sum = top + math.log(float(np.sum(np.exp(log_binomials - top))))
    log_e = float(special.betaln(broken + 1, fixed + 1)) + log_sum
    return math.exp(min(log_e, 700.0))


# --------------------------------------------------------------------------------------------
# The exact conditional test over every repeat (1:R and K:R matched sets)
# --------------------------------------------------------------------------------------------

#: One case's draws: (baseline passes, baseline draws, candidate passes, candidate draws).
MatchedSet = tuple[int, int, int, int]


def _check_matched(case: MatchedSet) -> None:
    bp, r, cp, k = case
    if r < 1 or k < 1 or not 0 <= bp <= r or not 0 <= cp <= k:
        raise ValueError(f"a matched set needs 0 <= passes <= draws >= 1 on both sides, got {case}")


def _power_of(pmf: NDArray[np.float64], times: int) -> NDArray[np.float64]:
    """The pmf of the sum of ``times`` independent draws from ``pmf`` (repeated squaring)."""
    result = np.ones(1, dtype=np.float64)
    square = pmf
    while times:
        if times & 1:
            result = np.convolve(result, square)
        times >>= 1
        if times:
            square = np.convolve(square, square)
    return result


def conditional_null(cases: Sequence[MatchedSet]) -> tuple[NDArray[np.float64], int, int]:
    """The exact null distribution of the candidate's total passes, given every case's total.

    Returns ``(pmf, offset, observed)``: ``pmf[j]`` is ``P(T = offset + j)`` under H0 and
    ``observed`` is the candidate's total passes. See :func:`conditional_test_worse`. Cases of
    the same shape (draws on each side, total passes) share one law, so the convolution is over
    a few shapes, each raised to its count by repeated squaring, instead of case by case.
    """
    shapes: dict[tuple[int, int, int], int] = {}
    observed = 0
    offset = 0
    for case in cases:
        _check_matched(case)
        bp, r, cp, k = case
        observed += cp
        s = bp + cp
        low, high = max(0, s - r), min(s, k)
        if low == high:  # every draw passed or failed: the case carries no information
            offset += low
            continue
        shapes[(r, k, s)] = shapes.get((r, k, s), 0) + 1
    pmf = np.ones(1, dtype=np.float64)
    for (r, k, s), count in sorted(shapes.items()):
        low, high = max(0, s - r), min(s, k)
        offset += low * count
        support = np.arange(low, high + 1)
        if k == 1:
            # One candidate draw: Bernoulli(s / (r + 1)), so the count's sum is binomial.
            part = _binom_pmf(np.arange(count + 1), count, s / (r + 1))
        else:
            part = _power_of(stats.hypergeom.pmf(support, r + k, s, k), count)
        pmf = np.convolve(pmf, part)
    return pmf, offset, observed


def conditional_test_worse(cases: Sequence[MatchedSet], mid_p: bool = False) -> float:
    """Exact one-sided conditional test that the candidate passes less often than the baseline.

    Each case is a matched set: R baseline draws and K candidate draws of the same case, scored
    pass/fail. Under H0 (the change does nothing) a case's R + K draws are exchangeable, whatever
    its own pass rate; so given its total passes ``s``, the candidate's passes are
    hypergeometric, ``X ~ Hyp(R + K, s, K)`` (for K = 1, Bernoulli ``s / (R + 1)``), independently
    across cases. The statistic is the candidate's total ``T = sum X``, whose exact null law is
    the convolution of those hypergeometrics (a Poisson-binomial for K = 1), and
    ``p = P(T <= t_observed)``; mid-p: ``P(T < t) + P(T = t) / 2``. This is the test for 1:R
    matched sets of Miettinen (1969, "Individual matching with multiple controls in the case of
    all-or-none responses", Biometrics 25:339-355), extended to K:R by conditioning on each
    set's total (Mantel & Haenszel 1959). For R = K = 1 it is the exact sign test. Cases whose
    draws all agree (s = 0 or s = R + K) have a fixed X and leave the p-value unchanged.
    No informative case: ``1.0``.
    """
    pmf, offset, observed = conditional_null(cases)
    j = observed - offset
    if pmf.size == 1:
        return 1.0
    below = float(np.sum(pmf[:j]))
    at = float(pmf[j])
    p = below + (0.5 * at if mid_p else at)
    return float(min(1.0, max(0.0, p)))


def conditional_residuals(cases: Sequence[MatchedSet]) -> list[float]:
    """Per case, the candidate's passes minus their null expectation given the case's total.

    ``X - K s / (R + K)``: the score contributions of :func:`conditional_test_worse`. They sum
    to ``T - E0[T]`` and have mean zero under H0, case by case.
    """
    out = []
    for case in cases:
        _check_matched(case)
        bp, r, cp, k = case
        out.append(cp - k * (bp + cp) / (r + k))
    return out


def clustered_test_worse(totals: Sequence[float]) -> float:
    """One-sided cluster-level t test that the mean of per-cluster totals is below zero.

    ``totals`` holds one number per cluster (e.g. the sum over a scenario's cases of
    :func:`conditional_residuals`). Clusters are independent while cases inside one may be
    correlated, so the clusters are the units: ``t = mean / (sd / sqrt(C))`` on ``C - 1``
    degrees of freedom, ``p = P(t_{C-1} <= t)`` (the cluster-robust score test with the small-
    sample t reference of Cameron & Miller 2015, JHR 50:317, sec. VI). All totals zero: ``1.0``;
    fewer than two clusters: ``1.0`` (no spread can be estimated).
    """
    x = np.asarray(totals, dtype=np.float64)
    c = int(x.size)
    if c < 2 or not np.any(x != 0.0):
        return 1.0
    sd = float(np.std(x, ddof=1))
    mean = float(np.mean(x))
    if sd == 0.0:
        return 0.0 if mean < 0 else 1.0
    t = mean / (sd / math.sqrt(c))
    return float(_t_cdf(t, c - 1))


#: Half a pass: the mean shortfall of the exact test's whole-number critical value below the
#: normal approximation's (conditional_power).
LATTICE_CORRECTION = 0.5


def conditional_power(
    n: int,
    flip_rate: float,
    drop: float,
    alpha: float = 0.05,
    baseline_draws: int = 1,
    candidate_draws: int = 1,
) -> float:
    """Power of :func:`conditional_test_worse` with R baseline and K candidate draws a case.

    For R = K = 1 the test is the sign test and its power is computed exactly (the trinomial of
    :func:`minimum_detectable_effect`); with no noise (f = 0) too, from the binomial count of
    broken cases. Otherwise a normal approximation under this model: a
    share ``u = 2f`` of cases is noisy with pass rate 1/2 on both sides (so two runs differ on a
    share ``f`` of cases), a share ``d`` passes every baseline draw and fails every candidate
    draw (a true drop of ``d``), the rest are settled. Per case, with ``N = R + K``, the score
    ``X - K s / N`` has mean ``-d K R / N`` and variance ``u K R / (4 N) + d (KR/N)^2 - m^2``,
    and its conditional null variance has mean ``u K R / (4 N) + d K^2 R^2 / (N^2 (N - 1))``;
    so ``power = Phi((n |m| - z_alpha sqrt(n v0) - 1/2) / sqrt(n v1))``. The candidate's total
    is a whole number, so the test's critical value is the normal one rounded down, half a pass
    below it on average: the ``1/2`` (without it the approximation over-predicted simulated
    power by up to 8 points below 60%). ``n`` may be fractional (effective units, see
    analysis.power). benchmarks/gate_simulation.py --power-grid checks the approximation
    against simulated pull requests.
    """
    _check_count("n", n)
    r, k = baseline_draws, candidate_draws
    if r < 1 or k < 1:
        raise ValueError(f"draws must be >= 1, got {r} and {k}")
    if r == 1 and k == 1:
        return _sign_test_power(n, flip_rate, drop, alpha)
    if n == 0:
        return 0.0
    if flip_rate == 0.0:
        # No noise: only broken cases are informative, each with null probability
        # 1 / C(R + K, K) of the candidate failing every draw, so the test rejects once
        # B >= b* = the smallest b with C(R + K, K)^-b <= alpha; exactly, B ~ Bin(n, d).
        b_star = math.ceil(math.log(alpha) / -math.log(math.comb(r + k, k)) - 1e-12)
        return float(_binom_sf(b_star - 1, n, min(1.0, drop)))
    u = min(1.0, 2.0 * flip_rate)
    d = min(drop, 1.0 - u)
    big_n = r + k
    m = -d * k * r / big_n
    noisy = u * k * r / (4.0 * big_n)
    v1 = noisy + d * (k * r / big_n) ** 2 - m * m
    v0 = noisy + d * (k * r) ** 2 / (big_n**2 * (big_n - 1))
    if v1 <= 0.0:
        return 0.0 if d <= 0.0 else 1.0
    z = NormalDist().inv_cdf(1.0 - alpha)
    shift = n * abs(m) - z * math.sqrt(n * v0) - LATTICE_CORRECTION
    return NormalDist().cdf(shift / math.sqrt(n * v1))


def conditional_mde(
    n: int,
    flip_rate: float,
    alpha: float = 0.05,
    power: float = 0.80,
    baseline_draws: int = 1,
    candidate_draws: int = 1,
) -> float:
    """Smallest drop :func:`conditional_test_worse` detects with ``power`` (see its power).

    R = K = 1: :func:`minimum_detectable_effect` (exact). Otherwise bisection on the normal
    approximation of :func:`conditional_power`, which is increasing in the drop; ``inf`` when
    no drop reaches ``power``.
    """
    if baseline_draws == 1 and candidate_draws == 1:
        return minimum_detectable_effect(n, flip_rate, alpha, power)
    _check_count("n", n)
    _check_power_args(flip_rate, alpha, power)

    def reach(d: float) -> float:
        return conditional_power(n, flip_rate, d, alpha, baseline_draws, candidate_draws)

    return least_drop(reach, max(0.0, 1.0 - min(1.0, 2.0 * flip_rate)), power)


def conditional_cases_for(
    target: float,
    flip_rate: float,
    alpha: float = 0.05,
    power: float = 0.80,
    baseline_draws: int = 1,
    candidate_draws: int = 1,
) -> int:
    """Smallest n whose :func:`conditional_mde` is at most ``target`` (``CASES_CAP`` if none)."""
    if baseline_draws == 1 and candidate_draws == 1:
        return cases_for_mde(target, flip_rate, alpha, power)
    _check_power_args(flip_rate, alpha, power)

    def enough(n: int) -> bool:
        drop = min(target, 1.0 - min(1.0, 2.0 * flip_rate))
        return conditional_power(n, flip_rate, drop, alpha, baseline_draws, candidate_draws) >= (
            power
        )

    return least_n(enough, 0)


# --------------------------------------------------------------------------------------------
# Non-inferiority: an upper confidence bound on the drop
# --------------------------------------------------------------------------------------------


# Tango's Z is a normal approximation to a lattice count: with m cases changed, b - c takes
# the values -m, -m + 2, ..., m, steps of 2. Shifting its numerator by half a step (1, the
# correction of McNemar's statistic, Edwards 1948) keeps the size of the pass decision at most
# alpha over n = 10-600 by exact enumeration, but with no room (4.99%); 1.25 leaves some
# (worst 4.89% at a 5-point margin, alpha 5%). benchmarks/margin_size.py prints the table,
# docs/statistics.md derives it.
TANGO_CORRECTION = 1.25


def tango_z(broken: float, fixed: float, n: int, drop: float, correction: float = 0.0) -> float:
    """Tango's score statistic for H0 "the paired drop in pass rate is ``drop``".

    For paired pass/fail with ``b`` cases broken (baseline pass, candidate fail) and ``c`` fixed
    out of ``n``, the drop is ``D = p10 - p01``. Tango (1998, "Equivalence test and confidence
    interval for the difference in proportions for the paired-sample design", Stat Med
    17:891-908)::

        Z(D0) = (b - c - n D0) / sqrt(n (2 p01~ + D0 (1 - D0)))

    with ``p01~`` the maximum-likelihood ``p01`` under ``p10 - p01 = D0``, the positive root of
    ``2n p² + (-b - c + (2n - b + c) D0) p - c D0 (1 - D0) = 0``. Negative Z: the data say the
    drop is below D0. At ``D0 = 0`` it is McNemar's ``(b - c) / sqrt(b + c)``. ``b`` and ``c``
    may be fractional (expected discordant counts over repeats, as the gate's bound uses them).
    ``correction`` is added to the numerator (a continuity correction towards not rejecting:
    :data:`TANGO_CORRECTION` for the bound the gate uses; 0 gives Tango's statistic itself).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    if broken < 0 or fixed < 0 or broken + fixed > n + 1e-9:
        raise ValueError(f"need 0 <= broken, fixed and broken + fixed <= n, got {broken}, {fixed}")
    if not -1.0 < drop < 1.0:
        raise ValueError(f"drop must be in (-1, 1), got {drop!r}")
    b, c = broken, fixed
    a = 2.0 * n
    bb = -b - c + (2.0 * n - b + c) * drop
    cc = -c * drop * (1.0 - drop)
    p01 = (-bb + math.sqrt(max(0.0, bb * bb - 4.0 * a * cc))) / (2.0 * a)
    var = n * (2.0 * p01 + drop * (1.0 - drop))
    num = b - c - n * drop + correction
    if var <= 0.0:
        return 0.0 if num == 0 else math.copysign(math.inf, num)
    return num / math.sqrt(var)


def tango_upper_drop(
    broken: float,
    fixed: float,
    n: int,
    alpha: float = 0.05,
    correction: float = TANGO_CORRECTION,
) -> float:
    """One-sided ``1 - alpha`` upper confidence bound on the drop, by inverting :func:`tango_z`.

    The bound is the drop ``D0`` at which ``Z(D0) = -z_{1-alpha}`` (Z with its numerator
    shifted by ``correction``): every larger drop is rejected at level alpha. Found by bisection
    (Z decreases in D0 past the observed drop) within 1e-9; capped at 1. Known: no case changed
    of n gives ``Z(D0) = (g - n D0) / sqrt(n D0 (1 - D0))`` with ``g`` the correction, which is
    ``-z`` at the larger root of ``(n + z²) D0² - (2g + z²) D0 + g² / n = 0`` (``z² / (n + z²)``
    uncorrected).
    """
    _check_probability("alpha", alpha)
    z = NormalDist().inv_cdf(1.0 - alpha)
    lo = (broken - fixed) / n if n else -1.0
    lo = max(-1.0 + 1e-12, min(lo, 1.0 - 1e-12))
    hi = 1.0 - 1e-12
    if tango_z(broken, fixed, n, hi, correction) > -z:
        return 1.0
    if tango_z(broken, fixed, n, lo, correction) <= -z:
        return lo
    while hi - lo > 1e-9:
        mid = (lo + hi) / 2.0
        if tango_z(broken, fixed, n, mid, correction) <= -z:
            hi = mid
        else:
            lo = mid
    return hi


def t_upper_drop(
    diffs: Sequence[float], groups: Sequence[str] | None = None, alpha: float = 0.05
) -> float:
    """One-sided ``1 - alpha`` upper bound on the drop ``-mean(diffs)``, from a t interval.

    ``diffs`` are candidate - baseline per case. The SE is the ordinary one or, with
    ``groups``, cluster-robust (:func:`clustered_se`) on ``C - 1`` degrees of freedom (n - 1
    without groups). Clipped to [-1, 1]. Fewer than two units: ``1.0`` (nothing ruled out).
    """
    _check_probability("alpha", alpha)
    n = len(diffs)
    units = len(set(groups)) if groups is not None else n
    if units < 2:
        return 1.0
    mean, se = mean_and_se(diffs, groups)
    if not math.isfinite(se):
        return 1.0
    q = float(_t_ppf(1.0 - alpha, units - 1))
    return float(min(1.0, max(-1.0, -mean + q * se)))


def cases_to_rule_out(broken: float, fixed: float, n: int, margin: float, alpha: float) -> int:
    """Cases that would make :func:`tango_upper_drop` fall below ``margin`` at the same rates.

    Holding ``b / n`` and ``c / n`` fixed, Z(margin) is ``A sqrt(n') + g / sqrt(n' V)`` (A < 0
    and the per-case variance V depend on the rates only, g is the correction), which falls
    as n' grows: the least n' whose bound is under the margin is found by bisection. When the
    observed drop is already at or above the margin no number of cases will do: ``CASES_CAP``.
    """
    if broken - fixed >= n * margin:
        return CASES_CAP

    def enough(m: int) -> bool:
        return tango_upper_drop(broken * m / n, fixed * m / n, m, alpha) < margin

    return n if enough(n) else least_n(enough, n)


def weighted_holm(p_values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """Weighted Holm step-down adjusted p-values (Holm 1979, sec. 5), in the original order.

    Hypothesis j gets the share ``w_j`` of alpha (weights are normalised to sum to 1). Order
    by ``p_j / w_j``; then ``adj_(i) = min(1, max_{k <= i} W_k p_(k) / w_(k))`` with ``W_k`` the
    total weight of the hypotheses not yet rejected at step k. Rejecting where ``adj <= alpha``
    keeps the familywise error rate at alpha under any dependence, and each hypothesis is
    rejected at least when ``p_j <= alpha w_j`` (weighted Bonferroni). Equal weights give
    :func:`holm_adjust`. A zero weight never rejects (adjusted p 1).
    """
    if len(p_values) != len(weights):
        raise ValueError(f"need one weight a p-value, got {len(p_values)} and {len(weights)}")
    p = np.asarray(p_values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if p.size == 0:
        return []
    if np.any(np.isnan(p)) or np.any(p < 0.0) or np.any(p > 1.0):
        raise ValueError(f"p-values must be in [0, 1], got {list(p_values)!r}")
    if np.any(w < 0.0) or not np.sum(w) > 0.0:
        raise ValueError(f"weights must be >= 0 with a positive sum, got {list(weights)!r}")
    w = w / np.sum(w)
    ratio = np.where(w > 0.0, p / np.where(w > 0.0, w, 1.0), np.inf)
    order = np.argsort(ratio, kind="stable")
    remaining = np.cumsum(w[order][::-1])[::-1]  # weight not yet rejected at each step
    sorted_ratio = ratio[order]
    finite = np.isfinite(sorted_ratio)
    scaled = np.ones(p.size, dtype=np.float64)
    scaled[finite] = np.minimum(1.0, remaining[finite] * sorted_ratio[finite])
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(scaled))
    adjusted = np.empty(p.size, dtype=np.float64)
    adjusted[order] = adjusted_sorted
    return [float(x) for x in adjusted]
