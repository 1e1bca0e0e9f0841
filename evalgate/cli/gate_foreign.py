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
from evalgate.gate.decide import Verdict, decide
from evalgate.report.render import render_model
from evalgate.runs.schema import Run


def wants_foreign(ctx: Context) -> bool:
    """Whether either side is another harness's results (or --results-format names one)."""
    if getattr(ctx.args, "results_format", None):
        return True
    return any(is_foreign(Path(ref)) for ref in (ctx.args.baseline, ctx.args.candidate))


def defaults_line(policy: GatePolicy, config: Path) -> str:
    return (
        f"no {config}: the gate's defaults decided (alpha {policy.alpha}, tolerance "
        f"{policy.tolerance}, power {policy.power}, test {policy.test}, at most "
        f"{policy.max_unpaired_share:.0%} of cases unpaired); write an evalgate.yml with a "
        "suite's gate: to set them"
    )


def _read(ctx: Context, ref: str, side: str) -> tuple[Run, list[str]]:
    path = Path(ref)
    if not path.is_file():
        raise RunFileError(
            f"--{side} {ref!r} is not a file",
            fix="pass the results file the harness wrote (promptfoo -o, an Inspect log, JUnit)",
        )
    foreign = read_foreign(path, getattr(ctx.args, "results_format", None))
    run = foreign.run()
    notes = []
    if foreign.dropped:
        notes.append(f"{path}: {foreign.dropped_line()} left out of the comparison")
    return run, notes


def cmd_gate_foreign(ctx: Context) -> int:
    baseline, notes = _read(ctx, ctx.args.baseline, "baseline")
    candidate, more = _read(ctx, ctx.args.candidate, "candidate")
    notes += more
    config = Path(ctx.args.config)
    if config.is_file():
        _, suite = ctx.config().suite(ctx.args.suite)
        policy = suite.gate
    else:
        policy = GatePolicy()
        notes.append(defaults_line(policy, config))
    shared = set(baseline.by_id()) & set(candidate.by_id())
    if not shared:
        raise RunFileError(
            f"no case of {ctx.args.candidate} pairs with one of {ctx.args.baseline} "
            f"({len(candidate.cases)} and {len(baseline.cases)} cases; a case is told by "
            f"{_identity(candidate)})",
            fix="gate two runs of the same tests (the same files, vars and descriptions)",
        )
    verdict = decide(baseline, candidate, policy)
    notes += _unpaired(verdict, candidate)
    verdict = verdict.model_copy(update={"warnings": [*notes, *verdict.warnings]})
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


def _unpaired(verdict: Verdict, candidate: Run) -> list[str]:
    """How many cases the pairing left out, and why (never silently)."""
    told = _identity(candidate)
    lines = []
    for count, why in (
        (len(verdict.only_baseline), "are in the baseline only (no candidate result with"),
        (len(verdict.only_candidate), "are in the candidate only (no baseline result with"),
    ):
        if count:
            lines.append(f"{count} cases {why} {told}): left out of the pairing")
    if verdict.edited:
        lines.append(
            f"{len(verdict.edited)} cases changed their test (the same {told}, other "
            "assertions or target): left out of the pairing"
        )
    return lines


def _identity(run: Run) -> str:
    return {
        "promptfoo": "its vars and description",
        "inspect": "its sample id",
        "junit": "its classname and name",
    }.get(run.model.backend, "its id")


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
