"""Templates as promptfoo renders them: assertion values with the test's vars, and the names a
prompt or an assertion reads (a var only assertions read is no input of the model).

promptfoo renders a string assertion value, and each string of a list value, with nunjucks and
the test's vars (src/assertions/index.ts, runAssertion; a ``file://`` value is read, not
rendered); an undefined var renders as nothing. evalgate renders them the same way once, when
it reads the test, with its own sandboxed templates (nunjucks' ``{{ var }}`` and ``{% if %}``
are jinja2's): the expected answer is the rendered text.
"""

from __future__ import annotations

from typing import Any

from evalgate.cases import templating
from evalgate.errors import UserError


def is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def names(text: str) -> set[str] | None:
    """The vars a template reads; None when it is not a template evalgate can read."""
    return templating.variables(text) if is_template(text) else set()


def value_names(value: Any) -> set[str]:
    """The vars an assertion value reads (a string, or the strings of a list)."""
    items = value if isinstance(value, list) else [value]
    found: set[str] = set()
    for item in items:
        if isinstance(item, str) and not item.startswith("file://"):
            found |= names(item) or set()
    return found


def render(text: str, variables: dict[str, Any], where: str) -> str:
    """``text`` rendered with ``variables``; an undefined one renders empty, as in nunjucks."""
    read = templating.variables(text)
    if read is None:
        raise UserError("an assertion value is not a template evalgate can render", where=where)
    context = {name: "" for name in read}
    context.update({k: v for k, v in variables.items() if isinstance(k, str)})
    template = templating.compile_template(text, where)
    return templating.render_template(template, context, where)


def render_value(value: Any, variables: dict[str, Any], where: str) -> Any:
    """An assertion value as promptfoo's runAssertion renders it before checking."""
    if isinstance(value, str):
        return (
            value
            if value.startswith("file://") or not is_template(value)
            else render(value, variables, where)
        )
    if isinstance(value, list):
        return [render_value(v, variables, where) if isinstance(v, str) else v for v in value]
    return value
