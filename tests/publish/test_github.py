"""evalgate.publish.github driven through real PyGithub and requests against the loopback GitHub stand-in."""

from __future__ import annotations

import io
import time
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from github import Github
from github.Repository import Repository

from evalgate.errors import RunFileError
from evalgate.publish.github import (
    CHECK_SUMMARY_MAX,
    COMMENT_MAX,
    ArtifactExpiredError,
    BaselineRef,
    GitHubError,
    connect,
    create_check_run,
    download_artifact,
    find_baseline,
    get_repository,
    load_baseline_run,
    make_retry,
    merge_base,
    pull_request_info,
    read_data_file,
    set_commit_status,
    upsert_comment,
    write_data_file,
)
from evalgate.runs.schema import Run
from tests.support.github_server import (
    BOT_LOGIN,
    Artifact,
    GitHubServer,
    PullFile,
    WorkflowRun,
    make_zip,
)

REPO = "octo/widgets"
FORK = "forker/widgets"
MARKER = "<!-- evalgate:suite=bike-shop -->"
BASELINE = "evalgate-baseline"
DATA = "evalgate-data"
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(days=10)

Connect = Callable[..., Github]


@pytest.fixture
def gh() -> Iterator[GitHubServer]:
    with GitHubServer() as server:
        server.add_repo(REPO, files={"README.md": "# widgets\n", "prompts/triage.txt": "v1\n"})
        server.create_branch(REPO, "feature")
        server.add_commit(REPO, {"prompts/triage.txt": "v2\n"}, branch="feature")
        server.add_pull(REPO, head="feature", number=7)
        server.add_repo(FORK, fork_of=REPO)
        server.add_commit(FORK, {"prompts/new.txt": "hi\n"}, branch="fork-feature")
        server.add_pull(REPO, head="fork-feature", head_repo=FORK, number=8, user="forker")
        yield server


@pytest.fixture
def client(gh: GitHubServer) -> Iterator[Connect]:
    """Clients built by evalgate's own ``connect`` (closed afterwards)."""
    made: list[Github] = []

    def make(token: str | None = None, **kw: Any) -> Github:
        g = connect(token or gh.write_token, gh.url, **kw)
        made.append(g)
        return g

    yield make
    for g in made:
        g.close()


@pytest.fixture
def repo(gh: GitHubServer, client: Connect) -> Repository:
    return get_repository(client(), REPO)


@pytest.fixture
def session() -> Iterator[requests.Session]:
    with requests.Session() as s:
        yield s


def body(text: str) -> str:
    return f"{MARKER}\n## evalgate\n{text}\n"


# --------------------------------------------------------------------------- comments


def test_comment_is_created_then_edited_in_place(gh: GitHubServer, repo: Repository) -> None:
    url, created = upsert_comment(repo, 7, body("first"), MARKER)
    assert created
    [comment] = gh.comments(REPO, 7)
    assert comment.user == BOT_LOGIN and url.endswith(f"#issuecomment-{comment.id}")

    url2, created2 = upsert_comment(repo, 7, body("second"), MARKER)
    assert (url2, created2) == (url, False)
    [edited] = gh.comments(REPO, 7)
    assert edited.id == comment.id and edited.body == body("second")
    assert len(gh.find_requests("POST", "*/comments")) == 1
    assert len(gh.find_requests("PATCH", "*/comments/*")) == 1

    # the same body again: nothing to write
    assert upsert_comment(repo, 7, body("second"), MARKER) == (url, False)
    assert len(gh.find_requests("PATCH")) == 1
    # our settings reach the wire: 100 per page, our user agent
    listing = gh.find_requests("GET", "*/comments")[-1]
    assert listing.query["per_page"] == ["100"]
    assert listing.headers["User-Agent"].startswith("evalgate/")


def test_marker_is_found_on_the_third_page(gh: GitHubServer, repo: Repository) -> None:
    # connect() lists 100 per page: comment 230 of 250 sits on page 3
    for i in range(250):
        if i == 229:
            gh.add_comment(
                REPO, 7, body("old"), user=BOT_LOGIN, created_at=T0 + timedelta(minutes=i)
            )
        else:
            gh.add_comment(REPO, 7, f"chat {i}", created_at=T0 + timedelta(minutes=i))
    ours = gh.comments(REPO, 7)[229]

    _, created = upsert_comment(repo, 7, body("new"), MARKER)
    assert not created
    assert gh.comments(REPO, 7)[229].body == body("new") and ours.id == gh.comments(REPO, 7)[229].id
    pages = [r.query.get("page", ["1"])[0] for r in gh.find_requests("GET", "*/issues/7/comments")]
    assert pages == ["1", "2", "3"]
    assert gh.find_requests("POST") == [] and len(gh.comments(REPO, 7)) == 250


def test_newest_marked_bot_comment_wins(gh: GitHubServer, repo: Repository) -> None:
    older = gh.add_comment(REPO, 7, body("a"), user=BOT_LOGIN, created_at=T0)
    newer = gh.add_comment(REPO, 7, body("b"), user=BOT_LOGIN, created_at=T0 + timedelta(hours=1))
    # a person quoting our comment carries the marker too, but is not ours
    gh.add_comment(
        REPO, 7, f"> {body('b')}\nwhy?", user="alice", created_at=T0 + timedelta(hours=2)
    )

    upsert_comment(repo, 7, body("c"), MARKER)
    by_id = {c.id: c.body for c in gh.comments(REPO, 7)}
    assert by_id[newer.id] == body("c") and by_id[older.id] == body("a")
    assert len(by_id) == 3


def test_comment_by_a_person_is_never_edited_by_default(gh: GitHubServer, repo: Repository) -> None:
    human = gh.add_comment(REPO, 7, body("typed by alice"), user="alice")
    _, created = upsert_comment(repo, 7, body("ours"), MARKER)
    assert created and gh.comments(REPO, 7)[0].body == human.body
    # with a personal token our comments are by a user: its login as the author finds them
    _, created = upsert_comment(repo, 7, body("ours again"), MARKER, author="alice")
    assert not created and gh.comments(REPO, 7)[0].body == body("ours again")


def test_comment_that_github_would_refuse_is_a_caller_bug(
    gh: GitHubServer, repo: Repository
) -> None:
    gh.clear_requests()
    with pytest.raises(ValueError, match="65,536"):
        upsert_comment(repo, 7, body("x" * COMMENT_MAX), MARKER)
    with pytest.raises(ValueError, match="marker"):
        upsert_comment(repo, 7, "no marker", MARKER)
    assert gh.requests == []
    fits = body("")
    fits += "x" * (COMMENT_MAX - len(fits))
    assert upsert_comment(repo, 7, fits, MARKER)[1]


# --------------------------------------------------------------------------- errors


def test_read_only_token_names_forks_and_the_permission(gh: GitHubServer, client: Connect) -> None:
    repo = get_repository(client(gh.read_token), REPO)
    with pytest.raises(GitHubError) as caught:
        upsert_comment(repo, 8, body("x"), MARKER)
    err = caught.value
    assert err.status == 403 and err.exit_code == 2
    text = str(err)
    assert "Resource not accessible by integration" in text
    assert "forks get a read-only token" in text and "pull-requests: write" in text
    assert err.where == f"{REPO}#8"
    assert len(gh.find_requests("POST")) == 1 and gh.comments(REPO, 8) == []

    with pytest.raises(GitHubError, match="statuses: write"):
        set_commit_status(repo, gh.branch_sha(REPO, "main") or "", "success", "ok", "evalgate")


def test_bad_token_and_missing_things(gh: GitHubServer, client: Connect) -> None:
    with pytest.raises(GitHubError, match="rejected the token") as caught:
        get_repository(client("ghs_not_a_token"), REPO)
    assert caught.value.status == 401 and "GITHUB_TOKEN" in str(caught.value)

    with pytest.raises(GitHubError, match="404") as caught:
        get_repository(client(), "octo/nope")
    assert caught.value.where == "octo/nope" and "private repository" in str(caught.value)

    repo = get_repository(client(), REPO)
    with pytest.raises(GitHubError, match="404"):
        pull_request_info(repo, 999)


def test_validation_errors_carry_githubs_messages(repo: Repository) -> None:
    with pytest.raises(GitHubError) as caught:
        create_check_run(repo, "0" * 40, "evalgate", "success", "t", "s")
    assert caught.value.status == 422
    assert f"No commit found for SHA: {'0' * 40}" in str(caught.value)


def test_failed_post_is_not_repeated_but_reads_are(
    gh: GitHubServer, repo: Repository, client: Connect
) -> None:
    path = f"/repos/{REPO}/issues/7/comments"
    # GitHub did the work but the gateway answered 502: a repeat would post twice
    gh.fail_next("POST", path, status=502, effective=True)
    with pytest.raises(GitHubError, match="502") as caught:
        upsert_comment(repo, 7, body("once"), MARKER)
    assert "re-run" in str(caught.value)
    assert len(gh.find_requests("POST", path)) == 1 and len(gh.comments(REPO, 7)) == 1
    # ... and the next run finds that comment by its marker
    assert upsert_comment(repo, 7, body("twice"), MARKER)[1] is False

    gh.clear_requests()
    gh.fail_next("GET", path, status=502)
    upsert_comment(repo, 7, body("thrice"), MARKER)
    assert [r.forced for r in gh.find_requests("GET", path)] == [True, False]
    assert [c.body for c in gh.comments(REPO, 7)] == [body("thrice")]

    # a read that keeps failing ends in GitHub's own error, not urllib3's RetryError
    fast = get_repository(client(retry=make_retry(backoff_factor=0)), REPO)
    gh.clear_requests()
    gh.fail_next("GET", path, status=502, times=10)
    with pytest.raises(GitHubError) as caught:
        upsert_comment(fast, 7, body("never"), MARKER)
    assert caught.value.status == 502
    assert len(gh.find_requests("GET", path)) == 4  # one try and three retries


def test_rate_limit_beyond_the_wait_cap_fails_at_once(gh: GitHubServer, client: Connect) -> None:
    g = client()
    gh.exhaust_rate_limit(reset_in=600)
    started = time.monotonic()
    with pytest.raises(GitHubError, match="rate limit") as caught:
        get_repository(g, REPO)
    assert time.monotonic() - started < 2
    assert "resets in" in str(caught.value) and "longer than evalgate waits" in str(caught.value)
    assert len(gh.find_requests("GET")) == 1

    # a Retry-After past the cap is not slept either
    gh.set_rate_limit(remaining=100)
    gh.fail_next("GET", f"/repos/{REPO}", status=429, headers={"Retry-After": "3600"})
    with pytest.raises(GitHubError, match="rate limit"):
        get_repository(g, REPO)
    assert time.monotonic() - started < 2


def test_rate_limit_with_a_near_reset_is_waited_for(gh: GitHubServer, client: Connect) -> None:
    g = client()
    gh.exhaust_rate_limit(reset_in=0.1)
    started = time.monotonic()
    assert get_repository(g, REPO).full_name == REPO
    assert time.monotonic() - started < 5
    assert [r.status for r in gh.find_requests("GET", f"/repos/{REPO}")] == [403, 200]


def test_unreachable_api_is_a_clear_error() -> None:
    g = connect("t", "http://127.0.0.1:9", retry=make_retry(total=0))
    try:
        with pytest.raises(GitHubError, match="cannot reach GitHub"):
            get_repository(g, REPO)
    finally:
        g.close()


# --------------------------------------------------------------------------- baselines


def push_run(
    gh: GitHubServer, hours: int, *, branch: str = "main", **kw: Any
) -> tuple[WorkflowRun, Artifact]:
    """A commit on ``branch`` and a run that uploaded a baseline artefact ``hours`` after T0."""
    repo = kw.pop("head_repo", None) or REPO
    when = T0 + timedelta(hours=hours)
    commit = gh.add_commit(repo, {"prompts/triage.txt": f"v{hours}\n"}, branch=branch)
    run = gh.add_workflow_run(
        REPO,
        event=kw.pop("event", "push"),
        head_branch=branch,
        head_sha=commit.sha,
        head_repo=repo,
        created_at=when,
    )
    art = gh.add_artifact(REPO, BASELINE, files={"run.json": "{}"}, run=run, **kw)
    return run, art


def test_baseline_is_the_newest_trusted_run(gh: GitHubServer, repo: Repository) -> None:
    _, old = push_run(gh, 1)
    _, new = push_run(gh, 2)
    push_run(gh, 3, branch="release")  # another branch
    push_run(gh, 4, expired=True)  # expired
    push_run(gh, 5, branch="feature", event="pull_request")  # a pull request's own run
    push_run(gh, 6, event="pull_request")  # a pull_request run whose head branch is main
    push_run(gh, 7, head_repo=FORK)  # a fork's main branch
    gh.add_artifact(REPO, "coverage", files={"c": "x"})  # another name

    found = find_baseline(repo, BASELINE, "main")
    assert found is not None and found.artifact_id == new.id
    assert (found.event, found.head_branch, found.name) == ("push", "main", BASELINE)
    assert found.head_sha == new.head_sha and found.html_url.endswith(f"/runs/{found.run_id}")
    assert found.archive_download_url.endswith(f"/actions/artifacts/{new.id}/zip")
    # Runs are listed by GitHub's own filters, one list per trusted event; the artefacts of
    # the newest trusted runs are looked up until one has the baseline.
    listed = gh.find_requests("GET", f"/repos/{REPO}/actions/runs")
    assert sorted(r.query["event"][0] for r in listed) == ["push", "schedule", "workflow_dispatch"]
    assert all(r.query["branch"] == ["main"] for r in listed)
    assert not gh.find_requests("GET", f"/repos/{REPO}/actions/artifacts")
    # The fork's run (hour 7) is ruled out from its listing; the coverage upload's run (made
    # now) and the expired one (hour 4) after their artefacts were read: three lookups.
    assert len(gh.find_requests("GET", f"/repos/{REPO}/actions/runs/*/artifacts")) == 3

    preferred = find_baseline(repo, BASELINE, "main", prefer_sha=old.head_sha)
    assert preferred is not None and preferred.artifact_id == old.id
    unknown = find_baseline(repo, BASELINE, "main", prefer_sha="f" * 40)
    assert unknown is not None and unknown.artifact_id == new.id


def test_no_trusted_baseline_gives_none(gh: GitHubServer, repo: Repository) -> None:
    assert find_baseline(repo, BASELINE, "main") is None
    push_run(gh, 1, event="pull_request")
    push_run(gh, 2, expired=True)
    push_run(gh, 3, branch="release")
    for hours, event in enumerate(("pull_request_target", "workflow_run", "issue_comment"), 4):
        push_run(gh, hours, event=event)  # on main, but their code or input is a PR's
    assert find_baseline(repo, BASELINE, "main") is None
    assert find_baseline(repo, BASELINE, "release") is not None


@pytest.mark.parametrize("event", ["schedule", "workflow_dispatch"])
def test_scheduled_and_manual_runs_make_baselines(
    gh: GitHubServer, repo: Repository, event: str
) -> None:
    """The README's weekly refresh (schedule) and a manual run on the default branch count."""
    push_run(gh, 1)
    _, weekly = push_run(gh, 2, event=event)
    found = find_baseline(repo, BASELINE, "main")
    assert found is not None and found.artifact_id == weekly.id and found.event == event


def test_a_flood_of_decoys_cannot_hide_the_baseline(gh: GitHubServer, repo: Repository) -> None:
    """100 newer artefacts of the same name from pull-request runs (on branches named main in
    forks, on feature branches, on main itself) do not push the real one out of reach."""
    _, real = push_run(gh, 0, event="schedule")
    for h in range(1, 101):
        kind = h % 3
        if kind == 0:
            push_run(gh, h, event="pull_request", branch=f"decoy-{h}")
        elif kind == 1:
            push_run(gh, h, event="pull_request")  # head branch "main"
        else:
            push_run(gh, h, head_repo=FORK)  # a fork's push to its own main
    found = find_baseline(repo, BASELINE, "main")
    assert found is not None and found.artifact_id == real.id
    # The decoys cost nothing: three listings and the one artefact lookup that found it.
    assert len(gh.find_requests("GET", f"/repos/{REPO}/actions/runs")) == 3
    assert len(gh.find_requests("GET", f"/repos/{REPO}/actions/runs/*/artifacts")) == 1


def test_baseline_search_is_bounded(gh: GitHubServer, repo: Repository) -> None:
    push_run(gh, 0)
    for h in range(1, 150):
        gh.add_workflow_run(
            REPO, event="push", head_branch="main", created_at=T0 + timedelta(hours=h)
        )
    # 149 newer runs on main made no baseline (another workflow, not named): at most
    # max_lookups of the newest are read, in one listing page per event.
    assert find_baseline(repo, BASELINE, "main", max_lookups=120) is None
    assert len(gh.find_requests("GET", f"/repos/{REPO}/actions/runs/*/artifacts")) == 100
    assert len(gh.find_requests("GET", f"/repos/{REPO}/actions/runs")) == 3
    assert find_baseline(repo, BASELINE, "main", max_runs=200, max_lookups=200) is not None


def test_the_baseline_workflow_is_searched_alone_when_named(
    gh: GitHubServer, repo: Repository
) -> None:
    """Other workflows' runs on the default branch (CI on every push) take no lookups."""
    _, real = push_run(gh, 0)
    for h in range(1, 150):
        gh.add_workflow_run(
            REPO,
            event="push",
            head_branch="main",
            path=".github/workflows/ci.yml",
            created_at=T0 + timedelta(hours=h),
        )
    found = find_baseline(repo, BASELINE, "main", workflow_path=".github/workflows/evalgate.yml")
    assert found is not None and found.artifact_id == real.id
    listed = gh.find_requests("GET", f"/repos/{REPO}/actions/workflows/*/runs")
    assert sorted(r.query["event"][0] for r in listed) == ["push", "schedule", "workflow_dispatch"]
    assert len(gh.find_requests("GET", f"/repos/{REPO}/actions/runs/*/artifacts")) == 1
    # A workflow GitHub does not know (renamed in the PR): every workflow's runs are searched.
    assert find_baseline(repo, BASELINE, "main", workflow_path=".github/workflows/new.yml") is None
    assert (
        find_baseline(
            repo,
            BASELINE,
            "main",
            workflow_path=".github/workflows/new.yml",
            max_runs=200,
            max_lookups=200,
        )
        is not None
    )


def ref_for(gh: GitHubServer, art: Artifact) -> BaselineRef:
    run = gh.repo(REPO).runs[art.run_id]
    return BaselineRef(
        artifact_id=art.id,
        name=art.name,
        size_in_bytes=art.size,
        created_at=art.created_at,
        expires_at=art.expires_at,
        archive_download_url=f"{gh.url}/repos/{REPO}/actions/artifacts/{art.id}/zip",
        run_id=run.id,
        head_sha=run.head_sha,
        head_branch=run.head_branch or "",
        event=run.event,
        html_url=f"{gh.url}/{REPO}/actions/runs/{run.id}",
    )


def test_download_keeps_the_token_away_from_storage(
    gh: GitHubServer,
    repo: Repository,
    session: requests.Session,
    tmp_path: Path,
    make_run: Callable[..., Run],
) -> None:
    run = make_run()
    gh.add_artifact(REPO, BASELINE, files={"runs/baseline.json": run.model_dump_json()})
    ref = find_baseline(repo, BASELINE, "main")
    assert ref is not None
    # even a session that carries a token of its own must not hand it to the storage host
    session.headers["Authorization"] = f"token {gh.write_token}"

    folder = download_artifact(ref, gh.write_token, tmp_path / "dl", session)
    assert (folder / "runs" / "baseline.json").is_file()
    assert load_baseline_run(folder) == run
    assert [p.name for p in (tmp_path / "dl").iterdir()] == [folder.name]  # no leftovers

    [api] = gh.find_requests("GET", f"/repos/{REPO}/actions/artifacts/{ref.artifact_id}/zip")
    assert api.status == 302 and api.token == "write"
    [stored] = gh.find_requests(server="storage")
    assert stored.status == 200 and not stored.has_authorization

    # again, with a session of its own (closed afterwards), into the same place
    assert download_artifact(ref, gh.write_token, tmp_path / "dl") == folder


def test_download_sends_our_token_whatever_netrc_says(
    gh: GitHubServer,
    repo: Repository,
    tmp_path: Path,
    make_run: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ~/.netrc entry for the API host must not replace the token evalgate chose (requests
    reads netrc when a request has no auth of its own), nor reach the storage host."""
    netrc = tmp_path / "netrc"
    netrc.write_text(
        f"machine 127.0.0.1 login someone password {gh.read_token}\n"
        f"machine localhost login someone password {gh.read_token}\n",
        encoding="utf-8",
    )
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    gh.add_artifact(REPO, BASELINE, files={"runs/baseline.json": make_run().model_dump_json()})
    ref = find_baseline(repo, BASELINE, "main")
    assert ref is not None
    with requests.Session() as fresh:
        download_artifact(ref, gh.write_token, tmp_path / "dl", fresh)
    download_artifact(ref, gh.write_token, tmp_path / "dl2")
    calls = gh.find_requests("GET", f"/repos/{REPO}/actions/artifacts/{ref.artifact_id}/zip")
    assert [c.token for c in calls] == ["write", "write"]
    assert [c.has_authorization for c in gh.find_requests(server="storage")] == [False, False]


def test_expired_and_missing_artefacts(
    gh: GitHubServer, session: requests.Session, tmp_path: Path
) -> None:
    gone = gh.add_artifact(REPO, BASELINE, files={"a.json": "{}"}, expired=True)
    with pytest.raises(ArtifactExpiredError, match="expired") as caught:
        download_artifact(ref_for(gh, gone), gh.write_token, tmp_path, session)
    assert caught.value.status == 410 and "new baseline" in str(caught.value)

    missing = ref_for(gh, gone).model_copy(
        update={"archive_download_url": f"{gh.url}/repos/{REPO}/actions/artifacts/999/zip"}
    )
    with pytest.raises(GitHubError, match="404") as err:
        download_artifact(missing, gh.write_token, tmp_path, session)
    assert "actions: read" in str(err.value)
    assert list(tmp_path.iterdir()) == []
    assert gh.find_requests(server="storage") == []


def evil_zip(kind: str) -> bytes:
    if kind == "symlink":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            info = zipfile.ZipInfo("link.json")
            info.external_attr = (0o120777 << 16) | 0
            z.writestr(info, "/etc/passwd")
        return buf.getvalue()
    name = {"dotdot": "../escaped.json", "absolute": "/tmp/escaped.json"}.get(kind)
    if name is not None:
        return make_zip({"ok.json": "{}", name: "{}"})
    return b"this is not a zip"


@pytest.mark.parametrize("kind", ["dotdot", "absolute", "symlink", "garbage"])
def test_unsafe_archives_are_refused(
    gh: GitHubServer, session: requests.Session, tmp_path: Path, kind: str
) -> None:
    art = gh.add_artifact(REPO, BASELINE, data=evil_zip(kind))
    dest = tmp_path / "dest"
    with pytest.raises(GitHubError, match="refusing to extract"):
        download_artifact(ref_for(gh, art), gh.write_token, dest, session)
    assert list(dest.iterdir()) == [] and not (tmp_path / "escaped.json").exists()


def test_oversized_archives_are_refused(
    gh: GitHubServer, session: requests.Session, tmp_path: Path
) -> None:
    # highly compressible: a small download that would expand past the cap
    art = gh.add_artifact(REPO, BASELINE, files={"big.json": "0" * 100_000})
    with pytest.raises(GitHubError, match="limit"):
        download_artifact(ref_for(gh, art), gh.write_token, tmp_path, session, max_bytes=50_000)
    big = ref_for(gh, art).model_copy(update={"size_in_bytes": 10**12})
    with pytest.raises(GitHubError, match="limit"):
        download_artifact(big, gh.write_token, tmp_path, session)


def test_load_baseline_run_wants_exactly_one_run(
    tmp_path: Path, make_run: Callable[..., Run]
) -> None:
    with pytest.raises(RunFileError, match="no run file"):
        load_baseline_run(tmp_path)
    run = make_run()
    (tmp_path / "a.json").write_text(run.model_dump_json(), encoding="utf-8")
    (tmp_path / "summary.json").write_text('{"verdict": "pass"}', encoding="utf-8")
    assert load_baseline_run(tmp_path) == run
    (tmp_path / "b.json").write_text(run.model_dump_json(), encoding="utf-8")
    with pytest.raises(RunFileError, match="exactly one"):
        load_baseline_run(tmp_path)


# --------------------------------------------------------------------------- pull requests


def test_pull_request_info_and_merge_base(gh: GitHubServer, repo: Repository) -> None:
    fork_point = gh.branch_sha(REPO, "main")
    gh.add_commit(REPO, {"README.md": "moved on\n"}, branch="main")

    info = pull_request_info(repo, 7)
    assert (info.head_sha, info.base_sha) == (
        gh.branch_sha(REPO, "feature"),
        gh.branch_sha(REPO, "main"),
    )
    assert (info.head_repo, info.base_ref, info.is_fork) == (REPO, "main", False)
    assert info.changed_files == ["prompts/triage.txt"]
    assert merge_base(repo, info.base_ref, info.head_sha) == fork_point

    fork = pull_request_info(repo, 8)
    assert (fork.head_repo, fork.is_fork) == (FORK, True)
    assert merge_base(repo, "main", fork.head_sha) == fork_point
    assert merge_base(repo, "main", "0" * 40) is None


def test_changed_files_are_paginated(gh: GitHubServer, repo: Repository) -> None:
    files = [PullFile(f"cases/{i:03}.jsonl") for i in range(149)]
    files.append(PullFile("prompts/v2.txt", status="renamed", previous_filename="prompts/v1.txt"))
    gh.add_pull(REPO, head="feature", number=9, files=files)
    info = pull_request_info(repo, 9)
    assert len(info.changed_files) == 151 and info.changed_files[-2:] == [
        "prompts/v2.txt",
        "prompts/v1.txt",
    ]
    assert len(gh.find_requests("GET", "*/pulls/9/files")) == 2


# --------------------------------------------------------------------------- checks and statuses


def test_check_run_summary_is_cut_to_fit(gh: GitHubServer, repo: Repository) -> None:
    sha = gh.branch_sha(REPO, "feature") or ""
    url = create_check_run(repo, sha, "evalgate", "failure", "2 regressions", "s" * 100_000)
    [check] = gh.check_runs(REPO)
    assert check.summary is not None and len(check.summary) == CHECK_SUMMARY_MAX
    assert check.summary.endswith("(truncated: GitHub limits this text)")
    assert (check.status, check.conclusion, check.title) == (
        "completed",
        "failure",
        "2 regressions",
    )
    assert url.endswith(f"/runs/{check.id}")


def test_status_description_is_cut_to_140(gh: GitHubServer, repo: Repository) -> None:
    sha = gh.branch_sha(REPO, "feature") or ""
    gh.clear_requests()
    set_commit_status(repo, sha, "failure", "d" * 300, "evalgate/bike-shop", "https://x.test/r")
    [status] = gh.statuses(REPO, sha)
    assert status.description is not None and len(status.description) == 140
    assert status.description.endswith("…")
    assert (status.state, status.context, status.target_url) == (
        "failure",
        "evalgate/bike-shop",
        "https://x.test/r",
    )
    assert [r.method for r in gh.requests] == ["POST"]  # no GET of the commit first


# --------------------------------------------------------------------------- data branch


def test_data_branch_is_created_then_the_file_written_and_updated(
    gh: GitHubServer, repo: Repository
) -> None:
    path = "history/releases.jsonl"
    assert read_data_file(repo, DATA, path) is None
    main = gh.branch_sha(REPO, "main")

    first = write_data_file(repo, DATA, path, '{"release": 1}\n', "evalgate: release 1")
    assert first is not None and gh.branch_sha(REPO, DATA) == first
    assert gh.commits[first].parents == [main]  # the branch started at main's head
    assert read_data_file(repo, DATA, path) == '{"release": 1}\n'
    assert gh.file(REPO, path) is None  # main untouched
    assert len(gh.find_requests("POST", f"/repos/{REPO}/git/refs")) == 1

    second = write_data_file(
        repo, DATA, path, lambda old: (old or "") + '{"release": 2}\n', "evalgate: release 2"
    )
    assert second is not None and gh.commits[second].parents == [first]
    assert gh.file(REPO, path, DATA) == b'{"release": 1}\n{"release": 2}\n'
    assert len(gh.find_requests("POST", f"/repos/{REPO}/git/refs")) == 1

    puts = len(gh.find_requests("PUT"))
    assert write_data_file(repo, DATA, path, '{"release": 1}\n{"release": 2}\n', "same") is None
    assert len(gh.find_requests("PUT")) == puts


def test_data_write_survives_one_concurrent_writer(gh: GitHubServer, repo: Repository) -> None:
    path = "history/releases.jsonl"
    write_data_file(repo, DATA, path, "a\n", "first")
    seen: list[str | None] = []

    def append(old: str | None) -> str:
        seen.append(old)
        if len(seen) == 1:  # another job lands its write between our read and our write
            gh.add_commit(REPO, {path: "a\nb\n"}, branch=DATA)
        return (old or "") + "c\n"

    write_data_file(repo, DATA, path, append, "ours")
    assert seen == ["a\n", "a\nb\n"]
    assert gh.file(REPO, path, DATA) == b"a\nb\nc\n"
    assert [r.status for r in gh.find_requests("PUT")] == [201, 409, 200]

    gh.fail_next("PUT", f"/repos/{REPO}/contents/*", status=409, times=2)
    with pytest.raises(GitHubError, match="conflict"):
        write_data_file(repo, DATA, path, "d\n", "gives up after one retry")


def test_data_write_with_a_read_only_token(gh: GitHubServer, client: Connect) -> None:
    repo = get_repository(client(gh.read_token), REPO)
    with pytest.raises(GitHubError, match="contents: write") as caught:
        write_data_file(repo, DATA, "h.jsonl", "x\n", "m")
    assert caught.value.status == 403 and gh.branch_sha(REPO, DATA) is None


def test_an_artefact_without_an_expiry_date_counts_as_unexpired() -> None:
    # GitHub's description (artifact.expires_at: date-time, nullable) lets the date be null;
    # comparing it with now raised TypeError.
    from datetime import UTC, datetime, timedelta

    from github.Artifact import Artifact

    from evalgate.publish.github.artifacts import _unexpired

    now = datetime.now(UTC)

    def art(expires: str | None) -> Artifact:
        return Artifact(None, {}, {"id": 1, "name": "b", "expired": False, "expires_at": expires})  # type: ignore[arg-type]

    assert _unexpired(art(None), now)
    assert _unexpired(art((now + timedelta(days=1)).isoformat()), now)
    assert not _unexpired(art((now - timedelta(days=1)).isoformat()), now)
