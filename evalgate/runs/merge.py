"""Merging shard runs into one run, after checking they are slices of the same run. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from evalgate.errors import UserError
from evalgate.runs.schema import Run


def _key(run: Run) -> tuple[object, ...]:
    return (
        run.suite,
        run.prompt.sha256,
        run.model.backend,
        run.model.name,
        run.model.max_tokens,
        run.model.temperature,
        run.model.options_sha256,
        run.scorer_sha256,
        run.tools_sha256,
        run.repeats,
        run.limited_to,
        run.shard_of_sha256,
        (run.shard or "").partition("/")[2],
    )


def _index(run: Run) -> int:
    return int((run.shard or "0/0").partition("/")[0])


FIELDS = (
    "suite",
    "prompt",
    "model backend",
    "model",
    "max_tokens",
    "temperature",
    "model options",
    "scorer",
    "tools",
    "repeats",
    "limit",
    "case set",
    "shard count",
)


def merge_runs(shards: Sequence[Run]) -> Run:
    """One run from its shards: every shard of the same prompt, cases, model and settings."""
    if not shards:
        raise UserError("nothing to merge", fix="pass the shard run files")
    for run in shards:
        if run.shard is None:
            raise UserError(
                f"run {run.name} is not a shard", fix="make shards with `evalgate run --shard i/N`"
            )
    first = shards[0]
    for run in shards[1:]:
        for name, a, b in zip(FIELDS, _key(first), _key(run), strict=True):
            if a != b:
                raise UserError(
                    f"shards {first.name} and {run.name} differ in {name} ({a} vs {b})",
                    fix="merge only the shards of one run: same prompt, cases, model and settings",
                )
    total = int((first.shard or "0/0").partition("/")[2])
    seen = sorted(_index(r) for r in shards)
    if seen != list(range(1, total + 1)):
        missing = sorted(set(range(1, total + 1)) - set(seen))
        duplicated = sorted({i for i in seen if seen.count(i) > 1})
        said = []
        if duplicated:
            said.append(" and ".join(f"shard {i}/{total}" for i in duplicated) + " given twice")
        if missing:
            said.append(" and ".join(f"shard {i}/{total}" for i in missing) + " missing")
        raise UserError("; ".join(said), fix="pass each shard of the run exactly once")
    # By shard number (as text, "10/12" would sort before "2/12").
    cases = [c for r in sorted(shards, key=_index) for c in r.cases]
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise UserError("a case appears in two shards", fix="re-run the shards from one case set")
    return first.model_copy(
        update={
            "name": first.name.rsplit("-", 1)[0] + "-merged",
            "cases": cases,
            "cases_sha256": first.shard_of_sha256 or first.cases_sha256,
            "shard": None,
            "shard_of_sha256": None,
            "wall_s": max(r.wall_s for r in shards),
            "interrupted": any(r.interrupted for r in shards),
            "created_at": max(r.created_at for r in shards),
        },
        deep=True,
    )
