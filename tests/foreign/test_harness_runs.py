"""Real result files: promptfoo (npm) and inspect-ai (PyPI), at the versions scripts/harness-setup
pins, run against the Messages stand-in, and their outputs gated. A model that answers 12% of
the cases wrongly (6 of 50) fails; an unchanged one does not.

Without the harnesses these tests skip, unless EVALGATE_HARNESS=required (set by .ci/run once
scripts/harness-setup succeeded): then they fail. EVALGATE_HARNESS_DIR names the install folder.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
from support.messages_server import MessagesServer
from support.promptfoo_init import made_by_init, run_init

from evalgate.backends.fake import FakeRules
from evalgate.cli import main

HARNESS = Path(
    os.environ.get("EVALGATE_HARNESS_DIR", Path.home() / ".cache" / "evalgate" / "harness")
)
REQUIRED = os.environ.get("EVALGATE_HARNESS", "").strip().lower() == "required"
PROMPTFOO = HARNESS / "promptfoo" / "node_modules" / ".bin" / "promptfoo"
# The version scripts/harness-setup installs.
PIN = re.search(
    r"^PROMPTFOO_VERSION=(\S+)$",
    (Path(__file__).resolve().parents[2] / "scripts" / "harness-setup").read_text(),
    re.MULTILINE,
)
assert PIN is not None
PROMPTFOO_VERSION = PIN[1]
INSPECT = HARNESS / "inspect" / "bin" / "inspect"
N = 50
WRONG = 6  # 12% of 50


def need(tool: Path) -> Path:
    if not tool.exists():
        if REQUIRED:
            pytest.fail(f"EVALGATE_HARNESS=required, but {tool} is missing")
        pytest.skip(f"{tool} missing: run scripts/harness-setup to install it")
    return tool


def rules(wrong: int) -> FakeRules:
    """Every message is a booking; the first ``wrong`` tickets are answered 'other'."""
    listed = []
    if wrong:
        listed.append({"label": "other", "phrases": [f"ticket-{i:02d}." for i in range(wrong)]})
    listed.append({"label": "booking", "phrases": ["book"]})
    return FakeRules.model_validate({"rules": listed})


def message(i: int) -> str:
    return f"Can I book a service? ticket-{i:02d}."


def gate(baseline: Path, candidate: Path, folder: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        [
            "gate",
            "--baseline",
            str(baseline),
            "--candidate",
            str(candidate),
            "--config",
            str(folder / "evalgate.yml"),
        ],
        out=out,
        err=err,
    )
    return code, out.getvalue() + err.getvalue()


# ------------------------------------------------------------------------------------------
# promptfoo
# ------------------------------------------------------------------------------------------


def run_promptfoo(folder: Path, wrong: int, name: str) -> Path:
    tool = need(PROMPTFOO)
    (folder / "tests.csv").write_text(
        "message,__expected\n" + "".join(f'"{message(i)}",contains: booking\n' for i in range(N))
    )
    out = folder / f"{name}.json"
    with MessagesServer(rules(wrong)) as server:
        # JSON is YAML too, and leaves no doubt about the prompt's line breaks.
        config = {
            "description": "triage",
            "prompts": ["<message>\n{{message}}\n</message>"],
            "providers": [
                {
                    "id": "anthropic:messages:claude-stand-in",
                    "config": {"apiBaseUrl": server.url, "max_tokens": 64},
                }
            ],
            "tests": "file://tests.csv",
        }
        (folder / "promptfooconfig.yaml").write_text(json.dumps(config, indent=2))
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": "test",
            "ANTHROPIC_BASE_URL": server.url,
            "PROMPTFOO_CONFIG_DIR": str(folder / ".promptfoo"),
            "PROMPTFOO_DISABLE_TELEMETRY": "1",
            "PROMPTFOO_DISABLE_UPDATE": "1",
            "PROMPTFOO_DISABLE_SHARING": "1",
        }
        done = subprocess.run(
            [
                str(tool),
                "eval",
                "-c",
                "promptfooconfig.yaml",
                "--no-cache",
                "-o",
                str(out),
                "--no-progress-bar",
                "--no-table",
            ],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    # promptfoo exits 100 when assertions fail; its output file is written either way.
    assert out.is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    return out


def test_promptfoo_outputs_gated_12_percent_worse_fails_unchanged_does_not(tmp_path: Path) -> None:
    base = run_promptfoo(tmp_path, 0, "base")
    results = json.loads(base.read_text())["results"]["results"]
    assert len(results) == N and all(r["success"] for r in results)
    same = run_promptfoo(tmp_path, 0, "same")
    worse = run_promptfoo(tmp_path, WRONG, "worse")
    code, text = gate(base, worse, tmp_path)
    assert code == 1, text
    assert f"broke {WRONG}, fixed 0" in text
    code, text = gate(base, same, tmp_path)
    assert code == 0, text
    assert "Verdict: FAIL" not in text


# The corpus's configs that promptfoo's init commands write are what the pinned promptfoo writes
# today, on the answers MANIFEST.json gives: its "made_with" is checked, not taken on trust.
CORPUS = Path(__file__).resolve().parents[1] / "data" / "third_party"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
INIT_WRITTEN = made_by_init(MANIFEST)


@pytest.mark.parametrize("entry", INIT_WRITTEN, ids=[e["id"] for e in INIT_WRITTEN])
def test_promptfoo_init_still_writes_the_corpus_config(
    entry: dict[str, Any], tmp_path: Path
) -> None:
    tool = need(PROMPTFOO)
    assert MANIFEST["packages"][entry["package"]]["version"] == PROMPTFOO_VERSION
    folder = tmp_path / "made"
    screen = run_init(tool, entry["init"]["command"], entry["init"]["answers"], folder)
    written = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    for name, digest in [
        (Path(entry["file"]).name, entry["sha256"]),
        *((Path(c["file"]).name, c["sha256"]) for c in entry.get("companions", [])),
    ]:
        assert name in written, f"promptfoo wrote {sorted(written)}; its screen: {screen[-1500:]}"
        made = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        assert made == digest, f"{name} differs from the corpus's {entry['file']}"


# ------------------------------------------------------------------------------------------
# Inspect
# ------------------------------------------------------------------------------------------

TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import json_dataset
from inspect_ai.scorer import includes
from inspect_ai.solver import generate


@task
def triage():
    return Task(dataset=json_dataset("samples.jsonl"), solver=[generate()], scorer=includes())
"""


def run_inspect(folder: Path, wrong: int, name: str, log_format: str = "json") -> Path:
    tool = need(INSPECT)
    (folder / "task.py").write_text(TASK)
    (folder / "samples.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "id": f"s{i:02d}",
                    "input": f"<message>\n{message(i)}\n</message>",
                    "target": "booking",
                }
            )
            + "\n"
            for i in range(N)
        )
    )
    logs = folder / f"logs-{name}"
    with MessagesServer(rules(wrong)) as server:
        env = {**os.environ, "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": server.url}
        done = subprocess.run(
            [
                str(tool),
                "eval",
                "task.py",
                "--model",
                "anthropic/claude-stand-in",
                "--display",
                "none",
                "--log-dir",
                str(logs),
                "--log-format",
                log_format,
            ],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    found = sorted(logs.glob(f"*.{log_format}"))
    assert done.returncode == 0 and found, done.stdout[-2000:] + done.stderr[-2000:]
    return found[0]


def test_inspect_logs_gated_12_percent_worse_fails_unchanged_does_not(tmp_path: Path) -> None:
    base = run_inspect(tmp_path, 0, "base")
    same = run_inspect(tmp_path, 0, "same")
    worse = run_inspect(tmp_path, WRONG, "worse")
    code, text = gate(base, worse, tmp_path)
    assert code == 1, text
    assert f"broke {WRONG}, fixed 0" in text
    code, text = gate(base, same, tmp_path)
    assert code == 0, text
    assert "Verdict: FAIL" not in text


def test_inspect_eval_archives_compressed_with_zstd_are_gated(tmp_path: Path) -> None:
    base = run_inspect(tmp_path, 0, "base-eval", log_format="eval")
    worse = run_inspect(tmp_path, WRONG, "worse-eval", log_format="eval")
    # inspect_ai writes its samples compressed with zstd (method 93), which Python's zipfile
    # reads only from 3.14 on: this is the case the zstd backport is for.
    with zipfile.ZipFile(base) as archive:
        methods = {i.compress_type for i in archive.infolist() if i.filename.startswith("samples/")}
    assert methods == {93}
    code, text = gate(base, worse, tmp_path)
    assert code == 1, text
    assert f"broke {WRONG}, fixed 0" in text
    code, text = gate(base, base, tmp_path)
    assert code == 0, text
