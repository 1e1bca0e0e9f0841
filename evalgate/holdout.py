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
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import BaseModel, ConfigDict, ValidationError

from evalgate.errors import UserError
from evalgate.runs import CaseResult, Outcome

SECRET_PREFIX = "EVALGATE-HOLDOUT-KEY-1-"
PUBLIC_PREFIX = "evalgate-holdout-pub-1 "
_INFO = b"evalgate-holdout-v1"
# The secret key's type, for modules that pass one along without importing cryptography.
SecretKey = X25519PrivateKey


# --- redaction -------------------------------------------------------------------------------


def hashed_id(case_id: str, case_hash: str) -> str:
    """A holdout case's public name: not reversible to its id without the case itself."""
    return "h-" + hashlib.sha256(f"{case_id}\0{case_hash}".encode()).hexdigest()[:16]


def redact(case: CaseResult) -> CaseResult:
    """A holdout case as it may appear in a run file: hashes, group and scores only."""
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
        id=hashed_id(case.id, case.hash),
        split="holdout",
        group=case.group,
        hash=case.hash,
        outcomes=outcomes,
    )


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


def read_ledger(path: Path) -> list[LedgerRecord]:
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(LedgerRecord.model_validate_json(line))
        except ValidationError as exc:
            raise UserError(
                f"corrupt ledger record: {exc.errors()[0]['msg']}",
                where=f"{path}:{number}",
                fix="restore the ledger from the data branch",
            ) from None
    return records


def append_ledger(path: Path, record: LedgerRecord) -> int:
    """Append a record; returns how many times this holdout has now been read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(record.model_dump_json() + "\n")
    return reads_of(read_ledger(path), record.holdout_sha256)


def reads_of(records: list[LedgerRecord], holdout_sha256: str) -> int:
    return sum(1 for r in records if r.holdout_sha256 == holdout_sha256)


# --- sealed store ----------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def keygen() -> tuple[str, str]:
    """A new key pair: (secret key text for a CI secret, public key text for the repository)."""
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
    raw = _decode(
        text, PUBLIC_PREFIX, "holdout public key", "make one with `evalgate holdout keygen`"
    )
    return X25519PublicKey.from_public_bytes(raw)


def load_secret_key(text: str) -> X25519PrivateKey:
    raw = _decode(
        text,
        SECRET_PREFIX,
        "holdout secret key",
        "set EVALGATE_HOLDOUT_KEY to the secret printed by `evalgate holdout keygen`",
    )
    return X25519PrivateKey.from_private_bytes(raw)


def _key(shared: bytes, epk: bytes, recipient: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=epk + recipient, info=_INFO).derive(
        shared
    )


def _raw_public(key: X25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def seal(record: dict[str, Any], public: X25519PublicKey) -> str:
    """One sealed line for one case record."""
    ephemeral = X25519PrivateKey.generate()
    epk = _raw_public(ephemeral.public_key())
    key = _key(ephemeral.exchange(public), epk, _raw_public(public))
    nonce = os.urandom(12)
    plaintext = json.dumps(record, ensure_ascii=False, sort_keys=True).encode()
    sealed = ChaCha20Poly1305(key).encrypt(nonce, plaintext, _INFO)
    return json.dumps({"v": 1, "epk": _b64(epk), "nonce": _b64(nonce), "ct": _b64(sealed)})


def unseal(line: str, secret: X25519PrivateKey, where: str) -> dict[str, Any]:
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


def sealed_lines(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    return [
        (number, line)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if line.strip()
    ]


def open_sealed(path: Path, secret: X25519PrivateKey) -> list[tuple[str, dict[str, Any]]]:
    """Every sealed record as (where, record)."""
    return [(f"{path}:{n}", unseal(line, secret, f"{path}:{n}")) for n, line in sealed_lines(path)]
