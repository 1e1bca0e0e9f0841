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

import fnmatch
import os
import posixpath
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalgate.config.load import LoadedConfig
from evalgate.errors import UserError, from_validation

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
            text = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        total += len(text.encode())
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
        size = path.stat().st_size
        if size > 2 * MAX_BYTES:
            raise UserError(f"the fork's data is {size:,} bytes, over the limit", where=str(path))
        return ForkData.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise UserError(f"cannot read the fork's data: {exc}", where=str(path)) from None
    except ValidationError as exc:
        raise Refused(
            f"the fork's data is not an evalgate fork artefact ({from_validation(exc)})",
            where=str(path),
        ) from None


def _patterns(loaded: LoadedConfig) -> list[str]:
    patterns = []
    for suite in loaded.config.suites.values():
        patterns += list(suite.prompts) + list(suite.cases)
    return patterns


def _protected(loaded: LoadedConfig) -> set[str]:
    """Files (relative to the config's folder) whose change is never data: the config, the
    sealed holdout and its change ledger, rules, schemas, rubrics and scorer code."""
    names = {loaded.path.name}
    for suite in loaded.config.suites.values():
        if suite.sealed_holdout is not None:
            names |= {suite.sealed_holdout.file, suite.sealed_holdout.changes}
        for options in (suite.model.options, getattr(suite.scorer, "__dict__", {})):
            for key in ("rules_file", "schema_file", "rubric_file"):
                value = options.get(key)
                if isinstance(value, str):
                    names.add(posixpath.normpath(value))
        if suite.scorer.kind == "python":
            names.add(suite.scorer.function.split(":")[0].replace(".", "/") + ".py")
    return names


def overlay(data: ForkData, top: Path, loaded: LoadedConfig) -> list[str]:
    """Write the fork's prompt and case files over the default branch's checkout.

    Every path must be a prompt or case file of the default branch's config (its globs), inside
    the config's folder, and no link; anything else refuses the whole run, naming the paths.
    Returns the paths written.
    """
    folder = Path(os.path.relpath(loaded.root, top)).as_posix()
    patterns = _patterns(loaded)
    protected = _protected(loaded)
    refused: list[str] = []
    accepted: list[tuple[Path, str]] = []
    for path, text in sorted(data.files.items()):
        clean = posixpath.normpath(path)
        inside = posixpath.relpath(clean, folder) if folder != "." else clean
        target = top / clean
        if (
            clean != path
            or clean.startswith(("/", "../"))
            or inside.startswith("../")
            or inside in protected
            or not any(fnmatch.fnmatchcase(inside, p) for p in patterns)
            or any(
                p.is_symlink() for p in (target, *target.parents) if p != top and top in p.parents
            )
        ):
            refused.append(path)
        else:
            accepted.append((target, text))
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
