"""The runner under faults: a refused first request, a fault storm, repeats, Ctrl-C, progress.

The system under test is the Anthropic backend on the real SDK against the Messages stand-in,
except where a tiny Backend fake is the point (stopping midway).
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import CliResult, shop_suite, spec_of

from evalgate.analysis.summary import summarise
from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext, Reply, Request
from evalgate.backends.fake import FakeBackend
from evalgate.config.load import LoadedConfig
from evalgate.config.models import ModelSettings
from evalgate.errors import BackendError
from evalgate.report.render import render_model
from evalgate.running.execute import Job, Progress, execute
from evalgate.running.progress import ProgressPrinter
from evalgate.running.suite import RunSpec, build_jobs, run_suite
from evalgate.runs.resume import fill, unsent
from evalgate.runs.schema import save_run
from evalgate.scorers.base import Scorer, build_scorer
from tests.support.messages_server import Knobs, MessagesServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bike-shop"
MODEL = "claude-haiku-4-5"
FAST = {"base_s": 0.01, "cap_s": 0.05}


def write_suite(root: Path, *, cases: int, model: dict[str, Any]) -> LoadedConfig:
    """A suite over the first ``cases`` bike-shop cases (cycled, new ids), all on the dev side."""
    return shop_suite(root, cases=cases, model=model, concurrency=16)


def jobs_and_scorer(spec: RunSpec, base_dir: Path) -> tuple[list[Job], Scorer]:
    cases = list(spec.cases.cases)
    return (
        build_jobs(spec.suite, spec.prompt, cases, spec.repeats),
        build_scorer(spec.suite.scorer, base_dir),
    )


@pytest.fixture
def standin_suite(
    tmp_path: Path, srv: MessagesServer
) -> Iterator[Callable[..., tuple[LoadedConfig, AnthropicBackend]]]:
    """A suite on the anthropic backend, and the backend pointed at the stand-in (closed after)."""
    made: list[AnthropicBackend] = []

    def make(
        cases: int, model: str = MODEL, **options: Any
    ) -> tuple[LoadedConfig, AnthropicBackend]:
        options = {"retry": FAST, **options}
        settings = {"backend": "anthropic", "name": model, "max_tokens": 64, "options": options}
        loaded = write_suite(tmp_path / f"suite{len(made)}", cases=cases, model=settings)
        env = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": srv.url}
        backend = AnthropicBackend(
            ModelSettings(**settings), BackendContext(base_dir=loaded.root, env=env)
        )
        made.append(backend)
        return loaded, backend

    yield make
    for backend in made:
        backend.close()


# ---------------------------------------------------------------- a refused first request


@pytest.mark.parametrize(
    ("knobs", "script", "api_message"),
    [
        ({"unknown_models": ["claude-nope"]}, [], "404 not_found_error: model: claude-nope"),
        (
            {"unknown_models": ["claude-nope"], "unknown_model_status": 400},
            [],
            "400 invalid_request_error: model: claude-nope",
        ),
        ({}, ["bad_request"], "400 invalid_request_error: messages: injected"),
        ({}, ["auth"], "401 authentication_error: invalid x-api-key"),
    ],
    ids=["unknown-model-404", "unknown-model-400", "bad-request", "bad-key"],
)
def test_a_refused_first_request_stops_the_run_after_one_call(
    srv: MessagesServer,
    standin_suite: Callable[..., tuple[LoadedConfig, AnthropicBackend]],
    knobs: dict[str, Any],
    script: list[str],
    api_message: str,
) -> None:
    for name, value in knobs.items():
        setattr(srv.knobs, name, value)
    srv.script(script)
    loaded, backend = standin_suite(40, model="claude-nope")
    jobs, scorer = jobs_and_scorer(spec_of(loaded), loaded.root)
    with pytest.raises(BackendError) as caught:
        execute(jobs, backend, scorer, concurrency=16)
    message = str(caught.value)
    assert "case 'c0000'" in message and api_message in message
    assert "check the model name" in message
    assert len(srv.requests) == 1  # not one per case


# ---------------------------------------------------------------- a fault storm


STORM = {
    "rate_limit": 0.05,
    "overloaded": 0.04,
    "server_error": 0.04,
    "drop": 0.03,
    "malformed": 0.02,
    "slow": 0.02,
}
STREAM_STORM = {**STORM, "server_error": 0.02, "stream_error": 0.02}
KINDS = {"rate_limit", "overloaded", "server", "connection", "malformed", "timeout"}


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_a_fault_storm_loses_no_case_and_scores_no_fault_as_wrong(
    tmp_path: Path,
    srv: MessagesServer,
    standin_suite: Callable[..., tuple[LoadedConfig, AnthropicBackend]],
    stream: bool,
) -> None:
    rates = STREAM_STORM if stream else STORM
    assert sum(rates.values()) == pytest.approx(0.2)
    srv.knobs = Knobs(seed=5, retry_after_s=0.01, slow_s=2.0, **rates)
    n = 200
    loaded, backend = standin_suite(
        n, stream=stream, timeout_s=0.5, retry={**FAST, "max_attempts": 2}
    )
    run = run_suite(spec_of(loaded), backend, loaded.root)

    # every case accounted for, in order, once
    assert [c.id for c in run.cases] == [f"c{i:04d}" for i in range(n)]
    outcomes = [o for c in run.cases for o in c.outcomes]
    errors = [o for o in outcomes if o.error is not None]
    assert run.errors == len(errors) and summarise(run).errors == len(errors)
    assert sum(k for _, k in summarise(run).error_kinds) == len(errors)
    # about 4% of cases fail twice in a row at a 20% fault rate: some, not many
    assert 1 <= len(errors) <= 25
    for o in errors:
        assert o.error_kind in KINDS and o.error
        assert o.score is None and o.answer is None and o.attempts == 2
    # every attempt reached the stand-in and was counted: nothing retried behind our back
    assert sum(o.attempts for o in outcomes) == srv.stats().requests
    assert any(o.attempts == 2 and o.error is None for o in outcomes)
    # a scored case got the model's real answer: a fault never turns into a wrong answer
    clean = run_suite(
        spec_of(loaded),
        FakeBackend(
            ModelSettings(options={"rules_file": "fake-rules.yml"}),
            BackendContext(base_dir=loaded.root),
        ),
        loaded.root,
    )
    truth = {c.id: c.answer for c in clean.cases}
    scored = [c for c in run.cases if c.error is None]
    assert len(scored) == n - len(errors)
    assert all(c.answer == truth[c.id] for c in scored)
    assert run.incomplete == (len(errors) / n > run.max_error_share)


# ---------------------------------------------------------------- repeats


def test_repeats_give_k_outcomes_a_mean_score_and_flips(
    srv: MessagesServer, standin_suite: Callable[..., tuple[LoadedConfig, AnthropicBackend]]
) -> None:
    srv.knobs = Knobs(seed=3, flip_rate=0.3)
    n = 30
    loaded, backend = standin_suite(n)
    run = run_suite(spec_of(loaded, repeats=3), backend, loaded.root)
    assert run.repeats == 3 and len(run.cases) == n
    assert len(srv.requests) == 3 * n
    for case in run.cases:
        assert len(case.outcomes) == 3
        scores = [o.score for o in case.outcomes]
        assert case.score == pytest.approx(sum(s or 0.0 for s in scores) / 3)
        assert case.flipped == (len({s for s in scores}) > 1)
    flipped = [c for c in run.cases if c.flipped]
    assert 1 <= len(flipped) < n
    assert any(c.score not in (0.0, 1.0) for c in run.cases)  # a mean, not a vote
    text = render_model("run", summarise(run), "text")
    assert f"{n} cases × 3 repeats" in text


def test_without_flips_no_case_flips(
    srv: MessagesServer, standin_suite: Callable[..., tuple[LoadedConfig, AnthropicBackend]]
) -> None:
    srv.knobs = Knobs(seed=3, flip_rate=0.0)
    loaded, backend = standin_suite(30)
    run = run_suite(spec_of(loaded, repeats=3), backend, loaded.root)
    assert not any(c.flipped for c in run.cases)
    assert all(c.score in (0.0, 1.0) for c in run.cases)


# ---------------------------------------------------------------- Ctrl-C


class StopsMidway:
    """The fake model, which asks the run to stop (as Ctrl-C does) at its k-th call."""

    name: ClassVar[str] = "fake"
    offline: ClassVar[bool] = True

    def __init__(self, base_dir: Path, stop: threading.Event, k: int) -> None:
        settings = ModelSettings(options={"rules_file": "fake-rules.yml"})
        self.inner = FakeBackend(settings, BackendContext(base_dir=base_dir))
        self.stop = stop
        self.k = k
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request: Request) -> Reply:
        with self._lock:
            self.calls += 1
            if self.calls == self.k:
                self.stop.set()
        return self.inner.complete(request)


def offline_suite(tmp_path: Path, cases: int) -> LoadedConfig:
    model = {"backend": "fake", "name": "fake", "options": {"rules_file": "fake-rules.yml"}}
    return write_suite(tmp_path / "offline", cases=cases, model=model)


def test_a_stop_midway_keeps_what_was_scored_and_marks_the_rest(tmp_path: Path) -> None:
    loaded = offline_suite(tmp_path, 60)
    jobs, scorer = jobs_and_scorer(spec_of(loaded), loaded.root)
    stop = threading.Event()
    backend = StopsMidway(loaded.root, stop, k=10)
    outcomes, interrupted = execute(jobs, backend, scorer, concurrency=4, stop=stop)
    assert interrupted
    assert len(outcomes) == len(jobs)  # nothing dropped
    scored = [o for o in outcomes if o.error is None]
    rest = [o for o in outcomes if o.error is not None]
    assert len(scored) == backend.calls  # every call made was kept
    assert 10 <= backend.calls < len(jobs)
    assert all(o.score is not None for o in scored)
    assert rest and all(o.error_kind == "interrupted" for o in rest)
    assert all(o.error == "interrupted before this call was made" for o in rest)


def test_ctrl_c_through_the_pipeline_makes_an_interrupted_incomplete_run(tmp_path: Path) -> None:
    loaded = offline_suite(tmp_path, 60)
    spec = spec_of(loaded, concurrency=4)
    fake = FakeBackend(
        ModelSettings(options={"rules_file": "fake-rules.yml"}),
        BackendContext(base_dir=loaded.root),
    )
    pressed: list[int] = []

    def ctrl_c(p: Progress) -> None:
        if p.done == 15 and not pressed:
            pressed.append(p.done)
            raise KeyboardInterrupt

    run = run_suite(spec, fake, loaded.root, on_progress=ctrl_c)
    assert pressed == [15]
    assert run.interrupted and run.incomplete
    assert len(run.cases) == 60
    kinds = {c.outcomes[0].error_kind for c in run.cases if c.error}
    assert kinds == {"interrupted"}
    assert 15 <= len(run.scored()) < 60
    text = render_model("run", summarise(run), "text")
    not_run = 60 - len(run.scored())
    assert f"the run was interrupted: {not_run} of 60 cases were not run" in text
    assert "cases errored" not in text
    # Resuming sends exactly the calls the interrupt kept from being made, and no others.
    assert unsent(run) == {(c.id, 0) for c in run.cases if c.error}
    rest = run_suite(replace(spec, only=unsent(run)), fake, loaded.root)
    assert len(rest.scored()) == not_run
    whole = fill(run, rest)
    assert not whole.interrupted and not whole.incomplete
    assert len(whole.scored()) == 60 and unsent(whole) == frozenset()


def test_cases_an_interrupt_kept_from_running_are_not_run_not_errored(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    # The run report, its Markdown and `evalgate list` say "not run" for the cases Ctrl-C kept
    # from being sent: none of them errored.
    loaded = offline_suite(tmp_path, 30)
    fake = FakeBackend(
        ModelSettings(options={"rules_file": "fake-rules.yml"}),
        BackendContext(base_dir=loaded.root),
    )

    def ctrl_c(p: Progress) -> None:
        if p.done == 10:
            raise KeyboardInterrupt

    run = run_suite(spec_of(loaded, concurrency=1), fake, loaded.root, on_progress=ctrl_c)
    not_run = 30 - len(run.scored())
    assert run.interrupted and 0 < not_run < 30
    save_run(run, loaded.state_dir)
    config = str(loaded.path)

    code, text, err = cli("report", run.name, "--config", config)
    assert code == 3  # an incomplete run
    assert (
        f"the run is incomplete: it was interrupted; `evalgate run v3 --resume {run.name}` "
        "sends the cases not run (exit 3)"
    ) in err
    lines = text.splitlines()
    assert "Errors              0" in lines
    assert (
        f"Not run       {not_run:7d}  (interrupted); not counted as wrong, nor as errors" in lines
    )
    assert any(ln.startswith("Failed cases  0 errored, ") for ln in lines)
    assert f"0 errored, {not_run} not run (not listed), " in text
    assert "ERROR " not in text and "[interrupted]" not in text  # the not-run are not listed

    code, markdown, _ = cli("report", run.name, "--config", config, "--format", "markdown")
    assert f"> Incomplete run: {not_run} of 30 cases not run (interrupted; " in markdown
    assert "cases errored" not in markdown

    code, listed, _ = cli("list", "--config", config)
    assert listed.splitlines()[-1].endswith(f" 0, {not_run} not run")
    code, as_json, _ = cli("list", "--config", config, "--json")
    assert json.loads(as_json)[0]["errors"] == 0 and json.loads(as_json)[0]["not_run"] == not_run


# ---------------------------------------------------------------- progress


def progress_lines(tmp_path: Path, *, interactive: bool, every_s: float) -> str:
    loaded = offline_suite(tmp_path, 20)
    jobs, scorer = jobs_and_scorer(spec_of(loaded), loaded.root)
    fake = FakeBackend(
        ModelSettings(options={"rules_file": "fake-rules.yml"}),
        BackendContext(base_dir=loaded.root),
    )
    stream = io.StringIO()
    printer = ProgressPrinter(stream, interactive=interactive, every_s=every_s)
    execute(jobs, fake, scorer, concurrency=4, on_progress=printer)
    return stream.getvalue()


def test_progress_in_ci_is_plain_lines(tmp_path: Path) -> None:
    text = progress_lines(tmp_path, interactive=False, every_s=0.0)
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert len(lines) == 20  # every_s=0: a line per call
    assert lines[-1].startswith("20/20 calls · 0 errors · ") and "ETA 0s" in lines[-1]
    # the default interval prints only the last line on a run this short
    quiet = progress_lines(tmp_path / "again", interactive=False, every_s=5.0)
    assert quiet.count("\n") == 1 and quiet.startswith("20/20 calls")


def test_progress_on_a_terminal_redraws_one_line(tmp_path: Path) -> None:
    text = progress_lines(tmp_path, interactive=True, every_s=5.0)
    assert text.startswith("\r\x1b[K") and text.endswith("\n")
    assert text.count("\n") == 1 and "20/20 calls" in text
