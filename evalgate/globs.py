"""Glob patterns as evalgate.yml's case and prompt globs mean them, matched without a file system.

The config's globs are expanded with :func:`glob.glob` (``recursive=True``): ``*``, ``?`` and
``[...]`` match within one path component and never a name that starts with a dot, and ``**``,
as a whole component, matches any number of folders (none of them a dot-folder). Code that must
decide whether a path is named by such a glob without listing a folder (a fork's files laid onto
a checkout, a commit's tree walked through an API) asks here, so a pattern means one thing
everywhere. :func:`fnmatch.fnmatchcase` alone is not that: its ``*`` crosses ``/`` and leading
dots, so ``*.json`` would name ``.evalgate/cache/ab/cd.json``.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
from collections.abc import Callable
from pathlib import Path

RECURSIVE = "**"
_MAGIC = frozenset("*?[")


def parts(pattern: str) -> list[str]:
    """A POSIX path or pattern's components, without empty and ``.`` ones."""
    return [p for p in pattern.split("/") if p not in ("", ".")]


def is_magic(part: str) -> bool:
    """Whether one component of a pattern is a pattern (not a plain name)."""
    return any(ch in _MAGIC for ch in part)


def name_matches(name: str, part: str) -> bool:
    """One path component against one pattern component, as :func:`glob.glob` decides it:
    case-sensitive, and a name that starts with a dot only for a component that does too."""
    if name[:1] == "." and part[:1] != ".":
        return False
    return fnmatch.fnmatchcase(name, part)


def matches(path: str, pattern: str) -> bool:
    """Whether ``glob.glob(pattern, recursive=True)``, run in the folder both are relative to,
    would list the file ``path`` (both relative POSIX paths)."""
    if pattern.startswith("/") or pattern.endswith("/") or path.startswith("/"):
        return False  # an absolute pattern names no relative path; a trailing / only folders
    names, pats = parts(path), parts(pattern)
    # reach[j]: the first j pattern components can match the names read so far.
    reach = [True] + [False] * len(pats)
    for j, part in enumerate(pats, start=1):
        reach[j] = reach[j - 1] and part == RECURSIVE
    for name in names:
        step = [False] * (len(pats) + 1)
        for j, part in enumerate(pats, start=1):
            if part == RECURSIVE:
                # ``**`` takes this name too (a folder, or the file at its end), or nothing.
                step[j] = step[j - 1] or (reach[j] and name[:1] != ".")
            else:
                step[j] = reach[j - 1] and name_matches(name, part)
        reach = step
    return reach[-1] and bool(names)


# Paths one config glob may name: more is a mistake, not a suite.
MAX_MATCHES = 100_000
# Lists a folder (relative POSIX path, "" for the top): (name, whether ``**`` may enter it).
Lister = Callable[[str], list[tuple[str, bool]]]


def walk(pattern: str, listdir: Lister, limit: int) -> list[str]:
    """The relative paths ``pattern`` names, found by listing folders as :func:`glob.glob`
    (``recursive=True``) would, except that ``**`` enters only the folders ``listdir`` says it
    may: a symbolic link to a folder is not one, or two links to ``.`` would make the walk
    exponential. Paths made of plain components are returned unchecked (the caller tells whether
    they exist). Stops past ``limit`` paths; the caller refuses that many."""
    pats = parts(pattern)
    found: set[str] = set()

    def step(prefix: str, i: int) -> None:
        if len(found) > limit:
            return
        if i == len(pats):
            if prefix:
                found.add(prefix)
            return
        part = pats[i]
        if part == RECURSIVE:
            last = i == len(pats) - 1
            step(prefix, i + 1)
            for name, enter in listdir(prefix):
                if name[:1] == ".":
                    continue
                if enter:
                    step(posixpath.join(prefix, name), i)
                elif last:
                    step(posixpath.join(prefix, name), i + 1)  # a file ``**`` ends on
            return
        if not is_magic(part):
            step(posixpath.join(prefix, part), i + 1)
            return
        for name, _ in listdir(prefix):
            if name_matches(name, part):
                step(posixpath.join(prefix, name), i + 1)

    step("", 0)
    return sorted(found)


def expand(root: Path, pattern: str, limit: int) -> list[Path]:
    """The existing files and folders ``pattern`` names under ``root`` (an absolute pattern:
    from ``/``), as :func:`walk` finds them on the file system."""
    base = Path(pattern).anchor or None
    top = Path(base) if base else root

    def listdir(folder: str) -> list[tuple[str, bool]]:
        try:
            with os.scandir(top / folder) as entries:
                return [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
        except OSError:
            return []

    relative = pattern[len(base) :] if base else pattern
    return [top / p for p in walk(relative, listdir, limit) if os.path.lexists(top / p)]
