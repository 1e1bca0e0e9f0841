"""The hard budget: a run stops before the call that would pass it, keeps what it paid for,
exits 3, and is a run file a later `run --resume` completes and a gate reads as incomplete.
Through the CLI, the anthropic SDK and the Messages stand-in."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CliResult, shop_suite

from evalgate.analysis.summary import summarise
from evalgate.config.load import LoadedConfig
from evalgate.runs.schema import Run, iter_runs, read_run
from tests.support.messages_server import STAND_IN_MODEL, MessagesServer


def suite_with(root: Path, budget: Any, *, cases: int = 20, **suite: Any) -> LoadedConfig:
    loaded = shop_suite(root, cases=cases, model=STAND_IN_MODEL, concurrency=4)
    config = yaml.safe_load(loaded.path.read_text())
    config["suites"]["shop"].update({"budget": budget} if budget is not None else {}, **suite)
    loaded.path.write_text(yaml.safe_dump(config))
    return loaded


def set_budget(loaded: LoadedConfig, budget: dict[str, Any]) -> None:
    config = yaml.safe_load(loaded.path.read_text())
    config["suites"]["shop"]["budget"] = budget
    loaded.path.write_text(yaml.safe_dump(config))


def env(srv: MessagesServer) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": srv.url}


def sent(srv: MessagesServer) -> int:
    return srv.stats().by_path.get("/v1/messages", 0)


def saved(loaded: LoadedConfig) -> list[Run]:
    return sorted((r for _, r in iter_runs(loaded.state_dir)), key=lambda r: r.created_at)


@pytest.mark.parametrize(
    ("budget", "key", "says"),
    [
        ({"max_calls": 0}, "budget.max_calls", "greater than 0"),
        ({"max_calls": -3}, "budget.max_calls", "greater than 0"),
        ({"max_usd": 0}, "budget.max_usd", "greater than 0"),
        ({"max_usd": -0.5}, "budget.max_usd", "greater than 0"),
        ({"max_usd": "ten dollars"}, "budget.max_usd", "should be a number"),
        ({"max_usd": True}, "budget.max_usd", "should be a number"),
        ({"max_calls": 2.5}, "budget.max_calls", "whole number"),
        ({"max_dollars": 3}, "budget.max_dollars", "unknown key"),
    ],
)
def test_a_bad_budget_is_one_line_naming_the_key(
    tmp_path: Path, cli: Callable[..., CliResult], budget: Any, key: str, says: str
) -> None:
    loaded = suite_with(tmp_path / "s", budget)
    code, _, err = cli("run", "v2", "--config", str(loaded.path))
    assert code == 2, err
    [line] = err.strip().splitlines()
    assert key in line and says in line


def test_max_usd_on_a_model_without_a_price_is_refused_before_any_call(
    tmp_path: Path, cli: Callable[..., CliResult], srv: MessagesServer
) -> None:
    loaded = suite_with(
        tmp_path / "s", {"max_usd": 1}, model=STAND_IN_MODEL | {"name": "claude-opus-9"}
    )
    code, _, err = cli("run", "v2", "--config", str(loaded.path), env=env(srv))
    assert code == 2 and "not in the price table" in err and len(err.strip().splitlines()) == 1
    assert sent(srv) == 0


def test_the_budget_stops_the_run_at_its_limit_and_a_resume_completes_it(
    tmp_path: Path, cli: Callable[..., CliResult], srv: MessagesServer
) -> None:
    loaded = suite_with(tmp_path / "s", {"max_calls": 12})
    config = str(loaded.path)
    code, _, err = cli("run", "v2", "--repeats", "2", "--config", config, env=env(srv))
    assert code == 3, err
    assert "budget.max_calls 12 reached" in err
    assert sent(srv) == 12  # never one more than the budget
    # The progress line counts the calls held back as not sent, not as errors.
    assert "12/40 calls · 0 errors · 28 not sent · " in err, err
    [stopped] = saved(loaded)
    outcomes = [o for c in stopped.cases for o in c.outcomes]
    assert len(outcomes) == 40
    paid = [o for o in outcomes if o.error_kind != "budget"]
    assert len(paid) == 12 and all(o.error is None for o in paid)
    assert stopped.budget_stop is not None and "12 calls made, $" in stopped.budget_stop
    assert stopped.incomplete

    # A gate reads it as incomplete: inconclusive, with the reason and the cost so far.
    srv.reset()
    code, out, err = cli("run", "v1", "--repeats", "2", "--config", config, env=env(srv))
    assert code == 3  # the same budget stops the baseline too
    set_budget(loaded, {"max_calls": 100})
    code, _, err = cli("run", "v1", "--repeats", "2", "--config", config, env=env(srv))
    assert code == 0, err
    baseline = saved(loaded)[-1]
    code, out, err = cli(
        "gate",
        "--baseline",
        baseline.name,
        "--candidate",
        stopped.name,
        "--json",
        "--config",
        config,
    )
    verdict = json.loads(out)
    assert verdict["kind"] == "inconclusive"
    assert any("budget stopped the run" in r and "$" in r for r in verdict["reasons"])

    # A later run resumes it: only the 28 unsent calls go out, the paid ones are kept.
    srv.reset()
    code, _, err = cli("run", "v2", "--resume", stopped.name, "--config", config, env=env(srv))
    assert code == 0, err
    assert sent(srv) == 28
    resumed = read_run(loaded.state_dir / "runs" / f"{stopped.name}.json")
    assert resumed.budget_stop is None and not resumed.incomplete
    assert all(len(c.outcomes) == 2 for c in resumed.cases)
    before = {(c.id, r): o for c in stopped.cases for r, o in enumerate(c.outcomes)}
    after = {(c.id, r): o for c in resumed.cases for r, o in enumerate(c.outcomes)}
    assert all(after[k] == o for k, o in before.items() if o.error_kind != "budget")
    assert all(o.error is None for o in after.values())


def test_a_retry_counts_against_the_budget(
    tmp_path: Path, cli: Callable[..., CliResult], srv: MessagesServer
) -> None:
    loaded = suite_with(tmp_path / "s", {"max_calls": 6}, concurrency=1)
    srv.script(["overloaded"])  # the first call is answered 529, then retried
    code, _, err = cli("run", "v2", "--config", str(loaded.path), env=env(srv))
    assert code == 3, err
    assert sent(srv) == 6  # 1 retried call (2 attempts) + 4 more
    [run] = saved(loaded)
    assert sum(1 for c in run.cases for o in c.outcomes if o.error_kind != "budget") == 5


def test_cached_replies_do_not_count(
    tmp_path: Path, cli: Callable[..., CliResult], srv: MessagesServer
) -> None:
    loaded = suite_with(tmp_path / "s", None, cases=8)
    config = str(loaded.path)
    assert cli("run", "v2", "--cache", "--config", config, env=env(srv))[0] == 0
    set_budget(loaded, {"max_calls": 2})
    srv.reset()
    code, _, err = cli("run", "v2", "--cache", "--config", config, env=env(srv))
    assert code == 0, err
    assert sent(srv) == 0 and "cache: 8 hits" in err


def test_max_usd_stops_before_the_call_that_would_pass_it(
    tmp_path: Path, cli: Callable[..., CliResult], srv: MessagesServer
) -> None:
    # A call here costs $0.0001 to $0.0008 (some 700 input tokens, read from the prompt
    # cache after the first call, and 10 output tokens at Haiku 4.5's $1 / $5 a million), and
    # is reserved at its most (64 output tokens): $0.002 pays for some calls, not 20.
    loaded = suite_with(tmp_path / "s", {"max_usd": 0.002})
    code, _, err = cli("run", "v2", "--config", str(loaded.path), env=env(srv))
    assert code == 3, err
    assert "budget.max_usd 0.002 would be passed" in err
    [run] = saved(loaded)
    spent = summarise(run).costs.cost
    assert spent is not None and 0 < spent <= 0.002
    assert 0 < sent(srv) < 20
