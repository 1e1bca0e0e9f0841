"""The two-stage design's exact test, checked by brute-force enumeration of the design itself.

Every known answer here comes from enumerating outcome sequences directly (all 2^n of them,
or all sequences of run vectors), independently of the counting in analysis.two_stage."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from evalgate.analysis.conditional import conditional_test_worse
from evalgate.analysis.two_stage import (
    second_stage_share,
    selected_law,
    settled,
    two_stage_null,
    two_stage_test_worse,
)


def _single_case_law(r: int, u: int, total: int) -> dict[int, Fraction]:
    """Brute force: every 0/1 sequence of r + u draws with this total whose first r + 1 draws
    are not all the same (the selection), each equally likely under H0 given the total; the
    law of the sum of the last u."""
    counts: dict[int, int] = {}
    for seq in itertools.product((0, 1), repeat=r + u):
        if sum(seq) != total or len(set(seq[: r + 1])) == 1:
            continue
        share = sum(seq[r:])
        counts[share] = counts.get(share, 0) + 1
    whole = sum(counts.values())
    return {k: Fraction(v, whole) for k, v in counts.items()}


@pytest.mark.parametrize("r,u", [(1, 2), (2, 2), (2, 3), (3, 2), (3, 3), (4, 2)])
def test_a_single_case_law_is_the_enumerated_conditional_law(r: int, u: int) -> None:
    for total in range(1, r + u):
        want = _single_case_law(r, u, total)
        # Any arrangement with that total and a mixed first stage gives the law.
        ones = [1] * total + [0] * (r + u - total)
        base = [(x,) for x in ones[:r]]
        cand = [(x,) for x in ones[r:]]
        if settled(base, cand[0]):
            base, cand = [(x,) for x in ones[-r:]], [(x,) for x in ones[:-r]]
            if settled(base, cand[0]):
                continue
        pmf, low = selected_law(base, cand)
        got = {low + j: p for j, p in enumerate(pmf) if p}
        assert set(got) == set(want)
        for share, p in want.items():
            assert got[share] == pytest.approx(float(p), abs=1e-15)


def test_the_selection_moves_the_law_away_from_the_hypergeometric() -> None:
    # R = 2, u = 2, total 1. By hand: the sequences of 4 draws with one pass whose first 3
    # are mixed are 1000, 0100, 0010 (the pass in the first three; 0001 has first three all 0). The
    # candidate's share (last two) is 0, 0, 1: P(share 1) = 1/3, against the hypergeometric's
    # 2/4 = 1/2 without the selection.
    pmf, low = selected_law([(1,), (0,)], [(0,), (0,)])
    assert low == 0
    assert pmf == pytest.approx([2 / 3, 1 / 3])


def _group_law_brute(
    base: list[tuple[int, ...]], cand: list[tuple[int, ...]]
) -> dict[int, Fraction]:
    """Brute force over orderings of the block's run vectors: every permutation of the R + u
    runs (runs as labelled objects) whose first R + 1 are not all the same vector; the law of
    the sum over the last u runs' passes."""
    runs = base + cand
    r = len(base)
    counts: dict[int, int] = {}
    for order in itertools.permutations(range(len(runs))):
        seq = [runs[i] for i in order]
        if len(set(seq[: r + 1])) == 1:
            continue
        share = sum(sum(v) for v in seq[r:])
        counts[share] = counts.get(share, 0) + 1
    whole = sum(counts.values())
    return {k: Fraction(v, whole) for k, v in counts.items()}


@pytest.mark.parametrize(
    "base,cand",
    [
        ([(1, 0), (1, 1)], [(0, 0), (1, 0)]),
        ([(1, 1), (1, 1)], [(0, 1), (1, 1)]),
        ([(0, 0, 1), (1, 0, 1), (0, 0, 1)], [(1, 1, 1), (0, 0, 0)]),
        ([(1, 0), (0, 1)], [(1, 0), (0, 1), (1, 1)]),
    ],
)
def test_a_group_block_law_is_the_enumerated_permutation_law(
    base: list[tuple[int, ...]], cand: list[tuple[int, ...]]
) -> None:
    want = _group_law_brute(base, cand)
    pmf, low = selected_law(base, cand)
    got = {low + j: p for j, p in enumerate(pmf) if p}
    assert set(got) == set(want)
    for share, p in want.items():
        assert got[share] == pytest.approx(float(p), abs=1e-15)


def _design_size(rates: list[float], r: int, u: int, alpha: float) -> float:
    """Brute force over the whole design at H0: every case's baseline draws and first
    candidate draw, then (for the selected) the further draws, each sequence with its
    probability; the chance that the two-stage p-value is at most ``alpha``."""
    per_case: list[list[tuple[float, tuple[list[tuple[int]], list[tuple[int]]]]]] = []
    for p in rates:
        options = []
        for first in itertools.product((0, 1), repeat=r + 1):
            base = [(x,) for x in first[:r]]
            c1 = (first[r],)
            if settled(base, c1):
                prob = math.prod(p if x else 1 - p for x in first)
                options.append((prob, (base, [c1])))
                continue
            for more in itertools.product((0, 1), repeat=u - 1):
                seq = first + more
                prob = math.prod(p if x else 1 - p for x in seq)
                options.append((prob, (base, [c1, *((x,) for x in more)])))
        per_case.append(options)
    size = 0.0
    for combo in itertools.product(*per_case):
        prob = math.prod(c[0] for c in combo)
        if two_stage_test_worse([c[1] for c in combo]) <= alpha:
            size += prob
    return size


@pytest.mark.parametrize("rates", [[0.5, 0.5, 0.5], [0.1, 0.9, 0.5], [0.2, 0.3, 0.95]])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.25])
def test_the_design_rejects_at_most_alpha_under_the_null(rates: list[float], alpha: float) -> None:
    # Exact: the whole design enumerated (3 cases, R = 2, u = 2: 8 + 8 first-stage sequences a
    # case), each case with its own pass rate. The test is exact given the selection, so its
    # size is at most alpha for every rate.
    assert _design_size(rates, 2, 2, alpha) <= alpha + 1e-12


def test_the_size_is_near_alpha_where_the_law_allows() -> None:
    # A test that never rejects would pass the check above; this one rejects, at most alpha
    # (one case at p = 0.5, R = 1, u = 3: a p-value of 1/3 is reachable).
    size = _design_size([0.5], 1, 3, 0.5)
    assert 0.0 < size <= 0.5


def test_settled_blocks_add_only_a_constant() -> None:
    blocks = [([(1,), (1,)], [(1,)]), ([(0,), (0,)], [(0,)])]
    pmf, offset, observed = two_stage_null(blocks)
    assert pmf == [1.0] and offset == observed == 1
    assert two_stage_test_worse(blocks) == 1.0


def test_a_settled_block_with_more_runs_is_refused() -> None:
    with pytest.raises(ValueError, match="settled block"):
        two_stage_null([([(1,), (1,)], [(1,), (0,)])])


def test_with_every_block_selected_and_u_one_it_is_the_conditional_test() -> None:
    # u = 1: the selection (first stage mixed) is then implied by a mixed total, so the law is
    # the plain hypergeometric and the p-value the exact conditional test's.
    cases = [(1, 2, 0, 1), (2, 2, 0, 1), (1, 2, 1, 1), (0, 2, 1, 1)]
    blocks = []
    for bp, r, cp, _ in cases:
        blocks.append(([(1,)] * bp + [(0,)] * (r - bp), [(cp,)]))
    assert two_stage_test_worse(blocks) == pytest.approx(conditional_test_worse(cases))


def test_a_clear_drop_rejects() -> None:
    # Twenty cases the baseline passed twice, each failed on both candidate runs. Per block:
    # of the 6 arrangements of 2 passes in 4 draws every one has a mixed first three (111 needs
    # three passes, 000 leaves both passes in one last place), so the selection is implied and
    # P0(candidate share 0) = 1/6 (only 1100). The p-value is 6^-20.
    blocks = [([(1,), (1,)], [(0,), (0,)]) for _ in range(20)]
    assert two_stage_test_worse(blocks) == pytest.approx(6.0**-20, rel=1e-9, abs=0.0)
    # One block passed once by the baseline, then failed twice: arrangements of 1 pass in 4
    # draws with a mixed first three are 1000, 0100, 0010; the candidate's share is 0, 0, 1,
    # so P0(share <= 0) = 2/3.
    assert two_stage_test_worse([([(1,), (0,)], [(0,), (0,)])]) == pytest.approx(
        2 / 3, rel=1e-12, abs=0.0
    )


def test_second_stage_share() -> None:
    assert second_stage_share(0.5, 2) == pytest.approx(1 - 2 * 0.125)
    assert second_stage_share(1.0, 2) == 0.0
    with pytest.raises(ValueError):
        second_stage_share(1.5, 2)
