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
from evalgate.runs.schema import read_run

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


# --- promptfoo's trajectory assertions (src/assertions/trajectory.ts) ---------------------------

PROMPTFOO = """
prompts: ["{{request}}"]
tests:
  - vars: {request: "refund A1"}
    assert:
      - type: trajectory:tool-sequence
        value: [lookup_order, issue_refund]
  - vars: {request: "where is A2"}
    assert:
      - type: trajectory:tool-sequence
        value: {mode: exact, steps: [lookup_order, {name: track_shipment}]}
  - vars: {request: "refund A3 quietly"}
    assert:
      - {type: trajectory:tool-sequence, value: ["lookup_*", issue_refund]}
      - {type: trajectory:step-count, value: {type: tool, max: 3}}
      - {type: trajectory:goal-success, value: the customer got a refund}
      - {type: trajectory:tool-used, value: {name: lookup_order, min: 2}}
      - {type: not-trajectory:tool-sequence, value: [escalate]}
"""


def test_promptfoo_tool_sequences_map_with_their_mode_and_the_rest_is_reported(
    tmp_path: Path,
) -> None:
    path = tmp_path / "promptfooconfig.yaml"
    path.write_text(PROMPTFOO)
    conversion = convert("promptfoo", path)
    assert conversion.plan.kind == "tool_sequence"
    expected = [r["expected"] for _, r in conversion.records]
    # promptfoo's default mode is in_order (others allowed between), kept per case.
    assert expected == [
        {"tool_sequence": ["lookup_order", "issue_refund"], "match": "in_order"},
        {"tool_sequence": ["lookup_order", "track_shipment"], "match": "exact"},
    ]
    # The third test has no assertion evalgate checks as promptfoo does: kept apart, listed.
    assert [u.reason for u in conversion.unscored_list] == [
        "no tool_sequence check (has not-trajectory:tool-sequence, trajectory:goal-success, "
        "trajectory:step-count, trajectory:tool-sequence, trajectory:tool-used)"
    ]
    notes = {n.what: n.fix for n in conversion.notes.unmapped.values()}
    assert notes["trajectory:tool-sequence assertion"].startswith("a glob pattern (*)")
    assert notes["trajectory:step-count assertion"].startswith("promptfoo counts the trace's")
    assert notes["trajectory:goal-success assertion"].startswith("use the judge scorer")
    assert notes["trajectory:tool-used assertion"].startswith("a count of calls")
    assert notes["not-trajectory:tool-sequence assertion"].startswith("a negated trajectory")


PROMPTFOO_USED = """
prompts: ["{{request}}"]
tests:
  - vars: {request: "refund A1"}
    assert:
      - {type: trajectory:tool-used, value: lookup_order}
      - type: trajectory:tool-args-match
        value: {name: issue_refund, args: {order_id: A1}}
  - vars: {request: "refund A2"}
    assert:
      - type: trajectory:tool-args-match
        value: {name: issue_refund, args: {order_id: A2, amount: 5}, mode: exact}
  - vars: {request: "refund A4"}
    assert:
      - type: trajectory:tool-args-match
        value: {name: issue_refund, args: {order_id: A4}, ignore: [reason]}
  - vars: {request: "hello"}
    assert:
      - {type: not-trajectory:tool-used, value: [issue_refund, escalate]}
"""


def test_promptfoo_tool_used_and_args_match_compose_into_all_of(tmp_path: Path) -> None:
    from evalgate.config.models import AllOfScorer
    from evalgate.scorers.base import build_scorer
    from evalgate.trajectory import CallRecord, Step

    path = tmp_path / "promptfooconfig.yaml"
    path.write_text(PROMPTFOO_USED)
    conversion = convert("promptfoo", path)
    # Tests check tools used and tools not used: one all_of of both, keyed by kind.
    assert conversion.plan.config == {
        "kind": "all_of",
        "scorers": [{"kind": "tool_used"}, {"kind": "tool_not_used"}],
    }
    first, second, fourth = (r["expected"] for _, r in conversion.records)
    assert first == {
        "tool_used": ["lookup_order", {"name": "issue_refund", "input": {"order_id": "A1"}}],
        "tool_not_used": [],
    }
    assert second == {
        "tool_used": [
            {"name": "issue_refund", "input_schema": {"const": {"order_id": "A2", "amount": 5}}}
        ],
        "tool_not_used": [],
    }
    assert fourth == {"tool_used": [], "tool_not_used": ["issue_refund", "escalate"]}
    notes = {n.what: n.fix for n in conversion.notes.unmapped.values()}
    assert notes["trajectory:tool-args-match assertion"].startswith("defaults / ignore")
    assert [u.reason for u in conversion.unscored_list] == [
        "no tool_used / tool_not_used check (has trajectory:tool-args-match)"
    ]
    scorer = build_scorer(AllOfScorer.model_validate(conversion.plan.config), tmp_path, None)

    def score(expected: object, *calls: tuple[str, dict[str, object]]) -> float:
        steps = [Step(calls=[CallRecord(name=n, input=i) for n, i in calls])]
        return scorer(expected, "", trajectory=steps).score

    # As promptfoo: partial is a JSON subset of some call's args; exact is deep equality
    # (1 equals 1.0); not-trajectory:tool-used passes when none of the tools was called.
    refund = ("issue_refund", {"order_id": "A1", "amount": 5})
    assert score(first, ("lookup_order", {}), refund) == 1.0
    assert score(first, refund) == 0.0  # lookup_order was not called
    assert score(first, ("lookup_order", {}), ("issue_refund", {"order_id": "A9"})) == 0.0
    assert score(second, ("issue_refund", {"order_id": "A2", "amount": 5.0})) == 1.0
    assert score(second, ("issue_refund", {"order_id": "A2", "amount": 5, "x": 1})) == 0.0
    assert score(fourth, ("lookup_order", {})) == 1.0
    assert score(fourth, ("lookup_order", {}), ("escalate", {})) == 0.0


# --- Inspect samples with tool calls (inspect_ai/model/_chat_message.py) ------------------------


def _call(call_id: str, name: str, arguments: object, **more: object) -> dict[str, object]:
    return {"id": call_id, "function": name, "arguments": arguments, "type": "function", **more}


SAMPLES = [
    {
        "id": "s1",
        "input": [
            {"role": "system", "content": "You are a support agent."},
            {"role": "user", "content": "Order A1 arrived broken."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call("c1", "lookup_order", {"order_id": "A1"})],
            },
            {
                "role": "tool",
                "tool_call_id": "c1",
                "function": "lookup_order",
                "content": '{"status": "delivered"}',
            },
            {"role": "assistant", "content": "It was delivered. Shall I refund it?"},
            {"role": "user", "content": "Yes, refund order A1 please."},
        ],
        "target": "Refunded",
    },
    {
        "id": "s2",
        "input": [
            {"role": "user", "content": "Where is A2?"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Let me check."}],
                "tool_calls": [
                    _call("c2", "track_shipment", {"order_id": "A2"}),
                    _call("c3", "lookup_order", {"order_id": "A2"}),
                    _call("c4", "escalate", None, parse_error="bad JSON"),
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "c2",
                "function": "track_shipment",
                "content": "",
                "error": {"type": "timeout", "message": "the carrier did not answer"},
            },
            {"role": "user", "content": "Any news?"},
        ],
        "target": "carrier",
    },
]


def test_inspect_transcripts_with_tool_calls_become_agent_cases(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    conversion = convert("inspect", path)
    got = {r["id"]: r for _, r in conversion.records}
    assert got["s1"]["input"] == "Yes, refund order A1 please."
    # The assistant turn that only called a tool and the one that followed are one text turn.
    assert got["s1"]["messages"] == [
        {"role": "user", "content": "Order A1 arrived broken."},
        {"role": "assistant", "content": "It was delivered. Shall I refund it?"},
    ]
    assert got["s1"]["fixtures"] == {
        "lookup_order": [{"when": {"order_id": "A1"}, "result": '{"status": "delivered"}'}]
    }
    # An error result replays as an error; a call with no result gets no fixture.
    assert got["s2"]["fixtures"] == {
        "track_shipment": [{"when": {"order_id": "A2"}, "error": "the carrier did not answer"}]
    }
    assert got["s2"]["messages"] == [
        {"role": "user", "content": "Where is A2?"},
        {"role": "assistant", "content": "Let me check."},
    ]
    notes = {n.what: n for n in conversion.notes.unmapped.values()}
    assert notes["tool calls in the input"].count == 2
    assert notes["tool call without a recorded result"].count == 1
    assert notes["tool call with unreadable arguments"].count == 1
    assert "system message" in notes


def test_an_imported_transcript_runs_with_its_recorded_results(tmp_path: Path) -> None:
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(SAMPLES[0]) + "\n")
    code, snippet, err = cli(
        "import", "inspect", str(path), "--out", str(tmp_path / "cases.jsonl"), "--config-snippet"
    )
    assert code == 0, err
    config = yaml.safe_load(snippet)
    suite = config["suites"]["main"]
    assert [t["name"] for t in suite["tools"]] == ["lookup_order"]
    rules = {
        "agents": [
            {
                "name": "refund",
                "phrases": ["refund"],
                "extract": {"order": r"\b(A\d+)\b"},
                "steps": [{"tool": "lookup_order", "input": {"order_id": "{order}"}}],
                "reply": "Refunded {order}.",
            }
        ]
    }
    suite["model"] = {"backend": "fake", "name": "fake-agent", "options": {"rules": rules}}
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "v1.txt").write_text("You are a support agent.")
    (tmp_path / "evalgate.yml").write_text(yaml.safe_dump(config))
    code, _, err = cli("run", "v1", "--config", str(tmp_path / "evalgate.yml"))
    assert code == 0, err
    (saved,) = (tmp_path / ".evalgate" / "runs").glob("*.json")
    # Read as every command reads a run file (the compact form leaves default fields out).
    outcome = read_run(saved).cases[0].outcomes[0]
    assert outcome.steps is not None
    call = outcome.steps[0].calls[0]
    # The recorded result answered the same call again.
    assert (call.status, call.result) == ("ok", '{"status": "delivered"}')
    assert outcome.score == 1.0


def test_a_promptfoo_csv_cell_reads_a_trajectory_assertion(tmp_path: Path) -> None:
    from evalgate.cases.importers.promptfoo import parse_assertion

    assert parse_assertion("trajectory:tool-used: lookup_order") == {
        "type": "trajectory:tool-used",
        "value": "lookup_order",
    }
    assert parse_assertion("not-trajectory:tool-used: escalate") == {
        "type": "not-trajectory:tool-used",
        "value": "escalate",
    }
    path = tmp_path / "tests.csv"
    path.write_text("request,__expected\nrefund A1,trajectory:tool-used: lookup_order\n")
    ((_, record),) = convert("promptfoo", path).records
    assert record["expected"] == ["lookup_order"]
