"""``evalgate noise``: repeats of one version, and the cases that flip when nothing changed."""

from __future__ import annotations

import argparse

from evalgate.analysis.noise import measure_noise
from evalgate.cli.context import (
    EXIT_OK,
    Context,
)
from evalgate.cli.options import (
    BATCH_HELP,
    TEXT_OR_JSON,
    Subcommands,
    at_least_two,
    common_options,
    non_negative,
    positive,
)
from evalgate.report.render import render
from evalgate.runs.schema import save_run


def cmd_noise(ctx: Context) -> int:
    loaded = ctx.config()
    name, suite = loaded.suite(ctx.args.suite)
    ctx.args.cache = False  # a cached reply measures nothing about noise
    run = ctx.run_version(loaded, name, ctx.args.version, repeats=ctx.args.repeats)
    noise = measure_noise(run, suite.gate)
    assert noise is not None  # repeats >= 2 is enforced by the parser
    if not ctx.args.no_save:
        path = save_run(run, loaded.state_dir)
        ctx.write(f"saved {run.name} to {path} (usable as a baseline)\n", err=True)
    if ctx.args.format == "json":
        ctx.print(noise.model_dump_json(indent=2))
    else:
        ctx.print(render("noise.txt.j2", s=noise, limit=ctx.args.show))
    return EXIT_OK


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    noise = sub.add_parser(
        "noise",
        parents=[common_options(TEXT_OR_JSON)],
        help="measure the noise floor: one prompt, R repeats",
    )
    noise.add_argument("version", help="prompt version")
    noise.add_argument("--repeats", type=at_least_two, default=2, help="R >= 2 (default: 2)")
    noise.add_argument("--no-save", action="store_true", help="do not save the run")
    noise.add_argument("--concurrency", type=positive, help="calls in flight")
    noise.add_argument("--batch", action="store_true", help=BATCH_HELP)
    noise.add_argument("--show", type=non_negative, default=20, help="unstable cases listed")
    noise.set_defaults(func=cmd_noise, verbose=False)
