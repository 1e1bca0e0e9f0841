"""Inspect AI datasets: JSONL (or a JSON array) and CSV of samples in Inspect's own shape.

A sample has ``input`` (a string or chat messages), ``target`` (a string or a list, any of which
counts), ``id`` and ``metadata``; a CSV has columns input, target, id and more, the others read
as metadata. A sample whose input is a transcript with tool calls becomes an agent case (see
transcript.py). A dataset with other names (read through a FieldSpec) maps them with
``evalgate import inspect FILE --input-field question --target-field answer`` (and --id-field,
--choices-field; ``cases_format_fields`` in evalgate.yml). Samples with ``choices`` (a list, or
a CSV cell split at commas as Inspect's read_choices splits it) and a letter target
(``multiple_choice()``) send the choices as ``A) ...`` lines and are scored by the exact letter.
Targets are compared stripped of surrounding whitespace, as Inspect's match() compares them.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from evalgate.cases.importers import read
from evalgate.cases.importers.chat import chat_source, lost_parts, user_turn
from evalgate.cases.importers.core import (
    ANSWER,
    Check,
    Draft,
    Notes,
    Source,
    found_fields,
    from_metadata,
    own_names,
    rename_fields,
)
from evalgate.cases.importers.transcript import agent_turns, has_tool_calls
from evalgate.errors import CaseFileError

_UNSUPPORTED = {
    "files": "evalgate sends text only; put what the files say into the input",
    "setup": "evalgate runs no setup per case",
    "sandbox": "evalgate runs no sandbox; the command backend can call your own harness",
}


def _records(path: Path, notes: Notes, rename: dict[str, str]) -> list[tuple[int, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        header, rows = read.csv_rows(path)
        if rename:
            located = rename_fields([(line, dict(row)) for line, row in rows], rename, path, notes)
            rows = [(line, record) for line, record in located]
            header = list(dict.fromkeys(k for _, r in rows for k in r))
        missing = [c for c in ("input",) if c not in header]
        if missing:
            raise CaseFileError(
                f"the CSV has no 'input' column (columns found: {', '.join(header) or 'none'})",
                where=f"{path}:1",
                fix=own_names("columns input, target and id", "input", "target"),
            )
        records = []
        for line, row in rows:
            record: dict[str, Any] = {k: row[k] for k in ("input", "target", "id") if row.get(k)}
            if row.get("choices", "").strip():
                record["choices"] = read_choices(row["choices"])
            own = ("input", "target", "id", "choices")
            metadata = {k: v for k, v in row.items() if k not in own and v}
            if metadata:
                record["metadata"] = metadata
            records.append((line, record))
        return records
    if suffix == ".json":
        return rename_fields(read.json_items(path), rename, path, notes)
    return rename_fields(read.jsonl_records(path), rename, path, notes)


def read_choices(cell: str) -> list[str]:
    """A CSV cell of choices as Inspect's read_choices splits it: at commas, or at whitespace
    when there is no comma; each stripped, empty ones dropped."""
    parts = cell.split(",")
    if len(parts) == 1:
        parts = cell.split()
    return [part.strip() for part in parts if part.strip()]


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MCQ_HINT = (
    "Samples with choices show them as 'A) ...' lines in the choices field and are scored by "
    "the exact letter of the right choice: ask for the letter alone in the system prompt "
    "(e.g. 'Reply with the letter of the right choice only')"
)


def _choice_letter(target: Any, choices: list[str]) -> str | None:
    """The letter of the right choice, when the target is one (Inspect's form for choice())."""
    if isinstance(target, str):
        text = target.strip()
        if len(text) == 1 and text.upper() in LETTERS[: len(choices)]:
            return text.upper()
    return None


def _mcq(draft: Draft, sample: dict[str, Any], notes: Notes, where: str) -> bool:
    """Inspect's multiple choice: the choices go to the model, the letter is the answer."""
    choices = sample.get("choices")
    if not (
        isinstance(choices, list)
        and 0 < len(choices) <= len(LETTERS)
        and all(isinstance(c, str) for c in choices)
    ):
        return False
    target = sample.get("target")
    targets = target if isinstance(target, list) else [target]
    found = [_choice_letter(t, choices) for t in targets]
    letters = [letter for letter in found if letter is not None]
    if not targets or len(letters) < len(found):
        return False  # a target in words: an answer as any other, the choices kept aside
    draft.inputs["choices"] = "\n".join(f"{LETTERS[i]}) {c}" for i, c in enumerate(choices))
    answer = ", ".join(sorted(set(letters), key=letters.index))
    # Not `contains`: a bare letter is inside nearly any reply.
    draft.checks.append(Check("target", "exact", answer, case_sensitive=False))
    notes.map("choices", "input field choices (A) ..., B) ...)")
    notes.map("target (a choice's letter)", "expected, scored exact")
    if len(letters) > 1:
        notes.add(
            "several right choices",
            f"the expected answer is the letters joined by ', ' ({answer}): ask for that form",
            where,
        )
    return True


def read_inspect(path: Path, rename: dict[str, str] | None = None) -> Source:
    notes = Notes()
    systems: Counter[str] = Counter()
    drafts: list[Draft] = []
    records = _records(path, notes, rename or {})
    multiple_choice = 0
    for line, sample in records:
        where = f"{path}:{line}"
        if not isinstance(sample, dict) or "input" not in sample:
            raise CaseFileError(
                "a sample must be an object with 'input'" + found_fields(sample),
                where=where,
                fix=own_names('{"id": "...", "input": "...", "target": "..."}', "input", "target"),
            )
        if has_tool_calls(sample["input"]):
            text, extra = agent_turns(sample["input"], where, notes, systems)
        else:
            text, extra = user_turn(sample["input"], where, notes, systems)
        raw_id = sample.get("id")
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int | type(None)):
            raise CaseFileError(
                f"'id' must be a string or an integer, found {raw_id!r}", where=where
            )
        draft = Draft(
            where=where,
            source_id=None if raw_id in (None, "") else str(raw_id),
            inputs={"input": text},
            extra=extra,
        )
        notes.map("input", "input field input")
        draft.withheld = lost_parts(sample["input"])
        if draft.source_id is not None:
            notes.map("id", "id")
        target = sample.get("target")
        mcq = _mcq(draft, sample, notes, where)
        multiple_choice += int(mcq)
        if mcq:
            pass  # the choice's letter is the expected answer
        elif target in (None, "", []):
            notes.add("sample without target", "add a target, or score with a judge", where)
        else:
            # Inspect's match() compares the target stripped of surrounding whitespace.
            given = target if isinstance(target, list) else [target]
            answers = [str(t).strip() for t in given]
            if any(not a for a in answers):
                raise CaseFileError(
                    "a target is empty once stripped of whitespace, so no reply could match it",
                    where=where,
                    fix="write the expected answer, or leave the target out",
                )
            if answers != [str(t) for t in given]:
                notes.map("target (surrounding whitespace)", "stripped, as Inspect's scorers")
            draft.checks.append(Check("target", ANSWER, answers, case_sensitive=False))
        from_metadata(draft, sample.get("metadata"), notes)
        for key, value in sample.items():
            if key in ("input", "target", "id", "metadata") or (mcq and key == "choices"):
                continue
            if key == "choices":
                draft.extra["choices"] = value
                notes.add(
                    "choices",
                    "kept as the case's 'choices' field, not sent; add choices to fields.input "
                    "and the template to show them",
                    where,
                )
            else:
                fix = _UNSUPPORTED.get(key, "not used by evalgate")
                notes.add(f"field {key!r}", fix, where)
        drafts.append(draft)
    source = chat_source("inspect", path, drafts, notes, len(records), "in", systems)
    if multiple_choice:
        source.hints.append(MCQ_HINT)
    return source
