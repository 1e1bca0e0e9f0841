"""The CLI end to end: real processes (`python -m evalgate`) on a copy of the bike-shop example,
and the same entry point in-process for the many bad-input cases.

Exit codes (documented in `evalgate --help`): 0 ok, 1 a failed gate, 2 a usage or input error,
3 an incomplete run.
A user error is one line `error: ...` on stderr, with no traceback.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import copy_example, triage_workspace

from evalgate.cli import build_parser, main
from evalgate.runs.schema import read_run, runs_dir

ENV = {k: v for k, v in os.environ.items() if k != "CI"}  # CI would switch the cache on


@pytest.fixture(autouse=True)
def not_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


def run_in_process(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------------------------------
# Real processes. Starting Python and importing evalgate (scipy above all) is most of the cost
# of each, so there are few of them, all started at once; commands that only read saved runs
# go through the same main() in-process, on a workspace whose runs a real process could read.
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spaces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("cli")
    saved = copy_example(root / "saved")
    with pytest.MonkeyPatch.context() as env:
        env.delenv("CI", raising=False)
        for version in ("v1", "v2"):
            code, _, err = run_in_process("run", version, "--config", str(saved / "evalgate.yml"))
            assert code == 0, err
    empty = root / "empty"
    empty.mkdir()
    return {"saved": saved, "fresh": copy_example(root / "fresh"), "empty": empty}


COMMANDS: dict[str, tuple[str, list[str]]] = {
    # name: (workspace, argv)
    "demo": ("empty", ["demo", "--show", "3"]),
    "run": ("fresh", ["run", "v2"]),
    "run-verbose": ("saved", ["run", "v2", "--limit", "6", "--no-save", "-v"]),
    "missing-config": ("empty", ["run", "v2"]),
}


@pytest.fixture(scope="module")
def done(spaces: dict[str, Path]) -> Iterator[dict[str, subprocess.CompletedProcess[str]]]:
    started = {
        name: subprocess.Popen(
            [sys.executable, "-m", "evalgate", *argv],
            cwd=spaces[space],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, (space, argv) in COMMANDS.items()
    }
    results = {}
    try:
        for name, process in started.items():
            out, err = process.communicate(timeout=180)
            results[name] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
        yield results
    finally:
        for process in started.values():  # only after a timeout: ours, ended by their handles
            if process.poll() is None:
                process.kill()
                process.communicate()


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def test_demo_prints_three_run_reports_and_two_comparisons(
    done: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    out = ok(done["demo"])
    headers = re.findall(r"^bike-shop · prompt (v\d) ", out, re.MULTILINE)
    assert headers == ["v1", "v2", "v3"]
    comparisons = re.findall(r"^Compare  A = \S+ \((v\d)\)\n +B = \S+ \((v\d)\)", out, re.MULTILINE)
    assert comparisons == [("v1", "v2"), ("v2", "v3")]
    assert out.count("Sign test p = ") == 2
    assert "Next: copy examples/bike-shop" in out
    # then the agent example: v2 gated on a baseline of v1, the broken trajectories shown
    agent = out[out.index("The support-agent example: an order-support agent with 6 tools") :]
    assert re.findall(r"^support-agent · prompt (v\d) ", agent, re.MULTILINE) == ["v2"]
    assert "Verdict: FAIL\n  - significantly worse: broke 51, fixed 15" in agent
    assert (
        "baseline lookup_order → issue_refund, candidate issue_refund" in agent
        and "failed: tool_sequence (call 1: expected lookup_order, got issue_refund" in agent
    )


def test_run_prints_the_report_and_saves_the_run(
    done: dict[str, subprocess.CompletedProcess[str]], spaces: dict[str, Path]
) -> None:
    out = ok(done["run"])
    assert out.startswith("bike-shop · prompt v2 ")
    assert "Accuracy " in out
    [saved] = list(runs_dir(spaces["fresh"] / ".evalgate").glob("*.json"))
    assert f"saved {saved.stem} to " in done["run"].stderr


def test_run_limit_no_save_verbose(
    done: dict[str, subprocess.CompletedProcess[str]], spaces: dict[str, Path]
) -> None:
    out = ok(done["run-verbose"])
    marks = re.findall(r"^(ok   |WRONG|ERROR) (\S+): ", out, re.MULTILINE)
    assert len(marks) == 6
    assert re.search(r"^bike-shop · prompt v2 .* · 6 cases$", out, re.MULTILINE)
    assert "saved" not in done["run-verbose"].stderr
    # Only the two runs made before the processes started.
    assert len(list(runs_dir(spaces["saved"] / ".evalgate").glob("*.json"))) == 2


def in_saved(spaces: dict[str, Path], *argv: str) -> str:
    code, out, err = run_in_process(*argv, "--config", str(spaces["saved"] / "evalgate.yml"))
    assert code == 0, err
    return out


def test_list_shows_the_saved_runs(spaces: dict[str, Path]) -> None:
    out = in_saved(spaces, "list")
    names = sorted(p.stem for p in runs_dir(spaces["saved"] / ".evalgate").glob("*.json"))
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["run", "prompt", "backend"]
    assert [line.split()[0] for line in lines[1:]] == names
    assert [line.split()[1] for line in lines[1:]] == ["v1", "v2"]
    # The repeats column: a baseline's repeats are what its noise floor stands on.
    assert lines[0].split()[4:6] == ["n", "repeats"]
    repeats = [
        read_run(runs_dir(spaces["saved"] / ".evalgate") / f"{n}.json").repeats for n in names
    ]
    assert [int(line.split()[5]) for line in lines[1:]] == repeats
    code, out, _ = run_in_process(
        "list", "--json", "--config", str(spaces["saved"] / "evalgate.yml")
    )
    assert code == 0
    assert [row["repeats"] for row in json.loads(out)] == repeats


def test_compare_pairs_two_saved_runs(spaces: dict[str, Path]) -> None:
    out = in_saved(spaces, "compare", "latest:v1", "latest:v2")
    assert re.match(r"Compare  A = bike-shop-v1-\S+ \(v1\)\n +B = bike-shop-v2-\S+ \(v2\)", out)
    assert "Paired cases " in out
    assert "fixed by B " in out


def test_report_as_json_parses(spaces: dict[str, Path]) -> None:
    report = json.loads(in_saved(spaces, "report", "latest:v2", "--format", "json"))
    assert report["prompt"] == "v2"
    assert report["backend"] == "fake"
    assert report["accuracy"]["n"] == report["scored"]


def test_a_user_error_is_one_line_and_exit_2(
    done: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    result = done["missing-config"]
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: config file evalgate.yml does not exist")


# ------------------------------------------------------------------------------------------
# In-process: the same main(), many inputs
# ------------------------------------------------------------------------------------------


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def break_case_file(root: Path) -> None:
    lines = (root / "cases.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[4] = '{"id": "bk-broken", "message": "unfinished\n'
    (root / "cases.jsonl").write_text("".join(lines), encoding="utf-8")


BAD_INPUTS: list[tuple[str, Callable[[Path], Any], list[str], list[str]]] = [
    # (name, how to break the workspace, argv, words the error must contain)
    (
        "missing-config",
        lambda root: (root / "evalgate.yml").unlink(),
        ["run", "v2"],
        ["config file evalgate.yml does not exist", "evalgate demo"],
    ),
    (
        "bad-config-key",
        lambda root: edit(root / "evalgate.yml", "    max_tokens: 64", "    max_tokenz: 64"),
        ["run", "v2"],
        ["evalgate.yml:", "suites.bike-shop.model.max_tokenz: unknown key", "max_tokens"],
    ),
    (
        "misspelt-required-key",
        lambda root: edit(root / "evalgate.yml", "    scorer:\n", "    scorrer:\n"),
        ["run", "v2"],
        ["suites.bike-shop.scorrer: unknown key; did you mean scorer?", "rename it to scorer"],
    ),
    (
        "template-syntax",
        lambda root: edit(root / "evalgate.yml", "      {{ message }}\n", "      {{ message }\n"),
        ["run", "v2"],
        # "template: |" is line 20 of the example's evalgate.yml; "{{ message }}" line 22.
        ["evalgate.yml:22: suites.bike-shop.template: template syntax error"],
    ),
    (
        "bad-case-file",
        break_case_file,
        ["run", "v2"],
        ["cases.jsonl:5: invalid JSON"],
    ),
    (
        "unknown-version",
        lambda root: None,
        ["run", "v22"],
        ["unknown prompt version 'v22'", "did you mean v2? prompt versions: v1, v2, v3"],
    ),
    (
        "version-in-another-case",
        lambda root: None,
        ["run", "V2"],
        ["unknown prompt version 'V2'", "did you mean v2? prompt versions: v1, v2, v3"],
    ),
    (
        "unknown-run",
        lambda root: None,
        ["report", "no-such-run"],
        ["no run named 'no-such-run'", "evalgate list"],
    ),
    (
        "unknown-compare-run",
        lambda root: None,
        ["compare", "latest:v1", "latest:v2"],
        ["no saved run of prompt 'v1'"],
    ),
]


@pytest.mark.parametrize(
    ("breaks", "argv", "words"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_input_is_one_error_line_and_exit_2(
    bike_shop: Path,
    monkeypatch: pytest.MonkeyPatch,
    breaks: Callable[[Path], Any],
    argv: list[str],
    words: list[str],
) -> None:
    breaks(bike_shop)
    monkeypatch.chdir(bike_shop)
    code, out, err = run_in_process(*argv)
    assert code == 2
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith("error: ")
    for word in words:
        assert word in line


def test_run_as_json_and_compare_as_markdown(
    bike_shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(bike_shop)
    code, out, _ = run_in_process("run", "v1", "--limit", "10", "--format", "json")
    assert code == 0
    v1 = json.loads(out)
    assert (v1["n"], v1["prompt"], v1["accuracy"]["hits"]) == (10, "v1", 0.0)
    assert run_in_process("run", "v2", "--limit", "10")[0] == 0
    code, out, _ = run_in_process("compare", "latest:v1", "latest:v2", "--format", "markdown")
    assert code == 0
    assert out.startswith("### Compare `v1` → `v2` · 10 paired cases")
    code, out, _ = run_in_process("list", "--format", "json")
    assert [row["prompt"] for row in json.loads(out)] == ["v1", "v2"]


def test_list_with_no_runs_says_how_to_make_one(
    bike_shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(bike_shop)
    code, out, _ = run_in_process("list")
    assert code == 0
    assert "no saved runs" in out
    assert "evalgate run VERSION" in out


@pytest.mark.parametrize(
    "argv",
    [[], ["run"], ["run", "v2", "--limit", "0"], ["run", "v2", "--format", "html"], ["frobnicate"]],
    ids=["nothing", "no-version", "limit-0", "bad-format", "unknown-command"],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert "usage: evalgate" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["import", "promptfoo", "promptfooconfig.yaml"],
        ["noise", "v1"],
        ["split"],
        ["init"],
        ["baseline", "pull", "--repo", "octo/shop"],
        ["completion"],
        ["holdout", "list"],
        ["list"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_command_with_no_markdown_form_refuses_format_markdown(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # These printed their text under --format markdown, as if it were Markdown; then refused it
    # while their --help still offered it.
    at = 2 if argv[0] in ("baseline", "holdout") else 1
    named = " ".join(argv[:at])
    with pytest.raises(SystemExit) as caught:
        main([*argv[:at], "--format", "markdown", *argv[at:]])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    # the usage, then one line of error
    assert err.startswith(f"usage: evalgate {named} ")
    last = err.rstrip("\n").splitlines()[-1]
    assert last.startswith(
        f"evalgate {named}: error: argument --format: invalid choice: 'markdown'"
    )
    with pytest.raises(SystemExit) as caught:
        main([*argv[:at], "--help"])
    assert caught.value.code == 0
    shown = capsys.readouterr().out
    assert "--format {text,json}" in shown
    assert "markdown" not in shown
    with pytest.raises(SystemExit) as caught:
        main([*argv[:at], "--json", *argv[at:], "--format", "markdown"])
    assert "invalid choice: 'markdown'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "report", "gate", "compare", "demo"])
def test_a_command_with_a_markdown_form_offers_it(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main([command, "--help"])
    assert caught.value.code == 0
    assert "--format {text,markdown,json}" in capsys.readouterr().out


def test_holdout_options_go_after_the_action(capsys: pytest.CaptureFixture[str]) -> None:
    # Before the action they were taken and then overwritten by the action's defaults: `holdout
    # --json list` printed text, `holdout --format markdown list` was not refused.
    for option in (["--json"], ["--format", "markdown"]):
        with pytest.raises(SystemExit) as caught:
            main(["holdout", *option, "list"])
        assert caught.value.code == 2
        assert "usage: evalgate" in capsys.readouterr().err


def test_help_lists_every_subcommand_and_the_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    text = capsys.readouterr().out
    parser = build_parser()
    [subparsers] = [a for a in parser._actions if a.choices and a.dest == "command"]
    commands = list(subparsers.choices)
    assert {"demo", "run", "list", "report", "compare"} <= set(commands)
    for command in commands:
        assert re.search(rf"^\s+{command}\s+\S", text, re.MULTILINE), command
    folded = " ".join(text.split())
    assert (
        "Exit codes: 0 ok, 1 a failed gate, 2 a usage or input error, 3 an incomplete run."
        in folded
    )


# ------------------------------------------------------------------------------------------
# Failures are visible: the run report lists wrong and errored cases with their reasons, and
# an incomplete run exits 3, whatever the suite's categories.
# ------------------------------------------------------------------------------------------


def test_run_lists_wrong_cases_of_a_suite_without_categories(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    root = triage_workspace(tmp_path / "triage")
    code, out, _ = cli("run", "v1", "--config", str(root / "evalgate.yml"))
    assert code == 0
    # The app answers "spam" to all four: T-3 (urgent) and T-4 (normal) are wrong.
    assert "Failed cases  0 errored, 2 wrong\n" in out
    assert re.findall(r"^  WRONG (\S+): expected (\S+), answered (\S+):", out, re.MULTILINE) == [
        ("T-3", "urgent", "spam"),
        ("T-4", "normal", "spam"),
    ]


def test_an_all_errored_run_exits_3_and_shows_why(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    root = triage_workspace(tmp_path / "triage", mode="crash")
    config = str(root / "evalgate.yml")
    code, out, err = cli("run", "v1", "--config", config, "--show", "2")
    assert code == 3
    assert "Failed cases  4 errored, 0 wrong; the first 2 (--show N lists more)" in out
    errors = re.findall(r"^  ERROR (\S+): \[command\] (.*)$", out, re.MULTILINE)
    assert [case for case, _ in errors] == ["T-1", "T-2"]
    assert all("exit code 4" in why and "KeyError: 'thread'" in why for _, why in errors)
    assert "the run is incomplete: 4 of 4 cases errored" in err
    # The saved run reports the same, with the same exit code.
    code, out, _ = cli("report", "latest:v1", "--config", config)
    assert code == 3
    assert len(re.findall(r"^  ERROR T-\d: ", out, re.MULTILINE)) == 4
    code, out, _ = cli("report", "latest:v1", "--config", config, "--json")
    assert code == 3
    report = json.loads(out)
    assert report["errors"] == 4 and report["incomplete"] is True
    assert [f["outcome"] for f in report["failed"]] == ["error"] * 4


def test_a_reply_without_an_answer_is_shown_beside_the_wrong_case(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    root = triage_workspace(tmp_path / "triage", mode="prose")
    code, out, _ = cli("run", "v1", "--config", str(root / "evalgate.yml"), "--show", "1")
    assert code == 0
    assert "Failed cases  0 errored, 4 wrong; the first 1 (--show N lists more)" in out
    assert '  WRONG T-1: expected spam, answered (none) (reply "Spam, I think."): ' in out


# ------------------------------------------------------------------------------------------
# --json everywhere: every command takes it, and an error is then a JSON object on stdout.
# ------------------------------------------------------------------------------------------


def leaf_commands() -> list[tuple[str, ...]]:
    """Every command path a user runs (the container's `action` entry point aside)."""
    paths: list[tuple[str, ...]] = []

    def walk(parser: Any, path: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
        if not subs:
            paths.append(path)
            return
        for name, child in subs[0].choices.items():
            walk(child, (*path, name))

    walk(build_parser(), ())
    return [p for p in paths if p != ("action",)]


def test_every_command_takes_json() -> None:
    for path in leaf_commands():
        sub = build_parser()
        for name in path:
            [subs] = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
            sub = subs.choices[name]
        flags = {flag for a in sub._actions for flag in a.option_strings}
        assert "--json" in flags, " ".join(path)


# Arguments that get each command past argparse to where it reads the (missing) config.
ARGS = {
    ("run",): ["v1"],
    ("noise",): ["v1"],
    ("gate",): ["--baseline", "a", "--candidate", "b"],
    ("release",): ["v1"],
    ("audit",): ["v2", "--baseline", "v1"],
    ("holdout", "add"): ["file.jsonl"],
    ("holdout", "retire"): ["x"],
    ("baseline", "pull"): ["--repo", "o/r", "--out", "out"],
    ("merge",): ["a.json"],
    ("import",): ["promptfoo", "missing.yaml"],
    ("report",): ["r"],
    ("compare",): ["a", "b"],
}
SUCCEEDS_WITHOUT_CONFIG = {("demo",), ("completion",), ("init",), ("doctor",)}


@pytest.mark.parametrize(
    "path",
    [p for p in leaf_commands() if p not in SUCCEEDS_WITHOUT_CONFIG],
    ids=" ".join,
)
def test_a_json_error_is_an_object_on_stdout_and_exit_2(
    path: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no evalgate.yml, no runs, no files
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    code, out, err = run_in_process(*path, *ARGS.get(path, []), "--json")
    assert code == 2, (out, err)
    document = json.loads(out)
    error = document["error"]
    assert error["exit_code"] == 2
    assert error["message"] and error["what"]
    assert err.startswith("error: ")  # the same line as without --json, on stderr


def test_a_json_usage_error_is_an_object_on_stdout_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["run", "--json"])
    assert caught.value.code == 2
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["kind"] == "usage"
    assert "version" in error["message"]
    assert "usage: evalgate run" in captured.err


def test_completion_as_json(cli: Callable[..., tuple[int, str, str]]) -> None:
    code, out, _ = cli("completion", "--json")
    assert code == 0
    document = json.loads(out)
    assert document["shell"] == "bash"
    assert "complete -F _evalgate evalgate" in document["script"]


def test_a_mistyped_candidate_lists_the_versions(
    bike_shop: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    config = str(bike_shop / "evalgate.yml")
    assert cli("run", "v2", "--config", config)[0] == 0
    code, out, err = cli(
        "gate", "--baseline", "latest:v2", "--candidate", "v33", "--config", config
    )
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert (
        "--candidate 'v33' is neither a saved run nor a prompt version of suite bike-shop" in line
    )
    assert "did you mean v3? prompt versions: v1, v2, v3" in line
    code, _, err = cli(
        "gate", "--baseline", "bike-shop-v9", "--candidate", "v3", "--config", config
    )
    assert code == 2
    assert "no run named 'bike-shop-v9'" in err and "the newest: bike-shop-v2-" in err
    # latest:VERSION with a typo or another case names the saved version it is closest to.
    for typo in ("latest:v22", "latest:V2"):
        code, _, err = cli("gate", "--baseline", typo, "--candidate", "v3", "--config", config)
        assert code == 2
        assert "did you mean latest:v2? saved runs are of prompts v2" in err


def test_gate_markdown_honours_show(
    bike_shop: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    config = str(bike_shop / "evalgate.yml")
    assert cli("run", "v1", "--config", config)[0] == 0
    # v1 -> v2 fixes 116 cases on the fake (bike-shop-v1-v2 golden); none break.
    code, out, _ = cli(
        "gate",
        "--baseline",
        "latest:v1",
        "--candidate",
        "v2",
        "--format",
        "markdown",
        "--show",
        "2",
        "--no-save",
        "--config",
        config,
    )
    assert code == 0  # a pass: nothing broke
    fixed = out[out.index("<summary>Fixed:") :].split("</details>")[0]
    rows = [line for line in fixed.splitlines() if line.startswith("| bk-")]
    assert len(rows) == 2


def test_a_null_input_field_reaches_the_model_as_nothing(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    root = triage_workspace(tmp_path / "triage", mode="echo", template="[{{ body }}]")
    rows = [json.loads(x) for x in (root / "cases.jsonl").read_text().splitlines()]
    rows[0]["body"] = None
    (root / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = cli("run", "v1", "--config", str(root / "evalgate.yml"))
    assert code == 0, err
    [saved] = runs_dir(root / ".evalgate").glob("*.json")
    replies = {c["id"]: c["outcomes"][0]["text"] for c in json.loads(saved.read_text())["cases"]}
    # The app echoes the user turn it got: "[]" for the null body, never "[None]".
    assert json.loads(replies["T-1"]) == {"label": "[]"}
    assert json.loads(replies["T-2"]) == {"label": "[message number 2]"}


@pytest.mark.parametrize(
    ("template", "fields", "sent"),
    [
        # An object field printed whole: JSON, keys in the file's order, non-ASCII kept.
        ("[{{ body }}]", None, '[{"text": "café", "n": 1, "ok": true, "tags": ["a"]}]'),
        # Its fields are still read one by one.
        ("[{{ body.text }} {{ body.tags[0] }}]", None, "[café a]"),
        # The default template, {{ input }}, with two input fields: the whole input as JSON.
        (
            "{{ input }}",
            "{id: ticket, input: [thread, body], expected: label, category: null}",
            '{"thread": "th-1", "body": {"text": "café", "n": 1, "ok": true, "tags": ["a"]}}',
        ),
    ],
)
def test_an_object_input_reaches_the_model_as_json_never_a_python_repr(
    tmp_path: Path,
    cli: Callable[..., tuple[int, str, str]],
    template: str,
    fields: str | None,
    sent: str,
) -> None:
    extra = {"fields": fields} if fields else {}
    root = triage_workspace(tmp_path / "triage", mode="echo", template=template, **extra)
    rows = [json.loads(x) for x in (root / "cases.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows, 1):
        row["body"] = {"text": "café", "n": i, "ok": True, "tags": ["a"]}
    (root / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = cli("run", "v1", "--config", str(root / "evalgate.yml"))
    assert code == 0, err
    [saved] = runs_dir(root / ".evalgate").glob("*.json")
    replies = {c["id"]: c["outcomes"][0]["text"] for c in json.loads(saved.read_text())["cases"]}
    # The app echoes the user turn it got (of the first case, whose n is 1).
    assert json.loads(replies["T-1"]) == {"label": sent}
    assert "{'text'" not in replies["T-1"]


def test_merging_incomplete_shards_exits_3_and_lists_the_errors(
    tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    root = triage_workspace(tmp_path / "triage", mode="crash")
    config = str(root / "evalgate.yml")
    for shard in ("1/2", "2/2"):
        assert cli("run", "v1", "--config", config, "--shard", shard)[0] == 3
    shards = sorted(str(p) for p in runs_dir(root / ".evalgate").glob("*.json"))
    code, out, err = cli("merge", *shards, "--config", config, "--output", str(tmp_path / "m.json"))
    assert code == 3
    assert "Failed cases  4 errored, 0 wrong" in out
    assert "the run is incomplete: 4 of 4 cases errored" in err
