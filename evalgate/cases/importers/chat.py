"""Chat-message inputs (OpenAI evals, Inspect): the user turn, the earlier turns, the system text.

evalgate sends one system prompt (the prompt file, the part a pull request changes) and one user
turn (the template). A sample's system message belongs in the prompt file, so it is reported
with its text; earlier turns are kept on the case, not sent.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from evalgate.cases.importers.core import Draft, Notes, Source
from evalgate.errors import CaseFileError

# OpenAI evals' names of few-shot system messages -> the turn they stand for.
FEW_SHOT = {"example_user": "user", "example_assistant": "assistant"}
HISTORY_FIX = (
    "kept as the case's 'history' field, not sent; to send it, add history to fields.input and "
    "{{ history }} to the template"
)


def content_text(value: Any, where: str, notes: Notes) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for part in value:
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                notes.add(
                    f"message part of type {kind!r}",
                    "evalgate sends text only; the part is left out and the sample is not "
                    "scored (a score would be of a question without its image)",
                    where,
                )
        return "\n".join(texts)
    raise CaseFileError(
        f"a message's content must be text, found {type(value).__name__}", where=where
    )


def lost_parts(value: Any) -> str | None:
    """Why a sample cannot be scored faithfully: its messages carry parts that are not text
    (Inspect's and OpenAI's image, audio, video parts), which evalgate does not send."""
    if not isinstance(value, list):
        return None
    kinds: list[str] = []
    for message in value:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            if not (isinstance(part, dict) and part.get("type") == "text"):
                kind = str(part.get("type")) if isinstance(part, dict) else type(part).__name__
                kinds += [kind] if kind not in kinds else []
    if not kinds:
        return None
    return f"its input has {', '.join(kinds)} parts, which evalgate does not send"


def user_turn(
    value: Any, where: str, notes: Notes, systems: Counter[str]
) -> tuple[str, dict[str, Any]]:
    """(the user turn, extra fields) from a string or a list of chat messages."""
    if isinstance(value, str):
        return value, {}
    if not isinstance(value, list) or not value:
        raise CaseFileError(
            "'input' must be a string or a non-empty list of chat messages",
            where=where,
            fix='write it as "text" or [{"role": "user", "content": "text"}]',
        )
    turns: list[tuple[str, str]] = []
    for message in value:
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise CaseFileError(
                "each chat message needs 'role' and 'content'",
                where=where,
                fix='write messages as {"role": "user", "content": "..."}',
            )
        role = str(message["role"])
        # OpenAI evals' few-shot turns: system messages named example_user / example_assistant
        # (evals' chat prompts), sent to the model as the user's and the assistant's turns.
        named = FEW_SHOT.get(str(message.get("name"))) if role == "system" else None
        turns.append(
            (f"few-shot {named}" if named else role, content_text(message["content"], where, notes))
        )
    if all(role in ("system", "developer") for role, _ in turns):
        # A sample of system messages only (evals' logic samples): they are the question.
        notes.add(
            "sample of system messages only",
            "its text is the case's input, sent as the user turn (evalgate's system prompt is "
            "the prompt file)",
            where,
        )
        return "\n\n".join(text for _, text in turns), {}
    system = [text for role, text in turns if role in ("system", "developer")]
    if system:
        systems["\n\n".join(system)] += 1
    rest = [(role, text) for role, text in turns if role not in ("system", "developer")]
    if not rest or rest[-1][0] not in ("user", "few-shot user"):
        raise CaseFileError(
            "the chat messages do not end with a user turn",
            where=where,
            fix="the last message should be the user's, the one the model answers",
        )
    extra: dict[str, Any] = {}
    prior = [(role.removeprefix("few-shot "), text) for role, text in rest[:-1]]
    few_shot = any(role.startswith("few-shot ") for role, _ in rest[:-1])
    if few_shot and _alternate(prior):
        extra["messages"] = [{"role": role, "content": text} for role, text in prior]
        notes.map("few-shot example_user / example_assistant", "messages (sent as turns)")
    elif prior:
        extra["history"] = "\n".join(f"{role}: {text}" for role, text in prior)
        notes.add("earlier turns (few-shot or multi-turn)", HISTORY_FIX, where)
    return rest[-1][1], extra


def _alternate(turns: list[tuple[str, str]]) -> bool:
    """Turns evalgate can send before the user turn: user, assistant, ... ending assistant."""
    roles = [role for role, _ in turns]
    want = ["user", "assistant"] * (len(roles) // 2)
    return bool(roles) and roles == want


def report_systems(source: Source, systems: Counter[str]) -> None:
    """Report system messages once: the prompt file to write, and how many samples differ."""
    if not systems:
        return
    total = sum(systems.values())
    text, most = systems.most_common(1)[0]
    source.notes.add(
        "system message",
        "evalgate's system prompt is the prompt file: write it into prompts/v1.txt (see the "
        "hint below); the case keeps only the user turn",
        count=total,
    )
    if len(systems) > 1:
        source.notes.add(
            "different system messages",
            f"{len(systems)} different texts; a suite has one system prompt per version, so "
            "split the cases into one suite per system prompt, or keep the most common",
            count=total - most,
        )
    shown = text if len(text) <= 600 else text[:600] + " [...]"
    source.hints.append(
        f"{most} of the {source.read} {source.noun} carry this system message; save it as "
        f"prompts/v1.txt:\n{shown}"
    )


def chat_source(
    format: str,
    path: Path,
    drafts: list[Draft],
    notes: Notes,
    read: int,
    id_prefix: str,
    systems: Counter[str],
) -> Source:
    """The Source of one file of chat samples (OpenAI evals, Inspect), its system messages
    reported once."""
    source = Source(
        format=format,
        path=path,
        noun="samples",
        drafts=drafts,
        notes=notes,
        files=[path],
        read=read,
        id_prefix=id_prefix,
    )
    report_systems(source, systems)
    return source
