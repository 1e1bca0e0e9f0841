"""The response cache: replies keyed by backend and the full request, stored as files.

On by default in CI (a workflow keeps ``.evalgate/cache`` with actions/cache), opt-in locally.
Repeats and noise runs bypass it: a cached reply measures nothing about noise.
"""

from __future__ import annotations

import hashlib
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
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()

    @staticmethod
    def key(request: Request, backend: str) -> str:
        # Every field of the request that can change the reply (model, settings, system,
        # messages, options) is in the key; how the reply is fetched is not.
        options = {k: v for k, v in request.options.items() if k not in TRANSPORT_OPTIONS}
        keyed = request.model_copy(update={"options": options})
        # A plain request's key is what it was before agent cases existed.
        exclude = {"agent"} if request.agent is None else None
        payload = backend + "\0" + keyed.model_dump_json(exclude=exclude)
        return hashlib.sha256(payload.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, request: Request, backend: str) -> Reply | None:
        path = self._path(self.key(request, backend))
        try:
            reply = Reply.model_validate_json(path.read_bytes())
        except (FileNotFoundError, ValidationError, ValueError):
            reply = None
        with self._lock:
            if reply is None:
                self.misses += 1
            else:
                self.hits += 1
        return reply

    def put(self, request: Request, backend: str, reply: Reply) -> None:
        if reply.error is not None:
            return  # never cache a failure
        path = self._path(self.key(request, backend))
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(reply.model_dump_json().encode())
        os.replace(tmp, path)
