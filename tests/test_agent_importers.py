"""Importing agent cases: Langfuse items whose expectedOutput holds a tool_sequence."""

from __future__ import annotations

import io
import json
from pathlib import Path

import yaml

from evalgate.cases.importers import convert
from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.running.suite import load_suite_cases

# The items of the article's agent dataset, as Langfuse exports them.
ITEMS = [
    {
        "id": "item-1",
        "input": {"message": "Order A1 arrived broken, refund please"},
        "expectedOutput": {"tool_sequence": ["lookup_order", "issue_refund"]},
        "metadata": {"split": "dev", "scenario_group": "refund-broken"},
        "status": "ACTIVE",
    },
    {
        "id": "item-2",
        "input": {"message": "My order A1 is damaged, I want my money back"},
        "expectedOutput": {"tool_sequence": ["lookup_order", "issue_refund"]},
        "metadata": {"split": "dev", "scenario_group": "refund-broken"},
    },
    {
        "id": "item-3",
        "input": {"message": "Where is order A2?"},
        "expectedOutput": {"tool_sequence": ["lookup_order", "track_shipment"]},
        "metadata": {"split": "holdout", "scenario_group": "where-is-it"},
    },
]
RULES = {
    "agents": [
        {
            "name": "refund",
            "phrases": ["refund", "money back"],
            "steps": [{"tool": "lookup_order"}, {"tool": "issue_refund"}],
        }
    ]
}


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def test_langfuse_tool_sequences_become_agent_cases(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    path.write_text(json.dumps(ITEMS))
    conversion = convert("langfuse", path)
    assert conversion.plan.kind == "tool_sequence"
    got = {r["id"]: r for _, r in conversion.records}
    assert got["item-1"]["expected"] == ["lookup_order", "issue_refund"]
    assert got["item-1"]["group"] == "refund-broken"
    assert got["item-3"]["split"] == "holdout"
    assert "metadata" not in got["item-1"]  # scenario_group and split were all it had


def test_the_snippet_lists_the_tools_and_the_suite_runs_on_the_fake_agent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "items.json"
    path.write_text(json.dumps(ITEMS))
    code, snippet, err = cli(
        "import",
        "langfuse",
        str(path),
        "--out",
        str(tmp_path / "cases.jsonl"),
        "--config-snippet",
    )
    assert code == 0, err
    config = yaml.safe_load(snippet)
    suite = config["suites"]["main"]
    assert suite["scorer"] == {"kind": "tool_sequence"}  # match: exact, the default
    assert [t["name"] for t in suite["tools"]] == ["issue_refund", "lookup_order", "track_shipment"]
    suite["model"] = {"backend": "fake", "name": "fake-agent", "options": {"rules": RULES}}
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "v1.txt").write_text("You are a support agent.")
    (tmp_path / "evalgate.yml").write_text(yaml.safe_dump(config))
    loaded = load_config(tmp_path / "evalgate.yml")
    cases = load_suite_cases(loaded, loaded.suite(None)[1]).cases
    assert {c.group for c in cases} == {"refund-broken", "where-is-it"}
    code, out, err = cli("run", "v1", "--config", str(tmp_path / "evalgate.yml"), "--no-save")
    assert code == 0, err
    # the two dev refunds pass; the holdout item is not part of a PR run
    assert "Accuracy       100.0%  (2/2)" in out
