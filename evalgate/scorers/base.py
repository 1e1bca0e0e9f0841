"""The scorer protocol and the registry by kind.

A scorer returns the answer it read, a score in [0, 1], and whether the reply had the asked-for
format. Format validity and correctness are reported apart because their fixes differ.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evalgate.config import ScorerConfig


class Score(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    answer: str | None
    score: float = Field(ge=0.0, le=1.0)
    format_ok: bool
    reason: str | None = None


# A scorer is built once per run from its config and then called once per reply.
Scorer = Callable[[Any, str], Score]


def build_scorer(config: ScorerConfig, base_dir: Path) -> Scorer:
    from evalgate.scorers import code, json_schema, text

    builders: dict[str, Callable[[Any, Path], Scorer]] = {
        "label": text.label,
        "exact": text.exact,
        "contains": text.contains,
        "regex": text.regex,
        "json_schema": json_schema.build,
        "python": code.build,
    }
    return builders[config.kind](config, base_dir)


def needs_expected(config: ScorerConfig) -> bool:
    """Whether every case must carry an expected answer for this scorer."""
    if config.kind == "json_schema":
        return config.field is not None
    if config.kind == "regex":
        return config.pattern is None
    return config.kind != "python"
