"""Agent cases on the anthropic backend: the real SDK against the Messages stand-in speaking
tool use (tool_use blocks, stop_reason tool_use, tool_result turns, streaming, seeded flips),
and the gate end to end on a pull request that drops a tool call."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from conftest import EXAMPLES, CliResult

from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext
from evalgate.backends.fake import FakeBackend, load_rules
from evalgate.config.load import load_config
from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite
from evalgate.runs.schema import Run
from evalgate.trajectory import show_calls
from tests.support.messages_server import Knobs, MessagesServer

SUPPORT = EXAMPLES / "support-agent"
KEY = "sk-test"
LOOKUP = {
    "name": "lookup_order",
    "description": "Look up an order.",
    "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
}
REFUND = {"name": "issue_refund", "input_schema": {"type": "object"}}
SYSTEM = (SUPPORT / "prompts" / "v1.txt").read_text()


@pytest.fixture(scope="module")
def agent_server() -> Iterator[MessagesServer]:
    with MessagesServer(load_rules({"rules_file": "fake-rules.yml"}, SUPPORT)) as stand_in:
        yield stand_in


@pytest.fixture
def asrv(agent_server: MessagesServer) -> Iterator[MessagesServer]:
    agent_server.knobs = Knobs()
    agent_server.reset()
    yield agent_server
    assert agent_server.errors == []


@pytest.fixture
def client(asrv: MessagesServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key=KEY, base_url=asrv.url, max_retries=0) as made:
        yield made


def ask(client: anthropic.Anthropic, messages: list[Any], stream: bool = False) -> Any:
    params: dict[str, Any] = {
        "model": "claude-test",
        "max_tokens": 256,
        "system": SYSTEM,
        "tools": [LOOKUP, REFUND],
        "messages": messages,
    }
    if stream:
        with client.messages.stream(**params) as events:
            return events.get_final_message()
    return client.messages.create(**params)


FIRST = {"role": "user", "content": "Order A4137 arrived broken, refund please."}


@pytest.mark.parametrize("stream", [False, True])
def test_the_stand_in_answers_with_tool_use_then_reads_tool_results(
    client: anthropic.Anthropic, stream: bool
) -> None:
    first = ask(client, [FIRST], stream)
    assert first.stop_reason == "tool_use"
    (use,) = first.content
    assert (use.type, use.name, use.input) == ("tool_use", "lookup_order", {"order_id": "A4137"})
    assert use.id.startswith("toolu_")
    turns = [
        FIRST,
        {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "delivered"}],
        },
    ]
    second = ask(client, turns, stream)
    assert second.stop_reason == "tool_use"
    assert (second.content[0].name, second.content[0].input) == (
        "issue_refund",
        {"order_id": "A4137"},
    )
    turns += [
        {"role": "assistant", "content": [second.content[0].model_dump(exclude_none=True)]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": second.content[0].id, "content": "ok"}
            ],
        },
    ]
    last = ask(client, turns, stream)
    assert last.stop_reason == "end_turn"
    assert last.content[0].type == "text" and "A4137" in last.content[0].text
    # tool definitions and results are input too: the third call sends more than the first
    assert last.usage.input_tokens > first.usage.input_tokens


def test_the_stand_in_streams_tool_input_as_json_deltas(client: anthropic.Anthropic) -> None:
    with client.messages.stream(
        model="claude-test", max_tokens=64, system=SYSTEM, tools=[LOOKUP], messages=[FIRST]
    ) as events:
        kinds = [(e.type, getattr(getattr(e, "delta", None), "type", None)) for e in events]
    assert ("content_block_delta", "input_json_delta") in kinds
    assert kinds[-1] == ("message_stop", None)


def test_a_tool_use_without_its_result_is_refused_as_the_api_does(
    client: anthropic.Anthropic, asrv: MessagesServer
) -> None:
    use = ask(client, [FIRST]).content[0]
    assistant = {"role": "assistant", "content": [use.model_dump(exclude_none=True)]}
    with pytest.raises(anthropic.BadRequestError, match="without `tool_result` blocks"):
        ask(client, [FIRST, assistant, {"role": "user", "content": "and?"}])
    stray = {"type": "tool_result", "tool_use_id": "toolu_nope", "content": "x"}
    with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id`"):
        ask(client, [FIRST, assistant, {"role": "user", "content": [stray]}])
    with pytest.raises(anthropic.BadRequestError, match=r"input_schema\.type"):
        client.messages.create(
            model="m",
            max_tokens=8,
            tools=[{"name": "x", "input_schema": {"type": "string"}}],  # type: ignore[list-item]
            messages=[FIRST],  # type: ignore[list-item]
        )
    asrv.reset()  # the refusals above are what the test asked for


# --- the backend's agent loop, through the pipeline ---------------------------------------------


def support(root: Path, backend: str, **options: Any) -> Path:
    """A copy of the support-agent example whose model is ``backend``."""
    shutil.copytree(SUPPORT, root, ignore=shutil.ignore_patterns(".evalgate"))
    config = root / "evalgate.yml"
    if backend == "fake":
        return config
    text = config.read_text()
    text = text.replace("      backend: fake ", f"      backend: {backend} ")
    text = text.replace("        rules_file: fake-rules.yml", _options(options))
    config.write_text(text)
    return config


def _options(options: dict[str, Any]) -> str:
    if not options:
        return "        stream: false"
    return "\n".join(f"        {k}: {json.dumps(v)}" for k, v in options.items())


def run_version(config: Path, version: str, env: dict[str, str], repeats: int = 1) -> Run:
    loaded = load_config(config)
    name, suite = loaded.suite(None)
    context = BackendContext(base_dir=loaded.root, env=env)
    if suite.model.backend == "fake":
        backend: Any = FakeBackend(suite.model, context)
    else:
        backend = AnthropicBackend(suite.model, context)
    spec = RunSpec(
        name,
        suite,
        load_prompt(loaded, suite, version),
        load_suite_cases(loaded, suite),
        repeats=repeats,
    )
    return run_suite(spec, backend, loaded.root)


def trajectories(run: Run) -> dict[str, list[str]]:
    return {c.id: [show_calls(o.steps or []) for o in c.outcomes] for c in run.cases}


@pytest.mark.parametrize("stream", [False, True])
def test_the_backend_loop_on_the_stand_in_makes_the_fakes_trajectories(
    tmp_path: Path, asrv: MessagesServer, stream: bool
) -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": asrv.url}
    offline = run_version(support(tmp_path / "fake", "fake"), "v1", {})
    config = support(tmp_path / "api", "anthropic", stream=stream)
    online = run_version(config, "v1", env)
    assert trajectories(online) == {k: v for k, v in trajectories(offline).items()}
    assert [c.score for c in online.cases] == [c.score for c in offline.cases]
    assert online.errors == 0
    # Every model call of every loop reached the stand-in, and usage is summed over steps.
    steps = sum(len(o.steps or []) for c in online.cases for o in c.outcomes)
    assert len(asrv.requests) == steps
    for key, field in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens")):
        sent = sum((ex.usage or {})[key] for ex in asrv.requests)
        assert sum(getattr(o, field) for c in online.cases for o in c.outcomes) == sent
    refund = next(c for c in online.cases if c.category == "refund")
    results = [call.result for s in refund.outcomes[0].steps or [] for call in s.calls]
    assert results[0] is not None and json.loads(results[0])["status"] == "delivered"


def test_seeded_flips_change_whole_trajectories_reproducibly(
    tmp_path: Path, asrv: MessagesServer
) -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": asrv.url}
    config = support(tmp_path / "api", "anthropic")
    clean = trajectories(run_version(config, "v1", env))
    asrv.knobs = Knobs(flip_rate=0.3, seed=7)
    asrv.reset()  # the occurrence counts start again, as for the second run
    first = run_version(config, "v1", env, repeats=2)
    asrv.reset()
    again = run_version(config, "v1", env, repeats=2)
    # Same seed, same requests: the same answers. Which repeat of a case draws first depends on
    # thread scheduling (the repeats are in flight together), so compare each case's repeats
    # as a multiset.
    assert {k: sorted(v) for k, v in trajectories(first).items()} == {
        k: sorted(v) for k, v in trajectories(again).items()
    }
    changed = [cid for cid, runs in trajectories(first).items() for t in runs if t != clean[cid][0]]
    # 81 dev cases x 2 repeats, each trajectory flipped at its first step with probability 0.3:
    # 48.6 flips expected, binomial sd sqrt(162 * 0.3 * 0.7) = 5.8; the band is 4 sd wide.
    flips = asrv.stats().flips
    assert 25 <= flips <= 72
    # A flip swaps the whole plan; only a plan that happens to make the same calls for this
    # case (none in this example's rules) would leave the trajectory unchanged.
    assert len(changed) == flips
    # A flipped case still follows one plan to its end: it finishes without error.
    assert first.errors == 0


# --- the gate, end to end -----------------------------------------------------------------------


def test_a_pull_request_that_drops_a_tool_call_fails_and_shows_both_trajectories(
    tmp_path: Path, asrv: MessagesServer, cli: Callable[..., CliResult]
) -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": asrv.url}
    config = support(tmp_path / "repo", "anthropic")
    code, out, err = cli("run", "v1", "--repeats", "2", "--config", str(config), env=env)
    assert code == 0, err
    baseline = re.search(r"saved (\S+) to", out + err)
    assert baseline is not None
    code, comment, err = cli(
        "gate",
        "--config",
        str(config),
        "--baseline",
        baseline.group(1),
        "--candidate",
        "v2",
        "--format",
        "markdown",
        env=env,
    )
    assert code == 1, comment + err
    assert "failed the gate: significantly worse: broke 51, fixed 15" in comment
    # Markdown escapes (\_) undone, as GitHub renders them.
    shown = re.sub(r"\\(.)", r"\1", comment)
    # the broken refund cases: baseline lookup_order → issue_refund, PR issue_refund alone
    rows = [line for line in shown.splitlines() if line.startswith("| sa-007 |")]
    assert len(rows) == 1, comment
    cells = [cell.strip() for cell in rows[0].split("|")][1:-1]
    assert cells[:5] == [
        "sa-007",
        "refund",
        "lookup_order → issue_refund(order_id='A4211')",
        "lookup_order → issue_refund",
        "issue_refund<br>failed: tool_sequence (call 1: expected lookup_order, got "
        "issue_refund(order_id='A4211'))",
    ]


def test_agent_cases_refuse_the_batch_api_in_one_line(
    tmp_path: Path, asrv: MessagesServer, cli: Callable[..., CliResult]
) -> None:
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": asrv.url}
    config = support(tmp_path / "api", "anthropic")
    code, _, err = cli("run", "v1", "--config", str(config), "--batch", env=env)
    assert code == 2
    assert "agent cases cannot go through the Message Batches API" in err
    assert asrv.stats().batches == 0


def test_the_gate_on_a_noisy_agent_reads_its_noise_floor(
    tmp_path: Path, asrv: MessagesServer
) -> None:
    """The gate's statistics on agents as on labels: with trajectories flipping at 10%, the
    baseline's noise floor is measured, the PR that drops lookups fails, and the same prompt
    is not found worse beyond what chance allows."""
    from evalgate.config.models import GatePolicy
    from evalgate.gate.decide import decide

    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": asrv.url}
    config = support(tmp_path / "api", "anthropic")
    asrv.knobs = Knobs(flip_rate=0.1, seed=3)
    baseline = run_version(config, "v1", env, repeats=2)
    same = run_version(config, "v1", env)
    worse = run_version(config, "v2", env)
    policy = GatePolicy()
    unchanged = decide(baseline, same, policy)
    # Expected flip rate: the 66 passing dev cases differ between two repeats when exactly one
    # of them flips (2 x 0.1 x 0.9 = 0.18; a flipped plan fails), the 15 failing cancellations
    # fail under every plan: 66/81 x 0.18 = 0.147, sd about 0.039 over 81 cases. The band is
    # more than 3 sd wide on each side.
    assert unchanged.noise is not None
    assert 0.03 <= unchanged.noise.flip_rate <= 0.30
    # The same prompt: whether it "fails" is a coin the test's alpha throws (5%); a p-value
    # under 0.001 would mean the noise is not symmetric.
    assert unchanged.p_value is not None and unchanged.p_value > 0.001, unchanged.reasons
    dropped = decide(baseline, worse, policy)
    # The 51 dev cases v2 breaks stay broken whatever flips (every other plan fails them too),
    # except those the baseline's repeats disagree on (left out as unstable: about 15% of
    # them). Flips add broken and fixed cases alike on top, so the drop stays clear.
    assert len(dropped.broken) >= 20
    assert dropped.p_value is not None and unchanged.p_value > dropped.p_value
    assert dropped.p_value < 0.1, dropped.reasons
