"""Everything evalgate asks of GitHub: the PR comment, baseline artefacts, checks, the data branch.

The only module that imports PyGithub. Functions receive an already-built client or repository
(``connect`` is what the composition root calls to build one) and turn every GitHub failure
into a ``GitHubError`` that names the permission or setting that fixes it.

Retries are ours, not PyGithub's defaults: reads and idempotent writes (GET, PATCH, PUT) are
retried on 5xx; POSTs never are, because GitHub may have done the work before the gateway
failed and a repeat would post the comment twice. A rate-limit reset is waited for only when
it comes within ``max_rate_limit_wait`` seconds, so a CI job cannot hang until the next hour.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import re
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit

import requests
from github import Auth, Github, GithubException, GithubRetry
from github.Artifact import Artifact
from github.GithubException import (
    RateLimitExceededExceedsMaxWait,
    RateLimitExceededException,
    UnknownObjectException,
)
from github.Repository import Repository
from github.WorkflowRun import WorkflowRun
from pydantic import BaseModel, ConfigDict, ValidationError
from urllib3.response import BaseHTTPResponse

from evalgate import __version__
from evalgate.defaults import COMMENT_LIMIT
from evalgate.errors import RunFileError, UserError
from evalgate.runs.schema import Run, read_run

# GitHub's own limits (characters); longer input answers 422.
COMMENT_MAX = COMMENT_LIMIT
CHECK_SUMMARY_MAX = 65_535
STATUS_DESCRIPTION_MAX = 140

NOT_ACCESSIBLE = "Resource not accessible by integration"
API_VERSION = "2022-11-28"
TRUNCATED = "\n\n… (truncated: GitHub limits this text)"

# The permission each kind of call needs in the workflow's `permissions:` block.
PERM_PR_READ = "pull-requests: read"
PERM_PR_WRITE = "pull-requests: write"
PERM_ACTIONS_READ = "actions: read"
PERM_CONTENTS_READ = "contents: read"
PERM_CONTENTS_WRITE = "contents: write"
PERM_CHECKS_WRITE = "checks: write"
PERM_STATUSES_WRITE = "statuses: write"

# Methods safe to repeat after a 5xx: a repeated PATCH or PUT leaves the same state behind.
RETRY_METHODS = frozenset({"GET", "HEAD", "PATCH", "PUT"})
RETRY_STATUSES = (500, 502, 503, 504)


# --------------------------------------------------------------------------- errors


class GitHubError(UserError):
    """GitHub refused or failed a request; the message says what to change or to re-run."""

    def __init__(
        self,
        what: str,
        *,
        where: str | None = None,
        fix: str | None = None,
        status: int | None = None,
    ) -> None:
        self.status = status
        super().__init__(what, where=where, fix=fix)


class ArtifactExpiredError(GitHubError):
    """The artefact's retention ran out (410): make a new baseline."""


# --------------------------------------------------------------------------- client


class _BoundedRetry(GithubRetry):
    """GithubRetry whose ``Retry-After`` wait is capped like its rate-limit wait.

    urllib3 sleeps for any ``Retry-After`` a server sends (a 429 or a secondary rate limit);
    past the cap evalgate gives up with a clear error instead of idling the job.
    """

    def sleep_for_retry(self, response: BaseHTTPResponse) -> bool:
        after = self.get_retry_after(response)
        cap = self.max_rate_limit_wait
        if after is not None and cap is not None and after > cap:
            response.drain_conn()
            raise RateLimitExceededExceedsMaxWait(
                response.status, None, dict(response.headers), wait=after
            )
        return super().sleep_for_retry(response)


def make_retry(
    *,
    total: int = 3,
    backoff_factor: float = 1.0,
    max_rate_limit_wait: float = 60.0,
) -> GithubRetry:
    """Our retry policy: reads and idempotent writes only, bounded waits, never a POST."""
    return _BoundedRetry(
        total=total,
        backoff_factor=backoff_factor,
        backoff_max=30.0,
        status_forcelist=list(RETRY_STATUSES),
        allowed_methods=RETRY_METHODS,
        # Hand the last answer to PyGithub (a GithubException with GitHub's message) rather
        # than urllib3's MaxRetryError, which would escape as a bare requests.RetryError.
        raise_on_status=False,
        max_rate_limit_wait=max_rate_limit_wait,
        secondary_rate_wait=min(60.0, max_rate_limit_wait),
    )


def connect(
    token: str,
    api_url: str,
    *,
    timeout: int = 30,
    retry: GithubRetry | None = None,
) -> Github:
    """A PyGithub client for ``api_url`` (``GITHUB_API_URL``) with evalgate's settings.

    No client-side throttling (a CI job makes a few dozen requests), 100 items per page, and
    ``make_retry()`` unless another policy is given. The caller closes it.
    """
    return Github(
        auth=Auth.Token(token),
        base_url=api_url.rstrip("/"),
        timeout=timeout,
        user_agent=f"evalgate/{__version__}",
        per_page=100,
        retry=retry if retry is not None else make_retry(),
        seconds_between_requests=0,
        seconds_between_writes=0,
    )


def get_repository(client: Github, full_name: str) -> Repository:
    """The repository ``owner/name`` (one request)."""
    with _calling("read the repository", full_name, PERM_CONTENTS_READ):
        return client.get_repo(full_name)


# --------------------------------------------------------------------------- error mapping


def _lower_keys(headers: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers or {}).items()}


def _detail_messages(errors: Any) -> list[str]:
    """GitHub's ``errors[]``: dicts with a ``message`` (or field + code), or plain strings."""
    if not isinstance(errors, list):
        return []
    out = []
    for err in errors:
        if isinstance(err, dict):
            text = err.get("message") or " ".join(
                str(err[k]) for k in ("resource", "field", "code") if err.get(k)
            )
            if text:
                out.append(str(text))
        elif err:
            out.append(str(err))
    return out


def _reset_in(headers: dict[str, str]) -> float | None:
    value = headers.get("x-ratelimit-reset", "")
    if not value.isdigit():
        return None
    return max(0.0, int(value) - datetime.now(UTC).timestamp())


def _describe(
    action: str,
    where: str | None,
    permission: str | None,
    status: int,
    data: Any,
    headers: Mapping[str, Any] | None,
    *,
    rate_limited: bool = False,
    wait: float | None = None,
) -> GitHubError:
    """One GitHub failure as a GitHubError with what went wrong and how to fix it."""
    hdrs = _lower_keys(headers)
    message = ""
    details: list[str] = []
    if isinstance(data, dict):
        message = str(data.get("message") or "")
        details = _detail_messages(data.get("errors"))
    elif isinstance(data, bytes | str) and data:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        message = text.strip().splitlines()[0][:200] if text.strip() else ""
    said = f"{status} {message}".strip()
    grant = f"grant the workflow `permissions: {permission}`" if permission else ""

    lowered = message.lower()
    if rate_limited or (status in (403, 429) and "rate limit" in lowered):
        reset = _reset_in(hdrs)
        when = f"; it resets in {reset:.0f} s" if reset is not None else ""
        if wait is not None:
            when = f"{when or '; it resets later'}, longer than evalgate waits"
        return GitHubError(
            f"GitHub's API rate limit stopped evalgate from trying to {action} ({said}){when}",
            where=where,
            fix="re-run the job after the reset; GITHUB_TOKEN allows 1,000 requests an hour "
            "per repository, so fewer workflows calling the API at once also helps",
            status=status,
        )
    if status == 401:
        return GitHubError(
            f"GitHub rejected the token while trying to {action} ({said})",
            where=where,
            fix="pass a valid token, e.g. `github_token: ${{ secrets.GITHUB_TOKEN }}`; "
            "a personal token may have expired or been revoked",
            status=status,
        )
    if status == 403:
        accepted = hdrs.get("x-accepted-github-permissions")
        asks = f"; GitHub asks for: {accepted}" if accepted else ""
        fix = (
            f"pull requests from forks get a read-only token and no secrets, so evalgate "
            f"cannot {action} there; otherwise {grant or 'grant the workflow the permission'}"
            f"{asks}"
        )
        if message and message != NOT_ACCESSIBLE and "token" not in lowered:
            fix = f"{grant or 'check the token'}{asks}; then re-run the job"
        return GitHubError(
            f"GitHub refused to let evalgate {action} ({said})",
            where=where,
            fix=fix,
            status=status,
        )
    if status == 404:
        hint = f": {grant}" if grant else ""
        return GitHubError(
            f"GitHub found nothing to {action} ({said})",
            where=where,
            fix="check the repository, number or name; GitHub also answers 404 when the token "
            f"may not read a private repository{hint}",
            status=status,
        )
    if status == 409:
        return GitHubError(
            f"GitHub reported a conflict while trying to {action} ({said})",
            where=where,
            fix="another job changed the same thing at the same moment; re-run the job",
            status=status,
        )
    if status == 422:
        because = f": {'; '.join(details)}" if details else ""
        return GitHubError(
            f"GitHub rejected the request to {action} ({said}{because})",
            where=where,
            fix="this is most likely a bug in evalgate; please report it with this message",
            status=status,
        )
    if status >= 500:
        return GitHubError(
            f"GitHub failed to {action} ({said})",
            where=where,
            fix="a problem on GitHub's side: reads were retried, but writes are not, since a "
            "repeat could post twice; re-run the job, and see https://www.githubstatus.com if "
            "it persists",
            status=status,
        )
    return GitHubError(
        f"GitHub answered {said} when evalgate tried to {action}",
        where=where,
        fix=f"{grant}, or re-run the job" if grant else "re-run the job",
        status=status,
    )


def _from_exception(
    exc: GithubException, action: str, where: str | None, permission: str | None
) -> GitHubError:
    wait = exc.wait if isinstance(exc, RateLimitExceededExceedsMaxWait) else None
    return _describe(
        action,
        where,
        permission,
        exc.status,
        exc.data,
        exc.headers,
        rate_limited=isinstance(exc, RateLimitExceededException),
        wait=wait,
    )


@contextlib.contextmanager
def _calling(action: str, where: str | None, permission: str | None) -> Iterator[None]:
    """Translate PyGithub's and requests' exceptions raised inside into GitHubError."""
    try:
        yield
    except GithubException as exc:
        raise _from_exception(exc, action, where, permission) from exc
    except requests.RequestException as exc:
        raise GitHubError(
            f"cannot reach GitHub to {action}: {exc.__class__.__name__}: {exc}",
            where=where,
            fix="check GITHUB_API_URL and the runner's network, then re-run the job",
        ) from exc


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATED)] + TRUNCATED


# --------------------------------------------------------------------------- PR comment


def upsert_comment(
    repo: Repository,
    pr_number: int,
    body: str,
    marker: str,
    *,
    bots_only: bool = True,
) -> tuple[str, bool]:
    """Edit our comment on ``pr_number`` in place, or post it; return (its URL, created).

    Ours is the newest comment whose body contains ``marker`` (a hidden HTML comment such as
    ``<!-- evalgate:suite=NAME -->``), searched across every page; ``bots_only`` also requires
    a bot author (``GITHUB_TOKEN`` writes as ``github-actions[bot]``; pass False when running
    with a personal token). Older marked comments, e.g. from an earlier double post, are left
    alone. GitHub's ``/user`` cannot tell who we are (it answers 403 to the Actions token).
    """
    if marker not in body:
        raise ValueError(f"the comment body does not contain its marker {marker!r}")
    if len(body) > COMMENT_MAX:
        raise ValueError(
            f"comment body has {len(body):,} characters; GitHub accepts at most {COMMENT_MAX:,}"
        )
    where = f"{repo.full_name}#{pr_number}"
    with _calling("read the pull request's comments", where, PERM_PR_READ):
        issue = repo.get_issue(pr_number)
        ours = None
        for comment in issue.get_comments():
            if marker not in (comment.body or ""):
                continue
            if bots_only and (comment.user is None or comment.user.type != "Bot"):
                continue
            if ours is None or (comment.created_at, comment.id) >= (ours.created_at, ours.id):
                ours = comment
    if ours is not None:
        if ours.body == body:
            return ours.html_url, False
        with _calling("edit its pull-request comment", where, PERM_PR_WRITE):
            try:
                ours.edit(body)
                return ours.html_url, False
            except GithubException as exc:
                if exc.status != 404:  # deleted since we listed it: post a new one below
                    raise
    with _calling("comment on the pull request", where, PERM_PR_WRITE):
        created = issue.create_comment(body)
        return created.html_url, True


# --------------------------------------------------------------------------- baselines


class BaselineRef(BaseModel):
    """A baseline artefact made by a trusted run (a push, schedule or manual run on the default
    branch)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    artifact_id: int
    name: str
    size_in_bytes: int
    created_at: datetime
    expires_at: datetime
    archive_download_url: str
    run_id: int
    head_sha: str
    head_branch: str
    event: str
    html_url: str
    """The workflow run's page."""


# The events whose runs on the default branch may make a baseline: a push, the weekly
# schedule, a manual run. Never pull_request, pull_request_target or workflow_run: their code
# (or what they download) comes from a pull request.
BASELINE_EVENTS = ("push", "schedule", "workflow_dispatch")


def find_baseline(
    repo: Repository,
    name: str,
    default_branch: str,
    prefer_sha: str | None = None,
    *,
    events: Collection[str] = BASELINE_EVENTS,
    workflow_path: str | None = None,
    max_runs: int = 100,
    max_lookups: int = 30,
) -> BaselineRef | None:
    """The baseline artefact ``name`` to compare a pull request against, or None.

    Only an unexpired artefact made by a run of ``events`` on ``default_branch`` of this
    repository qualifies: pull-request runs upload artefacts under the same name, and one must
    not be able to plant its own baseline, nor hide the real one under a flood of decoys. So
    the workflow runs are listed, filtered by branch and event by GitHub (and checked again
    here), newest first, at most ``max_runs`` of each event, of the workflow ``workflow_path``
    (the one that makes baselines) when it is given; then the artefacts are looked up run by
    run, at most ``max_lookups`` runs, the run built from ``prefer_sha`` (the PR's merge base)
    first, then the newest.
    """
    where = f"{repo.full_name} artefacts named {name!r}"
    now = datetime.now(UTC)
    runs = _listed_runs(repo, default_branch, events, workflow_path, max_runs)
    runs = [run for run in runs if _trusted_run(repo, run, default_branch, events)]
    runs.sort(key=lambda run: (run.created_at, run.id), reverse=True)
    if prefer_sha is not None:
        runs.sort(key=lambda run: run.head_sha != prefer_sha)  # stable: newest first in each
    with _calling("list a workflow run's artefacts", where, PERM_ACTIONS_READ):
        for run in runs[:max_lookups]:
            for art in run.get_artifacts():
                if art.name == name and not art.expired and art.expires_at > now:
                    return _baseline_ref(art, run)
    return None


def _listed_runs(
    repo: Repository,
    branch: str,
    events: Collection[str],
    workflow_path: str | None,
    max_runs: int,
) -> list[WorkflowRun]:
    """The newest runs of each event on ``branch``: of the workflow ``workflow_path`` when it
    is given and known to GitHub (so other workflows' runs take no room), else of any."""
    where = f"{repo.full_name} workflow runs"
    with _calling("list the workflow runs", where, PERM_ACTIONS_READ):
        if workflow_path is not None:
            try:
                workflow = repo.get_workflow(workflow_path.rsplit("/", 1)[-1])  # fetches at once
                return [
                    run
                    for event in events
                    for run in itertools.islice(
                        workflow.get_runs(branch=branch, event=event), max_runs
                    )
                ]
            except UnknownObjectException:
                pass  # a workflow renamed or new in this PR: search every workflow's runs
        return [
            run
            for event in events
            for run in itertools.islice(
                repo.get_workflow_runs(branch=branch, event=event),  # type: ignore[arg-type]
                max_runs,
            )
        ]


def _trusted_run(
    repo: Repository, run: WorkflowRun, default_branch: str, events: Collection[str]
) -> bool:
    """Whether a run was made by the default branch of this repository, on a trusted event."""
    data: dict[str, Any] = run.raw_data
    head_repo = data.get("head_repository") or {}
    head_repo_id = head_repo.get("id", data.get("head_repository_id"))
    return (
        data.get("event") in events
        and data.get("head_branch") == default_branch
        and head_repo_id == repo.id
    )


def _baseline_ref(art: Artifact, run: WorkflowRun) -> BaselineRef:
    data: dict[str, Any] = run.raw_data
    return BaselineRef(
        artifact_id=art.id,
        name=art.name,
        size_in_bytes=art.size_in_bytes,
        created_at=art.created_at,
        expires_at=art.expires_at,
        archive_download_url=art.archive_download_url,
        run_id=data["id"],
        head_sha=data["head_sha"],
        head_branch=data["head_branch"],
        event=data["event"],
        html_url=data["html_url"],
    )


class _Bearer(requests.auth.AuthBase):
    """Exactly this token: an explicit auth, so requests never looks in ~/.netrc (which it
    does, and lets win over our header, when a request has no auth of its own)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers["Authorization"] = f"Bearer {self.token}"
        return r


class _NoAuthorization(requests.auth.AuthBase):
    """Send no credentials: drops any Authorization header and stops requests' .netrc lookup."""

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers.pop("Authorization", None)
        return r


def download_artifact(
    ref: BaselineRef,
    token: str,
    dest_dir: Path,
    session: requests.Session | None = None,
    *,
    max_bytes: int = 200 * 2**20,
    timeout: float = 60.0,
) -> Path:
    """Download and safely extract the artefact's zip; return the folder it was extracted to.

    The token goes to the API only: its answer is a redirect to a signed URL on a storage
    host, which refuses requests that carry ``Authorization``, so the second request is made
    without credentials (explicitly, not trusting requests to drop them). Both the download
    and the extracted content are capped at ``max_bytes``; members that would land outside
    the folder (absolute paths, ``..``, symbolic links) are refused.
    """
    where = f"artefact {ref.name!r} (id {ref.artifact_id}, run {ref.html_url})"
    if ref.size_in_bytes > max_bytes:
        raise GitHubError(
            f"the artefact is {ref.size_in_bytes:,} bytes, over the {max_bytes:,}-byte limit",
            where=where,
            fix="a baseline artefact should hold only the run file; check what the baseline "
            "job uploads",
        )
    own = session is None
    http = session if session is not None else requests.Session()
    dest_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".download-", dir=dest_dir))
    try:
        archive = work / "artifact.zip"
        _fetch_zip(http, ref, token, archive, max_bytes, timeout, where)
        extracted = work / "files"
        _safe_extract(archive, extracted, max_bytes, where)
        final = dest_dir / f"{re.sub(r'[^A-Za-z0-9._-]', '_', ref.name)}-{ref.artifact_id}"
        if final.exists():
            shutil.rmtree(final)
        extracted.rename(final)
        return final
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if own:
            http.close()


def _fetch_zip(
    http: requests.Session,
    ref: BaselineRef,
    token: str,
    archive: Path,
    max_bytes: int,
    timeout: float,
    where: str,
) -> None:
    action = "download the baseline artefact"
    api_headers = {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "User-Agent": f"evalgate/{__version__}",
    }
    with _calling(action, where, PERM_ACTIONS_READ):
        with http.get(
            ref.archive_download_url,
            headers=api_headers,
            auth=_Bearer(token),
            allow_redirects=False,
            stream=True,
            timeout=timeout,
        ) as first:
            if first.status_code == 200:  # served by the API itself (no storage host)
                _stream_to(first, archive, max_bytes, where)
                return
            if first.status_code not in (301, 302, 303, 307, 308):
                _raise_for_api(first, ref, where)
            location = first.headers.get("Location", "")
        if urlsplit(location).scheme not in ("http", "https"):
            raise GitHubError(
                f"GitHub redirected the download to an unusable address {location!r}",
                where=where,
                fix="re-run the job",
            )
        # The signed URL is its own credential. requests drops Authorization when a redirect
        # changes host, but the storage host refuses any Authorization and the token must
        # never leave the API: make a fresh request that carries none (nor .netrc's).
        with http.get(
            location,
            headers={
                "Authorization": None,  # None removes a header the session may carry
                "User-Agent": f"evalgate/{__version__}",
            },
            auth=_NoAuthorization(),
            allow_redirects=False,
            stream=True,
            timeout=timeout,
        ) as stored:
            if stored.status_code != 200:
                raise GitHubError(
                    f"the artefact storage host answered {stored.status_code} "
                    f"{stored.reason} to the download",
                    where=where,
                    fix="the signed download link may have expired; re-run the job",
                    status=stored.status_code,
                )
            _stream_to(stored, archive, max_bytes, where)


def _raise_for_api(response: requests.Response, ref: BaselineRef, where: str) -> NoReturn:
    try:
        data: Any = response.json()
    except ValueError:
        data = response.text
    if response.status_code == 410:
        said = data.get("message") if isinstance(data, dict) else None
        raise ArtifactExpiredError(
            f"the baseline artefact has expired (410 {said or 'Gone'})",
            where=where,
            fix="artefacts are kept for the repository's retention period (90 days by "
            "default); push to the default branch (or re-run its workflow) to make a new "
            "baseline, and keep release history on the data branch",
            status=410,
        )
    raise _describe(
        "download the baseline artefact",
        where,
        PERM_ACTIONS_READ,
        response.status_code,
        data,
        response.headers,
    )


def _stream_to(response: requests.Response, path: Path, max_bytes: int, where: str) -> None:
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        _too_big(max_bytes, where)
    written = 0
    with path.open("wb") as out:
        for chunk in response.iter_content(chunk_size=1 << 16):
            written += len(chunk)
            if written > max_bytes:
                _too_big(max_bytes, where)
            out.write(chunk)


def _too_big(max_bytes: int, where: str) -> NoReturn:
    raise GitHubError(
        f"the artefact is larger than the {max_bytes:,}-byte limit",
        where=where,
        fix="a baseline artefact should hold only the run file; check what the baseline job uploads",
    )


def _safe_extract(archive: Path, folder: Path, max_bytes: int, where: str) -> None:
    """Extract ``archive`` into ``folder``, refusing anything that could escape or explode."""

    def refuse(why: str) -> GitHubError:
        return GitHubError(
            f"refusing to extract the artefact: {why}",
            where=where,
            fix="evalgate's baseline job uploads plain files only; delete this artefact and "
            "re-run the baseline job",
        )

    folder.mkdir()
    root = folder.resolve()
    try:
        zf = zipfile.ZipFile(archive)
    except zipfile.BadZipFile as exc:
        raise refuse(f"not a zip archive ({exc})") from None
    with zf:
        members = zf.infolist()
        if len(members) > 10_000:
            raise refuse(f"{len(members):,} members")
        if sum(m.file_size for m in members) > max_bytes:
            raise refuse(f"its content is larger than the {max_bytes:,}-byte limit")
        for member in members:
            name = member.filename.replace("\\", "/")
            parts = PurePosixPath(name).parts
            if (
                not parts
                or name.startswith("/")
                or ".." in parts
                or ":" in parts[0]
                or "\x00" in name
            ):
                raise refuse(f"member {member.filename!r} would land outside the folder")
            if stat.S_ISLNK(member.external_attr >> 16):
                raise refuse(f"member {member.filename!r} is a symbolic link")
            target = root.joinpath(*parts)
            if not target.resolve().is_relative_to(root):
                raise refuse(f"member {member.filename!r} would land outside the folder")
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with zf.open(member) as src, target.open("wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 16)
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                raise refuse(f"member {member.filename!r} is damaged ({exc})") from None


def load_baseline_run(folder: Path) -> Run:
    """The single run file inside an extracted baseline artefact."""
    found = sorted(p for p in folder.rglob("*.json") if p.is_file())
    if not found:
        raise RunFileError(
            "the baseline artefact holds no run file (*.json)",
            where=str(folder),
            fix="make the baseline job upload the run file that `evalgate run` saves",
        )
    if len(found) == 1:
        return read_run(found[0])
    runs: list[tuple[Path, Run]] = []
    for path in found:
        try:
            runs.append((path, Run.model_validate_json(path.read_bytes())))
        except (ValidationError, OSError):
            continue
    if len(runs) == 1:
        return runs[0][1]
    names = ", ".join(str(p.relative_to(folder)) for p in found[:5])
    raise RunFileError(
        f"the baseline artefact holds {len(runs)} run files among {len(found)} JSON files "
        f"({names}); evalgate needs exactly one",
        where=str(folder),
        fix="upload one run file per baseline artefact",
    )


# --------------------------------------------------------------------------- pull requests


class PullInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    number: int
    title: str
    html_url: str
    head_sha: str
    head_ref: str
    head_repo: str | None
    """Full name of the repository the head branch lives in; None when the fork was deleted."""
    base_ref: str
    base_sha: str
    base_repo: str
    is_fork: bool
    changed_files: list[str]
    """Paths the pull request touches (both names of a renamed file)."""


def pull_request_info(repo: Repository, number: int) -> PullInfo:
    """Head, base and changed files of pull request ``number`` (1 + pages-of-100 requests)."""
    where = f"{repo.full_name}#{number}"
    with _calling("read the pull request", where, PERM_PR_READ):
        pr = repo.get_pull(number)
        paths: dict[str, None] = {}
        for f in pr.get_files():
            paths[f.filename] = None
            if f.previous_filename:
                paths[f.previous_filename] = None
        head_repo = pr.head.repo.full_name if pr.head.repo is not None else None
        return PullInfo(
            number=pr.number,
            title=pr.title,
            html_url=pr.html_url,
            head_sha=pr.head.sha,
            head_ref=pr.head.ref,
            head_repo=head_repo,
            base_ref=pr.base.ref,
            base_sha=pr.base.sha,
            base_repo=repo.full_name,
            is_fork=head_repo is None or head_repo.lower() != repo.full_name.lower(),
            changed_files=list(paths),
        )


def merge_base(repo: Repository, base_ref: str, head_sha: str) -> str | None:
    """The commit where ``head_sha`` left ``base_ref``, or None when they share no history."""
    where = f"{repo.full_name} {base_ref}...{head_sha}"
    with _calling("compare the pull request with its base", where, PERM_CONTENTS_READ):
        try:
            comparison = repo.compare(base_ref, head_sha, comparison_commits_per_page=1)
            return comparison.merge_base_commit.sha
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise


# --------------------------------------------------------------------------- checks and statuses

CheckConclusion = Literal[
    "success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required"
]
StatusState = Literal["error", "failure", "pending", "success"]


def create_check_run(
    repo: Repository,
    head_sha: str,
    name: str,
    conclusion: CheckConclusion,
    title: str,
    summary: str,
    *,
    details_url: str | None = None,
) -> str:
    """A completed check run on ``head_sha``; return its URL. The summary is cut to fit."""
    output: dict[str, str | list[dict[str, str | int]]] = {
        "title": title,
        "summary": _truncate(summary, CHECK_SUMMARY_MAX),
    }
    with _calling(f"create the check run {name!r}", repo.full_name, PERM_CHECKS_WRITE):
        if details_url is not None:
            check = repo.create_check_run(
                name, head_sha, conclusion=conclusion, output=output, details_url=details_url
            )
        else:
            check = repo.create_check_run(name, head_sha, conclusion=conclusion, output=output)
        return check.html_url


# GitHub takes at most 50 annotations a request; more go in later updates of the same run.
ANNOTATIONS_PER_REQUEST = 50
# More than this would bury the first ones: the rest are counted in the summary instead.
MAX_ANNOTATIONS = 200


def publish_check(
    repo: Repository,
    head_sha: str,
    name: str,
    conclusion: CheckConclusion,
    title: str,
    summary: str,
    annotations: list[dict[str, Any]],
    *,
    details_url: str | None = None,
) -> tuple[str, str | None]:
    """The verdict as a completed check run on ``head_sha``, with annotations batched 50 a
    request (capped at MAX_ANNOTATIONS, the rest counted). When the token may not write checks
    (403), a commit status of the same name instead. Returns (kind, url): kind is "check" or
    "status"."""
    shown = annotations[:MAX_ANNOTATIONS]
    if len(annotations) > len(shown):
        summary += f"\n\n{len(annotations) - len(shown)} more cases are not annotated."
    output: dict[str, Any] = {
        "title": _truncate(title, 1_000),
        "summary": _truncate(summary, CHECK_SUMMARY_MAX),
        "annotations": shown[:ANNOTATIONS_PER_REQUEST],
    }
    where = f"{repo.full_name}@{head_sha[:12]}"
    try:
        with _calling(f"create the check run {name!r}", where, PERM_CHECKS_WRITE):
            try:
                if details_url:
                    check = repo.create_check_run(
                        name,
                        head_sha,
                        status="completed",
                        conclusion=conclusion,
                        output=output,
                        details_url=details_url,
                    )
                else:
                    check = repo.create_check_run(
                        name, head_sha, status="completed", conclusion=conclusion, output=output
                    )
            except GithubException as exc:
                if exc.status == 403:
                    raise _NoChecks from None
                raise
            for start in range(ANNOTATIONS_PER_REQUEST, len(shown), ANNOTATIONS_PER_REQUEST):
                batch = shown[start : start + ANNOTATIONS_PER_REQUEST]
                check.edit(output={**output, "annotations": batch})
            return "check", str(check.html_url)
    except _NoChecks:
        # A commit status has no neutral: an inconclusive (neutral) verdict is "success" with
        # its title saying so, as the check run would count for branch protection.
        failed = conclusion in ("failure", "cancelled", "timed_out", "action_required")
        state: StatusState = "failure" if failed else "success"
        set_commit_status(repo, head_sha, state, title, name, details_url)
        return "status", None


class _NoChecks(Exception):
    """The token may not create check runs (no checks: write)."""


def set_commit_status(
    repo: Repository,
    sha: str,
    state: StatusState,
    description: str,
    context: str,
    target_url: str | None = None,
) -> None:
    """Set the commit status ``context`` on ``sha``; the description is cut to 140 characters."""
    if len(description) > STATUS_DESCRIPTION_MAX:
        description = description[: STATUS_DESCRIPTION_MAX - 1] + "…"
    payload = {"state": state, "description": description, "context": context}
    if target_url is not None:
        payload["target_url"] = target_url
    with _calling(f"set the commit status {context!r}", repo.full_name, PERM_STATUSES_WRITE):
        # POST statuses/{sha} directly: repo.get_commit() would cost a GET first.
        repo.requester.requestJsonAndCheck("POST", f"{repo.url}/statuses/{sha}", input=payload)


# --------------------------------------------------------------------------- data branch


def read_data_file(repo: Repository, branch: str, path: str) -> str | None:
    """The text of ``path`` on ``branch``, or None when the branch or the file does not exist."""
    found = _read_file(repo, branch, path)
    return None if found is None else found[0]


def _read_file(repo: Repository, branch: str, path: str) -> tuple[str, str] | None:
    where = f"{repo.full_name}@{branch}:{path}"
    with _calling("read the data branch", where, PERM_CONTENTS_READ):
        try:
            got = repo.get_contents(path, ref=branch)
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise
        if isinstance(got, list) or got.type != "file":
            raise GitHubError(
                "the data file's path is a folder on the data branch",
                where=where,
                fix="choose a file path for the release history",
            )
        if got.encoding == "none" or (got.size and not got.content):
            # Over 1 MB the contents API omits the content; the blob API returns it.
            blob = repo.get_git_blob(got.sha)
            data = base64.b64decode(blob.content)
        else:
            data = got.decoded_content
    try:
        return data.decode("utf-8"), got.sha
    except UnicodeDecodeError:
        raise GitHubError(
            "the data file is not UTF-8 text", where=where, fix="restore it from git history"
        ) from None


def write_data_file(
    repo: Repository,
    branch: str,
    path: str,
    content: str | Callable[[str | None], str],
    message: str,
) -> str | None:
    """Write ``path`` on ``branch`` (created from the default branch's head when missing).

    ``content`` is the new text, or a function from the current text (None when there is no
    file yet) to the new text, so that an append survives a concurrent writer: on a conflict
    (409, or 422 when the file appeared meanwhile) the file is re-read, ``content`` applied
    again and the write retried once. Return the new commit's SHA, or None when the file
    already held that text (no empty commit is made).
    """
    where = f"{repo.full_name}@{branch}:{path}"
    current = _read_file(repo, branch, path)
    if current is None and _ensure_branch(repo, branch):
        current = _read_file(repo, branch, path)  # the new branch holds the default's files
    for attempt in (1, 2):
        old_text, old_sha = current if current is not None else (None, None)
        new_text = content(old_text) if callable(content) else content
        if new_text == old_text:
            return None
        with _calling("write the data branch", where, PERM_CONTENTS_WRITE):
            try:
                if old_sha is None:
                    result = repo.create_file(path, message, new_text, branch=branch)
                else:
                    result = repo.update_file(path, message, new_text, old_sha, branch=branch)
                commit = result["commit"]
                return str(commit.sha)
            except GithubException as exc:
                conflict = exc.status == 409 or (exc.status == 422 and old_sha is None)
                if attempt == 2 or not conflict:
                    raise
        current = _read_file(repo, branch, path)
    raise AssertionError("unreachable")


def _ensure_branch(repo: Repository, branch: str) -> bool:
    """Create ``branch`` at the default branch's head unless it exists; True if created."""
    where = f"{repo.full_name} branch {branch!r}"
    with _calling("create the data branch", where, PERM_CONTENTS_WRITE):
        try:
            repo.get_git_ref(f"heads/{branch}")
            return False
        except GithubException as exc:
            if exc.status != 404:
                raise
        head = repo.get_git_ref(f"heads/{repo.default_branch}").object.sha
        try:
            repo.create_git_ref(f"refs/heads/{branch}", head)
        except GithubException as exc:
            # Another job created it between our look and our POST: fine.
            if not (exc.status == 422 and "already exists" in str(exc.data).lower()):
                raise
        return True


class ContentsTree:
    """One commit's files through the contents API (``GET .../contents/{path}?ref=SHA``), for a
    job whose checkout lacks the commit. Only the files asked for are fetched."""

    def __init__(self, repo: Repository, sha: str) -> None:
        self.repo = repo
        self.sha = sha

    def _get(self, path: str) -> Any:
        where = f"{self.repo.full_name}@{self.sha[:12]}:{path or '/'}"
        with _calling("read the base commit", where, PERM_CONTENTS_READ):
            try:
                return self.repo.get_contents(path, ref=self.sha)
            except GithubException as exc:
                if exc.status == 404:
                    return None
                raise

    def read(self, path: str) -> bytes | None:
        got = self._get(path)
        if got is None or isinstance(got, list) or got.type != "file":
            return None
        if got.encoding == "none" or (got.size and not got.content):
            return base64.b64decode(self.repo.get_git_blob(got.sha).content)
        data: bytes = got.decoded_content
        return data

    def list(self, folder: str) -> list[tuple[str, bool]]:
        got = self._get(folder)
        if not isinstance(got, list):
            return []
        return [(entry.name, entry.type == "dir") for entry in got]


def find_run_artifact(repo: Repository, run_id: int, name: str) -> BaselineRef | None:
    """The unexpired artefact ``name`` of workflow run ``run_id``, or None.

    For a fork's pull request: the run is untrusted, so what the artefact holds is data to
    check (see fork.py), never code to run.
    """
    where = f"{repo.full_name} run {run_id} artefact {name!r}"
    now = datetime.now(UTC)
    with _calling("list the run's artefacts", where, PERM_ACTIONS_READ):
        run = repo.get_workflow_run(run_id)
        for art in run.get_artifacts():
            if art.name != name or art.expired or art.expires_at <= now:
                continue
            return _baseline_ref(art, run)
    return None
