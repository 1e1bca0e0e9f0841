"""Reading and validating case files (JSONL or YAML); case and file hashes.

A bad case file gets one message naming file:line and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from evalgate.config import Fields
from evalgate.errors import CaseFileError

SplitName = Literal["dev", "holdout", "regression"]
SPLITS: tuple[SplitName, ...] = ("dev", "holdout", "regression")
MAX_LINE_BYTES = 1_000_000
_BOM = b"\xef\xbb\xbf"


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    input: dict[str, Any]
    expected: Any = None
    group: str | None = None
    category: str | None = None
    split: SplitName | None = None
    # sha256 of the whole record as written: an edited case gets a new hash.
    hash: str
    source: str


class CaseSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cases: tuple[Case, ...]
    # sha256 of each file's bytes, by path as given in the config.
    file_hashes: dict[str, str]

    @property
    def sha256(self) -> str:
        """One hash for the set: changes when any case is added, removed or edited."""
        return hash_cases(self.cases)


def hash_cases(cases: Iterable[Case]) -> str:
    digest = hashlib.sha256()
    for case in sorted(cases, key=lambda c: c.id):
        digest.update(f"{case.id}\0{case.hash}\n".encode())
    return digest.hexdigest()


def record_hash(record: dict[str, Any]) -> str:
    canonical = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _records_jsonl(path: Path, data: bytes) -> list[tuple[int, Any]]:
    records = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if len(raw) > MAX_LINE_BYTES:
            raise CaseFileError(
                f"line is {len(raw):,} bytes, over the 1 MB limit",
                where=f"{path}:{number}",
                fix="keep each case under 1 MB; move large inputs into files",
            )
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CaseFileError(
                f"not valid UTF-8 at byte {exc.start}",
                where=f"{path}:{number}",
                fix="save the file as UTF-8",
            ) from None
        try:
            records.append((number, json.loads(text)))
        except json.JSONDecodeError as exc:
            raise CaseFileError(
                f"invalid JSON: {exc.msg} at column {exc.colno}",
                where=f"{path}:{number}",
                fix="each line must be one JSON object",
            ) from None
        except (ValueError, RecursionError) as exc:
            # Valid JSON that Python refuses: an integer over 4,300 digits, nesting too deep.
            raise CaseFileError(
                f"JSON that cannot be read: {exc}",
                where=f"{path}:{number}",
                fix="each line must be one JSON object",
            ) from None
    return records


def _records_yaml(path: Path, data: bytes) -> list[tuple[int, Any]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaseFileError(f"not valid UTF-8 at byte {exc.start}", where=str(path)) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise CaseFileError(f"invalid YAML: {getattr(exc, 'problem', exc)}", where=where) from None
    except RecursionError:
        raise CaseFileError("YAML nested too deeply to read", where=str(path)) from None
    except ValueError as exc:
        # A value the YAML loader itself refuses: an integer over 4,300 digits.
        raise CaseFileError(f"YAML that cannot be read: {exc}", where=str(path)) from None
    if isinstance(loaded, dict) and list(loaded) == ["cases"]:
        loaded = loaded["cases"]
        assert isinstance(root, yaml.MappingNode)
        root = root.value[0][1]
    if not isinstance(loaded, list) or not isinstance(root, yaml.SequenceNode):
        raise CaseFileError(
            "a YAML case file must be a list of cases (or a mapping with one key, 'cases')",
            where=str(path),
        )
    return [(node.start_mark.line + 1, item) for node, item in zip(root.value, loaded, strict=True)]


def _field(record: dict[str, Any], name: str, where: str, *, kinds: tuple[type, ...]) -> Any:
    value = record[name]
    if not isinstance(value, kinds) or isinstance(value, bool):
        allowed = " or ".join(k.__name__ for k in kinds)
        raise CaseFileError(
            f"field {name!r} must be {allowed}, found {type(value).__name__} {value!r}",
            where=where,
        )
    return value


def parse_case(record: Any, fields: Fields, where: str, *, need_expected: bool) -> Case:
    if not isinstance(record, dict):
        raise CaseFileError(f"a case must be an object, found {type(record).__name__}", where=where)
    if fields.id not in record:
        raise CaseFileError(
            f"missing id field {fields.id!r}",
            where=where,
            fix="add it, or map another field with fields.id in evalgate.yml",
        )
    case_id = str(_field(record, fields.id, where, kinds=(str, int)))
    if not case_id.strip():
        raise CaseFileError(f"field {fields.id!r} is empty", where=where)
    expected = record.get(fields.expected)
    if need_expected and expected is None:
        raise CaseFileError(
            f"case {case_id!r} has no expected answer (field {fields.expected!r})",
            where=where,
            fix="add it, or map another field with fields.expected in evalgate.yml",
        )
    optional: dict[str, str | None] = {}
    for key in ("group", "category", "split"):
        name = getattr(fields, key)
        if name is None or record.get(name) is None:
            optional[key] = None
        else:
            optional[key] = str(_field(record, name, where, kinds=(str, int)))
    split = optional["split"]
    if split is not None and split not in SPLITS:
        raise CaseFileError(
            f"field {fields.split!r} is {split!r}",
            where=where,
            fix=f"allowed: {', '.join(SPLITS)}",
        )
    if fields.input is None:
        inputs = dict(record)
    else:
        missing = [name for name in fields.input if name not in record]
        if missing:
            raise CaseFileError(
                f"case {case_id!r} lacks input field {missing[0]!r}",
                where=where,
                fix="add it, or change fields.input in evalgate.yml",
            )
        inputs = {name: record[name] for name in fields.input}
    return Case(
        id=case_id,
        input=inputs,
        expected=expected,
        group=optional["group"],
        category=optional["category"],
        split=split,
        # The split field is where a case is kept, not what it says: writing it (split --apply,
        # retire) must not make the case look edited to the gate, the ledger or the release.
        hash=_hash_or_explain(
            {k: v for k, v in record.items() if k != fields.split}, case_id, where
        ),
        source=where,
    )


def _hash_or_explain(record: dict[str, Any], case_id: str, where: str) -> str:
    """The record's hash; a CaseFileError naming the field when it is not plain JSON data.

    YAML can hold dates, sets, binary and non-string keys, and a JSON escape can hold half a
    surrogate pair: none has one canonical JSON form, so none could be hashed or saved.
    """
    try:
        return record_hash(record)
    except (TypeError, ValueError, RecursionError):
        pass
    for key, value in record.items():
        if not isinstance(key, str):
            raise CaseFileError(
                f"case {case_id!r} has a non-string key {key!r}",
                where=where,
                fix="quote the key",
            )
        try:
            record_hash({key: value})
        except (TypeError, ValueError, RecursionError) as exc:
            raise CaseFileError(
                f"field {key!r} of case {case_id!r} is not plain JSON data ({exc})",
                where=where,
                fix="use strings, numbers, booleans, lists and objects; quote dates",
            ) from None
    raise CaseFileError(f"case {case_id!r} is not plain JSON data", where=where)


def read_case_bytes(path: Path) -> bytes:
    """A case file's bytes; a CaseFileError for a missing, empty or BOM-prefixed file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CaseFileError("case file does not exist", where=str(path)) from None
    except IsADirectoryError:
        raise CaseFileError(
            "is a directory, not a case file", where=str(path), fix="name .jsonl or .yaml files"
        ) from None
    if data.startswith(_BOM):
        raise CaseFileError(
            "file starts with a byte-order mark",
            where=f"{path}:1",
            fix="save it as UTF-8 without BOM",
        )
    if not data.strip():
        raise CaseFileError("case file is empty", where=str(path), fix="add at least one case")
    if data.startswith(_LFS_POINTER):
        raise CaseFileError(
            "is a Git LFS pointer, not the cases: the file's content was never downloaded",
            where=f"{path}:1",
            fix="run `git lfs pull`; in CI, check out with actions/checkout `lfs: true`",
        )
    return data


# The first line of a Git LFS pointer file (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md).
_LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"


def add_unique(case: Case, cases: list[Case], seen: dict[str, str]) -> None:
    """Append a case, refusing an id that an earlier case (in any file) already has."""
    if case.id in seen:
        raise CaseFileError(
            f"duplicate case id {case.id!r} (first at {seen[case.id]})",
            where=case.source,
            fix="every case needs its own id",
        )
    seen[case.id] = case.source
    cases.append(case)


def read_records(path: Path) -> list[tuple[int, Any]]:
    """A JSONL or YAML case file's records with their line numbers; at least one."""
    data = read_case_bytes(path)
    suffix = path.suffix.lower()
    if suffix in (".yml", ".yaml"):
        records = _records_yaml(path, data)
    elif suffix in (".jsonl", ".ndjson", ".json"):
        records = _records_jsonl(path, data)
    else:
        raise CaseFileError(
            f"unknown case file type {suffix!r}", where=str(path), fix="use .jsonl or .yaml"
        )
    if not records:
        raise CaseFileError("case file has no cases", where=str(path))
    return records


def load_case_file(path: Path, fields: Fields, *, need_expected: bool = True) -> list[Case]:
    records = read_records(path)
    return [
        parse_case(record, fields, f"{path}:{line}", need_expected=need_expected)
        for line, record in records
    ]


def load_cases(
    paths: list[Path], fields: Fields, *, root: Path | None = None, need_expected: bool = True
) -> CaseSet:
    """Load every file; file hashes are keyed by path relative to ``root`` (the config's folder)."""
    cases: list[Case] = []
    seen: dict[str, str] = {}
    hashes: dict[str, str] = {}
    for path in paths:
        for case in load_case_file(path, fields, need_expected=need_expected):
            add_unique(case, cases, seen)
        name = (
            path.relative_to(root).as_posix() if root and path.is_relative_to(root) else str(path)
        )
        hashes[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return CaseSet(cases=tuple(cases), file_hashes=hashes)
