"""The Anthropic backend, on the official SDK. The only module that imports ``anthropic``.

The system prompt is marked for prompt caching, so a run over N cases pays for it about once.
evalgate owns retries (the SDK's are off, see retry.py) so that every attempt is counted.
Calls are paced by the API's rate-limit headers (ratelimit.py), so a run slows down before
429s arrive instead of after; and a run can go through the Message Batches API at half the
price (backends/batch.py orchestrates; the calls are here).

A plain (not streamed) call goes over one httpx2 client of the backend's own: the body is the
JSON the SDK would send, the reply is read as JSON (message_data), and a failure is named as
the SDK names it (``_status_failure``, ``_transport_failure``). The SDK itself, whose import
costs over a second of CPU and whose request and response models about a millisecond a call,
is imported only for what needs it: streaming, token counts and message batches.
"""

from __future__ import annotations

import contextlib
import errno
import json
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

import httpx2
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from evalgate.backends.agent import Turn, run_agent
from evalgate.backends.base import BackendContext, ErrorKind, Reply, Request, parse_options
from evalgate.backends.batch import BatchGone, BatchStatus
from evalgate.backends.ratelimit import Pacer, Ticket
from evalgate.backends.retry import Attempt, Retrier, RetryPolicy, kind_for_status
from evalgate.backends.tls import take_tls
from evalgate.config.models import ModelSettings
from evalgate.errors import BackendError
from evalgate.redact import redacted_excerpt, upstream_error
from evalgate.trajectory import CallRecord, ToolCall

if TYPE_CHECKING:
    import anthropic

KEY_VARIABLE = "ANTHROPIC_API_KEY"
RATELIMIT_PREFIX = "anthropic-ratelimit-"
BASE_URL_VARIABLE = "ANTHROPIC_BASE_URL"
# What the SDK sends and uses when nothing else is said (anthropic/_constants.py).
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
CONNECT_TIMEOUT_S = 5.0
MAX_CONNECTIONS, MAX_KEEPALIVE = 1000, 100


class AnthropicOptions(BaseModel):
    """``model.options`` for the anthropic backend."""

    model_config = ConfigDict(extra="forbid")

    stream: bool = False
    timeout_s: float = Field(default=60.0, gt=0)
    cache_system: bool = True
    thinking_budget: int | None = Field(default=None, ge=1024)
    adaptive_thinking: bool = False
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    # A JSON schema for the reply (structured output), where the model supports it.
    response_schema: dict[str, Any] | None = None
    retry: RetryPolicy = RetryPolicy()
    # Pace calls by the anthropic-ratelimit-* headers, and pause every worker on a 429.
    adaptive_rate_limit: bool = True
    # Send whole runs through the Message Batches API (half price, answers within 24 hours).
    batch: bool = False
    batch_poll_s: float = Field(default=30.0, gt=0)


_STREAM_ERRORS: dict[str, ErrorKind] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limit",
    "api_error": "server",
    "timeout_error": "timeout",
}


# A batch result's error type -> the kind of error it is.
_BATCH_ERRORS: dict[str, ErrorKind] = {
    "invalid_request_error": "bad_request",
    "request_too_large": "bad_request",
    "authentication_error": "auth",
    "permission_error": "auth",
    "not_found_error": "not_found",
    "rate_limit_error": "rate_limit",
    "overloaded_error": "overloaded",
    "api_error": "server",
    "timeout_error": "timeout",
}


class _Client(httpx2.Client):
    """An httpx2 client that closes its connections when it is collected, as the SDK's does
    (a backend is not always closed by whoever built it)."""

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if not self.is_closed:
                self.close()


class MalformedReply(ValueError):
    """A 200 whose body is not a message (a proxy's HTML page, a stream without events)."""


def _kind(exc: Exception) -> ErrorKind:
    import anthropic

    # Order matters: subclasses before their bases.
    if isinstance(exc, anthropic.RateLimitError):
        return "rate_limit"
    if isinstance(exc, anthropic.APITimeoutError):
        return "timeout"
    if isinstance(exc, anthropic.APIConnectionError):
        return "connection"
    if isinstance(exc, anthropic.APIResponseValidationError):
        return "malformed"
    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code < 400:
            # An error event inside a 200 stream (the API overloaded mid-answer): its type says
            # what happened, and the status says nothing.
            return _STREAM_ERRORS.get(str(exc.type), "server")
        return cast(ErrorKind, kind_for_status(exc.status_code))
    return "malformed" if isinstance(exc, ValueError) else "other"


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    return _retry_after_of(response.headers)


def _retry_after_of(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                return None
    return None


def _message(exc: Exception) -> str:
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            error = body["error"]
            return upstream_error(exc.status_code, error.get("type"), error.get("message"))
        return upstream_error(exc.status_code, None, exc.message)
    return upstream_error(None, type(exc).__name__, exc)


class AnthropicBackend:
    name: ClassVar[str] = "anthropic"
    offline: ClassVar[bool] = False
    supports_batch: ClassVar[bool] = True

    def __init__(self, settings: ModelSettings, context: BackendContext) -> None:
        self.options = parse_options(
            AnthropicOptions,
            settings.options,
            fix="see the README's anthropic section for the allowed options",
        )
        key = context.env.get(KEY_VARIABLE, "")
        if not key:
            raise BackendError(
                f"the anthropic backend needs an API key: set {KEY_VARIABLE}",
                fix="or use `backend: fake`, which runs offline",
            )
        self._key = SecretStr(key)
        self._base_url = (context.env.get(BASE_URL_VARIABLE) or DEFAULT_BASE_URL).rstrip("/")
        # One client and connection pool for every plain call, as the SDK would hold.
        self._http = _Client(
            base_url=self._base_url,
            headers={
                "x-api-key": self._key.get_secret_value(),
                "anthropic-version": API_VERSION,
                "content-type": "application/json",
                "accept": "application/json",
            },
            timeout=httpx2.Timeout(self.options.timeout_s, connect=CONNECT_TIMEOUT_S),
            limits=httpx2.Limits(
                max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE
            ),
            verify=take_tls(context.env),  # made while the cases were read, when the run started it
        )
        self._client: anthropic.Anthropic | None = None
        self.context = context
        self.retrier = Retrier(self.options.retry)
        self.pacer = Pacer() if self.options.adaptive_rate_limit else None
        self._lock = threading.Lock()
        self._rate_limited = 0

    @property
    def rate_limited(self) -> int:
        """429s seen (every attempt's, paced or not)."""
        with self._lock:
            return self._rate_limited

    @property
    def batch_by_default(self) -> bool:
        return self.options.batch

    @property
    def batch_poll_s(self) -> float:
        return self.options.batch_poll_s

    @property
    def client(self) -> anthropic.Anthropic:
        """The SDK's client, built (and the SDK imported) the first time something needs it."""
        with self._lock:
            if self._client is None:
                import anthropic

                # The SDK's own HTTP client, verifying with a context of ours: a CA bundle
                # that cannot be read is then one error here, not one the SDK's half-made
                # client raises again when it is collected.
                http = anthropic.DefaultHttpxClient(verify=take_tls(self.context.env))
                weakref.finalize(self, http.close)
                self._client = anthropic.Anthropic(
                    api_key=self._key.get_secret_value(),
                    base_url=self._base_url,
                    max_retries=0,
                    timeout=self.options.timeout_s,
                    http_client=http,
                )
            return self._client

    def close(self) -> None:
        self._http.close()
        if self._client is not None:
            self._client.close()

    def params(self, request: Request) -> dict[str, Any]:
        opts = self.options
        system: Any = request.system
        if opts.cache_system and request.system:
            system = [
                {"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}
            ]
        params: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "system": system,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        if opts.thinking_budget is not None:
            # Extended thinking requires temperature 1 (the API's rule), so it is not sent.
            params["thinking"] = {"type": "enabled", "budget_tokens": opts.thinking_budget}
        elif opts.adaptive_thinking:
            params["thinking"] = {"type": "adaptive"}
        elif request.temperature is not None:
            # This SDK's signature has no temperature; the API still takes it in the body.
            params["extra_body"] = {"temperature": request.temperature}
        output: dict[str, Any] = {}
        if opts.effort is not None:
            output["effort"] = opts.effort
        if opts.response_schema is not None:
            output["format"] = {"type": "json_schema", "schema": opts.response_schema}
        if output:
            params["output_config"] = output
        if request.agent is not None:
            params["tools"] = [t.model_dump() for t in request.agent.tools]
        return params

    def _once(self, params: dict[str, Any]) -> Attempt:
        if self.options.stream:
            return self._once_streamed(params)
        ticket = self.pacer.acquire() if self.pacer is not None else None
        started = time.perf_counter()
        body = {k: v for k, v in params.items() if k != "extra_body"}
        body.update(params.get("extra_body") or {})
        failed: tuple[ErrorKind, str, httpx2.Response | None]
        try:
            response = self._http.post("/v1/messages", content=json.dumps(body).encode())
        except httpx2.TimeoutException as exc:
            failed = ("timeout", _timeout_message(exc, self._base_url), None)
        except Exception as exc:  # the SDK's rule: anything else is the connection's failure
            failed = ("connection", _connection_message(exc, self._base_url), None)
        else:
            self._observe(ticket, response.headers)
            data = message_data(response) if response.status_code < 300 else None
            if data is not None:
                self._observe_usage(ticket, data)
                return Attempt(value=data, elapsed_s=time.perf_counter() - started)
            failed = _status_failure(response)
        kind, message, failure = failed
        retry_after = _retry_after_of(failure.headers) if failure is not None else None
        if kind == "rate_limit":
            self._saw_rate_limit(ticket, failure, retry_after)
        return Attempt(
            kind=kind,
            message=message,
            retry_after_s=retry_after,
            elapsed_s=time.perf_counter() - started,
        )

    def _once_streamed(self, params: dict[str, Any]) -> Attempt:
        import anthropic

        client = self.client
        ticket = self.pacer.acquire() if self.pacer is not None else None
        started = time.perf_counter()
        message: Any
        try:
            with client.messages.stream(**params) as stream:
                self._observe(ticket, stream.response.headers)
                # A body that is not an event stream yields no events; the SDK would then
                # fail an assert in get_final_message.
                if not any(event.type == "message_start" for event in stream):
                    raise MalformedReply("the stream had no message_start event")
                message = _as_data(stream.get_final_message())
        except (anthropic.APIError, ValueError) as exc:
            kind = _kind(exc)
            retry_after = _retry_after(exc)
            if kind == "rate_limit":
                self._saw_rate_limit(ticket, getattr(exc, "response", None), retry_after)
            return Attempt(
                kind=kind,
                message=_message(exc),
                retry_after_s=retry_after,
                elapsed_s=time.perf_counter() - started,
            )
        self._observe_usage(ticket, message)
        return Attempt(value=message, elapsed_s=time.perf_counter() - started)

    def _saw_rate_limit(
        self, ticket: Ticket | None, response: Any, retry_after: float | None
    ) -> None:
        with self._lock:
            self._rate_limited += 1
        if ticket is not None and self.pacer is not None and response is not None:
            self.pacer.rate_limited(ticket, response.headers, retry_after)

    def _observe_usage(self, ticket: Ticket | None, message: dict[str, Any]) -> None:
        if ticket is not None and self.pacer is not None:
            usage = message["usage"]
            self.pacer.observe(
                ticket,
                {},
                input_tokens=usage["input_tokens"]
                + (usage.get("cache_creation_input_tokens") or 0),
                output_tokens=usage["output_tokens"],
            )

    def _observe(self, ticket: Ticket | None, headers: Any) -> None:
        if ticket is not None and self.pacer is not None:
            # The few headers the pacer reads, looked up once (a lookup in the SDK's headers
            # decodes every header it passes).
            limits = {k: v for k, v in headers.items() if k.startswith(RATELIMIT_PREFIX)}
            if limits:  # none: nothing to correct the pace by
                self.pacer.observe(ticket, limits)

    def complete(self, request: Request) -> Reply:
        if request.agent is not None:
            return run_agent(
                _Session(self, request),
                request.agent,
                case_id=str(request.case.get("id", "")),
                cwd=self.context.base_dir,
                env=self.context.env,
            )
        params = self.params(request)
        result, attempts = self.retrier.run(lambda: self._once(params))
        # The latency of the call that answered; retries and backoff show in the wall time.
        latency = result.elapsed_s
        if result.kind is not None:
            return Reply(
                error=result.message,
                error_kind=result.kind,
                latency_s=latency,
                attempts=attempts,
            )
        return _reply(cast(dict[str, Any], result.value), latency, attempts)

    @property
    def caches_system(self) -> bool:
        """Whether the system prompt is sent marked for prompt caching (options.cache_system)."""
        return self.options.cache_system

    def count_tokens(self, request: Request) -> int:
        """The request's input tokens, from the free ``POST /v1/messages/count_tokens``; an
        agent case's first step only. Raises ``BackendError`` when the endpoint fails."""
        params = self.params(request)
        # The endpoint counts what is sent, not how a reply is sampled: it refuses these.
        for name in ("max_tokens", "extra_body"):
            params.pop(name, None)
        try:
            counted = self.client.messages.count_tokens(**params)
        except (_sdk_errors(), ValueError) as exc:
            raise BackendError(
                f"counting tokens failed: {_message(exc)}",
                fix="the estimate falls back to about four characters a token",
            ) from None
        return int(counted.input_tokens)

    # ------------------------------------------------------------ message batches

    def batch_params(self, request: Request) -> dict[str, Any]:
        """``params`` as one request of a batch: the SDK's ``extra_body`` goes in the body."""
        params = self.params(request)
        params.update(params.pop("extra_body", {}))
        return params

    def submit_batch(self, items: Sequence[tuple[str, Request]]) -> BatchStatus:
        requests: list[Any] = [
            {"custom_id": cid, "params": self.batch_params(request)} for cid, request in items
        ]
        batch = self._api(
            "submitting the batch", lambda: self.client.messages.batches.create(requests=requests)
        )
        return _status(batch)

    def batch_status(self, batch_id: str) -> BatchStatus:
        batch = self._api(
            f"polling batch {batch_id}",
            lambda: self.client.messages.batches.retrieve(batch_id),
        )
        return _status(batch)

    def batch_results(self, batch_id: str) -> list[tuple[str, Reply]]:
        lines = self._api(
            f"fetching the results of batch {batch_id}",
            # Read whole inside the attempt, so a connection lost halfway is retried.
            lambda: list(self.client.messages.batches.results(batch_id)),
        )
        return [(line.custom_id, _batch_reply(line.result)) for line in lines]

    def _api(self, what: str, call: Any) -> Any:
        """One batch API call with evalgate's retries; failures stop the run."""

        def once() -> Attempt:
            try:
                return Attempt(value=call())
            except (_sdk_errors(), ValueError) as exc:
                return Attempt(
                    kind=_kind(exc), message=_message(exc), retry_after_s=_retry_after(exc)
                )

        result, _ = self.retrier.run(once)
        if result.kind == "not_found":
            raise BatchGone(f"{what}: {result.message}", fix="submit the batch again")
        if result.kind is not None:
            raise BackendError(
                f"{what} failed: {result.message}",
                fix="check the key and the network; run the command again to resume",
            )
        return result.value


class _Session:
    """One agent case on the Messages API: tool_use blocks in, tool_result blocks back."""

    def __init__(self, backend: AnthropicBackend, request: Request) -> None:
        self.backend = backend
        self.params = backend.params(request)
        self.content: list[dict[str, Any]] = []

    def send(self) -> Turn:
        result, attempts = self.backend.retrier.run(lambda: self.backend._once(self.params))
        if result.kind is not None:
            return Turn.failed(result.message, result.kind, result.elapsed_s, attempts)
        message: dict[str, Any] = cast(dict[str, Any], result.value)
        reply = _reply(message, result.elapsed_s, attempts)
        # What the model said goes back as it came, without the fields it left empty.
        self.content = [_without_none(block) for block in message["content"]]
        calls = [
            ToolCall(name=block["name"], input=dict(block["input"]), id=block["id"])
            for block in message["content"]
            if block.get("type") == "tool_use"
        ]
        return Turn.of(reply, calls, attempts)

    def answer(self, turn: Turn, records: list[CallRecord]) -> None:
        results = [
            {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": record.result or "",
                **({"is_error": True} if record.status != "ok" else {}),
            }
            for call, record in zip(turn.calls, records, strict=True)
        ]
        self.params["messages"] = [
            *self.params["messages"],
            {"role": "assistant", "content": self.content},
            {"role": "user", "content": results},
        ]


def _sdk_errors() -> type[Exception]:
    import anthropic

    return anthropic.APIError


def _status_failure(response: httpx2.Response) -> tuple[ErrorKind, str, httpx2.Response]:
    """A reply that is not a message, named as the SDK names it: an error status by the API's
    error type and message; a 200 that is not a message as malformed."""
    status = response.status_code
    text = response.text.strip()
    if status < 300:
        # A proxy's HTML page, a body cut short, JSON that is no message: retried as malformed.
        reason = MalformedReply(f"the reply is not a message: {redacted_excerpt(text)}")
        return "malformed", upstream_error(None, type(reason).__name__, reason), response
    body: Any = text
    try:
        body = json.loads(text)
        said = f"Error code: {status} - {body}"
    except ValueError:
        said = text or f"Error code: {status}"
    kind = cast(ErrorKind, kind_for_status(status))
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        return kind, upstream_error(status, error.get("type"), error.get("message")), response
    return kind, upstream_error(status, None, said), response


def _chain(error: BaseException) -> Iterator[BaseException]:
    """An error and the errors inside it (causes, a group's members, wrapped arguments)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        wrapped = [*getattr(current, "exceptions", ()), current.__cause__, *current.args]
        current = next((inner for inner in wrapped if isinstance(inner, BaseException)), None)


def _host(exc: BaseException, base_url: str) -> str:
    try:
        request = exc.request if isinstance(exc, httpx2.RequestError) else None
    except RuntimeError:
        request = None
    if request is not None:
        return str(request.url.netloc.decode("ascii"))
    return str(httpx2.URL(base_url).netloc.decode("ascii"))


def _timeout_message(exc: httpx2.TimeoutException, base_url: str) -> str:
    phases: dict[type[httpx2.TimeoutException], str] = {
        httpx2.ConnectTimeout: "connect",
        httpx2.WriteTimeout: "write",
        httpx2.PoolTimeout: "pool",
    }
    timeout: float | None = None
    with contextlib.suppress(RuntimeError):  # an error raised before any request was made
        timeout = exc.request.extensions.get("timeout", {}).get(phases.get(type(exc), "read"))
    # the operating system can give up on a connection before the client's own timeout
    if any(isinstance(e, OSError) and e.errno == errno.ETIMEDOUT for e in _chain(exc)):
        timeout = None
    after = "" if timeout is None else f" after {timeout:g}s"
    return upstream_error(
        None, "APITimeoutError", f"Request to {_host(exc, base_url)} timed out{after}"
    )


def _connection_message(exc: Exception, base_url: str) -> str:
    if not isinstance(exc, httpx2.RequestError):
        return upstream_error(None, "APIConnectionError", "Connection error.")
    reason = type(exc).__name__
    # the text of any other error can quote the request (h11 quotes a header it rejects)
    network = (httpx2.NetworkError, httpx2.ProxyError, httpx2.RemoteProtocolError)
    if isinstance(exc, network):
        for error in _chain(exc):
            if isinstance(error, (*network, OSError)):
                reason = str(error) or reason
    host = _host(exc, base_url)
    where = f"Connection to {host}" if host else "Connection"
    return upstream_error(None, "APIConnectionError", f"{where} failed: {reason}")


def message_data(response: Any) -> dict[str, Any] | None:
    """The message in a response's body, read as plain JSON, or None when it is not a
    well-formed message (then the SDK's own parse decides what it is).

    Building the SDK's models of a message costs about 1 ms of CPU a call, more than all the
    rest evalgate does with it: the reply needs a few fields, which the checks below vouch for.
    """
    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if not media_type.endswith("json"):
        return None
    try:
        data = json.loads(response.content)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("type") != "message":
        return None
    content, usage = data.get("content"), data.get("usage")
    if not isinstance(content, list) or not isinstance(usage, dict):
        return None
    for block in content:
        if not isinstance(block, dict) or not _well_formed(block):
            return None
    for name in ("input_tokens", "output_tokens"):
        if type(usage.get(name)) is not int:
            return None
    for name in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        if usage.get(name) is not None and type(usage[name]) is not int:
            return None
    stop = data.get("stop_reason")
    return data if stop is None or isinstance(stop, str) else None


def _well_formed(block: dict[str, Any]) -> bool:
    kind = block.get("type")
    if kind == "text":
        return isinstance(block.get("text"), str)
    if kind == "tool_use":
        return (
            isinstance(block.get("name"), str)
            and isinstance(block.get("id"), str)
            and isinstance(block.get("input"), dict)
        )
    return isinstance(kind, str)


def _as_data(message: Any) -> dict[str, Any]:
    """An SDK message (streamed, or in a batch's results) as the plain JSON it came as."""
    data: dict[str, Any] = message.model_dump(mode="json", exclude_none=True)
    return data


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def _reply(message: dict[str, Any], latency: float, attempts: int) -> Reply:
    text = "".join(block["text"] for block in message["content"] if block.get("type") == "text")
    usage = message["usage"]
    return Reply(
        text=text,
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        cache_write_tokens=usage.get("cache_creation_input_tokens") or 0,
        cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
        latency_s=latency,
        stop_reason=message.get("stop_reason"),
        attempts=attempts,
    )


def _status(batch: Any) -> BatchStatus:
    counts = batch.request_counts
    return BatchStatus(
        id=batch.id,
        phase=batch.processing_status,
        processing=counts.processing,
        succeeded=counts.succeeded,
        errored=counts.errored,
        canceled=counts.canceled,
        expired=counts.expired,
    )


def _batch_reply(result: Any) -> Reply:
    """A batch result as a reply: a message has no latency of its own in a batch."""
    kind = getattr(result, "type", None)
    if kind == "succeeded":
        return _reply(_as_data(result.message), 0.0, 1)
    if kind == "errored":
        error = getattr(getattr(result, "error", None), "error", None)
        etype = str(getattr(error, "type", "api_error"))
        return Reply(
            error=f"batch request errored: {upstream_error(None, etype, getattr(error, 'message', ''))}",
            error_kind=_BATCH_ERRORS.get(etype, "other"),
        )
    if kind == "expired":
        return Reply(
            error="batch request expired: the batch ended (24 hours) before it was processed",
            error_kind="timeout",
        )
    if kind == "canceled":
        return Reply(
            error="batch request canceled: the batch was canceled before it was processed",
            error_kind="interrupted",
        )
    return Reply(error=f"batch result of unknown type {kind!r}", error_kind="malformed")
