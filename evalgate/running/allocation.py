"""The adaptive design (``gate.repeats: adaptive``): how many times the candidate sends each case.

A case (or, when the gate tests scenario groups, every case of a group) that was settled in the
allocation data (every scored repeat the same) is sent once; one that flipped there, or that
the allocation data lack, is sent ``gate.unstable_repeats`` times. Pure.

Why the test stays exact (docs/statistics.md, "Repeats where they decide"): the allocation data
must be independent of the outcomes the test compares, given each case's pass rate. An earlier
baseline (one the test's baseline does not pool) is; the test's own baseline is not. Given the
allocation, every case's null law is the hypergeometric of its own R and K_i, so the exact
conditional test over unequal repeats is exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from evalgate.config.models import GatePolicy
from evalgate.running.suite import RunSpec, cases_to_run
from evalgate.runs.schema import CaseResult, Run

# A case's scores in the allocation data: None is an errored call (never a score).
Scores = Sequence[float | None]


@dataclass(frozen=True)
class Allocation:
    """Each case's candidate repeats, and what the allocation was made from."""

    repeats: dict[str, int]
    source: str
    settled: int
    unstable: int
    unknown: int

    @property
    def calls(self) -> int:
        return sum(self.repeats.values())

    @property
    def most(self) -> int:
        return max(self.repeats.values(), default=1)

    def jobs(self) -> frozenset[tuple[str, int]]:
        """The (case id, repeat) jobs to send, for ``RunSpec.only`` with ``repeats = most``."""
        return frozenset((case, r) for case, k in self.repeats.items() for r in range(k))

    def line(self) -> str:
        """The design, as the gate's test name and the estimate say it."""
        top = max(self.repeats.values(), default=1)
        return (
            f"adaptive repeats allocated from {self.source}: {self.settled} settled cases sent "
            f"once, {self.unstable + self.unknown} sent {top} times "
            f"({self.unstable} flipped there, {self.unknown} not in it); {self.calls} calls"
        )


def flipped(scores: Scores) -> bool | None:
    """Whether a case's scored repeats disagree; None when fewer than two were scored."""
    values = [s for s in scores if s is not None]
    if len(values) < 2:
        return None
    return len(set(values)) > 1


def scores_of(runs: Iterable[Run]) -> dict[str, list[float | None]]:
    """Each case's scores over every run of the allocation data (hashes must match the first)."""
    out: dict[str, list[float | None]] = {}
    hashes: dict[str, str] = {}
    for run in runs:
        for case in run.cases:
            if hashes.setdefault(case.id, case.hash) != case.hash:
                continue  # an edited case: its older repeats measured another case
            out.setdefault(case.id, []).extend(
                None if o.error is not None else o.score for o in case.outcomes
            )
    return out


def allocate(
    cases: Sequence[CaseResult] | Sequence[tuple[str, str | None]],
    data: Mapping[str, Scores],
    unstable_repeats: int,
    source: str,
    by_group: bool = False,
) -> Allocation:
    """Each case's repeats: 1 when settled in ``data``, else ``unstable_repeats``.

    ``cases``: the cases to run, as (id, group) pairs or case results. ``by_group``: the gate
    tests scenario groups, whose test compares whole runs of a group over the repeats every case
    of it has: a group with one unstable case sends every case of it ``unstable_repeats`` times.
    """
    pairs = [(c.id, c.group) if isinstance(c, CaseResult) else c for c in cases]
    state: dict[str, bool | None] = {
        case: flipped(data[case]) if case in data else None for case, _ in pairs
    }
    if by_group:
        groups: dict[str, list[str]] = {}
        for case, group in pairs:
            groups.setdefault(group or case, []).append(case)
        loud = {g for g, members in groups.items() if any(state[m] is not False for m in members)}
        wants = {case: (group or case) in loud for case, group in pairs}
    else:
        wants = {case: state[case] is not False for case, _ in pairs}
    repeats = {case: unstable_repeats if wants[case] else 1 for case, _ in pairs}
    return Allocation(
        repeats=repeats,
        source=source,
        settled=sum(1 for k in repeats.values() if k == 1),
        unstable=sum(1 for c, k in repeats.items() if k > 1 and state[c] is True),
        unknown=sum(1 for c, k in repeats.items() if k > 1 and state[c] is not True),
    )


@dataclass(frozen=True)
class AdaptiveSource:
    """What an adaptive run allocates from: each case's scores in data the test does not
    compare (an earlier baseline), named for the gate's report."""

    data: Mapping[str, Scores]
    source: str
    unstable_repeats: int
    by_group: bool = False


def plan_adaptive(spec: RunSpec, adaptive: AdaptiveSource) -> RunSpec:
    """``spec`` with each case's allocated repeats: the jobs it sends (``only``), its most
    repeats, and the design's line (kept in the run, read by the gate)."""
    cases = cases_to_run(spec)
    given = allocate(
        [(c.id, c.group) for c in cases],
        adaptive.data,
        adaptive.unstable_repeats,
        adaptive.source,
        by_group=adaptive.by_group,
    )
    return replace(spec, repeats=given.most, only=given.jobs(), allocation=given.line())


def adaptive_source(
    runs: Sequence[Run], unstable_repeats: int, by_group: bool, source: str
) -> AdaptiveSource:
    """The allocation data of ``runs`` (earlier baselines, none of them the test's)."""
    return AdaptiveSource(scores_of(runs), source, unstable_repeats, by_group)


def held_out(own: Run, pooled: Run) -> dict[str, list[float | None]]:
    """The earlier baselines' scores that ``runs.history.pool`` added to each case of ``own``
    (after its own outcomes): held out of the test to allocate, never compared."""
    mine = {c.id: len(c.outcomes) for c in own.cases}
    return {
        c.id: [o.score for o in c.outcomes[mine.get(c.id, 0) :]]
        for c in pooled.cases
        if len(c.outcomes) > mine.get(c.id, 0)
    }


def candidate_repeats(
    policy: GatePolicy, source: AdaptiveSource | None
) -> tuple[int, AdaptiveSource | None]:
    """A pull request's candidate under ``gate.repeats``: its repeats a case and, for the
    adaptive design, what it allocates from (with no earlier baseline, every case is unknown
    and sent ``gate.unstable_repeats`` times: exact, and as dear as fixed repeats)."""
    if policy.repeats == "two-stage":
        return 1, None  # the first stage; app.run_two_stage sends the second
    if policy.repeats != "adaptive":
        return policy.repeats, None
    if source is None:
        source = AdaptiveSource({}, "no earlier baseline", policy.unstable_repeats)
    return 1, replace(
        source, unstable_repeats=policy.unstable_repeats, by_group=policy.unit != "case"
    )
