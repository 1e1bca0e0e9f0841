"""A loopback stand-in of the GitHub REST API, for tests of evalgate's GitHub client.

It answers real HTTP on 127.0.0.1 (port 0, a daemon thread) so that the real client stack
(PyGithub, ``requests``) runs unchanged against it, with the shapes and the awkward parts that
matter on real GitHub:

* every absolute URL in a response is built from the request's ``Host`` header and the prefix
  the request used (``/`` or ``/api/v3``), because PyGithub refuses URLs on another host, port
  or prefix;
* pagination as GitHub does it: ``per_page`` (default 30, max 100), ``page`` and a ``Link``
  header whose URLs point at ``/repositories/{id}/...``;
* the Actions token: comments it writes are by ``github-actions[bot]`` (type ``Bot``),
  ``GET /user`` answers 403 "Resource not accessible by integration", a read-only token (pull
  requests from forks) answers 403 to every write, a bad token 401 "Bad credentials";
* limits: a comment body over 65,536 characters, a status description over 140, a check-run
  summary or text over 65,535 characters or more than 50 annotations per request answer 422;
* artefacts: ``.../artifacts/{id}/zip`` answers 302 to a signed, short-lived URL on a second
  server (the storage host, another host name and port) which answers 403 to any request that
  carries an ``Authorization`` header; an expired artefact answers 410;
* ``x-ratelimit-*`` headers on every response, a rate-limited mode (403 "API rate limit
  exceeded ..." with ``x-ratelimit-remaining: 0`` and a reset time), and a queue of scripted
  faults (``fail_next``) so that retry settings can be tested;
* a request log (``requests``) without secrets, to assert what was sent where.

Usage::

    with GitHubServer() as gh:
        gh.add_repo("octo/widgets")
        gh.create_branch("octo/widgets", "feature")
        gh.add_commit("octo/widgets", {"prompts/a.txt": "new"}, branch="feature")
        gh.add_pull("octo/widgets", head="feature", number=7)
        client = Github(auth=Auth.Token(gh.write_token), base_url=gh.url, retry=None)
        ...
        assert gh.comments("octo/widgets", 7)[0].user == BOT_LOGIN

State lives in plain dataclasses (``Repo``, ``PullRequest``, ``IssueComment``, ``WorkflowRun``,
``Artifact``, ``Commit``, ...) which tests may seed through the ``add_*`` methods and read back;
hold ``server.lock`` when mutating them directly while requests may be in flight.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import fnmatch
import hashlib
import hmac
import io
import json
import math
import os
import re
import secrets
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, TypeVar, cast
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

__all__ = [
    "BOT_ID",
    "BOT_LOGIN",
    "NOT_ACCESSIBLE",
    "Artifact",
    "CheckRun",
    "Commit",
    "CommitStatus",
    "GitHubServer",
    "Issue",
    "IssueComment",
    "PullFile",
    "PullRequest",
    "RateLimit",
    "RecordedRequest",
    "Repo",
    "WorkflowRun",
    "blob_sha",
    "make_zip",
]

BOT_LOGIN = "github-actions[bot]"
BOT_ID = 41898282
NOT_ACCESSIBLE = "Resource not accessible by integration"
COMMENT_BODY_MAX = 65536
STATUS_DESCRIPTION_MAX = 140
CHECK_TEXT_MAX = 65535
CHECK_ANNOTATIONS_MAX = 50
DEFAULT_RETENTION = timedelta(days=90)

# "contents_read": the token of a same-repository pull-request job with the permissions the
# example workflow gives it (contents: read, pull-requests: write, checks: write, actions: read):
# every write but a contents one is allowed.
TokenKind = Literal["write", "read_only", "contents_read"]
JSON = dict[str, Any]
T = TypeVar("T")

_DOCS = "https://docs.github.com/rest"
_DOC_COMMENTS = f"{_DOCS}/issues/comments#create-an-issue-comment"
_DOC_UPDATE_COMMENT = f"{_DOCS}/issues/comments#update-an-issue-comment"
_DOC_ARTIFACTS = f"{_DOCS}/actions/artifacts#download-an-artifact"
_DOC_STATUSES = f"{_DOCS}/commits/statuses#create-a-commit-status"
_DOC_CHECKS = f"{_DOCS}/checks/runs#create-a-check-run"
_DOC_CONTENTS = f"{_DOCS}/repos/contents#create-or-update-file-contents"
_DOC_REFS = f"{_DOCS}/git/refs#create-a-reference"
_DOC_RATE = f"{_DOCS}/overview/rate-limits-for-the-rest-api"
_DOC_USER = f"{_DOCS}/users/users#get-the-authenticated-user"
_DOC_UA = (
    "Request forbidden by administrative rules. Please make sure your request has a User-Agent "
    "header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required)."
    " Check https://developer.github.com for other possible causes."
)
_REASONS = {
    400: "Bad Request",
    401: "Bad credentials",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    410: "Gone",
    422: "Validation Failed",
    429: "Too Many Requests",
    500: "Server Error",
    502: "Server Error",
    503: "Service Unavailable",
    504: "We couldn't respond to your request in time. Sorry about that. Please try resubmitting your request and contact us if the problem persists.",
}
_SECRET_HEADERS = {"authorization", "cookie", "proxy-authorization"}


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _ts(when: datetime | None) -> str | None:
    if when is None:
        return None
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _as_bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def blob_sha(data: bytes) -> str:
    """The git blob SHA of ``data`` (what GitHub reports as a file's ``sha``)."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def make_zip(files: Mapping[str, bytes | str]) -> bytes:
    """A zip archive holding ``files`` (name -> content), as an artefact's download."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, _as_bytes(content))
    return buf.getvalue()


def _user_id(login: str) -> int:
    if login == BOT_LOGIN:
        return BOT_ID
    return 1000 + zlib.crc32(login.encode("utf-8")) % 90_000_000


def _node_id(kind: str, ident: int | str) -> str:
    return base64.b64encode(f"0:{kind}{ident}".encode()).decode("ascii").rstrip("=")


def _user_links(url: str) -> JSON:
    """The hypermedia links of a user object (``simple-user``), under its API ``url``."""
    return {
        "url": url,
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
    }


# (field, what follows the repository's API URL) for every *_url of a repository object.
_REPO_LINKS = (
    ("archive_url", "/{archive_format}{/ref}"),
    ("assignees_url", "/assignees{/user}"),
    ("blobs_url", "/git/blobs{/sha}"),
    ("branches_url", "/branches{/branch}"),
    ("collaborators_url", "/collaborators{/collaborator}"),
    ("comments_url", "/comments{/number}"),
    ("commits_url", "/commits{/sha}"),
    ("compare_url", "/compare/{base}...{head}"),
    ("contents_url", "/contents/{+path}"),
    ("contributors_url", "/contributors"),
    ("deployments_url", "/deployments"),
    ("downloads_url", "/downloads"),
    ("events_url", "/events"),
    ("forks_url", "/forks"),
    ("git_commits_url", "/git/commits{/sha}"),
    ("git_refs_url", "/git/refs{/sha}"),
    ("git_tags_url", "/git/tags{/sha}"),
    ("hooks_url", "/hooks"),
    ("issue_comment_url", "/issues/comments{/number}"),
    ("issue_events_url", "/issues/events{/number}"),
    ("issues_url", "/issues{/number}"),
    ("keys_url", "/keys{/key_id}"),
    ("labels_url", "/labels{/name}"),
    ("languages_url", "/languages"),
    ("merges_url", "/merges"),
    ("milestones_url", "/milestones{/number}"),
    ("notifications_url", "/notifications{?since,all,participating}"),
    ("pulls_url", "/pulls{/number}"),
    ("releases_url", "/releases{/id}"),
    ("stargazers_url", "/stargazers"),
    ("statuses_url", "/statuses/{sha}"),
    ("subscribers_url", "/subscribers"),
    ("subscription_url", "/subscription"),
    ("tags_url", "/tags"),
    ("teams_url", "/teams"),
    ("trees_url", "/git/trees{/sha}"),
)


def _repo_links(api: str) -> JSON:
    """The hypermedia links of a repository object, under its API URL ``api``."""
    return {"url": api, **{name: f"{api}{tail}" for name, tail in _REPO_LINKS}}


def _unsigned() -> JSON:
    """A commit's ``verification`` when it carries no signature."""
    return {
        "verified": False,
        "reason": "unsigned",
        "signature": None,
        "payload": None,
        "verified_at": None,
    }


def _links(**hrefs: str) -> JSON:
    """A ``_links`` object: ``{"self": {"href": ...}, ...}``."""
    return {name: {"href": href} for name, href in hrefs.items()}


# --------------------------------------------------------------------------- state model


@dataclass
class Commit:
    """A commit in the (shared, fork-network-wide) object store: a full snapshot of files."""

    sha: str
    message: str
    parents: list[str]
    tree: dict[str, bytes]
    author: str = "octocat"
    date: datetime = field(default_factory=_now)


@dataclass
class PullFile:
    """One entry of ``GET /pulls/{n}/files`` (and of compare's ``files``)."""

    filename: str
    status: str = "modified"
    additions: int = 0
    deletions: int = 0
    patch: str | None = None
    previous_filename: str | None = None
    sha: str | None = None


@dataclass
class PullRequest:
    number: int
    title: str
    head_ref: str
    base_ref: str
    head_repo: str
    """Full name of the repository the head branch lives in (a fork for fork PRs)."""
    user: str = "octocat"
    body: str | None = None
    state: str = "open"
    draft: bool = False
    head_sha: str | None = None
    """Pinned head SHA; ``None`` follows the head branch as GitHub does."""
    base_sha: str | None = None
    """Pinned base SHA; ``None`` follows the base branch."""
    files: list[PullFile] | None = None
    """Changed files; ``None`` computes them from the merge base to the head."""
    created_at: datetime = field(default_factory=_now)
    updated_at: datetime = field(default_factory=_now)
    merge_commit_sha: str | None = None
    """Set when the pull request was merged (``merge_pull``): the commit the merge made."""
    closed_at: datetime | None = None
    """When it was last closed (merged or not); a comment afterwards moves only ``updated_at``."""


@dataclass
class Issue:
    number: int
    title: str
    user: str = "octocat"
    body: str | None = None
    state: str = "open"
    created_at: datetime = field(default_factory=_now)


@dataclass
class IssueComment:
    id: int
    issue_number: int
    body: str
    user: str
    user_type: str
    created_at: datetime
    updated_at: datetime


@dataclass
class WorkflowRun:
    id: int
    event: str
    head_branch: str | None
    head_sha: str
    head_repo: str
    status: str = "completed"
    conclusion: str | None = "success"
    name: str = "evalgate"
    path: str = ".github/workflows/evalgate.yml"
    run_number: int = 1
    run_attempt: int = 1
    actor: str = "octocat"
    pull_requests: list[int] = field(default_factory=list)
    created_at: datetime = field(default_factory=_now)
    updated_at: datetime = field(default_factory=_now)


def _workflow_id(path: str) -> int:
    """A workflow's id, stable for its file's path."""
    return 100_000 + zlib.crc32(path.encode()) % 100_000


@dataclass
class Artifact:
    id: int
    name: str
    data: bytes
    run_id: int
    head_branch: str | None
    head_sha: str
    head_repository_id: int
    created_at: datetime = field(default_factory=_now)
    expires_at: datetime = field(default_factory=lambda: _now() + DEFAULT_RETENTION)
    expired: bool = False
    size_in_bytes: int | None = None
    """Reported size; ``None`` reports ``len(data)``."""

    @property
    def size(self) -> int:
        return len(self.data) if self.size_in_bytes is None else self.size_in_bytes


@dataclass
class CommitStatus:
    id: int
    sha: str
    state: str
    context: str
    description: str | None
    target_url: str | None
    creator: str
    created_at: datetime
    updated_at: datetime


@dataclass
class CheckRun:
    id: int
    name: str
    head_sha: str
    status: str = "queued"
    conclusion: str | None = None
    details_url: str | None = None
    external_id: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    title: str | None = None
    summary: str | None = None
    text: str | None = None
    annotations: list[JSON] = field(default_factory=list)
    actions: list[JSON] = field(default_factory=list)
    requests: int = 1
    """How many create/update requests touched it."""
    app: str = "github-actions"
    """The slug of the GitHub App that made it (an Actions token's: github-actions)."""


@dataclass
class Repo:
    owner: str
    name: str
    id: int
    default_branch: str = "main"
    private: bool = False
    fork_of: str | None = None
    branches: dict[str, str] = field(default_factory=dict)
    pulls: dict[int, PullRequest] = field(default_factory=dict)
    issues: dict[int, Issue] = field(default_factory=dict)
    comments: dict[int, IssueComment] = field(default_factory=dict)
    runs: dict[int, WorkflowRun] = field(default_factory=dict)
    artifacts: dict[int, Artifact] = field(default_factory=dict)
    statuses: list[CommitStatus] = field(default_factory=list)
    check_runs: dict[int, CheckRun] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    """Lightweight tags: name -> commit SHA."""
    next_number: int = 1
    created_at: datetime = field(default_factory=_now)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class RateLimit:
    """One ``core`` bucket (``GITHUB_TOKEN``: 1,000 requests an hour per repository)."""

    limit: int = 1000
    remaining: int = 1000
    reset: int = 0
    used: int = 0

    def roll(self, now: float) -> None:
        if now >= self.reset:
            self.reset = int(now) + 3600
            self.remaining = self.limit
            self.used = 0


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it; secrets (``Authorization``) are redacted."""

    server: Literal["api", "storage"]
    method: str
    path: str
    """The path as sent, prefix included, query excluded."""
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    status: int
    token: str | None
    """``"write"``, ``"read_only"``, ``"contents_read"``, ``"invalid"``, or ``None`` when no
    credentials were sent."""
    forced: bool = False
    """Answered by an injected fault."""
    response_body: bytes = b""
    """What the stand-in answered (held against GitHub's description, github_openapi.py)."""

    @property
    def has_authorization(self) -> bool:
        return any(k.lower() == "authorization" for k in self.headers)

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class _Fault:
    server: str
    method: str
    path: str
    status: int
    times: int
    body: Any
    headers: dict[str, str]
    delay: float
    disconnect: bool
    effective: bool

    def matches(self, server: str, method: str, paths: tuple[str, ...]) -> bool:
        if self.server != server or self.method not in ("*", method):
            return False
        return any(p == self.path or fnmatch.fnmatchcase(p, self.path) for p in paths)


@dataclass
class _Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class _HTTPError(Exception):
    def __init__(
        self,
        status: int,
        message: str | None = None,
        *,
        doc: str = _DOCS,
        errors: list[JSON] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message or _REASONS.get(status, "Error")
        self.doc = doc
        self.errors = errors
        self.headers = headers or {}


def _validation(
    resource: str, field_: str, message: str, doc: str, code: str = "custom"
) -> _HTTPError:
    err: JSON = {"resource": resource, "code": code, "field": field_}
    if message:
        err["message"] = message
    return _HTTPError(422, "Validation Failed", doc=doc, errors=[err])


def _missing(name: str, doc: str) -> _HTTPError:
    return _HTTPError(422, f'Invalid request.\n\n"{name}" wasn\'t supplied.', doc=doc)


@dataclass
class _Ctx:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    api: str
    web: str
    host: str
    token: str | None

    def q(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def field(self, name: str) -> Any:
        return self.body.get(name) if isinstance(self.body, dict) else None


_Handler = Callable[[_Ctx, Repo | None, dict[str, str]], _Response]


@dataclass
class _Route:
    method: str
    pattern: re.Pattern[str]
    handler: _Handler
    permission: str | None = None


# --------------------------------------------------------------------------- HTTP plumbing


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, app: GitHubServer, role: Literal["api", "storage"]) -> None:
        self.app = app
        self.role: Literal["api", "storage"] = role
        super().__init__(("127.0.0.1", 0), _RequestHandler)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "GitHub.com"
    sys_version = ""
    timeout = 15
    wbufsize = 1 << 16  # one send for headers and body: no Nagle / delayed-ACK stall

    def setup(self) -> None:
        super().setup()
        app = cast(_HTTPServer, self.server).app
        with app.lock:
            app.open_connections += 1

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            app = cast(_HTTPServer, self.server).app
            with app.lock:
                app.open_connections -= 1

    def _dispatch(self) -> None:
        srv = cast(_HTTPServer, self.server)
        srv.app._serve(self, srv.role)

    do_GET = _dispatch
    do_HEAD = _dispatch
    do_POST = _dispatch
    do_PUT = _dispatch
    do_PATCH = _dispatch
    do_DELETE = _dispatch

    def log_message(self, format: str, *args: Any) -> None:
        return


def _json_response(status: int, data: Any, headers: dict[str, str] | None = None) -> _Response:
    body = json.dumps(data).encode("utf-8")
    return _Response(status, body, dict(headers or {}))


# --------------------------------------------------------------------------- the server


class GitHubServer:
    """The stand-in: an API server and a storage server, with their shared in-memory state.

    ``tokens`` maps token -> ``"write"``, ``"read_only"`` or ``"contents_read"``; by default
    ``write_token``, ``read_token`` and ``contents_read_token`` are registered. Anonymous
    requests may read public repositories (as on GitHub) unless ``allow_anonymous=False``;
    anonymous writes answer 401.
    """

    def __init__(
        self,
        *,
        write_token: str = "ghs_evalgateWriteToken0000000000000000",
        read_token: str = "ghs_evalgateReadOnlyToken000000000000",
        contents_read_token: str = "ghs_evalgateContentsReadToken0000000",
        rate_limit: int = 1000,
        allow_anonymous: bool = True,
        storage_hostname: str | None = None,
        signed_url_ttl: float = 60.0,
    ) -> None:
        self.write_token = write_token
        self.read_token = read_token
        self.contents_read_token = contents_read_token
        self.tokens: dict[str, TokenKind] = {
            write_token: "write",
            read_token: "read_only",
            contents_read_token: "contents_read",
        }
        self.allow_anonymous = allow_anonymous
        self.storage_hostname = storage_hostname
        self.signed_url_ttl = signed_url_ttl
        self.lock = threading.RLock()
        # Client connections the stand-in holds open now (HTTP/1.1 keep-alive, as GitHub's).
        self.open_connections = 0
        self.repos: dict[str, Repo] = {}
        self.commits: dict[str, Commit] = {}
        self.rate = RateLimit(limit=rate_limit, remaining=rate_limit)
        self.anonymous_rate = RateLimit(limit=60, remaining=60)
        self.rate_limit_status = 403
        self._faults: list[_Fault] = []
        self._log: list[RecordedRequest] = []
        self._ids: dict[str, int] = {}
        self._secret = secrets.token_bytes(16)
        self._api: _HTTPServer | None = None
        self._storage: _HTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._routes = self._build_routes()

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> GitHubServer:
        if self._api is not None:
            return self
        self._api = _HTTPServer(self, "api")
        self._storage = _HTTPServer(self, "storage")
        for httpd in (self._api, self._storage):
            thread = threading.Thread(
                target=httpd.serve_forever,
                kwargs={"poll_interval": 0.01},
                name=f"github-stand-in-{httpd.role}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)
        return self

    def close(self) -> None:
        for httpd in (self._api, self._storage):
            if httpd is not None:
                httpd.shutdown()
                httpd.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()
        self._api = self._storage = None

    def __enter__(self) -> GitHubServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        if exc_type is None:
            self.check_conformance()

    def check_conformance(self) -> None:
        """Every exchange held against GitHub's published REST description: a real endpoint
        and method, declared query parameters, a JSON request body its schema accepts, a
        declared status, and an answer body the response schema of that operation and status
        accepts (every field GitHub always sends, of the type it sends), when
        scripts/openapi-setup installed it (EVALGATE_OPENAPI=required: it must be there)."""
        from tests.support import github_openapi

        description = github_openapi.installed()
        if description is None:
            if os.environ.get("EVALGATE_OPENAPI") == "required":
                raise AssertionError(
                    "EVALGATE_OPENAPI=required, but GitHub's REST description is not at "
                    f"{github_openapi.description_path()} (run scripts/openapi-setup)"
                )
            return
        with self.lock:
            log = list(self._log)
        problems = description.all_problems(log)
        assert not problems, "the GitHub stand-in left GitHub's REST description:\n" + "\n".join(
            problems[:20]
        )

    @property
    def port(self) -> int:
        if self._api is None:
            raise RuntimeError("GitHubServer is not started: use it as a context manager")
        return int(self._api.server_address[1])

    @property
    def storage_port(self) -> int:
        if self._storage is None:
            raise RuntimeError("GitHubServer is not started: use it as a context manager")
        return int(self._storage.server_address[1])

    @property
    def url(self) -> str:
        """The API base URL, e.g. ``http://127.0.0.1:PORT`` (what ``GITHUB_API_URL`` holds)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def enterprise_url(self) -> str:
        """The same API under the GitHub Enterprise Server prefix ``/api/v3``."""
        return f"{self.url}/api/v3"

    # ----------------------------------------------------------------- seeding

    def _next_id(self, kind: str, start: int) -> int:
        value = self._ids.get(kind, start)
        self._ids[kind] = value + 1
        return value

    def _store_commit(
        self,
        tree: dict[str, bytes],
        parents: list[str],
        message: str,
        author: str,
        date: datetime | None,
    ) -> Commit:
        when = date or _now()
        serial = self._next_id("commit", 1)
        listing = "\n".join(f"{p}\x00{blob_sha(tree[p])}" for p in sorted(tree))
        payload = f"{listing}\n{parents}\n{message}\n{author}\n{when.isoformat()}\n{serial}"
        sha = hashlib.sha1(payload.encode("utf-8")).hexdigest()
        commit = Commit(
            sha=sha,
            message=message,
            parents=list(parents),
            tree=dict(tree),
            author=author,
            date=when,
        )
        self.commits[sha] = commit
        return commit

    def add_repo(
        self,
        full_name: str,
        *,
        id: int | None = None,
        default_branch: str = "main",
        private: bool = False,
        fork_of: str | None = None,
        files: Mapping[str, bytes | str] | None = None,
    ) -> Repo:
        """Add a repository with one commit on its default branch (a fork shares its parent's branches)."""
        owner, _, name = full_name.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"repository name must be owner/name: {full_name!r}")
        with self.lock:
            if full_name.lower() in self.repos:
                raise ValueError(f"repository exists: {full_name}")
            repo = Repo(
                owner=owner,
                name=name,
                id=id if id is not None else self._next_id("repo", 700_000_001),
                default_branch=default_branch,
                private=private,
                fork_of=fork_of,
            )
            if fork_of is not None and files is None:
                parent = self.repo(fork_of)
                repo.branches = dict(parent.branches)
                repo.default_branch = parent.default_branch
            else:
                tree = {k: _as_bytes(v) for k, v in (files or {"README.md": f"# {name}\n"}).items()}
                commit = self._store_commit(tree, [], "Initial commit", owner, None)
                repo.branches[default_branch] = commit.sha
            self.repos[full_name.lower()] = repo
            return repo

    def repo(self, full_name: str) -> Repo:
        """The repository ``owner/name`` (case-insensitive); KeyError when unknown."""
        with self.lock:
            return self.repos[full_name.lower()]

    def resolve(self, full_name: str, ref: str) -> str | None:
        """The commit SHA a branch name, a full SHA or an abbreviated SHA (7+) names."""
        with self.lock:
            repo = self.repo(full_name)
            if ref in repo.branches:
                return repo.branches[ref]
            if ref.startswith("refs/heads/") and ref[11:] in repo.branches:
                return repo.branches[ref[11:]]
            if ref in repo.tags:
                return repo.tags[ref]
            if ref.startswith("refs/tags/") and ref[10:] in repo.tags:
                return repo.tags[ref[10:]]
            if ref in self.commits:
                return ref
            if len(ref) >= 7 and re.fullmatch(r"[0-9a-f]+", ref):
                found = [sha for sha in self.commits if sha.startswith(ref)]
                if len(found) == 1:
                    return found[0]
            return None

    def add_commit(
        self,
        full_name: str,
        files: Mapping[str, bytes | str | None],
        *,
        branch: str | None = None,
        message: str = "Update files",
        parents: list[str] | None = None,
        author: str = "octocat",
        date: datetime | None = None,
    ) -> Commit:
        """Commit ``files`` (``None`` deletes a path) on ``branch`` and move the branch to it.

        A missing branch is created from the default branch. ``parents`` overrides the parent
        (the tree then starts from the first parent's).
        """
        with self.lock:
            repo = self.repo(full_name)
            branch = branch or repo.default_branch
            if parents is None:
                head = repo.branches.get(branch) or repo.branches[repo.default_branch]
                parents = [head]
            tree = dict(self.commits[parents[0]].tree) if parents else {}
            for path, content in files.items():
                if content is None:
                    tree.pop(path, None)
                else:
                    tree[path] = _as_bytes(content)
            commit = self._store_commit(tree, parents, message, author, date)
            repo.branches[branch] = commit.sha
            return commit

    def create_branch(self, full_name: str, name: str, from_ref: str | None = None) -> str:
        """Create (or move) branch ``name`` at ``from_ref`` (default: the default branch)."""
        return self._point(full_name, "branches", name, from_ref)

    def add_tag(self, full_name: str, name: str, ref: str | None = None) -> str:
        """Create (or move) the tag ``name`` at ``ref`` (default: the default branch's head)."""
        return self._point(full_name, "tags", name, ref)

    def _point(self, full_name: str, kind: str, name: str, ref: str | None) -> str:
        """Point the branch or tag (``kind``) ``name`` at ``ref``'s commit; its SHA."""
        with self.lock:
            repo = self.repo(full_name)
            sha = self.resolve(full_name, ref or repo.default_branch)
            if sha is None:
                raise KeyError(f"unknown ref {ref!r} in {full_name}")
            getattr(repo, kind)[name] = sha
            return sha

    def delete_tag(self, full_name: str, name: str) -> None:
        with self.lock:
            del self.repo(full_name).tags[name]

    def add_check_run(
        self,
        full_name: str,
        head_sha: str,
        name: str,
        *,
        app: str = "github-actions",
        title: str = "",
        summary: str = "",
        text: str | None = None,
        conclusion: str = "success",
    ) -> CheckRun:
        """A completed check run made by the GitHub App ``app`` (any app a token can act as)."""
        with self.lock:
            repo = self.repo(full_name)
            now = _now()
            run = CheckRun(
                id=self._next_id("check", 20_000_000_001),
                name=name,
                head_sha=head_sha,
                status="completed",
                conclusion=conclusion,
                started_at=now,
                completed_at=now,
                title=title,
                summary=summary,
                text=text,
                app=app,
            )
            repo.check_runs[run.id] = run
            return run

    def add_pull(
        self,
        full_name: str,
        *,
        head: str,
        base: str | None = None,
        head_repo: str | None = None,
        number: int | None = None,
        title: str = "Change prompts",
        user: str = "octocat",
        body: str | None = None,
        files: list[PullFile] | None = None,
        head_sha: str | None = None,
        base_sha: str | None = None,
        draft: bool = False,
        state: str = "open",
    ) -> PullRequest:
        """Open a pull request from ``head`` (in ``head_repo``, a fork, or this repository)."""
        with self.lock:
            repo = self.repo(full_name)
            source = self.repo(head_repo) if head_repo else repo
            if head_sha is None and head not in source.branches:
                raise KeyError(f"unknown head branch {head!r} in {source.full_name}")
            number = number if number is not None else repo.next_number
            if number in repo.pulls or number in repo.issues:
                raise ValueError(f"#{number} exists in {full_name}")
            repo.next_number = max(repo.next_number, number + 1)
            pr = PullRequest(
                number=number,
                title=title,
                head_ref=head,
                base_ref=base or repo.default_branch,
                head_repo=source.full_name,
                user=user,
                body=body,
                state=state,
                draft=draft,
                head_sha=head_sha,
                base_sha=base_sha,
                files=files,
            )
            repo.pulls[number] = pr
            return pr

    def merge_pull(self, full_name: str, number: int, sha: str) -> PullRequest:
        """Mark pull request ``number`` merged as commit ``sha`` (closed, merged_at now)."""
        with self.lock:
            pr = self.repo(full_name).pulls[number]
            pr.merge_commit_sha = sha
            pr.state = "closed"
            pr.updated_at = pr.closed_at = _now()
            return pr

    def close_pull(self, full_name: str, number: int, when: datetime | None = None) -> None:
        """Close pull request ``number`` without merging it (at ``when``, else now)."""
        with self.lock:
            pr = self.repo(full_name).pulls[number]
            pr.state = "closed"
            pr.updated_at = pr.closed_at = when or _now()

    def add_comment(
        self,
        full_name: str,
        number: int,
        body: str,
        *,
        user: str = "octocat",
        user_type: str | None = None,
        created_at: datetime | None = None,
        updated_at: datetime | None = None,
    ) -> IssueComment:
        """Seed a comment on issue or pull request ``number`` (no length check)."""
        with self.lock:
            repo = self.repo(full_name)
            if number not in repo.pulls and number not in repo.issues:
                raise KeyError(f"no issue or pull request #{number} in {full_name}")
            return self._new_comment(repo, number, body, user, user_type, created_at, updated_at)

    def _new_comment(
        self,
        repo: Repo,
        number: int,
        body: str,
        user: str,
        user_type: str | None,
        created_at: datetime | None = None,
        updated_at: datetime | None = None,
    ) -> IssueComment:
        created = created_at or _now()
        comment = IssueComment(
            id=self._next_id("comment", 2_000_000_001),
            issue_number=number,
            body=body,
            user=user,
            user_type=user_type or ("Bot" if user.endswith("[bot]") else "User"),
            created_at=created,
            updated_at=updated_at or created,
        )
        repo.comments[comment.id] = comment
        # As GitHub does: a comment moves its pull request's last update (and so its place in
        # a listing sorted by update), not when it was closed.
        pr = repo.pulls.get(number)
        if pr is not None:
            pr.updated_at = max(pr.updated_at, comment.created_at)
        return comment

    def add_workflow_run(
        self,
        full_name: str,
        *,
        event: str = "push",
        head_branch: str | None = None,
        head_sha: str | None = None,
        head_repo: str | None = None,
        status: str = "completed",
        conclusion: str | None = "success",
        created_at: datetime | None = None,
        name: str = "evalgate",
        path: str = ".github/workflows/evalgate.yml",
        id: int | None = None,
        actor: str = "octocat",
        pull_requests: list[int] | None = None,
    ) -> WorkflowRun:
        """Record a workflow run; ``head_sha`` defaults to ``head_branch``'s head in ``head_repo``.
        ``path`` is the workflow file's (another workflow's runs have another)."""
        with self.lock:
            repo = self.repo(full_name)
            source = self.repo(head_repo) if head_repo else repo
            branch = head_branch if head_branch is not None else repo.default_branch
            sha = head_sha or source.branches.get(branch)
            if sha is None:
                raise KeyError(f"unknown branch {branch!r} in {source.full_name}; pass head_sha")
            created = created_at or _now()
            run = WorkflowRun(
                id=id if id is not None else self._next_id("run", 9_000_000_001),
                event=event,
                head_branch=branch,
                head_sha=sha,
                head_repo=source.full_name,
                status=status,
                conclusion=conclusion if status == "completed" else None,
                name=name,
                path=path,
                run_number=len(repo.runs) + 1,
                actor=actor,
                pull_requests=list(pull_requests or []),
                created_at=created,
                updated_at=created,
            )
            repo.runs[run.id] = run
            return run

    def add_artifact(
        self,
        full_name: str,
        name: str,
        *,
        files: Mapping[str, bytes | str] | None = None,
        data: bytes | None = None,
        run: WorkflowRun | int | None = None,
        created_at: datetime | None = None,
        expires_at: datetime | None = None,
        expired: bool = False,
        size_in_bytes: int | None = None,
    ) -> Artifact:
        """Upload an artefact: ``files`` are zipped (or ``data`` is the zip itself).

        Without ``run`` a push run on the default branch is recorded for it. ``expired=True``
        with no ``expires_at`` puts the expiry a day in the past.
        """
        with self.lock:
            repo = self.repo(full_name)
            if run is None:
                run = self.add_workflow_run(full_name, created_at=created_at)
            elif isinstance(run, int):
                run = repo.runs[run]
            blob = data if data is not None else make_zip(files or {})
            created = created_at or run.created_at
            if expires_at is None:
                expires_at = _now() - timedelta(days=1) if expired else created + DEFAULT_RETENTION
            artifact = Artifact(
                id=self._next_id("artifact", 1_000_000_001),
                name=name,
                data=blob,
                run_id=run.id,
                head_branch=run.head_branch,
                head_sha=run.head_sha,
                head_repository_id=self.repo(run.head_repo).id,
                created_at=created,
                expires_at=expires_at,
                expired=expired,
                size_in_bytes=size_in_bytes,
            )
            repo.artifacts[artifact.id] = artifact
            return artifact

    def add_token(self, token: str, kind: TokenKind) -> None:
        with self.lock:
            self.tokens[token] = kind

    # ----------------------------------------------------------------- inspection

    def comments(self, full_name: str, number: int) -> list[IssueComment]:
        with self.lock:
            repo = self.repo(full_name)
            return sorted(
                (c for c in repo.comments.values() if c.issue_number == number), key=lambda c: c.id
            )

    def file(self, full_name: str, path: str, ref: str | None = None) -> bytes | None:
        """The content of ``path`` at ``ref`` (default branch by default), or None."""
        with self.lock:
            sha = self.resolve(full_name, ref or self.repo(full_name).default_branch)
            return None if sha is None else self.commits[sha].tree.get(path)

    def branch_sha(self, full_name: str, branch: str) -> str | None:
        with self.lock:
            return self.repo(full_name).branches.get(branch)

    def statuses(self, full_name: str, sha: str | None = None) -> list[CommitStatus]:
        with self.lock:
            return [s for s in self.repo(full_name).statuses if sha is None or s.sha == sha]

    def check_runs(self, full_name: str) -> list[CheckRun]:
        with self.lock:
            return sorted(self.repo(full_name).check_runs.values(), key=lambda c: c.id)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, oldest first (a copy)."""
        with self.lock:
            return list(self._log)

    def find_requests(
        self, method: str | None = None, path: str | None = None, *, server: str = "api"
    ) -> list[RecordedRequest]:
        """Requests to ``server`` with ``method`` whose path (prefix stripped) matches the glob ``path``."""
        out = []
        for r in self.requests:
            bare = r.path[7:] if r.path.startswith("/api/v3/") else r.path
            if r.server != server or (method is not None and r.method != method):
                continue
            if path is not None and not fnmatch.fnmatchcase(bare, path):
                continue
            out.append(r)
        return out

    def clear_requests(self) -> None:
        with self.lock:
            self._log.clear()

    # ----------------------------------------------------------------- fault injection

    def fail_next(
        self,
        method: str,
        path: str,
        *,
        status: int = 502,
        times: int = 1,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
        disconnect: bool = False,
        effective: bool = False,
        server: Literal["api", "storage"] = "api",
    ) -> None:
        """Answer the next ``times`` requests matching ``method`` (or ``"*"``) and ``path``.

        ``path`` is compared without the ``/api/v3`` prefix and the query, exactly or as a glob
        (``*``), against both the path as sent and its ``/repos/{owner}/{name}/...`` form. The
        answer is ``status`` with ``body`` (a JSON value, or str/bytes sent as is; default: a
        GitHub-shaped error), after ``delay`` seconds; ``disconnect`` closes the connection
        without answering. Faults apply before authentication and rate limiting, and the request
        has no effect, unless ``effective``: then it is served as usual (a comment is created, say)
        and only the answer is replaced, as when GitHub did the work but the gateway timed out.
        """
        with self.lock:
            self._faults.append(
                _Fault(
                    server=server,
                    method=method.upper(),
                    path=path,
                    status=status,
                    times=times,
                    body=body,
                    headers=dict(headers or {}),
                    delay=delay,
                    disconnect=disconnect,
                    effective=effective,
                )
            )

    @property
    def pending_faults(self) -> int:
        with self.lock:
            return sum(f.times for f in self._faults)

    def exhaust_rate_limit(self, *, reset_in: float = 3600.0, status: int = 403) -> None:
        """Use up the token bucket: requests answer ``status`` "API rate limit exceeded ..." until reset."""
        with self.lock:
            self.rate.used += self.rate.remaining
            self.rate.remaining = 0
            self.rate.reset = math.ceil(time.time() + reset_in)
            self.rate_limit_status = status

    def set_rate_limit(
        self,
        *,
        limit: int | None = None,
        remaining: int | None = None,
        reset_in: float | None = None,
    ) -> None:
        with self.lock:
            self.rate.roll(time.time())
            if limit is not None:
                self.rate.limit = limit
            if remaining is not None:
                self.rate.remaining = remaining
            if reset_in is not None:
                self.rate.reset = math.ceil(time.time() + reset_in)

    # ----------------------------------------------------------------- request handling

    def _serve(self, h: BaseHTTPRequestHandler, role: Literal["api", "storage"]) -> None:
        raw_body = _read_body(h)
        split = urlsplit(h.path)
        raw_path = split.path or "/"
        query = parse_qs(split.query, keep_blank_values=True)
        headers = {
            k: ("<redacted>" if k.lower() in _SECRET_HEADERS else v) for k, v in h.headers.items()
        }
        token = self._token_kind(h.headers.get("Authorization"))

        prefix = ""
        path = raw_path
        if role == "api" and (raw_path == "/api/v3" or raw_path.startswith("/api/v3/")):
            prefix, path = "/api/v3", raw_path[7:] or "/"
        canonical = self._canonical_path(path) if role == "api" else path

        with self.lock:
            fault = next(
                (f for f in self._faults if f.matches(role, h.command, (path, canonical))), None
            )
            if fault is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.remove(fault)

        def record(status: int, forced: bool = False, answer: bytes = b"") -> None:
            entry = RecordedRequest(
                role, h.command, raw_path, query, headers, raw_body, status, token, forced, answer
            )
            with self.lock:
                self._log.append(entry)

        if fault is not None and fault.delay > 0:
            time.sleep(fault.delay)
        response: _Response | None = None
        if fault is None or fault.effective:
            host = h.headers.get("Host") or f"127.0.0.1:{self.port}"
            if role == "storage":
                response = self._serve_storage(h, path, query)
            else:
                ctx = _Ctx(
                    method="GET" if h.command == "HEAD" else h.command,
                    path=canonical,
                    query=query,
                    body=None,
                    api=f"http://{host}{prefix}",
                    web=f"http://{host}",
                    host=host,
                    token=token,
                )
                response = self._serve_api(h, ctx, raw_body)
        if fault is not None:
            if fault.disconnect:
                record(0, forced=True)
                h.close_connection = True
                return
            response = self._fault_response(fault, role)
        assert response is not None
        record(response.status, forced=fault is not None, answer=response.body)
        self._write(h, response)

    def _write(self, h: BaseHTTPRequestHandler, response: _Response) -> None:
        h.send_response(response.status)
        for key, value in response.headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(response.body)))
        h.end_headers()
        if h.command != "HEAD" and response.body:
            h.wfile.write(response.body)

    def _token_kind(self, authorization: str | None) -> str | None:
        if not authorization:
            return None
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "basic":
            try:
                value = base64.b64decode(value).decode("utf-8").partition(":")[2]
            except (binascii.Error, UnicodeDecodeError):
                return "invalid"
        elif scheme.lower() not in ("token", "bearer"):
            return "invalid"
        with self.lock:
            return self.tokens.get(value, "invalid")

    def _canonical_path(self, path: str) -> str:
        m = re.match(r"^/repositories/(\d+)(/.*)?$", path)
        if m:
            with self.lock:
                for repo in self.repos.values():
                    if repo.id == int(m.group(1)):
                        return f"/repos/{repo.full_name}{m.group(2) or ''}"
        return path

    def _common_headers(self, token: str | None) -> dict[str, str]:
        bucket = self.anonymous_rate if token is None else self.rate
        return {
            "Content-Type": "application/json; charset=utf-8",
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Api-Version-Selected": "2022-11-28",
            "x-ratelimit-limit": str(bucket.limit),
            "x-ratelimit-remaining": str(max(bucket.remaining, 0)),
            "x-ratelimit-reset": str(bucket.reset),
            "x-ratelimit-used": str(bucket.used),
            "x-ratelimit-resource": "core",
            "X-GitHub-Request-Id": ":".join(secrets.token_hex(2).upper() for _ in range(4))
            + f":{secrets.token_hex(4).upper()}",
        }

    def _error_body(
        self, status: int, message: str, doc: str, errors: list[JSON] | None = None
    ) -> JSON:
        body: JSON = {"message": message, "documentation_url": doc, "status": str(status)}
        if errors is not None:
            body = {
                "message": message,
                "errors": errors,
                "documentation_url": doc,
                "status": str(status),
            }
        return body

    def _fault_response(self, fault: _Fault, role: str) -> _Response:
        headers = {} if role == "storage" else self._common_headers("fault")
        if fault.body is None:
            message = _REASONS.get(fault.status, "Error")
            body = json.dumps(self._error_body(fault.status, message, _DOCS)).encode()
        elif isinstance(fault.body, bytes | str):
            body = _as_bytes(fault.body)
            headers["Content-Type"] = "text/plain; charset=utf-8"
        else:
            body = json.dumps(fault.body).encode()
            headers["Content-Type"] = "application/json; charset=utf-8"
        headers.update(fault.headers)
        return _Response(fault.status, body, headers)

    def _serve_api(self, h: BaseHTTPRequestHandler, ctx: _Ctx, raw_body: bytes) -> _Response:
        with self.lock:
            now = time.time()
            bucket = self.anonymous_rate if ctx.token is None else self.rate
            bucket.roll(now)
            try:
                response = self._route(h, ctx, raw_body, bucket)
            except _HTTPError as err:
                response = _json_response(
                    err.status,
                    self._error_body(err.status, err.message, err.doc, err.errors),
                    err.headers,
                )
            headers = self._common_headers(ctx.token)
            headers.update(response.headers)
            response.headers = headers
            return response

    def _route(
        self, h: BaseHTTPRequestHandler, ctx: _Ctx, raw_body: bytes, bucket: RateLimit
    ) -> _Response:
        if not h.headers.get("User-Agent"):
            raise _HTTPError(403, _DOC_UA, doc=_DOCS)
        if ctx.token == "invalid":
            raise _HTTPError(401, "Bad credentials", doc=_DOCS)
        if ctx.token is None and not self.allow_anonymous:
            raise _HTTPError(401, "Requires authentication", doc=_DOCS)
        if ctx.path == "/rate_limit" and ctx.method == "GET":
            core = {
                "limit": bucket.limit,
                "remaining": bucket.remaining,
                "reset": bucket.reset,
                "used": bucket.used,
            }
            return _json_response(
                200, {"resources": {"core": {**core, "resource": "core"}}, "rate": core}
            )
        if bucket.remaining <= 0:
            raise _HTTPError(
                self.rate_limit_status if ctx.token is not None else 403,
                "API rate limit exceeded for installation ID 51234567. If you reach out to GitHub Support for help, "
                "please include the request ID.",
                doc=_DOC_RATE,
            )
        bucket.remaining -= 1
        bucket.used += 1
        if raw_body:
            try:
                ctx.body = json.loads(raw_body)
            except ValueError as err:
                raise _HTTPError(400, "Problems parsing JSON", doc=_DOCS) from err

        for route in self._routes:
            if route.method != ctx.method:
                continue
            m = route.pattern.match(ctx.path)
            if m is None:
                continue
            groups = {k: unquote(v) for k, v in m.groupdict().items() if v is not None}
            repo: Repo | None = None
            if "owner" in groups:
                repo = self.repos.get(f"{groups['owner']}/{groups['repo']}".lower())
                if repo is None or (repo.private and ctx.token is None):
                    raise _HTTPError(404, "Not Found")
            if ctx.method not in ("GET", "HEAD"):
                if ctx.token is None:
                    raise _HTTPError(401, "Requires authentication")
                refused = ctx.token == "read_only" or (
                    ctx.token == "contents_read"
                    and (route.permission or "").startswith("contents=")
                )
                if refused:
                    extra = (
                        {"x-accepted-github-permissions": route.permission}
                        if route.permission
                        else {}
                    )
                    raise _HTTPError(403, NOT_ACCESSIBLE, headers=extra)
            return route.handler(ctx, repo, groups)
        raise _HTTPError(404, "Not Found")

    # ----------------------------------------------------------------- storage host

    def _sign(self, artifact_id: int, expires: int) -> str:
        return hmac.new(
            self._secret, f"{artifact_id}:{expires}".encode(), hashlib.sha256
        ).hexdigest()[:32]

    def _serve_storage(
        self, h: BaseHTTPRequestHandler, path: str, query: dict[str, list[str]]
    ) -> _Response:
        def refuse(status: int, code: str, message: str) -> _Response:
            body = (
                f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
                f"<Message>{message}</Message></Error>"
            ).encode()
            return _Response(status, body, {"Content-Type": "application/xml"})

        if h.headers.get("Authorization"):
            return refuse(
                403,
                "InvalidAuthenticationInfo",
                "Authentication information is not given in the correct format. "
                "A signed URL must not be sent with an Authorization header.",
            )
        m = re.match(r"^/artifacts/(\d+)/[^/]+\.zip$", path)
        sig = (query.get("sig") or [""])[0]
        exp = (query.get("se") or ["0"])[0]
        if m is None or not exp.isdigit():
            return refuse(404, "BlobNotFound", "The specified blob does not exist.")
        artifact_id, expires = int(m.group(1)), int(exp)
        if not hmac.compare_digest(sig, self._sign(artifact_id, expires)):
            return refuse(403, "AuthenticationFailed", "Signature did not match.")
        if time.time() > expires:
            return refuse(403, "AuthenticationFailed", "Signed expiry time has passed.")
        with self.lock:
            found = next(
                (
                    r.artifacts[artifact_id]
                    for r in self.repos.values()
                    if artifact_id in r.artifacts
                ),
                None,
            )
        if found is None:
            return refuse(404, "BlobNotFound", "The specified blob does not exist.")
        return _Response(
            200,
            found.data,
            {
                "Content-Type": "application/zip",
                "Content-Disposition": f"attachment; filename={found.name}.zip",
                "x-ms-request-id": secrets.token_hex(8),
            },
        )

    # ----------------------------------------------------------------- JSON shapes

    def _user(self, c: _Ctx, login: str, type_: str | None = None) -> JSON:
        uid = _user_id(login)
        kind = type_ or ("Bot" if login.endswith("[bot]") else "User")
        html = f"{c.web}/apps/{login[:-5]}" if kind == "Bot" else f"{c.web}/{login}"
        return {
            "login": login,
            "id": uid,
            "node_id": _node_id("User", uid),
            "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4",
            "gravatar_id": "",
            "html_url": html,
            **_user_links(f"{c.api}/users/{quote(login)}"),
            "type": kind,
            "user_view_type": "public",
            "site_admin": False,
        }

    def _repo_json(self, c: _Ctx, repo: Repo, *, full: bool = False) -> JSON:
        """A repository object (``repository``; ``full``: ``full-repository``, what
        ``GET /repos/{owner}/{repo}`` answers, with a fork's parent and source)."""
        web = f"{c.web}/{repo.full_name}"
        host = urlsplit(c.web).netloc
        forks = sum(
            1 for r in self.repos.values() if (r.fork_of or "").lower() == repo.full_name.lower()
        )
        open_issues = sum(1 for p in repo.pulls.values() if p.state == "open") + sum(
            1 for i in repo.issues.values() if i.state == "open"
        )
        data: JSON = {
            **self._repo_ref(c, repo),
            "created_at": _ts(repo.created_at),
            "updated_at": _ts(repo.created_at),
            "pushed_at": _ts(repo.created_at),
            "git_url": f"git://{host}/{repo.full_name}.git",
            "ssh_url": f"git@{host}:{repo.full_name}.git",
            "clone_url": f"{web}.git",
            "svn_url": web,
            "mirror_url": None,
            "homepage": None,
            "language": None,
            "license": None,
            "size": sum(len(b) for b in self._branch_tree(repo).values()) // 1024,
            "forks": forks,
            "forks_count": forks,
            "stargazers_count": 0,
            "watchers": 0,
            "watchers_count": 0,
            "open_issues": open_issues,
            "open_issues_count": open_issues,
            "default_branch": repo.default_branch,
            "visibility": "private" if repo.private else "public",
            "archived": False,
            "disabled": False,
            "has_issues": True,
            "has_projects": True,
            "has_downloads": True,
            "has_wiki": True,
            "has_pages": False,
            "has_discussions": False,
            "is_template": False,
            "topics": [],
        }
        if full:
            data["network_count"] = forks
            data["subscribers_count"] = 1
            parent = self.repos.get(repo.fork_of.lower()) if repo.fork_of else None
            if parent is not None:
                data["parent"] = self._repo_json(c, parent)
                data["source"] = self._repo_json(c, parent)
        return data

    def _branch_tree(self, repo: Repo) -> Mapping[str, bytes]:
        commit = self.commits.get(repo.branches.get(repo.default_branch, ""))
        return commit.tree if commit is not None else {}

    def _repo_ref(self, c: _Ctx, repo: Repo) -> JSON:
        """The short repository object (``minimal-repository``) GitHub nests in workflow runs
        and combined statuses; the longer ones start with it."""
        return {
            "id": repo.id,
            "node_id": _node_id("Repository", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "private": repo.private,
            "owner": self._user(c, repo.owner),
            "html_url": f"{c.web}/{repo.full_name}",
            "description": None,
            "fork": repo.fork_of is not None,
            **_repo_links(f"{c.api}/repos/{repo.full_name}"),
        }

    def _git_commit_json(self, c: _Ctx, repo: Repo, commit: Commit) -> JSON:
        api = f"{c.api}/repos/{repo.full_name}"
        person = {
            "name": commit.author,
            "email": f"{commit.author}@users.noreply.github.com",
            "date": _ts(commit.date),
        }
        return {
            "sha": commit.sha,
            "node_id": _node_id("Commit", commit.sha),
            "url": f"{api}/git/commits/{commit.sha}",
            "html_url": f"{c.web}/{repo.full_name}/commit/{commit.sha}",
            "author": person,
            "committer": person,
            "message": commit.message,
            "tree": {
                "sha": self._tree_sha(commit),
                "url": f"{api}/git/trees/{self._tree_sha(commit)}",
            },
            "parents": [
                {
                    "sha": p,
                    "url": f"{api}/git/commits/{p}",
                    "html_url": f"{c.web}/{repo.full_name}/commit/{p}",
                }
                for p in commit.parents
            ],
            "verification": _unsigned(),
        }

    def _tree_sha(self, commit: Commit) -> str:
        listing = "\n".join(f"{p}\x00{blob_sha(commit.tree[p])}" for p in sorted(commit.tree))
        return hashlib.sha1(f"tree\n{listing}".encode()).hexdigest()

    def _commit_json(
        self, c: _Ctx, repo: Repo, commit: Commit, *, with_files: bool = False
    ) -> JSON:
        api = f"{c.api}/repos/{repo.full_name}"
        git = self._git_commit_json(c, repo, commit)
        data: JSON = {
            "sha": commit.sha,
            "node_id": git["node_id"],
            "url": f"{api}/commits/{commit.sha}",
            "html_url": git["html_url"],
            "comments_url": f"{api}/commits/{commit.sha}/comments",
            "commit": {
                "url": git["url"],
                "author": git["author"],
                "committer": git["committer"],
                "message": commit.message,
                "tree": git["tree"],
                "comment_count": 0,
                "verification": git["verification"],
            },
            "author": self._user(c, commit.author),
            "committer": self._user(c, commit.author),
            "parents": [
                {
                    "sha": p,
                    "url": f"{api}/commits/{p}",
                    "html_url": f"{c.web}/{repo.full_name}/commit/{p}",
                }
                for p in commit.parents
            ],
        }
        if with_files:
            old = self.commits[commit.parents[0]].tree if commit.parents else {}
            files = _diff_trees(old, commit.tree)
            adds, dels = sum(f.additions for f in files), sum(f.deletions for f in files)
            data["stats"] = {"total": adds + dels, "additions": adds, "deletions": dels}
            data["files"] = [self._file_json(c, repo, f, commit.sha) for f in files]
        return data

    def _file_json(self, c: _Ctx, repo: Repo, f: PullFile, ref: str) -> JSON:
        data: JSON = {
            "sha": f.sha or "0" * 40,
            "filename": f.filename,
            "status": f.status,
            "additions": f.additions,
            "deletions": f.deletions,
            "changes": f.additions + f.deletions,
            "blob_url": f"{c.web}/{repo.full_name}/blob/{ref}/{quote(f.filename)}",
            "raw_url": f"{c.web}/{repo.full_name}/raw/{ref}/{quote(f.filename)}",
            "contents_url": f"{c.api}/repos/{repo.full_name}/contents/{quote(f.filename)}?ref={ref}",
        }
        if f.patch is not None:
            data["patch"] = f.patch
        if f.previous_filename is not None:
            data["previous_filename"] = f.previous_filename
        return data

    def _pr_heads(self, repo: Repo, pr: PullRequest) -> tuple[Repo, str, str]:
        source = self.repos.get(pr.head_repo.lower(), repo)
        head = pr.head_sha or source.branches.get(pr.head_ref, "")
        base = pr.base_sha or repo.branches.get(pr.base_ref, "")
        return source, head, base

    def _pr_files(self, repo: Repo, pr: PullRequest) -> list[PullFile]:
        if pr.files is not None:
            return list(pr.files)
        _, head, base = self._pr_heads(repo, pr)
        if head not in self.commits or base not in self.commits:
            return []
        merge_base = self._merge_base(base, head)
        old = self.commits[merge_base].tree if merge_base else {}
        return _diff_trees(old, self.commits[head].tree)

    def _association(self, repo: Repo, login: str) -> str:
        if login.endswith("[bot]"):
            return "NONE"
        return "OWNER" if login.lower() == repo.owner.lower() else "CONTRIBUTOR"

    def _pr_json(self, c: _Ctx, repo: Repo, pr: PullRequest) -> JSON:
        api = f"{c.api}/repos/{repo.full_name}"
        source, head, base = self._pr_heads(repo, pr)
        files = self._pr_files(repo, pr)
        ahead = 0
        if head in self.commits and base in self.commits:
            ahead = len(set(self._ancestors(head)) - set(self._ancestors(base)))
        html = f"{c.web}/{repo.full_name}/pull/{pr.number}"
        pid = repo.id * 1000 + pr.number

        def part(r: Repo, ref: str, sha: str) -> JSON:
            return {
                "label": f"{r.owner}:{ref}",
                "ref": ref,
                "sha": sha,
                "user": self._user(c, r.owner),
                "repo": self._repo_json(c, r),
            }

        return {
            "url": f"{api}/pulls/{pr.number}",
            "id": pid,
            "node_id": _node_id("PullRequest", pid),
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": f"{api}/issues/{pr.number}",
            "commits_url": f"{api}/pulls/{pr.number}/commits",
            "review_comments_url": f"{api}/pulls/{pr.number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{pr.number}/comments",
            "statuses_url": f"{api}/statuses/{head}",
            "number": pr.number,
            "state": pr.state,
            "locked": False,
            "title": pr.title,
            "user": self._user(c, pr.user),
            "body": pr.body,
            "labels": [],
            "created_at": _ts(pr.created_at),
            "updated_at": _ts(pr.updated_at),
            "closed_at": _ts(pr.closed_at) if pr.state == "closed" else None,
            "merged_at": _ts(pr.closed_at) if pr.merge_commit_sha else None,
            "merge_commit_sha": pr.merge_commit_sha,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "milestone": None,
            "draft": pr.draft,
            "head": part(source, pr.head_ref, head),
            "base": part(repo, pr.base_ref, base),
            "author_association": self._association(repo, pr.user),
            "auto_merge": None,
            "merged": pr.merge_commit_sha is not None,
            "merged_by": None,
            "mergeable": None,
            "mergeable_state": "unknown",
            "comments": sum(1 for x in repo.comments.values() if x.issue_number == pr.number),
            "review_comments": 0,
            "maintainer_can_modify": False,
            "commits": ahead,
            "additions": sum(f.additions for f in files),
            "deletions": sum(f.deletions for f in files),
            "changed_files": len(files),
            "_links": _links(
                self=f"{api}/pulls/{pr.number}",
                html=html,
                issue=f"{api}/issues/{pr.number}",
                comments=f"{api}/issues/{pr.number}/comments",
                review_comments=f"{api}/pulls/{pr.number}/comments",
                review_comment=f"{api}/pulls/comments{{/number}}",
                commits=f"{api}/pulls/{pr.number}/commits",
                statuses=f"{api}/statuses/{head}",
            ),
        }

    def _issue_json(self, c: _Ctx, repo: Repo, number: int) -> JSON:
        api = f"{c.api}/repos/{repo.full_name}"
        pr = repo.pulls.get(number)
        issue = repo.issues.get(number)
        if pr is not None:
            title, user, body, state, created = pr.title, pr.user, pr.body, pr.state, pr.created_at
        elif issue is not None:
            title, user, body, state, created = (
                issue.title,
                issue.user,
                issue.body,
                issue.state,
                issue.created_at,
            )
        else:
            raise _HTTPError(404, "Not Found")
        kind = "pull" if pr is not None else "issues"
        iid = repo.id * 1000 + number + 500
        data: JSON = {
            "url": f"{api}/issues/{number}",
            "repository_url": api,
            "labels_url": f"{api}/issues/{number}/labels{{/name}}",
            "comments_url": f"{api}/issues/{number}/comments",
            "events_url": f"{api}/issues/{number}/events",
            "html_url": f"{c.web}/{repo.full_name}/{kind}/{number}",
            "id": iid,
            "node_id": _node_id("Issue", iid),
            "number": number,
            "title": title,
            "user": self._user(c, user),
            "labels": [],
            "state": state,
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "comments": sum(1 for x in repo.comments.values() if x.issue_number == number),
            "created_at": _ts(created),
            "updated_at": _ts(created),
            "closed_at": None,
            "author_association": self._association(repo, user),
            "body": body,
        }
        if pr is not None:
            html = f"{c.web}/{repo.full_name}/pull/{number}"
            data["pull_request"] = {
                "url": f"{api}/pulls/{number}",
                "html_url": html,
                "diff_url": f"{html}.diff",
                "patch_url": f"{html}.patch",
                "merged_at": None,
            }
        return data

    def _comment_json(self, c: _Ctx, repo: Repo, comment: IssueComment) -> JSON:
        api = f"{c.api}/repos/{repo.full_name}"
        kind = "pull" if comment.issue_number in repo.pulls else "issues"
        return {
            "url": f"{api}/issues/comments/{comment.id}",
            "html_url": f"{c.web}/{repo.full_name}/{kind}/{comment.issue_number}#issuecomment-{comment.id}",
            "issue_url": f"{api}/issues/{comment.issue_number}",
            "id": comment.id,
            "node_id": _node_id("IssueComment", comment.id),
            "user": self._user(c, comment.user, comment.user_type),
            "created_at": _ts(comment.created_at),
            "updated_at": _ts(comment.updated_at),
            "author_association": self._association(repo, comment.user),
            "body": comment.body,
            "reactions": {
                "url": f"{api}/issues/comments/{comment.id}/reactions",
                "total_count": 0,
                "+1": 0,
                "-1": 0,
                "laugh": 0,
                "hooray": 0,
                "confused": 0,
                "heart": 0,
                "rocket": 0,
                "eyes": 0,
            },
            "performed_via_github_app": None,
        }

    def _run_json(self, c: _Ctx, repo: Repo, run: WorkflowRun) -> JSON:
        api = f"{c.api}/repos/{repo.full_name}"
        head_repo = self.repos.get(run.head_repo.lower(), repo)
        commit = self.commits.get(run.head_sha)
        head_commit: JSON | None = None
        if commit is not None:
            person = {"name": commit.author, "email": f"{commit.author}@users.noreply.github.com"}
            head_commit = {
                "id": commit.sha,
                "tree_id": self._tree_sha(commit),
                "message": commit.message,
                "timestamp": _ts(commit.date),
                "author": person,
                "committer": person,
            }
        pulls = []
        for number in run.pull_requests:
            pr = repo.pulls.get(number)
            if pr is None:
                continue
            _, head, base = self._pr_heads(repo, pr)
            pulls.append(
                {
                    "url": f"{api}/pulls/{number}",
                    "id": repo.id * 1000 + number,
                    "number": number,
                    "head": {
                        "ref": pr.head_ref,
                        "sha": head,
                        "repo": {
                            "id": head_repo.id,
                            "url": f"{c.api}/repos/{head_repo.full_name}",
                            "name": head_repo.name,
                        },
                    },
                    "base": {
                        "ref": pr.base_ref,
                        "sha": base,
                        "repo": {"id": repo.id, "url": api, "name": repo.name},
                    },
                }
            )
        workflow_id = _workflow_id(run.path)
        return {
            "id": run.id,
            "name": run.name,
            "node_id": _node_id("WorkflowRun", run.id),
            "head_branch": run.head_branch,
            "head_sha": run.head_sha,
            "path": run.path,
            "display_title": commit.message.splitlines()[0]
            if commit and commit.message
            else run.name,
            "run_number": run.run_number,
            "event": run.event,
            "status": run.status,
            "conclusion": run.conclusion,
            "workflow_id": workflow_id,
            "check_suite_id": run.id + 1,
            "check_suite_node_id": _node_id("CheckSuite", run.id + 1),
            "url": f"{api}/actions/runs/{run.id}",
            "html_url": f"{c.web}/{repo.full_name}/actions/runs/{run.id}",
            "pull_requests": pulls,
            "created_at": _ts(run.created_at),
            "updated_at": _ts(run.updated_at),
            "actor": self._user(c, run.actor),
            "triggering_actor": self._user(c, run.actor),
            "run_attempt": run.run_attempt,
            "referenced_workflows": [],
            "run_started_at": _ts(run.created_at),
            "jobs_url": f"{api}/actions/runs/{run.id}/jobs",
            "logs_url": f"{api}/actions/runs/{run.id}/logs",
            "check_suite_url": f"{api}/check-suites/{run.id + 1}",
            "artifacts_url": f"{api}/actions/runs/{run.id}/artifacts",
            "cancel_url": f"{api}/actions/runs/{run.id}/cancel",
            "rerun_url": f"{api}/actions/runs/{run.id}/rerun",
            "previous_attempt_url": None,
            "workflow_url": f"{api}/actions/workflows/{workflow_id}",
            "head_commit": head_commit,
            "repository": self._repo_ref(c, repo),
            "head_repository": self._repo_ref(c, head_repo),
            "repository_id": repo.id,
            "head_repository_id": head_repo.id,
        }

    def _artifact_json(self, c: _Ctx, repo: Repo, art: Artifact) -> JSON:
        api = f"{c.api}/repos/{repo.full_name}"
        return {
            "id": art.id,
            "node_id": _node_id("Artifact", art.id),
            "name": art.name,
            "size_in_bytes": art.size,
            "url": f"{api}/actions/artifacts/{art.id}",
            "archive_download_url": f"{api}/actions/artifacts/{art.id}/zip",
            "expired": art.expired,
            "created_at": _ts(art.created_at),
            "updated_at": _ts(art.created_at),
            "expires_at": _ts(art.expires_at),
            "digest": "sha256:" + hashlib.sha256(art.data).hexdigest(),
            "workflow_run": {
                "id": art.run_id,
                "repository_id": repo.id,
                "head_repository_id": art.head_repository_id,
                "head_branch": art.head_branch,
                "head_sha": art.head_sha,
            },
        }

    def _status_json(self, c: _Ctx, repo: Repo, status: CommitStatus) -> JSON:
        return {
            "url": f"{c.api}/repos/{repo.full_name}/statuses/{status.sha}",
            "avatar_url": f"https://avatars.githubusercontent.com/u/{_user_id(status.creator)}?v=4",
            "id": status.id,
            "node_id": _node_id("StatusContext", status.id),
            "state": status.state,
            "description": status.description,
            "target_url": status.target_url,
            "context": status.context,
            "created_at": _ts(status.created_at),
            "updated_at": _ts(status.updated_at),
            "creator": self._user(c, status.creator),
        }

    def _check_json(self, c: _Ctx, repo: Repo, run: CheckRun) -> JSON:
        api = f"{c.api}/repos/{repo.full_name}"
        return {
            "id": run.id,
            "head_sha": run.head_sha,
            "node_id": _node_id("CheckRun", run.id),
            "external_id": run.external_id or "",
            "url": f"{api}/check-runs/{run.id}",
            "html_url": f"{c.web}/{repo.full_name}/runs/{run.id}",
            "details_url": run.details_url or f"{c.web}/{repo.full_name}/runs/{run.id}",
            "status": run.status,
            "conclusion": run.conclusion,
            "started_at": _ts(run.started_at),
            "completed_at": _ts(run.completed_at),
            "output": {
                "title": run.title,
                "summary": run.summary,
                "text": run.text,
                "annotations_count": len(run.annotations),
                "annotations_url": f"{api}/check-runs/{run.id}/annotations",
            },
            "name": run.name,
            "check_suite": {"id": run.id + 7},
            "app": self._app_json(c, run.app),
            "pull_requests": [],
        }

    def _app_json(self, c: _Ctx, slug: str) -> JSON:
        """A GitHub App: GitHub Actions (whose app an Actions token acts as) or another one."""
        if slug != "github-actions":
            ident = _user_id(slug)
            return {
                "id": ident,
                "slug": slug,
                "node_id": _node_id("Integration", ident),
                "name": slug,
                "description": None,
                "owner": self._user(c, slug, "Organization"),
                "external_url": f"https://{slug}.example",
                "html_url": f"{c.web}/apps/{slug}",
                "created_at": "2024-01-02T03:04:05Z",
                "updated_at": "2024-01-02T03:04:05Z",
                "permissions": {"checks": "write"},
                "events": [],
            }
        return {
            "id": 15368,
            "slug": "github-actions",
            "node_id": _node_id("Integration", 15368),
            "name": "GitHub Actions",
            "description": "Automate your workflow from idea to production",
            "owner": self._user(c, "github", "Organization"),
            "external_url": "https://help.github.com/en/actions",
            "html_url": f"{c.web}/apps/github-actions",
            "created_at": "2018-07-30T09:30:17Z",
            "updated_at": "2024-04-10T20:33:16Z",
            "permissions": {"checks": "write", "contents": "write", "pull_requests": "write"},
            "events": ["check_run", "check_suite", "pull_request", "push"],
        }

    def _content_json(self, c: _Ctx, repo: Repo, path: str, ref: str, data: bytes | None) -> JSON:
        api = f"{c.api}/repos/{repo.full_name}"
        url = f"{api}/contents/{quote(path)}?ref={quote(ref, safe='')}"
        kind = "dir" if data is None else "file"
        sha = (
            blob_sha(data) if data is not None else hashlib.sha1(f"dir:{path}".encode()).hexdigest()
        )
        html = f"{c.web}/{repo.full_name}/{'tree' if data is None else 'blob'}/{ref}/{path}"
        out: JSON = {
            "type": kind,
            "size": len(data) if data is not None else 0,
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "sha": sha,
            "url": url,
            "git_url": f"{api}/git/{'trees' if data is None else 'blobs'}/{sha}",
            "html_url": html,
            "download_url": None
            if data is None
            else f"{c.web}/{repo.full_name}/raw/{ref}/{quote(path)}",
            "_links": {"self": url, "git": f"{api}/git/blobs/{sha}", "html": html},
        }
        return out

    def _ref_json(self, c: _Ctx, repo: Repo, branch: str, sha: str) -> JSON:
        api = f"{c.api}/repos/{repo.full_name}"
        return {
            "ref": f"refs/heads/{branch}",
            "node_id": _node_id("Ref", f"{repo.id}:{branch}"),
            "url": f"{api}/git/refs/heads/{quote(branch)}",
            "object": {"sha": sha, "type": "commit", "url": f"{api}/git/commits/{sha}"},
        }

    # ----------------------------------------------------------------- git helpers

    def _ancestors(self, sha: str) -> list[str]:
        """``sha`` and its ancestors, breadth first."""
        seen: dict[str, None] = {}
        queue = [sha]
        while queue:
            current = queue.pop(0)
            if current in seen or current not in self.commits:
                continue
            seen[current] = None
            queue.extend(self.commits[current].parents)
        return list(seen)

    def _merge_base(self, a: str, b: str) -> str | None:
        ancestors_a = set(self._ancestors(a))
        return next((s for s in self._ancestors(b) if s in ancestors_a), None)

    def _resolve_compare_ref(self, repo: Repo, ref: str) -> str | None:
        if ":" in ref:
            owner, _, branch = ref.partition(":")
            if ":" in branch:
                name, _, branch = branch.partition(":")
                found = self.repos.get(f"{owner}/{name}".lower())
                candidates = [found] if found is not None else []
            else:
                candidates = [r for r in self.repos.values() if r.owner.lower() == owner.lower()]
                candidates.sort(key=lambda r: (r.name != repo.name, r.fork_of is None))
            for cand in candidates:
                if branch in cand.branches:
                    return cand.branches[branch]
            return None
        return self.resolve(repo.full_name, ref)

    # ----------------------------------------------------------------- pagination

    def _paginate(
        self, c: _Ctx, items: list[T], link_path: str, *, default: int = 30, maximum: int = 100
    ) -> tuple[list[T], dict[str, str]]:
        per_page = _int(c.q("per_page"), default)
        per_page = min(max(per_page, 1), maximum)
        page = max(_int(c.q("page"), 1), 1)
        last = max(1, math.ceil(len(items) / per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        keep = [(k, v) for k, values in c.query.items() if k != "page" for v in values]

        def url(n: int) -> str:
            return f"{c.api}{link_path}?{urlencode([*keep, ('page', n)])}"

        links = []
        if page > 1:
            links.append(f'<{url(min(page - 1, last))}>; rel="prev"')
        if page < last:
            links.append(f'<{url(page + 1)}>; rel="next"')
            links.append(f'<{url(last)}>; rel="last"')
        if page > 1:
            links.append(f'<{url(1)}>; rel="first"')
        return chunk, ({"Link": ", ".join(links)} if links else {})

    # ----------------------------------------------------------------- routes

    def _build_routes(self) -> list[_Route]:
        r = r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        table: list[tuple[str, str, _Handler, str | None]] = [
            ("GET", r"^/user$", self._h_user, None),
            ("GET", rf"{r}$", self._h_repo, None),
            ("GET", rf"{r}/pulls$", self._h_list_pulls, None),
            ("GET", rf"{r}/pulls/(?P<number>\d+)$", self._h_pull, None),
            ("GET", rf"{r}/pulls/(?P<number>\d+)/files$", self._h_pull_files, None),
            ("GET", rf"{r}/issues/comments/(?P<id>\d+)$", self._h_get_comment, None),
            (
                "PATCH",
                rf"{r}/issues/comments/(?P<id>\d+)$",
                self._h_edit_comment,
                "issues=write; pull_requests=write",
            ),
            (
                "DELETE",
                rf"{r}/issues/comments/(?P<id>\d+)$",
                self._h_delete_comment,
                "issues=write; pull_requests=write",
            ),
            ("GET", rf"{r}/issues/(?P<number>\d+)$", self._h_issue, None),
            ("GET", rf"{r}/issues/(?P<number>\d+)/comments$", self._h_list_comments, None),
            (
                "POST",
                rf"{r}/issues/(?P<number>\d+)/comments$",
                self._h_create_comment,
                "issues=write; pull_requests=write",
            ),
            ("GET", rf"{r}/actions/artifacts$", self._h_artifacts, None),
            ("GET", rf"{r}/actions/artifacts/(?P<id>\d+)$", self._h_artifact, None),
            (
                "GET",
                rf"{r}/actions/artifacts/(?P<id>\d+)/(?P<format>[^/]+)$",
                self._h_artifact_download,
                None,
            ),
            ("GET", rf"{r}/actions/runs$", self._h_runs, None),
            ("GET", rf"{r}/actions/workflows/(?P<id>[^/]+)$", self._h_workflow, None),
            ("GET", rf"{r}/actions/workflows/(?P<id>[^/]+)/runs$", self._h_workflow_runs, None),
            ("GET", rf"{r}/actions/runs/(?P<id>\d+)$", self._h_run, None),
            ("GET", rf"{r}/actions/runs/(?P<id>\d+)/artifacts$", self._h_run_artifacts, None),
            ("GET", rf"{r}/compare/(?P<basehead>.+)$", self._h_compare, None),
            ("GET", rf"{r}/commits/(?P<ref>[^/]+)$", self._h_commit, None),
            ("GET", rf"{r}/commits/(?P<ref>[^/]+)/pulls$", self._h_commit_pulls, None),
            ("GET", rf"{r}/commits/(?P<ref>[^/]+)/statuses$", self._h_commit_statuses, None),
            ("GET", rf"{r}/commits/(?P<ref>[^/]+)/status$", self._h_combined_status, None),
            ("GET", rf"{r}/commits/(?P<ref>[^/]+)/check-runs$", self._h_commit_check_runs, None),
            ("POST", rf"{r}/statuses/(?P<sha>[^/]+)$", self._h_create_status, "statuses=write"),
            ("POST", rf"{r}/check-runs$", self._h_create_check, "checks=write"),
            ("GET", rf"{r}/check-runs/(?P<id>\d+)$", self._h_get_check, None),
            ("PATCH", rf"{r}/check-runs/(?P<id>\d+)$", self._h_update_check, "checks=write"),
            ("GET", rf"{r}/contents(?:/(?P<path>.*))?$", self._h_get_contents, None),
            ("PUT", rf"{r}/contents/(?P<path>.+)$", self._h_put_contents, "contents=write"),
            ("GET", rf"{r}/git/trees/(?P<sha>.+)$", self._h_get_tree, None),
            ("GET", rf"{r}/git/ref/heads/(?P<branch>.+)$", self._h_get_ref, None),
            ("GET", rf"{r}/git/refs/heads/(?P<branch>.+)$", self._h_get_refs, None),
            ("POST", rf"{r}/git/refs$", self._h_create_ref, "contents=write"),
            ("PATCH", rf"{r}/git/refs/heads/(?P<branch>.+)$", self._h_update_ref, "contents=write"),
            ("GET", rf"{r}/branches/(?P<branch>.+)$", self._h_branch, None),
            ("GET", rf"{r}/tags$", self._h_tags, None),
        ]
        return [
            _Route(method, re.compile(pattern), handler, perm)
            for method, pattern, handler, perm in table
        ]

    @staticmethod
    def _need(repo: Repo | None) -> Repo:
        if repo is None:
            raise _HTTPError(404, "Not Found")
        return repo

    def _h_user(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        if c.token is None:
            raise _HTTPError(401, "Requires authentication", doc=_DOC_USER)
        raise _HTTPError(403, NOT_ACCESSIBLE, doc=_DOC_USER)

    def _h_repo(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        return _json_response(200, self._repo_json(c, self._need(repo), full=True))

    def _h_pull(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        pr = repo.pulls.get(int(g["number"]))
        if pr is None:
            raise _HTTPError(404, "Not Found")
        return _json_response(200, self._pr_json(c, repo, pr))

    def _h_list_pulls(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        """``GET /pulls``: ``state`` open (the default), closed or all; ``sort`` created (the
        default) or updated (popularity and long-running are not modelled); ``direction`` desc
        by default for those two, as GitHub has it."""
        repo = self._need(repo)
        state = c.q("state") or "open"
        sort = c.q("sort") or "created"
        direction = c.q("direction") or "desc"
        if state not in ("open", "closed", "all") or sort not in ("created", "updated"):
            raise _HTTPError(422, "Validation Failed")
        if direction not in ("asc", "desc"):
            raise _HTTPError(422, "Validation Failed")
        found = [p for p in repo.pulls.values() if state == "all" or p.state == state]
        found.sort(
            key=lambda p: (p.created_at if sort == "created" else p.updated_at, p.number),
            reverse=direction == "desc",
        )
        items, links = self._paginate(
            c, [self._pr_json(c, repo, pr) for pr in found], f"/repos/{repo.full_name}/pulls"
        )
        return _json_response(200, items, links)

    def _h_commit_pulls(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        """The pull requests associated with a commit: those merged as it, and the open ones
        whose head it is (GitHub also lists open ones that contain it)."""
        repo = self._need(repo)
        sha = g["ref"]
        found = [
            pr
            for pr in sorted(repo.pulls.values(), key=lambda p: p.number)
            if pr.merge_commit_sha == sha
            or (pr.state == "open" and self._pr_heads(repo, pr)[1] == sha)
        ]
        items, links = self._paginate(
            c,
            [self._pr_json(c, repo, pr) for pr in found],
            f"/repos/{repo.full_name}/commits/{sha}/pulls",
        )
        return _json_response(200, items, links)

    def _h_pull_files(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        pr = repo.pulls.get(int(g["number"]))
        if pr is None:
            raise _HTTPError(404, "Not Found")
        _, head, _ = self._pr_heads(repo, pr)
        files, links = self._paginate(
            c, self._pr_files(repo, pr), f"/repositories/{repo.id}/pulls/{pr.number}/files"
        )
        return _json_response(200, [self._file_json(c, repo, f, head) for f in files], links)

    def _h_issue(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        return _json_response(200, self._issue_json(c, repo, int(g["number"])))

    def _issue_exists(self, repo: Repo, number: int) -> None:
        if number not in repo.pulls and number not in repo.issues:
            raise _HTTPError(404, "Not Found", doc=_DOC_COMMENTS)

    def _h_list_comments(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        number = int(g["number"])
        self._issue_exists(repo, number)
        items = sorted(
            (x for x in repo.comments.values() if x.issue_number == number), key=lambda x: x.id
        )
        since = c.q("since")
        if since:
            items = [x for x in items if (_ts(x.updated_at) or "") >= since]
        page, links = self._paginate(c, items, f"/repositories/{repo.id}/issues/{number}/comments")
        return _json_response(200, [self._comment_json(c, repo, x) for x in page], links)

    def _check_body(self, c: _Ctx, doc: str) -> str:
        body = c.field("body")
        if body is None:
            raise _missing("body", doc)
        if not isinstance(body, str):
            raise _HTTPError(
                422,
                f"Invalid request.\n\nFor 'properties/body', {json.dumps(body)} is not a string.",
                doc=doc,
            )
        if not body.strip():
            raise _validation("IssueComment", "body", "", doc, code="missing_field")
        if len(body) > COMMENT_BODY_MAX:
            raise _validation(
                "IssueComment",
                "body",
                f"Body is too long (maximum is {COMMENT_BODY_MAX} characters)",
                doc,
            )
        return body

    def _h_create_comment(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        number = int(g["number"])
        self._issue_exists(repo, number)
        body = self._check_body(c, _DOC_COMMENTS)
        comment = self._new_comment(repo, number, body, BOT_LOGIN, "Bot")
        url = f"{c.api}/repos/{repo.full_name}/issues/comments/{comment.id}"
        return _json_response(201, self._comment_json(c, repo, comment), {"Location": url})

    def _find_comment(self, repo: Repo, g: dict[str, str]) -> IssueComment:
        comment = repo.comments.get(int(g["id"]))
        if comment is None:
            raise _HTTPError(404, "Not Found", doc=_DOC_UPDATE_COMMENT)
        return comment

    def _h_get_comment(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        return _json_response(200, self._comment_json(c, repo, self._find_comment(repo, g)))

    def _h_edit_comment(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        comment = self._find_comment(repo, g)
        comment.body = self._check_body(c, _DOC_UPDATE_COMMENT)
        comment.updated_at = max(_now(), comment.created_at)
        return _json_response(200, self._comment_json(c, repo, comment))

    def _h_delete_comment(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        del repo.comments[self._find_comment(repo, g).id]
        return _Response(204)

    def _artifact_list(self, arts: list[Artifact]) -> list[Artifact]:
        return sorted(arts, key=lambda a: (a.created_at, a.id), reverse=True)

    def _h_artifacts(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        arts = list(repo.artifacts.values())
        name = c.q("name")
        if name is not None:
            arts = [a for a in arts if a.name == name]
        arts = self._artifact_list(arts)
        page, links = self._paginate(c, arts, f"/repositories/{repo.id}/actions/artifacts")
        data = {
            "total_count": len(arts),
            "artifacts": [self._artifact_json(c, repo, a) for a in page],
        }
        return _json_response(200, data, links)

    def _h_run_artifacts(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        run_id = int(g["id"])
        if run_id not in repo.runs:
            raise _HTTPError(404, "Not Found")
        arts = [a for a in repo.artifacts.values() if a.run_id == run_id]
        name = c.q("name")
        if name is not None:
            arts = [a for a in arts if a.name == name]
        arts = self._artifact_list(arts)
        page, links = self._paginate(
            c, arts, f"/repositories/{repo.id}/actions/runs/{run_id}/artifacts"
        )
        data = {
            "total_count": len(arts),
            "artifacts": [self._artifact_json(c, repo, a) for a in page],
        }
        return _json_response(200, data, links)

    def _find_artifact(self, repo: Repo, g: dict[str, str]) -> Artifact:
        art = repo.artifacts.get(int(g["id"]))
        if art is None:
            raise _HTTPError(404, "Not Found", doc=_DOC_ARTIFACTS)
        return art

    def _h_artifact(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        return _json_response(200, self._artifact_json(c, repo, self._find_artifact(repo, g)))

    def _h_artifact_download(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        art = self._find_artifact(repo, g)
        if g["format"] != "zip":
            raise _HTTPError(422, "Unsupported archive format", doc=_DOC_ARTIFACTS)
        if art.expired:
            raise _HTTPError(410, "Artifact has expired", doc=_DOC_ARTIFACTS)
        expires = math.ceil(time.time() + self.signed_url_ttl)
        hostname = self.storage_hostname
        if hostname is None:
            api_host = c.host.rsplit(":", 1)[0]
            hostname = "127.0.0.1" if api_host == "localhost" else "localhost"
        query = urlencode(
            {
                "sv": "2021-12-02",
                "se": expires,
                "sr": "b",
                "sp": "r",
                "sig": self._sign(art.id, expires),
            }
        )
        location = f"http://{hostname}:{self.storage_port}/artifacts/{art.id}/{quote(art.name)}.zip?{query}"
        return _Response(302, b"", {"Location": location})

    def _h_runs(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        return self._run_list(c, repo, list(repo.runs.values()), "actions/runs")

    def _workflow_runs(self, repo: Repo, wanted: str) -> list[WorkflowRun]:
        """The runs of the workflow named by its id or its file name (404 when it has none:
        the stand-in knows a workflow by its runs)."""
        runs = [
            x
            for x in repo.runs.values()
            if wanted in (x.path.rsplit("/", 1)[-1], str(_workflow_id(x.path)))
        ]
        if not runs:
            raise _HTTPError(404, "Not Found", doc=f"{_DOCS}/actions/workflows")
        return runs

    def _h_workflow(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        first = min(self._workflow_runs(repo, g["id"]), key=lambda x: (x.created_at, x.id))
        wid = _workflow_id(first.path)
        data = {
            "id": wid,
            "node_id": _node_id("Workflow", wid),
            "name": first.name,
            "path": first.path,
            "state": "active",
            "created_at": _ts(first.created_at),
            "updated_at": _ts(first.created_at),
            "url": f"{c.api}/repos/{repo.full_name}/actions/workflows/{wid}",
            "html_url": f"{c.web}/{repo.full_name}/blob/{repo.default_branch}/{first.path}",
            "badge_url": f"{c.web}/{repo.full_name}/workflows/{quote(first.name)}/badge.svg",
        }
        return _json_response(200, data)

    def _h_workflow_runs(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        """A workflow's runs, the workflow named by its id or its file name (as on GitHub)."""
        repo = self._need(repo)
        runs = self._workflow_runs(repo, g["id"])
        return self._run_list(c, repo, runs, f"actions/workflows/{g['id']}/runs")

    def _run_list(self, c: _Ctx, repo: Repo, runs: list[WorkflowRun], where: str) -> _Response:
        for key in ("event", "branch", "status", "head_sha", "actor"):
            want = c.q(key)
            if want is None:
                continue
            if key == "event":
                runs = [x for x in runs if x.event == want]
            elif key == "branch":
                runs = [x for x in runs if x.head_branch == want]
            elif key == "status":
                runs = [x for x in runs if want in (x.status, x.conclusion)]
            elif key == "head_sha":
                runs = [x for x in runs if x.head_sha == want]
            else:
                runs = [x for x in runs if x.actor == want]
        runs.sort(key=lambda x: (x.created_at, x.id), reverse=True)
        page, links = self._paginate(c, runs, f"/repositories/{repo.id}/{where}")
        data = {
            "total_count": len(runs),
            "workflow_runs": [self._run_json(c, repo, x) for x in page],
        }
        return _json_response(200, data, links)

    def _h_run(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        run = repo.runs.get(int(g["id"]))
        if run is None:
            raise _HTTPError(404, "Not Found")
        return _json_response(200, self._run_json(c, repo, run))

    def _h_compare(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        basehead = g["basehead"]
        sep = "..." if "..." in basehead else ".."
        base_ref, _, head_ref = basehead.partition(sep)
        base = self._resolve_compare_ref(repo, base_ref)
        head = self._resolve_compare_ref(repo, head_ref)
        if base is None or head is None:
            raise _HTTPError(404, "Not Found")
        merge_base = self._merge_base(base, head)
        if merge_base is None:
            raise _HTTPError(404, f"No common ancestor between {base_ref} and {head_ref}.")
        head_anc, base_anc = self._ancestors(head), set(self._ancestors(base))
        ahead = [s for s in reversed(head_anc) if s not in base_anc]
        behind = len(base_anc - set(head_anc))
        if head == base:
            status = "identical"
        elif not behind:
            status = "ahead"
        elif not ahead:
            status = "behind"
        else:
            status = "diverged"
        files = _diff_trees(self.commits[merge_base].tree, self.commits[head].tree)
        commits, links = self._paginate(
            c,
            ahead,
            f"/repositories/{repo.id}/compare/{quote(basehead)}",
            default=250,
            maximum=1000,
        )
        html = f"{c.web}/{repo.full_name}/compare/{basehead}"
        data = {
            "url": f"{c.api}/repos/{repo.full_name}/compare/{quote(basehead)}",
            "html_url": html,
            "permalink_url": f"{c.web}/{repo.full_name}/compare/{repo.owner}:{base}...{repo.owner}:{head}",
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "base_commit": self._commit_json(c, repo, self.commits[base]),
            "merge_base_commit": self._commit_json(c, repo, self.commits[merge_base]),
            "status": status,
            "ahead_by": len(ahead),
            "behind_by": behind,
            "total_commits": len(ahead),
            "commits": [self._commit_json(c, repo, self.commits[s]) for s in commits],
            "files": [self._file_json(c, repo, f, head) for f in files[:300]],
        }
        return _json_response(200, data, links)

    def _find_commit(self, repo: Repo, ref: str) -> Commit:
        sha = self.resolve(repo.full_name, ref)
        if sha is None:
            raise _HTTPError(
                422, f"No commit found for SHA: {ref}", doc=f"{_DOCS}/commits/commits#get-a-commit"
            )
        return self.commits[sha]

    def _h_commit(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        commit = self._find_commit(repo, g["ref"])
        return _json_response(200, self._commit_json(c, repo, commit, with_files=True))

    def _h_commit_statuses(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        sha = self._find_commit(repo, g["ref"]).sha
        items = [s for s in reversed(repo.statuses) if s.sha == sha]
        page, links = self._paginate(c, items, f"/repositories/{repo.id}/commits/{sha}/statuses")
        return _json_response(200, [self._status_json(c, repo, s) for s in page], links)

    def _h_combined_status(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        sha = self._find_commit(repo, g["ref"]).sha
        latest: dict[str, CommitStatus] = {}
        for s in repo.statuses:
            if s.sha == sha:
                latest[s.context] = s
        states = {s.state for s in latest.values()}
        if states & {"error", "failure"}:
            state = "failure"
        elif not states or "pending" in states:
            state = "pending"
        else:
            state = "success"
        data = {
            "state": state,
            "statuses": [self._status_json(c, repo, s) for s in latest.values()],
            "sha": sha,
            "total_count": len(latest),
            "repository": self._repo_ref(c, repo),
            "commit_url": f"{c.api}/repos/{repo.full_name}/commits/{sha}",
            "url": f"{c.api}/repos/{repo.full_name}/commits/{sha}/status",
        }
        return _json_response(200, data)

    def _h_commit_check_runs(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        sha = self._find_commit(repo, g["ref"]).sha
        runs = sorted(
            (x for x in repo.check_runs.values() if x.head_sha == sha),
            key=lambda x: x.id,
            reverse=True,
        )
        name = c.q("check_name")
        if name is not None:
            runs = [x for x in runs if x.name == name]
        page, links = self._paginate(c, runs, f"/repositories/{repo.id}/commits/{sha}/check-runs")
        data = {
            "total_count": len(runs),
            "check_runs": [self._check_json(c, repo, x) for x in page],
        }
        return _json_response(200, data, links)

    def _h_tags(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        api = f"{c.api}/repos/{repo.full_name}"
        # The order GitHub lists tags in is not documented (callers must not lean on it):
        # reverse name order here.
        names = sorted(repo.tags, reverse=True)
        page, links = self._paginate(c, names, f"/repositories/{repo.id}/tags")
        data = [
            {
                "name": n,
                "commit": {"sha": repo.tags[n], "url": f"{api}/commits/{repo.tags[n]}"},
                "zipball_url": f"{api}/zipball/refs/tags/{quote(n)}",
                "tarball_url": f"{api}/tarball/refs/tags/{quote(n)}",
                "node_id": _node_id("Ref", f"{repo.full_name}:refs/tags/{n}"),
            }
            for n in page
        ]
        return _json_response(200, data, links)

    def _h_create_status(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        state = c.field("state")
        if state is None:
            raise _missing("state", _DOC_STATUSES)
        if state not in ("error", "failure", "pending", "success"):
            raise _validation("Status", "state", "state is not included in the list", _DOC_STATUSES)
        description = c.field("description")
        if isinstance(description, str) and len(description) > STATUS_DESCRIPTION_MAX:
            raise _validation(
                "Status",
                "description",
                f"description is too long (maximum is {STATUS_DESCRIPTION_MAX} characters)",
                _DOC_STATUSES,
            )
        sha = self.resolve(repo.full_name, g["sha"])
        if sha is None or not sha.startswith(g["sha"]):
            raise _HTTPError(422, f"No commit found for SHA: {g['sha']}", doc=_DOC_STATUSES)
        now = _now()
        status = CommitStatus(
            id=self._next_id("status", 30_000_000_001),
            sha=sha,
            state=state,
            context=c.field("context") or "default",
            description=description,
            target_url=c.field("target_url"),
            creator=BOT_LOGIN,
            created_at=now,
            updated_at=now,
        )
        repo.statuses.append(status)
        return _json_response(201, self._status_json(c, repo, status))

    def _check_output(self, c: _Ctx) -> tuple[JSON | None, list[JSON]]:
        output = c.field("output")
        if output is None:
            return None, []
        if not isinstance(output, dict):
            raise _HTTPError(
                422,
                "Invalid request.\n\nFor 'properties/output', it is not an object.",
                doc=_DOC_CHECKS,
            )
        for key in ("title", "summary"):
            if key not in output:
                raise _missing(key, _DOC_CHECKS)
        for key in ("summary", "text"):
            value = output.get(key)
            if isinstance(value, str) and len(value) > CHECK_TEXT_MAX:
                raise _HTTPError(
                    422,
                    f"Invalid request.\n\nOnly {CHECK_TEXT_MAX} characters are allowed; {len(value)} were supplied.",
                    doc=_DOC_CHECKS,
                )
        annotations = output.get("annotations") or []
        if len(annotations) > CHECK_ANNOTATIONS_MAX:
            raise _HTTPError(
                422,
                f"Invalid request.\n\nNo more than {CHECK_ANNOTATIONS_MAX} items are allowed; "
                f"{len(annotations)} were supplied.",
                doc=_DOC_CHECKS,
            )
        for note in annotations:
            for key in ("path", "start_line", "end_line", "annotation_level", "message"):
                if key not in note:
                    raise _missing(key, _DOC_CHECKS)
        return output, list(annotations)

    def _apply_check(
        self, c: _Ctx, run: CheckRun, output: JSON | None, annotations: list[JSON]
    ) -> None:
        for key in ("details_url", "external_id"):
            if c.field(key) is not None:
                setattr(run, key, c.field(key))
        status, conclusion = c.field("status"), c.field("conclusion")
        if status is not None:
            if status not in (
                "queued",
                "in_progress",
                "completed",
                "waiting",
                "requested",
                "pending",
            ):
                raise _validation(
                    "CheckRun", "status", "status is not included in the list", _DOC_CHECKS
                )
            run.status = status
        if conclusion is not None:
            run.conclusion = conclusion
            run.status = "completed"
        elif run.status == "completed" and run.conclusion is None:
            raise _missing("conclusion", _DOC_CHECKS)
        if c.field("started_at"):
            run.started_at = _parse_ts(c.field("started_at"))
        if c.field("completed_at"):
            run.completed_at = _parse_ts(c.field("completed_at"))
        if run.status == "completed" and run.completed_at is None:
            run.completed_at = _now()
        if output is not None:
            run.title = output.get("title", run.title)
            run.summary = output.get("summary", run.summary)
            run.text = output.get("text", run.text)
            run.annotations.extend(annotations)
        if c.field("actions") is not None:
            run.actions = list(c.field("actions"))

    def _h_create_check(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        name, head_sha = c.field("name"), c.field("head_sha")
        if not name:
            raise _missing("name", _DOC_CHECKS)
        if not head_sha:
            raise _missing("head_sha", _DOC_CHECKS)
        sha = self.resolve(repo.full_name, head_sha)
        if sha is None or sha != head_sha:
            raise _validation(
                "CheckRun",
                "head_sha",
                "No commit found for SHA: " + head_sha,
                _DOC_CHECKS,
                code="invalid",
            )
        output, annotations = self._check_output(c)
        run = CheckRun(
            id=self._next_id("check", 20_000_000_001), name=name, head_sha=sha, started_at=_now()
        )
        self._apply_check(c, run, output, annotations)
        repo.check_runs[run.id] = run
        return _json_response(201, self._check_json(c, repo, run))

    def _find_check(self, repo: Repo, g: dict[str, str]) -> CheckRun:
        run = repo.check_runs.get(int(g["id"]))
        if run is None:
            raise _HTTPError(404, "Not Found", doc=_DOC_CHECKS)
        return run

    def _h_get_check(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        return _json_response(200, self._check_json(c, repo, self._find_check(repo, g)))

    def _h_update_check(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        run = self._find_check(repo, g)
        output, annotations = self._check_output(c)
        if c.field("name"):
            run.name = c.field("name")
        self._apply_check(c, run, output, annotations)
        run.requests += 1
        return _json_response(200, self._check_json(c, repo, run))

    def _ref_or_default(self, c: _Ctx, repo: Repo) -> tuple[str, Commit]:
        ref = c.q("ref") or repo.default_branch
        sha = self.resolve(repo.full_name, ref)
        if sha is None:
            raise _HTTPError(
                404,
                f"No commit found for the ref {ref}",
                doc=f"{_DOCS}/repos/contents#get-repository-content",
            )
        return ref, self.commits[sha]

    def _h_get_contents(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        ref, commit = self._ref_or_default(c, repo)
        path = g.get("path", "").strip("/")
        if path in commit.tree:
            data = commit.tree[path]
            out = self._content_json(c, repo, path, ref, data)
            out["content"] = base64.encodebytes(data).decode("ascii")
            out["encoding"] = "base64"
            return _json_response(200, out)
        prefix = f"{path}/" if path else ""
        children: dict[str, bytes | None] = {}
        for p, data in commit.tree.items():
            if p.startswith(prefix):
                rest = p[len(prefix) :]
                head, sep, _ = rest.partition("/")
                children[prefix + head] = None if sep else data
        if not children:
            raise _HTTPError(404, "Not Found", doc=f"{_DOCS}/repos/contents#get-repository-content")
        entries = [self._content_json(c, repo, p, ref, children[p]) for p in sorted(children)]
        return _json_response(200, entries)

    def _folder_sha(self, commit: Commit, folder: str) -> str:
        """A folder's tree SHA in ``commit`` (the root's is the commit's ``tree.sha``)."""
        if not folder:
            return self._tree_sha(commit)
        prefix = f"{folder}/"
        listing = "\n".join(
            f"{p}\x00{blob_sha(commit.tree[p])}"
            for p in sorted(commit.tree)
            if p.startswith(prefix)
        )
        return hashlib.sha1(f"tree {folder}\n{listing}".encode()).hexdigest()

    def _find_tree(self, repo: Repo, name: str) -> tuple[Commit, str] | None:
        """The commit and folder a tree SHA, a commit SHA or a branch names (GitHub takes any
        of them as ``tree_sha``)."""
        sha = self.resolve(repo.full_name, name)
        if sha is not None:
            return self.commits[sha], ""
        for commit in self.commits.values():
            folders = {""}
            for path in commit.tree:
                parts = path.split("/")[:-1]
                folders |= {"/".join(parts[:i]) for i in range(1, len(parts) + 1)}
            for folder in folders:
                if self._folder_sha(commit, folder) == name:
                    return commit, folder
        return None

    def _h_get_tree(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        """``GET /git/trees/{tree_sha}``: a folder's entries, or with ``recursive`` every one
        below it (paths relative to the folder; folders are ``tree`` entries)."""
        repo = self._need(repo)
        found = self._find_tree(repo, g["sha"])
        if found is None:
            raise _HTTPError(404, "Not Found", doc=f"{_DOCS}/git/trees#get-a-tree")
        commit, folder = found
        api = f"{c.api}/repos/{repo.full_name}"
        prefix = f"{folder}/" if folder else ""
        deep = c.q("recursive") is not None
        entries: dict[str, JSON] = {}
        for path in (p for p in commit.tree if p.startswith(prefix)):
            rel = path[len(prefix) :].split("/")
            folders = rel[:-1] if deep else rel[:1] if len(rel) > 1 else []
            for i in range(1, len(folders) + 1):
                sub = "/".join(rel[:i])
                sha = self._folder_sha(commit, prefix + sub)
                tree = {"path": sub, "mode": "040000", "type": "tree", "sha": sha}
                entries.setdefault(sub, tree | {"url": f"{api}/git/trees/{sha}"})
            if deep or len(rel) == 1:
                data = commit.tree[path]
                sha = blob_sha(data)
                blob = {"path": "/".join(rel), "mode": "100644", "type": "blob", "sha": sha}
                entries["/".join(rel)] = blob | {
                    "size": len(data),
                    "url": f"{api}/git/blobs/{sha}",
                }
        sha = self._folder_sha(commit, folder)
        listing = [entries[k] for k in sorted(entries)]
        answer = {"sha": sha, "url": f"{api}/git/trees/{sha}", "tree": listing, "truncated": False}
        return _json_response(200, answer)

    def _h_put_contents(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        path = g["path"].strip("/")
        message, content = c.field("message"), c.field("content")
        if message is None:
            raise _missing("message", _DOC_CONTENTS)
        if content is None:
            raise _missing("content", _DOC_CONTENTS)
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError) as err:
            raise _HTTPError(422, "content is not valid Base64", doc=_DOC_CONTENTS) from err
        branch = c.field("branch") or repo.default_branch
        head = repo.branches.get(branch)
        if head is None:
            raise _HTTPError(404, f"Branch {branch} not found", doc=_DOC_CONTENTS)
        current = self.commits[head].tree.get(path)
        given = c.field("sha")
        if current is not None and given is None:
            raise _missing("sha", _DOC_CONTENTS)
        if given is not None and (current is None or blob_sha(current) != given):
            now_at = blob_sha(current) if current is not None else ""
            raise _HTTPError(
                409,
                f"{path} does not match {given}"
                if not now_at
                else f"is at {now_at} but expected {given}",
                doc=_DOC_CONTENTS,
            )
        committer = c.field("committer") or {}
        author = committer.get("name") if isinstance(committer, dict) else None
        commit = self.add_commit(
            repo.full_name, {path: data}, branch=branch, message=message, author=author or BOT_LOGIN
        )
        out = {
            "content": self._content_json(c, repo, path, branch, data),
            "commit": self._git_commit_json(c, repo, commit),
        }
        return _json_response(201 if current is None else 200, out)

    def _h_get_ref(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        sha = repo.branches.get(g["branch"])
        if sha is None:
            raise _HTTPError(404, "Not Found", doc=f"{_DOCS}/git/refs#get-a-reference")
        return _json_response(200, self._ref_json(c, repo, g["branch"], sha))

    def _h_get_refs(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        name = g["branch"]
        if name in repo.branches:
            return _json_response(200, self._ref_json(c, repo, name, repo.branches[name]))
        matches = sorted(b for b in repo.branches if b.startswith(name))
        if not matches:
            raise _HTTPError(404, "Not Found", doc=f"{_DOCS}/git/refs#get-a-reference")
        return _json_response(200, [self._ref_json(c, repo, b, repo.branches[b]) for b in matches])

    def _h_create_ref(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        ref, sha = c.field("ref"), c.field("sha")
        if ref is None:
            raise _missing("ref", _DOC_REFS)
        if sha is None:
            raise _missing("sha", _DOC_REFS)
        if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2:
            raise _HTTPError(422, f"{ref} is not a valid ref name.", doc=_DOC_REFS)
        if not ref.startswith("refs/heads/"):
            raise _HTTPError(
                422,
                "Only branch refs (refs/heads/...) are supported by this stand-in",
                doc=_DOC_REFS,
            )
        if sha not in self.commits:
            raise _HTTPError(422, "Object does not exist", doc=_DOC_REFS)
        branch = ref[len("refs/heads/") :]
        if branch in repo.branches:
            raise _HTTPError(422, "Reference already exists", doc=_DOC_REFS)
        repo.branches[branch] = sha
        return _json_response(
            201,
            self._ref_json(c, repo, branch, sha),
            {"Location": f"{c.api}/repos/{repo.full_name}/git/refs/heads/{quote(branch)}"},
        )

    def _h_update_ref(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        branch, sha = g["branch"], c.field("sha")
        if branch not in repo.branches:
            raise _HTTPError(
                422, "Reference does not exist", doc=f"{_DOCS}/git/refs#update-a-reference"
            )
        if sha is None:
            raise _missing("sha", f"{_DOCS}/git/refs#update-a-reference")
        if sha not in self.commits:
            raise _HTTPError(
                422, "Object does not exist", doc=f"{_DOCS}/git/refs#update-a-reference"
            )
        if not c.field("force") and repo.branches[branch] not in self._ancestors(sha):
            raise _HTTPError(
                422, "Update is not a fast forward", doc=f"{_DOCS}/git/refs#update-a-reference"
            )
        repo.branches[branch] = sha
        return _json_response(200, self._ref_json(c, repo, branch, sha))

    def _h_branch(self, c: _Ctx, repo: Repo | None, g: dict[str, str]) -> _Response:
        repo = self._need(repo)
        name = g["branch"]
        sha = repo.branches.get(name)
        if sha is None:
            raise _HTTPError(404, "Branch not found", doc=f"{_DOCS}/branches/branches#get-a-branch")
        api = f"{c.api}/repos/{repo.full_name}"
        data = {
            "name": name,
            "commit": self._commit_json(c, repo, self.commits[sha]),
            "_links": {
                "self": f"{api}/branches/{quote(name)}",
                "html": f"{c.web}/{repo.full_name}/tree/{name}",
            },
            "protected": False,
            "protection": {
                "enabled": False,
                "required_status_checks": {
                    "enforcement_level": "off",
                    "contexts": [],
                    "checks": [],
                },
            },
            "protection_url": f"{api}/branches/{quote(name)}/protection",
        }
        return _json_response(200, data)


# --------------------------------------------------------------------------- helpers


def _read_body(h: BaseHTTPRequestHandler) -> bytes:
    if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
        chunks: list[bytes] = []
        while True:
            size = int(h.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(h.rfile.read(size))
            h.rfile.readline()
    length = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(length) if length > 0 else b""


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _parse_ts(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as err:
        raise _HTTPError(
            422, f"Invalid request.\n\n{value!r} is not a valid date-time.", doc=_DOC_CHECKS
        ) from err


def _diff_trees(old: Mapping[str, bytes], new: Mapping[str, bytes]) -> list[PullFile]:
    files = []
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        status = "added" if a is None else "removed" if b is None else "modified"
        a_lines = (a or b"").decode("utf-8", "replace").splitlines()
        b_lines = (b or b"").decode("utf-8", "replace").splitlines()
        hunk = list(difflib.unified_diff(a_lines, b_lines, lineterm="", n=3))[2:]
        files.append(
            PullFile(
                filename=path,
                status=status,
                additions=sum(1 for line in hunk if line.startswith("+")),
                deletions=sum(1 for line in hunk if line.startswith("-")),
                patch="\n".join(hunk) or None,
                sha=blob_sha(b if b is not None else a or b""),
            )
        )
    return files
