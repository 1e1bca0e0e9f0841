"""The judge scorer: a model grades each reply against a rubric.

The judge here is a tiny fake of the Backend protocol (what a judge model would answer); the
system under test is the fake classifier. Both go through the real pipeline.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import shop_suite

from evalgate.analysis.summary import summarise
from evalgate.backends.base import BackendContext, Reply, Request
from evalgate.backends.fake import FakeBackend
from evalgate.config.load import LoadedConfig
from evalgate.config.models import JudgeScorer as JudgeConfig
from evalgate.errors import ConfigError
from evalgate.report.render import render_model
from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite
from evalgate.runs.schema import Run
from evalgate.scorers.base import ScoringError, build_scorer
from evalgate.scorers.judge import SYSTEM, read_judgement

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bike-shop"
RUBRIC = "The reply names the category a shop assistant would route the message to."
JUDGE_MODEL = {"backend": "anthropic", "name": "claude-haiku-4-5", "max_tokens": 200}


class Judge:
    """A judge model that answers what ``answer(request)`` says, counting its calls."""

    name: ClassVar[str] = "judge"
    offline: ClassVar[bool] = False

    def __init__(self, answer: Callable[[Request], Reply]) -> None:
        self.answer = answer
        self.requests: list[Request] = []
        self._lock = threading.Lock()

    def complete(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
        return self.answer(request)


def says(text: str, **usage: Any) -> Callable[[Request], Reply]:
    fields = {"input_tokens": 100, "output_tokens": 20, "stop_reason": "end_turn"} | usage
    return lambda _request: Reply(text=text, **fields)


VERDICT = json.dumps({"score": 0.8, "reason": "Routes the message correctly."})


def write_suite(
    root: Path, *, cases: int = 8, scorer: dict[str, Any] | None = None
) -> LoadedConfig:
    model = {"backend": "fake", "name": "fake", "options": {"rules_file": "fake-rules.yml"}}
    judge = {"kind": "judge", "rubric": RUBRIC, "model": JUDGE_MODEL}
    return shop_suite(root, cases=cases, model=model, scorer=scorer or judge, renumber=False)


def judged_run(loaded: LoadedConfig, judge: Judge, version: str = "v3") -> Run:
    name, suite = loaded.suite(None)
    spec = RunSpec(
        suite_name=name,
        suite=suite,
        prompt=load_prompt(loaded, suite, version),
        cases=load_suite_cases(loaded, suite),
    )
    backend = FakeBackend(suite.model, BackendContext(base_dir=loaded.root))
    return run_suite(spec, backend, loaded.root, judge=judge)


def test_scores_and_reasons_go_into_the_run(tmp_path: Path) -> None:
    judge = Judge(says(VERDICT))
    run = judged_run(write_suite(tmp_path / "s"), judge)
    assert len(run.cases) == 8 and run.errors == 0
    for case in run.cases:
        (outcome,) = case.outcomes
        assert outcome.score == 0.8 and case.score == 0.8 and case.passed
        assert outcome.reason == "Routes the message correctly."
        assert outcome.answer == "0.8" and outcome.format_ok
        assert outcome.text and outcome.text != VERDICT  # the reply under test, not the verdict
    summary = summarise(run)
    assert summary.accuracy.rate == pytest.approx(0.8)
    assert run.scorer["kind"] == "judge" and run.scorer["rubric"] == RUBRIC


def test_the_judge_sees_the_rubric_the_case_the_reference_and_the_reply(tmp_path: Path) -> None:
    judge = Judge(says(VERDICT))
    run = judged_run(write_suite(tmp_path / "s", cases=1), judge)
    (request,) = judge.requests
    (case,) = run.cases
    assert request.system == SYSTEM
    assert request.model == "claude-haiku-4-5" and request.max_tokens == 200
    (turn,) = request.messages
    assert f"<rubric>\n{RUBRIC}\n</rubric>" in turn.content
    assert case.input and json.dumps(case.input["message"])[1:-1] in turn.content
    assert f"<reference>\n{case.expected}\n</reference>" in turn.content
    assert f"<reply>\n{case.outcomes[0].text}\n</reply>" in turn.content


def test_judge_calls_and_tokens_are_counted_apart(tmp_path: Path) -> None:
    judge = Judge(says(VERDICT, cache_read_tokens=50, attempts=2))
    run = judged_run(write_suite(tmp_path / "s"), judge)
    n = len(run.cases)
    costs = summarise(run).costs
    assert costs.judge_model == "claude-haiku-4-5"
    assert costs.judge_calls == 2 * n  # every attempt is a call
    assert costs.judge_usage.input_tokens == 150 * n  # cache reads are input the judge read
    assert costs.judge_usage.output_tokens == 20 * n
    # claude-haiku-4-5: $1 in, $5 out per million
    assert costs.judge_cost == pytest.approx((150 * n * 1.0 + 20 * n * 5.0) / 1e6)
    # the system under test's tokens do not include the judge's
    sut_in = sum(o.input_tokens for c in run.cases for o in c.outcomes)
    assert costs.usage.input_tokens == sut_in
    assert all(o.judge_input_tokens == 150 for c in run.cases for o in c.outcomes)
    text = render_model("run", summarise(run), "text")
    assert f"Judge         claude-haiku-4-5: {2 * n} calls · in {150 * n:,} · out {20 * n}" in text


@pytest.mark.parametrize(
    "verdict",
    [
        "The reply is fine.",
        "",
        '{"score": 1.5, "reason": "too good"}',
        '{"score": -0.1}',
        '{"score": "high", "reason": "x"}',
        '{"score": true}',
        '{"reason": "forgot the score"}',
        '{"score": 0.5, "reason": ',
    ],
)
def test_an_unreadable_judgement_is_an_error_not_a_wrong_answer(
    tmp_path: Path, verdict: str
) -> None:
    run = judged_run(write_suite(tmp_path / "s", cases=3), Judge(says(verdict)))
    assert run.errors == 3 and run.scored() == []
    for case in run.cases:
        (outcome,) = case.outcomes
        assert outcome.error_kind == "malformed"
        assert "the judge's reply has no score in [0, 1]" in (outcome.error or "")
        assert outcome.score is None and case.passed is None
        assert outcome.text  # the reply under test is kept for the report
    assert summarise(run).accuracy.n == 0


def test_a_failed_judge_call_is_an_error_with_its_kind(tmp_path: Path) -> None:
    failed = Reply(error="529 overloaded_error: Overloaded", error_kind="overloaded", attempts=6)
    run = judged_run(write_suite(tmp_path / "s", cases=3), Judge(lambda _r: failed))
    assert run.errors == 3
    for case in run.cases:
        (outcome,) = case.outcomes
        assert outcome.error_kind == "overloaded"
        assert outcome.error == "the judge call failed: 529 overloaded_error: Overloaded"
        assert outcome.score is None


def test_some_judgements_fail_and_the_rest_are_scored(tmp_path: Path) -> None:
    def mixed(request: Request) -> Reply:
        if "<reference>\ncomplaint\n" in request.messages[0].content:
            return Reply(text="no verdict", input_tokens=10)
        return Reply(text='{"score": 1, "reason": "right"}', input_tokens=10)

    run = judged_run(write_suite(tmp_path / "s", cases=12), Judge(mixed))
    errors = [c for c in run.cases if c.error]
    assert errors and len(errors) < len(run.cases)
    assert all(c.outcomes[0].error_kind == "malformed" for c in errors)
    assert all(c.score == 1.0 for c in run.scored())
    assert summarise(run).accuracy.n == len(run.cases) - len(errors)


def test_a_judge_that_thinks_aloud_is_still_read() -> None:
    reply = (
        'The reply was {"category": "booking"}, and the customer asked to book a service.\n'
        '{"score": 1, "reason": "Correct category."}'
    )
    assert read_judgement(reply) == (1.0, "Correct category.")
    assert read_judgement('```json\n{"score": 0, "reason": "Wrong {sic}."}\n```') == (
        0.0,
        "Wrong {sic}.",
    )
    with pytest.raises(ScoringError):
        read_judgement('{"score": {"value": 1}}')


def test_changing_the_rubric_or_the_judge_changes_the_scorer_hash(tmp_path: Path) -> None:
    judge = Judge(says(VERDICT))
    base = judged_run(write_suite(tmp_path / "a", cases=2), judge)
    same = judged_run(write_suite(tmp_path / "b", cases=2), judge)
    rubric = judged_run(
        write_suite(
            tmp_path / "c",
            cases=2,
            scorer={"kind": "judge", "rubric": RUBRIC + " Be strict.", "model": JUDGE_MODEL},
        ),
        judge,
    )
    model = judged_run(
        write_suite(
            tmp_path / "d",
            cases=2,
            scorer={
                "kind": "judge",
                "rubric": RUBRIC,
                "model": {**JUDGE_MODEL, "name": "claude-sonnet-4-5"},
            },
        ),
        judge,
    )
    assert same.scorer_sha256 == base.scorer_sha256
    assert len({base.scorer_sha256, rubric.scorer_sha256, model.scorer_sha256}) == 3


def test_a_rubric_file_is_read_beside_the_config(tmp_path: Path) -> None:
    loaded = write_suite(
        tmp_path / "s",
        cases=1,
        scorer={"kind": "judge", "rubric_file": "rubric.md", "model": JUDGE_MODEL},
    )
    (loaded.root / "rubric.md").write_text("Grade strictly.\n", encoding="utf-8")
    judge = Judge(says(VERDICT))
    judged_run(loaded, judge)
    assert "<rubric>\nGrade strictly.\n</rubric>" in judge.requests[0].messages[0].content
    config = JudgeConfig(kind="judge", rubric_file="missing.md", model=JUDGE_MODEL)
    with pytest.raises(ConfigError, match="rubric file does not exist"):
        build_scorer(config, loaded.root, judge)


def test_an_edited_rubric_file_changes_the_scorer_hash(tmp_path: Path) -> None:
    # The config names the file, not its text: without its content in the hash, runs graded by
    # two different rubrics would be compared as if one judge had graded both.
    scorer = {"kind": "judge", "rubric_file": "rubric.md", "model": JUDGE_MODEL}
    loaded = write_suite(tmp_path / "s", cases=1, scorer=scorer)
    rubric = loaded.root / "rubric.md"
    judge = Judge(says(VERDICT))
    rubric.write_text("Grade strictly.\n", encoding="utf-8")
    first = judged_run(loaded, judge)
    again = judged_run(loaded, judge)
    rubric.write_text("Grade leniently.\n", encoding="utf-8")
    edited = judged_run(loaded, judge)
    assert first.scorer_sha256 == again.scorer_sha256 != edited.scorer_sha256
    assert first.scorer == edited.scorer  # the config itself is unchanged


def test_a_judge_scorer_needs_a_judge_backend(tmp_path: Path) -> None:
    config = JudgeConfig(kind="judge", rubric=RUBRIC, model=JUDGE_MODEL)
    with pytest.raises(ValueError, match="needs a judge backend"):
        build_scorer(config, tmp_path)
