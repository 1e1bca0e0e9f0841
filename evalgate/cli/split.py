"""``evalgate split``: the dev / holdout / regression assignment, its leaks, and writing it."""

from __future__ import annotations

import argparse
import json

from evalgate import files
from evalgate.cases.holdout import SecretKey, is_key_of, load_public_key
from evalgate.cases.read import CaseSet
from evalgate.cases.split import check_split
from evalgate.cli.context import EXIT_GATE_FAILED, EXIT_OK, Context
from evalgate.cli.options import TEXT_OR_JSON, Subcommands, common_options
from evalgate.config.load import LoadedConfig
from evalgate.config.models import Suite
from evalgate.defaults import HOLDOUT_KEY_VARIABLE, PLAINTEXT_PUBLIC_KEY
from evalgate.errors import UserError
from evalgate.report.render import render
from evalgate.running.suite import (
    load_suite_cases,
)


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
        if suite.sealed_holdout is None and secret is not None:
            check_plaintext_key(loaded, secret)
    cases = load_suite_cases(loaded, suite, holdout_secret=secret, on_note=ctx.warn)
    report = check_split(cases.cases, suite.split, suite.fields, reveal=reveal)
    if ctx.args.format == "json":
        ctx.print(report.model_dump_json(indent=2))
    else:
        ctx.print(render("split.txt.j2", s=report, suite=name, policy=suite.split))
    if ctx.args.apply:
        written = apply_splits(loaded, suite, cases)
        ctx.write(f"wrote the split of {written} cases into the case files\n", err=True)
    return EXIT_GATE_FAILED if report.leaks else EXIT_OK


def check_plaintext_key(loaded: LoadedConfig, secret: SecretKey) -> None:
    """A plaintext holdout has no ciphertext that a wrong key would fail to open: the key is
    checked against the public key keygen wrote beside the config, and refused without one."""
    public = loaded.root / PLAINTEXT_PUBLIC_KEY
    if not public.is_file():
        raise UserError(
            "--show-holdout lists holdout cases for the holdout key's holder, and this plaintext "
            f"holdout has no {PLAINTEXT_PUBLIC_KEY} to check {HOLDOUT_KEY_VARIABLE} against",
            where=str(loaded.root),
            fix=f"commit the {PLAINTEXT_PUBLIC_KEY} that `evalgate holdout keygen` writes, or "
            "seal the holdout (`evalgate holdout add`, docs/holdout.md)",
        )
    if not is_key_of(secret, load_public_key(files.read_text(public, "holdout public key"))):
        raise UserError(
            f"{HOLDOUT_KEY_VARIABLE} is not the secret of this public key",
            where=str(public),
            fix="set the secret that `evalgate holdout keygen` printed with it",
        )


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


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    split = sub.add_parser(
        "split",
        parents=[common_options(TEXT_OR_JSON)],
        help="dev / holdout / regression counts and leak checks",
    )
    split.add_argument("--apply", action="store_true", help="write the split into the case files")
    split.add_argument(
        "--show-holdout",
        action="store_true",
        help="name the holdout cases in leak findings (needs EVALGATE_HOLDOUT_KEY, which a "
        "plaintext holdout checks against holdout.pub; counts only without it)",
    )
    split.set_defaults(func=cmd_split)
