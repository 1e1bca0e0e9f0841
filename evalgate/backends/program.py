"""Running a user's program (a tool command): its input on stdin, its output capped, a deadline.

A program's output is untrusted text of any size: stdout is read up to a cap (more ends the
program and is reported), stderr keeps its last bytes only. The program runs in a session of
its own, so a deadline or an overflow ends it and everything it started, and a child left
holding the pipes cannot keep the case waiting.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from evalgate.limits import PROGRAM_OUTPUT, PROGRAM_STDERR

_CHUNK = 64 * 1024
# After the program exits (or is ended), how long its pipes may stay open before the readers
# stop waiting for them.
_DRAIN_S = 2.0


class ProgramTimeout(Exception):
    """The program was still running at its deadline (it has been ended)."""

    def __init__(self, stderr: str) -> None:
        super().__init__("timed out")
        self.stderr = stderr


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    # The last PROGRAM_STDERR bytes of stderr.
    stderr: str
    # True when stdout passed the cap: the program was ended and stdout holds the cap's worth.
    overflowed: bool = False


class _Reader(threading.Thread):
    """Reads one pipe to its end: the first ``limit`` bytes (head) or the last (tail)."""

    def __init__(
        self, pipe: IO[bytes], limit: int, tail: bool, on_overflow: Callable[[], None] | None
    ) -> None:
        super().__init__(daemon=True)
        self.pipe, self.limit, self.tail = pipe, limit, tail
        self.on_overflow = on_overflow
        self.data = bytearray()
        self.overflowed = False

    def run(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            while chunk := self.pipe.read1(_CHUNK):  # type: ignore[attr-defined]
                self.data += chunk
                if len(self.data) <= self.limit:
                    continue
                if self.tail:
                    del self.data[: len(self.data) - self.limit]
                    continue
                del self.data[self.limit :]
                self.overflowed = True
                if self.on_overflow is not None:
                    self.on_overflow()
                return

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", errors="replace")


def _end(process: subprocess.Popen[bytes]) -> None:
    """End the program and everything in its session."""
    with contextlib.suppress(OSError):
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:  # pragma: no cover - the action runs on Linux
            process.kill()


def run_program(
    argv: Sequence[str],
    *,
    stdin: str,
    timeout_s: float,
    cwd: Path,
    env: Mapping[str, str],
    limit: int = PROGRAM_OUTPUT,
) -> Finished:
    """Run ``argv`` to its end or its deadline; OSError when it cannot start."""
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=os.name == "posix",
    )
    assert process.stdin and process.stdout and process.stderr
    out = _Reader(process.stdout, limit, tail=False, on_overflow=lambda: _end(process))
    err = _Reader(process.stderr, PROGRAM_STDERR, tail=True, on_overflow=None)
    out.start()
    err.start()

    def feed() -> None:
        assert process.stdin is not None
        with contextlib.suppress(OSError, ValueError):
            process.stdin.write(stdin.encode("utf-8"))
        with contextlib.suppress(OSError, ValueError):
            process.stdin.close()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    # A blocking wait in a thread of its own: Popen.wait(timeout) polls, with sleeps of up to
    # 50 ms, which would add to every call.
    exited = threading.Event()

    def reap() -> None:
        process.wait()
        exited.set()

    threading.Thread(target=reap, daemon=True).start()
    if not exited.wait(timeout_s):
        _end(process)
        exited.wait()
        err.join(_DRAIN_S)
        _close(process)
        raise ProgramTimeout(err.text())
    returncode = process.returncode
    # Whatever the program left running must not hold the pipes (or the machine) past its end;
    # what it printed stays in the pipes for the readers.
    _end(process)
    out.join(_DRAIN_S)
    err.join(_DRAIN_S)
    writer.join(_DRAIN_S)
    _close(process)
    return Finished(
        returncode=returncode, stdout=out.text(), stderr=err.text(), overflowed=out.overflowed
    )


def _close(process: subprocess.Popen[bytes]) -> None:
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
