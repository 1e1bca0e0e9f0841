"""``evalgate doctor``: what in this repository's set-up would stop a job, and how to fix it."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalgate.cli.context import (
    EXIT_GATE_FAILED,
    EXIT_OK,
    Context,
)
from evalgate.cli.options import Subcommands
from evalgate.setup import doctor


def cmd_doctor(ctx: Context) -> int:
    repo = Path(ctx.args.dir)
    report = doctor.doctor(repo, repo / ctx.args.config, ctx.args.suite, env=ctx.env)
    ctx.print(doctor.render_doctor(report, ctx.args.format))
    return EXIT_GATE_FAILED if report.failed else EXIT_OK


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    doctor_ = sub.add_parser(
        "doctor",
        parents=[common],
        help="check the setup: config, cases, split, workflow permissions and secrets",
        description="Check a repository's evalgate setup and say what to fix, one line per "
        "finding (ok, warn, FAIL). Exit 1 when anything FAILs. --config is relative to --dir.",
    )
    doctor_.add_argument("--dir", default=".", help="the repository's root (default: .)")
    doctor_.set_defaults(func=cmd_doctor)
