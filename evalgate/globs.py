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
