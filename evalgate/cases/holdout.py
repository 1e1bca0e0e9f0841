"""The holdout's discipline: redaction of holdout results, the read ledger, the sealed store.

* Redaction: the holdout part of a run keeps only hashes, groups and scores; never a case's
  input, reply, expected answer or id.
* Ledger: every scoring of the holdout appends a record; release reports count the reads.
* Sealed store: holdout cases encrypted to a public key (X25519 key agreement, HKDF-SHA256,
  ChaCha20-Poly1305), one ephemeral key per case, so anyone with the public key can add cases
  and only the job that holds the private key can read them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, ValidationError

from evalgate import files
from evalgate.errors import UserError
from evalgate.jsonl import append_record, parse_lines
from evalgate.runs.schema import CaseResult, Outcome

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.x25519 import (
        X25519PrivateKey,
        X25519PublicKey,
    )

# cryptography is imported by the functions that use a key: a run with no sealed holdout and
# no holdout secret (every pull request's, every local one) never needs it.

SECRET_PREFIX = "EVALGATE-HOLDOUT-KEY-1-"
PUBLIC_PREFIX = "evalgate-holdout-pub-1 "
_INFO = b"evalgate-holdout-v1"
_NAMES_INFO = b"evalgate-holdout-names-v1"
# The secret key's type, for modules that pass one along without importing cryptography.
SecretKey: TypeAlias = "X25519PrivateKey"


# --- keyed names ---------------------------------------------------------------------------


class HoldoutKey:
    """Keyed names for holdout cases, so that published records pair cases across releases
    while nobody without the holdout secret can check a guess against them.

    With the secret, every name is an HMAC-SHA256 under a key derived from it (HKDF-SHA256,
    its own ``info``), so a guessed case, hashed, matches nothing. Without one (a plaintext
    holdout and no key set) the names are plain hashes, which anyone holding a case's text can
    recompute: docs/holdout.md says so, and the release summary warns.
    """

    def __init__(self, secret: X25519PrivateKey | None = None) -> None:
        self.keyed = secret is not None
        if secret is None:
            self._key = b"evalgate-holdout-unkeyed-v1"
        else:
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            raw = secret.private_bytes(
                serialization.Encoding.Raw,
                serialization.PrivateFormat.Raw,
                serialization.NoEncryption(),
            )
            self._key = HKDF(
                algorithm=hashes.SHA256(), length=32, salt=None, info=_NAMES_INFO
            ).derive(raw)

    def _mac(self, domain: str, text: str) -> str:
        return hmac.new(self._key, f"{domain}\0{text}".encode(), hashlib.sha256).hexdigest()

    def case(self, case_id: str, case_hash: str) -> str:
        """A holdout case's public name (its id in run files and release records)."""
        return "h-" + self._mac("case", f"{case_id}\0{case_hash}")[:16]

    def content(self, case_hash: str) -> str:
        """What stands for a holdout case's content hash in public records."""
        return self._mac("content", case_hash)

    def group(self, group: str | None) -> str | None:
        return None if group is None else "g-" + self._mac("group", group)[:12]

    def digest(self, names: Iterable[str]) -> str:
        """One digest of a set of holdout cases (by their keyed names): size and content."""
        return self._mac("set", "\n".join(sorted(names)))

    def sign(self, text: str) -> str:
        """A MAC of a record, so that a change to it without the key is detected."""
        return self._mac("record", text)

    def verify(self, text: str, mac: str | None) -> bool:
        return mac is not None and hmac.compare_digest(self.sign(text), mac)


def redact(case: CaseResult, key: HoldoutKey) -> CaseResult:
    """A holdout case as it may appear in a run file: keyed names, keyed group and scores only."""
    outcomes = [
        Outcome(
            score=o.score,
            format_ok=o.format_ok,
            input_tokens=o.input_tokens,
            output_tokens=o.output_tokens,
            cache_write_tokens=o.cache_write_tokens,
            cache_read_tokens=o.cache_read_tokens,
            latency_s=o.latency_s,
            stop_reason=o.stop_reason,
            error_kind=o.error_kind,
            # An error message could quote the input: keep its kind only.
            error=None if o.error is None else f"{o.error_kind or 'other'} error",
            attempts=o.attempts,
        )
        for o in case.outcomes
    ]
    return CaseResult(
        id=key.case(case.id, case.hash),
        split="holdout",
        # No group, keyed or not: counted in a public run file, a group's size can be matched
        # against the plaintext groups' sizes.
        group=None,
        hash=key.content(case.hash),
        outcomes=outcomes,
    )


_USAGE = ("input_tokens", "output_tokens", "cache_write_tokens", "cache_read_tokens")


def redact_all(cases: list[CaseResult], key: HoldoutKey) -> list[CaseResult]:
    """A run's cases with its holdout redacted: the other cases in their order, then the
    holdout sorted by keyed name (in file order, a name's position would tell which case it
    is), every holdout outcome's token counts and latency evened out to the holdout's mean
    (the totals stay exact; a case's length no longer singles it out)."""
    visible = [c for c in cases if c.split != "holdout"]
    held = sorted((redact(c, key) for c in cases if c.split == "holdout"), key=lambda c: c.id)
    outcomes = [o for c in held for o in c.outcomes]
    if not outcomes:
        return visible + held
    n = len(outcomes)
    totals = {name: sum(getattr(o, name) for o in outcomes) for name in _USAGE}
    latency = sum(o.latency_s for o in outcomes) / n
    evened = []
    index = 0
    for case in held:
        shares = []
        for outcome in case.outcomes:
            # Integer shares that add up to the total: the first (total mod n) get one more.
            update: dict[str, Any] = {
                name: totals[name] // n + (index < totals[name] % n) for name in _USAGE
            }
            update["latency_s"] = latency
            shares.append(outcome.model_copy(update=update))
            index += 1
        evened.append(case.model_copy(update={"outcomes": shares}))
    return visible + evened


# --- ledger ----------------------------------------------------------------------------------


class LedgerRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    time: datetime
    git_ref: str | None
    git_commit: str | None
    prompt: str
    prompt_sha256: str
    holdout_sha256: str
    score: float | None
    n: int
    purpose: str = "release"
    # Set when a read past the budget was forced; the reason is kept.
    forced_reason: str | None = None
    # A judge check's read of the holdout labels: its aggregate result and how it was measured,
    # so the same judge (``prompt_sha256``, its identity) on the same labels is not read again.
    result: dict[str, Any] | None = None


def read_ledger(path: Path) -> list[LedgerRecord]:
    if not path.exists():
        return []
    text = files.read_text(path, "read ledger")
    fix = "restore the ledger from the data branch"
    return [r for _, r in parse_lines(text, LedgerRecord, str(path), "corrupt ledger record", fix)]


def append_ledger(path: Path, record: LedgerRecord) -> int:
    """Append a record; returns how many times this holdout has now been read."""
    append_record(path, record)
    return reads_of(read_ledger(path), record.holdout_sha256)


def reads_of(records: list[LedgerRecord], holdout_sha256: str) -> int:
    return sum(1 for r in records if r.holdout_sha256 == holdout_sha256)


# --- sealed store ----------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def keygen() -> tuple[str, str]:
    """A new key pair: (secret key text for a CI secret, public key text for the repository)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    secret = X25519PrivateKey.generate()
    raw_secret = secret.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    raw_public = secret.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return SECRET_PREFIX + _b64(raw_secret), PUBLIC_PREFIX + _b64(raw_public) + "\n"


def _decode(text: str, prefix: str, what: str, fix: str) -> bytes:
    text = text.strip()
    if not text.startswith(prefix):
        raise UserError(f"this is not an evalgate {what}", fix=fix)
    try:
        raw = base64.b64decode(text[len(prefix) :], validate=True)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise UserError(f"the {what} is damaged (wrong length)", fix=fix)
    return raw


def load_public_key(text: str) -> X25519PublicKey:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

    raw = _decode(
        text, PUBLIC_PREFIX, "holdout public key", "make one with `evalgate holdout keygen`"
    )
    return X25519PublicKey.from_public_bytes(raw)


def load_secret_key(text: str) -> X25519PrivateKey:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    raw = _decode(
        text,
        SECRET_PREFIX,
        "holdout secret key",
        "set EVALGATE_HOLDOUT_KEY to the secret printed by `evalgate holdout keygen`",
    )
    return X25519PrivateKey.from_private_bytes(raw)


def is_key_of(secret: X25519PrivateKey, public: X25519PublicKey) -> bool:
    """Whether ``secret`` is the secret half of ``public`` (keygen's pair)."""
    return _raw_public(secret.public_key()) == _raw_public(public)


def _key(shared: bytes, epk: bytes, recipient: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=epk + recipient, info=_INFO).derive(
        shared
    )


def _raw_public(key: X25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def seal(record: dict[str, Any], public: X25519PublicKey) -> str:
    """One sealed line for one case record."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    ephemeral = X25519PrivateKey.generate()
    epk = _raw_public(ephemeral.public_key())
    key = _key(ephemeral.exchange(public), epk, _raw_public(public))
    nonce = os.urandom(12)
    plaintext = json.dumps(record, ensure_ascii=False, sort_keys=True).encode()
    sealed = ChaCha20Poly1305(key).encrypt(nonce, plaintext, _INFO)
    return json.dumps({"v": 1, "epk": _b64(epk), "nonce": _b64(nonce), "ct": _b64(sealed)})


def unseal(line: str, secret: X25519PrivateKey, where: str) -> dict[str, Any]:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    box: Any = None
    version: Any = 1  # no version to read: damaged, as said below
    try:
        box = json.loads(line)
        version = box["v"] if isinstance(box, dict) else 1
    except (ValueError, KeyError):
        pass
    if version != 1 or isinstance(version, bool):
        # A record of another format would be read as this one's: refuse it by name.
        raise UserError(
            f"sealed holdout record of unknown format version {version!r} (this evalgate reads 1)",
            where=where,
            fix="upgrade evalgate, or restore the sealed file from version control",
        )
    try:
        epk = base64.b64decode(box["epk"])
        nonce = base64.b64decode(box["nonce"])
        sealed = base64.b64decode(box["ct"])
        # A damaged key or nonce (wrong length, a low-order point) is a ValueError here, not a
        # crash further down.
        if len(nonce) != 12:
            raise ValueError("nonce length")
        shared = secret.exchange(X25519PublicKey.from_public_bytes(epk))
    except (ValueError, KeyError, TypeError):
        raise UserError(
            "not a sealed holdout record (damaged)",
            where=where,
            fix="restore the sealed file from version control",
        ) from None
    key = _key(shared, epk, _raw_public(secret.public_key()))
    try:
        plaintext = ChaCha20Poly1305(key).decrypt(nonce, sealed, _INFO)
    except InvalidTag:
        raise UserError(
            "the holdout key does not open this sealed holdout",
            where=where,
            fix="EVALGATE_HOLDOUT_KEY must be the secret that matches the repository's public key",
        ) from None
    record: dict[str, Any] = json.loads(plaintext)
    return record


def _text(path: Path, what: str) -> str:
    return files.read_text(path, f"the {what}")


def sealed_lines(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    return [
        (number, line)
        for number, line in enumerate(_text(path, "sealed holdout").splitlines(), start=1)
        if line.strip()
    ]


def open_sealed(path: Path, secret: X25519PrivateKey) -> list[tuple[str, dict[str, Any]]]:
    """Every sealed record as (where, record)."""
    return [(f"{path}:{n}", unseal(line, secret, f"{path}:{n}")) for n, line in sealed_lines(path)]


# --- the sealed store's change ledger --------------------------------------------------------
#
# The sealed file is public, so a pull request can trim it. Each release records the sealed
# lines it read (a hash of each line's ciphertext, which says nothing of the case), and every
# ``holdout add`` / ``holdout retire`` appends what it did to a change ledger committed beside
# the sealed file. A release whose sealed lines differ from the previous release's by more
# than the recorded changes fails. Only the key holder can retire (a retire record carries a
# MAC under the holdout key); anyone with the public key can add.


def line_digest(line: str) -> str:
    """A sealed line's public name: a hash of its ciphertext, unlinkable to the case."""
    return hashlib.sha256(line.strip().encode()).hexdigest()[:32]


def sealed_digests(path: Path) -> list[str]:
    return [line_digest(line) for _, line in sealed_lines(path)]


class SealedChange(BaseModel):
    """One recorded change of the sealed store: counts and line digests, never content; or a
    release job's anchor (``change: release``): the newest release record's place in the
    history and its MAC, so a history rolled back or deleted on the data branch is detected."""

    model_config = ConfigDict(extra="forbid")

    v: Literal[1] = 1
    time: datetime
    change: Literal["add", "retire", "release"]
    count: int
    lines: list[str]
    after: int
    # An anchor's release: its name, place and record MAC.
    release: str | None = None
    seq: int | None = None
    record: str | None = None
    # A retire's or anchor's MAC under the holdout key; an add made with the key has one too
    # (the only kind of add that may bring back a retired line), one made without has none.
    mac: str | None = None

    def body(self) -> str:
        unset = {f for f in ("release", "seq", "record") if getattr(self, f) is None}
        return self.model_dump_json(exclude={"mac", *unset})


def anchors_of(changes: list[tuple[str, SealedChange]]) -> list[tuple[str, SealedChange]]:
    return [(w, c) for w, c in changes if c.change == "release"]


def release_anchor(
    time: datetime, name: str, seq: int, record_mac: str, after: int, key: HoldoutKey
) -> SealedChange:
    anchor = SealedChange(
        time=time,
        change="release",
        count=0,
        lines=[],
        after=after,
        release=name,
        seq=seq,
        record=record_mac,
    )
    return anchor.model_copy(update={"mac": key.sign(anchor.body())})


# How a release's check run carries its anchor: one line of its details (output.text), found
# again by the next release on the tag's commit, where whoever writes the data branch and the
# default branch cannot remove it.
ANCHOR_PREFIX = "evalgate release anchor: "


def anchor_line(anchor: SealedChange) -> str:
    return ANCHOR_PREFIX + anchor.model_dump_json()


def anchors_in(text: str) -> tuple[list[SealedChange], int]:
    """The release anchors in a check run's text, and how many anchor lines did not parse."""
    found: list[SealedChange] = []
    unreadable = 0
    for line in text.splitlines():
        if not line.startswith(ANCHOR_PREFIX):
            continue
        try:
            anchor = SealedChange.model_validate_json(line.removeprefix(ANCHOR_PREFIX))
        except ValidationError:
            unreadable += 1
            continue
        if anchor.change == "release" and anchor.seq is not None and anchor.record:
            found.append(anchor)
        else:
            unreadable += 1
    return found, unreadable


def read_changes(path: Path) -> list[tuple[str, SealedChange]]:
    if not path.exists():
        return []
    return parse_changes(_text(path, "holdout change ledger"), str(path), path.name)


def parse_changes(text: str, where: str, name: str) -> list[tuple[str, SealedChange]]:
    found = parse_lines(
        text,
        SealedChange,
        where,
        "not a holdout change record",
        "restore the change ledger from version control",
    )
    return [(f"{name}:{number}", change) for number, change in found]


def append_change(path: Path, change: SealedChange) -> None:
    append_record(path, change)


def forged_retires(changes: list[tuple[str, SealedChange]], key: HoldoutKey) -> list[str]:
    """A problem line when a retire record is not signed by the holdout key."""
    forged = [w for w, c in changes if c.change == "retire" and not key.verify(c.body(), c.mac)]
    if not forged:
        return []
    return [
        f"the holdout change ledger has {len(forged)} retire records not signed by the holdout "
        f"key ({', '.join(forged[:3])}): only `evalgate holdout retire`, run with the key, may "
        "remove sealed cases"
    ]


def _retired(changes: list[tuple[str, SealedChange]], key: HoldoutKey) -> set[str]:
    """Line digests retired by a signed retire and not brought back since by a signed add."""
    retired: set[str] = set()
    for _, c in changes:
        if c.change == "retire" and key.verify(c.body(), c.mac):
            retired.update(c.lines)
        elif c.change == "add" and c.mac is not None and key.verify(c.body(), c.mac):
            retired.difference_update(c.lines)
    return retired


def returned_lines(
    current: list[str], changes: list[tuple[str, SealedChange]], key: HoldoutKey
) -> list[str]:
    """A problem line when retired sealed lines are back in the store: a retired case's
    ciphertext never returns without a new add signed with the key."""
    back = set(current) & _retired(changes, key)
    if not back:
        return []
    return [
        f"{len(back)} sealed holdout lines that a signed `evalgate holdout retire` retired are "
        "back in the sealed file: remove them and restore their regression copies (a retired "
        "case returns only through `evalgate holdout add` run with the holdout key)"
    ]


def unrecorded_changes(
    previous: list[str],
    current: list[str],
    changes: list[tuple[str, SealedChange]],
    key: HoldoutKey,
    since: str,
) -> list[str]:
    """Why the sealed store's change since the previous release is not accounted for, if so."""
    problems = forged_retires(changes, key) + returned_lines(current, changes, key)
    retired = {
        d
        for _, c in changes
        if c.change == "retire" and key.verify(c.body(), c.mac)
        for d in c.lines
    }
    added = {d for _, c in changes if c.change == "add" for d in c.lines}
    before, now = set(previous), set(current)
    removed = before - now - retired
    appeared = now - before - added
    if removed:
        problems.append(
            f"the sealed holdout lost {len(removed)} of its {len(before)} cases since {since} "
            f"without a recorded `evalgate holdout retire` (it has {len(now)} now): restore "
            "the sealed file from version control"
        )
    if appeared:
        problems.append(
            f"{len(appeared)} sealed holdout cases appeared since {since} without a recorded "
            "`evalgate holdout add`: add cases only with that command"
        )
    return problems


def replayed_changes(
    current: list[str], changes: list[tuple[str, SealedChange]], key: HoldoutKey
) -> list[str]:
    """Without an earlier release to compare with: the change ledger, replayed (adds less
    signed retires), must give the sealed lines there are."""
    retired = {
        d
        for _, c in changes
        if c.change == "retire" and key.verify(c.body(), c.mac)
        for d in c.lines
    }
    expected = {d for _, c in changes if c.change == "add" for d in c.lines} - retired
    problems = returned_lines(current, changes, key)
    now = set(current) - retired
    if expected - now:
        problems.append(
            f"the sealed holdout lacks {len(expected - now)} of the {len(expected)} cases its "
            "change ledger records, with no `evalgate holdout retire` recorded for them: restore "
            "the sealed file from version control"
        )
    if now - expected:
        problems.append(
            f"{len(now - expected)} sealed holdout cases are not in its change ledger: add cases "
            "only with `evalgate holdout add`"
        )
    return problems
