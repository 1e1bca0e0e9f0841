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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from evalgate import files
from evalgate.analysis.intervals import mean_and_se
from evalgate.analysis.sign_test import sign_test_worse
from evalgate.analysis.summary import Rate
from evalgate.cases.holdout import HoldoutKey
from evalgate.config.models import GatePolicy, SplitPolicy
from evalgate.errors import UserError, from_validation
from evalgate.runs.schema import PromptInfo, Run

Reading = Literal["stable", "small", "overfitting", "distribution", "leak", "unknown"]


_CHAIN_FIELDS = ("seq", "previous", "passed")


class HoldoutScore(BaseModel):
    """One holdout case as a release keeps it: keyed names only (see holdout.HoldoutKey)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    hash: str
    group: str | None
    score: float
    # The share of the case's replies in the asked-for format (None in older records).
    format_ok: float | None = None


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
    # A keyed digest of the holdout's cases: commits to its size and content.
    holdout_sha256: str
    holdout_cases: list[HoldoutScore]
    # Whether the names above are keyed (a sealed holdout, or a key set): unkeyed names can be
    # recomputed by anyone holding a case's text.
    holdout_keyed: bool = False
    # The sealed store's lines as this release read them (hashes of ciphertext), and whether
    # they matched the last good release's but for recorded changes (the next release compares
    # with the last record where they did).
    sealed_lines: list[str] | None = None
    sealed_ok: bool = True
    regression_failed: int = 0
    regression_n: int = 0
    # Calls that failed: a release is never passed on cases it could not score.
    errors: int = 0
    regression_errors: int = 0
    incomplete: bool = False
    # The release history is a chain (evalgate/analysis/history.py): the record's place in it
    # (1 for a suite's first signed release) and the MAC of the record before it, both signed,
    # so a record taken out of the middle or the start is detected. ``passed``: the release
    # gate's verdict, so that a later failing re-run of a tag never stands in for its good
    # record. None in records written before the chain.
    seq: int | None = None
    previous: str | None = None
    passed: bool | None = None
    # A MAC under the holdout key over everything above: a record edited on the data branch
    # without the key is detected.
    mac: str | None = None

    def body(self) -> str:
        # A record written before holdout cases kept their format share (or before the chain)
        # signed a body without those fields: leave them out while they are unset, so such a
        # record still verifies.
        unset = all(h.format_ok is None for h in self.holdout_cases)
        fmt: dict[str, Any] = {"holdout_cases": {"__all__": {"format_ok"}}} if unset else {}
        chain = {f: True for f in _CHAIN_FIELDS if getattr(self, f) is None}
        return self.model_dump_json(exclude={"mac": True, **chain, **fmt})

    @property
    def holdout_format(self) -> float | None:
        """The share of the holdout's replies in the asked-for format (None: not kept)."""
        shares = [h.format_ok for h in self.holdout_cases if h.format_ok is not None]
        return fmean(shares) if shares else None

    @property
    def gap(self) -> float:
        return (self.dev.rate.rate or 0.0) - (self.holdout.rate.rate or 0.0)

    @property
    def gap_se(self) -> float:
        return math.hypot(self.dev.se, self.holdout.se)


def _score(values: list[float], groups: list[str]) -> Score:
    se = mean_and_se(values, groups)[1] if len(values) > 1 else 0.0
    return Score(rate=Rate.of(sum(values), len(values)), se=0.0 if math.isnan(se) else se)


def make_record(
    name: str,
    run: Run,
    time: datetime,
    holdout_sha256: str,
    *,
    key: HoldoutKey | None = None,
    sealed_lines: list[str] | None = None,
    sealed_ok: bool = True,
    seq: int | None = None,
    previous: str | None = None,
) -> ReleaseRecord:
    """A release record from a run over dev, regression and (redacted) holdout cases, signed
    with the holdout key when there is one (see ``sign_record``). Holdout cases keep no group:
    a keyed group name, counted, gives the group's size away, which can be matched against
    the plaintext groups."""
    scored = [c for c in run.cases if c.error is None]
    dev = [c for c in scored if c.split == "dev"]
    hold = [c for c in scored if c.split == "holdout"]
    regression = [c for c in run.cases if c.split == "regression"]
    record = ReleaseRecord(
        name=name,
        time=time,
        git_commit=run.git_commit,
        git_ref=run.git_ref,
        prompt=run.prompt,
        model=f"{run.model.backend}/{run.model.name}",
        dev=_score([c.score or 0.0 for c in dev], [c.group or c.id for c in dev]),
        holdout=_score([c.score or 0.0 for c in hold], [c.group or c.id for c in hold]),
        holdout_sha256=holdout_sha256,
        # Sorted by keyed name: in file order, a name's position would tell which case it is.
        holdout_cases=sorted(
            (
                HoldoutScore(
                    id=c.id,
                    hash=c.hash,
                    group=None,
                    score=c.score or 0.0,
                    format_ok=fmean(bool(o.format_ok) for o in c.outcomes) if c.outcomes else None,
                )
                for c in hold
            ),
            key=lambda h: h.id,
        ),
        holdout_keyed=key is not None and key.keyed,
        sealed_lines=None if sealed_lines is None else sorted(sealed_lines),
        sealed_ok=sealed_ok,
        regression_failed=sum(1 for c in regression if c.passed is False),
        regression_n=len(regression),
        errors=run.errors,
        regression_errors=sum(1 for c in regression if c.error is not None),
        incomplete=run.incomplete,
        seq=seq,
        previous=previous,
    )
    return sign_record(record, key)


def sign_record(record: ReleaseRecord, key: HoldoutKey | None) -> ReleaseRecord:
    """The record with its MAC under the holdout key (unsigned without a key)."""
    if key is None or not key.keyed:
        return record
    return record.model_copy(update={"mac": key.sign(record.body())})


class GroupMove(BaseModel):
    """A holdout scenario group whose mean score moved (its name keyed, like every holdout name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str
    n: int
    before: float
    after: float


class Comparison(BaseModel):
    """The holdout paired against an earlier release: a one-sided sign test over keyed names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    against: str
    # What is compared: the holdout's scores, or its replies' format validity.
    measure: Literal["score", "format"] = "score"
    paired: int
    broken: int
    fixed: int
    p_value: float
    # Holm-adjusted over the comparisons the release gate makes (previous and reference).
    p_adjusted: float


class ReleaseReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["pass", "fail"]
    reasons: list[str]
    warnings: list[str]
    current: ReleaseRecord
    previous: ReleaseRecord | None
    # The fixed release the holdout is also compared with, so that slow drift is seen: the
    # first usable release, or split.reference_release.
    reference: ReleaseRecord | None = None
    history: list[ReleaseRecord]
    reading: Reading
    reading_text: str
    paired: int
    broken: int
    fixed: int
    p_value: float | None
    comparisons: list[Comparison] = []
    groups_moved: list[GroupMove]
    reads: int
    read_budget: int
    mermaid: str

    @property
    def groups_down(self) -> int:
        return sum(1 for g in self.groups_moved if g.after < g.before)

    @property
    def groups_up(self) -> int:
        return sum(1 for g in self.groups_moved if g.after > g.before)


READINGS: dict[Reading, str] = {
    "stable": "The gap is small and stable: the suite measures the task.",
    "small": (
        "The gap is within its noise band; this is the first release, so there is no trend to "
        "read yet."
    ),
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
    """Which reading the gap supports (two standard errors as the noise band): a small gap
    is stable only once there is a release before it to compare with."""
    band = 2 * current.gap_se
    if current.gap < -max(band, tolerance):
        return "leak"
    past = [r for r in history if r.name != current.name]
    if current.gap <= max(band, tolerance):
        return "stable" if past else "small"
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
            records.append(
                ReleaseRecord.model_validate_json(files.read_text(path, "release record"))
            )
        except ValidationError as exc:
            raise UserError(
                f"corrupt release record: {from_validation(exc)}",
                where=str(path),
                fix="restore it from the data branch",
            ) from None
    return sorted(records, key=lambda r: r.time)


def write_release(folder: Path, record: ReleaseRecord) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in record.name)
    path = folder / f"{safe}.json"
    if path.exists():
        # A re-run of a tag is kept beside its earlier runs: the history only grows.
        path = folder / f"{safe}.{record.seq or record.time.strftime('%Y%m%dT%H%M%S%f')}.json"
    path.write_text(record.model_dump_json(indent=1), encoding="utf-8")
    return path


def chart_title(records: list[ReleaseRecord]) -> str:
    """The chart has no legend: its title says which line is which, from where they lie."""
    pairs = [(r.dev.rate.rate or 0, r.holdout.rate.rate or 0) for r in records]
    if all(dev >= hold for dev, hold in pairs):
        return "dev (upper) and holdout (lower) accuracy by release"
    if all(hold >= dev for dev, hold in pairs):
        return "holdout (upper) and dev (lower) accuracy by release"
    # Crossing lines: say which one starts on top, which a reader can see (the chart has no
    # legend, so "the first line" would name nothing visible).
    first, last = (r.name.replace('"', "'") for r in (records[0], records[-1]))
    upper, lower = ("dev", "holdout") if pairs[0][0] >= pairs[0][1] else ("holdout", "dev")
    return f"{upper} (upper at {first}) and {lower} accuracy by release; they cross by {last}"


def mermaid_chart(records: list[ReleaseRecord]) -> str:
    names = ", ".join('"' + r.name.replace('"', "'") + '"' for r in records)
    dev = ", ".join(f"{100 * (r.dev.rate.rate or 0):.1f}" for r in records)
    hold = ", ".join(f"{100 * (r.holdout.rate.rate or 0):.1f}" for r in records)
    return (
        "xychart-beta\n"
        f'    title "{chart_title(records)}"\n'
        f"    x-axis [{names}]\n"
        '    y-axis "accuracy %" 0 --> 100\n'
        f"    line [{dev}]\n"
        f"    line [{hold}]"
    )


def usable_history(
    history: list[ReleaseRecord], key: HoldoutKey
) -> tuple[list[ReleaseRecord], list[str]]:
    """The records a keyed release may compare with, and warnings for those it may not.

    A record whose MAC does not match was changed after it was written: that is an error. With
    a key, an unsigned record (an older evalgate, or no key then) is not compared with, since
    anyone could have written it.
    """
    if not key.keyed:
        return list(history), []
    kept, warnings = [], []
    for record in history:
        if record.mac is None:
            warnings.append(
                f"release {record.name} is not signed with the holdout key, so the holdout is "
                "not compared with it"
            )
        elif not key.verify(record.body(), record.mac):
            raise UserError(
                f"release record {record.name!r} was changed after it was written (its MAC "
                "does not match the holdout key)",
                where="the release history",
                fix="restore the history from the data branch's git log",
            )
        else:
            kept.append(record)
    return kept, warnings


def _compare(
    before: ReleaseRecord, after: ReleaseRecord, mid_p: bool, measure: str = "score"
) -> tuple[Comparison, list[tuple[HoldoutScore, HoldoutScore]]]:
    earlier = {h.hash: h for h in before.holdout_cases}
    pairs = [(earlier[h.hash], h) for h in after.holdout_cases if h.hash in earlier]
    if measure == "format":
        kept = [(a.format_ok, b.format_ok) for a, b in pairs]
        values = [(x, y) for x, y in kept if x is not None and y is not None]
    else:
        values = [(a.score, b.score) for a, b in pairs]
    broken = sum(1 for x, y in values if y < x)
    fixed = sum(1 for x, y in values if y > x)
    p = sign_test_worse(broken, fixed, mid_p=mid_p)
    made = Comparison(
        against=before.name,
        measure="format" if measure == "format" else "score",
        paired=len(values),
        broken=broken,
        fixed=fixed,
        p_value=p,
        p_adjusted=p,
    )
    return made, pairs


def _holm(comparisons: list[Comparison]) -> list[Comparison]:
    order = sorted(range(len(comparisons)), key=lambda i: comparisons[i].p_value)
    adjusted = [1.0] * len(comparisons)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(comparisons) - rank) * comparisons[i].p_value))
        adjusted[i] = running
    return [
        c.model_copy(update={"p_adjusted": a}) for c, a in zip(comparisons, adjusted, strict=True)
    ]


def release_report(
    current: ReleaseRecord,
    history: list[ReleaseRecord],
    *,
    gate: GatePolicy,
    split: SplitPolicy,
    reads: int,
    key: HoldoutKey | None = None,
    integrity: list[str] | None = None,
) -> ReleaseReport:
    """The release gate: fail on a significant holdout drop against the previous release or
    against the reference release (Holm over the two), a failed regression case, an empty
    holdout, or a holdout that changed unrecorded (``integrity``); the read budget only warns."""
    key = key or HoldoutKey()
    past, warnings = usable_history(
        sorted((r for r in history if r.name != current.name), key=lambda r: r.time), key
    )
    previous = past[-1] if past else None
    reasons: list[str] = list(integrity or [])
    reference = _reference(past, split, warnings)
    comparisons: list[Comparison] = []
    moved: list[GroupMove] = []
    if previous is not None:
        comparisons, moved = _holdout_drop(current, previous, reference, gate, reasons, warnings)
    else:
        warnings.append("no previous release to compare the holdout with: this is the first")
    _release_rules(current, split, reads, reasons, warnings)
    if gate.critical_categories:
        warnings.append(
            "critical categories are not checked at release: a release record keeps the "
            "holdout's cases without their categories, so none can be named; the pull "
            "request's gate checks them on dev"
        )
    records = [*past, current]
    reading = read_gap(current, past, gate.tolerance) if current.holdout.rate.n else "unknown"
    head = comparisons[0] if comparisons else None
    return ReleaseReport(
        kind="fail" if reasons else "pass",
        reasons=reasons,
        warnings=warnings,
        current=current,
        previous=previous,
        reference=reference,
        history=records,
        reading=reading,
        reading_text=READINGS[reading],
        paired=head.paired if head else 0,
        broken=head.broken if head else 0,
        fixed=head.fixed if head else 0,
        p_value=head.p_value if head else None,
        comparisons=comparisons,
        groups_moved=moved,
        reads=reads,
        read_budget=split.read_budget,
        mermaid=mermaid_chart(records),
    )


def _reference(
    past: list[ReleaseRecord], split: SplitPolicy, warnings: list[str]
) -> ReleaseRecord | None:
    """The release every release is also compared with: the named one, else the first."""
    if split.reference_release is None:
        return past[0] if past else None
    reference = next((r for r in past if r.name == split.reference_release), None)
    if reference is None and past:
        warnings.append(
            f"the reference release {split.reference_release!r} is not in the history: "
            "the holdout is compared with the previous release only"
        )
    return reference


def _holdout_drop(
    current: ReleaseRecord,
    previous: ReleaseRecord,
    reference: ReleaseRecord | None,
    gate: GatePolicy,
    reasons: list[str],
    warnings: list[str],
) -> tuple[list[Comparison], list[GroupMove]]:
    """The holdout against the previous release and the reference (Holm over the two), and
    the scenario groups whose scores moved since the previous one."""
    first, pairs = _compare(previous, current, gate.mid_p)
    comparisons = [first]
    if reference is not None and reference.name != previous.name:
        comparisons.append(_compare(reference, current, gate.mid_p)[0])
    # Format validity, the PR gate's route, against the previous release once both kept it.
    formats = _compare(previous, current, gate.mid_p, "format")[0]
    if formats.paired:
        comparisons.append(formats)
    comparisons = _holm(comparisons)
    for c in comparisons:
        if c.p_adjusted < gate.alpha and c.measure == "format":
            holm = f", Holm-adjusted {c.p_adjusted:.2g}" if len(comparisons) > 1 else ""
            reasons.append(
                f"format validity dropped on the holdout since {c.against}: {c.broken} cases "
                f"lost the asked-for format, {c.fixed} gained it of {c.paired} paired "
                f"(one-sided sign test, p = {c.p_value:.2g}{holm})"
            )
        elif c.p_adjusted < gate.alpha:
            holm = f", Holm-adjusted {c.p_adjusted:.2g}" if len(comparisons) > 1 else ""
            reasons.append(
                f"the holdout dropped significantly since {c.against}: {c.broken} cases "
                f"worse, {c.fixed} better of {c.paired} paired (one-sided sign test, "
                f"p = {c.p_value:.2g}{holm})"
            )
    by_group: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for a, b in pairs:
        # Records keep no holdout groups any more (a group's size gives it away): only two
        # older records that both kept one are compared by group.
        if a.group is not None and b.group is not None:
            by_group[b.group].append((a.score, b.score))
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
    if not first.paired and current.holdout_cases:
        warnings.append(
            f"no holdout case pairs with {previous.name} (a new holdout key, or every case "
            "changed): the holdout drop cannot be tested this time"
        )
    return comparisons, moved


def _release_rules(
    current: ReleaseRecord,
    split: SplitPolicy,
    reads: int,
    reasons: list[str],
    warnings: list[str],
) -> None:
    """What fails a release on its own (an empty holdout, an incomplete run, regression
    cases) and what only warns (a plaintext holdout, the read budget, a small holdout)."""
    if current.holdout.rate.n == 0:
        reasons.append(
            "the holdout has no scored cases, so the release cannot be checked against it: "
            "restore the holdout (or its key), or add holdout cases"
        )
    if not current.holdout_keyed and current.holdout_cases:
        warnings.append(
            "the holdout is plaintext and no holdout key is set: the release record names "
            "holdout cases by plain hashes, which anyone who reads the case files can match; "
            "seal the holdout (docs/holdout.md) or set the holdout key"
        )
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
    if 0 < current.holdout.rate.n < split.min_holdout:
        warnings.append(
            f"the holdout has {current.holdout.rate.n} scored cases, under {split.min_holdout}: "
            "too few to read the gap; add holdout cases"
        )
