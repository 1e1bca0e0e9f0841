"""The command backend: the system under test as a black box.

evalgate runs the user's program once per case, with the case as JSON on stdin, and reads the
reply from stdout. A timeout or a non-zero exit is an error carrying the program's stderr tail.
Teams whose prompt lives inside an application can gate the application.

stdin: ``{"id", "input", "system", "messages", "model", "max_tokens", "temperature"}``.
stdout: the reply text, or a JSON object ``{"text": ..., "input_tokens": ..., "output_tokens":
..., "stop_reason": ...}`` when the program wants to report usage.

Agent suites (``tools:``): stdin also has ``tools`` and the case's ``fixtures``, and the program
runs its own agent. It reports what it did as ``"tool_calls": [{"name": ..., "input": {...}}]``
(one step) or ``"steps": [{"text": ..., "tool_calls": [{"name", "input", "result"}]}, ...]``
(one per model call, when it has them). A reply with these keys in the wrong shape is an error
that says what is wrong; a reply with neither has no trajectory (a format failure).
A plain JSON reply's field of the wrong type (``{"text": 5}``) is an error of that case,
with the field and what it was.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from evalgate.backends.base import BackendContext, Reply, Request, parse_options
from evalgate.config.models import ModelSettings
from evalgate.errors import BackendError
from evalgate.redact import redacted_excerpt
from evalgate.trajectory import CallRecord, Step, result_text

STDERR_TAIL = 500


class CommandOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: list[str] | str = Field(description="argv list, or a string split like a shell")
    timeout_s: float = Field(default=60.0, gt=0)
    # Extra environment variables for the program (the rest is inherited).
    env: dict[str, str] = {}


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
        if request.agent is not None:
            payload["tools"] = [t.model_dump() for t in request.agent.tools]
            payload["fixtures"] = request.agent.fixtures
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
                error=f"timed out after {self.options.timeout_s:g}s; stderr: {redacted_excerpt(text, tail=True)}",
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
                error=f"exit code {done.returncode}; stderr: {redacted_excerpt(done.stderr, tail=True)}",
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
    if isinstance(data, dict) and ("tool_calls" in data or "steps" in data):
        try:
            steps = trajectory_of(data)
        except ValueError as exc:
            return Reply(
                error=f"the program's reply has the wrong shape: {exc}",
                error_kind="malformed",
                latency_s=latency,
            )
        said = data.get("text")
        return Reply(
            text=said if isinstance(said, str) else (steps[-1].text if steps else ""),
            input_tokens=int(data.get("input_tokens") or sum(s.input_tokens for s in steps)),
            output_tokens=int(data.get("output_tokens") or sum(s.output_tokens for s in steps)),
            stop_reason=data.get("stop_reason") or "end_turn",
            latency_s=latency,
            steps=steps,
        )
    if isinstance(data, dict) and "text" in data:
        problem = _reply_problem(data)
        if problem is not None:
            return Reply(
                error=f"the program's JSON reply {problem}; stdout: {redacted_excerpt(text)}",
                error_kind="command",
                latency_s=latency,
            )
        return Reply(
            text=data["text"],
            input_tokens=data.get("input_tokens") or 0,
            output_tokens=data.get("output_tokens") or 0,
            stop_reason=data.get("stop_reason") or "end_turn",
            latency_s=latency,
        )
    return Reply(text=text, stop_reason="end_turn", latency_s=latency)


_CALL_KEYS = frozenset({"name", "input", "result", "id"})
_STEP_KEYS = frozenset({"text", "tool_calls", "input_tokens", "output_tokens", "stop_reason"})


def _calls(raw: Any, where: str) -> list[CallRecord]:
    if not isinstance(raw, list):
        raise ValueError(f"{where} must be a list, found {type(raw).__name__}")
    calls: list[CallRecord] = []
    for i, call in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(call, dict):
            raise ValueError(f"{at} must be an object, found {type(call).__name__}")
        unknown = set(call) - _CALL_KEYS
        if unknown:
            raise ValueError(
                f"{at} has unknown key {sorted(unknown)[0]!r} (allowed: name, input, result)"
            )
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{at}.name must be a non-empty string")
        args = call.get("input", {})
        if not isinstance(args, dict):
            raise ValueError(f"{at}.input must be an object, found {type(args).__name__}")
        result = call.get("result")
        calls.append(
            CallRecord(
                name=name, input=args, result=None if result is None else result_text(result)
            )
        )
    return calls


def trajectory_of(data: dict[str, Any]) -> list[Step]:
    """The steps a program reports: ``steps``, or ``tool_calls`` as one step. ValueError
    (saying what is wrong) for the wrong shape."""
    if "steps" in data and "tool_calls" in data:
        raise ValueError("give 'steps' or 'tool_calls', not both")
    text = data.get("text")
    if text is not None and not isinstance(text, str):
        raise ValueError(f"text must be a string, found {type(text).__name__}")
    if "tool_calls" in data:
        return [Step(text=text or "", calls=_calls(data["tool_calls"], "tool_calls"))]
    raw = data["steps"]
    if not isinstance(raw, list):
        raise ValueError(f"steps must be a list, found {type(raw).__name__}")
    steps: list[Step] = []
    for i, step in enumerate(raw):
        if not isinstance(step, dict):
            raise ValueError(f"steps[{i}] must be an object, found {type(step).__name__}")
        unknown = set(step) - _STEP_KEYS
        if unknown:
            raise ValueError(
                f"steps[{i}] has unknown key {sorted(unknown)[0]!r} "
                "(allowed: text, tool_calls, input_tokens, output_tokens, stop_reason)"
            )
        said = step.get("text", "")
        if not isinstance(said, str):
            raise ValueError(f"steps[{i}].text must be a string")
        tokens = [step.get(k, 0) for k in ("input_tokens", "output_tokens")]
        if not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in tokens):
            raise ValueError(f"steps[{i}]: token counts must be whole numbers")
        steps.append(
            Step(
                text=said,
                calls=_calls(step.get("tool_calls", []), f"steps[{i}].tool_calls"),
                input_tokens=tokens[0],
                output_tokens=tokens[1],
                stop_reason=step.get("stop_reason"),
            )
        )
    return steps


# The JSON reply's fields and the types they must have; any other key is the program's own.
_REPLY_TYPES: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "input_tokens": (int, type(None)),
    "output_tokens": (int, type(None)),
    "stop_reason": (str, type(None)),
}
_TYPE_NAMES = {str: "a string", int: "a whole number", type(None): "null"}


def _reply_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with a JSON reply's known fields, or None (``{"text": 5}`` is an error,
    not the text "5": a program that means a number should say so in the text)."""
    for key, types in _REPLY_TYPES.items():
        if key not in data:
            continue
        value = data[key]
        # bool is an int to Python, never a token count.
        if isinstance(value, bool) or not isinstance(value, types):
            wanted = " or ".join(_TYPE_NAMES[t] for t in types)
            return f'has "{key}": {json.dumps(value)[:40]} ({type(value).__name__}), not {wanted}'
        if key.endswith("_tokens") and isinstance(value, int) and value < 0:
            return f'has "{key}": {value}, a negative count'
    return None
