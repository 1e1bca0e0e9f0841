"""Peak memory of `evalgate run` and `evalgate report` by the number of cases, and start-up.

    python -m benchmarks.footprint                       # 2,000 and 20,000 cases
    python -m benchmarks.footprint --cases 2000,20000 --startup-repeats 5

Every command runs in a child process of its own (``python -m evalgate``) against the Messages
stand-in, which runs in another process with no latency. A child's peak is its own VmHWM
(read from /proc/self/status as it exits), not ``ru_maxrss`` from wait4, which also counts
the pages of the parent that forked it. Start-up is wall time from starting the child: to its
exit for ``--version`` and for ``gate`` on two saved run files, and to the stand-in's first
request for ``run`` (a whole run, every case read and every turn rendered as before any
run's first call; the stand-in refuses that request, so the run stops there). Beside each,
the child's CPU time (user + system, from its rusage), which other processes on a shared
machine stretch less than the wall time: for ``run`` that of the run to its refused call. The
best of ``--startup-repeats`` is kept (the machine's load only ever adds to it). evalgate's
bytecode is compiled first, as installing the package compiles it: an editable checkout under
``PYTHONDONTWRITEBYTECODE`` would otherwise compile every module on every start. The report
templates are compiled into a cache of the benchmark's own (``EVALGATE_TEMPLATE_CACHE``), empty
at first: the first `gate` compiles its template and is shown on a row of its own.

Targets (issue 27): `run` at most 150 MB and `report` at most 100 MB at 20,000 cases;
`gate` on two run files within 0.3 s, importing no SDK; `run` at its first request within
0.7 s. The exit code is 0 when every target is met, 1 when one is missed. Beside `gate`, the
floor under it on the same machine in the same run: a child that only imports the
dependencies a gate needs, and the difference, which is evalgate's own share.
"""

from __future__ import annotations

import argparse
import compileall
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

from benchmarks.throughput import EXAMPLE, write_suite

RUN_MB, REPORT_MB = 150.0, 100.0
GATE_S, FIRST_REQUEST_S = 0.3, 0.7
TARGET_CASES = 20_000

# The child reports its own high-water mark, and which SDKs it imported, as it exits.
_CHILD = (
    "import atexit, os, runpy, sys\n"
    "def report():\n"
    "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
    "    sdks = [m for m in ('anthropic', 'openai') if m in sys.modules]\n"
    "    with open(os.environ['FOOTPRINT_FILE'], 'w') as out:\n"
    "        out.write(hwm[0].split()[1] + ' ' + ','.join(sdks))\n"
    "atexit.register(report)\n"
    "sys.argv[0] = 'evalgate'\n"
    "runpy.run_module('evalgate', run_name='__main__')\n"
)


def serve(conn: Connection) -> None:
    """The stand-in until told to stop; its URL first, then on each "first" the arrival time
    (``time.monotonic``, one clock for every process) of the first request since the last."""
    from evalgate.backends.fake import load_rules
    from tests.support.messages_server import MessagesServer

    rules = load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)
    with MessagesServer(rules, log_limit=2) as server:
        conn.send(server.url)
        while (order := conn.recv()) != "stop":
            if order == "reset":
                server.reset()
                conn.send(True)
            elif order == "refuse":
                # The next request is refused (401): a whole run stops at its first call.
                server.reset()
                server.script(["auth"])
                conn.send(True)
            else:
                first = [ex.t for ex in server.requests if ex.path.startswith("/v1/messages")]
                conn.send(first[0] if first else None)


def _children_cpu() -> float:
    """User + system seconds of the children waited for so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def child(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str, int, float]:
    """(peak MB, wall s, SDKs imported, exit code, CPU s) of ``evalgate ARGV``."""
    with tempfile.TemporaryDirectory() as tmp:
        cost = Path(tmp) / "cost"
        cpu = _children_cpu()
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, *argv],
            cwd=cwd,
            env={**env, "FOOTPRINT_FILE": str(cost)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - started
        cpu = _children_cpu() - cpu
        kib, _, sdks = cost.read_text(encoding="utf-8").partition(" ")
    if done.returncode not in (0, 1):
        sys.stderr.write(done.stderr)
    return int(kib) / 1024, wall, sdks or "none", done.returncode, cpu


# In a child of its own, each template's time to be ready: compiled (no cache), then read back
# from the cache the first child filled; after what every command that renders has imported
# (the config's loading, evalgate's file reader with it).
_TEMPLATES = (
    "import json, sys, time\n"
    "import evalgate.config.load\n"
    "from evalgate.report import render, template_cache\n"
    "template_cache.configure({template_cache.VARIABLE: sys.argv[1]})\n"
    "times = {}\n"
    "for name in sys.argv[2:]:\n"
    "    started = time.perf_counter()\n"
    "    render.template(name)\n"
    "    times[name] = time.perf_counter() - started\n"
    "print(json.dumps(times))\n"
)
TEMPLATES = ("gate.txt.j2", "comment.md.j2")


def template_times(cache: str, env: dict[str, str]) -> dict[str, float]:
    """Seconds to get each of ``TEMPLATES`` ready in a fresh process, with cache ``cache``."""
    done = subprocess.run(
        [sys.executable, "-c", _TEMPLATES, cache, *TEMPLATES],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    times: dict[str, float] = json.loads(done.stdout)
    return times


# What every evalgate command pays before its own code: the interpreter, and importing the
# dependencies a gate needs (pydantic with its first model, PyYAML, jinja2) and the standard
# library modules they share.
_FLOOR = (
    "import argparse, json, pathlib\n"
    "import jinja2, pydantic, yaml\n"
    "class First(pydantic.BaseModel):\n"
    "    x: int\n"
)


def floor_s(env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of a child that only imports what a gate's dependencies are."""
    cpu = _children_cpu()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", _FLOOR], env=env, check=True)
    return time.perf_counter() - started, _children_cpu() - cpu


def first_request_s(cwd: Path, env: dict[str, str], conn: Connection) -> tuple[float, float]:
    """Wall time from starting a whole `evalgate run` (every case read, every turn rendered,
    as before any run's first call) to the stand-in's first request, which it refuses so that
    the run stops there; and the CPU time of that process."""
    conn.send("refuse")
    conn.recv()
    cpu = _children_cpu()
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "evalgate", "run", "v3", "--no-save"],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    cpu = _children_cpu() - cpu
    conn.send("first")
    arrived = conn.recv()
    return (float("nan") if arrived is None else arrived - started), cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", default="2000,20000")
    parser.add_argument("--startup-repeats", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.cases.split(",")]
    import evalgate

    compileall.compile_dir(os.path.dirname(evalgate.__file__), quiet=1)
    context = multiprocessing.get_context("spawn")
    parent, end = context.Pipe()
    server = context.Process(target=serve, args=(end,), daemon=True)
    server.start()
    ok = True
    rows: list[tuple[str, str, str, str]] = []
    try:
        url = parent.recv()
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": "sk-bench",
            "ANTHROPIC_BASE_URL": url,
            "NO_COLOR": "1",
        }
        with tempfile.TemporaryDirectory(prefix="evalgate-footprint-") as tmp:
            # The report templates compiled into a cache of this run's own, empty at first, as
            # after installing (the image's is filled when it is built).
            env["EVALGATE_TEMPLATE_CACHE"] = str(Path(tmp) / "templates")
            startup_root: Path | None = None
            for n in sizes:
                root = Path(tmp) / f"n{n}"
                root.mkdir()
                write_suite(root, n, 32, False)
                run_mb, run_s, _, code, _ = child(["run", "v3"], root, env)
                runs = sorted((root / ".evalgate" / "runs").glob("*.json"))
                size_mb = runs[-1].stat().st_size / 2**20 if runs else 0.0
                report_mb, report_s, _, _, _ = child(["report", "latest"], root, env)
                meets = n != TARGET_CASES or (run_mb <= RUN_MB and report_mb <= REPORT_MB)
                ok = ok and meets and code == 0
                target = f"<= {RUN_MB:.0f} / {REPORT_MB:.0f} MB" if n == TARGET_CASES else "(shown)"
                rows.append(
                    (
                        f"{n:,} cases: peak of run / report",
                        f"{run_mb:.0f} MB / {report_mb:.0f} MB",
                        target,
                        ("pass" if meets else "MISS") if n == TARGET_CASES else "",
                    )
                )
                rows.append(
                    (
                        f"{n:,} cases: wall of run / report, run file",
                        f"{run_s:.1f} s / {report_s:.2f} s, {size_mb:.1f} MB",
                        "",
                        "",
                    )
                )
                startup_root = root
            assert startup_root is not None
            root = startup_root
            # a second run of the same suite, for `gate` to compare against the first
            child(["run", "v3", "--limit", "50"], root, env)
            child(["run", "v3", "--limit", "50"], root, env)
            runs = sorted((root / ".evalgate" / "runs").glob("*.json"))[-2:]
            reps = args.startup_repeats
            versions = [child(["--version"], root, env) for _ in range(reps)]
            version, version_cpu = min(v[1] for v in versions), min(v[4] for v in versions)
            gates = [
                child(["gate", "--baseline", str(runs[0]), "--candidate", str(runs[1])], root, env)
                for _ in range(reps + 1)
            ]
            # The first compiles the gate's template into the cache; the others read it.
            cold, gates = gates[0], gates[1:]
            gate_s, gate_cpu = min(g[1] for g in gates), min(g[4] for g in gates)
            gate_sdks = gates[0][2]
            floors = [floor_s(env) for _ in range(reps)]
            floor, floor_cpu = min(f[0] for f in floors), min(f[1] for f in floors)
            firsts = [first_request_s(root, env, parent) for _ in range(reps)]
            first, first_cpu = min(f[0] for f in firsts), min(f[1] for f in firsts)
            cache = str(Path(tmp) / "templates-timed")
            compiled = [template_times("off", env) for _ in range(reps)]
            template_times(cache, env)  # fills the cache
            cached = [template_times(cache, env) for _ in range(reps)]
        gate_ok = gate_s <= GATE_S and gate_sdks == "none"
        first_ok = first <= FIRST_REQUEST_S
        ok = ok and gate_ok and first_ok
        rows += [
            ("`evalgate --version` (CPU)", f"{version:.2f} s ({version_cpu:.2f} s)", "", ""),
            (
                "`evalgate gate` on two run files (CPU; SDKs imported)",
                f"{gate_s:.2f} s ({gate_cpu:.2f} s; {gate_sdks})",
                f"<= {GATE_S} s (none)",
                "pass" if gate_ok else "MISS",
            ),
            (
                "the floor: `python -c` importing pydantic (one model), PyYAML, jinja2 (CPU)",
                f"{floor:.2f} s ({floor_cpu:.2f} s)",
                "",
                "",
            ),
            (
                "`evalgate gate` beyond the floor: evalgate's own share (CPU)",
                f"{gate_s - floor:.2f} s ({gate_cpu - floor_cpu:.2f} s)",
                "",
                "",
            ),
            (
                "`evalgate gate`, its template not yet compiled (once after installing)",
                f"{cold[1]:.2f} s ({cold[4]:.2f} s)",
                "",
                "",
            ),
            *(
                (
                    f"`{name}` ready: compiled / read from the cache (in-process)",
                    f"{1000 * min(c[name] for c in compiled):.1f} ms / "
                    f"{1000 * min(c[name] for c in cached):.1f} ms",
                    "",
                    "",
                )
                for name in TEMPLATES
            ),
            (
                "`evalgate run` to its first request, a whole run (CPU to that request)",
                f"{first:.2f} s ({first_cpu:.2f} s)",
                f"<= {FIRST_REQUEST_S} s",
                "pass" if first_ok else "MISS",
            ),
        ]
        parent.send("stop")
    finally:
        server.join(timeout=10)
        if server.is_alive():
            server.terminate()
    print(f"start-up: best of {args.startup_repeats}; peaks: the child's own VmHWM")
    print("| measure | value | target | |")
    print("|---|---:|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
