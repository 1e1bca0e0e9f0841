"""Rendering prompt files and the user-turn template (jinja2, StrictUndefined).

The same user-turn wrapping is used for every prompt version, so the prompt is the only thing
that changes between two runs of a suite.
"""

from __future__ import annotations

from typing import Any

import jinja2

from evalgate.errors import UserError


def _null_is_empty(value: Any) -> Any:
    """The documented rule for null case fields: ``{{ field }}`` renders nothing, never "None"
    (a field missing from a case is still an error; test a null one with ``{% if field %}``)."""
    return "" if value is None else value


_ENV = jinja2.Environment(
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # prompts are plain text sent to a model, not HTML
    finalize=_null_is_empty,
)


def compile_template(source: str, where: str) -> jinja2.Template:
    try:
        return _ENV.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(
            f"template syntax error: {exc.message}", where=f"{where}:{exc.lineno}"
        ) from None


def render(template: jinja2.Template, context: dict[str, Any], where: str) -> str:
    try:
        return template.render(**context)
    except jinja2.UndefinedError as exc:
        raise UserError(
            f"template uses an undefined value: {exc.message}",
            where=where,
            fix="map the field with fields.input in evalgate.yml, or fix the template",
        ) from None


def render_turn(template: jinja2.Template, case_input: dict[str, Any], where: str) -> str:
    """The user turn for a case; ``input`` is the whole input too (one-field suites)."""
    context = dict(case_input)
    context.setdefault(
        "input", next(iter(case_input.values())) if len(case_input) == 1 else case_input
    )
    return render(template, context, where)


def syntax_error(source: str) -> tuple[str, int] | None:
    """The first syntax error of a template and its 1-based line in ``source``, or None."""
    try:
        _ENV.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        return exc.message or "invalid syntax", exc.lineno
    return None


def variables(source: str) -> set[str] | None:
    """The names a template reads, or None when it does not parse."""
    from jinja2 import meta

    try:
        return set(meta.find_undeclared_variables(_ENV.parse(source)))
    except jinja2.TemplateSyntaxError:
        return None
