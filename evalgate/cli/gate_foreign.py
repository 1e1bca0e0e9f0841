"""``evalgate gate`` on results other harnesses made (promptfoo, Inspect, JUnit XML).

The files are read into evalgate's run model (evalgate.foreign) and decided as two evalgate runs
are: the same test, the same report. With an evalgate.yml the gate settings are its suite's
(``--suite`` when it has several); without one they are the defaults, and the report says so.
"""

from __future__ import annotations

from pathlib import Path

from evalgate.analysis.summary import summarise
from evalgate.cli.context import EXIT_GATE_FAILED, EXIT_OK, Context
from evalgate.config.models import GatePolicy
from evalgate.errors import RunFileError
from evalgate.foreign import is_foreign, read_foreign
from evalgate.foreign.build import ForeignRun
from evalgate.foreign.gate import decide_foreign, defaults_line, dropped_notes
from evalgate.gate.verdict import Verdict
from evalgate.report.render import render_model
from evalgate.runs.schema import Run, starts_as_run

_OF_A_KIND = (
    "gate two of a kind: two evalgate runs (files or latest:VERSION), or two results files "
    "of one harness (the baseline from its run on the default branch)"
)


def _read(ctx: Context, ref: str, side: str) -> ForeignRun:
    path = Path(ref)
    if not path.is_file():
        raise RunFileError(
            f"--{side} {ref!r} is not a file",
            fix="pass the results file the harness wrote (promptfoo -o, an Inspect log, JUnit)",
        )
    return read_foreign(path, getattr(ctx.args, "results_format", None))


def _is_run(ref: str) -> bool:
    """Whether ``ref`` names an evalgate run: a file that starts as one, or a name such as
    latest:VERSION (a path that names no file, ``cnadidate.json`` say, is neither)."""
    path = Path(ref)
    if path.is_file():
        return starts_as_run(path)
    return not path.exists() and "/" not in ref and path.suffix.lower() not in _FILE_SUFFIXES


# What results files and run files end in: a missing path with one is a file that is not there.
_FILE_SUFFIXES = (".json", ".jsonl", ".eval", ".xml", ".gz")


def _mixed(ctx: Context) -> None:
    """An evalgate run on one side and another harness's results on the other: said as such
    (unless --results-format says how to read both)."""
    if getattr(ctx.args, "results_format", None):
        return
    sides = {"baseline": ctx.args.baseline, "candidate": ctx.args.candidate}
    # A run: a file that starts as one, or a name (latest:VERSION); any other file is read as
    # results, to be refused with what it is not.
    run = {s: _is_run(r) for s, r in sides.items()}
    foreign = {s: Path(r).is_file() and is_foreign(Path(r)) for s, r in sides.items()}
    ours = next((side for side in sides if run[side]), None)
    other = next((side for side in sides if foreign[side]), None)
    if ours is not None and other is not None:
        raise RunFileError(
            f"--{ours} {sides[ours]!r} is an evalgate run, and --{other} {sides[other]!r} "
            "another harness's results",
            fix=_OF_A_KIND,
        )


def cmd_gate_foreign(ctx: Context) -> int:
    _mixed(ctx)
    first = _read(ctx, ctx.args.baseline, "baseline")
    second = _read(ctx, ctx.args.candidate, "candidate")
    if first.format != second.format:
        raise RunFileError(
            f"--baseline is {first.format} results and --candidate {second.format} results",
            fix=_OF_A_KIND,
        )
    baseline, candidate = first.run(), second.run()
    notes = dropped_notes(first) + dropped_notes(second)
    config = Path(ctx.args.config)
    if config.is_file():
        _, suite = ctx.config().suite(ctx.args.suite)
        policy = suite.gate
    else:
        policy = GatePolicy()
        notes.append(defaults_line(policy, config))
    verdict = decide_foreign(
        baseline,
        candidate,
        policy,
        notes,
        (ctx.args.baseline, ctx.args.candidate),
        frozenset(second.left_out),
    )
    _print(ctx, verdict, baseline, candidate)
    if verdict.kind == "fail":
        return EXIT_GATE_FAILED
    if verdict.kind == "inconclusive":
        ctx.warn(
            "the verdict is inconclusive: "
            + "; ".join(verdict.reasons)
            + f" (exit {policy.inconclusive_exit}; set gate.inconclusive_exit to change it)"
        )
        return policy.inconclusive_exit
    return EXIT_OK


def _print(ctx: Context, verdict: Verdict, baseline: Run, candidate: Run) -> None:
    if ctx.args.format == "markdown":
        from evalgate.report.comment import BaselineProvenance, CommentContext, render_job_summary

        context = CommentContext(
            suite=candidate.suite,
            verdict=verdict,
            candidate=summarise(candidate, price_as=None),
            baseline=BaselineProvenance(run=baseline.name, source="local"),
            max_rows=ctx.args.show,
        )
        ctx.print(render_job_summary(context))
        return
    ctx.print(render_model("gate", verdict, ctx.args.format, limit=ctx.args.show))
