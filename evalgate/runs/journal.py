"""A run's outcomes journaled as they arrive, so a run that is killed (SIGKILL, a runner that
dies, the machine out of memory) keeps every call it paid for.

While a run is sent, ``<state>/journal/<run name>.jsonl`` holds it. Its first line is the run's
head (its own fields, as a run file's first line has them) marked ``"journal": 1`` and naming
how many case lines follow; each case line is the case with every outcome ``interrupted``; then
each outcome, as it is scored, is one line ``[case, slot, outcome]`` (the case's line number
and the outcome's place among the case's calls), written and flushed at once. A process killed
mid-write leaves its last line cut short: reading drops that line alone (the call is resent on
resume, never guessed). Once the run is whole in memory the journal is removed; the run file
is written next. Reading a journal gives an interrupted run, which every command reads as one:
``evalgate run VERSION --resume PATH`` sends exactly its unsent calls, and a gate reads it as
incomplete.

Not journaled: a message batch (the batch itself is resumable, running/batch.py) and a run
with holdout cases (its record keeps only keyed names, which a resume cannot send; its outcomes
are not kept on disk by name).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from evalgate.errors import RunFileError, from_validation
from evalgate.runs.schema import CaseResult, Outcome, Run

SUFFIX = ".jsonl"

_MARK = '{"journal":1,"case_lines":'


def journal_dir(state_dir: Path) -> Path:
    return state_dir / "journal"


def journal_path(state_dir: Path, run_name: str) -> Path:
    return journal_dir(state_dir) / f"{run_name}{SUFFIX}"


class Journal:
    """An open journal: ``write`` puts one outcome at its place, flushed."""

    def __init__(self, path: Path, skeleton: Run) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = path.open("w", encoding="utf-8")
        try:
            head = skeleton.model_dump_json(exclude={"cases"})
            self._file.write(f'{_MARK}{len(skeleton.cases)},"run":{head}}}\n')
            for case in skeleton.cases:
                self._file.write(case.model_dump_json(exclude_defaults=True) + "\n")
            self._file.flush()
        except OSError:
            self.abandon()
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)  # half a head is no journal
            raise

    written = 0

    def write(self, case: int, slot: int, outcome: Outcome) -> None:
        if self._file is None:
            return
        self._file.write(f"[{case},{slot},{outcome.model_dump_json(exclude_defaults=True)}]\n")
        self._file.flush()
        self.written += 1

    def close(self) -> None:
        """Stop writing; the journal stays (a run that failed part-way keeps what it paid for)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if not self.written:
            self.path.unlink(missing_ok=True)  # nothing paid for: nothing to resume

    def abandon(self) -> None:
        """Writing failed (a full disk): stop writing, keep what was written (an outcome the
        journal lacks is resent on resume, never guessed)."""
        file, self._file = self._file, None
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()

    def remove(self) -> None:
        """The run is whole: the journal goes (and nothing more is written to it)."""
        self.close()
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)


def places(case_of: Sequence[int]) -> list[tuple[int, int]]:
    """For each job (by the case it is of, in order): its case's line in the run (cases with no
    job are not in it) and its place among that case's calls, as _case_results orders them."""
    lines: dict[int, int] = {}
    slots: dict[int, int] = {}
    for case in sorted(set(case_of)):
        lines[case] = len(lines)
    out = []
    for case in case_of:
        slot = slots.get(case, 0)
        slots[case] = slot + 1
        out.append((lines[case], slot))
    return out


def is_journal(path: Path) -> bool:
    if path.suffix != SUFFIX or not path.is_file():
        return False
    with path.open("rb") as raw:
        return raw.read(len(_MARK)) == _MARK.encode()


def _lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, line, whether it ended with a line break)."""
    with path.open("rb") as raw:
        for number, line in enumerate(raw, 1):
            yield number, line.rstrip(b"\n"), line.endswith(b"\n")


def read_journal(path: Path) -> Run:
    """The interrupted run a journal holds: every outcome it recorded at its place, every
    other call ``interrupted`` (unsent)."""
    where = str(path)
    fix = "resume from the run file, or run the version again"
    try:
        lines = _lines(path)
        _, first, _ = next(lines, (0, b"", False))
        if not first.startswith(_MARK.encode()):
            raise RunFileError("not a run journal", where=where, fix=fix)
        head = json.loads(first)
        count = head["case_lines"]
        run = Run.model_validate({**head["run"], "cases": []})
        cases: list[CaseResult] = []
        for _number, line, _ in lines:
            cases.append(CaseResult.model_validate_json(line))
            if len(cases) == count:
                break
        if len(cases) != count:
            raise RunFileError(
                f"the journal is cut short in its case lines ({len(cases)} of {count})",
                where=where,
                fix="run the version again: no outcome was recorded yet",
            )
        for number, line, ended in lines:
            try:
                case, slot, data = json.loads(line)
                outcome = Outcome.model_validate(data)
                cases[case].outcomes[slot] = outcome
            except (ValueError, TypeError, IndexError, ValidationError) as exc:
                if not ended:
                    break  # the write a kill cut short: that call is unsent
                raise RunFileError(
                    f"line {number} is not an outcome: {exc}", where=where, fix=fix
                ) from None
    except OSError as exc:
        raise RunFileError(f"cannot read the journal: {exc}", where=where, fix=fix) from None
    except ValidationError as exc:
        raise RunFileError(
            f"not a journal of this evalgate version: {from_validation(exc)}", where=where, fix=fix
        ) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise RunFileError(f"the journal's head is damaged: {exc}", where=where, fix=fix) from None
    return run.model_copy(update={"cases": cases, "interrupted": True})


def left_over(state_dir: Path, suite: str) -> list[tuple[Path, Run]]:
    """Journals of ``suite`` a killed run left behind, oldest first (damaged ones skipped)."""
    folder = journal_dir(state_dir)
    found = []
    for path in sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []:
        if not path.is_file():
            continue  # a pipe or a folder is no journal (and opening a pipe would block)
        try:
            run = read_journal(path)
        except RunFileError:
            continue
        if run.suite == suite:
            found.append((path, run))
    return found
