"""The Backend protocol, the request and reply models, and the registry of backends by name.

A backend implements one method, ``complete(request) -> Reply``. It never raises for a failed
call: a call that failed after the backend's own retries comes back as a Reply with ``error``
set, so the runner can record it as an error instead of a wrong answer. It raises only for
faults that must stop the whole run before it floods an API (``BackendError``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError

from evalgate.errors import (
    BackendError,
    MissingExtraError,
    describe_validation,
    did_you_mean,
    first_validation_error,
)
from evalgate.redact import RedactedError, RedactedReply
from evalgate.trajectory import AgentSpec, Step


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"]
    content: str


class Request(BaseModel):
    """Everything that determines a model's reply. Its JSON is the cache key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    system: str
    messages: tuple[Message, ...]
    model: str
    max_tokens: int = 1024
    temperature: float | None = None
    # Backend-specific settings (thinking budget, effort, response schema, ...).
    options: dict[str, Any] = {}
    # Opaque metadata for backends that need the case itself (the command backend); never
    # part of what a model sees unless the backend chooses to send it.
    case: dict[str, Any] = {}
    # An agent case: the tools offered, the case's fixtures and the loop's rules (None: a
    # plain one-call case). Left out of the cache key when None, so plain keys do not change.
    agent: AgentSpec | None = None


ErrorKind = Literal[
    "rate_limit",
    "overloaded",
    "server",
    "timeout",
    "connection",
    "bad_request",
    "auth",
    "not_found",
    "malformed",
    "command",
    "interrupted",
    "tool",
    "max_steps",
    # Not sent: the run's budget had no room for the call (running/budget.py).
    "budget",
    # Not sent: the request carried a holdout case (cases/leakguard.py).
    "holdout",
    "other",
]


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: RedactedReply = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    latency_s: float = 0.0
    stop_reason: str | None = None
    error: RedactedError | None = None
    error_kind: ErrorKind | None = None
    attempts: int = 1
    # An agent case's steps (every model call with its tool calls and their results); None
    # for a plain reply. Scorers of trajectories read them; the run file keeps them.
    steps: list[Step] | None = None


@dataclass(frozen=True)
class BackendContext:
    """What a backend may know of the world, handed down by the composition root."""

    base_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    """What the runner needs of a backend."""

    name: ClassVar[str]
    # True when the backend needs no network and no key (the fake); reports say so.
    offline: ClassVar[bool]

    def complete(self, request: Request) -> Reply: ...


OptionsT = TypeVar("OptionsT", bound=BaseModel)


def parse_options(
    model: type[OptionsT], options: dict[str, Any], fix: str | None = None
) -> OptionsT:
    """A backend's ``model.options``, validated; the first problem as one line naming the key."""
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        names = [f.alias or name for name, f in model.model_fields.items()]
        # Options are flat: the keys allowed anywhere are the model's own.
        err, guess, others = first_validation_error(exc.errors(), lambda loc: names)
        loc = ".".join(str(p) for p in err["loc"])
        key = f"model.options.{loc}" if loc else "model.options"
        what = describe_validation(err)
        if err["type"] == "extra_forbidden":
            what += f"; did you mean {guess}?" if guess else ""
            fix = f"allowed here: {', '.join(names)}" + (f"; {fix}" if fix else "")
        more = f" (and {others} more)" if others else ""
        raise BackendError(f"{key}: {what}{more}", fix=fix) from None


# name -> ("module", "attribute", extra that provides its dependency or None)
_REGISTRY: dict[str, tuple[str, str, str | None]] = {
    "fake": ("evalgate.backends.fake", "FakeBackend", None),
    "anthropic": ("evalgate.backends.anthropic", "AnthropicBackend", None),
    "openai": ("evalgate.backends.openai", "OpenAIBackend", "openai"),
    "command": ("evalgate.backends.command", "CommandBackend", None),
}


# Every backend's name, in the order the docs and `evalgate init` offer them.
BACKEND_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def backend_names() -> list[str]:
    return sorted(_REGISTRY)


def backend_extra(name: str) -> str | None:
    """The optional extra a backend's dependency comes from (None: a core dependency)."""
    entry = _REGISTRY.get(name)
    return entry[2] if entry else None


# Backends whose HTTP client verifies with backends/tls.py's context.
_TLS_BACKENDS = frozenset({"anthropic", "openai"})


def prepare_backend(name: str, env: Mapping[str, str]) -> None:
    """Start what building a backend of this name waits for, so that it is made while the
    caller goes on (reading its cases): today, an API backend's TLS context."""
    if name in _TLS_BACKENDS:
        from evalgate.backends.tls import prepare_tls

        prepare_tls(env)


def backend_class(name: str) -> type[Any]:
    """Import a backend lazily, so that a missing optional extra is a one-line message."""
    try:
        module_name, attr, extra = _REGISTRY[name]
    except KeyError:
        guess = did_you_mean(name, backend_names())
        raise BackendError(
            f"unknown backend {name!r}" + (f"; did you mean {guess}?" if guess else ""),
            fix=f"use one of: {', '.join(backend_names())}",
        ) from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if extra is not None and exc.name is not None and not exc.name.startswith("evalgate"):
            raise MissingExtraError(f"the {name!r} backend", extra) from exc
        raise
    cls: type[Any] = getattr(module, attr)
    return cls
