"""One exception tree. Every message says what went wrong, where, and how to fix it."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from evalgate import install_line_here
from evalgate.redact import redact


class EvalgateError(Exception):
    """Base of every error evalgate raises on purpose."""

    exit_code = 2


class UserError(EvalgateError):
    """A mistake in the user's input: config, cases, arguments, files. Exit 2, no traceback."""

    def __init__(self, what: str, *, where: str | None = None, fix: str | None = None) -> None:
        # Messages quote upstream answers (an API's, GitHub's, a command's): no secret in them.
        self.what = redact(what)
        self.where = None if where is None else redact(where)
        self.fix = None if fix is None else redact(fix)
        super().__init__(self.one_line())

    def one_line(self) -> str:
        head = f"{self.where}: {self.what}" if self.where else self.what
        return f"{head} ({self.fix})" if self.fix else head


class ConfigError(UserError):
    """evalgate.yml is missing or invalid."""


class CaseFileError(UserError):
    """A case file cannot be read or a case in it is invalid."""


class BackendError(UserError):
    """A backend cannot be built or refuses the run before it starts (missing key, bad model)."""


class MissingExtraError(BackendError):
    """An optional dependency is not installed."""

    def __init__(self, feature: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs an optional dependency that is not installed",
            fix=install_line_here(extra),
        )


class RunFileError(UserError):
    """A saved run cannot be found or read."""


# pydantic's messages by error type, in the house form ("should be ..."); a message of a type
# not listed keeps pydantic's text, with "Input should" and "Value error, " rewritten.
_PHRASES: dict[str, str] = {
    "string_type": "should be text",
    "int_type": "should be a whole number",
    "int_parsing": "should be a whole number",
    "int_from_float": "should be a whole number",
    "float_type": "should be a number",
    "float_parsing": "should be a number",
    "bool_type": "should be true or false",
    "bool_parsing": "should be true or false",
    "list_type": "should be a list",
    "dict_type": "should be a mapping (key: value lines)",
    "model_type": "should be a mapping (key: value lines)",
    "model_attributes_type": "should be a mapping (key: value lines)",
    "none_required": "should be null",
}


def did_you_mean(word: object, choices: Sequence[str]) -> str | None:
    """The choice ``word`` is most likely a typo of, if any is close enough."""
    options = list(choices)
    folded = str(word).casefold()
    # A difference of case alone ("V2" for "v2") is the likeliest typo of all, yet difflib
    # scores it as two different letters; compare case-folded, answer with the choice itself.
    same = [c for c in options if c.casefold() == folded]
    if same:
        return same[0]
    by_folded = {c.casefold(): c for c in options}
    close = difflib.get_close_matches(folded, list(by_folded), n=1, cutoff=0.6)
    return by_folded[close[0]] if close else None


def _found(value: object, limit: int = 60) -> str:
    """What was found, as code shows it: the start of a long text (a whole file that is not
    JSON, say), never all of it."""
    if isinstance(value, str | bytes) and len(value) > limit:
        return (
            repr(value[:limit])
            + f"... ({len(value):,} {'characters' if isinstance(value, str) else 'bytes'})"
        )
    return repr(value)


def describe_validation(error: Any, *, tag_noun: str = "kind") -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) as the house says it: what
    is wrong and what was found, never pydantic's own phrasing ("Input should be ...")."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    found = error.get("input")
    shown = "" if isinstance(found, dict | list) else f" (found {_found(found)})"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind == "union_tag_invalid":
        tag = ctx.get("tag")
        tags = re.findall(r"'([^']*)'", str(ctx.get("expected_tags", "")))
        guess = did_you_mean(tag, tags)
        return f"unknown {tag_noun} {tag!r}" + (f"; did you mean {guess}?" if guess else "")
    if kind == "union_tag_not_found":
        return "needs a kind"
    if kind == "literal_error":
        return f"should be {ctx.get('expected', 'one of the allowed values')}{shown}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        words = {
            "greater_than": "greater than",
            "greater_than_equal": "at least",
            "less_than": "less than",
            "less_than_equal": "at most",
        }[kind]
        limit = next(iter(ctx.values()), "?")
        return f"should be {words} {limit}{shown}"
    if kind in ("too_short", "too_long"):
        bound = ctx.get("min_length" if kind == "too_short" else "max_length")
        words = "at least" if kind == "too_short" else "at most"
        return f"should have {words} {bound} item{'s' if bound != 1 else ''}"
    if kind in _PHRASES:
        return _PHRASES[kind] + shown
    msg = str(error["msg"])
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if msg.startswith("Input should"):
        msg = "should" + msg.removeprefix("Input should")
    elif msg[:1].isupper() and not msg[1:2].isupper():
        msg = msg[0].lower() + msg[1:]
    return msg + shown


def from_validation(exc: ValidationError, *, tag_noun: str = "kind") -> str:
    """A pydantic ValidationError as one line: the first error's key path, then what is wrong
    with it in the house's words (``describe_validation``)."""
    error = exc.errors()[0]
    loc = ".".join(str(p) for p in error["loc"])
    what = describe_validation(error, tag_noun=tag_noun)
    return f"{loc}: {what}" if loc else what


def _parent(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return loc[:-1]


def first_validation_error(
    errors: list[Any], allowed: Callable[[tuple[Any, ...]], list[str] | None]
) -> tuple[Any, str | None, int]:
    """The error to show, the key an unknown key is likely a typo of, and how many others
    (``allowed`` gives the keys allowed where an unknown key was found).

    An unknown key is shown before anything else: a misspelt required key (``scorrer:``) is
    reported as the typo it is, not as the required key it leaves missing."""
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    ordered = unknown + [e for e in errors if e["type"] not in ("extra_forbidden", "missing")]
    ordered += [e for e in errors if e["type"] == "missing"]
    first = ordered[0]
    guess = None
    explained = {id(first)}
    if first["type"] == "extra_forbidden":
        guess = did_you_mean(first["loc"][-1], allowed(first["loc"]) or [])
        for other in errors:
            # The required key the typo leaves missing is the same mistake, not one more.
            if (
                other["type"] == "missing"
                and guess is not None
                and _parent(other["loc"]) == _parent(first["loc"])
                and str(other["loc"][-1]) == guess
            ):
                explained.add(id(other))
    return first, guess, len(errors) - len(explained)
