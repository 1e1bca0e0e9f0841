"""``evalgate gate``: a candidate against a baseline, decided as a pull request's job decides it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from evalgate.analysis.summary import RunSummary, summarise
from evalgate.cli import estimate
from evalgate.cli.context import EXIT_GATE_FAILED, EXIT_OK, Context, price_as_for
from evalgate.cli.options import Subcommands, non_negative, positive
from evalgate.errors import RunFileError, UserError, did_you_mean
from evalgate.gate.decide import decide
from evalgate.gate.pull_request import decide_pull_request
from evalgate.report.render import render_model
from evalgate.runs.schema import Run, find_run, read_run, save_run, starts_as_run

if TYPE_CHECKING:
    # The runner, the split of a git commit and the judge's check are imported where a gate
    # needs them (a prompt version run now, --base-ref, a judge scorer): a gate on two run
    # files reads the files and decides.
    from evalgate.cases.base_split import HoldoutChange
    from evalgate.cases.read import CaseSet
    from evalgate.config.load import LoadedConfig
    from evalgate.gate.verdict import Verdict
    from evalgate.running.allocation import AdaptiveSource


def unknown_candidate(
    ref: str, suite: str, versions: list[str], missing: RunFileError
) -> RunFileError:
    """--candidate is neither a saved run nor a prompt version: say which of either exist."""
    close = did_you_mean(ref, versions)
    hint = f"did you mean {close}? " if close else ""
    return RunFileError(
        f"--candidate {ref!r} is neither a saved run nor a prompt version of suite {suite} "
        f"({missing.what})",
        fix=f"{hint}prompt versions: {', '.join(versions) or 'none'}; saved runs: `evalgate list`",
    )


def _folder_runs(ref: str) -> list[Run] | None:
    """Every run file in a folder (one per suite, as `baseline pull` writes them), or None
    when ``ref`` is not a folder."""
    folder = Path(ref)
    if not folder.is_dir():
        return None
    runs = [read_run(path) for path in sorted(folder.glob("*.json"))]
    if not runs:
        raise UserError(
            "no run files in this folder", where=ref, fix="pass a run file or a folder of them"
        )
    seen: dict[str, str] = {}
    for run in runs:
        if run.suite in seen:
            raise UserError(
                f"two run files of suite {run.suite!r} ({seen[run.suite]} and {run.name})",
                where=ref,
                fix="keep one run file per suite in the folder",
            )
        seen[run.suite] = run.name
    return runs


Guard: TypeAlias = "tuple[Callable[[CaseSet], CaseSet], Callable[[], HoldoutChange]]"


def _candidate(
    ctx: Context, loaded: LoadedConfig, ref: str, baseline: Run | None, guards: dict[str, Guard]
) -> Run:
    """A candidate run by reference, or a prompt version of the suite run now."""
    try:
        candidate = find_run(ref, loaded.state_dir, ctx.args.suite)
    except RunFileError as exc:
        name, suite = loaded.suite(ctx.args.suite or (baseline.suite if baseline else None))
        versions = sorted(loaded.prompt_files(suite))
        if ref not in versions:
            raise unknown_candidate(ref, name, versions, exc) from None
        early = baseline if ctx.args.early_stop else None
        assign = _guard(ctx, loaded, name, guards)
        from evalgate.running.allocation import candidate_repeats

        repeats, adaptive = candidate_repeats(suite.gate, allocation_source(ctx, loaded, baseline))
        if suite.gate.repeats == "two-stage":
            if early is not None:
                raise UserError(
                    "--early-stop and gate.repeats: two-stage do not combine: the second stage "
                    "is chosen after the first has run whole",
                    where="--early-stop",
                    fix="drop --early-stop, or set gate.repeats to a number",
                ) from None
            from evalgate.app import run_two_stage

            options = ctx.run_options(assign=assign)
            candidate = run_two_stage(ctx.world(), loaded, name, ref, options, baseline)
        else:
            candidate = ctx.run_version(
                loaded,
                name,
                ref,
                early_stop_against=early,
                assign=assign,
                repeats=repeats,
                adaptive=adaptive,
            )
        if not ctx.args.no_save:
            save_run(candidate, loaded.state_dir)
    return candidate


def _guard(
    ctx: Context, loaded: LoadedConfig, name: str, guards: dict[str, Guard]
) -> Callable[[CaseSet], CaseSet] | None:
    """With --base-ref, the split of that commit for suite ``name`` (made once)."""
    if not getattr(ctx.args, "base_ref", None):
        return None
    if name not in guards:
        guards[name] = base_guard(loaded, name, ctx.args.base_ref, ctx.args.config)
    return guards[name][0]


def _with_holdout_guard(verdict: Verdict, guards: dict[str, Guard], name: str) -> Verdict:
    """A pull request that moves cases across the holdout line cannot be read: inconclusive
    (whatever the tests say), with the change first among the reasons."""
    if name not in guards or not guards[name][1]().changed:
        return verdict
    return verdict.model_copy(update={"mismatch": [guards[name][1]().line(), *verdict.mismatch]})


def _wants_foreign(ctx: Context) -> bool:
    """Whether either side is another harness's results (or --results-format names one). A
    file that starts as a run file does is told by its first bytes: a gate of two run files
    never loads the other harnesses' readers."""
    if getattr(ctx.args, "results_format", None):
        return True
    paths = [Path(ref) for ref in (ctx.args.baseline, ctx.args.candidate)]
    others = [p for p in paths if p.is_file() and not starts_as_run(p)]
    if not others:
        return False
    from evalgate.foreign import is_foreign

    return any(is_foreign(p) for p in others)


def markdown_report(
    suite: str,
    verdict: Verdict,
    candidate: RunSummary,
    baseline: str | None,
    max_rows: int | None,
    **pull_request: Any,
) -> str:
    """The gate's report as Markdown: the job-summary form of the comment (there is no
    gate.md.j2), against a local baseline run named ``baseline``. ``pull_request`` holds the
    whole pull request's fields when it has several suites."""
    from evalgate.report.comment import BaselineProvenance, CommentContext, render_job_summary

    return render_job_summary(
        CommentContext(
            suite=suite,
            verdict=verdict,
            candidate=candidate,
            baseline=BaselineProvenance(run=baseline, source="local") if baseline else None,
            max_rows=max_rows,
            **pull_request,
        )
    )


def cmd_gate(ctx: Context) -> int:
    """One decision over one suite, or over every suite of two folders of run files (matched
    by suite name), with one familywise alpha: the same decision the action makes. Results
    other harnesses made (promptfoo, Inspect, JUnit XML) are gated by gate_foreign."""
    if _wants_foreign(ctx):
        from evalgate.cli.gate_foreign import cmd_gate_foreign

        return cmd_gate_foreign(ctx)
    loaded = ctx.config()
    if ctx.args.estimate:
        return _estimate(ctx, loaded)
    guards: dict[str, Guard] = {}
    base_runs = _folder_runs(ctx.args.baseline)
    cand_runs = _folder_runs(ctx.args.candidate)
    if base_runs is None:
        base_runs = [find_run(ctx.args.baseline, loaded.state_dir, ctx.args.suite)]
    if cand_runs is None:
        wanted = ctx.args.suite or (base_runs[0].suite if len(base_runs) == 1 else None)
        match = next((r for r in base_runs if r.suite == wanted), None)
        cand_runs = [_candidate(ctx, loaded, ctx.args.candidate, match, guards)]
    by_suite = {r.suite: r for r in base_runs}
    if len(cand_runs) == 1 and len(base_runs) == 1 and ctx.args.suite is None:
        by_suite = {cand_runs[0].suite: base_runs[0]}  # one of each: compare them, as before
    parts: list[tuple[str, Run | None, Run]] = []
    for candidate in cand_runs:
        base = by_suite.get(candidate.suite)
        if len(cand_runs) == 1:
            name, _ = loaded.suite(ctx.args.suite or (base or candidate).suite)
        else:
            name, _ = loaded.suite(candidate.suite)
        parts.append((name, base, candidate))
    for _, base, cand in parts:
        if base is not None and (base.name, base.created_at) == (cand.name, cand.created_at):
            raise UserError(
                f"the baseline and the candidate are the same run ({base.name})",
                where="--candidate",
                fix="compare it with another run, or name a prompt version to run now",
            )
    for suite_name in sorted(set(by_suite) - {c.suite for c in cand_runs}):
        ctx.warn(f"the baseline has suite {suite_name!r} but the candidate does not")
    verdicts = []
    for name, base, cand in parts:
        if name not in guards and _guard(ctx, loaded, name, guards) is not None:
            from evalgate.running.suite import load_suite_cases

            load_suite_cases(loaded, loaded.suite(name)[1], assign=guards[name][0])
        suite = loaded.suite(name)[1]
        verdict = _with_holdout_guard(decide(base, cand, suite.gate), guards, name)
        # A judge below its floor (or unchecked) cannot be read, whatever the tests say.
        doubts: list[str] = []
        if suite.judge is not None:
            from evalgate.running.judge_check import floor_for_gate

            doubts = floor_for_gate(loaded, name, suite)
        verdict = verdict.model_copy(update={"mismatch": [*doubts, *verdict.mismatch]})
        verdicts.append((name, verdict))
    decision = decide_pull_request(verdicts)
    several = len(parts) > 1
    for (name, baseline, candidate), part in zip(parts, decision.suites, strict=True):
        verdict = part.verdict
        if several and ctx.args.format == "text":
            ctx.print(f"== {name} ==")
        if ctx.args.format == "markdown":
            ctx.print(
                markdown_report(
                    name,
                    verdict,
                    summarise(candidate, price_as=price_as_for(loaded, candidate)),
                    baseline.name if baseline else None,
                    ctx.args.show,
                    pull_request_kind=decision.kind if several else None,
                    pull_request_tests=decision.tests if several else None,
                    suite_parts=[(s.suite, s.verdict.kind) for s in decision.suites]
                    if several
                    else [],
                )
            )
        elif ctx.args.format == "json" and several:
            continue
        else:
            ctx.print(render_model("gate", verdict, ctx.args.format, limit=ctx.args.show))
    if several:
        if ctx.args.format == "json":
            ctx.print(decision.model_dump_json(indent=2))
        elif ctx.args.format == "text":
            ctx.print(decision.line()[0].upper() + decision.line()[1:])
    if decision.kind == "fail":
        return EXIT_GATE_FAILED
    if decision.kind == "inconclusive":
        code = max(loaded.suite(name)[1].gate.inconclusive_exit for name, _, _ in parts)
        reasons = [
            f"{s.suite}: {r}" if several else r
            for s in decision.suites
            if s.verdict.kind == "inconclusive"
            for r in s.verdict.reasons
        ]
        ctx.warn(
            "the verdict is inconclusive: "
            + "; ".join(reasons)
            + (f" (exit {code}; set gate.inconclusive_exit to change it)")
        )
        return code
    return EXIT_OK


def _estimate(ctx: Context, loaded: LoadedConfig) -> int:
    """The candidate's run, estimated against the baseline's replies; nothing is called."""
    baseline = find_run(ctx.args.baseline, loaded.state_dir)
    name, suite = loaded.suite(ctx.args.suite or baseline.suite)
    versions = sorted(loaded.prompt_files(suite))
    if ctx.args.candidate not in versions:
        raise UserError(
            f"--estimate needs --candidate to be a prompt version to run, not {ctx.args.candidate!r}",
            fix=f"prompt versions of suite {name}: {', '.join(versions)}",
        )
    from evalgate.running.allocation import candidate_repeats

    repeats, adaptive = candidate_repeats(suite.gate, allocation_source(ctx, loaded, baseline))
    options = ctx.run_options(repeats=repeats, adaptive=adaptive)
    return estimate.print_estimate(ctx, loaded, name, ctx.args.candidate, baseline, options)


def allocation_source(
    ctx: Context, loaded: LoadedConfig, baseline: Run | None
) -> AdaptiveSource | None:
    """``--allocate-from``: the earlier baselines whose flips allocate adaptive repeats (never
    the baseline the gate compares with: allocating from the tested outcomes breaks the test)."""
    refs = getattr(ctx.args, "allocate_from", None) or []
    runs = [find_run(ref, loaded.state_dir) for ref in refs]
    for run in runs:
        if baseline is not None and (run.name, run.created_at) == (
            baseline.name,
            baseline.created_at,
        ):
            raise UserError(
                f"--allocate-from names the baseline the gate compares with ({run.name})",
                where="--allocate-from",
                fix="allocate from an earlier baseline run, one the test does not compare",
            )
    if not runs:
        return None
    from evalgate.running.allocation import adaptive_source

    names = ", ".join(r.name for r in runs)
    return adaptive_source(runs, 2, False, f"{'run' if len(runs) == 1 else 'runs'} {names}")


def base_guard(
    loaded: LoadedConfig, name: str, ref: str, raw_config: str
) -> tuple[Callable[[CaseSet], CaseSet], Callable[[], HoldoutChange]]:
    """The split of commit ``ref`` (read through git), applied as a pull request's job does."""
    from evalgate.cases.base_split import guard, read_tree, relative_config
    from evalgate.cases.gitrepo import GitTree, toplevel

    top = toplevel(loaded.root)
    if top is None:
        raise UserError(
            "--base-ref reads the split from git, and the config is not in a git repository",
            where=str(loaded.path),
        )
    config = relative_config(top, Path(raw_config))
    base = read_tree(GitTree.open(top, ref, fetch=False), config, loaded)
    return guard(base, name, loaded)


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    gate = sub.add_parser(
        "gate", parents=[common], help="decide pass / fail / inconclusive against a baseline"
    )
    gate.add_argument(
        "--baseline",
        required=True,
        help="baseline run (name, prefix, path), a folder of run files, one per suite, or "
        "another harness's results (promptfoo -o FILE.json, an Inspect log, JUnit XML)",
    )
    gate.add_argument(
        "--candidate",
        required=True,
        help="candidate run, a prompt version to run now, or a folder of run files (matched "
        "to the baseline's by suite name; one decision over every suite)",
    )
    gate.add_argument(
        "--results-format",
        choices=["promptfoo", "inspect", "junit"],
        help="the format of foreign results files (default: told by their content)",
    )
    gate.add_argument("--no-save", action="store_true", help="do not save a candidate run")
    gate.add_argument(
        "--early-stop",
        action="store_true",
        help="stop running the candidate once a fail is certain (anytime-valid sequential test)",
    )
    gate.add_argument(
        "--allocate-from",
        action="append",
        metavar="RUN",
        help="gate.repeats: adaptive: an earlier baseline run (not --baseline) whose flips "
        "allocate the candidate's repeats (repeatable; without it every case is sent "
        "gate.unstable_repeats times)",
    )
    gate.add_argument("--show", type=non_negative, default=20, help="cases listed per section")
    gate.add_argument(
        "--base-ref",
        metavar="REF",
        help="take the dev / holdout split from this git commit (the pull request's base), as "
        "the action does; a change of the holdout since then makes the verdict inconclusive",
    )
    gate.add_argument("--concurrency", type=positive, help="calls in flight")
    estimate.add_argument(gate)
    gate.set_defaults(func=cmd_gate, verbose=False, cache=None)
