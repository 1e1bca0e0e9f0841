"""The OpenAI-compatible backend (OpenAI, Ollama, vLLM, llama.cpp's server): an extra.

``pip install "evalgate[openai]"``; the only module that imports ``openai``. Retries are
evalgate's own (retry.py), as for the anthropic backend, so every attempt is counted.
"""

from __future__ import annotations

import json
import re
import time
import weakref
from typing import Any, ClassVar, cast

import openai
from pydantic import BaseModel, ConfigDict, Field

from evalgate.backends.agent import Turn, run_agent
from evalgate.backends.base import BackendContext, ErrorKind, Reply, Request, parse_options
from evalgate.backends.retry import Attempt, Retrier, RetryPolicy, kind_for_status
from evalgate.backends.tls import take_tls
from evalgate.config.models import ModelSettings
from evalgate.errors import BackendError
from evalgate.redact import upstream_error
from evalgate.trajectory import TOOL_NAME_PATTERN, CallRecord, ToolCall

KEY_VARIABLE = "OPENAI_API_KEY"
BASE_URL_VARIABLE = "OPENAI_BASE_URL"


class OpenAIOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str | None = None
    # Local servers (Ollama, vLLM) take any key; the variable need not be set for them.
    key_required: bool = True
    timeout_s: float = Field(default=60.0, gt=0)
    # Receive each reply as server-sent events (plain replies and every step of an agent).
    stream: bool = False
    response_schema: dict[str, Any] | None = None
    retry: RetryPolicy = RetryPolicy()


def _kind(exc: Exception) -> ErrorKind:
    if isinstance(exc, openai.RateLimitError):
        return "rate_limit"
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.APIStatusError):
        return cast(ErrorKind, kind_for_status(exc.status_code))
    return "malformed"


class OpenAIBackend:
    name: ClassVar[str] = "openai"
    offline: ClassVar[bool] = False

    def __init__(self, settings: ModelSettings, context: BackendContext) -> None:
        self.options = parse_options(OpenAIOptions, settings.options)
        key = context.env.get(KEY_VARIABLE, "")
        if not key and self.options.key_required:
            raise BackendError(
                f"the openai backend needs an API key: set {KEY_VARIABLE}",
                fix="for a local server set options.key_required: false; or use `backend: fake`",
            )
        # The SDK's own HTTP client, verifying with a context of ours (backends/tls.py): made
        # while the cases were read, and a CA bundle that cannot be read is one error here.
        http = openai.DefaultHttpxClient(verify=take_tls(context.env))
        weakref.finalize(self, http.close)
        self.client = openai.OpenAI(
            api_key=key or "unused",
            base_url=self.options.base_url or context.env.get(BASE_URL_VARIABLE) or None,
            max_retries=0,
            timeout=self.options.timeout_s,
            http_client=http,
        )
        self.retrier = Retrier(self.options.retry)
        self.context = context

    def close(self) -> None:
        self.client.close()

    def params(self, request: Request) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages += [{"role": m.role, "content": m.content} for m in request.messages]
        params: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
        }
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if self.options.response_schema is not None:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": self.options.response_schema},
            }
        if request.agent is not None:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.agent.tools
            ]
        return params

    def _once(self, params: dict[str, Any]) -> Attempt:
        started = time.perf_counter()
        try:
            if self.options.stream:
                # The SDK's accumulator joins the content and each tool call's argument
                # pieces (by index) into one completion; usage comes in the last chunk.
                with self.client.chat.completions.stream(
                    **params, stream_options={"include_usage": True}
                ) as stream:
                    completion = stream.get_final_completion()
            else:
                completion = self.client.chat.completions.create(**params)
            choice = completion.choices[0]
        except (openai.APIError, ValueError, IndexError) as exc:
            retry_after = None
            response = getattr(exc, "response", None)
            if response is not None and response.headers.get("retry-after"):
                try:
                    retry_after = float(response.headers["retry-after"])
                except ValueError:
                    retry_after = None
            return Attempt(
                kind=_kind(exc),
                message=_message(exc),
                retry_after_s=retry_after,
                elapsed_s=time.perf_counter() - started,
            )
        return Attempt(value=(completion, choice), elapsed_s=time.perf_counter() - started)

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
        if result.kind is not None:
            return Reply(
                error=result.message,
                error_kind=result.kind,
                latency_s=result.elapsed_s,
                attempts=attempts,
            )
        completion, choice = cast(tuple[Any, Any], result.value)
        return _reply(completion, choice, result.elapsed_s, attempts)


def _message(exc: Exception) -> str:
    """The status, error type and what the API said; never its whole body (which
    ``str(exc)`` quotes, and which a proxy may fill with the request's headers)."""
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        message = body.get("message") if isinstance(body, dict) else body
        return upstream_error(exc.status_code, exc.type or exc.code, message)
    return upstream_error(None, type(exc).__name__, exc)


_STOPS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _reply(completion: Any, choice: Any, latency: float, attempts: int) -> Reply:
    usage = completion.usage
    cached = 0
    details = getattr(usage, "prompt_tokens_details", None) if usage else None
    if details is not None and getattr(details, "cached_tokens", None):
        cached = int(details.cached_tokens)
    return Reply(
        text=choice.message.content or "",
        input_tokens=(usage.prompt_tokens - cached) if usage else 0,
        output_tokens=usage.completion_tokens if usage else 0,
        cache_read_tokens=cached,
        latency_s=latency,
        stop_reason=_STOPS.get(choice.finish_reason or "") or choice.finish_reason,
        attempts=attempts,
    )


BAD_ARGUMENTS = "error: the call's arguments were not a JSON object"


class _Session:
    """One agent case on chat completions: tool_calls in, role "tool" messages back."""

    def __init__(self, backend: OpenAIBackend, request: Request) -> None:
        self.backend = backend
        self.params = backend.params(request)
        self.message: dict[str, Any] = {}
        self.unreadable: set[str] = set()

    def send(self) -> Turn:
        result, attempts = self.backend.retrier.run(lambda: self.backend._once(self.params))
        if result.kind is not None:
            return Turn.failed(result.message, result.kind, result.elapsed_s, attempts)
        completion, choice = cast(tuple[Any, Any], result.value)
        reply = _reply(completion, choice, result.elapsed_s, attempts)
        calls: list[ToolCall] = []
        raw_calls = choice.message.tool_calls or []
        for call in raw_calls:
            if not re.fullmatch(TOOL_NAME_PATTERN, call.function.name or ""):
                # No tool has that name: the server's answer is malformed, not the model's.
                shown = (call.function.name or "")[:80]
                return Turn.failed(
                    f"the server answered a call of a tool named {shown!r}, which no tool can be",
                    "malformed",
                    result.elapsed_s,
                    attempts,
                )
            try:
                args = json.loads(call.function.arguments or "{}")
            except ValueError:
                args = None
            if not isinstance(args, dict):
                # A model's malformed arguments are its answer, scored (input checks fail),
                # not an error of the run: the call is recorded with an empty input.
                self.unreadable.add(call.id)
                args = {}
            calls.append(ToolCall(name=call.function.name, input=args, id=call.id))
        self.message = {"role": "assistant", "content": choice.message.content}
        if raw_calls:
            self.message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in raw_calls
            ]
        return Turn.of(reply, calls, attempts)

    def answer(self, turn: Turn, records: list[CallRecord]) -> None:
        for call, record in zip(turn.calls, records, strict=True):
            if call.id in self.unreadable:
                record.status = "error"
                record.result = BAD_ARGUMENTS
        self.params["messages"] = [
            *self.params["messages"],
            self.message,
            *(
                {"role": "tool", "tool_call_id": call.id, "content": record.result or ""}
                for call, record in zip(turn.calls, records, strict=True)
            ),
        ]
