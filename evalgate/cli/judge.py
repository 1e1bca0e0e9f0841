"""`evalgate judge check`: the suite's judge against its human labels, split by split."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evalgate.app import check_judge, ledger_path
from evalgate.cases.holdout import read_ledger, reads_of
from evalgate.cases.judge_labels import labels_sha
from evalgate.cli.context import EXIT_GATE_FAILED, EXIT_OK, Context
from evalgate.cli.options import Subcommands, non_negative, positive
from evalgate.config.load import load_config
from evalgate.errors import UserError
from evalgate.report.render import Format, render, render_model
from evalgate.running.judge_check import (
    JudgeReport,
    corrected_accuracy,
    judged_suite,
    save_report,
    suite_labels,
)
from evalgate.runs.schema import find_run


def cmd_judge(ctx: Context) -> int:
    loaded = ctx.config()
    name, suite = judged_suite(loaded, ctx.args.suite)
    assert suite.judge is not None
    if getattr(ctx.args, "interval", None):
        judge = suite.judge.model_copy(update={"interval": ctx.args.interval})
        suite = suite.model_copy(update={"judge": judge})
    labels = suite_labels(loaded, suite)
    splits = frozenset(ctx.args.split or ("dev", "holdout"))
    if "holdout" in splits:
        reads = reads_of(read_ledger(ledger_path(loaded)), labels_sha(labels, "holdout"))
        if reads >= suite.split.read_budget and not ctx.args.force_reason:
            raise UserError(
                f"the judge's holdout labels have been read {reads} times, the budget of "
                f"split.read_budget = {suite.split.read_budget}",
                fix="tune on dev (--split dev), add fresh holdout labels, or pass --force-reason "
                '"why" (kept in the ledger)',
            )
    report, _ = check_judge(
        ctx.world(),
        loaded,
        name,
        suite,
        labels,
        splits=splits,
        repeats=ctx.args.repeats,
        show=ctx.args.show,
    )
    if ctx.args.run:
        run = find_run(ctx.args.run, loaded.state_dir)
        report = report.model_copy(
            update={"corrected": corrected_accuracy(run, report.splits, report.floor)}
        )
    if not ctx.args.no_save:
        path = save_report(report, loaded.state_dir)
        ctx.write(f"saved the judge check to {path} (the gate reads it)\n", err=True)
    ctx.print(render_judge(report, ctx.args.format, ctx.args.show))
    return EXIT_OK if report.floor.ok else EXIT_GATE_FAILED


def render_judge(report: JudgeReport, fmt: Format, limit: int) -> str:
    """The judge check as `judge check --format FMT` prints it."""
    if fmt == "markdown":
        return render("judge.md.j2", s=report, change=None, limit=limit)
    return render_model("judge", report, fmt, limit=limit)


def demo_judge(ctx: Context, example: Path) -> dict[str, Any]:
    """The demo's judge: the example's judged suite (judge.yml, the offline fake judge) checked
    against its human labels, in a copy of the example (``example``). Printed in text and
    Markdown; the report is returned for the JSON document either way."""
    loaded = load_config(example / "judge.yml")
    name, suite = judged_suite(loaded, None)
    assert suite.judge is not None
    labels = suite_labels(loaded, suite)
    title = (
        f"The judged suite of {example.name}/judge.yml: the offline fake judge against "
        f"{len(labels)} human labels"
    )
    as_json = ctx.args.format == "json"
    (ctx.write(title + "\n", err=True) if as_json else ctx.print(f"\n{title}\n"))
    both = frozenset({"dev", "holdout"})
    report, _ = check_judge(
        ctx.world(), loaded, name, suite, labels, splits=both, show=ctx.args.show, **_flags(ctx)
    )
    if not as_json:
        ctx.print(render_judge(report, ctx.args.format, ctx.args.show))
    return report.model_dump(mode="json")


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    judge = sub.add_parser("judge", help="the judge scorer against human labels")
    jsub = judge.add_subparsers(dest="judge_command", required=True, metavar="ACTION")
    check = jsub.add_parser(
        "check",
        parents=[common],
        help="run the suite's judge over its labelled replies: agreement per split, the floor",
        description="Run the suite's judge over the replies in judge.labels and report, per "
        "split, agreement with the human verdicts: Cohen's kappa with its 95% interval, Gwet's "
        "AC1, the confusion matrix, McNemar's test of the judge's lean, per-group agreement. "
        "Dev disagreements are listed; holdout labels are reported in aggregate and every read "
        "is recorded in the ledger. Exit 1 when the judge is below its floor "
        "(judge.min_labels, judge.min_kappa).",
    )
    check.add_argument(
        "--split",
        action="append",
        choices=["dev", "holdout"],
        help="splits to check (repeatable; default: both; tune a rubric on dev alone)",
    )
    check.add_argument(
        "--repeats",
        type=positive,
        default=1,
        help="grade each reply K times and report the judge's flip rate (default: 1)",
    )
    check.add_argument(
        "--run", help="a saved run scored by this judge: its accuracy corrected for judge error"
    )
    check.add_argument(
        "--interval",
        choices=["bootstrap", "analytic"],
        help="kappa's 95%% interval: a seeded bootstrap over the labels' groups, or the "
        "large-sample analytic one (default: judge.interval; the gate wants judge.interval's)",
    )
    check.add_argument("--show", type=non_negative, default=20, help="dev disagreements listed")
    check.add_argument("--no-save", action="store_true", help="do not save the check for the gate")
    check.add_argument(
        "--force-reason", help="read the holdout labels past the budget; the reason is kept"
    )
    check.add_argument("--concurrency", type=positive, help="judge calls in flight")
    judge.set_defaults(func=cmd_judge)


def _flags(ctx: Context) -> dict[str, Any]:
    """What of this command's flags a judge check takes."""
    return {
        "concurrency": getattr(ctx.args, "concurrency", None),
        "force_reason": getattr(ctx.args, "force_reason", None),
    }
