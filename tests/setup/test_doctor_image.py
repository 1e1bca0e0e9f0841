"""`evalgate doctor` holds a workflow's suites to what the action's image can run."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from evalgate.backends.base import BACKEND_NAMES, backend_extra
from evalgate.cli import main
from evalgate.setup import doctor
from evalgate.setup.image import IMAGE_EXTRAS, missing_from_image, program_in_image


@pytest.fixture(autouse=True)
def not_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


def init(repo: Path, *flags: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["init", "--dir", str(repo), "--yes", "--suite", "main", *flags], out=out, err=err)
    assert code == 0, err.getvalue()


def image_findings(repo: Path) -> list[doctor.Finding]:
    report = doctor.doctor(repo, repo / "evalgate.yml", env={"OPENAI_API_KEY": "sk-test"})
    return [f for f in report.findings if f.check.endswith(": image")]


def test_every_backend_evalgate_ships_runs_in_the_image() -> None:
    assert missing_from_image(BACKEND_NAMES) == []
    assert {backend_extra(b) for b in BACKEND_NAMES} - {None} <= set(IMAGE_EXTRAS)


def test_an_image_without_the_extra_lacks_its_backend() -> None:
    assert missing_from_image(["openai", "fake", "anthropic"], extras=()) == ["openai"]


def test_doctor_says_the_image_runs_an_openai_workflow(tmp_path: Path) -> None:
    init(tmp_path, "--backend", "openai")
    [finding] = image_findings(tmp_path)
    assert finding.status == "ok"
    assert finding.message == "the action's image runs these suites' backends (openai)"


@pytest.mark.parametrize(
    ("program", "runs"),
    [
        ("python", True),
        ("python3", True),
        ("./agent.sh", True),
        ("tools/run", True),
        ("node", False),
        ("npx", False),
    ],
)
def test_a_command_backend_program_is_in_the_image_or_the_repository(
    program: str, runs: bool
) -> None:
    assert program_in_image(program) is runs


def test_doctor_warns_of_a_command_program_the_image_lacks(tmp_path: Path) -> None:
    init(tmp_path, "--backend", "fake")
    config = tmp_path / "evalgate.yml"
    text = config.read_text(encoding="utf-8")
    start = text.index("    model:\n")
    end = text.index("\n    scorer:")
    config.write_text(
        text[:start]
        + "    model:\n      backend: command\n      name: my-app\n"
        + "      options: {command: node app.js}"
        + text[end:],
        encoding="utf-8",
    )
    out = io.StringIO()
    main(["doctor", "--dir", str(tmp_path), "--json"], out=out, err=io.StringIO())
    report = json.loads(out.getvalue())
    [finding] = [f for f in report["findings"] if f["check"].endswith(": image")]
    assert finding["status"] == "warn"
    assert "the command backend starts 'node'" in finding["message"]


def test_doctor_warns_of_an_empty_prompt(tmp_path: Path) -> None:
    # It passed, and `run` scored the empty prompt like any other.
    init(tmp_path)
    (tmp_path / "prompts" / "v2.txt").write_text("\n  \n", encoding="utf-8")
    report = doctor.doctor(tmp_path, tmp_path / "evalgate.yml", env={})
    [warned] = [f for f in report.findings if f.check.endswith(": prompts") and f.status == "warn"]
    assert warned.message == "v2 is empty: a run sends no system prompt"
    (tmp_path / "prompts" / "v2.txt").write_text("Answer.\n", encoding="utf-8")
    again = doctor.doctor(tmp_path, tmp_path / "evalgate.yml", env={})
    assert not [f for f in again.findings if f.check.endswith(": prompts") and f.status == "warn"]
