"""A commit's files read through git, for the split decided on the default branch.

In a pull request's job, actions/checkout leaves the merge commit at depth 1, so the base
commit is usually missing: it is fetched once (``git fetch --depth=1 origin SHA``, which the
checkout's persisted token allows). Nothing here writes to the work tree.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from evalgate.cases.base_split import BaseUnavailable

_TIMEOUT_S = 30


def _git(top: Path, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", "-C", str(top), *argv], capture_output=True, timeout=timeout, check=False
    )


def toplevel(folder: Path) -> Path | None:
    """The work tree holding ``folder``, or None when it is not in a git repository."""
    try:
        done = _git(folder, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return Path(done.stdout.decode().strip())


class GitTree:
    """The files of one commit of a local repository."""

    def __init__(self, top: Path, commit: str) -> None:
        self.top = top
        self.commit = commit

    @classmethod
    def open(cls, top: Path, ref: str, *, fetch: bool) -> GitTree:
        """The commit ``ref`` names, fetched from ``origin`` when missing and ``fetch``."""

        def resolve() -> str | None:
            done = _git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
            return done.stdout.decode().strip() if done.returncode == 0 else None

        try:
            commit = resolve()
            if commit is None and fetch:
                _git(
                    top,
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    "--depth=1",
                    "origin",
                    ref,
                    timeout=_TIMEOUT_S,
                )
                commit = resolve()
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BaseUnavailable(
                f"git could not read the base commit {ref}: {exc}",
                fix="check out with fetch-depth: 0, or give the action a github_token",
            ) from None
        if commit is None:
            raise BaseUnavailable(
                f"the base commit {ref} is not in the checkout and could not be fetched",
                fix="check out with fetch-depth: 0, or give the action a github_token",
            )
        return cls(top, commit)

    def read(self, path: str) -> bytes | None:
        done = _git(self.top, "cat-file", "blob", f"{self.commit}:{path}")
        return done.stdout if done.returncode == 0 else None

    def list(self, folder: str) -> list[tuple[str, bool]]:
        spec = f"{self.commit}:{folder}" if folder else f"{self.commit}:"
        done = _git(self.top, "ls-tree", "-z", spec)
        if done.returncode != 0:
            return []
        entries = []
        for item in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
            if not item:
                continue
            meta, _, name = item.partition("\t")
            entries.append((name, meta.split()[1] == "tree"))
        return entries
