"""Agent cases: the case schema, the suite's tools, the agent loop and the fake's agent mode."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES

from evalgate.backends.agent import UNAVAILABLE, run_agent
from evalgate.backends.base import BackendContext, Message, Request
from evalgate.backends.fake import FakeBackend
from evalgate.cases.read import Case, check_agent_case, parse_case
from evalgate.config.load import load_config, parse_config
from evalgate.config.models import Fields, ModelSettings, Tool
from evalgate.errors import BackendError, CaseFileError, ConfigError
from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite
from evalgate.trajectory import AgentSpec, ToolSpec, calls_of, show_calls

SUPPORT = EXAMPLES / "support-agent"
TOOLS = (
    ToolSpec(
        name="lookup_order",
        input_schema={
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    ),
    ToolSpec(name="issue_refund"),
    ToolSpec(name="escalate"),
)
RULES: dict[str, Any] = {
    "agents": [
        {
            "name": "refund",
            "phrases": ["refund"],
            "extract": {"order": r"\b(A\d+)\b"},
            "steps": [
                {"tool": "lookup_order", "input": {"order_id": "{order}"}, "if_prompt": "look up"},
                {
                    "tool": "issue_refund",
                    "input": {"order_id": "{order}"},
                    "if_result": "delivered",
                    "otherwise": {"tool": "escalate", "input": {"why": "not delivered"}},
                },
            ],
            "reply": "Refunded {order}.",
        },
        {"name": "loop", "phrases": ["loop"], "steps": [{"tool": "escalate"}] * 5},
    ],
    "agent_default": "Can I help?",
}
DELIVERED = {"lookup_order": [{"when": {"order_id": "A1"}, "result": {"status": "delivered"}}]}


def fake(base: Path = Path(".")) -> FakeBackend:
    settings = ModelSettings(backend="fake", name="fake-agent", options={"rules": RULES})
    return FakeBackend(settings, BackendContext(base_dir=base))


def agent_request(text: str, system: str = "Always look up the order.", **spec: Any) -> Request:
    return Request(
        system=system,
        messages=(Message(role="user", content=text),),
        model="fake-agent",
        case={"id": "c1"},
        agent=AgentSpec(tools=TOOLS, **spec),
    )


def test_the_fake_agent_follows_its_plan_answered_by_the_fixtures() -> None:
    reply = fake().complete(agent_request("Refund order A1 please", fixtures=DELIVERED))
    assert reply.error is None
    assert reply.steps is not None and show_calls(reply.steps) == "lookup_order → issue_refund"
    assert reply.text == "Refunded A1."
    first = reply.steps[0].calls[0]
    assert (first.name, first.input, first.status) == ("lookup_order", {"order_id": "A1"}, "ok")
    assert json.loads(first.result or "") == {"status": "delivered"}
    # the second call had no fixture: answered "unavailable", recorded as missing
    assert reply.steps[1].calls[0].status == "missing"
    assert reply.steps[1].calls[0].result == UNAVAILABLE
    # three model calls (two calls, then the answer); tokens summed over them
    assert len(reply.steps) == 3
    assert reply.input_tokens == sum(s.input_tokens for s in reply.steps) > 0
    assert reply.output_tokens == sum(s.output_tokens for s in reply.steps) > 0


def test_a_fixture_result_and_the_prompt_steer_the_plan() -> None:
    shipped = {"lookup_order": {"result": {"status": "shipped"}}}
    reply = fake().complete(agent_request("refund A1", fixtures=shipped))
    assert reply.steps and show_calls(reply.steps) == "lookup_order → escalate"
    # A prompt without "look up" drops the lookup; with no result the refund is not taken
    # either: the otherwise step is.
    reply = fake().complete(agent_request("refund A1", system="Be quick.", fixtures=DELIVERED))
    assert reply.steps and show_calls(reply.steps) == "escalate"
    # No rule matches: no calls, the default answer.
    reply = fake().complete(agent_request("hello"))
    assert (reply.text, len(reply.steps or [])) == ("Can I help?", 1)


def test_missing_fixtures_can_be_errors_of_the_case_by_rule() -> None:
    reply = fake().complete(agent_request("refund A1", on_missing_fixture="error"))
    assert reply.error_kind == "tool"
    assert reply.error == (
        'no fixture answers the call lookup_order({"order_id": "A1"}) '
        "(agent.on_missing_fixture: error)"
    )
    assert reply.steps is not None and len(reply.steps) == 1  # kept for the report


def test_a_fixture_can_answer_with_an_error_and_a_when_must_match() -> None:
    fixtures = {
        "lookup_order": [
            {"when": {"order_id": "A9"}, "result": "wrong order"},
            {"error": "database down"},
        ]
    }
    reply = fake().complete(agent_request("refund A1", fixtures=fixtures))
    assert reply.steps is not None
    call = reply.steps[0].calls[0]
    assert (call.status, call.result) == ("error", "database down")


def test_a_loop_past_max_steps_is_an_error_of_the_case() -> None:
    reply = fake().complete(agent_request("loop", max_steps=3))
    assert reply.error_kind == "max_steps"
    assert reply.error == (
        "the model was still calling tools after agent.max_steps (3) model calls"
    )
    assert reply.steps is not None and len(reply.steps) == 3


def test_a_call_to_a_tool_the_suite_does_not_offer_is_recorded_as_unknown() -> None:
    spec = AgentSpec(tools=(ToolSpec(name="lookup_order"),))
    request = agent_request("refund A1").model_copy(update={"agent": spec})

    class Session:
        sent = 0

        def send(self) -> Any:
            from evalgate.backends.agent import Turn
            from evalgate.trajectory import ToolCall

            self.sent += 1
            if self.sent == 1:
                return Turn(calls=[ToolCall(name="delete_everything")])
            return Turn(text="ok")

        def answer(self, turn: Any, records: Any) -> None:
            self.records = records

    session = Session()
    reply = run_agent(session, spec, case_id="c1", cwd=Path("."))
    assert reply.steps is not None
    assert reply.steps[0].calls[0].status == "unknown"
    assert session.records[0].result == "error: there is no tool named 'delete_everything'"
    assert request.agent is spec


TOOL_COMMAND = """
import json, sys, time
call = json.load(sys.stdin)
mode = call["input"].get("order_id", "")
if mode == "A1":
    print(json.dumps({"result": {"status": "delivered", "case": call["case_id"]}}))
elif mode == "A2":
    print("boom", file=sys.stderr); sys.exit(3)
elif mode == "A3":
    time.sleep(5)
elif mode == "A4":
    print("not json")
elif mode == "A6":
    sys.stdout.write("x" * (2 << 20))
elif mode == "A7":
    sys.stderr.write("noise " * (2 << 20) + "the last words")
    sys.exit(1)
elif mode == "A8":
    import subprocess
    # A child left running with the command's stdout: the call is answered all the same.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    print(json.dumps({"result": "done"}), flush=True)
else:
    print(json.dumps({"error": "no such order"}))
"""


@pytest.mark.parametrize(
    ("order", "error"),
    [
        ("A1", None),
        ("A2", "tool command for lookup_order exited with code 3; stderr: boom"),
        ("A3", "tool command for lookup_order timed out after 0.5s"),
        ("A4", "tool command for lookup_order printed no JSON"),
        ("A5", None),
        ("A6", "tool command for lookup_order printed more than 1,048,576 bytes"),
        ("A7", "tool command for lookup_order exited with code 1; stderr: "),
        ("A8", None),
    ],
)
def test_the_tool_command_answers_calls_no_fixture_answers(
    tmp_path: Path, order: str, error: str | None
) -> None:
    (tmp_path / "tools.py").write_text(TOOL_COMMAND)
    request = agent_request(
        f"refund {order}",
        tool_command=(sys.executable, "tools.py"),
        # Only A3 is about the deadline; the others get one that a loaded machine's slow
        # interpreter start cannot reach, so they never time out by accident.
        tool_timeout_s=0.5 if order == "A3" else 60.0,
    )
    reply = fake(tmp_path).complete(request)
    if error is not None:
        assert reply.error_kind == "tool"
        assert reply.error is not None and reply.error.startswith(error)
        if order == "A7":
            # Only the tail of a flood of stderr is kept, and shown as one short line.
            assert reply.error.endswith("the last words")
            assert len(reply.error) < 400
        return
    assert reply.steps is not None
    call = reply.steps[0].calls[0]
    if order == "A1":
        assert call.status == "ok"
        assert json.loads(call.result or "") == {"status": "delivered", "case": "c1"}
    elif order == "A8":
        assert (call.status, call.result) == ("ok", "done")
    else:
        assert (call.status, call.result) == ("error", "no such order")


# --- the case schema and the suite's tools ------------------------------------------------------


def case(record: dict[str, Any]) -> Case:
    return parse_case(
        {"id": "c1", "expected": ["x"], **record}, Fields(), "cases.jsonl:1", need_expected=True
    )


def test_a_case_carries_a_conversation_and_fixtures_outside_its_input() -> None:
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    parsed = case({"message": "refund", "messages": turns, "fixtures": DELIVERED})
    assert parsed.messages == tuple(turns)
    assert parsed.fixtures == {"lookup_order": tuple(DELIVERED["lookup_order"])}
    assert "messages" not in parsed.input and "fixtures" not in parsed.input


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"messages": "hi"}, "field 'messages' must be a list of turns"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "messages[0] has role 'assistant'"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0] must be an object"),
        ({"messages": [{"role": "user", "content": "x"}]}, "the last of 'messages' must be"),
        ({"fixtures": []}, "field 'fixtures' must be an object"),
        ({"fixtures": {"t": []}}, "fixtures.t is an empty list"),
        ({"fixtures": {"t": {"result": 1, "error": "x"}}}, "fixtures.t needs exactly one of"),
        ({"fixtures": {"t": [{"result": 1}, {"reslt": 1}]}}, "fixtures.t[1] has unknown key"),
        ({"fixtures": {"t": {"when": 3, "result": 1}}}, "fixtures.t.when must be an object"),
    ],
)
def test_malformed_conversations_and_fixtures_are_one_line_errors(
    record: dict[str, Any], message: str
) -> None:
    with pytest.raises(CaseFileError, match="^cases.jsonl:1: " + _re(message)):
        case(record)


def _re(text: str) -> str:
    import re

    return re.escape(text)


SUITE_TOOLS = [
    Tool(name="lookup_order", input_schema=dict(TOOLS[0].input_schema)),
    Tool(name="escalate"),
]


@pytest.mark.parametrize(
    ("fixtures", "message"),
    [
        ({"refund": {"result": 1}}, "fixtures name an unknown tool 'refund'"),
        (
            {"lookup_order": {"when": {"id": "A1"}, "result": 1}},
            "fixtures.lookup_order[0].when names 'id', which is not an input of lookup_order",
        ),
        (
            {"lookup_order": {"when": {"order_id": 7}, "result": 1}},
            "fixtures.lookup_order[0].when.order_id does not fit lookup_order's input schema",
        ),
    ],
)
def test_fixtures_are_checked_against_the_suites_tools(
    fixtures: dict[str, Any], message: str
) -> None:
    with pytest.raises(CaseFileError, match=_re(message)):
        check_agent_case(case({"fixtures": fixtures}), SUITE_TOOLS)
    with pytest.raises(CaseFileError, match="the suite offers no tools"):
        check_agent_case(case({"fixtures": fixtures}), [])


BASE = """
suites:
  s:
    prompts: p.txt
    cases: c.jsonl
"""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "    scorer: {kind: tool_used, tools: [a]}\n",
            "x.yml:3: suites.s: a tool_sequence, tool_used, tool_not_used or "
            "max_steps scorer needs tools",
        ),
        (
            "    scorer: {kind: tool_sequence}\n    tools: [{name: a}, {name: a}]\n",
            "tool 'a' is listed twice",
        ),
        (
            "    scorer: {kind: tool_sequence}\n    tools: [{name: 'a b'}]\n",
            "suites.s.tools.0.name: string should match pattern",
        ),
        (
            "    scorer: {kind: tool_sequence}\n    tools: [{name: a, input_schema: {type: string}}]\n",
            "a tool's input_schema must have type: object",
        ),
        (
            "    scorer: {kind: all_of, scorers: [{kind: tool_sequence, match: fuzzy}]}\n"
            "    tools: [{name: a}]\n",
            "suites.s.scorer.scorers.0.tool_sequence.match: should be 'exact'",
        ),
    ],
)
def test_bad_tool_config_is_a_one_line_config_error(extra: str, message: str) -> None:
    with pytest.raises(ConfigError, match=_re(message)):
        parse_config(BASE + extra, Path("x.yml"))


def test_the_fake_refuses_a_suite_it_has_no_rules_for() -> None:
    with pytest.raises(BackendError, match="has no agent rules"):
        FakeBackend(
            ModelSettings(options={"rules": {"rules": [{"label": "a", "phrases": ["a"]}]}}),
            BackendContext(base_dir=Path(".")),
        ).complete(agent_request("refund"))


# --- the support-agent example through the pipeline ---------------------------------------------


def support_run(version: str, splits: frozenset[str] = frozenset({"dev", "regression"})) -> Any:
    loaded = load_config(SUPPORT / "evalgate.yml")
    name, suite = loaded.suite(None)
    cases = load_suite_cases(loaded, suite)
    backend = FakeBackend(suite.model, BackendContext(base_dir=loaded.root))
    spec = RunSpec(name, suite, load_prompt(loaded, suite, version), cases, splits=splits)
    return run_suite(spec, backend, loaded.root)


def test_the_example_has_120_cases_in_40_groups_and_six_tools() -> None:
    loaded = load_config(SUPPORT / "evalgate.yml")
    _, suite = loaded.suite(None)
    cases = load_suite_cases(loaded, suite).cases
    assert len(cases) == 120
    assert len({c.group for c in cases}) == 40
    assert len(suite.tools) == 6
    assert sum(1 for c in cases if c.messages) == 6  # multi-turn conversations


def test_the_run_file_keeps_every_step_and_the_holdout_keeps_none() -> None:
    run = support_run("v1", frozenset({"dev", "holdout"}))
    dev = [c for c in run.cases if c.split == "dev"]
    holdout = [c for c in run.cases if c.split == "holdout"]
    assert dev and holdout
    refund = next(c for c in dev if c.category == "refund")
    outcome = refund.outcomes[0]
    assert outcome.steps is not None
    assert [c.name for c in calls_of(outcome.steps)] == ["lookup_order", "issue_refund"]
    assert outcome.answer == "lookup_order → issue_refund"
    saved = json.loads(run.model_dump_json())
    first = next(c for c in saved["cases"] if c["id"] == refund.id)["outcomes"][0]
    order = refund.expected["tool_sequence"][1]["input"]["order_id"]
    assert first["steps"][0]["calls"][0]["input"] == {"order_id": order}
    assert json.loads(first["steps"][0]["calls"][0]["result"])["status"] == "delivered"
    for result in holdout:
        assert all(o.steps is None and o.text is None and o.reason is None for o in result.outcomes)
    assert "A4" not in json.dumps([c.model_dump() for c in holdout])


def test_the_two_prompt_versions_break_different_things() -> None:
    v1, v2 = support_run("v1"), support_run("v2")

    def rate(run: Any, category: str) -> float:
        cases = [c for c in run.cases if c.category == category]
        return sum(c.score for c in cases) / len(cases)

    # v1 hands cancellations to a person (the expected call is cancel_order); v2 cancels them
    # but refunds, changes addresses and tracks orders without looking them up first.
    assert (rate(v1, "cancel"), rate(v2, "cancel")) == (0.0, 1.0)
    assert (rate(v1, "refund"), rate(v2, "refund")) == (1.0, 0.0)
    assert (rate(v1, "address"), rate(v2, "address")) == (1.0, 0.0)
    assert (rate(v1, "tracking"), rate(v2, "tracking")) == (1.0, 0.0)
    for category in ("escalation", "general"):
        assert rate(v1, category) == rate(v2, category) == 1.0
    broken = next(c for c in v2.cases if c.category == "refund")
    assert broken.answer == "issue_refund"
    assert broken.outcomes[0].reason is not None
    assert broken.outcomes[0].reason.startswith(
        "failed: tool_sequence (call 1: expected lookup_order"
    )


def test_the_bundled_support_agent_is_this_example() -> None:
    from evalgate.cli.demo import bundled_example

    bundled = bundled_example("support-agent")
    files = ["evalgate.yml", "cases.jsonl", "fake-rules.yml"] + [
        f"prompts/{p.name}" for p in (SUPPORT / "prompts").iterdir()
    ]
    for name in files:
        assert (bundled / name).read_bytes() == (SUPPORT / name).read_bytes(), name


def test_the_examples_readme_shows_the_comment_the_gate_prints(tmp_path: Path, cli: Any) -> None:
    import shutil

    root = tmp_path / "sa"
    shutil.copytree(SUPPORT, root, ignore=shutil.ignore_patterns(".evalgate"))
    config = str(root / "evalgate.yml")
    assert cli("run", "v1", "--repeats", "2", "--config", config)[0] == 0
    code, comment, _ = cli(
        "gate",
        "--config",
        config,
        "--baseline",
        "latest:v1",
        "--candidate",
        "v2",
        "--format",
        "markdown",
        "--no-save",
    )
    assert code == 1
    readme = (SUPPORT / "README.md").read_text(encoding="utf-8")
    import re

    def lines(text: str) -> list[str]:
        # the wall time of a run is not reproducible: the rest of the comment is
        return [re.sub(r"\| [\d.]+ s \|$", "| (time) |", line) for line in text.splitlines()]

    shown = [line for line in lines(readme) if line.startswith(("> ", "| ", "#### "))]
    assert len(shown) >= 12
    printed = lines(comment)
    for line in shown:
        assert line in printed, line


# --- what answers the calls is part of what a suite depends on ------------------------------------

ANSWER_SCRIPT = 'import json, sys; json.load(sys.stdin); print(json.dumps({"result": "%s"}))'


def tool_project(tmp_path: Path) -> Path:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "v1.txt").write_text("Always look up the order.")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "answer.py").write_text(ANSWER_SCRIPT % "delivered")
    (tmp_path / "rules.json").write_text(json.dumps(RULES))
    (tmp_path / "cases.jsonl").write_text(
        json.dumps({"id": "c1", "message": "refund A1", "expected": ["lookup_order"]}) + "\n"
    )
    (tmp_path / "evalgate.yml").write_text(
        "version: 1\n"
        "suites:\n"
        "  agent:\n"
        "    prompts: prompts/*.txt\n"
        "    cases: cases.jsonl\n"
        "    fields: {input: [message]}\n"
        "    template: '{{ message }}'\n"
        "    model: {backend: fake, name: fake-agent, options: {rules_file: rules.json}}\n"
        "    scorer: {kind: tool_sequence, match: in_order}\n"
        "    tools:\n"
        "      - {name: lookup_order, input_schema: {type: object}}\n"
        "      - {name: issue_refund}\n"
        "      - {name: escalate}\n"
        f"    agent: {{tool_command: [{json.dumps(sys.executable)}, tools/answer.py]}}\n"
    )
    return tmp_path / "evalgate.yml"


def test_the_tool_command_and_its_script_are_dependencies_of_the_suite(
    tmp_path: Path, cli: Any
) -> None:
    from evalgate.analysis.compare import compare_runs
    from evalgate.runs.schema import read_run

    config = tool_project(tmp_path)
    loaded = load_config(config)
    suite = loaded.config.suites["agent"]
    # A pull request that edits only the script still runs the suite.
    assert (tmp_path / "tools" / "answer.py").resolve() in loaded.dependencies(suite)

    seen: set[Path] = set()

    def run() -> Any:
        code, _, err = cli("run", "v1", "--config", str(config))
        assert code == 0, err
        (new,) = set((tmp_path / ".evalgate" / "runs").glob("*.json")) - seen
        seen.add(new)
        return read_run(new)

    first = run()
    (tmp_path / "tools" / "answer.py").write_text(ANSWER_SCRIPT % "lost in transit")
    second = run()
    # The changed script answered the second run: no reply came from the cache.
    steps = [r.cases[0].outcomes[0].steps for r in (first, second)]
    assert [s[0].calls[0].result for s in steps if s] == ["delivered", "lost in transit"]
    assert first.tools_sha256 and second.tools_sha256
    assert first.tools_sha256 != second.tools_sha256
    warnings = compare_runs(first, second).warnings
    assert any(w.startswith("the runs' tools differ") for w in warnings), warnings
    code, comment, err = cli(
        "gate",
        "--config",
        str(config),
        "--baseline",
        first.name,
        "--candidate",
        second.name,
        "--format",
        "markdown",
    )
    assert code in (0, 1, 3), err
    assert "the candidate's tools differ from the baseline's" in comment
    # A changed tool definition is a change of the tools too.
    text = config.read_text().replace("- {name: escalate}", "- {name: escalate, description: x}")
    config.write_text(text)
    third = run()
    assert third.tools_sha256 not in (None, second.tools_sha256)
