"""Splits, the sealed holdout, releases and audits."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from evalgate import files
from evalgate.audit import audit
from evalgate.cases import CaseSet, load_case_file
from evalgate.cli.context import (
    EXIT_GATE_FAILED,
    EXIT_OK,
    HOLDOUT_KEY_VARIABLE,
    Context,
    holdout_sha,
    ledger_path,
    release_version,
)
from evalgate.config import LoadedConfig, Suite
from evalgate.errors import UserError
from evalgate.holdout import (
    HoldoutKey,
    SealedChange,
    SecretKey,
    append_change,
    keygen,
    line_digest,
    load_public_key,
    load_secret_key,
    open_sealed,
    read_ledger,
    reads_of,
    seal,
    sealed_lines,
)
from evalgate.pipeline import (
    load_suite_cases,
)
from evalgate.release import read_releases, write_release
from evalgate.report.render import render
from evalgate.runs import save_run
from evalgate.split import check_split


def cmd_split(ctx: Context) -> int:
    loaded = ctx.config()
    name, suite = loaded.suite(ctx.args.suite)
    # A sealed holdout is counted and checked only where its key is (it is not in the files).
    secret = None
    if suite.sealed_holdout is not None:
        if ctx.env.get(HOLDOUT_KEY_VARIABLE):
            secret = ctx.holdout_secret(suite)
        else:
            ctx.warn(
                f"the sealed holdout is left out: set {HOLDOUT_KEY_VARIABLE} to count it and "
                "check it for leaks"
            )
    reveal = bool(getattr(ctx.args, "show_holdout", False))
    if reveal:
        if not ctx.env.get(HOLDOUT_KEY_VARIABLE):
            raise UserError(
                "--show-holdout lists holdout cases, which only the holdout key's holder may see",
                fix=f"set {HOLDOUT_KEY_VARIABLE} (the secret of `evalgate holdout keygen`)",
            )
        secret = secret or ctx.holdout_secret(suite)  # a wrong key is refused here
    cases = load_suite_cases(loaded, suite, holdout_secret=secret, on_note=ctx.warn)
    report = check_split(cases.cases, suite.split, suite.fields, reveal=reveal)
    if ctx.args.format == "json":
        ctx.print(report.model_dump_json(indent=2))
    else:
        ctx.print(render("split.txt.j2", s=report, suite=name, policy=suite.split))
    if ctx.args.apply:
        written = apply_splits(loaded, suite, cases)
        ctx.err.write(f"wrote the split of {written} cases into the case files\n")
    return EXIT_GATE_FAILED if report.leaks else EXIT_OK


def apply_splits(loaded: LoadedConfig, suite: Suite, cases: CaseSet) -> int:
    """Write each case's assigned split into its JSONL file (other formats are refused)."""
    field = suite.fields.split
    if field is None:
        raise UserError("fields.split is null, so there is no field to write the split into")
    if suite.cases_format != "evalgate":
        raise UserError(
            f"--apply writes evalgate case files; these are read as {suite.cases_format}",
            fix=f"convert them with `evalgate import {suite.cases_format} FILE` first",
        )
    by_source = {c.source: c.split for c in cases.cases}
    written = 0
    for path in loaded.expand(suite.cases, "case file"):
        if path.suffix.lower() not in (".jsonl", ".ndjson"):
            raise UserError(
                "--apply rewrites JSONL case files only", where=str(path), fix="convert it to JSONL"
            )
        lines = files.read_text(path, "case file").split("\n")
        out = []
        for number, line in enumerate(lines, start=1):
            split = by_source.get(f"{path}:{number}")
            if split is not None and line.strip():
                record = json.loads(line)
                if record.get(field) != split:
                    record[field] = split
                    written += 1
                line = json.dumps(record, ensure_ascii=False)
            out.append(line)
        path.write_text("\n".join(out), encoding="utf-8")
    return written


def cmd_holdout(ctx: Context) -> int:
    loaded = ctx.config()
    _, suite = loaded.suite(ctx.args.suite)
    sealed = suite.sealed_holdout
    action = ctx.args.holdout_command
    if action == "keygen":
        secret, public = keygen()
        target = loaded.root / (sealed.public_key if sealed else "holdout.pub")
        if target.exists() and not ctx.args.force:
            raise UserError(
                f"{target} exists",
                fix="pass --force to replace it (old sealed cases stay sealed to the old key)",
            )
        target.write_text(public, encoding="utf-8")
        ctx.print(f"public key written to {target} (commit it)")
        ctx.print(
            f"secret key (store it as the {HOLDOUT_KEY_VARIABLE} secret of a protected "
            "environment; it is not saved anywhere):"
        )
        ctx.print(secret)
        return EXIT_OK
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
        lines = [
            seal(json.loads(json.dumps(_raw_record(Path(ctx.args.file), c.source))), recipient)
            for c in added
        ]
        with store.open("a", encoding="utf-8") as handle:
            handle.writelines(line + "\n" for line in lines)
        _record_change(loaded, sealed.changes, "add", lines, store, None)
        ctx.print(
            f"sealed {len(added)} cases into {store} and recorded the addition in "
            f"{sealed.changes}; commit both, and delete {ctx.args.file} now"
        )
        return EXIT_OK
    if action == "list":
        count = len(sealed_lines(store))
        text = ctx.env.get(HOLDOUT_KEY_VARIABLE)
        ctx.print(f"{count} sealed holdout cases in {store}")
        if text:
            records = open_sealed(store, load_secret_key(text))
            field = suite.fields.category
            per = Counter(str(r.get(field)) if field else "(none)" for _, r in records)
            for category, n in sorted(per.items()):
                ctx.print(f"  {category}: {n}")
        return EXIT_OK
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
    ctx.print(
        f"retired {len(retired)} cases to {target} as regression cases and recorded it in "
        f"{sealed.changes}; make sure the config's cases include {target}, and commit the "
        "sealed file and its change ledger together"
    )
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
    only; a retire is signed with the holdout key, which only its holder has."""
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


def cmd_release(ctx: Context) -> int:
    loaded = ctx.config()
    name, suite = loaded.suite(ctx.args.suite)
    history_dir = loaded.state_dir / "releases"
    history = read_releases(history_dir)
    tag = ctx.args.name or ctx.env.get("GITHUB_REF_NAME") or ctx.args.version
    key = HoldoutKey(ctx.holdout_secret(suite))
    cases = load_suite_cases(loaded, suite, holdout_secret=ctx.holdout_secret(suite))
    reads_so_far = reads_of(read_ledger(ledger_path(loaded)), holdout_sha(cases, key))
    if reads_so_far >= suite.split.read_budget and not ctx.args.force_reason:
        ctx.warn(
            f"this holdout has been read {reads_so_far} times (budget {suite.split.read_budget})"
        )
    run, record, report = release_version(
        ctx.world(),
        loaded,
        name,
        ctx.args.version,
        tag,
        history,
        ledger=ledger_path(loaded),
        options=ctx.run_options(),
    )
    if not ctx.args.no_save:
        save_run(run, loaded.state_dir)
        write_release(history_dir, record)
    fmt = ctx.args.format
    if fmt == "json":
        ctx.print(report.model_dump_json(indent=2))
    else:
        ctx.print(render("release.md.j2" if fmt == "markdown" else "release.txt.j2", s=report))
    return EXIT_GATE_FAILED if report.kind == "fail" else EXIT_OK


def cmd_audit(ctx: Context) -> int:
    loaded = ctx.config()
    name, suite = loaded.suite(ctx.args.suite)
    secret = ctx.holdout_secret(suite)
    cases = load_suite_cases(loaded, suite, holdout_secret=secret)
    reads = reads_of(read_ledger(ledger_path(loaded)), holdout_sha(cases, HoldoutKey(secret)))
    if reads + 2 > suite.split.read_budget and not ctx.args.force_reason:
        raise UserError(
            f"the holdout has been read {reads} times; an audit reads it twice more, past the "
            f"budget of {suite.split.read_budget}",
            fix='pass --force-reason "why" (kept in the ledger), or add fresh holdout cases',
        )
    holdout_only = frozenset({"holdout"})
    runs = [
        ctx.run_version(loaded, name, version, splits=holdout_only, purpose="audit")
        for version in (ctx.args.candidate, ctx.args.baseline)
    ]
    report = audit(
        runs[0],
        runs[1],
        fitted_score=ctx.args.fitted_score,
        baseline_fitted_score=ctx.args.baseline_fitted_score,
        searched=ctx.args.searched,
        tuning_cases=ctx.args.tuning_cases,
        per_case_sd=ctx.args.per_case_sd,
        alpha=suite.gate.alpha,
        seed=suite.gate.seed,
    )
    fmt = ctx.args.format
    if fmt == "json":
        ctx.print(report.model_dump_json(indent=2))
    else:
        ctx.print(render("audit.md.j2" if fmt == "markdown" else "audit.txt.j2", s=report))
    return EXIT_OK
