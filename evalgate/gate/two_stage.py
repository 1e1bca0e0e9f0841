"""``gate.repeats: two-stage`` at the gate's boundary: which blocks the second stage sends
(the runner asks before it sends them) and the paired test over both stages (the gate asks).

Both questions are answered from the gate's own pairing and unit, so the blocks the runner
chose are the blocks the gate tests: a case or, when the gate tests scenario groups, a group,
its runs over the repeats every case of it has (gate.pairing._blocks). The law is
analysis.two_stage's; every other route reads the first stage alone (one candidate run a case,
chosen before anything was seen), which keeps them exact too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from evalgate.analysis.two_stage import RunVector, settled, two_stage_test_worse
from evalgate.config.models import GatePolicy
from evalgate.gate.pairing import _Pair, _pair_cases, _passed
from evalgate.gate.routes import _unit_of
from evalgate.gate.verdict import _Findings
from evalgate.runs.schema import Run, StageOne

Block = tuple[list[RunVector], list[RunVector]]


def first_stage(run: Run) -> Run:
    """The run as its first stage left it: each case's first outcome only."""
    cases = [c.model_copy(update={"outcomes": c.outcomes[:1]}) for c in run.cases]
    return run.model_copy(update={"cases": cases, "repeats": 1})


def _grouped(pairs: Sequence[_Pair], unit: Literal["case", "group"]) -> dict[str, list[_Pair]]:
    by_block: dict[str, list[_Pair]] = defaultdict(list)
    for pair in pairs:
        by_block[pair.group() if unit == "group" else pair.cand.id].append(pair)
    return by_block


def _vectors(rows: Sequence[_Pair]) -> Block:
    """A block's run vectors: per baseline repeat and per candidate repeat, each case's pass,
    over the repeats every case of the block has."""
    r, k = min(p.kb for p in rows), min(p.kc for p in rows)
    base = [tuple(int(_passed(p.base.outcomes[i])) for p in rows) for i in range(r)]
    cand = [tuple(int(_passed(p.cand.outcomes[i])) for p in rows) for i in range(k)]
    return base, cand


@dataclass(frozen=True)
class Selection:
    """The second stage: the unit, the blocks paired, and the cases of those not settled."""

    unit: Literal["case", "group"]
    blocks: int
    selected: int
    cases: frozenset[str]

    def record(self, baseline: Run, repeats: int) -> StageOne:
        return StageOne(
            baseline=baseline.name,
            baseline_created_at=baseline.created_at,
            repeats=repeats,
            unit=self.unit,
            blocks=self.blocks,
            selected=self.selected,
        )


def select(baseline: Run, first: Run, policy: GatePolicy) -> Selection:
    """Which cases the second stage sends: every case of each block (paired the gate's way)
    whose baseline repeats and first candidate run are not all the same."""
    dev = [c for c in first.cases if c.split == "dev"]
    found = _Findings()
    pairs = _pair_cases(baseline, dev, policy, False, found).pairs
    unit, _, _ = _unit_of(pairs, policy, found)
    chosen: set[str] = set()
    blocks = _grouped(pairs, unit)
    selected = 0
    for rows in blocks.values():
        base, cand = _vectors(rows)
        if not settled(base, cand[0]):
            selected += 1
            chosen.update(p.cand.id for p in rows)
    return Selection(unit, len(blocks), selected, frozenset(chosen))


def two_stage_p(
    baseline: Run,
    candidate: Run,
    first_pairs: Sequence[_Pair],
    policy: GatePolicy,
    unit: Literal["case", "group"],
) -> tuple[float | None, str]:
    """The paired test's p-value over both stages, or None with the reason it cannot be read
    as the design made it (the first stage alone is then the test's)."""
    design = candidate.stage_one
    assert design is not None
    if (baseline.name, baseline.created_at) != (design.baseline, design.baseline_created_at):
        return None, (
            f"the candidate's second stage was chosen against baseline {design.baseline}, not "
            f"{baseline.name}"
        )
    if unit != design.unit:
        return None, f"the second stage was chosen by {design.unit}, and the gate tests by {unit}"
    dev = [c for c in candidate.cases if c.split == "dev"]
    pairs = _pair_cases(baseline, dev, policy, False, _Findings()).pairs
    full = _grouped(pairs, unit)
    first = _grouped(first_pairs, unit)
    blocks: list[Block] = []
    for key, rows in first.items():
        got = full.get(key)
        if got is None or len(got) != len(rows):
            return None, f"block {key} lost a case between the stages (an error in the second)"
        base, cand = _vectors(got)
        want = 1 if settled(base, cand[0]) else design.repeats
        if any(p.kc != want for p in got):
            return None, f"block {key} has other repeats than the design gives it ({want})"
        blocks.append((base, cand))
    return two_stage_test_worse(blocks, mid_p=policy.mid_p), (
        f"two-stage repeats: {design.selected} of {design.blocks} "
        f"{'scenario groups' if unit == 'group' else 'cases'} were not settled after the first "
        f"candidate run and were sent {design.repeats} times in all; the exact law given that "
        "selection"
    )
