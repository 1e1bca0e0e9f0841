"""The gate on two foreign result files: read, paired, decided as two evalgate runs are, with
every case the pairing leaves out counted. The CLI (``evalgate gate``) and the action (its
``results`` input) both decide here."""

from __future__ import annotations

from pathlib import Path

from evalgate.config.models import GatePolicy
from evalgate.errors import RunFileError
from evalgate.foreign.build import ForeignRun
from evalgate.gate.decide import decide
from evalgate.gate.verdict import Verdict
from evalgate.limits import counted
from evalgate.runs.schema import Run


def defaults_line(policy: GatePolicy, config: Path | str) -> str:
    return (
        f"no {config}: the gate's defaults decided (alpha {policy.alpha}, tolerance "
        f"{policy.tolerance}, power {policy.power}, test {policy.test}, at most "
        f"{policy.max_unpaired_share:.0%} of cases unpaired); write an evalgate.yml with a "
        "suite's gate: to set them"
    )


def dropped_notes(foreign: ForeignRun) -> list[str]:
    """What reading the file decided: the records left out, and the reader's notes."""
    lines = [f"{foreign.path}: {note}" for note in foreign.notes]
    if foreign.dropped:
        lines.append(f"{foreign.path}: left out of the comparison: {foreign.dropped_line()}")
    return lines


def decide_foreign(
    baseline: Run | None,
    candidate: Run,
    policy: GatePolicy,
    notes: list[str],
    names: tuple[str, str],
    left_out: frozenset[str] = frozenset(),
) -> Verdict:
    """The verdict, with ``notes`` and what the pairing left out among its warnings; ``names``
    (baseline, candidate) name the files when nothing pairs, which is an error. ``left_out``:
    the candidate's records its reader left out by identity (a skipped test), which ``notes``
    count already and the baseline-only count does not count again."""
    if baseline is not None and not set(baseline.by_id()) & set(candidate.by_id()):
        raise RunFileError(
            f"no case of {names[1]} pairs with one of {names[0]} "
            f"({len(candidate.cases)} and {len(baseline.cases)} cases; a case is told by "
            f"{identity(candidate)})",
            fix="gate two runs of the same tests (the same files, vars and descriptions)",
        )
    verdict = decide(baseline, candidate, policy)
    if left_out:
        # Counted once, as what the reader left out, not again as missing from the candidate.
        kept = [case for case in verdict.only_baseline if case not in left_out]
        verdict = verdict.model_copy(update={"only_baseline": kept})
    lines = [*notes, *_unpaired(verdict, candidate)]
    return verdict.model_copy(update={"warnings": [*lines, *verdict.warnings]})


def _unpaired(verdict: Verdict, candidate: Run) -> list[str]:
    """How many cases the pairing left out, and why (never silently)."""
    told = identity(candidate)
    lines = []
    for count, why in (
        (len(verdict.only_baseline), "in the baseline only (no candidate result with"),
        (len(verdict.only_candidate), "in the candidate only (no baseline result with"),
    ):
        if count:
            verb = "is" if count == 1 else "are"
            lines.append(f"{counted(count, 'case')} {verb} {why} {told}): left out of the pairing")
    if verdict.edited:
        lines.append(
            f"{counted(len(verdict.edited), 'case')} changed their test (the same {told}, other "
            "assertions or target): left out of the pairing"
        )
    return lines


def identity(run: Run) -> str:
    """What tells a case of this format from another."""
    return {
        "promptfoo": "its vars and description",
        "inspect": "its sample id",
        "junit": "its classname and name",
    }.get(run.model.backend, "its id")
