"""Forks get a verdict, safely: the unprivileged collect job and the privileged workflow_run job.

Against the GitHub stand-in with the real PyGithub client. The fork's pull request lives in
``forker/widgets``; its collect job (read-only token) packs the changed files; the base
repository's job (write token) reads them as data onto the default branch's checkout. Where a
test must prove no model was called, the suite runs on the anthropic backend against the
Messages stand-in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_action import (
    FOLDER,
    FORK,
    HARMLESS,
    NO_LABELS,
    PROMPT,
    REPO,
    Job,
    api,
    api_env,
    baseline_text,
    comments,
    gh,
    holdout_cases,
    make_workspace,
    messages,
    open_pull,
    pr_event,
    run_action,
    upload,
    use_anthropic,
)

from evalgate.action.fork import MANIFEST, ForkData
from tests.support.github_server import GitHubServer
from tests.support.messages_server import MessagesServer

__all__ = ["baseline_text", "gh", "messages"]  # fixtures, imported to be used here

CASES = f"{FOLDER}/cases.jsonl"
CONFIG_PATH = f"{FOLDER}/evalgate.yml"


def collect(tmp_path: Path, gh: GitHubServer, files: dict[str, str]) -> tuple[Job, ForkData]:
    """The fork's pull request (#8) and its collect job, with the read-only token."""
    open_pull(gh, files, number=8, fork=True)
    workspace = make_workspace(tmp_path / "fork")
    for path, text in files.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(text, encoding="utf-8")
    event = pr_event(8, head_repo=FORK)
    event["pull_request"]["head"]["sha"] = gh.branch_sha(FORK, "feature")
    job = run_action(
        workspace,
        "pull_request",
        event,
        ref="refs/pull/8/merge",
        inputs=api(gh, gh.read_token) | {"mode": "collect"},
        env=api_env(gh),
    )
    assert job.code == 0, job.out + job.err
    data = ForkData.model_validate_json(Path(job.outputs["data_file"]).read_text())
    return job, data


def gate(
    tmp_path: Path,
    gh: GitHubServer,
    data: ForkData | dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    inputs: dict[str, str] | None = None,
    anthropic: bool = False,
) -> Job:
    """The base repository's workflow_run job: the artefact uploaded by the fork's run, a
    checkout of the default branch, the write token."""
    workspace = make_workspace(tmp_path / "base")
    if anthropic:
        use_anthropic(workspace)
    return gate_in(workspace, gh, data, env=env, inputs=inputs)


def gate_in(
    workspace: Path,
    gh: GitHubServer,
    data: ForkData | dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    inputs: dict[str, str] | None = None,
) -> Job:
    """:func:`gate` over a checkout of the default branch that the caller made."""
    head = gh.branch_sha(FORK, "feature")
    run = gh.add_workflow_run(
        REPO, event="pull_request", head_branch="feature", head_repo=FORK, name="evalgate fork data"
    )
    body = data.model_dump_json() if isinstance(data, ForkData) else json.dumps(data)
    gh.add_artifact(REPO, "evalgate-fork", files={MANIFEST: body}, run=run)
    event = {
        "action": "completed",
        "workflow_run": {
            "id": run.id,
            "event": "pull_request",
            "head_sha": head,
            "head_branch": "feature",
            "conclusion": "success",
            "pull_requests": [],  # GitHub leaves it empty for forks
        },
        "repository": {"full_name": REPO, "default_branch": "main"},
    }
    return run_action(
        workspace,
        "workflow_run",
        event,
        ref="refs/heads/main",
        inputs=api(gh) | (inputs or {}),
        env=api_env(gh) | (env or {}),
    )


def test_collect_packs_the_changed_files_under_the_suite_and_runs_nothing(
    tmp_path: Path, gh: GitHubServer
) -> None:
    job, data = collect(tmp_path, gh, {PROMPT: NO_LABELS, "README.md": "# elsewhere\n"})
    assert data.pull_request == 8 and data.head_sha == gh.branch_sha(FORK, "feature")
    assert data.files == {PROMPT: NO_LABELS}  # only under the suite's folder
    assert job.outputs["verdict"] == "skipped"
    assert "nothing was run" in job.out
    assert not gh.find_requests("POST")


def test_a_fork_pull_request_gets_its_comment_and_check(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    _, data = collect(tmp_path, gh, {PROMPT: NO_LABELS})
    job = gate(tmp_path, gh, data)
    assert job.code == 1, job.out + job.err
    assert job.outputs["verdict"] == "fail"
    [body] = comments(gh, 8)
    assert "failed the gate" in body
    [check] = gh.check_runs(REPO)
    assert (check.name, check.head_sha, check.conclusion) == (
        "evalgate",
        gh.branch_sha(FORK, "feature"),
        "failure",
    )
    assert check.annotations and check.annotations[0]["path"] == CASES


def test_a_harmless_fork_pull_request_passes(
    tmp_path: Path, gh: GitHubServer, baseline_text: str
) -> None:
    upload(gh, baseline_text)
    _, data = collect(tmp_path, gh, {PROMPT: HARMLESS})
    job = gate(tmp_path, gh, data)
    assert job.code == 0, job.out + job.err
    assert job.outputs["verdict"] == "pass"
    assert gh.check_runs(REPO)[0].conclusion == "success"


@pytest.mark.parametrize(
    "path",
    [CONFIG_PATH, f"{FOLDER}/fake-rules.yml", f"{FOLDER}/../evil.jsonl", "other/cases.jsonl"],
    ids=["the config", "a rules file", "outside the folder", "not a case file"],
)
def test_fork_data_that_reaches_beyond_prompts_and_cases_is_refused(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer, path: str
) -> None:
    open_pull(gh, {PROMPT: HARMLESS}, number=8, fork=True)
    data = ForkData(
        pull_request=8,
        head_sha=gh.branch_sha(FORK, "feature") or "",
        files={PROMPT: HARMLESS, path: "holdout_fraction: 0\n"},
    )
    job = gate(
        tmp_path,
        gh,
        data,
        anthropic=True,
        inputs={"anthropic_api_key": "sk-ant-test-key"},
        env={"ANTHROPIC_BASE_URL": messages.url},
    )
    assert job.code == 1
    assert messages.requests == []
    [body] = comments(gh, 8)
    assert "was refused" in body and "only the default branch may change" in body
    assert gh.check_runs(REPO)[0].conclusion == "failure"
    assert job.outputs["verdict"] == "fail"


def test_fork_data_for_another_commit_is_refused(tmp_path: Path, gh: GitHubServer) -> None:
    open_pull(gh, {PROMPT: HARMLESS}, number=8, fork=True)
    data = {"version": 1, "pull_request": 8, "head_sha": "f" * 40, "files": {PROMPT: HARMLESS}}
    job = gate(tmp_path, gh, data)
    assert job.code == 2
    assert "refused" in job.summary and comments(gh, 8) == []


def test_fork_data_that_copies_the_holdout_sends_none_of_it(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer
) -> None:
    base = make_workspace(tmp_path / "peek")
    hidden = holdout_cases(base)
    lines = (base / CASES).read_text().splitlines()
    copies = [
        json.dumps(
            {
                "id": f"x-{i}",
                "group": f"x-{i}",
                "category": "parts",
                "split": "dev",
                "message": message,
            }
        )
        for i, (_, message) in enumerate(hidden)
    ]
    cases = "\n".join(lines + copies) + "\n"
    _, data = collect(tmp_path, gh, {CASES: cases})
    job = gate(
        tmp_path,
        gh,
        data,
        anthropic=True,
        inputs={"anthropic_api_key": "sk-ant-test-key"},
        env={"ANTHROPIC_BASE_URL": messages.url},
    )
    sent = [json.dumps(ex.body) for ex in messages.requests]
    assert sent, job.out + job.err
    assert [m for _, m in hidden for b in sent if json.dumps(m)[1:-1] in b] == []
    assert job.code == 1
    [body] = comments(gh, 8)
    assert "this pull request changes the holdout" in body
