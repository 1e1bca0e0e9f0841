"""Docs come from the source: docs/action.md's tables match action.yml, action.yml matches
``evalgate.action.Inputs`` and the outputs the action sets, docs/cli.md's exit codes are the
CLI's, and the CLI's help matches its parser."""

from __future__ import annotations

import argparse
import re
import tomllib
import typing
from pathlib import Path

import pytest
import yaml

from evalgate.action.inputs import Inputs
from evalgate.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
ACTION_DOC = ROOT / "docs" / "action.md"
CLI_DOC = ROOT / "docs" / "cli.md"
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
ACTION_SOURCE = "\n".join(
    path.read_text(encoding="utf-8") for path in sorted((ROOT / "evalgate" / "action").glob("*.py"))
)
EMPTY = {"", "-", "—", "none", "(none)", '""', "''"}


# --------------------------------------------------------------------------- docs tables


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` is a pipe inside a cell)."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def _plain(text: str) -> str:
    """A cell's value without code marks or quotes; every way of writing "empty" is ""."""
    value = text.strip().strip("`").strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return "" if value.lower() in EMPTY else value


def doc_table(path: Path, title: str) -> list[dict[str, str]]:
    """The first table under the heading ``title`` (any level) of the Markdown file ``path``,
    as rows by column name."""
    text = path.read_text(encoding="utf-8")
    heading = re.search(rf"^#+ {re.escape(title)}[ \t]*$", text, re.MULTILINE)
    assert heading is not None, f"{path.name} has no heading {title!r}"
    section = text[heading.end() :]
    following = re.search(r"^#+ ", section, re.MULTILINE)
    section = section[: following.start()] if following else section
    lines = [ln for ln in section.splitlines() if ln.strip().startswith("|")]
    assert len(lines) >= 2, f"the {title!r} section of {path.name} has no table"
    header = [h.lower() for h in _cells(lines[0])]
    assert all(re.fullmatch(r":?-+:?", c) for c in _cells(lines[1])), (
        f"the {title!r} table of {path.name} has no separator row"
    )
    return [dict(zip(header, _cells(ln), strict=True)) for ln in lines[2:]]


def _names(rows: list[dict[str, str]]) -> list[str]:
    return [_plain(row["name"]) for row in rows]


def test_the_inputs_table_matches_action_yml() -> None:
    rows = doc_table(ACTION_DOC, "Action inputs")
    assert _names(rows) == list(ACTION["inputs"]), "names (and order) differ from action.yml"
    for row in rows:
        spec = ACTION["inputs"][_plain(row["name"])]
        default = _plain(row.get("default", ""))
        if spec.get("required"):
            assert default.lower() == "required", f"{row['name']} is required in action.yml"
        else:
            assert default == _plain(str(spec.get("default", ""))), row["name"]
        assert row.get("description"), f"{row['name']} has no description in docs/action.md"


def test_the_outputs_table_matches_action_yml() -> None:
    rows = doc_table(ACTION_DOC, "Action outputs")
    assert _names(rows) == list(ACTION["outputs"]), "names (and order) differ from action.yml"
    for row in rows:
        assert row.get("description"), f"{row['name']} has no description in docs/action.md"


def test_the_descriptions_agree_with_action_yml_loosely() -> None:
    """Same meaning, not necessarily the same words: most of action.yml's words reappear."""
    for title, key in (("Action inputs", "inputs"), ("Action outputs", "outputs")):
        rows = doc_table(ACTION_DOC, title)
        for row in rows:
            declared = str(ACTION[key][_plain(row["name"])]["description"])
            words = set(re.findall(r"[a-z_]{4,}", declared.lower()))
            found = words & set(re.findall(r"[a-z_]{4,}", row["description"].lower()))
            assert len(found) >= len(words) / 2, (row["name"], declared, row["description"])


# --------------------------------------------------------------------------- action.yml


def test_action_inputs_are_snake_case_fields_of_inputs() -> None:
    for name in ACTION["inputs"]:
        # Docker actions keep hyphens in INPUT_<NAME>, which a shell cannot read.
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name), f"input {name!r} is not snake_case"
        assert name in Inputs.model_fields, f"input {name!r} is not a field of Inputs"


def test_every_field_of_inputs_is_declared_in_action_yml() -> None:
    undeclared = set(Inputs.model_fields) - set(ACTION["inputs"])
    assert not undeclared, f"Inputs fields missing from action.yml: {sorted(undeclared)}"


def test_action_yml_defaults_are_the_inputs_defaults() -> None:
    """What GitHub passes for an input left unset parses to the model's own default."""
    env = {}
    for name, spec in ACTION["inputs"].items():
        default = str(spec.get("default", ""))
        if "${{" not in default:  # an expression GitHub evaluates, e.g. github.token
            env[f"INPUT_{name.upper()}"] = default
    assert Inputs.from_env(env) == Inputs()


def test_action_yml_names_the_modes_inputs_accepts() -> None:
    accepted = set(typing.get_args(Inputs.model_fields["mode"].annotation))
    description = str(ACTION["inputs"]["mode"]["description"])
    named = {m for m in accepted if re.search(rf"\b{m}\b", description)}
    assert named == accepted, f"action.yml's mode description omits {sorted(accepted - named)}"


def test_action_yml_outputs_are_the_outputs_the_action_sets() -> None:
    set_in_code = set(re.findall(r"\.set\(\s*\"(\w+)\"", ACTION_SOURCE))
    assert set_in_code == set(ACTION["outputs"])


# --------------------------------------------------------------------------- CLI help


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            return dict(act.choices)
    return {}


def _command_paths() -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    for name, sub in _subparsers(build_parser()).items():
        paths.append((name,))
        paths += [(name, nested) for nested in _subparsers(sub)]
    return paths


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--help"])
    assert stopped.value.code == 0, argv
    return capsys.readouterr().out


def test_main_is_the_evalgate_command() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["scripts"]["evalgate"] == "evalgate.cli:main"


def test_top_level_help_lists_every_subcommand(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    out = _help([], capsys)
    flat = " ".join(out.split())
    parser = build_parser()
    [subs] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert subs.choices, "no subcommands registered"
    for choice in subs._choices_actions:
        assert re.search(rf"^\s+{re.escape(choice.dest)}\s", out, re.MULTILINE), choice.dest
        assert choice.help and " ".join(choice.help.split()) in flat, choice.dest
    listed = {choice.dest for choice in subs._choices_actions}
    assert listed == set(subs.choices), "a subcommand without help is hidden from --help"


@pytest.mark.parametrize("path", _command_paths(), ids=" ".join)
def test_every_subcommand_help_runs(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    out = _help(list(path), capsys)
    assert out.startswith(f"usage: evalgate {' '.join(path)}")


# --------------------------------------------------------------------------- install lines
# "evalgate", "evalgate-ci", "evalgate-cli" and "evalgate-sdk" on the package index are other
# projects: every install line in the docs must install this one, by its own distribution name
# from its repository, or from a checkout (`pip install .`, `-e`, `-r`).
DOC_FILES = [README, ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _install_lines() -> list[tuple[str, str]]:
    found = []
    for path in DOC_FILES:
        for line in path.read_text(encoding="utf-8").splitlines():
            for command in re.findall(r"pip install [^`&;|#\n]*", line):
                found.append((path.name, command.strip()))
    return found


def test_every_install_line_installs_this_project() -> None:
    from evalgate import DISTRIBUTION, RELEASE_TAG, SOURCE

    lines = _install_lines()
    assert any(name == "README.md" for name, _ in lines), "the README has no install line"
    ours = re.compile(
        rf'^pip install (-q )?"{re.escape(DISTRIBUTION)}(\[[a-z]+\])? @ '
        rf'{re.escape(SOURCE)}@{re.escape(RELEASE_TAG)}"$'
    )
    checkout = re.compile(r'^pip install (-q )?(-e )?("?\.(\[[a-z,]+\])?"?|-r \S+)$')
    for name, command in lines:
        assert ours.match(command) or checkout.match(command), f"{name}: {command}"


def test_the_distribution_name_is_the_one_the_docs_install() -> None:
    from evalgate import DISTRIBUTION

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["name"] == DISTRIBUTION
    # The import package keeps its name, as the layout requires.
    assert project["project"]["scripts"]["evalgate"].startswith("evalgate.")


def test_the_exit_codes_table_is_the_clis() -> None:
    from evalgate.cli.context import EXIT_CODES

    rows = doc_table(CLI_DOC, "Exit codes")
    assert [(int(r["code"]), r["meaning"]) for r in rows] == list(EXIT_CODES)
