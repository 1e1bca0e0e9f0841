"""The container entrypoint: the GitHub event -> a mode -> the pipeline -> comment, summary, outputs.

``python -m evalgate action`` runs this inside the action's container. It reads the inputs
(``INPUT_<NAME>``, snake_case names so a shell can read them too) and the GitHub environment,
then for each suite:

* ``pr``: the gate on dev plus regression cases against the default branch's baseline artefact
  (never one a pull-request run made), one comment edited in place, the job summary, outputs;
* ``baseline``: dev with repeats (the noise floor), written where ``run_file`` says, for the
  workflow's upload-artifact step;
* ``release``: the holdout gate, its ledger and release history kept in a data branch, a check
  run on the tagged commit.

A user error is one line in the log, an ``::error::`` annotation and the job summary, exit 2; a
failed gate exits 1 as ``fail_on`` says; a crash also writes its one-line cause to the summary.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import secrets
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from evalgate import __version__
from evalgate import github as gh
from evalgate.app import (
    HOLDOUT_KEY_VARIABLE,
    RunOptions,
    World,
    ledger_path,
    release_version,
    run_version,
)
from evalgate.audit import audit
from evalgate.base_split import (
    BaseSplit,
    BaseUnavailable,
    Tree,
    guard,
    read_tree,
    relative_config,
)
from evalgate.cases import CaseSet
from evalgate.cli.context import Context
from evalgate.config import LoadedConfig, Suite, load_config
from evalgate.errors import EvalgateError, UserError, describe_validation
from evalgate.fork import MANIFEST, Refused, collect, overlay, read_manifest
from evalgate.gate import PullRequestVerdict, Verdict, decide, decide_pull_request
from evalgate.gitrepo import GitTree, toplevel
from evalgate.history import appended, pool, read_history, record_of
from evalgate.judge_pr import judge_in_pr
from evalgate.noise import measure_noise
from evalgate.pipeline import Prompt, load_suite_cases, sha256_text
from evalgate.redact import hold_environment, redact
from evalgate.release import ReleaseRecord
from evalgate.report.comment import (
    BaselineProvenance,
    CommentContext,
    CommentFlags,
    CommentLinks,
    marker,
    render_comment,
    render_summary,
)
from evalgate.report.escape import escape
from evalgate.report.render import render, render_model
from evalgate.runs import Run, read_run, save_run
from evalgate.summary import summarise

Mode = Literal["pr", "baseline", "release", "audit", "collect", "fork", "skip"]
VerdictKind = Literal["pass", "fail", "inconclusive", "skipped"]
SEVERITY = {"skipped": 0, "pass": 1, "inconclusive": 2, "fail": 3}
DATA_BRANCH = "evalgate-data"


class Inputs(BaseModel):
    """The action's inputs (action.yml), validated once."""

    model_config = ConfigDict(extra="forbid")

    config: str = "evalgate.yml"
    suite: str = "all"
    mode: Literal["auto", "pr", "baseline", "release", "audit", "collect", "fork"] = "auto"
    github_token: SecretStr = SecretStr("")
    anthropic_api_key: SecretStr = SecretStr("")
    baseline_artifact: str = "evalgate-baseline"
    fork_artifact: str = "evalgate-fork"
    fail_on: list[Literal["fail", "inconclusive"]] = Field(default=["fail"])
    comment: bool = True
    holdout_key: SecretStr = SecretStr("")
    working_directory: str = "."
    candidate: str | None = None
    baseline_version: str | None = None
    fitted_score: float | None = Field(default=None, ge=0.0, le=1.0)
    searched: int | None = Field(default=None, ge=1)
    tuning_cases: int | None = Field(default=None, ge=1)

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
            error = exc.errors()[0]
            name = ".".join(str(p) for p in error["loc"])
            raise UserError(
                f"input {name}: {describe_validation(error)}",
                fix="see the inputs table in the README",
            ) from None


@dataclass
class Outputs:
    """Values for ``GITHUB_OUTPUT``; with several suites, the worst verdict wins."""

    values: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: object) -> None:
        self.values[name] = "" if value is None else str(value)


@dataclass
class Runner:
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

    # --- the GitHub environment ------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        """A fork's own pull_request job: no secrets, a read-only token. (In fork mode the
        pull request's files came as checked data, and the job holds the base's secrets.)"""
        return _is_fork(self.event) and not self.fork_data

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
        return World(env=env, err=self.err, warn=self.warn, say=self.log)

    def warn(self, text: str) -> None:
        self.err.write(f"warning: {escape(text, 'log')}\n")

    def context(self) -> Context:
        """A command context for the judge check, which the CLI shares."""
        ctx = Context(
            argparse.Namespace(concurrency=None, verbose=False, cache=True), self.out, self.err
        )
        ctx.env = dict(self.world().env)
        return ctx


def detect_mode(inputs: Inputs, env: Mapping[str, str], event: dict[str, Any], tags: str) -> Mode:
    """The mode from the event: pull_request -> pr; a push of a release tag -> release; a push
    to the default branch or a schedule -> baseline; workflow_dispatch -> the ``mode`` input."""
    if inputs.mode != "auto":
        return inputs.mode
    name = env.get("GITHUB_EVENT_NAME", "")
    ref = env.get("GITHUB_REF", "")
    if name in ("pull_request", "pull_request_target"):
        return "pr"
    if name == "push" and ref.startswith("refs/tags/"):
        tag = ref.removeprefix("refs/tags/")
        if fnmatch.fnmatchcase(tag, tags):
            return "release"
        raise UserError(
            f"tag {tag!r} does not match the config's release_tags {tags!r}",
            fix="set release_tags in evalgate.yml, or mode: in the workflow",
        )
    if name == "push":
        # Only the default branch's baseline is ever used: one made elsewhere is money spent.
        branch = ref.removeprefix("refs/heads/")
        default = str((event.get("repository") or {}).get("default_branch") or "main")
        if branch != default:
            # Not an error: a workflow may run on every push; there is just nothing to do.
            return "skip"
        return "baseline"
    if name == "schedule":
        return "baseline"
    if name == "workflow_run":
        return "fork"
    raise UserError(
        f"cannot choose a mode for the event {name!r}",
        fix="set the mode input (pr, baseline or release)",
    )


def suites_to_run(loaded: LoadedConfig, wanted: str) -> list[tuple[str, Suite]]:
    if wanted == "all":
        return list(loaded.config.suites.items())
    names = [n.strip() for n in wanted.split(",") if n.strip()]
    return [loaded.suite(n) for n in names]


def baseline_path(folder: Path, suite: str) -> Path:
    return folder / ".evalgate" / "baseline" / f"{suite}.json"


# --- modes ---------------------------------------------------------------------------------


def run_baseline(runner: Runner, loaded: LoadedConfig, name: str, suite: Suite) -> Path:
    version = loaded.ship_version(suite)
    repeats = suite.gate.baseline_repeats
    # Repeats measure noise, which a cached reply cannot; a deterministic suite (temperature 0,
    # one repeat) may reuse the cache for requests that did not change.
    deterministic = suite.model.temperature == 0 and repeats == 1
    if deterministic:
        runner.log(f"{name}: deterministic suite (temperature 0, 1 repeat): reusing cached replies")
    options = RunOptions(repeats=repeats, cache=deterministic)
    run = run_version(runner.world(), loaded, name, version, options)
    path = baseline_path(runner.folder, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run.model_dump_json(indent=1), encoding="utf-8")
    noise = measure_noise(run, alpha=suite.gate.alpha, power=suite.gate.power)
    summary = summarise(run, price_as=suite.price_as)
    runner.add_summary(f"## evalgate baseline: {name}\n")
    runner.add_summary(render_model("run", summary, "markdown"))
    if noise is not None:
        runner.add_summary(
            f"Noise floor: flip rate {100 * noise.flip_rate:.1f}% over {noise.repeats} repeats "
            f"({noise.flips} unstable cases); minimum detectable effect "
            f"{100 * noise.mde:.1f} points at n = {noise.n}.\n"
        )
    if run.incomplete:
        runner.annotate("error", f"the baseline of {name} is incomplete ({run.errors} errors)")
        runner.verdicts.append("fail")
    else:
        runner.verdicts.append("pass")
        _keep_in_history(runner, name, suite, run)
    runner.outputs.set("accuracy", f"{summary.accuracy.rate or 0:.4f}")
    runner.log(f"baseline of {name} ({version}, {repeats} repeats) written to {path}")
    return path


def _history_file(name: str) -> str:
    return f"evalgate/{name}/baselines.jsonl"


def _keep_in_history(runner: Runner, name: str, suite: Suite, run: Run) -> None:
    """Append the baseline's dev outcomes to the data branch's history, so pull requests can
    pool it with the next ones; compare it with the previous baseline of the same setup."""
    if runner.repo is None:
        runner.log(f"{name}: no github_token, so this baseline is not kept for pooling")
        return
    path = _history_file(name)
    record = record_of(run)

    def add(current: str | None) -> str:
        kept, _ = appended(read_history(current, path), record, suite.gate.alpha)
        return "".join(r.model_dump_json() + "\n" for r in kept)

    try:
        before = read_history(gh.read_data_file(runner.repo, DATA_BRANCH, path), path)
        _, new = appended(before, record, suite.gate.alpha)
        gh.write_data_file(runner.repo, DATA_BRANCH, path, add, f"evalgate: baseline of {name}")
    except gh.GitHubError as exc:
        runner.annotate(
            "warning",
            f"{name}: the baseline is not kept for pooling ({exc.what}); give the job "
            "contents: write for the evalgate-data branch",
        )
        return
    if new.drift_p is None:
        return
    line = (
        f"against the previous baseline of the same prompt, cases and model: "
        f"{new.drift_worse} cases worse, {new.drift_better} better (two-sided sign test, "
        f"p = {new.drift_p:.2g})"
    )
    if new.drift_p < suite.gate.alpha:
        runner.annotate(
            "warning",
            f"{name}: the model answered differently this time, {line}: the provider may have "
            "changed the model under its name; pooling starts afresh",
        )
        runner.add_summary(f"> [!WARNING]\n> The model answered differently this time, {line}.\n")
    else:
        runner.add_summary(f"A/A check {line}: no sign the model changed.\n")


@dataclass
class Baseline:
    run: Run | None
    provenance: BaselineProvenance | None
    no_baseline: bool = False


def _pr_number(event: dict[str, Any]) -> int:
    number = (event.get("pull_request") or {}).get("number") or event.get("number")
    if not isinstance(number, int):
        raise UserError("the event has no pull request number", fix="run pr mode on pull_request")
    return number


def _is_fork(event: dict[str, Any]) -> bool:
    pr = event.get("pull_request") or {}
    head = ((pr.get("head") or {}).get("repo") or {}).get("full_name")
    base = ((pr.get("base") or {}).get("repo") or {}).get("full_name")
    return bool(head and base and head.lower() != base.lower())


def find_baseline_run(
    runner: Runner,
    loaded: LoadedConfig,
    name: str,
    suite: Suite,
    candidate: Run | None,
    merge_base: str | None,
) -> Baseline:
    """The default branch's baseline artefact, downloaded and checked, or None."""
    if runner.repo is None:
        return Baseline(None, None, no_baseline=True)
    ref = gh.find_baseline(
        runner.repo,
        runner.inputs.baseline_artifact,
        runner.default_branch,
        prefer_sha=merge_base,
        workflow_path=runner.workflow_path,
    )
    if ref is None:
        return Baseline(None, None, no_baseline=True)
    folder = gh.download_artifact(
        ref, runner.inputs.github_token.get_secret_value(), runner.folder / ".evalgate" / "download"
    )
    wanted = folder / f"{name}.json"
    run = read_run(wanted) if wanted.exists() else gh.load_baseline_run(folder)
    if run.suite != name:
        # The artefact holds another suite's baseline: comparing against it would mean nothing.
        runner.log(f"{name}: the baseline artefact has no run of this suite (found {run.suite})")
        return Baseline(None, None, no_baseline=True)
    now = datetime.now(UTC)
    history_text = gh.read_data_file(runner.repo, DATA_BRANCH, _history_file(name))
    run, pooled = pool(
        run,
        read_history(history_text, _history_file(name)),
        now=now,
        max_age_days=suite.gate.max_baseline_age_days,
        alpha=suite.gate.alpha,
    )
    age = (now - run.created_at).total_seconds() / 86400
    warnings = []
    if age > suite.gate.max_baseline_age_days:
        warnings.append("stale")
        runner.annotate(
            "warning",
            f"{name}: the baseline is {age:.0f} days old (max_baseline_age_days: "
            f"{suite.gate.max_baseline_age_days:g}); refresh it by running the workflow on the "
            "default branch",
        )
    if merge_base and ref.head_sha != merge_base:
        warnings.append("other-commit")
    if candidate is not None and run.cases_sha256 != candidate.cases_sha256:
        warnings.append("other-cases")
    if candidate is not None and (run.model.backend, run.model.name) != (
        candidate.model.backend,
        candidate.model.name,
    ):
        warnings.append("other-model")
    provenance = BaselineProvenance(
        run=run.name,
        commit=ref.head_sha,
        age_days=max(age, 0.0),
        created_at=run.created_at,
        model=f"{run.model.backend}/{run.model.name}",
        prompt_sha=run.prompt.sha256[:12],
        cases_sha=run.cases_sha256[:12],
        source="artifact",
        artifact_url=ref.html_url,
        warnings=warnings,
        pooled_runs=pooled.runs,
        pooled_repeats=pooled.repeats,
        drift_p=pooled.drift_p,
        drift_worse=pooled.drift_worse,
        drift_better=pooled.drift_better,
        flips=sorted(((k, n, of) for k, (n, of) in pooled.flips.items()), key=lambda t: -t[1]),
    )
    return Baseline(run, provenance)


@dataclass(frozen=True)
class PendingSuite:
    """A suite of a pull request that ran and has its own verdict, not yet published: the
    pull request's verdict (one familywise alpha over every suite) comes first."""

    name: str
    suite: Suite
    candidate: Run
    verdict: Verdict
    found: Baseline
    number: int
    version: str
    fork: bool
    # The judge's agreement section of the comment (suites with labels).
    judge: str | None = None


def read_pr_base(runner: Runner, loaded: LoadedConfig) -> BaseSplit:
    """The pull request's base commit's split: read through git (fetching the one commit a
    shallow checkout lacks), else through the contents API; never the head's own."""
    pr = runner.event.get("pull_request") or {}
    sha = (pr.get("base") or {}).get("sha")
    if not sha and runner.repo is not None:
        sha = gh.pull_request_info(runner.repo, _pr_number(runner.event)).base_sha
    if not isinstance(sha, str) or not sha:
        raise BaseUnavailable(
            "the event names no base commit, so the default branch's split cannot be read",
            fix="run pr mode on pull_request events",
        )
    top = runner.workspace
    # The config's path as the inputs name it, not as resolved: a symbolic link is refused.
    config = relative_config(top, top / runner.inputs.working_directory / runner.inputs.config)
    tree: Tree
    try:
        tree = GitTree.open(toplevel(top) or top, sha, fetch=True)
    except BaseUnavailable as exc:
        if runner.repo is None:
            raise BaseUnavailable(
                f"{exc.what}, and there is no github_token to read it through the API",
                fix="pass github_token to the action, or check out with fetch-depth: 0",
            ) from None
        tree = gh.ContentsTree(runner.repo, sha)
    return read_tree(tree, config, loaded)


def run_pr(
    runner: Runner,
    loaded: LoadedConfig,
    name: str,
    suite: Suite,
    base: BaseSplit | BaseUnavailable,
) -> PendingSuite | None:
    number = _pr_number(runner.event)
    fork = runner.read_only
    # A fork's token is read-only: it can write no check run (nor a comment).
    runner.check = runner.check or not fork
    pull = gh.pull_request_info(runner.repo, number) if runner.repo is not None else None
    if pull is not None:
        touched = {(runner.workspace / p).resolve() for p in pull.changed_files}
        if not touched & set(loaded.dependencies(suite)):
            runner.log(
                f"{name}: skipped, the pull request changes none of its prompts, cases or config"
            )
            runner.add_summary(
                f"**{name}**: skipped (the pull request changes none of its files).\n"
            )
            runner.verdicts.append("skipped")
            return None
    offline = suite.model.backend == "fake"
    if not offline and not runner.inputs.anthropic_api_key.get_secret_value() and fork:
        _fork_notice(runner, name, number)
        return None

    if isinstance(base, BaseUnavailable):
        _stopped(runner, name, number, base.one_line())
        return None
    assign, holdout_change = guard(base, name, loaded)
    version = loaded.ship_version(suite)
    options = RunOptions(cache=True, assign=assign)
    candidate = run_version(runner.world(), loaded, name, version, options)
    change = holdout_change()
    merge = (
        gh.merge_base(runner.repo, pull.base_ref, pull.head_sha)
        if runner.repo is not None and pull is not None
        else None
    )
    found = find_baseline_run(runner, loaded, name, suite, candidate, merge)
    if found.run is None and suite.gate.no_baseline == "run" and pull is not None:
        found = _baseline_in_job(runner, loaded, name, suite, version, pull.base_sha, assign)
    verdict = decide(found.run, candidate, suite.gate)
    runner.annotations += _broken_annotations(runner, loaded, suite, assign, verdict)
    if change.changed:
        # The job ran on the default branch's split, which is safe; but a change of the
        # holdout is for the default branch to make, after review: it cannot pass here.
        verdict = verdict.model_copy(update={"mismatch": [change.line(), *verdict.mismatch]})
        runner.must_fail = (
            "this pull request changes the holdout, which is decided on the default branch: "
            "the job fails whatever fail_on says (see the comment)"
        )
    judge = None
    if suite.judge is not None:
        # The judge, checked against its labels and, when the PR changed it, against the base's.
        base_sha = pull.base_sha if pull is not None else None

        def read_base(path: Path) -> str | None:
            if runner.repo is None or base_sha is None:
                return None
            relative = path.resolve().relative_to(runner.workspace.resolve()).as_posix()
            return gh.read_data_file(runner.repo, base_sha, relative)

        # A read of the holdout labels is kept in the suite's ledger on the data branch, like
        # a release's read of the holdout: a job that cannot write there reads dev only.
        keep = runner.repo is not None and not runner.read_only
        pulled = pull_ledger(runner, loaded, name) if keep else None
        unread = None if keep else "this job's token cannot record the read"
        judge = judge_in_pr(
            runner.context(), loaded, name, suite, read_base, candidate, holdout_unread=unread
        )
        if keep:
            try:
                push_ledger(runner, loaded, name, pulled, f"evalgate: judge labels read for {name}")
            except gh.GitHubError as exc:
                line = (
                    f"{name}: the judge's holdout labels were read, but the read could not be kept "
                    f"on the {DATA_BRANCH} branch ({exc.what}): give the pull-request job "
                    "contents: write, or every read of them goes uncounted"
                )
                runner.must_fail = f"{runner.must_fail}; {line}" if runner.must_fail else line
                judge.markdown += f"\n> [!CAUTION]\n> {escape(line, 'markdown')}\n"
        # Settled with the pull request's other tests (decide_pull_request): a judge that
        # cannot be read makes the suite inconclusive, a judge that got worse fails it.
        verdict = verdict.model_copy(
            update={
                "mismatch": [*judge.doubts, *verdict.mismatch],
                "rule_failures": [*judge.failures, *verdict.rule_failures],
            }
        )
    markdown = judge.markdown if judge else None
    return PendingSuite(name, suite, candidate, verdict, found, number, version, fork, markdown)


def publish_pull_request(
    runner: Runner, pending: list[PendingSuite]
) -> list[tuple[VerdictKind, dict[str, str]]]:
    """Settle every suite with one familywise alpha, then publish each; (kind, outputs) each."""
    decision = decide_pull_request([(p.name, p.verdict) for p in pending])
    if len(pending) > 1:
        runner.log(decision.line())
        rows = "".join(f"| {s.suite} | {s.verdict.kind} |\n" for s in decision.suites)
        runner.add_summary(
            f"### Pull request: {decision.kind.upper()}\n\n{len(pending)} suites; "
            f"{decision.tests} tests share one familywise alpha of {decision.alpha:g} "
            f"(weighted Holm).\n\n| suite | verdict |\n|---|---|\n{rows}"
        )
    results: list[tuple[VerdictKind, dict[str, str]]] = []
    for p, part in zip(pending, decision.suites, strict=True):
        runner.outputs.values = {}
        publish_pr(runner, p, part.verdict, decision if len(pending) > 1 else None)
        results.append((part.verdict.kind, dict(runner.outputs.values)))
    return results


def _baseline_in_job(
    runner: Runner,
    loaded: LoadedConfig,
    name: str,
    suite: Suite,
    version: str,
    base_sha: str,
    assign: Callable[[CaseSet], CaseSet],
) -> Baseline:
    """No artefact: run the base branch's prompt here (twice the cost, and the comment says so)."""
    path = loaded.prompt_files(suite)[version]
    relative = path.resolve().relative_to(runner.workspace.resolve()).as_posix()
    text = gh.read_data_file(runner.repo, base_sha, relative)
    if text is None:
        runner.log(f"{name}: {relative} does not exist on the base branch; no baseline")
        return Baseline(None, None, no_baseline=True)
    prompt = Prompt(name=version, text=text, path=relative)
    options = RunOptions(cache=True, prompt=prompt, assign=assign)
    run = run_version(runner.world(), loaded, name, version, options)
    provenance = BaselineProvenance(
        run=run.name,
        commit=base_sha,
        age_days=0.0,
        created_at=run.created_at,
        model=f"{run.model.backend}/{run.model.name}",
        prompt_sha=sha256_text(text)[:12],
        cases_sha=run.cases_sha256[:12],
        source="same job",
    )
    return Baseline(run, provenance)


def run_collect(runner: Runner, loaded: LoadedConfig) -> int:
    """A fork's unprivileged job: pack the pull request's changed files under the suite's
    folder as data for the base repository's ``workflow_run`` job; runs nothing, spends
    nothing, needs no secret (a read-only token lists the changed files)."""
    number = _pr_number(runner.event)
    if runner.repo is None:
        raise UserError(
            "collect mode lists the pull request's changed files through the API",
            fix="pass github_token (a fork's read-only token is enough)",
        )
    pull = gh.pull_request_info(runner.repo, number)
    head = ((runner.event.get("pull_request") or {}).get("head") or {}).get("sha")
    folder = Path(os.path.relpath(loaded.root, runner.workspace)).as_posix()
    data = collect(runner.workspace, folder, pull.changed_files, number, head or pull.head_sha)
    path = loaded.state_dir / "fork" / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data.model_dump_json(), encoding="utf-8")
    runner.log(
        f"packed {len(data.files)} changed files of pull request #{number} for the base "
        f"repository's evalgate job: {path} (nothing was run)"
    )
    runner.add_summary(
        f"evalgate packed {len(data.files)} changed files of this pull request as data; the "
        "base repository's workflow_run job checks them and posts the verdict.\n"
    )
    runner.outputs.set("data_file", path)
    runner.outputs.set("verdict", "skipped")
    runner.flush()
    return 0


def prepare_fork(runner: Runner, loaded: LoadedConfig) -> bool:
    """workflow_run, in the base repository: the fork's data onto the default branch's
    checkout, and the event made the pull request's; False (with the refusal published) when
    the data asks for what only the default branch may change."""
    run = runner.event.get("workflow_run") or {}
    run_id, head = run.get("id"), run.get("head_sha")
    if run.get("event") != "pull_request" or not isinstance(run_id, int) or not head:
        raise UserError(
            "fork mode runs on the workflow_run event of a pull_request workflow",
            fix="trigger the job with `on: workflow_run: {workflows: [...], types: [completed]}`",
        )
    if runner.repo is None:
        raise UserError("fork mode needs github_token", fix="pass secrets.GITHUB_TOKEN")
    ref = gh.find_run_artifact(runner.repo, run_id, runner.inputs.fork_artifact)
    if ref is None:
        raise UserError(
            f"workflow run {run_id} has no artefact named {runner.inputs.fork_artifact!r}",
            fix="the pull_request workflow must run mode: collect and upload its data_file",
        )
    folder = gh.download_artifact(
        ref, runner.inputs.github_token.get_secret_value(), loaded.state_dir / "download"
    )
    data = read_manifest(folder / MANIFEST)
    pull = gh.pull_request_info(runner.repo, data.pull_request)
    if data.head_sha != head or pull.head_sha != head:
        raise Refused(
            f"the fork's data names pull request #{data.pull_request} at {data.head_sha[:12]}, "
            f"but this run was for {str(head)[:12]} (the pull request's head is "
            f"{pull.head_sha[:12]}): refused",
        )
    runner.event = {
        "pull_request": {
            "number": pull.number,
            "head": {"sha": head, "ref": pull.head_ref, "repo": {"full_name": pull.head_repo}},
            "base": {
                "sha": pull.base_sha,
                "ref": pull.base_ref,
                "repo": {"full_name": pull.base_repo},
            },
        },
        "repository": runner.event.get("repository") or {},
    }
    runner.fork_data = True
    try:
        written = overlay(data, runner.workspace, loaded)
    except Refused as exc:
        for name, _ in suites_to_run(loaded, runner.inputs.suite):
            _stopped(runner, name, pull.number, exc.one_line(), refused=True)
        runner.must_fail = f"the fork's pull request was refused: {exc.what}"
        runner.outputs.set("verdict", "fail")
        runner.check = True
        _publish_check(runner, "fail")
        runner.annotate("error", runner.must_fail)
        return False
    runner.log(
        f"fork pull request #{pull.number}: {len(written)} changed prompt and case files laid "
        "onto the default branch's checkout, as data"
    )
    return True


def _stopped(runner: Runner, name: str, number: int, reason: str, *, refused: bool = False) -> None:
    """Nothing ran: the base's split is unknown (or a fork's data was refused), so no case is
    known to be safe to send."""
    context = CommentContext(
        suite=name,
        flags=CommentFlags(refused=reason) if refused else CommentFlags(stopped=reason),
        pull_request=number,
        links=CommentLinks(workflow_run=runner.run_url),
    )
    runner.add_summary(render_summary(context))
    if runner.inputs.comment and runner.repo is not None and not runner.read_only:
        url, created = gh.upsert_comment(runner.repo, number, render_comment(context), marker(name))
        runner.log(f"{name}: comment {'posted' if created else 'updated'}: {url}")
    runner.annotate("warning", f"{name}: INCONCLUSIVE: nothing was run: {reason}")
    runner.outputs.set("verdict", "inconclusive")
    runner.verdicts.append("inconclusive")


def _fork_notice(runner: Runner, name: str, number: int) -> None:
    context = CommentContext(
        suite=name,
        flags=CommentFlags(fork=True),
        pull_request=number,
        links=CommentLinks(workflow_run=runner.run_url),
    )
    runner.add_summary(render_summary(context))
    runner.annotate(
        "warning",
        f"{name}: this pull request comes from a fork, which gets no secrets; nothing was run "
        "or spent. See the job summary for safe ways to gate fork pull requests.",
    )
    runner.verdicts.append("skipped")


def publish_pr(
    runner: Runner, pending: PendingSuite, verdict: Verdict, decision: PullRequestVerdict | None
) -> None:
    name, suite, candidate, found = pending.name, pending.suite, pending.candidate, pending.found
    number, version, fork = pending.number, pending.version, pending.fork
    summary = summarise(candidate, price_as=suite.price_as)
    repo, artifact = (
        runner.env.get("GITHUB_REPOSITORY", "OWNER/REPO"),
        runner.inputs.baseline_artifact,
    )
    reproduce = (
        f"evalgate baseline pull --repo {escape(repo, 'shell')} "
        f"--artifact {escape(artifact, 'shell')}\n"
        f"evalgate gate --suite {escape(name, 'shell')} "
        f"--baseline {escape(f'.evalgate/baseline/{name}.json', 'shell')} "
        f"--candidate {escape(version, 'shell')}{_base_ref_option(runner.event)}"
    )
    context = CommentContext(
        suite=name,
        verdict=verdict,
        candidate=summary,
        baseline=found.provenance,
        # The fork flag means "nothing ran"; here the suite ran (it needs no secret).
        flags=CommentFlags(no_baseline=found.no_baseline),
        links=CommentLinks(
            workflow_run=runner.run_url,
            artifact=found.provenance.artifact_url if found.provenance else None,
        ),
        reproduce=reproduce,
        pull_request=number,
        pull_request_kind=decision.kind if decision else None,
        pull_request_tests=decision.tests if decision else None,
        suite_parts=[(s.suite, s.verdict.kind) for s in decision.suites] if decision else [],
        judge=pending.judge,
    )
    runner.add_summary(render_summary(context))
    comment_url = None
    if runner.inputs.comment and runner.repo is not None:
        if fork:
            runner.annotate("notice", "fork pull request: the token is read-only, so no comment")
        else:
            comment_url, created = gh.upsert_comment(
                runner.repo, number, render_comment(context), marker(name)
            )
            runner.log(f"{name}: comment {'posted' if created else 'updated'}: {comment_url}")
    _annotate_verdict(runner, name, verdict)
    _set_outputs(runner, verdict, comment_url)
    runner.verdicts.append(verdict.kind)


def _broken_annotations(
    runner: Runner,
    loaded: LoadedConfig,
    suite: Suite,
    assign: Callable[[CaseSet], CaseSet],
    verdict: Verdict,
) -> list[dict[str, Any]]:
    """An annotation at each broken case's file:line, with its expected, baseline and pull
    request answers (cut short; annotations are plain text, so nothing there renders)."""
    if not verdict.broken:
        return []
    sources = {
        c.id: c.source
        for c in load_suite_cases(loaded, suite, assign=assign).cases
        if c.split != "holdout"
    }
    notes = []
    for case in verdict.broken:
        path, _, line = sources.get(case.id, "").rpartition(":")
        try:
            relative = Path(path).resolve().relative_to(runner.workspace.resolve()).as_posix()
        except ValueError:
            continue
        notes.append(
            {
                "path": relative,
                "start_line": int(line) if line.isdigit() else 1,
                "end_line": int(line) if line.isdigit() else 1,
                "annotation_level": "failure",
                "title": f"broken: {case.id}"[:200],
                "message": (
                    f"expected {case.expected!s:.200}; the baseline answered "
                    f"{case.baseline_answer!s:.200}; this pull request answered "
                    f"{case.candidate_answer!s:.200}"
                ),
            }
        )
    return notes


def _publish_check(runner: Runner, worst: VerdictKind) -> None:
    """One check run named evalgate on the pull request's head: the verdict teams can require."""
    pr = runner.event.get("pull_request") or {}
    head = (pr.get("head") or {}).get("sha")
    if runner.repo is None or not isinstance(head, str) or not runner.check:
        return
    failing = runner.must_fail or worst in set(runner.inputs.fail_on)
    conclusion: gh.CheckConclusion = {
        "pass": "success",
        "fail": "failure",
        "inconclusive": "failure" if failing else "neutral",
        "skipped": "skipped",
    }[worst]
    title = f"evalgate: {worst.upper()}"
    summary = "\n".join(runner.summary) or title
    kind, url = gh.publish_check(
        runner.repo,
        head,
        "evalgate",
        conclusion,
        title,
        summary,
        runner.annotations,
        details_url=runner.run_url,
    )
    if kind == "status":
        runner.log(
            "the token cannot create check runs (it needs checks: write): set the commit "
            "status evalgate instead, without annotations"
        )
    else:
        runner.log(f"check run evalgate: {conclusion}: {url}")


def _base_ref_option(event: dict[str, Any]) -> str:
    """``--base-ref SHA``: locally too, the split is the pull request's base commit's."""
    sha = ((event.get("pull_request") or {}).get("base") or {}).get("sha")
    if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{7,64}", sha):
        return f" --base-ref {sha}"
    return ""


def _annotate_verdict(runner: Runner, name: str, verdict: Verdict) -> None:
    if verdict.kind == "fail":
        runner.annotate("error", f"{name}: FAIL: {verdict.reasons[0]}")
    elif verdict.kind == "inconclusive":
        runner.annotate("warning", f"{name}: INCONCLUSIVE: {verdict.reasons[0]}")
    else:
        runner.log(f"{name}: PASS: {verdict.reasons[0] if verdict.reasons else ''}")
    for warning in verdict.warnings:
        if warning.startswith("underpowered") or "baseline" in warning:
            runner.annotate("warning", f"{name}: {warning}")


def _set_outputs(runner: Runner, verdict: Verdict, comment_url: str | None) -> None:
    out = runner.outputs
    out.set("accuracy", _num(verdict.candidate_accuracy.rate))
    out.set(
        "baseline_accuracy",
        _num(verdict.baseline_accuracy.rate) if verdict.baseline_accuracy else "",
    )
    out.set("fixed", len(verdict.fixed))
    out.set("broken", len(verdict.broken))
    out.set("p_value", _num(verdict.p_value))
    out.set("mde", _num(verdict.mde))
    if comment_url:
        out.set("comment_url", comment_url)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def _ledger_file(name: str) -> str:
    return f"evalgate/{name}/holdout-ledger.jsonl"


def pull_ledger(runner: Runner, loaded: LoadedConfig, name: str) -> str:
    """The suite's read ledger from the data branch, copied over the job's own (which the
    commands append to); returns the text pulled, so push_ledger knows what this job added."""
    text = gh.read_data_file(runner.repo, DATA_BRANCH, _ledger_file(name)) or ""
    ledger = ledger_path(loaded)
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text(text, encoding="utf-8")
    return text


def push_ledger(
    runner: Runner, loaded: LoadedConfig, name: str, pulled: str | None, message: str
) -> None:
    """Append the reads this job recorded (since pull_ledger) to the data branch's ledger; the
    append is applied to the file as it is then, so a concurrent job's reads are kept too."""
    text = ledger_path(loaded).read_text(encoding="utf-8")
    added = text[len(pulled or "") :]  # the job's ledger is only ever appended to
    if not added:
        return

    def append(current: str | None) -> str:
        kept = current or ""
        return kept + ("\n" if kept and not kept.endswith("\n") else "") + added

    gh.write_data_file(runner.repo, DATA_BRANCH, _ledger_file(name), append, message)


def run_audit(runner: Runner, loaded: LoadedConfig, name: str, suite: Suite) -> None:
    """Audit a searched prompt on the holdout; the report goes to the job summary only."""
    inputs = runner.inputs
    if not inputs.candidate or not inputs.baseline_version:
        raise UserError(
            "audit mode needs the candidate and baseline_version inputs",
            fix="run it from workflow_dispatch with both set",
        )
    if suite.sealed_holdout is not None and not inputs.holdout_key.get_secret_value():
        raise UserError(
            "audit mode reads the sealed holdout and has no holdout_key",
            fix="run the audit job in the protected environment that holds the key",
        )
    holdout_only = frozenset({"holdout"})
    pulled = pull_ledger(runner, loaded, name) if runner.repo is not None else None
    runs = [
        run_version(
            runner.world(),
            loaded,
            name,
            version,
            RunOptions(cache=True, splits=holdout_only, purpose="audit"),
        )
        for version in (inputs.candidate, inputs.baseline_version)
    ]
    if runner.repo is not None:
        push_ledger(runner, loaded, name, pulled, f"evalgate: holdout read by an audit of {name}")
    report = audit(
        runs[0],
        runs[1],
        fitted_score=inputs.fitted_score,
        searched=inputs.searched,
        tuning_cases=inputs.tuning_cases,
        alpha=suite.gate.alpha,
        seed=suite.gate.seed,
    )
    runner.add_summary(render("audit.md.j2", s=report))
    runner.outputs.set("accuracy", _num(report.candidate_holdout.rate))
    runner.outputs.set("baseline_accuracy", _num(report.baseline_holdout.rate))
    runner.verdicts.append("pass")


def run_release(runner: Runner, loaded: LoadedConfig, name: str, suite: Suite) -> None:
    """The release gate, with history and the ledger kept in the data branch."""
    tag = runner.env.get("GITHUB_REF_NAME") or "release"
    history_file = f"evalgate/{name}/releases.json"
    history: list[ReleaseRecord] = []
    ledger = ledger_path(loaded)
    pulled = None
    if runner.repo is not None:
        text = gh.read_data_file(runner.repo, DATA_BRANCH, history_file)
        try:
            history = [ReleaseRecord.model_validate(r) for r in json.loads(text)] if text else []
        except (ValueError, TypeError):
            raise UserError(
                "the release history on the data branch is not a list of release records",
                where=f"{DATA_BRANCH}:{history_file}",
                fix="restore it from the data branch's git history",
            ) from None
        pulled = pull_ledger(runner, loaded, name)
    version = loaded.ship_version(suite)
    run, record, report = release_version(
        runner.world(),
        loaded,
        name,
        version,
        tag,
        history,
        ledger=ledger,
        options=RunOptions(cache=True),
    )
    save_run(run, loaded.state_dir)
    markdown = render("release.md.j2", s=report)
    runner.add_summary(markdown)
    if runner.repo is not None:
        # A re-run of the same tag replaces its record.
        kept = [r for r in history if r.name != tag] + [record]
        updated = [r.model_dump(mode="json") for r in kept]
        gh.write_data_file(
            runner.repo,
            DATA_BRANCH,
            history_file,
            json.dumps(updated, indent=1),
            f"evalgate: release {tag} of {name}",
        )
        push_ledger(runner, loaded, name, pulled, f"evalgate: holdout read for {tag} of {name}")
        sha = runner.env.get("GITHUB_SHA")
        if sha:
            gh.create_check_run(
                runner.repo,
                sha,
                f"evalgate release: {name}",
                "success" if report.kind == "pass" else "failure",
                f"{report.kind.upper()}: holdout {100 * (record.holdout.rate.rate or 0):.0f}% "
                f"(n={record.holdout.rate.n}), gap {100 * record.gap:.0f} pt",
                markdown,
                details_url=runner.run_url,
            )
    for warning in report.warnings:
        runner.annotate("warning", f"{name}: {warning}")
    if report.kind == "fail":
        runner.annotate("error", f"{name}: release gate FAIL: {report.reasons[0]}")
    runner.outputs.set("accuracy", _num(record.dev.rate.rate))
    runner.verdicts.append(report.kind)


# --- the entry point -----------------------------------------------------------------------


def read_event(env: Mapping[str, str]) -> dict[str, Any]:
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the event file: {exc}", where=path) from None
    return data if isinstance(data, dict) else {}


def connect_repo(env: Mapping[str, str], inputs: Inputs) -> Any:
    token = inputs.github_token.get_secret_value()
    full_name = env.get("GITHUB_REPOSITORY")
    if not token or not full_name:
        return None
    client = gh.connect(token, env.get("GITHUB_API_URL", "https://api.github.com"))
    return gh.get_repository(client, full_name)


def action(
    env: Mapping[str, str],
    out: TextIO,
    err: TextIO,
    connect: Callable[[Mapping[str, str], Inputs], Any] = connect_repo,
) -> int:
    """Run the action; returns the exit code. ``connect`` builds the GitHub repository handle."""
    runner: Runner | None = None
    # INPUT_GITHUB_TOKEN, INPUT_ANTHROPIC_API_KEY, ...: kept out of every text shown or saved.
    hold_environment(env)
    try:
        inputs = Inputs.from_env(env)
        runner = Runner(env=env, inputs=inputs, out=out, err=err, event=read_event(env))
        loaded = load_config(runner.folder / inputs.config)
        mode = detect_mode(inputs, env, runner.event, loaded.config.release_tags)
        runner.log(f"evalgate {__version__}: {mode} mode, config {loaded.path}")
        if mode == "skip":
            ref = env.get("GITHUB_REF", "")
            runner.log(
                f"nothing to do for a push to {ref}: baselines are made only from the default "
                f"branch ({runner.default_branch}); limit the workflow's push trigger to it"
            )
            runner.outputs.set("verdict", "skipped")
            runner.flush()
            return 0
        runner.repo = connect(env, inputs)
        if mode == "collect":
            return run_collect(runner, loaded)
        if mode == "fork":
            if not prepare_fork(runner, loaded):
                runner.flush()
                return 1
            mode = "pr"
        base: BaseSplit | BaseUnavailable = BaseSplit(suites={}, configured=False)
        if mode == "pr":
            try:
                base = read_pr_base(runner, loaded)
            except BaseUnavailable as exc:
                base = exc
        files = []
        # Each suite's numeric outputs; with several suites the outputs are those of the suite
        # whose verdict is the worst (the first such), so they explain the job's verdict.
        per_suite: list[tuple[VerdictKind, dict[str, str]]] = []
        pending: list[PendingSuite] = []
        for name, suite in suites_to_run(loaded, inputs.suite):
            runner.outputs.values = {}
            if mode == "baseline":
                files.append(run_baseline(runner, loaded, name, suite))
            elif mode == "pr":
                ran = run_pr(runner, loaded, name, suite, base)
                if ran is not None:
                    pending.append(ran)  # published below, with the pull request's verdict
                    continue
            elif mode == "audit":
                run_audit(runner, loaded, name, suite)
            else:
                run_release(runner, loaded, name, suite)
            per_suite.append((runner.verdicts[-1], dict(runner.outputs.values)))
        if pending:
            per_suite += publish_pull_request(runner, pending)
        worst: VerdictKind = max(runner.verdicts, key=lambda v: SEVERITY[v], default="skipped")
        chosen = next((values for kind, values in per_suite if kind == worst), {})
        runner.outputs.values = dict(chosen)
        if files:
            runner.outputs.set("run_file", files[0] if len(files) == 1 else files[0].parent)
        runner.outputs.set("verdict", worst)
        if mode == "pr":
            _publish_check(runner, worst)
        if runner.must_fail:
            runner.annotate("error", runner.must_fail)
        runner.flush()
        return 1 if runner.must_fail or worst in set(inputs.fail_on) else 0
    except EvalgateError as exc:
        _report_failure(runner, env, out, err, f"error: {exc}")
        return exc.exit_code
    except Exception as exc:
        _report_failure(
            runner, env, out, err, f"evalgate crashed: {type(exc).__name__}: {redact(str(exc))}"
        )
        err.write(redact(traceback.format_exc()))
        return 1


def _report_failure(
    runner: Runner | None, env: Mapping[str, str], out: TextIO, err: TextIO, line: str
) -> None:
    """The one-line cause, in the log, as an annotation and in the job summary."""
    # What was already reported (a verdict before a failed comment) stays in the summary.
    runner = runner or Runner(env=env, inputs=Inputs(), out=out, err=err, event={})
    runner.annotate("error", line)
    runner.add_summary(f"> [!CAUTION]\n> **evalgate stopped**: {escape(line, 'markdown')}\n")
    runner.flush()


def main() -> int:
    return action(os.environ, sys.stdout, sys.stderr)
