"""One power model for the paired test, over the effective number of units it counts.

The case-level model (:func:`conditional.conditional_power`: exact for the sign test and for a
noise-free suite; otherwise the broken cases counted exactly and the noisy ones' sum taken as
normal) counts independent cases. Over scenario
groups the test permutes whole runs within each group, so its null variance is the sum of the
groups' run-total variances. When a group's cases flip independently that sum is the sum of
the cases' variances and the group-level test has about the case-level test's power; when
they flip together each group moves as one case. The baseline's repeats measure which: the
**design effect**

    deff = sum_g sum_j (sum_{i in g} e_ij)^2 / sum_i sum_j e_ij^2,   e_ij = y_ij - mean_j y_ij,

the ratio of the groups' run-to-run variance to what it would be if their cases were
independent (1 + (m - 1) rho for groups of m whose residuals correlate rho; Kish 1965,
"Survey Sampling", sec. 5.4). The suite then has ``cases / deff`` effective units, and every
stated power, MDE and "about N more would decide it" is the case-level model at that many
units (between two whole numbers of units the power is interpolated linearly). A drop is taken
to cluster as the noise does (a group's phrasings break together exactly when they flip
together), which the baseline cannot measure but which the simulation checks.

With no case flipping in a group of several cases (no evidence on how they move), the design
effect is the one of perfectly correlated groups, ``sum m^2 / sum m``, so the suite counts as
its groups, as the group-level test needs when the phrasings do move together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

from evalgate.analysis.conditional import conditional_power
from evalgate.analysis.search import CASES_CAP, least_drop, least_n


def design_effect(outcomes: Sequence[Sequence[bool]], groups: Sequence[str]) -> float | None:
    """The measured design effect of a baseline's groups (module docstring), ``None`` when no
    case of a group of several flips across its repeats (nothing to measure it from).

    ``outcomes[i]`` is case ``i``'s pass/fail over its repeats (they may differ in number, as
    in a merged run: each case is centred on its own mean, and repeat ``j`` of a group sums the
    cases that have one). Cases alone in their group contribute the same to both sums.
    """
    if len(outcomes) != len(groups):
        raise ValueError(f"{len(outcomes)} cases but {len(groups)} group labels")
    numerator: dict[tuple[str, int], float] = {}
    case_sum = 0.0
    shared = 0.0  # the denominator's part from groups of several cases
    sizes: dict[str, int] = {}
    for g in groups:
        sizes[g] = sizes.get(g, 0) + 1
    for row, g in zip(outcomes, groups, strict=True):
        if len(row) < 2:
            continue
        mean = sum(row) / len(row)
        for j, y in enumerate(row):
            e = y - mean
            numerator[(g, j)] = numerator.get((g, j), 0.0) + e
            case_sum += e * e
            if sizes[g] > 1:
                shared += e * e
    if shared == 0.0:
        return None
    return sum(v * v for v in numerator.values()) / case_sum


def correlated_effect(sizes: Sequence[int]) -> float:
    """The design effect of groups whose cases move as one: ``sum m^2 / sum m`` (1 for none)."""
    total = sum(sizes)
    return sum(m * m for m in sizes) / total if total else 1.0


def bounded_effect(measured: float | None, sizes: Sequence[int]) -> float:
    """The design effect the power model uses for groups of ``sizes``: the measured one within
    [1, sum m^2 / sum m] (below 1, negatively correlated phrasings, is taken as 1: the model
    does not count on it), or the upper end when there is no measurement."""
    top = correlated_effect(sizes)
    if measured is None or not math.isfinite(measured):
        return top
    return min(max(measured, 1.0), top)


def _largest_drop(flip: float, draws: int, candidate_draws: int) -> float:
    """The largest drop the model has room for: every case noise leaves unfixed (one draw a
    side, ``1 - f``), or every settled case (repeats: a share ``2f`` is noisy)."""
    return 1.0 - flip if (draws, candidate_draws) == (1, 1) else 1.0 - min(1.0, 2.0 * flip)


def _check_units(units: float) -> None:
    if not (math.isfinite(units) and units >= 0.0):
        raise ValueError(f"units must be a finite number >= 0, got {units!r}")


def power(
    units: float, flip: float, drop: float, alpha: float, draws: int = 1, candidate_draws: int = 1
) -> float:
    """Power of the paired test over ``units`` effective units (interpolated between whole
    numbers), at flip rate ``flip`` and a true drop ``drop`` (:func:`conditional.conditional_power`)."""
    _check_units(units)
    low = math.floor(units)
    below = conditional_power(low, flip, drop, alpha, draws, candidate_draws) if low else 0.0
    if units == low:
        return below
    above = conditional_power(low + 1, flip, drop, alpha, draws, candidate_draws)
    return below + (units - low) * (above - below)


@lru_cache(maxsize=4096)
def mde(
    units: float,
    flip: float,
    alpha: float,
    target_power: float,
    draws: int = 1,
    candidate_draws: int = 1,
) -> float:
    """The smallest drop detected with ``target_power`` over ``units`` effective units:
    :func:`least_drop` on :func:`power`, which rises with the drop; ``inf`` when no drop reaches it
    (including when every case flips, or, with repeats, when half of them do: the model then
    has no settled case to break). ``1.0`` for no units."""
    _check_units(units)
    if units == 0.0:
        return 1.0
    if flip >= 1.0 or (flip >= 0.5 and (draws, candidate_draws) != (1, 1)):
        return math.inf

    def reach(d: float) -> float:
        return power(units, flip, d, alpha, draws, candidate_draws)

    return least_drop(reach, _largest_drop(flip, draws, candidate_draws), target_power)


@lru_cache(maxsize=4096)
def units_for(
    drop: float,
    flip: float,
    alpha: float,
    target_power: float,
    draws: int = 1,
    candidate_draws: int = 1,
) -> int:
    """The least whole number of effective units whose power at ``drop`` is ``target_power``
    (``CASES_CAP`` when none is)."""
    d = min(drop, max(0.0, _largest_drop(flip, draws, candidate_draws)))

    def enough(n: int) -> bool:
        return conditional_power(n, flip, d, alpha, draws, candidate_draws) >= target_power

    return least_n(enough, 0)


def counted_for(effective: int, cases: int, units: int, effect: float) -> int:
    """How many of the units the gate counts (cases, or groups of the suite's mean size) give
    ``effective`` effective units at design effect ``effect``."""
    if effective >= CASES_CAP:
        return CASES_CAP
    per_unit = cases / units if units else 1.0
    return min(CASES_CAP, math.ceil(effective * effect / per_unit - 1e-9))
