"""`evalgate judge check`'s work: the suite's judge over the labelled replies, and the report.

The judge grades each labelled reply (K times with repeats) exactly as it grades a run's
replies; each split's (judge, human) verdicts give the agreement statistics of
evalgate/analysis/calibration.py. The floor (``judge.min_labels``, ``judge.min_kappa``) is read on the
holdout labels when they were read, else on dev. The dev disagreements are listed; the holdout
is reported in aggregate only, and the report that is saved and published never names a holdout
label or shows its reply.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from evalgate import files
from evalgate.analysis.calibration import (
    Agreement,
    Corrected,
    IntervalKind,
    agreement,
    rogan_gladen,
)
from evalgate.analysis.sign_test import flip_rate
from evalgate.cases.judge_labels import Label, labels_sha, load_labels
from evalgate.config.load import LoadedConfig
from evalgate.config.models import JudgeCalibration, Suite
from evalgate.errors import UserError
from evalgate.running.suite import scorer_sha256
from evalgate.runs.schema import PASS_AT, Run
from evalgate.scorers.base import ScoringError
from evalgate.scorers.judge import JudgeScorer

LabelSplit = Literal["dev", "holdout"]
# What stands for a holdout group's name in reports.
HOLDOUT_GROUP = "(holdout group)"


def judge_sha256(root: Path, suite: Suite) -> str:
    """The judge's identity: its config and the text of every file it reads (its rubric, its
    backend's rules): the run's ``scorer_sha256`` for the same judge."""
    return scorer_sha256(suite.scorer, root)


class Graded(BaseModel):
    """One label as the judge graded it, repeat by repeat."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scores: list[float]
    reason: str | None
    error: str | None = None
    # The judge's own calls and tokens, over the repeats.
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def passes(self) -> list[bool]:
        return [s >= PASS_AT for s in self.scores]


def grade(
    labels: Sequence[Label],
    scorer: JudgeScorer,
    *,
    repeats: int = 1,
    concurrency: int = 8,
) -> list[Graded]:
    """The judge's verdicts on every label; a failed judge call makes that label an error."""

    def one(label: Label) -> Graded:
        scores: list[float] = []
        reason = None
        usage = [0, 0, 0]
        for _ in range(repeats):
            try:
                score = scorer(label.case.expected, label.reply, label.case.input)
            except ScoringError as exc:
                return Graded(scores=scores, reason=reason, error=str(exc), calls=usage[0] + 1)
            scores.append(score.score)
            reason = reason if reason is not None else score.reason
            usage[0] += score.judge_calls
            usage[1] += score.judge_input_tokens
            usage[2] += score.judge_output_tokens
        return Graded(
            scores=scores,
            reason=reason,
            calls=usage[0],
            input_tokens=usage[1],
            output_tokens=usage[2],
        )

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(one, labels))


class Disagreement(BaseModel):
    """A dev label where the judge and the person differ (never a holdout one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    group: str | None
    human: Literal["pass", "fail"]
    judge_score: float
    reason: str | None
    reply: str


class Flips(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    repeats: int
    # Pairwise flip rate over the repeats (sign_test.flip_rate) and the labels with any flip.
    rate: float
    labels_flipped: int


class SplitCheck(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    split: LabelSplit
    labels: int
    errored: int
    agreement: Agreement
    flips: Flips | None
    disagreements: list[Disagreement]
    # Disagreements not listed (beyond --show); the holdout's are never listed.
    more_disagreements: int = 0


class Floor(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    split: LabelSplit
    n: int
    min_labels: int
    kappa_low: float | None
    min_kappa: float
    ok: bool
    reasons: list[str]


class CorrectedRun(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str
    split: LabelSplit
    corrected: Corrected | None
    why_not: str | None = None


class JudgeReport(BaseModel):
    """What `judge check` measured; saved beside the runs, and safe to publish."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str
    created_at: datetime
    judge: str
    judge_sha256: str
    labels_sha256: str
    repeats: int
    # Kappa's interval (judge.interval, or judge check --interval), which the floor is read on.
    interval: IntervalKind = "analytic"
    # The judge's calls and tokens for this check.
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    splits: list[SplitCheck]
    # Labels on the holdout side that were not read (split not asked for).
    holdout_unread: int
    floor: Floor
    corrected: CorrectedRun | None = None
    # How many times these holdout labels have been read, this check included (from the read
    # ledger), and the budget (split.read_budget); None when the holdout was not read.
    holdout_reads: int | None = None
    read_budget: int | None = None
    warnings: list[str] = []

    def split(self, name: str) -> SplitCheck | None:
        return next((s for s in self.splits if s.split == name), None)


def measure_split(
    split: LabelSplit,
    labels: Sequence[Label],
    graded: Sequence[Graded],
    *,
    alpha: float,
    show: int,
    interval: IntervalKind = "analytic",
    seed: int = 0,
) -> SplitCheck:
    ok = [(x, g) for x, g in zip(labels, graded, strict=True) if g.error is None]
    pairs = [(g.passes[0], x.human) for x, g in ok]
    groups = [x.case.group or x.id for x, _ in ok]
    flips = None
    if ok and len(ok[0][1].scores) > 1:
        rows = [g.passes for _, g in ok]
        flips = Flips(
            repeats=len(rows[0]),
            rate=flip_rate(rows),
            labels_flipped=sum(1 for r in rows if len(set(r)) > 1),
        )
    wrong = [
        Disagreement(
            id=x.id,
            group=x.case.group,
            human="pass" if x.human else "fail",
            judge_score=g.scores[0],
            reason=g.reason,
            reply=x.reply,
        )
        for x, g in ok
        if g.passes[0] != x.human
    ]
    listed = wrong[:show] if split == "dev" else []
    measured = agreement(pairs, groups, alpha, interval=interval, seed=seed)
    if split == "holdout":
        # A holdout group named beside its agreement would tell rubric tuning which holdout
        # replies the judge gets wrong: the holdout's groups are counted, never named.
        ranked = sorted(measured.groups, key=lambda g: (g.agreement.rate or 0.0, g.n))
        unnamed = [g.model_copy(update={"group": HOLDOUT_GROUP}) for g in ranked]
        measured = measured.model_copy(update={"groups": unnamed})
    return SplitCheck(
        split=split,
        labels=len(labels),
        errored=len(labels) - len(ok),
        agreement=measured,
        flips=flips,
        disagreements=listed,
        more_disagreements=len(wrong) - len(listed) if split == "dev" else 0,
    )


def floor_of(checks: Sequence[SplitCheck], judge: JudgeCalibration) -> Floor:
    """The floor, on the holdout labels when they were read and exist, else on dev."""
    chosen = next((c for c in checks if c.split == "holdout" and c.labels), None) or next(
        (c for c in checks if c.split == "dev"), None
    )
    if chosen is None:
        raise UserError("no labels were checked", fix="check dev, holdout or both (--split)")
    reasons: list[str] = []
    n = chosen.agreement.n
    kappa = chosen.agreement.kappa
    if n == 0:
        return Floor(
            split=chosen.split,
            n=0,
            min_labels=judge.min_labels,
            kappa_low=None,
            min_kappa=judge.min_kappa,
            ok=False,
            reasons=[
                f"no {chosen.split} label could be graded (every judge call failed or was "
                "unreadable): see the errors above"
            ],
        )
    if n < judge.min_labels:
        reasons.append(
            f"the judge is checked on {n} {chosen.split} labels, under judge.min_labels = "
            f"{judge.min_labels}: label more replies before it may gate"
        )
    if kappa is None:
        reasons.append(
            f"kappa is undefined on the {chosen.split} labels (both the judge and the people "
            "gave every reply the same verdict): label replies that fail as well as pass"
        )
    elif kappa.low < judge.min_kappa:
        reasons.append(
            f"the judge agrees too little with people to gate: kappa {kappa.value:.2f} "
            f"(95% CI {kappa.low:.2f} to {kappa.high:.2f}) on {n} {chosen.split} labels, and the "
            f"interval's low end must reach judge.min_kappa = {judge.min_kappa:g}"
        )
    return Floor(
        split=chosen.split,
        n=n,
        min_labels=judge.min_labels,
        kappa_low=kappa.low if kappa else None,
        min_kappa=judge.min_kappa,
        ok=not reasons,
        reasons=reasons,
    )


def corrected_accuracy(run: Run, checks: Sequence[SplitCheck], floor: Floor) -> CorrectedRun:
    """A run's dev pass rate corrected for the judge's errors, with the floor's split's Se, Sp."""
    table = next(c for c in checks if c.split == floor.split).agreement.table
    scored = [c for c in run.cases if c.split == "dev" and c.error is None]
    passed = sum(1 for c in scored if c.passed)
    result = rogan_gladen(passed, len(scored), table)
    why = None
    if result is None:
        why = (
            "not computable: the labels need human passes and human fails, and the judge must "
            "be better than chance (sensitivity + specificity > 1)"
        )
    return CorrectedRun(run=run.name, split=floor.split, corrected=result, why_not=why)


# --- the saved report, which the gate reads ----------------------------------------------------


def report_path(state_dir: Path, suite: str) -> Path:
    return state_dir / "judge" / f"{suite}.json"


def save_report(report: JudgeReport, state_dir: Path) -> Path:
    path = report_path(state_dir, report.suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


def read_report(state_dir: Path, suite: str) -> JudgeReport | None:
    path = report_path(state_dir, suite)
    if not path.is_file():
        return None
    try:
        return JudgeReport.model_validate(json.loads(files.read_text(path, "judge check")))
    except (ValueError, ValidationError):
        return None


def floor_reasons(
    report: JudgeReport | None,
    judge_sha: str,
    labels_sha: str,
    interval: IntervalKind = "bootstrap",
) -> list[str]:
    """Why the gate may not trust the judge: no check yet, a changed judge or labels, a floor
    read on another interval than judge.interval, the floor itself."""
    fix = "run `evalgate judge check`"
    if report is None:
        return [f"the judge has not been checked against its human labels: {fix}"]
    if report.judge_sha256 != judge_sha:
        return [f"the judge changed since it was last checked against its labels: {fix}"]
    if report.labels_sha256 != labels_sha:
        return [f"the judge's labels changed since it was last checked: {fix}"]
    if report.interval != interval:
        return [
            f"the judge was last checked with the {report.interval} kappa interval, and "
            f"judge.interval is {interval}: {fix} without --interval"
        ]
    if report.floor.split == "dev" and report.holdout_unread:
        return [
            "the judge was last checked on its dev labels only, which rubric tuning has seen: "
            "run `evalgate judge check` with the holdout"
        ]
    return list(report.floor.reasons)


def judged_suite(loaded: LoadedConfig, suite_name: str | None) -> tuple[str, Suite]:
    """The suite, when it is scored by a judge that has labels."""
    name, suite = loaded.suite(suite_name)
    if suite.scorer.kind != "judge":
        raise UserError(
            f"suite {name!r} is scored by {suite.scorer.kind!r}, not by a judge",
            where=str(loaded.path),
            fix="judge check measures a judge scorer against human labels",
        )
    if suite.judge is None:
        raise UserError(
            f"suite {name!r} names no human labels for its judge",
            where=str(loaded.path),
            fix="add `judge: {labels: judge-labels.jsonl}` to the suite (see docs/statistics.md)",
        )
    return name, suite


def suite_labels(loaded: LoadedConfig, suite: Suite, path: Path | None = None) -> list[Label]:
    assert suite.judge is not None
    return load_labels(path or loaded.root / suite.judge.labels, suite)


def floor_for_gate(loaded: LoadedConfig, name: str, suite: Suite) -> list[str]:
    """Why a verdict scored by this suite's judge may not stand: [] when the judge's last check
    (saved by `judge check`) is of this judge and these labels, and met the floor."""
    if suite.judge is None:
        return []
    labels = suite_labels(loaded, suite)
    return floor_reasons(
        read_report(loaded.state_dir, name),
        judge_sha256(loaded.root, suite),
        labels_sha(labels),
        suite.judge.interval,
    )
