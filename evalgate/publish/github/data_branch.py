"""The data branch: files read and written through the contents API, and a commit's tree read
the same way (``ContentsTree``)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from github import GithubException
from github.Repository import Repository

from evalgate.publish.github.client import (
    PERM_CONTENTS_READ,
    PERM_CONTENTS_WRITE,
    GitHubError,
    calling,
)


def read_data_file(repo: Repository, branch: str, path: str) -> str | None:
    """The text of ``path`` on ``branch``, or None when the branch or the file does not exist."""
    found = _read_file(repo, branch, path)
    return None if found is None else found[0]


def _read_file(repo: Repository, branch: str, path: str) -> tuple[str, str] | None:
    where = f"{repo.full_name}@{branch}:{path}"
    with calling("read the data branch", where, PERM_CONTENTS_READ):
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
        with calling("write the data branch", where, PERM_CONTENTS_WRITE):
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
    with calling("create the data branch", where, PERM_CONTENTS_WRITE):
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
    job whose checkout lacks the commit. Only the files asked for are fetched. The root folder
    is listed through the git trees API (``GET .../git/trees/{SHA}``, which takes a commit SHA
    or a branch): the contents API's path is required, so it has no operation for the root."""

    def __init__(self, repo: Repository, sha: str) -> None:
        self.repo = repo
        self.sha = sha

    def _call(self, path: str, fetch: Callable[[], Any]) -> Any:
        """What ``fetch`` answers, None when GitHub answers 404."""
        where = f"{self.repo.full_name}@{self.sha[:12]}:{path or '/'}"
        with calling("read the base commit", where, PERM_CONTENTS_READ):
            try:
                return fetch()
            except GithubException as exc:
                if exc.status == 404:
                    return None
                raise

    def _get(self, path: str) -> Any:
        return self._call(path, lambda: self.repo.get_contents(path, ref=self.sha))

    def read(self, path: str) -> bytes | None:
        got = self._get(path)
        if got is None or isinstance(got, list) or got.type != "file":
            return None
        if got.encoding == "none" or (got.size and not got.content):
            return base64.b64decode(self.repo.get_git_blob(got.sha).content)
        data: bytes = got.decoded_content
        return data

    def list(self, folder: str) -> list[tuple[str, bool]]:
        if folder.strip("/") in ("", "."):
            tree = self._call("", lambda: self.repo.get_git_tree(self.sha))
            return [] if tree is None else [(e.path, e.type == "tree") for e in tree.tree]
        got = self._get(folder)
        if not isinstance(got, list):
            return []
        return [(entry.name, entry.type == "dir") for entry in got]
