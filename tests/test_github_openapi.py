"""The GitHub stand-in against GitHub's published REST description (@octokit/openapi, installed
by scripts/openapi-setup): the checker finds what GitHub would not take, and the stand-in's
exchanges pass it. Every test that uses the stand-in is checked the same way when its server
closes (GitHubServer.check_conformance); this module checks the checker."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
from typing import Any

import pytest
import requests
from github import Auth, Github

from tests.support import github_openapi
from tests.support.github_server import GitHubServer, RecordedRequest

DESCRIPTION = github_openapi.installed()
if DESCRIPTION is None:
    if os.environ.get("EVALGATE_OPENAPI") == "required":
        raise RuntimeError(
            f"EVALGATE_OPENAPI=required, but {github_openapi.description_path()} is missing "
            "(run scripts/openapi-setup)"
        )
    pytest.skip(
        "GitHub's REST description is not installed (scripts/openapi-setup)",
        allow_module_level=True,
    )


def exchange(
    method: str,
    path: str,
    *,
    query: dict[str, list[str]] | None = None,
    body: object = None,
    status: int = 200,
    answer: object = None,
) -> RecordedRequest:
    return RecordedRequest(
        "api",
        method,
        path,
        query or {},
        {},
        json.dumps(body).encode() if body is not None else b"",
        status,
        "write",
        False,
        json.dumps(answer).encode() if answer is not None else b"",
    )


def problems(entry: RecordedRequest) -> list[str]:
    assert DESCRIPTION is not None
    return DESCRIPTION.problems(entry)


def test_the_pinned_description_is_the_one_loaded() -> None:
    assert DESCRIPTION is not None and DESCRIPTION.version == github_openapi.VERSION


def test_an_endpoint_github_does_not_have_is_found() -> None:
    [found] = problems(exchange("GET", "/repos/o/r/comments-of-mine"))
    assert "no such endpoint and method" in found
    [found] = problems(exchange("PUT", "/repos/o/r/issues/7/comments", body={"body": "x"}))
    assert "no such endpoint and method" in found


def test_an_undeclared_query_parameter_is_found() -> None:
    ok = exchange("GET", "/repos/o/r/actions/runs", query={"branch": ["main"], "per_page": ["100"]})
    assert problems(ok) == []
    [found] = problems(exchange("GET", "/repos/o/r/actions/runs", query={"branches": ["main"]}))
    assert "query parameter 'branches' is not declared" in found


def test_a_request_body_githubs_schema_refuses_is_found() -> None:
    path = "/repos/o/r/issues/7/comments"
    assert problems(exchange("POST", path, body={"body": "hello"}, status=201)) == []
    found = problems(exchange("POST", path, body={"text": "hello"}, status=201))
    assert any("'body' is a required property" in p for p in found), found
    found = problems(
        exchange("POST", "/repos/o/r/statuses/abc", body={"state": "fine"}, status=201)
    )
    assert any("'fine' is not one of" in p for p in found), found


def test_an_undeclared_status_and_a_bad_answer_are_found() -> None:
    [found] = problems(exchange("GET", "/repos/o/r/issues/comments/1", status=203))
    assert "status 203 is not a declared answer" in found
    found = problems(exchange("GET", "/repos/o/r/issues/comments/1", answer={"id": "one"}))
    assert any("'one' is not of type 'integer'" in p for p in found), found


def test_a_pull_request_comment_round_trip_conforms() -> None:
    """What the action does on a pull request (PyGithub against the stand-in): every request a
    real endpoint with declared parameters and a body GitHub accepts, every status declared."""
    with GitHubServer() as gh:
        gh.add_repo("acme/widgets", files={"prompts/v1.txt": "v1\n"})
        gh.create_branch("acme/widgets", "tweak")
        gh.add_commit("acme/widgets", {"prompts/v1.txt": "v2\n"}, branch="tweak")
        gh.add_pull("acme/widgets", head="tweak", number=7, title="A tweak")
        client = Github(auth=Auth.Token(gh.write_token), base_url=gh.url)
        pull = client.get_repo("acme/widgets").get_pull(7)
        comment = pull.as_issue().create_comment("<!-- evalgate -->\nfirst")
        comment.edit("<!-- evalgate -->\nsecond")
        assert [c.body for c in pull.get_issue_comments()][-1].endswith("second")
        log = gh.find_requests(path="/repos/*")
        assert DESCRIPTION is not None
        assert log and DESCRIPTION.all_problems(log) == []


# --------------------------------------------------------------------------- answer bodies

DROP = object()
"""In WRONG_ANSWERS: the field is removed."""

# (what is wrong, the answer it is done to (method, path pattern), where in the body, the new
# value or DROP, the one problem the check must report). Each starts from a body the stand-in
# really gave in `exchanges` below, which the check accepts as it is.
WRONG_ANSWERS: list[tuple[str, tuple[str, str], tuple[str | int, ...], object, str]] = [
    (
        "a required field removed",
        ("GET", "/repos/*/issues/comments/*"),
        ("node_id",),
        DROP,
        "answer 200 of issues/get-comment at $.node_id: 'node_id' is a required property",
    ),
    (
        "a required field of a nested user removed",
        ("GET", "/repos/*/pulls/7"),
        ("head", "user", "login"),
        DROP,
        "answer 200 of pulls/get at $.head.user.login: 'login' is a required property",
    ),
    (
        "a required field of a nullable user removed",
        ("POST", "/repos/*/issues/7/comments"),
        ("user", "id"),
        DROP,
        "answer 201 of issues/create-comment at $.user.id: 'id' is a required property",
    ),
    (
        "a string for an integer",
        ("POST", "/repos/*/issues/7/comments"),
        ("id",),
        "101",
        "answer 201 of issues/create-comment at $.id: '101' is not of type 'integer'",
    ),
    (
        "null where GitHub never sends it",
        ("GET", "/repos/*/actions/runs"),
        ("workflow_runs", 0, "head_sha"),
        None,
        "answer 200 of actions/list-workflow-runs-for-repo at $.workflow_runs[0].head_sha: "
        "None is not of type 'string'",
    ),
    (
        "a value outside the enumeration",
        ("POST", "/repos/*/check-runs"),
        ("status",),
        "done",
        "answer 201 of checks/create at $.status: 'done' is not one of",
    ),
    (
        "an object for a list",
        ("GET", "/repos/*/pulls/7/files"),
        (),
        {"filename": "a.txt"},
        "answer 200 of pulls/list-files at $: {'filename': 'a.txt'} is not of type 'array'",
    ),
]


@pytest.fixture(scope="module")
def exchanges() -> list[RecordedRequest]:
    """What the stand-in answers over a pull request's comment, files, check run and runs."""
    with GitHubServer() as gh:
        gh.add_repo("acme/widgets", files={"prompts/v1.txt": "v1\n"})
        gh.create_branch("acme/widgets", "tweak")
        sha = gh.add_commit("acme/widgets", {"prompts/v1.txt": "v2\n"}, branch="tweak").sha
        gh.add_pull("acme/widgets", head="tweak", number=7, title="A tweak")
        gh.add_workflow_run("acme/widgets", head_branch="main")
        client = Github(auth=Auth.Token(gh.write_token), base_url=gh.url, retry=None)
        repo = client.get_repo("acme/widgets")
        pull = repo.get_pull(7)
        assert [f.filename for f in pull.get_files()] == ["prompts/v1.txt"]
        comment = pull.as_issue().create_comment("<!-- evalgate -->\nfirst")
        repo.get_issue(7).get_comment(comment.id)
        repo.create_check_run("evalgate", sha, status="completed", conclusion="neutral")
        assert repo.get_workflow_runs().totalCount == 1
        client.close()
        return gh.requests


def _answer(log: list[RecordedRequest], method: str, pattern: str) -> RecordedRequest:
    return next(e for e in log if e.method == method and fnmatch.fnmatchcase(e.path, pattern))


def _spoil(body: object, where: tuple[str | int, ...], value: object) -> object:
    if not where:
        return value
    parent: Any = body
    for part in where[:-1]:
        parent = parent[part]
    if value is DROP:
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    return body


@pytest.mark.parametrize(
    ("answer", "where", "value", "expected"),
    [case[1:] for case in WRONG_ANSWERS],
    ids=[case[0] for case in WRONG_ANSWERS],
)
def test_an_answer_githubs_schema_refuses_is_found(
    exchanges: list[RecordedRequest],
    answer: tuple[str, str],
    where: tuple[str | int, ...],
    value: object,
    expected: str,
) -> None:
    """A body the stand-in gave, which conforms, made wrong in one place: the check names the
    operation, the status and the JSON path of that place, and nothing else."""
    given = _answer(exchanges, *answer)
    assert problems(given) == []
    wrong = _spoil(json.loads(given.response_body), where, value)
    spoiled = dataclasses.replace(given, response_body=json.dumps(wrong).encode())
    [found] = problems(spoiled)
    assert found.startswith(f"{given.method} {given.path}: {expected}"), found


def test_the_stand_in_is_checked_on_every_answer_it_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the stand-in leaves out a field GitHub always sends, the test that used it fails
    as its server closes, naming the operation, the status and the field."""
    made = GitHubServer._comment_json

    def without_url(self: GitHubServer, *args: Any) -> dict[str, Any]:
        data = dict(made(self, *args))
        del data["html_url"]
        return data

    monkeypatch.setattr(GitHubServer, "_comment_json", without_url)
    with pytest.raises(AssertionError) as failed, GitHubServer() as gh:
        gh.add_repo("acme/widgets", files={"prompts/v1.txt": "v1\n"})
        gh.create_branch("acme/widgets", "tweak")
        gh.add_commit("acme/widgets", {"prompts/v1.txt": "v2\n"}, branch="tweak")
        gh.add_pull("acme/widgets", head="tweak", number=3)
        client = Github(auth=Auth.Token(gh.write_token), base_url=gh.url, retry=None)
        client.get_repo("acme/widgets").get_issue(3).create_comment("hello")
        client.close()
    assert (
        "POST /repos/acme/widgets/issues/3/comments: answer 201 of issues/create-comment "
        "at $.html_url: 'html_url' is a required property"
    ) in str(failed.value)


# Operations the action's tests reach only in part; driven here once each so that every
# answer the stand-in can give has been held to its schema.
LESS_TRAVELLED = {
    "checks/get",
    "checks/list-for-ref",
    "git/get-tree",
    "git/update-ref",
    "issues/delete-comment",
    "repos/get-combined-status-for-ref",
    "repos/get-content",
    "repos/list-commit-statuses-for-ref",
}


def test_the_less_travelled_answers_conform() -> None:
    with GitHubServer() as gh:
        gh.add_repo("acme/widgets", files={"prompts/v1.txt": "v1\n", "prompts/v2.txt": "v2\n"})
        gh.create_branch("acme/widgets", "tweak")
        sha = gh.add_commit("acme/widgets", {"prompts/v1.txt": "v3\n"}, branch="tweak").sha
        gh.add_pull("acme/widgets", head="tweak", number=7)
        client = Github(auth=Auth.Token(gh.write_token), base_url=gh.url, retry=None)
        repo = client.get_repo("acme/widgets")
        commit = repo.get_commit(sha)
        commit.create_status("success", description="fine", context="evalgate")
        # PyGithub lists statuses at the legacy /statuses/{sha}: ask the documented path.
        listed = requests.get(
            f"{gh.url}/repos/acme/widgets/commits/{sha}/statuses",
            headers={"Authorization": f"Bearer {gh.write_token}", "User-Agent": "evalgate-tests"},
            timeout=10,
        )
        assert [s["state"] for s in listed.json()] == ["success"]
        assert commit.get_combined_status().state == "success"
        check = repo.create_check_run("evalgate", sha, status="completed", conclusion="neutral")
        assert repo.get_check_run(check.id).conclusion == "neutral"
        assert [c.id for c in commit.get_check_runs()] == [check.id]
        listing = repo.get_contents("prompts", ref="main")
        assert isinstance(listing, list) and [e.name for e in listing] == ["v1.txt", "v2.txt"]
        # The root, which the contents API has no operation for (its path is required).
        assert [e.path for e in repo.get_git_tree(sha).tree] == ["prompts"]
        deep = repo.get_git_tree(sha, recursive=True).tree
        assert [e.path for e in deep] == ["prompts", "prompts/v1.txt", "prompts/v2.txt"]
        repo.get_git_ref("heads/tweak").edit(repo.get_branch("main").commit.sha, force=True)
        repo.get_issue(7).create_comment("<!-- evalgate -->").delete()
        client.close()
        log = gh.requests
    assert DESCRIPTION is not None
    assert DESCRIPTION.all_problems(log) == []
    reached = set()
    for entry in log:
        op = DESCRIPTION.find(entry.method, entry.path)
        if op is not None:
            reached.add(op.spec["operationId"])
    assert reached >= LESS_TRAVELLED, sorted(LESS_TRAVELLED - reached)
