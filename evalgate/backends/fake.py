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

As a judge (``judge_rules`` or ``judge_rules_file`` instead of ``rules``), it reads the judge
request's ``<reply>`` and ``<rubric>`` and answers ``{"score": ..., "reason": ...}`` from the
first rule whose phrase the reply contains, among the rules whose ``rubric`` phrase (if any) the
rubric contains: a judge that reads its rubric, so a changed rubric changes its verdicts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evalgate.backends.base import BackendContext, Reply, Request
from evalgate.config import ModelSettings
from evalgate.errors import BackendError, describe_validation

_MESSAGE = re.compile(r"<message>(.*?)</message>", re.DOTALL | re.IGNORECASE)


class FakeRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str
    phrases: list[str] = Field(min_length=1)
    alias: str | None = None


class FakeRules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[FakeRule] = Field(min_length=1)
    default: str = "other"
    default_alias: str | None = None
    field: str = "category"

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
            fix="see examples/bike-shop/evalgate.yml for a working fake configuration",
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
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BackendError(
            "the fake backend's rules file does not exist",
            where=str(path),
            fix="fix the rules file's path in model.options (it is relative to evalgate.yml)",
        ) from None
    except yaml.YAMLError as exc:
        raise BackendError(f"invalid YAML: {exc}", where=str(path)) from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise BackendError(f"{loc}: {describe_validation(err)}", where=str(path)) from None


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


class FakeBackend:
    name: ClassVar[str] = "fake"
    offline: ClassVar[bool] = True

    def __init__(self, settings: ModelSettings, context: BackendContext) -> None:
        self.rules = load_options(settings.options, context.base_dir)

    def complete(self, request: Request) -> Reply:
        if isinstance(self.rules, FakeJudgeRules):
            text = fake_judgement(request, self.rules)
        else:
            text = fake_answer(request, self.rules)
        sent = request.system + "".join(m.content for m in request.messages)
        return Reply(
            text=text,
            input_tokens=rough_tokens(sent),
            output_tokens=rough_tokens(text),
            stop_reason="end_turn",
        )
