"""Release reports: dev score, holdout score and the gap, the gap's trend, the release gate. Pure.

The holdout is reported only in aggregate: a score with its interval and n, and which scenario
groups moved since the last release; never a holdout case's input, reply or id.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from statistics import fmean
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from evalgate.config import GatePolicy, SplitPolicy
from evalgate.errors import UserError
from evalgate.runs import PromptInfo, Run
from evalgate.stats import mean_and_se, sign_test_worse
from evalgate.summary import Rate

Reading = Literal["stable", "overfitting", "distribution", "leak", "unknown"]


class HoldoutScore(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str  # hashed: see holdout.hashed_id
    hash: str
    group: str | None
    score: float


class Score(BaseModel):
    """A split's score: the rate with its Wilson interval, and the (clustered) SE."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rate: Rate
    se: float


class ReleaseRecord(BaseModel):
    """What a release keeps forever (in the data branch): aggregate scores and hashes only."""

    model_config = ConfigDict(extra="forbid")

    name: str
    time: datetime
    git_commit: str | None
    git_ref: str | None
    prompt: PromptInfo
    model: str
    dev: Score
    holdout: Score
    holdout_sha256: str
    holdout_cases: list[HoldoutScore]
    regression_failed: int = 0
    regression_n: int = 0
    # Calls that failed: a release is never passed on cases it could not score.
    errors: int = 0
    regression_errors: int = 0
    incomplete: bool = False

    @property
    def gap(self) -> float:
        return (self.dev.rate.rate or 0.0) - (self.holdout.rate.rate or 0.0)

    @property
    def gap_se(self) -> float:
        return math.hypot(self.dev.se, self.holdout.se)


def _score(values: list[float], groups: list[str]) -> Score:
    se = mean_and_se(values, groups)[1] if len(values) > 1 else 0.0
    return Score(rate=Rate.of(sum(values), len(values)), se=0.0 if math.isnan(se) else se)


def make_record(name: str, run: Run, time: datetime, holdout_sha256: str) -> ReleaseRecord:
    """A release record from a run over dev, regression and (redacted) holdout cases."""
    scored = [c for c in run.cases if c.error is None]
    dev = [c for c in scored if c.split == "dev"]
    hold = [c for c in scored if c.split == "holdout"]
    regression = [c for c in run.cases if c.split == "regression"]
    return ReleaseRecord(
        name=name,
        time=time,
        git_commit=run.git_commit,
        git_ref=run.git_ref,
        prompt=run.prompt,
        model=f"{run.model.backend}/{run.model.name}",
        dev=_score([c.score or 0.0 for c in dev], [c.group or c.id for c in dev]),
        holdout=_score([c.score or 0.0 for c in hold], [c.group or c.id for c in hold]),
        holdout_sha256=holdout_sha256,
        holdout_cases=[
            HoldoutScore(id=c.id, hash=c.hash, group=c.group, score=c.score or 0.0) for c in hold
        ],
        regression_failed=sum(1 for c in regression if c.passed is False),
        regression_n=len(regression),
        errors=run.errors,
        regression_errors=sum(1 for c in regression if c.error is not None),
        incomplete=run.incomplete,
    )


class GroupMove(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str
    n: int
    before: float
    after: float


class ReleaseReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["pass", "fail"]
    reasons: list[str]
    warnings: list[str]
    current: ReleaseRecord
    previous: ReleaseRecord | None
    history: list[ReleaseRecord]
    reading: Reading
    reading_text: str
    paired: int
    broken: int
    fixed: int
    p_value: float | None
    groups_moved: list[GroupMove]
    reads: int
    read_budget: int
    mermaid: str


READINGS: dict[Reading, str] = {
    "stable": "The gap is small and stable: the suite measures the task.",
    "overfitting": (
        "The gap is growing while dev climbs: the prompt is being fitted to the dev cases. "
        "Look for case-specific clauses in the prompt and remove them."
    ),
    "distribution": (
        "The gap has been large from the first release: the two splits are not from one "
        "distribution. Check how cases were split (correlated cases split by row?) and re-split "
        "by scenario group."
    ),
    "leak": (
        "The holdout scores above dev: look for a leak (holdout cases copied into the prompt "
        "or into dev) or wrong expected answers in dev."
    ),
    "unknown": "Too few releases and cases to read the gap yet.",
}


def read_gap(current: ReleaseRecord, history: list[ReleaseRecord], tolerance: float) -> Reading:
    """Which of the four readings the gap supports (two standard errors as the noise band)."""
    band = 2 * current.gap_se
    if current.gap < -max(band, tolerance):
        return "leak"
    past = [r for r in history if r.name != current.name]
    if current.gap <= max(band, tolerance):
        return "stable"
    if not past:
        return "distribution"
    first = past[0]
    if first.gap > max(2 * first.gap_se, tolerance) and current.gap <= first.gap + band:
        return "distribution"
    if current.gap > first.gap + band and (current.dev.rate.rate or 0) > (first.dev.rate.rate or 0):
        return "overfitting"
    return "distribution" if first.gap > tolerance else "unknown"


def read_releases(folder: Path) -> list[ReleaseRecord]:
    if not folder.is_dir():
        return []
    records = []
    for path in folder.glob("*.json"):
        try:
            records.append(ReleaseRecord.model_validate_json(path.read_text(encoding="utf-8")))
        except ValidationError as exc:
            raise UserError(
                f"corrupt release record: {exc.errors()[0]['msg']}",
                where=str(path),
                fix="restore it from the data branch",
            ) from None
    return sorted(records, key=lambda r: r.time)


def write_release(folder: Path, record: ReleaseRecord) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in record.name)
    path = folder / f"{safe}.json"
    path.write_text(record.model_dump_json(indent=1), encoding="utf-8")
    return path


def mermaid_chart(records: list[ReleaseRecord]) -> str:
    names = ", ".join('"' + r.name.replace('"', "'") + '"' for r in records)
    dev = ", ".join(f"{100 * (r.dev.rate.rate or 0):.1f}" for r in records)
    hold = ", ".join(f"{100 * (r.holdout.rate.rate or 0):.1f}" for r in records)
    return (
        "xychart-beta\n"
        '    title "dev (upper) and holdout (lower) accuracy by release"\n'
        f"    x-axis [{names}]\n"
        '    y-axis "accuracy %" 0 --> 100\n'
        f"    line [{dev}]\n"
        f"    line [{hold}]"
    )


def release_report(
    current: ReleaseRecord,
    history: list[ReleaseRecord],
    *,
    gate: GatePolicy,
    split: SplitPolicy,
    reads: int,
) -> ReleaseReport:
    """The release gate: fail on a significant holdout drop against the previous release, or a
    failed regression case; the read budget only warns."""
    past = sorted((r for r in history if r.name != current.name), key=lambda r: r.time)
    previous = past[-1] if past else None
    reasons: list[str] = []
    warnings: list[str] = []
    broken = fixed = paired = 0
    p_value = None
    moved: list[GroupMove] = []
    if previous is not None:
        before = {h.hash: h for h in previous.holdout_cases}
        pairs = [(before[h.hash], h) for h in current.holdout_cases if h.hash in before]
        paired = len(pairs)
        broken = sum(1 for a, b in pairs if b.score < a.score)
        fixed = sum(1 for a, b in pairs if b.score > a.score)
        p_value = sign_test_worse(broken, fixed, mid_p=gate.mid_p)
        if p_value < gate.alpha:
            reasons.append(
                f"the holdout dropped significantly since {previous.name}: {broken} cases "
                f"worse, {fixed} better of {paired} paired (one-sided sign test, "
                f"p = {p_value:.2g})"
            )
        by_group: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for a, b in pairs:
            by_group[b.group or "(no group)"].append((a.score, b.score))
        moved = [
            GroupMove(
                group=g,
                n=len(v),
                before=fmean(x for x, _ in v),
                after=fmean(y for _, y in v),
            )
            for g, v in sorted(by_group.items())
            if fmean(x for x, _ in v) != fmean(y for _, y in v)
        ]
    else:
        warnings.append("no previous release to compare the holdout with: this is the first")
    if current.incomplete:
        reasons.append(
            f"the release run is incomplete ({current.errors} calls failed): its scores leave "
            "cases out; re-run the release"
        )
    if current.regression_errors:
        reasons.append(
            f"{current.regression_errors} regression cases errored, so they could not be "
            "checked; re-run the release"
        )
    if current.regression_failed:
        reasons.append(
            f"{current.regression_failed} of {current.regression_n} regression cases failed; "
            "they must never fail"
        )
    if reads > split.read_budget:
        warnings.append(
            f"this holdout has been read {reads} times, over the budget of {split.read_budget}: "
            "every read leaks a little; add fresh holdout cases and retire the old ones"
        )
    if current.holdout.rate.n < split.min_holdout:
        warnings.append(
            f"the holdout has {current.holdout.rate.n} scored cases, under {split.min_holdout}: "
            "too few to read the gap; add holdout cases"
        )
    records = [*past, current]
    reading = read_gap(current, past, gate.tolerance)
    return ReleaseReport(
        kind="fail" if reasons else "pass",
        reasons=reasons,
        warnings=warnings,
        current=current,
        previous=previous,
        history=records,
        reading=reading,
        reading_text=READINGS[reading],
        paired=paired,
        broken=broken,
        fixed=fixed,
        p_value=p_value,
        groups_moved=moved,
        reads=reads,
        read_budget=split.read_budget,
        mermaid=mermaid_chart(records),
    )
