"""``evalgate compare``: two runs paired case by case."""

from __future__ import annotations

import argparse

from evalgate.analysis.compare import compare_runs
from evalgate.cli.context import EXIT_OK, Context, price_as_for
from evalgate.cli.options import Subcommands, non_negative
from evalgate.cli.run import HTML_HELP, write_html
from evalgate.report.html import render_compare_html
from evalgate.report.render import render_model
from evalgate.runs.schema import find_run


def cmd_compare(ctx: Context) -> int:
    loaded = ctx.config()
    a = find_run(ctx.args.a, loaded.state_dir, ctx.args.suite)
    b = find_run(ctx.args.b, loaded.state_dir, ctx.args.suite)
    comparison = compare_runs(a, b)
    if getattr(ctx.args, "html", None):
        page = render_compare_html(a, b, comparison, price_as=price_as_for(loaded, b))
        return write_html(ctx, page)
    ctx.print(render_model("compare", comparison, ctx.args.format, limit=ctx.args.show))
    return EXIT_OK


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    cmp_ = sub.add_parser("compare", parents=[common], help="pair two runs case by case")
    cmp_.add_argument("a", help="run A (the reference)")
    cmp_.add_argument("b", help="run B (the change)")
    cmp_.add_argument(
        "--show",
        type=non_negative,
        default=20,
        help="cases listed per section (default: %(default)s)",
    )
    cmp_.add_argument("--html", metavar="PATH", help=HTML_HELP)
    cmp_.set_defaults(func=cmd_compare)
