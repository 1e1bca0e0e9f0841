"""Agent runs at speed: the support-agent suite through the anthropic backend's agent loop.

    python -m benchmarks.agent                    # 4 copies of the cases, 50 ms a call
    python -m benchmarks.agent --copies 10 --latency-ms 100

The Messages stand-in runs in a separate process with a fixed latency per model call, so this
process's CPU is evalgate's (the loop, the fixtures, scoring) and the SDK's. A case's steps are
sequential (each needs the last one's answer), so the bound a perfect runner meets is
(total model calls x latency / concurrency), plus the longest case's own chain. Target: the
wall time within 1.2 x that bound + 1 s. The exit code is 0 when the target is met.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import shutil
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "support-agent"
WALL_FACTOR, WALL_SLACK_S = 1.2, 1.0


def serve(conn: Connection, latency_s: float) -> None:
    from evalgate.backends.fake import load_rules
    from tests.support.messages_server import Knobs, MessagesServer

    rules = load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)
    with MessagesServer(rules, Knobs(latency_s=latency_s), log_limit=0) as server:
        conn.send(server.url)
        conn.recv()
        conn.send(server.stats().requests)


def write_suite(root: Path, copies: int, concurrency: int) -> Path:
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".evalgate"))
    lines = (EXAMPLE / "cases.jsonl").read_text().splitlines()
    out = []
    for copy in range(copies):
        for line in lines:
            case = json.loads(line)
            case["id"] = f"{case['id']}-{copy}"
            case["group"] = f"{case['group']}-{copy}"
            out.append(json.dumps(case))
    (root / "cases.jsonl").write_text("\n".join(out) + "\n")
    config = root / "evalgate.yml"
    text = config.read_text().replace("      backend: fake ", "      backend: anthropic ")
    text = text.replace("        rules_file: fake-rules.yml", "        stream: false")
    text = text.replace("    price_as:", f"    concurrency: {concurrency}\n    price_as:")
    config.write_text(text)
    return config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    latency = args.latency_ms / 1000

    from evalgate.backends.anthropic import AnthropicBackend
    from evalgate.backends.base import BackendContext
    from evalgate.config.load import load_config
    from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite

    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(theirs, latency), daemon=True)
    server.start()
    url = ours.recv()
    with tempfile.TemporaryDirectory() as tmp:
        loaded = load_config(write_suite(Path(tmp) / "suite", args.copies, args.concurrency))
        name, suite = loaded.suite(None)
        env = {"ANTHROPIC_API_KEY": "sk-bench", "ANTHROPIC_BASE_URL": url}
        backend = AnthropicBackend(suite.model, BackendContext(base_dir=loaded.root, env=env))
        spec = RunSpec(
            name, suite, load_prompt(loaded, suite, "v1"), load_suite_cases(loaded, suite)
        )
        cpu0 = time.process_time()
        started = time.perf_counter()
        run = run_suite(spec, backend, loaded.root)
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu0
        backend.close()
    ours.send("stop")
    requests = ours.recv()
    server.join(timeout=10)
    steps = [len(o.steps or []) for c in run.cases for o in c.outcomes]
    calls = sum(steps)
    # the first case goes alone (a bad model fails after one request), then the rest in parallel
    bound = (
        steps[0] * latency + (calls - steps[0]) * latency / args.concurrency + max(steps) * latency
    )
    target = WALL_FACTOR * bound + WALL_SLACK_S
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [
        ("cases", f"{len(run.cases):,}", ""),
        ("model calls (steps)", f"{calls:,} (stand-in saw {requests:,})", "equal"),
        ("steps a case", f"mean {calls / len(steps):.2f}, max {max(steps)}", ""),
        ("wall time", f"{wall:.2f} s", f"<= {target:.2f} s"),
        ("bound", f"{bound:.2f} s", ""),
        ("evalgate CPU per model call", f"{cpu / calls * 1000:.2f} ms", ""),
        ("peak memory (RSS)", f"{peak_mb:.0f} MB", ""),
        ("errors", f"{run.errors}", "0"),
    ]
    width = max(len(r[0]) for r in rows)
    print(
        f"agent loop: {len(run.cases)} dev cases ({args.copies} copies of support-agent), "
        f"{args.latency_ms:g} ms a call, concurrency {args.concurrency}"
    )
    for label, value, goal in rows:
        print(f"  {label:<{width}}  {value:<28} {goal}")
    ok = wall <= target and run.errors == 0 and calls == requests
    print("all targets met" if ok else "a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
