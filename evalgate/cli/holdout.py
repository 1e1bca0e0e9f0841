"""``evalgate holdout``: the sealed holdout (keygen, add, list, retire), every change recorded."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from evalgate import files
from evalgate.cases.holdout import (
    HoldoutKey,
    SealedChange,
    SecretKey,
    append_change,
    keygen,
    line_digest,
    load_public_key,
    load_secret_key,
    open_sealed,
    seal,
    sealed_lines,
)
from evalgate.cases.read import Case, load_case_file
from evalgate.cli.context import EXIT_OK, Context
from evalgate.cli.options import TEXT_OR_JSON, Subcommands, common_options
from evalgate.config.load import LoadedConfig
from evalgate.config.models import Suite
from evalgate.defaults import HOLDOUT_KEY_VARIABLE, PLAINTEXT_PUBLIC_KEY
from evalgate.errors import UserError
from evalgate.limits import counted
from evalgate.running.suite import read_suite_cases


def _refuse_taken_ids(
    loaded: LoadedConfig, suite: Suite, added: Sequence[Case], secret: SecretKey | None
) -> None:
    """A case to seal whose id the suite already has (a plain case, or with the key a sealed
    one) is refused: the suite could not be read with both, and a sealed line cannot be edited."""
    adding = {Path(c.source.rsplit(":", 1)[0]).resolve() for c in added}
    taken = {
        c.id: c.source
        for c in read_suite_cases(loaded, suite, holdout_secret=secret).cases
        # The file being sealed may be one the suite's globs match: its cases are these.
        if Path(c.source.rsplit(":", 1)[0]).resolve() not in adding
    }
    clash = [c for c in added if c.id in taken]
    if clash:
        more = f" (and {len(clash) - 1} more)" if len(clash) > 1 else ""
        raise UserError(
            f"case {clash[0].id!r} is already a case of the suite, at "
            f"{taken[clash[0].id]}{more}; nothing was sealed",
            where=clash[0].source,
            fix="give it a new id, or leave it out",
        )


def cmd_holdout(ctx: Context) -> int:
    loaded = ctx.config()
    _, suite = loaded.suite(ctx.args.suite)
    sealed = suite.sealed_holdout
    action = ctx.args.holdout_command
    if action == "keygen":
        secret, public = keygen()
        target = loaded.root / (sealed.public_key if sealed else PLAINTEXT_PUBLIC_KEY)
        if target.exists() and not ctx.args.force:
            raise UserError(
                f"{target} exists",
                fix="pass --force to replace it (old sealed cases stay sealed to the old key)",
            )
        target.write_text(public, encoding="utf-8")
        return _answer(
            ctx,
            {"public_key_file": str(target), "public_key": public.strip(), "secret_key": secret},
            f"public key written to {target} (commit it)",
            f"secret key (store it as the {HOLDOUT_KEY_VARIABLE} secret of a protected "
            "environment; it is not saved anywhere):",
            secret,
        )
    if sealed is None:
        raise UserError(
            "this suite has no sealed holdout",
            where=str(loaded.path),
            fix="add `sealed_holdout: {file: holdout.sealed.jsonl, public_key: holdout.pub}`",
        )
    store = loaded.root / sealed.file
    if action == "add":
        public_path = loaded.root / sealed.public_key
        if not public_path.is_file():
            raise UserError(
                "the holdout public key does not exist",
                where=str(public_path),
                fix="make one with `evalgate holdout keygen` and commit it",
            )
        recipient = load_public_key(files.read_text(public_path, "holdout public key"))
        added = load_case_file(Path(ctx.args.file), suite.fields)
        text = ctx.env.get(HOLDOUT_KEY_VARIABLE)
        key = load_secret_key(text) if text else None
        had_sealed = store.is_file() and bool(sealed_lines(store))
        _refuse_taken_ids(loaded, suite, added, key if had_sealed else None)
        lines = [
            seal(json.loads(json.dumps(_raw_record(Path(ctx.args.file), c.source))), recipient)
            for c in added
        ]
        with store.open("a", encoding="utf-8") as handle:
            handle.writelines(line + "\n" for line in lines)
        # With the key at hand the add is signed: only a signed add may bring back a line
        # that a retire removed.
        _record_change(loaded, sealed.changes, "add", lines, store, key)
        unchecked = (
            ""
            if key is not None or not had_sealed
            else f" (the ids already sealed were not checked: {HOLDOUT_KEY_VARIABLE} is not set)"
        )
        return _answer(
            ctx,
            {"sealed": len(added), "file": str(store), "changes": sealed.changes},
            f"sealed {counted(len(added), 'case')} into {store} and recorded the addition in "
            f"{sealed.changes}; commit both, and delete {ctx.args.file} now{unchecked}",
        )
    if action == "list":
        count = len(sealed_lines(store))
        text = ctx.env.get(HOLDOUT_KEY_VARIABLE)
        per: Counter[str] = Counter()
        if text:
            records = open_sealed(store, load_secret_key(text))
            field = suite.fields.category
            per = Counter(str(r.get(field)) if field else "(none)" for _, r in records)
        return _answer(
            ctx,
            {"count": count, "file": str(store), "by_category": dict(sorted(per.items())) or None},
            f"{count} sealed holdout cases in {store}",
            *(f"  {category}: {n}" for category, n in sorted(per.items())),
        )
    # retire: move leaked cases to the regression split, in a plain file.
    if suite.fields.split is None:
        raise UserError(
            "fields.split is null, so a retired case could not be marked regression and would be "
            "hashed onto a side again",
            fix="map fields.split (e.g. split: split) before retiring cases",
        )
    key = ctx.holdout_secret(suite)
    assert key is not None
    wanted = set(ctx.args.ids)
    keep: list[tuple[str, dict[str, Any]]] = []
    retired: list[tuple[str, dict[str, Any]]] = []
    for (_, line), (_, record) in zip(sealed_lines(store), open_sealed(store, key), strict=True):
        (retired if str(record.get(suite.fields.id)) in wanted else keep).append((line, record))
    missing = wanted - {str(r.get(suite.fields.id)) for _, r in retired}
    if missing:
        raise UserError(f"no sealed case with id {sorted(missing)[0]!r}")
    target = Path(ctx.args.to)
    with target.open("a", encoding="utf-8") as handle:
        for _, record in retired:
            if suite.fields.split:
                record[suite.fields.split] = "regression"
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    store.write_text("".join(line + "\n" for line, _ in keep), encoding="utf-8")
    _record_change(loaded, sealed.changes, "retire", [line for line, _ in retired], store, key)
    return _answer(
        ctx,
        {"retired": len(retired), "to": str(target), "changes": sealed.changes},
        f"retired {counted(len(retired), 'case')} to {target} as regression cases and recorded it in "
        f"{sealed.changes}; make sure the config's cases include {target}, and commit the "
        "sealed file and its change ledger together",
    )


def _answer(ctx: Context, data: dict[str, Any], *lines: str) -> int:
    """What a holdout action did: ``data`` as one JSON document with --json, else ``lines``."""
    if ctx.args.format == "json":
        ctx.print(json.dumps(data, indent=2))
    else:
        for line in lines:
            ctx.print(line)
    return EXIT_OK


def _record_change(
    loaded: LoadedConfig,
    changes: str,
    kind: Literal["add", "retire"],
    lines: list[str],
    store: Path,
    secret: SecretKey | None,
) -> None:
    """Append an add or retire to the sealed store's change ledger: counts and line digests
    only; a retire is signed with the holdout key, which only its holder has (an add too, when
    it is made with the key)."""
    change = SealedChange(
        time=datetime.now(UTC),
        change=kind,
        count=len(lines),
        lines=[line_digest(line) for line in lines],
        after=len(sealed_lines(store)),
    )
    if secret is not None:
        change = change.model_copy(update={"mac": HoldoutKey(secret).sign(change.body())})
    append_change(loaded.root / changes, change)


def _raw_record(path: Path, source: str) -> Any:
    number = int(source.rsplit(":", 1)[1])
    if path.suffix.lower() in (".yml", ".yaml"):
        raise UserError("holdout add takes JSONL", where=str(path))
    return json.loads(files.read_text(path, "case file").split("\n")[number - 1])


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    common = common_options(TEXT_OR_JSON)  # no Markdown form
    # The options are the actions' (as for baseline and judge): given to the group as well,
    # the action's defaults would overwrite them unseen.
    holdout = sub.add_parser("holdout", help="the sealed holdout")
    hsub = holdout.add_subparsers(dest="holdout_command", required=True, metavar="ACTION")
    keygen_ = hsub.add_parser("keygen", parents=[common], help="make a key pair")
    keygen_.add_argument("--force", action="store_true", help="replace an existing public key")
    add = hsub.add_parser("add", parents=[common], help="seal cases with the public key")
    add.add_argument("file", help="JSONL file of new holdout cases")
    hsub.add_parser("list", parents=[common], help="count sealed cases (by category with the key)")
    retire = hsub.add_parser("retire", parents=[common], help="move leaked cases to regression")
    retire.add_argument("ids", nargs="+", help="case ids to retire")
    retire.add_argument("--to", default="regression.jsonl", help="plain case file to append to")
    holdout.set_defaults(func=cmd_holdout)
