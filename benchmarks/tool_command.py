"""A tool command's cost per call and its memory under a flood of output.

    python -m benchmarks.tool_command                  # 40 calls, a 200 MB flood
    python -m benchmarks.tool_command --calls 100 --flood-mb 500

Each call goes through the agent loop's own path (``resolve``: the capped runner, a session of
its own, the JSON parse) to a small Python tool; the same program run by ``subprocess.run``
(no cap) gives the floor. A second tool prints ``--flood-mb`` to stdout and to stderr: the
case must be an error saying so, and this process's peak memory must not grow with the flood.
Targets: the mean cost per call within 1.25 x the floor + 5 ms; the flood an error; peak memory
up by at most 4 x the stdout cap (1 MiB) + 16 MB. The exit code is 0 when the targets are met.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOL = 'import json, sys; call = json.load(sys.stdin); print(json.dumps({"result": call["input"]}))'
FLOOD = """
import sys
block = b"x" * (1 << 20)
for _ in range({mb}):
    sys.stdout.buffer.write(block)
    sys.stderr.buffer.write(block)
"""
FACTOR, SLACK_MS = 1.25, 5.0


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--flood-mb", type=int, default=200)
    args = parser.parse_args()

    from evalgate.backends.agent import ToolFault, resolve
    from evalgate.limits import PROGRAM_OUTPUT
    from evalgate.trajectory import AgentSpec, ToolCall, ToolSpec

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "tool.py").write_text(TOOL)
        (root / "flood.py").write_text(FLOOD.format(mb=args.flood_mb))
        spec = AgentSpec(tools=(ToolSpec(name="lookup"),), tool_command=(sys.executable, "tool.py"))
        call = ToolCall(name="lookup", input={"order_id": "A1"})
        payload = json.dumps({"case_id": "c", "name": "lookup", "input": call.input})

        started = time.perf_counter()
        for _ in range(args.calls):
            subprocess.run(
                [sys.executable, "tool.py"], input=payload, capture_output=True, text=True, cwd=root
            )
        floor_ms = (time.perf_counter() - started) / args.calls * 1000

        started = time.perf_counter()
        for _ in range(args.calls):
            record = resolve(spec, call, "c", root, {})
        ours_ms = (time.perf_counter() - started) / args.calls * 1000
        answered = record.status == "ok"

        before = peak_mb()
        flood = spec.model_copy(update={"tool_command": (sys.executable, "flood.py")})
        started = time.perf_counter()
        try:
            resolve(flood, call, "c", root, {})
            message = "(no error)"
        except ToolFault as exc:
            message = str(exc)
        flood_s = time.perf_counter() - started
        grown = peak_mb() - before

    target_ms = FACTOR * floor_ms + SLACK_MS
    cap_mb = PROGRAM_OUTPUT / (1 << 20)
    memory_target = 4 * cap_mb + 16
    flood_error = "printed more than" in message
    rows = [
        ("calls", f"{args.calls}", ""),
        ("subprocess.run, no cap (floor)", f"{floor_ms:.1f} ms a call", ""),
        ("the tool command's path", f"{ours_ms:.1f} ms a call", f"<= {target_ms:.1f} ms"),
        ("answered", "yes" if answered else "no", "yes"),
        (f"flood of {args.flood_mb} MB (out and err)", message[:60], "an error"),
        ("flood's time to the error", f"{flood_s:.2f} s", ""),
        ("peak memory growth in the flood", f"{grown:.1f} MB", f"<= {memory_target:.0f} MB"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"tool command: {args.calls} calls of a Python tool, then a flood")
    for label, value, goal in rows:
        print(f"  {label:<{width}}  {value:<62} {goal}")
    ok = ours_ms <= target_ms and answered and flood_error and grown <= memory_target
    print("all targets met" if ok else "a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
