"""Scorers: (expected, reply text) -> answer, score, format_ok."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from evalgate.config.models import ScorerConfig
from evalgate.errors import ConfigError, UserError
from evalgate.scorers.base import Score, Scorer, build_scorer, needs_expected

CONFIG: TypeAdapter[Any] = TypeAdapter(ScorerConfig)


def scorer(base_dir: Path = Path("."), **config: Any) -> Scorer:
    return build_scorer(CONFIG.validate_python(config), base_dir)


# ------------------------------------------------------------------------------------------
# label
# ------------------------------------------------------------------------------------------

LABEL_REPLIES = [
    # (reply, answer read, format_ok)
    ('{"category": "booking"}', "booking", True),
    ('  {"category": "Booking "}\n', "booking", True),  # whitespace around, case folded
    ('{"category": "booking", "confidence": 0.9}', "booking", True),
    # The answer is still read when the format slips, but the format is not ok.
    ('```json\n{"category": "booking"}\n```', "booking", False),
    ('Sure! Here you go: {"category": "booking"}', "booking", False),
    ('```json\n{"category": "parts", "why": {"words": ["buy"]}}\n```', "parts", False),
    ("Category: booking.", "booking", False),
    ("category : QUOTE", "quote", False),
    ('{"category": 3}', None, False),  # not a string
    ('{"label": "booking"}', None, False),  # another field
    ('["booking"]', None, False),
    ("It is a booking.", None, False),
    ("", None, False),
]


@pytest.mark.parametrize(("reply", "answer", "format_ok"), LABEL_REPLIES)
def test_label_reads_the_answer_and_the_format_apart(
    reply: str, answer: str | None, format_ok: bool
) -> None:
    score = scorer(kind="label", field="category")("booking", reply)
    assert (score.answer, score.format_ok) == (answer, format_ok)
    assert score.score == float(answer == "booking")


@pytest.mark.parametrize(
    ("expected", "right"), [("booking", 1.0), ("BOOKING ", 1.0), ("book", 0.0)]
)
def test_label_is_a_lower_cased_exact_match(expected: str, right: float) -> None:
    assert scorer(kind="label")(expected, '{"category": "Booking"}').score == right


def test_label_reads_the_configured_field() -> None:
    score = scorer(kind="label", field="intent")("refund", '{"intent": "refund"}')
    assert score == Score(answer="refund", score=1.0, format_ok=True)


# ------------------------------------------------------------------------------------------
# exact, contains, regex
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected", "reply", "right"),
    [
        ({}, "Paris", " paris\n", 1.0),
        ({"case_sensitive": True}, "Paris", "paris", 0.0),
        ({"strip": False}, "Paris", " Paris", 0.0),
        ({}, "Paris", "Paris, France", 0.0),
    ],
)
def test_exact(config: dict[str, Any], expected: str, reply: str, right: float) -> None:
    score = scorer(kind="exact", **config)(expected, reply)
    assert score.score == right
    assert score.answer == reply
    assert score.format_ok


@pytest.mark.parametrize(
    ("config", "expected", "reply", "right"),
    [
        ({}, "paris", "It is PARIS.", 1.0),
        ({"case_sensitive": True}, "paris", "It is PARIS.", 0.0),
        ({}, ["paris", "france"], "Paris, France", 1.0),  # every item of a list
        ({}, ["paris", "texas"], "Paris, France", 0.0),
    ],
)
def test_contains(config: dict[str, Any], expected: Any, reply: str, right: float) -> None:
    assert scorer(kind="contains", **config)(expected, reply).score == right


def test_regex_with_a_fixed_pattern() -> None:
    check = scorer(kind="regex", pattern=r"\b\d{4}-\d{2}-\d{2}\b")
    score = check(None, "Booked for 2025-06-01, see you then")
    assert (score.answer, score.score) == ("2025-06-01", 1.0)
    assert check(None, "Booked for next week").score == 0.0


def test_regex_from_the_expected_answer_ignores_case_by_default() -> None:
    assert scorer(kind="regex")("yes|ok", "OK then").score == 1.0
    assert scorer(kind="regex", ignore_case=False)("yes|ok", "OK then").score == 0.0


def test_a_bad_regex_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="invalid regex"):
        scorer(kind="regex", pattern="(unclosed")
    with pytest.raises(ConfigError, match="invalid regex"):
        scorer(kind="regex")("(unclosed", "text")


# ------------------------------------------------------------------------------------------
# json_schema
# ------------------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"category": {"enum": ["booking", "quote"]}},
    "required": ["category"],
}


def test_json_schema_checks_the_format() -> None:
    check = scorer(kind="json_schema", schema=SCHEMA)
    ok = check(None, '{"category": "quote"}')
    assert ok == Score(answer='{"category": "quote"}', score=1.0, format_ok=True)
    not_json = check(None, "quote")
    assert (not_json.score, not_json.format_ok, not_json.reason) == (
        0.0,
        False,
        "reply is not JSON",
    )
    invalid = check(None, '{"category": "parts"}')
    assert (invalid.score, invalid.format_ok) == (0.0, False)
    assert "parts" in (invalid.reason or "")


def test_json_schema_with_a_field_compares_it_to_the_expected_answer() -> None:
    check = scorer(kind="json_schema", schema=SCHEMA, field="category")
    assert check("Quote", '{"category": "quote"}') == Score(
        answer="quote", score=1.0, format_ok=True
    )
    assert check("booking", '{"category": "quote"}').score == 0.0


def test_json_schema_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    check = scorer(tmp_path, kind="json_schema", schema_file="schema.json")
    assert check(None, '{"category": "booking"}').score == 1.0


def test_json_schema_errors_name_the_file_or_the_schema(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="schema file does not exist") as caught:
        scorer(tmp_path, kind="json_schema", schema_file="nope.json")
    assert str(tmp_path / "nope.json") in str(caught.value)
    (tmp_path / "bad.json").write_text('{"type": \n')
    with pytest.raises(ConfigError, match=r"bad\.json:2: invalid JSON"):
        scorer(tmp_path, kind="json_schema", schema_file="bad.json")
    with pytest.raises(ConfigError, match="invalid JSON schema"):
        scorer(kind="json_schema", schema={"type": "no-such-type"})


# ------------------------------------------------------------------------------------------
# python: a module:function of the user's
# ------------------------------------------------------------------------------------------


@pytest.fixture
def user_scorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], str]]:
    """Write a scorer module beside the config; returns its ``module:function``."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written: list[str] = []

    def write(source: str, function: str = "score") -> str:
        module = f"user_scorer_{uuid.uuid4().hex[:8]}"
        (tmp_path / f"{module}.py").write_text(source)
        written.append(module)
        return f"{module}:{function}"

    yield write
    for module in written:
        sys.modules.pop(module, None)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "return 1.0 if reply == expected else 0.0",
            Score(answer="yes", score=1.0, format_ok=True),
        ),
        ("return reply == expected", Score(answer="yes", score=1.0, format_ok=True)),
        ("return ('YES', 0.5, False)", Score(answer="YES", score=0.5, format_ok=False)),
        (
            "return {'answer': 'y', 'score': 1, 'format_ok': True, 'reason': 'fine'}",
            Score(answer="y", score=1.0, format_ok=True, reason="fine"),
        ),
    ],
    ids=["float", "bool", "tuple", "dict"],
)
def test_a_python_scorer_may_return_several_shapes(
    user_scorer: Callable[[str], str], tmp_path: Path, body: str, expected: Score
) -> None:
    function = user_scorer(f"def score(expected, reply):\n    {body}\n")
    assert scorer(tmp_path, kind="python", function=function)("yes", "yes") == expected


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("return 2.0", "returned 2.0"),
        ("return ('a', 1.0)", "returned"),
        ("return None", "returned NoneType"),
        ("return 'yes'", "returned str"),
    ],
)
def test_a_python_scorer_returning_nonsense_is_a_user_error(
    user_scorer: Callable[[str], str], tmp_path: Path, body: str, match: str
) -> None:
    function = user_scorer(f"def score(expected, reply):\n    {body}\n")
    check = scorer(tmp_path, kind="python", function=function)
    with pytest.raises(UserError, match=match) as caught:
        check("yes", "yes")
    assert function in str(caught.value)


def test_a_missing_scorer_module_or_function_is_a_config_error(
    user_scorer: Callable[[str], str], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="cannot import scorer module 'no_such_scorer_mod'"):
        scorer(tmp_path, kind="python", function="no_such_scorer_mod:score")
    function = user_scorer("def other(expected, reply):\n    return 1\n")
    with pytest.raises(ConfigError, match="has no function 'score'"):
        scorer(tmp_path, kind="python", function=function)


# ------------------------------------------------------------------------------------------
# Which scorers need an expected answer on every case
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "needed"),
    [
        ({"kind": "label"}, True),
        ({"kind": "exact"}, True),
        ({"kind": "contains"}, True),
        ({"kind": "regex"}, True),
        ({"kind": "regex", "pattern": "x"}, False),
        ({"kind": "json_schema", "schema": {}}, False),
        ({"kind": "json_schema", "schema": {}, "field": "a"}, True),
        ({"kind": "python", "function": "m:f"}, False),
    ],
)
def test_needs_expected(config: dict[str, Any], needed: bool) -> None:
    assert needs_expected(CONFIG.validate_python(config)) is needed
