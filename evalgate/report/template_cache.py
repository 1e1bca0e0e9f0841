"""Compiled report templates kept between commands, as Python keeps compiled modules.

Compiling a report's template is most of what a short command does after its imports (a tenth of
``evalgate gate``'s start-up; benchmarks/footprint.py times compiling against reading back), and
the templates are evalgate's own: they change only with evalgate. jinja2's bytecode cache keeps
the compiled code in a folder, each entry checked against its template's source when read; the
entry's name also carries a digest of evalgate's and jinja2's versions and of everything in the
environment that changes the compiled code (HTML escaping above all), so an entry compiled
another way is never found, let alone run.

The folder is ``EVALGATE_TEMPLATE_CACHE`` if set (``off`` for none), else
``$XDG_CACHE_HOME/evalgate/templates`` (``~/.cache/evalgate/templates``). What it holds is code
evalgate runs (reading an entry unpickles and unmarshals it), so whoever can write the folder or
any folder above it can run code as the user: the folder is used only when

* its path is absolute and outside ``GITHUB_WORKSPACE`` and every git work tree (a checkout's
  files are a pull request's, whoever owns them);
* every folder from the root down to it is owned by this user or by root and cannot be written
  by anyone else (a sticky folder such as /tmp excepted: no one else can move what is in it),
  and the folder itself is this user's and writable by no one else;
* each entry is a regular file of this user's that no one else can write, read through
  evalgate's one file reader (files.read_bytes, ``private``: never through a link).

Anything else is ignored, never trusted: each command then compiles what it shows. The image
sets its own folder, filled when the image is built. Each time an entry is written (after an
upgrade, mostly), entries written more than ``PRUNE_AFTER`` ago are removed, so the folder
holds what recent versions compiled, not every version's.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import stat
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2
    import jinja2.bccache

VARIABLE = "EVALGATE_TEMPLATE_CACHE"
OFF = "off"

#: Entries last written longer ago than this (in seconds) are removed when another is written.
PRUNE_AFTER = 30 * 24 * 3600
# What an entry's name is: ``{kind}-{settings digest}-{jinja2's key}.jinja``.
_ENTRY = re.compile(r"[a-z]+-[0-9a-f]{16}-[0-9a-f]{40}\.jinja")

_directory: Path | None = None
_attached: weakref.WeakSet[jinja2.Environment] = weakref.WeakSet()


def folder(env: Mapping[str, str]) -> Path | None:
    """The cache folder the environment asks for (None: no cache)."""
    value = env.get(VARIABLE)
    if value is not None:
        return None if value.strip() in ("", OFF) else Path(value)
    base = env.get("XDG_CACHE_HOME") or (
        str(Path(env["HOME"]) / ".cache") if env.get("HOME") else None
    )
    return Path(base) / "evalgate" / "templates" if base else None


def _uid() -> int | None:
    return os.getuid() if hasattr(os, "getuid") else None


def _safe_parent(info: os.stat_result, uid: int | None) -> bool:
    if not stat.S_ISDIR(info.st_mode):
        return False
    if uid is not None and info.st_uid not in (uid, 0):
        return False
    others_write = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return not others_write or bool(info.st_mode & stat.S_ISVTX)


def _inside(path: Path, top: Path) -> bool:
    return path == top or top in path.parents


def _exists(path: Path) -> bool | None:
    """Whether ``path`` exists; None when that cannot be told (a folder that cannot be searched)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    return True


def trusted(directory: Path, env: Mapping[str, str] | None = None) -> Path | None:
    """The real path of ``directory`` when it may hold code evalgate runs (see the module's
    docstring), else None (:func:`verdict` says why)."""
    return verdict(directory, env)[0]


def verdict(directory: Path, env: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """Whether ``directory`` may hold code evalgate runs: its real path, or None and why not.
    Missing folders are made one at a time, each checked as it is made (a folder someone else
    made first in the meantime is refused), the last with mode 0700."""
    env = env or {}
    if not directory.is_absolute():
        return None, "its path is not absolute"
    uid = _uid()
    real = Path(os.path.realpath(directory))
    # Never in a checkout: its files are a pull request's, whoever owns them on disk.
    workspace = env.get("GITHUB_WORKSPACE")
    if workspace and _inside(real, Path(os.path.realpath(workspace))):
        return None, "it is inside GITHUB_WORKSPACE, a checkout"
    for p in (real, *real.parents):
        found = _exists(p / ".git")
        if found is None:
            return None, f"{p} cannot be searched"
        if found:
            return None, f"it is inside the git work tree {p}"
    # From the root down: none may be another user's to rename or swap, and each missing one
    # is made here, and refused unless it is then this user's.
    for path in (*reversed(real.parents), real):
        try:
            if _exists(path) is False:
                os.mkdir(path, 0o700)
            info = os.lstat(path)
        except OSError as exc:
            return None, f"{path} cannot be made or read ({exc.strerror})"
        if path == real:
            break
        if not _safe_parent(info, uid):
            return None, f"{path} above it is another user's or writable by others"
    if not stat.S_ISDIR(info.st_mode):
        return None, "it is not a folder"
    if uid is not None and info.st_uid != uid:
        return None, "it is another user's"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None, "others can write it"
    return real, "used"


def configure(env: Mapping[str, str]) -> None:
    """Use the cache folder ``env`` names from now on (the CLI calls this once, at start)."""
    global _directory
    directory = folder(env)
    # The real path from here on: the one checked, not a link someone could re-point.
    _directory = trusted(directory, env) if directory is not None else None
    _attached.clear()


def settings_digest(environment: jinja2.Environment, kind: str) -> str:
    """A digest of what makes ``environment`` compile a template the way it does: evalgate's and
    jinja2's versions and every compile-time setting (escaping, finalize, whitespace control,
    delimiters, undefined, extensions)."""
    import jinja2

    from evalgate import __version__

    def name(value: Any) -> str:
        return getattr(value, "__qualname__", None) or repr(value)

    e = environment
    parts = [
        kind,
        __version__,
        jinja2.__version__,
        name(e.autoescape),
        name(e.finalize),
        name(e.undefined),
        e.block_start_string,
        e.block_end_string,
        e.variable_start_string,
        e.variable_end_string,
        e.comment_start_string,
        e.comment_end_string,
        repr(e.line_statement_prefix),
        repr(e.line_comment_prefix),
        repr((e.trim_blocks, e.lstrip_blocks, e.keep_trailing_newline, e.newline_sequence)),
        repr((e.optimized, e.is_async)),
        ",".join(sorted(e.extensions)),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def attach(environment: jinja2.Environment, kind: str) -> None:
    """Give ``environment`` the configured cache (once; none if none is configured). Its
    entries are named by ``kind`` and :func:`settings_digest`: a page's template compiled
    without escaping, or by another version, is never run as the page's."""
    if environment in _attached:
        return
    _attached.add(environment)
    environment.bytecode_cache = (
        _cache(_directory, f"{kind}-{settings_digest(environment, kind)}")
        if _directory is not None
        else None
    )


def _cache(directory: Path, prefix: str) -> jinja2.BytecodeCache:
    from jinja2 import FileSystemBytecodeCache

    class _Cache(FileSystemBytecodeCache):
        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            # Through evalgate's one reader, as a private file: a regular file of the user's
            # that no one else can write, never a link, never a pipe to wait on.
            from evalgate import files
            from evalgate.errors import UserError

            try:
                data = files.read_bytes(
                    Path(self._get_cache_filename(bucket)), "compiled template", private=True
                )
            except UserError:
                return  # missing, or not one to trust: compiled again
            bucket.load_bytecode(io.BytesIO(data))

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            # A folder that cannot be written (a full disk, another's image): compile next time.
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)
                prune(directory, keep=Path(self._get_cache_filename(bucket)).name)

    return _Cache(str(directory), f"{prefix}-%s.jinja")


def prune(directory: Path, keep: str = "", now: float | None = None) -> int:
    """Remove the entries in ``directory`` last written more than ``PRUNE_AFTER`` seconds
    before ``now``, but ``keep``: only files named as entries are, regular files of this
    user's (never a link, never a folder). How many were removed."""
    cutoff = (time.time() if now is None else now) - PRUNE_AFTER
    uid = _uid()
    removed = 0
    with os.scandir(directory) as found:
        for entry in found:
            if entry.name == keep or not _ENTRY.fullmatch(entry.name):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if (
                    stat.S_ISREG(info.st_mode)
                    and (uid is None or info.st_uid == uid)
                    and info.st_mtime < cutoff
                ):
                    os.unlink(entry.path)
                    removed += 1
    return removed
