"""What the action's image can run: the backends whose dependencies it installs.

The Dockerfile installs evalgate with the extras named here, and constraints.txt pins their
dependencies (tests/test_packaging.py holds both to this list); `evalgate doctor` holds a
workflow's suites to it."""

from __future__ import annotations

from collections.abc import Iterable

from evalgate.backends.base import backend_extra

# The optional extras the action's image installs: every backend evalgate ships runs in it.
IMAGE_EXTRAS: tuple[str, ...] = ("openai",)
# The programs a `command` backend can start in the image besides the repository's own files:
# the base image is Debian's python:3.11-slim.
IMAGE_PROGRAMS: frozenset[str] = frozenset({"python", "python3", "sh", "bash", "env"})


def missing_from_image(backends: Iterable[str], extras: Iterable[str] = IMAGE_EXTRAS) -> list[str]:
    """The backends (by name) whose optional dependency an image with ``extras`` lacks."""
    have = set(extras)
    return sorted({b for b in backends if (extra := backend_extra(b)) and extra not in have})


def program_in_image(program: str) -> bool:
    """Whether a `command` backend's program can start in the image: one of the base image's
    programs, or a path (a file of the repository, which the action's checkout mounts)."""
    return program in IMAGE_PROGRAMS or "/" in program
