"""The user-turn template: the documented rule for null fields, and syntax errors."""

from __future__ import annotations

import pytest

from evalgate.cases.templating import compile_template, render_turn, syntax_error
from evalgate.errors import UserError


def test_a_null_field_renders_as_an_empty_string_not_none() -> None:
    template = compile_template("<thread>{{ thread }}</thread>\n{{ body }}", "template")
    turn = render_turn(template, {"thread": None, "body": "Where is my order?"}, "case t-1")
    assert turn == "<thread></thread>\nWhere is my order?"


def test_a_null_field_can_be_tested_in_the_template() -> None:
    template = compile_template("{% if thread %}re: {{ thread }}\n{% endif %}{{ body }}", "t")
    assert render_turn(template, {"thread": None, "body": "hi"}, "c") == "hi"
    assert render_turn(template, {"thread": "T-9", "body": "hi"}, "c") == "re: T-9\nhi"


def test_a_one_field_suite_with_a_null_input_sends_nothing() -> None:
    assert render_turn(compile_template("{{ input }}", "t"), {"message": None}, "c") == ""


def test_a_missing_field_is_still_an_error() -> None:
    with pytest.raises(UserError, match="undefined value"):
        render_turn(compile_template("{{ thread }}", "t"), {"body": "hi"}, "c")


def test_syntax_error_gives_the_line() -> None:
    found = syntax_error("line one\n{{ broken }\n")
    assert found is not None
    message, line = found
    assert line == 2
    assert message  # jinja2's own description of what it expected
    assert syntax_error("{{ fine }}\n{% if x %}y{% endif %}") is None
