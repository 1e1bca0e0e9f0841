"""Release mode (a release tag): the holdout gate, its ledger and history in the data branch."""

from __future__ import annotations

import json

from pydantic import TypeAdapter, ValidationError

from evalgate.action.inputs import output_number
from evalgate.action.job import ActionJob
from evalgate.action.ledger import pull_ledger, push_ledger
from evalgate.action.spend import keep_spend
from evalgate.analysis.history import check_run_where
from evalgate.analysis.release import ReleaseRecord
from evalgate.app import (
    RunOptions,
    holdout_secret,
    ledger_path,
    release_version,
)
from evalgate.cases.holdout import (
    HoldoutKey,
    SealedChange,
    anchor_line,
    anchors_in,
    anchors_of,
    parse_changes,
    release_anchor,
)
from evalgate.config.load import LoadedConfig
from evalgate.config.models import Suite
from evalgate.defaults import DATA_BRANCH, data_file
from evalgate.errors import UserError, from_validation
from evalgate.publish import github as gh
from evalgate.report.render import render, render_model
from evalgate.runs.schema import save_run
from evalgate.runs.spend import month_of, month_spend, spend_of

# The data branch's releases.json: a JSON list of release records.
_HISTORY = TypeAdapter(list[ReleaseRecord])


def run_release(runner: ActionJob, loaded: LoadedConfig, name: str, suite: Suite) -> None:
    """The release gate, with history and the ledger kept in the data branch."""
    tag = runner.env.get("GITHUB_REF_NAME") or "release"
    check_name = f"evalgate release: {name}"
    history_file = data_file(name, "releases.json")
    history: list[ReleaseRecord] = []
    ledger = ledger_path(loaded)
    pulled = None
    anchors: list[tuple[str, SealedChange]] = []
    key = HoldoutKey(holdout_secret(runner.env, suite))
    if runner.repo is not None:
        history = _parse_history(
            gh.read_data_file(runner.repo, DATA_BRANCH, history_file), history_file
        )
        pulled = pull_ledger(runner, loaded, name)
        anchors = _default_branch_anchors(runner, loaded, suite)
        anchors += _check_run_anchors(runner, loaded, check_name, tag, key)
        if not history and suite.sealed_holdout is not None:
            _history_elsewhere(runner, name, key)
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
        anchors=anchors,
        where=f"{DATA_BRANCH}:{history_file}",
    )
    # The run file is an output, for the workflow to upload: in the checkout's state folder.
    save_run(run, loaded.model_copy(update={"state_root": None}).state_dir)
    markdown = render("release.md.j2", s=report)
    runner.add_summary(markdown)
    if runner.repo is not None:
        # The read first: a job that stops after it leaves a read without a record, which is
        # harmless; a record without its read would leave a history with no ledger to match.
        push_ledger(runner, loaded, name, pulled, f"evalgate: holdout read for {tag} of {name}")
        _append_record(runner, history_file, history, record, f"evalgate: release {tag} of {name}")
        spent = keep_spend(runner, name, [spend_of(run, "release")])
        if spent:
            # The month's spend on the suite so far, this release included.
            month = month_spend(spent, month_of(spent[-1].created_at))
            runner.add_summary("\n" + render_model("spend", month, "markdown"))
        anchor = None
        if record.mac is not None and record.seq:
            sealed = len(record.sealed_lines or [])
            anchor = release_anchor(record.time, record.name, record.seq, record.mac, sealed, key)
        if suite.sealed_holdout is not None and anchor is not None:
            _write_anchor(runner, loaded, suite, anchor)
        sha = runner.env.get("GITHUB_SHA")
        if sha:
            gh.create_check_run(
                runner.repo,
                sha,
                check_name,
                "success" if report.kind == "pass" else "failure",
                f"{report.kind.upper()}: holdout {100 * (record.holdout.rate.rate or 0):.0f}% "
                f"(n={record.holdout.rate.n}), gap {100 * record.gap:.0f} pt",
                markdown,
                details_url=runner.run_url,
                text=None if anchor is None else _ANCHOR_TEXT + anchor_line(anchor),
            )
    for warning in report.warnings:
        runner.annotate("warning", f"{name}: {warning}")
    if report.kind == "fail":
        runner.annotate("error", f"{name}: release gate FAIL: {report.reasons[0]}")
    runner.outputs.set("accuracy", output_number(record.dev.rate.rate))
    runner.verdicts.append(report.kind)


def _parse_history(text: str | None, history_file: str) -> list[ReleaseRecord]:
    try:
        return _HISTORY.validate_json(text) if text else []
    except ValidationError as exc:
        raise UserError(
            "the release history on the data branch is not a list of release records: "
            + from_validation(exc),
            where=f"{DATA_BRANCH}:{history_file}",
            fix="restore it from the data branch's git history",
        ) from None


def _append_record(
    runner: ActionJob,
    history_file: str,
    history: list[ReleaseRecord],
    record: ReleaseRecord,
    message: str,
) -> None:
    """Append the record to the history: every run of a tag is kept (the chain only grows; a
    failing re-run never replaces a tag's good record). If another release was recorded
    since this job read the history, the chain would fork: refuse, and say to re-run."""
    assert runner.repo is not None
    seen = len(history)

    def append(current: str | None) -> str:
        now = _parse_history(current, history_file)
        if len(now) != seen or [r.mac for r in now] != [r.mac for r in history]:
            raise UserError(
                "another release was recorded on the data branch while this one ran, so its "
                "record would not follow the newest one",
                where=f"{DATA_BRANCH}:{history_file}",
                fix="re-run this release job",
            )
        return json.dumps([r.model_dump(mode="json") for r in [*now, record]], indent=1)

    gh.write_data_file(runner.repo, DATA_BRANCH, history_file, append, message)


def _changes_path(runner: ActionJob, loaded: LoadedConfig, suite: Suite) -> str | None:
    """The change ledger's path in the repository (None when it lies outside the workspace)."""
    assert suite.sealed_holdout is not None
    path = (loaded.root / suite.sealed_holdout.changes).resolve()
    try:
        return path.relative_to(runner.workspace.resolve()).as_posix()
    except ValueError:
        return None


def _default_branch_anchors(
    runner: ActionJob, loaded: LoadedConfig, suite: Suite
) -> list[tuple[str, SealedChange]]:
    """The release anchors in the change ledger at the default branch's head (the tag's
    checkout may predate the newest): out of reach of whoever writes the data branch."""
    if runner.repo is None or suite.sealed_holdout is None:
        return []
    path = _changes_path(runner, loaded, suite)
    if path is None:
        return []
    branch = runner.default_branch
    text = gh.read_data_file(runner.repo, branch, path)
    if not text:
        return []
    return anchors_of(parse_changes(text, f"{branch}:{path}", f"{branch}:{path}"))


def _history_elsewhere(runner: ActionJob, name: str, key: HoldoutKey) -> None:
    """A sealed suite with no history of its own: refuse when the data branch holds releases
    signed by this holdout key under another suite's name (a suite renamed, its history
    left behind, would start again as a first release)."""
    if runner.repo is None or not key.keyed:
        return
    tree = gh.ContentsTree(runner.repo, DATA_BRANCH)
    for folder, is_dir in tree.list("evalgate"):
        if not is_dir or folder == name:
            continue
        other = data_file(folder, "releases.json")
        raw = tree.read(other)
        try:
            records = _HISTORY.validate_json(raw) if raw else []
        except ValidationError:
            continue  # another suite's damaged history is that suite's release to refuse
        signed = [r.name for r in records if key.verify(r.body(), r.mac)]
        if signed:
            raise UserError(
                f"suite {name!r} has no release history, but the data branch holds "
                f"{len(signed)} releases signed by this holdout key under suite {folder!r} "
                f"(last {signed[-1]!r}): a renamed suite keeps its history",
                where=f"{DATA_BRANCH}:{other}",
                fix=f"move evalgate/{folder}/ to evalgate/{name}/ on the data branch",
            )


# Above the anchor line in the check run's details, for whoever opens them.
_ANCHOR_TEXT = (
    "The line below anchors this release in the suite's release history (its place and its "
    "record's MAC, signed under the holdout key; nothing of any case): the next release fails "
    "if the history on the evalgate-data branch no longer holds it.\n\n"
)


def _check_run_anchors(
    runner: ActionJob, loaded: LoadedConfig, check_name: str, tag: str, key: HoldoutKey
) -> list[tuple[str, SealedChange]]:
    """The anchors earlier release jobs left in their check runs on the release tags' commits
    (this tag's included): a data-branch writer can delete no check run. Only GitHub Actions'
    check runs are read, and only anchors signed by the holdout key count; an unsigned one is
    named in a warning and ignored (any token with ``checks: write`` can make a check run)."""
    if runner.repo is None or not key.keyed:
        return []
    sha = runner.env.get("GITHUB_SHA")
    also = (tag, sha) if sha else None
    found: list[tuple[str, SealedChange]] = []
    ignored: list[str] = []
    for check in gh.release_checks(runner.repo, loaded.config.release_tags, check_name, also=also):
        where = check_run_where(check_name, check.tag, check.url)
        anchors, unreadable = anchors_in(check.text)
        signed = [a for a in anchors if key.verify(a.body(), a.mac)]
        found += [(where, a) for a in signed]
        if unreadable or len(signed) < len(anchors):
            ignored.append(where)
    if ignored:
        runner.annotate(
            "warning",
            f"{len(ignored)} check runs carry a release anchor not signed by this holdout key, "
            f"ignored ({', '.join(ignored[:3])}): evalgate's release job did not write them; "
            "find who can write checks in this repository",
        )
    return found


def _write_anchor(
    runner: ActionJob, loaded: LoadedConfig, suite: Suite, anchor: SealedChange
) -> None:
    """Append the release's anchor to the change ledger on the default branch; where the
    branch is protected from the job, warn with the line to commit by hand."""
    assert runner.repo is not None and suite.sealed_holdout is not None
    line = anchor.model_dump_json()
    path = _changes_path(runner, loaded, suite)
    if path is not None:

        def append(current: str | None) -> str:
            kept = current or ""
            return kept + ("\n" if kept and not kept.endswith("\n") else "") + line + "\n"

        try:
            gh.write_data_file(
                runner.repo,
                runner.default_branch,
                path,
                append,
                f"evalgate: anchor release {anchor.release} in the holdout change ledger",
            )
            return
        except gh.GitHubError:
            pass
    runner.annotate(
        "warning",
        f"the release anchor could not be written to {suite.sealed_holdout.changes} on "
        f"{runner.default_branch}: append this line to it and commit, so that a history rolled "
        f"back on the data branch is detected: {line}",
    )
