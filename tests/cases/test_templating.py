"""The user-turn template: the documented rules for null fields and for objects and lists
(JSON), and syntax errors."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalgate.cases import templating
from evalgate.cases.template_budget import MAX_OUTPUT
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


# --- the plain render: a template that only prints values by name -------------------------

# JSON's values, as a case file gives them (no NaN: the reader refuses it).
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
# range: a case's field over jinja2's global; self and loop: names jinja2 may bind itself.
_NAMES = ("message", "body", "input", "range", "self", "loop")
_PLAIN_TEMPLATES = st.lists(
    st.one_of(
        st.sampled_from(_NAMES).map(lambda name: f"{{{{ {name} }}}}"),
        st.sampled_from(_NAMES).map(lambda name: f"{{{{- {name} -}}}}"),
        st.text(alphabet=st.characters(blacklist_characters="{}%#"), max_size=12),
        st.just("\n"),
        st.just("{# a comment #}"),
        st.just("{% raw %}{{ not a name }}{% endraw %}"),
    ),
    max_size=8,
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=_PLAIN_TEMPLATES, values=st.dictionaries(st.sampled_from(_NAMES), _JSON))
def test_a_plain_template_renders_what_the_sandbox_renders(
    source: str, values: dict[str, Any]
) -> None:
    template = compile_template(source, "t")
    own = re.search(r"\{\{-? (self|loop) -?\}\}", source) is not None
    assert (templating._PLAIN.get(template) is None) == own, source
    context = dict(values)

    def outcome(render: Any) -> tuple[str, str]:
        try:
            return "text", render()
        except UserError as exc:
            return "error", str(exc)

    plain = outcome(lambda: templating.render_template(template, context, "c"))
    sandboxed = outcome(lambda: templating._render_sandboxed(template, context, "c", False))
    assert plain == sandboxed


@pytest.mark.parametrize(
    "source",
    [
        "{{ body | upper }}",
        "{{ body.strip() }}",
        "{{ order.lines }}",
        "{{ order['id'] }}",
        "{% for x in items %}{{ x }}{% endfor %}",
        "{% if body %}{{ body }}{% endif %}",
        "{{ body ~ body }}",
        "{{ 'text' }}",
        "{% set x = body %}{{ x }}",
        "{{ lipsum() }}",
    ],
)
def test_a_template_that_does_more_than_print_names_renders_in_the_sandbox(source: str) -> None:
    assert templating._PLAIN.get(compile_template(source, "t")) is None


def test_a_plain_template_keeps_the_sandboxs_errors_and_its_cap() -> None:
    """A missing value, a value over the output cap, and a name printed so often that the turn
    is over it: the same one-line errors as the sandbox's."""
    template = compile_template("<m>{{ message }}</m>", "t")
    with pytest.raises(UserError, match="undefined value") as missing:
        render_turn(template, {"body": "hi"}, "case c-1")
    assert "'message' is undefined" in str(missing.value)
    huge = "x" * (MAX_OUTPUT + 1)
    with pytest.raises(UserError, match="over its budget"):
        render_turn(template, {"message": huge}, "c")
    often = compile_template("{{ message }}" * 300, "t")
    with pytest.raises(UserError, match=f"more than {MAX_OUTPUT:,} characters"):
        render_turn(often, {"message": "y" * 4000}, "c")
    assert len(render_turn(often, {"message": "y" * 3000}, "c")) == 900_000


def test_a_plain_template_names_no_holdout_value_in_its_error() -> None:
    template = compile_template("{{ message }}", "t")
    secret = "z" * (MAX_OUTPUT + 1)
    with pytest.raises(UserError) as caught:
        render_turn(template, {"message": secret}, "template (a holdout case)", holdout=True)
    assert "zzzz" not in str(caught.value) and "OverBudget" in str(caught.value)


def test_a_plain_template_reads_no_copy_and_changes_no_value() -> None:
    order = {"lines": [{"sku": "a"}]}
    turn = render_turn(compile_template("{{ order }}", "t"), {"order": order}, "c")
    assert turn == '{"lines": [{"sku": "a"}]}' and order == {"lines": [{"sku": "a"}]}


def test_a_plain_template_printing_a_large_value_often_stops_at_the_cap() -> None:
    """Each print of an object is a JSON text of its own: 2,000 prints of 600 kB would be 1.2 GB
    if the turn were joined before it was measured."""
    import tracemalloc

    template = compile_template("{{ order }}" * 2000, "t")
    order = {"lines": ["x" * 1000] * 600}
    tracemalloc.start()
    try:
        with pytest.raises(UserError, match=f"more than {MAX_OUTPUT:,} characters"):
            render_turn(template, {"order": order}, "c")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MAX_OUTPUT  # two prints and the error: not 2,000 prints


def test_a_field_named_self_is_a_value_like_any_other() -> None:
    """render(**values) would take it for render()'s own argument and fail every case."""
    values = {"self": "me", "body": "hi"}
    assert render_turn(compile_template("{{ body | upper }}", "t"), values, "c") == "HI"
    assert render_turn(compile_template("{{ body }}", "t"), values, "c") == "hi"


def test_a_plain_template_slow_on_every_case_stops_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain render keeps the sandbox's clock: all renders of one template within their
    total, each within its steps."""
    from evalgate.cases import template_budget

    monkeypatch.setattr(template_budget, "MAX_TOTAL_SECONDS", 0.3)
    slow = compile_template("{{ n }}" * 20000, "t")  # 20,000 prints of a null: no output
    assert templating._PLAIN.get(slow) is not None
    with pytest.raises(UserError, match="in all"):
        for _ in range(10_000):
            render_turn(slow, {"n": None}, "c")
    monkeypatch.setattr(template_budget, "MAX_STEPS", 100)
    with pytest.raises(UserError, match="more than 100 steps"):
        render_turn(compile_template("{{ n }}" * 200, "t"), {"n": None}, "c")


def test_names_python_folds_together_are_left_to_the_sandbox() -> None:
    """jinja2's compiled code names a value by a Python identifier, and Python folds "ﬁ" and
    "𝐱" (NFKC) into "fi" and "x": the sandbox prints the same value for both."""
    values = {"ﬁ": "A", "fi": "B", "𝐱": "C", "x": "D"}
    template = compile_template("{{ ﬁ }}|{{ fi }}|{{ 𝐱 }}|{{ x }}", "t")
    assert templating._PLAIN.get(template) is None
    sandboxed = templating._render_sandboxed(template, values, "c", False)
    assert render_turn(template, values, "c") == sandboxed


def test_a_container_prints_from_a_copy_as_in_the_sandbox() -> None:
    """A set (YAML's !!set, in an imported peer's vars) iterates in its copy's order."""
    template = compile_template("{{ s }}|{{ nested }}", "t")
    values = {"s": {8, 0, 16, 1, 24}, "nested": [{8, 0, 16, 1, 24}]}
    plain = templating.render_template(template, values, "c")
    assert plain == templating._render_sandboxed(template, values, "c", False)
