"""The container entrypoint: the GitHub event -> a mode -> the pipeline -> comment, summary, outputs.

``python -m evalgate action`` runs this inside the action's container. It reads the inputs
(``INPUT_<NAME>``, snake_case names so a shell can read them too) and the GitHub environment,
then for each suite:

* ``pr``: the gate on dev plus regression cases against the default branch's baseline artefact
  (never one a pull-request run made), one comment edited in place, the job summary, outputs;
* ``baseline``: dev with repeats (the noise floor), written where ``run_file`` says, for the
  workflow's upload-artifact step;
* with the ``results`` input, another harness's results file instead of a suite run: gated on
  a pull request against the default branch's artefact of its format, named as the baseline
  to upload on the default branch (results.py);
* ``release``: the holdout gate, its ledger and release history kept in a data branch, a check
  run on the tagged commit.

A user error is one line in the log, an ``::error::`` annotation and the job summary, exit 2; a
failed gate exits 1 as ``fail_on`` says; a crash also writes its one-line cause to the summary,
and its traceback to the log collapsed in a group, every line of it inert (no workflow command).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from evalgate import __version__
from evalgate.action.audit import run_audit
from evalgate.action.baseline import keep_other_pull_spend, run_baseline
from evalgate.action.inputs import SEVERITY, Inputs, VerdictKind
from evalgate.action.job import ActionJob
from evalgate.action.modes import detect_mode, skip_reason, suites_to_run
from evalgate.action.pr import (
    PendingSuite,
    prepare_fork,
    publish_check,
    publish_pull_request,
    read_pr_base,
    run_collect,
    run_pr,
)
from evalgate.action.release import run_release
from evalgate.action.results import run_results
from evalgate.action.spend import run_closed
from evalgate.action.state import JobState, checkout_state_note
from evalgate.cases.base_split import (
    BaseSplit,
    BaseUnavailable,
)
from evalgate.config.load import load_config
from evalgate.errors import EvalgateError, UserError
from evalgate.publish import github as gh
from evalgate.redact import hold_environment, redact
from evalgate.report.escape import escape, log_block


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
    runner: ActionJob | None = None
    # INPUT_GITHUB_TOKEN, INPUT_ANTHROPIC_API_KEY, ...: kept out of every text shown or saved.
    hold_environment(env)
    try:
        inputs = Inputs.from_env(env)
        runner = ActionJob(env=env, inputs=inputs, out=out, err=err, event=read_event(env))
        if inputs.results:
            # Another harness's results: gated or recorded, no suite run (results.py).
            runner.log(f"evalgate {__version__}: results {inputs.results}")
            runner.repo = connect(env, inputs)
            runner.state = JobState.create(env, runner.workspace)
            return run_results(runner)
        loaded = load_config(runner.folder / inputs.config)
        mode = detect_mode(inputs, env, runner.event, loaded.config.release_tags)
        runner.log(f"evalgate {__version__}: {mode} mode, config {loaded.path}")
        if mode == "skip":
            runner.log(skip_reason(env, runner.event, runner.default_branch))
            runner.outputs.set("verdict", "skipped")
            runner.flush()
            return 0
        runner.repo = connect(env, inputs)
        if mode == "collect":
            return run_collect(runner, loaded)
        if mode == "closed":
            return run_closed(runner, loaded)
        # The checkout is data: the job's state lives in a folder of its own (state.py).
        runner.state = JobState.create(env, runner.workspace)
        checkout = loaded
        loaded = runner.state.apply(loaded)
        if mode == "fork":
            if not prepare_fork(runner, loaded):
                runner.flush()
                return 1
            mode = "pr"
        if mode == "pr":
            runner.ignored_state = checkout_state_note(checkout, runner.workspace)
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
        if mode == "baseline":
            keep_other_pull_spend(runner, loaded)
        worst: VerdictKind = max(runner.verdicts, key=lambda v: SEVERITY[v], default="skipped")
        chosen = next((values for kind, values in per_suite if kind == worst), {})
        runner.outputs.values = dict(chosen)
        if files:
            runner.outputs.set("run_file", files[0] if len(files) == 1 else files[0].parent)
        runner.outputs.set("verdict", worst)
        if mode == "pr":
            publish_check(runner, worst)
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
        write_trace(err, redact(traceback.format_exc()))
        return 1
    finally:
        if runner is not None and runner.repo is not None:
            gh.disconnect(runner.repo)
        if runner is not None and runner.state is not None:
            runner.state.remove()


def _report_failure(
    runner: ActionJob | None, env: Mapping[str, str], out: TextIO, err: TextIO, line: str
) -> None:
    """The one-line cause, in the log, as an annotation and in the job summary."""
    # What was already reported (a verdict before a failed comment) stays in the summary.
    runner = runner or ActionJob(env=env, inputs=Inputs(), out=out, err=err, event={})
    runner.annotate("error", line)
    runner.add_summary(f"> [!CAUTION]\n> **evalgate stopped**: {escape(line, 'markdown')}\n")
    runner.flush()


def write_trace(err: TextIO, trace: str) -> None:
    """A crash's traceback, collapsed in the log. Its text can quote anything (a reply, a file,
    an upstream's error), so no line of it may act as a workflow command: the block runs with
    commands stopped under a token nobody else knows, and each line is also made inert."""
    token = secrets.token_hex(16)
    err.write(f"::group::evalgate crashed: the traceback\n::stop-commands::{token}\n")
    err.writelines(line + "\n" for line in log_block(trace))
    err.write(f"::{token}::\n::endgroup::\n")
    err.flush()


def main() -> int:
    return action(os.environ, sys.stdout, sys.stderr)
