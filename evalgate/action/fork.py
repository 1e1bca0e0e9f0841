"""Pull requests from forks, gated safely: the two-workflow pattern.

A fork's ``pull_request`` job has no secrets and a read-only token, so it cannot call the model
or comment. It runs ``mode: collect``, which packs the pull request's changed text files under
the suite's folder into one JSON document (:class:`ForkData`), uploaded as an artefact. A
``workflow_run`` job in the base repository (secrets, a write token) then runs ``mode: fork``:
it checks out the default branch (the base repository's own code, workflow and config), reads
that artefact as data, and lays onto the checkout only the files that the default branch's
config names as prompts or cases. Everything else in it (the config, the sealed holdout, a
scorer's code, a rules file, a path outside the folder, a link) is refused, and the run stops.
It never runs the pull request's code, workflow or config; the split is the default branch's.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalgate import globs
from evalgate.config.load import LoadedConfig
from evalgate.config.models import SealedHoldout, program_argv
from evalgate.defaults import STATE_DIR
from evalgate.errors import UserError, from_validation
from evalgate.files import read_bytes

MANIFEST = "evalgate-fork.json"
# What one pull request's data may hold: the suite's prompts and cases, never a data set.
MAX_FILES = 200
MAX_BYTES = 20_000_000


class ForkData(BaseModel):
    """What a fork's unprivileged job hands over: the pull request's changed files, as text."""

    model_config = ConfigDict(extra="forbid", strict=True)

    version: Literal[1] = 1
    pull_request: int = Field(ge=1)
    head_sha: str = Field(pattern=r"^[0-9a-f]{40}$")
    # Repository-relative POSIX path -> the file's text at the pull request's head.
    files: dict[str, str] = Field(max_length=MAX_FILES)


class Refused(UserError):
    """The fork's data asks for something only the default branch may change."""


def collect(top: Path, folder: str, changed: list[str], pull_request: int, head: str) -> ForkData:
    """The changed files under ``folder`` (repository-relative) as they are in the checkout.

    Deleted files, folders and non-text files are left out (the other side decides what is
    allowed); sizes are capped so an artefact cannot grow without bound.
    """
    prefix = posixpath.normpath(folder).strip("/")
    files: dict[str, str] = {}
    total = 0
    for path in sorted(set(changed)):
        if prefix not in ("", ".") and not path.startswith(prefix + "/"):
            continue
        target = top / path
        if target.is_symlink() or not target.is_file():
            continue
        try:
            # Read no more than the data may carry: a huge file ends the job, not its memory.
            data = read_bytes(target, "changed file", limit=MAX_BYTES)
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        total += len(data)
        if total > MAX_BYTES or len(files) >= MAX_FILES:
            raise UserError(
                f"the pull request changes more than {MAX_FILES} files or {MAX_BYTES:,} bytes "
                "under the suite's folder, more than a fork's data may carry",
                fix="split the pull request",
            )
        files[path] = text
    return ForkData(pull_request=pull_request, head_sha=head, files=files)


def read_manifest(path: Path) -> ForkData:
    try:
        return ForkData.model_validate_json(
            read_bytes(path, "the fork's data", limit=2 * MAX_BYTES)
        )
    except ValidationError as exc:
        raise Refused(
            f"the fork's data is not an evalgate fork artefact ({from_validation(exc)})",
            where=str(path),
        ) from None


# Folders whose files are never a suite's data, wherever they sit: git's, GitHub's (workflows,
# actions) and evalgate's state (the response cache, the read ledger, baselines).
NEVER_FOLDERS = frozenset({".git", ".github", STATE_DIR})
# Programs and keys are never data either, whatever the globs say: a fork's files are text the
# model reads, and a scorer's, a judge's or a tool's code (or a key) would decide the verdict.
PROGRAM_SUFFIXES = frozenset(
    [
        ".py",
        ".pyc",
        ".pth",
        ".sh",
        ".bash",
        ".zsh",
        ".fish",
        ".js",
        ".mjs",
        ".cjs",
        ".ts",
        ".rb",
        ".pl",
        ".php",
        ".lua",
        ".exe",
        ".so",
        ".dll",
        ".bat",
        ".cmd",
        ".ps1",
    ]
)
KEY_SUFFIXES = frozenset([".pub", ".pem", ".key", ".asc", ".gpg", ".p12", ".pfx"])
# Why each kind of protected file is not the fork's to change (shown beside its path).
CONFIG, HOLDOUT, NAMED, LABELS, PROGRAM, STATE, GIT, KEY, CODE = (
    "the config",
    "the sealed holdout or its key",
    "a file the config names",
    "the judge's labels",
    "a program the suite runs, or a file it names",
    "evalgate's state",
    "git's or GitHub's files",
    "a key",
    "code",
)


def _patterns(loaded: LoadedConfig) -> list[str]:
    patterns = []
    for suite in loaded.config.suites.values():
        patterns += list(suite.prompts) + list(suite.cases)
    return patterns


def _leaves(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a dumped config model, with the key it is under (list items: their list's)."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _leaves(item, str(name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item, key)
    elif isinstance(value, str):
        yield key, value


def _protected(loaded: LoadedConfig) -> dict[str, str]:
    """Files (relative to the config's folder) whose change is never data, and why: the config,
    the sealed holdout, its change ledger and key, the judge's labels, every file an option
    names (rules, schemas, rubrics, keys; at any depth, a judge's inside ``all_of`` too), the
    programs the suite runs and the files their commands name, and scorer code."""
    defaults = SealedHoldout()
    names = {loaded.path.name: CONFIG}
    names |= dict.fromkeys((defaults.file, defaults.changes, defaults.public_key), HOLDOUT)
    for suite in loaded.config.suites.values():
        if suite.sealed_holdout is not None:
            sealed = suite.sealed_holdout
            names |= dict.fromkeys((sealed.file, sealed.changes, sealed.public_key), HOLDOUT)
        if suite.judge is not None:
            names[suite.judge.labels] = LABELS
        for key, value in _leaves(suite.model_dump()):
            if key.endswith(("_file", "_key", "_path")):
                names.setdefault(value, NAMED)
            elif key in ("command", "tool_command"):
                # Every word of the command that is not an option: the program when it is a
                # path (``./judge.sh``) and the files it is handed (``agent/tool.py``).
                for word in [value, *program_argv(value)]:
                    if not word.startswith("-"):
                        names.setdefault(word, PROGRAM)
        if suite.scorer.kind == "python":
            names[suite.scorer.function.split(":")[0].replace(".", "/") + ".py"] = CODE
    return {posixpath.normpath(name): why for name, why in names.items() if name}


def _state_folder(loaded: LoadedConfig) -> str:
    return posixpath.normpath(Path(loaded.config.state_dir).as_posix())


def _never(inside: str, target: Path, protected: dict[str, str], state: str) -> str | None:
    """Why the file ``inside`` (relative to the config's folder) is not a fork's to change, or
    None when nothing but the globs decide."""
    names = inside.split("/")
    if STATE_DIR in names[:-1] or inside == state or inside.startswith(state + "/"):
        return STATE
    if any(name in NEVER_FOLDERS for name in names[:-1]) or names[-1].startswith(".git"):
        return GIT
    if inside in protected:
        return protected[inside]
    suffix = posixpath.splitext(names[-1])[1].lower()
    if suffix in KEY_SUFFIXES:
        return KEY
    if suffix in PROGRAM_SUFFIXES:
        return CODE
    try:
        # An executable without a suffix (bin/answer): a program. Data files with the executable
        # bit (common in checkouts made on some systems) keep their suffix and stay data.
        if not suffix and target.is_file() and target.stat().st_mode & 0o111:
            return CODE
    except OSError:
        pass
    return None


def overlay(data: ForkData, top: Path, loaded: LoadedConfig) -> list[str]:
    """Write the fork's prompt and case files over the default branch's checkout.

    Every path must be a prompt or case file of the default branch's config (its globs, with
    :mod:`evalgate.globs` semantics: ``*`` crosses no ``/`` and no leading dot), inside the
    config's folder, no link, and none of the files that are never data (:func:`_never`:
    evalgate's state, git's and GitHub's folders, the config, the holdout, keys, labels, rules
    and programs), whatever the globs say; anything else refuses the whole run, naming the
    paths and why. Returns the paths written.
    """
    folder = Path(os.path.relpath(loaded.root, top)).as_posix()
    patterns = _patterns(loaded)
    protected = _protected(loaded)
    state = _state_folder(loaded)
    refused: list[str] = []
    accepted: list[tuple[Path, str]] = []
    for path, text in sorted(data.files.items()):
        clean = posixpath.normpath(path)
        inside = posixpath.relpath(clean, folder) if folder != "." else clean
        target = top / clean
        why: str | None = None
        if clean != path or clean.startswith(("/", "../")) or inside.startswith("../"):
            why = "outside the suite's folder"
        elif any(
            p.is_symlink() for p in (target, *target.parents) if p != top and top in p.parents
        ):
            why = "a symbolic link"
        else:
            why = _never(inside, target, protected, state)
        if why is None and not any(globs.matches(inside, p) for p in patterns):
            why = "not a prompt or case file of the default branch's config"
        if why is None:
            accepted.append((target, text))
        else:
            refused.append(f"{path} ({why})")
    if refused:
        shown = ", ".join(refused[:5]) + (
            f" and {len(refused) - 5} more" if len(refused) > 5 else ""
        )
        raise Refused(
            f"the fork's pull request changes files that are not the suite's prompts or cases "
            f"({shown}): only the default branch may change the config, the holdout or code",
            fix="make those changes in a pull request from a branch of this repository, after review",
        )
    for target, text in accepted:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return [str(t.relative_to(top).as_posix()) for t, _ in accepted]
