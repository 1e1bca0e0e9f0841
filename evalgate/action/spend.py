"""Each job's spend kept on the data branch: one record per suite appended to its spend file."""

from __future__ import annotations

from evalgate.action.job import ActionJob
from evalgate.defaults import DATA_BRANCH
from evalgate.errors import UserError
from evalgate.publish import github as gh
from evalgate.runs.spend import SpendRecord, dump, merged, read_spend, spend_file


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
    return kept
