"""`evalgate judge check`: the suite's judge against its human labels, split by split."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from evalgate.cases.holdout import LedgerRecord, append_ledger, read_ledger, reads_of
from evalgate.cases.judge_labels import Label, labels_sha, leak_warnings, load_labels
from evalgate.cli.context import (
    EXIT_GATE_FAILED,
    EXIT_OK,
    Context,
    git_info,
    ledger_path,
)
from evalgate.cli.options import Subcommands, positive
from evalgate.config.load import LoadedConfig, load_config
from evalgate.config.models import Suite
from evalgate.errors import UserError
from evalgate.report.render import Format, render, render_model
from evalgate.running.judge_check import (
    Graded,
    JudgeReport,
    LabelSplit,
    corrected_accuracy,
    floor_of,
    floor_reasons,
    grade,
    judge_sha256,
    measure_split,
    read_report,
    save_report,
)
from evalgate.runs.schema import find_run
from evalgate.scorers.judge import JudgeScorer

LEDGER_PURPOSE = "judge check"


def judged_suite(loaded: LoadedConfig, suite_name: str | None) -> tuple[str, Suite]:
    """The suite, when it is scored by a judge that has labels."""
    name, suite = loaded.suite(suite_name)
    if suite.scorer.kind != "judge":
        raise UserError(
            f"suite {name!r} is scored by {suite.scorer.kind!r}, not by a judge",
            where=str(loaded.path),
            fix="judge check measures a judge scorer against human labels",
        )
    if suite.judge is None:
        raise UserError(
            f"suite {name!r} names no human labels for its judge",
            where=str(loaded.path),
            fix="add `judge: {labels: judge-labels.jsonl}` to the suite (see docs/statistics.md)",
        )
    return name, suite


def suite_labels(loaded: LoadedConfig, suite: Suite, path: Path | None = None) -> list[Label]:
    assert suite.judge is not None
    return load_labels(path or loaded.root / suite.judge.labels, suite)


def check_judge(
    ctx: Context,
    loaded: LoadedConfig,
    name: str,
    suite: Suite,
    labels: Sequence[Label],
    *,
    splits: frozenset[str],
    repeats: int = 1,
    show: int = 20,
    base_dir: Path | None = None,
    judge_sha: str | None = None,
) -> tuple[JudgeReport, dict[str, Graded]]:
    """Grade the labels of the asked-for splits with the suite's judge; the report, and each
    label's grades by id (for pairing two judges). A holdout read goes in the ledger.
    ``judge_sha``: the judge's identity when its files were moved (the base branch's judge)."""
    assert suite.judge is not None and suite.scorer.kind == "judge"
    root = base_dir or loaded.root
    backend = ctx.backend(loaded, suite.scorer.model)
    try:
        scorer = JudgeScorer(suite.scorer, root, backend)
        chosen = [x for x in labels if x.split in splits]
        concurrency = getattr(ctx.args, "concurrency", None) or suite.concurrency
        graded = grade(chosen, scorer, repeats=repeats, concurrency=concurrency)
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    by_id = {x.id: g for x, g in zip(chosen, graded, strict=True)}
    checks = []
    order: tuple[LabelSplit, ...] = ("dev", "holdout")
    for split in order:
        if split not in splits:
            continue
        mine = [x for x in chosen if x.split == split]
        if split == "holdout" and not mine:
            continue
        checks.append(
            measure_split(
                split,
                mine,
                [by_id[x.id] for x in mine],
                alpha=suite.gate.alpha,
                show=show,
                interval=suite.judge.interval,
                seed=suite.gate.seed,
            )
        )
    judge = suite.judge
    floor = floor_of(checks, judge)
    warnings = leak_warnings(labels, suite)
    holdout_unread = 0 if "holdout" in splits else sum(1 for x in labels if x.split == "holdout")
    if floor.split == "dev" and holdout_unread:
        warnings.append(
            "the floor is read on the dev labels, which rubric tuning has seen: check the "
            "holdout labels (--split holdout) before trusting the judge to gate"
        )
    for check in checks:
        if check.errored:
            warnings.append(
                f"{check.errored} {check.split} labels errored (the judge call failed or its "
                "verdict could not be read) and are left out"
            )
    settings = suite.scorer.model
    report = JudgeReport(
        suite=name,
        created_at=datetime.now(UTC),
        judge=f"{settings.backend}/{settings.name}",
        judge_sha256=judge_sha or judge_sha256(root, suite),
        labels_sha256=labels_sha(labels),
        repeats=repeats,
        interval=judge.interval,
        calls=sum(g.calls for g in graded),
        input_tokens=sum(g.input_tokens for g in graded),
        output_tokens=sum(g.output_tokens for g in graded),
        splits=checks,
        holdout_unread=holdout_unread,
        floor=floor,
        warnings=warnings,
    )
    holdout = next((c for c in checks if c.split == "holdout"), None)
    if holdout is not None:
        commit, ref = git_info(loaded.root)
        reads = append_ledger(
            ledger_path(loaded),
            LedgerRecord(
                time=report.created_at,
                git_ref=ctx.env.get("GITHUB_REF") or ref,
                git_commit=commit,
                prompt=f"judge:{name}",
                prompt_sha256=report.judge_sha256,
                holdout_sha256=labels_sha(labels, "holdout"),
                score=holdout.agreement.agreement.rate,
                n=holdout.agreement.n,
                purpose=LEDGER_PURPOSE,
                forced_reason=getattr(ctx.args, "force_reason", None),
            ),
        )
        ctx.err.write(
            f"holdout labels read recorded in the ledger ({reads} reads of these labels)\n"
        )
        budget = suite.split.read_budget
        over = []
        if reads > budget:
            over.append(
                f"the judge's holdout labels have been read {reads} times, over the budget of "
                f"{budget} (split.read_budget): every read leaks a little into rubric tuning; "
                "add fresh holdout labels"
            )
        report = report.model_copy(
            update={
                "holdout_reads": reads,
                "read_budget": budget,
                "warnings": [*report.warnings, *over],
            }
        )
    return report, by_id


def floor_for_gate(loaded: LoadedConfig, name: str, suite: Suite) -> list[str]:
    """Why a verdict scored by this suite's judge may not stand: [] when the judge's last check
    (saved by `judge check`) is of this judge and these labels, and met the floor."""
    if suite.judge is None:
        return []
    labels = suite_labels(loaded, suite)
    return floor_reasons(
        read_report(loaded.state_dir, name),
        judge_sha256(loaded.root, suite),
        labels_sha(labels),
        suite.judge.interval,
    )


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
        ctx,
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
        ctx.err.write(f"saved the judge check to {path} (the gate reads it)\n")
    ctx.print(render_judge(report, ctx.args.format, ctx.args.show))
    return EXIT_OK if report.floor.ok else EXIT_GATE_FAILED


def render_judge(report: JudgeReport, fmt: Format, limit: int) -> str:
    """The judge check as `judge check --format FMT` prints it."""
    if fmt == "markdown":
        return render("judge.md.j2", s=report, change=None, limit=limit)
    return render_model("judge", report, fmt, limit=limit)


def demo_judge(ctx: Context, example: Path) -> None:
    """The demo's judge: the example's judged suite (judge.yml, the offline fake judge) checked
    against its human labels, in a copy of the example (``example``)."""
    loaded = load_config(example / "judge.yml")
    name, suite = judged_suite(loaded, None)
    assert suite.judge is not None
    labels = suite_labels(loaded, suite)
    ctx.print(
        f"\nThe judged suite of {example.name}/judge.yml: the offline fake judge against "
        f"{len(labels)} human labels\n"
    )
    both = frozenset({"dev", "holdout"})
    report, _ = check_judge(ctx, loaded, name, suite, labels, splits=both, show=ctx.args.show)
    ctx.print(render_judge(report, ctx.args.format, ctx.args.show))


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    judge = sub.add_parser("judge", help="the judge scorer against human labels")
    jsub = judge.add_subparsers(dest="judge_command", required=True, metavar="ACTION")
    check = jsub.add_parser(
        "check",
        parents=[common],
        help="run the suite's judge over its labelled replies: agreement per split, the floor",
        description="Run the suite's judge over the replies in judge.labels and report, per "
        "split, agreement with the human verdicts: Cohen's kappa with its 95%% interval, Gwet's "
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
    check.add_argument("--show", type=int, default=20, help="dev disagreements listed")
    check.add_argument("--no-save", action="store_true", help="do not save the check for the gate")
    check.add_argument(
        "--force-reason", help="read the holdout labels past the budget; the reason is kept"
    )
    check.add_argument("--concurrency", type=positive, help="judge calls in flight")
    judge.set_defaults(func=cmd_judge)
