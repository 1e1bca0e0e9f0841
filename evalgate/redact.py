"""The one redactor: keys and tokens out of every text an upstream sends back.

An API, a proxy or a command can echo the key or token it was sent in an error body, and a
model can be made to repeat it. Error texts are printed, saved in run files (an artefact,
public on a public repository) and summarised in the job summary and the comment, so every one
passes through :func:`redact` first: it removes the secrets this process holds (registered by
the composition root with :func:`hold`) and anything shaped like a key or token, whoever's it is.

A held secret is found in whatever form an upstream may echo it: raw or URL-quoted, as HTML
character references (decimal or hex), base64 (standard or URL-safe, at any of the three byte
alignments), hex, reversed, in any letter case, with line breaks or spaces inserted (up to
``GAP`` characters at a time), and as any fragment of ``FRAGMENT`` characters or more, which
covers the key without its ``sk-ant-api03-``, ``ghp_`` or ``github_pat_`` prefix and a key cut
short. A fragment counts only when it looks like a secret (``DISTINCT`` different characters,
two of lower case, upper case and digits): a run of one letter, or a word the key happens to
share with ordinary text, is left alone.

The search is one pass of an Aho-Corasick automaton over the text for fixed blocks of every
form; only near a hit does Python walk outwards to see how much of the form is there. Texts of
tens of megabytes (a runaway answer) therefore cost a fraction of a second.
"""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote

import ahocorasick_rs
from pydantic import AfterValidator

from evalgate.limits import ELLIPSIS, excerpt

REDACTED = "[redacted]"
# Shorter values are not secrets worth the false positives (and would match everywhere).
MIN_SECRET = 8
# Environment variables whose values are secrets, by name.
SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD)")

# A fragment of a held secret this long (in characters of the secret, whatever its form) is
# the secret ...
FRAGMENT = 16
# ... when it holds this many different characters (and two kinds of them): "aaaa...", or a
# piece of a word, is not.
DISTINCT = 8
# Separators (whitespace, or an escaped line break such as a literal backslash-n) an upstream
# may put between two characters of a form, at most this many at a time.
GAP = 8

# The fixed blocks of each form the automaton looks for: this long, one every _STRIDE
# characters (so every fragment of FRAGMENT characters holds several), each with at least
# _BLOCK_DISTINCT different characters (a block of one repeated letter would hit everywhere).
_BLOCK = 8
_STRIDE = 2
_BLOCK_DISTINCT = 3
_B64_SAME = str.maketrans("-_", "+/")  # the URL-safe alphabet, read as the standard one
_B64_URL = str.maketrans("+/", "-_")
_ENTITY = re.compile(r"&#(?:x([0-9a-f]{1,6})|([0-9]{1,7}));?")
_PERCENT = re.compile(r"%([0-9a-f]{2})")
_SEPARATOR = re.compile(r"(?:\s|\\[nrt])+")


@dataclass(frozen=True)
class _Form:
    """One way a held secret may be written: its text (lower case) and how its characters map
    back onto the secret's, to judge whether a fragment of it counts."""

    text: str
    secret: str
    # The secret's index (in bytes, the same as characters for a key) of the form's first
    # character, and how many of the secret's characters one character of the form stands for.
    start: int = 0
    scale: float = 1.0
    reverse: bool = False
    # Its characters may be written as HTML character references or percent escapes.
    escapes: bool = False
    # Whether a fragment of it counts (see _token_like); if not, only the whole secret does.
    fragments: bool = True
    # Base64: "-" and "_" (the URL-safe alphabet) read as "+" and "/".
    b64: bool = False
    # Hex, which may come a byte at a time ("73 6b 2d").
    hex: bool = False
    # The length of the secret's public prefix (``sk-ant-api03-``): no part of a fragment.
    public: int = 0

    def secret_part(self, lo: int, hi: int) -> str:
        """The part of the secret that the form's characters ``lo:hi`` stand for, without the
        public prefix every key of its kind starts with."""
        if self.reverse:
            n = len(self.secret)
            a, b = n - hi, n - lo
        else:
            a, b = self.start + int(lo * self.scale), self.start + int(hi * self.scale)
        return self.secret[max(a, self.public) : b]


# Prefixes every key of a kind starts with, published in their providers' docs: a piece of one
# is the same in everyone's key, so it counts for nothing in a fragment.
PUBLIC_PREFIXES = (
    "sk-ant-api03-",
    "sk-ant-admin01-",
    "sk-proj-",
    "sk-",
    "github_pat_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "ghr_",
    "EVALGATE-HOLDOUT-KEY-1-",
)


def _public_prefix(secret: str) -> int:
    return max((len(p) for p in PUBLIC_PREFIXES if secret.startswith(p)), default=0)


@dataclass(frozen=True)
class _Needle:
    form: _Form
    # Where the block starts in the form, and how many of the form's characters it stands for.
    offset: int
    length: int


@dataclass(frozen=True)
class _Matcher:
    automaton: ahocorasick_rs.AhoCorasick
    needles: tuple[tuple[_Needle, ...], ...]


_held: set[str] = set()
_matcher: _Matcher | None = None
_lock = threading.Lock()


def _forms(secret: str) -> list[_Form]:
    """Every form of ``secret`` an upstream may echo (letter case aside: all are lower case)."""
    if not _token_like(secret):
        return [_Form(secret.lower(), secret, escapes=True, fragments=False)]
    raw = secret.encode("utf-8", "surrogatepass")
    public = _public_prefix(secret)
    forms = [
        _Form(secret.lower(), secret, escapes=True, public=public),
        _Form(secret[::-1].lower(), secret, reverse=True, public=public),
        _Form(raw.hex(), secret, scale=0.5, hex=True, public=public),
    ]
    for pad in range(3):
        # Base64 of the secret after ``pad`` other bytes: the groups made of its bytes alone,
        # which are the same whatever comes before or after it.
        encoded = base64.b64encode(bytes(pad) + raw).decode("ascii")
        whole = 4 * ((pad + len(raw)) // 3)
        core = encoded[4 if pad else 0 : whole].lower()
        if core:
            forms.append(
                _Form(core, secret, start=(3 - pad) % 3, scale=0.75, b64=True, public=public)
            )
    return forms


def _token_like(secret: str) -> bool:
    """Whether ``secret`` is a key or a token, whose every part is secret: not a URL, a path
    or words (a variable named ``*_TOKEN_URL`` holds an address whose pieces are public)."""
    return not (any(c.isspace() for c in secret) or "://" in secret or secret.startswith("/"))


def _spellings(form: _Form, block: str) -> set[str]:
    """``block`` of ``form`` as it may appear in a text (lower case)."""
    spelt = {block}
    if form.b64:
        spelt.add(block.translate(_B64_URL))
    if form.hex:
        spelt.add(" ".join(block[i : i + 2] for i in range(0, len(block), 2)))
    if form.escapes:
        spelt.add("".join(f"&#{ord(c)};" for c in block))
        spelt.add("".join(f"&#x{ord(c):x};" for c in block))
        spelt.add(quote(block, safe="").lower())
        spelt.add("".join(f"%{b:02x}" for b in block.encode("utf-8", "surrogatepass")))
    return spelt


def _build(secrets: set[str]) -> _Matcher | None:
    table: dict[str, list[_Needle]] = {}
    for secret in secrets:
        for form in _forms(secret):
            text = form.text
            needles: list[_Needle] = []
            if form.escapes:
                # The whole secret, however plain (a short or repetitive one has no blocks).
                needles.append(_Needle(form, 0, len(text)))
            starts = list(range(0, len(text) - _BLOCK + 1, _STRIDE)) if form.fragments else []
            if starts and starts[-1] != len(text) - _BLOCK:
                starts.append(len(text) - _BLOCK)
            for start in starts:
                if len(set(text[start : start + _BLOCK])) >= _BLOCK_DISTINCT:
                    needles.append(_Needle(form, start, _BLOCK))
            for needle in needles:
                block = text[needle.offset : needle.offset + needle.length]
                for spelt in _spellings(form, block):
                    table.setdefault(spelt, []).append(needle)
    if not table:
        return None
    patterns = list(table)
    return _Matcher(ahocorasick_rs.AhoCorasick(patterns), tuple(tuple(table[p]) for p in patterns))


# Shapes of keys and tokens, whoever holds them.
_SHAPES = re.compile(
    r"""
    sk-ant-[A-Za-z0-9_-]{8,}                     # Anthropic
  | \bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}   # OpenAI
  | \b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}   # GitHub tokens (the Actions token is ghs_)
  | \bgithub_pat_[A-Za-z0-9_]{16,}
  | EVALGATE-HOLDOUT-KEY-1-[A-Za-z0-9+/=_-]+     # the holdout secret key
  | \bAKIA[0-9A-Z]{16}\b                        # AWS access key ids
  | \bxox[abprs]-[A-Za-z0-9-]{10,}              # Slack
  | \beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}   # JWTs
    """,
    re.VERBOSE,
)
# A credential after its label: "Authorization: Bearer X", "x-api-key: X", "api_key=X", and
# the same inside JSON ("api_key": "X").
_LABELLED = re.compile(
    r"""(?ix)
    ( (?:authorization|proxy-authorization|x-api-key|api[_-]?key|access[_-]?token|
         auth[_-]?token|token|secret|password|passwd)
      ["']?\s*[:=]\s*["']?
      (?:bearer\s+|token\s+|basic\s+)? )
    ( [^\s"',;&}<>]{6,} )
    """
)
_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
# user:password@ in a URL.
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@")


def hold(*secrets: str | None) -> None:
    """Remember secrets this process holds, so no text that carries them is shown or saved."""
    global _matcher
    fresh = {s.strip() for s in secrets if s and len(s.strip()) >= MIN_SECRET}
    with _lock:
        if fresh - _held:
            _held.update(fresh)
            _matcher = _build(_held)


def hold_environment(env: Mapping[str, str]) -> None:
    """Hold every value of ``env`` whose variable's name says it is a secret."""
    hold(*(value for name, value in env.items() if SECRET_NAME.search(name)))


def redact(text: str) -> str:
    """``text`` without the held secrets and without anything shaped like a key or token."""
    text = redact_held(text)
    text = _SHAPES.sub(REDACTED, text)
    text = _SCHEME.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    return _LABELLED.sub(
        lambda m: m.group(0) if m.group(2) == REDACTED else m.group(1) + REDACTED, text
    )


def redact_held(text: str) -> str:
    """Only the held secrets: for a model's reply, where a key-shaped answer may be the answer."""
    matcher = _matcher
    if matcher is None or not text:
        return text
    spans = _held_spans(text, matcher)
    if not spans:
        return text
    pieces: list[str] = []
    at = 0
    for start, end in spans:
        pieces += [text[at:start], REDACTED]
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def _held_spans(text: str, matcher: _Matcher) -> list[tuple[int, int]]:
    """Where ``text`` holds a held secret in any form: sorted spans that do not overlap."""
    # "İ" is the one character whose lower case is two: read as "i", the indexes stay.
    low = (text.replace("\u0130", "i") if "\u0130" in text else text).lower()
    found: list[tuple[int, int]] = []
    last = (0, -1)
    for index, start, end in matcher.automaton.find_matches_as_indexes(low, overlapping=True):
        if last[0] <= start and end <= last[1]:
            continue  # another block of a secret already found
        best: tuple[int, int] | None = None
        for needle in matcher.needles[index]:
            span = _extend(low, start, end, needle)
            if span is not None and (best is None or span[1] - span[0] > best[1] - best[0]):
                best = span
        if best is not None:
            found.append(best)
            last = best
    merged: list[tuple[int, int]] = []
    for start, end in sorted(found):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _extend(low: str, start: int, end: int, needle: _Needle) -> tuple[int, int] | None:
    """The span of ``low`` around a hit of ``needle`` (at ``start:end``) that holds its form,
    walking outwards one character of the form at a time; None if it is too little to count."""
    form = needle.form
    text, escapes, b64 = form.text, form.escapes, form.b64
    hi, at = needle.offset + needle.length, end
    while hi < len(text):
        unit = _unit_at(low, _skip_forward(low, at), escapes)
        if unit is None or not _same(unit[0], text[hi], b64):
            break
        hi, at, end = hi + 1, unit[1], unit[1]
    lo, at = needle.offset, start
    while lo > 0:
        unit = _unit_before(low, _skip_back(low, at), escapes)
        if unit is None or not _same(unit[0], text[lo - 1], b64):
            break
        lo, at, start = lo - 1, unit[1], unit[1]
    if (lo == 0 and hi == len(text)) or (form.fragments and _secret_like(form.secret_part(lo, hi))):
        return start, end
    return None


def _same(seen: str, expected: str, b64: bool) -> bool:
    return seen == expected or (b64 and seen.translate(_B64_SAME) == expected)


def _secret_like(part: str) -> bool:
    """Whether a fragment of a held secret is enough of it to count as the secret."""
    if len(part) < FRAGMENT or len(set(part.lower())) < DISTINCT:
        return False
    kinds = (any(c.islower() for c in part), any(c.isupper() for c in part))
    return kinds.count(True) + any(c.isdigit() for c in part) >= 2


def _skip_forward(low: str, at: int) -> int:
    gap = _SEPARATOR.match(low, at, at + GAP + 2)
    return gap.end() if gap is not None and gap.end() - at <= GAP else at


def _skip_back(low: str, at: int) -> int:
    floor = max(0, at - GAP)
    back = at
    while back > floor:
        if low[back - 1].isspace():
            back -= 1
        elif back - 2 >= floor and low[back - 2] == "\\" and low[back - 1] in "nrt":
            back -= 2
        else:
            break
    return back


def _unit_at(low: str, at: int, escapes: bool) -> tuple[str, int] | None:
    """The character at ``at`` (an escape read as the character it stands for) and its end."""
    if at >= len(low):
        return None
    char = low[at]
    if escapes and char in "&%":
        found = (_ENTITY if char == "&" else _PERCENT).match(low, at)
        if found is not None:
            return _decoded(found), found.end()
    return char, at + 1


def _unit_before(low: str, at: int, escapes: bool) -> tuple[str, int] | None:
    """The character that ends at ``at`` (an escape read as the character it stands for) and
    its start."""
    if at <= 0:
        return None
    if escapes:
        amp = low.rfind("&#", max(0, at - 11), at)
        if amp >= 0:
            found = _ENTITY.fullmatch(low, amp, at)
            if found is not None:
                return _decoded(found), amp
        if at >= 3 and low[at - 3] == "%":
            found = _PERCENT.fullmatch(low, at - 3, at)
            if found is not None:
                return _decoded(found), at - 3
    return low[at - 1], at - 1


def _decoded(escape: re.Match[str]) -> str:
    """The character a character reference or percent escape stands for (lower case)."""
    hex_digits = escape.group(1)
    code = int(hex_digits, 16) if escape.re is _PERCENT or hex_digits else int(escape.group(2))
    return chr(code).lower() if code < 0x110000 else "\ufffd"


# How much of what an upstream said about a failure (an API's error message, a program's
# stderr) a run file, an artefact, the comment or an annotation keeps.
ERROR_EXCERPT = 200
_SPACE = re.compile(r"\s+")


def redacted_excerpt(text: object, *, tail: bool = False) -> str:
    """What an upstream said, as evalgate keeps it: redacted, on one line, at most
    ``ERROR_EXCERPT`` characters (the start, or with ``tail`` the end, as of a stderr whose
    last lines say most). Only a window around the part kept is read, so a huge body costs
    no more than a small one; a secret cut by the window's edge is still a fragment of it."""
    window = 4 * ERROR_EXCERPT + 256
    body = str(text)
    if not tail:
        return excerpt(redact(body[:window]), ERROR_EXCERPT)
    folded = _SPACE.sub(" ", redact(body[-window:])).strip()
    if len(folded) <= ERROR_EXCERPT and len(body) <= window:
        return folded
    return ELLIPSIS + folded[-(ERROR_EXCERPT - 1) :].lstrip()


def upstream_error(status: int | str | None, kind: object, message: object) -> str:
    """An upstream's failure as run files and annotations keep it: the status and error type
    read from its response, and an excerpt of what it said (see :func:`redacted_excerpt`)."""
    head = " ".join(str(p) for p in (status, kind) if p is not None and str(p) != "")
    text = redacted_excerpt(message) if message is not None else ""
    return f"{head}: {text}" if head and text else head or text


# Fields that keep what an upstream sent back: an error text may echo the key it was sent (so
# it loses anything key-shaped too); a reply loses only the held secrets, since a key-shaped
# answer may be the answer. Declared once for the reply and the run file's outcome.
RedactedError = Annotated[str, AfterValidator(redact)]
RedactedReply = Annotated[str, AfterValidator(redact_held)]
