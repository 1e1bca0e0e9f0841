"""An agent's trajectory: the tools a suite offers, the calls a model made, the steps of a run.

Pure data and small pure functions (no backend, no I/O), shared by the agent loop, the
backends, the scorers and the reports. A *step* is one model call; its *calls* are the tool
calls that call asked for, each with the result the model was sent back.
"""

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalgate.redact import RedactedReply

# The Messages API's rule for a tool's name (OpenAI's is the same).
TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
ARROW = " → "

# ok: answered by a fixture or the tool command; error: the fixture or the command answered
# with an error (sent to the model as one); missing: no fixture matched and no tool command,
# answered "unavailable"; unknown: the model called a tool the suite does not offer.
CallStatus = Literal["ok", "error", "missing", "unknown"]
MissingRule = Literal["unavailable", "error"]


class ToolSpec(BaseModel):
    """A tool as the Messages API takes it: name, description, JSON schema of the input."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class AgentSpec(BaseModel):
    """What an agent case adds to a request: the tools, the case's fixtures, the loop's rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: tuple[ToolSpec, ...]
    # tool name -> one fixture entry or a list of them (see cases.parse_fixtures).
    fixtures: dict[str, Any] = {}
    max_steps: int = Field(default=10, ge=1)
    on_missing_fixture: MissingRule = "unavailable"
    tool_command: tuple[str, ...] | None = None
    tool_timeout_s: float = Field(default=30.0, gt=0)
    # What the tools and the tool command's files hash to: part of the response cache's key.
    tools_sha256: str | None = None

    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]


class ToolCall(BaseModel):
    """One call a model asked for (its id is the API's ``tool_use`` id, when it has one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    input: dict[str, Any] = {}
    id: str = ""


class CallRecord(BaseModel):
    """A call and what it was answered with, as the run file keeps it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    input: dict[str, Any] = {}
    # The text sent back to the model as the tool's result (a tool may print a key it can
    # read: the held secrets never reach the run file).
    result: RedactedReply | None = None
    status: CallStatus = "ok"


class Step(BaseModel):
    """One model call of an agent loop."""

    model_config = ConfigDict(extra="forbid")

    text: RedactedReply = ""
    calls: list[CallRecord] = []
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    stop_reason: str | None = None


def calls_of(steps: Sequence[Step]) -> list[CallRecord]:
    """Every call of a trajectory, in the order they were made."""
    return [call for step in steps for call in step.calls]


def show_names(names: Sequence[str]) -> str:
    """``lookup_order → issue_refund``; ``(no tool calls)`` for none."""
    return ARROW.join(names) if names else "(no tool calls)"


def show_calls(steps: Sequence[Step]) -> str:
    return show_names([c.name for c in calls_of(steps)])


def result_text(value: Any) -> str:
    """A fixture's result as the text a tool sends back: strings as they are, the rest JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def json_subset(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` contains ``expected``: objects by key (extra keys allowed), lists
    element by element (same length), scalars by equality (``True`` is not ``1``)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and json_subset(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(json_subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    return bool(expected == actual)


def show_args(value: Any) -> str:
    """``order_id='A1', amount=5`` for a call's input."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={v!r}" for k, v in value.items())
    return repr(value)


def show_step(raw: Any) -> str:
    """One expected step as reports show it: ``issue_refund(order_id='A1')``."""
    if isinstance(raw, dict) and isinstance(raw.get("name"), str):
        if isinstance(raw.get("input"), dict):
            return f"{raw['name']}({show_args(raw['input'])})"
        if "input_schema" in raw:
            return f"{raw['name']}(input matching a schema)"
        return str(raw["name"])
    return str(raw)


def show_expected(value: Any) -> Any:
    """An agent case's expected answer as reports show it, else the value unchanged.

    ``{"tool_sequence": [...], "tool_not_used": [...]}`` (the form Langfuse items and the
    support-agent example use) reads ``lookup_order → issue_refund(order_id='A1')``, with any
    other criteria after it."""
    if not isinstance(value, dict) or not isinstance(value.get("tool_sequence"), list):
        return value
    shown = show_names([show_step(s) for s in value["tool_sequence"]])
    others = [f"{k}: {v}" for k, v in value.items() if k != "tool_sequence"]
    return "; ".join([shown, *others])


def expected_label(value: Any) -> str:
    """The expected answer as a table cell: a label cut at the label cap, an agent case's
    expected trajectory at the message cap (a trajectory is a sentence, not a label)."""
    from evalgate.limits import MESSAGE, excerpt, label

    shown = show_expected(value)
    if shown is value:
        return label(value)
    return excerpt(str(shown), MESSAGE)
