"""``evalgate run``: one prompt version over a suite's cases, its report, the run file saved."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from evalgate.cli import estimate
from evalgate.cli.context import EXIT_INCOMPLETE, EXIT_OK, Context, price_as_for
from evalgate.cli.options import (
    BATCH_HELP,
    SHOW_FAILED_HELP,
    Subcommands,
    non_negative,
    positive,
    shard,
)
from evalgate.config.load import LoadedConfig
from evalgate.errors import UserError
from evalgate.runs.resume import unsent
from evalgate.runs.schema import Run, find_run, journal_for, save_run

if TYPE_CHECKING:
    from evalgate.analysis.summary import RunSummary

HTML_HELP = (
    "write the report as one self-contained HTML page (searchable, no network) to PATH and "
    "print only its path"
)


def cmd_run(ctx: Context) -> int:
    from evalgate.running.suite import DEFAULT_SPLITS

    loaded = ctx.config()
    files = [Path(p) for p in ctx.args.cases] if ctx.args.cases else None
    splits = frozenset(ctx.args.split or DEFAULT_SPLITS)
    if ctx.args.estimate:
        options = ctx.run_options(
            repeats=ctx.args.repeats,
            limit=ctx.args.limit,
            case_files=files,
            splits=splits,
            shard=ctx.args.shard,
        )
        return estimate.print_estimate(ctx, loaded, ctx.args.suite, ctx.args.version, None, options)
    resume = find_run(ctx.args.resume, loaded.state_dir) if ctx.args.resume else None
    # A killed run's journal, by its path or its run's name, goes once the run is saved whole.
    journal = journal_for(ctx.args.resume, loaded.state_dir) if ctx.args.resume else None
    run = ctx.run_version(
        loaded,
        ctx.args.suite or (resume.suite if resume else ctx.args.suite),
        ctx.args.version,
        resume=resume,
        repeats=ctx.args.repeats,
        limit=ctx.args.limit,
        case_files=files,
        splits=splits,
        shard=ctx.args.shard,
    )
    # The summary and the templates are imported once the calls are made: not before the first.
    from evalgate.report.render import render_model

    ctx.print(render_model("run", run_summary(ctx, loaded, run), ctx.args.format))
    if not ctx.args.no_save:
        path = save_run(run, loaded.state_dir)
        ctx.write(f"saved {run.name} to {path}\n", err=True)
        if journal is not None:
            journal.unlink(missing_ok=True)  # the journal's outcomes are saved
    return run_exit(ctx, run)


def run_summary(ctx: Context, loaded: LoadedConfig, run: Run) -> RunSummary:
    from evalgate.analysis.summary import summarise

    show = getattr(ctx.args, "show", None)
    return summarise(run, price_as=price_as_for(loaded, run), show=10 if show is None else show)


def run_exit(ctx: Context, run: Run) -> int:
    """0, or EXIT_INCOMPLETE with a line on stderr saying why, for a run too broken to measure."""
    if not run.incomplete:
        return EXIT_OK
    why = (
        run.budget_stop
        if run.budget_stop is not None
        else "it was interrupted"
        if run.interrupted
        else (
            f"{run.errors} of {len(run.cases)} cases errored (max_error_share "
            f"{run.max_error_share:g})"
        )
    )
    then = (
        f"`evalgate run {run.prompt.name} --resume {run.name}` sends the cases not run"
        if unsent(run)
        else "see the errors listed above"
    )
    ctx.warn(f"the run is incomplete: {why}; {then} (exit {EXIT_INCOMPLETE})")
    return EXIT_INCOMPLETE


def write_html(ctx: Context, page: str) -> int:
    """Write an HTML report to --html PATH and print only its (absolute) path."""
    path = Path(ctx.args.html)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(
            f"cannot write the HTML report: {exc.strerror or exc}",
            where=str(path),
            fix="pass --html a path in a folder that exists and that you can write to",
        ) from None
    ctx.write(f"{path.resolve()}\n", "text")
    return EXIT_OK


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    run = sub.add_parser(
        "run", parents=[common], help="run one prompt version over the suite's cases"
    )
    run.add_argument("version", help="prompt version (the prompt file's stem)")
    run.add_argument("--limit", type=positive, help="only the first N cases")
    run.add_argument("--no-save", action="store_true", help="do not save the run")
    run.add_argument("-v", "--verbose", action="store_true", help="print each case as it is scored")
    run.add_argument(
        "--cases",
        action="append",
        metavar="FILE",
        help="case file instead of the config's (repeatable)",
    )
    run.add_argument(
        "--repeats", type=positive, default=1, help="send each case K times (default: 1)"
    )
    run.add_argument(
        "--concurrency", type=positive, help="calls in flight (default: the suite's, 16)"
    )
    run.add_argument(
        "--shard", type=shard, help="run the i-th of N stable slices (by case id hash), e.g. 2/4"
    )
    run.add_argument(
        "--split",
        action="append",
        choices=["dev", "holdout", "regression"],
        help="splits to run (repeatable; default: dev and regression; a holdout read is "
        "recorded in the ledger)",
    )
    run.add_argument(
        "--cache",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reuse cached replies from .evalgate/cache (default: off; always off with --repeats)",
    )
    run.add_argument("--batch", action="store_true", help=BATCH_HELP)
    run.add_argument("--show", type=non_negative, default=10, help=SHOW_FAILED_HELP)
    estimate.add_argument(run)
    run.add_argument(
        "--resume",
        metavar="RUN",
        help="send only the calls a budget or an interrupt kept RUN from making, and save it whole",
    )
    run.set_defaults(func=cmd_run)
