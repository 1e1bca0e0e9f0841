"""A small loopback stand-in of the OpenAI chat completions API, for the openai backend's tests.

It answers ``POST /v1/chat/completions`` like the fake model (``fake_answer``), in the
documented response shape, and plays a script of faults: ``"429"`` (with ``retry-after``),
``"500"``, ``"401"``, ``"404"``, ``"bad-tool-name"`` (the call it answers names no possible
tool, as a misbehaving compatible server might) or ``"ok"``, one per request, in order.

With ``tools`` in the body it answers as the fake agent (``agent_turn``): an assistant message
with ``tool_calls`` (``finish_reason: tool_calls``, the arguments a JSON string), then reads the
``role: tool`` messages that answer them; an assistant's tool call left unanswered, or a tool
message answering no call, is a 400 as on the API.

With ``"stream": true`` it answers as the API streams: server-sent ``chat.completion.chunk``
events (the role first, the content in pieces, each tool call's id and name and then its
arguments in pieces under its ``index``, a last chunk with ``finish_reason``), a usage chunk
with empty ``choices`` when ``stream_options.include_usage`` is set, then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from evalgate.backends.base import Message, Request
from evalgate.backends.fake import FakeRules, agent_turn, fake_answer, rough_tokens
from evalgate.trajectory import AgentSpec, ToolCall, ToolSpec


class OpenAIServer:
    def __init__(self, rules: FakeRules, *, retry_after_s: float = 0.0) -> None:
        self.rules = rules
        self.retry_after_s = retry_after_s
        # Appended to every error message: what a proxy in front of the API may echo.
        self.echo_text = ""
        self.bodies: list[dict[str, Any]] = []
        self._script: deque[str] = deque()
        self._lock = threading.Lock()
        app = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, payload, headers = app._answer(self.path, body)
                if status == 200 and body.get("stream") is True:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    for event in stream_chunks(payload, include_usage):
                        line = f"data: {event}\n\n".encode()
                        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                    return
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, steps: Iterable[str]) -> None:
        with self._lock:
            self._script.extend(steps)

    def _answer(
        self, path: str, body: dict[str, Any]
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._lock:
            self.bodies.append(body)
            step = self._script.popleft() if self._script else "ok"
        if path != "/v1/chat/completions":
            return (
                404,
                {"error": {"message": f"no route {path}", "type": "invalid_request_error"}},
                {},
            )
        errors = {
            "429": (429, "rate_limit_exceeded", {"retry-after": f"{self.retry_after_s:g}"}),
            "500": (500, "server_error", {}),
            "401": (401, "invalid_api_key", {}),
            "404": (404, "model_not_found", {}),
        }
        if step in errors:
            status, code, headers = errors[step]
            message = f"{code} {self.echo_text}".strip()
            return status, {"error": {"message": message, "type": code, "code": code}}, headers
        messages = body.get("messages", [])
        system = "".join(m["content"] for m in messages if m["role"] == "system")
        turns = tuple(
            Message(role=m["role"], content=m.get("content") or "")
            for m in messages
            if m["role"] in ("user", "assistant")
        )
        try:
            history, extra = _tool_history(messages)
        except ValueError as exc:
            error = {"message": str(exc), "type": "invalid_request_error", "code": None}
            return 400, {"error": error}, {}
        tools = tuple(
            ToolSpec(
                name=t["function"]["name"],
                description=t["function"].get("description", ""),
                input_schema=t["function"].get("parameters") or {"type": "object"},
            )
            for t in body.get("tools") or []
        )
        request = Request(
            system=system,
            messages=turns,
            model=body.get("model", ""),
            agent=AgentSpec(tools=tools) if tools else None,
        )
        answer: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if request.agent is not None:
            move = agent_turn(request, history, self.rules)
            if isinstance(move, ToolCall):
                answer["tool_calls"] = [
                    {
                        "id": f"call_{uuid.uuid4().hex[:24]}",
                        "type": "function",
                        "function": {
                            "name": "look up\n::error::" if step == "bad-tool-name" else move.name,
                            "arguments": json.dumps(move.input),
                        },
                    }
                ]
                text = json.dumps(move.input)
                finish = "tool_calls"
            else:
                text = answer["content"] = move
        else:
            text = answer["content"] = fake_answer(request, self.rules)
        prompt = rough_tokens(system + "".join(m.content for m in turns) + extra)
        return (
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": answer, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": rough_tokens(text),
                    "total_tokens": prompt + rough_tokens(text),
                },
            },
            {},
        )

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _pieces(text: str, count: int = 3) -> list[str]:
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_chunks(completion: dict[str, Any], include_usage: bool) -> list[str]:
    """A chat completion as the API streams it: the data of each event, in order."""
    head = {k: completion[k] for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish}]
        return json.dumps({**head, "choices": choices})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in _pieces(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        start = {"index": index, "id": call["id"], "type": "function"}
        start["function"] = {"name": call["function"]["name"], "arguments": ""}
        events.append(chunk({"tool_calls": [start]}))
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(call["function"]["arguments"])
        ]
    events.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        events.append(json.dumps({**head, "choices": [], "usage": completion["usage"]}))
    events.append("[DONE]")
    return events


def _tool_history(
    messages: list[dict[str, Any]],
) -> tuple[list[tuple[str, dict[str, Any], str]], str]:
    """(name, input, result) of every answered tool call, and their text (input tokens)."""
    history: list[tuple[str, dict[str, Any], str]] = []
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    text = ""
    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise ValueError(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            name, args = pending.pop(call_id)
            result = str(message.get("content") or "")
            history.append((name, args, result))
            text += result
            continue
        if pending:
            raise ValueError(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}"
            )
        for call in message.get("tool_calls") or []:
            arguments = call["function"]["arguments"]
            pending[call["id"]] = (call["function"]["name"], json.loads(arguments))
            text += arguments
    if pending:
        raise ValueError(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(pending)}"
        )
    return history, text
