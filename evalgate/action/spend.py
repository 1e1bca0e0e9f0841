"""Each job's spend kept on the data branch: one record per suite appended to its spend file,
and what a pull request's jobs spent, read from the ledger of evalgate's comment once the pull
request is merged (by the merge commit's baseline job) or closed (by the job its closing starts).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from evalgate.action.job import ActionJob
from evalgate.config.load import LoadedConfig
from evalgate.defaults import DATA_BRANCH
from evalgate.errors import UserError
from evalgate.publish import github as gh
from evalgate.redact import redact
from evalgate.report.comment import suite_of_marker
from evalgate.runs.spend import SpendRecord, dump, merged, read_ledger, read_spend, spend_file


def keep_spend(
    runner: ActionJob, name: str, records: list[SpendRecord], *, expect_write: bool = True
) -> list[SpendRecord] | None:
    """Append what this job spent on the suite to the data branch (applied to the file as it
    is then, so a concurrent job's records are kept); a job that cannot write says so: in a
    warning when it should be able to (``expect_write``), else in the log. A pull-request job
    has ``contents: read`` in the workflow evalgate writes (it reads the pull request's files),
    so a refusal there is the setup working as meant.

    Returns the suite's spend file as written (None when it was not).
    """
    if not records:
        return None
    if runner.repo is None or runner.read_only:
        runner.log(f"{name}: this job's token cannot write the data branch; its spend is not kept")
        return None
    path = spend_file(name)
    kept: list[SpendRecord] = []

    def add(current: str | None) -> str:
        # A record already there (a re-run job, a ledger read twice) is not added again.
        kept[:] = merged(read_spend(current, f"{DATA_BRANCH}:{path}"), records)
        return dump(kept)

    try:
        gh.write_data_file(runner.repo, DATA_BRANCH, path, add, f"evalgate: spend of {name}")
    except gh.GitHubError as exc:
        if not expect_write and exc.status in (401, 403, 404):
            runner.log(
                f"{name}: what this job spent is not kept ({exc.what}); a job with contents: "
                f"write for the {DATA_BRANCH} branch keeps it"
            )
            return None
        runner.annotate(
            "warning",
            f"{name}: what this job spent is not kept ({exc.what}); give the job "
            f"contents: write for the {DATA_BRANCH} branch",
        )
        return None
    except UserError as exc:
        # A spend file that cannot be read loses the cost history, not the job's verdict.
        runner.annotate("warning", f"{name}: what this job spent is not kept: {exc.one_line()}")
        return None
    except Exception as exc:
        # Records of a shape nothing here foresaw (a ledger is another job's text): the same.
        runner.annotate(
            "warning",
            f"{name}: what this job spent is not kept ({type(exc).__name__}: {redact(str(exc))})",
        )
        return None
    return kept


#: The most suites of a pull request's comments one job keeps the spend of (each is a write to
#: the data branch): a suite beyond them is named in a warning.
SUITES_KEPT = 20


def pull_spend(
    runner: ActionJob, how: str, find: Callable[[Any], Sequence[int]]
) -> dict[str, list[SpendRecord]]:
    """The records of the pull-request jobs of the pull requests ``find`` lists from the job's
    repository (``how``: merged or closed), by suite, from the ledger of evalgate's comment on
    each (one the workflow's token posted, see gh.marked_bodies: a job of the pull request can
    write nothing else). The suites are those the comments' markers name, not a config's: a
    suite only the pull request had, or renamed before it closed, spent all the same. A list
    or a ledger that cannot be read is skipped with a warning, never the job."""
    if runner.repo is None:
        return {}
    found: dict[str, list[SpendRecord]] = {}
    try:
        numbers = find(runner.repo)
        for number in numbers:
            if number not in runner.pull_comments:
                runner.pull_comments[number] = marked = gh.marked_bodies(
                    runner.repo, number, runner.inputs.comment_author
                )
                if marked.cut:
                    runner.annotate(
                        "warning",
                        f"pull request #{number} has more than {gh.LEDGER_COMMENTS} comments: "
                        f"evalgate's was looked for among the first {gh.LEDGER_COMMENTS}, so "
                        "what its jobs spent may be missing from the cost history",
                    )
            for first, body in runner.pull_comments[number].bodies.items():
                name = suite_of_marker(first)
                if name is None:
                    continue
                found.setdefault(name, []).extend(
                    r
                    for r in read_ledger(body)
                    if r.job == "pr" and r.suite == name and r.pull_request == number
                )
    except gh.GitHubError as exc:
        runner.annotate("warning", f"what the {how} pull requests spent is not kept ({exc.what})")
        return {}
    if numbers:
        runner.log(
            "pull-request job records from the ledgers of "
            + ", ".join(f"#{n}" for n in numbers)
            + f" ({how}): "
            + (", ".join(f"{name} {len(found[name])}" for name in sorted(found)) or "none")
        )
    return found


def keep_each(
    runner: ActionJob, found: dict[str, list[SpendRecord]], skip: Collection[str] = ()
) -> int:
    """Keep the records ``found`` holds for each suite not in ``skip`` (at most SUITES_KEPT
    suites, the rest named in a warning); how many records were kept."""
    names = [name for name in sorted(found) if name not in skip and found[name]]
    if len(names) > SUITES_KEPT:
        runner.annotate(
            "warning",
            f"pull requests' comments carry the spend of {len(names)} suites; this job keeps "
            f"{SUITES_KEPT}, not that of " + ", ".join(names[SUITES_KEPT:])[:500],
        )
    kept = 0
    for name in names[:SUITES_KEPT]:
        if keep_spend(runner, name, found[name]) is not None:
            kept += len(found[name])
    return kept


def run_closed(runner: ActionJob, loaded: LoadedConfig) -> int:
    """A pull request closed without merging: what its jobs spent on each suite its comments
    name, kept on the data branch. Nothing is run, and no config decides which suites: the
    records are only those of evalgate's comments."""
    number = (runner.event.get("pull_request") or {}).get("number")
    if not isinstance(number, int) or isinstance(number, bool):
        raise UserError(
            "the closed pull request's event has no number",
            fix="run this mode on a pull_request or pull_request_target event",
        )
    kept = keep_each(runner, pull_spend(runner, "closed", lambda _: [number]))
    runner.log(f"pull request #{number}, closed without merging: {kept} job records kept")
    runner.outputs.set("verdict", "skipped")
    runner.flush()
    return 0
