"""The one redactor: keys and tokens out of every text an upstream sends back.

An API, a proxy or a command can echo the key or token it was sent in an error body. Error
texts are printed, saved in run files (an artefact, public on a public repository) and
summarised in the job summary and the comment, so every one passes through :func:`redact`
first: it removes the secrets this process holds (registered by the composition root with
:func:`hold`) and anything shaped like a key or token, whoever's it is.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Annotated
from urllib.parse import quote

from pydantic import AfterValidator

REDACTED = "[redacted]"
# Shorter values are not secrets worth the false positives (and would match everywhere).
MIN_SECRET = 8
# Environment variables whose values are secrets, by name.
SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD)")

_held: set[str] = set()
_pattern: re.Pattern[str] | None = None
_lock = threading.Lock()

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
    global _pattern
    fresh = {s.strip() for s in secrets if s and len(s.strip()) >= MIN_SECRET}
    with _lock:
        if fresh - _held:
            _held.update(fresh)
            forms = {form for s in _held for form in (s, quote(s, safe=""))}
            ordered = sorted(forms, key=len, reverse=True)  # longest first: no partial leftovers
            _pattern = re.compile("|".join(map(re.escape, ordered)))


def hold_environment(env: Mapping[str, str]) -> None:
    """Hold every value of ``env`` whose variable's name says it is a secret."""
    hold(*(value for name, value in env.items() if SECRET_NAME.search(name)))


def redact(text: str) -> str:
    """``text`` without the held secrets and without anything shaped like a key or token."""
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    text = _SHAPES.sub(REDACTED, text)
    text = _SCHEME.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    return _LABELLED.sub(
        lambda m: m.group(0) if m.group(2) == REDACTED else m.group(1) + REDACTED, text
    )


def redact_held(text: str) -> str:
    """Only the held secrets: for a model's reply, where a key-shaped answer may be the answer."""
    pattern = _pattern
    return pattern.sub(REDACTED, text) if pattern is not None else text


# Fields that keep what an upstream sent back: an error text may echo the key it was sent (so
# it loses anything key-shaped too); a reply loses only the held secrets, since a key-shaped
# answer may be the answer. Declared once for the reply and the run file's outcome.
RedactedError = Annotated[str, AfterValidator(redact)]
RedactedReply = Annotated[str, AfterValidator(redact_held)]
