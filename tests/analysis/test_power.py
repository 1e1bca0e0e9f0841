"""The power model over effective units (evalgate/analysis/power.py), with known answers.

Design effects are worked out by hand from the residuals e_ij = y_ij - (case i's mean): the
sum over groups and repeats of the squared group sums, over the sum of the squared residuals.
Binomial tails are counted by hand from binomial coefficients.
"""

from __future__ import annotations

import itertools
import math

import pytest

from evalgate.analysis import power
from evalgate.analysis.conditional import conditional_power, conditional_test_worse
from evalgate.analysis.run_permutation import run_permutation_test_worse


def rows(text: str) -> list[list[bool]]:
    return [[ch == "1" for ch in word] for word in text.split()]


def test_cases_that_flip_together_double_the_variance_of_a_group_of_two() -> None:
    # a and b: residuals +1/2, -1/2 each; group sums 1, -1: 2 over 4 * 1/4 = 1.
    assert power.design_effect(rows("10 10"), ["g", "g"]) == pytest.approx(2.0)


def test_cases_that_flip_apart_cancel_and_one_steady_case_adds_nothing() -> None:
    assert power.design_effect(rows("10 01"), ["g", "g"]) == pytest.approx(0.0)
    # b never flips: the group sums are a's residuals, 1/2 over 1/2.
    assert power.design_effect(rows("10 11"), ["g", "g"]) == pytest.approx(1.0)


def test_a_group_of_three_with_a_flipping_case_alone_beside_it() -> None:
    # g: a and b flip together (sums 1, -1: 2), c steady; d alone: 1/4 + 1/4. Numerator 2.5,
    # denominator 1/2 (a) + 1/2 (b) + 1/2 (d) = 1.5: 5/3.
    effect = power.design_effect(rows("10 10 11 01"), ["g", "g", "g", "d"])
    assert effect == pytest.approx(5 / 3)


def test_unequal_repeats_centre_each_case_on_its_own_mean() -> None:
    # a "110": residuals 1/3, 1/3, -2/3; b "10": 1/2, -1/2. Group sums 5/6, -1/6, -2/3:
    # 25/36 + 1/36 + 16/36 = 7/6; squared residuals 6/9 + 1/2 = 7/6. Ratio 1.
    assert power.design_effect(rows("110 10"), ["g", "g"]) == pytest.approx(1.0)


def test_nothing_flipping_in_a_group_of_several_measures_nothing() -> None:
    assert power.design_effect(rows("11 00 11"), ["g", "g", "h"]) is None
    # Only a case alone in its group flips: no evidence on how a group's cases move.
    assert power.design_effect(rows("11 11 10"), ["g", "g", "h"]) is None
    # A case with one repeat has no residual.
    assert power.design_effect(rows("1 0"), ["g", "g"]) is None
    with pytest.raises(ValueError, match="2 cases but 1 group"):
        power.design_effect(rows("10 10"), ["g"])


def test_the_bounded_effect_runs_from_one_to_perfectly_correlated_groups() -> None:
    sizes = [3, 3, 2, 2, 2]  # sum m^2 / sum m = 30 / 12 = 2.5
    assert power.correlated_effect(sizes) == pytest.approx(2.5)
    assert power.bounded_effect(None, sizes) == pytest.approx(2.5)
    assert power.bounded_effect(0.4, sizes) == 1.0
    assert power.bounded_effect(7.0, sizes) == pytest.approx(2.5)
    assert power.bounded_effect(1.7, sizes) == pytest.approx(1.7)
    assert power.bounded_effect(math.nan, sizes) == pytest.approx(2.5)
    assert power.correlated_effect([]) == 1.0


def test_power_between_whole_units_is_interpolated() -> None:
    # R = K = 1, f = 0: the sign test at alpha 0.045 needs 5 broken (2**-5 = 0.031; 2**-4 =
    # 0.0625), so at d = 1/2: 5 units 1/32; 6 units P(Bin(6, 1/2) >= 5) = 7/64; 5.5 halfway.
    assert power.power(5, 0.0, 0.5, 0.045) == pytest.approx(1 / 32)
    assert power.power(6, 0.0, 0.5, 0.045) == pytest.approx(7 / 64)
    assert power.power(5.5, 0.0, 0.5, 0.045) == pytest.approx(9 / 128)
    assert power.power(0.5, 0.0, 0.5, 0.045) == 0.0
    with pytest.raises(ValueError, match="units"):
        power.power(-1.0, 0.0, 0.5, 0.045)


def test_units_for_and_its_count_in_groups() -> None:
    # P(Bin(n, 1/2) >= 5) >= 0.8: n = 12 (1 - 794/4096 = 0.806); n = 11 gives 1 - 562/2048.
    assert power.units_for(0.5, 0.0, 0.045, 0.8) == 12
    # 12 effective units at design effect 2.5 are 30 cases, in groups of 12 / 5 = 2.4: 12.5.
    assert power.counted_for(12, 12, 5, 2.5) == 13
    assert power.counted_for(12, 12, 12, 1.0) == 12


@pytest.mark.parametrize(("units", "flip", "draws"), [(30.0, 0.09, (2, 1)), (90.5, 0.05, (3, 1))])
def test_the_mde_is_where_the_power_reaches_its_target(
    units: float, flip: float, draws: tuple[int, int]
) -> None:
    d = power.mde(units, flip, 0.045, 0.8, *draws)
    assert power.power(units, flip, d, 0.045, *draws) >= 0.8
    assert power.power(units, flip, d - 2e-5, 0.045, *draws) < 0.8
    # Fewer effective units detect less.
    assert power.mde(units / 3, flip, 0.045, 0.8, *draws) > d


def test_the_mde_of_whole_units_is_the_case_level_one() -> None:
    d = power.mde(100.0, 0.09, 0.045, 0.8, 2, 1)
    assert conditional_power(100, 0.09, d, 0.045, 2, 1) >= 0.8
    assert power.mde(0.0, 0.09, 0.045, 0.8) == 1.0
    assert power.mde(10.0, 1.0, 0.045, 0.8) == math.inf
    assert power.mde(10.0, 0.5, 0.045, 0.8, 2, 1) == math.inf


def test_groups_that_move_as_one_are_tested_as_their_groups_by_enumeration() -> None:
    # Why perfectly correlated groups count as one unit each: when a group's cases share every
    # draw, the group-level test (whole runs permuted within groups) gives the case-level test's
    # p-value on one case a group, for every outcome. Enumerated: 2 groups of 3 cases (and 2
    # groups of 2), R = 2, K = 1, every pass/fail pattern of a group's 3 draws (8 ** 2 each).
    patterns = list(itertools.product((0, 1), repeat=3))
    for size in (3, 2):
        for first, second in itertools.product(patterns, repeat=2):
            blocks = [
                ([size * x for x in pattern[:2]], [size * pattern[2]])
                for pattern in (first, second)
            ]
            sets = [(sum(p[:2]), 2, p[2], 1) for p in (first, second)]
            assert run_permutation_test_worse(blocks) == pytest.approx(
                conditional_test_worse(sets), abs=1e-12
            )
