"""Inspect AI datasets: JSONL (or a JSON array) and CSV of samples in Inspect's own shape.

A sample has ``input`` (a string or chat messages), ``target`` (a string or a list, any of which
counts), ``id`` and ``metadata``; a CSV has columns input, target, id and more, the others read
as metadata. (A dataset read through a FieldSpec with other names: rename the fields first, or
point evalgate's own ``fields:`` mapping at the JSONL.)
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from evalgate.errors import CaseFileError
from evalgate.importers import read
from evalgate.importers.chat import chat_source, user_turn
from evalgate.importers.core import ANSWER, Check, Draft, Notes, Source, from_metadata

_UNSUPPORTED = {
    "files": "evalgate sends text only; put what the files say into the input",
    "setup": "evalgate runs no setup per case",
    "sandbox": "evalgate runs no sandbox; the command backend can call your own harness",
}


def _records(path: Path, notes: Notes) -> list[tuple[int, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        header, rows = read.csv_rows(path)
        missing = [c for c in ("input",) if c not in header]
        if missing:
            raise CaseFileError(
                "the CSV has no 'input' column",
                where=f"{path}:1",
                fix="name the columns input, target, id (others become metadata)",
            )
        records = []
        for line, row in rows:
            record: dict[str, Any] = {k: row[k] for k in ("input", "target", "id") if row.get(k)}
            metadata = {k: v for k, v in row.items() if k not in ("input", "target", "id") and v}
            if metadata:
                record["metadata"] = metadata
            records.append((line, record))
        return records
    if suffix == ".json":
        return read.json_items(path)
    return read.jsonl_records(path)


def read_inspect(path: Path) -> Source:
    notes = Notes()
    systems: Counter[str] = Counter()
    drafts: list[Draft] = []
    records = _records(path, notes)
    for line, sample in records:
        where = f"{path}:{line}"
        if not isinstance(sample, dict) or "input" not in sample:
            raise CaseFileError(
                "a sample must be an object with 'input'",
                where=where,
                fix='write {"id": "...", "input": "...", "target": "..."}',
            )
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
        if draft.source_id is not None:
            notes.map("id", "id")
        target = sample.get("target")
        if target in (None, "", []):
            notes.add("sample without target", "add a target, or score with a judge", where)
        else:
            answers = [str(t) for t in target] if isinstance(target, list) else [str(target)]
            draft.checks.append(Check("target", ANSWER, answers, case_sensitive=False))
        from_metadata(draft, sample.get("metadata"), notes)
        for key, value in sample.items():
            if key in ("input", "target", "id", "metadata"):
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
    return chat_source("inspect", path, drafts, notes, len(records), "in", systems)
