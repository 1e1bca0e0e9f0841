"""The exact group-level test: whole runs permuted within each scenario group.

A *block* is a scenario group (or one case, a group of one) seen jointly run by run: the
baseline's R runs and the candidate's K runs each give the block a *run total*, the sum of its
cases' scores in that run. Under H0 ("the change does nothing") the R + K run vectors of a
block are exchangeable, however its cases are correlated with each other, so given the block's
R + K totals the candidate's share is the sum of a uniformly random K-subset of them,
independently across blocks (each block's draws are its own). The statistic is the
candidate's grand total ``T``, equivalently the sum of the per-case conditional scores
``X - K s / (R + K)`` (the ``s`` are fixed by the conditioning), and ``p = P0(T <= t)``.

For a block of one case with pass/fail scores the K-subset sum is hypergeometric, so with
every group of one this is conditional.conditional_test_worse itself. For pass/fail scores the
totals are integers and the null law is the convolution of each block's subset-sum law,
computed exactly (a count of subsets by size and sum). For other scores it is enumerated when
there are few arrangements and otherwise sampled with a seed, ``p = (1 + b) / (1 + m)`` over
``m`` sampled arrangements of which ``b`` are at or below the observed (Phipson & Smyth 2010),
which is itself a valid p-value. The exact law is plain Python (integer counts of subsets);
numpy only samples the continuous case.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

from evalgate.analysis.conditional import convolve, lower_tail, power_of

#: One block: (the baseline's run totals, the candidate's run totals).
Block = tuple[Sequence[float], Sequence[float]]

#: Arrangements of continuous-score blocks up to which every one is enumerated.
EXACT_ARRANGEMENTS_MAX = 1 << 16

#: Sampled arrangements when there are more.
RESAMPLES = 10_000


def _check(block: Block) -> tuple[list[float], int]:
    base, cand = block
    if len(base) < 1 or len(cand) < 1:
        raise ValueError(f"a block needs at least one run a side, got {len(base)} and {len(cand)}")
    values = [float(x) for x in base] + [float(x) for x in cand]
    if not all(math.isfinite(x) for x in values):
        raise ValueError(f"run totals must be finite numbers, got {values!r}")
    return values, len(cand)


def _subset_sum_law(values: Sequence[int], k: int) -> tuple[list[float], int]:
    """The law of the sum of a uniformly random ``k``-subset of integer ``values``:
    ``(pmf, low)`` with ``pmf[j] = P(sum = low + j)``. ``ways[j][s]`` counts subsets of size j
    and sum s (a knapsack count, in exact integers), item by item."""
    low = min(values)
    shifted = [v - low for v in values]  # every subset has k items: shift by low each
    top = sum(sorted(shifted)[-k:])
    ways = [[0] * (top + 1) for _ in range(k + 1)]
    ways[0][0] = 1
    for v in shifted:
        for j in range(k, 0, -1):
            row, below = ways[j], ways[j - 1]
            for s in range(top, v - 1, -1):
                row[s] += below[s - v]
    subsets = math.comb(len(values), k)
    return [w / subsets for w in ways[k]], k * low


def integer_null(blocks: Sequence[Block]) -> tuple[list[float], int, int]:
    """The exact null law of the candidate's total over integer run totals.

    Returns ``(pmf, offset, observed)``: ``pmf[j] = P0(T = offset + j)``. Blocks of the same
    shape (sorted totals, K) share one law, raised to its count by repeated squaring.
    """
    shapes: dict[tuple[tuple[int, ...], int], int] = {}
    observed = 0
    offset = 0
    for block in blocks:
        values, k = _check(block)
        ints = [round(v) for v in values]
        if any(abs(a - b) > 1e-9 for a, b in zip(ints, values, strict=True)):
            raise ValueError(f"integer_null needs integer run totals, got {values!r}")
        observed += sum(ints[len(ints) - k :])
        if len(set(ints)) == 1:  # every arrangement gives the same total: no information
            offset += k * ints[0]
            continue
        key = (tuple(sorted(ints)), k)
        shapes[key] = shapes.get(key, 0) + 1
    pmf = [1.0]
    for (values_, k), count in sorted(shapes.items()):
        part, low = _subset_sum_law(values_, k)
        offset += low * count
        pmf = convolve(pmf, power_of(part, count))
    return pmf, offset, observed


def _is_integer(blocks: Sequence[Block]) -> bool:
    return all(float(x).is_integer() for base, cand in blocks for x in (*base, *cand))


def run_permutation_test_worse(
    blocks: Sequence[Block], *, mid_p: bool = False, seed: int = 0, resamples: int = RESAMPLES
) -> float:
    """One-sided p-value that the candidate scores less than the baseline, by permuting whole
    runs within each block (see the module's docstring). ``mid_p`` applies to the exact law
    only: ``P(T < t) + P(T = t) / 2``. No informative block: ``1.0``."""
    if not blocks:
        return 1.0
    if _is_integer(blocks):
        return lower_tail(*integer_null(blocks), mid_p=mid_p)
    return _continuous_p(blocks, seed, resamples)


def _continuous_p(blocks: Sequence[Block], seed: int, resamples: int) -> float:
    import numpy as np  # only scores that are not pass/fail are sampled

    informative: list[tuple[list[float], int]] = []
    observed = 0.0
    for block in blocks:
        values, k = _check(block)
        observed += sum(values[len(values) - k :])
        if max(values) - min(values) > 0.0:
            informative.append((values, k))
        else:
            observed -= k * values[0]  # a constant part of every arrangement
    if not informative:
        return 1.0
    scale = sum(max(abs(x) for x in v) * k for v, k in informative)
    tol = 1e-10 * max(1.0, scale)
    arrangements = 1
    for v, k in informative:
        arrangements *= math.comb(len(v), k)
        if arrangements > EXACT_ARRANGEMENTS_MAX:
            break
    if arrangements <= EXACT_ARRANGEMENTS_MAX:
        per_block = [
            np.array([sum(v[i] for i in subset) for subset in combinations(range(len(v)), k)])
            for v, k in informative
        ]
        totals = np.zeros(1)
        for sums in per_block:
            totals = (totals[:, None] + sums[None, :]).ravel()
        return int(np.count_nonzero(totals <= observed + tol)) / totals.size
    rng = np.random.default_rng(seed)
    null = np.zeros(resamples)
    for v, k in informative:
        arr = np.asarray(v, dtype=np.float64)
        keys = rng.random((resamples, arr.size))
        chosen = np.argsort(keys, axis=1)[:, :k]
        null += arr[chosen].sum(axis=1)
    count = int(np.count_nonzero(null <= observed + tol))
    return (1 + count) / (1 + resamples)
