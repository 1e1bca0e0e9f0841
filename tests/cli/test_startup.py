"""What a command imports: ``evalgate gate`` on two saved run files never loads a model's SDK.

A gate compares files; importing ``anthropic`` or ``openai`` for it costs a second of CPU on
every pull request. The child process reports its own ``sys.modules`` (no timing is asserted:
benchmarks/footprint.py measures the start-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import copy_example

from evalgate.cli import main

SDKS = ("anthropic", "openai")

_CHILD = (
    "import json, sys\n"
    "from evalgate.cli import main\n"
    "code = main(sys.argv[1:])\n"
    f"print(json.dumps({{'code': code, 'sdks': [m for m in {SDKS!r} if m in sys.modules]}}))\n"
)


def test_gate_on_two_run_files_imports_no_sdk(tmp_path: Path) -> None:
    root = copy_example(tmp_path / "shop")
    config = root / "evalgate.yml"
    for version in ("v2", "v3"):
        assert main(["run", version, "--config", str(config)]) == 0
    baseline, candidate = sorted((root / ".evalgate" / "runs").glob("*.json"))
    # The suite as a real project has it: on the anthropic backend (the runs were saved with
    # the offline fake; the gate reads only the files).
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("backend: fake", "backend: anthropic"), encoding="utf-8")
    gate = ["gate", "--baseline", str(baseline), "--candidate", str(candidate)]
    gate += ["--config", str(config)]
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *gate],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "CI"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["code"] in (0, 1), done.stdout + done.stderr
    assert report["sdks"] == []
