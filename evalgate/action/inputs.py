"""The action's inputs (action.yml), validated once, and its outputs (GITHUB_OUTPUT)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from evalgate.defaults import BASELINE_ARTIFACT, CONFIG_FILE, FORK_ARTIFACT
from evalgate.errors import UserError, from_validation

Mode = Literal["pr", "baseline", "release", "audit", "collect", "fork", "closed", "skip"]


VerdictKind = Literal["pass", "fail", "inconclusive", "skipped"]


SEVERITY = {"skipped": 0, "pass": 1, "inconclusive": 2, "fail": 3}


class Inputs(BaseModel):
    """The action's inputs (action.yml), validated once."""

    model_config = ConfigDict(extra="forbid")

    config: str = CONFIG_FILE
    suite: str = "all"
    mode: Literal["auto", "pr", "baseline", "release", "audit", "collect", "fork"] = "auto"
    github_token: SecretStr = SecretStr("")
    anthropic_api_key: SecretStr = SecretStr("")
    baseline_artifact: str = BASELINE_ARTIFACT
    fork_artifact: str = FORK_ARTIFACT
    fail_on: list[Literal["fail", "inconclusive"]] = Field(default=["fail"])
    comment: bool = True
    # Whose comments carry evalgate's spend ledger: the login the job's token posts as
    # (GITHUB_TOKEN's github-actions[bot]; a GitHub App's NAME[bot]; a machine user's login).
    comment_author: str = Field(
        default="github-actions[bot]", pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$"
    )
    holdout_key: SecretStr = SecretStr("")
    working_directory: str = "."
    candidate: str | None = None
    baseline_version: str | None = None
    fitted_score: float | None = Field(default=None, ge=0.0, le=1.0)
    searched: int | None = Field(default=None, ge=1)
    tuning_cases: int | None = Field(default=None, ge=1)
    # The job's total across its suites, beside each suite's own budget: (calls, US dollars).
    max_calls: int | None = Field(default=None, gt=0)
    max_usd: float | None = Field(default=None, gt=0)
    # Another harness's results file (promptfoo -o, an Inspect log, JUnit XML) that an earlier
    # step wrote, relative to working_directory (a glob that names one file): the gate on it
    # (pull requests) or its record as the baseline (the default branch), no suite run.
    results: str | None = None

    @field_validator("fail_on", mode="before")
    @classmethod
    def _split_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return value

    @field_validator("comment", mode="before")
    @classmethod
    def _bool(cls, value: Any) -> Any:
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in ("true", "yes", "1", ""):
                return True
            if lowered in ("false", "no", "0"):
                return False
        return value

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Inputs:
        values = {
            name: env[f"INPUT_{name.upper()}"]
            for name in cls.model_fields
            if env.get(f"INPUT_{name.upper()}", "") != ""
        }
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise UserError(
                f"input {from_validation(exc)}",
                fix="see the inputs table in the README",
            ) from None


@dataclass
class Outputs:
    """Values for ``GITHUB_OUTPUT``; with several suites, the worst verdict wins."""

    values: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: object) -> None:
        self.values[name] = "" if value is None else str(value)


def output_number(value: float | None) -> str:
    """A number as a step output: empty when there is none, or none finite (an MDE no drop
    reaches), which ``fromJSON`` could not read as "inf"."""
    return "" if value is None or not math.isfinite(value) else f"{value:.6g}"
