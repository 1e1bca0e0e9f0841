"""``evalgate action``: the container's entrypoint (the action itself is ``evalgate.action``)."""

from __future__ import annotations

import argparse

from evalgate.cli.context import (
    Context,
)
from evalgate.cli.options import Subcommands


def cmd_action(ctx: Context) -> int:
    from evalgate.action.main import action

    return action(ctx.env, ctx.out, ctx.err)


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    action_ = sub.add_parser(
        "action", help="the GitHub Action's entry point (inside its container)"
    )
    action_.set_defaults(func=cmd_action)
