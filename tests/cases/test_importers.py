"""Importers of other tools' case formats (promptfoo, OpenAI evals, Inspect, Langfuse): what each
maps, what it reports (with counts), stable ids, file:line errors, reading a foreign file straight
from evalgate.yml, and a promptfoo config taken to a passing gate on the fake model."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.cases.importers import Conversion, convert, referenced_files
from evalgate.cases.importers.promptfoo import FIXES, MAPPED, parse_assertion
from evalgate.cases.read import Case
from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.errors import CaseFileError
from evalgate.running.suite import load_suite_cases

DATA = Path(__file__).resolve().parents[1] / "data" / "import"
ROOT = Path(__file__).resolve().parents[2]
PROMPTFOO = DATA / "promptfoo" / "promptfooconfig.yaml"
PROMPTFOO_FILES = DATA / "promptfoo" / "promptfooconfig-files.yaml"
OPENAI = DATA / "openai-evals" / "samples.jsonl"
INSPECT = DATA / "inspect" / "dataset.jsonl"
INSPECT_CSV = DATA / "inspect" / "dataset.csv"
LANGFUSE = DATA / "langfuse" / "dataset-items.json"
LANGFUSE_JSONL = DATA / "langfuse" / "dataset-items.jsonl"
SAMPLES = [
    ("promptfoo", PROMPTFOO),
    ("promptfoo", PROMPTFOO_FILES),
    ("openai-evals", OPENAI),
    ("inspect", INSPECT),
    ("inspect", INSPECT_CSV),
    ("langfuse", LANGFUSE),
    ("langfuse", LANGFUSE_JSONL),
]
RULES = yaml.safe_load((ROOT / "examples" / "bike-shop" / "fake-rules.yml").read_text())
SYSTEM = (
    "You triage messages sent to Spokes & Sprockets, a bike shop. Reply with one line,\n"
    '"Category: X." where X is booking, status, quote, parts, complaint or other.\n'
)


def records(conversion: Conversion) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for _, r in conversion.records}


def unmapped(conversion: Conversion) -> dict[str, int]:
    return {n.what: n.count for n in conversion.notes.unmapped.values()}


def mapped(conversion: Conversion) -> dict[tuple[str, str], int]:
    return {(m.source, m.to): m.count for m in conversion.notes.mapped_list()}


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------------------------------
# promptfoo
# ------------------------------------------------------------------------------------------


def test_promptfoo_config_maps_the_most_common_assertion_and_reports_the_rest() -> None:
    conversion = convert("promptfoo", PROMPTFOO)
    assert conversion.plan.config == {"kind": "contains", "case_sensitive": False}
    assert conversion.inputs == ["shop", "message"]  # defaultTest's var comes first
    got = list(records(conversion).values())
    assert [r["expected"] for r in got] == ["booking", "status", "status", "quote", "parts"]
    first = got[0]
    assert first["shop"] == "Spokes & Sprockets"
    assert first["category"] == "booking" and first["description"] == "Booking a service"
    assert [r.get("group") for r in got[1:3]] == ["ready-to-collect"] * 2
    assert [r.get("split") for r in got[3:5]] == ["holdout", "dev"]  # test, train
    assert mapped(conversion)[("icontains", "expected (scorer contains)")] == 5
    assert unmapped(conversion) == {
        "javascript assertion": 2,
        "llm-rubric assertion not checked": 1,
        "var 'shop' is the same in every test": 1,
    }
    # Tests whose only checks are another kind (equals), unsupported (javascript) or a judge's.
    reasons = [(u.where.rsplit(":", 1)[1], u.reason) for u in conversion.unscored_list]
    assert reasons == [
        ("75", "no contains check (has equals)"),
        ("84", "no contains check (has llm-rubric)"),
        ("93", "no contains check (has javascript)"),
    ]
    for _, record in conversion.unscored:
        assert record["expected"] is None and record["checks"]
    assert conversion.source.model == {
        "backend": "anthropic",
        "name": "claude-haiku-4-5",
        "max_tokens": 64,
        "temperature": 0,
    }
    assert "Message: {{message}}" in conversion.source.hints[0]


def test_promptfoo_tests_files_yaml_and_csv_are_resolved() -> None:
    conversion = convert("promptfoo", PROMPTFOO_FILES)
    names = [p.name for p in conversion.source.files]
    assert names == ["promptfooconfig-files.yaml", "regressions.yaml", "phrasings.csv"]
    assert referenced_files("promptfoo", PROMPTFOO_FILES) == conversion.source.files
    got = list(records(conversion).values())
    assert [r["expected"] for r in got] == ["booking", "status", "quote", "status"]
    assert got[0]["split"] == "regression"
    assert got[2]["description"] == "Price of a service"  # __description
    assert unmapped(conversion) == {
        "not-icontains assertion": 1,
        "contains-any assertion": 1,
        "is-json assertion not checked": 1,
    }
    assert [u.where.split("/")[-1] for u in conversion.unscored_list] == [
        "regressions.yaml:17",
        "phrasings.csv:4",
    ]
    assert conversion.source.model == {"backend": "openai", "name": "gpt-4o-mini"}


def test_a_chosen_scorer_takes_its_own_assertions(tmp_path: Path) -> None:
    judged = convert("promptfoo", PROMPTFOO, scorer_kind="judge")
    assert judged.plan.kind == "judge"
    assert [r["expected"] for _, r in judged.records] == [
        "Does not invent a price.",
        "Acknowledges the complaint and does not promise a refund.",
    ]
    assert unmapped(judged)["icontains assertion not checked"] == 1
    exact = convert("promptfoo", PROMPTFOO, scorer_kind="exact")
    assert exact.plan.config == {"kind": "exact", "case_sensitive": True}
    assert [r["expected"] for _, r in exact.records] == ["Category: complaint."]
    # A python scorer gets every assertion as written.
    coded = convert("promptfoo", PROMPTFOO, scorer_kind="python")
    assert len(coded.records) == 8 and not coded.unscored
    assert coded.records[1][1]["expected"][1] == {
        "type": "javascript",
        "value": "output.length < 80",
    }


def test_promptfoo_mapping_details(tmp_path: Path) -> None:
    path = tmp_path / "tests.yaml"
    path.write_text(
        yaml.safe_dump(
            [
                {"vars": {"q": "a"}, "assert": [{"type": "equals", "value": "Yes"}]},
                {"vars": {"q": "b"}, "assert": [{"type": "equals", "value": 4}]},
                {"vars": {"q": "c"}, "assert": [{"type": "contains", "value": "x"}]},
                {"vars": {"q": "d"}, "assert": [{"type": "starts-with", "value": "a.b"}]},
                {
                    "vars": {"q": "e", "id": "clash"},
                    "assert": [{"type": "icontains-all", "value": "x, y"}],
                },
                {"vars": {"q": "f"}, "assert": [{"type": "is-json", "value": {"type": "object"}}]},
                {"vars": {"q": "g"}, "assert": [{"type": "equals", "value": "N", "threshold": 1}]},
            ]
        )
    )
    conversion = convert("promptfoo", path)
    assert conversion.plan.config == {"kind": "exact", "case_sensitive": True}
    assert [r["expected"] for _, r in conversion.records] == ["Yes", "4", "N"]
    assert unmapped(conversion)["assertion option 'threshold'"] == 1
    assert unmapped(conversion)["input 'id'"] == 1  # renamed, not clobbering the case id
    assert conversion.inputs == ["q", "input_id"]
    regex = convert("promptfoo", path, scorer_kind="regex")
    assert [r["expected"] for _, r in regex.records] == [r"^a\.b"]
    contains = convert("promptfoo", path, scorer_kind="contains")
    assert [r["expected"] for _, r in contains.records] == ["x", ["x", "y"]]
    assert unmapped(contains)["contains assertions checked case-insensitively"] == 1
    schema = convert("promptfoo", path, scorer_kind="json_schema")
    assert schema.plan.config["schema"] == {"type": "object"}


@pytest.mark.parametrize(
    ("cell", "assertion"),
    [
        ("contains: Hello", {"type": "contains", "value": "Hello"}),
        ("equals: 30", {"type": "equals", "value": "30"}),
        ("Paris", {"type": "equals", "value": "Paris"}),
        ("is-json", {"type": "is-json"}),
        ("not-icontains: sale", {"type": "not-icontains", "value": "sale"}),
        ("similar(0.8): a cat", {"type": "similar", "value": "a cat", "threshold": 0.8}),
        ("fn:output.length < 10", {"type": "javascript", "value": "output.length < 10"}),
        ("grade: is polite", {"type": "llm-rubric", "value": "is polite"}),
        ("regex: ^a:b$", {"type": "regex", "value": "^a:b$"}),
        ("  ", None),
    ],
)
def test_csv_expected_cells_are_read_as_promptfoo_reads_them(
    cell: str, assertion: dict[str, Any] | None
) -> None:
    assert parse_assertion(cell) == assertion


# ------------------------------------------------------------------------------------------
# OpenAI evals, Inspect, Langfuse
# ------------------------------------------------------------------------------------------


def test_openai_evals_user_turn_ideal_and_system_message() -> None:
    conversion = convert("openai-evals", OPENAI)
    got = list(records(conversion).values())
    assert len(got) == 8 and conversion.inputs == ["input"]
    # One sample accepts either of two answers, so the suite matches any of them: regex.
    assert conversion.plan.config == {"kind": "regex", "ignore_case": False}
    assert got[4]["expected"] == "(?:complaint|status)"
    assert got[0] == {
        "id": got[0]["id"],
        "input": "Can I book my bike in for a service next Tuesday?",
        "expected": "booking",
    }
    assert got[5]["history"] == "user: Where do I park?\nassistant: other"
    assert got[6]["input"] == "Classify: I want a refund, the service was rushed."
    assert unmapped(conversion) == {
        "earlier turns (few-shot or multi-turn)": 1,
        "system message": 7,
    }
    assert conversion.source.hints[0].endswith("complaint or other.")
    assert all(i.startswith("oe-") for i in records(conversion))


def test_openai_evals_single_answers_use_contains_and_first_of_several_is_reported() -> None:
    contains = convert("openai-evals", OPENAI, scorer_kind="contains")
    assert contains.plan.config == {"kind": "contains", "case_sensitive": True}
    assert [r["expected"] for _, r in contains.records][4] == "complaint"
    assert unmapped(contains)["several acceptable answers"] == 1


def test_inspect_jsonl_ids_metadata_and_splits() -> None:
    conversion = convert("inspect", INSPECT)
    got = records(conversion)
    assert list(got)[:4] == ["bk-001", "bk-002", "bk-003", "4"]
    assert list(got)[4].startswith("in-")  # no id: a hash of the input
    assert got["bk-001"]["split"] == "dev" and got["bk-001"]["metadata"] == {"source": "inbox"}
    assert got["bk-002"]["input"] == "Is my bike ready to collect yet?"
    assert got["bk-003"]["split"] == "holdout" and got["bk-003"]["group"] == "ready"
    assert got["bk-003"]["expected"] == "(?:status|update)"
    assert got["bk-006"]["choices"] == ["booking", "other"]
    assert "split" not in got["bk-007"]
    assert conversion.plan.config == {"kind": "regex", "ignore_case": True}
    assert unmapped(conversion) == {
        "system message": 1,
        "choices": 1,
        "field 'sandbox'": 1,
        "split value 'canary'": 1,
    }
    assert mapped(conversion)[("split validation", "dev")] == 1


def test_inspect_csv_columns_and_line_numbers() -> None:
    conversion = convert("inspect", INSPECT_CSV)
    assert conversion.plan.config == {"kind": "contains", "case_sensitive": False}
    got = records(conversion)
    assert got["bk-103"]["input"] == "How much do you charge\nto true a wheel?"
    assert got["bk-103"]["split"] == "holdout" and got["bk-103"]["category"] == "quote"
    assert got["bk-101"]["metadata"] == {"difficulty": "easy"}
    assert [where.rsplit(":", 1)[1] for where, _ in conversion.records] == [
        "2",
        "3",
        "4",
        "6",
        "7",
    ]  # the quoted line break makes bk-103 two lines long


def test_langfuse_export_splits_archived_items_and_inputs() -> None:
    conversion = convert("langfuse", LANGFUSE)
    got = records(conversion)
    assert len(got) == 7
    assert conversion.inputs == ["message"]  # the input object's keys are the fields
    splits = [r.get("split") for r in got.values()]
    assert splits == ["dev", "dev", "holdout", "dev", "holdout", None, None]
    assert unmapped(conversion) == {"archived item": 1, "split value 'canary'": 1}
    assert conversion.source.read == 8
    as_lines = convert("langfuse", LANGFUSE_JSONL)
    assert [r for _, r in as_lines.records] == [r for _, r in conversion.records]


def test_langfuse_api_response_and_object_answers_use_a_judge(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    items = [
        # An object that is not plain fields (a list inside): a reference answer for a judge.
        {"id": "a", "input": {"question": "2+2?"}, "expectedOutput": {"answer": ["4", "four"]}},
        {"id": "b", "input": "plain text", "expectedOutput": None, "status": "ACTIVE"},
    ]
    path.write_text(json.dumps({"data": items, "meta": {"page": 1}}, indent=1))
    conversion = convert("langfuse", path)
    assert conversion.plan.kind == "judge"
    assert "reference answer" in conversion.plan.config["rubric"]
    assert records(conversion)["a"]["expected"] == {"answer": ["4", "four"]}
    assert [u.id for u in conversion.unscored_list] == ["b"]
    assert unmapped(conversion) == {
        "item without expectedOutput": 1,
        "input 'question' missing": 1,
        "input 'input' missing": 1,
    }
    assert [w.rsplit(":", 1)[1] for w, _ in conversion.records] == ["3"]


# ------------------------------------------------------------------------------------------
# Stable ids, errors
# ------------------------------------------------------------------------------------------


def _prepend(path: Path, dest: Path, fmt: str) -> Path:
    """A copy of a sample with one new case at the top."""
    shutil.copytree(path.parent, dest)
    copy = dest / path.name
    text = copy.read_text()
    if fmt == "promptfoo":
        data = yaml.safe_load(text)
        new = {"vars": {"message": "Brand new"}, "assert": [{"type": "icontains", "value": "x"}]}
        data["tests"].insert(0, new)
        copy.write_text(yaml.safe_dump(data, sort_keys=False))
    elif fmt == "openai-evals":
        line = {"input": [{"role": "user", "content": "Brand new"}], "ideal": "x"}
        copy.write_text(json.dumps(line) + "\n" + text)
    else:
        copy.write_text(json.dumps({"input": "Brand new", "target": "x"}) + "\n" + text)
    return copy


@pytest.mark.parametrize(
    ("fmt", "path"), [("promptfoo", PROMPTFOO), ("openai-evals", OPENAI), ("inspect", INSPECT)]
)
def test_ids_stay_put_when_a_case_is_added_at_the_top(fmt: str, path: Path, tmp_path: Path) -> None:
    before = convert(fmt, path, scorer_kind="python")
    after = convert(fmt, _prepend(path, tmp_path / "copy", fmt), scorer_kind="python")
    ids_before = [r["id"] for _, r in before.records]
    ids_after = [r["id"] for _, r in after.records]
    assert ids_after[1:] == ids_before
    assert ids_after[0] not in ids_before


def test_same_inputs_are_told_apart_and_exact_copies_numbered(tmp_path: Path) -> None:
    path = tmp_path / "tests.yaml"
    one = {"vars": {"q": "a"}, "assert": [{"type": "contains", "value": "x"}]}
    other = {"vars": {"q": "a"}, "assert": [{"type": "contains", "value": "y"}]}
    path.write_text(yaml.safe_dump([one, other, one]))
    conversion = convert("promptfoo", path)
    ids = [r["id"] for _, r in conversion.records]
    assert len(set(ids)) == 3 and ids[2] == ids[0] + "-2"
    assert unmapped(conversion) == {
        "tests identical to an earlier one": 1,
        "var 'q' is the same in every test": 1,
    }


@pytest.mark.parametrize(
    ("fmt", "name", "content", "line", "message"),
    [
        ("promptfoo", "p.yaml", "tests:\n  - vars: {q: a}\n    assert: [{value: x}]\n", 2, "type"),
        ("promptfoo", "p.yaml", "tests:\n  - vars: [a, b\n", 3, "invalid YAML"),
        ("promptfoo", "p.yaml", "tests:\n  - file://missing.yaml\n", 2, "matches no file"),
        ("promptfoo", "t.jsonl", '{"vars": {"q": "a"}}\n{"vars": \n', 2, "invalid JSON"),
        ("promptfoo", "t.csv", 'q,__expected\n"a,b\n', 2, "row has"),
        ("openai-evals", "s.jsonl", '{"input": "a", "ideal": "b"}\n{"ideal": "b"}\n', 2, "input"),
        ("openai-evals", "s.jsonl", '{"input": [{"role": "user"}]}\n', 1, "role"),
        (
            "openai-evals",
            "s.jsonl",
            '{"input": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}',
            1,
            "user turn",
        ),
        ("inspect", "d.jsonl", '{"input": "a"}\n\n{"input": "b", "id": [1]}\n', 3, "'id'"),
        ("inspect", "d.csv", "input,target\na,b\nc,d,e\n", 3, "row has 3 cells"),
        ("inspect", "d.jsonl", '{"id": "x", "input": "a"}\n{"id": "x", "input": "b"}\n', 2, "dup"),
        ("langfuse", "l.json", '[\n  {"input": "a"},\n  {"input": "b",}\n]\n', 3, "invalid JSON"),
        ("langfuse", "l.json", '[\n  {"input": "a"},\n  {"id": "b"}\n]\n', 3, "'input'"),
    ],
)
def test_malformed_input_names_file_and_line(
    fmt: str, name: str, content: str, line: int, message: str, tmp_path: Path
) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(CaseFileError) as caught:
        convert(fmt, path)
    assert caught.value.where == f"{path}:{line}", str(caught.value)
    assert message in str(caught.value)


def test_a_record_that_is_not_plain_json_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "tests.yaml"
    path.write_text("- vars: {q: !!timestamp 2024-01-01}\n  assert: [{type: contains, value: x}]\n")
    code, _, err = cli("import", "promptfoo", str(path), "--out", str(tmp_path / "c.jsonl"))
    assert code == 2
    assert f"{path}:1" in err and "not plain JSON data" in err


# ------------------------------------------------------------------------------------------
# The CLI and the config path
# ------------------------------------------------------------------------------------------


def _cases_key(cases: tuple[Case, ...]) -> list[tuple[Any, ...]]:
    return [(c.id, c.input, c.expected, c.group, c.category, c.split, c.hash) for c in cases]


@pytest.mark.parametrize(("fmt", "path"), SAMPLES, ids=[f"{f}-{p.name}" for f, p in SAMPLES])
def test_cases_format_loads_the_same_cases_as_the_converted_file(
    fmt: str, path: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    shutil.copytree(path.parent, work)
    source = work / path.name
    code, snippet, err = cli(
        "import", fmt, str(source), "--out", str(work / "cases.jsonl"), "--config-snippet"
    )
    assert code == 0, err
    config = yaml.safe_load(snippet)
    (work / "prompts").mkdir(exist_ok=True)
    (work / "prompts" / "v1.txt").write_text(SYSTEM)
    suite = config["suites"]["main"]
    suite["cases"] = "cases.jsonl"
    (work / "converted.yml").write_text(yaml.safe_dump(config))
    suite["cases"] = path.name
    suite["cases_format"] = fmt
    (work / "direct.yml").write_text(yaml.safe_dump(config))
    loaded = [load_config(work / name) for name in ("converted.yml", "direct.yml")]
    notes: list[str] = []
    converted = load_suite_cases(loaded[0], loaded[0].suite(None)[1])
    direct = load_suite_cases(loaded[1], loaded[1].suite(None)[1], on_note=notes.append)
    assert _cases_key(direct.cases) == _cases_key(converted.cases)
    assert all(c.source.startswith(f"{work}/") for c in direct.cases)  # foreign file:line
    assert direct.cases[0].source.rsplit(":", 1)[1].isdigit()
    assert set(direct.file_hashes) >= {path.name}
    # What the direct read leaves out is said once, on the run's warning channel.
    assert len(notes) == (1 if "Not mapped" in err or "Not scored" in err else 0)


def test_import_command_writes_files_and_refuses_to_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "cases.jsonl"
    code, summary, _ = cli("import", "promptfoo", str(PROMPTFOO), "--out", str(out))
    assert code == 0
    assert summary.startswith(f"Imported 5 of 8 promptfoo tests from {PROMPTFOO} into {out}.")
    assert "javascript assertion: 2" in summary and "Next:" in summary
    assert len(out.read_text().splitlines()) == 5
    side = tmp_path / "cases.unscored.jsonl"
    assert [json.loads(x)["expected"] for x in side.read_text().splitlines()] == [None] * 3
    code, _, err = cli("import", "promptfoo", str(PROMPTFOO), "--out", str(out))
    assert code == 2 and "exists" in err and "--force" in err
    code, _, _ = cli("import", "promptfoo", str(PROMPTFOO), "--out", str(out), "--force")
    assert code == 0
    code, _, err = cli("import", "promptfoo", str(PROMPTFOO), "--out", "-", "--config-snippet")
    assert code == 2 and "--out FILE" in err
    code, lines, err = cli("import", "langfuse", str(LANGFUSE), "--out", "-", "--json")
    assert code == 0 and len(lines.splitlines()) == 7
    report = json.loads(err)
    assert report["imported"] == 7 and report["unmapped"][0]["what"] == "archived item"


def test_split_apply_refuses_foreign_case_files(tmp_path: Path) -> None:
    work = tmp_path / "w"
    shutil.copytree(PROMPTFOO.parent, work)
    (work / "p.txt").write_text(SYSTEM)
    config = {
        "suites": {
            "s": {
                "prompts": "p.txt",
                "cases": "promptfooconfig-files.yaml",
                "cases_format": "promptfoo",
                "scorer": {"kind": "contains"},
                "model": {"backend": "fake", "options": {"rules": RULES}},
            }
        }
    }
    (work / "evalgate.yml").write_text(yaml.safe_dump(config))
    code, _, err = cli("split", "--apply", "--config", str(work / "evalgate.yml"))
    assert code == 2 and "evalgate import promptfoo" in err
    loaded = load_config(work / "evalgate.yml")
    deps = {p.name for p in loaded.dependencies(loaded.suite(None)[1])}
    # A pull request that edits only a tests file the config refers to still runs the suite.
    assert {"promptfooconfig-files.yaml", "regressions.yaml", "phrasings.csv"} <= deps


# ------------------------------------------------------------------------------------------
# End to end: the walkthrough in docs/importers.md, on the fake model
# ------------------------------------------------------------------------------------------


def test_promptfoo_config_to_a_passing_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    work = tmp_path / "repo"
    shutil.copytree(PROMPTFOO.parent, work)
    monkeypatch.chdir(work)
    code, snippet, err = cli("import", "promptfoo", "promptfooconfig.yaml", "--config-snippet")
    assert code == 0, err
    config = yaml.safe_load(snippet)
    # The walkthrough's one edit for an offline try: the fake model, rules in the config.
    config["suites"]["main"]["model"] = {
        "backend": "fake",
        "name": "fake-classifier",
        "options": {"rules": RULES},
    }
    Path("evalgate.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    Path("prompts/v1.txt").write_text(SYSTEM)
    run = cli
    code, out, err = run("run", "v1")
    assert code == 0, err
    assert "4 cases" in out and "100.0%" in out
    code, _, err = run("noise", "v1", "--repeats", "2")
    assert code == 0, err
    Path("prompts/v2.txt").write_text(SYSTEM + "Keep it short.\n")
    code, out, err = run("gate", "--baseline", "latest:v1", "--candidate", "v2")
    assert code == 0, err
    # Four cases cannot rule out a 5-point drop: inconclusive (exit 0 by default), not a pass.
    assert "Verdict: INCONCLUSIVE" in out
    assert "not shown to be worse" in out
    # Reading promptfooconfig.yaml directly gives the same run, with a warning of what it left out.
    config["suites"]["main"].update(cases="promptfooconfig.yaml", cases_format="promptfoo")
    Path("evalgate.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    code, out, err = run("run", "v1", "--no-save")
    assert code == 0, err
    assert "4 cases" in out and "3 tests left out" in err


# ------------------------------------------------------------------------------------------
# The docs
# ------------------------------------------------------------------------------------------


def test_docs_name_every_mapped_and_reported_promptfoo_assertion() -> None:
    text = (ROOT / "docs" / "importers.md").read_text(encoding="utf-8")
    for kind in [*MAPPED, *FIXES]:
        assert f"`{kind}`" in text, kind
    for fmt in ("promptfoo", "openai-evals", "inspect", "langfuse"):
        assert f"evalgate import {fmt}" in text


@pytest.mark.parametrize(("fmt", "path"), SAMPLES, ids=[f"{f}-{p.name}" for f, p in SAMPLES])
def test_an_imported_snippet_leaves_dev_cases_to_run(fmt: str, path: Path, tmp_path: Path) -> None:
    """A small imported suite starts without a holdout: the default fraction would hash some
    (or, with few groups, all) of its cases away from pull requests."""
    work = tmp_path / "work"
    shutil.copytree(path.parent, work)
    code, snippet, err = cli(
        "import",
        fmt,
        str(work / path.name),
        "--out",
        str(work / "cases.jsonl"),
        "--config-snippet",
    )
    assert code == 0, err
    suite = yaml.safe_load(snippet)["suites"]["main"]
    assert suite["split"] == {"holdout_fraction": 0.0}
    assert "too few for a holdout yet (every case is dev)" in snippet
    (work / "prompts").mkdir(exist_ok=True)
    (work / "prompts" / "v1.txt").write_text(SYSTEM)
    (work / "evalgate.yml").write_text(snippet)
    loaded = load_config(work / "evalgate.yml")
    cases = load_suite_cases(loaded, loaded.suite(None)[1]).cases
    records = [json.loads(x) for x in (work / "cases.jsonl").read_text().splitlines()]
    written = {r["id"]: r["split"] for r in records if "split" in r}
    # A split the source wrote on a case is kept; no other case is hashed into the holdout.
    assert cases and [c.split for c in cases] == [written.get(c.id, "dev") for c in cases]
    assert any(c.id not in written for c in cases)


@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        ("inspect", "samples.jsonl"),
        ("inspect", "samples.csv"),
        ("openai-evals", "samples.jsonl"),
        ("langfuse", "items.json"),
        ("promptfoo", "promptfooconfig.yaml"),
    ],
)
def test_a_git_lfs_pointer_is_named_as_one(fmt: str, name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:" + "ab" * 32 + "\nsize 99\n"
    )
    code, out, err = cli("import", fmt, str(path), "--out", "-")
    assert code == 2 and out == ""
    assert f"{path}:1: is a Git LFS pointer" in err and "git lfs pull" in err


# ------------------------------------------------------------------------------------------
# Inspect multiple choice, and datasets with their own field names
# ------------------------------------------------------------------------------------------

MCQ = [
    {
        "id": "q1",
        "input": "Which part stops the wheel?",
        "choices": ["Brake pad", "Chain", "Saddle"],
        "target": "A",
    },
    {
        "id": "q2",
        "input": "Which part drives the wheel?",
        "choices": ["Brake pad", "Chain", "Saddle"],
        "target": "b",
    },
    {
        "id": "q3",
        "input": "Which two touch the rider?",
        "choices": ["Saddle", "Chain", "Grips"],
        "target": ["A", "C"],
    },
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_inspect_choices_with_letter_targets_are_scored_by_the_exact_letter(
    tmp_path: Path,
) -> None:
    conversion = convert("inspect", write_jsonl(tmp_path / "mcq.jsonl", MCQ))
    # Not contains: "A" is inside nearly any reply ("A brake pad, I think").
    assert conversion.plan.config == {"kind": "exact", "case_sensitive": False}
    got = records(conversion)
    assert [got[i]["expected"] for i in ("q1", "q2", "q3")] == ["A", "B", "A, C"]
    # The choices reach the model, lettered as Inspect's multiple_choice() shows them.
    assert got["q1"]["choices"] == "A) Brake pad\nB) Chain\nC) Saddle"
    assert conversion.inputs == ["input", "choices"]
    assert "choices" not in unmapped(conversion)
    assert unmapped(conversion) == {"several right choices": 1}
    assert any("letter" in hint for hint in conversion.source.hints)


def test_an_exact_letter_does_not_match_a_reply_that_merely_contains_it(tmp_path: Path) -> None:
    from evalgate.config.models import ExactScorer
    from evalgate.scorers.base import build_scorer

    scorer = build_scorer(ExactScorer(kind="exact"), tmp_path)
    assert scorer("A", " a\n").score == 1.0
    assert scorer("A", "A brake pad stops it.").score == 0.0
    assert scorer("A", "B").score == 0.0


def test_a_dataset_with_its_own_field_names_maps_them(tmp_path: Path) -> None:
    rows = [
        {"qid": "m1", "question": "Is my bike ready?", "answer": "status", "notes": "x"},
        {"qid": "m2", "question": "How much is a service?", "answer": "quote"},
    ]
    path = write_jsonl(tmp_path / "own.jsonl", rows)
    code, out, err = cli(
        "import",
        "inspect",
        str(path),
        "--out",
        "-",
        "--input-field",
        "question",
        "--target-field",
        "answer",
        "--id-field",
        "qid",
    )
    assert code == 0, err
    got = [json.loads(line) for line in out.splitlines()]
    assert [(r["id"], r["input"], r["expected"]) for r in got] == [
        ("m1", "Is my bike ready?", "status"),
        ("m2", "How much is a service?", "quote"),
    ]
    assert "question" in err and "--input-field" in err  # the summary says what mapped
    # openai-evals names its answer `ideal`: --target-field maps onto it.
    evals = write_jsonl(tmp_path / "evals.jsonl", [{"prompt": "Hi?", "gold": "hello"}])
    code, out, err = cli(
        "import",
        "openai-evals",
        str(evals),
        "--out",
        "-",
        "--input-field",
        "prompt",
        "--target-field",
        "gold",
    )
    assert code == 0, err
    assert json.loads(out)["expected"] == "hello"


def test_a_field_option_naming_no_field_is_an_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "own.jsonl", [{"question": "Ready?", "answer": "status"}])
    code, out, err = cli("import", "inspect", str(path), "--out", "-", "--input-field", "qestion")
    assert code == 2 and out == ""
    assert "--input-field qestion: no record has a field 'qestion'" in err
    assert "question, answer" in err
    code, _, err = cli("import", "langfuse", str(path), "--out", "-", "--input-field", "question")
    assert code == 2 and "langfuse files cannot name their input field otherwise" in err


# ------------------------------------------------------------------------------------------
# promptfoo prompts: --- separated prompt files and chat prompt files
# ------------------------------------------------------------------------------------------

PF_TESTS = """
tests:
  - vars: {message: "Can I book a service?"}
    assert: [{type: icontains, value: booking}]
  - vars: {message: "Is my bike ready?"}
    assert: [{type: icontains, value: status}]
"""


def test_a_promptfoo_prompt_file_with_dashes_holds_several_prompts(tmp_path: Path) -> None:
    (tmp_path / "prompts.txt").write_text(
        "Sort this message: {{message}}\n---\nClassify the message below.\n{{message}}\n"
    )
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("prompts: [file://prompts.txt]\n" + PF_TESTS)
    conversion = convert("promptfoo", config)
    hint = conversion.source.hints[0]
    assert hint.endswith("\nSort this message: {{message}}")  # the first prompt alone
    assert "---" not in hint
    assert unmapped(conversion)["several prompts"] == 1


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_promptfoo_chat_prompt_file_gives_the_system_prompt_and_the_template(
    tmp_path: Path, suffix: str
) -> None:
    messages = [
        {"role": "system", "content": "You sort bike-shop messages into booking or status."},
        {"role": "user", "content": "<message>\n{{ message }}\n</message>"},
    ]
    text = json.dumps(messages) if suffix == ".json" else yaml.safe_dump(messages)
    (tmp_path / f"chat{suffix}").write_text(text)
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(f"prompts: [file://chat{suffix}]\n" + PF_TESTS)
    conversion = convert("promptfoo", config)
    hints = conversion.source.hints
    assert hints[0].endswith(
        "Save it as prompts/v1.txt:\nYou sort bike-shop messages into booking or status."
    )
    assert "file://" not in " ".join(hints)
    out = tmp_path / "cases.jsonl"
    code, snippet, err = cli(
        "import", "promptfoo", str(config), "--out", str(out), "--config-snippet"
    )
    assert code == 0, err
    suite = yaml.safe_load(snippet)["suites"]["main"]
    assert suite["template"] == "<message>\n{{ message }}\n</message>\n"


def test_a_chat_prompt_that_is_not_a_message_list_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "chat.json").write_text('{"role": "user"}')
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("prompts: [file://chat.json]\n" + PF_TESTS)
    with pytest.raises(CaseFileError, match="is not a chat prompt"):
        convert("promptfoo", config)


def test_langfuse_expected_objects_are_checked_field_by_field(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    items = [
        {"id": f"i{n}", "input": {"message": text}, "expectedOutput": expected}
        for n, (text, expected) in enumerate(
            [
                ("Book me in", {"category": "booking", "priority": "low"}),
                ("Brakes failed!", {"category": "complaint", "priority": "high"}),
                ("Price of a chain?", {"category": "quote"}),
            ]
        )
    ]
    path.write_text(json.dumps(items))
    conversion = convert("langfuse", path)
    # Not a suite-wide judge: a label scorer on the field every item expects.
    assert conversion.plan.config == {"kind": "label", "field": "category"}
    assert [r["expected"] for _, r in conversion.records] == ["booking", "complaint", "quote"]
    assert unmapped(conversion) == {"expectedOutput.priority not checked": 2}
    note = conversion.notes.unmapped["expectedOutput.priority not checked"]
    assert "{kind: label, field: priority}" in note.fix
    assert mapped(conversion)[("expectedOutput.category", "expected (scorer label)")] == 3
    # With --scorer judge, the judge grades against the whole expected object.
    judged = convert("langfuse", path, scorer_kind="judge")
    assert records(judged)["i0"]["expected"] == {"category": "booking", "priority": "low"}


# promptfoo reads a prompt that looks like a path as a file (maybeFilePath in promptfoo
# 0.121.20's src/prompts/utils.ts: file://, a known extension such as .txt, a dot three or four
# from the end, or a '*', '/' or '\'), as `promptfoo init` of 0.24.2 writes it: prompts.txt.
@pytest.mark.parametrize("raw", ["prompts.txt", "prompts/*.txt", "file://prompts.txt"])
def test_a_promptfoo_prompt_that_looks_like_a_path_is_read_as_the_file(
    tmp_path: Path, raw: str
) -> None:
    (tmp_path / "prompts").mkdir()
    for name in ("prompts.txt", "prompts/a.txt"):
        (tmp_path / name).write_text("Sort this message: {{message}}\n---\nSecond.\n")
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(f"prompts: [{raw!r}]\n" + PF_TESTS)
    conversion = convert("promptfoo", config)
    assert conversion.source.hints[0].endswith("\nSort this message: {{message}}")
    assert unmapped(conversion)["several prompts"] == 1


def test_a_promptfoo_prompt_of_plain_words_stays_the_prompt(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("prompts: ['Sort this message: {{message}}']\n" + PF_TESTS)
    hint = convert("promptfoo", config).source.hints[0]
    assert hint.endswith("\nSort this message: {{message}}")


def test_a_promptfoo_prompt_object_without_raw_or_id_is_refused(tmp_path: Path) -> None:
    # promptfoo 0.121.20 stops at it too: "prompt.raw must be a string, but got undefined"
    # (processPrompt in src/prompts/index.ts); evalgate used to send the prompt "None".
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("prompts:\n  - role: system\n    content: You sort messages.\n" + PF_TESTS)
    with pytest.raises(CaseFileError) as caught:
        convert("promptfoo", config)
    message = str(caught.value)
    assert "promptfooconfig.yaml:2" in message
    assert "prompt 1 has no 'raw' or 'id'" in message


def test_what_a_promptfoo_provider_sends_beside_the_prompt_is_counted_not_dropped(
    tmp_path: Path,
) -> None:
    # promptfoo offers config.tools with every call (the provider promptfoo init writes for
    # an agent); the snippet's model carried max_tokens and temperature only, silently.
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "prompts: ['Sort this message: {{message}}']\n"
        "providers:\n"
        "  - id: anthropic:messages:claude-haiku-4-5\n"
        "    config:\n"
        "      max_tokens: 300\n"
        "      temperature: 0\n"
        "      tools: [{name: lookup, input_schema: {type: object}}]\n"
        "      top_k: 5\n" + PF_TESTS
    )
    conversion = convert("promptfoo", config)
    notes = conversion.notes.unmapped
    assert notes["provider config 'tools'"].count == 1
    assert "tools:" in notes["provider config 'tools'"].fix
    assert notes["provider config 'top_k'"].count == 1
    assert not any("max_tokens" in n or "temperature" in n for n in notes)
    assert conversion.source.model == {
        "backend": "anthropic",
        "name": "claude-haiku-4-5",
        "max_tokens": 300,
        "temperature": 0,
    }
    # A value the snippet cannot carry (a string, a template) is named too, not dropped.
    config.write_text(
        "prompts: ['Sort this message: {{message}}']\n"
        "providers:\n"
        "  - id: anthropic:messages:claude-haiku-4-5\n"
        "    config: {max_tokens: '{{ env.MAX_TOKENS }}', temperature: 0.2}\n" + PF_TESTS
    )
    conversion = convert("promptfoo", config)
    assert "provider config 'max_tokens'" in conversion.notes.unmapped
    assert "provider config 'temperature'" not in conversion.notes.unmapped


def test_a_promptfoo_red_team_config_is_refused_with_what_to_run(tmp_path: Path) -> None:
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text(
        "prompts: ['You are a helpdesk. {{prompt}}']\n"
        "targets: [openai:gpt-5-mini]\n"
        "redteam: {plugins: [pii:direct], strategies: [basic]}\n"
    )
    with pytest.raises(CaseFileError) as caught:
        convert("promptfoo", config)
    message = str(caught.value)
    assert "a promptfoo red-team config" in message
    assert "promptfoo redteam generate" in message and "evalgate gate" in message
    assert "not a promptfoo config" not in message


def test_langfuse_item_version_and_media_references_are_bookkeeping(tmp_path: Path) -> None:
    # The Langfuse API's DatasetItem (langfuse 5.2.0, langfuse/api/commons/types/
    # dataset_item.py) carries `version` and `mediaReferences` on every item: neither is a
    # field of the case; media an item refers to is counted, as its input is not all text.
    base = {"status": "ACTIVE", "datasetId": "d1", "datasetName": "faq", "metadata": None}
    items = [
        {**base, "id": "a", "input": "Hi", "expectedOutput": "Hello", "mediaReferences": []},
        {
            **base,
            "id": "b",
            "input": "See @@@langfuseMedia:type=image/png|id=m1|source=bytes@@@",
            "expectedOutput": "A bike",
            "version": "2026-01-05T10:00:00.000Z",
            "mediaReferences": [{"mediaId": "m1", "field": "input"}],
        },
    ]
    path = tmp_path / "items.json"
    path.write_text(json.dumps(items))
    conversion = convert("langfuse", path)
    assert unmapped(conversion) == {"item with media": 1}
    assert [u.id for u in conversion.unscored_list] == ["b"]
    assert "media" in conversion.unscored_list[0].reason


def test_a_promptfoo_var_a_script_computes_that_no_prompt_reads_is_left_out(
    tmp_path: Path,
) -> None:
    # `promptfoo init` (0.121.20, agent, JavaScript) writes a prompt that reads only
    # {{inquiry}} and a context var computed by context.js: promptfoo sends the prompt without
    # it, so the test is asked as promptfoo asks it. Where the prompt reads it, it is withheld.
    (tmp_path / "context.js").write_text("module.exports = () => ({output: 'docs'});\n")
    tests = (
        "tests:\n  - vars: {inquiry: return my widget, context: file://context.js}\n"
        "    assert: [{type: icontains, value: return label}]\n"
    )
    config = tmp_path / "promptfooconfig.yaml"
    config.write_text("prompts: ['Fulfill this ticket: {{inquiry}}']\n" + tests)
    conversion = convert("promptfoo", config)
    assert [r for _, r in conversion.records] == [
        {
            "id": conversion.records[0][1]["id"],
            "inquiry": "return my widget",
            "expected": "return label",
        }
    ]
    assert unmapped(conversion) == {
        "var read from a file": 1,
        "var 'context' that no prompt reads": 1,
    }
    config.write_text("prompts: ['{{inquiry}} {{context}}']\n" + tests)
    withheld = convert("promptfoo", config)
    assert not withheld.records
    assert "computed by file://context.js" in withheld.unscored_list[0].reason
