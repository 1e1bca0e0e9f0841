"""Agent cases on the openai backend: the real openai client against the chat completions
stand-in speaking tool calls (tool_calls with JSON-string arguments, role "tool" replies)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import openai
import pytest
from conftest import EXAMPLES

from evalgate.backends.base import BackendContext
from evalgate.backends.fake import FakeBackend, load_rules
from evalgate.backends.openai import OpenAIBackend
from evalgate.config.load import load_config
from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite
from evalgate.runs.schema import Run
from evalgate.trajectory import show_calls
from tests.support.openai_server import OpenAIServer

SUPPORT = EXAMPLES / "support-agent"
SYSTEM = (SUPPORT / "prompts" / "v1.txt").read_text()


def run(root: Path, backend: str, url: str = "", stream: bool = False) -> Run:
    shutil.copytree(SUPPORT, root, ignore=shutil.ignore_patterns(".evalgate"))
    if backend == "openai":
        config = root / "evalgate.yml"
        text = config.read_text().replace("      backend: fake ", "      backend: openai ")
        text = text.replace(
            "        rules_file: fake-rules.yml",
            f"        base_url: {url}" + ("\n        stream: true" if stream else ""),
        )
        config.write_text(text)
    loaded = load_config(root / "evalgate.yml")
    name, suite = loaded.suite(None)
    context = BackendContext(base_dir=loaded.root, env={"OPENAI_API_KEY": "sk-test"})
    made: Any = (OpenAIBackend if backend == "openai" else FakeBackend)(suite.model, context)
    spec = RunSpec(name, suite, load_prompt(loaded, suite, "v1"), load_suite_cases(loaded, suite))
    return run_suite(spec, made, loaded.root)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_openai_loop_makes_the_fakes_trajectories(tmp_path: Path, stream: bool) -> None:
    with OpenAIServer(load_rules({"rules_file": "fake-rules.yml"}, SUPPORT)) as server:
        online = run(tmp_path / "api", "openai", server.url, stream)
        bodies = list(server.bodies)
    # Every step of every case was streamed (tool-call deltas joined by the client), or none.
    assert {b.get("stream", False) for b in bodies} == {stream}
    offline = run(tmp_path / "fake", "fake")
    assert online.errors == 0
    assert {c.id: show_calls(c.outcomes[0].steps or []) for c in online.cases} == {
        c.id: show_calls(c.outcomes[0].steps or []) for c in offline.cases
    }
    assert [c.score for c in online.cases] == [c.score for c in offline.cases]
    # the tools went as functions; results came back as role "tool" messages
    assert bodies[0]["tools"][0]["type"] == "function"
    assert bodies[0]["tools"][0]["function"]["name"] == "lookup_order"
    answered = [m for b in bodies for m in b["messages"] if m["role"] == "tool"]
    assert answered and all(m["tool_call_id"].startswith("call_") for m in answered)
    steps = sum(len(c.outcomes[0].steps or []) for c in online.cases)
    assert len(bodies) == steps
    # Usage arrives in the stream's last chunk: tokens are summed over steps either way.
    assert online.cases[0].outcomes[0].input_tokens > 0


def test_the_stand_in_refuses_unanswered_tool_calls(tmp_path: Path) -> None:
    rules = load_rules({"rules_file": "fake-rules.yml"}, SUPPORT)
    tools = [
        {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}
    ]
    with OpenAIServer(rules) as server:
        client = openai.OpenAI(api_key="k", base_url=server.url, max_retries=0)
        first = client.chat.completions.create(
            model="m",
            tools=tools,  # type: ignore[arg-type]
            messages=[
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Where is order A1234?"},
            ],
        )
        call = first.choices[0].message.tool_calls
        assert first.choices[0].finish_reason == "tool_calls" and call
        assert json.loads(call[0].function.arguments) == {"order_id": "A1234"}  # type: ignore[union-attr]
        assistant = first.choices[0].message.model_dump(exclude_none=True)
        with pytest.raises(openai.BadRequestError, match="did not have response messages"):
            client.chat.completions.create(
                model="m",
                tools=tools,  # type: ignore[arg-type]
                messages=[{"role": "user", "content": "Where is A1234?"}, assistant],  # type: ignore[list-item]
            )
        client.close()


def test_a_call_of_no_possible_tool_is_an_error_of_the_case_not_a_crash(tmp_path: Path) -> None:
    # A compatible server may answer a tool call whose name no tool can have: the case is an
    # error of kind malformed (its text quoting the name, capped), and the run goes on.
    with OpenAIServer(load_rules({"rules_file": "fake-rules.yml"}, SUPPORT)) as server:
        server.script(["bad-tool-name"])
        online = run(tmp_path / "api", "openai", server.url)
    errored = [c for c in online.cases if c.error is not None]
    assert len(errored) == 1
    outcome = errored[0].outcomes[0]
    assert outcome.error_kind == "malformed"
    assert "look up" in (outcome.error or "")
    assert online.errors == 1 and len(online.cases) > 1
