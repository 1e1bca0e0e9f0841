"""The agent loop: send, answer the model's tool calls, send again, until it stops calling tools.

One loop for every backend that speaks tool use (the fake, anthropic, openai): a backend
supplies a *session* that sends the conversation so far and appends what the tools answered,
in its own API's format; this module decides what each call is answered with and when to stop.

How a call is answered (the documented rule, docs/agents.md):

1. the case's fixtures for that tool, first entry whose ``when`` is a subset of the input;
2. else the suite's ``agent.tool_command``, run with the call as JSON on stdin;
3. else, by ``agent.on_missing_fixture``: ``unavailable`` (the default) sends the model an
   error result saying the tool is unavailable and records the call as ``missing``; ``error``
   makes the case an error. A result is never invented.

A call to a tool the suite does not offer is answered with an error result and recorded as
``unknown``. A tool command that fails, hangs or answers the wrong shape makes the case an
error, and so does a model still calling tools after ``agent.max_steps`` model calls.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from evalgate.backends.base import ErrorKind, Reply
from evalgate.backends.program import ProgramTimeout, run_program
from evalgate.limits import PROGRAM_OUTPUT
from evalgate.redact import redacted_excerpt
from evalgate.trajectory import AgentSpec, CallRecord, Step, ToolCall, json_subset, result_text

UNAVAILABLE = "error: this tool is unavailable (no fixture answers this call)"
UNKNOWN = "error: there is no tool named {name!r}"


# What checks a text before the loop sends it on (a tool's result, a tool command's stdin):
# set by the holdout guard (backends/guarded.py) around a guarded call; it returns the refusal
# line, or None when the text may go.
OUTGOING: ContextVar[Callable[[str, str], str | None] | None] = ContextVar(
    "evalgate_outgoing", default=None
)


class ToolFault(Exception):
    """A call that makes the case an error (a failing tool command, a missing fixture)."""

    kind: ErrorKind = "tool"


class NotSent(ToolFault):
    """The holdout guard refused a text the loop was about to send."""

    kind: ErrorKind = "holdout"


def _outgoing(what: str, text: str) -> None:
    check = OUTGOING.get()
    refusal = check(what, text) if check is not None else None
    if refusal is not None:
        raise NotSent(refusal)


@dataclass
class Turn:
    """One model call's answer, as a session reports it."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    latency_s: float = 0.0
    stop_reason: str | None = None
    attempts: int = 1
    error: str | None = None
    error_kind: ErrorKind | None = None

    @classmethod
    def of(cls, reply: Reply, calls: list[ToolCall], attempts: int) -> Turn:
        """A model call's answer: the reply's text and usage, and the tool calls it made."""
        return cls(
            text=reply.text,
            calls=calls,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cache_write_tokens=reply.cache_write_tokens,
            cache_read_tokens=reply.cache_read_tokens,
            latency_s=reply.latency_s,
            stop_reason=reply.stop_reason,
            attempts=attempts,
        )

    @classmethod
    def failed(cls, message: str | None, kind: str, elapsed_s: float, attempts: int) -> Turn:
        """A model call that failed after the retries: an error, never an answer."""
        return cls(
            error=message,
            error_kind=cast(ErrorKind, kind),
            latency_s=elapsed_s,
            attempts=attempts,
        )


class Session(Protocol):
    def send(self) -> Turn:
        """One model call with the conversation so far."""
        ...

    def answer(self, turn: Turn, records: list[CallRecord]) -> None:
        """Append the model's turn and the tools' results (in the order of ``turn.calls``)."""
        ...


def _fixture(spec: AgentSpec, call: ToolCall) -> dict[str, Any] | None:
    entries = spec.fixtures.get(call.name)
    if entries is None:
        return None
    for entry in entries if isinstance(entries, list) else [entries]:
        if json_subset(entry.get("when") or {}, call.input):
            return dict(entry)
    return None


def _command(
    spec: AgentSpec, call: ToolCall, case_id: str, cwd: Path, env: Mapping[str, str]
) -> CallRecord:
    assert spec.tool_command is not None
    payload = json.dumps({"case_id": case_id, "name": call.name, "input": call.input})
    shown = f"tool command for {call.name}"
    _outgoing("the tool command's input", payload)
    try:
        done = run_program(
            spec.tool_command, stdin=payload, timeout_s=spec.tool_timeout_s, cwd=cwd, env=env
        )
    except ProgramTimeout:
        raise ToolFault(f"{shown} timed out after {spec.tool_timeout_s:g}s") from None
    except OSError as exc:
        raise ToolFault(
            f"cannot run the {shown} ({spec.tool_command[0]!r}): {exc.strerror}"
        ) from None
    if done.overflowed:
        raise ToolFault(
            f"{shown} printed more than {PROGRAM_OUTPUT:,} bytes: a tool's result must be "
            "shorter (it is sent to the model)"
        )
    if done.returncode != 0:
        raise ToolFault(
            f"{shown} exited with code {done.returncode}; stderr: "
            f"{redacted_excerpt(done.stderr, tail=True)}"
        )
    out = done.stdout.strip()
    try:
        data = json.loads(out)
    except ValueError:
        raise ToolFault(
            f'{shown} printed no JSON: it must print {{"result": ...}} or {{"error": "..."}}, '
            f"found {out[:80]!r}"
        ) from None
    if isinstance(data, dict) and set(data) == {"result"}:
        return CallRecord(name=call.name, input=call.input, result=result_text(data["result"]))
    if isinstance(data, dict) and set(data) == {"error"} and isinstance(data["error"], str):
        return CallRecord(name=call.name, input=call.input, result=data["error"], status="error")
    raise ToolFault(
        f'{shown} printed the wrong shape: it must print {{"result": ...}} or '
        f'{{"error": "..."}}, found {out[:80]!r}'
    )


def resolve(
    spec: AgentSpec, call: ToolCall, case_id: str, cwd: Path, env: Mapping[str, str]
) -> CallRecord:
    """What one call is answered with, by the rule in the module's docstring."""
    if call.name not in spec.tool_names():
        return CallRecord(
            name=call.name,
            input=call.input,
            result=UNKNOWN.format(name=call.name),
            status="unknown",
        )
    entry = _fixture(spec, call)
    if entry is not None:
        if "error" in entry:
            return CallRecord(
                name=call.name, input=call.input, result=str(entry["error"]), status="error"
            )
        return CallRecord(name=call.name, input=call.input, result=result_text(entry["result"]))
    if spec.tool_command is not None:
        return _command(spec, call, case_id, cwd, env)
    if spec.on_missing_fixture == "error":
        raise ToolFault(
            f"no fixture answers the call {call.name}({json.dumps(call.input, sort_keys=True)})"
            " (agent.on_missing_fixture: error)"
        )
    return CallRecord(name=call.name, input=call.input, result=UNAVAILABLE, status="missing")


def run_agent(
    session: Session,
    spec: AgentSpec,
    *,
    case_id: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
) -> Reply:
    """Run the loop; a Reply whose text is the final answer and whose steps are every call.

    Tokens, cost and latency are summed over steps; attempts too (each step's retries count).
    A failed step ends the loop with the steps so far kept, so a report can show them.
    """
    steps: list[Step] = []
    total = Turn(attempts=0)
    started = time.perf_counter()

    def reply(**fields: Any) -> Reply:
        return Reply(
            input_tokens=total.input_tokens,
            output_tokens=total.output_tokens,
            cache_write_tokens=total.cache_write_tokens,
            cache_read_tokens=total.cache_read_tokens,
            latency_s=total.latency_s or time.perf_counter() - started,
            attempts=max(1, total.attempts),
            steps=steps,
            **fields,
        )

    for _ in range(spec.max_steps):
        turn = session.send()
        total.input_tokens += turn.input_tokens
        total.output_tokens += turn.output_tokens
        total.cache_write_tokens += turn.cache_write_tokens
        total.cache_read_tokens += turn.cache_read_tokens
        total.latency_s += turn.latency_s
        total.attempts += turn.attempts
        if turn.error is not None:
            where = f" (step {len(steps) + 1})" if steps else ""
            return reply(error=turn.error + where, error_kind=turn.error_kind or "other")
        step = Step(
            text=turn.text,
            input_tokens=turn.input_tokens,
            output_tokens=turn.output_tokens,
            latency_s=round(turn.latency_s, 4),
            stop_reason=turn.stop_reason,
        )
        steps.append(step)
        if not turn.calls:
            return reply(text=turn.text, stop_reason=turn.stop_reason)
        try:
            for call in turn.calls:
                step.calls.append(resolve(spec, call, case_id, cwd, env or {}))
            for record in step.calls:
                _outgoing("tool results", record.result or "")
        except ToolFault as exc:
            return reply(error=str(exc), error_kind=exc.kind)
        session.answer(turn, step.calls)
    return reply(
        error=f"the model was still calling tools after agent.max_steps ({spec.max_steps}) "
        "model calls",
        error_kind="max_steps",
    )
