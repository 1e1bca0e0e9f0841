"""One escaping function for untrusted text, by where it goes: Markdown, HTML, the log, a shell.

Text from cases, model replies, run files and a pull request's config is untrusted. Where it is
shown, it must read as what it is, and do nothing else: no @mention that pings someone, no
#reference, no link, no HTML, no broken table, no forged marker, no workflow command, no text
that reads differently than it is (bidi overrides, zero-width characters).

Checked against GitHub's own renderer (cmark-gfm with its extensions) over a corpus of payloads
and generated text: tests/report/test_escaping.py.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from typing import TYPE_CHECKING, Literal
from unicodedata import category

if TYPE_CHECKING:
    import regex

Target = Literal["markdown", "code", "html", "command", "property", "log", "shell"]

# A zero-width joiner after '@' or before a reference's digits stops GitHub's mention and
# reference filters (they run on the rendered text, after Markdown), and shows as nothing.
# It is the one invisible character escaping adds; any in the input are shown, as below.
JOINER = "\u200d"

# Characters that change how text reads without being seen: every control character but tab,
# newline and carriage return (Cc), every format character (Cf: bidi embeddings, overrides and
# isolates, zero-width spaces and joiners, the BOM, soft hyphen, invisible operators, prepended
# concatenation marks) and every default-ignorable code point (variation selectors, tag
# characters, Hangul fillers, the combining grapheme joiner). Each is shown as <U+XXXX>. The
# sets come from the Unicode data of the regex module (as the holdout leak guard's do), not a
# list kept here; text of ASCII alone, most of what is shown, needs only its controls.
_ASCII_INVISIBLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@lru_cache(maxsize=1)
def _invisible() -> regex.Pattern[str]:
    import regex

    return regex.compile(
        r"[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}--[\t\n\r]]", flags=regex.V1
    )


_SPACE = re.compile(r"\s+")

# Markdown: every ASCII punctuation character that can start or end inline syntax is
# backslash-escaped: emphasis, code, links, images, HTML, tables, strikethrough, math ('$')
# and character references ('&').
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&$])")
# The ':' of an autolink's scheme (http://, https://, ftp://, mailto:, xmpp:).
_SCHEME = re.compile(r"(?i)(?::(?=/)|(?<=mailto):|(?<=xmpp):)")
# The other autolink: a bare "www." (GitHub matches it in any case). Every one, not only at a
# word's start: GitHub starts one after '_', '*', '~' or '(' too, read before the backslash
# that escapes them ("x\\_www.example.com" links).
_WWW = re.compile(r"(?i)(www)\.")
# At the start of a line: a list item, a setext underline or a thematic break.
_LINE_START = re.compile(r"^(=|-(?=[\s-]|$))")
_LIST_NUMBER = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")
_MENTION = re.compile(r"@")
_REFERENCE = re.compile(r"#(?=\d)")
# GH-123 links an issue too.
_GH = re.compile(r"(?i)\bGH(?=-\d)")


def _mark(match: re.Match[str] | regex.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


# The general categories an invisible character can have: Cc and Cf, and those of the
# default-ignorable code points outside them (Unicode's DerivedCoreProperties.txt derives the
# property from Other_Default_Ignorable_Code_Point, in Mn, Lo and Cn, and the variation
# selectors, in Mn). Text whose other characters are all of other categories (the en dash and
# the arrows of a report, accented letters, symbols) needs no more than its ASCII controls
# checked, and no regex module (13 ms to import); tests/report/test_escaping.py holds the
# standard library's categories to the regex module's sets, code point by code point.
_MAY_HIDE = frozenset({"Cc", "Cf", "Mn", "Lo", "Cn"})


def visible(text: str) -> str:
    """The text with every invisible or direction-changing character shown as <U+XXXX>."""
    if text.isascii() or not any(category(ch) in _MAY_HIDE for ch in set(text) if not ch.isascii()):
        return _ASCII_INVISIBLE.sub(_mark, text)
    return _invisible().sub(_mark, text)


# Line breaks by str.splitlines() (LF, CR, VT, FF, FS, GS, RS, NEL, LS, PS).
_BREAKS = re.compile(r"[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def breaks_shown(text: str) -> str:
    """The text with each line break shown as <U+XXXX>, so one record never reads as two;
    the output door shows the other invisible characters and breaks workflow commands
    (:func:`printed`)."""
    return _BREAKS.sub(_mark, text)


def one_line(text: str) -> str:
    return _SPACE.sub(" ", visible(text)).strip()


@lru_cache(maxsize=16_384)
def _markdown(text: str) -> str:
    value = _MD_SPECIAL.sub(r"\\\1", one_line(text))
    value = _SCHEME.sub(r"\\:", value)
    value = _WWW.sub(r"\1\\.", value)
    value = _LIST_NUMBER.sub(r"\1\\\2", value)
    value = _LINE_START.sub(r"\\\1", value)
    value = _MENTION.sub("@" + JOINER, value)
    value = _REFERENCE.sub("#" + JOINER, value)
    return _GH.sub("GH" + JOINER, value)


# What makes a log line a workflow command: "::name::" at its start (after any blanks), or the
# runner's older "##[name]" form anywhere in it.
_COMMAND = re.compile(r":(?=:)|#(?=#\[)")


def inert(line: str) -> str:
    """One line of the job log that the runner cannot read as a workflow command, its text and
    indentation otherwise kept: a space between any two colons, and in any ``##[``."""
    return _COMMAND.sub(lambda m: m.group() + " ", line)


# What the runner reads as a workflow command in a line of a step's output, on stdout and
# stderr alike: "::" at the start of a line after any blanks (ActionCommand.TryParseV2 trims
# the line's start, then asks StartsWith("::")), "##[" anywhere (TryParse: IndexOf). A line
# ends at LF, CRLF or a lone CR (the runner reads each with .NET's TextReader.ReadLine).
# actions/runner, src/Runner.Common/ActionCommand.cs and src/Runner.Worker/Handlers/.
_LEADING_COMMAND = re.compile(r"(?:^|(?<=\r))([^\S\n\r]*:)(?=:)|#(?=#\[)", re.MULTILINE)

Printed = Literal["text", "markdown", "json", "stream"]


def printed(text: str, form: Printed) -> str:
    """What a command writes out, which in CI is the job log: nothing in it can start a
    workflow command (``::add-mask::``, ``::error::``, ``##[error]``), whatever case, reply or
    run file it quotes, and what it shows of them cannot act on a terminal.

    - ``json``: ``::`` and ``##[`` are written with a JSON escape (``:\\u003a``), which every
      reader decodes to the same text (outside a string neither can occur).
    - ``text``: invisible characters (escape sequences, carriage returns, bidi controls) are
      shown as ``<U+XXXX>``, and a line that would start a command gets a space after its
      first ``:`` (``##[`` one after its first ``#``); the rest of each line is kept, so a
      pytest id ``tests/a.py::test_b`` reads as itself.
    - ``markdown``: the same but for invisible characters, which its values show already (its
      mention guard adds one, a zero-width joiner); a carriage return is shown.
    - ``stream``: standard error, where a run's progress redraws its line (a carriage return
      and an escape sequence of its own): commands only, at a carriage return too.
    """
    if form == "json":
        return text.replace("::", ":\\u003a").replace("##[", "#\\u0023[")
    if form == "text":
        text = visible(text)
    if form != "stream":
        text = text.replace("\r", "<U+000D>")
    return _LEADING_COMMAND.sub(lambda m: (m.group(1) or m.group()) + " ", text)


def log_block(text: str) -> list[str]:
    """Untrusted text of several lines (a traceback) as log lines, each :func:`inert`, with
    invisible characters shown and line breaks of every kind ending a line."""
    return [inert(visible(line)) for line in text.splitlines()]


def escape(text: object, to: Target) -> str:
    """``text`` made safe and inert for one place it is shown.

    - ``markdown``: one line of GitHub Markdown (a table cell, a list item, a heading);
      newlines fold to spaces. Renders as the text itself, nothing more.
    - ``code``: an inline code span, backticks included (a backtick inside becomes ``'``).
    - ``html``: text between tags or in a quoted attribute.
    - ``command``: the message of a workflow command (``::error::MESSAGE``), as GitHub
      documents: ``%``, CR and LF percent-encoded, so it cannot end the command.
    - ``property``: a workflow command's property value: also ``:`` and ``,``.
    - ``log``: one plain line of the job log: newlines folded, and no ``::`` or ``##[`` that
      could start a workflow command (see :func:`inert`).
    - ``shell``: one shell word (POSIX quoting).

    Every target shows invisible and bidi characters as ``<U+XXXX>``.
    """
    value = str(text)
    if to == "markdown":
        return _markdown(value)
    if to == "code":
        # An empty span would show its two backticks; a space shows as an empty code span.
        return "`" + (one_line(value).replace("`", "'") or " ") + "`"
    if to == "html":
        value = visible(value)
        for char, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&#34;")):
            value = value.replace(char, entity)
        return value.replace("'", "&#39;")
    if to in ("command", "property"):
        value = visible(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        if to == "property":
            value = value.replace(":", "%3A").replace(",", "%2C")
        return value
    if to == "log":
        return inert(one_line(value))
    if to == "shell":
        return shlex.quote(visible(value))
    raise ValueError(f"unknown target {to!r}")


def fence(content: str) -> str:
    """A backtick fence longer than any backtick run in ``content``: the block cannot be ended
    from inside (a fence closes only on a run at least as long as itself)."""
    longest = max((len(m) for m in re.findall(r"`+", content)), default=0)
    return "`" * max(3, longest + 1)
