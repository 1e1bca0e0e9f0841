"""The one reader of the user's files: OS and decode errors become a UserError naming the path.

Config, prompts, case files, rules, schemas and rubrics all come from the repository, which a
pull request can change: a symlink loop, a folder where a file is expected, a file that is not
UTF-8 or a path that leaves the repository is a one-line error (exit 2), never a traceback, and
never a read of a file elsewhere on the runner (a key, a token, another checkout).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from evalgate.config.yamlcore import SafeBase
from evalgate.errors import UserError
from evalgate.limits import FILE_BYTES

# Nesting deeper than this in a YAML or JSON document is refused: the C parser would recurse
# until the stack runs out, and nothing evalgate reads needs more than a dozen levels.
MAX_DEPTH = 64
#: What libyaml says of nesting past its own limit, and that limit.
LIBYAML_TOO_DEEP, LIBYAML_DEPTH = "exceeded maximum nesting depth", 1000


def _reason(exc: OSError) -> tuple[str, str | None]:
    """What went wrong, in words, and how to fix it."""
    if exc.errno == errno.ELOOP:
        return "is a symbolic link loop", "point the link at a real file"
    if isinstance(exc, IsADirectoryError) or exc.errno == errno.EISDIR:
        return "is a directory, not a file", "name a file, or a glob of files"
    if isinstance(exc, FileNotFoundError):
        return "does not exist", None
    if isinstance(exc, PermissionError):
        return "cannot be read (permission denied)", "check the file's permissions"
    return f"cannot be read ({exc.strerror or type(exc).__name__})", None


def _too_big(what: str, size: int | None, limit: int) -> str:
    shown = f"{size:,} bytes, " if size is not None else ""
    return f"{what} is {shown}over the {limit:,}-byte limit for a file evalgate reads"


def read_bytes(
    path: Path,
    what: str = "file",
    error: type[UserError] = UserError,
    *,
    limit: int = FILE_BYTES,
    root: Path | None = None,
    where: str | None = None,
    private: bool = False,
) -> bytes:
    """The bytes of ``path``; any OS error is an ``error`` naming it.

    With ``private``, only a file of the user's own that no one else can write is read, and
    never through a symbolic link (code evalgate keeps for itself, such as compiled templates).

    With ``root``, a path that leads out of it (``..``, absolute, a symbolic link) is refused
    first, as :func:`contain` refuses it (``where`` names the file that referred to it).

    A file over ``limit`` bytes is refused before it is read (its size taken from the open file,
    so the path cannot be swapped in between), and at most ``limit + 1`` bytes are ever read, so
    a file that grows meanwhile is refused too. Only regular files are read: a FIFO or a device
    would block or never end.
    """
    if root is not None:
        contain(path, root, what, where or str(path), error)
    fix = "split it into smaller files; a suite may read its cases from several"
    try:
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags | (getattr(os, "O_NOFOLLOW", 0) if private else 0))
    except OSError as exc:
        reason, hint = _reason(exc)
        raise error(f"{what} {reason}", where=str(path), fix=hint) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise error(
                f"{what} is a directory, not a file",
                where=str(path),
                fix="name a file, or a glob of files",
            )
        if not stat.S_ISREG(info.st_mode):
            raise error(
                f"{what} is not a regular file (a pipe, socket or device)",
                where=str(path),
                fix="name a file of the repository",
            )
        if private and (
            (hasattr(os, "getuid") and info.st_uid != os.getuid())
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        ):
            raise error(
                f"{what} is not the user's own (another's, or writable by others)",
                where=str(path),
            )
        if info.st_size > limit:
            raise error(_too_big(what, info.st_size, limit), where=str(path), fix=fix)
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        reason, hint = _reason(exc)
        raise error(f"{what} {reason}", where=str(path), fix=hint) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise error(_too_big(what, None, limit), where=str(path), fix=fix)
    return data


def decode(data: bytes, path: Path, error: type[UserError] = UserError) -> str:
    """UTF-8 text; an ``error`` naming the line of the first bad byte otherwise."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"not valid UTF-8 at byte {exc.start}", where=f"{path}:{line}", fix="save it as UTF-8"
        ) from None


def read_text(
    path: Path,
    what: str = "file",
    error: type[UserError] = UserError,
    *,
    root: Path | None = None,
    where: str | None = None,
) -> str:
    """The UTF-8 text of ``path`` (a byte-order mark dropped); OS and decode errors named; with
    ``root``, refused when it leads out of that folder (see :func:`read_bytes`)."""
    text = decode(read_bytes(path, what, error, root=root, where=where), path, error)
    return text.removeprefix("\ufeff")


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, symbolic links followed, is ``root`` or under it.

    A symbolic link loop leads nowhere, so not out either: reading it names the loop.
    """
    try:
        target = path.resolve(strict=False)
    except (OSError, RuntimeError):
        return True
    return target.is_relative_to(root.resolve())


def contain(
    path: Path, root: Path, what: str, where: str, error: type[UserError] = UserError
) -> Path:
    """``path`` when it stays inside ``root`` (symbolic links followed); refused otherwise."""
    if not inside(path, root):
        target = path.resolve()
        shown = f"{path} (resolves to {target})" if target != path.absolute() else str(path)
        raise error(
            f"{what} {shown} is outside the repository {root}",
            where=where,
            fix="keep every path (in evalgate.yml and in the files it reads) inside the "
            "repository; no '..', absolute paths or symbolic links that lead out of it",
        )
    return path


def repository_root(start: Path) -> Path:
    """The repository a config belongs to: the nearest folder with ``.git``, or ``start``."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return start


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply lists and mappings nest in ``value`` (stops counting past ``limit``)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list | tuple):
            deepest = max(deepest, level)
            if level > limit:
                return level
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def yaml_depth(text: str) -> int:
    """The nesting depth of a YAML text, from its events (no recursion, nothing built)."""
    level = deepest = 0
    try:
        for event in yaml.parse(text, Loader=SafeBase):
            if isinstance(event, yaml.CollectionStartEvent):
                level += 1
                deepest = max(deepest, level)
                if deepest > MAX_DEPTH:
                    return deepest
            elif isinstance(event, yaml.CollectionEndEvent):
                level -= 1
    except yaml.MarkedYAMLError as exc:
        # libyaml's scanner reads ahead of the events, and refuses nesting past its own limit
        # before the count above reaches MAX_DEPTH.
        if exc.problem == LIBYAML_TOO_DEEP:
            return LIBYAML_DEPTH
        raise
    return deepest
