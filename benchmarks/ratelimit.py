"""Adaptive rate limiting against fixed concurrency, with the Messages stand-in enforcing a limit.

    python -m benchmarks.ratelimit                     # 300 calls, 1200 rpm, 50 ms, 32 in flight
    python -m benchmarks.ratelimit --rounds 3          # alternate the two modes three times

The same suite runs twice through ``evalgate.pipeline.run_suite`` with the real
``AnthropicBackend``: once with ``adaptive_rate_limit: true`` (calls paced by the
``anthropic-ratelimit-*`` headers, every worker paused by a 429's retry-after) and once with
``false`` (fixed concurrency: a worker that gets a 429 backs off alone). The stand-in runs in a
separate process with a requests-per-minute limit; its buckets hold ``--window-s`` seconds of
the limit (the API may enforce a per-minute limit over shorter intervals). Printed: the 429s
the stand-in answered, errors, wall time and calls a second, and the throughput ratio
adaptive / fixed. Targets (from the issue): fewer 429s, and a ratio of at least 0.95. The exit
code is 0 when both are met.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "bike-shop"
MODEL = "claude-haiku-4-5"
MIN_RATIO = 0.95


def serve(conn: Connection, knobs: dict[str, Any]) -> None:
    """Run the stand-in: send its URL, then answer "reset" / "stats" until "stop"."""
    from evalgate.backends.fake import load_rules
    from tests.support.messages_server import Knobs, MessagesServer

    rules = load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)
    with MessagesServer(rules, Knobs(**knobs), log_limit=0) as server:
        conn.send(server.url)
        while (command := conn.recv()) != "stop":
            if command == "reset":
                server.reset()
                conn.send(None)
            else:
                stats = server.stats()
                conn.send({"by_status": stats.by_status, "errors": len(server.errors)})


def write_suite(root: Path, cases: int) -> Path:
    """The bike-shop suite on the anthropic backend, its cases repeated with new ids."""
    shutil.copytree(EXAMPLE / "prompts", root / "prompts")
    lines = (EXAMPLE / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    with (root / "cases.jsonl").open("w", encoding="utf-8") as out:
        for i in range(cases):
            record = records[i % len(records)] | {"id": f"c{i:05d}", "split": "dev"}
            out.write(json.dumps(record) + "\n")
    suite = {
        "prompts": "prompts/*.txt",
        "cases": "cases.jsonl",
        "fields": {"input": ["message"], "expected": "category"},
        "template": "<message>\n{{ message }}\n</message>",
        "model": {"backend": "anthropic", "name": MODEL, "max_tokens": 64},
        "scorer": {"kind": "label", "field": "category"},
    }
    config = root / "evalgate.yml"
    config.write_text(yaml.safe_dump({"version": 1, "suites": {"shop": suite}}), encoding="utf-8")
    return config


@dataclass
class Result:
    mode: str
    calls: int
    status_429: int
    errors: int
    attempts: int
    wall_s: float

    @property
    def throughput(self) -> float:
        return self.calls / self.wall_s


def run_once(config: Path, url: str, adaptive: bool, concurrency: int) -> tuple[int, int, float]:
    """(errors, attempts, wall seconds) of one run of the suite."""
    from evalgate.backends.anthropic import AnthropicBackend
    from evalgate.backends.base import BackendContext
    from evalgate.config.load import load_config
    from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite

    loaded = load_config(config)
    name, suite = loaded.suite(None)
    # Attempts enough that fixed concurrency does not fail cases: the comparison is speed.
    options = {"adaptive_rate_limit": adaptive, "retry": {"max_attempts": 20}}
    settings = suite.model.model_copy(update={"options": options})
    env = {"ANTHROPIC_API_KEY": "sk-bench", "ANTHROPIC_BASE_URL": url}
    backend = AnthropicBackend(settings, BackendContext(base_dir=loaded.root, env=env))
    spec = RunSpec(
        suite_name=name,
        suite=suite,
        prompt=load_prompt(loaded, suite, "v3"),
        cases=load_suite_cases(loaded, suite),
        concurrency=concurrency,
    )
    started = time.perf_counter()
    try:
        run = run_suite(spec, backend, loaded.root)
    finally:
        backend.close()
    wall = time.perf_counter() - started
    outcomes = [o for c in run.cases for o in c.outcomes]
    return run.errors, sum(o.attempts for o in outcomes), wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ratelimit", description=__doc__)
    parser.add_argument("--requests", type=int, default=300, help="calls (cases) per run")
    parser.add_argument("--rpm", type=float, default=1200, help="the stand-in's requests a minute")
    parser.add_argument("--window-s", type=float, default=2.0, help="bucket size in seconds")
    parser.add_argument("--latency-ms", type=float, default=50, help="the stand-in's latency")
    parser.add_argument("--concurrency", type=int, default=32, help="calls in flight")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each mode, alternated")
    args = parser.parse_args(argv)

    knobs = {
        "latency_s": args.latency_ms / 1000,
        "requests_per_minute": args.rpm,
        "rate_limit_window_s": args.window_s,
    }
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(theirs, knobs), daemon=True)
    server.start()
    url = ours.recv()
    results: list[Result] = []
    try:
        with tempfile.TemporaryDirectory(prefix="evalgate-bench-") as tmp:
            config = write_suite(Path(tmp), args.requests)
            for _ in range(args.rounds):
                for adaptive in (True, False):
                    ours.send("reset")
                    ours.recv()
                    # After a reset, the first request finds full buckets.
                    errors, attempts, wall = run_once(config, url, adaptive, args.concurrency)
                    ours.send("stats")
                    stats = ours.recv()
                    if stats["errors"]:
                        print("the stand-in failed: see its errors", file=sys.stderr)
                        return 2
                    results.append(
                        Result(
                            mode="adaptive" if adaptive else "fixed",
                            calls=args.requests,
                            status_429=stats["by_status"].get(429, 0),
                            errors=errors,
                            attempts=attempts,
                            wall_s=wall,
                        )
                    )
    finally:
        ours.send("stop")
        server.join(timeout=10)

    print(
        f"{args.requests} calls, {args.rpm:g} requests/min over {args.window_s:g} s buckets, "
        f"{args.latency_ms:g} ms a call, concurrency {args.concurrency}\n"
    )
    print(f"{'mode':<9} {'429s':>6} {'errors':>6} {'attempts':>8} {'wall s':>7} {'calls/s':>8}")
    for r in results:
        print(
            f"{r.mode:<9} {r.status_429:>6} {r.errors:>6} {r.attempts:>8} "
            f"{r.wall_s:>7.2f} {r.throughput:>8.1f}"
        )
    paced = [r for r in results if r.mode == "adaptive"]
    fixed = [r for r in results if r.mode == "fixed"]
    a429, f429 = sum(r.status_429 for r in paced), sum(r.status_429 for r in fixed)
    fewer = a429 < f429 or a429 == f429 == 0  # a limit never reached: nothing to avoid
    ratio = sum(r.throughput for r in paced) / sum(r.throughput for r in fixed)
    limit = args.rpm / 60
    print(f"\nthe limit allows {limit:.1f} calls/s (plus one bucket at the start)")
    print(f"{'fewer 429s with adaptive pacing':<40} {'yes' if fewer else 'NO':>6}")
    print(
        f"{'throughput ratio adaptive / fixed':<40} {ratio:>6.3f}  "
        f"(target >= {MIN_RATIO}: {'met' if ratio >= MIN_RATIO else 'MISSED'})"
    )
    return 0 if fewer and ratio >= MIN_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
