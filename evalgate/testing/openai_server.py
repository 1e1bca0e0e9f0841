"""A small loopback stand-in of the OpenAI chat completions API, for the openai backend's tests.

It answers ``POST /v1/chat/completions`` like the fake model (``fake_answer``), in the
documented response shape, and plays a script of faults: ``"429"`` (with ``retry-after``),
``"500"``, ``"401"``, ``"404"`` or ``"ok"``, one per request, in order.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from evalgate.backends.base import Message, Request
from evalgate.backends.fake import FakeRules, fake_answer, rough_tokens


class OpenAIServer:
    def __init__(self, rules: FakeRules, *, retry_after_s: float = 0.0) -> None:
        self.rules = rules
        self.retry_after_s = retry_after_s
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
            return status, {"error": {"message": code, "type": code, "code": code}}, headers
        messages = body.get("messages", [])
        system = "".join(m["content"] for m in messages if m["role"] == "system")
        turns = tuple(
            Message(role=m["role"], content=m["content"])
            for m in messages
            if m["role"] in ("user", "assistant")
        )
        request = Request(system=system, messages=turns, model=body.get("model", ""))
        text = fake_answer(request, self.rules)
        prompt = rough_tokens(system + "".join(m.content for m in turns))
        return (
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
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
