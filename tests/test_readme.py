"""The README's first steps, as a newcomer takes them: a fresh virtual environment, the install
line (pointed at this checkout instead of the tag), `evalgate demo`, and the lines the README
quotes from it. Slow: the install builds the project and fetches its dependencies."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from evalgate import DISTRIBUTION, SOURCE

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _first_block_after(heading: str, language: str) -> str:
    section = README[README.index(heading) :]
    match = re.search(rf"```{language}\n(.*?)```", section, re.DOTALL)
    assert match, f"no {language} block under {heading!r}"
    return match.group(1)


@pytest.mark.slow
def test_the_readme_first_steps_work_on_a_fresh_venv(tmp_path: Path) -> None:
    commands = _first_block_after("## Try it", "sh").splitlines()
    install = commands[0].split("#")[0].strip()
    assert install == f'pip install "{DISTRIBUTION} @ {SOURCE}@v0"'
    assert commands[1].strip() == "evalgate demo"

    # The checkout as a source tree of its own (symlinks resolved, as an sdist has them), so
    # the build writes nothing into the working tree.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "evalgate",
        source / "evalgate",
        ignore=shutil.ignore_patterns("__pycache__", ".evalgate"),
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "CI")}
    env["NO_COLOR"] = "1"
    bin_ = venv / "bin"
    # The README's line, with the tag's URL replaced by the checkout's.
    spec = f"{DISTRIBUTION} @ {source.as_uri()}"
    done = subprocess.run(
        [str(bin_ / "pip"), "install", "-q", spec],
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    done = subprocess.run(
        [str(bin_ / "evalgate"), "--version"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stdout.strip() == f"evalgate {version}"
    # `pip show -v` names this repository, as the README says to tell the projects apart.
    flat = " ".join(README.split())
    assert f"`pip show -v {DISTRIBUTION}` lists this repository under Project-URLs" in flat
    done = subprocess.run(
        [str(bin_ / "pip"), "show", "-v", DISTRIBUTION], capture_output=True, text=True, env=env
    )
    assert "Repository, https://github.com/evalgate/evalgate" in done.stdout

    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [str(bin_ / "evalgate"), "demo"],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    quoted = _first_block_after("## Try it", "text").rstrip("\n")
    assert quoted in done.stdout, "the README quotes what the installed demo prints"
    assert list(work.iterdir()) == []  # the demo writes nothing where it runs
