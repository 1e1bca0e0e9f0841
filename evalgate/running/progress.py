"""Progress for long runs: a redrawn line on a terminal, a plain line every few seconds in CI."""

from __future__ import annotations

import time
from typing import TextIO

from evalgate.running.execute import Progress


class ProgressPrinter:
    def __init__(self, stream: TextIO, *, interactive: bool, every_s: float = 5.0) -> None:
        self.stream = stream
        self.interactive = interactive
        self.every_s = every_s
        self._last = time.perf_counter()

    def line(self, p: Progress) -> str:
        elapsed = max(time.perf_counter() - p.started, 1e-9)
        rate = p.done / elapsed
        eta = (p.total - p.done - p.unsent) / rate if rate > 0 else float("inf")
        eta_text = f"{eta:.0f}s" if eta != float("inf") else "?"
        hits = f" · {p.cache_hits} cached" if p.cache_hits else ""
        unsent = f" · {p.unsent} not sent" if p.unsent else ""
        return (
            f"{p.done}/{p.total} calls · {p.errors} errors{hits}{unsent} · {rate:.1f}/s · "
            f"ETA {eta_text}"
        )

    def __call__(self, p: Progress) -> None:
        now = time.perf_counter()
        last = p.done + p.unsent == p.total
        if self.interactive:
            if last or now - self._last >= 0.1:
                self.stream.write("\r\033[K" + self.line(p) + ("\n" if last else ""))
                self.stream.flush()
                self._last = now
        elif last or now - self._last >= self.every_s:
            self.stream.write(self.line(p) + "\n")
            self.stream.flush()
            self._last = now
