"""A pull request's judge, checked like its prompt: agreement with people, item by item against
the base branch's judge.

For a suite with human labels, the PR job runs `judge check` (dev in full, the holdout in
aggregate). When the pull request changed the judge (its rubric, model, settings or the files
they name), the base branch's judge grades the same labels and the two are paired label by
label: a significant drop in agreement fails the pull request, a drop that is not significant
makes it inconclusive. The labels come from the base branch when it has them, so a pull request
cannot relabel its way past its own judge change. Whatever is read from the base is the base's
own text; the head's files are never run under the base's name.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evalgate import files
from evalgate.analysis.calibration import AgreementChange, agreement_change
from evalgate.app import World, check_judge
from evalgate.cases.judge_labels import Label
from evalgate.cases.leakguard import LeakGuard
from evalgate.config.load import LoadedConfig, parse_config
from evalgate.config.models import Suite
from evalgate.report.render import render
from evalgate.running.judge_check import (
    Graded,
    JudgeReport,
    corrected_accuracy,
    judge_sha256,
    suite_labels,
)
from evalgate.runs.schema import Run
from evalgate.scorers.base import command_argv, file_names

# The base branch's text of a file in the checkout, or None where the base has none.
ReadBase = Callable[[Path], str | None]
SHOWN = 10


@dataclass
class JudgeInPR:
    report: JudgeReport
    change: AgreementChange | None
    markdown: str
    failures: list[str] = field(default_factory=list)
    doubts: list[str] = field(default_factory=list)


def _base_suite(loaded: LoadedConfig, name: str, read_base: ReadBase) -> Suite | None:
    text = read_base(loaded.path)
    if text is None:
        return None
    base = parse_config(text, loaded.path).suites.get(name)
    return base if base is not None and base.scorer.kind == "judge" else None


def _holdout_closed(loaded: LoadedConfig, suite: Suite, base: Suite | None) -> str | None:
    """Why the head's judge may not see the holdout labels, or None. The labels and their
    split are the base branch's; the head may not name them through a link, and a judge the
    pull request sends elsewhere (another backend, model, endpoint or program) would carry
    the holdout labels' inputs and replies wherever the head chose."""
    assert suite.judge is not None
    if base is None or base.judge is None or base.scorer.kind != "judge":
        return "the base branch has no labels for this suite's judge"
    if (loaded.root / suite.judge.labels).is_symlink():
        return "the labels file is a symbolic link"
    assert suite.scorer.kind == "judge"
    if suite.scorer.model != base.scorer.model:
        return "the pull request changes the judge's backend, model or settings"
    if suite.scorer.model.backend == "command":
        return "the judge is a program the pull request can change"
    return None


def _materialise(loaded: LoadedConfig, base: Suite, read_base: ReadBase, folder: Path) -> Suite:
    """The base suite with its judge's files written under ``folder`` and named by absolute
    path, so the base judge reads the base's rubric and rules, not the head's."""
    scorer = base.scorer
    assert scorer.kind == "judge"
    for name in file_names(base.scorer):
        text = read_base(loaded.root / name)
        if text is not None:
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    written = set(file_names(base.scorer))
    options = {
        k: str(folder / v) if k.endswith("_file") and isinstance(v, str) else v
        for k, v in scorer.model.options.items()
    }
    if scorer.model.backend == "command":
        # The base's program, by absolute path; it still runs in the config's folder.
        argv = command_argv(scorer.model.options)
        options["command"] = [str(folder / a) if a in written else a for a in argv]
        if argv and argv[0] in written:
            (folder / argv[0]).chmod(0o755)  # the base's own program, run in its place
    model = scorer.model.model_copy(update={"options": options})
    return base.model_copy(update={"scorer": scorer.model_copy(update={"model": model})})


def judge_in_pr(
    world: World,
    loaded: LoadedConfig,
    name: str,
    suite: Suite,
    read_base: ReadBase,
    candidate: Run | None = None,
    *,
    holdout_unread: str | None = None,
    guard: LeakGuard | None = None,
) -> JudgeInPR:
    """``candidate``: the pull request's run, whose accuracy is shown corrected for judge error.
    ``holdout_unread``: why the holdout labels may not be read here (then dev only is).
    ``guard``: the pull request's holdout guard for the judge's requests."""
    assert suite.judge is not None
    base = _base_suite(loaded, name, read_base)
    holdout_unread = holdout_unread or _holdout_closed(loaded, suite, base)
    both = frozenset({"dev"} if holdout_unread else {"dev", "holdout"})
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="evalgate-base-judge-") as tmp:
        folder = Path(tmp)
        # The labels, their split, the floor and alpha are the base branch's when it has a
        # judge section: the head's config is the pull request's to change, not to be trusted.
        labels_suite = base if base is not None and base.judge is not None else suite
        assert labels_suite.judge is not None
        alpha = labels_suite.gate.alpha
        if labels_suite.judge != suite.judge or alpha != suite.gate.alpha:
            notes.append(
                "the judge's floor, label split and alpha are the base branch's: changes to them "
                "take effect once this pull request is merged"
            )
        checked = suite.model_copy(update={"judge": labels_suite.judge})
        base_labels = read_base(loaded.root / labels_suite.judge.labels)
        if base_labels is not None:
            path = folder / "labels" / Path(labels_suite.judge.labels).name
            path.parent.mkdir(parents=True)
            path.write_text(base_labels, encoding="utf-8")
            labels = suite_labels(loaded, labels_suite, path)
            head_path = loaded.root / suite.judge.labels
            head_text = files.read_text(head_path, "judge file") if head_path.is_file() else None
            if head_text != base_labels or labels_suite.fields != suite.fields:
                notes.append(
                    "the labels are the base branch's: label changes in this pull request take "
                    "effect once it is merged"
                )
        else:
            labels = suite_labels(loaded, suite)
        base_sha = None if base is None else _base_judge_sha(loaded, base, read_base, folder)
        changed = base_sha is not None and base_sha != judge_sha256(loaded.root, suite)
        # An unchanged judge that read these holdout labels before is not read again: its
        # recorded result stands. A changed one is graded, and so is the base's, to be paired.
        report, head = check_judge(
            world,
            loaded,
            name,
            checked,
            labels,
            splits=both,
            show=SHOWN,
            reuse=not changed,
            guard=guard,
        )
        change = None
        reads = None
        if base is not None and base_sha is not None and changed:
            change, reads = _against_base_judge(
                world,
                loaded,
                name,
                base,
                base_sha,
                read_base,
                labels,
                head,
                both,
                alpha,
                folder,
                guard,
            )
        else:
            notes.append("the judge or its labels are new in this pull request: nothing to pair")
    update: dict[str, object] = {"warnings": [*report.warnings, *notes]}
    if reads is not None:
        update["holdout_reads"] = reads
    if candidate is not None:
        update["corrected"] = corrected_accuracy(candidate, report.splits, report.floor)
    report = report.model_copy(update=update)
    outcome = JudgeInPR(
        report=report,
        change=change,
        markdown=render("judge.md.j2", s=report, change=change, limit=SHOWN),
    )
    if change is not None and change.kind == "dropped":
        outcome.failures.append(
            f"the judge change lowers its agreement with people: {change.head.hits:g} of "
            f"{change.n} labels agree, {change.base.hits:g} with the base branch's judge (lost "
            f"{change.lost}, gained {change.gained}; one-sided exact McNemar p = "
            f"{change.p_value:.2g} < {alpha:g})"
        )
    elif change is not None and change.kind == "unproven":
        outcome.doubts.append(
            f"the judge change may lower its agreement with people (lost {change.lost}, gained "
            f"{change.gained} of {change.n} labels; p = {change.p_value:.2g}, not significant): "
            "label more replies to tell"
        )
    outcome.doubts.extend(report.floor.reasons)
    if holdout_unread and report.holdout_unread:
        outcome.doubts.append(
            f"the judge's holdout labels were not read ({holdout_unread}), so the judge is "
            "checked on its dev labels only, which rubric tuning has seen"
        )
    return outcome


def _base_judge_sha(loaded: LoadedConfig, base: Suite, read_base: ReadBase, folder: Path) -> str:
    """The base branch's judge identity, from its own files."""
    for relative in file_names(base.scorer):
        text = read_base(loaded.root / relative)
        if text is not None:
            (folder / "hash" / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / "hash" / relative).write_text(text, encoding="utf-8")
    return judge_sha256(folder / "hash", base)


def _against_base_judge(
    world: World,
    loaded: LoadedConfig,
    name: str,
    base: Suite,
    base_sha: str,
    read_base: ReadBase,
    labels: list[Label],
    head: dict[str, Graded],
    splits: frozenset[str],
    alpha: float,
    folder: Path,
    guard: LeakGuard | None = None,
) -> tuple[AgreementChange, int | None]:
    """When the pull request changes the judge, the base branch's judge grades the same labels
    and the two agreements are paired label by label; the change, and the holdout-label reads
    counted after the base judge's read."""
    runnable = _materialise(loaded, base, read_base, folder / "base")
    # The base judge grading the holdout labels is a read of them too the first time this
    # judge identity reads them (its record follows the head's in the ledger): the count
    # shown is the later one.
    based, old = check_judge(
        world,
        loaded,
        name,
        runnable,
        labels,
        splits=splits,
        show=0,
        base_dir=folder / "base",
        judge_sha=base_sha,
        reuse=False,
        guard=guard,
    )
    ids = [
        x.id
        for x in labels
        if x.id in head and x.id in old and old[x.id].error is None and head[x.id].error is None
    ]
    human = {x.id: x.human for x in labels}
    change = agreement_change(
        [old[i].passes[0] == human[i] for i in ids],
        [head[i].passes[0] == human[i] for i in ids],
        alpha,
    )
    return change, based.holdout_reads
