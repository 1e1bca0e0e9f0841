"""Agent cases on the command backend: the user's own agent reports its tool calls, and a
pull request that drops one fails the gate with both trajectories in the comment."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, CliResult

from evalgate.backends.base import BackendContext, Message, Request
from evalgate.backends.command import CommandBackend
from evalgate.config.models import ModelSettings
from evalgate.trajectory import AgentSpec, ToolSpec, show_calls

# An order-support "application": it reads the case, decides which tools to call (a second
# version forgets the lookup before refunds, as the PR under test does) and answers its calls
# from the fixtures it was sent, as a real app would call its own services.
AGENT = r"""
import json, os, re, sys
case = json.load(sys.stdin)
mode = os.environ.get("MODE", "steps")
text = case["input"]["message"].lower()
order = (re.search(r"\b(a\d{4})\b", text) or re.search("", "")).group(0).upper()
plan = []
if "refund" in text or "broken" in text or "damaged" in text or "money back" in text:
    if "look up the order" in case["system"].lower():
        plan.append("lookup_order")
    plan.append("issue_refund")
elif "cancel" in text:
    plan += ["lookup_order", "escalate_to_human"]
def answer(name):
    entries = case["fixtures"].get(name, [{"result": "unavailable"}])
    entries = entries if isinstance(entries, list) else [entries]
    return entries[0].get("result", entries[0].get("error"))
calls = [{"name": n, "input": {"order_id": order}, "result": answer(n)} for n in plan]
if mode == "steps":
    steps = [{"tool_calls": [c], "input_tokens": 10, "output_tokens": 3} for c in calls]
    steps.append({"text": "Done.", "input_tokens": 12, "output_tokens": 2})
    print(json.dumps({"steps": steps}))
elif mode == "calls":
    print(json.dumps({"text": "Done.", "tool_calls": [{"name": c["name"], "input": c["input"]} for c in calls]}))
else:
    print(os.environ["REPLY"])
"""


def backend(tmp_path: Path, mode: str = "steps", reply: str = "") -> CommandBackend:
    (tmp_path / "agent.py").write_text(AGENT)
    settings = ModelSettings(
        backend="command",
        name="my-agent",
        options={"command": [sys.executable, "agent.py"], "env": {"MODE": mode, "REPLY": reply}},
    )
    return CommandBackend(settings, BackendContext(base_dir=tmp_path, env={"PATH": ""}))


def request(message: str) -> Request:
    fixtures = {"lookup_order": {"result": {"status": "delivered"}}}
    return Request(
        system="Before any refund, look up the order.",
        messages=(Message(role="user", content=message),),
        model="my-agent",
        case={"id": "c1", "input": {"message": message}},
        agent=AgentSpec(
            tools=(ToolSpec(name="lookup_order"), ToolSpec(name="issue_refund")), fixtures=fixtures
        ),
    )


def test_the_agent_gets_tools_and_fixtures_and_reports_its_steps(tmp_path: Path) -> None:
    reply = backend(tmp_path).complete(request("Refund A1234, it is broken"))
    assert reply.error is None, reply.error
    assert reply.steps is not None and show_calls(reply.steps) == "lookup_order → issue_refund"
    assert len(reply.steps) == 3
    assert json.loads(reply.steps[0].calls[0].result or "") == {"status": "delivered"}
    assert reply.steps[1].calls[0].result == "unavailable"
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("Done.", 32, 8)


def test_tool_calls_alone_are_one_step(tmp_path: Path) -> None:
    reply = backend(tmp_path, "calls").complete(request("Refund A1234"))
    assert reply.steps is not None and len(reply.steps) == 1
    assert show_calls(reply.steps) == "lookup_order → issue_refund"
    assert reply.steps[0].calls[0].input == {"order_id": "A1234"}
    assert reply.steps[0].calls[0].result is None


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ({"tool_calls": {"name": "x"}}, "tool_calls must be a list, found dict"),
        ({"tool_calls": [{"input": {}}]}, "tool_calls[0].name must be a non-empty string"),
        (
            {"tool_calls": [{"name": "x", "input": "a"}]},
            "tool_calls[0].input must be an object, found str",
        ),
        ({"tool_calls": [{"name": "x", "args": {}}]}, "tool_calls[0] has unknown key 'args'"),
        ({"steps": [{"calls": []}]}, "steps[0] has unknown key 'calls'"),
        ({"steps": "x"}, "steps must be a list, found str"),
        ({"steps": [], "tool_calls": []}, "give 'steps' or 'tool_calls', not both"),
        ({"steps": [{"input_tokens": -1}]}, "steps[0]: token counts must be whole numbers"),
        ({"text": 3, "tool_calls": []}, "text must be a string, found int"),
    ],
)
def test_a_reply_of_the_wrong_shape_is_an_error_with_the_reason(
    tmp_path: Path, reply: dict[str, Any], reason: str
) -> None:
    got = backend(tmp_path, "raw", json.dumps(reply)).complete(request("x"))
    assert got.error_kind == "malformed"
    assert got.error is not None
    assert got.error.startswith(f"the program's reply has the wrong shape: {reason}")


def test_a_reply_without_a_trajectory_has_none(tmp_path: Path) -> None:
    got = backend(tmp_path, "raw", json.dumps({"text": "hi"})).complete(request("x"))
    assert (got.error, got.steps, got.text) == (None, None, "hi")


def test_the_gate_fails_a_pr_that_drops_a_tool_call_on_the_command_backend(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLES / "support-agent", root, ignore=shutil.ignore_patterns(".evalgate"))
    (root / "agent.py").write_text(AGENT)
    config = root / "evalgate.yml"
    text = config.read_text()
    text = text.replace("      backend: fake ", "      backend: command ")
    text = text.replace(
        "        rules_file: fake-rules.yml",
        f"        command: [{json.dumps(sys.executable)}, agent.py]",
    )
    config.write_text(text)
    code, out, err = cli("run", "v1", "--repeats", "2", "--config", str(config))
    assert code == 0, err
    saved = re.search(r"saved (\S+) to", out + err)
    assert saved is not None
    code, comment, err = cli(
        "gate",
        "--config",
        str(config),
        "--baseline",
        saved.group(1),
        "--candidate",
        "v2",
        "--format",
        "markdown",
    )
    assert code == 1, comment + err
    shown = re.sub(r"\\(.)", r"\1", comment)
    row = next(line for line in shown.splitlines() if line.startswith("| sa-007 |"))
    cells = [cell.strip() for cell in row.split("|")][1:-1]
    assert cells[3:5] == [
        "lookup_order → issue_refund",
        "issue_refund<br>failed: tool_sequence (call 1: expected lookup_order, got "
        "issue_refund(order_id='A4211'))",
    ]
