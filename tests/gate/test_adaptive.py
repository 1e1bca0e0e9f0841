"""The adaptive design's exactness, by exact enumeration on tiny suites (no simulation).

Allocation from an earlier baseline (independent of the compared outcomes given each case's pass
rate): the size of the exact conditional test is at most alpha at every pass rate tried, and is
the allocation-weighted mean of the fixed-repeat sizes. Allocation from the test's own baseline:
the candidate's passes given a case's total depend on the pass rate (not exact). The allocation
rule itself: settled once, flipped or missing ``unstable_repeats`` times, whole groups together.
"""

from __future__ import annotations

import itertools
from math import comb

import pytest

from evalgate.analysis.conditional import conditional_test_worse
from evalgate.running.allocation import allocate, flipped

ALPHA = 0.05
R = 2  # baseline repeats; the earlier baseline (the allocation data) has 2 as well


def binom(n: int, p: float, x: int) -> float:
    return comb(n, x) * p**x * (1 - p) ** (n - x)


def size(ps: tuple[float, ...], repeats_of: dict[int, int] | None, u: int = 2) -> float:
    """P(p-value <= alpha) under no change, summed over every outcome. ``repeats_of``: fixed K
    by allocation count (None: allocate from the earlier baseline's passes, K = u if it flipped,
    i.e. 1 pass of 2, else 1)."""
    per_case = []
    for p in ps:
        rows = []  # (probability, matched set)
        for a in range(3):  # the earlier baseline's passes: allocation only
            k = u if a == 1 else 1
            if repeats_of is not None:
                k = repeats_of[a]
            for b in range(R + 1):
                for c in range(k + 1):
                    rows.append((binom(2, p, a) * binom(R, p, b) * binom(k, p, c), (b, R, c, k)))
        per_case.append(rows)
    total = 0.0
    for combo in itertools.product(*per_case):
        chance = 1.0
        for prob, _ in combo:
            chance *= prob
        if conditional_test_worse([s for _, s in combo]) <= ALPHA:
            total += chance
    return total


@pytest.mark.parametrize("ps", [(0.5, 0.5, 0.5), (0.2, 0.5, 0.9), (0.9, 0.9, 0.95), (0.7, 0.3)])
def test_allocation_from_an_earlier_baseline_keeps_the_size_at_most_alpha(
    ps: tuple[float, ...],
) -> None:
    adaptive = size(ps, None)
    assert 0.0 < adaptive <= ALPHA  # the test can reject here (the size is not vacuous)
    assert size(ps, {0: 1, 1: 1, 2: 1}) <= ALPHA
    assert size(ps, {0: 2, 1: 2, 2: 2}) <= ALPHA


def test_the_fixed_size_by_hand() -> None:
    # Three cases at p = 0.5, K = 1: the smallest p-value is (1/3)^3 = 1/27 <= 0.05 (every
    # case b = 2, c = 0); P(T <= 1) = 1/27 + 3 (2/3)(1/3)^2 = 7/27 > 0.05. Each case has b = 2, c = 0 with
    # probability 1/4 * 1/2 = 1/8, so the size is (1/8)^3 = 1/512.
    assert size((0.5, 0.5, 0.5), {0: 1, 1: 1, 2: 1}) == pytest.approx(1 / 512, abs=1e-15)


def test_a_single_case_size_is_the_allocation_weighted_mean() -> None:
    # One case, p = 0.5: the earlier baseline flips (1 pass of 2) with probability 1/2, and
    # then K = 2; else K = 1. The exact test over one case rejects only at its smallest
    # p-value: K = 1 needs b = 2, c = 0 (p-value 1/3 > alpha, never); K = 2 needs b = 2, c = 0
    # (p-value C(2,2)/C(4,2) = 1/6 > alpha, never). So every size here is 0, exactly.
    assert size((0.5,), None) == 0.0
    # Six cases at p = 0.5, K = 1, computed by hand is long; instead the identity: with one
    # case the adaptive size is P(flip) * size(K=2) + P(settled) * size(K=1).
    for p in (0.3, 0.6):
        flip = 2 * p * (1 - p)
        want = flip * size((p,), {0: 2, 1: 2, 2: 2}) + (1 - flip) * size((p,), {0: 1, 1: 1, 2: 1})
        assert size((p,), None) == pytest.approx(want, abs=1e-15)


def cond_c0_given_t2(p: float, own: bool) -> float:
    """P(candidate passes = 0 | the case's total = 2) for one case with R = 2, by enumeration.
    ``own``: K = 2 when the test's own baseline flipped (b = 1), else 1; otherwise K is
    allocated from an independent earlier baseline and this is the conditional given K = 1."""
    num = den = 0.0
    for b in range(3):
        k = (2 if b == 1 else 1) if own else 1
        for c in range(k + 1):
            if b + c != 2:
                continue
            w = binom(2, p, b) * binom(k, p, c)
            den += w
            num += w * (c == 0)
    return num / den


def test_allocating_from_the_tested_baseline_is_not_exact() -> None:
    # Own baseline, T = 2 arises as (b = 2, K = 1, c = 0): p^2 (1 - p), or (b = 1, K = 2,
    # c = 1): 2p(1 - p) * 2p(1 - p). So P(c = 0 | T = 2) = 1 / (1 + 4 (1 - p)), by hand:
    # 1/3 at p = 0.5, 1/2 at p = 0.75 -- it depends on the nuisance pass rate.
    assert cond_c0_given_t2(0.5, own=True) == pytest.approx(1 / 3)
    assert cond_c0_given_t2(0.75, own=True) == pytest.approx(1 / 2)
    # Allocated independently, given K = 1: the hypergeometric C(2,2) C(1,0) / C(3,2) = 1/3
    # whatever p is.
    for p in (0.2, 0.5, 0.75, 0.95):
        assert cond_c0_given_t2(p, own=False) == pytest.approx(1 / 3)


def test_the_rule_settled_once_flipped_or_missing_more() -> None:
    data: dict[str, list[float | None]] = {
        "a": [1.0, 1.0],
        "b": [0.0, 0.0, 0.0],
        "c": [1.0, 0.0],
        "d": [None, 1.0],  # one score: cannot show a flip
        "e": [0.5, 0.5],  # a judge's score, the same twice: settled
    }
    given = allocate([(x, None) for x in "abcdef"], data, 3, "run x")
    assert given.repeats == {"a": 1, "b": 1, "c": 3, "d": 3, "e": 1, "f": 3}
    assert (given.settled, given.unstable, given.unknown, given.calls, given.most) == (
        3,
        1,
        2,
        12,
        3,
    )
    assert given.jobs() == frozenset(
        {("a", 0), ("b", 0), ("e", 0)} | {(x, r) for x in "cdf" for r in range(3)}
    )
    assert [flipped(s) for s in ([1.0], [], [None, None], [0.0, 1.0])] == [None, None, None, True]


def test_groups_are_allocated_whole() -> None:
    # The group-level test compares a group over the repeats every case of it has: a group
    # with one unstable case sends all its cases the unstable repeats.
    data: dict[str, list[float | None]] = {"a1": [1.0, 1.0], "a2": [1.0, 0.0], "b1": [0.0, 0.0]}
    cases = [("a1", "A"), ("a2", "A"), ("b1", "B"), ("b2", "B")]
    by_group = allocate(cases, data, 2, "run x", by_group=True)
    assert by_group.repeats == {"a1": 2, "a2": 2, "b1": 2, "b2": 2}  # b2 is missing
    by_case = allocate(cases, data, 2, "run x")
    assert by_case.repeats == {"a1": 1, "a2": 2, "b1": 1, "b2": 2}
    data["b2"] = [0.0, 0.0]
    assert allocate(cases, data, 2, "run x", by_group=True).repeats == {
        "a1": 2,
        "a2": 2,
        "b1": 1,
        "b2": 1,
    }
