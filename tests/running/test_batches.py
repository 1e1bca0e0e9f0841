"""Message batches: the anthropic backend's batch path against the stand-in's batch endpoints,
the resumable state file, results mapped back to jobs, errors kept, and half the cost."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import anthropic
import pytest
from conftest import shop_suite

from evalgate import cli
from evalgate.analysis.summary import summarise
from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext, Reply, Request
from evalgate.backends.batch import BatchStatus
from evalgate.config.load import LoadedConfig
from evalgate.config.models import ModelSettings
from evalgate.errors import UserError
from evalgate.running.batch import BatchExecutor, BatchState, custom_id, run_key
from evalgate.running.execute import Job, Progress
from evalgate.running.suite import RunSpec, build_jobs, load_prompt, load_suite_cases, run_suite
from evalgate.runs.schema import Run, find_run
from evalgate.scorers.base import Score
from tests.support.messages_server import MessagesServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "bike-shop"
MODEL = "claude-haiku-4-5"
KEY = "sk-ant-test"


def write_suite(root: Path, cases: int, **options: Any) -> LoadedConfig:
    """The bike-shop suite over ``cases`` cases (cycled, new ids) on the anthropic backend."""
    model = {"backend": "anthropic", "name": MODEL, "max_tokens": 64, "options": options}
    return shop_suite(root, cases=cases, model=model)


def spec_of(loaded: LoadedConfig, repeats: int = 1) -> RunSpec:
    name, suite = loaded.suite(None)
    return RunSpec(
        suite_name=name,
        suite=suite,
        prompt=load_prompt(loaded, suite, "v3"),
        cases=load_suite_cases(loaded, suite),
        repeats=repeats,
    )


@pytest.fixture
def suite(tmp_path: Path) -> LoadedConfig:
    return write_suite(tmp_path / "suite", cases=12)


@pytest.fixture
def make_backend(srv: MessagesServer) -> Iterator[Callable[..., AnthropicBackend]]:
    made: list[AnthropicBackend] = []

    def make(**options: Any) -> AnthropicBackend:
        settings = ModelSettings(backend="anthropic", name=MODEL, max_tokens=64, options=options)
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
        backend = AnthropicBackend(settings, BackendContext(base_dir=ROOT, env=env))
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def batch_runner(
    backend: AnthropicBackend,
    loaded: LoadedConfig,
    sleep: Callable[[float], None] = time.sleep,
    messages: list[str] | None = None,
) -> BatchExecutor:
    """A runner polling every 0.02 s, its status lines appended to ``messages``."""
    out = messages if messages is not None else []
    folder = loaded.state_dir / "batches"
    return BatchExecutor(backend, folder, poll_s=0.02, sleep=sleep, on_status=out.append)


def answers(run: Run) -> list[tuple[str, list[str | None], list[float | None]]]:
    return [(c.id, [o.text for o in c.outcomes], [o.score for o in c.outcomes]) for c in run.cases]


def state_files(loaded: LoadedConfig) -> list[Path]:
    folder = loaded.state_dir / "batches"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


# ---------------------------------------------------------------- the batch path


def test_a_batch_run_gives_the_direct_runs_answers_at_half_the_cost(
    srv: MessagesServer, suite: LoadedConfig, make_backend: Callable[..., AnthropicBackend]
) -> None:
    spec = spec_of(suite, repeats=2)
    direct = run_suite(spec, make_backend(), suite.root)
    srv.reset()  # the same answers again (flips and the prompt cache start over)
    srv.knobs.batch_latency_s = 0.1
    seen: list[tuple[int, int]] = []

    def progress(p: Progress) -> None:
        seen.append((p.done, p.total))

    batched = run_suite(
        spec,
        make_backend(),
        suite.root,
        on_progress=progress,
        batch=batch_runner(make_backend(), suite),
    )
    assert srv.stats().batches == 1
    assert [ex.path for ex in srv.requests if ex.path == "/v1/messages"] == []
    assert answers(batched) == answers(direct)
    assert batched.errors == 0 and len(batched.cases) == 12
    # the same tokens (the prompt cache is written once in a batch too) ...
    same = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")
    for a, b in zip(direct.cases, batched.cases, strict=True):
        for x, y in zip(a.outcomes, b.outcomes, strict=True):
            assert [getattr(x, f) for f in same] == [getattr(y, f) for f in same]
    # ... at half the price
    assert (direct.batch, batched.batch) == (False, True)
    full, half = summarise(direct).costs, summarise(batched).costs
    assert full.cost is not None and half.cost is not None and full.uncached_cost is not None
    assert half.cost == pytest.approx(full.cost / 2)
    assert half.uncached_cost == pytest.approx(full.uncached_cost / 2)
    # progress while polling: nothing done until the batch ends (as on the API), then all
    assert seen[0] == (0, 24) and seen[-1] == (24, 24)
    assert state_files(suite) == []  # done: the next run with the same key starts afresh


def test_results_are_mapped_back_by_custom_id_whatever_their_order(
    srv: MessagesServer, suite: LoadedConfig, make_backend: Callable[..., AnthropicBackend]
) -> None:
    backend = make_backend()
    jobs = build_jobs(spec_of(suite).suite, spec_of(suite).prompt, spec_of(suite).cases.cases, 1)
    items = [(custom_id(i, job), job.request) for i, job in enumerate(jobs)]
    submitted = backend.submit_batch(items)
    assert submitted.phase == "in_progress" and submitted.processing == len(items)
    status = backend.batch_status(submitted.id)
    assert status.phase == "ended" and status.succeeded == len(items)
    returned = [cid for cid, _ in backend.batch_results(status.id)]
    sent = [cid for cid, _ in items]
    assert sorted(returned) == sorted(sent) and returned != sent  # the stand-in shuffles
    srv.reset()
    direct = run_suite(spec_of(suite), make_backend(), suite.root)
    srv.reset()
    batched = run_suite(spec_of(suite), backend, suite.root, batch=batch_runner(backend, suite))
    assert answers(batched) == answers(direct)


def test_a_restarted_job_resumes_polling_instead_of_paying_twice(
    srv: MessagesServer, suite: LoadedConfig, make_backend: Callable[..., AnthropicBackend]
) -> None:
    srv.knobs.batch_latency_s = 60.0  # the batch is still running when the job dies

    def killed(seconds: float) -> None:
        raise KeyboardInterrupt  # the job is stopped while it polls

    said: list[str] = []
    first = batch_runner(make_backend(), suite, sleep=killed, messages=said)
    with pytest.raises(KeyboardInterrupt):
        run_suite(spec_of(suite), make_backend(), suite.root, batch=first)
    (path,) = state_files(suite)
    state = BatchState.model_validate_json(path.read_text(encoding="utf-8"))
    assert state.requests == 12 and state.batch_id.startswith("msgbatch_")
    assert "resume polling" in said[-1]

    # The job starts again: a new backend and runner find the state file and poll that batch.
    polls: list[float] = []

    def wait_for_the_batch(seconds: float) -> None:
        polls.append(seconds)
        srv.end_batches()

    said.clear()
    again = batch_runner(make_backend(), suite, sleep=wait_for_the_batch, messages=said)
    run = run_suite(spec_of(suite), make_backend(), suite.root, batch=again)
    assert srv.stats().batches == 1, "the batch was submitted once"
    assert polls == [0.02]
    assert run.errors == 0 and run.batch
    assert said[0] == f"resuming batch {state.batch_id} (state in {path})"
    assert state_files(suite) == []


def test_a_batch_the_api_no_longer_knows_is_submitted_again(
    srv: MessagesServer, suite: LoadedConfig, make_backend: Callable[..., AnthropicBackend]
) -> None:
    backend = make_backend()
    said: list[str] = []
    runner = batch_runner(backend, suite, messages=said)
    jobs = build_jobs(spec_of(suite).suite, spec_of(suite).prompt, spec_of(suite).cases.cases, 1)
    key = run_key("shop", "anthropic", [(custom_id(i, j), j.request) for i, j in enumerate(jobs)])
    path = runner.state_path(key)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps(
            {
                "batch_id": "msgbatch_gone",
                "run_key": key,
                "backend": "anthropic",
                "requests": 12,
                "submitted_at": "2025-06-01T12:00:00Z",
            }
        ),
        encoding="utf-8",
    )
    run = run_suite(spec_of(suite), backend, suite.root, batch=runner)
    assert run.errors == 0 and srv.stats().batches == 1
    assert any("msgbatch_gone is gone" in m for m in said)
    # a state file that cannot be read is a one-line error, not a second payment
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(UserError, match="batch state file"):
        run_suite(spec_of(suite), backend, suite.root, batch=runner)


def test_errored_expired_and_missing_results_are_errors_with_their_reason(
    srv: MessagesServer, suite: LoadedConfig, make_backend: Callable[..., AnthropicBackend]
) -> None:
    spec = spec_of(suite)
    jobs = build_jobs(spec.suite, spec.prompt, spec.cases.cases, 1)
    ids = [custom_id(i, job) for i, job in enumerate(jobs)]
    srv.knobs.batch_errored_ids = [ids[2]]
    srv.knobs.batch_expired_ids = [ids[5]]
    backend = make_backend()
    run = run_suite(spec, backend, suite.root, batch=batch_runner(backend, suite))
    assert len(run.cases) == 12, "nothing dropped"
    failed = {c.id: c.outcomes[0] for c in run.cases if c.error}
    assert sorted(failed) == [jobs[2].case_id, jobs[5].case_id]
    errored, expired = failed[jobs[2].case_id], failed[jobs[5].case_id]
    assert errored.error_kind == "bad_request" and "invalid_request_error" in (errored.error or "")
    assert expired.error_kind == "timeout" and "expired" in (expired.error or "")
    assert all(o.score is None for o in failed.values()), "an error is never scored as wrong"
    assert summarise(run).errors == 2


class LossyBatches:
    """A batch backend whose results come reversed, lose the first request and carry one of no
    request. Each reply's text is its request's model, so the mapping shows."""

    name: ClassVar[str] = "lossy"
    supports_batch: ClassVar[bool] = True

    def __init__(self) -> None:
        self.items: list[tuple[str, Request]] = []

    def submit_batch(self, items: Sequence[tuple[str, Request]]) -> BatchStatus:
        self.items = list(items)
        return BatchStatus(id="msgbatch_lossy", phase="ended", succeeded=len(items))

    def batch_status(self, batch_id: str) -> BatchStatus:
        raise AssertionError("an ended batch is not polled again")

    def batch_results(self, batch_id: str) -> list[tuple[str, Reply]]:
        kept = [(cid, Reply(text=request.model)) for cid, request in self.items[1:]]
        return [("someone-else", Reply(text="?")), *reversed(kept)]


def test_a_request_without_a_result_is_an_error_never_dropped(tmp_path: Path) -> None:
    said: list[str] = []
    runner = BatchExecutor(LossyBatches(), tmp_path, on_status=said.append)
    jobs = [
        Job(i, 0, f"c{i}", None, Request(system="s", messages=(), model=f"m{i}")) for i in range(3)
    ]
    outcomes, interrupted = runner.execute(jobs, accept, label="lossy")
    assert not interrupted and len(outcomes) == 3
    assert outcomes[0].error == "batch msgbatch_lossy returned no result for this request"
    assert [(o.error, o.text) for o in outcomes[1:]] == [(None, "m1"), (None, "m2")]
    assert "warning: batch msgbatch_lossy returned 1 results of no request" in said


def accept(expected: object, text: str) -> Score:
    return Score(answer=text, score=1.0, format_ok=True)


def test_the_stand_in_validates_a_batch_as_the_api_does(srv: MessagesServer) -> None:
    with anthropic.Anthropic(api_key=KEY, base_url=srv.url, max_retries=0) as client:
        good: Any = {
            "model": MODEL,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}],
        }
        for requests, match in [
            ([], "at least one request"),
            ([{"custom_id": "a b", "params": good}], "custom_id"),
            ([{"custom_id": "a", "params": good}, {"custom_id": "a", "params": good}], "duplicate"),
            ([{"custom_id": "a", "params": {**good, "max_tokens": 0}}], "max_tokens"),
        ]:
            with pytest.raises(anthropic.BadRequestError, match=match):
                client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        with pytest.raises(anthropic.NotFoundError):
            client.messages.batches.retrieve("msgbatch_nope")
        srv.knobs.batch_latency_s = 30
        batch = client.messages.batches.create(requests=[{"custom_id": "a", "params": good}])
        assert batch.processing_status == "in_progress" and batch.results_url is None
        assert client.messages.batches.cancel(batch.id).processing_status == "canceling"
        ended = client.messages.batches.retrieve(batch.id)
        assert ended.processing_status == "ended" and ended.request_counts.canceled == 1
        (line,) = client.messages.batches.results(batch.id)
        assert line.custom_id == "a" and line.result.type == "canceled"
    assert srv.stats().batches == 1


# ---------------------------------------------------------------- the CLI


def test_the_cli_runs_a_batch_with_the_flag_or_the_model_option(
    srv: MessagesServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
    flag = write_suite(tmp_path / "flag", cases=6, batch_poll_s=0.01)
    assert cli.main(["run", "v3", "--config", str(flag.path), "--batch"]) == 0
    err = capsys.readouterr().err
    assert "submitted batch msgbatch_" in err and "ended: 6 succeeded" in err
    assert find_run("latest", flag.state_dir).batch

    option = write_suite(tmp_path / "option", cases=6, batch=True, batch_poll_s=0.01)
    assert cli.main(["noise", "v3", "--config", str(option.path), "--repeats", "2"]) == 0
    assert find_run("latest", option.state_dir).batch
    assert srv.stats().batches == 2
    assert [ex for ex in srv.requests if ex.path == "/v1/messages"] == []


def test_batch_on_a_backend_without_batches_is_a_one_line_error(
    bike_shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["run", "v1", "--config", str(bike_shop / "evalgate.yml"), "--batch"])
    assert code == 2
    assert "the fake backend has no batch API" in capsys.readouterr().err
