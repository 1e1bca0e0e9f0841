"""The holdout guard on the hot path: every request of a pull-request job passes it.

    python -m benchmarks.leakguard [--repeat 5]

Builds the guard of a pull-request job from each bundled example (its holdout cases, less what
its public cases carry, as ``evalgate.action.pr.leak_guards`` does) and the requests of its dev
cases with the shipped prompt (``build_jobs``, as the run sends them), then times
``LeakGuard.refusal`` on each request: the first pass over the cases (nothing of them seen
before) and the best of ``--repeat`` later passes (a suite's repeats). Building the guard is
timed apart (once a job). The same requests are also checked as the guard checked them before
it kept each text's pieces: the whole request's words shingled anew (``LeakIndex.carried``).
Targets: the first pass at least twice as fast as that; a repeated request under 1 ms.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalgate.cases.leakguard import Part, base_guards, request_parts, words
from evalgate.config.load import load_config
from evalgate.running.suite import build_jobs, load_prompt, load_suite_cases

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ("bike-shop", "support-agent")
TARGET_MS = 1.0


@dataclass
class Row:
    requests: int
    build_ms: float
    # ms a request, on the first pass over the requests (their texts new) and the best later
    # pass (repeats): the whole request's words shingled anew each time (as the guard did
    # before it kept each text's pieces), then the guard's refusal.
    whole_first_ms: float
    whole_later_ms: float
    first_ms: float
    later_ms: float
    refused: int


def _pass(check: Callable[[list[Part]], object], parts: list[list[Part]]) -> float:
    started = time.perf_counter()
    for p in parts:
        check(p)
    return (time.perf_counter() - started) / len(parts) * 1e3


def measure(example: str, repeat: int) -> Row:
    loaded = load_config(ROOT / "examples" / example / "evalgate.yml")
    _, suite = loaded.suite(None)
    cases = load_suite_cases(loaded, suite).cases
    held = [c for c in cases if c.split == "holdout"]
    public = [c for c in cases if c.split != "holdout"]
    prompt = load_prompt(loaded, suite, suite.ship or sorted(loaded.prompt_files(suite))[-1])
    parts = [request_parts(j.request, "model") for j in build_jobs(suite, prompt, public, 1)]
    words.cache_clear()
    started = time.perf_counter()
    guard = base_guards(held, public).runs
    build = (time.perf_counter() - started) * 1e3
    index = guard.index

    def whole(request: list[Part]) -> object:
        return index.carried([w for _, texts in request for t in texts for w in words(t)])

    words.cache_clear()  # the first passes read the requests' texts as new
    whole_first = _pass(whole, parts)
    whole_later = min(_pass(whole, parts) for _ in range(repeat))
    refused = sum(guard.refusal(p) is not None for p in parts)
    guard = base_guards(held, public).runs  # nothing kept from the passes above
    words.cache_clear()
    first = _pass(guard.refusal, parts)
    later = min(_pass(guard.refusal, parts) for _ in range(repeat))
    return Row(len(parts), build, whole_first, whole_later, first, later, refused)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'':<34} {'whole request':>19} {'kept pieces':>19}")
    print(
        f"{'example':<14} {'requests':>8} {'build':>10} {'first':>9} {'later':>9} "
        f"{'first':>9} {'later':>9} {'refused':>7}   (ms a request)"
    )
    ok = True
    for example in EXAMPLES:
        row = measure(example, args.repeat)
        print(
            f"{example:<14} {row.requests:>8} {row.build_ms:>8.1f}ms {row.whole_first_ms:>9.3f} "
            f"{row.whole_later_ms:>9.3f} {row.first_ms:>9.3f} {row.later_ms:>9.3f} "
            f"{row.refused:>7}"
        )
        if row.first_ms > row.whole_first_ms / 2:
            ok = False
            print("  MISSED: the first pass is not twice as fast as shingling whole requests")
        if row.later_ms > TARGET_MS:
            ok = False
            print(f"  MISSED: {row.later_ms:.2f} ms a request (target {TARGET_MS} ms)")
        if row.refused:
            ok = False
            print(f"  MISSED: {row.refused} dev requests refused (expected none)")
    print("all targets met" if ok else "a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
