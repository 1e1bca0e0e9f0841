"""Where the action keeps its state: outside the checkout, and the response cache under a key
only the job's process holds.

Whoever wrote the checkout controls every file in it: in a pull request's job that is the pull
request's author, and an ``actions/cache`` step restores into it whatever an earlier job (a
pull request's too) saved under a matching key. So nothing evalgate treats as state is read
from the work tree: the response cache, the local copy of the read ledger, downloaded
baselines and a fork's downloaded data live in a fresh folder of the runner's temporary
folder (``RUNNER_TEMP``; a fresh temporary folder where it is unset or unusable), and a
``.evalgate/`` folder in the checkout is only counted, to be named in the report.

Why an authenticated cache rather than none: a job may send the same request more than once
(when a pull request changes cases or config but not the prompt, the in-job baseline sends
the candidate's requests again; suites of one job may share requests), and replies reused
within the job save those calls. The key is 32 random bytes made in this
process for this job: never in the environment (so a ``command`` backend's program, which the
pull request wrote, does not inherit it), on disk, or in a log. A secret kept across jobs would
let the cache serve later jobs, but the pull-request job is exactly where the author's code
runs, so any key that job holds is one the author can read: a planted entry signed with it
would pass. A per-job key cannot be learnt before the job starts, so an entry planted in the
checkout, restored from a cache the pull request could write, or written by the program under
test with a guessed name, is a miss and the model is called. Entries do not outlive the job.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from evalgate.config.load import LoadedConfig
from evalgate.defaults import STATE_DIR
from evalgate.errors import EvalgateError


@dataclass(frozen=True)
class JobState:
    """The job's state folder (outside the checkout) and its response cache's key."""

    folder: Path
    cache_key: bytes = field(repr=False)

    @classmethod
    def create(cls, env: Mapping[str, str], workspace: Path) -> JobState:
        return cls(_fresh_folder(env.get("RUNNER_TEMP"), workspace), secrets.token_bytes(32))

    def apply(self, loaded: LoadedConfig) -> LoadedConfig:
        """The config with its state in this job's folder, whatever its state_dir says."""
        return loaded.model_copy(update={"state_root": self.folder})

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _fresh_folder(temp: str | None, workspace: Path) -> Path:
    top = workspace.resolve()
    if temp:
        base = Path(temp).resolve()
        # RUNNER_TEMP is the runner's; a folder inside the checkout would be the checkout's.
        if base != top and top not in base.parents:
            try:
                base.mkdir(parents=True, exist_ok=True)
                return Path(tempfile.mkdtemp(prefix="evalgate-", dir=base)).resolve()
            except OSError:
                pass  # not writable here (a container action may not see the runner's path)
    return Path(tempfile.mkdtemp(prefix="evalgate-")).resolve()


def checkout_state_note(loaded: LoadedConfig, workspace: Path) -> str | None:
    """One line naming the state folder the checkout holds, which the job ignored; None when
    there is none. Its files are counted, never read."""
    folders = {loaded.root / STATE_DIR}
    with contextlib.suppress(EvalgateError):
        folders.add(loaded.inside(loaded.config.state_dir, "state_dir"))
    found: list[tuple[str, int]] = []
    for folder in sorted(folders):
        if folder.is_symlink() or not folder.is_dir():
            continue
        count = sum(len(names) for _, _, names in os.walk(folder))
        if count:
            try:
                shown = folder.relative_to(workspace.resolve()).as_posix()
            except ValueError:
                shown = folder.name
            found.append((shown, count))
    if not found:
        return None
    named = ", ".join(f"{shown}/ ({n} file{'' if n == 1 else 's'})" for shown, n in found)
    return (
        f"this pull request's checkout holds {named}; the job ignored it: evalgate keeps its "
        "cache, ledger and downloads outside the checkout"
    )
