"""Rendering prompt files and the user-turn template (jinja2, sandboxed, StrictUndefined).

The same user-turn wrapping is used for every prompt version, so the prompt is the only thing
that changes between two runs of a suite.

A prompt file is changed by pull requests and reviewed as text, not as code, so it must not be
able to run any: templates render in jinja2's ``SandboxedEnvironment`` (no attribute starting
with ``_``, no function internals, no unsafe methods) with no loader (no ``include``, ``import``
or ``extends`` of other files), and an unsafe access is a one-line error naming the file.
"""

from __future__ import annotations

from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from evalgate.errors import UserError


def _null_is_empty(value: Any) -> Any:
    """The documented rule for null case fields: ``{{ field }}`` renders nothing, never "None"
    (a field missing from a case is still an error; test a null one with ``{% if field %}``)."""
    return "" if value is None else value


# The longest string or list, and the largest number of digits, one operation of a template
# may make: `{{ "x" * 10**12 }}` is refused instead of filling the memory.
MAX_PRODUCT = 1_000_000


class _Sandbox(SandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                sized = isinstance(seq, str | list | tuple) and isinstance(times, int)
                if sized and len(seq) * times > MAX_PRODUCT:
                    raise jinja2.exceptions.SecurityError(
                        f"the product would hold {len(seq) * times:,} items "
                        f"(at most {MAX_PRODUCT:,})"
                    )
        powers = operator == "**" and isinstance(left, int) and isinstance(right, int)
        if powers and abs(left) > 1 and right * abs(left).bit_length() > MAX_PRODUCT:
            raise jinja2.exceptions.SecurityError("the power would be too large")
        return super().call_binop(context, operator, left, right)


_ENV = _Sandbox(
    loader=None,
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


def render_template(template: jinja2.Template, context: dict[str, Any], where: str) -> str:
    try:
        return template.render(**context)
    except jinja2.UndefinedError as exc:
        raise UserError(
            f"template uses an undefined value: {exc.message}",
            where=where,
            fix="map the field with fields.input in evalgate.yml, or fix the template",
        ) from None
    except jinja2.exceptions.SecurityError as exc:
        raise UserError(
            f"template makes an unsafe access: {exc}",
            where=where,
            fix="a template may only use its values and plain filters; remove the access",
        ) from None
    except jinja2.TemplateError as exc:
        raise UserError(f"template cannot be rendered: {exc}", where=where) from None
    except TypeError as exc:
        if "no loader" in str(exc):
            # include / import / extends: there is no loader, so a template reads no files.
            raise UserError(
                "template includes, imports or extends another file",
                where=where,
                fix="a template cannot read other files; inline the text",
            ) from None
        raise UserError(
            f"template failed: TypeError: {exc}"[:300],
            where=where,
            fix="fix the expression in the template",
        ) from None
    except (ArithmeticError, ValueError, RecursionError) as exc:
        raise UserError(
            f"template failed: {type(exc).__name__}: {exc}"[:300],
            where=where,
            fix="fix the expression in the template",
        ) from None


def render_turn(template: jinja2.Template, case_input: dict[str, Any], where: str) -> str:
    """The user turn for a case; ``input`` is the whole input too (one-field suites)."""
    context = dict(case_input)
    context.setdefault(
        "input", next(iter(case_input.values())) if len(case_input) == 1 else case_input
    )
    return render_template(template, context, where)


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
