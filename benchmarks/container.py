"""The action's container: image size and how soon a run starts working.

    python -m benchmarks.container             # build the image, then 3 timed runs
    python -m benchmarks.container --runs 5

Builds the action's image from this tree (``docker build``, layer cache as it is), reports its
size, then runs it directly (``docker run --network host``, baseline mode, the bike-shop suite
on the anthropic backend) against the Messages stand-in in this process. The start-up time is
measured from just before ``docker run`` to the first request the stand-in receives (its
``requests[0].t``, on the same monotonic clock); the same action run as a plain process on
the host (no container) shows what the container adds. Best of ``--runs``. Times are wall
clock: on a busy machine (see the load row) they measure the machine as much as evalgate.

Needs a Docker engine and the local base image (scripts/container-setup).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from evalgate.backends.fake import load_rules
from tests.support.messages_server import Knobs, MessagesServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "bike-shop"
IMAGE = "evalgate-action:bench"
BASE_IMAGE = "python:3.11-slim"
MODEL = "claude-haiku-4-5"
SUITE_DIR = "evals/bike-shop"
KEY = "sk-ant-api03-EvalgateContainerBenchmarkFakeKey-3Rt7Wq"
MB = 1e6


def docker(*args: str, timeout: float = 900) -> str:
    done = subprocess.run(
        ["docker", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise SystemExit(f"docker {' '.join(args[:2])} failed ({done.returncode}):\n{tail}")
    return done.stdout


def make_workspace(folder: Path, cases: int) -> None:
    """A repository with the bike-shop suite on the anthropic backend, ``cases`` cases."""
    suite = folder / SUITE_DIR
    shutil.copytree(EXAMPLE / "prompts", suite / "prompts")
    lines = (EXAMPLE / "cases.jsonl").read_text(encoding="utf-8").splitlines()[:cases]
    (suite / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = yaml.safe_load((EXAMPLE / "evalgate.yml").read_text(encoding="utf-8"))
    config["suites"]["bike-shop"]["model"] = {
        "backend": "anthropic",
        "name": MODEL,
        "max_tokens": 64,
        "temperature": 0,
    }
    (suite / "evalgate.yml").write_text(yaml.safe_dump(config, sort_keys=False), "utf-8")


@dataclass
class Timing:
    first_request_s: float
    total_s: float
    requests: int


def timed_run(server: MessagesServer, command: list[str], env: dict[str, str]) -> Timing:
    """Run ``command`` to completion; seconds from its start to the first model request."""
    server.reset()
    t0 = time.monotonic()
    done = subprocess.run(
        command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600
    )
    total = time.monotonic() - t0
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise SystemExit(f"the action exited {done.returncode}:\n{tail}")
    exchanges = server.requests
    if not exchanges:
        raise SystemExit("the action made no model request")
    return Timing(exchanges[0].t - t0, total, len(exchanges))


def action_env(url: str, workspace: str) -> dict[str, str]:
    return {
        "GITHUB_WORKSPACE": workspace,
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_REF": "refs/heads/main",
        "INPUT_MODE": "baseline",
        "INPUT_WORKING_DIRECTORY": SUITE_DIR,
        "INPUT_ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": url,
    }


def layer_sizes(image: str) -> list[tuple[int, str]]:
    rows = docker("history", "--no-trunc", "--format", "{{json .}}", image).splitlines()
    out = []
    for row in rows:
        data = json.loads(row)
        size = data.get("Size", "0B")
        out.append((_bytes(size), str(data.get("CreatedBy", ""))))
    return out


def largest_packages(image: str, count: int = 8) -> list[tuple[str, int]]:
    """The largest entries of the image's site-packages, in MB (du, rounded up)."""
    listing = docker(
        "run",
        "--rm",
        "--entrypoint",
        "sh",
        image,
        "-c",
        "cd /opt/evalgate/venv/lib/python3*/site-packages && du -sm -- *",
    )
    sizes = []
    for line in listing.splitlines():
        mb, _, name = line.partition("\t")
        sizes.append((name, int(mb)))
    return sorted(sizes, key=lambda row: -row[1])[:count]


def _bytes(text: str) -> int:
    units = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * units[unit])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each kind (best of)")
    parser.add_argument("--cases", type=int, default=40, help="cases in the suite")
    args = parser.parse_args()
    if shutil.which("docker") is None:
        raise SystemExit("docker is not on PATH (run scripts/container-setup)")
    docker("info", timeout=30)

    t0 = time.monotonic()
    docker("build", "--tag", IMAGE, str(ROOT))
    build_s = time.monotonic() - t0
    size = int(docker("image", "inspect", "--format", "{{.Size}}", IMAGE).strip())
    base = int(docker("image", "inspect", "--format", "{{.Size}}", BASE_IMAGE).strip())
    layers = layer_sizes(IMAGE)
    deps = sum(s for s, by in layers if "in /opt/evalgate/venv" in by)
    own = sum(s for s, by in layers if "in /opt/evalgate/app" in by)
    packages = largest_packages(IMAGE)

    rules = load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)
    container: list[Timing] = []
    host: list[Timing] = []
    with (
        tempfile.TemporaryDirectory(prefix="evalgate-bench-") as tmp,
        MessagesServer(rules, Knobs(api_key=KEY)) as server,
    ):
        workspace = Path(tmp)
        make_workspace(workspace, args.cases)
        inside = action_env(server.url, "/github/workspace")
        run = ["docker", "run", "--rm", "--network", "host"]
        run += ["--volume", f"{workspace}:/github/workspace"]
        for name, value in inside.items():
            run += ["--env", f"{name}={value}"]
        run.append(IMAGE)
        plain = [sys.executable, "-m", "evalgate", "action"]
        host_env = {**os.environ, **action_env(server.url, str(workspace))}
        for _ in range(args.runs):
            container.append(timed_run(server, run, dict(os.environ)))
            host.append(timed_run(server, plain, host_env))
        # Files the container wrote as root: remove them while we may.
        shutil.rmtree(workspace / SUITE_DIR / ".evalgate", ignore_errors=True)

    def best(values: list[float]) -> str:
        return f"{min(values):.2f} s"

    def each(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    load = os.getloadavg()[0]
    rows = [
        ("machine load", f"{load:.1f}", f"1-minute load average on {os.cpu_count()} CPUs"),
        ("image size", f"{size / MB:.0f} MB", f"{IMAGE}"),
        ("  base image", f"{base / MB:.0f} MB", BASE_IMAGE),
        ("  added to the base", f"{(deps + own) / MB:.0f} MB", "target: under 200 MB"),
        ("  dependencies layer", f"{deps / MB:.0f} MB", "constraints.txt, sourceless .pyc"),
        *[(f"    {name}", f"{mb} MB", "in the dependencies layer") for name, mb in packages],
        ("  evalgate layer", f"{own / MB:.1f} MB", "the package, byte-compiled"),
        (
            "docker build (cache as found)",
            f"{build_s:.1f} s",
            "a code change rebuilds the app stage",
        ),
        (
            "docker run -> first model request",
            best([t.first_request_s for t in container]),
            f"best of {args.runs}: {each([t.first_request_s for t in container])}",
        ),
        (
            "docker run -> exit",
            best([t.total_s for t in container]),
            f"baseline mode, {container[0].requests} requests",
        ),
        (
            "host process -> first model request",
            best([t.first_request_s for t in host]),
            f"no container; best of {args.runs}: {each([t.first_request_s for t in host])}",
        ),
        ("host process -> exit", best([t.total_s for t in host]), f"{host[0].requests} requests"),
    ]
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    print(f"{'measure':<{width[0]}}  {'value':>{width[1]}}  notes")
    for name, value, note in rows:
        print(f"{name:<{width[0]}}  {value:>{width[1]}}  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
