"""The GitHub stand-in, driven by the real client stack (PyGithub and requests)."""

from __future__ import annotations

import http.client
import io
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from github import Auth, Github, GithubException, GithubRetry, InputGitAuthor
from github.GithubException import (
    BadCredentialsException,
    RateLimitExceededExceedsMaxWait,
    RateLimitExceededException,
    UnknownObjectException,
)
from urllib3.util.retry import Retry

from tests.support.github_server import (
    BOT_LOGIN,
    NOT_ACCESSIBLE,
    GitHubServer,
    blob_sha,
)

REPO = "octo/widgets"
FORK = "forker/widgets"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

ClientFactory = Callable[..., Github]


@pytest.fixture
def gh() -> Iterator[GitHubServer]:
    with GitHubServer() as server:
        server.add_repo(REPO, files={"README.md": "# widgets\n", "prompts/triage.txt": "v1\n"})
        server.create_branch(REPO, "feature")
        server.add_commit(REPO, {"prompts/triage.txt": "v2\nmore\n"}, branch="feature")
        server.add_pull(REPO, head="feature", number=7, user="alice", title="Better triage")
        server.add_repo(FORK, fork_of=REPO)
        server.add_commit(FORK, {"prompts/new.txt": "hi\n"}, branch="fork-feature")
        server.add_pull(REPO, head="fork-feature", head_repo=FORK, number=8, user="forker")
        yield server


@pytest.fixture
def client(gh: GitHubServer) -> Iterator[ClientFactory]:
    made: list[Github] = []

    def make(token: str | None = None, *, base_url: str | None = None, **kw: Any) -> Github:
        kw.setdefault("retry", None)
        kw.setdefault("seconds_between_requests", 0)
        kw.setdefault("seconds_between_writes", 0)
        auth = Auth.Token(token) if token is not None else None
        g = Github(auth=auth, base_url=base_url or gh.url, **kw)
        made.append(g)
        return g

    yield make
    for g in made:
        g.close()


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        s.headers["User-Agent"] = "evalgate-tests"
        yield s


def test_repo_and_pull_request(gh: GitHubServer, client: ClientFactory) -> None:
    repo = client(gh.write_token).get_repo(REPO)
    assert (repo.full_name, repo.default_branch, repo.private) == (REPO, "main", False)
    assert repo.id == gh.repo(REPO).id

    pr = repo.get_pull(7)
    assert pr.head.ref == "feature" and pr.head.sha == gh.branch_sha(REPO, "feature")
    assert pr.base.ref == "main" and pr.base.sha == gh.branch_sha(REPO, "main")
    assert pr.head.repo.full_name == REPO and pr.user.login == "alice"
    assert [f.filename for f in pr.get_files()] == ["prompts/triage.txt"]
    assert pr.changed_files == 1 and pr.additions == 2 and pr.deletions == 1
    # get_repo and get_pull fetch at once: one request each
    assert [r.path for r in gh.find_requests("GET")][:2] == [
        f"/repos/{REPO}",
        f"/repos/{REPO}/pulls/7",
    ]

    same = client(gh.write_token).get_repo(repo.id)
    assert same.full_name == REPO
    assert gh.requests[-1].path == f"/repositories/{repo.id}"


def test_fork_pull_request_names_the_fork(gh: GitHubServer, client: ClientFactory) -> None:
    pr = client(gh.write_token).get_repo(REPO).get_pull(8)
    assert pr.head.repo.full_name == FORK and pr.head.repo.fork
    assert pr.head.label == "forker:fork-feature"
    assert pr.base.repo.full_name == REPO
    assert [f.filename for f in pr.get_files()] == ["prompts/new.txt"]


def test_comments_paginate_like_github(
    gh: GitHubServer, client: ClientFactory, session: requests.Session
) -> None:
    for i in range(75):
        gh.add_comment(REPO, 7, f"comment {i}", created_at=T0 + timedelta(minutes=i))
    pr = client(gh.write_token).get_repo(REPO).get_pull(7)
    comments = pr.get_issue_comments()
    assert comments.totalCount == 75
    assert [c.body for c in comments] == [f"comment {i}" for i in range(75)]

    # PyGithub goes through the issue endpoints (issue_url from the pull request), then Link URLs
    paths = [(r.path, r.query.get("page")) for r in gh.find_requests("GET", "*/comments")]
    repo_id = gh.repo(REPO).id
    assert paths == [
        (f"/repos/{REPO}/issues/7/comments", None),  # totalCount: per_page=1, reads rel="last"
        (f"/repos/{REPO}/issues/7/comments", None),
        (f"/repositories/{repo_id}/issues/7/comments", ["2"]),
        (f"/repositories/{repo_id}/issues/7/comments", ["3"]),
    ]

    auth = {"Authorization": f"token {gh.write_token}"}
    first = session.get(f"{gh.url}/repos/{REPO}/issues/7/comments", headers=auth)
    assert len(first.json()) == 30
    assert set(first.links) == {"next", "last"}
    assert first.links["last"]["url"] == f"{gh.url}/repositories/{repo_id}/issues/7/comments?page=3"
    middle = session.get(first.links["next"]["url"], headers=auth, params={"per_page": 30})
    assert set(middle.links) == {"prev", "next", "last", "first"}
    assert len(session.get(first.links["last"]["url"], headers=auth).json()) == 15
    big = session.get(f"{gh.url}/repos/{REPO}/issues/7/comments?per_page=500", headers=auth)
    assert len(big.json()) == 75 and "Link" not in big.headers  # per_page is capped at 100


def test_create_and_edit_a_comment_as_the_bot(gh: GitHubServer, client: ClientFactory) -> None:
    pr = client(gh.write_token).get_repo(REPO).get_pull(7)
    comment = pr.create_issue_comment("<!-- evalgate -->\nfirst")
    assert comment.user.login == BOT_LOGIN and comment.user.type == "Bot"
    assert gh.requests[-1].path == f"/repos/{REPO}/issues/7/comments"
    assert gh.requests[-1].status == 201

    comment.edit("<!-- evalgate -->\nsecond")
    assert comment.body == "<!-- evalgate -->\nsecond"
    assert gh.requests[-1].method == "PATCH"
    assert gh.requests[-1].path == f"/repos/{REPO}/issues/comments/{comment.id}"
    stored = gh.comments(REPO, 7)
    assert [c.body for c in stored] == ["<!-- evalgate -->\nsecond"]
    assert stored[0].updated_at >= stored[0].created_at

    again = pr.get_issue_comment(comment.id)
    assert again.body == comment.body
    issue = client(gh.write_token).get_repo(REPO).get_issue(7)
    assert issue.pull_request is not None and issue.comments == 1


def test_comment_body_limit(gh: GitHubServer, client: ClientFactory) -> None:
    pr = client(gh.write_token).get_repo(REPO).get_pull(7)
    pr.create_issue_comment("x" * 65536)
    with pytest.raises(GithubException) as caught:
        pr.create_issue_comment("x" * 65537)
    assert caught.value.status == 422
    data = caught.value.data
    assert data["message"] == "Validation Failed" and data["status"] == "422"
    assert data["errors"] == [
        {
            "resource": "IssueComment",
            "code": "custom",
            "field": "body",
            "message": "Body is too long (maximum is 65536 characters)",
        }
    ]
    assert len(gh.comments(REPO, 7)) == 1


def test_read_only_token_cannot_write(gh: GitHubServer, client: ClientFactory) -> None:
    repo = client(gh.read_token).get_repo(REPO)
    pr = repo.get_pull(8)  # reads work
    assert pr.head.repo.full_name == FORK
    with pytest.raises(GithubException) as caught:
        pr.create_issue_comment("hello")
    assert caught.value.status == 403
    assert caught.value.data["message"] == NOT_ACCESSIBLE
    headers = caught.value.headers or {}
    assert headers["x-accepted-github-permissions"] == "issues=write; pull_requests=write"
    with pytest.raises(GithubException) as caught:
        repo.get_commit(pr.base.sha).create_status("success", description="ok")
    assert caught.value.status == 403
    assert gh.comments(REPO, 8) == [] and gh.statuses(REPO) == []
    assert gh.requests[-1].token == "read_only"


def test_a_contents_read_token_writes_comments_but_not_files(
    gh: GitHubServer, client: ClientFactory
) -> None:
    # A same-repository pull-request job with contents: read and pull-requests: write.
    repo = client(gh.contents_read_token).get_repo(REPO)
    repo.get_pull(7).create_issue_comment("hello")
    with pytest.raises(GithubException) as caught:
        repo.create_file("notes.md", "add notes", "notes\n", branch="main")
    assert caught.value.status == 403
    assert caught.value.data["message"] == NOT_ACCESSIBLE
    assert (caught.value.headers or {})["x-accepted-github-permissions"] == "contents=write"
    assert [c.body for c in gh.comments(REPO, 7)] == ["hello"]
    assert gh.file(REPO, "notes.md") is None


def test_bad_and_missing_tokens(gh: GitHubServer, client: ClientFactory) -> None:
    with pytest.raises(BadCredentialsException):
        client("ghs_not_a_token").get_repo(REPO)
    anonymous = client(None)
    pr = anonymous.get_repo(REPO).get_pull(7)  # a public repository reads anonymously
    with pytest.raises(GithubException) as caught:
        pr.create_issue_comment("hello")
    assert (caught.value.status, caught.value.data["message"]) == (401, "Requires authentication")

    gh.add_repo("octo/secret", private=True)
    with pytest.raises(UnknownObjectException):
        anonymous.get_repo("octo/secret")
    assert client(gh.write_token).get_repo("octo/secret").private
    for r in gh.requests:
        assert "ghs_" not in str(r.headers)


def test_get_user_is_forbidden_for_the_actions_token(
    gh: GitHubServer, client: ClientFactory
) -> None:
    with pytest.raises(GithubException) as caught:
        _ = client(gh.write_token).get_user().login
    assert caught.value.status == 403
    assert caught.value.data["message"] == NOT_ACCESSIBLE


def _seed_artifacts(gh: GitHubServer) -> dict[str, Any]:
    main_sha = gh.branch_sha(REPO, "main")
    old = gh.add_workflow_run(REPO, event="push", head_branch="main", created_at=T0)
    pr_run = gh.add_workflow_run(
        REPO,
        event="pull_request",
        head_branch="feature",
        created_at=T0 + timedelta(hours=2),
        pull_requests=[7],
    )
    new = gh.add_workflow_run(
        REPO, event="push", head_branch="main", created_at=T0 + timedelta(hours=1)
    )
    return {
        "old": gh.add_artifact(
            REPO, "evalgate-baseline", files={"baseline.json": '{"v": 1}'}, run=old
        ),
        "pr": gh.add_artifact(
            REPO, "evalgate-baseline", files={"baseline.json": '{"v": "pr"}'}, run=pr_run
        ),
        "new": gh.add_artifact(
            REPO, "evalgate-baseline", files={"baseline.json": '{"v": 2}'}, run=new
        ),
        "other": gh.add_artifact(REPO, "coverage", files={"c.txt": "x"}, run=new),
        "main_sha": main_sha,
    }


def test_list_artifacts_by_name_newest_first(gh: GitHubServer, client: ClientFactory) -> None:
    seeded = _seed_artifacts(gh)
    repo = client(gh.write_token).get_repo(REPO)
    arts = repo.get_artifacts("evalgate-baseline")
    assert arts.totalCount == 3
    listed = list(arts)
    assert [a.id for a in listed] == [seeded["pr"].id, seeded["new"].id, seeded["old"].id]
    assert gh.find_requests("GET", f"/repos/{REPO}/actions/artifacts")[-1].query["name"] == [
        "evalgate-baseline"
    ]
    newest = listed[0]
    assert newest.workflow_run.head_branch == "feature" and not newest.expired
    assert newest.archive_download_url == f"{gh.url}/repos/{REPO}/actions/artifacts/{newest.id}/zip"
    # the nested workflow_run has no URL: PyGithub cannot complete it, so fetch the run for its event
    with pytest.raises(GithubException):
        _ = newest.workflow_run.event
    run = repo.get_workflow_run(newest.workflow_run.id)
    assert run.event == "pull_request" and run.head_branch == "feature"
    assert [p.number for p in run.pull_requests] == [7]

    pushes = repo.get_workflow_runs(event="push", branch=repo.get_branch("main"))
    assert pushes.totalCount == 2
    assert [r.created_at for r in pushes] == [T0 + timedelta(hours=1), T0]

    # the raw requester answers the same (dict payload with total_count)
    _, data = repo.requester.requestJsonAndCheck(
        "GET", f"{repo.url}/actions/artifacts", parameters={"name": "coverage", "per_page": 1}
    )
    assert (
        data["total_count"] == 1
        and data["artifacts"][0]["workflow_run"]["repository_id"] == repo.id
    )


def test_artifact_download_drops_the_token_at_the_storage_host(
    gh: GitHubServer, session: requests.Session
) -> None:
    art = _seed_artifacts(gh)["new"]
    url = f"{gh.url}/repos/{REPO}/actions/artifacts/{art.id}/zip"
    got = session.get(url, headers={"Authorization": f"Bearer {gh.write_token}"}, timeout=5)
    assert got.status_code == 200 and got.headers["Content-Type"] == "application/zip"
    assert got.history[0].status_code == 302
    location = urlsplit(got.history[0].headers["Location"])
    assert (location.hostname, location.port) != ("127.0.0.1", gh.port)
    with zipfile.ZipFile(io.BytesIO(got.content)) as z:
        assert z.read("baseline.json") == b'{"v": 2}'

    api_hit = gh.find_requests("GET", f"/repos/{REPO}/actions/artifacts/{art.id}/zip")[-1]
    assert api_hit.has_authorization and api_hit.token == "write" and api_hit.status == 302
    storage_hits = gh.find_requests(server="storage")
    assert len(storage_hits) == 1 and not storage_hits[0].has_authorization

    # a client that forwards the token across hosts is refused by the storage host
    redirect = session.get(
        url, headers={"Authorization": f"Bearer {gh.write_token}"}, allow_redirects=False
    )
    refused = session.get(
        redirect.headers["Location"], headers={"Authorization": f"Bearer {gh.write_token}"}
    )
    assert refused.status_code == 403
    tampered = session.get(redirect.headers["Location"].replace("sig=", "sig=0"))
    assert tampered.status_code == 403


def test_expired_and_unknown_artifacts(
    gh: GitHubServer, client: ClientFactory, session: requests.Session
) -> None:
    gone = gh.add_artifact(REPO, "evalgate-baseline", files={"a": "b"}, expired=True)
    auth = {"Authorization": f"token {gh.write_token}"}
    expired = session.get(f"{gh.url}/repos/{REPO}/actions/artifacts/{gone.id}/zip", headers=auth)
    assert expired.status_code == 410
    assert expired.json()["message"] == "Artifact has expired" and expired.json()["status"] == "410"
    listed = client(gh.write_token).get_repo(REPO).get_artifact(gone.id)
    assert listed.expired and listed.expires_at < datetime.now(UTC)

    missing = session.get(f"{gh.url}/repos/{REPO}/actions/artifacts/999/zip", headers=auth)
    assert missing.status_code == 404 and missing.json()["message"] == "Not Found"
    with pytest.raises(UnknownObjectException):
        client(gh.write_token).get_repo(REPO).get_artifact(999)


def test_compare_gives_the_merge_base(gh: GitHubServer, client: ClientFactory) -> None:
    fork_point = gh.branch_sha(REPO, "main")
    gh.add_commit(REPO, {"README.md": "# widgets, moved on\n"}, branch="main")
    repo = client(gh.write_token).get_repo(REPO)
    comparison = repo.compare("main", "feature")
    assert comparison.merge_base_commit.sha == fork_point
    assert (comparison.status, comparison.ahead_by, comparison.behind_by) == ("diverged", 1, 1)
    assert [f.filename for f in comparison.files] == ["prompts/triage.txt"]
    assert [c.sha for c in comparison.commits] == [gh.branch_sha(REPO, "feature")]
    fork = repo.compare("main", "forker:fork-feature")
    assert fork.merge_base_commit.sha == fork_point and fork.ahead_by == 1

    commit = repo.get_commit(gh.branch_sha(REPO, "feature") or "")
    assert commit.parents[0].sha == fork_point
    assert [f.filename for f in commit.files] == ["prompts/triage.txt"]
    with pytest.raises(GithubException) as caught:
        repo.get_commit("0" * 40)
    assert caught.value.status == 422


def test_status_and_check_runs(gh: GitHubServer, client: ClientFactory) -> None:
    repo = client(gh.write_token).get_repo(REPO)
    sha = gh.branch_sha(REPO, "feature") or ""
    status = repo.get_commit(sha).create_status(
        "failure", description="x" * 140, context="evalgate"
    )
    assert status.state == "failure" and status.creator.login == BOT_LOGIN
    assert [s.context for s in gh.statuses(REPO, sha)] == ["evalgate"]
    with pytest.raises(GithubException) as caught:
        repo.get_commit(sha).create_status("success", description="x" * 141)
    assert caught.value.status == 422
    assert (
        caught.value.data["errors"][0]["message"]
        == "description is too long (maximum is 140 characters)"
    )

    notes: list[dict[str, str | int]] = [
        {
            "path": "prompts/triage.txt",
            "start_line": 1,
            "end_line": 1,
            "annotation_level": "warning",
            "message": f"n{i}",
        }
        for i in range(50)
    ]
    check = repo.create_check_run(
        "evalgate",
        sha,
        status="in_progress",
        output={"title": "Eval", "summary": "running", "annotations": notes},
    )
    assert check.status == "in_progress" and check.output.annotations_count == 50
    with pytest.raises(GithubException) as caught:
        repo.create_check_run(
            "evalgate",
            sha,
            output={"title": "t", "summary": "s", "annotations": [*notes, notes[0]]},
        )
    assert caught.value.status == 422
    assert (
        caught.value.data["message"]
        == "Invalid request.\n\nNo more than 50 items are allowed; 51 were supplied."
    )
    with pytest.raises(GithubException) as caught:
        check.edit(output={"title": "Eval", "summary": "s" * 65536})
    assert caught.value.status == 422
    check.edit(
        conclusion="success", output={"title": "Eval", "summary": "done", "annotations": notes[:5]}
    )
    assert check.status == "completed" and check.conclusion == "success"
    stored = gh.check_runs(REPO)
    assert len(stored) == 1 and len(stored[0].annotations) == 55 and stored[0].summary == "done"


def test_a_tree_lists_a_folder_by_commit_branch_or_tree_sha(
    gh: GitHubServer, client: ClientFactory
) -> None:
    """``GET /git/trees/{tree_sha}`` as PyGithub reads it: the folder's entries (``tree`` for a
    folder, ``blob`` with its size for a file), by a commit SHA, a branch or a tree's SHA; every
    entry below with ``recursive``; 404 for a SHA that is no tree."""
    repo = client(gh.write_token).get_repo(REPO)
    main = repo.get_branch("main").commit
    root = repo.get_git_tree(main.sha)
    assert root.sha == main.commit.tree.sha
    assert [(e.path, e.type) for e in root.tree] == [("README.md", "blob"), ("prompts", "tree")]
    readme = root.tree[0]
    assert readme.sha == blob_sha(b"# widgets\n") and readme.size == 10 and readme.mode == "100644"
    assert [e.path for e in repo.get_git_tree("feature").tree] == ["README.md", "prompts"]
    prompts = repo.get_git_tree(root.tree[1].sha)
    assert [(e.path, e.type) for e in prompts.tree] == [("triage.txt", "blob")]
    deep = repo.get_git_tree(main.sha, recursive=True)
    assert [e.path for e in deep.tree] == ["README.md", "prompts", "prompts/triage.txt"]
    assert not deep.truncated
    with pytest.raises(UnknownObjectException):
        repo.get_git_tree("0" * 40)


def test_a_commit_without_a_checkout_is_read_through_the_api(
    gh: GitHubServer, client: ClientFactory
) -> None:
    """ContentsTree: the root through the git trees API (the contents API has no operation
    without a path), folders and files through the contents API."""
    from evalgate.publish.github import ContentsTree

    repo = client(gh.write_token).get_repo(REPO)
    tree = ContentsTree(repo, gh.branch_sha(REPO, "feature"))
    assert tree.list("") == [("README.md", False), ("prompts", True)]
    assert tree.list("prompts") == [("triage.txt", False)]
    assert tree.read("prompts/triage.txt") == b"v2\nmore\n"
    assert tree.read("prompts/gone.txt") is None and tree.list("gone") == []
    assert ContentsTree(repo, "0" * 40).list("") == []
    assert not gh.find_requests("GET", f"/repos/{REPO}/contents")
    assert not gh.find_requests("GET", f"/repos/{REPO}/contents/")


def test_contents_on_a_new_branch(gh: GitHubServer, client: ClientFactory) -> None:
    repo = client(gh.write_token).get_repo(REPO)
    with pytest.raises(UnknownObjectException):
        repo.get_git_ref("heads/evalgate-data")
    assert gh.requests[-1].path == f"/repos/{REPO}/git/ref/heads/evalgate-data"
    main = repo.get_branch("main").commit.sha
    ref = repo.create_git_ref("refs/heads/evalgate-data", main)
    assert (
        ref.object.sha == main
        and repo.get_git_ref("heads/evalgate-data").ref == "refs/heads/evalgate-data"
    )
    with pytest.raises(GithubException) as caught:
        repo.create_git_ref("refs/heads/evalgate-data", main)
    assert caught.value.status == 422

    who = InputGitAuthor("evalgate", "evalgate@example.com")
    created = repo.create_file(
        "history/runs.jsonl", "add run", '{"run": 1}\n', branch="evalgate-data", committer=who
    )
    assert gh.requests[-1].status == 201
    first = repo.get_contents("history/runs.jsonl", ref="evalgate-data")
    assert not isinstance(first, list)
    assert first.decoded_content == b'{"run": 1}\n' and first.sha == blob_sha(b'{"run": 1}\n')
    assert created["content"].sha == first.sha
    with pytest.raises(GithubException) as caught:
        repo.update_file(first.path, "stale", "x", "0" * 40, branch="evalgate-data")
    assert caught.value.status == 409
    with pytest.raises(GithubException) as caught:
        repo.create_file("history/runs.jsonl", "no sha", "x", branch="evalgate-data")
    assert caught.value.status == 422
    updated = repo.update_file(
        first.path, "add run 2", '{"run": 1}\n{"run": 2}\n', first.sha, branch="evalgate-data"
    )
    assert updated["commit"].sha == repo.get_branch("evalgate-data").commit.sha
    assert gh.file(REPO, "history/runs.jsonl", "evalgate-data") == b'{"run": 1}\n{"run": 2}\n'
    assert gh.file(REPO, "history/runs.jsonl") is None  # main untouched
    listing = repo.get_contents("history", ref="evalgate-data")
    assert isinstance(listing, list) and [c.path for c in listing] == ["history/runs.jsonl"]
    with pytest.raises(UnknownObjectException):
        repo.get_contents("nope.txt", ref="evalgate-data")


def test_enterprise_prefix(gh: GitHubServer, client: ClientFactory) -> None:
    for i in range(35):
        gh.add_comment(REPO, 7, f"c{i}")
    g = client(gh.write_token, base_url=gh.enterprise_url)
    repo = g.get_repo(REPO)
    assert repo.url == f"{gh.enterprise_url}/repos/{REPO}"
    pr = repo.get_pull(7)
    assert pr.issue_url.startswith(f"{gh.enterprise_url}/repos/")
    assert len(list(pr.get_issue_comments())) == 35
    pr.create_issue_comment("hello")
    assert all(r.path.startswith("/api/v3/") for r in gh.requests)
    assert gh.requests[-2].path == f"/api/v3/repositories/{repo.id}/issues/7/comments"


def test_injected_faults_and_retry_settings(gh: GitHubServer, client: ClientFactory) -> None:
    path = f"/repos/{REPO}/issues/7/comments"
    pr = client(gh.write_token).get_repo(REPO).get_pull(7)
    gh.fail_next("POST", path, status=502)
    with pytest.raises(GithubException) as caught:
        pr.create_issue_comment("once")
    assert caught.value.status == 502
    assert len(gh.find_requests("POST", path)) == 1 and gh.comments(REPO, 7) == []

    # a retry that covers GET only: the GET is retried, the POST is not
    retry = Retry(
        total=2, status_forcelist=[502], allowed_methods=frozenset({"GET"}), backoff_factor=0
    )
    pr = client(gh.write_token, retry=retry).get_repo(REPO).get_pull(7)
    gh.fail_next("GET", f"/repos/{REPO}/issues/7/comments", status=502)
    assert list(pr.get_issue_comments()) == []
    gets = gh.find_requests("GET", path)
    assert [r.forced for r in gets[-2:]] == [True, False]

    # PyGithub's default retry re-sends a POST after a 502: if GitHub did the work, it posts twice
    default = client(gh.write_token, retry=GithubRetry()).get_repo(REPO).get_pull(7)
    gh.fail_next("POST", path, status=502, effective=True)
    default.create_issue_comment("twice")
    assert [c.body for c in gh.comments(REPO, 7)] == ["twice", "twice"]
    assert gh.pending_faults == 0

    gh.fail_next("*", f"/repos/{REPO}/pulls/*", disconnect=True)
    with pytest.raises(requests.exceptions.ConnectionError):
        client(gh.write_token).get_repo(REPO).get_pull(7)


def test_rate_limited_mode(
    gh: GitHubServer, client: ClientFactory, session: requests.Session
) -> None:
    gh.exhaust_rate_limit(reset_in=600)
    with pytest.raises(RateLimitExceededException) as caught:
        client(gh.write_token).get_repo(REPO)
    assert caught.value.status == 403
    headers = caught.value.headers or {}
    assert headers["x-ratelimit-remaining"] == "0"
    assert int(headers["x-ratelimit-reset"]) >= int(datetime.now(UTC).timestamp()) + 590
    # PyGithub would sleep until the reset; a capped wait fails at once instead
    capped = client(gh.write_token, retry=GithubRetry(total=3, max_rate_limit_wait=5))
    with pytest.raises(RateLimitExceededExceedsMaxWait):
        capped.get_repo(REPO)

    gh.set_rate_limit(remaining=10)
    got = session.get(
        f"{gh.url}/repos/{REPO}", headers={"Authorization": f"token {gh.write_token}"}
    )
    assert got.status_code == 200
    assert (
        got.headers["x-ratelimit-remaining"] == "9"
        and got.headers["x-ratelimit-resource"] == "core"
    )


def test_response_headers_and_error_shape(gh: GitHubServer, session: requests.Session) -> None:
    ok = session.get(f"{gh.url}/repos/{REPO}", headers={"Authorization": f"token {gh.write_token}"})
    for name in (
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        "x-ratelimit-used",
    ):
        assert ok.headers[name].isdigit()
    assert ok.headers["x-github-request-id"]
    assert ok.headers["Content-Type"].startswith("application/json")
    missing = session.get(
        f"{gh.url}/repos/{REPO}/pulls/999", headers={"Authorization": f"token {gh.write_token}"}
    )
    assert missing.status_code == 404
    assert set(missing.json()) == {"message", "documentation_url", "status"}
    assert missing.json()["status"] == "404"

    conn = http.client.HTTPConnection("127.0.0.1", gh.port, timeout=5)
    try:
        conn.request("GET", f"/repos/{REPO}", headers={"Authorization": f"token {gh.write_token}"})
        no_agent = conn.getresponse()
        assert no_agent.status == 403 and b"User-Agent" in no_agent.read()
    finally:
        conn.close()
