"""``promptfoo init`` (and ``promptfoo redteam init``) answered in a pseudo-terminal: the corpus's
promptfoo configs that promptfoo itself writes are made, and checked, by running promptfoo.

Each MANIFEST.json entry made this way has ``init``: the command's words after ``promptfoo``
and the answers, in order. An answer is a number (a select prompt: that many steps down the list,
then Enter), ``"text:WORDS"`` (an input prompt: the words, then Enter) or ``"no"`` (a confirm).

    python -m tests.support.promptfoo_init PROMPTFOO OUT_DIR   # write every entry's files
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

DOWN, ENTER = b"\x1b[B", b"\r"
QUIET_S = 0.4  # the prompt has finished drawing once the program is this long silent
PROMPT_WAIT_S = 60.0


def _keys(answer: int | str) -> bytes:
    if isinstance(answer, int):
        return DOWN * answer + ENTER
    if answer.startswith("text:"):
        return answer.removeprefix("text:").encode() + ENTER
    if answer == "no":
        return b"n" + ENTER
    raise ValueError(f"an answer is a number, 'text:WORDS' or 'no', not {answer!r}")


def _read(fd: int, seconds: float) -> bytes | None:
    """What the program wrote within ``seconds``; None once it has closed the terminal."""
    ready, _, _ = select.select([fd], [], [], seconds)
    if not ready:
        return b""
    try:
        data = os.read(fd, 65536)
    except OSError:
        return None
    return data or None


_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _asking(since: bytes) -> bool:
    """Whether the newest prompt drawn since the last answer is still open: Inquirer draws an
    open prompt's line with a leading ``?`` and redraws it with ``✔`` once answered."""
    text = _ESCAPE.sub("", since.decode(errors="replace"))
    marks = [line.lstrip()[:1] for line in re.split(r"[\r\n]", text) if line.strip()]
    marks = [m for m in marks if m in ("?", "✔")]
    return bool(marks) and marks[-1] == "?"


def _settle(fd: int, seen: bytearray) -> bool:
    """Read until a prompt is open and the program has gone quiet (it has finished drawing);
    False when it closed the terminal first."""
    deadline = time.monotonic() + PROMPT_WAIT_S
    since = bytearray()
    while time.monotonic() < deadline:
        data = _read(fd, QUIET_S)
        if data is None:
            return False
        if data:
            seen += data
            since += data
        elif _asking(bytes(since)):
            return True
    raise TimeoutError(
        f"no prompt within {PROMPT_WAIT_S:.0f} s; the program wrote: {seen[-800:]!r}"
    )


def run_init(promptfoo: Path, words: list[str], answers: list[int | str], out: Path) -> str:
    """Run ``promptfoo WORDS DIR`` in ``out``'s parent, ``out`` being DIR, answering
    ``answers``; what it wrote to the terminal."""
    with tempfile.TemporaryDirectory() as home:
        # Consent to red-team plugins given beforehand, so `redteam init` neither asks for an
        # email address nor sends one to promptfoo's servers (it does whenever it asks).
        Path(home, "promptfoo.yaml").write_text("hasHarmfulRedteamConsent: true\n")
        env = {
            **os.environ,
            "PROMPTFOO_CONFIG_DIR": home,
            "PROMPTFOO_DISABLE_TELEMETRY": "1",
            "PROMPTFOO_DISABLE_UPDATE": "1",
            "TERM": "xterm",
        }
        # promptfoo init writes to ./DIR, whatever DIR is: run it beside the folder.
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, terminal = pty.openpty()
        # A terminal of 60 rows and 200 columns (its select lists size themselves by the rows).
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))
        child: subprocess.Popen[bytes] | None = None
        seen = bytearray()
        try:
            child = subprocess.Popen(
                [str(promptfoo), *words, out.name],
                cwd=out.parent,
                stdin=terminal,
                stdout=terminal,
                stderr=terminal,
                env=env,
                start_new_session=True,
            )
            # Only the child holds the terminal now: its exit ends our reads (EIO).
            os.close(terminal)
            terminal = -1
            for answer in answers:
                if not _settle(fd, seen):
                    break
                os.write(fd, _keys(answer))
            deadline = time.monotonic() + PROMPT_WAIT_S
            while time.monotonic() < deadline and child.poll() is None:
                data = _read(fd, 1.0)
                if data is None:
                    break
                seen += data
        finally:
            if child is not None and child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)  # its session: node and any helper
            if child is not None:
                child.wait()
            if terminal >= 0:
                os.close(terminal)
            os.close(fd)
    return seen.decode(errors="replace")


def made_by_init(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries promptfoo's init commands write."""
    return [e for e in manifest["files"] if "init" in e]


def main(argv: list[str]) -> int:
    promptfoo, out = Path(argv[0]), Path(argv[1])
    corpus = Path(__file__).resolve().parents[1] / "data" / "third_party"
    manifest = json.loads((corpus / "MANIFEST.json").read_text())
    for entry in made_by_init(manifest):
        folder = out / entry["id"]
        run_init(promptfoo, entry["init"]["command"], entry["init"]["answers"], folder)
        print(f"{entry['id']}: {sorted(p.name for p in folder.iterdir())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
