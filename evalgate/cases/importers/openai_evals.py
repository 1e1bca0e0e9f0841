"""OpenAI evals samples (JSONL): ``input`` (chat messages or a string) and ``ideal``.

``ideal`` is one answer or a list of acceptable answers; evals' Match and Includes compare it
with the reply's text as written (case-sensitively).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from evalgate.cases.importers import read
from evalgate.cases.importers.chat import chat_source, lost_parts, user_turn
from evalgate.cases.importers.core import (
    ANSWER,
    Check,
    Draft,
    Notes,
    Source,
    found_fields,
    own_names,
    rename_fields,
)
from evalgate.errors import CaseFileError

_KNOWN = {"input", "ideal"}


def read_openai_evals(path: Path, rename: dict[str, str] | None = None) -> Source:
    notes = Notes()
    systems: Counter[str] = Counter()
    drafts: list[Draft] = []
    records = read.json_items(path) if path.suffix.lower() == ".json" else read.jsonl_records(path)
    records = rename_fields(records, rename or {}, path, notes)
    for line, sample in records:
        where = f"{path}:{line}"
        if not isinstance(sample, dict) or "input" not in sample:
            raise CaseFileError(
                "a sample must be an object with 'input'" + found_fields(sample),
                where=where,
                fix=own_names(
                    '{"input": [{"role": "user", "content": "..."}], "ideal": "..."}',
                    "input",
                    "ideal",
                ),
            )
        text, extra = user_turn(sample["input"], where, notes, systems)
        draft = Draft(where=where, source_id=None, inputs={"input": text}, extra=extra)
        notes.map("input (user turn)", "input field input")
        draft.withheld = lost_parts(sample["input"])
        ideal = sample.get("ideal")
        if ideal is None:
            notes.add("sample without ideal", "add an ideal answer, or score with a judge", where)
        else:
            answers = [str(a) for a in ideal] if isinstance(ideal, list) else [str(ideal)]
            draft.checks.append(Check("ideal", ANSWER, answers, case_sensitive=True))
        for key in sample:
            if key not in _KNOWN:
                notes.add(f"field {key!r}", "not used by evalgate; the case keeps it", where)
                draft.extra[key] = sample[key]
        drafts.append(draft)
    return chat_source("openai-evals", path, drafts, notes, len(records), "oe", systems)
