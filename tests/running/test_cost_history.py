"""Cost over time: what each job sent, its tokens and its dollars (unknown when the model has no
price, never $0), kept per suite on the data branch by the baseline, pull-request and release
jobs, and `evalgate history --cost`, a month's spend per suite. Runs go through the CLI, the
anthropic SDK and the Messages stand-in; the jobs through the action and the GitHub stand-in."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import CliResult
from hypothesis import given, settings
from hypothesis import strategies as st
from test_action import (
    FOLDER,
    HARMLESS,
    REPO,
    SUITE,
    api,
    api_env,
    gh,
    make_workspace,
    open_pull,
    pr_event,
    pr_job,
    push_event,
    release,
    run_action,
    upload,
)
from test_budget import env, sent, suite_with

from evalgate.config.load import load_config
from evalgate.report.comment import marker
from evalgate.runs.schema import Run, iter_runs
from evalgate.runs.spend import (
    KEEP,
    LEDGER_KEEP,
    SpendPart,
    SpendRecord,
    appended,
    dump,
    fold,
    merged,
    month_spend,
    read_ledger,
    read_spend,
    spend_of,
    with_ledger,
)
from tests.support.github_server import GitHubServer
from tests.support.messages_server import STAND_IN_MODEL, Knobs, MessagesServer

__all__ = ["gh"]  # a fixture, imported to be used here


def runs(root: Path) -> list[Run]:
    state = load_config(root / "evalgate.yml").state_dir
    return sorted((r for _, r in iter_runs(state)), key=lambda r: r.created_at)


def test_a_runs_spend_is_every_attempt_it_sent_at_the_tables_price(
    tmp_path: Path, cli: Callable[..., CliResult], srv: MessagesServer
) -> None:
    loaded = suite_with(tmp_path / "s", None, cases=10, concurrency=1)
    srv.knobs = Knobs(cache_min_tokens=4096)  # no prefix cached: every input token at $1/M
    srv.script(["overloaded"])  # the first call is answered 529 and retried: two attempts
    code, _, err = cli("run", "v2", "--config", str(loaded.path), env=env(srv))
    assert code == 0, err
    [run] = runs(loaded.root)
    record = spend_of(run, "baseline")
    [part] = record.parts
    assert part.calls == sent(srv) == 11  # 10 cases, one of them sent twice
    assert part.model == "claude-haiku-4-5" and part.cache_read_tokens == 0
    outcomes = [o for c in run.cases for o in c.outcomes]
    assert part.input_tokens == sum(o.input_tokens for o in outcomes) > 0
    assert part.output_tokens == sum(o.output_tokens for o in outcomes) > 0
    # claude-haiku-4-5: $1 a million input tokens, $5 a million output (data/prices.json).
    assert part.usd == pytest.approx((part.input_tokens * 1.0 + part.output_tokens * 5.0) / 1e6)

    # The same run again from the cache sends nothing and spends nothing.
    srv.reset()
    assert cli("run", "v2", "--cache", "--config", str(loaded.path), env=env(srv))[0] == 0
    assert cli("run", "v2", "--cache", "--config", str(loaded.path), env=env(srv))[0] == 0
    again = spend_of(runs(loaded.root)[-1], "pr").parts[0]
    assert sent(srv) == 10 and (again.calls, again.input_tokens, again.usd) == (0, 0, 0.0)


def test_calls_the_budget_kept_back_are_not_spent(
    tmp_path: Path, cli: Callable[..., CliResult], srv: MessagesServer
) -> None:
    loaded = suite_with(tmp_path / "s", {"max_calls": 6}, concurrency=1)
    code, _, err = cli("run", "v2", "--config", str(loaded.path), env=env(srv))
    assert code == 3, err
    [run] = runs(loaded.root)
    assert spend_of(run, "pr").parts[0].calls == sent(srv) == 6


def test_a_model_without_a_price_has_an_unknown_cost_counted_apart(
    tmp_path: Path, cli: Callable[..., CliResult], srv: MessagesServer
) -> None:
    loaded = suite_with(
        tmp_path / "s", None, cases=4, model=STAND_IN_MODEL | {"name": "claude-opus-9"}
    )
    assert cli("run", "v2", "--config", str(loaded.path), env=env(srv))[0] == 0
    [part] = spend_of(runs(loaded.root)[0], "pr").parts
    assert part.usd is None and part.calls == 4 and part.tokens > 0
    priced = SpendRecord(
        job="baseline",
        suite="shop",
        run="b",
        created_at=datetime(2026, 11, 3, tzinfo=UTC),
        parts=[SpendPart(model="claude-haiku-4-5", calls=2, input_tokens=10, usd=0.25)],
    )
    unpriced = SpendRecord(
        job="pr",
        suite="shop",
        run="p",
        created_at=datetime(2026, 11, 4, tzinfo=UTC),
        parts=[part],
    )
    month = month_spend([priced, unpriced], "2026-11")
    [row] = month.suites
    assert (row.total.calls, row.total.usd) == (6, 0.25)  # the unknown price adds no dollars
    assert (row.total.unknown_calls, row.total.unknown_tokens) == (4, part.tokens)
    assert row.by_job["pr"].unknown_calls == 4 and row.by_job["baseline"].unknown_calls == 0


def _record(suite: str, job: str, day: str, calls: int, usd: float | None) -> SpendRecord:
    part = SpendPart(model="m", calls=calls, input_tokens=100 * calls, output_tokens=calls, usd=usd)
    return SpendRecord.model_validate(
        {"job": job, "suite": suite, "run": f"{suite}-{day}", "created_at": day, "parts": [part]}
    )


RECORDS = [
    _record("shop", "baseline", "2026-10-31T23:59:00Z", 50, 9.0),  # October: left out
    _record("shop", "baseline", "2026-11-01T00:00:00Z", 40, 0.4),
    _record("shop", "pr", "2026-11-10T12:00:00Z", 20, 0.2),
    _record("shop", "pr", "2026-11-11T12:00:00Z", 20, 0.2),
    _record("triage", "release", "2026-11-30T23:00:00Z", 10, None),
    # 01:00 on 1 December in UTC+2 is 23:00 on 30 November in UTC: November's.
    _record("triage", "pr", "2026-12-01T01:00:00+02:00", 5, 0.05),
]


def test_a_months_spend_is_summed_per_suite_and_kind_of_job() -> None:
    month = month_spend(RECORDS, "2026-11")
    shop, triage = month.suites
    # Known answers by hand: shop's November is 40 + 20 + 20 calls, $0.40 + $0.20 + $0.20.
    assert (shop.suite, shop.total.jobs, shop.total.calls) == ("shop", 3, 80)
    assert shop.total.usd == pytest.approx(0.8)
    assert shop.total.tokens == 80 * 101  # 100 input tokens and one output token a call
    assert shop.by_job["pr"].calls == 40 and shop.by_job["pr"].jobs == 2
    assert (triage.total.calls, triage.total.usd, triage.total.unknown_calls) == (15, 0.05, 10)
    assert (month.total.calls, month.total.unknown_calls) == (95, 10)
    assert month.total.usd == pytest.approx(0.85)
    assert month_spend(RECORDS, "2026-09").suites == []


def test_the_spend_file_keeps_the_newest_records() -> None:
    old, new = RECORDS[0], RECORDS[1]
    kept = appended([old] * KEEP, [new])
    assert len(kept) == KEEP and kept[-1] == new and kept[0] == old
    assert read_spend(dump(kept[-2:]), "spend.jsonl") == [old, new]


def test_history_cost_prints_the_month_and_json(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    path = tmp_path / "spend.jsonl"
    path.write_text(dump(RECORDS), encoding="utf-8")
    code, out, err = cli("history", "--cost", "--month", "2026-11", "--file", str(path))
    assert code == 0, err
    assert "Spend · 2026-11 (UTC), per suite" in out
    [total] = [line for line in out.splitlines() if line.startswith("total")]
    assert total.split() == ["total", "5", "95", "9,595", "$0.8500", "+", "unknown"]
    # A row whose every call has no price shows its dollars as unknown, never $0.
    rows = [line.split() for line in out.splitlines() if line.startswith("triage ")]
    assert [r[1:3] + r[5:] for r in rows] == [
        ["pr", "1", "$0.0500"],
        ["release", "1", "unknown"],
        ["all", "2", "$0.0500", "+", "unknown"],
    ]
    assert "Not in the USD above: 10 calls (1,010 tokens)" in out
    code, out, err = cli("history", "--cost", "--month", "2026-11", "--file", str(path), "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["month"] == "2026-11" and [s["suite"] for s in got["suites"]] == ["shop", "triage"]
    assert got["total"]["calls"] == 95 and got["total"]["unknown_calls"] == 10
    code, out, err = cli(
        "history", "--cost", "--month", "2026-11", "--file", str(path), "--suite", "triage"
    )
    assert code == 0 and "shop" not in out and "triage" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--cost", "--month", "November", "--file", "x"], "--month 'November' is not a month"),
        (["--cost", "--month", "2026-13", "--file", "x"], "is not a month"),
        (["--cost"], "needs where the spend is kept"),
        (["--cost", "--file", "missing.jsonl"], "no spend file at missing.jsonl"),
        (["--month", "2026-11"], "history --cost"),
    ],
)
def test_bad_history_arguments_are_one_line(
    cli: Callable[..., CliResult], argv: list[str], says: str
) -> None:
    code, _, err = cli("history", *argv)
    assert code == 2
    [line] = err.strip().splitlines()
    assert says in line


def test_a_broken_spend_file_names_its_line(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    path = tmp_path / "spend.jsonl"
    path.write_text(dump(RECORDS[:1]) + '{"job": "nightly"}\n', encoding="utf-8")
    code, _, err = cli("history", "--cost", "--file", str(path))
    assert code == 2 and f"{path}:2" in err and len(err.strip().splitlines()) == 1


# --- the action --------------------------------------------------------------------------------


def _spend(gh: GitHubServer) -> list[SpendRecord]:
    text = gh.file(REPO, f"evalgate/{SUITE}/spend.jsonl", ref="evalgate-data")
    assert text is not None, "no spend file on the data branch"
    return read_spend(text.decode(), "spend.jsonl")


def _sent(run_file: str) -> int:
    run = Run.model_validate_json(Path(run_file).read_text(encoding="utf-8"))
    return sum(1 for c in run.cases for o in c.outcomes if not o.cached)


def test_baseline_pr_and_release_jobs_keep_their_spend_and_history_sums_it(
    tmp_path: Path, gh: GitHubServer, cli: Callable[..., CliResult]
) -> None:
    workspace = make_workspace(tmp_path / "base")
    base = run_action(
        workspace, "push", push_event(), ref="refs/heads/main", inputs=api(gh), env=api_env(gh)
    )
    assert base.code == 0, base.out + base.err
    [first] = _spend(gh)
    assert (first.job, first.suite) == ("baseline", SUITE)
    assert first.parts[0].calls == _sent(base.outputs["run_file"]) > 0
    assert first.parts[0].usd == 0.0  # the example's fake model costs nothing, known

    upload(gh, Path(base.outputs["run_file"]).read_text(encoding="utf-8"))
    open_pull(gh, {f"{FOLDER}/prompts/v3.txt": HARMLESS})
    pr = pr_job(make_workspace(tmp_path / "pr", HARMLESS), gh)
    assert pr.code == 0, pr.out + pr.err
    shipped = release(gh, tmp_path / "rel", "v1.0.0")
    assert shipped.code == 0, shipped.out + shipped.err
    records = _spend(gh)
    assert [r.job for r in records] == ["baseline", "pr", "release"]
    assert records[1].pull_request == 7 and all(r.parts[0].calls > 0 for r in records)
    # The release's summary ends with the month's spend on the suite, this release included.
    spend = shipped.summary[shipped.summary.index("**Spend** ·") :]
    assert "| bike-shop | baseline | 1 |" in spend and "| bike-shop | release | 1 |" in spend
    assert f"| **total** | | 3 | {sum(r.parts[0].calls for r in records):,} |" in spend

    month = records[0].created_at.astimezone(UTC).strftime("%Y-%m")
    config = str(workspace / FOLDER / "evalgate.yml")
    code, out, err = cli(
        "history",
        "--cost",
        "--json",
        "--month",
        month,
        "--repo",
        REPO,
        "--config",
        config,
        env={"GITHUB_TOKEN": gh.write_token, "GITHUB_API_URL": gh.url},
    )
    assert code == 0, err
    [row] = json.loads(out)["suites"]
    assert row["suite"] == SUITE and set(row["by_job"]) == {"baseline", "pr", "release"}
    assert row["total"]["calls"] == sum(r.parts[0].calls for r in records)
    assert row["total"]["usd"] == 0.0 and row["total"]["unknown_calls"] == 0


def test_a_job_that_cannot_write_the_data_branch_says_its_spend_is_not_kept(
    tmp_path: Path, gh: GitHubServer
) -> None:
    workspace = make_workspace(tmp_path)
    job = run_action(
        workspace,
        "push",
        push_event(),
        ref="refs/heads/main",
        inputs=api(gh, gh.read_token),
        env=api_env(gh),
    )
    assert job.code == 0, job.out + job.err
    assert any("what this job spent is not kept" in a for a in job.annotations("warning"))
    assert gh.file(REPO, f"evalgate/{SUITE}/spend.jsonl", ref="evalgate-data") is None


def _push_job(folder: Path, gh: GitHubServer, env: dict[str, str] | None = None) -> Any:
    """A baseline job of a push to main, with the write token; it must succeed."""
    job = run_action(
        make_workspace(folder),
        "push",
        push_event(),
        ref="refs/heads/main",
        inputs=api(gh),
        env=env or api_env(gh),
    )
    assert job.code == 0, job.out + job.err
    return job


def _pr_job_read_only(folder: Path, gh: GitHubServer) -> Any:
    """A pull-request job with contents: read (the workflow's); it must succeed."""
    pr = pr_job(make_workspace(folder, HARMLESS), gh, inputs=api(gh, gh.contents_read_token))
    assert pr.code == 0, pr.out + pr.err
    return pr


def _baseline_and_pull(tmp_path: Path, gh: GitHubServer) -> None:
    """A push job's baseline, uploaded as its artefact, and a pull request that edits v3."""
    base = _push_job(tmp_path / "base", gh)
    upload(gh, Path(base.outputs["run_file"]).read_text(encoding="utf-8"))
    open_pull(gh, {f"{FOLDER}/prompts/v3.txt": HARMLESS})


def test_a_pull_request_job_with_contents_read_logs_that_its_spend_is_not_kept(
    tmp_path: Path, gh: GitHubServer
) -> None:
    # The workflow `evalgate init` writes gives the pull-request job contents: read only.
    _baseline_and_pull(tmp_path, gh)
    pr = _pr_job_read_only(tmp_path / "pr", gh)
    assert "what this job spent is not kept" in pr.out
    assert not any("spent" in a for a in pr.annotations("warning"))
    assert [r.job for r in _spend(gh)] == ["baseline"]


def test_a_pull_requests_judge_check_is_spent_apart_from_its_run(
    tmp_path: Path, gh: GitHubServer
) -> None:
    from test_judge_pr import REWORDED, RUBRIC, pr_job_again

    files = {RUBRIC: REWORDED}
    open_pull(gh, dict(files))
    job = pr_job_again(tmp_path, gh, files, gh.write_token)
    assert job.code == 0, job.out + job.err
    text = gh.file(REPO, "evalgate/bike-shop-judged/spend.jsonl", ref="evalgate-data")
    assert text is not None
    # The candidate's run with the judge's check, and the base branch's prompt run in the job
    # (there is no baseline artefact): two records of one pull request.
    record, base = read_spend(text.decode(), "spend.jsonl")
    assert (record.pull_request, base.pull_request) == (7, 7)
    assert [p.role for p in record.parts] == ["system", "judge", "judge-check"]
    assert all(p.calls > 0 and p.usd == 0.0 for p in record.parts)  # the offline fakes
    # Only the rubric changed: the base's prompt is the head's, and the job's cache answers it.
    assert [(p.role, p.calls, p.tokens, p.usd) for p in base.parts] == [("system", 0, 0, 0.0)]


# ------------------------------------------------------------------------------------------
# A pull request's spend: carried in its comment, kept when it is merged
# ------------------------------------------------------------------------------------------


def test_a_ledger_carries_every_record_and_nothing_in_it_can_leave_the_comment() -> None:
    hostile = _record("x --> <script>alert(1)</script> -->", "pr", "2026-12-01", 3, 0.5)
    body = with_ledger("<!-- evalgate:suite=x -->\nthe comment", None, [hostile], 65536)
    [line] = [ln for ln in body.splitlines() if ln.startswith("<!-- evalgate-spend ")]
    assert line.count("-->") == 1 and line.endswith(" -->")
    assert "<script>" not in body
    assert read_ledger(body) == [hostile]
    # The next edit carries it, adds its own, and does not add one twice.
    more = _record("x", "pr", "2026-12-02", 4, 0.25)
    again = with_ledger("the comment, edited", body, [more, hostile], 65536)
    assert read_ledger(again) == [hostile, more]
    # A damaged or forged-garbage block is no ledger (the job goes on).
    assert read_ledger(body.replace("evalgate-spend ", "evalgate-spend AAAA")) == []
    assert read_ledger("<!-- evalgate-spend bm90IGpzb24= -->") == []


def test_a_long_ledger_folds_its_oldest_runs_and_keeps_every_call() -> None:
    records = [_record("s", "pr", f"2026-12-{1 + i % 28:02d}", i + 1, 0.01) for i in range(150)]
    records = [r.model_copy(update={"run": f"run-{i}"}) for i, r in enumerate(records)]
    folded = fold(records, LEDGER_KEEP)
    assert len(folded) == LEDGER_KEEP
    # Known answer: calls 1 + 2 + ... + 150 = 150 * 151 / 2 = 11,325 whatever the folding.
    assert sum(p.calls for r in folded for p in r.parts) == 11325
    assert folded[0].run == "run-0..run-50 (51 runs)"
    assert sum(p.usd or 0 for r in folded for p in r.parts) == pytest.approx(1.5)
    # A ledger too long for the comment's room is folded further, never cut.
    body = with_ledger("c", None, records, 1200)
    assert len(body) <= 1200
    kept = read_ledger(body)
    assert 1 <= len(kept) < LEDGER_KEEP
    assert sum(p.calls for r in kept for p in r.parts) == 11325
    # Merging the same records into a spend file twice adds them once.
    assert merged(merged([], records), records) == records


def test_a_pull_requests_spend_rides_its_comment_and_its_merge_keeps_it(
    tmp_path: Path, gh: GitHubServer
) -> None:
    _baseline_and_pull(tmp_path, gh)
    for i in range(2):  # two pushes to the pull request: two jobs, with contents: read
        pr = _pr_job_read_only(tmp_path / f"pr{i}", gh)
        assert "its spend is not kept" in pr.out or "what this job spent is not kept" in pr.out
    [comment] = gh.comments(REPO, 7)
    ledger = read_ledger(comment.body)
    assert [(r.job, r.pull_request) for r in ledger] == [("pr", 7), ("pr", 7)]
    runs = [r.run for r in ledger]
    assert len(set(runs)) == 2 and all(r.parts[0].calls > 0 for r in ledger)
    # A person's comment with the marker and a ledger of their own is not evalgate's.
    forged = _record(SUITE, "pr", "2026-12-01", 10**6, 10**4).model_copy(update={"pull_request": 7})
    gh.add_comment(REPO, 7, with_ledger(marker(SUITE), None, [forged], 65536), user="mallory")
    # The merge: a push of the merge commit to main, whose baseline job keeps the ledger.
    sha = gh.branch_sha(REPO, "main")
    assert sha is not None
    gh.merge_pull(REPO, 7, sha)
    merge_env = api_env(gh) | {"GITHUB_SHA": sha}
    for _ in range(2):  # a re-run of the job keeps nothing twice
        job = _push_job(tmp_path / f"merge{_}", gh, merge_env)
    records = _spend(gh)
    assert [r.job for r in records] == ["baseline", "baseline", "pr", "pr", "baseline"]
    assert [r.run for r in records if r.job == "pr"] == runs
    assert all(r.parts[0].calls < 10**6 for r in records)
    assert f"from the ledgers of #7 (merged): {SUITE} 2" in job.out


def _closed_job(
    folder: Path,
    gh: GitHubServer,
    *,
    merged: bool,
    event: str = "pull_request_target",
    token: str | None = None,
    inputs: dict[str, str] | None = None,
) -> Any:
    """The job a pull request's closing starts (``merged`` or not); it must succeed."""
    closed = pr_event()
    closed["action"] = "closed"
    closed["pull_request"]["merged"] = merged
    job = run_action(
        make_workspace(folder),
        event,
        closed,
        ref="refs/heads/main" if event == "pull_request_target" else "refs/pull/7/merge",
        inputs=api(gh, token) | (inputs or {}),
        env=api_env(gh),
    )
    assert job.code == 0, job.out + job.err
    assert job.outputs["verdict"] == "skipped"
    return job


def test_a_pull_request_closed_without_merging_keeps_what_its_jobs_spent(
    tmp_path: Path, gh: GitHubServer
) -> None:
    _baseline_and_pull(tmp_path, gh)
    for i in range(2):  # two pushes: two jobs, contents: read, their spend in the ledger
        _pr_job_read_only(tmp_path / f"pr{i}", gh)
    runs = [r.run for r in read_ledger(gh.comments(REPO, 7)[0].body)]
    assert len(set(runs)) == 2
    # A person's comment with the marker and a ledger of their own is not evalgate's.
    forged = _record(SUITE, "pr", "2026-12-01", 10**6, 10**4).model_copy(update={"pull_request": 7})
    gh.add_comment(REPO, 7, with_ledger(marker(SUITE), None, [forged], 65536), user="mallory")
    # Closed, not merged: the job its closing starts (pull_request_target, the base's checkout,
    # contents: write) keeps the ledger's records, once however often it re-runs.
    for i in range(2):
        job = _closed_job(tmp_path / f"closed{i}", gh, merged=False)
        assert f"from the ledgers of #7 (closed): {SUITE} 2" in job.out
    records = _spend(gh)
    assert [r.job for r in records] == ["baseline", "pr", "pr"]
    assert [r.run for r in records if r.job == "pr"] == runs
    assert all(r.parts[0].calls < 10**6 for r in records)
    # Merged instead: nothing to do here (the merge commit's baseline job counts it).
    merged_job = _closed_job(tmp_path / "merged", gh, merged=True)
    assert "nothing to do for pull request #7, merged" in merged_job.out
    assert [r.job for r in _spend(gh)] == ["baseline", "pr", "pr"]


def test_a_closed_pull_requests_spend_without_a_write_token_is_said_not_kept(
    tmp_path: Path, gh: GitHubServer
) -> None:
    # A fork's pull_request event gets a read-only token: the closing job says so and passes.
    _baseline_and_pull(tmp_path, gh)
    _pr_job_read_only(tmp_path / "pr", gh)
    job = _closed_job(
        tmp_path / "closed", gh, merged=False, event="pull_request", token=gh.contents_read_token
    )
    assert "what this job spent is not kept" in job.out + "".join(job.annotations("warning"))
    assert [r.job for r in _spend(gh)] == ["baseline"]


def test_the_next_baseline_job_keeps_what_a_pull_request_closed_without_merging_spent(
    tmp_path: Path, gh: GitHubServer
) -> None:
    # The workflow evalgate writes has no job on a pull request's closing: the baseline jobs
    # (each push to main, and weekly) look at the pull requests closed in the last 8 days.
    _baseline_and_pull(tmp_path, gh)
    _pr_job_read_only(tmp_path / "pr", gh)
    [run] = [r.run for r in read_ledger(gh.comments(REPO, 7)[0].body)]
    # Another pull request, closed 9 days ago, with a ledger of its own: out of the look-back.
    gh.add_pull(REPO, head="feature", number=8, title="old")
    old = _record(SUITE, "pr", "2026-11-20", 5, 0.0).model_copy(update={"pull_request": 8})
    gh.add_comment(
        REPO, 8, with_ledger(marker(SUITE), None, [old], 65536), user="github-actions[bot]"
    )
    gh.close_pull(REPO, 8, datetime.now(UTC) - timedelta(days=9))
    gh.close_pull(REPO, 7)
    for i in range(2):  # a second baseline job keeps nothing twice
        job = _push_job(tmp_path / f"base{i}", gh)
        assert f"from the ledgers of #7 (closed): {SUITE} 1" in job.out
    records = _spend(gh)
    assert [r.job for r in records] == ["baseline", "baseline", "pr", "baseline"]
    assert [r.run for r in records if r.job == "pr"] == [run]
    assert all(r.pull_request != 8 for r in records)


def _runs_of_a_pull(count: int, first: int = 0) -> list[SpendRecord]:
    """``count`` job records of pull request #7, one a day from 1 November, run i calling i+1."""
    start = datetime(2026, 11, 1, tzinfo=UTC)
    return [
        SpendRecord(
            job="pr",
            suite="s",
            run=f"run-{i}",
            created_at=start + timedelta(hours=i),
            pull_request=7,
            parts=[SpendPart(model="m", calls=i + 1, usd=0.01)],
        )
        for i in range(first, first + count)
    ]


def test_a_ledger_read_again_after_more_runs_counts_each_call_once() -> None:
    # Read when its pull request closed after 100 runs, reopened, 5 runs more, closed again.
    kept = merged([], fold(_runs_of_a_pull(100), LEDGER_KEEP))
    again = fold(_runs_of_a_pull(105), LEDGER_KEEP)
    assert sum(r.run.endswith(" runs)") for r in again) == 1  # the 6 oldest now summed
    store = merged(kept, again)
    # Known answer: calls 1 + 2 + ... + 105 = 105 * 106 / 2 = 5,565 (each run counted once).
    assert sum(p.calls for r in store for p in r.parts) == 5565
    assert len(store) == LEDGER_KEEP
    # And a third read, after 30 runs more, folds further, still once each: 135 * 136 / 2.
    store = merged(store, fold(_runs_of_a_pull(135), LEDGER_KEEP))
    assert sum(p.calls for r in store for p in r.parts) == 9180
    # Another pull request's and another suite's records are never taken for covered.
    other = _runs_of_a_pull(1)[0].model_copy(update={"pull_request": 8, "run": "other"})
    elsewhere = _runs_of_a_pull(1)[0].model_copy(update={"suite": "t", "run": "elsewhere"})
    store = merged([other, elsewhere], fold(_runs_of_a_pull(135), LEDGER_KEEP))
    assert other in store and elsewhere in store


def test_a_ledger_evalgate_could_not_have_written_is_not_read() -> None:
    # More records than a ledger itemises: not evalgate's (it could push the history out).
    flood = with_ledger(marker("s"), None, _runs_of_a_pull(LEDGER_KEEP), 1 << 20)
    assert len(read_ledger(flood)) == LEDGER_KEEP
    import base64
    import zlib

    records = _runs_of_a_pull(LEDGER_KEEP + 1)
    data = zlib.compress(("[" + ",".join(r.model_dump_json() for r in records) + "]").encode(), 9)
    forged = f"{marker('s')}\n<!-- evalgate-spend {base64.b64encode(data).decode()} -->\n"
    assert read_ledger(forged) == []
    # Dollars that are negative or not finite are not spend.
    for usd in ("-1.0", "1e999"):
        bad = records[0].model_dump_json().replace('"usd":0.01', f'"usd":{usd}')
        data = zlib.compress(f"[{bad}]".encode(), 9)
        text = f"<!-- evalgate-spend {base64.b64encode(data).decode()} -->"
        assert read_ledger(text) == [], usd


def test_a_bot_comment_that_only_quotes_the_marker_is_not_the_ledger(
    tmp_path: Path, gh: GitHubServer
) -> None:
    _baseline_and_pull(tmp_path, gh)
    # Another bot's comment that holds the marker and a ledger, but not as its first line.
    forged = _record(SUITE, "pr", "2026-12-01", 10**6, 10**4).model_copy(update={"pull_request": 7})
    quoted = "Report of another tool\n\n" + with_ledger(marker(SUITE), None, [forged], 65536)
    gh.add_comment(REPO, 7, quoted, user="other-app[bot]")
    # And one that starts with it: another app's comment is not evalgate's, whatever it says.
    gh.add_comment(
        REPO, 7, with_ledger(marker(SUITE), None, [forged], 65536), user="other-app[bot]"
    )
    gh.close_pull(REPO, 7)
    listings = f"/repos/{REPO}/pulls"
    comments = f"/repos/{REPO}/issues/7/comments"
    before = len(gh.find_requests(path=listings)), len(gh.find_requests(path=comments))
    job = _push_job(tmp_path / "next", gh)
    assert "from the ledgers of #7 (closed): none" in job.out
    assert all(r.job == "baseline" for r in _spend(gh))
    # The job listed the closed pull requests once and read #7's comments once.
    after = len(gh.find_requests(path=listings)), len(gh.find_requests(path=comments))
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)


def _calls(records: list[SpendRecord]) -> int:
    return sum(p.calls for r in records for p in r.parts)


def test_a_new_ledger_after_a_deleted_comment_drops_nothing_it_does_not_sum() -> None:
    # 150 runs kept at the first closing; the comment deleted, 101 runs more in a new ledger.
    first = merged([], fold(_runs_of_a_pull(150), LEDGER_KEEP))
    fresh = fold(_runs_of_a_pull(101, first=150), LEDGER_KEEP)
    store = merged(first, fresh)
    # Known answer: calls 1 + ... + 251 = 251 * 252 / 2 = 31,626, each run once.
    assert _calls(store) == 31626


def test_a_forged_fold_cannot_erase_what_a_pull_request_spent() -> None:
    kept = merged([], _runs_of_a_pull(50))
    forged = _runs_of_a_pull(1)[0].model_copy(
        update={
            "run": "a..b (50 runs)",
            "covers": [r.run for r in kept],
            "created_at": datetime(9999, 1, 1, tzinfo=UTC),
            "parts": [SpendPart(model="m", calls=0, usd=0.0)],
        }
    )
    store = merged(kept, [forged])
    assert _calls(store) == _calls(kept) == 50 * 51 // 2
    assert forged not in store


def test_a_ledger_edited_out_of_order_counts_each_run_once() -> None:
    # Job r5 edited the comment before r0 (an older commit's slow job finished last).
    runs = _runs_of_a_pull(101)
    ledger: list[SpendRecord] = []
    for r in [runs[5], *runs[:5], *runs[6:]]:
        ledger = fold(merged(ledger, [r]), LEDGER_KEEP)
    store = merged([], ledger)
    assert _calls(store) == 101 * 102 // 2


def test_a_record_without_a_zone_is_taken_as_utc_and_compares() -> None:
    naive = SpendRecord.model_validate(
        {"job": "pr", "suite": "s", "run": "r", "created_at": "2026-12-01T00:00:00", "parts": []}
    )
    assert naive.created_at == datetime(2026, 12, 1, tzinfo=UTC)
    fold_ = _runs_of_a_pull(1)[0].model_copy(update={"run": "f", "covers": ["r"]})
    merged([naive], [fold_])  # no TypeError comparing times


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("runs"), st.integers(1, 60)),  # that many jobs edit the comment
            st.tuples(st.just("read"), st.just(0)),  # a baseline job reads the ledger
            st.tuples(st.just("delete"), st.just(0)),  # the comment deleted: a new ledger
        ),
        min_size=1,
        max_size=12,
    ),
    shuffle=st.randoms(use_true_random=False),
)
def test_every_run_a_ledger_ever_showed_is_kept_once(
    steps: list[tuple[str, int]], shuffle: Any
) -> None:
    """However a pull request's comment is edited (jobs finishing out of order, the comment
    deleted and begun again) and however often the ledger is read, the spend file counts each
    run the ledgers showed exactly once."""
    ledger: list[SpendRecord] = []
    store: list[SpendRecord] = []
    made = 0
    shown: set[str] = set()
    calls = {}
    for what, count in steps:
        if what == "runs":
            batch = _runs_of_a_pull(count, first=made)
            made += count
            shuffle.shuffle(batch)  # the order the jobs finish in
            for r in batch:
                calls[r.run] = r.parts[0].calls
                ledger = fold(merged(ledger, [r]), LEDGER_KEEP)
        elif what == "read":
            shown |= {run for r in ledger for run in (r.covers or [r.run])}
            store = merged(store, ledger)
        else:
            ledger = []
    kept = [run for r in store for run in (r.covers or [r.run])]
    assert sorted(kept) == sorted(shown)  # each shown run once, no other
    assert _calls(store) == sum(calls[run] for run in shown)


def test_comments_on_old_closed_pulls_do_not_crowd_out_one_closed_since(
    gh: GitHubServer,
) -> None:
    """The listing is sorted by last update, which a comment moves: comments on more than
    CLOSED_READ pull requests closed long ago come first, and are passed over uncounted."""
    from github import Auth, Github

    from evalgate.publish.github.pulls import CLOSED_READ, closed_unmerged_since

    gh.create_branch(REPO, "feature")
    now = datetime.now(UTC)
    gh.add_pull(REPO, head="feature", number=1)
    gh.close_pull(REPO, 1, when=now - timedelta(hours=5))
    old = range(2, CLOSED_READ + 7)
    for number in old:
        gh.add_pull(REPO, head="feature", number=number)
        gh.close_pull(REPO, number, when=now - timedelta(days=40))
        gh.add_comment(REPO, number, "bump")  # updated now, closed 40 days ago
    client = Github(auth=Auth.Token(gh.write_token), base_url=gh.url, retry=None)
    repo = client.get_repo(REPO)
    listed = [p.number for p in repo.get_pulls(state="closed", sort="updated", direction="desc")]
    assert listed[-1] == 1  # the stand-in lists as GitHub does: the commented ones first
    assert closed_unmerged_since(repo, now - timedelta(days=1)) == [1]
    client.close()


def test_the_look_back_and_the_ledger_search_are_bounded(gh: GitHubServer) -> None:
    from github import Auth, Github

    from evalgate.publish.github.comments import LEDGER_COMMENTS, marked_bodies
    from evalgate.publish.github.pulls import CLOSED_READ, closed_unmerged_since

    gh.create_branch(REPO, "feature")
    for number in range(1, CLOSED_READ + 6):
        gh.add_pull(REPO, head="feature", number=number)
        gh.close_pull(REPO, number)
    client = Github(auth=Auth.Token(gh.write_token), base_url=gh.url, retry=None)
    repo = client.get_repo(REPO)
    found = closed_unmerged_since(repo, datetime.now(UTC) - timedelta(days=1))
    # The newest updated first, and no more than CLOSED_READ of them.
    assert found == list(range(CLOSED_READ + 5, 5, -1))
    # A ledger comment past the first LEDGER_COMMENTS comments is not looked for.
    for _ in range(LEDGER_COMMENTS):
        gh.add_comment(REPO, 1, "chatter", user="github-actions[bot]")
    gh.add_comment(REPO, 1, marker(SUITE) + "\nlate", user="github-actions[bot]")
    gh.add_comment(REPO, 2, marker(SUITE) + "\nfirst", user="github-actions[bot]")
    assert marked_bodies(repo, 1) == ({}, True)  # and it says it stopped short
    assert marked_bodies(repo, 2) == ({marker(SUITE): marker(SUITE) + "\nfirst"}, False)
    client.close()


def test_a_report_that_fills_the_comment_is_shortened_so_the_ledger_is_kept(
    make_case: Any, make_run: Any
) -> None:
    """A comment whose report alone reaches GitHub's limit (a regression with many long
    cases) keeps its ledger: the report is rendered again, shorter, and every earlier job's
    spend rides on."""
    import io

    from test_comment import huge_context

    from evalgate.action.inputs import Inputs
    from evalgate.action.job import ActionJob
    from evalgate.action.pr import _carry
    from evalgate.publish.github.client import COMMENT_MAX
    from evalgate.report.comment import render_comment

    context = huge_context(make_case, make_run)
    report = render_comment(context)
    assert len(report) > COMMENT_MAX - 200  # the report alone fills the comment
    runner = ActionJob(env={}, inputs=Inputs(), out=io.StringIO(), err=io.StringIO(), event={})
    jobs = [
        r.model_copy(update={"run": f"run-{i}", "pull_request": 7})
        for i, r in enumerate(
            _record(context.suite, "pr", "2026-12-01", 300, 12.5) for _ in range(3)
        )
    ]
    first = _carry(runner, context.suite, context, jobs[:1])(
        marker(context.suite) + "\nsmall", None
    )
    second = _carry(runner, context.suite, context, jobs[1:2])(report, first)
    assert len(second) <= COMMENT_MAX and second.startswith(marker(context.suite))
    assert [r.run for r in read_ledger(second)] == ["run-0", "run-1"]
    third = _carry(runner, context.suite, context, jobs[2:])(report, second)
    kept = read_ledger(third)
    assert [r.run for r in kept] == ["run-0", "run-1", "run-2"]
    # Known answer: three jobs of 300 calls and $12.50 each.
    assert sum(p.calls for r in kept for p in r.parts) == 900
    assert sum(p.usd or 0 for r in kept for p in r.parts) == pytest.approx(37.5)
    assert "::warning" not in runner.out.getvalue() + runner.err.getvalue()


def _other_suite_spend(suite: str, calls: int, usd: float) -> str:
    spent = _record(suite, "pr", "2026-12-01", calls, usd).model_copy(update={"pull_request": 7})
    return with_ledger(marker(suite) + "\nreport", None, [spent], 65536)


@pytest.mark.parametrize("job", ["baseline", "closed"])
def test_a_suite_only_the_pull_request_had_is_counted_all_the_same(
    tmp_path: Path, gh: GitHubServer, job: str
) -> None:
    """The suites are those evalgate's comments name, not the config's: a pull request that
    adds a suite (or renames one before it closes) spent on it all the same."""
    _baseline_and_pull(tmp_path, gh)
    gh.add_comment(REPO, 7, _other_suite_spend("pr-only", 5000, 400.0), user="github-actions[bot]")
    if job == "baseline":
        gh.close_pull(REPO, 7)
        ran = _push_job(tmp_path / "next", gh)
    else:
        ran = _closed_job(tmp_path / "closed", gh, merged=False)
    assert "from the ledgers of #7 (closed): pr-only 1" in ran.out
    text = gh.file(REPO, "evalgate/pr-only/spend.jsonl", ref="evalgate-data")
    assert text is not None
    [kept] = read_spend(text.decode(), "spend.jsonl")
    assert (kept.suite, kept.pull_request, kept.parts[0].calls) == ("pr-only", 7, 5000)


def test_a_marker_names_a_suite_only_as_a_config_could() -> None:
    from evalgate.report.comment import suite_of_marker

    assert suite_of_marker(marker("bike-shop")) == "bike-shop"
    assert suite_of_marker(marker("a.b_c-1")) == "a.b_c-1"
    for line in (
        "<!-- evalgate:suite=..%2F..%2Fetc -->",  # a path, percent-encoded
        "<!-- evalgate:suite=%2E%2E -->",
        "<!-- evalgate:suite=bike-shop -->x",
        "<!-- evalgate:suite= -->",
        "<!-- evalgate:suite=" + "a" * 101 + " -->",
        "<!-- evalgate:suite=b%69ke -->",  # not how evalgate writes "bike"
        "<!-- evalgate:release -->",
    ):
        assert suite_of_marker(line) is None, line


def test_a_pull_request_with_more_comments_than_are_read_is_named_in_a_warning(
    tmp_path: Path, gh: GitHubServer
) -> None:
    from evalgate.publish.github.comments import LEDGER_COMMENTS

    _baseline_and_pull(tmp_path, gh)
    for i in range(LEDGER_COMMENTS):  # before evalgate's: its ledger is past what is read
        gh.add_comment(REPO, 7, f"chatter {i}", user="mallory")
    gh.add_comment(REPO, 7, _other_suite_spend(SUITE, 10, 1.0), user="github-actions[bot]")
    job = _closed_job(tmp_path / "closed", gh, merged=False)
    assert "::warning" in job.out + job.err
    assert f"pull request #7 has more than {LEDGER_COMMENTS} comments" in job.out + job.err
    assert "may be missing from the cost history" in job.out + job.err


def test_a_ledger_itemises_the_newest_100_realistic_runs() -> None:
    """The room a comment leaves its ledger holds the 100 runs docs/action.md says it itemises,
    with run names, commits and two models' parts as evalgate writes them."""
    import random

    from evalgate.runs.spend import LEDGER_ROOM, ledger_block

    draw = random.Random(7)
    records = [
        SpendRecord(
            job="pr",
            suite="bike-shop",
            run=f"bike-shop-v{i % 4}-202612{1 + i // 24:02d}T{i % 24:02d}{draw.randrange(60):02d}"
            f"{draw.randrange(60):02d}-{draw.randrange(16**4):04x}",
            created_at=datetime(2026, 12, 1, tzinfo=UTC) + timedelta(hours=i),
            commit=f"{draw.getrandbits(160):040x}",
            pull_request=7,
            parts=[
                SpendPart(
                    model="claude-sonnet-4-5",
                    calls=draw.randrange(100, 400),
                    input_tokens=draw.randrange(10**5, 10**6),
                    output_tokens=draw.randrange(10**4, 10**5),
                    cache_read_tokens=draw.randrange(10**5),
                    usd=round(draw.uniform(0.5, 9), 6),
                ),
                SpendPart(
                    model="claude-haiku-4-5",
                    role="judge",
                    calls=draw.randrange(100, 400),
                    input_tokens=draw.randrange(10**5, 10**6),
                    output_tokens=draw.randrange(10**3, 10**4),
                    usd=round(draw.uniform(0.1, 2), 6),
                ),
            ],
        )
        for i in range(LEDGER_KEEP)
    ]
    block = ledger_block(None, records)
    assert len(block) <= LEDGER_ROOM
    assert read_ledger(block) == records  # every run itemised, nothing folded


def test_a_fold_keeps_each_months_spend_in_its_month() -> None:
    """Older runs are summed one record a month: `history --cost` (by month) reads the same
    however much of the ledger is folded, and a later, fuller reading replaces each month's
    fold exactly."""
    from collections import Counter

    start = datetime(2026, 10, 20, tzinfo=UTC)
    runs = [
        SpendRecord(
            job="pr",
            suite="s",
            run=f"run-{i}",
            created_at=start + timedelta(hours=12 * i),  # 20 October to 4 January
            pull_request=7,
            parts=[SpendPart(model="m", calls=i + 1, usd=0.01)],
        )
        for i in range(150)
    ]

    def by_month(records: list[SpendRecord]) -> Counter[str]:
        months: Counter[str] = Counter()
        for r in records:
            months[r.created_at.strftime("%Y-%m")] += sum(p.calls for p in r.parts)
        return months

    truth = by_month(runs)
    assert set(truth) == {"2026-10", "2026-11", "2026-12", "2027-01"}
    for keep in (LEDGER_KEEP, 10, 5):
        folded = fold(runs, keep)
        assert len(folded) <= keep
        assert by_month(folded) == truth, keep
    # A reading after 120 runs, then one after all 150: each month counted once.
    store = merged(merged([], fold(runs[:120], 10)), fold(runs, 10))
    assert by_month(store) == truth
    assert sum(len(r.covers or [r.run]) for r in store) == 150


def test_a_ledger_posted_by_a_github_app_is_read_when_comment_author_names_it(
    tmp_path: Path, gh: GitHubServer
) -> None:
    """A job whose token is a GitHub App's posts as NAME[bot]: its ledger is read only when
    comment_author says so (by default only github-actions[bot]'s is evalgate's)."""
    _baseline_and_pull(tmp_path, gh)
    gh.add_comment(REPO, 7, _other_suite_spend(SUITE, 10, 1.0), user="evalgate-ci[bot]")
    job = _closed_job(tmp_path / "default", gh, merged=False)
    assert "from the ledgers of #7 (closed): none" in job.out
    job = _closed_job(
        tmp_path / "app", gh, merged=False, inputs={"comment_author": "evalgate-ci[bot]"}
    )
    assert f"from the ledgers of #7 (closed): {SUITE} 1" in job.out
    # A person whose login is the same but without [bot] is not the app.
    gh.add_comment(REPO, 7, _other_suite_spend("pr-only", 10**6, 10**4), user="evalgate-ci")
    job = _closed_job(
        tmp_path / "again", gh, merged=False, inputs={"comment_author": "evalgate-ci[bot]"}
    )
    assert "pr-only" not in job.out


def test_the_comment_is_edited_only_where_its_author_posted_it(gh: GitHubServer) -> None:
    from github import Auth, Github

    from evalgate.publish.github.comments import upsert_comment

    gh.create_branch(REPO, "feature")
    gh.add_pull(REPO, head="feature", number=3)
    other = gh.add_comment(REPO, 3, marker(SUITE) + "\nanother app's", user="other-app[bot]")
    client = Github(auth=Auth.Token(gh.write_token), base_url=gh.url, retry=None)
    repo = client.get_repo(REPO)
    _, created = upsert_comment(
        repo, 3, marker(SUITE) + "\nours", marker(SUITE), author="github-actions[bot]"
    )
    assert created  # the other app's marked comment was not taken for ours
    assert [c.body for c in gh.comments(REPO, 3) if c.id == other.id] == [
        marker(SUITE) + "\nanother app's"
    ]
    _, created = upsert_comment(
        repo, 3, marker(SUITE) + "\nours, edited", marker(SUITE), author="github-actions[bot]"
    )
    assert not created
    client.close()


def test_a_ledger_spanning_as_many_months_as_it_keeps_is_summed_by_month() -> None:
    """Ten months of runs folded to ten records: one a month, each in its month (the one-sum
    fallback is for more months than records)."""
    runs = [
        SpendRecord(
            job="pr",
            suite="s",
            run=f"run-{i}",
            created_at=datetime(2026, min(i, 9) + 1, 2 if i == 10 else 1, tzinfo=UTC),
            pull_request=7,
            parts=[SpendPart(model="m", calls=1, usd=0.01)],
        )
        for i in range(11)  # 1 January to 1 October, and 2 October
    ]
    folded = fold(runs, 10)
    assert len(folded) == 10
    months = sorted(r.created_at.strftime("%Y-%m") for r in folded)
    assert months == [f"2026-{m:02d}" for m in range(1, 11)]
    assert [sum(p.calls for p in r.parts) for r in folded] == [1] * 9 + [2]


def test_an_earlier_reading_merged_after_a_later_one_adds_nothing() -> None:
    """Two baseline jobs race: the one that read the comment first writes last. Its fold sums
    only runs a kept fold sums already: nothing is counted twice."""
    runs = _runs_of_a_pull(3)  # calls 1, 2, 3
    store = merged(merged([], fold(runs, 1)), fold(runs[:2], 1))
    assert sum(p.calls for r in store for p in r.parts) == 6
    store = merged(merged([], fold(runs[:2], 1)), fold(runs, 1))  # in order: replaced
    assert sum(p.calls for r in store for p in r.parts) == 6
