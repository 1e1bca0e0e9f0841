"""Case files (JSONL or YAML): one clear message naming file:line and the field for each kind of
bad input; case and file hashes; property tests over malformed input."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalgate.cases.read import Case, hash_cases, load_case_file, load_cases, record_hash
from evalgate.config.models import Fields
from evalgate.errors import CaseFileError

# The bike-shop mapping: the message is the input, the category is the expected answer.
FIELDS = Fields(input=["message"], expected="category")

GOOD = [
    {"id": "a1", "group": "g1", "category": "booking", "message": "Can I book a service?"},
    {"id": "a2", "group": "g1", "category": "quote", "message": "How much for a chain?"},
    {"id": 3, "category": "other", "message": "Where do I park?", "split": "holdout"},
]


def jsonl(*records: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.fixture
def write(tmp_path: Path) -> Callable[..., Path]:
    def write_file(content: str | bytes, name: str = "cases.jsonl") -> Path:
        path = tmp_path / name
        if isinstance(content, str):
            content = content.encode()
        path.write_bytes(content)
        return path

    return write_file


def error_of(path: Path, fields: Fields = FIELDS) -> str:
    with pytest.raises(CaseFileError) as caught:
        load_cases([path], fields)
    return str(caught.value)


# ------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------


def test_jsonl_cases_are_read_with_the_field_mapping(write: Callable[..., Path]) -> None:
    path = write(jsonl(*GOOD))
    cases = load_case_file(path, FIELDS)
    assert [c.id for c in cases] == ["a1", "a2", "3"]  # an integer id becomes a string
    first = cases[0]
    assert first.input == {"message": "Can I book a service?"}
    assert first.expected == "booking"
    assert first.group == "g1"
    assert first.category == "booking"
    assert first.split is None
    assert first.source == f"{path}:1"
    assert cases[2].split == "holdout"


def test_without_an_input_mapping_the_whole_record_is_the_input(
    write: Callable[..., Path],
) -> None:
    cases = load_case_file(write(jsonl(GOOD[0])), Fields(expected="category"))
    assert cases[0].input == GOOD[0]


def test_form_feed_and_tab_lines_are_blank(write: Callable[..., Path]) -> None:
    path = write(jsonl(GOOD[0]) + "\x0c\n \t\x0b\r\n" + jsonl(GOOD[1]))
    assert [c.source for c in load_case_file(path, FIELDS)] == [f"{path}:1", f"{path}:4"]


def test_blank_and_crlf_lines_are_fine(write: Callable[..., Path]) -> None:
    text = "\r\n\r\n".join(json.dumps(r) for r in GOOD) + "\r\n"
    cases = load_case_file(write(text), FIELDS)
    assert [c.source.rsplit(":", 1)[1] for c in cases] == ["1", "3", "5"]


@pytest.mark.parametrize("wrap", [False, True], ids=["list", "cases-key"])
def test_yaml_cases_match_their_jsonl_twins(write: Callable[..., Path], wrap: bool) -> None:
    body = "".join(
        f"- id: {json.dumps(r['id'])}\n"
        + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in r.items() if k != "id")
        for r in GOOD
    )
    if wrap:
        body = "cases:\n" + "".join(f"  {line}\n" for line in body.splitlines())
    from_yaml = load_case_file(write(body, "cases.yaml"), FIELDS)
    from_json = load_case_file(write(jsonl(*GOOD)), FIELDS)
    # The same records hash the same, whichever format holds them.
    assert [(c.id, c.hash, c.input) for c in from_yaml] == [
        (c.id, c.hash, c.input) for c in from_json
    ]
    assert from_yaml[1].source.endswith(f"cases.yaml:{5 + wrap}")


def test_a_case_without_expected_is_fine_when_the_scorer_needs_none(
    write: Callable[..., Path],
) -> None:
    path = write(jsonl({"id": "a", "message": "hi"}))
    assert load_case_file(path, FIELDS, need_expected=False)[0].expected is None


# ------------------------------------------------------------------------------------------
# One clear message per kind of bad input: file:line, the field, what to do
# ------------------------------------------------------------------------------------------

BAD_JSONL = [
    # (name, content, line, words the message must contain)
    ("invalid-json", jsonl(GOOD[0]) + '{"id": "b", "category": \n', 2, ["invalid JSON"]),
    (
        "duplicate-id",
        jsonl(GOOD[0], GOOD[1], GOOD[0] | {"message": "again"}),
        3,
        ["duplicate case id 'a1'", "first at", ":1)"],
    ),
    (
        "no-expected",
        jsonl({"id": "b", "message": "hi"}),
        1,
        ["'b' has no expected answer", "'category'"],
    ),
    (
        "null-expected",
        jsonl({"id": "b", "message": "hi", "category": None}),
        1,
        ["no expected answer"],
    ),
    ("no-id", jsonl({"message": "hi", "category": "x"}), 1, ["missing id field 'id'"]),
    ("empty-id", jsonl({"id": " ", "message": "hi", "category": "x"}), 1, ["'id' is empty"]),
    (
        "float-id",
        jsonl({"id": 1.5, "message": "hi", "category": "x"}),
        1,
        ["field 'id' must be str or int", "float"],
    ),
    (
        "bool-id",
        jsonl({"id": True, "message": "hi", "category": "x"}),
        1,
        ["field 'id' must be str or int", "bool"],
    ),
    (
        "list-group",
        jsonl({"id": "b", "message": "hi", "category": "x", "group": ["g"]}),
        1,
        ["field 'group' must be str or int", "list"],
    ),
    (
        "unknown-split",
        jsonl(GOOD[0], {"id": "b", "message": "hi", "category": "x", "split": "test"}),
        2,
        ["field 'split' is 'test'", "dev, holdout, regression"],
    ),
    ("not-an-object", jsonl(GOOD[0], ["a", "list"]), 2, ["must be an object", "list"]),
    (
        "missing-input",
        jsonl({"id": "b", "category": "x"}),
        1,
        ["lacks input field 'message'"],
    ),
    ("invalid-utf8", b'{"id": "b", "message": "caf\xe9", "category": "x"}\n', 1, ["UTF-8"]),
    # The file is decoded at once, but an earlier line's fault is still the one named.
    (
        "bad-json-before-bad-utf8",
        jsonl(GOOD[0]).encode() + b'{"id": \n{"id": "b", "message": "caf\xe9"}\n',
        2,
        ["invalid JSON"],
    ),
    ("bad-utf8-column", jsonl(GOOD[0]).encode() + b'{"id": "\xff"}\n', 2, ["at byte 8"]),
    # Blank means what bytes.strip() takes away; a no-break space is not JSON whitespace.
    ("nbsp-line", jsonl(GOOD[0]) + "\u00a0\n", 2, ["invalid JSON"]),
    ("two-objects", jsonl(GOOD[0]).rstrip() + " {}\n", 1, ["invalid JSON", "Extra data"]),
    ("bom", b"\xef\xbb\xbf" + jsonl(GOOD[0]).encode(), 1, ["byte-order mark"]),
    (
        "huge-line",
        jsonl(GOOD[0], {"id": "b", "category": "x", "message": "x" * 1_000_001}),
        2,
        ["over the 1 MB limit"],
    ),
    # Valid JSON that Python will not read: nesting too deep, an integer too long.
    ("deep", jsonl(GOOD[0]) + "[" * 100_000 + "\n", 2, ["JSON"]),
    (
        "long-int",
        jsonl(GOOD[0]) + '{"id": "b", "category": "x", "message": ' + "1" * 5000 + "}\n",
        2,
        ["4300 digits"],
    ),
    # A \ud800 escape is half a surrogate pair: no text, so no hash and no run file.
    (
        "lone-surrogate",
        '{"id": "b", "category": "x", "message": "\\ud800"}\n',
        1,
        ["field 'message'", "not plain JSON"],
    ),
    # No JSON number: Python's reader takes them (and 1e400 as an infinity); the model was sent
    # "nan" and the run file kept null.
    *(
        (
            f"number-{name}",
            '{"id": "b", "category": "x", "message": "hi", "n": ' + text + "}\n",
            1,
            ["field 'n'", f"holds {shown}", "no JSON number"],
        )
        for name, text, shown in [
            ("nan", "NaN", "nan"),
            ("infinity", "Infinity", "inf"),
            ("minus-infinity", "-Infinity", "-inf"),
            ("overflow", "1e400", "inf"),
            ("nested", '{"a": [1, NaN]}', "nan"),
        ]
    ),
]


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [case[1:] for case in BAD_JSONL],
    ids=[case[0] for case in BAD_JSONL],
)
def test_a_bad_jsonl_file_gets_one_message_naming_file_and_line(
    write: Callable[..., Path], content: str | bytes, line: int, words: list[str]
) -> None:
    path = write(content)
    message = error_of(path)
    assert message.startswith(f"{path}:{line}: ")
    assert "\n" not in message
    for word in words:
        assert word in message


def test_yaml_case_values_are_the_strings_the_file_shows(write: Callable[..., Path]) -> None:
    # YAML 1.1 (PyYAML's default) reads Yes, NO, on, 012 and 2025-01-31 as True, False, True,
    # 10 and a date; YAML 1.2's core schema, which case files are read by, keeps them strings
    # and 012 the integer twelve. true and null are still the boolean and null.
    path = write(
        "- {id: a, category: Yes, message: NO}\n"
        "- {id: b, category: 'no', message: on, when: 2025-01-31, n: 012, t: true, z: null}\n",
        "cases.yml",
    )
    cases = load_case_file(path, Fields(expected="category"))
    assert cases[0].expected == "Yes"
    assert cases[0].input["message"] == "NO"
    second = cases[1].input
    assert second["message"] == "on"
    assert second["when"] == "2025-01-31"
    assert second["n"] == 12
    assert second["t"] is True
    assert second["z"] is None


@pytest.mark.parametrize("content", ["", "\n\n  \n"], ids=["empty", "blank-lines"])
def test_an_empty_file_is_named(write: Callable[..., Path], content: str) -> None:
    path = write(content)
    assert error_of(path).startswith(f"{path}: case file is empty")


def test_a_duplicate_across_files_names_both(write: Callable[..., Path]) -> None:
    first = write(jsonl(GOOD[0]), "one.jsonl")
    second = write(jsonl(GOOD[1], GOOD[0]), "two.jsonl")
    with pytest.raises(CaseFileError) as caught:
        load_cases([first, second], FIELDS)
    assert str(caught.value).startswith(f"{second}:2: duplicate case id 'a1' (first at {first}:1)")


BAD_YAML = [
    ("syntax", "- id: a\n  message: [unclosed\n", ":3", ["invalid YAML"]),
    ("not-a-list", "id: a\nmessage: hi\n", "", ["must be a list"]),
    ("scalar", "just words\n", "", ["must be a list"]),
    (
        "unknown-split",
        "- {id: a, category: x, message: hi}\n- {id: b, category: x, message: hi, split: later}\n",
        ":2",
        ["'split' is 'later'"],
    ),
    # YAML has values JSON has not: each names its field. (A plain 2025-01-31 is a string by
    # YAML 1.2's core schema; only an explicit tag makes a date.)
    (
        "date",
        "- {id: a, category: x, message: hi, when: !!timestamp 2025-01-31}\n",
        ":1",
        ["field 'when'", "date"],
    ),
    ("set", "- {id: a, category: x, message: !!set {p, q}}\n", ":1", ["field 'message'", "set"]),
    (
        "binary",
        "- {id: a, category: x, message: !!binary aGk=}\n",
        ":1",
        ["field 'message'", "bytes"],
    ),
    ("int-key", "- {id: a, category: x, message: hi, 7: seven}\n", ":1", ["non-string key 7"]),
    ("nan", "- {id: a, category: x, message: .nan}\n", ":1", ["field 'message'", "holds nan"]),
    ("infinity", "- {id: a, category: x, message: -.inf}\n", ":1", ["holds -inf"]),
    ("deep", "[" * 1000 + "\n", "", ["nested too deeply"]),
    ("long-int", "- {id: a, category: x, message: " + "1" * 5000 + "}\n", "", ["4300 digits"]),
    ("self-reference", "- &a {id: a, category: x, message: [*a]}\n", ":1", ["field 'message'"]),
    ("python-tag", "- !!python/object:os.system {id: a}\n", ":1", ["invalid YAML"]),
]


@pytest.mark.parametrize(
    ("content", "suffix", "words"),
    [case[1:] for case in BAD_YAML],
    ids=[case[0] for case in BAD_YAML],
)
def test_a_bad_yaml_file_gets_one_message_naming_file_and_line(
    write: Callable[..., Path], content: str, suffix: str, words: list[str]
) -> None:
    path = write(content, "cases.yml")
    message = error_of(path)
    assert message.startswith(f"{path}{suffix}: ")
    for word in words:
        assert word in message


def test_an_unknown_file_type_is_named(write: Callable[..., Path]) -> None:
    path = write(jsonl(GOOD[0]), "cases.csv")
    assert error_of(path) == f"{path}: unknown case file type '.csv' (use .jsonl or .yaml)"


def test_a_missing_file_and_a_directory_are_named(tmp_path: Path) -> None:
    assert (
        error_of(tmp_path / "nope.jsonl") == f"{tmp_path / 'nope.jsonl'}: case file does not exist"
    )
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    assert error_of(folder).startswith(f"{folder}: case file is a directory")


# ------------------------------------------------------------------------------------------
# Hashes
# ------------------------------------------------------------------------------------------


def test_a_case_hash_is_of_its_content_not_its_formatting(write: Callable[..., Path]) -> None:
    record = GOOD[0]
    spaced = json.dumps(dict(reversed(record.items())), indent=None, separators=(" , ", " : "))
    a = load_case_file(write(jsonl(record), "a.jsonl"), FIELDS)[0]
    b = load_case_file(write(spaced + "\n", "b.jsonl"), FIELDS)[0]
    assert a.hash == b.hash == record_hash(record)
    # Independently: sha256 of the canonical JSON (sorted keys, no spaces, UTF-8).
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert a.hash == hashlib.sha256(canonical.encode()).hexdigest()
    edited = load_case_file(write(jsonl(record | {"message": "Can I book?"}), "c.jsonl"), FIELDS)
    assert edited[0].hash != a.hash


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _dumped(value: object) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), _JSON, max_size=6))
def test_a_record_hash_is_sha256_of_json_dumps_canonical_text(record: dict[str, object]) -> None:
    # The hash's encoder is built once, not by json.dumps: the text must be json.dumps's own,
    # or every case of every saved run would look edited. Surrogates come from st.text() too.
    try:
        expected: object = hashlib.sha256(_dumped(record).encode()).hexdigest()
    except (TypeError, ValueError) as exc:
        expected = type(exc)
    try:
        got: object = record_hash(record)
    except (TypeError, ValueError) as exc:
        got = type(exc)
    assert got == expected


@pytest.mark.parametrize(
    "record",
    [
        {"x": float("nan")},
        {"x": [float("-inf")]},
        {"x": {1, 2}},
        {"x": b"bytes"},
        {1: "int key beside", "a": "a str key"},
        {"x": "\ud800"},
    ],
    ids=["nan", "infinity", "set", "bytes", "mixed-keys", "lone-surrogate"],
)
def test_a_record_hash_refuses_what_json_dumps_refuses(record: dict[object, object]) -> None:
    with pytest.raises((TypeError, ValueError)) as dumps_error:
        _dumped(record).encode()
    with pytest.raises(dumps_error.type):
        record_hash(record)  # type: ignore[arg-type]


def test_file_hashes_are_of_the_bytes_keyed_by_relative_path(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "cases.jsonl"
    path.write_text(jsonl(*GOOD))
    case_set = load_cases([path], FIELDS, root=tmp_path)
    assert case_set.file_hashes == {
        "data/cases.jsonl": hashlib.sha256(path.read_bytes()).hexdigest()
    }


def test_the_set_hash_follows_cases_not_their_order(write: Callable[..., Path]) -> None:
    def set_hash(*records: dict[str, object]) -> str:
        return load_cases([write(jsonl(*records))], FIELDS).sha256

    whole = set_hash(*GOOD)
    assert set_hash(*reversed(GOOD)) == whole
    assert set_hash(*GOOD[:2]) != whole
    assert set_hash(GOOD[0], GOOD[1], GOOD[2] | {"message": "Parking?"}) != whole


def test_hash_cases_is_sha256_of_id_and_hash_lines() -> None:
    def case(case_id: str, digest: str) -> Case:
        return Case(id=case_id, input={}, hash=digest, source="x:1")

    cases = [case("b", "2" * 64), case("a", "1" * 64)]
    by_hand = hashlib.sha256(f"a\0{'1' * 64}\nb\0{'2' * 64}\n".encode()).hexdigest()
    assert hash_cases(cases) == by_hand


# ------------------------------------------------------------------------------------------
# Properties: malformed input never crashes with anything but CaseFileError
# ------------------------------------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["dev", "holdout", "regression", "booking", ""])
)
KEYS = st.sampled_from(["id", "category", "message", "group", "split"]) | st.text(max_size=4)
# Arbitrary JSON two levels deep (deeper nesting has its own tests above); mostly objects, so
# that lines reach the field checks and not only "a case must be an object".
VALUES = SCALARS | st.lists(SCALARS, max_size=3) | st.dictionaries(KEYS, SCALARS, max_size=3)
LINES = VALUES | st.dictionaries(KEYS, VALUES, max_size=6)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hypothesis")


def load_or_case_file_error(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        cases = load_cases([path], FIELDS)
    except CaseFileError as exc:
        # The error always names the file (and no traceback-worthy exception escaped).
        assert str(exc).startswith(str(path)), str(exc)
        return
    assert cases.cases
    for case in cases.cases:
        assert case.source.startswith(f"{path}:")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=300), suffix=st.sampled_from([".jsonl", ".yaml"]))
def test_arbitrary_bytes_give_cases_or_a_case_file_error(
    scratch: Path, data: bytes, suffix: str
) -> None:
    load_or_case_file_error(scratch / f"bytes{suffix}", data)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(LINES, min_size=1, max_size=4))
def test_arbitrary_json_lines_give_cases_or_a_case_file_error(
    scratch: Path, lines: list[object]
) -> None:
    data = "\n".join(json.dumps(value) for value in lines).encode()
    load_or_case_file_error(scratch / "values.jsonl", data)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {"id": st.text(min_size=1, max_size=8), "category": st.text(max_size=8)},
            optional={"message": st.text(max_size=30), "split": st.text(max_size=10)},
        ),
        min_size=1,
        max_size=5,
    )
)
def test_near_valid_records_give_cases_or_a_case_file_error(
    scratch: Path, records: list[dict[str, str]]
) -> None:
    load_or_case_file_error(scratch / "records.jsonl", jsonl(*records).encode())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet="-:{}[],&*!?|>'\"#% \n\tabcdeimsgtyx019.", max_size=80))
def test_yaml_punctuation_soup_gives_cases_or_a_case_file_error(scratch: Path, text: str) -> None:
    # Random bytes rarely parse as YAML; text made of YAML's own punctuation reaches anchors,
    # tags, flow collections and block scalars.
    load_or_case_file_error(scratch / "soup.yaml", ("- " + text).encode())


def reference_records(path: Path, data: bytes) -> list[tuple[int, object]] | str:
    """What a JSONL file holds, read the plain way (each line's bytes decoded and given to
    json.loads), or the first line that fails: the reader's fast path must agree with it."""
    records: list[tuple[int, object]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            records.append((number, json.loads(raw.decode("utf-8"))))
        except (ValueError, RecursionError):
            return f"{path}:{number}"
    return records


# Lines near the edges of the fast path: JSON's own whitespace and the rest of str.strip's,
# text after a value, escapes, a BOM, bytes that are not UTF-8.
EDGE_LINES = st.lists(
    st.sampled_from(
        [
            '{"id": "a", "category": "x", "message": "m"}',
            ' \t{"id": "b", "category": "x", "message": "m"}\r',
            '{"id": "c", "category": "x", "message": "m"} x',
            '{"id": "d", "category": "x", "message": "\\u00e9"}{}',
            "\u00a0",
            "\u2028",
            "\x0c",
            "\x0b \t",
            "\ufeff{}",
            "[1] ",
            "1 2",
            '"text"',
            "",
            "\r",
        ]
    ).map(str.encode)
    | st.sampled_from([b"\xff", b'{"id": "\xe9"}', b"\xc3"])
    | st.binary(max_size=12),
    min_size=1,
    max_size=6,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=EDGE_LINES)
def test_the_jsonl_reader_reads_what_json_loads_reads_line_by_line(
    scratch: Path, lines: list[bytes]
) -> None:
    from evalgate.cases.read import read_records

    path = scratch / "edges.jsonl"
    data = b"\n".join(lines)
    path.write_bytes(data)
    expected = reference_records(path, data)
    if data.startswith(b"\xef\xbb\xbf") or not data.strip():
        return  # refused before any line is read (their own tests above)
    try:
        got: list[tuple[int, object]] | str = read_records(path, data)
    except CaseFileError as exc:
        got = str(exc).split(": ", 1)[0]
    if expected == []:
        assert got == f"{path}", got  # "case file has no cases"
    else:
        assert got == expected


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {"id": st.text(min_size=1, max_size=8) | st.integers(), "category": SCALARS},
            optional={"message": VALUES, "split": st.sampled_from(["dev", "holdout", None])},
        ),
        min_size=1,
        max_size=5,
    ),
    whole=st.booleans(),
)
def test_a_case_built_without_validation_is_the_validated_case(
    scratch: Path, records: list[dict[str, object]], whole: bool
) -> None:
    # parse_case checks each field itself and builds the case with Case.checked: pydantic,
    # given the same fields, must accept them and build the same case.
    path = scratch / "checked.jsonl"
    path.write_bytes(jsonl(*records).encode())
    fields = Fields(expected="category", input=None if whole else ["message"])
    try:
        cases = load_cases([path], fields).cases
    except CaseFileError:
        return
    for case in cases:
        validated = Case.model_validate(case.model_dump())
        assert validated == case
        assert validated.model_dump_json() == case.model_dump_json()
        assert case.model_fields_set == validated.model_fields_set


def test_checked_takes_every_field_and_builds_a_frozen_case() -> None:
    from pydantic import ValidationError

    values = {
        "id": "a",
        "input": {"message": "m"},
        "expected": "x",
        "group": None,
        "category": None,
        "split": None,
        "messages": (),
        "fixtures": None,
        "hash": "0" * 64,
        "source": "cases.jsonl:1",
    }
    case = Case.checked(**values)
    assert case == Case(**values)
    with pytest.raises(ValidationError):
        case.id = "b"  # type: ignore[misc]
    assert case.model_copy(update={"split": "dev"}).split == "dev"
    assert case.split is None
    with pytest.raises(TypeError, match="every field"):
        Case.checked(**{k: v for k, v in values.items() if k != "source"})
    with pytest.raises(TypeError, match="every field"):
        Case.checked(**values, extra=1)


LFS_POINTER = (
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
    "size 12345\n"
)


@pytest.mark.parametrize("name", ["cases.jsonl", "cases.yaml"])
def test_a_git_lfs_pointer_says_to_pull_the_file(tmp_path: Path, name: str) -> None:
    from evalgate.cases.read import read_case_bytes

    path = tmp_path / name
    path.write_text(LFS_POINTER)
    with pytest.raises(CaseFileError) as caught:
        read_case_bytes(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:1: is a Git LFS pointer")
    assert "git lfs pull" in message
    assert "invalid JSON" not in message
