"""Reading foreign case files with the line each record starts on, so errors name file:line.

JSONL goes through the same reader as evalgate's own case files; JSON arrays, YAML documents
and CSV get readers here that keep each record's first line.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import yaml

from evalgate.cases.read import _records_jsonl, read_case_bytes
from evalgate.config import yamlcore
from evalgate.errors import CaseFileError

_BOM = b"\xef\xbb\xbf"
_WHITESPACE = " \t\r\n"

# One record and the 1-based line it starts on.
Located = tuple[int, Any]


def read_bytes(path: Path) -> bytes:
    """The file's bytes; a CaseFileError for a missing, empty or BOM-prefixed file."""
    return read_case_bytes(path)


def _text(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CaseFileError(
            f"not valid UTF-8 at byte {exc.start}", where=f"{path}:{line}", fix="save it as UTF-8"
        ) from None


def jsonl_records(path: Path) -> list[Located]:
    return _records_jsonl(path, read_bytes(path))


def _line(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def _decode(path: Path, text: str, index: int) -> tuple[Any, int]:
    try:
        return json.JSONDecoder().raw_decode(text, index)
    except json.JSONDecodeError as exc:
        raise CaseFileError(
            f"invalid JSON: {exc.msg}: column {exc.colno}",
            where=f"{path}:{exc.lineno}",
            fix="check the file is a JSON export",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise CaseFileError(
            f"JSON that cannot be read: {exc}", where=f"{path}:{_line(text, index)}"
        ) from None


def _array(path: Path, text: str, index: int) -> tuple[list[Located], int]:
    """The items of the JSON array starting at ``text[index] == '['``, each with its line."""
    items: list[Located] = []
    index = _skip(text, index + 1)
    if index < len(text) and text[index] == "]":
        return items, index + 1
    while True:
        index = _skip(text, index)
        value, end = _decode(path, text, index)
        items.append((_line(text, index), value))
        index = _skip(text, end)
        if index < len(text) and text[index] == ",":
            index += 1
            continue
        if index < len(text) and text[index] == "]":
            return items, index + 1
        raise CaseFileError(
            "invalid JSON: expected ',' or ']' after an item",
            where=f"{path}:{_line(text, index)}",
        )


def json_document(path: Path) -> Any:
    """A whole JSON file; errors name the line."""
    text = _text(path, read_bytes(path))
    value, end = _decode(path, text, _skip(text, 0))
    rest = _skip(text, end)
    if rest < len(text):
        raise CaseFileError("extra data after the JSON value", where=f"{path}:{_line(text, rest)}")
    return value


def json_items(path: Path, keys: tuple[str, ...] = ("data", "items")) -> list[Located]:
    """The items of a JSON file that is an array, or an object holding one under ``keys``."""
    text = _text(path, read_bytes(path))
    start = _skip(text, 0)
    if text[start] == "[":
        items, end = _array(path, text, start)
    elif text[start] == "{":
        whole, end = _decode(path, text, start)
        found = next((k for k in keys if isinstance(whole.get(k), list)), None)
        if found is None:
            raise CaseFileError(
                f"a JSON object without a list of items under {' or '.join(map(repr, keys))}",
                where=str(path),
                fix="export the dataset items as a JSON array (or JSONL)",
            )
        # Find the list again by walking the object's top-level pairs, for its items' lines.
        items = _items_under(path, text, start, found)
    else:
        raise CaseFileError("not a JSON array or object", where=f"{path}:{_line(text, start)}")
    rest = _skip(text, end)
    if rest < len(text):
        raise CaseFileError("extra data after the JSON value", where=f"{path}:{_line(text, rest)}")
    return items


def _items_under(path: Path, text: str, start: int, key: str) -> list[Located]:
    index = _skip(text, start + 1)
    while index < len(text) and text[index] != "}":
        name, index = _decode(path, text, index)
        index = _skip(text, index)
        index = _skip(text, index + 1)  # the ':'
        if name == key and text[index] == "[":
            return _array(path, text, index)[0]
        _, index = _decode(path, text, index)
        index = _skip(text, index)
        if text[index] == ",":
            index = _skip(text, index + 1)
    raise AssertionError("the key was found by json.loads")  # pragma: no cover


def yaml_document(path: Path) -> tuple[Any, yaml.Node | None]:
    """The loaded YAML document and its node tree (for line numbers)."""
    text = _text(path, read_bytes(path))
    try:
        node: yaml.Node | None = yamlcore.compose(text)
        return yamlcore.load(text), node
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise CaseFileError(f"invalid YAML: {getattr(exc, 'problem', exc)}", where=where) from None
    except (RecursionError, ValueError) as exc:
        raise CaseFileError(f"YAML that cannot be read: {exc}", where=str(path)) from None


def child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    """The value node under ``key`` of a mapping node (None when absent)."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key and isinstance(v, yaml.Node):
                return v
    return None


def node_line(node: yaml.Node | None, default: int = 1) -> int:
    return node.start_mark.line + 1 if node is not None else default


def sequence_lines(node: yaml.Node | None, count: int) -> list[int]:
    """The line of each item of a YAML sequence node (1 for each when the node is unknown)."""
    if isinstance(node, yaml.SequenceNode) and len(node.value) == count:
        return [item.start_mark.line + 1 for item in node.value]
    return [node_line(node)] * count


def csv_rows(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """The header and each row as a dict, with the line the row starts on."""
    text = _text(path, read_bytes(path))
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error) as exc:
        raise CaseFileError(f"invalid CSV header: {exc}", where=f"{path}:1") from None
    names = [h.strip() for h in header]
    if len(set(names)) != len(names):
        raise CaseFileError("two CSV columns share a name", where=f"{path}:1")
    rows: list[tuple[int, dict[str, str]]] = []
    previous = reader.line_num
    try:
        for cells in reader:
            first = previous + 1
            previous = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(names):
                raise CaseFileError(
                    f"row has {len(cells)} cells, the header {len(names)}",
                    where=f"{path}:{first}",
                    fix="quote cells that hold commas or line breaks",
                )
            rows.append((first, dict(zip(names, cells, strict=True))))
    except csv.Error as exc:
        raise CaseFileError(f"invalid CSV: {exc}", where=f"{path}:{reader.line_num}") from None
    if not rows:
        raise CaseFileError("CSV file has a header and no rows", where=str(path))
    return names, rows
