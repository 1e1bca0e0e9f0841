"""A rendered Markdown report (the PR comment, the job summary) as plain terminal text.

Not a Markdown parser: it knows the few constructs evalgate's own templates write (headings,
alerts, bullet lists, tables, collapsed blocks, code fences, links, backslash escapes, HTML
character references) and lays them out for a fixed-width terminal, so that the demo and local
runs can show what a pull request would read.
"""

from __future__ import annotations

import html
import re
import textwrap

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SUMMARY = re.compile(r"<details>\s*<summary>(.*?)</summary>", re.DOTALL)
_TAGS = re.compile(r"</?(details|summary|sub|sup|br|b|i|p)\s*/?>")
_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~@&=$:])")
_ALERT = re.compile(r"^\[!(NOTE|TIP|IMPORTANT|WARNING|CAUTION)\]$")
# Cells wider than this are cut with an ellipsis, so a table stays within a terminal's width.
CELL = 48
# A one-row table wider than this is shown as "header: value" lines instead.
WIDTH = 100


def _inline(text: str) -> str:
    text = _LINK.sub(r"\1 (\2)", text)
    text = text.replace("**", "").replace("`", "")
    text = _ESCAPE.sub(r"\1", text)
    return html.unescape(text).replace("\u200d", "").replace("\u200b", "")


def _wrapped(text: str, prefix: str = "") -> list[str]:
    """One paragraph or list item, wrapped to the terminal width under ``prefix``."""
    bullet = re.match(r"(\s*[-*] )", text)
    hang = " " * len(bullet.group(1)) if bullet else ""
    return textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent=prefix,
        subsequent_indent=prefix + hang,
        break_on_hyphens=False,
    ) or [prefix.rstrip()]


def _cells(row: str) -> list[str]:
    inner = row.strip().removeprefix("|").removesuffix("|")
    return [_inline(c.strip()) for c in re.split(r"(?<!\\)\|", inner)]


def _table(rows: list[str]) -> list[str]:
    header, _separator, *body = rows
    whole = [_cells(header), *(_cells(r) for r in body)]
    columns = max(len(r) for r in whole)
    whole = [r + [""] * (columns - len(r)) for r in whole]
    table = [[c if len(c) <= CELL else c[: CELL - 1] + "…" for c in row] for row in whole]
    widths = [max(len(r[i]) for r in table) for i in range(columns)]
    if len(table) == 2 and sum(widths) + 2 * (columns - 1) > WIDTH:
        # One row, one line per column: room for every cell whole.
        name = max(len(h) for h in whole[0])
        return [f"{h.ljust(name)}  {v}".rstrip() for h, v in zip(*whole, strict=True)]

    def line(row: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()

    return [line(table[0]), "  ".join("-" * w for w in widths), *(line(r) for r in table[1:])]


def markdown_to_terminal(markdown: str) -> str:
    """``markdown`` (as evalgate's templates write it) as aligned plain text."""
    text = _COMMENT.sub("", markdown)
    text = _SUMMARY.sub(lambda m: "\n▸ " + m.group(1).strip() + "\n", text)
    text = _TAGS.sub("", text)
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    in_code = False
    while i < len(lines):
        raw = lines[i]
        stripped = raw.strip()
        if stripped.startswith("```"):
            in_code = not in_code
            i += 1
            continue
        if in_code:
            out.append("    " + raw)
            i += 1
            continue
        if stripped.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i])
                i += 1
            out.extend(_table(block) if len(block) >= 2 else [_inline(b) for b in block])
            continue
        if stripped.startswith(">"):
            quoted = stripped.removeprefix(">").strip()
            alert = _ALERT.match(quoted)
            out.extend(["│ " + alert.group(1)] if alert else _wrapped(_inline(quoted), "│ "))
        elif stripped.startswith("#"):
            title = _inline(stripped.lstrip("#").strip())
            out.extend([title, "-" * len(title)])
        else:
            out.extend(_wrapped(_inline(raw.rstrip())))
        i += 1
    # At most one blank line in a row, none at either end.
    joined = re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in out))
    return joined.strip("\n") + "\n"
