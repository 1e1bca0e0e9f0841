"""The response cache: replies keyed by backend and the full request, stored as files.

Opt-in locally (``--cache``), where the folder is the user's own. In the action the cache is
authenticated: it lives outside the checkout and every entry carries an HMAC under a key only
the job's process holds (see evalgate/action/state.py), so a file the pull request planted is
a miss. Repeats and noise runs bypass it: a cached reply measures nothing about noise.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import tempfile
import threading
from pathlib import Path

from pydantic import ValidationError

from evalgate.backends.base import Reply, Request

# Options that change how a reply is fetched, never what it says.
TRANSPORT_OPTIONS = frozenset(
    {"stream", "timeout_s", "retry", "adaptive_rate_limit", "batch", "poll_s"}
)


class ResponseCache:
    """Replies by request. ``key`` None: plain files (local use, the folder is trusted).
    With a key, an entry's file name and contents are HMAC-SHA256 under it: an entry the key's
    holder did not write is never found, and one altered or moved is refused."""

    def __init__(self, folder: Path, key: bytes | None = None) -> None:
        self.folder = folder
        self.hits = 0
        self.misses = 0
        self._key = key
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        # The key is the cache's only secret: never in a repr, a log or a traceback's locals.
        mode = "authenticated" if self._key is not None else "plain"
        return f"ResponseCache({str(self.folder)!r}, {mode})"

    @staticmethod
    def key(request: Request, backend: str) -> str:
        return hashlib.sha256(_payload(request, backend)).hexdigest()

    def _name(self, request: Request, backend: str) -> str:
        if self._key is None:
            return self.key(request, backend)
        return hmac.new(self._key, b"name\0" + _payload(request, backend), "sha256").hexdigest()

    def _mac(self, name: str, body: bytes) -> str:
        assert self._key is not None
        return hmac.new(self._key, b"entry\0" + name.encode() + b"\0" + body, "sha256").hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, request: Request, backend: str) -> Reply | None:
        name = self._name(request, backend)
        try:
            reply = self._read(name, self._path(name).read_bytes())
        except (OSError, ValidationError, ValueError):
            reply = None
        with self._lock:
            if reply is None:
                self.misses += 1
            else:
                self.hits += 1
        return reply

    def _read(self, name: str, data: bytes) -> Reply | None:
        if self._key is None:
            return Reply.model_validate_json(data)
        entry = json.loads(data)
        if not isinstance(entry, dict):
            return None
        body, mac = entry.get("reply"), entry.get("mac")
        if not isinstance(body, str) or not isinstance(mac, str):
            return None
        if not hmac.compare_digest(mac, self._mac(name, body.encode())):
            return None  # not written under this job's key: a miss, the model is called
        return Reply.model_validate_json(body)

    def put(self, request: Request, backend: str, reply: Reply) -> None:
        if reply.error is not None:
            return  # never cache a failure
        name = self._name(request, backend)
        body = reply.model_dump_json().encode()
        if self._key is not None:
            mac = self._mac(name, body)
            body = json.dumps({"reply": body.decode(), "mac": mac}).encode()
        path = self._path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(body)
        os.replace(tmp, path)


def _payload(request: Request, backend: str) -> bytes:
    # Every field of the request that can change the reply (model, settings, system,
    # messages, options) is in the key; how the reply is fetched is not.
    options = {k: v for k, v in request.options.items() if k not in TRANSPORT_OPTIONS}
    keyed = request.model_copy(update={"options": options})
    # A plain request's key is what it was before agent cases existed.
    exclude = {"agent"} if request.agent is None else None
    return (backend + "\0" + keyed.model_dump_json(exclude=exclude)).encode()
