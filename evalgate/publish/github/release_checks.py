"""The check runs an earlier release job left on its tag's commit: where a release's anchor
outlives its data branch. GitHub's REST API has no way to delete a check run, and only the app
that made one can change it."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any

from github.Repository import Repository

from evalgate.publish.github.client import PERM_CHECKS_WRITE, PERM_CONTENTS_READ, calling

# The GitHub App an Actions token (GITHUB_TOKEN) acts as: the only author whose check runs
# count. Anyone whose workflow or app holds `checks: write` can make a check run of any name.
ACTIONS_APP = "github-actions"


# The release tags whose commits are read, newest names first: one request a commit.
RELEASE_TAGS_READ = 20


# Tags listed at most (100 a page): a repository with more has its newest names read.
TAGS_LISTED = 1_000


@dataclass(frozen=True)
class ReleaseCheck:
    """A completed check run by GitHub Actions on a release tag's commit."""

    tag: str
    sha: str
    url: str
    text: str


def _version_key(name: str) -> tuple[tuple[int, int | str], ...]:
    # v10 after v9: numbers compare as numbers, the rest as text.
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.findall(r"\d+|\D+", name))


def release_checks(
    repo: Repository, pattern: str, check_name: str, *, also: tuple[str, str] | None = None
) -> list[ReleaseCheck]:
    """Every check run named ``check_name`` that GitHub Actions made on the commits of the
    repository's tags matching ``pattern`` (the newest RELEASE_TAGS_READ names by version
    order), and on ``also`` (a (tag, commit) pair, the tag being released). Check runs of other
    apps are left out: they prove nothing of what a release job wrote."""
    with calling("list the repository's tags", repo.full_name, PERM_CONTENTS_READ):
        tags: list[tuple[str, str]] = []
        for number, listed in enumerate(repo.get_tags()):
            if number >= TAGS_LISTED:
                break
            if fnmatch.fnmatchcase(listed.name, pattern):
                tags.append((listed.name, listed.commit.sha))
    tags.sort(key=lambda t: _version_key(t[0]), reverse=True)
    wanted = tags[:RELEASE_TAGS_READ]
    if also is not None and also not in wanted:
        wanted.insert(0, also)
    found: list[ReleaseCheck] = []
    seen: set[str] = set()
    for tag, sha in wanted:
        if sha in seen:
            continue
        seen.add(sha)
        found += [
            ReleaseCheck(tag, sha, str(run.get("html_url") or ""), _text(run))
            for run in _check_runs(repo, sha, check_name)
            if (run.get("app") or {}).get("slug") == ACTIONS_APP
        ]
    return found


def _text(run: dict[str, Any]) -> str:
    return str((run.get("output") or {}).get("text") or "")


def _check_runs(repo: Repository, sha: str, check_name: str) -> list[dict[str, Any]]:
    where = f"{repo.full_name}@{sha[:12]}"
    # checks: write grants read; the release job holds it to write its own check run.
    with calling(f"read the check runs {check_name!r}", where, PERM_CHECKS_WRITE):
        _, data = repo.requester.requestJsonAndCheck(
            "GET",
            f"{repo.url}/commits/{sha}/check-runs",
            parameters={"check_name": check_name, "filter": "all", "per_page": 100},
        )
    runs = data.get("check_runs") if isinstance(data, dict) else None
    return [r for r in runs or [] if isinstance(r, dict)]
