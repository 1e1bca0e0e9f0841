"""Importers of other tools' case formats: promptfoo, OpenAI evals, Inspect AI, Langfuse.

``evalgate import FORMAT FILE`` writes evalgate JSONL; ``cases_format: FORMAT`` in evalgate.yml
reads the same file directly. Both go through ``convert``: a format's reader makes drafts, the
suite's one scorer is chosen (or taken from the config), and each draft becomes a record that
``evalgate.cases.parse_case`` validates, so errors still name file:line.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from evalgate import files
from evalgate.cases.importers.core import Conversion, Source, choose, finish, plan_from_config
from evalgate.cases.importers.inspect import read_inspect
from evalgate.cases.importers.langfuse import read_langfuse
from evalgate.cases.importers.openai_evals import read_openai_evals
from evalgate.cases.importers.promptfoo import read_promptfoo
from evalgate.cases.read import Case, CaseSet, add_unique, parse_case
from evalgate.config.models import Fields
from evalgate.errors import CaseFileError, UserError

Format = Literal["promptfoo", "openai-evals", "inspect", "langfuse"]
FORMATS: tuple[str, ...] = get_args(Format)

_RENAMING: dict[str, Callable[[Path, dict[str, str]], Source]] = {
    "inspect": read_inspect,
    "openai-evals": read_openai_evals,
}
_READERS: dict[str, Callable[[Path], Source]] = {
    "promptfoo": read_promptfoo,
    "openai-evals": read_openai_evals,
    "inspect": read_inspect,
    "langfuse": read_langfuse,
}

__all__ = [
    "FORMATS",
    "Conversion",
    "Format",
    "convert",
    "load_foreign",
    "referenced_files",
    "validate",
]


# The field names each format's dataset may name otherwise (``evalgate import --input-field``).
RENAMABLE: dict[str, tuple[str, ...]] = {
    "inspect": ("input", "target", "id", "choices"),
    "openai-evals": ("input", "ideal"),
}


def convert(
    format: str,
    path: Path,
    *,
    scorer_kind: str | None = None,
    scorer: Any = None,
    rename: dict[str, str] | None = None,
) -> Conversion:
    """Read ``path`` as ``format`` into evalgate records for one scorer.

    ``scorer`` is a configured ScorerConfig (reading a file directly from evalgate.yml);
    ``scorer_kind`` picks a kind by name; with neither, the kind most cases can be scored by.
    ``rename`` maps the format's field names to the dataset's own (see ``RENAMABLE``).
    """
    if rename:
        allowed = RENAMABLE.get(format, ())
        wrong = [name for name in rename if name not in allowed]
        if wrong:
            raise UserError(
                f"{format} files cannot name their {', '.join(wrong)} field otherwise",
                fix="field options work for: "
                + "; ".join(f"{f} ({', '.join(n)})" for f, n in RENAMABLE.items()),
            )
        source = _RENAMING[format](path, rename)
    else:
        source = _READERS[format](path)
    if not source.drafts:
        raise CaseFileError(f"no {source.noun} to import", where=str(path))
    plan = plan_from_config(scorer) if scorer is not None else choose(source, scorer_kind)
    return finish(source, plan)


def validate(conversion: Conversion, fields: Fields, *, need_expected: bool) -> list[Case]:
    """The records as evalgate cases: every record goes through the case-file validator."""
    return [
        parse_case(record, fields, where, need_expected=need_expected)
        for where, record in conversion.records
    ]


def summary_line(conversion: Conversion) -> str | None:
    """One line on what reading a foreign file left out, for runs that read it directly."""
    source = conversion.source
    parts = []
    if conversion.unscored:
        ids = ", ".join(u.id for u in conversion.unscored_list[:3])
        more = ", ..." if len(conversion.unscored) > 3 else ""
        parts.append(
            f"{len(conversion.unscored)} {source.noun} left out, the {conversion.plan.kind} "
            f"scorer cannot check them as the source meant ({ids}{more})"
        )
    notes = list(source.notes.unmapped.values())
    if notes:
        parts.append("not mapped: " + ", ".join(f"{n.what} ({n.count})" for n in notes))
    if not parts:
        return None
    return (
        f"{source.path}: {len(conversion.records)} of {source.read} {source.noun} read as "
        f"{source.format}; " + "; ".join(parts) + f" (details: `evalgate import {source.format} "
        f"{source.path} --out -`)"
    )


def load_foreign(
    format: str,
    paths: Sequence[Path],
    fields: Fields,
    scorer: Any,
    *,
    root: Path | None = None,
    need_expected: bool = True,
    on_note: Callable[[str], None] | None = None,
    rename: dict[str, str] | None = None,
) -> CaseSet:
    """A suite's cases read from foreign files, as ``evalgate.cases.load_cases`` reads its own."""
    cases: list[Case] = []
    seen: dict[str, str] = {}
    hashes: dict[str, str] = {}
    for path in paths:
        conversion = convert(format, path, scorer=scorer, rename=rename)
        if not conversion.records:
            # As an evalgate case file with no cases: a suite of none would gate nothing.
            first = conversion.unscored_list[0]
            raise CaseFileError(
                f"none of its {len(conversion.unscored)} {conversion.source.noun} can be "
                f"scored as the source meant ({first.reason}, at {first.where})",
                where=str(path),
                fix=f"see `evalgate import {format} {path} --out -` for each one's reason",
            )
        for case in validate(conversion, fields, need_expected=need_expected):
            add_unique(case, cases, seen)
        for file in conversion.source.files:
            name = (
                file.relative_to(root).as_posix()
                if root and file.is_relative_to(root)
                else str(file)
            )
            data = files.read_bytes(file, "case file", CaseFileError)
            hashes[name] = hashlib.sha256(data).hexdigest()
        line = summary_line(conversion)
        if line is not None and on_note is not None:
            on_note(line)
    return CaseSet(cases=tuple(cases), file_hashes=hashes)


def referenced_files(format: str, path: Path) -> list[Path]:
    """Every file a foreign case file reads (promptfoo's tests files): a change to any of them
    changes the suite. Best effort: a file that cannot be read is its own only dependency."""
    try:
        return _READERS[format](path).files
    except CaseFileError:
        return [path]
