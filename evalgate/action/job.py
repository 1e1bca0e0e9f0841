"""The job as the action sees it: environment, streams, event, the GitHub client, and what it
writes at the end (the job summary, the outputs)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from evalgate.action.inputs import Inputs, Outputs, VerdictKind
from evalgate.action.state import JobState
from evalgate.app import World
from evalgate.cases.leakguard import LeakGuards
from evalgate.defaults import HOLDOUT_KEY_VARIABLE
from evalgate.errors import UserError
from evalgate.publish.github.comments import Marked
from evalgate.redact import hold_environment
from evalgate.report.escape import escape
from evalgate.running.budget import BudgetGuard
from evalgate.runs.spend import SpendRecord


@dataclass
class ActionJob:
    """The world as the action sees it: environment, streams, files, and the GitHub client."""

    env: Mapping[str, str]
    inputs: Inputs
    out: TextIO
    err: TextIO
    event: dict[str, Any]
    repo: Any = None  # a PyGithub Repository, built in github.py
    outputs: Outputs = field(default_factory=Outputs)
    summary: list[str] = field(default_factory=list)
    verdicts: list[VerdictKind] = field(default_factory=list)
    # Why the job fails whatever fail_on says (a pull request that changes the holdout, or a
    # fork's data that was refused); None when fail_on decides.
    must_fail: str | None = None
    # Set in fork mode: the pull request's files came as data, checked, onto the default
    # branch's checkout, and the job holds the base repository's secrets.
    fork_data: bool = False
    # The pull request's check run: annotations on the case files, and whether to make one.
    annotations: list[dict[str, Any]] = field(default_factory=list)
    check: bool = False
    # The job's total budget (inputs max_calls, max_usd), shared by every suite's run.
    budget: BudgetGuard | None = None
    # Pull-request and fork jobs: the holdout guards every request passes (made once, from
    # the base commit): for the runs, and for the judge check (which may send the labels).
    leak_guards: LeakGuards | None = None
    # Where the job keeps its state, outside the checkout, and the cache's key (state.py).
    state: JobState | None = None
    # The line naming a state folder the checkout holds, which the job ignored (state.py).
    ignored_state: str | None = None
    # Read once a job, for every suite: each pull request's marked bot comments, and what the
    # pull requests merged as the pushed commit (or closed without merging) spent, by suite
    # (spend.py).
    pull_comments: dict[int, Marked] = field(default_factory=dict)
    pull_spend: dict[str, dict[str, list[SpendRecord]]] = field(default_factory=dict)

    # --- the GitHub environment ------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        """A fork's own pull_request job: no secrets, a read-only token. (In fork mode the
        pull request's files came as checked data, and the job holds the base's secrets.)"""
        return is_fork(self.event) and not self.fork_data

    @property
    def workspace(self) -> Path:
        return Path(self.env.get("GITHUB_WORKSPACE") or os.getcwd())

    @property
    def folder(self) -> Path:
        return (self.workspace / self.inputs.working_directory).resolve()

    @property
    def default_branch(self) -> str:
        repo = self.event.get("repository") or {}
        return str(repo.get("default_branch") or "main")

    @property
    def workflow_path(self) -> str | None:
        """This workflow's file (``.github/workflows/x.yml``): its runs are searched first for
        a baseline. Only an order: which runs are trusted does not depend on it."""
        ref = self.env.get("GITHUB_WORKFLOW_REF", "")
        repo = self.env.get("GITHUB_REPOSITORY", "")
        path = ref.removeprefix(f"{repo}/").partition("@")[0]
        return path if repo and ref.startswith(f"{repo}/") and path else None

    @property
    def run_url(self) -> str | None:
        server = self.env.get("GITHUB_SERVER_URL", "https://github.com")
        repo, run_id = self.env.get("GITHUB_REPOSITORY"), self.env.get("GITHUB_RUN_ID")
        return f"{server}/{repo}/actions/runs/{run_id}" if repo and run_id else None

    # --- what the job shows --------------------------------------------------------------

    def log(self, text: str) -> None:
        # One line each; names, reasons and paths in it cannot start a workflow command.
        self._write(escape(text, "log"))

    def _write(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def annotate(self, level: Literal["error", "warning", "notice"], text: str) -> None:
        # Workflow commands end at a newline; % and newlines are escaped as GitHub documents.
        self._write(f"::{level} title=evalgate::{escape(text, 'command')}")

    def add_summary(self, markdown: str) -> None:
        self.summary.append(markdown.rstrip("\n") + "\n")

    def flush(self) -> None:
        path = self.env.get("GITHUB_STEP_SUMMARY")
        if path and self.summary:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write("\n".join(self.summary))
        self.summary.clear()
        path = self.env.get("GITHUB_OUTPUT")
        if path and self.outputs.values:
            with open(path, "a", encoding="utf-8") as handle:
                for name, value in self.outputs.values.items():
                    text = str(value)
                    if "\n" in text or "\r" in text:
                        # A line break would start another output: GitHub's multi-line form,
                        # with a delimiter no value can contain.
                        mark = f"EVALGATE_{secrets.token_hex(12)}"
                        handle.write(f"{name}<<{mark}\n{text}\n{mark}\n")
                    else:
                        handle.write(f"{name}={text}\n")

    def world(self) -> World:
        """The service's world: the action's secrets as environment, in CI, its streams."""
        env = dict(self.env)
        env["CI"] = "true"
        if self.inputs.anthropic_api_key.get_secret_value():
            env["ANTHROPIC_API_KEY"] = self.inputs.anthropic_api_key.get_secret_value()
        if self.inputs.holdout_key.get_secret_value():
            env[HOLDOUT_KEY_VARIABLE] = self.inputs.holdout_key.get_secret_value()
        # The secrets among them are kept out of every error text printed or saved.
        hold_environment(env)
        key = self.state.cache_key if self.state is not None else None
        return World(env=env, err=self.err, warn=self.warn, say=self.log, cache_key=key)

    def warn(self, text: str) -> None:
        self.err.write(f"warning: {escape(text, 'log')}\n")


def pr_number(event: dict[str, Any]) -> int:
    number = (event.get("pull_request") or {}).get("number") or event.get("number")
    if not isinstance(number, int):
        raise UserError("the event has no pull request number", fix="run pr mode on pull_request")
    return number


def is_fork(event: dict[str, Any]) -> bool:
    pr = event.get("pull_request") or {}
    head = ((pr.get("head") or {}).get("repo") or {}).get("full_name")
    base = ((pr.get("base") or {}).get("repo") or {}).get("full_name")
    return bool(head and base and head.lower() != base.lower())
