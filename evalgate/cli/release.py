"""``evalgate release``: the holdout gate of a release, its record and its report."""

from __future__ import annotations

import argparse

from evalgate.analysis.release import read_releases, write_release
from evalgate.app import holdout_sha, ledger_path, release_version
from evalgate.cases.holdout import (
    HoldoutKey,
    read_ledger,
    reads_of,
)
from evalgate.cli.context import EXIT_GATE_FAILED, EXIT_OK, Context
from evalgate.cli.options import Subcommands, positive
from evalgate.report.render import render
from evalgate.running.suite import (
    load_suite_cases,
)
from evalgate.runs.schema import save_run


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


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    release = sub.add_parser(
        "release", parents=[common], help="score dev and holdout, report the gap, gate the release"
    )
    release.add_argument("version", help="prompt version being released")
    release.add_argument("--name", help="release name (default: GITHUB_REF_NAME or the version)")
    release.add_argument("--no-save", action="store_true", help="do not save the run or record")
    release.add_argument("--concurrency", type=positive, help="calls in flight")
    release.add_argument(
        "--force-reason", help="read the holdout past its budget; the reason goes in the ledger"
    )
    release.set_defaults(func=cmd_release, verbose=False, cache=False)
