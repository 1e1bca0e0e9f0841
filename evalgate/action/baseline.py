"""Baseline mode (a push to the default branch): the dev split with repeats, written for the
workflow's upload step and kept in the data branch's history; and how a pull request finds it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from evalgate.action.job import ActionJob
from evalgate.action.spend import keep_each, keep_spend, pull_spend
from evalgate.analysis.noise import measure_noise
from evalgate.analysis.provenance import differences
from evalgate.analysis.summary import summarise
from evalgate.app import (
    RunOptions,
    run_version,
)
from evalgate.config.load import LoadedConfig
from evalgate.config.models import Suite
from evalgate.defaults import DATA_BRANCH, STATE_DIR, data_file
from evalgate.publish import github as gh
from evalgate.report.comment import (
    BaselineProvenance,
)
from evalgate.report.render import mde, render_model
from evalgate.running.allocation import AdaptiveSource, held_out
from evalgate.runs.history import appended, pool, read_history, record_of
from evalgate.runs.schema import Run, read_run
from evalgate.runs.spend import SpendRecord, spend_of


def merged_pull_spend(runner: ActionJob) -> dict[str, list[SpendRecord]]:
    """What the pull requests merged as this push's commit spent, by suite: each pull-request
    job's records, carried in the ledger of evalgate's comment (spend.pull_spend); read once a
    job. One closed without merging: closed_pull_spend."""
    if "merged" not in runner.pull_spend:
        # A push event names the commit it pushed (GITHUB_SHA is the same commit on GitHub; a
        # local runner such as act sets it from its own checkout instead).
        sha = runner.event.get("after") or runner.env.get("GITHUB_SHA")
        runner.pull_spend["merged"] = (
            pull_spend(runner, "merged", lambda repo: gh.merged_as(repo, str(sha))) if sha else {}
        )
    return runner.pull_spend["merged"]


#: How far back a baseline job looks for pull requests closed without merging: the workflow
#: evalgate writes runs a baseline job at least weekly (its schedule), so a day to spare.
CLOSED_LOOKBACK = timedelta(days=8)


def closed_pull_spend(runner: ActionJob) -> dict[str, list[SpendRecord]]:
    """What the pull requests closed without merging in the last ``CLOSED_LOOKBACK`` spent,
    by suite, from the ledger of evalgate's comment on each (read again by each job in that
    time; a record already kept is not kept twice); read once a job."""
    if "closed" not in runner.pull_spend:
        since = datetime.now(UTC) - CLOSED_LOOKBACK
        runner.pull_spend["closed"] = pull_spend(
            runner, "closed", lambda repo: gh.closed_unmerged_since(repo, since)
        )
    return runner.pull_spend["closed"]


def keep_other_pull_spend(runner: ActionJob, loaded: LoadedConfig) -> None:
    """After every suite's baseline: what the pull requests spent on suites this config does
    not have (one only a pull request had, one renamed or removed since), kept all the same."""
    merged, closed = merged_pull_spend(runner), closed_pull_spend(runner)
    found = {n: [*merged.get(n, []), *closed.get(n, [])] for n in {*merged, *closed}}
    keep_each(runner, found, skip=loaded.config.suites)


def baseline_path(folder: Path, suite: str) -> Path:
    return folder / STATE_DIR / "baseline" / f"{suite}.json"


def run_baseline(runner: ActionJob, loaded: LoadedConfig, name: str, suite: Suite) -> Path:
    version = loaded.ship_version(suite)
    repeats = suite.gate.baseline_repeats
    # Repeats measure noise, which a cached reply cannot; a deterministic suite (temperature 0,
    # one repeat) may reuse replies the job already has (its cache lives as long as the job).
    deterministic = suite.model.temperature == 0 and repeats == 1
    options = RunOptions(repeats=repeats, cache=deterministic)
    run = run_version(runner.world(), loaded, name, version, options)
    path = baseline_path(runner.folder, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run.model_dump_json(indent=1), encoding="utf-8")
    # Spent whether or not the baseline is complete: the cost history keeps every job's calls,
    # and those of the pull requests merged as this commit (their comments' ledgers).
    pulls = [*merged_pull_spend(runner).get(name, []), *closed_pull_spend(runner).get(name, [])]
    keep_spend(runner, name, [spend_of(run, "baseline"), *pulls])
    noise = measure_noise(run, suite.gate)
    summary = summarise(run, price_as=suite.price_as)
    runner.add_summary(f"## evalgate baseline: {name}\n")
    runner.add_summary(render_model("run", summary, "markdown"))
    if noise is not None:
        runner.add_summary(
            f"Noise floor: flip rate {100 * noise.flip_rate:.1f}% over {noise.repeats} repeats "
            f"({noise.flips} unstable cases); minimum detectable effect "
            f"{mde(noise.mde)} over {noise.counted}.\n"
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
    return data_file(name, "baselines.jsonl")


def _keep_in_history(runner: ActionJob, name: str, suite: Suite, run: Run) -> None:
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
    # gate.repeats: adaptive: the earlier baselines, held out of the test, that allocate.
    allocation: AdaptiveSource | None = None


def _candidate_warnings(run: Run, candidate: Run | None) -> list[str]:
    """What makes the baseline a poor match for the candidate: other cases, another model."""
    d = differences(run, candidate) if candidate is not None else None
    warnings = []
    if d is not None and d.cases_changed:
        warnings.append("other-cases")
    if d is not None and d.model is not None:
        warnings.append("other-model")
    return warnings


def with_candidate(found: Baseline, candidate: Run) -> Baseline:
    """A baseline found before the candidate ran, with the warnings the candidate adds."""
    if found.run is None or found.provenance is None:
        return found
    more = [
        w for w in _candidate_warnings(found.run, candidate) if w not in found.provenance.warnings
    ]
    if not more:
        return found
    provenance = found.provenance.model_copy(
        update={"warnings": [*found.provenance.warnings, *more]}
    )
    return replace(found, provenance=provenance)


def find_baseline_run(
    runner: ActionJob,
    loaded: LoadedConfig,
    name: str,
    suite: Suite,
    candidate: Run | None,
    merge_base: str | None,
) -> Baseline:
    """The default branch's baseline artefact, downloaded and checked, or None."""
    if runner.repo is None:
        return Baseline(None, None, no_baseline=True)
    found = download_baseline(runner, merge_base, loaded.state_dir / "download")
    if found is None:
        return Baseline(None, None, no_baseline=True)
    ref, folder = found
    wanted = folder / f"{name}.json"
    run = read_run(wanted) if wanted.exists() else gh.load_baseline_run(folder)
    if run.suite != name:
        # The artefact holds another suite's baseline: comparing against it would mean nothing.
        runner.log(f"{name}: the baseline artefact has no run of this suite (found {run.suite})")
        return Baseline(None, None, no_baseline=True)
    now = datetime.now(UTC)
    history_text = gh.read_data_file(runner.repo, DATA_BRANCH, _history_file(name))
    own = run
    run, pooled = pool(
        run,
        read_history(history_text, _history_file(name)),
        now=now,
        max_age_days=suite.gate.max_baseline_age_days,
        alpha=suite.gate.alpha,
    )
    allocation = None
    if suite.gate.repeats == "adaptive" and pooled.runs > 1:
        # The earlier baselines allocate the candidate's repeats, so they stay out of the test.
        held = pooled.runs - 1
        source = f"{held} earlier baseline{'s' if held > 1 else ''} (held out of the test)"
        allocation = AdaptiveSource(held_out(own, run), source, suite.gate.unstable_repeats)
        run, pooled = own, pooled.model_copy(update={"runs": 1, "repeats": own.repeats})
    provenance = artifact_provenance(
        runner,
        run,
        ref,
        candidate,
        max_age_days=suite.gate.max_baseline_age_days,
        merge_base=merge_base,
        now=now,
        label=f"{name}: ",
    ).model_copy(
        update=dict(
            pooled_runs=pooled.runs,
            pooled_repeats=pooled.repeats,
            drift_p=pooled.drift_p,
            drift_worse=pooled.drift_worse,
            drift_better=pooled.drift_better,
            flips=sorted(((k, n, of) for k, (n, of) in pooled.flips.items()), key=lambda t: -t[1]),
        )
    )
    return Baseline(run, provenance, allocation=allocation)


def download_baseline(
    runner: ActionJob, merge_base: str | None, into: Path
) -> tuple[gh.BaselineRef, Path] | None:
    """The default branch's newest trusted baseline artefact (the merge base's first),
    downloaded into ``into`` (a folder of the job's own state, never of the checkout)."""
    assert runner.repo is not None
    ref = gh.find_baseline(
        runner.repo,
        runner.inputs.baseline_artifact,
        runner.default_branch,
        prefer_sha=merge_base,
        workflow_path=runner.workflow_path,
    )
    if ref is None:
        return None
    return ref, gh.download_artifact(ref, runner.inputs.github_token.get_secret_value(), into)


def artifact_provenance(
    runner: ActionJob,
    run: Run,
    ref: gh.BaselineRef,
    candidate: Run | None,
    *,
    max_age_days: float,
    merge_base: str | None,
    now: datetime,
    label: str = "",
) -> BaselineProvenance:
    """Where a baseline downloaded from an artefact comes from, and what is wrong with it
    (stale, of another commit, made otherwise than the candidate), warning when it is stale."""
    age = (now - run.created_at).total_seconds() / 86400
    warnings = []
    if age > max_age_days:
        warnings.append("stale")
        runner.annotate(
            "warning",
            f"{label}the baseline is {age:.0f} days old (max_baseline_age_days: "
            f"{max_age_days:g}); refresh it by running the workflow on the default branch",
        )
    if merge_base and ref.head_sha != merge_base:
        warnings.append("other-commit")
    warnings += _candidate_warnings(run, candidate)
    return BaselineProvenance(
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
    )
