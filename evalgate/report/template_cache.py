"""Compiled report templates kept between commands, as Python keeps compiled modules.

Compiling a report's template is most of what a short command does after its imports (43 ms of
``evalgate gate``'s 0.33 s for the terminal report, 0.1 s for the pull request comment), and the
templates are evalgate's own: they change only with evalgate. jinja2's bytecode cache keeps the
compiled code in a folder, keyed by the template's name and checked against its source and the
running jinja2 and Python, so a stale entry is compiled again, never used.

The folder is ``EVALGATE_TEMPLATE_CACHE`` if set (``off`` for none), else
``$XDG_CACHE_HOME/evalgate/templates`` (``~/.cache/evalgate/templates``). What it holds is code
evalgate runs, so it is used only if it is a real folder (no symbolic link) of the user running
evalgate that no one else can write: a shared or foreign folder is ignored, never trusted. The
image sets its own, read-only, filled when the image is built; a folder that cannot be written
only means each command compiles what it shows.
"""

from __future__ import annotations

import contextlib
import os
import stat
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2

VARIABLE = "EVALGATE_TEMPLATE_CACHE"
OFF = "off"

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


def trusted(directory: Path) -> bool:
    """Whether ``directory`` may hold code evalgate runs: made if missing (mode 0700), then a
    folder (not a link) owned by this user, which neither its group nor others can write."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(directory)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode):
        return False
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return False
    return not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def configure(env: Mapping[str, str]) -> None:
    """Use the cache folder ``env`` names from now on (the CLI calls this once, at start)."""
    global _directory
    directory = folder(env)
    _directory = directory if directory is not None and trusted(directory) else None
    _attached.clear()


def attach(environment: jinja2.Environment, kind: str) -> None:
    """Give ``environment`` the configured cache (once; none if none is configured). jinja2
    keys an entry by the template's name and source only, so each environment that compiles
    differently (HTML escaping on or off) has a ``kind`` of its own, and its own entries: a
    page's template compiled without escaping is never run as the page's."""
    if environment in _attached:
        return
    _attached.add(environment)
    environment.bytecode_cache = _cache(_directory, kind) if _directory is not None else None


def _cache(directory: Path, kind: str) -> jinja2.BytecodeCache:
    from jinja2 import FileSystemBytecodeCache

    class _Cache(FileSystemBytecodeCache):
        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            # A folder that cannot be written (the image's, a full disk): compile next time.
            with contextlib.suppress(OSError):
                super().dump_bytecode(bucket)

    return _Cache(str(directory), f"{kind}-%s.jinja")
