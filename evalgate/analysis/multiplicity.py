"""Multiple comparisons: Holm's step-down adjustment, plain and weighted, by which the gate
settles its routes at one familywise level."""

from __future__ import annotations

import math
from collections.abc import Sequence


def _checked(p_values: Sequence[float]) -> list[float]:
    p = [float(x) for x in p_values]
    if any(math.isnan(x) or x < 0.0 or x > 1.0 for x in p):
        raise ValueError(f"p-values must be in [0, 1], got {list(p_values)!r}")
    return p


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values, returned in the original order.

    Sort ascending, ``p_(1) <= ... <= p_(m)``; then
    ``adj_(i) = min(1, max_{j <= i} (m - j + 1) * p_(j))``. Rejecting where ``adj <= alpha``
    controls the family-wise error rate at alpha (Holm 1979, "A simple sequentially rejective
    multiple test procedure", Scand J Statist 6:65-70). The running maximum keeps the adjusted
    values in the same order as the raw ones.
    """
    p = _checked(p_values)
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    adjusted = [0.0] * m
    running = 0.0
    for step, i in enumerate(order):
        running = max(running, (m - step) * p[i])
        adjusted[i] = min(1.0, running)
    return adjusted


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
    p = _checked(p_values)
    w = [float(x) for x in weights]
    if not p:
        return []
    total = math.fsum(w)
    if any(x < 0.0 for x in w) or not total > 0.0:
        raise ValueError(f"weights must be >= 0 with a positive sum, got {list(weights)!r}")
    w = [x / total for x in w]
    ratio = [p[i] / w[i] if w[i] > 0.0 else math.inf for i in range(len(p))]
    order = sorted(range(len(p)), key=lambda i: ratio[i])
    remaining = math.fsum(w)  # weight not yet rejected at each step
    adjusted = [0.0] * len(p)
    running = 0.0
    for i in order:
        scaled = min(1.0, remaining * ratio[i]) if math.isfinite(ratio[i]) else 1.0
        running = max(running, scaled)
        adjusted[i] = min(1.0, running)
        remaining -= w[i]
    return adjusted
