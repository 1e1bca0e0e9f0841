"""The redactor on the hot path: every reply and every error passes it.

    python -m benchmarks.redact [--held 5]

Holds ``--held`` keys shaped as Anthropic keys (the redactor looks for each in every form), then
times ``redact_held`` (what a reply passes) and ``redact`` (what an error passes) on texts of
1 KB, 3 MB and 30 MB: ordinary words, one letter repeated, random base64 (the worst case for
the block search: every character is of a key's alphabet) and text with non-ASCII letters.
Targets: a 1 KB reply under 50 µs; 30 MB under 2 s; and linear (30 MB within 20 x 3 MB: 10 x, and a shared machine's noise).
"""

from __future__ import annotations

import argparse
import base64
import random
import string
import sys
import time
from collections.abc import Callable

from evalgate.redact import hold, redact, redact_held

SIZES = (1_000, 3_000_000, 30_000_000)


def texts(size: int, rng: random.Random) -> dict[str, str]:
    words = "the bike is ready to collect on friday after the service "
    piece = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(3_000))
    return {
        "words": (words * (size // len(words) + 1))[:size],
        "one letter": "x" * size,
        "random base64": base64.b64encode(piece.encode()).decode() * (size // 4_000 + 1),
        "non-ASCII": ("Größe İstanbul — ça va " * (size // 23 + 1))[:size],
    }


def best(fn: Callable[[str], str], text: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held", type=int, default=5)
    args = parser.parse_args(argv)
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + "-_"
    keys = [
        "sk-ant-api03-" + "".join(rng.choice(alphabet) for _ in range(95)) for _ in range(args.held)
    ]
    started = time.perf_counter()
    hold(*keys)
    print(f"holding {args.held} keys: {1000 * (time.perf_counter() - started):.1f} ms to build")
    print(f"{'text':<14} {'size':>10} {'redact_held':>12} {'redact':>12}")
    ok = True
    by_size: dict[tuple[str, int], float] = {}
    for size in SIZES:
        repeat = 200 if size < 10_000 else 2
        for name, text in texts(size, rng).items():
            held = best(redact_held, text, repeat)
            full = best(redact, text, repeat)
            by_size[name, size] = held
            unit = ("µs", 1e6) if size < 10_000 else ("ms", 1e3)
            print(
                f"{name:<14} {size:>10,} {held * unit[1]:>10.1f}{unit[0]:>2} "
                f"{full * unit[1]:>10.1f}{unit[0]:>2}"
            )
            if size == 1_000 and held > 50e-6:
                ok = False
                print(f"  MISSED: a 1 KB reply took {held * 1e6:.0f} µs (target 50 µs)")
            if size == 30_000_000 and held > 2.0:
                ok = False
                print(f"  MISSED: 30 MB took {held:.2f} s (target 2 s)")
    for name in texts(10, rng):
        ratio = by_size[name, 30_000_000] / max(by_size[name, 3_000_000], 1e-9)
        print(f"{name}: 30 MB / 3 MB = {ratio:.1f} (linear: about 10)")
        if ratio > 20:  # 10 if linear; a shared machine's noise on top
            ok = False
            print("  MISSED: not linear")
    print("all targets met" if ok else "a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
