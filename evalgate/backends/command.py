"""The command backend: the system under test as a black box.

evalgate runs the user's program once per case, with the case as JSON on stdin, and reads the
reply from stdout. A timeout or a non-zero exit is an error carrying the program's stderr tail.
Teams whose prompt lives inside an application can gate the application.

stdin: ``{"id", "input", "system", "messages", "model", "max_tokens", "temperature"}``.
stdout: the reply text, or a JSON object ``{"text": ..., "input_tokens": ..., "output_tokens":
..., "stop_reason": ...}`` when the program wants to report usage.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from evalgate.backends.base import BackendContext, Reply, Request, parse_options
from evalgate.config import ModelSettings
from evalgate.errors import BackendError

STDERR_TAIL = 500


class CommandOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: list[str] | str = Field(description="argv list, or a string split like a shell")
    timeout_s: float = Field(default=60.0, gt=0)
    # Extra environment variables for the program (the rest is inherited).
    env: dict[str, str] = Field(default_factory=dict)


class CommandBackend:
    name: ClassVar[str] = "command"
    offline: ClassVar[bool] = False

    def __init__(self, settings: ModelSettings, context: BackendContext) -> None:
        self.options = parse_options(
            CommandOptions,
            settings.options,
            fix="the command backend needs options.command, e.g. [python, app.py]",
        )
        command = self.options.command
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise BackendError("model.options.command is empty")
        self.cwd = context.base_dir
        self.env = {**context.env, **self.options.env}

    def complete(self, request: Request) -> Reply:
        payload = {
            "id": request.case.get("id"),
            "input": request.case.get("input"),
            "system": request.system,
            "messages": [m.model_dump() for m in request.messages],
            "model": request.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        started = time.perf_counter()
        try:
            done = subprocess.run(
                self.argv,
                input=json.dumps(payload),
                capture_output=True,
                text=True,
                timeout=self.options.timeout_s,
                cwd=self.cwd,
                env=self.env,
            )
        except subprocess.TimeoutExpired as exc:
            tail = (exc.stderr or b"")[-STDERR_TAIL:]
            text = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
            return Reply(
                error=f"timed out after {self.options.timeout_s:g}s; stderr: {text.strip()}",
                error_kind="timeout",
                latency_s=time.perf_counter() - started,
            )
        except OSError as exc:
            raise BackendError(
                f"cannot run {self.argv[0]!r}: {exc.strerror}",
                fix="check model.options.command (it runs in the config's folder)",
            ) from None
        latency = time.perf_counter() - started
        if done.returncode != 0:
            return Reply(
                error=f"exit code {done.returncode}; stderr: {done.stderr[-STDERR_TAIL:].strip()}",
                error_kind="command",
                latency_s=latency,
            )
        return _parse_stdout(done.stdout, latency)


def _parse_stdout(stdout: str, latency: float) -> Reply:
    text = stdout.strip()
    data: Any = None
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    if isinstance(data, dict) and isinstance(data.get("text"), str):
        return Reply(
            text=data["text"],
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            stop_reason=data.get("stop_reason") or "end_turn",
            latency_s=latency,
        )
    return Reply(text=text, stop_reason="end_turn", latency_s=latency)
