"""Making runs and keeping them: the runner (backend calls, errors, concurrency, repeats), the
pipeline (config + cases + prompt -> Run) and the run file (save, load, list, find)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import CREATED, fake_backend

from evalgate.backends.base import Message, Reply, Request
from evalgate.config.load import load_config
from evalgate.config.models import LabelScorer
from evalgate.errors import BackendError, RunFileError, UserError
from evalgate.running.execute import Job, execute
from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite
from evalgate.runs.schema import (
    SCHEMA_VERSION,
    CaseResult,
    Run,
    find_run,
    iter_runs,
    read_run,
    runs_dir,
    save_run,
)
from evalgate.scorers.base import Score, build_scorer

# jobs_for expects booking: BOOKING is a right reply there, QUOTE a wrong one.
BOOKING = '{"category": "booking"}'
QUOTE = '{"category": "quote"}'


# ------------------------------------------------------------------------------------------
# Test backends: fakes of the Backend protocol that record what the runner did to them
# ------------------------------------------------------------------------------------------


class ScriptedBackend:
    """Replies from a script by case id (a list is played in call order); counts calls."""

    name: ClassVar[str] = "scripted"
    offline: ClassVar[bool] = True

    def __init__(self, script: dict[str, Reply | list[Reply]] | None = None) -> None:
        self.script = script or {}
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def complete(self, request: Request) -> Reply:
        case_id = str(request.case["id"])
        with self._lock:
            call = self.calls[case_id]
            self.calls[case_id] += 1
        planned = self.script.get(case_id, Reply(text=BOOKING))
        if isinstance(planned, list):
            planned = planned[call % len(planned)]
        return planned.model_copy()


class ConcurrencyBackend:
    """Holds each call briefly and records the most calls ever in flight at once."""

    name: ClassVar[str] = "concurrency"
    offline: ClassVar[bool] = True

    def __init__(self, hold_s: float = 0.02) -> None:
        self.hold_s = hold_s
        self.in_flight = 0
        self.max_in_flight = 0
        self.total = 0
        self._lock = threading.Lock()

    def complete(self, request: Request) -> Reply:
        with self._lock:
            self.in_flight += 1
            self.total += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(self.hold_s)
        with self._lock:
            self.in_flight -= 1
        return Reply(text=BOOKING)


class DictCache:
    """The runner's Cache protocol over a dict."""

    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}

    def get(self, request: Request, backend: str) -> Reply | None:
        return self.replies.get(backend + request.model_dump_json())

    def put(self, request: Request, backend: str, reply: Reply) -> None:
        self.replies[backend + request.model_dump_json()] = reply


def jobs_for(*case_ids: str, repeats: int = 1) -> list[Job]:
    jobs = []
    for index, case_id in enumerate(case_ids):
        request = Request(
            system="Classify as booking or quote.",
            messages=(Message(role="user", content=f"message {case_id}"),),
            model="scripted",
            case={"id": case_id},
        )
        jobs.extend(
            Job(case_index=index, repeat=r, case_id=case_id, expected="booking", request=request)
            for r in range(repeats)
        )
    return jobs


LABEL = build_scorer(LabelScorer(kind="label"), Path("."))


def ids(n: int) -> list[str]:
    return [f"c{i:02d}" for i in range(n)]


# ------------------------------------------------------------------------------------------
# Running cases
# ------------------------------------------------------------------------------------------


def test_errors_are_recorded_as_errors_never_wrong_never_dropped() -> None:
    backend = ScriptedBackend(
        {
            "c03": Reply(error="HTTP 529 overloaded after 5 attempts", error_kind="overloaded"),
            "c05": Reply(error="timed out", error_kind="timeout"),
            "c07": Reply(text=QUOTE),
        }
    )
    jobs = jobs_for(*ids(10))
    outcomes, interrupted = execute(jobs, backend, LABEL, concurrency=4)
    assert not interrupted
    assert len(outcomes) == len(jobs)
    by_id = {job.case_id: outcome for job, outcome in zip(jobs, outcomes, strict=True)}
    assert by_id["c03"].error == "HTTP 529 overloaded after 5 attempts"
    assert by_id["c03"].error_kind == "overloaded"
    assert by_id["c03"].score is None  # not a wrong answer
    assert by_id["c05"].error_kind == "timeout"
    assert by_id["c07"].score == 0.0
    assert by_id["c07"].error is None
    assert [o.score for o in outcomes].count(1.0) == 7


@pytest.mark.parametrize("kind", ["bad_request", "auth", "not_found"])
def test_a_fatal_error_on_the_first_request_stops_the_run(kind: str) -> None:
    backend = ScriptedBackend({"c00": Reply(error="model not found", error_kind=kind)})
    with pytest.raises(BackendError, match=r"first request.*'c00'.*model not found"):
        execute(jobs_for(*ids(20)), backend, LABEL, concurrency=4)
    # Sent alone: one call, not one per case.
    assert sum(backend.calls.values()) == 1


def test_a_fatal_error_after_the_first_request_is_an_error_outcome() -> None:
    backend = ScriptedBackend({"c04": Reply(error="bad request", error_kind="bad_request")})
    outcomes, _ = execute(jobs_for(*ids(6)), backend, LABEL, concurrency=2)
    assert [o.error_kind for o in outcomes] == [None] * 4 + ["bad_request", None]


def test_a_transient_error_on_the_first_request_does_not_stop_the_run() -> None:
    backend = ScriptedBackend({"c00": Reply(error="overloaded", error_kind="overloaded")})
    outcomes, _ = execute(jobs_for(*ids(5)), backend, LABEL, concurrency=2)
    assert outcomes[0].error_kind == "overloaded"
    assert all(o.score == 1.0 for o in outcomes[1:])


@pytest.mark.parametrize("concurrency", [1, 3])
def test_the_concurrency_bound_is_respected(concurrency: int) -> None:
    backend = ConcurrencyBackend()
    outcomes, _ = execute(jobs_for(*ids(16)), backend, LABEL, concurrency=concurrency)
    assert backend.total == 16
    assert len(outcomes) == 16
    # Never above the bound, and the bound is used (16 calls of 20 ms fill every slot).
    assert backend.max_in_flight == concurrency


def test_repeats_give_k_outcomes_per_case_in_job_order() -> None:
    backend = ScriptedBackend({"c01": [Reply(text=BOOKING), Reply(text=QUOTE)]})
    jobs = jobs_for("c00", "c01", repeats=4)
    outcomes, _ = execute(jobs, backend, LABEL, concurrency=1)
    assert len(outcomes) == 8
    assert backend.calls == {"c00": 4, "c01": 4}
    assert [o.score for o in outcomes[4:]] == [1.0, 0.0, 1.0, 0.0]


def test_a_scorer_that_raises_is_a_user_error_naming_the_case() -> None:
    def fussy(expected: Any, text: str) -> Score:
        if "quote" in text:
            raise KeyError("quote")
        return Score(answer="booking", score=1.0, format_ok=True)

    backend = ScriptedBackend({"c02": Reply(text=QUOTE)})
    with pytest.raises(UserError, match="scorer failed on case 'c02': KeyError") as caught:
        execute(jobs_for(*ids(4)), backend, fussy, concurrency=1)
    assert "quote" in str(caught.value)  # the reply is shown


def test_a_scorer_user_error_names_the_case_too() -> None:
    # The regex scorer compiles each case's expected answer: a bad one is a ConfigError.
    from evalgate.config.models import RegexScorer

    regex = build_scorer(RegexScorer(kind="regex"), Path("."))
    jobs = jobs_for("c00", "c01")
    jobs[1] = Job(
        case_index=1, repeat=0, case_id="c01", expected="(unclosed", request=jobs[1].request
    )
    jobs[0] = Job(case_index=0, repeat=0, case_id="c00", expected="book", request=jobs[0].request)
    with pytest.raises(UserError, match=r"case 'c01'.*invalid regex '\(unclosed'"):
        execute(jobs, ScriptedBackend(), regex, concurrency=1)


def test_a_stopped_run_keeps_what_was_scored_and_marks_the_rest() -> None:
    stop = threading.Event()
    stop.set()
    outcomes, interrupted = execute(
        jobs_for(*ids(5)), ScriptedBackend(), LABEL, concurrency=2, stop=stop
    )
    assert interrupted
    assert outcomes[0].score == 1.0
    assert [o.error_kind for o in outcomes[1:]] == ["interrupted"] * 4


def test_the_cache_answers_repeated_requests_but_never_keeps_errors() -> None:
    cache = DictCache()
    failing = {"c01": Reply(error="overloaded", error_kind="overloaded")}
    first = ScriptedBackend(failing)
    execute(jobs_for(*ids(3)), first, LABEL, concurrency=1, cache=cache)
    assert len(cache.replies) == 2
    second = ScriptedBackend()
    outcomes, _ = execute(jobs_for(*ids(3)), second, LABEL, concurrency=1, cache=cache)
    assert [o.cached for o in outcomes] == [True, False, True]
    assert second.calls == {"c01": 1}


def test_progress_is_reported_for_every_call() -> None:
    seen: list[tuple[int, int]] = []
    backend = ScriptedBackend({"c02": Reply(error="x", error_kind="server")})
    execute(
        jobs_for(*ids(4)),
        backend,
        LABEL,
        concurrency=2,
        on_progress=lambda p: seen.append((p.done, p.errors)),
    )
    assert [done for done, _ in seen] == [1, 2, 3, 4]
    assert seen[-1] == (4, 1)


# ------------------------------------------------------------------------------------------
# Pipeline: config + cases + prompt version -> Run
# ------------------------------------------------------------------------------------------

SUITE = """\
version: 1
suites:
  tiny:
    prompts: prompts/*.txt
    cases: cases.jsonl
    fields: {input: [message], expected: category}
    template: "<message>{{ message }}</message>"
    model:
      backend: fake
      name: fake-classifier
      options:
        rules:
          rules:
            - {label: booking, phrases: [book]}
            - {label: quote, phrases: [how much]}
    scorer: {kind: label}
"""
CASES = [
    {"id": "t1", "category": "booking", "message": "Can I book?", "split": "dev"},
    {"id": "t2", "category": "quote", "message": "How much?", "split": "dev"},
    {"id": "t3", "category": "quote", "message": "Book a quote", "split": "dev"},
    {"id": "t4", "category": "other", "message": "Parking?", "split": "regression"},
]
PROMPT = 'Labels: booking, quote, other. Reply in JSON: {"category": "..."}\n'


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "v1.txt").write_text(PROMPT)
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CASES))
    (tmp_path / "evalgate.yml").write_text(SUITE)
    return tmp_path


def run_tiny(root: Path, backend: Any = None, **spec: Any) -> Run:
    """A run of the tiny suite: on its fake backend unless another is given."""
    loaded = load_config(root / "evalgate.yml")
    name, suite = loaded.suite(None)
    run_spec = RunSpec(
        suite_name=name,
        suite=suite,
        prompt=load_prompt(loaded, suite, "v1"),
        cases=load_suite_cases(loaded, suite),
        **spec,
    )
    backend = backend or fake_backend(suite.model.options, loaded.root)
    return run_suite(run_spec, backend, loaded.root)


def test_a_run_carries_everything_needed_to_compare_later(tiny: Path) -> None:
    run = run_tiny(tiny)
    assert run.suite == "tiny"
    assert run.prompt.name == "v1"
    assert run.prompt.path == "prompts/v1.txt"
    assert run.prompt.sha256 == hashlib.sha256(PROMPT.encode()).hexdigest()
    assert run.model.backend == "fake"
    assert run.model.offline is True
    assert run.scorer == {"kind": "label", "field": "category"}
    assert run.repeats == 1
    # The hash of each case and of the whole case file.
    file_bytes = (tiny / "cases.jsonl").read_bytes()
    assert run.case_files == {"cases.jsonl": hashlib.sha256(file_bytes).hexdigest()}
    for case, record in zip(run.cases, CASES, strict=True):
        # The split field is left out: writing a case's split does not edit the case.
        content = {k: v for k, v in record.items() if k != "split"}
        canonical = json.dumps(content, sort_keys=True, separators=(",", ":"))
        assert case.hash == hashlib.sha256(canonical.encode()).hexdigest()
    assert len(run.cases_sha256) == 64
    assert run.name.startswith("tiny-v1-")
    # The fake's answers under the rules above: t3 says "book" before "quote".
    assert [(c.id, c.answer, c.passed) for c in run.cases] == [
        ("t1", "booking", True),
        ("t2", "quote", True),
        ("t3", "booking", False),
        ("t4", "other", True),
    ]
    assert [c.split for c in run.cases] == ["dev", "dev", "dev", "regression"]


def test_limit_takes_the_first_cases(tiny: Path) -> None:
    run = run_tiny(tiny, limit=2)
    assert [c.id for c in run.cases] == ["t1", "t2"]
    assert run.limited_to == 2


def test_repeats_give_k_outcomes_per_case_and_flips(tiny: Path) -> None:
    backend = ScriptedBackend({"t2": [Reply(text=QUOTE), Reply(text=BOOKING), Reply(text=QUOTE)]})
    run = run_tiny(tiny, repeats=3, backend=backend)
    assert run.repeats == 3
    assert all(len(c.outcomes) == 3 for c in run.cases)
    flipped = {c.id for c in run.cases if c.flipped}
    # t2 expects quote: two of three replies right, one wrong.
    assert flipped == {"t2"}
    t2 = run.by_id()["t2"]
    assert t2.score == pytest.approx(2 / 3)
    assert t2.passed is True


def test_a_backend_error_makes_an_error_case_in_the_run(tiny: Path) -> None:
    backend = ScriptedBackend({"t2": Reply(error="boom", error_kind="server")})
    run = run_tiny(tiny, backend=backend)
    t2 = run.by_id()["t2"]
    assert t2.error == "boom"
    assert t2.score is None and t2.passed is None
    assert run.errors == 1
    assert [c.id for c in run.scored()] == ["t1", "t3", "t4"]
    # One of four is over the default 2% error share.
    assert run.incomplete


# ------------------------------------------------------------------------------------------
# CaseResult and Run properties
# ------------------------------------------------------------------------------------------


def test_case_result_properties(make_case: Callable[..., CaseResult]) -> None:
    steady = make_case("a", "booking", ["booking", "booking"])
    assert (steady.score, steady.passed, steady.flipped, steady.format_ok) == (
        1.0,
        True,
        False,
        True,
    )
    # Half right is a pass (>= 0.5), and it flipped between repeats.
    half = make_case("b", "booking", ["booking", "quote"])
    assert (half.score, half.passed, half.flipped) == (0.5, True, True)
    wrong = make_case("c", "booking", ["quote", "quote", "booking"])
    assert wrong.score == pytest.approx(1 / 3)
    assert wrong.passed is False
    errored = make_case("d", error="boom")
    assert (errored.error, errored.score, errored.passed, errored.format_ok) == (
        "boom",
        None,
        None,
        None,
    )
    assert make_case("e", message="Hello\n  there\tfriend").message() == "Hello there friend"


@pytest.mark.parametrize(("errors", "incomplete"), [(0, False), (1, False), (2, True)])
def test_a_run_is_incomplete_over_the_error_share(
    make_case: Callable[..., CaseResult],
    make_run: Callable[..., Run],
    errors: int,
    incomplete: bool,
) -> None:
    # 1 of 50 is exactly the 2% allowed; 2 of 50 is over it.
    cases = [make_case(f"c{i}", error="x" if i < errors else None) for i in range(50)]
    assert make_run(cases, max_error_share=0.02).incomplete is incomplete


def test_an_interrupted_run_is_incomplete(make_run: Callable[..., Run]) -> None:
    assert make_run(interrupted=True).incomplete


# ------------------------------------------------------------------------------------------
# Run files
# ------------------------------------------------------------------------------------------


def test_a_run_file_round_trips(tmp_path: Path, make_run: Callable[..., Run]) -> None:
    run = make_run()
    path = save_run(run, tmp_path)
    assert path == runs_dir(tmp_path) / f"{run.name}.json"
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION == 1
    assert read_run(path) == run
    assert not list(runs_dir(tmp_path).glob("*.tmp"))


@pytest.fixture
def saved(tmp_path: Path, make_run: Callable[..., Run]) -> Path:
    """Three saved runs: v1, then v2 twice (the later one 1 hour on)."""
    for name, prompt, hours in [
        ("bike-shop-v1-a", "v1", 0),
        ("bike-shop-v2-b", "v2", 0),
        ("bike-shop-v2-c", "v2", 1),
    ]:
        run = make_run(
            name=name, prompt={"name": prompt}, created_at=CREATED + timedelta(hours=hours)
        )
        save_run(run, tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("ref", "name"),
    [
        ("bike-shop-v2-b", "bike-shop-v2-b"),  # by name
        ("bike-shop-v1", "bike-shop-v1-a"),  # by a unique prefix
        ("latest:v2", "bike-shop-v2-c"),  # the newest run of a prompt version
        ("latest:v1", "bike-shop-v1-a"),
        ("latest", "bike-shop-v2-c"),
    ],
)
def test_find_run(saved: Path, ref: str, name: str) -> None:
    assert find_run(ref, saved).name == name


def test_find_run_by_path(saved: Path) -> None:
    path = runs_dir(saved) / "bike-shop-v2-b.json"
    assert find_run(str(path), Path("/nonexistent")).name == "bike-shop-v2-b"


@pytest.mark.parametrize(
    ("ref", "match"),
    [
        ("bike-shop-v2", "matches 2 runs: bike-shop-v2-b, bike-shop-v2-c"),
        ("nope", "no run named 'nope'.*evalgate list"),
        ("latest:v9", "no saved run of prompt 'v9'"),
    ],
)
def test_find_run_errors(saved: Path, ref: str, match: str) -> None:
    with pytest.raises(RunFileError, match=match):
        find_run(ref, saved)


def test_find_run_with_no_runs_at_all(tmp_path: Path) -> None:
    with pytest.raises(RunFileError, match="no saved runs"):
        find_run("latest", tmp_path)


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"",
        b"\xff\xfe\x00 binary",
        json.dumps({"schema_version": 2, "name": "x"}).encode(),
        json.dumps({"name": "x"}).encode(),
    ],
    ids=["invalid-json", "empty", "binary", "future-schema", "missing-fields"],
)
def test_a_corrupt_run_file_is_a_run_file_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(content)
    with pytest.raises(RunFileError) as caught:
        read_run(path)
    assert str(caught.value).startswith(f"{path}: ")


def test_a_missing_run_file_is_a_run_file_error(tmp_path: Path) -> None:
    with pytest.raises(RunFileError, match="does not exist"):
        read_run(tmp_path / "gone.json")


def test_listing_skips_corrupt_files(saved: Path) -> None:
    (runs_dir(saved) / "broken.json").write_bytes(b"\xff garbage")
    assert [run.name for _, run in iter_runs(saved)] == [
        "bike-shop-v1-a",
        "bike-shop-v2-b",
        "bike-shop-v2-c",
    ]
    assert list(iter_runs(saved / "elsewhere")) == []


@pytest.mark.parametrize(
    ("template", "says"),
    [
        ("<m>{{ mesage }}</m>", "'mesage' is undefined"),  # plain: printed by name
        ("{{ message | int(base=2) + missing }}", "'missing' is undefined"),  # the sandbox's
    ],
    ids=["plain", "sandboxed"],
)
def test_a_template_error_names_the_case_it_stopped_at(
    tmp_path: Path, template: str, says: str
) -> None:
    """The first case the template fails on, by id and line, before any call; a holdout case
    by neither."""
    from conftest import shop_suite

    loaded = shop_suite(
        tmp_path / "s",
        cases=3,
        model={"backend": "fake", "name": "fake-1", "options": {"rules_file": "fake-rules.yml"}},
    )
    config = load_config(loaded.path)
    suite = config.suite(None)[1].model_copy(update={"template": template})
    spec = RunSpec(
        suite_name="shop",
        suite=suite,
        prompt=load_prompt(config, suite, "v3"),
        cases=load_suite_cases(config, suite),
    )
    calls: list[Request] = []

    class Counting:
        name = "counting"

        def complete(self, request: Request) -> Reply:
            calls.append(request)
            return Reply(text="other")

    with pytest.raises(UserError) as caught:
        run_suite(spec, Counting(), tmp_path)  # type: ignore[arg-type]
    cases_file = config.root / "cases.jsonl"
    assert caught.value.where == f"template (case 'c0000', {cases_file}:1)"
    assert says in caught.value.what and calls == []

    held = spec.cases.cases[0].model_copy(update={"split": "holdout"})
    sealed = replace_cases(spec, held)
    with pytest.raises(UserError) as hidden:
        run_suite(sealed, Counting(), tmp_path)  # type: ignore[arg-type]
    assert hidden.value.where == "template (a holdout case)"
    assert "c0000" not in str(hidden.value) and calls == []


def replace_cases(spec: RunSpec, first: Any) -> RunSpec:
    from dataclasses import replace

    cases = spec.cases.model_copy(update={"cases": (first, *spec.cases.cases[1:])})
    return replace(spec, cases=cases, splits=frozenset({"dev", "holdout"}))
