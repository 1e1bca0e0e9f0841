"""The estimate before a run: calls exact, tokens counted through the SDK's count_tokens on the
Messages stand-in, output tokens from the baseline, the price from the table (unknown stays
unknown), and the CLI's ``run --estimate`` / ``gate --estimate``, which call no model."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult, shop_suite, spec_of

from evalgate.analysis.summary import summarise
from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext
from evalgate.config.load import LoadedConfig
from evalgate.config.models import ModelSettings
from evalgate.running.estimate import APPROXIMATE, COUNTED, estimate_run
from evalgate.running.suite import run_suite
from evalgate.runs.schema import save_run
from tests.support.messages_server import Knobs, MessagesServer

MODEL = "claude-haiku-4-5"
KEY = "sk-test"


@pytest.fixture
def standin(
    tmp_path: Path, srv: MessagesServer
) -> Iterator[Callable[..., tuple[LoadedConfig, AnthropicBackend]]]:
    made: list[AnthropicBackend] = []

    def make(cases: int, model: str = MODEL) -> tuple[LoadedConfig, AnthropicBackend]:
        settings: dict[str, Any] = {
            "backend": "anthropic",
            "name": model,
            "max_tokens": 64,
            "options": {"retry": {"base_s": 0.01, "cap_s": 0.05}},
        }
        loaded = shop_suite(tmp_path / f"s{len(made)}", cases=cases, model=settings)
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
        backend = AnthropicBackend(
            ModelSettings(**settings), BackendContext(base_dir=loaded.root, env=env)
        )
        made.append(backend)
        return loaded, backend

    yield make
    for backend in made:
        backend.close()


def messages_calls(srv: MessagesServer) -> int:
    return srv.stats().by_path.get("/v1/messages", 0)


def test_the_estimate_matches_the_run_it_estimates(
    standin: Callable[..., tuple[LoadedConfig, AnthropicBackend]], srv: MessagesServer
) -> None:
    loaded, backend = standin(40)
    # As the API: Haiku 4.5 caches no prefix under 4,096 tokens (data/prices.json).
    srv.knobs = Knobs(cache_min_tokens=4096)
    baseline = run_suite(spec_of(loaded, "v2", repeats=2), backend, loaded.root)
    srv.reset()
    spec = spec_of(loaded, "v3", repeats=2)
    est = estimate_run(
        spec,
        loaded.root,
        counter=backend.count_tokens,
        baseline=baseline,
        offline=False,
        caches_system=backend.caches_system,
    )
    # Counting is free and no reply was asked for: one count a case and two for the system
    # prompt's share, no message.
    assert messages_calls(srv) == 0
    assert srv.stats().by_path.get("/v1/messages/count_tokens", 0) == 42
    run = run_suite(spec, backend, loaded.root)
    real = summarise(run).costs
    assert est.calls == messages_calls(srv) == 80  # 40 cases x 2 repeats
    assert est.input_method == COUNTED
    # The stand-in counts as it bills: the input tokens are the run's own.
    assert est.input_tokens == real.usage.input_tokens
    assert real.cost is not None and est.usd is not None
    assert abs(est.usd - real.cost) <= 0.25 * real.cost
    assert est.output_method == f"the baseline's measured replies ({baseline.name})"
    # A baseline of part of the suite (`run --limit 10`) measured part of the replies: said.
    limited = baseline.model_copy(update={"cases": baseline.cases[:10], "limited_to": 10})
    part = estimate_run(spec, loaded.root, counter=None, baseline=limited, offline=False)
    assert part.output_method == (
        f"the baseline's measured replies ({baseline.name}: 10 of 40 cases measured, the "
        "rest at the baseline's mean)"
    )


def test_a_cached_system_prompt_is_estimated_as_written_once_and_read_after(
    standin: Callable[..., tuple[LoadedConfig, AnthropicBackend]], srv: MessagesServer
) -> None:
    loaded, backend = standin(30)
    srv.knobs = Knobs(cache_min_tokens=4096)
    # About 6,000 tokens of instructions: over the model's 4,096-token caching minimum.
    long = (loaded.root / "prompts" / "v3.txt").read_text() + "\nBe precise. " * 2000
    (loaded.root / "prompts" / "long.txt").write_text(long)
    baseline = run_suite(spec_of(loaded, "v3"), backend, loaded.root)
    spec = spec_of(loaded, "long")
    est = estimate_run(
        spec,
        loaded.root,
        counter=backend.count_tokens,
        baseline=baseline,
        offline=False,
        caches_system=True,
    )
    assert any("is cached" in n for n in est.notes)
    real = summarise(run_suite(spec, backend, loaded.root)).costs
    assert real.usage.cache_read_tokens > 0  # the stand-in did cache it
    assert real.cost is not None and est.usd is not None
    assert abs(est.usd - real.cost) <= 0.25 * real.cost
    # Priced as uncached it would be far off: the cache is what makes the estimate right.
    assert real.uncached_cost is not None and real.uncached_cost > 2 * real.cost


def test_without_a_baseline_every_call_is_priced_at_max_tokens(
    standin: Callable[..., tuple[LoadedConfig, AnthropicBackend]],
) -> None:
    loaded, backend = standin(6)
    est = estimate_run(
        spec_of(loaded, "v2", repeats=3),
        loaded.root,
        counter=backend.count_tokens,
        baseline=None,
        offline=False,
    )
    assert est.calls == 18
    assert est.output_tokens == 18 * 64
    assert "max_tokens" in est.output_method
    # claude-haiku-4-5 is $1 / $5 a million tokens (data/prices.json).
    assert est.usd == pytest.approx((est.input_tokens * 1.0 + 18 * 64 * 5.0) / 1e6)


def test_a_model_missing_from_the_price_table_has_an_unknown_cost_but_counts(
    standin: Callable[..., tuple[LoadedConfig, AnthropicBackend]],
) -> None:
    loaded, backend = standin(5, model="claude-opus-9")
    est = estimate_run(
        spec_of(loaded, "v2"),
        loaded.root,
        counter=backend.count_tokens,
        baseline=None,
        offline=False,
    )
    assert est.usd is None
    assert est.calls == 5 and est.input_tokens > 0 and est.output_tokens == 5 * 64
    assert any("not in the price table" in n for n in est.notes)


def test_a_failed_count_falls_back_to_the_stated_approximation(
    standin: Callable[..., tuple[LoadedConfig, AnthropicBackend]], srv: MessagesServer
) -> None:
    loaded, backend = standin(4)
    srv.knobs = Knobs(api_key="another key")  # every request answers 401
    est = estimate_run(
        spec_of(loaded, "v2"),
        loaded.root,
        counter=backend.count_tokens,
        baseline=None,
        offline=False,
    )
    assert est.input_method == APPROXIMATE
    assert est.calls == 4 and est.input_tokens > 0
    assert any("counting tokens failed" in n for n in est.notes)
    srv.knobs = Knobs()


def test_run_estimate_on_the_cli_calls_no_model(
    standin: Callable[..., tuple[LoadedConfig, AnthropicBackend]],
    srv: MessagesServer,
    cli: Callable[..., CliResult],
) -> None:
    loaded, backend = standin(12)
    save_run(run_suite(spec_of(loaded, "v2", repeats=2), backend, loaded.root), loaded.state_dir)
    srv.reset()
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    config = str(loaded.path)
    code, out, err = cli(
        "run", "v3", "--estimate", "--repeats", "2", "--json", "--config", config, env=env
    )
    assert code == 0, err
    got = json.loads(out)
    assert got["calls"] == 24 and got["usd"] > 0
    assert {"calls", "input_tokens", "output_tokens", "usd"} <= set(got)
    code, out, err = cli(
        "gate",
        "--baseline",
        "latest",
        "--candidate",
        "v3",
        "--estimate",
        "--config",
        config,
        env=env,
    )
    assert code == 0, err
    assert "Calls          12" in out and "Cost           $" in out
    assert messages_calls(srv) == 0
    assert not list((loaded.state_dir / "runs").glob("shop-v3-*"))


def test_run_estimate_for_a_model_without_a_price_says_so_and_counts(
    standin: Callable[..., tuple[LoadedConfig, AnthropicBackend]],
    srv: MessagesServer,
    cli: Callable[..., CliResult],
) -> None:
    loaded, _ = standin(7, model="claude-opus-9")
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    config = str(loaded.path)
    code, out, err = cli("run", "v2", "--estimate", "--repeats", "3", "--config", config, env=env)
    assert code == 0, err
    assert "Calls          21" in out
    assert "Cost           unknown: the model is not in the price table" in out
    code, out, err = cli("run", "v2", "--estimate", "--json", "--config", config, env=env)
    assert code == 0, err
    got = json.loads(out)
    assert got["calls"] == 7 and got["usd"] is None
    assert got["input_tokens"] > 0 and got["output_tokens"] == 7 * 64  # no baseline: max_tokens
    assert messages_calls(srv) == 0
