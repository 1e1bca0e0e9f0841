"""The two-stage design (``gate.repeats: two-stage``) and its exact conditional test.

Stage one sends every case to the candidate once. A *block* (a case, or a scenario group when
the gate tests groups) is *settled* when its baseline's R runs and that first candidate run all
agree, case by case; a settled block says nothing about a change (given its totals, the
candidate's share is fixed), so it is sent no more. Every other block is sent ``u - 1`` more
times, ``u`` candidate runs in all.

Why the test stays exact. Under H0 (the change does nothing) a block's R + u runs are
exchangeable: each run is a draw of the block's run vector (its cases' pass/fail) from one law,
whatever the cases' own pass rates and however they move together. The selection looks only at
runs 1..R+1 (the baseline's and the first candidate's) and only at whether they are all the
same vector, a symmetric function of those R + 1 runs. So given the block's multiset of R + u
run vectors and the event that it was selected, every assignment of the runs to the positions
(which R are the baseline's, which one is the first candidate run) that keeps runs 1..R+1 not
all the same is equally likely. The candidate's total over its u runs under H0 is then the
law of ``total - (sum of the R baseline runs)`` over those assignments, counted exactly here;
blocks are independent, so the candidate's grand total has the convolution of the blocks' laws
and ``p = P0(T <= t)``. A settled block is never sent again, so it adds a constant. Nothing
depends on the unknown pass rates: the test is exact, given the selection, at every sample size.

Conditioning on the selection costs little: a selected block is one whose first-stage runs
disagree, exactly the blocks that carry information, and the second stage gives each of them
``u`` candidate runs where a fixed design gives every block ``K``. Measured against the fixed
designs in benchmarks/gate_simulation.py (``--adaptive``) and derived in docs/statistics.md.

Plain Python: the counts are integers, the blocks a few shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from evalgate.analysis.conditional import convolve, lower_tail, power_of

#: One run of a block: each of its cases' pass (1) or fail (0), in a fixed case order.
RunVector = tuple[int, ...]


def settled(baseline: Sequence[RunVector], first: RunVector) -> bool:
    """Whether a block needs no second stage: the baseline's runs and the first candidate run
    are all the same vector (every case of the block agreed with itself throughout)."""
    return all(run == first for run in baseline)


def selected_law(
    baseline: Sequence[RunVector], candidate: Sequence[RunVector]
) -> tuple[list[float], int]:
    """The null law of a selected block's candidate total, given its run vectors and the
    selection: ``(pmf, low)`` with ``pmf[j] = P0(total = low + j)``.

    Every assignment of the R + u runs to the roles (R baseline runs, one first candidate run,
    u - 1 further ones) in which the baseline's and the first candidate's are not all the same
    is counted once; the candidate's total is the sum of the u runs not in the baseline.
    """
    runs = [tuple(v) for v in (*baseline, *candidate)]
    r, u = len(baseline), len(candidate)
    if r < 1 or u < 1:
        raise ValueError(f"a block needs at least one run a side, got {r} and {u}")
    if len({len(v) for v in runs}) != 1:
        raise ValueError("every run of a block must have the block's cases, in the same order")
    totals = [sum(v) for v in runs]
    everything = sum(totals)
    counts: dict[int, int] = {}
    indices = range(r + u)
    for base in combinations(indices, r):
        chosen = set(base)
        rest = [i for i in indices if i not in chosen]
        base_runs = [runs[i] for i in base]
        share = everything - sum(totals[i] for i in base)
        for first in rest:
            if settled(base_runs, runs[first]):
                continue  # this assignment would not have been selected
            counts[share] = counts.get(share, 0) + 1
    if not counts:
        raise ValueError("the block's runs are all the same: it could not have been selected")
    low, high = min(counts), max(counts)
    whole = sum(counts.values())
    return [counts.get(low + j, 0) / whole for j in range(high - low + 1)], low


def _shape(
    baseline: Sequence[RunVector], candidate: Sequence[RunVector]
) -> tuple[tuple[RunVector, ...], int, int]:
    """What a selected block's law depends on: its multiset of run vectors, R and u."""
    return tuple(sorted(tuple(v) for v in (*baseline, *candidate))), len(baseline), len(candidate)


def two_stage_null(
    blocks: Sequence[tuple[Sequence[RunVector], Sequence[RunVector]]],
) -> tuple[list[float], int, int]:
    """The exact null law of the candidate's grand total under the two-stage design.

    ``blocks``: each block's baseline runs and candidate runs (one run when it was settled,
    ``u`` when it was selected). Returns ``(pmf, offset, observed)`` as
    conditional.conditional_null does. A settled block given more than one candidate run (a
    design the selection did not make) is refused.
    """
    shapes: dict[tuple[tuple[RunVector, ...], int, int], int] = {}
    laws: dict[tuple[tuple[RunVector, ...], int, int], tuple[list[float], int]] = {}
    observed = 0
    offset = 0
    for baseline, candidate in blocks:
        if not baseline or not candidate:
            raise ValueError("a block needs at least one run a side")
        observed += sum(sum(v) for v in candidate)
        if settled(baseline, tuple(candidate[0])):
            if len(candidate) != 1:
                raise ValueError("a settled block is sent once: it has more candidate runs")
            offset += sum(candidate[0])
            continue
        key = _shape(baseline, candidate)
        if key not in laws:
            laws[key] = selected_law(baseline, candidate)
        shapes[key] = shapes.get(key, 0) + 1
    pmf = [1.0]
    for key, count in sorted(shapes.items()):
        part, low = laws[key]
        offset += low * count
        pmf = convolve(pmf, power_of(part, count))
    return pmf, offset, observed


def two_stage_test_worse(
    blocks: Sequence[tuple[Sequence[RunVector], Sequence[RunVector]]], mid_p: bool = False
) -> float:
    """One-sided exact p-value that the candidate passes less often, under the two-stage
    design: ``P0(T <= t)`` (mid-p: ``P0(T < t) + P0(T = t) / 2``) over the law of
    :func:`two_stage_null`. No informative block: ``1.0``."""
    return lower_tail(*two_stage_null(blocks), mid_p=mid_p)


def second_stage_share(pass_rate: float, baseline_runs: int) -> float:
    """The chance that a case of this pass rate is sent a second stage under H0 (a block of
    one case): ``1 - p^(R+1) - (1-p)^(R+1)``, for the estimate of a two-stage run's calls."""
    if not 0.0 <= pass_rate <= 1.0 or baseline_runs < 1:
        raise ValueError(f"need 0 <= pass rate <= 1 and R >= 1, got {pass_rate}, {baseline_runs}")
    n = baseline_runs + 1
    return 1.0 - pass_rate**n - (1.0 - pass_rate) ** n
