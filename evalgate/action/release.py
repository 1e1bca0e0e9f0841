"""Release mode (a release tag): the holdout gate, its ledger and history in the data branch."""

from __future__ import annotations

import json

from pydantic import TypeAdapter, ValidationError

from evalgate.action.inputs import output_number
from evalgate.action.job import ActionJob
from evalgate.action.ledger import pull_ledger, push_ledger
from evalgate.analysis.release import ReleaseRecord
from evalgate.app import (
    RunOptions,
    ledger_path,
    release_version,
)
from evalgate.config.load import LoadedConfig
from evalgate.config.models import Suite
from evalgate.defaults import DATA_BRANCH, data_file
from evalgate.errors import UserError, from_validation
from evalgate.publish import github as gh
from evalgate.report.render import render
from evalgate.runs.schema import save_run

# The data branch's releases.json: a JSON list of release records.
_HISTORY = TypeAdapter(list[ReleaseRecord])


def run_release(runner: ActionJob, loaded: LoadedConfig, name: str, suite: Suite) -> None:
    """The release gate, with history and the ledger kept in the data branch."""
    tag = runner.env.get("GITHUB_REF_NAME") or "release"
    history_file = data_file(name, "releases.json")
    history: list[ReleaseRecord] = []
    ledger = ledger_path(loaded)
    pulled = None
    if runner.repo is not None:
        text = gh.read_data_file(runner.repo, DATA_BRANCH, history_file)
        try:
            history = _HISTORY.validate_json(text) if text else []
        except ValidationError as exc:
            raise UserError(
                "the release history on the data branch is not a list of release records: "
                + from_validation(exc),
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
    # The run file is an output, for the workflow to upload: in the checkout's state folder.
    save_run(run, loaded.model_copy(update={"state_root": None}).state_dir)
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
    runner.outputs.set("accuracy", output_number(record.dev.rate.rate))
    runner.verdicts.append(report.kind)
