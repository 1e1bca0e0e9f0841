"""Colour for terminal output, degrading to plain text when not a TTY or when NO_COLOR is set.

Reports are rendered as plain text by the templates; colour is applied afterwards to the few
words that carry the verdict, so plain and coloured output never differ in content.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TextIO

RESET = "\033[0m"
STYLES = {
    "pass": "\033[1;32m",
    "fail": "\033[1;31m",
    "inconclusive": "\033[1;33m",
    "warning": "\033[33m",
    "error": "\033[31m",
    "dim": "\033[2m",
}

_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(PASS)\b"), "pass"),
    (re.compile(r"\b(FAIL)\b"), "fail"),
    (re.compile(r"\b(INCONCLUSIVE)\b"), "inconclusive"),
    (re.compile(r"^(\s*warning:)", re.MULTILINE), "warning"),
    (re.compile(r"^(\s*LEAK:)", re.MULTILINE), "fail"),
    (re.compile(r"^(\s*note:.*)$", re.MULTILINE), "dim"),
]


def wants_colour(stream: TextIO, env: Mapping[str, str]) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if "NO_COLOR" in env or env.get("TERM") == "dumb":
        return False
    if env.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def colourise(text: str) -> str:
    for pattern, style in _RULES:
        start = STYLES[style]
        text = pattern.sub(rf"{start}\1{RESET}", text)
    return text
