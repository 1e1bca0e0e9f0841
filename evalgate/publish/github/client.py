"""The GitHub client: connecting, our retries, and every GitHub failure as a ``GitHubError`` that
names the permission or setting that fixes it.

Retries are ours, not PyGithub's defaults: reads and idempotent writes (GET, PATCH, PUT) are
retried on 5xx; POSTs never are, because GitHub may have done the work before the gateway
failed and a repeat would post the comment twice. A rate-limit reset is waited for only when
it comes within ``max_rate_limit_wait`` seconds, so a CI job cannot hang until the next hour.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import requests
from github import Auth, Github, GithubException, GithubRetry
from github.GithubException import (
    RateLimitExceededExceedsMaxWait,
    RateLimitExceededException,
)
from github.Repository import Repository
from urllib3.response import BaseHTTPResponse

from evalgate import __version__
from evalgate.defaults import COMMENT_LIMIT
from evalgate.errors import UserError
from evalgate.redact import upstream_error

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


def disconnect(repo: Repository) -> None:
    """Close the connections of the client that made ``repo`` (it reconnects if used again):
    a job's client is closed when the job ends, not left for the garbage collector."""
    repo.requester.close()


def get_repository(client: Github, full_name: str) -> Repository:
    """The repository ``owner/name`` (one request)."""
    with calling("read the repository", full_name, PERM_CONTENTS_READ):
        return client.get_repo(full_name)


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


def describe(
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
    """One GitHub failure as a GitHubError with what went wrong and how to fix it.

    One function on purpose: it is a table of GitHub's statuses (401, 403 with and without a
    rate limit, 404, 409, 410, 422, 5xx), each with its fix, read top to bottom."""
    hdrs = _lower_keys(headers)
    message = ""
    details: list[str] = []
    if isinstance(data, dict):
        message = str(data.get("message") or "")
        details = _detail_messages(data.get("errors"))
    elif isinstance(data, bytes | str) and data:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        message = text.strip().splitlines()[0][:200] if text.strip() else ""
    # GitHub's message as every upstream error is kept: a capped, redacted excerpt.
    said = upstream_error(status, None, message or None)
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
    return describe(
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
def calling(action: str, where: str | None, permission: str | None) -> Iterator[None]:
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


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATED)] + TRUNCATED
