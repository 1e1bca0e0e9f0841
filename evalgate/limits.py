"""How much of an untrusted text any report shows: one cap per kind of place, one cutter.

A model's reply (and so the answer read from it) has no size limit: a 10 MB answer in a label
field must not size a table's columns or a page. Reports show an excerpt; the run file keeps
the full text.
"""

from __future__ import annotations

import re

# An answer, expected label or category in a table cell, a matrix heading or a list.
LABEL = 40
# A case's input, on one line of a report.
MESSAGE = 200
# A reply or a case's input shown whole on an HTML page.
REPLY = 4_000
# Any one value a Markdown or text report prints (a backstop behind the caps above).
VALUE = 1_000
# Any one value an HTML page prints that is not markup the page made itself.
PAGE_VALUE = 10_000
# Answer columns of a confusion matrix; rarer answers are counted under OTHER.
MATRIX_COLUMNS = 12
OTHER = "(other)"

_SPACE = re.compile(r"\s+")
ELLIPSIS = "…"
# How a missing answer (or expected value) is shown.
NO_ANSWER = "(none)"


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, the noun plural (an ``s``) unless ``n`` is 1: "1 case", "3 cases"."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def excerpt(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters: whitespace folded, an ellipsis if cut.

    Only the start of the text is looked at, so the cost does not grow with its size.
    """
    head = text[: 2 * limit + 64]
    folded = _SPACE.sub(" ", head).strip()
    if len(folded) <= limit and len(head) == len(text):
        return folded
    if len(folded) <= limit:
        # The rest was cut unseen; what is shown may end early, never silently.
        return folded[: limit - 1].rstrip() + ELLIPSIS
    return folded[: limit - 1] + ELLIPSIS


def clip(text: str, limit: int = REPLY) -> str:
    """At most ``limit`` characters of a multi-line text, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}{ELLIPSIS}\n[{len(text) - limit:,} more characters in the run file]"


def label(value: object, limit: int = LABEL) -> str:
    """An answer or expected value as reports show it: ``(none)``, or an excerpt."""
    return NO_ANSWER if value is None else excerpt(str(value), limit)


# What a user's program (a tool command) may print on stdout, in bytes: more is an error of the
# case, not a reply held in memory whatever its size. Of its stderr only the last bytes are kept.
PROGRAM_OUTPUT = 1 << 20
PROGRAM_STDERR = 64 * 1024

# The largest file of the repository evalgate reads (a case file, a prompt, rules, a schema, a
# rubric, judge labels, a promptfoo file): larger ones are refused before they are read, so a
# pull request cannot make a job read gigabytes into memory.
FILE_BYTES = 100 * 1024 * 1024
