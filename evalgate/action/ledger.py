"""The read ledger in the data branch: each suite's holdout reads, kept across jobs.

A job that reads a holdout (a release, an audit, a pull request's judge check on the holdout
labels) pulls the suite's ledger from the data branch over the job's own, lets the commands
append to it, then appends what it added back to the data branch's copy.
"""

from __future__ import annotations

from evalgate.action.job import ActionJob
from evalgate.app import ledger_path
from evalgate.config.load import LoadedConfig
from evalgate.defaults import DATA_BRANCH, data_file
from evalgate.publish import github as gh


def ledger_file(name: str) -> str:
    """The suite's ledger on the data branch."""
    return data_file(name, "holdout-ledger.jsonl")


def pull_ledger(runner: ActionJob, loaded: LoadedConfig, name: str) -> str:
    """The suite's read ledger from the data branch, copied over the job's own (which the
    commands append to); returns the text pulled, so push_ledger knows what this job added."""
    text = gh.read_data_file(runner.repo, DATA_BRANCH, ledger_file(name)) or ""
    ledger = ledger_path(loaded)
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text(text, encoding="utf-8")
    return text


def push_ledger(
    runner: ActionJob, loaded: LoadedConfig, name: str, pulled: str | None, message: str
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

    gh.write_data_file(runner.repo, DATA_BRANCH, ledger_file(name), append, message)
