"""``evalgate history --cost``: a month's spend per suite, from the data branch or a file."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime
from pathlib import Path

from evalgate.cli.context import EXIT_OK, Context
from evalgate.cli.options import Subcommands
from evalgate.defaults import DATA_BRANCH
from evalgate.errors import UserError
from evalgate.report.render import render_model
from evalgate.runs.spend import SpendRecord, month_spend, read_spend, spend_file

_MONTH = re.compile(r"\d{4}-(0[1-9]|1[0-2])")


def _month(text: str | None) -> str:
    if text is None:
        return datetime.now(UTC).strftime("%Y-%m")
    if not _MONTH.fullmatch(text):
        raise UserError(f"--month {text!r} is not a month", fix="write it as YYYY-MM, e.g. 2026-11")
    return text


def _from_files(paths: list[str]) -> list[SpendRecord]:
    records: list[SpendRecord] = []
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise UserError(
                f"no spend file at {name}",
                fix=f"give a suite's spend.jsonl from the {DATA_BRANCH} branch, or --repo",
            )
        records += read_spend(path.read_text(encoding="utf-8"), name)
    return records


def _from_repo(ctx: Context, slug: str) -> list[SpendRecord]:
    """Every configured suite's spend file on the repository's data branch."""
    from evalgate.publish import github as gh

    token = ctx.env.get("GITHUB_TOKEN") or ctx.env.get("GH_TOKEN")
    if not token:
        raise UserError(
            f"history --repo reads the {DATA_BRANCH} branch, which needs a token",
            fix="set GITHUB_TOKEN (a token with contents: read on the repository)",
        )
    loaded = ctx.config()
    api = ctx.env.get("GITHUB_API_URL", "https://api.github.com")
    repo = gh.get_repository(gh.connect(token, api), slug)
    names = [ctx.args.suite] if ctx.args.suite else list(loaded.config.suites)
    records: list[SpendRecord] = []
    for name in names:
        path = spend_file(name)
        records += read_spend(gh.read_data_file(repo, DATA_BRANCH, path), f"{DATA_BRANCH}:{path}")
    return records


def cmd_history(ctx: Context) -> int:
    if not ctx.args.cost:
        raise UserError(
            "evalgate history shows what the jobs spent, and needs --cost to say so",
            fix="run `evalgate history --cost` (with --file or --repo: where the spend is kept)",
        )
    month = _month(ctx.args.month)
    if ctx.args.file:
        records = _from_files(ctx.args.file)
    elif ctx.args.repo:
        records = _from_repo(ctx, ctx.args.repo)
    else:
        raise UserError(
            "history --cost needs where the spend is kept",
            fix=f"give --repo OWNER/NAME (its {DATA_BRANCH} branch) or --file SPEND.jsonl",
        )
    if ctx.args.suite and ctx.args.file:
        records = [r for r in records if r.suite == ctx.args.suite]
    ctx.print(render_model("spend", month_spend(records, month), ctx.args.format).rstrip())
    return EXIT_OK


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    history = sub.add_parser(
        "history", parents=[common], help="what the jobs spent: a month's calls, tokens and USD"
    )
    history.add_argument("--cost", action="store_true", help="a month's spend per suite")
    history.add_argument("--month", help="YYYY-MM, UTC (default: this month)")
    history.add_argument("--repo", help="OWNER/NAME: read each suite's spend on its data branch")
    history.add_argument(
        "--file", action="append", help="a spend.jsonl to read instead (repeatable)"
    )
    history.set_defaults(func=cmd_history)
