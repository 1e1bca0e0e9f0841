"""What a command imports: ``evalgate gate`` on two saved run files never loads a model's SDK,
and ``evalgate --version`` loads no command at all.

A gate compares files; importing ``anthropic`` or ``openai`` for it costs a second of CPU on
every pull request, and the holdout's cryptography, PyGithub and the runner are not needed to
read two run files either. The child process reports its own ``sys.modules`` (no timing is
asserted: benchmarks/footprint.py measures the start-up)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import copy_example

from evalgate.cli import COMMANDS, build_parser, main

SDKS = ("anthropic", "openai")
# Read two run files and decide: none of these is needed. (jinja2 is: the report's templates,
# and loading the config checks the suite's user-turn template.)
NOT_FOR_A_GATE = (
    *SDKS,
    "github",
    "httpx2",  # the HTTP client the SDKs here are built on
    "cryptography.hazmat",
    "evalgate.app",
    "evalgate.running.suite",
    "evalgate.analysis.release",
    # Other harnesses' readers: a file that starts as a run file does is never one of theirs.
    "evalgate.foreign",
    # Pass/fail scores are decided with exact arithmetic in plain Python (analysis.sign_test,
    # analysis.conditional, analysis.distributions): numpy and scipy are for other scores.
    "numpy",
    "scipy",
)
# `--version` prints one line: no command's module, no validation library, no templates.
NOT_FOR_VERSION = (
    *NOT_FOR_A_GATE,
    "pydantic",
    "yaml",
    "jinja2",
    "evalgate.config.models",
)

_CHILD = (
    "import json, sys\n"
    "from evalgate.cli import main\n"
    "try:\n"
    "    code = main(sys.argv[2:])\n"
    "except SystemExit as exit:\n"
    "    code = exit.code\n"
    "watched = json.loads(sys.argv[1])\n"
    "loaded = [m for m in watched if m in sys.modules]\n"
    "print(json.dumps({'code': code, 'loaded': loaded}))\n"
)


def _child(argv: list[str], watched: tuple[str, ...]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(watched), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "CI"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return report


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, list[str]]:
    """The example's config, and the gate of its v2 run against its v3 run (on the fake)."""
    root = copy_example(tmp_path / "shop")
    config = root / "evalgate.yml"
    for version in ("v2", "v3"):
        assert main(["run", version, "--config", str(config)]) == 0
    baseline, candidate = sorted((root / ".evalgate" / "runs").glob("*.json"))
    gate = ["gate", "--baseline", str(baseline), "--candidate", str(candidate)]
    return config, [*gate, "--config", str(config)]


def test_gate_on_two_run_files_imports_no_sdk(two_runs: tuple[Path, list[str]]) -> None:
    config, gate = two_runs
    # The suite as a real project has it: on the anthropic backend (the runs were saved with
    # the offline fake; the gate reads only the files).
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("backend: fake", "backend: anthropic"), encoding="utf-8")
    for form in ("text", "markdown", "json"):
        report = _child([*gate, "--format", form], NOT_FOR_A_GATE)
        assert report["code"] in (0, 1), report
        assert report["loaded"] == [], form


@pytest.mark.parametrize("name", NOT_FOR_VERSION)
def test_the_watch_list_names_modules_that_exist(name: str) -> None:
    # A misspelt name would never be in sys.modules, and the tests above could not fail.
    assert importlib.util.find_spec(name) is not None


def test_version_imports_no_command() -> None:
    report = _child(["--version"], NOT_FOR_VERSION)
    assert report == {"code": 0, "loaded": []}


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_alone_parses_as_in_the_whole_parser(command: str) -> None:
    # main() builds the parser of the command named on the command line alone: its options
    # and help must be those of the parser with every command.
    whole = _commands(build_parser())[command]
    alone = _commands(build_parser(command))[command]
    assert alone.format_help() == whole.format_help()


def test_every_command_has_its_module() -> None:
    assert sorted(_commands(build_parser())) == sorted(COMMANDS)


def test_a_run_file_is_told_by_its_first_bytes(tmp_path: Path) -> None:
    import gzip

    from evalgate.runs.schema import starts_as_run

    plain = tmp_path / "run.json"
    plain.write_text('{"schema_version":1,"name":"x"}', encoding="utf-8")
    spaced = tmp_path / "spaced.json"
    spaced.write_text('\n  {\n  "schema_version" : 1}', encoding="utf-8")
    packed = tmp_path / "run.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    promptfoo = tmp_path / "results.json"
    promptfoo.write_text('{"evalId": "eval-1", "results": {}}', encoding="utf-8")
    later = tmp_path / "later.json"
    later.write_text('{"name": "x", "schema_version": 1}', encoding="utf-8")
    assert starts_as_run(plain) and starts_as_run(spaced) and starts_as_run(packed)
    assert not starts_as_run(promptfoo)
    # Not first: read as a whole (and told apart) by the foreign formats' detection instead.
    assert not starts_as_run(later)
    assert not starts_as_run(tmp_path)
    assert not starts_as_run(tmp_path / "missing.json")


def test_the_gates_model_modules_hand_pydantic_evaluated_annotations(
    two_runs: tuple[Path, list[str]],
) -> None:
    # Under `from __future__ import annotations` pydantic compiles and evaluates every field's
    # annotation string as it builds a model: some 400 on each gate's start. A module a gate
    # loads that defines models keeps its annotations evaluated (quoting a forward reference).
    import __future__

    from pydantic import BaseModel

    package = Path(__file__).resolve().parents[2] / "evalgate"
    names = tuple(
        ".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in sorted(package.rglob("*.py"))
        if p.name != "__main__.py"
    )
    loaded = _child(two_runs[1], names)["loaded"]
    assert isinstance(loaded, list) and "evalgate.config.models" in loaded
    postponed = []
    for name in loaded:
        module = importlib.import_module(name)
        defines = any(
            isinstance(value, type)
            and issubclass(value, BaseModel)
            and value.__module__ == module.__name__
            for value in vars(module).values()
        )
        if defines and vars(module).get("annotations") is __future__.annotations:
            postponed.append(name)
    assert postponed == [], postponed


# A run with no holdout secret, no guard and no batch (every local run, every pull request's on
# the fake): the holdout's cryptography, the guard's Unicode regex and the batch runner are
# each imported by what uses them.
NOT_FOR_A_PLAIN_RUN = ("cryptography.hazmat", "regex", "evalgate.running.batch")


def test_a_plain_run_imports_no_cryptography_regex_or_batch_runner(tmp_path: Path) -> None:
    config = copy_example(tmp_path / "shop") / "evalgate.yml"
    run = ["run", "v3", "--limit", "3", "--no-save", "--config", str(config)]
    report = _child(run, NOT_FOR_A_PLAIN_RUN)
    assert report["code"] == 0, report
    assert report["loaded"] == []


_COLLECTOR = (
    "import gc, json, runpy, sys\n"
    "sys.argv = ['evalgate', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('evalgate', run_name='__main__')\n"
    "except SystemExit as exit:\n"
    "    print(json.dumps({'code': exit.code, 'frozen': gc.get_freeze_count(),\n"
    "                      'enabled': gc.isenabled()}))\n"
)


def test_a_command_line_freezes_its_imports_and_a_call_from_python_does_not(
    two_runs: tuple[Path, list[str]],
) -> None:
    import gc

    # `python -m evalgate` (and the console script) is one command a process: the objects its
    # imports made are frozen, the collector on again for the command's own.
    done = subprocess.run(
        [sys.executable, "-c", _COLLECTOR, *two_runs[1]],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["code"] in (0, 1), done.stderr
    assert report["frozen"] > 10_000 and report["enabled"] is True
    # main() called with its argv, as many times in one process as the tests call it: nothing
    # frozen (a frozen object is never collected), the collector as it was.
    frozen = gc.get_freeze_count()
    assert main(two_runs[1]) in (0, 1)
    assert gc.get_freeze_count() == frozen and gc.isenabled()
