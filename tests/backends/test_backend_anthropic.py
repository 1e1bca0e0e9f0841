"""The Anthropic backend: the real SDK against the loopback Messages API stand-in.

Also the cost of real-model runs (prices, prompt caching, unknown models) and the key's secrecy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import shop_suite, spec_of

from evalgate import cli
from evalgate.analysis.pricing import Usage, cost, price_for, uncached_cost
from evalgate.analysis.summary import summarise
from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext, Message, Request
from evalgate.backends.fake import FakeRules, load_rules, rough_tokens
from evalgate.config.load import LoadedConfig
from evalgate.config.models import ModelSettings
from evalgate.errors import BackendError
from evalgate.report.render import render_model
from evalgate.running.suite import load_prompt, run_suite
from evalgate.runs.schema import CaseResult, Run, save_run
from tests.support.messages_server import MessagesServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "bike-shop"
KEY = "sk-ant-api03-" + "Zq9xS3cr3tK3y" * 6
MODEL = "claude-haiku-4-5"
FAST_RETRY = {"base_s": 0.01, "cap_s": 0.05, "max_attempts": 3}
SYSTEM = "Sort the message into complaint, status, booking, quote, parts or other. Reply in JSON."


def bike_shop_rules() -> FakeRules:
    return load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)


def write_suite(
    root: Path, *, cases: int, model: dict[str, Any], scorer: dict[str, Any] | None = None
) -> LoadedConfig:
    """A suite over the first ``cases`` bike-shop cases (cycled, new ids), all on the dev side."""
    return shop_suite(root, cases=cases, model=model, scorer=scorer)


@pytest.fixture
def make_backend(srv: MessagesServer) -> Iterator[Callable[..., AnthropicBackend]]:
    """AnthropicBackend as the CLI builds it, pointed at the stand-in; closed afterwards."""
    made: list[AnthropicBackend] = []

    def make(name: str = MODEL, **options: Any) -> AnthropicBackend:
        settings = ModelSettings(backend="anthropic", name=name, options=options)
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
        backend = AnthropicBackend(settings, BackendContext(base_dir=Path("."), env=env))
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def request(message: str, **overrides: Any) -> Request:
    fields: dict[str, Any] = {
        "system": SYSTEM,
        "messages": (Message(role="user", content=f"<message>{message}</message>"),),
        "model": MODEL,
        "max_tokens": 64,
    }
    return Request(**(fields | overrides))


# ---------------------------------------------------------------- the backend


def test_happy_path_text_tokens_and_stop_reason(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    backend = make_backend(cache_system=False)
    reply = backend.complete(request("Can I book a service for Tuesday?"))
    assert reply.error is None and reply.error_kind is None
    assert json.loads(reply.text) == {"category": "booking"}
    sent = SYSTEM + "<message>Can I book a service for Tuesday?</message>"
    assert reply.input_tokens == rough_tokens(sent)
    assert reply.output_tokens == rough_tokens(reply.text)
    assert (reply.cache_write_tokens, reply.cache_read_tokens) == (0, 0)
    assert reply.stop_reason == "end_turn"
    assert reply.attempts == 1 and reply.latency_s > 0
    cut = backend.complete(request("How much is a new chain?", max_tokens=3))
    assert cut.stop_reason == "max_tokens" and cut.output_tokens == 3
    # the key went out as the SDK sends it, and nothing else carried it
    (first, _) = srv.requests
    assert first.headers.get("authorization") == f"Bearer {KEY}" or first.headers["x-api-key"]
    assert KEY not in json.dumps(first.body)


def test_streaming_gives_the_same_reply(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    plain = make_backend(cache_system=False)
    streaming = make_backend(cache_system=False, stream=True)
    for message in ("My wheel is ready to collect?", "Do you sell inner tubes?", "Hi"):
        a = plain.complete(request(message))
        b = streaming.complete(request(message))
        assert a.error is None and b.error is None
        same = ("text", "input_tokens", "output_tokens", "stop_reason", "attempts")
        assert {f: getattr(a, f) for f in same} == {f: getattr(b, f) for f in same}
    cut = streaming.complete(request("How much is a new chain?", max_tokens=3))
    assert cut.stop_reason == "max_tokens" and cut.output_tokens == 3
    assert [ex.stream for ex in srv.requests] == [False, True] * 3 + [True]


def test_missing_key_names_the_variable_and_the_fake() -> None:
    settings = ModelSettings(backend="anthropic", name=MODEL)
    with pytest.raises(BackendError) as caught:
        AnthropicBackend(settings, BackendContext(base_dir=Path("."), env={}))
    message = str(caught.value)
    assert "ANTHROPIC_API_KEY" in message and "backend: fake" in message


def test_bad_options_are_a_one_line_error() -> None:
    settings = ModelSettings(backend="anthropic", name=MODEL, options={"effort": "huge"})
    with pytest.raises(BackendError, match=r"model\.options\.effort"):
        AnthropicBackend(
            settings, BackendContext(base_dir=Path("."), env={"ANTHROPIC_API_KEY": KEY})
        )


SCHEMA = {
    "type": "object",
    "properties": {"category": {"type": "string"}},
    "required": ["category"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("options", "temperature", "expected", "absent"),
    [
        (
            {"response_schema": SCHEMA},
            None,
            {"output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}},
            ["thinking", "temperature"],
        ),
        (
            {"effort": "low", "response_schema": SCHEMA},
            0.0,
            {
                "output_config": {
                    "effort": "low",
                    "format": {"type": "json_schema", "schema": SCHEMA},
                },
                "temperature": 0.0,
            },
            ["thinking"],
        ),
        (
            {"thinking_budget": 2048},
            0.0,  # extended thinking requires the default temperature: not sent
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            ["temperature", "output_config"],
        ),
        (
            {"adaptive_thinking": True, "effort": "high"},
            0.5,
            {"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}},
            ["temperature"],
        ),
    ],
)
def test_options_reach_the_request_body(
    srv: MessagesServer,
    make_backend: Callable[..., AnthropicBackend],
    options: dict[str, Any],
    temperature: float | None,
    expected: dict[str, Any],
    absent: list[str],
) -> None:
    backend = make_backend(**options)
    reply = backend.complete(request("Is my bike ready?", temperature=temperature))
    assert reply.error is None
    (exchange,) = srv.requests
    body = exchange.body
    assert {k: body.get(k) for k in expected} == expected
    assert [k for k in absent if k in body] == []
    # the system prompt is marked for prompt caching by default
    assert body["system"] == [
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]


def test_cache_system_off_sends_a_plain_system_string(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    make_backend(cache_system=False).complete(request("hello"))
    assert srv.requests[0].body["system"] == SYSTEM


# ---------------------------------------------------------------- runs, reports, the key


def run_on_standin(
    tmp_path: Path,
    srv: MessagesServer,
    make_backend: Callable[..., AnthropicBackend],
    *,
    cases: int,
    **options: Any,
) -> tuple[Run, LoadedConfig]:
    loaded = write_suite(
        tmp_path / "suite",
        cases=cases,
        model={"backend": "anthropic", "name": MODEL, "max_tokens": 64, "options": options},
    )
    spec = spec_of(loaded)
    backend = make_backend(**spec.suite.model.options)
    return run_suite(spec, backend, loaded.root), loaded


def test_prompt_caching_writes_once_and_reads_the_rest(
    tmp_path: Path, srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    n = 12
    run, loaded = run_on_standin(tmp_path, srv, make_backend, cases=n, stream=True)
    prompt = load_prompt(loaded, loaded.suite(None)[1], "v3").text
    prefix = rough_tokens(prompt)
    outcomes = [o for c in run.cases for o in c.outcomes]
    assert len(outcomes) == n and run.errors == 0
    # the first case is sent alone, so it writes the cache and every later case reads it
    assert [o.cache_write_tokens for o in outcomes] == [prefix] + [0] * (n - 1)
    assert [o.cache_read_tokens for o in outcomes] == [0] + [prefix] * (n - 1)
    assert (srv.stats().cache_writes, srv.stats().cache_reads) == (1, n - 1)

    summary = summarise(run)
    usage = summary.costs.usage
    assert (usage.cache_write_tokens, usage.cache_read_tokens) == (prefix, (n - 1) * prefix)
    uncached_in = sum(
        rough_tokens(prompt + f"<message>\n{c.input['message']}\n</message>")
        for c in run.cases
        if c.input
    )
    assert usage.input_tokens + usage.cache_write_tokens + usage.cache_read_tokens == uncached_in
    # claude-haiku-4-5: $1 in, $5 out, $1.25 cache write, $0.10 cache read per million tokens
    expected = (
        usage.input_tokens * 1.0
        + usage.output_tokens * 5.0
        + prefix * 1.25
        + (n - 1) * prefix * 0.10
    ) / 1e6
    without = (uncached_in * 1.0 + usage.output_tokens * 5.0) / 1e6
    assert summary.costs.cost == pytest.approx(expected)
    assert summary.costs.uncached_cost == pytest.approx(without)
    assert without > 2 * expected
    text = render_model("run", summary, "text")
    assert f"Cost          ${expected:.4f}; without prompt caching ${without:.4f}" in text
    assert "cache write" in text and f"cache read {(n - 1) * prefix:,}" in text


def assert_no_key(text: str) -> None:
    assert KEY not in text
    assert KEY[-20:] not in text  # not even a tail of it


def test_the_key_never_reaches_a_run_file_or_a_report(
    tmp_path: Path, srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    srv.knobs.api_key = KEY  # the stand-in checks the key, so the backend really sent it
    # some calls fail, so their error messages are in the run too
    srv.script(["ok", "auth", "drop", "server_error", "malformed"])
    run, loaded = run_on_standin(
        tmp_path, srv, make_backend, cases=10, retry={**FAST_RETRY, "max_attempts": 1}
    )
    assert run.errors == 4
    assert {c.outcomes[0].error_kind for c in run.cases if c.error} == {
        "auth",
        "connection",
        "server",
        "malformed",
    }
    path = save_run(run, loaded.state_dir)
    assert_no_key(path.read_text(encoding="utf-8"))
    summary = summarise(run)
    for fmt in ("text", "markdown", "json"):
        assert_no_key(render_model("run", summary, fmt))
    assert_no_key(repr(make_backend()) + repr(make_backend().options))


def test_the_cli_run_keeps_the_key_out_of_everything_it_writes(
    tmp_path: Path,
    srv: MessagesServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    srv.knobs.api_key = KEY
    loaded = write_suite(
        tmp_path / "suite",
        cases=6,
        model={"backend": "anthropic", "name": MODEL, "max_tokens": 64},
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
    code = cli.main(["run", "v3", "--cache", "--config", str(loaded.path), "--format", "markdown"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert_no_key(out + err)
    assert "saved shop-v3-" in err and "cache: 0 hits, 6 misses" in err
    files = list(loaded.state_dir.rglob("*"))
    assert any(p.suffix == ".json" and "runs" in p.parts for p in files)
    for path in files:
        if path.is_file():
            assert_no_key(path.read_text(encoding="utf-8"))
    assert len(srv.requests) == 6


# ---------------------------------------------------------------- cost


def test_a_priced_model_costs_its_tokens() -> None:
    million = Usage(input_tokens=1_000_000)
    assert cost(million, "claude-haiku-4-5") == pytest.approx(1.00)
    assert cost(Usage(output_tokens=1_000_000), "claude-haiku-4-5") == pytest.approx(5.00)
    # 2,000 in + 500 out + 10,000 cache write + 90,000 cache read on claude-sonnet-4-5
    usage = Usage(
        input_tokens=2_000,
        output_tokens=500,
        cache_write_tokens=10_000,
        cache_read_tokens=90_000,
    )
    by_hand = (2_000 * 3.0 + 500 * 15.0 + 10_000 * 3.75 + 90_000 * 0.30) / 1e6
    assert cost(usage, "claude-sonnet-4-5") == pytest.approx(by_hand)
    assert uncached_cost(usage, "claude-sonnet-4-5") == pytest.approx(
        (102_000 * 3.0 + 500 * 15.0) / 1e6
    )


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
    ],
)
def test_dated_model_ids_match_their_family(model: str, family: str) -> None:
    assert price_for(model) is not None
    assert price_for(model) == price_for(family)


@pytest.mark.parametrize(
    "model",
    # a newer model of a priced family is another model: unknown, not the family's old price
    ["my-private-model", "claude-opus-4-6", "gpt-4.1-nano", "claude-haiku-4-5-beta"],
)
def test_an_unpriced_model_costs_unknown(model: str) -> None:
    assert price_for(model) is None
    assert cost(Usage(input_tokens=1_000_000), model) is None


def costly_case(make_case: Callable[..., CaseResult]) -> CaseResult:
    return make_case(outcome={"input_tokens": 1_000_000, "output_tokens": 200_000})


def test_the_report_prices_a_dated_model(
    make_run: Callable[..., Run], make_case: Callable[..., CaseResult]
) -> None:
    run = make_run(
        [costly_case(make_case)],
        model={"backend": "anthropic", "name": "claude-haiku-4-5-20251001", "offline": False},
    )
    summary = summarise(run)
    assert summary.costs.cost == pytest.approx(1.0 + 1.0)  # 1M in at $1 + 200k out at $5
    assert "Cost          $2.00" in render_model("run", summary, "text")


def test_the_report_says_unknown_for_an_unpriced_model(
    make_run: Callable[..., Run], make_case: Callable[..., CaseResult]
) -> None:
    run = make_run(
        [costly_case(make_case)],
        model={"backend": "anthropic", "name": "claude-opus-4-6", "offline": False},
    )
    summary = summarise(run)
    assert summary.costs.cost is None and summary.costs.uncached_cost is None
    text = render_model("run", summary, "text")
    assert "Cost          unknown (model claude-opus-4-6 is not in the price table)" in text
    assert "$0" not in text
    assert "unknown" in render_model("run", summary, "markdown")
