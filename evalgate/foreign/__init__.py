"""Results other harnesses made, read into evalgate's run model so the gate decides on them.

``evalgate gate --baseline A --candidate B`` reads promptfoo's output (``promptfoo eval -o
FILE.json``), Inspect's logs (``.eval`` archives and ``.json``) and JUnit XML (``pytest
--junitxml``), told apart by their content or named with ``--format``. Each reader is one
module; build.py makes the run. A file that cannot be read (truncated, of an unknown version,
from an unfinished run, with nothing to pair) is one line naming it and what to do.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Literal, get_args

from evalgate import files
from evalgate.errors import RunFileError
from evalgate.foreign import inspect, junit, promptfoo
from evalgate.foreign.build import ForeignRun
from evalgate.limits import excerpt
from evalgate.runs.schema import MAX_RUN_BYTES, RUN_HEAD, Run

Format = Literal["promptfoo", "inspect", "junit"]
FORMATS: tuple[str, ...] = get_args(Format)
_READERS = {"promptfoo": promptfoo.read, "inspect": inspect.read, "junit": junit.read}

# How much of a file is read to tell an evalgate run file from another harness's results: a
# gate reads each file it compares once more, so this stays a head, not the whole file.
_SNIFF = 1 << 16

__all__ = ["FORMATS", "Format", "detect", "read_results"]


def detect(path: Path, data: bytes) -> str | None:
    """The foreign format of a file by its content, or None (an evalgate run file, or unknown)."""
    if data[:4] == b"PK\x03\x04" or path.suffix.lower() == ".eval":
        return "inspect"
    if junit.looks_like(data):
        return "junit"
    head = data.lstrip()[:1]
    if head != b"{":
        return None
    try:
        whole = json.loads(data)
    except (UnicodeDecodeError, ValueError, RecursionError):
        # A JSON file cut short: tell its format by the words near its start, to name it.
        start = data[:4096]
        if b'"evalId"' in start:
            return "promptfoo"
        if b'"eval"' in start and b'"status"' in start:
            return "inspect"
        return None
    if promptfoo.looks_like(whole):
        return "promptfoo"
    if inspect.looks_like(whole):
        return "inspect"
    return None


def is_foreign(path: Path) -> bool:
    """Whether ``path`` is a file of another harness's results (not an evalgate run file)."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as raw:
            head = raw.read(_SNIFF + 1)
    except OSError:
        head = None  # read as before, to fail as before
    if head is not None and (len(head) <= _SNIFF or not head.lstrip().startswith(b"{")):
        # The whole file, or a head that alone tells (an archive, XML, not JSON at all).
        return detect(path, head) is not None
    if head is not None and RUN_HEAD.match(head):
        # An evalgate run file (its first field is schema_version): not read on, however long.
        return False
    return (
        detect(path, files.read_bytes(path, "results file", RunFileError, limit=MAX_RUN_BYTES))
        is not None
    )


def read_foreign(path: Path, format: str | None = None, root: Path | None = None) -> ForeignRun:
    """The results file ``path`` read (``format``, else told by its content); with ``root``,
    refused when it leads out of that folder (a link in a checkout, say)."""
    data = files.read_bytes(path, "results file", RunFileError, limit=MAX_RUN_BYTES, root=root)
    found = format or detect(path, data)
    if found is None:
        raise RunFileError(
            "not a results file evalgate reads (promptfoo output, an Inspect log, JUnit XML)",
            where=str(path),
            fix="pass the file the harness wrote, or name its format with "
            "--results-format promptfoo|inspect|junit",
        )
    if found not in _READERS:
        raise RunFileError(f"unknown results format {found!r}", fix=f"use {', '.join(FORMATS)}")
    try:
        return _READERS[found](path, data)
    except RunFileError:
        raise
    except (
        ArithmeticError,  # an integer past any float, say
        AttributeError,
        IndexError,
        KeyError,
        TypeError,
        ValueError,
        RuntimeError,
        RecursionError,
        zlib.error,
    ) as exc:
        # A reader takes each field as its tool's types give it; one of another shape that it
        # did not foresee is still the file's fault: one line naming it, never a traceback.
        raise RunFileError(
            f"not {found} results of a shape evalgate reads ({type(exc).__name__}: "
            f"{excerpt(str(exc), 120)})",
            where=str(path),
            fix=f"pass the file {found} itself wrote, unedited",
        ) from None


def read_results(path: Path, format: str | None = None) -> Run:
    """The run a foreign results file stands for."""
    return read_foreign(path, format).run()
