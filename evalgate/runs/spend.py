"""What each job spent, kept on the data branch beside the baseline history, and a month's sum.

Every baseline, pull-request and release job appends one :class:`SpendRecord` per suite to the
suite's ``spend.jsonl``: the calls it sent (every attempt, retries included; a cached reply and
a call the budget kept back are never sent and cost nothing), their tokens and their dollars at
the price table's prices, one part per model (the system under test's, and a judge's own calls
apart). A model missing from the price table has an unknown price: its part's ``usd`` is None,
never $0, and a month's sum counts its calls and tokens apart from the dollars it knows. Pure:
no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from evalgate.analysis.pricing import Usage, cost
from evalgate.defaults import data_file
from evalgate.jsonl import parse_lines
from evalgate.runs.resume import UNSENT
from evalgate.runs.schema import Outcome, Run

Job = Literal["baseline", "pr", "release"]

# Records kept per suite: months of a busy repository's pull-request jobs (a record is about
# 360 bytes, so the file stays under the 1 MB the contents API returns inline).
KEEP = 2500


class SpendPart(BaseModel):
    """One model's calls in a job: their count, tokens and price (None: the price is unknown)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    # Whose calls: the system under test's, its judge scorer's, or a pull request's check of the
    # judge against its human labels.
    role: Literal["system", "judge", "judge-check"] = "system"
    calls: int = Field(ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    # Dollars at the price table's prices (None: unknown), never negative or infinite.
    usd: float | None = Field(ge=0.0, allow_inf_nan=False)

    @property
    def tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_write_tokens
            + self.cache_read_tokens
        )


class SpendRecord(BaseModel):
    """One job's spend on one suite."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = 1
    job: Job
    suite: str
    run: str
    created_at: datetime
    commit: str | None = None
    pull_request: int | None = None
    parts: list[SpendPart]
    # A pull request's ledger sums its older runs into one record (see fold): the runs it sums,
    # so that a later reading of the ledger, which sums more, replaces exactly those.
    covers: list[str] | None = None

    @field_validator("created_at")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        # A time without a zone is UTC's (as evalgate writes them), so that every record's time
        # compares with every other's.
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def spend_file(suite: str) -> str:
    """The suite's spend file on the data branch, beside its baseline history."""
    return data_file(suite, "spend.jsonl")


def _usage(outcomes: Sequence[Outcome]) -> Usage:
    return Usage(
        input_tokens=sum(o.input_tokens for o in outcomes),
        output_tokens=sum(o.output_tokens for o in outcomes),
        cache_write_tokens=sum(o.cache_write_tokens for o in outcomes),
        cache_read_tokens=sum(o.cache_read_tokens for o in outcomes),
    )


def _part(
    model: str, calls: int, usage: Usage, usd: float | None, role: str = "system"
) -> SpendPart:
    # Nothing sent costs nothing, whatever the price.
    return SpendPart.model_validate(
        {"model": model, "role": role, "calls": calls, "usd": usd if calls else 0.0}
        | usage.model_dump()
    )


def spend_of(run: Run, job: Job, *, pull_request: int | None = None) -> SpendRecord:
    """What ``run`` spent: the calls it sent (not the cached replies), by model."""
    # A cached reply was not sent; a call the budget or an interrupt kept back was not made.
    sent = [o for c in run.cases for o in c.outcomes if not o.cached and o.error_kind not in UNSENT]
    usage = _usage(sent)
    # An offline (fake) run calls nothing that costs: its dollars are a known zero.
    usd = 0.0 if run.model.offline else cost(usage, run.model.name, batch=run.batch)
    parts = [_part(run.model.name, sum(max(1, o.attempts) for o in sent), usage, usd)]
    judge = run.scorer.get("model")
    judged = sum(o.judge_calls for o in sent)
    if run.scorer.get("kind") == "judge" and isinstance(judge, dict) and judged:
        name = str(judge.get("name"))
        judge_usage = Usage(
            input_tokens=sum(o.judge_input_tokens for o in sent),
            output_tokens=sum(o.judge_output_tokens for o in sent),
        )
        judge_usd = 0.0 if judge.get("backend") == "fake" else cost(judge_usage, name)
        parts.append(_part(name, judged, judge_usage, judge_usd, "judge"))
    return SpendRecord(
        job=job,
        suite=run.suite,
        run=run.name,
        created_at=run.created_at,
        commit=run.git_commit,
        pull_request=pull_request,
        parts=parts,
    )


def judge_check_part(judge: str, calls: int, usage: Usage) -> SpendPart:
    """A pull request's check of its judge (``judge`` is ``backend/name``) against the labels."""
    backend, _, name = judge.partition("/")
    usd = 0.0 if backend == "fake" else cost(usage, name)
    return _part(name, calls, usage, usd, "judge-check")


def read_spend(text: str | None, where: str) -> list[SpendRecord]:
    return [
        r
        for _, r in parse_lines(
            text or "",
            SpendRecord,
            where,
            "not a spend record",
            "restore the file from the data branch's git history",
        )
    ]


def appended(records: Sequence[SpendRecord], new: Sequence[SpendRecord]) -> list[SpendRecord]:
    """The spend file with ``new`` added, the oldest records dropped past KEEP."""
    return [*records, *new][-KEEP:]


def dump(records: Sequence[SpendRecord]) -> str:
    return "".join(r.model_dump_json() + "\n" for r in records)


def _key(record: SpendRecord) -> tuple[str, str, str]:
    return record.job, record.suite, record.run


def is_fold(record: SpendRecord) -> bool:
    """Whether ``record`` is a ledger's sum of a pull request's older runs (see :func:`fold`)."""
    return record.covers is not None


def _total(records: Sequence[SpendRecord]) -> tuple[int, float | None]:
    calls = sum(p.calls for r in records for p in r.parts)
    usds = [p.usd for r in records for p in r.parts]
    return calls, None if any(u is None for u in usds) else sum(u for u in usds if u is not None)


def _replaced(records: Sequence[SpendRecord], fold: SpendRecord) -> list[SpendRecord] | None:
    """The records that ``fold`` sums and so replaces: its pull request's and suite's runs it
    names, and their earlier folds that name no run it does not. None when the fold sums less
    than they do (it is no later reading of the same ledger, so it replaces nothing)."""
    covered = set(fold.covers or ())
    mine = [
        r
        for r in records
        if r.job == "pr" and r.suite == fold.suite and r.pull_request == fold.pull_request
    ]
    replaced = [
        r for r in mine if (set(r.covers or ()) <= covered if is_fold(r) else r.run in covered)
    ]
    calls, usd = _total(replaced)
    fold_calls, fold_usd = _total([fold])
    if calls > fold_calls or (usd is not None and fold_usd is not None and usd > fold_usd + 1e-9):
        return None
    return replaced


def _inside_fold(fold: SpendRecord, kept: SpendRecord) -> bool:
    """Whether every run ``fold`` sums is summed by the fold ``kept`` already."""
    return (
        is_fold(kept)
        and kept.suite == fold.suite
        and kept.pull_request == fold.pull_request
        and set(fold.covers or ()) <= set(kept.covers or ())
    )


def merged(records: Sequence[SpendRecord], new: Sequence[SpendRecord]) -> list[SpendRecord]:
    """The spend file with those of ``new`` that are not in it yet added (a job's record of a
    suite is told by its run, which is unique, however often it was copied); see appended.

    A pull request's ledger read again after more runs sums more of them into its fold: a fold
    in ``new`` replaces exactly the records it names as summed (its earlier fold, and runs
    itemised then), so nothing is counted twice and nothing it does not sum is dropped; a fold
    that sums less than what it would replace, or only runs a kept fold sums already (an
    earlier reading merged after a later one, as two racing jobs can), is a stale or forged
    one, and is not added."""
    kept = list(records)
    known = {_key(r) for r in kept}
    added: list[SpendRecord] = []
    for r in new:
        if _key(r) in known:
            continue
        if is_fold(r):
            if any(_inside_fold(r, f) for f in [*kept, *added]):
                continue  # an earlier reading of the ledger, merged after a later one
            replaced = _replaced([*kept, *added], r)
            if replaced is None:
                continue
            gone = {id(x) for x in replaced}
            kept = [x for x in kept if id(x) not in gone]
            added = [x for x in added if id(x) not in gone]
        elif any(
            is_fold(f)
            and r.run in (f.covers or ())
            and f.suite == r.suite
            and f.pull_request == r.pull_request
            for f in [*kept, *added]
        ):
            continue  # already summed in a fold kept
        known.add(_key(r))
        added.append(r)
    return appended(kept, added)


# --- the pull request's ledger ----------------------------------------------------------------
#
# A pull-request job's token cannot write the data branch (contents: read), so what it spent
# rides in its comment, which the job's token writes: a hidden block, carried from each edit of
# the comment to the next, that the default branch's baseline job reads once the pull request
# is merged and keeps in the spend file. The block is base64 of compressed JSON: nothing in it
# (a suite name the pull request chose, say) can close the HTML comment or render.

LEDGER_KEEP = 100  # runs a comment itemises; older ones are folded into one record
_LEDGER = re.compile(r"<!-- evalgate-spend ([A-Za-z0-9+/=]{0,400000}) -->")
_RECORDS = TypeAdapter(list[SpendRecord])
_LEDGER_BYTES = 1 << 20  # inflated: far above any ledger, far below a runner's memory


def read_ledger(body: str | None) -> list[SpendRecord]:
    """The spend records a comment's ledger holds; none for a comment without one, or with one
    that is not a ledger (a damaged block loses the ledger, not the job)."""
    found = _LEDGER.search(body or "")
    if found is None:
        return []
    try:
        inflate = zlib.decompressobj()
        data = inflate.decompress(base64.b64decode(found.group(1), validate=True), _LEDGER_BYTES)
        if inflate.unconsumed_tail or not inflate.eof:
            return []
        records = _RECORDS.validate_json(data)
    except (binascii.Error, zlib.error, ValueError, ValidationError):
        return []
    # evalgate itemises at most LEDGER_KEEP runs (the older summed into one of them): a block
    # of more is not its ledger, and is not read (it could push the real history out).
    return records if len(records) <= LEDGER_KEEP else []


def _month(record: SpendRecord) -> str:
    return record.created_at.astimezone(UTC).strftime("%Y-%m")


def fold(records: Sequence[SpendRecord], keep: int) -> list[SpendRecord]:
    """The newest records as they are, the older ones summed (per model and role) into one a
    calendar month (UTC), each named by the runs it spans, at most ``keep`` records in all:
    nothing spent is dropped, only itemised less, and each month's spend stays in its month
    (`history --cost` sums by month)."""
    if len(records) <= keep:
        return list(records)
    months = 1
    while True:
        older = records[: len(records) - keep + months]
        found = len({_month(r) for r in older})
        if found <= months or found >= keep:
            break
        months = found
    one_sum = False
    if found >= keep and len({_month(r) for r in records}) <= keep:
        older = records  # every run summed by its month, none itemised
    elif found >= keep:  # more months than the ledger has room for: one sum
        older, one_sum = records[: len(records) - keep + 1], True
    by_month: dict[str, list[SpendRecord]] = {}
    for record in older:
        by_month.setdefault("" if one_sum else _month(record), []).append(record)
    return [*(_summed(group) for group in by_month.values()), *records[len(older) :]]


def _summed(older: Sequence[SpendRecord]) -> SpendRecord:
    """``older`` summed into one record, dated as the newest of them, naming the runs summed."""
    sums: dict[tuple[str, str], SpendPart] = {}
    for record in older:
        for part in record.parts:
            have = sums.get((part.model, part.role))
            if have is None:
                sums[(part.model, part.role)] = part.model_copy()
                continue
            sums[(part.model, part.role)] = have.model_copy(
                update={
                    "calls": have.calls + part.calls,
                    "input_tokens": have.input_tokens + part.input_tokens,
                    "output_tokens": have.output_tokens + part.output_tokens,
                    "cache_write_tokens": have.cache_write_tokens + part.cache_write_tokens,
                    "cache_read_tokens": have.cache_read_tokens + part.cache_read_tokens,
                    "usd": None if have.usd is None or part.usd is None else have.usd + part.usd,
                }
            )
    # The runs summed, in the ledger's order (an earlier fold's own, then the runs after it).
    covers = list(dict.fromkeys(run for r in older for run in (r.covers or [r.run])))
    newest = max(older, key=lambda r: r.created_at)
    return newest.model_copy(
        update={
            "run": f"{covers[0]}..{covers[-1]} ({len(covers)} runs)",
            "parts": list(sums.values()),
            "covers": covers,
        }
    )


#: The most of a comment its ledger takes while folding still shortens it (a ledger is folded
#: until it fits; the comment's report is shortened to leave it this room).
LEDGER_ROOM = 16_384


def ledger_block(earlier: str | None, new: Sequence[SpendRecord], room: int = LEDGER_ROOM) -> str:
    """The ledger of ``earlier``'s records (the comment it replaces) and ``new``, as the lines
    that end the comment ("" when there are none): itemised as far as ``room`` characters
    allow, the oldest runs folded into one record first. Never dropped: a ledger folded to
    one record is returned however long its list of runs."""
    records = merged(read_ledger(earlier), new)
    if not records:
        return ""
    block = ""
    for keep in (LEDGER_KEEP, 10, 1):
        data = zlib.compress(_RECORDS.dump_json(fold(records, keep)), 9)
        block = f"\n\n<!-- evalgate-spend {base64.b64encode(data).decode()} -->\n"
        if len(block) <= room:
            break
    return block


def with_ledger(body: str, earlier: str | None, new: Sequence[SpendRecord], limit: int) -> str:
    """``body`` with its ledger (see ledger_block), folded to fit ``limit`` characters in all;
    ValueError when even one folded record would not fit beside ``body`` (shorten the body:
    the ledger is never the part left out)."""
    head = body.rstrip()
    block = ledger_block(earlier, new, min(LEDGER_ROOM, limit - len(head)))
    if len(head) + len(block) > limit:
        raise ValueError(f"the ledger needs {len(block):,} characters; the body leaves fewer")
    return head + block if block else body


class JobSpend(BaseModel):
    """A month's spend of one kind of job on one suite."""

    model_config = ConfigDict(extra="forbid")

    jobs: int = 0
    calls: int = 0
    tokens: int = 0
    # Dollars of the calls whose price is known.
    usd: float = 0.0
    # Calls and tokens of models missing from the price table: spent, at a price unknown.
    unknown_calls: int = 0
    unknown_tokens: int = 0

    def add(self, record: SpendRecord) -> None:
        self.jobs += 1
        for part in record.parts:
            self.calls += part.calls
            self.tokens += part.tokens
            if part.usd is None:
                self.unknown_calls += part.calls
                self.unknown_tokens += part.tokens
            else:
                self.usd += part.usd


class SuiteSpend(BaseModel):
    model_config = ConfigDict(extra="forbid")

    suite: str
    total: JobSpend
    by_job: dict[str, JobSpend]


class MonthSpend(BaseModel):
    """``evalgate history --cost``: one month's spend per suite (``--json`` prints this)."""

    model_config = ConfigDict(extra="forbid")

    month: str
    suites: list[SuiteSpend]
    total: JobSpend


def month_of(when: datetime) -> str:
    """The UTC month of a time (a naive time is taken as UTC)."""
    return (when.astimezone(UTC) if when.tzinfo else when).strftime("%Y-%m")


def month_spend(records: Sequence[SpendRecord], month: str) -> MonthSpend:
    """The records made in ``month`` (YYYY-MM, UTC), summed per suite and per kind of job."""
    suites: dict[str, SuiteSpend] = {}
    total = JobSpend()
    for record in records:
        if month_of(record.created_at) != month:
            continue
        row = suites.setdefault(
            record.suite, SuiteSpend(suite=record.suite, total=JobSpend(), by_job={})
        )
        row.total.add(record)
        row.by_job.setdefault(record.job, JobSpend()).add(record)
        total.add(record)
    return MonthSpend(month=month, suites=[suites[s] for s in sorted(suites)], total=total)
