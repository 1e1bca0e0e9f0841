"""Peak memory of `evalgate run` and `evalgate report` against the size of one reply.

    python -m benchmarks.memory [--sizes 1000,1000000,10000000] [--cases 20]

A suite of N cases on the `command` backend, whose program answers every case with a small
JSON label, except the first case, whose label is SIZE characters long (a model that rambles
inside the label field). Each command runs in its own process; its peak resident memory
(`ru_maxrss` from wait4) and what it wrote are printed. The target: memory stays flat in the
size of the reply (at most 10 x the reply's size above the small-reply baseline, and under
500 MB at 10 MB), and no rendered output grows with it beyond the run file itself.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPLY = """\
import json, sys
case = json.load(sys.stdin)
size = int(sys.argv[1]) if case["id"] == "c000" else 0
print(json.dumps({"category": "x" * size if size else "parts"}))
"""


def write_suite(root: Path, cases: int, size: int) -> Path:
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "v1.txt").write_text("Classify the message.\n", encoding="utf-8")
    (root / "reply.py").write_text(REPLY, encoding="utf-8")
    with (root / "cases.jsonl").open("w", encoding="utf-8") as out:
        for i in range(cases):
            record = {"id": f"c{i:03d}", "category": "parts", "message": f"message {i}"}
            out.write(json.dumps(record) + "\n")
    suite = {
        "prompts": "prompts/*.txt",
        "cases": "cases.jsonl",
        "fields": {"input": ["message"], "expected": "category"},
        "template": "{{ message }}",
        "model": {
            "backend": "command",
            "name": "rambler",
            "options": {"command": [sys.executable, "reply.py", str(size)], "timeout_s": 120},
        },
        "scorer": {"kind": "label", "field": "category"},
        "concurrency": 4,
    }
    config = root / "evalgate.yml"
    config.write_text(yaml.safe_dump({"version": 1, "suites": {"s": suite}}), encoding="utf-8")
    return config


def measure(argv: list[str], cwd: Path) -> tuple[float, float, int, int]:
    """(peak RSS in MB, seconds, exit code, bytes written to stdout) of one evalgate command."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "evalgate", *argv],
            cwd=cwd,
            stdout=out,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "NO_COLOR": "1"},
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0, os.SEEK_END)
        written = out.tell()
    return usage.ru_maxrss / 1024, time.perf_counter() - started, child.returncode, written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,1000000,10000000")
    parser.add_argument("--cases", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"Peak RSS of each command, {args.cases} cases, the first case's label SIZE characters")
    print(
        f"{'reply size':>11} {'command':<22} {'peak RSS':>9} {'time':>7} {'exit':>4} {'output':>12}"
    )
    peaks: dict[int, float] = {}
    ok = True
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "suite"
            config = write_suite(root, args.cases, size)
            commands = [
                ("run", ["run", "v1", "--config", str(config)]),
                ("report (text)", ["report", "latest", "--config", str(config)]),
                (
                    "report (markdown)",
                    ["report", "latest", "--config", str(config), "--format", "markdown"],
                ),
                (
                    "report --html",
                    [
                        "report",
                        "latest",
                        "--config",
                        str(config),
                        "--html",
                        str(root / "page.html"),
                    ],
                ),
            ]
            run_file = 0
            for label, argv in commands:
                rss, seconds, code, written = measure(argv, root)
                if label == "report --html" and (root / "page.html").exists():
                    written = (root / "page.html").stat().st_size
                if label == "run":
                    runs = list((root / ".evalgate" / "runs").glob("*.json"))
                    run_file = runs[0].stat().st_size if runs else 0
                peaks[size] = max(peaks.get(size, 0.0), rss)
                print(
                    f"{size:>11,} {label:<22} {rss:>6.0f} MB {seconds:>6.1f}s {code:>4} "
                    f"{written:>10,} B"
                )
                if code != 0:
                    ok = False
            print(f"{'':>11} {'(the run file)':<22} {'':>9} {'':>7} {'':>4} {run_file:>10,} B")
    small = peaks[min(sizes)]
    for size in sizes:
        growth = peaks[size] - small
        limit = 10 * size / 2**20
        verdict = "ok" if growth <= max(limit, 20) and peaks[size] < 500 else "MISSED"
        ok = ok and verdict == "ok"
        print(
            f"reply {size:>11,}: peak {peaks[size]:.0f} MB, {growth:+.0f} MB over the smallest "
            f"(target: at most {max(limit, 20):.0f} MB more, under 500 MB): {verdict}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
