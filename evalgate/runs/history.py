"""Baselines that learn: each baseline's per-case outcomes kept, pooled, and checked for drift.

Every baseline job appends one :class:`BaselineRecord` (dev cases only: scores and format per
repeat, by case id and content hash) to the data branch. A pull request's gate pools the
repeats of the newest baselines made with the same prompt, cases, model, settings and scorer
(within ``max_baseline_age_days``) into one baseline of R repeats, so the exact conditional test
gets stronger every week at no extra cost.

Two consecutive baselines of one setup are an A/A comparison: nothing evalgate controls changed,
so a significant difference between them (a two-sided exact sign test on the cases whose mean
score moved) says the provider changed something under the same model name. Then the record
starts a new epoch, and pooling never crosses an epoch. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from evalgate.analysis.sign_test import sign_test_worse
from evalgate.jsonl import parse_lines
from evalgate.runs.schema import CaseResult, Outcome, Run

# Records kept per suite: enough for months of weekly baselines, few enough to read quickly.
KEEP = 30


class CaseScores(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hash: str
    scores: list[float | None]
    formats: list[bool | None]


class BaselineRecord(BaseModel):
    """One baseline run as the history keeps it: its setup and every dev case's outcomes."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = 1
    run: str
    created_at: datetime
    commit: str | None
    prompt_sha256: str
    cases_sha256: str
    model: str
    options_sha256: str
    scorer_sha256: str
    # The agent's tools (see Run.tools_sha256); None for suites without tools and older records.
    tools_sha256: str | None = None
    repeats: int
    # Bumped when this baseline differs significantly from the previous one of its setup.
    epoch: int = 0
    # The A/A comparison with the previous baseline of the same setup: its p and the counts.
    drift_p: float | None = None
    drift_worse: int = 0
    drift_better: int = 0
    cases: dict[str, CaseScores]

    def setup(self) -> tuple[str | None, ...]:
        return (
            self.prompt_sha256,
            self.cases_sha256,
            self.model,
            self.options_sha256,
            self.scorer_sha256,
            self.tools_sha256,
        )


def record_of(run: Run) -> BaselineRecord:
    """The history's record of a baseline run: dev cases only (never holdout)."""
    return BaselineRecord(
        run=run.name,
        created_at=run.created_at,
        commit=run.git_commit,
        prompt_sha256=run.prompt.sha256,
        cases_sha256=run.cases_sha256,
        model=f"{run.model.backend}/{run.model.name}",
        options_sha256=run.model.options_sha256,
        scorer_sha256=run.scorer_sha256,
        tools_sha256=run.tools_sha256,
        repeats=run.repeats,
        cases={
            c.id: CaseScores(
                hash=c.hash,
                scores=[None if o.error else o.score for o in c.outcomes],
                formats=[None if o.error else o.format_ok for o in c.outcomes],
            )
            for c in run.cases
            if c.split == "dev"
        },
    )


def read_history(text: str | None, where: str) -> list[BaselineRecord]:
    return [
        r
        for _, r in parse_lines(
            text or "",
            BaselineRecord,
            where,
            "not a baseline history record",
            "restore it from the data branch's git history",
        )
    ]


def _mean(values: Sequence[float | None]) -> float | None:
    scored = [v for v in values if v is not None]
    return sum(scored) / len(scored) if scored else None


def drift(previous: BaselineRecord, current: BaselineRecord) -> tuple[float, int, int]:
    """Two-sided exact sign test between two baselines of one setup, over the cases (same id
    and content) whose mean score differs: (p, worse, better). Under no change, each such case
    is as likely to have moved either way."""
    worse = better = 0
    for case_id, now in current.cases.items():
        then = previous.cases.get(case_id)
        if then is None or then.hash != now.hash:
            continue
        a, b = _mean(then.scores), _mean(now.scores)
        if a is None or b is None or a == b:
            continue
        if b < a:
            worse += 1
        else:
            better += 1
    if worse + better == 0:
        return 1.0, 0, 0
    p = min(1.0, 2 * min(sign_test_worse(worse, better), sign_test_worse(better, worse)))
    return p, worse, better


def appended(
    history: list[BaselineRecord], new: BaselineRecord, alpha: float
) -> tuple[list[BaselineRecord], BaselineRecord]:
    """The history with ``new`` appended (the newest KEEP kept), and ``new`` with its drift
    against the previous baseline of its setup, and its epoch (a new one after a drift)."""
    same = [r for r in history if r.setup() == new.setup() and r.run != new.run]
    if same:
        last = same[-1]
        p, worse, better = drift(last, new)
        epoch = last.epoch + 1 if p < alpha else last.epoch
        new = new.model_copy(
            update={"drift_p": p, "drift_worse": worse, "drift_better": better, "epoch": epoch}
        )
    kept = [r for r in history if r.run != new.run] + [new]
    return kept[-KEEP:], new


class Pooled(BaseModel):
    """What the pooled baseline is made of, for the comment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runs: int
    repeats: int
    # The newest record's A/A comparison, when it says the model changed.
    drift_p: float | None = None
    drift_worse: int = 0
    drift_better: int = 0
    # Cases that flipped (scores differ between repeats) in earlier baselines: id -> (n, of).
    flips: dict[str, tuple[int, int]] = {}


def pool(
    run: Run, history: list[BaselineRecord], *, now: datetime, max_age_days: float, alpha: float
) -> tuple[Run, Pooled]:
    """``run`` (the baseline artefact) with the repeats of the newest earlier baselines of its
    setup and epoch added to each unchanged dev case, oldest dropped past ``max_age_days``."""
    own = record_of(run)
    mine = next((r for r in history if r.run == run.name), None)
    epoch = (
        mine.epoch
        if mine is not None
        else max((r.epoch for r in history if r.setup() == own.setup()), default=0)
    )
    earlier = [
        r
        for r in history
        if r.run != run.name
        and r.setup() == own.setup()
        and r.epoch == epoch
        and r.created_at <= run.created_at
        and (now - r.created_at).total_seconds() <= max_age_days * 86400
    ]
    flips: dict[str, tuple[int, int]] = {}
    for r in [*earlier, own]:
        for case_id, scores in r.cases.items():
            n, of = flips.get(case_id, (0, 0))
            values = {s for s in scores.scores if s is not None}
            flips[case_id] = (n + (len(values) > 1), of + 1)
    drift_record = mine if mine is not None and (mine.drift_p or 1.0) < alpha else None
    if not earlier:
        pooled = Pooled(runs=1, repeats=run.repeats, flips=_flipped(flips))
        return run, _with_drift(pooled, drift_record)
    cases: list[CaseResult] = []
    for case in run.cases:
        extra: list[Outcome] = []
        if case.split == "dev":
            for r in earlier:
                kept = r.cases.get(case.id)
                if kept is None or kept.hash != case.hash:
                    continue
                # An earlier baseline's errored call is left out: it was never a score.
                extra += [
                    Outcome(score=s, format_ok=f)
                    for s, f in zip(kept.scores, kept.formats, strict=True)
                    if s is not None
                ]
        cases.append(
            case.model_copy(update={"outcomes": [*case.outcomes, *extra]}) if extra else case
        )
    repeats = run.repeats + sum(r.repeats for r in earlier)
    pooled_run = run.model_copy(update={"cases": cases, "repeats": repeats})
    pooled = Pooled(runs=1 + len(earlier), repeats=repeats, flips=_flipped(flips))
    return pooled_run, _with_drift(pooled, drift_record)


def _flipped(flips: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    return {k: v for k, v in flips.items() if v[0] and v[1] > 1}


def _with_drift(pooled: Pooled, record: BaselineRecord | None) -> Pooled:
    if record is None:
        return pooled
    return pooled.model_copy(
        update={
            "drift_p": record.drift_p,
            "drift_worse": record.drift_worse,
            "drift_better": record.drift_better,
        }
    )
