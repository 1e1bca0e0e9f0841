"""A run stopped by its budget or interrupted, resumed: its unsent calls sent, every paid-for
outcome kept.

A call the budget refused is a ``budget`` error outcome at its place (case, repeat) in the run
file, a call an interrupt (Ctrl-C, a cancelled job) kept from being made an ``interrupted`` one;
resuming sends exactly those calls (``RunSpec.only``) and puts each reply in its place. A call
that was made and failed is an error, not unsent: it is not resent. Pure: the caller runs the
calls.
"""

from __future__ import annotations

from evalgate.errors import UserError
from evalgate.runs.schema import Outcome, Run

#: Error kinds of calls that were never made.
UNSENT = frozenset({"budget", "interrupted"})
#: The outcome of a call an interrupt kept from being made (copy it before changing it).
INTERRUPTED = Outcome(error="interrupted before this call was made", error_kind="interrupted")


def unsent(run: Run) -> frozenset[tuple[str, int]]:
    """The (case id, repeat) of every call the budget or an interrupt kept from being sent."""
    return frozenset(
        (c.id, r) for c in run.cases for r, o in enumerate(c.outcomes) if o.error_kind in UNSENT
    )


def cases_not_run(run: Run) -> int:
    """Cases with at least one call that was never made."""
    return sum(1 for c in run.cases if any(o.error_kind in UNSENT for o in c.outcomes))


def check_resumable(run: Run, suite: str, prompt_sha256: str) -> None:
    """A run can be resumed by the same suite and prompt, and only where names are plain."""
    if run.suite != suite or run.prompt.sha256 != prompt_sha256:
        raise UserError(
            f"run {run.name} is of suite {run.suite} with another prompt text than this one",
            fix="resume it with the prompt version (and text) it was made with",
        )
    if not unsent(run):
        raise UserError(
            f"run {run.name} has no unsent calls to resume",
            fix="only a run the budget stopped or that was interrupted (exit 3) can be resumed",
        )
    if any(c.split == "holdout" and c.input is None for c in run.cases):
        raise UserError(
            f"run {run.name} holds holdout cases under keyed names, which cannot be resumed",
            fix="run it again whole",
        )


def fill(run: Run, more: Run) -> Run:
    """``run`` with each unsent call replaced by ``more``'s outcome for it (in repeat order);
    calls ``more`` could not send either stay unsent, and its budget line is the run's."""
    pending: dict[str, list[int]] = {}
    for case_id, repeat in sorted(unsent(run)):
        pending.setdefault(case_id, []).append(repeat)
    sent = more.by_id()
    cases = []
    for case in run.cases:
        got = sent.get(case.id)
        if got is None or case.id not in pending:
            cases.append(case)
            continue
        outcomes = list(case.outcomes)
        for repeat, outcome in zip(pending[case.id], got.outcomes, strict=False):
            outcomes[repeat] = outcome
        cases.append(case.model_copy(update={"outcomes": outcomes}))
    return run.model_copy(
        update={
            "cases": cases,
            "budget_stop": more.budget_stop,
            "interrupted": more.interrupted,
            "wall_s": round(run.wall_s + more.wall_s, 4),
        }
    )
