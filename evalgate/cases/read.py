"""Reading and validating case files (JSONL or YAML); case and file hashes.

A bad case file gets one message naming file:line and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict

from evalgate import files
from evalgate.compact import Compact, cycles_uncollected
from evalgate.config import yamlcore
from evalgate.config.load import load_yaml
from evalgate.config.models import Fields
from evalgate.errors import CaseFileError

SplitName = Literal["dev", "holdout", "regression"]
SPLITS: tuple[SplitName, ...] = ("dev", "holdout", "regression")
MAX_LINE_BYTES = 1_000_000
_BOM = b"\xef\xbb\xbf"


class Case(Compact):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    input: dict[str, Any]
    expected: Any = None
    group: str | None = None
    category: str | None = None
    split: SplitName | None = None
    # Agent cases: prior turns ({"role", "content"}) before the templated last user turn.
    messages: tuple[dict[str, str], ...] = ()
    # Agent cases: tool name -> fixture entries ({"when"?, "result" | "error"}), in order.
    fixtures: dict[str, tuple[dict[str, Any], ...]] | None = None
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


# One encoder for every record (json.dumps builds one a call when given options). NaN and
# the infinities are refused: JSON has no such number (RFC 8259, sec. 6), Python's reader takes
# NaN and 1e400 all the same, and a run file, the model's request and the case's hash would
# each have held it differently (null, "nan", NaN).
_CANONICAL = json.JSONEncoder(
    sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False
)


# What _CANONICAL.encode runs, made once: encode() builds it again at every call, which was
# half the time of hashing a case. Without its markers (the check for a value that holds
# itself): every record hashed has been through files.depth, which refuses one, and the C
# encoder raises RecursionError on one all the same. _CANONICAL.encode where Python has no C
# encoder.
_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_ENCODE = (
    None
    if _C_ENCODER is None
    else _C_ENCODER(
        None, _CANONICAL.default, json.encoder.encode_basestring, None, ":", ",", True, False, False
    )
)


def _canonical(record: Any) -> str:
    return _CANONICAL.encode(record) if _ENCODE is None else "".join(_ENCODE(record, 0))


def record_hash(record: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(record).encode()).hexdigest()


def _records_jsonl(path: Path, data: bytes) -> list[tuple[int, Any]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        _records_jsonl(path, data[:start])  # what is wrong on an earlier line is said first
        number = data.count(b"\n", 0, start) + 1
        end = data.find(b"\n", start)
        _check_line_size(path, number, len(data[start:] if end < 0 else data[start:end]))
        raise CaseFileError(
            f"not valid UTF-8 at byte {exc.start - start}",
            where=f"{path}:{number}",
            fix="save the file as UTF-8",
        ) from None
    records = []
    # One decoder's scanner (what its raw_decode calls) on each line stripped of JSON's own
    # whitespace: json.loads, less its wrappers' cost (a third of the time at 20,000 cases).
    # Anything else on the line is left to json.loads below, which names what is wrong as it
    # always has.
    scan = _SCAN
    measured = MAX_LINE_BYTES // 4
    for number, line in enumerate(text.split("\n"), start=1):
        # A character is one to four bytes: only a line over a quarter of the limit is measured.
        if len(line) > measured:
            _check_line_size(path, number, len(line.encode()))
        if not line.strip(_BLANK):
            continue
        body = line.strip(_JSON_SPACE)
        try:
            record, end = scan(body, 0)
            if end == len(body):
                records.append((number, record))
                continue
        except (StopIteration, ValueError, RecursionError):
            pass
        records.append((number, _record_or_explain(path, number, line)))
    return records


def _check_line_size(path: Path, number: int, size: int) -> None:
    if size > MAX_LINE_BYTES:
        raise CaseFileError(
            f"line is {size:,} bytes, over the 1 MB limit",
            where=f"{path}:{number}",
            fix="keep each case under 1 MB; move large inputs into files",
        )


_DECODER = json.JSONDecoder()
# The decoder's own scanner (the C one where Python has it), which its raw_decode calls; the
# type stubs do not declare the attribute.
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
_JSON_SPACE = " \t\r"
# What bytes.strip() takes away: a line of these alone is blank, as it always was.
_BLANK = " \t\n\r\x0b\x0c"


def _record_or_explain(path: Path, number: int, line: str) -> Any:
    """The line's record by json.loads, or the CaseFileError that says why there is none."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise CaseFileError(
            f"invalid JSON: {exc.msg}: column {exc.colno}",
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


def _records_yaml(path: Path, data: bytes) -> list[tuple[int, Any]]:
    text = files.decode(data, path, CaseFileError)
    # Duplicate keys are refused, as in evalgate.yml: YAML would let the last one win silently.
    loaded = load_yaml(text, path, CaseFileError)
    root = yamlcore.compose(text)
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
    if type(value) is str:  # the common case, first: 20,000 cases are read before a run starts
        return value
    if not isinstance(value, kinds) or isinstance(value, bool):
        allowed = " or ".join(k.__name__ for k in kinds)
        raise CaseFileError(
            f"field {name!r} must be {allowed}, found {type(value).__name__} {value!r}",
            where=where,
        )
    return value


def _label(record: dict[str, Any], name: str | None, where: str) -> str | None:
    """An optional label field (group, category, split): a string, an integer or null."""
    if name is None:
        return None
    value = record.get(name)
    if value is None or type(value) is str:  # the common cases, without a call
        return value
    return str(_field(record, name, where, kinds=(str, int)))


def parse_case(record: Any, fields: Fields, where: str, *, need_expected: bool) -> Case:
    if not isinstance(record, dict):
        raise CaseFileError(f"a case must be an object, found {type(record).__name__}", where=where)
    for key, value in record.items():
        if (
            type(value) is not str
            and isinstance(value, (dict, list))
            and files.depth(value) >= files.MAX_DEPTH
        ):
            # Refused here, before any call: a run file could not hold it (nor could most APIs).
            raise CaseFileError(
                f"field {key!r} nests lists and objects more than {files.MAX_DEPTH} levels deep "
                "(or refers to itself)",
                where=where,
                fix="flatten the case's fields",
            )
    if fields.id not in record:
        raise CaseFileError(
            f"missing id field {fields.id!r} (fields found: {field_names(record)})",
            where=where,
            fix="add it, or map another field with fields.id in evalgate.yml",
        )
    case_id = record[fields.id]
    if type(case_id) is not str:
        case_id = str(_field(record, fields.id, where, kinds=(str, int)))
    if not case_id.strip():
        raise CaseFileError(f"field {fields.id!r} is empty", where=where)
    expected = record.get(fields.expected)
    if need_expected and expected is None:
        raise CaseFileError(
            f"case {case_id!r} has no expected answer (field {fields.expected!r}; fields "
            f"found: {field_names(record)})",
            where=where,
            fix="add it, or map another field with fields.expected in evalgate.yml",
        )
    if need_expected and isinstance(expected, str) and not expected.strip():
        # An empty answer is in every reply (contains) or in none (exact): never a test.
        raise CaseFileError(
            f"case {case_id!r} has an empty expected answer (field {fields.expected!r})",
            where=where,
            fix="write the answer the reply must give, or drop the case",
        )
    if need_expected and isinstance(expected, list):
        blank = [i for i, v in enumerate(expected) if isinstance(v, str) and not v.strip()]
        if blank:
            # One empty answer among several is in every reply (contains, any of): no test.
            raise CaseFileError(
                f"case {case_id!r} has an empty expected answer (field "
                f"{fields.expected!r}[{blank[0]}])",
                where=where,
                fix="remove the empty answer, or write the one the reply must give",
            )
    group = _label(record, fields.group, where)
    category = _label(record, fields.category, where)
    split = _label(record, fields.split, where)
    if split is not None and split not in SPLITS:
        raise CaseFileError(
            f"field {fields.split!r} is {split!r}",
            where=where,
            fix=f"allowed: {', '.join(SPLITS)}",
        )
    turns = record.get(fields.messages) if fields.messages else None
    messages = () if turns is None else parse_messages(turns, where)
    given = record.get(fields.fixtures) if fields.fixtures else None
    fixtures = None if given is None else parse_fixtures(given, where)
    if fields.input is None:
        # The conversation and the fixtures are not template input (nor a report's excerpt).
        agent_keys = {fields.messages, fields.fixtures} - {None}
        inputs = {k: v for k, v in record.items() if k not in agent_keys}
    else:
        inputs = {}
        for name in fields.input:
            if name not in record:
                raise CaseFileError(
                    f"case {case_id!r} lacks input field {name!r} (fields found: "
                    f"{field_names(record)})",
                    where=where,
                    fix="add it, or change fields.input in evalgate.yml",
                )
            inputs[name] = record[name]
    # The split field is where a case is kept, not what it says: writing it (split --apply,
    # retire) must not make the case look edited to the gate, the ledger or the release.
    hashed = _without(record, fields.split)
    try:
        digest = record_hash(hashed)
    except (TypeError, ValueError, RecursionError):
        digest = _hash_or_explain(hashed, case_id, where)
    # Every field is checked above (and the hash is a str): no second validation, see checked().
    return Case.checked(
        id=case_id,
        input=inputs,
        expected=expected,
        group=group,
        category=category,
        split=split,
        messages=messages,
        fixtures=fixtures,
        hash=digest,
        source=where,
    )


def _without(record: dict[str, Any], name: str | None) -> dict[str, Any]:
    """The record less one field (a copy only when it has that field)."""
    if name is None or name not in record:
        return record
    kept = dict(record)
    del kept[name]
    return kept


def field_names(record: dict[str, Any]) -> str:
    """A record's first field names, for an error that says which fields it found."""
    shown = [str(k) for k in list(record)[:12]]
    return ", ".join(shown) + (", ..." if len(record) > 12 else "") if shown else "none"


def parse_messages(value: Any, where: str) -> tuple[dict[str, str], ...]:
    """A case's prior turns: user and assistant by turns, starting with user, ending with
    assistant (the templated turn that follows is the user's)."""
    if value is None:
        return ()
    fix = 'write [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]'
    if not isinstance(value, list):
        raise CaseFileError(
            f"field 'messages' must be a list of turns, found {type(value).__name__}",
            where=where,
            fix=fix,
        )
    turns: list[dict[str, str]] = []
    for i, turn in enumerate(value):
        want = "user" if i % 2 == 0 else "assistant"
        if (
            not isinstance(turn, dict)
            or set(turn) != {"role", "content"}
            or not isinstance(turn["content"], str)
        ):
            raise CaseFileError(
                f"messages[{i}] must be an object with 'role' and 'content' (a string) only",
                where=where,
                fix=fix,
            )
        if turn["role"] != want:
            raise CaseFileError(
                f"messages[{i}] has role {turn['role']!r}, expected {want!r}: turns alternate, "
                "starting with user",
                where=where,
                fix=fix,
            )
        turns.append({"role": want, "content": turn["content"]})
    if turns and turns[-1]["role"] != "assistant":
        raise CaseFileError(
            "the last of 'messages' must be an assistant turn: the templated turn that follows "
            "is the user's",
            where=where,
            fix="end the conversation with the assistant's reply, or drop the last user turn",
        )
    return tuple(turns)


def parse_fixtures(value: Any, where: str) -> dict[str, tuple[dict[str, Any], ...]] | None:
    """A case's tool fixtures: ``{tool: entry or [entries]}``, an entry being
    ``{"when": {input subset}, "result": ...}`` or ``{"when": ..., "error": "..."}``."""
    if value is None:
        return None
    fix = 'write {"lookup_order": {"result": {...}}} or a list of {"when": {...}, "result": ...}'
    if not isinstance(value, dict):
        raise CaseFileError(
            f"field 'fixtures' must be an object keyed by tool name, found {type(value).__name__}",
            where=where,
            fix=fix,
        )
    fixtures: dict[str, tuple[dict[str, Any], ...]] = {}
    for tool, entries in value.items():
        listed = entries if isinstance(entries, list) else [entries]
        if not listed:
            raise CaseFileError(f"fixtures.{tool} is an empty list", where=where, fix=fix)
        for i, entry in enumerate(listed):
            at = f"fixtures.{tool}" + (f"[{i}]" if isinstance(entries, list) else "")
            if not isinstance(entry, dict):
                raise CaseFileError(f"{at} must be an object", where=where, fix=fix)
            unknown = set(entry) - {"when", "result", "error"}
            if unknown:
                raise CaseFileError(
                    f"{at} has unknown key {sorted(unknown)[0]!r}",
                    where=where,
                    fix="allowed: when, result, error",
                )
            if ("result" in entry) == ("error" in entry):
                raise CaseFileError(
                    f"{at} needs exactly one of 'result' or 'error'", where=where, fix=fix
                )
            if "error" in entry and not isinstance(entry["error"], str):
                raise CaseFileError(f"{at}.error must be a string", where=where)
            if not isinstance(entry.get("when", {}), dict):
                raise CaseFileError(
                    f"{at}.when must be an object (a subset of the call's input)", where=where
                )
        fixtures[str(tool)] = tuple(listed)
    return fixtures


def check_agent_case(case: Case, tools: list[Any]) -> None:
    """A case's fixtures against the suite's tools: every tool named exists, every ``when``
    names only input fields the tool's schema has, with values its schema allows."""
    if not case.fixtures:
        return
    import jsonschema

    by_name = {t.name: t for t in tools}
    if not by_name:
        raise CaseFileError(
            f"case {case.id!r} has fixtures but the suite offers no tools",
            where=case.source,
            fix="list the tools under tools: in evalgate.yml",
        )
    for tool, entries in case.fixtures.items():
        if tool not in by_name:
            raise CaseFileError(
                f"fixtures name an unknown tool {tool!r}",
                where=case.source,
                fix=f"the suite's tools: {', '.join(by_name)}",
            )
        schema = by_name[tool].input_schema
        properties = schema.get("properties")
        for i, entry in enumerate(entries):
            for key, wanted in (entry.get("when") or {}).items():
                if isinstance(properties, dict) and key not in properties:
                    raise CaseFileError(
                        f"fixtures.{tool}[{i}].when names {key!r}, which is not an input of {tool}",
                        where=case.source,
                        fix=f"inputs of {tool}: {', '.join(properties) or '(none)'}",
                    )
                sub = properties.get(key) if isinstance(properties, dict) else None
                if isinstance(sub, dict):
                    try:
                        jsonschema.validate(wanted, sub)
                    except jsonschema.ValidationError as exc:
                        raise CaseFileError(
                            f"fixtures.{tool}[{i}].when.{key} does not fit {tool}'s input "
                            f"schema: {exc.message}",
                            where=case.source,
                        ) from None


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
            number = _non_finite(value)
            if number is not None:
                raise CaseFileError(
                    f"field {key!r} of case {case_id!r} holds {number}, which is no JSON "
                    "number (NaN, an infinity, or a number too large for a float)",
                    where=where,
                    fix="write it as a string, or as a finite number",
                ) from None
            raise CaseFileError(
                f"field {key!r} of case {case_id!r} is not plain JSON data ({exc})",
                where=where,
                fix="use strings, numbers, booleans, lists and objects; quote dates",
            ) from None
    raise CaseFileError(f"case {case_id!r} is not plain JSON data", where=where)


def _non_finite(value: Any) -> float | None:
    """The first NaN or infinity in a value, through its lists and objects, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = _non_finite(item)
            if found is not None:
                return found
    return None


def read_case_bytes(path: Path) -> bytes:
    """A case file's bytes; a CaseFileError for a missing, empty or BOM-prefixed file."""
    data = files.read_bytes(path, "case file", CaseFileError)
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


def read_records(path: Path, data: bytes | None = None) -> list[tuple[int, Any]]:
    """A JSONL or YAML case file's records with their line numbers; at least one. ``data``:
    the file's bytes when the caller has read them (so that what is hashed is what is read)."""
    if data is None:
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


def load_case_file(
    path: Path, fields: Fields, *, need_expected: bool = True, data: bytes | None = None
) -> list[Case]:
    records = read_records(path, data)
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
        data = read_case_bytes(path)
        with cycles_uncollected():
            read = load_case_file(path, fields, need_expected=need_expected, data=data)
        for case in read:
            add_unique(case, cases, seen)
        name = (
            path.relative_to(root).as_posix() if root and path.is_relative_to(root) else str(path)
        )
        hashes[name] = hashlib.sha256(data).hexdigest()
    return CaseSet(cases=tuple(cases), file_hashes=hashes)
