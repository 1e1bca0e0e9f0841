"""The pull request's check run: named evalgate, on the head commit, annotated at the broken
cases' lines; a commit status when the token may not write checks. Against the GitHub stand-in,
with the real PyGithub client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_action import (
    EXAMPLE,
    FOLDER,
    HARMLESS,
    NO_LABELS,
    REPO,
    Job,
    api,
    api_env,
    baseline_text,
    gh,
    make_workspace,
    open_pull,
    pr_event,
    run_action,
    upload,
)

from tests.support.github_server import GitHubServer

__all__ = ["baseline_text", "gh"]  # fixtures, imported to be used here


def _pr(tmp_path: Path, gh: GitHubServer, prompt: str, **inputs: str) -> tuple[Job, str]:
    open_pull(gh, {f"{FOLDER}/prompts/v3.txt": prompt})
    head = gh.branch_sha(REPO, "feature")
    assert head is not None
    event: dict[str, Any] = pr_event()
    event["pull_request"]["head"]["sha"] = head
    event["pull_request"]["base"]["sha"] = gh.branch_sha(REPO, "main")
    job = run_action(
        make_workspace(tmp_path, prompt),
        "pull_request",
        event,
        ref="refs/pull/7/merge",
        inputs=api(gh) | inputs,
        env=api_env(gh),
    )
    return job, head


def _lines() -> dict[str, int]:
    """Each case's line in the example's case file (1-based), read independently."""
    lines = (EXAMPLE / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    return {json.loads(line)["id"]: n for n, line in enumerate(lines, start=1) if line.strip()}


def test_a_failing_pull_request_gets_a_failed_check_annotated_at_each_broken_case(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    job, head = _pr(tmp_path, gh, NO_LABELS)
    assert job.code == 1 and job.outputs["verdict"] == "fail"
    [check] = gh.check_runs(REPO)
    assert (check.name, check.head_sha, check.status, check.conclusion) == (
        "evalgate",
        head,
        "completed",
        "failure",
    )
    assert check.title == "evalgate: FAIL"
    assert check.summary and "failed the gate" in check.summary
    broken = int(job.outputs["broken"])
    assert broken > 50  # so the annotations took more than one request
    assert len(check.annotations) == broken
    assert len(gh.find_requests("PATCH", f"/repos/{REPO}/check-runs/*")) == -(-broken // 50) - 1
    where = _lines()
    for note in check.annotations:
        case_id = note["title"].removeprefix("broken: ")
        assert note["path"] == f"{FOLDER}/cases.jsonl"
        assert note["start_line"] == note["end_line"] == where[case_id]
        assert note["annotation_level"] == "failure"
        assert note["message"].startswith("expected ")
        assert "this pull request answered" in note["message"]


def test_a_passing_pull_request_gets_a_successful_check(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    job, head = _pr(tmp_path, gh, HARMLESS)
    assert job.code == 0 and job.outputs["verdict"] == "pass"
    [check] = gh.check_runs(REPO)
    assert (check.head_sha, check.conclusion, check.annotations) == (head, "success", [])


def test_inconclusive_is_neutral_unless_fail_on_makes_it_fail(
    tmp_path: Path, gh: GitHubServer
) -> None:
    # No baseline artefact, and no same-job baseline: inconclusive.
    from test_action import edit_config, suite_of

    open_pull(gh, {f"{FOLDER}/prompts/v3.txt": HARMLESS})
    for fail_on, conclusion in (("fail", "neutral"), ("fail,inconclusive", "failure")):
        workspace = make_workspace(tmp_path / fail_on, HARMLESS)
        edit_config(workspace, lambda c: suite_of(c)["gate"].update(no_baseline="inconclusive"))
        event: dict[str, Any] = pr_event()
        event["pull_request"]["head"]["sha"] = gh.branch_sha(REPO, "feature")
        run_action(
            workspace,
            "pull_request",
            event,
            ref="refs/pull/7/merge",
            inputs=api(gh) | {"fail_on": fail_on},
            env=api_env(gh),
        )
        assert gh.check_runs(REPO)[-1].conclusion == conclusion


def test_a_token_without_checks_write_sets_a_commit_status_and_says_so(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    gh.fail_next(
        "POST",
        f"/repos/{REPO}/check-runs",
        status=403,
        body={
            "message": "Resource not accessible by integration",
            "documentation_url": "https://docs.github.com/rest/checks/runs#create-a-check-run",
            "status": "403",
        },
    )
    job, head = _pr(tmp_path, gh, NO_LABELS)
    assert job.code == 1
    assert gh.check_runs(REPO) == []
    [status] = gh.statuses(REPO, head)
    assert (status.context, status.state) == ("evalgate", "failure")
    assert [line for line in job.out.splitlines() if "checks: write" in line] != []


def test_an_annotation_shows_what_reads_other_than_it_is() -> None:
    from evalgate.action.pr import broken_annotation
    from evalgate.gate.verdict import PairedCase

    case = PairedCase(
        id="refund-\u202etxt.exe\nnext",
        category=None,
        group=None,
        expected="ok",
        baseline_answer="ok",
        candidate_answer="ok\u202e\u2066 (approved)\u200b",
        baseline_score=1.0,
        candidate_score=0.0,
        message="m",
    )
    note = broken_annotation(case, "cases.jsonl", 3)
    assert note["title"] == "broken: refund-<U+202E>txt.exe next"
    assert note["message"].endswith("answered ok<U+202E><U+2066> (approved)<U+200B>")
    assert (note["start_line"], note["end_line"]) == (3, 3)
