"""The noise floor and the gate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evalgate.base_split import HoldoutChange, guard, read_tree, relative_config
from evalgate.cases import CaseSet
from evalgate.cli.context import (
    EXIT_GATE_FAILED,
    EXIT_OK,
    Context,
    execute_version,
    price_as_for,
)
from evalgate.config import LoadedConfig
from evalgate.errors import RunFileError, UserError, did_you_mean
from evalgate.gate import decide
from evalgate.gitrepo import GitTree, toplevel
from evalgate.noise import measure_noise
from evalgate.pipeline import load_suite_cases
from evalgate.report.render import render, render_model
from evalgate.runs import find_run, save_run
from evalgate.summary import summarise


def cmd_noise(ctx: Context) -> int:
    loaded = ctx.config()
    name, suite = loaded.suite(ctx.args.suite)
    ctx.args.cache = False  # a cached reply measures nothing about noise
    run = execute_version(ctx, loaded, name, ctx.args.version, repeats=ctx.args.repeats)
    noise = measure_noise(run, alpha=suite.gate.alpha, power=suite.gate.power)
    assert noise is not None  # repeats >= 2 is enforced by the parser
    if not ctx.args.no_save:
        path = save_run(run, loaded.state_dir)
        ctx.err.write(f"saved {run.name} to {path} (usable as a baseline)\n")
    if ctx.args.format == "json":
        ctx.print(noise.model_dump_json(indent=2))
    else:
        ctx.print(render("noise.txt.j2", s=noise, limit=ctx.args.show))
    return EXIT_OK


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


def cmd_gate(ctx: Context) -> int:
    loaded = ctx.config()
    baseline = find_run(ctx.args.baseline, loaded.state_dir)
    name, suite = loaded.suite(ctx.args.suite or baseline.suite)
    ref = ctx.args.candidate
    assign = holdout_change = None
    if getattr(ctx.args, "base_ref", None):
        assign, holdout_change = base_guard(loaded, name, ctx.args.base_ref, ctx.args.config)
    try:
        candidate = find_run(ref, loaded.state_dir)
        if assign is not None:
            load_suite_cases(loaded, suite, assign=assign)  # only to see what the head changes
    except RunFileError as exc:
        versions = loaded.prompt_files(suite)
        if ref not in versions:
            raise unknown_candidate(ref, name, sorted(versions), exc) from None
        candidate = execute_version(
            ctx,
            loaded,
            name,
            ref,
            early_stop_against=baseline if ctx.args.early_stop else None,
            assign=assign,
        )
        if not ctx.args.no_save:
            save_run(candidate, loaded.state_dir)
    verdict = decide(baseline, candidate, suite.gate)
    if holdout_change is not None and holdout_change().changed:
        verdict = verdict.model_copy(
            update={
                "kind": "inconclusive",
                "reasons": [holdout_change().line(), *verdict.reasons],
            }
        )
    if ctx.args.format == "markdown":
        # There is no gate.md.j2: the Markdown report is the job-summary form of the PR comment.
        from evalgate.report.comment import BaselineProvenance, CommentContext, render_summary

        context = CommentContext(
            suite=name,
            verdict=verdict,
            candidate=summarise(candidate, price_as=price_as_for(loaded, candidate)),
            baseline=BaselineProvenance(run=baseline.name, source="local"),
            max_rows=ctx.args.show,
        )
        ctx.print(render_summary(context))
    else:
        ctx.print(render_model("gate", verdict, ctx.args.format, limit=ctx.args.show))
    if verdict.kind == "fail":
        return EXIT_GATE_FAILED
    if verdict.kind == "inconclusive":
        code = suite.gate.inconclusive_exit
        ctx.warn(
            "the verdict is inconclusive: "
            + "; ".join(verdict.reasons)
            + (f" (exit {code}; set gate.inconclusive_exit to change it)")
        )
        return code
    return EXIT_OK


def base_guard(
    loaded: LoadedConfig, name: str, ref: str, raw_config: str
) -> tuple[Callable[[CaseSet], CaseSet], Callable[[], HoldoutChange]]:
    """The split of commit ``ref`` (read through git), applied as a pull request's job does."""
    top = toplevel(loaded.root)
    if top is None:
        raise UserError(
            "--base-ref reads the split from git, and the config is not in a git repository",
            where=str(loaded.path),
        )
    config = relative_config(top, Path(raw_config))
    base = read_tree(GitTree.open(top, ref, fetch=False), config, loaded)
    return guard(base, name, loaded)
