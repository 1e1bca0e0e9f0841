"""The GitHub stand-in against GitHub's published REST description (@octokit/openapi, installed
by scripts/openapi-setup): the checker finds what GitHub would not take, and the stand-in's
exchanges pass it. Every test that uses the stand-in is checked the same way when its server
closes (GitHubServer.check_conformance); this module checks the checker."""

from __future__ import annotations

import json
import os

import pytest
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
        assert log and DESCRIPTION.all_problems(log, answers=False) == []
