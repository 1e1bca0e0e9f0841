"""``evalgate audit``: a searched prompt on the holdout, against the version it was searched from."""

from __future__ import annotations

import argparse

from evalgate.analysis.audit import audit
from evalgate.app import holdout_sha, ledger_path
from evalgate.cases.holdout import (
    HoldoutKey,
    read_ledger,
    reads_of,
)
from evalgate.cli.context import EXIT_OK, Context
from evalgate.cli.options import Subcommands, positive, share
from evalgate.errors import UserError
from evalgate.report.render import render
from evalgate.running.suite import (
    load_suite_cases,
)


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


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    audit_ = sub.add_parser(
        "audit", parents=[common], help="a searched prompt's held-out score beside its fitted one"
    )
    audit_.add_argument("candidate", help="the searched prompt version")
    audit_.add_argument("--baseline", required=True, help="the prompt version it replaces")
    audit_.add_argument("--fitted-score", type=share, help="the score the search reported, 0 to 1")
    audit_.add_argument(
        "--baseline-fitted-score", type=share, help="the baseline's tuning score, 0 to 1"
    )
    audit_.add_argument("--searched", type=positive, help="how many candidates were tried")
    audit_.add_argument("--tuning-cases", type=positive, help="cases the search selected on")
    audit_.add_argument(
        "--per-case-sd", type=float, help="per-case SD of scores (default: measured)"
    )
    audit_.add_argument(
        "--force-reason", help="read past the budget; the reason goes in the ledger"
    )
    audit_.add_argument("--concurrency", type=positive, help="calls in flight")
    audit_.set_defaults(func=cmd_audit, verbose=False, cache=False)
