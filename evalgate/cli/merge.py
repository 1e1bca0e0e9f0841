"""``evalgate merge``: shard runs combined into one run."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalgate.cli.context import (
    Context,
)
from evalgate.cli.options import SHOW_FAILED_HELP, Subcommands, non_negative
from evalgate.cli.run import run_exit, run_summary
from evalgate.report.render import render_model
from evalgate.runs.merge import merge_runs
from evalgate.runs.schema import find_run, save_run, write_run


def cmd_merge(ctx: Context) -> int:
    loaded = ctx.config()
    merged = merge_runs([find_run(ref, loaded.state_dir) for ref in ctx.args.runs])
    if ctx.args.output:
        path = Path(ctx.args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_run(merged, path)
    else:
        path = save_run(merged, loaded.state_dir)
    ctx.write(f"merged {len(ctx.args.runs)} shards into {path}\n", err=True)
    ctx.print(render_model("run", run_summary(ctx, loaded, merged), ctx.args.format))
    return run_exit(ctx, merged)


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    merge = sub.add_parser("merge", parents=[common], help="combine shard runs into one run")
    merge.add_argument("runs", nargs="+", help="the shard runs (names, prefixes or paths)")
    merge.add_argument("--output", help="write the merged run here instead of the runs folder")
    merge.add_argument("--show", type=non_negative, default=10, help=SHOW_FAILED_HELP)
    merge.set_defaults(func=cmd_merge)
