"""Intervals and standard errors: Wilson's interval for a rate, the ordinary and the
cluster-robust standard error of a mean, and the paired difference of two prompts' means."""

import math
from collections.abc import Sequence
from statistics import fmean

from pydantic import BaseModel, ConfigDict

from evalgate.analysis.checks import check_count, two_sided_z
from evalgate.analysis.distributions import t_ppf


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion ``successes / n``.

    With ``p = successes / n`` and ``z`` the two-sided normal quantile for ``confidence``::

        centre = (p + z²/(2n)) / (1 + z²/n)
        half   = z / (1 + z²/n) * sqrt(p(1 - p)/n + z²/(4n²))

    (Wilson 1927, "Probable inference, the law of succession, and statistical inference",
    JASA 22:209-212; Agresti & Coull 1998, eq. 2.) ``successes`` may be fractional, e.g. the
    sum of per-case mean scores in [0, 1]. ``n == 0`` carries no information: ``(0.0, 1.0)``.
    """
    check_count("n", n)
    if n == 0:
        return (0.0, 1.0)
    if not 0.0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n={n}], got {successes!r}")
    z = two_sided_z(confidence)
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
    sums: dict[str, float] = {}
    for g, r in zip(groups, residuals, strict=True):
        sums[g] = sums.get(g, 0.0) + float(r)
    if len(sums) < 2:
        if n < 2:
            return math.nan
        return math.sqrt(math.fsum(float(r) * float(r) for r in residuals) / (n * (n - 1)))
    c = len(sums)
    return math.sqrt(c / (c - 1) * math.fsum(s * s for s in sums.values())) / n


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
    mean = fmean(values)
    residuals = [float(x) - mean for x in values]
    if groups is not None:
        return (mean, clustered_se(residuals, groups))
    if n < 2:
        return (mean, math.nan)
    return (mean, math.sqrt(math.fsum(r * r for r in residuals) / (n * (n - 1))))


class PairedDifference(BaseModel):
    """Mean of candidate - baseline per case, its SE and a confidence interval: the normal one
    from :func:`paired_difference`, or in a verdict the gate's score interval, which does not
    shrink to a point when nothing changed (gate.routes._difference_interval)."""

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
    diffs = [float(c) - float(b) for c, b in zip(candidate, baseline, strict=True)]
    mean, se = mean_and_se(diffs, groups)
    clusters = len(set(groups)) if groups is not None else 0
    # Few clusters make the sandwich SE noisy: t with C - 1 degrees of freedom (Cameron &
    # Miller 2015, "A practitioner's guide to cluster-robust inference", JHR 50:317, sec. VI).
    q = t_ppf(0.5 + confidence / 2.0, clusters - 1) if clusters >= 2 else two_sided_z(confidence)
    # Scores lie in [0, 1], so a difference of means lies in [-1, 1]: so does its interval.
    low = max(-1.0, mean - q * se) if math.isfinite(se) else -1.0
    high = min(1.0, mean + q * se) if math.isfinite(se) else 1.0
    return PairedDifference(mean=mean, se=se, low=low, high=high, n=len(candidate))
