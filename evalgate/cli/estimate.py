"""``--estimate`` on ``run`` and ``gate``: calls, tokens and cost printed before any call."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from evalgate.cli.context import EXIT_OK, Context
from evalgate.runs.schema import Run, iter_runs

if TYPE_CHECKING:
    from evalgate.app import RunOptions
    from evalgate.config.load import LoadedConfig

ESTIMATE_HELP = (
    "print the calls, input and output tokens and cost the run would take, and call no model "
    "(input tokens counted for free where the provider can, output tokens from the baseline's "
    "replies, else max_tokens)"
)


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--estimate", action="store_true", help=ESTIMATE_HELP)


def newest_run(loaded: LoadedConfig, suite: str) -> Run | None:
    """The newest saved run of a suite: its replies are what the next run's will be like."""
    runs = [r for _, r in iter_runs(loaded.state_dir) if r.suite == suite]
    return max(runs, key=lambda r: r.created_at) if runs else None


def print_estimate(
    ctx: Context,
    loaded: LoadedConfig,
    suite: str | None,
    version: str,
    baseline: Run | None,
    options: RunOptions,
) -> int:
    from evalgate.app import estimate_version

    name, _ = loaded.suite(suite)
    if baseline is None:
        baseline = newest_run(loaded, name)
    estimate = estimate_version(ctx.world(), loaded, name, version, options, baseline)
    from evalgate.report.render import render_model  # the templates: not on `run`'s way in

    ctx.print(render_model("estimate", estimate, ctx.args.format))
    return EXIT_OK
