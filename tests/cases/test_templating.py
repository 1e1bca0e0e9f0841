"""The user-turn template: the documented rules for null fields and for objects and lists
(JSON), and syntax errors."""

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


def test_objects_and_lists_render_as_json_and_stay_readable_field_by_field() -> None:
    template = compile_template("{{ order }}|{{ order.lines }}|{{ order.lines[0].sku }}", "t")
    order = {"id": 7, "lines": [{"sku": "ä-1", "qty": 2}], "gift": False, "note": None}
    turn = render_turn(template, {"order": order}, "c")
    assert turn == (
        '{"id": 7, "lines": [{"sku": "ä-1", "qty": 2}], "gift": false, "note": null}'
        '|[{"sku": "ä-1", "qty": 2}]|ä-1'
    )
    # One field whose value is an object, through the default template {{ input }}.
    assert render_turn(compile_template("{{ input }}", "t"), {"q": {"text": "x"}}, "c") == (
        '{"text": "x"}'
    )


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


def test_a_template_slow_on_every_case_stops_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each render under its own limit, and all renders of one template under another: a
    template that takes just under the limit on each of many cases still ends soon."""
    from evalgate.cases import template_budget

    monkeypatch.setattr(template_budget, "MAX_TOTAL_SECONDS", 0.5)
    slow = "{% for i in range(100000) %}{% endfor %}{{ body }}"
    template = compile_template(slow, "t")
    with pytest.raises(UserError, match="in all"):
        for _ in range(100):
            render_turn(template, {"body": "hi"}, "c")
    # Another template has its own time.
    assert render_turn(compile_template("{{ body }}", "t"), {"body": "hi"}, "c") == "hi"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{{ body|center(20000) }}", "center width"),
        ("{{ body.zfill(20000) }}", "zfill width"),
        ("{{ '{:.20000f}'.format(1.5) }}", "width of 20000"),
        ("{{ 10 ** 30000 }}", "bits"),
        ("{{ (body * 100000) ~ (body * 100000) }}", "joined text"),
    ],
)
def test_widths_and_sizes_over_the_limit_are_refused(text: str, says: str) -> None:
    with pytest.raises(UserError, match=says):
        render_turn(compile_template(text, "prompts/v1.txt"), {"body": "hello"}, "prompts/v1.txt")


def test_widths_and_sizes_a_prompt_needs_still_render() -> None:
    text = "{{ body|center(40) }}|{{ '{:>8.2f}'.format(3.14159) }}|{{ '%05d' % 42 }}|{{ 2 ** 64 }}"
    turn = render_turn(compile_template(text, "t"), {"body": "hello"}, "c")
    assert turn == f"{'hello':^40}|    3.14|00042|{2**64}"
