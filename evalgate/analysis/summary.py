"""The numbers of one run's report, as a model: pure, computed from a Run."""

from collections import Counter
from statistics import fmean
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from evalgate.analysis.intervals import wilson_interval
from evalgate.analysis.pricing import Usage, cost, uncached_cost
from evalgate.limits import MATRIX_COLUMNS, NO_ANSWER, OTHER, label
from evalgate.runs.resume import UNSENT
from evalgate.runs.schema import PASS_AT, CaseResult, Outcome, Run
from evalgate.trajectory import expected_label


class Rate(BaseModel):
    """A proportion with its n and 95% Wilson interval."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hits: float
    n: int
    rate: float | None
    low: float
    high: float

    @classmethod
    def of(cls, hits: float, n: int) -> "Rate":
        low, high = wilson_interval(hits, n)
        return cls(hits=hits, n=n, rate=hits / n if n else None, low=low, high=high)


class CategoryRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    category: str
    accuracy: Rate
    format: Rate
    errors: int
    # Cases with a call the budget or an interrupt kept from being made: not errors.
    not_run: int = 0


class WrongCase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    expected: str
    answer: str
    message: str


class FailedCase(BaseModel):
    """A dev or regression case that was answered wrong, or that errored, with the reason."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    split: str
    outcome: Literal["wrong", "error"]
    expected: str
    answer: str
    # For a wrong case an excerpt of its input; for an errored one the error, as the run saw it.
    reason: str
    error_kind: str | None = None
    # The reply's text when the scorer found no answer in it (what to fix is then the format).
    reply: str | None = None


class WorstCategory(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    category: str
    accuracy: Rate
    answered_as: list[tuple[str, int]]
    wrong: list[WrongCase]


class Confusion(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    expected: list[str]
    answers: list[str]
    counts: list[list[int]]


class Costs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    usage: Usage
    # None when the model is missing from the price table: "unknown", never $0.
    cost: float | None
    # What the same calls would cost without prompt caching (None when unknown).
    uncached_cost: float | None
    # For an offline run (which costs nothing): what the same tokens would cost on a real model.
    priced_as: str | None = None
    priced_as_cost: float | None = None
    # A judge scorer's own calls, tokens and cost, apart from the system under test's.
    judge_model: str | None = None
    judge_calls: int = 0
    judge_usage: Usage = Usage()
    judge_cost: float | None = None


class Latency(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    calls: int
    mean_s: float
    p95_s: float
    wall_s: float
    # Agent runs: the model calls the measured cases made (their latency is a whole loop's).
    model_calls: int | None = None


class RunSummary(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str
    suite: str
    prompt: str
    prompt_sha: str
    backend: str
    model: str
    offline: bool
    repeats: int
    n: int
    # Holdout cases in the run: counted here, and scored in aggregate only (the release
    # report pairs them); errored ones are left out of the rate.
    holdout_n: int = 0
    holdout: Rate | None = None
    scored: int
    # Cases whose calls were made and failed; cases not run (not_run) are not among them.
    errors: int
    error_kinds: list[tuple[str, int]]
    # Scored cases answered wrong (score below one half), and the first wrong and errored cases
    # in the run's order (errors first: they say why nothing was scored).
    wrong: int = 0
    failed: list[FailedCase] = []
    incomplete: bool
    interrupted: bool
    not_run: int = 0
    """Cases with a call the budget or an interrupt kept from being made."""
    accuracy: Rate
    format: Rate
    categories: list[CategoryRow]
    worst: WorstCategory | None
    confusion: Confusion | None
    costs: Costs
    latency: Latency
    stop_reasons: list[tuple[str, int]]
    cut_off: list[str]
    cache_hits: int


def _label(value: object) -> str:
    return NO_ANSWER if value is None else str(value)


def _confusion(scored: list[CaseResult]) -> Confusion:
    """Expected labels by answers, each shortened, at most MATRIX_COLUMNS answer columns: the
    expected labels first, then the commonest other answers, the rest counted as (other).
    Every repeat's answer is counted, so the counts sum to the scored calls (the first repeat
    alone could show a case the run passes 2 of 3 times as never answered right)."""
    pairs = [(label(c.expected), label(o.answer)) for c in scored for o in c.outcomes]
    expected = sorted({e for e, _ in pairs})
    common = [a for a, _ in Counter(a for _, a in pairs).most_common() if a not in expected]
    kept = [e for e in expected if any(a == e for _, a in pairs)] + common
    kept = sorted(kept[:MATRIX_COLUMNS], key=lambda a: (a not in expected, a))
    shown = set(kept)
    counter = Counter((e, a if a in shown else OTHER) for e, a in pairs)
    answers = kept + ([OTHER] if any(a not in shown for _, a in pairs) else [])
    return Confusion(
        expected=expected,
        answers=answers,
        counts=[[counter[(e, a)] for a in answers] for e in expected],
    )


def p95(values: list[float]) -> float:
    """The 95th percentile, nearest-rank (no interpolation)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-95 * len(ordered) // 100))  # ceil(0.95 n)
    return ordered[rank - 1]


def _rates(cases: list[CaseResult]) -> tuple[Rate, Rate]:
    scored = [c for c in cases if c.error is None]
    return (
        Rate.of(sum(c.score or 0.0 for c in scored), len(scored)),
        Rate.of(sum(1 for c in scored if c.format_ok), len(scored)),
    )


def _unsent(case: CaseResult) -> bool:
    """A case with a call that was never made (the budget's or an interrupt's): not run, which
    is not errored; `evalgate run --resume` sends it."""
    return any(o.error_kind in UNSENT for o in case.outcomes)


def _errored(cases: list[CaseResult]) -> int:
    """Cases whose calls were made and failed (a case not run is counted apart)."""
    return sum(1 for c in cases if c.error is not None and not _unsent(c))


def _failed(cases: list[CaseResult], show: int) -> list[FailedCase]:
    # Cases not run are counted, not listed: each would only say it was not sent.
    errored = [c for c in cases if c.error is not None and not _unsent(c)]
    wrong = [c for c in cases if c.error is None and not c.passed]
    rows = []
    for c in [*errored, *wrong][: max(show, 0)]:
        error = c.error
        kind = next((o.error_kind for o in c.outcomes if o.error is not None), None)
        rows.append(
            FailedCase(
                id=c.id,
                split=c.split,
                outcome="wrong" if error is None else "error",
                expected=expected_label(c.expected),
                answer=c.answered(_label),
                reason=c.message() if error is None else error,
                error_kind=kind,
                reply=c.outcomes[0].text if error is None and c.answer is None else None,
            )
        )
    return rows


def summarise(
    run: Run, *, price_as: str | None = None, worst_examples: int = 8, show: int = 10
) -> RunSummary:
    """The run's report. ``show`` bounds the wrong and errored cases listed by id."""
    # Holdout cases are reported only in aggregate, by `evalgate release`: a run report counts
    # them and their calls, and shows nothing else of them (they carry no label or answer).
    cases = [c for c in run.cases if c.split != "holdout"]
    holdout = [c for c in run.cases if c.split == "holdout"]
    scored = [c for c in cases if c.error is None]
    accuracy, fmt = _rates(cases)
    by_category: dict[str, list[CaseResult]] = {}
    for case in cases:
        by_category.setdefault(_label(case.category), []).append(case)
    rows = []
    for name in sorted(by_category):
        acc, form = _rates(by_category[name])
        members = by_category[name]
        rows.append(
            CategoryRow(
                category=name,
                accuracy=acc,
                format=form,
                errors=_errored(members),
                not_run=sum(1 for c in members if _unsent(c)),
            )
        )
    confusion = _confusion(scored) if run.scorer.get("kind") == "label" and scored else None
    outcomes = [o for c in run.cases for o in c.outcomes]
    stops = Counter(o.stop_reason or "none" for o in outcomes if o.error is None)
    cut = sorted({c.id for c in cases for o in c.outcomes if o.stop_reason == "max_tokens"})
    kinds = Counter(
        o.error_kind or "other"
        for c in run.cases
        for o in c.outcomes
        if o.error and o.error_kind not in UNSENT
    )
    return RunSummary(
        run=run.name,
        suite=run.suite,
        prompt=run.prompt.name,
        prompt_sha=run.prompt.sha256[:12],
        backend=run.model.backend,
        model=run.model.name,
        offline=run.model.offline,
        repeats=run.repeats,
        n=len(cases),
        holdout_n=len(holdout),
        holdout=_holdout_rate(holdout) if holdout else None,
        scored=len(scored),
        errors=_errored(cases),
        error_kinds=kinds.most_common(),
        wrong=sum(1 for c in scored if not c.passed),
        failed=_failed(cases, show),
        incomplete=run.incomplete,
        interrupted=run.interrupted,
        not_run=sum(1 for c in cases if _unsent(c)),
        accuracy=accuracy,
        format=fmt,
        categories=rows,
        worst=_worst(rows, by_category, worst_examples),
        confusion=confusion,
        costs=_costs(run, outcomes, price_as),
        latency=_latency(run, outcomes),
        stop_reasons=stops.most_common(),
        cut_off=cut,
        cache_hits=sum(1 for o in outcomes if o.cached),
    )


def _worst(
    rows: list[CategoryRow], by_category: dict[str, list[CaseResult]], examples: int
) -> WorstCategory | None:
    """The category with the lowest accuracy, what its wrong cases answered, a few of them."""
    ranked = [r for r in rows if r.accuracy.n and r.accuracy.rate is not None]
    if not (len(ranked) > 1 or (ranked and ranked[0].category != NO_ANSWER)):
        return None
    low = min(ranked, key=lambda r: (r.accuracy.rate, r.category))
    wrong = [c for c in by_category[low.category] if c.error is None and not c.passed]
    return WorstCategory(
        category=low.category,
        accuracy=low.accuracy,
        # Every failing repeat's answer: what the category was taken for, call by call.
        answered_as=Counter(
            label(o.answer) for c in wrong for o in c.outcomes if (o.score or 0.0) < PASS_AT
        ).most_common(),
        wrong=[
            WrongCase(
                id=c.id,
                expected=expected_label(c.expected),
                answer=c.answered(),
                message=c.message(),
            )
            for c in wrong[:examples]
        ],
    )


def _costs(run: Run, outcomes: list[Outcome], price_as: str | None) -> Costs:
    """Tokens and their price over every call of the run, the judge's own calls apart."""
    usage = Usage(
        input_tokens=sum(o.input_tokens for o in outcomes),
        output_tokens=sum(o.output_tokens for o in outcomes),
        cache_write_tokens=sum(o.cache_write_tokens for o in outcomes),
        cache_read_tokens=sum(o.cache_read_tokens for o in outcomes),
    )
    judge: dict[str, Any] = {}
    judge_model = run.scorer.get("model")
    if run.scorer.get("kind") == "judge" and isinstance(judge_model, dict):
        judge_usage = Usage(
            input_tokens=sum(o.judge_input_tokens for o in outcomes),
            output_tokens=sum(o.judge_output_tokens for o in outcomes),
        )
        name = str(judge_model.get("name"))
        judge = {
            "judge_model": name,
            "judge_calls": sum(o.judge_calls for o in outcomes),
            "judge_usage": judge_usage,
            "judge_cost": 0.0 if judge_model.get("backend") == "fake" else cost(judge_usage, name),
        }
    if run.model.offline:
        return Costs(
            usage=usage,
            cost=0.0,
            uncached_cost=0.0,
            priced_as=price_as,
            priced_as_cost=cost(usage, price_as) if price_as else None,
            **judge,
        )
    return Costs(
        usage=usage,
        # A batch run's calls are half price (a judge's own calls are not batched).
        cost=cost(usage, run.model.name, batch=run.batch),
        uncached_cost=uncached_cost(usage, run.model.name, batch=run.batch),
        **judge,
    )


def _latency(run: Run, outcomes: list[Outcome]) -> Latency:
    """How long the live calls took (a cached reply took none), and the agent loops' calls."""
    live = [o.latency_s for o in outcomes if o.error is None and not o.cached]
    looped = [o for o in outcomes if o.error is None and not o.cached and o.steps is not None]
    return Latency(
        calls=len(live),
        mean_s=fmean(live) if live else 0.0,
        p95_s=p95(live),
        wall_s=run.wall_s,
        model_calls=sum(len(o.steps or []) for o in looped) if looped else None,
    )


def _holdout_rate(holdout: list[CaseResult]) -> Rate:
    scored = [c.score or 0.0 for c in holdout if c.error is None]
    return Rate.of(sum(scored), len(scored))
