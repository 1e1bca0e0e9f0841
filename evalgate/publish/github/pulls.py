"""A pull request's head, base and fork status, and its merge base with the base branch."""

from __future__ import annotations

from datetime import datetime

from github import GithubException
from github.Repository import Repository
from pydantic import BaseModel, ConfigDict

from evalgate.publish.github.client import PERM_CONTENTS_READ, PERM_PR_READ, calling


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
    with calling("read the pull request", where, PERM_PR_READ):
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
    with calling("compare the pull request with its base", where, PERM_CONTENTS_READ):
        try:
            comparison = repo.compare(base_ref, head_sha, comparison_commits_per_page=1)
            return comparison.merge_base_commit.sha
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise


def merged_as(repo: Repository, sha: str) -> list[int]:
    """The pull requests merged as commit ``sha`` (merge, squash or rebase: GitHub's
    pull requests associated with the commit whose merge commit it is)."""
    where = f"{repo.full_name}@{sha[:12]}"
    with calling("list the pull requests of the commit", where, PERM_PR_READ):
        pulls = repo.get_commit(sha).get_pulls()
        return [p.number for p in pulls if p.merged_at is not None and p.merge_commit_sha == sha]


#: The most closed pull requests one look lists (the newest updated first): one page.
CLOSED_LOOKED_AT = 100
#: The most of them closed without merging that one look returns (each is a read of its
#: comments): a job's API calls stay bounded whatever is closed or commented on meanwhile.
CLOSED_READ = 20


def closed_unmerged_since(repo: Repository, since: datetime) -> list[int]:
    """The pull requests closed without merging at or after ``since``, the newest updated
    first: at most ``CLOSED_READ`` of them, among at most ``CLOSED_LOOKED_AT`` closed pull
    requests looked at. The listing is sorted by last update, which a comment moves; one
    closed before ``since`` is passed over without counting, so comments on old pull requests
    cannot crowd out one closed since."""
    with calling("list the closed pull requests", repo.full_name, PERM_PR_READ):
        found: list[int] = []
        pulls = repo.get_pulls(state="closed", sort="updated", direction="desc")
        for i, pull in enumerate(pulls):
            updated = pull.updated_at or pull.closed_at
            if i >= CLOSED_LOOKED_AT or (updated is not None and updated < since):
                break
            closed = pull.closed_at or updated
            if pull.merged_at is None and (closed is None or closed >= since):
                found.append(pull.number)
                if len(found) >= CLOSED_READ:
                    break
        return found
