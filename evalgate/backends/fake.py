"""The fake backend: a deterministic, offline stand-in for a classifier model.

It exists so that anyone can try evalgate without a key or a network, and so that tests of
the bench do not depend on a model. Its numbers test the bench, not a model or a prompt.

Behaviour (the rules themselves come from the suite's config or a data file):

* it reads the message between ``<message>`` and ``</message>`` in the last user turn (the
  whole turn when there are no tags) and labels it with the first rule that has a matching
  phrase (case-insensitive substring), else the default label;
* when the system prompt does not name every label as a whole word, it answers in its own
  words (the rule's alias), as a real model does when nobody gave it the list;
* it replies ``{"category": "<label>"}`` when the system prompt contains ``JSON``, else
  ``Category: <label>.``.

Agent mode (a suite with ``tools:``): the first ``agents`` rule with a phrase in the user turns
gives a plan of tool calls, made one a model call, then the rule's reply. A planned step with
``if_prompt`` is taken only when the system prompt contains that phrase (else its
``otherwise`` step, if any); one with ``if_result`` only when an earlier call's result contains
that phrase. So a prompt version that drops an instruction drops the calls that depend on it,
as a real model would, and the fixtures' results steer the plan. Each next call is a pure
function of the conversation so far, which the Messages stand-in shares.

As a judge (``judge_rules`` or ``judge_rules_file`` instead of ``rules``), it reads the judge
request's ``<reply>`` and ``<rubric>`` and answers ``{"score": ..., "reason": ...}`` from the
first rule whose phrase the reply contains, among the rules whose ``rubric`` phrase (if any) the
rubric contains: a judge that reads its rubric, so a changed rubric changes its verdicts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evalgate import files
from evalgate.backends.agent import Turn, run_agent
from evalgate.backends.base import BackendContext, Reply, Request
from evalgate.config.load import load_yaml
from evalgate.config.models import ModelSettings
from evalgate.errors import BackendError, describe_validation, from_validation
from evalgate.trajectory import CallRecord, ToolCall

_MESSAGE = re.compile(r"<message>(.*?)</message>", re.DOTALL | re.IGNORECASE)


class FakeRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str
    phrases: list[str] = Field(min_length=1)
    alias: str | None = None


class FakeStep(BaseModel):
    """One planned tool call of an agent rule."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    # The call's input; "{name}" in a string is replaced by the rule's extracted value.
    input: dict[str, Any] = {}
    # Taken only when the system prompt contains this phrase (case-insensitive).
    if_prompt: str | None = None
    # Taken only when an earlier call's result contains this phrase (case-insensitive).
    if_result: str | None = None
    # The step taken instead when a condition fails (none: the step is skipped).
    otherwise: FakeStep | None = None


class AgentRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Names the rule in the stand-in's flips (another rule's plan replaces this one's).
    name: str
    phrases: list[str] = Field(min_length=1)
    steps: list[FakeStep] = []
    # The final answer after the calls ("{name}" replaced as in inputs).
    reply: str = "Done."
    # Values read from the user turns: name -> a regex whose first group is the value.
    extract: dict[str, str] = {}

    @model_validator(mode="after")
    def _patterns_compile(self) -> AgentRule:
        for name, pattern in self.extract.items():
            try:
                re.compile(pattern, re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"extract.{name}: {pattern!r} is not a regex: {exc}") from None
        return self


class FakeRules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[FakeRule] = []
    default: str = "other"
    default_alias: str | None = None
    field: str = "category"
    # Agent mode: plans of tool calls by phrase (used when the suite offers tools).
    agents: list[AgentRule] = []
    # What the agent answers when no agent rule matches (no tool calls).
    agent_default: str = "Sorry, I cannot help with that."

    @model_validator(mode="after")
    def _some_rules(self) -> FakeRules:
        if not self.rules and not self.agents:
            raise ValueError("give label rules (rules:) or agent rules (agents:), or both")
        return self

    def labels(self) -> list[str]:
        return [r.label for r in self.rules] + [self.default]


class FakeJudgeRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The rule applies when the reply contains any of these (case-insensitive).
    phrases: list[str] = Field(min_length=1)
    # ... and, when set, only while the rubric contains this phrase (case-insensitive).
    rubric: str | None = None
    score: float = Field(ge=0.0, le=1.0)
    reason: str = ""


class FakeJudgeRules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[FakeJudgeRule] = Field(min_length=1)
    default: float = Field(default=0.0, ge=0.0, le=1.0)
    default_reason: str = "no rule matched the reply"


class FakeOptions(BaseModel):
    """The fake's options in evalgate.yml: inline ``rules`` or a ``rules_file`` beside it (a
    classifier), or ``judge_rules`` / ``judge_rules_file`` (a judge)."""

    model_config = ConfigDict(extra="forbid")

    rules: FakeRules | None = None
    rules_file: str | None = None
    judge_rules: FakeJudgeRules | None = None
    judge_rules_file: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> FakeOptions:
        given = [self.rules, self.rules_file, self.judge_rules, self.judge_rules_file]
        if sum(x is not None for x in given) != 1:
            raise ValueError(
                "give exactly one of 'rules' or 'rules_file' (or, for a judge, 'judge_rules' or "
                "'judge_rules_file')"
            )
        return self


def load_rules(options: dict[str, Any], base_dir: Path) -> FakeRules:
    """The classifier's rules (the Messages and OpenAI stand-ins answer from them too)."""
    rules = load_options(options, base_dir)
    if not isinstance(rules, FakeRules):
        raise BackendError(
            "these fake options are a judge's (judge_rules): a model under test needs rules",
            where="model.options",
        )
    return rules


def load_options(options: dict[str, Any], base_dir: Path) -> FakeRules | FakeJudgeRules:
    """The fake's rules from its options: a classifier's, or a judge's."""
    try:
        opts = FakeOptions.model_validate(options)
    except ValidationError as exc:
        raise BackendError(
            f"invalid options for the fake backend: {describe_validation(exc.errors()[0])}",
            where="model.options",
            fix="`evalgate init` writes a working fake configuration (its options: "
            "docs/backends.md)",
        ) from None
    if opts.rules is not None:
        return opts.rules
    if opts.judge_rules is not None:
        return opts.judge_rules
    name = opts.rules_file or opts.judge_rules_file
    assert name is not None
    model: type[FakeRules] | type[FakeJudgeRules] = (
        FakeRules if opts.rules_file is not None else FakeJudgeRules
    )
    path = base_dir / name
    if not path.exists() and not path.is_symlink():
        raise BackendError(
            "the fake backend's rules file does not exist",
            where=str(path),
            fix="fix the rules file's path in model.options (it is relative to evalgate.yml)",
        )
    data = load_yaml(files.read_text(path, "rules file", BackendError), path, BackendError)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BackendError(from_validation(exc), where=str(path)) from None


def message_of(request: Request) -> str:
    """The text the fake classifies: the tagged message of the last user turn."""
    users = [m.content for m in request.messages if m.role == "user"]
    turn = users[-1] if users else ""
    found = _MESSAGE.search(turn)
    return found.group(1) if found else turn


def names_every_label(system: str, labels: list[str]) -> bool:
    return all(re.search(rf"\b{re.escape(label)}\b", system, re.IGNORECASE) for label in labels)


def classify(message: str, rules: FakeRules) -> FakeRule | None:
    text = message.lower()
    for rule in rules.rules:
        if any(phrase.lower() in text for phrase in rule.phrases):
            return rule
    return None


def fake_answer(request: Request, rules: FakeRules) -> str:
    """The reply text the fake model gives to a request. Shared with the Messages stand-in."""
    rule = classify(message_of(request), rules)
    label = rule.label if rule else rules.default
    if not names_every_label(request.system, rules.labels()):
        alias = rule.alias if rule else rules.default_alias
        label = alias or label
    if "JSON" in request.system:
        return json.dumps({rules.field: label})
    return f"Category: {label}."


_REPLY = re.compile(r"<reply>\n(.*)\n</reply>\s*\Z", re.DOTALL)
_RUBRIC = re.compile(r"<rubric>\n(.*?)\n</rubric>", re.DOTALL)


def fake_judgement(request: Request, rules: FakeJudgeRules) -> str:
    """The verdict the fake judge gives to a judge request (see evalgate/scorers/judge.py)."""
    users = [m.content for m in request.messages if m.role == "user"]
    turn = users[-1] if users else ""
    reply = _REPLY.search(turn)
    rubric = _RUBRIC.search(turn)
    text = (reply.group(1) if reply else turn).lower()
    rubric_text = (rubric.group(1) if rubric else "").lower()
    for rule in rules.rules:
        if rule.rubric is not None and rule.rubric.lower() not in rubric_text:
            continue
        if any(phrase.lower() in text for phrase in rule.phrases):
            return json.dumps({"score": rule.score, "reason": rule.reason})
    return json.dumps({"score": rules.default, "reason": rules.default_reason})


def rough_tokens(text: str) -> int:
    """A deterministic token estimate (about four characters a token) for offline runs."""
    return max(1, (len(text) + 3) // 4)


# --- agent mode --------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def conversation_text(request: Request) -> str:
    """What agent rules match and extract from: every user turn's message, oldest first."""
    turns = [m.content for m in request.messages if m.role == "user"]
    return "\n".join(f.group(1) if (f := _MESSAGE.search(t)) else t for t in turns)


def agent_rule(text: str, rules: FakeRules) -> AgentRule | None:
    lowered = text.lower()
    for rule in rules.agents:
        if any(phrase.lower() in lowered for phrase in rule.phrases):
            return rule
    return None


def _fill(value: Any, found: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: found.get(m.group(1), m.group(0)), value)
    if isinstance(value, dict):
        return {k: _fill(v, found) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, found) for v in value]
    return value


def _extracted(rule: AgentRule, text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, pattern in rule.extract.items():
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            found[name] = match.group(1) if match.groups() else match.group(0)
    return found


def next_call(
    rule: AgentRule | None,
    request: Request,
    history: Sequence[tuple[str, dict[str, Any], str]],
    offered: Sequence[str],
) -> ToolCall | str:
    """The call the fake agent makes after ``history`` ((name, input, result) of the calls so
    far), or its final answer (a str). A rule's step whose tool is not offered is skipped."""
    if rule is None:
        return ""
    text = conversation_text(request)
    found = _extracted(rule, text)
    system = request.system.lower()
    made = 0
    for planned in rule.steps:
        step: FakeStep | None = planned
        while step is not None:
            ok = step.if_prompt is None or step.if_prompt.lower() in system
            if ok and step.if_result is not None:
                results = [r.lower() for _, _, r in history[:made]]
                ok = any(step.if_result.lower() in r for r in results)
            if ok:
                break
            step = step.otherwise
        if step is None or step.tool not in offered:
            continue
        if made == len(history):
            return ToolCall(name=step.tool, input=_fill(step.input, found))
        made += 1
    return str(_fill(rule.reply, found))


def plan_matches(
    rule: AgentRule | None,
    request: Request,
    history: Sequence[tuple[str, dict[str, Any], str]],
    offered: Sequence[str],
) -> bool:
    """Whether ``history`` is what ``rule`` would have called so far (for the stand-in, which
    must continue the plan a flip chose at the first step)."""
    for i in range(len(history)):
        call = next_call(rule, request, history[:i], offered)
        if not isinstance(call, ToolCall) or (call.name, call.input) != history[i][:2]:
            return False
    return True


def agent_turn(
    request: Request,
    history: Sequence[tuple[str, dict[str, Any], str]],
    rules: FakeRules,
    rule: AgentRule | None = None,
) -> ToolCall | str:
    """The fake agent's next move: ``rule`` (a flip's choice) or the matching rule's plan."""
    if request.agent is None:
        raise ValueError("an agent turn needs a request with tools")
    offered = request.agent.tool_names()
    chosen = rule or agent_rule(conversation_text(request), rules)
    if chosen is None:
        return rules.agent_default
    return next_call(chosen, request, history, offered)


class _FakeSession:
    """The fake agent as an agent-loop session: each send answers from the calls so far."""

    def __init__(self, request: Request, rules: FakeRules) -> None:
        self.request = request
        self.rules = rules
        self.history: list[tuple[str, dict[str, Any], str]] = []
        self.sent = request.system + "".join(m.content for m in request.messages)

    def send(self) -> Turn:
        move = agent_turn(self.request, self.history, self.rules)
        spoken = move if isinstance(move, str) else json.dumps(move.input)
        turn = Turn(
            input_tokens=rough_tokens(self.sent),
            output_tokens=rough_tokens(spoken),
            stop_reason="end_turn" if isinstance(move, str) else "tool_use",
        )
        if isinstance(move, str):
            turn.text = move
        else:
            turn.calls = [move]
        return turn

    def answer(self, turn: Turn, records: list[CallRecord]) -> None:
        for call, record in zip(turn.calls, records, strict=True):
            self.history.append((call.name, call.input, record.result or ""))
            self.sent += json.dumps(call.input) + (record.result or "")


class FakeBackend:
    name: ClassVar[str] = "fake"
    offline: ClassVar[bool] = True

    def __init__(self, settings: ModelSettings, context: BackendContext) -> None:
        self.rules = load_options(settings.options, context.base_dir)
        self.context = context

    def complete(self, request: Request) -> Reply:
        if isinstance(self.rules, FakeJudgeRules):
            if request.agent is not None:
                raise BackendError(
                    "the suite offers tools but the fake backend has judge rules",
                    fix="give the fake agent rules (agents:, see examples/support-agent)",
                )
            text = fake_judgement(request, self.rules)
        else:
            if request.agent is not None:
                if not self.rules.agents:
                    raise BackendError(
                        "the suite offers tools but the fake backend has no agent rules",
                        fix="add agents: to the fake's rules (see examples/support-agent)",
                    )
                return run_agent(
                    _FakeSession(request, self.rules),
                    request.agent,
                    case_id=str(request.case.get("id", "")),
                    cwd=self.context.base_dir,
                    env=self.context.env,
                )
            if not self.rules.rules:
                raise BackendError(
                    "the fake backend has only agent rules, and this suite offers no tools",
                    fix="add label rules (rules:) or tools: to the suite",
                )
            text = fake_answer(request, self.rules)
        sent = request.system + "".join(m.content for m in request.messages)
        return Reply(
            text=text,
            input_tokens=rough_tokens(sent),
            output_tokens=rough_tokens(text),
            stop_reason="end_turn",
        )
