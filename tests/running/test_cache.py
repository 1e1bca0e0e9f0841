"""The response cache: keys, hits and misses, errors, repeats; and a cached run end to end."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import shop_suite

from evalgate.analysis.summary import summarise
from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext, Message, Reply, Request
from evalgate.config.load import LoadedConfig, load_config
from evalgate.report.render import render_model
from evalgate.running.cache import ResponseCache
from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite
from tests.support.messages_server import MessagesServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bike-shop"
MODEL = "claude-haiku-4-5"

BASE = Request(
    system="Sort the message. Reply in JSON.",
    messages=(Message(role="user", content="<message>Is my bike ready?</message>"),),
    model=MODEL,
    max_tokens=64,
    temperature=0.0,
    options={"effort": "low"},
    case={"id": "c1", "input": {"message": "Is my bike ready?"}},
)
ANSWER = Reply(
    text='{"category": "status"}', input_tokens=20, output_tokens=6, stop_reason="end_turn"
)

# ---------------------------------------------------------------- the cache itself


def test_a_miss_then_a_hit(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    assert cache.get(BASE, "anthropic") is None
    cache.put(BASE, "anthropic", ANSWER)
    assert cache.get(BASE, "anthropic") == ANSWER
    assert (cache.hits, cache.misses) == (1, 1)
    # a new cache over the same folder (the next CI job) finds it too
    again = ResponseCache(tmp_path / "cache")
    assert again.get(BASE, "anthropic") == ANSWER and (again.hits, again.misses) == (1, 0)


@pytest.mark.parametrize(
    "change",
    [
        {"model": "claude-sonnet-4-5"},
        {"max_tokens": 65},
        {"temperature": 0.5},
        {"temperature": None},
        {"system": "Sort the message. Reply in JSON. "},
        {"messages": (Message(role="user", content="<message>Is my bike ready</message>"),)},
        {"options": {"effort": "high"}},
        {"options": {}},
    ],
    ids=lambda change: next(iter(change)),
)
def test_any_setting_changes_the_key(tmp_path: Path, change: dict[str, Any]) -> None:
    changed = BASE.model_copy(update=change)
    assert ResponseCache.key(changed, "anthropic") != ResponseCache.key(BASE, "anthropic")
    cache = ResponseCache(tmp_path)
    cache.put(BASE, "anthropic", ANSWER)
    assert cache.get(changed, "anthropic") is None


@pytest.mark.parametrize(
    "transport",
    [{"stream": True}, {"timeout_s": 5}, {"retry": {"max_attempts": 2}}, {"batch": True}],
    ids=lambda option: next(iter(option)),
)
def test_how_a_reply_is_fetched_is_not_part_of_the_key(
    tmp_path: Path, transport: dict[str, Any]
) -> None:
    fetched_otherwise = BASE.model_copy(update={"options": {**BASE.options, **transport}})
    cache = ResponseCache(tmp_path)
    cache.put(BASE, "anthropic", ANSWER)
    assert cache.get(fetched_otherwise, "anthropic") == ANSWER


def test_the_backend_is_part_of_the_key(tmp_path: Path) -> None:
    assert ResponseCache.key(BASE, "fake") != ResponseCache.key(BASE, "anthropic")
    cache = ResponseCache(tmp_path)
    cache.put(BASE, "fake", ANSWER)
    assert cache.get(BASE, "anthropic") is None


def test_the_key_is_stable() -> None:
    same = Request.model_validate_json(BASE.model_dump_json())
    assert ResponseCache.key(same, "anthropic") == ResponseCache.key(BASE, "anthropic")
    assert len(ResponseCache.key(BASE, "anthropic")) == 64


def test_errors_are_never_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    failed = Reply(error="529 overloaded_error: Overloaded", error_kind="overloaded", attempts=6)
    cache.put(BASE, "anthropic", failed)
    assert cache.get(BASE, "anthropic") is None
    assert list(tmp_path.rglob("*.json")) == []


def test_an_unreadable_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.put(BASE, "anthropic", ANSWER)
    (entry,) = tmp_path.rglob("*.json")
    entry.write_text('{"text": "trunc', encoding="utf-8")
    assert cache.get(BASE, "anthropic") is None and cache.misses == 1


# ---------------------------------------------------------------- cached runs on the stand-in


def write_suite(root: Path, *, cases: int) -> LoadedConfig:
    options = {"retry": {"base_s": 0.01, "cap_s": 0.05, "max_attempts": 1}}
    model = {"backend": "anthropic", "name": MODEL, "max_tokens": 64, "options": options}
    return shop_suite(root, cases=cases, model=model, renumber=False)


@pytest.fixture
def suite(tmp_path: Path, srv: MessagesServer) -> Iterator[Callable[..., Any]]:
    """run(version, repeats=1, cache=...) on one suite of 10 cases, through the stand-in."""
    loaded = write_suite(tmp_path / "suite", cases=10)
    name, config = loaded.suite(None)
    env = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": srv.url}
    backend = AnthropicBackend(config.model, BackendContext(base_dir=loaded.root, env=env))

    def run(version: str = "v3", repeats: int = 1, cache: ResponseCache | None = None) -> Any:
        spec = RunSpec(
            suite_name=name,
            suite=config,
            prompt=load_prompt(loaded, config, version),
            cases=load_suite_cases(loaded, config),
            repeats=repeats,
        )
        return run_suite(spec, backend, loaded.root, cache=cache)

    yield run
    backend.close()


def test_a_second_run_makes_no_requests(
    tmp_path: Path, srv: MessagesServer, suite: Callable[..., Any]
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    first = suite(cache=cache)
    assert len(srv.requests) == 10 and (cache.hits, cache.misses) == (0, 10)
    srv.reset()
    second = suite(cache=cache)
    assert srv.requests == []
    assert (cache.hits, cache.misses) == (10, 10)
    assert [c.answer for c in second.cases] == [c.answer for c in first.cases]
    assert all(o.cached for c in second.cases for o in c.outcomes)
    assert not any(o.cached for c in first.cases for o in c.outcomes)
    # the replies' tokens are kept (cost is what the cached calls cost once); latency is not
    assert summarise(second).costs.usage == summarise(first).costs.usage
    summary = summarise(second)
    assert summary.cache_hits == 10 and summary.latency.calls == 0
    assert "10 from cache" in render_model("run", summary, "text")


def test_another_prompt_misses(
    tmp_path: Path, srv: MessagesServer, suite: Callable[..., Any]
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    suite("v3", cache=cache)
    suite("v2", cache=cache)
    assert (cache.hits, cache.misses) == (0, 20) and len(srv.requests) == 20


def test_a_failed_call_is_not_cached_and_is_tried_again(
    tmp_path: Path, srv: MessagesServer, suite: Callable[..., Any]
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    srv.script(["ok", "overloaded"])  # the second request fails (one attempt only)
    first = suite(cache=cache)
    assert first.errors == 1
    srv.reset()
    second = suite(cache=cache)
    assert second.errors == 0
    assert len(srv.requests) == 1  # only the case that failed was sent again
    assert (cache.hits, cache.misses) == (9, 11)
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 10


def test_repeats_bypass_the_cache(
    tmp_path: Path, srv: MessagesServer, suite: Callable[..., Any]
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    suite(cache=cache)  # warm it
    srv.reset()
    run = suite(repeats=3, cache=cache)
    assert len(srv.requests) == 30  # a cached reply measures no noise
    assert (cache.hits, cache.misses) == (0, 10)  # untouched by the repeats
    assert not any(o.cached for c in run.cases for o in c.outcomes)
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 10


def test_hits_and_misses_add_up_over_runs(
    tmp_path: Path, srv: MessagesServer, suite: Callable[..., Any]
) -> None:
    cache = ResponseCache(tmp_path / "cache")
    suite(cache=cache)
    suite(cache=cache)
    suite(cache=cache)
    assert (cache.hits, cache.misses) == (20, 10) and len(srv.requests) == 10
    assert list((tmp_path / "cache").rglob("*.tmp")) == []


def test_holdout_replies_never_reach_the_cache(cli: Callable[..., Any], bike_shop: Path) -> None:
    """The cache is a plain folder (kept by actions/cache, readable by later jobs): a holdout
    reply written there would sit in the clear. A run over every split caches dev only."""
    loaded = load_config(bike_shop / "evalgate.yml")
    _, config = loaded.suite(None)
    cases = load_suite_cases(loaded, config).cases
    dev = [c for c in cases if c.split == "dev"]
    holdout = [c for c in cases if c.split == "holdout"]
    assert dev and holdout
    argv = ["run", "v2", "--config", str(bike_shop / "evalgate.yml"), "--cache", "--no-save"]
    code, _, err = cli(*argv, "--split", "dev", "--split", "holdout")
    assert code == 0, err
    entries = list((bike_shop / ".evalgate" / "cache").rglob("*.json"))
    assert len(entries) == len(dev)
    cached = "".join(p.read_text() for p in entries)
    assert not [c.id for c in holdout if json.dumps(c.input["message"])[1:-1] in cached]
    # A second run asks the model for the holdout again (it was never cached): no hit on it.
    code, _, err = cli(*argv, "--split", "holdout")
    assert code == 0 and "cache: 0 hits" in err
