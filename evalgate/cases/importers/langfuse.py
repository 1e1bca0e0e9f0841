"""Langfuse dataset items, exported as a JSON array (or the API's ``{"data": [...]}``) or JSONL.

An item has ``id``, ``input`` (a string or an object), ``expectedOutput``, ``metadata`` (whose
``split`` says where the item is kept) and ``status``; archived items are skipped and counted.
An agent's item, ``expectedOutput: {"tool_sequence": [...]}``, becomes a tool-sequence case,
its ``metadata.scenario_group`` the case's group.
An ``expectedOutput`` object of plain fields (``{"category": "booking"}``) is checked field by
field by a label scorer (the field most items have; the others are reported); any other object
is a reference answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalgate.cases.importers import read
from evalgate.cases.importers.core import (
    ANSWER,
    LABEL,
    RESERVED,
    Check,
    Draft,
    Notes,
    Source,
    from_metadata,
)
from evalgate.errors import CaseFileError

# Bookkeeping of the Langfuse project: nothing a case needs.
_BOOKKEEPING = {
    "status",
    "datasetId",
    "datasetName",
    "createdAt",
    "updatedAt",
    "sourceTraceId",
    "sourceObservationId",
    # When this version of the item became current (the API's DatasetItem.version).
    "version",
    # Media the item refers to (DatasetItem.mediaReferences): read below.
    "mediaReferences",
}


def _inputs(value: Any, where: str, notes: Notes) -> dict[str, Any]:
    if (
        isinstance(value, dict)
        and value
        and all(isinstance(k, str) and k.isidentifier() and k not in RESERVED for k in value)
    ):
        for key in value:
            notes.map(f"input.{key}", f"input field {key}")
        return dict(value)
    if value is None:
        notes.add("item without input", "add an input in Langfuse and export again", where)
        return {"input": ""}
    if isinstance(value, dict):
        notes.add(
            "input object kept whole",
            "its keys are not all plain names, so the template sees it as {{ input }}",
            where,
        )
    notes.map("input", "input field input")
    return {"input": value}


def _per_field(expected: Any) -> bool:
    """An expected object of named scalar fields, each checked as a label of the reply's JSON."""
    return (
        isinstance(expected, dict)
        and bool(expected)
        and all(
            isinstance(k, str) and isinstance(v, str | int | float | bool) and v is not None
            for k, v in expected.items()
        )
    )


def read_langfuse(path: Path) -> Source:
    notes = Notes()
    drafts: list[Draft] = []
    suffix = path.suffix.lower()
    records = read.jsonl_records(path) if suffix in (".jsonl", ".ndjson") else read.json_items(path)
    for line, item in records:
        where = f"{path}:{line}"
        if not isinstance(item, dict) or "input" not in item:
            raise CaseFileError(
                "a dataset item must be an object with 'input'",
                where=where,
                fix="export the dataset items from Langfuse as JSON",
            )
        status = str(item.get("status", "ACTIVE")).upper()
        if status == "ARCHIVED":
            notes.add("archived item", "skipped, as Langfuse skips it in experiments", where)
            continue
        raw_id = item.get("id")
        draft = Draft(
            where=where,
            source_id=None if raw_id in (None, "") else str(raw_id),
            inputs=_inputs(item["input"], where, notes),
        )
        if draft.source_id is not None:
            notes.map("id", "id")
        if item.get("mediaReferences"):
            # Its input refers to an image or a file a text prompt cannot carry: kept out.
            notes.add("item with media", "kept out of scoring: its media is not sent", where)
            draft.withheld = "refers to media (mediaReferences) that is not sent"
        expected = item.get("expectedOutput")
        if expected is None:
            notes.add("item without expectedOutput", "add one in Langfuse, or use a judge", where)
        elif isinstance(expected, dict) and isinstance(expected.get("tool_sequence"), list):
            draft.checks.append(
                Check("expectedOutput.tool_sequence", "tool_sequence", expected["tool_sequence"])
            )
            notes.map("expectedOutput.tool_sequence", "expected, scorer tool_sequence")
            for key in expected:
                if key != "tool_sequence":
                    notes.add(f"expectedOutput.{key}", "not checked by tool_sequence", where)
        elif _per_field(expected):
            # {"category": "booking", "priority": "high"}: each field is a label the reply's
            # JSON should carry; the suite's label scorer checks one field, named in the plan.
            for key, value in expected.items():
                draft.checks.append(
                    Check(
                        f"expectedOutput.{key}",
                        LABEL,
                        str(value),
                        case_sensitive=False,
                        raw={key: value},
                        field=key,
                    )
                )
        else:
            draft.checks.append(Check("expectedOutput", ANSWER, [expected], case_sensitive=False))
        metadata = item.get("metadata")
        if isinstance(metadata, dict) and "scenario_group" in metadata and "group" not in metadata:
            metadata = {("group" if k == "scenario_group" else k): v for k, v in metadata.items()}
            notes.map("metadata.scenario_group", "group")
        from_metadata(draft, metadata, notes)
        for key in item:
            if key not in _BOOKKEEPING and key not in ("id", "input", "expectedOutput", "metadata"):
                notes.add(f"field {key!r}", "not used by evalgate", where)
        drafts.append(draft)
    return Source(
        format="langfuse",
        path=path,
        noun="items",
        drafts=drafts,
        notes=notes,
        files=[path],
        read=len(records),
        id_prefix="lf",
    )
