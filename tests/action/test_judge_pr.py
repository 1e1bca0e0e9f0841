"""Judge changes in pull requests, through the action against the GitHub stand-in.

The suite is the bundled example's judged suite (judge.yml): the offline fake judge, whose rules
(judge-rules.yml) pass a reply naming a category in prose only while the rubric says "in prose".
Adding that sentence to the rubric makes the judge pass the replies that describe a message in
the shop's own words ("Category: repair status."), which people fail: agreement drops.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from conftest import EXAMPLE, ROOT, copy_example
from test_action import (
    FOLDER,
    FORK,
    REPO,
    Job,
    api,
    api_env,
    comments,
    example_tree,
    gh,
    open_pull,
    pr_event,
    run_action,
)
from test_judge_check import write_project

from evalgate.cases.holdout import LedgerRecord
from tests.support.github_server import GitHubServer

__all__ = ["gh"]  # the stand-in fixture, shared with the action's tests

RUBRIC = f"{FOLDER}/judge-rubric.txt"
LABELS = f"{FOLDER}/judge-labels.jsonl"
BASE_RUBRIC = (EXAMPLE / "judge-rubric.txt").read_text(encoding="utf-8")
PROSE = BASE_RUBRIC + "A category named in prose also passes.\n"
HOLDOUT_IDS_PREFIX = "jl-"


def judge_pr(tmp_path: Path, gh: GitHubServer, files: dict[str, str]) -> tuple[int, str, str]:
    """A PR changing ``files`` (paths in the repository); its exit code, comment and log."""
    workspace = tmp_path / "workspace"
    copy_example(workspace / FOLDER)
    for path, text in files.items():
        (workspace / path).write_text(text, encoding="utf-8")
    open_pull(gh, dict(files))
    job = run_action(
        workspace,
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        inputs=api(gh) | {"config": "judge.yml"},
        env=api_env(gh),
    )
    [body] = comments(gh)
    return job.code, body, job.out + job.err


def test_a_rubric_change_that_lowers_agreement_fails_the_pull_request(
    tmp_path: Path, gh: GitHubServer
) -> None:
    code, body, log = judge_pr(tmp_path, gh, {RUBRIC: PROSE})
    assert code == 1, log
    assert "**Agreement dropped significantly**" in body
    assert "the judge change lowers its agreement with people" in body
    # The run's accuracy beside its correction for the judge's errors (on the holdout labels).
    assert "Accuracy corrected for the judge's errors (Rogan-Gladen" in body.replace("\\", "")
    # The base rubric's judge and the changed one both read the base branch's rubric file
    # from the contents API at the base commit.
    base_sha = gh.branch_sha(REPO, "main")
    fetched = gh.find_requests("GET", f"/repos/{REPO}/contents/{RUBRIC}")
    assert fetched and all(r.query.get("ref") == [base_sha] for r in fetched)
    # The holdout is in aggregate only: no holdout label's id or reply is in the comment.
    holdout = holdout_ids()
    assert holdout and not any(i in body for i in holdout)


def holdout_ids() -> list[str]:
    """The holdout labels' ids, read as the config splits them (for the leak check above)."""
    from evalgate.cases.judge_labels import load_labels
    from evalgate.config.load import load_config

    loaded = load_config(EXAMPLE / "judge.yml")
    _, suite = loaded.suite(None)
    labels = load_labels(EXAMPLE / "judge-labels.jsonl", suite)
    return [x.id for x in labels if x.split == "holdout"]


def test_a_rubric_change_that_keeps_agreement_does_not_fail_for_the_judge(
    tmp_path: Path, gh: GitHubServer
) -> None:
    reworded = BASE_RUBRIC.replace("Pass a reply", "Pass any reply")
    code, body, log = judge_pr(tmp_path, gh, {RUBRIC: reworded})
    assert code == 0, log
    assert "**No drop in agreement**" in body
    assert "lost 0, gained 0" in body
    # The confusion matrix of each split (the README's judge check: holdout 19, 1, 0, 12).
    assert "| both pass / judge only / people only / both fail |" in body
    assert "| 19 / 1 / 0 / 12 |" in body
    assert "the judge change lowers" not in body and "may lower" not in body


def test_relabelling_in_the_same_pull_request_does_not_hide_a_drop(
    tmp_path: Path, gh: GitHubServer
) -> None:
    # The PR also flips every label the changed judge gets wrong: the base's labels still count.
    text = (EXAMPLE / "judge-labels.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines()]
    for row in rows:
        if row["reply"].startswith("Category: ") and any(
            word in row["reply"] for word in ("status", "complaint")
        ):
            row["human"] = "pass"
    relabelled = "".join(json.dumps(r) + "\n" for r in rows)
    code, body, log = judge_pr(tmp_path, gh, {RUBRIC: PROSE, LABELS: relabelled})
    assert code == 1, log
    assert "**Agreement dropped significantly**" in body
    assert "the labels are the base branch" in body


def test_the_floor_is_the_base_branchs_not_the_pull_requests(tmp_path: Path) -> None:
    # The default branch asks for kappa's low end at 0.95, which this judge does not reach
    # (0.68 on the holdout); the pull request lowers the floor to 0.1 in its own config.
    config = f"{FOLDER}/judge.yml"
    strict = (
        (EXAMPLE / "judge.yml")
        .read_text(encoding="utf-8")
        .replace("min_kappa: 0.6", "min_kappa: 0.95")
    )
    tree = example_tree() | {config: strict}
    with GitHubServer() as server:
        server.add_repo(REPO, files=tree)
        lowered = strict.replace("min_kappa: 0.95", "min_kappa: 0.1")
        code, body, log = judge_pr(tmp_path, server, {config: lowered})
    assert code == 0, log  # inconclusive does not fail the job unless fail_on says so
    text = body.replace("\\", "")  # Markdown escapes, e.g. min\_kappa
    assert "is inconclusive: the judge agrees too little with people to gate" in text
    assert "judge.min_kappa = 0.95" in text
    assert "the judge's floor, label split and alpha are the base branch's" in text


def test_a_command_judges_program_is_part_of_the_judge(tmp_path: Path) -> None:
    # The labelled project of tests/running/test_judge_check.py: a command judge that passes replies
    # mentioning a refund agrees with people on 17 of 20 dev and 9 of 10 holdout labels. The
    # pull request replaces its program with one that passes everything. A program the pull
    # request can change never sees the holdout labels (it could send them anywhere), so the
    # two judges are paired on the 20 dev labels: lost, the 9 human fails the old judge failed;
    # gained, the 2 human passes it failed. One-sided p = P(Bin(11, 1/2) >= 9)
    # = (55 + 11 + 1) / 2^11 = 0.033: a significant drop, though no config or rubric changed.
    project = tmp_path / "project"
    write_project(project)
    tree = {
        f"{FOLDER}/{p.relative_to(project).as_posix()}": p.read_text(encoding="utf-8")
        for p in sorted(project.rglob("*"))
        if p.is_file()
    }
    lenient = 'import json\nprint(json.dumps({"score": 1, "reason": "fine"}))\n'
    with GitHubServer() as server:
        server.add_repo(REPO, files=tree)
        workspace = tmp_path / "workspace"
        shutil.copytree(project, workspace / FOLDER)
        (workspace / FOLDER / "judge.py").write_text(lenient, encoding="utf-8")
        open_pull(server, {f"{FOLDER}/judge.py": lenient})
        job = run_action(
            workspace,
            "pull_request",
            pr_event(),
            ref="refs/pull/7/merge",
            inputs=api(server),
            env=api_env(server),
        )
        [body] = comments(server)
    assert job.code == 1, job.out + job.err
    assert "**Agreement dropped significantly**" in body
    assert "lost 9, gained 2" in body
    assert "p = 0.033" in body


# --------------------------------------------------------------------------- holdout label reads

LEDGER = "evalgate/bike-shop-judged/holdout-ledger.jsonl"
REWORDED = BASE_RUBRIC.replace("Pass a reply", "Pass any reply")


def pr_job_again(tmp_path: Path, gh: GitHubServer, files: dict[str, str], token: str) -> Job:
    """Another job of the same pull request, in a fresh checkout (nothing kept from before)."""
    workspace = tmp_path / "workspace"
    copy_example(workspace / FOLDER)
    for path, text in files.items():
        (workspace / path).write_text(text, encoding="utf-8")
    return run_action(
        workspace,
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        inputs=api(gh, token) | {"config": "judge.yml"},
        env=api_env(gh),
    )


def ledger_records(gh: GitHubServer) -> list[LedgerRecord]:
    text = gh.file(REPO, LEDGER, ref="evalgate-data")
    if text is None:
        return []
    return [LedgerRecord.model_validate_json(line) for line in text.decode().splitlines()]


def holdout_labels_sha() -> str:
    from evalgate.cases.judge_labels import labels_sha, load_labels
    from evalgate.config.load import load_config

    loaded = load_config(EXAMPLE / "judge.yml")
    _, suite = loaded.suite(None)
    return labels_sha(load_labels(EXAMPLE / "judge-labels.jsonl", suite), "holdout")


def test_holdout_label_reads_are_kept_on_the_data_branch_across_jobs(
    tmp_path: Path, gh: GitHubServer
) -> None:
    # A release's read of the case holdout is already in the suite's ledger: it stays, and it
    # is not a read of the judge's labels.
    release = LedgerRecord(
        time=datetime(2026, 1, 5, tzinfo=UTC),
        git_ref="refs/tags/v1",
        git_commit="a" * 40,
        prompt="v3",
        prompt_sha256="b" * 64,
        holdout_sha256="c" * 64,
        score=0.8,
        n=40,
        purpose="release",
    )
    gh.create_branch(REPO, "evalgate-data")
    gh.add_commit(REPO, {LEDGER: release.model_dump_json() + "\n"}, branch="evalgate-data")
    files = {RUBRIC: REWORDED}
    open_pull(gh, dict(files))
    first = pr_job_again(tmp_path / "one", gh, files, gh.write_token)
    second = pr_job_again(tmp_path / "two", gh, files, gh.write_token)
    assert first.code == 0 and second.code == 0, first.out + first.err + second.out + second.err
    records = ledger_records(gh)
    # The release's record, then one read per judge identity: the changed judge and the base
    # branch's judge (for the pairing) each read the holdout labels once. The second job grades
    # them again to pair the two judges, but the same judges on the same labels are no new read.
    assert [r.purpose for r in records] == ["release"] + ["judge check"] * 2
    sha = holdout_labels_sha()
    assert [r.holdout_sha256 for r in records[1:]] == [sha] * 2
    assert all(r.prompt == "judge:bike-shop-judged" and r.n > 0 for r in records[1:])
    assert all(r.git_ref == "refs/pull/7/merge" for r in records[1:])
    head, base = records[1].prompt_sha256, records[2].prompt_sha256
    assert head != base
    # The count so far is reported in the comment (edited in place) and the job summary.
    [body] = comments(gh)
    assert "Holdout label reads: 2 (budget 10)" in body
    assert "Holdout label reads: 2 (budget 10)" in first.summary
    assert "Holdout label reads: 2 (budget 10)" in second.summary


def test_a_read_past_the_budget_is_kept_and_warned_of(tmp_path: Path, gh: GitHubServer) -> None:
    # Ten earlier reads of these holdout labels: the read budget (split.read_budget = 10).
    earlier = LedgerRecord(
        time=datetime(2026, 1, 5, tzinfo=UTC),
        git_ref="refs/heads/main",
        git_commit=None,
        prompt="judge:bike-shop-judged",
        prompt_sha256="d" * 64,
        holdout_sha256=holdout_labels_sha(),
        score=0.9,
        n=10,
        purpose="judge check",
    )
    gh.create_branch(REPO, "evalgate-data")
    gh.add_commit(REPO, {LEDGER: (earlier.model_dump_json() + "\n") * 10}, branch="evalgate-data")
    files = {RUBRIC: REWORDED}
    open_pull(gh, dict(files))
    job = pr_job_again(tmp_path, gh, files, gh.write_token)
    assert job.code == 0, job.out + job.err
    assert len(ledger_records(gh)) == 12  # the changed judge's read and the base judge's
    [body] = comments(gh)
    text = body.replace("\\", "")
    assert "Holdout label reads: 12 (budget 10)" in text
    assert "the judge's holdout labels have been read 11 times, over the budget of 10" in text


def test_a_job_that_cannot_keep_the_read_fails_and_says_why(
    tmp_path: Path, gh: GitHubServer
) -> None:
    # The pull-request job's token has contents: read: the labels were read, but the read
    # cannot be written to the data branch. The job fails whatever fail_on says.
    files = {RUBRIC: REWORDED}
    open_pull(gh, dict(files))
    job = pr_job_again(tmp_path, gh, files, gh.contents_read_token)
    assert job.code == 1, job.out + job.err
    assert ledger_records(gh) == []
    [error] = [a for a in job.annotations("error") if "holdout labels" in a]
    assert "could not be kept on the evalgate-data branch" in error
    assert "contents: write" in error
    [body] = comments(gh)
    assert "could not be kept on the evalgate-data branch" in body.replace("\\", "")


def test_a_fork_pull_request_does_not_read_the_holdout_labels(
    tmp_path: Path, gh: GitHubServer
) -> None:
    # A fork's job has a read-only token: no read could be kept, so none is made; the judge
    # is checked on its dev labels and the suite is inconclusive for want of the holdout.
    files = {RUBRIC: REWORDED}
    open_pull(gh, dict(files), fork=True)
    workspace = tmp_path / "workspace"
    copy_example(workspace / FOLDER)
    (workspace / RUBRIC).write_text(REWORDED, encoding="utf-8")
    job = run_action(
        workspace,
        "pull_request",
        pr_event(head_repo=FORK),
        ref="refs/pull/7/merge",
        inputs=api(gh, gh.read_token) | {"config": "judge.yml"},
        env=api_env(gh),
    )
    assert job.code == 0, job.out + job.err
    assert ledger_records(gh) == []
    assert job.outputs["verdict"] == "inconclusive"
    summary = job.summary.replace("\\", "")
    assert "| holdout (aggregate)" not in summary
    assert "the judge's holdout labels were not read" in summary


def test_the_heads_judge_sees_the_holdout_labels_only_as_the_bases_judge(
    tmp_path: Path,
) -> None:
    from evalgate.action.judge import _holdout_closed
    from evalgate.config.load import load_config

    shop = tmp_path / "shop"
    shutil.copytree(ROOT / "examples" / "bike-shop", shop)
    loaded = load_config(shop / "judge.yml")
    _, suite = loaded.suite(None)
    assert _holdout_closed(loaded, suite, suite) is None
    # A renamed suite, or a base without labels: the split would be the head's own.
    assert "no labels" in (_holdout_closed(loaded, suite, None) or "")
    assert "no labels" in (
        _holdout_closed(loaded, suite, suite.model_copy(update={"judge": None})) or ""
    )
    # A judge sent elsewhere would carry the holdout labels' inputs and replies there.
    assert suite.scorer.kind == "judge"
    elsewhere = suite.scorer.model.model_copy(update={"options": {"base_url": "https://x"}})
    head = suite.model_copy(update={"scorer": suite.scorer.model_copy(update={"model": elsewhere})})
    assert "backend, model or settings" in (_holdout_closed(loaded, head, suite) or "")
    program = suite.scorer.model.model_copy(
        update={"backend": "command", "options": {"command": ["python", "judge.py"]}}
    )
    both = suite.model_copy(update={"scorer": suite.scorer.model_copy(update={"model": program})})
    assert "program" in (_holdout_closed(loaded, both, both) or "")
    # The labels named through a link to a file of the head's choosing.
    assert suite.judge is not None
    labels = shop / suite.judge.labels
    labels.rename(shop / "mine.jsonl")
    labels.symlink_to(shop / "mine.jsonl")
    assert "symbolic link" in (_holdout_closed(loaded, suite, suite) or "")
