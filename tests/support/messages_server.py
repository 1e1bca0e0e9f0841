"""A loopback stand-in of the Anthropic Messages API, for tests and benchmarks.

Tests and benchmarks drive the real ``anthropic`` SDK against it, so the code under test is the
code users run::

    with MessagesServer(rules, Knobs(latency_s=0.01)) as srv:
        with anthropic.Anthropic(api_key="test", base_url=srv.url, max_retries=0) as client:
            client.messages.create(model="m", max_tokens=64, messages=[...])

It answers like the fake model (``evalgate.backends.fake.fake_answer`` with the ``FakeRules`` it
was given) and speaks the API's wire format: the message object and its ``usage``, the SSE event
sequence when ``"stream": true``, the error body ``{"type": "error", "error": {...}}``, the
``request-id``, ``retry-after`` and ``anthropic-ratelimit-*`` headers.

Endpoints: ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``; the Message Batches
API, ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``, ``GET .../{id}/results``
(JSONL) and ``POST .../{id}/cancel``; anything else answers 404 ``not_found_error``.
``anthropic-version`` and ``anthropic-beta`` are accepted and ignored.

Batches: creation validates every request's params (400 for the whole batch, as the API does);
processing ends ``knobs.batch_latency_s`` after creation (checked when the batch is read), and
each request is then answered as ``/v1/messages`` would answer it (same seeded flips, same
prompt cache, no faults or rate limits), except ``knobs.batch_errored_ids`` (``errored``) and
``knobs.batch_expired_ids`` (``expired``). ``request_counts`` stay at ``processing`` until the
end, as on the API. Results come in a seeded order unrelated to the requests'
(``knobs.batch_shuffle``). ``stats().batches`` counts creations.

What a request goes through, in order:

1. routing and JSON parsing (404 / 400 ``invalid_request_error``);
2. the key, when ``knobs.api_key`` is set: ``x-api-key: KEY`` or ``Authorization: Bearer KEY``
   (the 2.x SDK sends the latter for ``api_key=``), else 401 ``authentication_error``;
3. a fault (``/v1/messages`` only): the next entry of the script (``server.script([...])``), or
   else a seeded draw against the fault rates in ``Knobs``;
4. validation (400) and unknown models (``knobs.unknown_models``: 404 ``not_found_error``
   "model: NAME", as the real API answers; ``knobs.unknown_model_status = 400`` for a 400);
5. the rate-limit buckets, when configured (429 ``rate_limit_error`` with ``retry-after``);
6. the answer, after ``latency_s`` (spread over the events when streaming).

Determinism: every random decision is a hash of (``knobs.seed``, a digest of the request's
content, an occurrence number), never of arrival order, so concurrent clients get the same
decisions whatever the thread scheduling. The content is the JSON body without ``stream`` and
``metadata``.

* faults: the occurrence number counts earlier *arrivals* with the same content, so a retry of a
  request that drew a fault draws again, independently;
* flips: the occurrence number counts earlier *answers* to the same content, so faults and
  retries do not shift the answers, and repeated identical requests flip independently.

The same seed and the same sequence of requests therefore give the same answers and faults;
``reset()`` forgets the counts.

Prompt caching: the cached prefix is the system text up to the last system block that carries
``cache_control`` (or the whole system text when the body has a top-level ``cache_control``);
``cache_control`` on message blocks is ignored. The first request with a prefix (per model)
reports ``cache_creation_input_tokens``, later ones within the TTL ``cache_read_input_tokens``,
and ``input_tokens`` counts the rest, as the real API does. A prefix becomes readable once the
response that wrote it is due (after ``latency_s``), so concurrent first requests all write, as
on the real API. Tokens are the fake backend's estimate (``rough_tokens``: about four characters
a token), so the numbers match ``FakeBackend``'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import selectors
import socket
import ssl
import sys
import threading
import time
import traceback
import uuid
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from types import TracebackType
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalgate.backends.base import Message, Request
from evalgate.backends.fake import (
    AgentRule,
    FakeRules,
    agent_rule,
    agent_turn,
    conversation_text,
    fake_answer,
    plan_matches,
    rough_tokens,
)
from evalgate.trajectory import TOOL_NAME_PATTERN, AgentSpec, ToolCall, ToolSpec

__all__ = ["FAULTS", "STAND_IN_MODEL", "Exchange", "Fault", "Knobs", "MessagesServer", "Stats"]

Fault = Literal[
    "ok",
    "rate_limit",
    "overloaded",
    "server_error",
    "slow",
    "drop",
    "malformed",
    "bad_request",
    "auth",
    "stream_error",
]
FAULTS: tuple[str, ...] = get_args(Fault)

# Short names accepted by ``script``.
_ALIASES = {
    "200": "ok",
    "429": "rate_limit",
    "529": "overloaded",
    "500": "server_error",
    "400": "bad_request",
    "401": "auth",
}
# The fault rates, stacked in this order on one uniform draw.
_RATED = (
    "rate_limit",
    "overloaded",
    "server_error",
    "slow",
    "drop",
    "malformed",
    "bad_request",
    "stream_error",
)
_MESSAGES = "/v1/messages"
_COUNT = "/v1/messages/count_tokens"
_BATCHES = "/v1/messages/batches"
_USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)
_JSONL = "application/binary"
_HTML = (
    b"<html><head><title>502 Bad Gateway</title></head>"
    b"<body><center><h1>502 Bad Gateway</h1></center></body></html>\n"
)


class Knobs(BaseModel):
    """The server's behaviour. Change fields while it runs (``server.knobs.latency_s = 0.2``):
    each request reads a snapshot when it arrives. Assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # --- answers
    latency_s: float = Field(0.0, ge=0)
    """Delay before answering; when streaming, spread over the events."""
    latency_jitter_s: float = Field(0.0, ge=0)
    """Extra seeded uniform delay in [0, latency_jitter_s)."""
    seed: int = 0
    flip_rate: float = Field(0.0, ge=0, le=1)
    """Probability that the answer is replaced by the fake's answer for a different label."""
    stream_chunks: int = Field(3, ge=1)
    """Number of ``text_delta`` events a streamed answer is split into (at most)."""
    ping: bool = True
    """Send a ``ping`` event after ``content_block_start``, as the real API does."""

    # --- faults, as rates in [0, 1] (their sum should be at most 1)
    rate_limit: float = Field(0.0, ge=0, le=1)
    """429 ``rate_limit_error`` with ``retry-after: retry_after_s``."""
    overloaded: float = Field(0.0, ge=0, le=1)
    """529 ``overloaded_error``."""
    server_error: float = Field(0.0, ge=0, le=1)
    """500 ``api_error``."""
    slow: float = Field(0.0, ge=0, le=1)
    """Wait ``slow_s`` before answering normally (the client should time out first)."""
    drop: float = Field(0.0, ge=0, le=1)
    """Close the connection without a response."""
    malformed: float = Field(0.0, ge=0, le=1)
    """200 with a broken body (see ``malformed_kind``)."""
    bad_request: float = Field(0.0, ge=0, le=1)
    """400 ``invalid_request_error``."""
    stream_error: float = Field(0.0, ge=0, le=1)
    """Streaming: 200, then an ``error`` event (``overloaded_error``) after the first delta, as
    the real API does when it is overloaded mid-stream. Not streaming: a 529."""

    # --- fault details
    retry_after_s: float | None = Field(1.0, ge=0)
    """``retry-after`` of the ``rate_limit`` fault (None: no header). Integral values are sent
    as integers, others as decimals (which the SDK honours)."""
    retry_after_ms_header: bool = False
    """Also send ``retry-after-ms`` on 429s (the SDK prefers it; the real API does not send it)."""
    should_retry_header: bool = False
    """Send ``x-should-retry: true|false`` on errors (true for 408, 409, 429 and 5xx)."""
    slow_s: float = Field(5.0, ge=0)
    malformed_kind: Literal["truncated", "html"] = "truncated"
    """``truncated``: JSON cut in the middle (or a stream whose first event is cut);
    ``html``: a proxy's HTML page with ``content-type: text/html``."""
    unknown_models: list[str] = Field(default_factory=list)
    unknown_model_status: Literal[400, 404] = 404
    api_key: str | None = None
    """When set, requests must carry it (``x-api-key`` or ``Authorization: Bearer``)."""
    echo_credentials: bool = False
    """Error messages quote the request's ``x-api-key`` and ``authorization`` headers, as a
    misconfigured proxy or gateway in front of the API may do (the real API never does)."""
    echo_text: str = ""
    """Appended to every error message: what an upstream echoes in some other form (the key
    base64-encoded, reversed, split across lines, ...)."""

    # --- rate limits: token buckets of capacity N refilled continuously at N a minute; their
    # anthropic-ratelimit-* headers go on answers and bucket 429s (None: unlimited, no headers)
    requests_per_minute: float | None = Field(None, gt=0)
    input_tokens_per_minute: float | None = Field(None, gt=0)
    """Charged with uncached input plus cache writes (cache reads are free, as on the API)."""
    output_tokens_per_minute: float | None = Field(None, gt=0)
    """Refuses while exhausted; charged with the output tokens of each answer."""
    rate_limit_window_s: float = Field(60.0, gt=0, le=60)
    """Each bucket holds this many seconds' worth of its limit (60: a minute's worth, the API's
    documented bucket; less: a per-minute limit enforced over shorter intervals, as the API may
    do, "60 RPM as 1 request per second"). Headers still report the per-minute limit."""

    # --- message batches
    batch_latency_s: float = Field(0.0, ge=0)
    """Seconds from a batch's creation until its processing ends (read at creation)."""
    batch_errored_ids: list[str] = Field(default_factory=list)
    """custom_ids whose result is ``errored`` (an ``invalid_request_error``)."""
    batch_expired_ids: list[str] = Field(default_factory=list)
    """custom_ids whose result is ``expired``."""
    batch_shuffle: bool = True
    """Return results in a seeded order unrelated to the requests' (the API promises no
    order); False: in request order."""

    # --- prompt caching
    cache_min_tokens: int = Field(0, ge=0)
    """Prefixes shorter than this are not cached (the real API: 1024 to 4096 by model)."""
    cache_ttl_s: float = Field(300.0, gt=0)
    """TTL of ``{"type": "ephemeral"}``; ``"ttl": "1h"`` uses 3600 s."""


@dataclass
class Exchange:
    """One request the server received, and what it did with it."""

    index: int
    t: float
    """``time.monotonic()`` on arrival."""
    method: str
    path: str
    headers: dict[str, str]
    """Request headers, names in lower case."""
    body: Any = None
    """The parsed JSON body (None when it was not JSON)."""
    stream: bool = False
    fault: str | None = None
    """The injected fault (scripted or drawn), or None."""
    outcome: str = "pending"
    """What happened: ``ok``, a fault's name (``slow``: answered late, maybe to nobody),
    ``bucket`` (rate-limit bucket 429), ``auth``, ``unknown_model``, ``invalid_request``,
    ``not_found``, ``client_gone`` (writing failed: the client had hung up), ``shutdown``,
    ``internal_error``."""
    status: int | None = None
    """The status answered (its sending may have failed: see ``outcome``), or None when no
    response was started (``drop``, ``shutdown``)."""
    text: str | None = None
    """The answer's text."""
    flipped: bool = False
    usage: dict[str, int] | None = None
    t_done: float | None = None
    """When it was counted: just before the last byte of the answer was written."""
    _counted: bool = field(default=False, repr=False, compare=False)


@dataclass(frozen=True)
class Stats:
    requests: int
    """Requests received, all paths."""
    by_status: dict[int, int]
    by_outcome: dict[str, int]
    by_path: dict[str, int]
    connections: int
    """TCP connections accepted (few, when the client's pool keeps them alive)."""
    in_flight: int
    max_in_flight: int
    flips: int
    cache_writes: int
    cache_reads: int
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int
    cache_read_input_tokens: int
    internal_errors: int
    batches: int = 0
    """Message batches created."""
    resets: int = 0
    """Connections the client reset or broke off mid-exchange (not the stand-in's faults)."""


@dataclass
class _Bucket:
    limit: float
    """Per minute: the refill rate, and what the headers report."""
    capacity: float
    level: float
    t: float

    def refill(self, now: float) -> None:
        # A thread that read the clock before waiting for the lock may come late: time never
        # runs backwards for the bucket (that would take tokens away).
        if now > self.t:
            self.level = min(self.capacity, self.level + (now - self.t) * self.limit / 60.0)
            self.t = now

    def wait(self, need: float) -> float:
        """Seconds until ``need`` units are available (0: now). Call ``refill`` first."""
        need = min(need, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) * 60.0 / self.limit

    def remaining(self) -> int:
        return max(0, math.floor(self.level))

    def full_in(self) -> float:
        return max(0.0, (self.capacity - self.level) * 60.0 / self.limit)


@dataclass
class _CacheEntry:
    ready_at: float
    expires_at: float


@dataclass
class _Batch:
    id: str
    requests: list[tuple[str, dict[str, Any]]]
    created_at: datetime
    due: float
    """``time.monotonic()`` when processing ends (sooner when canceled)."""
    cancel_initiated_at: datetime | None = None
    ended_at: datetime | None = None
    results: list[dict[str, Any]] | None = None


@dataclass
class _Parsed:
    request: Request
    cache_prefix: str | None
    ttl_1h: bool
    # Tool use: (name, input, result) of every call answered so far, and the text the tool
    # definitions and tool blocks add to the input (counted as input tokens).
    history: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    tool_text: str = ""
    use_ids: list[str] = field(default_factory=list)

    @property
    def input_tokens(self) -> int:
        req = self.request
        return rough_tokens(req.system + "".join(m.content for m in req.messages) + self.tool_text)


class _Invalid(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    # Idle keep-alive connections are closed after this many seconds.
    timeout = 300
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.app._register(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.app._unregister(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.server.app._handle(self)

    def do_GET(self) -> None:
        self.server.app._handle(self)

    def do_PUT(self) -> None:
        self.server.app._handle(self)

    def do_DELETE(self) -> None:
        self.server.app._handle(self)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True
    # handle_request() selects again before accepting: never block there for long (a client
    # may reset its connection between the two selects).
    timeout = 0.5

    def __init__(self, address: tuple[str, int], app: MessagesServer) -> None:
        self.app = app
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn, a DNS lookup that can take seconds.
        TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exception(), ConnectionResetError | BrokenPipeError):
            # The client went away mid-exchange (its timeout closed the connection with the
            # answer unread, say): what a server meets, not a fault of the stand-in's.
            self.app._note_reset()
            return
        self.app._note_error(traceback.format_exc())


#: A suite's model settings for this server: the anthropic backend with retries a test can wait
#: for (10 ms, at most 50 ms); the base URL and key are the run's environment.
STAND_IN_MODEL = {
    "backend": "anthropic",
    "name": "claude-haiku-4-5",
    "max_tokens": 64,
    "temperature": 0,
    "options": {"retry": {"base_s": 0.01, "cap_s": 0.05}},
}


class MessagesServer:
    """The stand-in, serving on ``127.0.0.1`` (a free port) from a daemon thread until
    ``close()``. Use it as a context manager."""

    def __init__(
        self,
        rules: FakeRules,
        knobs: Knobs | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_limit: int | None = 100_000,
        tls: ssl.SSLContext | None = None,
        **overrides: Any,
    ) -> None:
        """``overrides`` are Knobs fields applied over ``knobs``. ``log_limit`` bounds how many
        exchanges ``requests`` keeps (the counters in ``stats()`` count them all). ``tls``: a
        server context to serve HTTPS with (each connection's handshake in its own thread)."""
        self.rules = rules
        base = knobs if knobs is not None else Knobs()
        self._knobs = (
            Knobs.model_validate({**base.model_dump(), **overrides}) if overrides else base
        )
        self._lock = threading.Lock()
        # Held while a batch is processed (which takes _lock): never taken under _lock.
        self._batch_lock = threading.Lock()
        self._closing = threading.Event()
        self._closed = False
        self._script: deque[str] = deque()
        self._log: deque[Exchange] = deque(maxlen=log_limit)
        self._errors: list[str] = []
        self._in_flight = 0
        self._reset_state()
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._httpd = _HTTPServer((host, port), self)
        self._scheme = "http"
        if tls is not None:
            self._httpd.socket = tls.wrap_socket(
                self._httpd.socket, server_side=True, do_handshake_on_connect=False
            )
            self._scheme = "https"
        # serve() waits on the listening socket and this pair, so close() wakes it at once and
        # an idle server costs no CPU (serve_forever polls).
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(
            target=self._serve,
            name=f"messages-server-{self.port}",
            daemon=True,
        )
        self._thread.start()

    # ------------------------------------------------------------------ public API

    @property
    def url(self) -> str:
        return f"{self._scheme}://{self.host}:{self.port}"

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def knobs(self) -> Knobs:
        return self._knobs

    @knobs.setter
    def knobs(self, value: Knobs) -> None:
        self._knobs = value

    def script(self, faults: Iterable[str]) -> None:
        """Queue faults for the next ``/v1/messages`` requests, one each, in order (appended to
        what is already queued). Names: ``FAULTS`` or ``200 429 529 500 400 401``; ``ok`` means
        no injected fault. Scripted entries replace the rate draws while the queue lasts."""
        names = [_ALIASES.get(str(f), str(f)) for f in faults]
        unknown = [n for n in names if n not in FAULTS]
        if unknown:
            raise ValueError(f"unknown faults {unknown}; use {list(FAULTS)} or {list(_ALIASES)}")
        with self._lock:
            self._script.extend(names)

    @property
    def scripted(self) -> list[str]:
        """The faults still queued."""
        with self._lock:
            return list(self._script)

    @property
    def requests(self) -> list[Exchange]:
        """The exchanges so far (the last ``log_limit``), oldest first."""
        with self._lock:
            return list(self._log)

    @property
    def errors(self) -> list[str]:
        """Tracebacks of the stand-in's own bugs (each also answered 500); tests assert it is
        empty."""
        with self._lock:
            return list(self._errors)

    def stats(self) -> Stats:
        with self._lock:
            return Stats(
                requests=self._n,
                by_status=dict(self._by_status),
                by_outcome=dict(self._by_outcome),
                by_path=dict(self._by_path),
                connections=self._connections,
                in_flight=self._in_flight,
                max_in_flight=self._max_in_flight,
                flips=self._flips,
                cache_writes=self._cache_writes,
                cache_reads=self._cache_reads,
                input_tokens=self._tokens["input"],
                output_tokens=self._tokens["output"],
                cache_creation_input_tokens=self._tokens["cache_creation"],
                cache_read_input_tokens=self._tokens["cache_read"],
                internal_errors=len(self._errors),
                batches=len(self._batches),
                resets=self._resets,
            )

    def end_batches(self) -> None:
        """End the processing of every batch now, as if its ``batch_latency_s`` had passed (it
        is processed when next read)."""
        with self._lock:
            batches = list(self._batches.values())
        with self._batch_lock:
            for batch in batches:
                batch.due = min(batch.due, time.monotonic())

    def reset(self) -> None:
        """Forget the log, counters, script, occurrence counts, prompt cache, buckets and
        batches."""
        with self._lock:
            self._script.clear()
            self._log.clear()
            self._errors.clear()
            self._reset_state()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._closing.set()
        self._wake_w.send(b"x")
        self._thread.join()
        self._httpd.server_close()
        self._wake_r.close()
        self._wake_w.close()
        with self._lock:
            conns = list(self._conns.items())
        for sock, _ in conns:
            _shutdown(sock)
        for _, thread in conns:
            thread.join(timeout=2.0)

    def __enter__(self) -> MessagesServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ state

    def _reset_state(self) -> None:
        self._n = 0
        self._by_status: Counter[int] = Counter()
        self._by_outcome: Counter[str] = Counter()
        self._by_path: Counter[str] = Counter()
        self._tokens: Counter[str] = Counter()
        self._connections = 0
        self._resets = 0
        self._max_in_flight = self._in_flight
        self._flips = 0
        self._cache_writes = 0
        self._cache_reads = 0
        self._arrivals: dict[bytes, int] = {}
        self._answers: dict[bytes, int] = {}
        self._cache: dict[tuple[str, str], _CacheEntry] = {}
        self._alternatives: dict[str, list[str]] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._batches: dict[str, _Batch] = {}
        # tool_use id -> the agent rule (by name; "" for none) whose plan issued it
        self._plans: dict[str, str] = {}

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._httpd, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._closing.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self._httpd and not self._closing.is_set():
                        self._httpd.handle_request()  # accepts; a thread serves the connection

    def _register(self, sock: socket.socket) -> None:
        with self._lock:
            self._conns[sock] = threading.current_thread()
            self._connections += 1
        if self._closing.is_set():
            _shutdown(sock)

    def _unregister(self, sock: socket.socket) -> None:
        with self._lock:
            self._conns.pop(sock, None)

    def _note_error(self, text: str) -> None:
        with self._lock:
            self._errors.append(text)

    def _note_reset(self) -> None:
        with self._lock:
            self._resets += 1

    # ------------------------------------------------------------------ handling

    def _handle(self, h: _Handler) -> None:
        arrived = time.monotonic()
        path = h.path.split("?", 1)[0]
        try:
            length = int(h.headers.get("content-length") or 0)
        except ValueError:
            length = 0
        raw = h.rfile.read(length) if length > 0 else b""
        headers = {name.lower(): value for name, value in h.headers.items()}
        with self._lock:
            ex = Exchange(self._n, arrived, h.command, path, headers)
            self._n += 1
            self._log.append(ex)
            self._by_path[path] += 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            self._dispatch(h, ex, raw, self._knobs.model_copy())
        except OSError:
            h.close_connection = True
            self._recount(ex, "client_gone")
        except Exception:
            self._note_error(traceback.format_exc())
            h.close_connection = True
            if ex.status is None:
                with contextlib.suppress(OSError):
                    self._error(h, ex, Knobs(), 500, "api_error", "stand-in bug", "internal_error")
            self._recount(ex, "internal_error")
        finally:
            self._finish(ex)

    def _finish(self, ex: Exchange) -> None:
        """Count the exchange, once: just before the last byte of its answer is written (so a
        client holding its answer finds it counted), or when its handler ends."""
        with self._lock:
            if ex._counted:
                return
            ex._counted = True
            ex.t_done = time.monotonic()
            self._in_flight -= 1
            self._by_outcome[ex.outcome] += 1
            if ex.status is not None:
                self._by_status[ex.status] += 1

    def _recount(self, ex: Exchange, outcome: str) -> None:
        with self._lock:
            if ex._counted and self._by_outcome[ex.outcome] > 0:  # (0: counted before reset())
                self._by_outcome[ex.outcome] -= 1
                if not self._by_outcome[ex.outcome]:
                    del self._by_outcome[ex.outcome]
                self._by_outcome[outcome] += 1
            ex.outcome = outcome

    def _dispatch(self, h: _Handler, ex: Exchange, raw: bytes, k: Knobs) -> None:
        if ex.path == _BATCHES or ex.path.startswith(_BATCHES + "/"):
            self._batch_route(h, ex, raw, k)
            return
        if ex.method != "POST" or ex.path not in (_MESSAGES, _COUNT):
            self._error(h, ex, k, 404, "not_found_error", "Not Found", "not_found")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            msg = "There was an issue with the format of your request: invalid JSON body"
            self._error(h, ex, k, 400, "invalid_request_error", msg, "invalid_request")
            return
        ex.body = body
        ex.stream = body.get("stream") is True
        if k.api_key is not None and not _authorized(ex.headers, k.api_key):
            self._error(h, ex, k, 401, "authentication_error", "invalid x-api-key", "auth")
            return

        digest = _digest(body)
        fault = "ok"
        if ex.path == _MESSAGES:
            with self._lock:
                scripted = self._script.popleft() if self._script else None
                n = self._arrivals.get(digest, 0)
                self._arrivals[digest] = n + 1
            fault = scripted if scripted is not None else _draw_fault(k, digest, n)
        if fault != "ok":
            ex.fault = fault
            if fault == "slow":
                if self._closing.wait(k.slow_s):
                    ex.outcome = "shutdown"
                    h.close_connection = True
                    return
            elif fault != "stream_error" or not ex.stream:
                self._fault(h, ex, k, fault)
                return

        try:
            parsed = _parse(body, counting=ex.path == _COUNT)
        except _Invalid as exc:
            self._error(h, ex, k, 400, "invalid_request_error", str(exc), "invalid_request")
            return
        req = parsed.request
        if req.model in k.unknown_models:
            status = k.unknown_model_status
            etype = "not_found_error" if status == 404 else "invalid_request_error"
            self._error(h, ex, k, status, etype, f"model: {req.model}", "unknown_model")
            return
        total = parsed.input_tokens
        if ex.path == _COUNT:
            self._json(h, ex, 200, {"input_tokens": total}, [], "ok")
            return
        self._answer(h, ex, k, parsed, total, digest)
        if ex.fault == "slow" and ex.outcome == "ok":
            self._recount(ex, "slow")

    # ------------------------------------------------------------------ message batches

    def _batch_route(self, h: _Handler, ex: Exchange, raw: bytes, k: Knobs) -> None:
        """``POST /v1/messages/batches``, ``GET .../{id}``, ``GET .../{id}/results`` and
        ``POST .../{id}/cancel``. Faults and rate limits do not apply."""
        if k.api_key is not None and not _authorized(ex.headers, k.api_key):
            self._error(h, ex, k, 401, "authentication_error", "invalid x-api-key", "auth")
            return
        parts = ex.path[len(_BATCHES) :].strip("/").split("/")
        if ex.method == "POST" and parts == [""]:
            self._batch_create(h, ex, raw, k)
            return
        with self._lock:
            batch = self._batches.get(parts[0])
        if batch is None or len(parts) > 2:
            msg = f"message batch {parts[0]!r} not found" if batch is None else "Not Found"
            self._error(h, ex, k, 404, "not_found_error", msg, "not_found")
            return
        if ex.method == "GET" and len(parts) == 1:
            self._json(h, ex, 200, self._batch_object(h, batch, k), [], "ok")
        elif ex.method == "GET" and parts[1] == "results":
            self._batch_object(h, batch, k)  # processes it when due
            if batch.results is None:
                msg = f"message batch {batch.id} is still processing"
                self._error(h, ex, k, 400, "invalid_request_error", msg, "invalid_request")
                return
            lines = b"".join(json.dumps(r).encode() + b"\n" for r in batch.results)
            self._send(h, ex, 200, lines, [("request-id", _request_id())], "ok", _JSONL)
        elif ex.method == "POST" and parts[1] == "cancel":
            with self._batch_lock:
                if batch.results is None and batch.cancel_initiated_at is None:
                    batch.cancel_initiated_at = datetime.now(UTC)
                    batch.due = time.monotonic()
                data = self._batch_fields(h, batch)
            self._json(h, ex, 200, data, [], "ok")
        else:
            self._error(h, ex, k, 404, "not_found_error", "Not Found", "not_found")

    def _batch_create(self, h: _Handler, ex: Exchange, raw: bytes, k: Knobs) -> None:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        ex.body = body
        try:
            requests = _batch_requests(body)
        except _Invalid as exc:
            self._error(h, ex, k, 400, "invalid_request_error", str(exc), "invalid_request")
            return
        now = datetime.now(UTC)
        batch = _Batch(
            id=f"msgbatch_{uuid.uuid4().hex[:24]}",
            requests=requests,
            created_at=now,
            due=time.monotonic() + k.batch_latency_s,
        )
        with self._lock:
            self._batches[batch.id] = batch
        with self._batch_lock:
            data = self._batch_fields(h, batch)
        self._json(h, ex, 200, data, [], "ok")

    def _batch_object(self, h: _Handler, batch: _Batch, k: Knobs) -> dict[str, Any]:
        """The batch as the API shows it, processing it first when it is due."""
        with self._batch_lock:
            if batch.results is None and time.monotonic() >= batch.due:
                canceled = batch.cancel_initiated_at is not None
                results = [
                    self._batch_result(k, cid, params, canceled) for cid, params in batch.requests
                ]
                if k.batch_shuffle:
                    results.sort(key=lambda r: _draws(k.seed, "order", r["custom_id"].encode(), 0))
                batch.results = results
                batch.ended_at = datetime.now(UTC)
            return self._batch_fields(h, batch)

    def _batch_fields(self, h: _Handler, batch: _Batch) -> dict[str, Any]:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        if batch.results is None:
            counts["processing"] = len(batch.requests)
            status = "in_progress" if batch.cancel_initiated_at is None else "canceling"
        else:
            for result in batch.results:
                counts[result["result"]["type"]] += 1
            status = "ended"
        host = h.headers.get("host") or f"{self.host}:{self.port}"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "created_at": _rfc3339(batch.created_at),
            "expires_at": _rfc3339(batch.created_at + timedelta(hours=24)),
            "ended_at": _rfc3339(batch.ended_at) if batch.ended_at else None,
            "cancel_initiated_at": (
                _rfc3339(batch.cancel_initiated_at) if batch.cancel_initiated_at else None
            ),
            "archived_at": None,
            "results_url": (
                f"http://{host}{_BATCHES}/{batch.id}/results" if batch.results is not None else None
            ),
        }

    def _batch_result(
        self, k: Knobs, custom_id: str, params: dict[str, Any], canceled: bool
    ) -> dict[str, Any]:
        """One line of the results: an answer as ``/v1/messages`` would give (same seeded
        flips, same prompt cache), or an injected errored / expired result."""

        def errored(etype: str, message: str) -> dict[str, Any]:
            error = {"type": etype, "message": message}
            return {"type": "errored", "error": {"type": "error", "error": error}}

        if canceled:
            result: dict[str, Any] = {"type": "canceled"}
        elif custom_id in k.batch_expired_ids:
            result = {"type": "expired"}
        elif custom_id in k.batch_errored_ids:
            result = errored("invalid_request_error", "messages: injected invalid_request_error")
        else:
            parsed = _parse(params)  # validated when the batch was created
            req = parsed.request
            if req.model in k.unknown_models:
                result = errored("not_found_error", f"model: {req.model}")
            else:
                total = parsed.input_tokens
                digest = _digest(params)
                now = time.monotonic()
                with self._lock:
                    written, read, key = self._cache_peek(k, parsed, total, now)
                    self._cache_commit(k, parsed, key, read, now, 0.0)
                    occurrence = self._answers.get(digest, 0)
                    self._answers[digest] = occurrence + 1
                tokens = (total - written - read, written, read)
                message, _ = self._compose(k, parsed, tokens, digest, occurrence)
                result = {"type": "succeeded", "message": message}
        return {"custom_id": custom_id, "result": result}

    def _fault(self, h: _Handler, ex: Exchange, k: Knobs, fault: str) -> None:
        if fault == "drop":
            ex.outcome = "drop"
            h.close_connection = True
        elif fault == "rate_limit":
            extra: list[tuple[str, str]] = []
            if k.retry_after_s is not None:
                extra.append(("retry-after", _seconds(k.retry_after_s)))
                if k.retry_after_ms_header:
                    extra.append(("retry-after-ms", str(math.ceil(k.retry_after_s * 1000))))
            msg = (
                "This request would exceed your organization's rate limit. Please try again later."
            )
            self._error(h, ex, k, 429, "rate_limit_error", msg, "rate_limit", extra)
        elif fault in ("overloaded", "stream_error"):
            self._error(h, ex, k, 529, "overloaded_error", "Overloaded", fault)
        elif fault == "server_error":
            self._error(h, ex, k, 500, "api_error", "Internal server error", "server_error")
        elif fault == "bad_request":
            msg = "messages: injected invalid_request_error"
            self._error(h, ex, k, 400, "invalid_request_error", msg, "bad_request")
        elif fault == "auth":
            self._error(h, ex, k, 401, "authentication_error", "invalid x-api-key", "auth")
        elif fault == "malformed":
            self._malformed(h, ex, k)
        else:  # pragma: no cover - FAULTS and this list are kept in step
            raise AssertionError(fault)

    def _malformed(self, h: _Handler, ex: Exchange, k: Knobs) -> None:
        rid = _request_id()
        if k.malformed_kind == "html":
            self._send(h, ex, 200, _HTML, [("request-id", rid)], "malformed", "text/html")
        elif ex.stream:
            event = (
                b'event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_\n\n'
            )
            head = self._stream_head(ex, rid, [])
            ex.outcome = "malformed"
            self._finish(ex)
            h.wfile.write(head + _chunk(event) + b"0\r\n\r\n")
        else:
            body = (
                b'{"id": "msg_01", "type": "message", "role": "assistant", "content": [{"type": "te'
            )
            self._send(h, ex, 200, body, [("request-id", rid)], "malformed")

    def _answer(
        self, h: _Handler, ex: Exchange, k: Knobs, parsed: _Parsed, total: int, digest: bytes
    ) -> None:
        delay = k.latency_s
        now = time.monotonic()
        with self._lock:
            # prompt cache: look up without committing
            written, read, cache_key = self._cache_peek(k, parsed, total, now)
            uncached = total - written - read
            # rate limits
            self._sync_buckets(k, now)
            waits = [0.0]
            limited: list[str] = []
            for name, need in (("requests", 1.0), ("input-tokens", uncached + written)):
                bucket = self._buckets.get(name)
                if bucket is not None and (w := bucket.wait(need)) > 0:
                    waits.append(w)
                    limited.append(name)
            out_bucket = self._buckets.get("output-tokens")
            if out_bucket is not None and (w := out_bucket.wait(1.0)) > 0:
                waits.append(w)
                limited.append("output-tokens")
            if not limited:
                if "requests" in self._buckets:
                    self._buckets["requests"].level -= 1
                if "input-tokens" in self._buckets:
                    self._buckets["input-tokens"].level -= uncached + written
                self._cache_commit(k, parsed, cache_key, read, now, delay)
                occurrence = self._answers.get(digest, 0)
                self._answers[digest] = occurrence + 1
            rate_headers = self._ratelimit_headers(now)

        if limited:
            wait = max(waits)
            extra = [("retry-after", str(max(1, math.ceil(wait))))]
            if k.retry_after_ms_header:
                extra.append(("retry-after-ms", str(math.ceil(wait * 1000))))
            msg = (
                "This request would exceed the rate limit for your organization of "
                + ", ".join(f"{self._buckets_limit(name)} {name} per minute" for name in limited)
                + ". Please reduce the prompt length or the maximum tokens requested, "
                "or try again later."
            )
            self._error(h, ex, k, 429, "rate_limit_error", msg, "bucket", extra + rate_headers)
            return

        delay += k.latency_jitter_s * _draws(k.seed, "flip", digest, occurrence)[2]
        message, flipped = self._compose(k, parsed, (uncached, written, read), digest, occurrence)
        usage = message["usage"]
        ex.flipped = flipped
        ex.text = "".join(
            b["text"] if b["type"] == "text" else f"{b['name']}({json.dumps(b['input'])})"
            for b in message["content"]
        )
        ex.usage = {key: usage[key] for key in _USAGE_KEYS}
        with self._lock:
            if out_bucket is not None and "output-tokens" in self._buckets:
                bucket = self._buckets["output-tokens"]
                bucket.level = max(0.0, bucket.level - usage["output_tokens"])
        if ex.stream:
            self._stream(h, ex, k, message, delay, rate_headers)
            return
        if delay > 0 and self._closing.wait(delay):
            ex.outcome = "shutdown"
            h.close_connection = True
            return
        self._json(h, ex, 200, message, rate_headers, "ok")

    def _cache_peek(
        self, k: Knobs, parsed: _Parsed, total: int, now: float
    ) -> tuple[int, int, tuple[str, str] | None]:
        """(written, read, key) of the prompt cache for this request, without committing.
        Call with the lock held."""
        if not parsed.cache_prefix:
            return 0, 0, None
        cached = min(rough_tokens(parsed.cache_prefix), total)
        if cached < k.cache_min_tokens:
            return 0, 0, None
        key = (parsed.request.model, parsed.cache_prefix)
        entry = self._cache.get(key)
        if entry is not None and entry.ready_at <= now < entry.expires_at:
            return 0, cached, key
        return cached, 0, key

    def _cache_commit(
        self,
        k: Knobs,
        parsed: _Parsed,
        key: tuple[str, str] | None,
        read: int,
        now: float,
        delay: float,
    ) -> None:
        """Record a read (extending the TTL) or a write, readable after ``delay``. Lock held."""
        if key is None:
            return
        ttl = 3600.0 if parsed.ttl_1h else k.cache_ttl_s
        entry = self._cache.get(key)
        if read:
            assert entry is not None
            entry.expires_at = now + ttl
            self._cache_reads += 1
        else:
            if entry is None or entry.expires_at <= now:
                self._cache[key] = _CacheEntry(now + delay, now + delay + ttl)
            self._cache_writes += 1

    def _compose(
        self,
        k: Knobs,
        parsed: _Parsed,
        tokens: tuple[int, int, int],
        digest: bytes,
        occurrence: int,
    ) -> tuple[dict[str, Any], bool]:
        """The message answering ``parsed`` (the fake's answer, maybe flipped, cut at
        max_tokens) and whether it was flipped; counts its tokens. ``tokens`` is (uncached
        input, cache write, cache read)."""
        req = parsed.request
        uncached, written, read = tokens
        u, v, _ = _draws(k.seed, "flip", digest, occurrence)
        content: list[dict[str, Any]]
        if req.agent is not None:
            move, flipped, plan = self._agent_move(parsed, k.flip_rate > 0 and u < k.flip_rate, v)
            if isinstance(move, ToolCall):
                use_id = f"toolu_{uuid.uuid4().hex[:24]}"
                with self._lock:
                    self._plans[use_id] = plan
                content = [
                    {"type": "tool_use", "id": use_id, "name": move.name, "input": move.input}
                ]
                text = json.dumps(move.input)
                stop_reason = "tool_use"
            else:
                text, stop_reason = move, "end_turn"
        else:
            text = fake_answer(req, self.rules)
            flipped = False
            stop_reason = "end_turn"
            if k.flip_rate > 0 and u < k.flip_rate:
                alternatives = self._alternatives_for(req, text)
                if alternatives:
                    text = alternatives[int(v * len(alternatives))]
                    flipped = True
        output = rough_tokens(text)
        if stop_reason == "end_turn":
            if output > req.max_tokens:
                text = text[: req.max_tokens * 4]
                output = req.max_tokens
                stop_reason = "max_tokens"
            content = [{"type": "text", "text": text}]
        with self._lock:
            self._flips += flipped
            self._tokens["input"] += uncached
            self._tokens["output"] += output
            self._tokens["cache_creation"] += written
            self._tokens["cache_read"] += read
        usage: dict[str, Any] = {
            "input_tokens": uncached,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "output_tokens": output,
            "cache_creation": {
                "ephemeral_5m_input_tokens": 0 if parsed.ttl_1h else written,
                "ephemeral_1h_input_tokens": written if parsed.ttl_1h else 0,
            },
            "service_tier": "standard",
        }
        message: dict[str, Any] = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": req.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        return message, flipped

    def _stream(
        self,
        h: _Handler,
        ex: Exchange,
        k: Knobs,
        message: dict[str, Any],
        delay: float,
        headers: list[tuple[str, str]],
    ) -> None:
        usage: dict[str, Any] = message["usage"]
        start_usage = {**usage, "output_tokens": 1}
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": start_usage,
        }
        groups: list[list[tuple[str, dict[str, Any]]]] = [
            [("message_start", {"type": "message_start", "message": start})]
        ]
        # Each content block as the API streams it: a start with an empty block, deltas
        # (text_delta pieces, or input_json_delta pieces of the tool input's JSON), a stop.
        for index, block in enumerate(message["content"]):
            if block["type"] == "text":
                empty: dict[str, Any] = {"type": "text", "text": ""}
                pieces = [
                    {"type": "text_delta", "text": p}
                    for p in _split(block["text"], k.stream_chunks)
                ]
            else:
                empty = {**block, "input": {}}
                raw = json.dumps(block["input"])
                pieces = [
                    {"type": "input_json_delta", "partial_json": p}
                    for p in _split(raw, k.stream_chunks)
                ]
            opening = (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": empty},
            )
            if index == 0:
                groups[0].append(opening)
                if k.ping:
                    groups[0].append(("ping", {"type": "ping"}))
            else:
                groups[-1].append(opening)
            for delta in pieces:
                groups.append(
                    [
                        (
                            "content_block_delta",
                            {"type": "content_block_delta", "index": index, "delta": delta},
                        )
                    ]
                )
            groups[-1].append(
                ("content_block_stop", {"type": "content_block_stop", "index": index})
            )
        if ex.fault == "stream_error":
            error = {
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
            }
            first = (
                [e for e in groups[1] if e[0] != "content_block_stop"] if len(groups) > 1 else []
            )
            groups = [groups[0], *([first] if first else []), [("error", error)]]
        else:
            delta_usage = {
                key: usage[key]
                for key in (
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                    "output_tokens",
                )
            }
            groups[-1] += [
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                        "usage": delta_usage,
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ]
        share = delay / len(groups)
        for i, group in enumerate(groups):
            if share > 0 and self._closing.wait(share):
                ex.outcome = "shutdown"
                h.close_connection = True
                return
            head = b""
            if i == 0:
                head = self._stream_head(ex, message["id"].replace("msg_", "req_"), headers)
            payload = b"".join(
                f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in group
            )
            tail = b""
            if i == len(groups) - 1:
                tail = b"0\r\n\r\n"
                ex.outcome = "stream_error" if ex.fault == "stream_error" else "ok"
                self._finish(ex)
            h.wfile.write(head + _chunk(payload) + tail)

    # ------------------------------------------------------------------ helpers

    def _agent_move(
        self, parsed: _Parsed, flip: bool, v: float
    ) -> tuple[ToolCall | str, bool, str]:
        """The fake agent's next move, whether a flip chose it, and the plan's rule name.

        A flip happens at the first step only (no tool results yet): another agent rule's
        plan (or none: the default answer) replaces the matching rule's, as a model that misread
        the request would. Later steps continue the plan that issued the conversation's last
        tool_use id (the server remembers which plan issued each id, as it made them); a
        conversation with ids it never issued continues the first plan its calls fit."""
        req, history = parsed.request, parsed.history
        assert req.agent is not None
        offered = req.agent.tool_names()
        by_name = {r.name: r for r in self.rules.agents}
        primary = agent_rule(conversation_text(req), self.rules)
        if not history:
            chosen = primary
            if flip:
                others: list[AgentRule | None] = [r for r in self.rules.agents if r is not primary]
                if primary is not None:
                    others.append(None)
                if others:
                    chosen = others[int(v * len(others))]
            return self._agent_answer(req, history, chosen), chosen is not primary, _name(chosen)
        with self._lock:
            issued = self._plans.get(parsed.use_ids[-1]) if parsed.use_ids else None
        if issued is not None:
            rule = by_name.get(issued)
            return self._agent_answer(req, history, rule), False, issued
        for candidate in [primary, *[r for r in self.rules.agents if r is not primary]]:
            if plan_matches(candidate, req, history, offered):
                return self._agent_answer(req, history, candidate), False, _name(candidate)
        return self.rules.agent_default, False, ""

    def _agent_answer(
        self,
        req: Request,
        history: list[tuple[str, dict[str, Any], str]],
        rule: AgentRule | None,
    ) -> ToolCall | str:
        if rule is None:
            return self.rules.agent_default
        return agent_turn(req, history, self.rules, rule)

    def _alternatives_for(self, req: Request, original: str) -> list[str]:
        """The fake's answers for the other labels, under this system prompt."""
        with self._lock:
            answers = self._alternatives.get(req.system)
        if answers is None:
            probes = [p for rule in self.rules.rules for p in rule.phrases] + [""]
            answers = []
            for phrase in probes:
                probe = Request(
                    system=req.system,
                    messages=(Message(role="user", content=f"<message>{phrase}</message>"),),
                    model=req.model,
                )
                answer = fake_answer(probe, self.rules)
                if answer not in answers:
                    answers.append(answer)
            with self._lock:
                if len(self._alternatives) > 4096:
                    self._alternatives.clear()
                self._alternatives[req.system] = answers
        return [a for a in answers if a != original]

    def _sync_buckets(self, k: Knobs, now: float) -> None:
        for name, limit in (
            ("requests", k.requests_per_minute),
            ("input-tokens", k.input_tokens_per_minute),
            ("output-tokens", k.output_tokens_per_minute),
        ):
            bucket = self._buckets.get(name)
            capacity = None if limit is None else limit * k.rate_limit_window_s / 60.0
            if limit is None or capacity is None:
                self._buckets.pop(name, None)
            elif bucket is None or (bucket.limit, bucket.capacity) != (limit, capacity):
                self._buckets[name] = _Bucket(limit, capacity, capacity, now)
            else:
                bucket.refill(now)

    def _buckets_limit(self, name: str) -> str:
        bucket = self._buckets.get(name)
        return f"{bucket.limit:g}" if bucket is not None else "?"

    def _ratelimit_headers(self, now: float) -> list[tuple[str, str]]:
        wall = time.time()
        out: list[tuple[str, str]] = []

        def family(prefix: str, bucket: _Bucket) -> None:
            reset = datetime.fromtimestamp(math.ceil(wall + bucket.full_in()), UTC)
            out.extend(
                [
                    (f"anthropic-ratelimit-{prefix}-limit", f"{math.floor(bucket.limit)}"),
                    (f"anthropic-ratelimit-{prefix}-remaining", str(bucket.remaining())),
                    (f"anthropic-ratelimit-{prefix}-reset", reset.strftime("%Y-%m-%dT%H:%M:%SZ")),
                ]
            )

        for name in ("requests", "input-tokens", "output-tokens"):
            if name in self._buckets:
                family(name, self._buckets[name])
        token_buckets = [
            self._buckets[n] for n in ("input-tokens", "output-tokens") if n in self._buckets
        ]
        if token_buckets:
            family("tokens", min(token_buckets, key=lambda b: b.remaining()))
        return out

    def _error(
        self,
        h: _Handler,
        ex: Exchange,
        k: Knobs,
        status: int,
        etype: str,
        message: str,
        outcome: str,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        rid = _request_id()
        if k.echo_credentials:
            sent = {n: ex.headers[n] for n in ("x-api-key", "authorization") if n in ex.headers}
            message += f" (request headers: {json.dumps(sent)})"
        if k.echo_text:
            message += f" {k.echo_text}"
        body = {"type": "error", "error": {"type": etype, "message": message}, "request_id": rid}
        extra = [("request-id", rid), *(headers or [])]
        if k.should_retry_header:
            retry = status in (408, 409, 429) or status >= 500
            extra.append(("x-should-retry", "true" if retry else "false"))
        self._send(h, ex, status, json.dumps(body).encode(), extra, outcome)

    def _json(
        self,
        h: _Handler,
        ex: Exchange,
        status: int,
        data: dict[str, Any],
        headers: list[tuple[str, str]],
        outcome: str,
    ) -> None:
        extra = [("request-id", _request_id()), *headers]
        self._send(h, ex, status, json.dumps(data).encode(), extra, outcome)

    def _send(
        self,
        h: _Handler,
        ex: Exchange,
        status: int,
        body: bytes,
        headers: list[tuple[str, str]],
        outcome: str,
        content_type: str = "application/json",
    ) -> None:
        lines = [
            f"HTTP/1.1 {status} {_reason(status)}",
            f"date: {formatdate(usegmt=True)}",
            f"content-type: {content_type}",
            f"content-length: {len(body)}",
            *(f"{name}: {value}" for name, value in headers),
        ]
        if h.close_connection:
            lines.append("connection: close")
        ex.status = status
        ex.outcome = outcome
        self._finish(ex)
        h.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def _stream_head(self, ex: Exchange, rid: str, headers: list[tuple[str, str]]) -> bytes:
        lines = [
            "HTTP/1.1 200 OK",
            f"date: {formatdate(usegmt=True)}",
            "content-type: text/event-stream; charset=utf-8",
            "cache-control: no-cache",
            "transfer-encoding: chunked",
            f"request-id: {rid}",
            *(f"{name}: {value}" for name, value in headers),
        ]
        ex.status = 200
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


# ---------------------------------------------------------------------- functions


# Sampling fields that ``POST /v1/messages/count_tokens`` refuses (400) where ``/v1/messages``
# takes them.
_NOT_COUNTED = ("max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "stream")


def _parse(body: dict[str, Any], counting: bool = False) -> _Parsed:
    """The body as the fake's Request, with the cacheable system prefix."""
    model = body.get("model")
    if not isinstance(model, str):
        raise _Invalid(
            "model: Field required" if model is None else "model: Input should be a valid string"
        )
    if counting:
        # The token-counting endpoint takes the request's content, not how to sample a reply.
        for name in _NOT_COUNTED:
            if name in body:
                raise _Invalid(f"{name}: Extra inputs are not permitted")
    max_tokens = body.get("max_tokens", 1024 if counting else None)
    if max_tokens is None:
        raise _Invalid("max_tokens: Field required")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _Invalid("max_tokens: Input should be an integer greater than or equal to 1")

    system = body.get("system", "")
    cache_prefix: str | None = None
    ttl_1h = False
    if isinstance(system, str):
        system_text = system
    elif isinstance(system, list):
        texts: list[str] = []
        for i, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text":
                raise _Invalid(f"system.{i}.type: Input should be 'text'")
            text = block.get("text")
            if not isinstance(text, str):
                raise _Invalid(f"system.{i}.text: Field required")
            texts.append(text)
            control = block.get("cache_control")
            if isinstance(control, dict) and control.get("type") == "ephemeral":
                cache_prefix = "\n".join(texts)
                ttl_1h = control.get("ttl") == "1h"
        system_text = "\n".join(texts)
    else:
        raise _Invalid("system: Input should be a valid string or a list of text blocks")
    top = body.get("cache_control")
    if isinstance(top, dict) and top.get("type") == "ephemeral" and system_text:
        cache_prefix = system_text
        ttl_1h = top.get("ttl") == "1h"

    raw_messages = body.get("messages")
    if raw_messages is None:
        raise _Invalid("messages: Field required")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise _Invalid("messages: at least one message is required")
    tools = _tools(body.get("tools"))
    messages: list[Message] = []
    history: list[tuple[str, dict[str, Any], str]] = []
    tool_text = json.dumps(body["tools"]) if tools else ""
    # tool_use blocks of the last assistant turn, by id, awaiting their tool_result blocks
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    use_ids: list[str] = []
    for i, item in enumerate(raw_messages):
        if not isinstance(item, dict):
            raise _Invalid(f"messages.{i}: Input should be an object")
        role = item.get("role")
        if role not in ("user", "assistant"):
            raise _Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        content = item.get("content")
        if isinstance(content, str):
            text = content
            blocks: list[Any] = []
        elif isinstance(content, list):
            blocks = content
            text = "\n".join(
                str(block.get("text", ""))
                for block in content
                if isinstance(block, dict) and block.get("type") == "text"
            )
        else:
            raise _Invalid(f"messages.{i}.content: Field required")
        answered: set[str] = set()
        for j, block in enumerate(blocks):
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_use":
                if role != "assistant":
                    raise _Invalid(
                        f"messages.{i}.content.{j}: tool_use blocks are assistant turns'"
                    )
                if not isinstance(block.get("id"), str) or not isinstance(block.get("input"), dict):
                    raise _Invalid(f"messages.{i}.content.{j}.tool_use: id and input required")
                pending[block["id"]] = (str(block.get("name")), block["input"])
                use_ids.append(block["id"])
                tool_text += json.dumps(block["input"])
            elif kind == "tool_result":
                use_id = block.get("tool_use_id")
                if role != "user" or use_id not in pending:
                    raise _Invalid(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {use_id}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
                result = _result_text(block.get("content"))
                name, args = pending[use_id]
                history.append((name, args, result))
                answered.add(use_id)
                tool_text += result
        if role == "user" and pending:
            missing = [u for u in pending if u not in answered]
            if missing:
                raise _Invalid(
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
            pending = {}
        messages.append(Message(role=role, content=text))
    try:
        request = Request(
            system=system_text,
            messages=tuple(messages),
            model=model,
            max_tokens=max_tokens,
            temperature=body.get("temperature", 0.0),
            agent=AgentSpec(tools=tools) if tools else None,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise _Invalid(f"{loc}: {err['msg']}") from None
    return _Parsed(request, cache_prefix, ttl_1h, history, tool_text, use_ids)


def _name(rule: AgentRule | None) -> str:
    return "" if rule is None else rule.name


_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)


def _tools(raw: Any) -> tuple[ToolSpec, ...]:
    """The body's ``tools``, validated as the API does (a name, an object input schema)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _Invalid("tools: Input should be a valid list")
    tools: list[ToolSpec] = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict):
            raise _Invalid(f"tools.{i}: Input should be an object")
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise _Invalid(
                f"tools.{i}.custom.name: String should match pattern '{TOOL_NAME_PATTERN}'"
            )
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise _Invalid(f"tools.{i}.custom.input_schema.type: Input should be 'object'")
        tools.append(
            ToolSpec(name=name, description=str(tool.get("description", "")), input_schema=schema)
        )
    if len({t.name for t in tools}) != len(tools):
        raise _Invalid("tools: Tool names must be unique.")
    return tuple(tools)


def _result_text(content: Any) -> str:
    """A tool_result's content (a string or text blocks) as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _batch_requests(body: Any) -> list[tuple[str, dict[str, Any]]]:
    """The (custom_id, params) of a batch-creation body, validated as the API does at once."""
    if not isinstance(body, dict):
        raise _Invalid("There was an issue with the format of your request: invalid JSON body")
    items = body.get("requests")
    if not isinstance(items, list) or not items:
        raise _Invalid("requests: at least one request is required")
    seen: set[str] = set()
    out: list[tuple[str, dict[str, Any]]] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _Invalid(f"requests.{i}: Input should be an object")
        custom_id = item.get("custom_id")
        if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
            raise _Invalid(f"requests.{i}.custom_id: String should match ^[a-zA-Z0-9_-]{{1,64}}$")
        if custom_id in seen:
            raise _Invalid(f"requests.{i}.custom_id: duplicate custom_id {custom_id!r}")
        seen.add(custom_id)
        params = item.get("params")
        if not isinstance(params, dict):
            raise _Invalid(f"requests.{i}.params: Field required")
        if params.get("stream") is True:
            raise _Invalid(f"requests.{i}.params.stream: streaming is not supported in batches")
        try:
            _parse(params)
        except _Invalid as exc:
            raise _Invalid(f"requests.{i}.params.{exc}") from None
        out.append((custom_id, params))
    return out


def _rfc3339(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _digest(body: dict[str, Any]) -> bytes:
    content = {key: value for key, value in body.items() if key not in ("stream", "metadata")}
    data = json.dumps(content, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.blake2b(data, digest_size=16).digest()


def _draws(seed: int, tag: str, digest: bytes, occurrence: int) -> tuple[float, float, float]:
    """Three uniform numbers in [0, 1), a pure function of the arguments."""
    h = hashlib.blake2b(f"{seed}|{tag}|{occurrence}|".encode() + digest, digest_size=24).digest()
    return (
        int.from_bytes(h[0:8], "big") / 2**64,
        int.from_bytes(h[8:16], "big") / 2**64,
        int.from_bytes(h[16:24], "big") / 2**64,
    )


def _draw_fault(k: Knobs, digest: bytes, occurrence: int) -> str:
    rates = [(name, float(getattr(k, name))) for name in _RATED]
    if not any(rate > 0 for _, rate in rates):
        return "ok"
    u = _draws(k.seed, "fault", digest, occurrence)[0]
    acc = 0.0
    for name, rate in rates:
        acc += rate
        if u < acc:
            return name
    return "ok"


def _authorized(headers: dict[str, str], key: str) -> bool:
    return headers.get("x-api-key") == key or headers.get("authorization") == f"Bearer {key}"


def _split(text: str, parts: int) -> list[str]:
    """``text`` in at most ``parts`` non-empty, nearly equal pieces (one empty piece if empty)."""
    if not text:
        return [""]
    parts = min(parts, len(text))
    size, extra = divmod(len(text), parts)
    pieces: list[str] = []
    start = 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def _chunk(payload: bytes) -> bytes:
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _reason(status: int) -> str:
    if status == 529:
        return "Overloaded"
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _request_id() -> str:
    return f"req_{uuid.uuid4().hex[:24]}"


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
