"""``evalgate list`` and ``evalgate report``: the saved runs, and the report of one."""

from __future__ import annotations

import argparse
from typing import Any

from evalgate.analysis.summary import summarise
from evalgate.cli.context import (
    EXIT_OK,
    Context,
)
from evalgate.cli.options import (
    SHOW_FAILED_HELP,
    TEXT_OR_JSON,
    Subcommands,
    common_options,
    non_negative,
)
from evalgate.cli.run import HTML_HELP, run_exit, run_summary, write_html
from evalgate.report.html import render_run_html
from evalgate.report.render import render_model
from evalgate.runs.schema import find_run, iter_runs


def cmd_report(ctx: Context) -> int:
    loaded = ctx.config()
    run = find_run(ctx.args.run, loaded.state_dir)
    summary = run_summary(ctx, loaded, run)
    if getattr(ctx.args, "html", None):
        write_html(ctx, render_run_html(run, summary))
        return run_exit(ctx, run)
    ctx.print(render_model("run", summary, ctx.args.format))
    return run_exit(ctx, run)


def cmd_list(ctx: Context) -> int:
    loaded = ctx.config()
    rows: list[dict[str, Any]] = []
    for _, run in iter_runs(loaded.state_dir):
        s = summarise(run)
        rows.append(
            {
                "name": run.name,
                "prompt": run.prompt.name,
                "backend": run.model.backend,
                "model": run.model.name,
                "n": s.n,
                "repeats": run.repeats,
                "accuracy": s.accuracy.rate,
                "format": s.format.rate,
                "errors": s.errors,
                "not_run": s.not_run,
            }
        )
    if ctx.args.format == "json":
        import json

        ctx.print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        ctx.print(
            f"no saved runs in {loaded.state_dir / 'runs'} (make one with `evalgate run VERSION`)"
        )
        return EXIT_OK
    width = max(len(r["name"]) for r in rows)
    ctx.print(
        f"{'run':<{width}}  {'prompt':<8} {'backend':<9} {'model':<20} {'n':>5} {'repeats':>7} {'accuracy':>8} {'format':>7} errors"
    )
    for r in rows:
        acc = "n/a" if r["accuracy"] is None else f"{100 * r['accuracy']:.1f}%"
        fmt = "n/a" if r["format"] is None else f"{100 * r['format']:.1f}%"
        # Cases an interrupt or the budget kept from being run are not errors: said apart.
        errors = f"{r['errors']}, {r['not_run']} not run" if r["not_run"] else str(r["errors"])
        ctx.print(
            f"{r['name']:<{width}}  {r['prompt']:<8} {r['backend']:<9} {r['model']:<20} "
            f"{r['n']:>5} {r['repeats']:>7} {acc:>8} {fmt:>7} {errors}"
        )
    return EXIT_OK


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    lst = sub.add_parser("list", parents=[common_options(TEXT_OR_JSON)], help="list saved runs")
    lst.set_defaults(func=cmd_list)

    report = sub.add_parser("report", parents=[common], help="print the report of a saved run")
    report.add_argument("run", help="run name, unique prefix, file path, or latest:VERSION")
    report.add_argument("--html", metavar="PATH", help=HTML_HELP)
    report.add_argument("--show", type=non_negative, default=10, help=SHOW_FAILED_HELP)
    report.set_defaults(func=cmd_report)
