"""The noise floor and the gate."""

from __future__ import annotations

import difflib

from evalgate.cli.context import (
    EXIT_GATE_FAILED,
    EXIT_OK,
    Context,
    execute_version,
    price_as_for,
)
from evalgate.errors import RunFileError
from evalgate.gate import decide
from evalgate.noise import measure_noise
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
    close = difflib.get_close_matches(ref, versions, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}? " if close else ""
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
    try:
        candidate = find_run(ref, loaded.state_dir)
    except RunFileError as exc:
        versions = loaded.prompt_files(suite)
        if ref not in versions:
            raise unknown_candidate(ref, name, sorted(versions), exc) from None
        candidate = execute_version(
            ctx, loaded, name, ref, early_stop_against=baseline if ctx.args.early_stop else None
        )
        if not ctx.args.no_save:
            save_run(candidate, loaded.state_dir)
    verdict = decide(baseline, candidate, suite.gate)
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
