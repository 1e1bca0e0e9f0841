"""The numbers of one run's report: rates with n and Wilson intervals, categories, the worst
category, the confusion matrix, costs and latency. Known answers come from arithmetic done
here or from the issue, never from an earlier run of the code."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from evalgate.analysis.summary import p95, summarise
from evalgate.report.render import render_model
from evalgate.runs.schema import CaseResult, Outcome, Run

CaseFactory = Callable[..., CaseResult]
RunFactory = Callable[..., Run]


def right_and_wrong(make_case: CaseFactory, right: int, wrong: int) -> list[CaseResult]:
    cases = [make_case(f"r{i:02d}") for i in range(right)]
    return cases + [make_case(f"w{i:02d}", "booking", "quote") for i in range(wrong)]


@pytest.mark.parametrize(
    ("right", "low", "high"),
    # From the issue (independent arithmetic): Wilson 95% for 22/30 and 23/30.
    [(22, 0.556, 0.858), (23, 0.591, 0.882)],
)
def test_accuracy_has_its_n_and_wilson_interval(
    make_case: CaseFactory, make_run: RunFactory, right: int, low: float, high: float
) -> None:
    summary = summarise(make_run(right_and_wrong(make_case, right, 30 - right)))
    assert summary.accuracy.hits == right
    assert summary.accuracy.n == 30
    assert summary.accuracy.rate == pytest.approx(right / 30)
    assert round(summary.accuracy.low, 3) == low
    assert round(summary.accuracy.high, 3) == high


def test_errors_are_counted_apart_not_as_wrong(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    cases = right_and_wrong(make_case, 22, 8)
    cases += [make_case("e1", error="overloaded", error_kind="overloaded")]
    cases += [make_case("e2", error="timeout", error_kind="timeout")]
    cases += [make_case("e3", error="overloaded", error_kind="overloaded")]
    summary = summarise(make_run(cases))
    assert (summary.n, summary.scored, summary.errors) == (33, 30, 3)
    assert (summary.accuracy.hits, summary.accuracy.n) == (22, 30)
    assert round(summary.accuracy.low, 3) == 0.556  # as for 22/30 without the errors
    assert summary.error_kinds == [("overloaded", 2), ("timeout", 1)]
    assert summary.incomplete  # 3 of 33 is over the default 2%


def test_format_validity_is_a_rate_of_its_own(make_case: CaseFactory, make_run: RunFactory) -> None:
    cases = [make_case(f"c{i}", outcome={"format_ok": i % 4 != 0}) for i in range(8)]
    summary = summarise(make_run(cases))
    assert (summary.format.hits, summary.format.n) == (6, 8)
    assert summary.accuracy.rate == 1.0


def test_categories_worst_category_and_confusion(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    cases = [
        make_case("b1", "booking", "booking"),
        make_case("b2", "booking", "booking"),
        make_case("b3", "booking", "quote"),
        make_case("q1", "quote", "quote"),
        make_case("q2", "quote", "booking", message="Price\nfor a chain?"),
        make_case("q3", "quote", "appointment"),
        make_case("q4", "quote", "booking"),
        make_case("o1", "other", "other"),
    ]
    summary = summarise(make_run(cases))
    rows = {r.category: (r.accuracy.hits, r.accuracy.n) for r in summary.categories}
    assert list(rows) == ["booking", "other", "quote"]
    assert rows == {"booking": (2, 3), "other": (1, 1), "quote": (1, 4)}
    worst = summary.worst
    assert worst is not None
    assert worst.category == "quote"
    assert worst.answered_as == [("booking", 2), ("appointment", 1)]
    assert [(w.id, w.expected, w.answer) for w in worst.wrong] == [
        ("q2", "quote", "booking"),
        ("q3", "quote", "appointment"),
        ("q4", "quote", "booking"),
    ]
    assert worst.wrong[0].message == "Price for a chain?"
    confusion = summary.confusion
    assert confusion is not None
    assert confusion.expected == ["booking", "other", "quote"]
    # Expected labels first, then answers that are no label.
    assert confusion.answers == ["booking", "other", "quote", "appointment"]
    assert confusion.counts == [[2, 0, 1, 0], [0, 1, 0, 0], [2, 0, 1, 1]]


def test_the_worst_list_is_capped(make_case: CaseFactory, make_run: RunFactory) -> None:
    cases = [make_case(f"w{i}", "quote", "booking") for i in range(12)]
    cases.append(make_case("b", "booking", "booking"))
    worst = summarise(make_run(cases), worst_examples=5).worst
    assert worst is not None
    assert len(worst.wrong) == 5
    assert worst.answered_as == [("booking", 12)]


def test_no_confusion_matrix_for_other_scorers(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    run = make_run(scorer={"kind": "exact"})
    assert summarise(run).confusion is None


def test_an_all_error_run_has_no_rate(make_case: CaseFactory, make_run: RunFactory) -> None:
    summary = summarise(make_run([make_case("a", error="x"), make_case("b", error="x")]))
    assert summary.accuracy.n == 0
    assert summary.accuracy.rate is None
    assert (summary.accuracy.low, summary.accuracy.high) == (0.0, 1.0)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], 0.0),
        ([3.0], 3.0),
        # Nearest rank: the ceil(0.95 n)-th smallest value.
        ([float(v) for v in range(1, 21)], 19.0),  # ceil(19.0) = 19
        ([float(v) for v in range(1, 101)], 95.0),  # ceil(95.0) = 95
        ([float(v) for v in range(10, 0, -1)], 10.0),  # ceil(9.5) = 10, order does not matter
    ],
)
def test_p95_is_nearest_rank(values: list[float], expected: float) -> None:
    assert p95(values) == expected


def test_latency_leaves_out_errors_and_cached_replies(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    cases = [make_case(f"c{i}", outcome={"latency_s": i / 10}) for i in range(1, 21)]
    cases.append(make_case("err", error="x", outcome={"latency_s": 99.0}))
    cases.append(make_case("hit", outcome={"latency_s": 50.0, "cached": True}))
    summary = summarise(make_run(cases, wall_s=3.0))
    assert summary.latency.calls == 20
    assert summary.latency.mean_s == pytest.approx(1.05)  # (0.1 + ... + 2.0) / 20 = 21 / 20
    assert summary.latency.p95_s == pytest.approx(1.9)  # the 19th of 20
    assert summary.latency.wall_s == 3.0
    assert summary.cache_hits == 1


def test_an_offline_run_costs_nothing_but_is_priced_for_scale(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    # 30 cases x (120 in, 8 out) = 3,600 in and 240 out. claude-haiku-4-5 lists $1 in and
    # $5 out per million: 0.0036 + 0.0012 = $0.0048.
    summary = summarise(make_run(right_and_wrong(make_case, 30, 0)), price_as="claude-haiku-4-5")
    assert summary.costs.usage.input_tokens == 3600
    assert summary.costs.usage.output_tokens == 240
    assert summary.costs.cost == 0.0
    assert summary.costs.priced_as == "claude-haiku-4-5"
    assert summary.costs.priced_as_cost == pytest.approx(0.0048)


def test_a_real_run_is_priced_by_its_model(make_case: CaseFactory, make_run: RunFactory) -> None:
    cases = [
        make_case(f"c{i}", outcome={"cache_read_tokens": 1000, "cache_write_tokens": 0})
        for i in range(10)
    ]
    # A dated id is priced as its family: claude-sonnet-4-5 at $3 in, $15 out, $0.30 cache
    # read per million. 10 x 120 in, 10 x 8 out, 10 x 1,000 cache read:
    # 1,200 x 3 + 80 x 15 + 10,000 x 0.3 = 3,600 + 1,200 + 3,000 = 7,800 -> $0.0078.
    run = make_run(cases, model={"name": "claude-sonnet-4-5-20250929", "offline": False})
    costs = summarise(run).costs
    assert costs.cost == pytest.approx(0.0078)
    # Without caching every cached token is an input token: 11,200 x 3 + 1,200 = $0.0348.
    assert costs.uncached_cost == pytest.approx(0.0348)


def test_an_unknown_model_has_unknown_cost_never_zero(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    run = make_run(model={"name": "my-local-llama", "offline": False})
    assert summarise(run).costs.cost is None


def test_stop_reasons_and_cut_off_replies(make_case: CaseFactory, make_run: RunFactory) -> None:
    cases = [
        make_case("a"),
        make_case("b", outcome={"stop_reason": "max_tokens"}),
        make_case("c", outcome={"stop_reason": "max_tokens"}),
        make_case("d", error="x"),
    ]
    summary = summarise(make_run(cases))
    assert summary.stop_reasons == [("max_tokens", 2), ("end_turn", 1)]
    assert summary.cut_off == ["b", "c"]


def test_repeats_are_counted_one_by_one(make_case: CaseFactory, make_run: RunFactory) -> None:
    # Three repeats a case. The accuracy counts every repeat's score, so the answers do too:
    # the first repeat alone showed q1 (right once in three) as answered like b1 (right twice).
    cases = [
        make_case("b1", "booking", ["booking", "booking", "quote"]),
        make_case("q1", "quote", ["booking", "booking", "quote"]),
        make_case("o1", "other", ["other"] * 3),
    ]
    summary = summarise(make_run(cases, repeats=3))
    # (2/3 + 1/3 + 3/3) / 3 cases.
    assert summary.accuracy.rate == pytest.approx(2 / 3)
    confusion = summary.confusion
    assert confusion is not None
    assert confusion.expected == ["booking", "other", "quote"]
    assert confusion.answers == ["booking", "other", "quote"]
    # Nine answers: booking 2 right + 1 quote; other 3 right; quote 2 booking + 1 right.
    assert confusion.counts == [[2, 0, 1], [0, 3, 0], [2, 0, 1]]
    assert [(f.id, f.answer) for f in summary.failed] == [
        ("q1", "booking (2 of 3), quote (1 of 3)")
    ]
    worst = summary.worst
    assert worst is not None and worst.category == "quote"
    # What the failing repeats answered: booking twice (the right repeat is not a wrong answer).
    assert worst.answered_as == [("booking", 2)]
    assert worst.wrong[0].answer == "booking (2 of 3), quote (1 of 3)"
    # The text report says what its counts count.
    text = render_model("run", summary, "text")
    assert "answered instead as: booking 2 (every failing repeat counted)" in text
    assert "columns: answered; every repeat counted" in text


def test_what_a_case_answered_skips_its_errored_repeats(make_case: CaseFactory) -> None:
    case = make_case("b1", "booking", ["booking", "booking"])
    errored = Outcome(error="529 overloaded", error_kind="server")
    first_failed = case.model_copy(update={"outcomes": [errored, *case.outcomes]})
    # The first repeat's answer is none; what the repeats that answered gave is "booking".
    assert first_failed.answered() == "booking"
    assert case.model_copy(update={"outcomes": [errored]}).answered() == "(none)"
    # Shown whole when asked (the run report's JSON), shortened by default (the comment).
    long = make_case("b2", "booking", ["x" * 60, "y"])
    assert long.answered(str) == f"{'x' * 60} (1 of 2), y (1 of 2)"
    assert len(long.answered()) < len(long.answered(str))


def test_the_resume_command_is_quoted_for_the_shell(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    # A prompt version is a file name a pull request chooses; the line is copied into a shell.
    cut = make_case("c2", error="not sent", error_kind="interrupted")
    run = make_run([make_case("c1"), cut], prompt={"name": "v2;touch x"}, interrupted=True)
    text = render_model("run", summarise(run), "text")
    assert f"`evalgate run 'v2;touch x' --resume '{run.name}'`" in text
