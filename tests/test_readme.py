"""The README, as a newcomer reads it: short enough for five minutes, and every command it shows
runs as shown. The first steps run on a fresh virtual environment (the install line pointed at
this checkout instead of the tag; slow: the install builds the project and fetches its
dependencies); the repository steps and the everyday commands run in a repository of their
own with the test's evalgate."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import evalgate
from evalgate import DISTRIBUTION, SOURCE

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


README_LINES = 300


def _block_under(heading: str) -> list[str]:
    """The commands of the ``sh`` blocks of one section, their comments dropped."""
    section = README[README.index(heading) :]
    following = re.search(r"^## ", section[len(heading) :], re.MULTILINE)
    section = section[: len(heading) + following.start()] if following else section
    lines: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL):
        lines += [_command(line) for line in block.splitlines() if _command(line)]
    return lines


def _command(line: str) -> str:
    """A shown command without its comment (`#` after two spaces, as the README writes them)."""
    return re.split(r"\s{2,}#|^#", line, maxsplit=1)[0].strip()


def _every_command() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", README, re.DOTALL)
    return [_command(ln) for block in blocks for ln in block.splitlines() if _command(ln)]


# Commands the README shows that the tests here do not run in a shell, and what checks them:
# the tag's install line names a release this checkout is not yet (the fresh-venv test runs it
# with the checkout's path in place of the tag, and the `pip install .` it offers beside it);
# the test command runs this suite (.ci/run runs exactly that line, checked below).
NOT_RUN_HERE = {
    f'pip install "{DISTRIBUTION} @ {SOURCE}@v0"': "test_the_readme_first_steps_work_on_a_fresh_venv",
    "pip install . && evalgate demo": "test_the_readme_first_steps_work_on_a_fresh_venv",
    'pip install -e ".[dev]" && scripts/test': "test_ci_runs_the_readme_test_command",
}


def test_the_readme_is_read_in_five_minutes() -> None:
    assert len(README.splitlines()) <= README_LINES


def test_every_command_the_readme_shows_is_run_by_a_test() -> None:
    run_here = (
        _block_under("## Add it to a repository")
        + _block_under("## The commands people use most")
        + ["evalgate demo"]
    )
    assert sorted(set(_every_command())) == sorted(set(run_here) | set(NOT_RUN_HERE))


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'python -m pip install --quiet -e ".[dev]"' in ci
    assert ci.rstrip().splitlines()[-1] == "scripts/test"
    assert _block_under("## Two commands")[-1] == 'pip install -e ".[dev]" && scripts/test'


def _shell(command: str, cwd: Path, env: dict[str, str], stdin: str = "") -> str:
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr, command
    return done.stdout


def test_the_readme_repository_steps_and_commands_run_as_shown(tmp_path: Path) -> None:
    """A repository of one's own with an origin to push to, then the README's commands in
    order, each in a shell as the README writes it; `evalgate init` gets Enter for every
    question, as the README says to press."""
    origin = tmp_path / "origin.git"
    repo = tmp_path / "repository"
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "VIRTUAL_ENV", "FORCE_COLOR")}
    env.update(
        NO_COLOR="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        GIT_AUTHOR_NAME="A Newcomer",
        GIT_AUTHOR_EMAIL="newcomer@example.org",
        GIT_COMMITTER_NAME="A Newcomer",
        GIT_COMMITTER_EMAIL="newcomer@example.org",
        GIT_CONFIG_NOSYSTEM="1",
        HOME=str(tmp_path),
    )
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "remote", "add", "origin", str(origin)], cwd=repo, check=True)
    steps = _block_under("## Add it to a repository")
    assert steps[0] == "evalgate init"
    outputs = {}
    for command in steps:
        stdin = "\n" * 40 if command == "evalgate init" else ""
        outputs[command] = _shell(command, repo, env, stdin)
    assert "wrote evalgate.yml" in outputs["evalgate init"]
    assert "0 FAIL" in outputs["evalgate doctor"]
    pushed = subprocess.run(
        ["git", "log", "--oneline", "main"], cwd=origin, capture_output=True, text=True
    )
    assert "Gate prompt changes with evalgate" in pushed.stdout
    for command in _block_under("## The commands people use most"):
        outputs[command] = _shell(command, repo, env)
    assert (repo / "prompts" / "v2.txt").is_file() and (repo / "report.html").is_file()
    [gate] = [c for c in outputs if c.startswith("evalgate gate")]
    assert re.search(r"\b(PASS|FAIL|INCONCLUSIVE)\b", outputs[gate]), outputs[gate]


def test_the_demo_prints_what_the_readme_quotes(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    env["NO_COLOR"] = "1"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    out = _shell("evalgate demo", tmp_path, env)
    assert _first_block_after("## Try it", "text").rstrip("\n") in out


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
    assert commands[0].split("#")[1].strip() == "or: pip install ."
    assert commands[1].strip() == "evalgate demo"
    assert _block_under("## Two commands")[0] == "pip install . && evalgate demo"

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
    # The README's other install line, `pip install .` in the checkout, as shown.
    done = subprocess.run(
        [str(bin_ / "pip"), "install", "-q", "."],
        capture_output=True,
        text=True,
        env=env,
        cwd=source,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    version = evalgate.__version__  # pyproject.toml reads it from there
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
