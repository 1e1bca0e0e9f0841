"""The Anthropic backend, on the official SDK. The only module that imports ``anthropic``.

The system prompt is marked for prompt caching, so a run over N cases pays for it about once.
evalgate owns retries (the SDK's are off, see retry.py) so that every attempt is counted.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

import anthropic
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from evalgate.backends.base import BackendContext, ErrorKind, Reply, Request
from evalgate.config import ModelSettings
from evalgate.errors import BackendError
from evalgate.retry import Attempt, Retrier, RetryPolicy

KEY_VARIABLE = "ANTHROPIC_API_KEY"
BASE_URL_VARIABLE = "ANTHROPIC_BASE_URL"


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


_STREAM_ERRORS: dict[str, ErrorKind] = {
    "overloaded_error": "overloaded",
    "rate_limit_error": "rate_limit",
    "api_error": "server",
    "timeout_error": "timeout",
}


class MalformedReply(ValueError):
    """A 200 whose body is not a message (a proxy's HTML page, a stream without events)."""


def _kind(exc: Exception) -> ErrorKind:
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
        status = exc.status_code
        if status < 400:
            # An error event inside a 200 stream (the API overloaded mid-answer): its type says
            # what happened, and the status says nothing.
            return _STREAM_ERRORS.get(str(exc.type), "server")
        if status == 529:
            return "overloaded"
        if status >= 500 or status in (408, 409):
            return "server"
        if status in (401, 403):
            return "auth"
        if status == 404:
            return "not_found"
        if status in (400, 413, 422):
            return "bad_request"
    return "malformed" if isinstance(exc, ValueError) else "other"


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                return None
    return None


def _message(exc: Exception) -> str:
    if isinstance(exc, anthropic.APIStatusError):
        body = exc.body
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            return f"{exc.status_code} {body['error'].get('type')}: {body['error'].get('message')}"
        return f"{exc.status_code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


class AnthropicBackend:
    name: ClassVar[str] = "anthropic"
    offline: ClassVar[bool] = False

    def __init__(self, settings: ModelSettings, context: BackendContext) -> None:
        try:
            self.options = AnthropicOptions.model_validate(settings.options)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise BackendError(
                f"model.options.{loc}: {err['msg']}",
                fix="see the README's anthropic section for the allowed options",
            ) from None
        key = context.env.get(KEY_VARIABLE, "")
        if not key:
            raise BackendError(
                f"the anthropic backend needs an API key: set {KEY_VARIABLE}",
                fix="or use `backend: fake`, which runs offline",
            )
        self._key = SecretStr(key)
        self.client = anthropic.Anthropic(
            api_key=self._key.get_secret_value(),
            base_url=context.env.get(BASE_URL_VARIABLE) or None,
            max_retries=0,
            timeout=self.options.timeout_s,
        )
        self.retrier = Retrier(self.options.retry)

    def close(self) -> None:
        self.client.close()

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
        return params

    def _once(self, params: dict[str, Any]) -> Attempt:
        started = time.perf_counter()
        try:
            if self.options.stream:
                with self.client.messages.stream(**params) as stream:
                    # A body that is not an event stream yields no events; the SDK would then
                    # fail an assert in get_final_message.
                    if not any(event.type == "message_start" for event in stream):
                        raise MalformedReply("the stream had no message_start event")
                    message = stream.get_final_message()
            else:
                message = self.client.messages.create(**params)
            if not isinstance(message, anthropic.types.Message):
                # The SDK returns a non-JSON 200 body (an HTML error page) as a bare str.
                raise MalformedReply(f"the reply is not a message: {str(message)[:100]!r}")
        except (anthropic.APIError, ValueError) as exc:
            return Attempt(
                kind=_kind(exc),
                message=_message(exc),
                retry_after_s=_retry_after(exc),
                elapsed_s=time.perf_counter() - started,
            )
        return Attempt(value=message, elapsed_s=time.perf_counter() - started)

    def complete(self, request: Request) -> Reply:
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
        message: Any = result.value
        text = "".join(
            block.text for block in message.content if getattr(block, "type", "") == "text"
        )
        usage = message.usage
        return Reply(
            text=text,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_write_tokens=usage.cache_creation_input_tokens or 0,
            cache_read_tokens=usage.cache_read_input_tokens or 0,
            latency_s=latency,
            stop_reason=message.stop_reason,
            attempts=attempts,
        )
