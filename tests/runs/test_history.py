"""Baselines that learn: records, the A/A drift check, pooling; then the action end to end
(two baseline jobs, a pull request that pools them; a model that changed under its name)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from test_action import (
    FOLDER,
    HARMLESS,
    REPO,
    api,
    api_env,
    comments,
    gh,
    make_workspace,
    open_pull,
    pr_event,
    push_event,
    run_action,
    upload,
)

from evalgate.runs.history import appended, drift, pool, read_history, record_of
from evalgate.runs.schema import CaseResult, Run
from tests.support.github_server import GitHubServer

__all__ = ["gh"]  # a fixture, imported to be used here

DAY = timedelta(days=1)


def baseline(
    make_case: Callable[..., CaseResult],
    make_run: Callable[..., Run],
    answers: list[list[str]],
    *,
    name: str,
    day: int,
    prompt: str = "v1",
) -> Run:
    """A baseline of len(answers) cases, each answered as listed (one entry a repeat); the
    expected answer is "booking"."""
    cases = [make_case(f"c{i}", "booking", a) for i, a in enumerate(answers)]
    when = datetime(2025, 6, day, tzinfo=UTC)
    return make_run(cases, prompt={"name": prompt}, name=name, created_at=when, repeats=2)


RIGHT, WRONG = ["booking", "booking"], ["quote", "quote"]


def test_drift_is_a_two_sided_sign_test_on_the_cases_that_moved(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    before = record_of(baseline(make_case, make_run, [RIGHT] * 10, name="b1", day=1))
    after = record_of(baseline(make_case, make_run, [WRONG] * 6 + [RIGHT] * 4, name="b2", day=8))
    # 6 worse, 0 better: one-sided P(X >= 6 | Bin(6, 1/2)) = 1/64; two-sided 2/64 = 0.03125.
    assert drift(before, after) == (pytest.approx(1 / 32), 6, 0)
    # 3 worse, 2 better: P(X >= 3 | Bin(5, 1/2)) = 16/32 = 0.5, doubled and capped at 1.
    mixed = [WRONG] * 3 + [RIGHT] * 7
    back = [RIGHT] * 3 + [WRONG] * 2 + [RIGHT] * 5
    p, worse, better = drift(
        record_of(baseline(make_case, make_run, back, name="x", day=1)),
        record_of(baseline(make_case, make_run, mixed, name="y", day=2)),
    )
    assert (worse, better) == (3, 2) and p == pytest.approx(1.0)


def test_a_significant_drift_starts_a_new_epoch(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    history: list[Any] = []
    runs = [
        baseline(make_case, make_run, [RIGHT] * 10, name="b1", day=1),
        baseline(make_case, make_run, [RIGHT] * 10, name="b2", day=8),
        baseline(make_case, make_run, [WRONG] * 6 + [RIGHT] * 4, name="b3", day=15),
    ]
    epochs = []
    for run in runs:
        history, new = appended(history, record_of(run), alpha=0.05)
        epochs.append((new.epoch, new.drift_p))
    assert epochs == [(0, None), (0, 1.0), (1, pytest.approx(1 / 32))]
    # Read back as the data branch holds it, one JSON line a record.
    text = "".join(r.model_dump_json() + "\n" for r in history)
    assert [r.run for r in read_history(text, "baselines.jsonl")] == ["b1", "b2", "b3"]


def test_pooling_adds_the_repeats_of_earlier_baselines_of_one_setup(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    b1 = baseline(make_case, make_run, [RIGHT, WRONG, RIGHT], name="b1", day=1)
    b2 = baseline(make_case, make_run, [RIGHT, RIGHT, RIGHT], name="b2", day=8)
    other = baseline(make_case, make_run, [WRONG] * 3, name="o", day=9, prompt="v9")
    # The same prompt with other tools answering an agent's calls is another setup too.
    tooled = baseline(make_case, make_run, [WRONG] * 3, name="t", day=5)
    tooled = tooled.model_copy(update={"tools_sha256": "f" * 64})
    history: list[Any] = []
    for run in (b1, other, tooled, b2):
        history, _ = appended(history, record_of(run), alpha=0.05)
    now = datetime(2025, 6, 10, tzinfo=UTC)
    pooled_run, pooled = pool(b2, history, now=now, max_age_days=30, alpha=0.05)
    # b2 and b1; not the other prompt's, nor the other tools'
    assert (pooled.runs, pooled.repeats) == (2, 4)
    assert [len(c.outcomes) for c in pooled_run.cases] == [4, 4, 4]
    assert [o.score for o in pooled_run.cases[1].outcomes] == [1.0, 1.0, 0.0, 0.0]
    # Past the age limit, b1 is not pooled.
    _, young = pool(b2, history, now=now + 30 * DAY, max_age_days=30, alpha=0.05)
    assert young.runs == 1


def test_pooling_skips_edited_cases_and_stops_at_a_drift(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    b1 = baseline(make_case, make_run, [RIGHT] * 10, name="b1", day=1)
    b2 = baseline(make_case, make_run, [WRONG] * 6 + [RIGHT] * 4, name="b2", day=8)
    history: list[Any] = []
    for run in (b1, b2):
        history, _ = appended(history, record_of(run), alpha=0.05)
    now = datetime(2025, 6, 9, tzinfo=UTC)
    pooled_run, pooled = pool(b2, history, now=now, max_age_days=30, alpha=0.05)
    assert pooled.runs == 1 and pooled.drift_p == pytest.approx(1 / 32)
    assert (pooled.drift_worse, pooled.drift_better) == (6, 0)
    # An edited case (another content hash) never takes an earlier baseline's outcomes.
    more, _ = appended([], record_of(b1), alpha=0.05)
    b3 = b1.model_copy(
        deep=True, update={"name": "b3", "created_at": datetime(2025, 6, 2, tzinfo=UTC)}
    )
    b3.cases[0] = b3.cases[0].model_copy(update={"hash": "edited"})
    pooled_run, _ = pool(b3, more, now=now, max_age_days=30, alpha=0.05)
    assert len(pooled_run.cases[0].outcomes) == 2 and len(pooled_run.cases[1].outcomes) == 4


# --- the action --------------------------------------------------------------------------------


def _baseline_job(tmp_path: Path, gh: GitHubServer, rules: str | None = None) -> dict[str, Any]:
    workspace = make_workspace(tmp_path)
    if rules is not None:
        (workspace / FOLDER / "fake-rules.yml").write_text(rules, encoding="utf-8")
    job = run_action(
        workspace, "push", push_event(), ref="refs/heads/main", inputs=api(gh), env=api_env(gh)
    )
    assert job.code == 0, job.out + job.err
    return {"job": job, "text": Path(job.outputs["run_file"]).read_text(encoding="utf-8")}


def _history(gh: GitHubServer) -> list[dict[str, Any]]:
    text = gh.file(REPO, "evalgate/bike-shop/baselines.jsonl", ref="evalgate-data")
    assert text is not None
    return [json.loads(line) for line in text.decode().splitlines()]


def test_a_pull_request_pools_two_baseline_jobs(tmp_path: Path, gh: GitHubServer) -> None:
    _baseline_job(tmp_path / "one", gh)
    second = _baseline_job(tmp_path / "two", gh)
    history = _history(gh)
    assert [r["epoch"] for r in history] == [0, 0] and history[1]["drift_p"] == 1.0
    assert "no sign the model changed" in second["job"].summary
    # Dev cases only: no holdout case (by id) in the history.
    assert all(not k.startswith("h-") for r in history for k in r["cases"])
    upload(gh, second["text"])
    open_pull(gh, {f"{FOLDER}/prompts/v3.txt": HARMLESS})
    job = run_action(
        make_workspace(tmp_path / "pr", HARMLESS),
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        inputs=api(gh),
        env=api_env(gh),
    )
    assert job.code == 0, job.out + job.err
    [body] = comments(gh)
    assert "pools 2 baseline runs of this prompt, cases and model (4 repeats a case)" in body


def test_a_model_that_changed_under_its_name_is_noticed(tmp_path: Path, gh: GitHubServer) -> None:
    _baseline_job(tmp_path / "one", gh)
    # The "provider" now answers "status" wherever it answered "complaint": same prompt, same
    # cases, same model name and settings.
    from conftest import EXAMPLE

    rules = (EXAMPLE / "fake-rules.yml").read_text().replace("label: complaint", "label: status", 1)
    second = _baseline_job(tmp_path / "two", gh, rules)
    history = _history(gh)
    assert history[1]["epoch"] == 1 and history[1]["drift_p"] < 0.05
    assert history[1]["drift_worse"] > 10 and history[1]["drift_better"] == 0
    assert any("answered differently" in a for a in second["job"].annotations("warning"))
    upload(gh, second["text"])
    open_pull(gh, {f"{FOLDER}/prompts/v3.txt": HARMLESS})
    workspace = make_workspace(tmp_path / "pr", HARMLESS)
    (workspace / FOLDER / "fake-rules.yml").write_text(rules, encoding="utf-8")
    job = run_action(
        workspace,
        "pull_request",
        pr_event(),
        ref="refs/pull/7/merge",
        inputs=api(gh),
        env=api_env(gh),
    )
    [body] = comments(gh)
    assert "the model answered differently at this baseline" in body
    assert "pools" not in body  # not across the change
    assert job.code in (0, 1)
