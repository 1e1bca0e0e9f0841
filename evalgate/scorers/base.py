"""The scorer protocol and the registry by kind.

A scorer returns the answer it read, a score in [0, 1], and whether the reply had the asked-for
format. Format validity and correctness are reported apart because their fixes differ.
"""

from __future__ import annotations

import importlib
import shlex
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evalgate import files
from evalgate.backends.base import Backend
from evalgate.config.models import ScorerConfig


class Score(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    answer: str | None
    score: float = Field(ge=0.0, le=1.0)
    format_ok: bool
    reason: str | None = None
    # A model-graded scorer's own calls, counted apart from the system under test's.
    judge_calls: int = 0
    judge_input_tokens: int = 0
    judge_output_tokens: int = 0


class ScoringError(Exception):
    """The scorer could not grade a reply (a judge call failed): the case is an error."""

    def __init__(self, message: str, kind: str = "judge") -> None:
        super().__init__(message)
        self.kind = kind


# A scorer is built once per run from its config and then called once per reply, with the
# case's expected answer and the reply text. Scorers that also read the case's input (a judge)
# set ``needs_input = True`` and are called with ``case_input=`` as well; scorers of an agent's
# trajectory set ``needs_trajectory = True`` and are called with ``trajectory=`` (the reply's
# steps, None when the reply had none).
Scorer = Callable[..., Score]


# kind -> (module, builder): imported only when used (jsonschema alone costs 0.2 s to import).
_BUILDERS: dict[str, tuple[str, str]] = {
    "label": ("evalgate.scorers.text", "label"),
    "exact": ("evalgate.scorers.text", "exact"),
    "contains": ("evalgate.scorers.text", "contains"),
    "regex": ("evalgate.scorers.text", "regex"),
    "json_schema": ("evalgate.scorers.json_schema", "build"),
    "python": ("evalgate.scorers.code", "build"),
    "tool_sequence": ("evalgate.scorers.tools", "tool_sequence"),
    "tool_used": ("evalgate.scorers.tools", "tool_used"),
    "tool_not_used": ("evalgate.scorers.tools", "tool_used"),
    "max_steps": ("evalgate.scorers.tools", "max_steps"),
}


def build_scorer(config: ScorerConfig, base_dir: Path, judge: Backend | None = None) -> Scorer:
    """Build the scorer a config names; a judge scorer needs the judge's backend, built outside."""
    if config.kind == "judge":
        from evalgate.scorers.judge import JudgeScorer

        if judge is None:
            raise ValueError("a judge scorer needs a judge backend")
        return JudgeScorer(config, base_dir, judge)
    if config.kind == "all_of":
        from evalgate.scorers.tools import AllOf

        members = [(c.kind, build_scorer(c, base_dir, judge)) for c in config.scorers]
        return AllOf(config, members)
    module, attr = _BUILDERS[config.kind]
    builder: Callable[[Any, Path], Scorer] = getattr(importlib.import_module(module), attr)
    return builder(config, base_dir)


def file_names(config: ScorerConfig) -> list[str]:
    """The files a judge scorer reads: its rubric file, its backend's ``*_file`` options and,
    for a ``command`` judge, the relative file arguments of its program (``judge.py``)."""
    if config.kind != "judge":
        return []
    names = [config.rubric_file] if config.rubric_file else []
    options = config.model.options
    names += [v for k, v in options.items() if k.endswith("_file") and isinstance(v, str)]
    if config.model.backend == "command":
        names += [a for a in command_argv(options)[1:] if _looks_like_a_file(a)]
    return names


def command_argv(options: dict[str, Any]) -> list[str]:
    command = options.get("command")
    if isinstance(command, str):
        return shlex.split(command)
    return [str(a) for a in command] if isinstance(command, list) else []


def _looks_like_a_file(arg: str) -> bool:
    path = PurePosixPath(arg)
    return not arg.startswith("-") and not path.is_absolute() and "." in path.name


def read_files(config: ScorerConfig, base_dir: Path) -> dict[str, str | None]:
    """The text of each of :func:`file_names` by name (None when missing): the config names the
    files, so their content must join any hash of it."""
    found: dict[str, str | None] = {}
    for name in file_names(config):
        path = base_dir / name
        found[name] = files.read_text(path, "scorer file") if path.is_file() else None
    return found


def needs_expected(config: ScorerConfig) -> bool:
    """Whether every case must carry an expected answer for this scorer."""
    if config.kind == "json_schema":
        return config.field is not None
    if config.kind == "regex":
        return config.pattern is None
    if config.kind in ("tool_used", "tool_not_used"):
        return not config.tools
    if config.kind == "max_steps":
        return config.limit is None
    if config.kind == "all_of":
        return any(needs_expected(c) for c in config.scorers)
    return config.kind not in ("python", "judge")
