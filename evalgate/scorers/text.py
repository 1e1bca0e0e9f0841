"""Scorers over the reply's text: label, exact, contains, regex."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalgate.config.models import ContainsScorer, ExactScorer, LabelScorer, RegexScorer
from evalgate.errors import ConfigError
from evalgate.scorers.base import Score, Scorer

_DECODER = json.JSONDecoder()


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _objects_in(text: str) -> Iterator[dict[str, Any]]:
    """Every JSON object that starts at a ``{`` of the text (nested values included)."""
    for brace in re.finditer(r"\{", text):
        try:
            value, _ = _DECODER.raw_decode(text, brace.start())
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            yield value


def read_label(text: str, field: str) -> tuple[str | None, bool]:
    """The label a reply gives, and whether the reply was exactly the asked-for JSON object.

    format_ok only when the whole reply is a JSON object with ``field`` as a string. Otherwise
    the answer is still read, from a JSON object inside other text (a code fence, a preamble)
    or from a bare ``Field: value.`` line, so a format slip is not also counted as a wrong answer.
    """
    whole = _json_object(text.strip())
    if whole is not None and isinstance(whole.get(field), str):
        return whole[field].strip().lower(), True
    for inner in _objects_in(text):
        if isinstance(inner.get(field), str):
            return inner[field].strip().lower(), False
    bare = re.search(rf"{re.escape(field)}\s*:\s*\"?([^\n\".]+)", text, re.IGNORECASE)
    if bare:
        return bare.group(1).strip().lower(), False
    return None, False


def label(config: LabelScorer, _base: Path) -> Scorer:
    def score(expected: Any, text: str) -> Score:
        answer, format_ok = read_label(text, config.field)
        right = answer is not None and answer == str(expected).strip().lower()
        return Score(answer=answer, score=float(right), format_ok=format_ok)

    return score


def exact(config: ExactScorer, _base: Path) -> Scorer:
    def norm(value: str) -> str:
        value = value.strip() if config.strip else value
        return value if config.case_sensitive else value.lower()

    def score(expected: Any, text: str) -> Score:
        return Score(answer=text, score=float(norm(text) == norm(str(expected))), format_ok=True)

    return score


def contains(config: ContainsScorer, _base: Path) -> Scorer:
    def score(expected: Any, text: str) -> Score:
        wanted = expected if isinstance(expected, list) else [expected]
        hay = text if config.case_sensitive else text.lower()
        needles = [str(w) if config.case_sensitive else str(w).lower() for w in wanted]
        found = all(n in hay for n in needles)
        return Score(answer=text, score=float(found), format_ok=True)

    return score


def regex(config: RegexScorer, _base: Path) -> Scorer:
    flags = re.IGNORECASE if config.ignore_case else 0

    def compile_(pattern: str) -> re.Pattern[str]:
        try:
            return re.compile(pattern, flags)
        except re.error as exc:
            raise ConfigError(f"invalid regex {pattern!r}: {exc}", fix="fix the pattern") from None

    fixed = compile_(config.pattern) if config.pattern is not None else None

    def score(expected: Any, text: str) -> Score:
        pattern = fixed or compile_(str(expected))
        match = pattern.search(text)
        answer = match.group(0) if match else None
        return Score(answer=answer, score=float(match is not None), format_ok=True)

    return score
