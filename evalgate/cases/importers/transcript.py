"""Inspect samples whose input is a recorded agent transcript: tool calls and their results.

Inspect's chat messages (inspect_ai/model/_chat_message.py, tool/_tool_call.py): an assistant
message may carry ``tool_calls`` (``{id, function, arguments: {...}, parse_error?, type}``), and
each ``role: tool`` message answers one of them (``tool_call_id``, ``function``, ``content``,
``error: {type, message}``). Such a sample becomes an agent case: its earlier user and assistant
text is the case's ``messages``, and each recorded result answers the same call again as a
fixture (``when``: the call's arguments). evalgate's ``messages`` are text turns, so the earlier
tool exchange itself is not sent: that is reported, as is every result that cannot be replayed
as it was recorded.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from evalgate.cases.importers.chat import content_text
from evalgate.cases.importers.core import Notes
from evalgate.errors import CaseFileError

NOT_SENT = (
    "evalgate's messages are text turns: the earlier tool calls are not sent as such; their "
    "recorded results answer the same calls again as the case's fixtures"
)


def has_tool_calls(value: Any) -> bool:
    """Whether a sample's input is chat messages with tool calls or tool results."""
    return isinstance(value, list) and any(
        isinstance(m, dict) and (m.get("role") == "tool" or m.get("tool_calls")) for m in value
    )


def agent_turns(
    value: list[Any], where: str, notes: Notes, systems: Counter[str]
) -> tuple[str, dict[str, Any]]:
    """(the user turn, the extra fields: ``messages`` and ``fixtures``) of a transcript."""
    turns: list[tuple[str, str]] = []
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    fixtures: dict[str, list[dict[str, Any]]] = {}
    system: list[str] = []
    for i, message in enumerate(value):
        if not isinstance(message, dict) or "role" not in message:
            raise CaseFileError(
                f"input[{i}] must be a chat message with a 'role'",
                where=where,
                fix='write messages as {"role": "user", "content": "..."}',
            )
        role = str(message["role"])
        text = content_text(message.get("content") or "", where, notes)
        if role in ("system", "developer"):
            system.append(text)
        elif role == "tool":
            _answer(message, text, calls, fixtures, where, notes)
        elif role in ("user", "assistant"):
            if role == "assistant":
                for call in message.get("tool_calls") or []:
                    _record_call(call, calls, where, notes)
            if turns and turns[-1][0] == role:
                # Two turns of one role meet where a tool exchange was left out.
                joined = "\n\n".join(t for t in (turns[-1][1], text) if t)
                turns[-1] = (role, joined)
            else:
                turns.append((role, text))
        else:
            notes.add(
                f"message of role {role!r}",
                "left out: evalgate sends user and assistant turns",
                where,
            )
    if system:
        systems["\n\n".join(system)] += 1
    if not turns or turns[-1][0] != "user":
        raise CaseFileError(
            "the chat messages do not end with a user turn",
            where=where,
            fix="the last message should be the user's, the one the agent answers",
        )
    if turns[0][0] != "user":
        turns.insert(0, ("user", ""))
        notes.add(
            "transcript starting with the assistant",
            "an empty user turn was put first: evalgate's conversations start with the user",
            where,
        )
    unanswered = [name for name, _ in calls.values()]
    if unanswered:
        notes.add(
            "tool call without a recorded result",
            "no fixture for it: the call is answered by agent.tool_command or "
            "agent.on_missing_fixture, never invented",
            where,
            count=len(unanswered),
        )
    notes.add("tool calls in the input", NOT_SENT, where)
    notes.map("input (a transcript with tool calls)", "messages and fixtures of an agent case")
    extra: dict[str, Any] = {}
    if len(turns) > 1:
        extra["messages"] = [{"role": r, "content": t} for r, t in turns[:-1]]
    if fixtures:
        extra["fixtures"] = fixtures
    return turns[-1][1], extra


def _record_call(
    call: Any, calls: dict[str, tuple[str, dict[str, Any]]], where: str, notes: Notes
) -> None:
    if not isinstance(call, dict) or not isinstance(call.get("function"), str):
        raise CaseFileError(
            "a tool call must be an object with 'id', 'function' and 'arguments'",
            where=where,
            fix='write {"id": "call_1", "function": "lookup_order", "arguments": {...}}',
        )
    arguments = call.get("arguments")
    if call.get("parse_error") or not isinstance(arguments, dict):
        notes.add(
            "tool call with unreadable arguments",
            "its result cannot say which calls it answers: no fixture is made from it",
            where,
        )
        return
    calls[str(call.get("id", ""))] = (call["function"], arguments)


def _answer(
    message: dict[str, Any],
    text: str,
    calls: dict[str, tuple[str, dict[str, Any]]],
    fixtures: dict[str, list[dict[str, Any]]],
    where: str,
    notes: Notes,
) -> None:
    """A tool message: the recorded result of one earlier call, as a fixture of that tool."""
    call_id = message.get("tool_call_id")
    found = calls.pop(str(call_id), None) if call_id is not None else None
    if found is None and call_id is None and isinstance(message.get("function"), str):
        named = [k for k, (name, _) in calls.items() if name == message["function"]]
        if len(named) == 1:
            found = calls.pop(named[0])
    if found is None:
        notes.add(
            "tool result answering no recorded call",
            "left out: a fixture needs the call's tool and arguments",
            where,
        )
        return
    name, arguments = found
    error = message.get("error")
    entry: dict[str, Any] = {"when": arguments}
    if isinstance(error, dict) and error.get("message") is not None:
        entry["error"] = str(error["message"])
    else:
        entry["result"] = text
    entries = fixtures.setdefault(name, [])
    same = [e for e in entries if e["when"] == arguments]
    if same:
        if any(e != entry for e in same):
            notes.add(
                "the same call recorded with another result",
                "the first recorded result answers it (a fixture answers by the call's input)",
                where,
            )
        return
    if not arguments:
        notes.add(
            "tool call without arguments",
            f"its result answers every later call of {name} ('when' is empty)",
            where,
        )
    entries.append(entry)
