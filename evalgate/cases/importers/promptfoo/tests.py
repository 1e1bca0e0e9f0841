"""promptfoo's tests files: the references a config's ``tests:`` holds (``file://`` paths and
globs, each kept inside the repository), and CSV tests (``__expected`` columns are assertions).
YAML, JSON and JSONL tests files are lists of tests, read by the reader."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from evalgate import files, globs
from evalgate.cases.importers import read
from evalgate.cases.importers.core import Notes
from evalgate.cases.importers.promptfoo.assertions import parse_assertion
from evalgate.errors import CaseFileError

_TESTS_FILE = re.compile(r"\.(ya?ml|json|jsonl|csv)$", re.I)
_GLOB = re.compile(r"[*?[]")


class FakeSequence:
    """Lines of the items of a sequence that has no YAML node (JSON arrays, one reference)."""

    def __init__(self, lines: list[int]) -> None:
        self.lines = lines


def starts_with(path: Path, char: str) -> bool:
    return read.read_bytes(path).lstrip().startswith(char.encode())


def referenced(ref: str, base: Path, root: Path, where: str, what: str) -> Path:
    """The path a ``file://`` reference (or a plain relative path) names, relative to the file
    ``base`` that holds it; refused when it leads out of the repository ``root`` (an absolute
    ``file:///...`` path, ``..``, a symbolic link), whatever kind of file it names."""
    target = ref[len("file://") :] if ref.startswith("file://") else ref
    path = base.parent / target
    # A glob's fixed part is what must stay inside: a pattern cannot climb out after it.
    fixed = Path(*[p for p in Path(target).parts[: _fixed_parts(target)]])
    files.contain(
        base.parent / fixed if fixed.parts else base.parent, root, what, where, CaseFileError
    )
    if not _GLOB.search(target):
        files.contain(path, root, what, where, CaseFileError)
    return path


def _fixed_parts(target: str) -> int:
    parts = Path(target).parts
    for index, part in enumerate(parts):
        if _GLOB.search(part):
            return index
    return len(parts)


def resolve(ref: str, base: Path, root: Path, where: str) -> list[Path] | None:
    """Files a test reference names (file://, globs); None when it is not a file."""
    target = ref[len("file://") :] if ref.startswith("file://") else ref
    if "://" in target or not _TESTS_FILE.search(target):
        return None
    referenced(ref, base, root, where, "tests file")
    # The config's glob walker: its ** enters no linked folder (glob.glob's would loop).
    found = globs.expand(base.parent, target, globs.MAX_MATCHES)
    if not found:
        raise CaseFileError(
            f"tests file {ref!r} matches no file",
            where=where,
            fix=f"paths are relative to {base.parent}",
        )
    for path in found:
        files.contain(path, root, "tests file", where, CaseFileError)
    return found


def csv_tests(path: Path, notes: Notes) -> list[tuple[int, dict[str, Any]]]:
    header, rows = read.csv_rows(path)
    for name in header:
        special = name.startswith("__") and not re.match(
            r"^__(expected\d*|description|metadata(:.+)?)$", name
        )
        if special:
            notes.add(f"CSV column {name}", "not used by evalgate", f"{path}:1")
    tests = []
    for line, row in rows:
        test: dict[str, Any] = {
            "vars": {k: v for k, v in row.items() if not k.startswith("__")},
            "assert": [
                a
                for k, v in row.items()
                if re.match(r"^__expected\d*$", k) and (a := parse_assertion(v)) is not None
            ],
        }
        if row.get("__description"):
            test["description"] = row["__description"]
        metadata = {k.split(":", 1)[1]: v for k, v in row.items() if k.startswith("__metadata:")}
        if metadata:
            test["metadata"] = metadata
        tests.append((line, test))
    return tests
