"""Throughput of a real-model run: evalgate + the anthropic SDK against the Messages stand-in.

    python -m benchmarks.throughput                 # 600 cases, 200 ms a call, concurrency 32
    python -m benchmarks.throughput --cases 10000   # the larger case
    python -m benchmarks.throughput --profile       # and where evalgate's CPU goes
    python -m benchmarks.throughput --no-side-by-side   # the in-process run alone

The stand-in runs in a separate process, so this process's CPU time and memory are evalgate's
own (with the SDK it drives). See benchmarks/README.md for what each number means.
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import io
import json
import multiprocessing
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "bike-shop"
MODEL = "claude-haiku-4-5"

# Targets (from the issue "Real models: ...").
WALL_FACTOR, WALL_SLACK_S = 1.2, 1.0
CPU_PER_CASE_MS = 2.0
PEAK_MB = 150.0
# Side by side, each a process of its own from start to exit (issue 27): `evalgate run` within
# 1.05 x the bare SDK client's wall time and 0.85 x promptfoo's.
VS_BARE, VS_PROMPTFOO = 1.05, 0.85
PROMPTFOO = (
    Path(os.environ.get("EVALGATE_HARNESS_DIR") or Path.home() / ".cache" / "evalgate" / "harness")
    / "promptfoo"
    / "node_modules"
    / ".bin"
    / "promptfoo"
)
# The bare client as a user would write it: python, the anthropic SDK, a thread per call in
# flight, the same requests (read from the file named by argv[1]), nothing else.
BARE_CLIENT = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
import anthropic
params = json.loads(open(sys.argv[1]).read())
client = anthropic.Anthropic(max_retries=0)
def call(p):
    message = client.messages.create(**p)
    return message.content[0].text
with ThreadPoolExecutor(int(sys.argv[2])) as pool:
    texts = list(pool.map(call, params))
print(len(texts))
"""


# ---------------------------------------------------------------- the stand-in, in its own process


def serve(conn: Connection, latency_s: float) -> None:
    """Run the stand-in until told to stop; send its URL first and its stats last."""
    from evalgate.backends.fake import load_rules
    from tests.support.messages_server import Knobs, MessagesServer

    rules = load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)
    with MessagesServer(rules, Knobs(latency_s=latency_s), log_limit=0) as server:
        conn.send(server.url)
        conn.recv()  # "stop"
        stats = server.stats()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        conn.send(
            {
                "requests": stats.requests,
                "by_status": stats.by_status,
                "max_in_flight": stats.max_in_flight,
                "connections": stats.connections,
                "cache_writes": stats.cache_writes,
                "cache_reads": stats.cache_reads,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "errors": len(server.errors),
            }
        )


# ---------------------------------------------------------------- the suite


def write_suite(root: Path, cases: int, concurrency: int, stream: bool) -> Path:
    """The bike-shop suite on the anthropic backend, its cases repeated with new ids."""
    shutil.copytree(EXAMPLE / "prompts", root / "prompts")
    lines = (EXAMPLE / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    with (root / "cases.jsonl").open("w", encoding="utf-8") as out:
        for i in range(cases):
            record = records[i % len(records)]
            copy = i // len(records)
            new_id = record["id"] if copy == 0 else f"{record['id']}-{copy}"
            # every case on the dev side, so a run sends all of them
            out.write(json.dumps(record | {"id": new_id, "split": "dev"}) + "\n")
    suite = {
        "prompts": "prompts/*.txt",
        "cases": "cases.jsonl",
        "fields": {"input": ["message"], "expected": "category"},
        "template": "<message>\n{{ message }}\n</message>",
        "model": {
            "backend": "anthropic",
            "name": MODEL,
            "max_tokens": 64,
            "temperature": 0,
            "options": {"stream": stream},
        },
        "scorer": {"kind": "label", "field": "category"},
        "concurrency": concurrency,
    }
    config = root / "evalgate.yml"
    config.write_text(yaml.safe_dump({"version": 1, "suites": {"shop": suite}}), encoding="utf-8")
    return config


# ---------------------------------------------------------------- measuring


def cpu_s() -> tuple[float, float]:
    """CPU time of this process, every thread: (user, system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class ThreadProfiles:
    """cProfile in every thread started while it is on (the runner's workers are threads)."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _start(self, *_args: Any) -> None:
        # CPU time of the thread, not wall time: a worker spends most of its time waiting.
        profile = cProfile.Profile(time.thread_time)
        with self._lock:
            self.profiles.append(profile)
        profile.enable()

    def __enter__(self) -> ThreadProfiles:
        threading.setprofile(self._start)
        self._start()
        return self

    def __exit__(self, *_exc: object) -> None:
        threading.setprofile(None)
        self.profiles[0].disable()

    def stats(self) -> pstats.Stats:
        stats = pstats.Stats(self.profiles[0], stream=io.StringIO())
        for profile in self.profiles[1:]:
            stats.add(profile)
        return stats

    def report(self, cases: int, limit: int) -> str:
        """CPU by package (built-ins charged to their callers), then the top functions."""
        raw: dict[Any, Any] = self.stats().stats  # type: ignore[attr-defined]
        by_package: dict[str, float] = {}
        for (filename, _line, _name), (_cc, _nc, tottime, _ct, callers) in raw.items():
            if filename == "~" and callers:
                # a built-in (isinstance, socket.send, ...): charge its callers, pro rata
                total = sum(c[2] for c in callers.values()) or 1.0
                for (caller_file, _l, _n), c in callers.items():
                    name = package_of(caller_file)
                    by_package[name] = by_package.get(name, 0.0) + tottime * c[2] / total
            else:
                name = package_of(filename)
                by_package[name] = by_package.get(name, 0.0) + tottime
        whole = sum(by_package.values()) or 1.0
        lines = [f"{'package':<34} {'CPU s':>7} {'share':>6} {'ms/case':>8}"]
        for name, spent in sorted(by_package.items(), key=lambda kv: -kv[1])[:limit]:
            lines.append(
                f"{name:<34} {spent:7.2f} {100 * spent / whole:5.1f}% {1000 * spent / cases:8.2f}"
            )
        out = io.StringIO()
        stats = self.stats()
        stats.stream = out  # type: ignore[attr-defined]
        stats.sort_stats("tottime").print_stats(limit)
        # evalgate's own functions apart: what it adds on top of the SDK, function by function
        own = sorted(
            (
                (tottime, cumtime, nc, f"{Path(f).name}:{line}({name})")
                for (f, line, name), (_cc, nc, tottime, cumtime, _c) in raw.items()
                if "/evalgate/" in f
            ),
            reverse=True,
        )[:limit]
        mine = [f"{'own ms/case':>11} {'cum ms/case':>11} {'calls':>7}  function"]
        for tottime, cumtime, nc, where in own:
            mine.append(
                f"{1000 * tottime / cases:11.3f} {1000 * cumtime / cases:11.3f} {nc:7d}  {where}"
            )
        return (
            "\n".join(lines)
            + "\n\nevalgate's own functions by own CPU time:\n"
            + "\n".join(mine)
            + "\n\ntop functions by own CPU time:\n"
            + out.getvalue()
        )


def package_of(filename: str) -> str:
    """A profile entry's owner: a site-packages distribution, an evalgate module, or stdlib."""
    path = Path(filename)
    parts = path.parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    if "evalgate" in parts:
        return "evalgate." + ".".join(parts[parts.index("evalgate") + 1 :]).removesuffix(".py")
    if filename.startswith("<") or filename == "~":
        return "(built-in)"
    stdlib = next((i for i, part in enumerate(parts) if part.startswith("python3")), None)
    if stdlib is None:
        return "other:" + path.stem
    module = ".".join(parts[stdlib + 1 :]).removesuffix(".py").removesuffix(".__init__")
    top = module.split(".")[0]
    # group the stdlib by top-level package, except the ones worth telling apart
    return "stdlib:" + (module if top in ("concurrent", "json") else top)


def bare_sdk(
    url: str, params: list[dict[str, Any]], concurrency: int, stream: bool
) -> tuple[float, float]:
    """Wall and CPU time of the same calls made with the anthropic SDK alone (no evalgate)."""
    import anthropic

    with anthropic.Anthropic(api_key="sk-bench", base_url=url, max_retries=0) as client:

        def call(p: dict[str, Any]) -> str:
            if stream:
                with client.messages.stream(**p) as s:
                    message = s.get_final_message()
            else:
                message = client.messages.create(**p)
            block = message.content[0]
            return block.text if block.type == "text" else ""

        call(params[0])  # warm the connection pool, as evalgate's first call does
        cpu0, started = cpu_s(), time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(call, params[1:]))
        wall, cpu1 = time.perf_counter() - started, cpu_s()
    return wall, sum(cpu1) - sum(cpu0)


@dataclass
class Contender:
    name: str
    wall_s: float | None  # None: not run (promptfoo not installed)
    cpu_s: float
    code: int
    note: str = ""


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the child and what it waited for, exit code, the tail of its stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=1800
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode, done.stderr[-600:]


def write_promptfoo(root: Path, url: str, system: str, cases: Path, concurrency: int) -> Path:
    """The same suite as a promptfoo config: the system prompt, the template, the cases."""
    folder = root / "promptfoo"
    folder.mkdir()
    with (folder / "tests.csv").open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["message"])
        for line in cases.read_text(encoding="utf-8").splitlines():
            if line.strip():
                writer.writerow([json.loads(line)["message"]])
    chat = [
        {"role": "system", "content": system},
        {"role": "user", "content": "<message>\n{{message}}\n</message>"},
    ]
    config = {
        "description": "throughput",
        "prompts": [json.dumps(chat)],
        "providers": [
            {
                "id": f"anthropic:messages:{MODEL}",
                "config": {"apiBaseUrl": url, "max_tokens": 64, "temperature": 0},
            }
        ],
        "tests": "file://tests.csv",
        "evaluateOptions": {"maxConcurrency": concurrency},
    }
    # JSON is YAML too, and leaves no doubt about the prompt's line breaks.
    (folder / "promptfooconfig.yaml").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


def side_by_side(
    root: Path, url: str, params: list[dict[str, Any]], system: str, concurrency: int
) -> list[Contender]:
    """The bare SDK client, `evalgate run` and promptfoo, one after the other, each a process
    timed from its start to its exit against the same stand-in."""
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "sk-bench",
        "ANTHROPIC_BASE_URL": url,
        "NO_COLOR": "1",
        "PROMPTFOO_CONFIG_DIR": str(root / ".promptfoo"),
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_DISABLE_SHARING": "1",
    }
    requests = root / "requests.json"
    requests.write_text(json.dumps(params), encoding="utf-8")
    out: list[Contender] = []
    wall, cpu, code, err = _timed(
        [sys.executable, "-c", BARE_CLIENT, str(requests), str(concurrency)], root, env
    )
    out.append(Contender("bare SDK client (python, 32 threads)", wall, cpu, code, err))
    wall, cpu, code, err = _timed([sys.executable, "-m", "evalgate", "run", "v3"], root, env)
    # exit 1 is a run below its threshold: the calls were made
    out.append(Contender("`evalgate run v3`", wall, cpu, 0 if code == 1 else code, err))
    if not PROMPTFOO.is_file():
        out.append(Contender("promptfoo", None, 0.0, 0, "not installed: run scripts/harness-setup"))
        return out
    folder = write_promptfoo(root, url, system, root / "cases.jsonl", concurrency)
    version = (
        subprocess.run(
            [str(PROMPTFOO), "--version"], env=env, capture_output=True, text=True, check=False
        )
        .stdout.strip()
        .splitlines()
    )
    wall, cpu, code, err = _timed(
        [
            str(PROMPTFOO),
            "eval",
            "-c",
            "promptfooconfig.yaml",
            "--no-cache",
            "--no-write",
            "--no-progress-bar",
            "--no-table",
            "-j",
            str(concurrency),
            "-o",
            str(folder / "out.json"),
        ],
        folder,
        env,
    )
    # promptfoo exits 100 when an assertion fails; there are none here
    name = f"promptfoo {version[-1] if version else ''} (-j {concurrency})".replace("  ", " ")
    out.append(Contender(name, wall, cpu, code, err))
    return out


def side_table(rows: list[Contender], cases: int) -> tuple[str, bool]:
    ours = rows[1].wall_s
    lines = [
        f"side by side, each a process from start to exit, {cases} cases:",
        "",
        "| | wall | CPU (user + system) | evalgate's wall / this | target | |",
        "|---|---:|---:|---:|---|---|",
    ]
    ok = all(r.code == 0 for r in rows)
    for row in rows:
        if row.wall_s is None:
            lines.append(f"| {row.name} | | | | | {row.note} |")
            continue
        ratio = ours / row.wall_s if ours and row.wall_s else float("nan")
        target, meets = "", True
        if row is rows[0]:
            target, meets = f"<= {VS_BARE}", ratio <= VS_BARE
        elif row is not rows[1]:
            target, meets = f"<= {VS_PROMPTFOO}", ratio <= VS_PROMPTFOO
        ok = ok and meets
        mark = ("pass" if meets else "MISS") if target else ""
        if row.code != 0:
            mark = f"exit {row.code}: {row.note.strip().splitlines()[-1:] or ''}"
        shown = f"{ratio:.2f}" if row is not rows[1] else ""
        lines.append(
            f"| {row.name} | {row.wall_s:.2f} s | {row.cpu_s:.2f} s | {shown} | {target} | {mark} |"
        )
    return "\n".join(lines), ok


@dataclass
class Result:
    cases: int
    latency_s: float
    concurrency: int
    stream: bool
    wall_s: float
    run_cpu_s: float
    run_sys_s: float
    report_cpu_s: float
    peak_mb: float
    import_mb: float
    sdk_wall_s: float
    sdk_cpu_s: float
    errors: int
    accuracy: float | None
    server: dict[str, Any]
    sdk: str

    @property
    def bound_s(self) -> float:
        return self.cases * self.latency_s / self.concurrency

    @property
    def wall_target_s(self) -> float:
        return WALL_FACTOR * self.bound_s + WALL_SLACK_S

    @property
    def cpu_per_case_ms(self) -> float:
        return 1000 * (self.run_cpu_s + self.report_cpu_s) / self.cases

    @property
    def sdk_per_call_ms(self) -> float:
        return 1000 * self.sdk_cpu_s / max(1, self.cases - 1)


def run_benchmark(
    cases: int, latency_s: float, concurrency: int, stream: bool, profile: bool, side: bool = False
) -> tuple[Result, str, list[Contender]]:
    # The SDK's version without its import: evalgate's plain calls do not import it, and its
    # 50 MB would count in the run's peak (the bare client below imports it).
    from importlib.metadata import version

    from evalgate.analysis.summary import summarise
    from evalgate.backends.anthropic import AnthropicBackend
    from evalgate.backends.base import BackendContext
    from evalgate.config.load import load_config
    from evalgate.report.render import render_model
    from evalgate.running.suite import RunSpec, build_jobs, load_prompt, load_suite_cases, run_suite
    from evalgate.runs.schema import save_run

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=serve, args=(child, latency_s), daemon=True)
    server.start()
    profile_text = ""
    try:
        url = parent.recv()
        with tempfile.TemporaryDirectory(prefix="evalgate-bench-") as tmp:
            loaded = load_config(write_suite(Path(tmp), cases, concurrency, stream))
            name, suite = loaded.suite(None)
            spec = RunSpec(
                suite_name=name,
                suite=suite,
                prompt=load_prompt(loaded, suite, "v3"),
                cases=load_suite_cases(loaded, suite),
            )
            env = {"ANTHROPIC_API_KEY": "sk-bench", "ANTHROPIC_BASE_URL": url}
            backend = AnthropicBackend(suite.model, BackendContext(base_dir=loaded.root, env=env))
            try:
                profiler = ThreadProfiles() if profile else None
                import_mb = peak_mb()  # the high-water mark so far: imports and set-up
                cpu0 = cpu_s()
                started = time.perf_counter()
                if profiler is not None:
                    with profiler:
                        run = run_suite(spec, backend, loaded.root)
                else:
                    run = run_suite(spec, backend, loaded.root)
                wall = time.perf_counter() - started
                cpu1 = cpu_s()
                # what `evalgate run` does next: summarise, render, save
                summary = summarise(run, price_as=suite.price_as)
                render_model("run", summary, "text")
                save_run(run, loaded.state_dir)
                cpu2 = cpu_s()
                # before the bare SDK's calls below, which hold their own requests and replies
                run_peak = peak_mb()
                if profiler is not None:
                    profile_text = profiler.report(len(run.cases), 25)
                # the floor: the same requests through the bare SDK, at the same concurrency
                params = [
                    backend.params(job.request)
                    for job in build_jobs(suite, spec.prompt, list(spec.cases.cases), 1)
                ]
                sdk_wall, sdk_cpu = bare_sdk(url, params, concurrency, stream)
            finally:
                backend.close()
            contenders = (
                side_by_side(Path(tmp), url, params, spec.prompt.text, concurrency) if side else []
            )
        parent.send("stop")
        stats = parent.recv()
    finally:
        server.join(timeout=10)
        if server.is_alive():
            server.terminate()
    result = Result(
        cases=len(run.cases),
        latency_s=latency_s,
        concurrency=concurrency,
        stream=stream,
        wall_s=wall,
        run_cpu_s=sum(cpu1) - sum(cpu0),
        run_sys_s=cpu1[1] - cpu0[1],
        report_cpu_s=sum(cpu2) - sum(cpu1),
        peak_mb=run_peak,
        import_mb=import_mb,
        sdk_wall_s=sdk_wall,
        sdk_cpu_s=sdk_cpu,
        errors=run.errors,
        accuracy=summary.accuracy.rate,
        server=stats,
        sdk=version("anthropic"),
    )
    return result, profile_text, contenders


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def table(r: Result) -> str:
    mode = "streaming" if r.stream else "create"
    rows = [
        (
            "wall time",
            f"{r.wall_s:.2f} s",
            f"<= {r.wall_target_s:.2f} s",
            verdict(r.wall_s <= r.wall_target_s),
        ),
        (
            "  ratio to bound",
            f"{r.wall_s / r.bound_s:.2f} x",
            f"bound {r.bound_s:.2f} s = {r.cases} x {1000 * r.latency_s:.0f} ms / {r.concurrency}",
            "",
        ),
        (
            "evalgate CPU per case",
            f"{r.cpu_per_case_ms:.2f} ms",
            f"< {CPU_PER_CASE_MS:g} ms",
            verdict(r.cpu_per_case_ms < CPU_PER_CASE_MS),
        ),
        (
            "  run / report+save",
            f"{r.run_cpu_s:.2f} s / {r.report_cpu_s:.2f} s",
            f"run: {r.run_sys_s:.2f} s of it in the kernel",
            "",
        ),
        (
            "  the bare SDK alone",
            f"{r.sdk_per_call_ms:.2f} ms",
            f"same calls, no evalgate: {r.sdk_wall_s:.2f} s wall; "
            f"evalgate adds {r.cpu_per_case_ms - r.sdk_per_call_ms:.2f} ms",
            "",
        ),
        (
            "peak memory (RSS)",
            f"{r.peak_mb:.1f} MB",
            f"< {PEAK_MB:g} MB",
            verdict(r.peak_mb < PEAK_MB),
        ),
        (
            "  before the run",
            f"{r.import_mb:.1f} MB",
            f"imports and set-up; the run added {r.peak_mb - r.import_mb:.1f} MB",
            "",
        ),
    ]
    s = r.server
    head = (
        f"evalgate throughput: {r.cases} cases, stand-in latency {1000 * r.latency_s:.0f} ms, "
        f"concurrency {r.concurrency}, anthropic SDK {r.sdk} ({mode}), Python "
        f"{sys.version.split()[0]}"
    )
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [head, ""]
    header = ("metric", "value", "target", "result")
    for row in [header, *rows]:
        lines.append(
            "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        )
    lines += [
        "",
        f"run: {r.errors} errors, accuracy {r.accuracy:.3f}, {r.cases / r.wall_s:.0f} cases/s"
        if r.accuracy is not None
        else f"run: {r.errors} errors",
        f"stand-in: {s['requests']} requests {s['by_status']}, at most {s['max_in_flight']} in "
        f"flight over {s['connections']} connections, prompt cache {s['cache_writes']} writes / "
        f"{s['cache_reads']} reads, its own CPU {s['cpu_s']:.2f} s (not counted above)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.throughput", description=__doc__)
    parser.add_argument("--cases", type=int, default=600, help="cases (default: %(default)s)")
    parser.add_argument(
        "--latency-ms", type=float, default=200.0, help="stand-in latency per call (default: 200)"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="calls in flight (default: 32)")
    parser.add_argument("--stream", action="store_true", help="use the streaming API")
    parser.add_argument(
        "--profile", action="store_true", help="profile every thread and print the top functions"
    )
    parser.add_argument(
        "--no-side-by-side",
        action="store_true",
        help="skip the bare client, `evalgate run` and promptfoo as processes of their own",
    )
    args = parser.parse_args(argv)
    side = not args.no_side_by_side and not args.stream
    result, profile, contenders = run_benchmark(
        args.cases, args.latency_ms / 1000, args.concurrency, args.stream, args.profile, side
    )
    print(table(result))
    side_ok = True
    if contenders:
        text, side_ok = side_table(contenders, result.cases)
        print("\n" + text)
    if profile:
        print("\nwhere the CPU goes (every thread, by own time; profiling slows the run):\n")
        print(profile)
    missed = (
        result.wall_s > result.wall_target_s
        or result.cpu_per_case_ms >= CPU_PER_CASE_MS
        or result.peak_mb >= PEAK_MB
        or not side_ok
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
