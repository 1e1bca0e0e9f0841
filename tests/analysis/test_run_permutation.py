"""The group-level test (evalgate/analysis/run_permutation.py): known answers by hand and by
brute-force enumeration written here, independently of the module's counting."""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import combinations, product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.analysis.conditional import conditional_test_worse
from evalgate.analysis.run_permutation import Block, integer_null, run_permutation_test_worse


def brute_force(blocks: list[Block]) -> Fraction:
    """P0(T <= t) by listing every way of choosing, in every block, which K of its R + K runs
    are the candidate's (all equally likely under H0), in exact fractions."""
    observed = Fraction(0)
    choices = []
    for base, cand in blocks:
        values = [Fraction(x) for x in (*base, *cand)]
        observed += sum(values[len(base) :], Fraction(0))
        subsets = combinations(range(len(values)), len(cand))
        choices.append([sum((values[i] for i in s), Fraction(0)) for s in subsets])
    picks = list(product(*choices))
    return Fraction(sum(1 for pick in picks if sum(pick) <= observed), len(picks))


def test_one_group_of_two_cases_by_hand() -> None:
    # A group of 2 cases, R = 2, K = 1. Baseline runs: both pass (2), one passes (1); the
    # candidate's run: none passes (0). The candidate's total is one of {2, 1, 0}, each 1/3:
    # P(T <= 0) = 1/3.
    assert run_permutation_test_worse([([2, 1], [0])]) == pytest.approx(1 / 3)


def test_two_groups_by_hand() -> None:
    # Group A (R = 2, K = 1): totals 2, 2 | 0 -> T_A in {2, 2, 0}: P(0) = 1/3, P(2) = 2/3.
    # Group B (R = 1, K = 1): totals 3 | 1 -> T_B in {3, 1}, each 1/2.
    # Observed T = 0 + 1 = 1; T <= 1 only for (0, 1): 1/3 * 1/2 = 1/6.
    assert run_permutation_test_worse([([2, 2], [0]), ([3], [1])]) == pytest.approx(1 / 6)
    # mid-p: P(T < 1) + P(T = 1)/2 = 0 + 1/12.
    assert run_permutation_test_worse([([2, 2], [0]), ([3], [1])], mid_p=True) == pytest.approx(
        1 / 12
    )


def test_k_of_r_plus_k_by_hand() -> None:
    # R = 2, K = 2 over totals 3, 1 | 0, 0: the 6 pairs of {3, 1, 0, 0} sum to 4, 3, 3, 1, 1, 0;
    # the candidate's 0 + 0 = 0 is the least: p = 1/6.
    assert run_permutation_test_worse([([3, 1], [0, 0])]) == pytest.approx(1 / 6)


def test_a_block_whose_runs_all_agree_carries_nothing() -> None:
    assert run_permutation_test_worse([([2, 2], [2])]) == 1.0
    assert run_permutation_test_worse([]) == 1.0
    # ... and leaves another block's p-value alone.
    assert run_permutation_test_worse([([2, 2], [2]), ([1, 1], [0])]) == pytest.approx(1 / 3)


def test_groups_of_one_are_the_exact_conditional_test() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        r, k = int(rng.integers(1, 4)), int(rng.integers(1, 3))
        sets = [
            (int(rng.integers(0, r + 1)), r, int(rng.integers(0, k + 1)), k)
            for _ in range(int(rng.integers(1, 30)))
        ]
        # A case as a block of one: each run's total is that run's pass (1) or fail (0).
        blocks: list[Block] = [
            ([1] * bp + [0] * (r - bp), [1] * cp + [0] * (k - cp)) for bp, r, cp, k in sets
        ]
        assert run_permutation_test_worse(blocks) == pytest.approx(
            conditional_test_worse(sets), rel=1e-9, abs=1e-15
        )


blocks_strategy = st.lists(
    st.tuples(
        st.lists(st.integers(0, 3), min_size=1, max_size=3),
        st.lists(st.integers(0, 3), min_size=1, max_size=2),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(blocks=blocks_strategy)
def test_integer_totals_match_brute_force_enumeration(blocks: list[Block]) -> None:
    assert run_permutation_test_worse(blocks) == pytest.approx(
        float(brute_force(blocks)), abs=1e-12
    )


@settings(max_examples=60, deadline=None)
@given(blocks=blocks_strategy)
def test_the_null_law_sums_to_one_and_has_the_null_mean(blocks: list[Block]) -> None:
    pmf, offset, _ = integer_null(blocks)
    assert float(np.sum(pmf)) == pytest.approx(1.0)
    # E0[T] = sum over blocks of K * (mean of the block's R + K totals).
    mean = sum(len(c) * (sum(b) + sum(c)) / (len(b) + len(c)) for b, c in blocks)
    assert sum((j + offset) * w for j, w in enumerate(pmf)) == pytest.approx(mean)


def test_continuous_totals_are_enumerated_when_few() -> None:
    # Two blocks of judge scores: (0.9 | 0.2) and (0.5, 0.7 | 0.6). Candidate's 0.2 + 0.6 = 0.8.
    # Block 1 gives 0.9 or 0.2; block 2 gives 0.5, 0.7 or 0.6: six sums equally likely, of which
    # 0.2 + 0.5 = 0.7 and 0.2 + 0.6 = 0.8 are <= 0.8: p = 2/6.
    blocks: list[Block] = [([0.9], [0.2]), ([0.5, 0.7], [0.6])]
    assert run_permutation_test_worse(blocks) == pytest.approx(2 / 6)
    assert float(brute_force(blocks)) == pytest.approx(2 / 6)


def test_continuous_totals_are_sampled_when_many_with_a_valid_p_value() -> None:
    rng = np.random.default_rng(3)
    blocks: list[Block] = [
        (list(rng.random(2)), list(rng.random(1) - 0.3)) for _ in range(40)
    ]  # 3**40 arrangements: sampled
    p = run_permutation_test_worse(blocks, seed=1, resamples=2000)
    # (1 + b) / (1 + m): a multiple of 1/2001, never 0, and seeded.
    assert p * 2001 == pytest.approx(round(p * 2001))
    assert 0 < p < 0.05
    assert p == run_permutation_test_worse(blocks, seed=1, resamples=2000)


def test_the_test_has_at_most_its_level_under_the_null() -> None:
    """Every arrangement of a small design, weighted by its chance: the rejection rate at
    alpha is at most alpha (the exact law's own check, by enumeration)."""
    # A group of 2 skewed cases (pass rates 0.1 and 0.15), R = 2, K = 1, 5 groups: enumerate
    # every outcome of the 15 runs of 2 cases (4 outcomes each): 4**15 is too many, so two
    # groups (4**6 = 4096 outcomes) are enumerated exactly.
    p_case = (0.1, 0.15)
    outcomes = list(product((0, 1), repeat=2))
    chance = {
        o: math.prod(p if x else 1 - p for x, p in zip(o, p_case, strict=True)) for o in outcomes
    }
    for alpha in (0.05, 0.1, 0.2, 0.35):
        size = 0.0
        for runs in product(outcomes, repeat=6):  # 2 groups x 3 runs
            weight = math.prod(chance[o] for o in runs)
            blocks: list[Block] = [
                ([sum(runs[0]), sum(runs[1])], [sum(runs[2])]),
                ([sum(runs[3]), sum(runs[4])], [sum(runs[5])]),
            ]
            size += weight * (run_permutation_test_worse(blocks) <= alpha)
        assert size <= alpha + 1e-12
