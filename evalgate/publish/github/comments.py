"""The pull request's one evalgate comment: found by its marker and edited in place."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from github import GithubException
from github.Issue import Issue
from github.IssueComment import IssueComment
from github.Repository import Repository

from evalgate.publish.github.client import COMMENT_MAX, PERM_PR_READ, PERM_PR_WRITE, calling


def upsert_comment(
    repo: Repository,
    pr_number: int,
    body: str,
    marker: str,
    *,
    author: str | None = None,
    carry: Callable[[str, str | None], str] | None = None,
) -> tuple[str, bool]:
    """Edit our comment on ``pr_number`` in place, or post it; return (its URL, created).

    Ours is the newest comment whose first line is ``marker`` (a hidden HTML comment such as
    ``<!-- evalgate:suite=NAME -->``), searched across every page, by ``author``: the login
    the token posts as (``github-actions[bot]`` for ``GITHUB_TOKEN``, a machine user's login
    for a personal token; another app's comment with the marker is not ours to edit), or by
    any bot when it is None. GitHub's ``/user`` cannot tell who we are (it answers 403 to the
    Actions token). Older marked comments, e.g. from an earlier double post, are left alone.
    ``carry(body, earlier)`` makes the body posted from ``body`` and the body of the comment it
    replaces (None when there is none): what one edit hands to the next.
    """
    if marker not in body:
        raise ValueError(f"the comment body does not contain its marker {marker!r}")
    if len(body) > COMMENT_MAX:
        raise ValueError(
            f"comment body has {len(body):,} characters; GitHub accepts at most {COMMENT_MAX:,}"
        )
    where = f"{repo.full_name}#{pr_number}"
    issue, ours = _ours(repo, pr_number, marker, author)
    if carry is not None:
        body = carry(body, ours.body if ours is not None else None)
        if marker not in body or len(body) > COMMENT_MAX:
            raise ValueError("the carried comment body lost its marker or grew past the limit")
    if ours is not None:
        if ours.body == body:
            return ours.html_url, False
        with calling("edit its pull-request comment", where, PERM_PR_WRITE):
            try:
                ours.edit(body)
                return ours.html_url, False
            except GithubException as exc:
                if exc.status != 404:  # deleted since we listed it: post a new one below
                    raise
    with calling("comment on the pull request", where, PERM_PR_WRITE):
        created = issue.create_comment(body)
        return created.html_url, True


def _by(comment: IssueComment, author: str | None) -> bool:
    """Whether ``author`` wrote ``comment`` (None: any bot). A login ending in ``[bot]`` is an
    app's, which no person can take."""
    if comment.user is None:
        return False
    return comment.user.login == author if author else comment.user.type == "Bot"


def _ours(
    repo: Repository, pr_number: int, marker: str, author: str | None
) -> tuple[Issue, IssueComment | None]:
    """The pull request (as an issue) and our newest marked comment on it, if any."""
    where = f"{repo.full_name}#{pr_number}"
    with calling("read the pull request's comments", where, PERM_PR_READ):
        issue = repo.get_issue(pr_number)
        ours = None
        for comment in issue.get_comments():
            # The marker as the first line, as evalgate writes it: not a comment that quotes it.
            if (comment.body or "").split("\n", 1)[0].strip() != marker:
                continue
            if not _by(comment, author):
                continue
            if ours is None or (comment.created_at, comment.id) >= (ours.created_at, ours.id):
                ours = comment
    return issue, ours


#: Who posts as a workflow's GITHUB_TOKEN: the only author whose ledger is read.
ACTIONS_LOGIN = "github-actions[bot]"
#: The comments of a pull request a ledger is looked for in (the oldest first: evalgate's
#: comment is made by the pull request's first job and edited after): three pages.
LEDGER_COMMENTS = 300


class Marked(NamedTuple):
    """The marked comments found on a pull request, by first line; ``cut``: it has more
    comments than were looked at (evalgate's may be among those not read)."""

    bodies: dict[str, str]
    cut: bool


def marked_bodies(repo: Repository, pr_number: int, author: str = ACTIONS_LOGIN) -> Marked:
    """The bodies of the marked comments that ``author`` posted on ``pr_number`` (the login
    the workflow's token posts as, ``ACTIONS_LOGIN`` for GITHUB_TOKEN: another app's or
    person's comment is not evalgate's ledger, whatever it says), by their first line (the
    marker), the newest of each, among the first ``LEDGER_COMMENTS``: every suite's comment
    in one listing, in a bounded number of calls."""
    where = f"{repo.full_name}#{pr_number}"
    found: dict[str, tuple[tuple[object, int], str]] = {}
    cut = False
    with calling("read the pull request's comments", where, PERM_PR_READ):
        for i, comment in enumerate(repo.get_issue(pr_number).get_comments()):
            if i >= LEDGER_COMMENTS:
                cut = True
                break
            body = comment.body or ""
            first = body.split("\n", 1)[0].strip()
            if not first.startswith("<!--") or not _by(comment, author):
                continue
            order = (comment.created_at, comment.id)
            if first not in found or order >= found[first][0]:
                found[first] = (order, body)
    return Marked({first: body for first, (_, body) in found.items()}, cut)
