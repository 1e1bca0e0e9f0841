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


class FakeOptions(BaseModel):
    """The fake's options in evalgate.yml: inline ``rules`` or a ``rules_file`` beside it."""

    model_config = ConfigDict(extra="forbid")

    rules: FakeRules | None = None
    rules_file: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> FakeOptions:
        if (self.rules is None) == (self.rules_file is None):
            raise ValueError("give exactly one of 'rules' or 'rules_file'")
        return self


def load_rules(options: dict[str, Any], base_dir: Path) -> FakeRules:
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
    assert opts.rules_file is not None
    path = base_dir / opts.rules_file
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BackendError(
            "the fake backend's rules file does not exist",
            where=str(path),
            fix="fix model.options.rules_file (it is relative to evalgate.yml)",
        ) from None
    except yaml.YAMLError as exc:
        raise BackendError(f"invalid YAML: {exc}", where=str(path)) from None
    try:
        return FakeRules.model_validate(data)
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


def rough_tokens(text: str) -> int:
    """A deterministic token estimate (about four characters a token) for offline runs."""
    return max(1, (len(text) + 3) // 4)


class FakeBackend:
    name: ClassVar[str] = "fake"
    offline: ClassVar[bool] = True

    def __init__(self, settings: ModelSettings, context: BackendContext) -> None:
        self.rules = load_rules(settings.options, context.base_dir)

    def complete(self, request: Request) -> Reply:
        text = fake_answer(request, self.rules)
        sent = request.system + "".join(m.content for m in request.messages)
        return Reply(
            text=text,
            input_tokens=rough_tokens(sent),
            output_tokens=rough_tokens(text),
            stop_reason="end_turn",
        )
