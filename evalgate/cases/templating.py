"""Rendering prompt files and the user-turn template (jinja2, sandboxed, StrictUndefined).

The same user-turn wrapping is used for every prompt version, so the prompt is the only thing
that changes between two runs of a suite.

A prompt file is changed by pull requests and reviewed as text, not as code, so it must not be
able to run any: templates render in jinja2's ``ImmutableSandboxedEnvironment`` (no attribute
starting with ``_``, no function internals, no unsafe methods, no method that changes a list,
dict or set) with no loader (no ``include``, ``import`` or ``extends`` of other files).

A render is pure and small: it sees deep copies of the case's values, the ``random`` filter and
``lipsum`` are refused (a turn must read the same in every run, in the copy check and in the
run), and every operation that can build a large value is checked against the budget in
template_budget.py (output, widths, sizes, steps, time). Whatever goes wrong in a render is one
line naming the file; for a holdout case the line says only what kind of error it was, since an
exception's text can quote the values it met.
"""

from __future__ import annotations

import copy
import inspect
import json
import time
import types
import weakref
from collections.abc import Callable, Iterable
from functools import cache, wraps
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.runtime import markup_join, str_join
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEscapeFormatter,
    SandboxedFormatter,
)
from jinja2.utils import Namespace
from markupsafe import Markup

from evalgate.cases import template_budget as tb
from evalgate.cases.template_budget import (
    MAX_OUTPUT,
    MAX_PRODUCT,
    OutOfTime,
    OverBudget,
    limit_int,
    limit_percent,
    limit_size,
    limit_spec,
    limit_text,
    limit_width,
    text_size,
)
from evalgate.errors import UserError

__all__ = ["MAX_OUTPUT", "MAX_PRODUCT", "compile_template", "render_template", "render_turn"]

_SIZED = (str, bytes, list, tuple)
# A namespace prints its attributes (held under a private name).
tb.HOLDERS[Namespace] = lambda ns: object.__getattribute__(ns, "_Namespace__attrs")


def _finalize(value: Any) -> Any:
    """The documented rules for what ``{{ }}`` prints (docs/suites.md): null renders nothing,
    never "None" (a field missing from a case is still an error; test a null one with
    ``{% if field %}``); an object or a list renders as JSON (keys in the file's order,
    non-ASCII kept), never Python's repr (``{'text': 'x'}``), which no model was taught."""
    limit_text(value, MAX_OUTPUT)
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        text = json.dumps(value, ensure_ascii=False, default=str)
        limit_text(text, MAX_OUTPUT)
        return text
    return value


def _refused(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise jinja2.exceptions.SecurityError(
            f"{what} gives a different text on each run, so runs could not be compared"
        )

    return refuse


# --- filters and methods: what each may build, checked before it runs ---------------------


def _joined_size(items: list[Any], sep: Any) -> int:
    return sum(text_size(i, MAX_PRODUCT) for i in items) + len(items) * text_size(sep, 0)


def _replaced_size(s: Any, old: Any, new: Any, count: Any = -1) -> int:
    if not isinstance(s, str | bytes) or not isinstance(old, str | bytes):
        return 0
    if not isinstance(new, str | bytes):
        new = str(new)
    hits = s.count(old) if old else len(s) + 1  # type: ignore[arg-type]
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(s) + hits * max(0, len(new) - len(old))


def _lines(s: Any) -> int:
    return str(s).count("\n") + 1 if isinstance(s, str) else 1


def _check_filter(name: str, args: dict[str, Any]) -> None:
    """Widths and sizes a filter is asked for, by its name and bound arguments."""
    get = args.get
    if name == "center":
        limit_width(get("width"), "a center width")
    elif name == "indent":
        width = get("width")
        limit_width(width, "an indent width")
        step = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        limit_size(text_size(get("s"), MAX_PRODUCT) + _lines(get("s")) * step)
    elif name == "format":
        value = get("value")
        limit_percent(str(value), get("kwargs") or tuple(get("args") or ()))
    elif name == "join":
        items = args["value"] = list(get("value") or ())
        limit_size(_joined_size(items, get("d", "")))
    elif name == "replace":
        limit_size(_replaced_size(get("s"), get("old"), get("new"), get("count")))
    elif name == "wordwrap":
        width, wrap = get("width"), get("wrapstring") or "\n"
        size = text_size(get("s"), MAX_PRODUCT)
        if isinstance(width, int) and width > 0:
            limit_size(size + (size // width + 1) * text_size(wrap, MAX_PRODUCT))
    elif name in ("batch", "slice"):
        limit_width(get("linecount", get("slices")), f"a {name} count")
    elif name == "tojson":
        indent = get("indent")
        limit_width(indent, "a tojson indent")
        limit_size(text_size(get("value"), MAX_PRODUCT) * (1 + (indent or 0)))
    elif name == "sum" and isinstance(start := get("start"), _SIZED):
        items = args["iterable"] = list(get("iterable") or ())
        limit_size(len(start) + sum(len(i) for i in items if isinstance(i, _SIZED)))


# Filters that never turn their value into text (the rest are refused a value whose text
# would pass the limit before they run).
_NO_TEXT = frozenset(
    [
        "attr",
        "batch",
        "count",
        "d",
        "default",
        "dictsort",
        "first",
        "groupby",
        "items",
        "last",
        "length",
        "list",
        "map",
        "max",
        "min",
        "reject",
        "rejectattr",
        "reverse",
        "select",
        "selectattr",
        "slice",
        "sort",
        "sum",
        "unique",
    ]
)


def _budgeted(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    passed = getattr(func, "jinja_pass_arg", None) is not None  # context, eval_ctx, environment

    @cache
    def signature_of() -> inspect.Signature | None:
        # At the filter's first call, not for all 54 when the sandbox is made: a builtin's
        # signature is parsed from its text by the tokenize module, whose first use compiles
        # a regular expression that costs more than the rest of this module.
        try:
            return inspect.signature(func)
        except (TypeError, ValueError):
            return None

    @wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        budget = tb.current()
        if name not in _NO_TEXT and len(args) > int(passed):
            limit_text(args[int(passed)])
        signature = signature_of()
        if signature is not None:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                pass  # the filter itself says what is wrong with its arguments
            else:
                bound.apply_defaults()
                _check_filter(name, bound.arguments)
                args, kwargs = bound.args, bound.kwargs
        return budget.charge(func(*args, **kwargs))

    return checked


def _check_method(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """A str or bytes method's widths and sizes, checked before the call."""
    owner = getattr(obj, "__self__", None)
    if not isinstance(obj, types.BuiltinMethodType) or not isinstance(owner, str | bytes):
        return args
    name = obj.__name__
    first = args[0] if args else kwargs.get("width", kwargs.get("tabsize"))
    if name in ("center", "ljust", "rjust", "zfill"):
        limit_width(first, f"a {name} width")
    elif name == "expandtabs":
        size = first if isinstance(first, int) else 8
        limit_width(size, "a tab size")
        tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
        limit_size(len(owner) + tabs * size)
    elif name == "replace" and len(args) >= 2:
        limit_size(_replaced_size(owner, *args[:3]))
    elif name == "join" and args:
        items = list(args[0])
        limit_size(_joined_size(items, owner))
        return (items, *args[1:])
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((text_size(v, MAX_PRODUCT) for v in args[0].values()), default=1)
        limit_size(len(owner) * max(1, longest))
    return args


def _check_binop(operator: str, left: Any, right: Any) -> None:
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, _SIZED) and isinstance(times, int):
                limit_size(len(seq) * times, "the product")
        if isinstance(left, int) and isinstance(right, int):
            limit_int(left.bit_length() + right.bit_length())
    elif operator == "**" and isinstance(left, int) and isinstance(right, int):
        if abs(left) > 1:
            limit_int(right * abs(left).bit_length())
    elif operator == "+":
        if isinstance(left, _SIZED) and isinstance(right, _SIZED):
            limit_size(len(left) + len(right))
    elif operator == "%" and isinstance(left, str):
        limit_percent(left, right)


class _Checked(SandboxedFormatter):
    """``str.format`` in a template: each field's width checked, the whole result capped."""

    total = 0

    def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
        self.total = len(format_string)
        return super().vformat(format_string, args, kwargs)

    def format_field(self, value: Any, format_spec: str) -> Any:
        self.total += limit_spec(format_spec) + text_size(value, MAX_PRODUCT)
        limit_size(self.total)
        return super().format_field(value, format_spec)


class _CheckedEscape(_Checked, SandboxedEscapeFormatter):
    """The same for ``Markup.format`` (each value escaped)."""


class _Generator(CodeGenerator):
    """The ``~`` operator joins through the environment, so what it builds is checked."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        escaped = "context.eval_ctx.autoescape" if frame.eval_ctx.volatile else "None"
        if not frame.eval_ctx.volatile:
            escaped = repr(bool(frame.eval_ctx.autoescape))
        self.write("environment.joined((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(f"), {escaped})")


def _over_output() -> OverBudget:
    return OverBudget(f"the template renders more than {MAX_OUTPUT:,} characters")


class _Sandbox(ImmutableSandboxedEnvironment):
    code_generator_class = _Generator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.filters = {name: _budgeted(name, f) for name, f in self.filters.items()}
        self.filters["random"] = _refused("the random filter")
        self.globals["lipsum"] = _refused("lipsum (random text)")

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        return tb.current().charge(super().call_binop(context, operator, left, right))

    def getitem(self, obj: Any, argument: Any) -> Any:
        return tb.current().charge(super().getitem(obj, argument))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        args = _check_method(__obj, args, kwargs)
        return tb.current().charge(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        if super().wrap_str_format(value) is None:
            return None
        text: str = value.__self__
        mapping = value.__name__ == "format_map"
        formatter: _Checked = (
            _CheckedEscape(self, escape=text.escape) if isinstance(text, Markup) else _Checked(self)
        )

        def checked(*args: Any, **kwargs: Any) -> str:
            if mapping:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                kwargs = args[0]
                args = ()
            return type(text)(formatter.vformat(text, args, kwargs))

        return checked

    def concat(self, parts: Iterable[str]) -> str:
        """The output of a render, a macro or a block: capped as it is produced."""
        kept: list[str] = []
        size = 0
        for part in parts:
            size += len(part)
            if size > MAX_OUTPUT:
                raise _over_output()
            kept.append(part)
        return str(tb.current().charge("".join(kept)))

    def joined(self, parts: tuple[Any, ...], escaped: bool) -> str:
        limit_size(sum(text_size(p, MAX_PRODUCT) for p in parts), "the joined text")
        return str(tb.current().charge((markup_join if escaped else str_join)(parts)))


# The seconds each compiled template has rendered for, in all its renders.
_SPENT: weakref.WeakKeyDictionary[jinja2.Template, float] = weakref.WeakKeyDictionary()

_ENV = _Sandbox(
    loader=None,
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,  # prompts are plain text sent to a model, not HTML
    finalize=_finalize,
)


# A template that only prints values by name between its text ("<message>{{ message }}
# </message>", most user-turn templates) runs no loop, call, filter or lookup inside a value:
# its render is the text and each value as ``_finalize`` prints it, joined under the output
# cap. Rendered so, without the tracer and the deep copy the sandbox needs, the 20,000 turns a
# run renders before its first call take 60 to 75 ms instead of 2.2 s. The text is jinja2's
# own: a property test holds the two renders together. (Its seconds are counted apart from
# the sandbox's, which renders it only for a name not among the values: an undefined one,
# whose error ends the run, or one of jinja2's globals.)
class _Plain:
    """A plain template's parts, each (True, a name) or (False, text), and the seconds all its
    renders have taken (held to the sandbox's total)."""

    __slots__ = ("parts", "spent")

    def __init__(self, parts: tuple[tuple[bool, str], ...]) -> None:
        self.parts = parts
        self.spent = 0.0


_PLAIN: weakref.WeakKeyDictionary[jinja2.Template, _Plain] = weakref.WeakKeyDictionary()


# Names the compiled template may bind itself, whatever the context holds ({{ self }} prints
# jinja2's TemplateReference even when a case has a field "self"): left to the sandbox.
_OWN = frozenset({"self", "loop", "caller", "varargs", "kwargs", "super"})
_SCALARS = (str, int, float, bool, type(None))


def _plain(source: str) -> _Plain | None:
    """What a template prints, when it only prints values by name; otherwise None."""
    plan: list[tuple[bool, str]] = []
    for node in _ENV.parse(source).body:
        if type(node) is not nodes.Output:
            return None
        for child in node.nodes:
            if type(child) is nodes.TemplateData:
                plan.append((False, child.data))
            elif (
                type(child) is nodes.Name
                and child.ctx == "load"
                and child.name.isascii()  # Python folds "ﬁ" into "fi" in the compiled code
                and child.name not in _OWN
            ):
                plan.append((True, child.name))
            else:
                return None
    # A part is a step of the sandbox's tracer: one over its steps fails there, as it must.
    return _Plain(tuple(plan)) if len(plan) <= tb.MAX_STEPS else None


def compile_template(source: str, where: str) -> jinja2.Template:
    try:
        template = _ENV.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(
            f"template syntax error: {exc.message}", where=f"{where}:{exc.lineno}"
        ) from None
    plain = _plain(source)
    if plain is not None:
        _PLAIN[template] = plain
    return template


def _render_plain(plain: _Plain, context: dict[str, Any]) -> str | None:
    """The render of a plain template, or None when it names a value the context lacks (an
    undefined value, or one of jinja2's globals: the sandbox's render says which). Held to the
    sandbox's clock: seconds a render, and seconds for all renders of the template (one slow
    on each of 20,000 cases), the clock read every 1,024 parts as the tracer reads it."""
    started = time.monotonic()
    seconds = min(tb.MAX_TOTAL_SECONDS - plain.spent, tb.MAX_SECONDS)
    if seconds <= 0:
        raise OutOfTime(tb.over_time(seconds))
    parts: list[str] = []
    size = count = 0
    try:
        for named, text in plain.parts:
            count += 1
            if count & 1023 == 0 and time.monotonic() - started > seconds:
                raise OutOfTime(tb.over_time(seconds))
            if named:
                if text not in context:
                    return None
                value = context[text]
                if type(value) is not str or len(value) + 3 > MAX_OUTPUT:
                    # A container is printed from a copy, as the sandbox prints it (a set's
                    # order is its copy's); a short string is its own text, as _finalize gives.
                    if type(value) not in _SCALARS:
                        value = copy.deepcopy(value)
                    value = str(_finalize(value))
                text = value
            size += len(text)
            if size > MAX_OUTPUT:  # as it grows: a name printed a thousand times stops early
                raise _over_output()
            parts.append(text)
    finally:
        plain.spent += time.monotonic() - started
    # Under the output cap, the budget's count of all a render builds cannot be passed.
    return "".join(parts)


def render_template(
    template: jinja2.Template, context: dict[str, Any], where: str, *, holdout: bool = False
) -> str:
    """Render under the budget; any failure is a UserError naming ``where``. ``holdout``: the
    values are a holdout case's, so the message names only the kind of failure."""
    plain = _PLAIN.get(template)
    if plain is not None:
        try:
            text = _render_plain(plain, context)
        except (Exception, OutOfTime) as exc:
            raise _failure(exc, where, holdout) from None
        if text is not None:
            return text
    return _render_sandboxed(template, context, where, holdout)


def _render_sandboxed(
    template: jinja2.Template, context: dict[str, Any], where: str, holdout: bool
) -> str:
    """The render of any template: in the sandbox, traced, on copies of the values."""
    left = tb.MAX_TOTAL_SECONDS - _SPENT.get(template, 0.0)
    try:
        with tb.rendering(left) as budget:
            try:
                # The values as one mapping: a field named "self" is not render()'s own.
                return template.render(copy.deepcopy(context))
            finally:
                _SPENT[template] = _SPENT.get(template, 0.0) + budget.elapsed
    except (Exception, OutOfTime) as exc:
        raise _failure(exc, where, holdout) from None


def _failure(exc: BaseException, where: str, holdout: bool) -> UserError:
    fix = "fix the expression in the template"
    if isinstance(exc, OutOfTime | OverBudget):
        kind, what = "is over its budget", f": {exc}"
        fix = (
            f"a render may make at most {MAX_OUTPUT:,} characters of text in a few seconds; "
            "simplify the template"
        )
    elif isinstance(exc, jinja2.UndefinedError):
        kind, what = "uses an undefined value", f": {exc.message}"
        fix = "map the field with fields.input in evalgate.yml, or fix the template"
    elif isinstance(exc, jinja2.exceptions.SecurityError):
        kind, what = "makes an unsafe access", f": {exc}"
        fix = "a template may only use its values and plain filters; remove the access"
    elif isinstance(exc, TypeError) and "no loader" in str(exc):
        # include / import / extends: there is no loader, so a template reads no files.
        kind, what = "includes, imports or extends another file", ""
        fix = "a template cannot read other files; inline the text"
    elif isinstance(exc, MemoryError):
        kind, what = "is over its budget", ": it ran out of memory"
    else:
        kind, what = "failed", f": {type(exc).__name__}: {exc}"
    if holdout:
        # An exception's text can quote the values it met: a holdout case's stay unshown.
        return UserError(
            f"template {kind} on a holdout case ({type(exc).__name__})", where=where, fix=fix
        )
    return UserError(f"template {kind}{what}"[:300], where=where, fix=fix)


def render_turn(
    template: jinja2.Template, case_input: dict[str, Any], where: str, *, holdout: bool = False
) -> str:
    """The user turn for a case; ``input`` is the whole input too (one-field suites)."""
    context = dict(case_input)
    context.setdefault(
        "input", next(iter(case_input.values())) if len(case_input) == 1 else case_input
    )
    return render_template(template, context, where, holdout=holdout)


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
