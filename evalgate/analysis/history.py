"""The release history as a chain that only moves forward. Pure.

Each keyed release record carries its place in the history (``seq``) and the MAC of the record
before it (``previous``), both under its own MAC: a record taken out of the start or the middle
breaks the chain, and a record whose MAC was stripped is named. What a chain cannot show alone
is a history cut short at its end, or deleted: for that the release job leaves an anchor (the
newest record's place and MAC, signed) in the sealed store's change ledger on the default
branch, out of reach of whoever can write the data branch (docs/holdout.md, "Sealed history").
"""

from __future__ import annotations

from datetime import datetime

from evalgate.analysis.release import ReleaseRecord
from evalgate.cases.holdout import HoldoutKey, SealedChange
from evalgate.errors import UserError

RESTORE = "restore the release history and the read ledger from the data branch's git history"

# How an anchor read from a release's check run is named (an anchor's ``where``).
CHECK_RUN = "the check run"


def check_run_where(check_name: str, tag: str, url: str) -> str:
    return f"{CHECK_RUN} {check_name!r} on tag {tag}" + (f" ({url})" if url else "")


def chain_order(history: list[ReleaseRecord]) -> list[ReleaseRecord]:
    """Records written before the chain (by time), then the chain by place."""
    legacy = sorted((r for r in history if r.seq is None), key=lambda r: r.time)
    chained = sorted((r for r in history if r.seq is not None), key=lambda r: (r.seq, r.time))
    return legacy + chained


def next_link(history: list[ReleaseRecord]) -> tuple[int, str | None]:
    """The place and ``previous`` MAC of the record a release appends to the history."""
    signed = [r for r in chain_order(history) if r.mac is not None]
    chained = [r for r in signed if r.seq is not None]
    seq = (chained[-1].seq or 0) + 1 if chained else 1
    return seq, signed[-1].mac if signed else None


def effective(history: list[ReleaseRecord]) -> list[ReleaseRecord]:
    """One record a tag: its last passing run, else its last run. A re-run that failed is kept
    in the chain but never stands in for the tag's good record, so the releases after it
    compare with what was released."""
    ordered = chain_order(history)
    chosen: dict[str, ReleaseRecord] = {}
    for record in ordered:
        kept = chosen.get(record.name)
        if kept is None or kept.passed is not True or record.passed is True:
            chosen[record.name] = record
    keep = {id(r) for r in chosen.values()}
    return [r for r in ordered if id(r) in keep]


def _stripped(record: ReleaseRecord, sealed_since: datetime | None) -> bool:
    # evalgate signs every record it writes under a key, and a sealed holdout always has one:
    # a record made since the holdout was sealed, or one that says it was keyed, sealed or
    # chained, with no MAC had it taken off. (Records of a plaintext holdout without a key,
    # from before it was sealed, are unsigned and stay so.)
    since = sealed_since is not None and record.time >= sealed_since
    return record.mac is None and (
        since or record.seq is not None or record.holdout_keyed or record.sealed_lines is not None
    )


def check_chain(
    history: list[ReleaseRecord],
    key: HoldoutKey,
    where: str,
    *,
    sealed_since: datetime | None = None,
) -> None:
    """Refuse a keyed history whose chain is broken: a stripped MAC, a record missing from the
    start or the middle. (MACs themselves are checked by ``usable_history``.)
    ``sealed_since``: when the holdout was sealed (its change ledger's first record)."""
    if not key.keyed:
        return
    stripped = [r.name for r in history if _stripped(r, sealed_since)]
    if stripped:
        raise UserError(
            f"{len(stripped)} keyed release records carry no MAC ({', '.join(stripped[:3])}): "
            "evalgate signs every keyed release, so the MACs were stripped",
            where=where,
            fix=RESTORE,
        )
    chained = [r for r in chain_order(history) if r.seq is not None]
    expected_previous: str | None = None
    for place, record in enumerate(chained, start=1):
        if record.seq != place or (place > 1 and record.previous != expected_previous):
            raise UserError(
                f"the release history's chain is broken at {record.name!r} (release "
                f"{record.seq}, after {place - 1} records that link up): a record before it "
                "was removed or replaced",
                where=where,
                fix=RESTORE,
            )
        expected_previous = record.mac


def check_anchors(
    history: list[ReleaseRecord],
    anchors: list[tuple[str, SealedChange]],
    key: HoldoutKey,
    where: str,
) -> None:
    """Refuse a history that lacks the newest release anchored (rolled back or deleted) in the
    change ledger or in an earlier release's check run, and ledger anchors not signed by the
    holdout key. (A check run's anchor that does not verify is no anchor: the caller drops
    it, since anyone with ``checks: write`` can make a check run.)"""
    if not key.keyed or not anchors:
        return
    forged = [w for w, a in anchors if not key.verify(a.body(), a.mac)]
    if forged:
        raise UserError(
            f"the holdout change ledger has {len(forged)} release anchors not signed by the "
            f"holdout key ({', '.join(forged[:3])})",
            where=forged[0],
            fix="remove those lines: only a release job, which holds the key, writes anchors",
        )
    chained = [r for r in history if r.seq is not None and r.mac is not None]
    held = {(r.seq, r.mac) for r in chained}
    missing = [(w, a) for w, a in anchors if (a.seq, a.record) not in held]
    if missing:
        # The newest anchor the history lacks; a check run names itself before a ledger line.
        told, newest = max(missing, key=lambda m: (m[1].seq or 0, m[0].startswith(CHECK_RUN)))
        source = told if told.startswith(CHECK_RUN) else "the holdout change ledger"
        last = max((r.seq or 0 for r in chained), default=0)
        has = f"ends at release {last}" if last else "has no signed release"
        raise UserError(
            f"{source} anchors release {newest.release!r} as release "
            f"{newest.seq}, but the release history {has}: it was rolled back or deleted",
            where=where,
            fix=RESTORE,
        )


def check_ledger(
    history: list[ReleaseRecord], anchors: list[tuple[str, SealedChange]], ledger: str | None
) -> None:
    """Once a release was sealed, a missing read ledger is a fault, not a first read."""
    sealed = [r.name for r in history if r.sealed_lines is not None or r.seq is not None]
    if (sealed or anchors) and not (ledger or "").strip():
        told = f"{len(sealed)} sealed releases" if sealed else "anchored releases"
        raise UserError(
            f"the holdout's read ledger is missing though the history records {told}: the "
            "reads so far would start again from zero",
            where="the read ledger",
            fix=RESTORE,
        )
