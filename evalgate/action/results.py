"""The ``results`` input: another harness's results file (promptfoo, Inspect, JUnit XML), which
an earlier step of the workflow wrote, gated instead of a suite run.

* On a pull request, the file is paired with the default branch's baseline artefact of the same
  format (found as evalgate's own baselines are: only runs of a push, schedule or manual run on
  the default branch count), decided as two evalgate runs are, and published the same way: one
  comment, the job summary, the check run, the outputs.
* On the default branch, the file is read (a truncated, unfinished or unpairable file stops
  here, not in every pull request after it) and named by the ``run_file`` output, which the
  workflow's upload-artifact step uploads as the baseline artefact.

The gate settings are those of the config's suite when there is an evalgate.yml (``suite``
names it when it has several), else the defaults, and the report says so. Nothing is run, so
nothing is spent and no secret is needed.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

from evalgate.action.baseline import artifact_provenance, download_baseline
from evalgate.action.inputs import Mode
from evalgate.action.job import ActionJob, pr_number
from evalgate.action.modes import detect_mode, skip_reason
from evalgate.action.pr import publish_check, publish_verdict
from evalgate.analysis.summary import summarise
from evalgate.config.load import load_config
from evalgate.config.models import GatePolicy
from evalgate.errors import RunFileError, UserError
from evalgate.foreign import detect, read_foreign
from evalgate.foreign.build import ForeignRun
from evalgate.foreign.gate import decide_foreign, defaults_line, dropped_notes
from evalgate.globs import expand, is_magic, parts
from evalgate.publish import github as gh
from evalgate.report.comment import (
    BaselineProvenance,
    CommentContext,
    CommentFlags,
    CommentLinks,
)
from evalgate.report.escape import escape
from evalgate.report.render import render_model
from evalgate.runs.schema import MAX_RUN_BYTES, Run

_MODES = ("pr", "baseline", "closed", "skip")


def run_results(runner: ActionJob) -> int:
    """The job when the ``results`` input is given; returns the exit code."""
    inputs = runner.inputs
    policy, suite_name, tags, notes = _settings(runner)
    mode: Mode = detect_mode(inputs, runner.env, runner.event, tags)
    if mode not in _MODES:
        raise UserError(
            f"the results input gates pull requests and records the default branch's "
            f"baseline; {mode} mode runs evalgate's own suites",
            where="input results",
            fix="remove results: from this step, or run it on pull_request or push",
        )
    runner.log(f"{mode} mode on another harness's results ({inputs.results})")
    if mode in ("skip", "closed"):
        # A closed pull request's gate has nothing left to decide, and gating results spends
        # nothing: there is no spend to keep either.
        runner.log(skip_reason(runner.env, runner.event, runner.default_branch))
        runner.outputs.set("verdict", "skipped")
        runner.flush()
        return 0
    path = results_file(runner.folder, str(inputs.results))
    # Read as every file of the checkout is: never through a link that leads out of it.
    foreign = read_foreign(path, root=runner.workspace)
    run = foreign.run()
    name = suite_name or run.suite
    if mode == "baseline":
        return _record(runner, foreign, run, name, notes)
    return _gate(runner, foreign, run, name, policy, notes)


def _settings(runner: ActionJob) -> tuple[GatePolicy, str | None, str, list[str]]:
    """The gate settings: the config's suite's when there is a config, else the defaults."""
    config = runner.folder / runner.inputs.config
    if not config.is_file():
        policy = GatePolicy()
        return policy, None, "v*", [defaults_line(policy, runner.inputs.config)]
    loaded = load_config(config)
    suites = list(loaded.config.suites)
    wanted = runner.inputs.suite
    if wanted == "all" and len(suites) > 1:
        raise UserError(
            f"the results input is gated with one suite's gate settings, and {config} has "
            f"{len(suites)} ({', '.join(suites)})",
            where="input suite",
            fix="name the suite whose gate: applies with the suite input",
        )
    name, suite = loaded.suite(suites[0] if wanted == "all" else wanted)
    return suite.gate, name, loaded.config.release_tags, []


def results_file(folder: Path, pattern: str) -> Path:
    """The one file ``pattern`` names under ``folder`` (a glob must match exactly one)."""
    if not any(is_magic(p) for p in parts(pattern)):
        path = folder / pattern
        if not path.is_file():
            raise RunFileError(
                "the results input names no file",
                where=str(path),
                fix="write the results in an earlier step (promptfoo eval -o FILE, inspect "
                "eval --log-dir DIR), with the path relative to working_directory",
            )
        return path
    found = [p for p in expand(folder, pattern, 1000) if p.is_file()]
    if len(found) != 1:
        listed = ", ".join(str(p.relative_to(folder)) for p in found[:5])
        raise RunFileError(
            f"the results input {pattern!r} matches {len(found)} files"
            + (f" ({listed})" if found else ""),
            where=str(folder),
            fix="name one results file (clear the log folder before the run, or name its file)",
        )
    return found[0]


def _record(runner: ActionJob, foreign: ForeignRun, run: Run, name: str, notes: list[str]) -> int:
    """The default branch: the file, read and summarised, named for the upload step."""
    summary = summarise(run, price_as=None)
    runner.add_summary(f"## evalgate baseline: {escape(name, 'markdown')} ({foreign.format})\n")
    runner.add_summary(render_model("run", summary, "markdown"))
    for line in [*dropped_notes(foreign), *notes]:
        runner.add_summary(f"> [!NOTE]\n> {escape(line, 'markdown')}\n")
    runner.outputs.set("accuracy", f"{summary.accuracy.rate or 0:.4f}")
    runner.outputs.set("run_file", foreign.path)
    if run.interrupted:
        runner.annotate(
            "error",
            f"{foreign.path}: the {foreign.format} run did not finish: it is no baseline; "
            "re-run it on the default branch",
        )
        runner.outputs.set("verdict", "fail")
        runner.flush()
        return 1
    runner.log(
        f"{foreign.format} results {foreign.path} ({len(run.cases)} cases, {run.repeats} "
        "repeats) are the baseline: the upload-artifact step uploads outputs.run_file"
    )
    runner.outputs.set("verdict", "pass")
    runner.flush()
    return 0


def _gate(
    runner: ActionJob,
    foreign: ForeignRun,
    candidate: Run,
    name: str,
    policy: GatePolicy,
    notes: list[str],
) -> int:
    """A pull request: the file against the default branch's artefact of its format."""
    number = pr_number(runner.event)
    fork = runner.read_only
    runner.check = not fork
    baseline, provenance, more = _find_baseline(runner, foreign, candidate, policy)
    baseline_name = str(provenance.artifact_url) if provenance else "baseline"
    verdict = decide_foreign(
        baseline,
        candidate,
        policy,
        [*more, *dropped_notes(foreign), *notes],
        (baseline_name, str(foreign.path)),
        frozenset(foreign.left_out),
    )
    repo = runner.env.get("GITHUB_REPOSITORY", "OWNER/REPO")
    relative = _relative(foreign.path, runner.workspace)
    reproduce = (
        f"evalgate baseline pull --repo {escape(repo, 'shell')} "
        f"--artifact {escape(runner.inputs.baseline_artifact, 'shell')}\n"
        f"evalgate gate --baseline {escape('.evalgate/baseline/' + foreign.path.name, 'shell')} "
        f"--candidate {escape(relative, 'shell')}"
    )
    context = CommentContext(
        suite=name,
        verdict=verdict,
        candidate=summarise(candidate, price_as=None),
        baseline=provenance,
        flags=CommentFlags(no_baseline=baseline is None),
        links=CommentLinks(
            workflow_run=runner.run_url,
            artifact=provenance.artifact_url if provenance else None,
        ),
        reproduce=reproduce,
        pull_request=number,
    )
    publish_verdict(runner, name, number, fork, context, verdict)
    runner.outputs.set("verdict", verdict.kind)
    publish_check(runner, verdict.kind)
    runner.flush()
    return 1 if verdict.kind in set(runner.inputs.fail_on) else 0


def _find_baseline(
    runner: ActionJob, foreign: ForeignRun, candidate: Run, policy: GatePolicy
) -> tuple[Run | None, BaselineProvenance | None, list[str]]:
    """The default branch's trusted artefact's file of the candidate's format, read; or none,
    with the reason as a note."""
    if runner.repo is None:
        return None, None, ["no github_token, so no baseline artefact could be looked up"]
    pull = gh.pull_request_info(runner.repo, pr_number(runner.event))
    merge = gh.merge_base(runner.repo, pull.base_ref, pull.head_sha)
    # The job's own state folder: a download folder in the checkout could hold files the
    # pull request committed, taken for the baseline.
    state = runner.state.folder if runner.state is not None else Path(tempfile.mkdtemp())
    found = download_baseline(runner, merge, state / "download")
    if found is None:
        return None, None, []
    ref, folder = found
    path = _same_format(folder, foreign)
    if path is None:
        runner.log(
            f"the baseline artefact {ref.name!r} (run {ref.html_url}) holds no "
            f"{foreign.format} results"
        )
        return None, None, [f"the baseline artefact holds no {foreign.format} results"]
    base = read_foreign(path, foreign.format)
    # A file that does not date itself is as old as its artefact (not as its extraction).
    base.created_at = base.created_at or ref.created_at
    run = base.run()
    provenance = artifact_provenance(
        runner,
        run,
        ref,
        candidate,
        max_age_days=policy.max_baseline_age_days,
        merge_base=merge,
        now=datetime.now(UTC),
    )
    return run, provenance, dropped_notes(base)


def _same_format(folder: Path, foreign: ForeignRun) -> Path | None:
    """The artefact's file of the candidate's format: the one of the same name first, else
    the only one; several of the format and none of the name is an error."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.stat().st_size > MAX_RUN_BYTES:
            continue
        if detect(path, path.read_bytes()) == foreign.format:
            found.append(path)
    named = [p for p in found if p.name == foreign.path.name]
    if named:
        return named[0]
    if len(found) > 1:
        raise RunFileError(
            f"the baseline artefact holds {len(found)} {foreign.format} files and none is "
            f"named {foreign.path.name}",
            where=str(folder),
            fix="upload one results file per baseline artefact, under the name the pull "
            "request's step writes",
        )
    return found[0] if found else None


def _relative(path: Path, workspace: Path) -> str:
    try:
        return path.resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return str(path)
