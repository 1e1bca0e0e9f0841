"""What the CLI writes is the job log in CI: no case, reply or run file it quotes can start a
workflow command there (``::add-mask::``, ``::error::``, ``##[error]``) or act on a terminal.

The hostile texts are data: a case id with line breaks before workflow commands, a message with
an OSC 8 hyperlink, a hidden-text escape and a right-to-left override, and a model reply (the
fake model's alias, which the suite's own rules file sets) in the runner's older command form.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from conftest import copy_example

from evalgate.cli import main

HOSTILE_ID = "c1\n::add-mask::FAIL\r::error title=evalgate::evalgate: PASS"
HOSTILE_MESSAGE = (
    "hi \u001b]8;;https://evil.example\u0007click\u001b]8;;\u0007 \u001b[8mhidden\u001b[0m "
    "\u202eTXT.exe"
)
HOSTILE_REPLY = "##[error]forged from the reply"
# A line of the runner's: ends at LF or at a lone CR; a command starts it after blanks
# (``::``), or is anywhere in it (``##[``).
COMMAND = re.compile(r"^\s*::|##\[")


def commands_in(text: str) -> list[str]:
    return [line for line in re.split(r"\r\n|\r|\n", text) if COMMAND.search(line)]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_example(tmp_path_factory.mktemp("guard") / "shop")
    rules = (root / "fake-rules.yml").read_text(encoding="utf-8")
    rules = rules.replace("default_alias: general enquiry", f"default_alias: {HOSTILE_REPLY!r}")
    (root / "fake-rules.yml").write_text(rules, encoding="utf-8")
    record = {"id": HOSTILE_ID, "category": "complaint", "message": HOSTILE_MESSAGE}
    record["split"] = "dev"
    with (root / "cases.jsonl").open("a", encoding="utf-8") as cases:
        cases.write(json.dumps(record) + "\n")
    return root


def cli(root: Path, *argv: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        main([*argv, "--config", str(root / "evalgate.yml")], out=out, err=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def runs(suite: Path) -> tuple[str, str]:
    # v1 names no label, so the fake answers with the rules' alias, the hostile reply: against
    # a v2 baseline every case is broken and listed with what the candidate answered.
    cli(suite, "run", "v2")
    cli(suite, "run", "v1")
    return "latest:v2", "latest:v1"


@pytest.mark.parametrize("form", ["text", "markdown", "json"])
@pytest.mark.parametrize("command", ["report", "gate", "compare"])
def test_no_quoted_text_starts_a_workflow_command_or_acts_on_a_terminal(
    suite: Path, runs: tuple[str, str], command: str, form: str
) -> None:
    base, cand = runs
    argv = {
        "report": ["report", cand],
        "gate": ["gate", "--baseline", base, "--candidate", cand],
        "compare": ["compare", base, cand],
    }[command]
    out, err = cli(suite, *argv, "--format", form)
    assert_inert(out, err, form, "forged from the reply")


def assert_inert(out: str, err: str, form: str, quoted: str) -> None:
    """``quoted`` is in the output, and no line of it is a workflow command or a terminal
    escape; JSON stays JSON, its escapes decoding to the text they stand for."""
    assert out.strip()
    assert commands_in(out) == [], out
    assert commands_in(err) == [], err
    if form == "json":
        assert quoted in json.dumps(json.loads(out))
        return
    assert quoted in out  # shown, and inert
    for raw in ("\u001b", "\u202e", "\u0007"):
        assert raw not in out, (raw, out)


def test_a_run_prints_the_case_it_quotes_inert(suite: Path, runs: tuple[str, str]) -> None:
    out, err = cli(suite, "run", "v1", "--no-save", "--show", "200")
    assert "add-mask::FAIL" in out  # the case is listed, its id shown, and inert
    # On one line: its line breaks shown, so the record never reads as two.
    listed = [line for line in out.splitlines() if "add-mask::FAIL" in line]
    assert len(listed) == 1 and listed[0].lstrip().startswith("WRONG c1<U+000A>::add-mask")
    assert commands_in(out) == [] and commands_in(err) == []
    assert "\u001b" not in out and "\u202e" not in out


@pytest.mark.parametrize("form", ["text", "markdown", "json"])
def test_a_merge_prints_the_shards_cases_inert(suite: Path, form: str, tmp_path: Path) -> None:
    # docs/scaling.md runs the shards and their merge on a pull request's content.
    shards = []
    for shard in ("1/2", "2/2"):
        out, _ = cli(suite, "run", "v1", "--shard", shard, "--json")
        shards.append(json.loads(out)["run"])
    merged = tmp_path / "m.json"
    out, err = cli(
        suite, "merge", *shards, "--output", str(merged), "--format", form, "--show", "200"
    )
    assert_inert(out, err, form, "add-mask::FAIL")  # the case is listed, its id shown


def test_json_escapes_keep_the_text() -> None:
    from evalgate.report.escape import printed

    data = {"a": "::add-mask::x ##[error] y", "b": "a\\::b", "c": "###[", "d": ":::"}
    text = printed(json.dumps(data, ensure_ascii=False), "json")
    assert "::" not in text and "##[" not in text
    assert json.loads(text) == data
    # Text: a pytest id keeps its colons; only a line's start (after LF or a lone CR) moves.
    assert printed("tests/a.py::test_b\n  ::warning::x\r::error::y", "text") == (
        "tests/a.py::test_b\n  : :warning::x<U+000D>::error::y"
    )
    assert printed("one\r::x::y", "stream") == "one\r: :x::y"
