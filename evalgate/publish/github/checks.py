"""The check run on a pull request's head (annotations batched), or a commit status when the
token may not write checks."""

from __future__ import annotations

from typing import Any, Literal

from github import GithubException
from github.Repository import Repository

from evalgate.publish.github.client import (
    CHECK_SUMMARY_MAX,
    PERM_CHECKS_WRITE,
    PERM_STATUSES_WRITE,
    STATUS_DESCRIPTION_MAX,
    calling,
    truncate,
)

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
    text: str | None = None,
) -> str:
    """A completed check run on ``head_sha``; return its URL. The summary is cut to fit;
    ``text`` (the run's details) is not: it carries what a later job reads back."""
    output: dict[str, str | list[dict[str, str | int]]] = {
        "title": title,
        "summary": truncate(summary, CHECK_SUMMARY_MAX),
    }
    if text is not None:
        output["text"] = text
    with calling(f"create the check run {name!r}", repo.full_name, PERM_CHECKS_WRITE):
        if details_url is not None:
            check = repo.create_check_run(
                name, head_sha, conclusion=conclusion, output=output, details_url=details_url
            )
        else:
            check = repo.create_check_run(name, head_sha, conclusion=conclusion, output=output)
        return check.html_url or ""


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
        "title": truncate(title, 1_000),
        "summary": truncate(summary, CHECK_SUMMARY_MAX),
        "annotations": shown[:ANNOTATIONS_PER_REQUEST],
    }
    where = f"{repo.full_name}@{head_sha[:12]}"
    try:
        with calling(f"create the check run {name!r}", where, PERM_CHECKS_WRITE):
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
            # GitHub's description lets a check run's html_url be null.
            return "check", check.html_url or ""
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
    with calling(f"set the commit status {context!r}", repo.full_name, PERM_STATUSES_WRITE):
        # POST statuses/{sha} directly: repo.get_commit() would cost a GET first.
        repo.requester.requestJsonAndCheck("POST", f"{repo.url}/statuses/{sha}", input=payload)
