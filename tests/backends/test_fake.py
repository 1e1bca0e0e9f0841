"""The fake backend: a deterministic offline classifier driven by keyword rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLE, fake_backend

from evalgate.backends.base import Backend, Message, Request, backend_class, backend_names
from evalgate.backends.fake import FakeBackend, FakeRules, fake_answer, rough_tokens
from evalgate.errors import BackendError

RULES: dict[str, Any] = {
    "field": "category",
    "default": "other",
    "default_alias": "general enquiry",
    "rules": [
        {"label": "complaint", "alias": "customer complaint", "phrases": ["refund", "rude"]},
        {"label": "booking", "alias": "appointment", "phrases": ["book", "slot"]},
        {"label": "quote", "phrases": ["how much"]},
    ],
}
NAMES_ALL = "Categories: complaint, booking, quote or other."
NAMES_ALL_JSON = NAMES_ALL + ' Reply in JSON: {"category": ...}'


def request(*turns: str, system: str = NAMES_ALL) -> Request:
    """A request whose user turns are ``turns`` (an assistant turn between each)."""
    messages = []
    for i, turn in enumerate(turns):
        if i:
            messages.append(Message(role="assistant", content="noted"))
        messages.append(Message(role="user", content=turn))
    return Request(system=system, messages=tuple(messages), model="fake-classifier")


def answer(*turns: str, system: str = NAMES_ALL, rules: dict[str, Any] = RULES) -> str:
    return fake_answer(request(*turns, system=system), FakeRules.model_validate(rules))


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Can I book a service?", "booking"),
        ("HOW MUCH is a chain?", "quote"),  # case-insensitive
        ("Where can I park?", "other"),  # no rule matches: the default
        # The first matching rule wins: complaint is listed before booking.
        ("I want a refund for the slot I booked", "complaint"),
        ("Your mechanic was rude", "complaint"),
        ("I rebooked", "booking"),  # a substring test, not whole words
    ],
)
def test_the_first_matching_rule_labels_the_message(message: str, expected: str) -> None:
    assert answer(f"<message>{message}</message>") == f"Category: {expected}."


def test_only_the_tagged_message_of_the_last_user_turn_counts() -> None:
    # Earlier turns and text outside the tags would match other rules.
    first = "<message>I want a refund</message>"
    last = "Instructions: how much? <message>\nCan I book?\n</message> (refund)"
    assert answer(first, last) == "Category: booking."


def test_without_tags_the_whole_last_turn_is_the_message() -> None:
    assert answer("How much for new brake cables?") == "Category: quote."


def test_it_replies_in_json_when_the_system_prompt_says_json() -> None:
    reply = answer("<message>book me in</message>", system=NAMES_ALL_JSON)
    assert json.loads(reply) == {"category": "booking"}
    # "JSON" is matched as written: a lower-case "json" is not the instruction.
    assert answer("book me in", system=NAMES_ALL + " json") == "Category: booking."


def test_the_json_field_comes_from_the_rules() -> None:
    reply = answer("book", system=NAMES_ALL_JSON, rules=RULES | {"field": "intent"})
    assert json.loads(reply) == {"intent": "booking"}


@pytest.mark.parametrize(
    ("system", "message", "expected"),
    [
        # No label named: the model answers in its own words.
        ("Say what kind of message it is.", "book", "appointment"),
        ("Say what kind of message it is.", "refund please", "customer complaint"),
        ("Say what kind of message it is.", "parking?", "general enquiry"),
        # A rule without an alias keeps its label.
        ("Say what kind of message it is.", "how much?", "quote"),
        # Naming only some labels is not enough.
        ("Is it a complaint or a booking?", "book", "appointment"),
        # Whole words only: "bookings" and "quotes" do not name "booking" and "quote".
        ("complaints, bookings, quotes or other", "book", "appointment"),
        # All four named as whole words, in any case: the labels themselves.
        ("COMPLAINT / Booking / quote / other", "book", "booking"),
    ],
)
def test_aliases_unless_the_system_prompt_names_every_label(
    system: str, message: str, expected: str
) -> None:
    assert answer(message, system=system) == f"Category: {expected}."


def test_without_a_default_alias_the_default_label_is_used() -> None:
    rules = RULES | {"default_alias": None}
    assert answer("parking?", system="Classify.", rules=rules) == "Category: other."


def test_the_backend_replies_with_deterministic_usage(tmp_path: Path) -> None:
    backend = fake_backend({"rules": RULES}, tmp_path)
    assert isinstance(backend, Backend)
    assert backend.offline is True
    req = request("<message>book</message>")
    reply = backend.complete(req)
    assert reply.text == "Category: booking."
    assert reply.error is None
    assert reply.stop_reason == "end_turn"
    # About four characters a token, rounded up: (len + 3) // 4.
    sent = len(NAMES_ALL) + len("<message>book</message>")
    assert reply.input_tokens == (sent + 3) // 4
    assert reply.output_tokens == (len("Category: booking.") + 3) // 4
    assert backend.complete(req) == reply


@pytest.mark.parametrize(("text", "tokens"), [("", 1), ("abcd", 1), ("abcde", 2), ("x" * 40, 10)])
def test_rough_tokens(text: str, tokens: int) -> None:
    assert rough_tokens(text) == tokens


# ------------------------------------------------------------------------------------------
# Rules from the config or from a file
# ------------------------------------------------------------------------------------------


def test_rules_from_a_file_beside_the_config(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(json.dumps(RULES))
    backend = fake_backend({"rules_file": "rules.yml"}, tmp_path)
    assert backend.rules == FakeRules.model_validate(RULES)


def test_the_example_rules_file_loads() -> None:
    backend = fake_backend({"rules_file": "fake-rules.yml"}, EXAMPLE)
    assert backend.rules.labels() == ["complaint", "status", "booking", "quote", "parts", "other"]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "exactly one of 'rules' or 'rules_file'"),
        ({"rules": RULES, "rules_file": "r.yml"}, "exactly one of 'rules' or 'rules_file'"),
        ({"rules_file": "r.yml", "colour": "red"}, "invalid options for the fake backend"),
        ({"rules": RULES | {"rules": []}}, "invalid options for the fake backend"),
    ],
)
def test_bad_fake_options_are_a_backend_error(
    tmp_path: Path, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(BackendError, match=match):
        fake_backend(options, tmp_path)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (None, "rules file does not exist"),
        ("rules: [unclosed\n", "invalid YAML"),
        ("rules:\n  - label: a\n    phrases: []\n", r"rules\.0\.phrases"),
        ("rules:\n  - label: a\n    phrases: [x]\n    colour: red\n", r"rules\.0\.colour"),
        ("default: other\n", "rules"),
    ],
    ids=["missing", "yaml", "no-phrases", "unknown-key", "no-rules"],
)
def test_a_bad_rules_file_is_an_error_naming_it(
    tmp_path: Path, content: str | None, match: str
) -> None:
    path = tmp_path / "rules.yml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(BackendError, match=match) as caught:
        fake_backend({"rules_file": "rules.yml"}, tmp_path)
    assert str(path) in str(caught.value)


def test_the_registry_finds_the_fake_and_names_the_rest() -> None:
    assert backend_class("fake") is FakeBackend
    assert "fake" in backend_names()
    with pytest.raises(BackendError, match=r"unknown backend 'nope'.*fake"):
        backend_class("nope")


def test_a_bad_extract_regex_of_an_agent_rule_is_an_error_naming_it(tmp_path: Path) -> None:
    # It was a traceback at the first call, and exit 1, the code of a failed gate.
    path = tmp_path / "rules.yml"
    path.write_text(
        "rules: [{label: a, phrases: [x]}]\n"
        "agents: [{name: r, phrases: [refund], extract: {order: '(A'}}]\n"
    )
    with pytest.raises(BackendError, match=r"agents\.0.*extract\.order: '\(A' is not a regex"):
        fake_backend({"rules_file": "rules.yml"}, tmp_path)
