"""``evalgate demo``: the bundled example on the offline fake model, to the gate's verdict."""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import tempfile
import textwrap
from importlib import resources
from pathlib import Path

from evalgate import __version__
from evalgate.analysis.compare import Comparison, compare_runs
from evalgate.analysis.summary import RunSummary, summarise
from evalgate.cli.context import EXIT_GATE_FAILED, EXIT_OK, Context, price_as_for
from evalgate.cli.judge import demo_judge
from evalgate.cli.options import Subcommands, non_negative
from evalgate.config.load import LoadedConfig, load_config
from evalgate.config.models import DEFAULT_CONFIG
from evalgate.defaults import STATE_DIR
from evalgate.errors import UserError
from evalgate.gate.verdict import Verdict
from evalgate.report.render import pct, render_model
from evalgate.runs.schema import Run, save_run


def bundled_example(name: str = "bike-shop") -> Path:
    """A bundled example (bike-shop, support-agent): shipped inside the package, or beside it
    in a source checkout."""
    packaged = resources.files("evalgate").joinpath(f"bundled/{name}")
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[1] / "examples" / name
    if checkout.is_dir():
        return checkout
    raise UserError(
        "the bundled example is missing from this installation", fix="reinstall evalgate"
    )


DEMO_SUITE = "bike-shop"


DEMO_VERSIONS = ("v1", "v2", "v3")


DEMO_WHY_TIE = (
    "Why v3 ties v2 here: the fake model labels each message by keyword rules "
    "(fake-rules.yml) and reads only two things in the prompt: whether it names every label "
    "(v1 does not, so the fake answers in its own words and scores nothing) and whether it "
    "asks for JSON. v2 and v3 both do, so the fake answers every case alike and the gate sees "
    "nothing broken and nothing fixed. v3's tie-break rules and examples are for a real model: "
    "set model.backend to anthropic to see what they change."
)


def cmd_demo(ctx: Context) -> int:
    """The story of a prompt change: three versions, then the gate as a pull request meets it.

    In text and Markdown the story goes to stdout; with --json stdout carries one JSON document
    and the banners go to stderr."""
    from evalgate.gate.decide import decide
    from evalgate.report.plain import markdown_to_terminal

    fmt = ctx.args.format
    as_json = fmt == "json"

    def say(text: str = "") -> None:
        if as_json:
            ctx.write(text + "\n", err=True)
        else:
            ctx.print(text)

    with tempfile.TemporaryDirectory(prefix="evalgate-demo-") as tmp:
        folder = Path(tmp) / DEMO_SUITE
        shutil.copytree(bundled_example(), folder, ignore=shutil.ignore_patterns(STATE_DIR))
        loaded = load_config(folder / DEFAULT_CONFIG)
        _, suite = loaded.suite(DEMO_SUITE)
        say(f"evalgate {__version__} demo: the bike-shop example on the offline fake model")
        say("(a copy in a temporary folder; nothing is written to your working tree)")
        say()
        say(f"1. Three prompt versions ({', '.join(DEMO_VERSIONS)}) over the same cases")
        say()
        runs, summaries, comparisons = _demo_versions(ctx, loaded, suite.price_as, as_json)

        repeats = suite.gate.baseline_repeats
        shipped, proposed = DEMO_VERSIONS[-2], DEMO_VERSIONS[-1]
        say(f"2. The gate, as a pull request meets it: the default branch ships {shipped}")
        say(
            f"   Its baseline is {shipped} run {repeats} times (gate.baseline_repeats), so the "
            "gate knows which cases flip on their own; the pull request changes the prompt to "
            f"{proposed}, the candidate."
        )
        say()
        baseline = ctx.run_version(loaded, DEMO_SUITE, shipped, repeats=repeats)
        save_run(baseline, loaded.state_dir)
        candidate = runs[proposed]
        verdict = decide(baseline, candidate, suite.gate)
        if not as_json:
            ctx.print(_gate_report(ctx, DEMO_SUITE, baseline, verdict, summaries[proposed]))
        comment = _demo_comment(baseline, verdict, summaries[proposed])
        say()
        say("3. The comment the action would post on the pull request")
        say()
        if not as_json:
            ctx.print(comment if fmt == "markdown" else _framed(markdown_to_terminal(comment)))
        say("4. An agent suite, gated on the tools it calls")
        agent = demo_agent(ctx)
        say()
        say("5. A judge, checked against people's labels before it may gate")
        judge = demo_judge(ctx, folder)
        say()
        recap = _demo_recap(summaries, verdict.kind.upper(), verdict.reasons, shipped, repeats)
        say(DEMO_WHY_TIE if as_json else _wrap(DEMO_WHY_TIE))
        say()
        for line in recap:
            say(line)
        say()
        say(
            _wrap(
                "Next: copy examples/bike-shop (or run `evalgate init` in your repository), "
                "point evalgate.yml at your prompts and cases, and run `evalgate run VERSION`."
            )
        )
    if as_json:
        document = {
            "evalgate": __version__,
            "suite": DEMO_SUITE,
            "runs": {v: summaries[v].model_dump(mode="json") for v in DEMO_VERSIONS},
            "comparisons": [c.model_dump(mode="json") for c in comparisons],
            "gate": {
                "baseline": {"version": shipped, "run": baseline.name, "repeats": repeats},
                "candidate": {"version": proposed, "run": candidate.name},
                "verdict": verdict.model_dump(mode="json"),
            },
            "comment": comment,
            "agent": agent,
            "judge": judge,
            "why_tie": DEMO_WHY_TIE,
        }
        ctx.write(json.dumps(document, indent=2) + "\n")
    if verdict.kind == "fail":
        return EXIT_GATE_FAILED
    return EXIT_OK


def _demo_versions(
    ctx: Context, loaded: LoadedConfig, price_as: str | None, as_json: bool
) -> tuple[dict[str, Run], dict[str, RunSummary], list[Comparison]]:
    """Every demo version run once, its report printed, and each compared with the next."""
    runs: dict[str, Run] = {}
    summaries: dict[str, RunSummary] = {}
    for version in DEMO_VERSIONS:
        run = ctx.run_version(loaded, DEMO_SUITE, version)
        save_run(run, loaded.state_dir)
        runs[version] = run
        summaries[version] = summarise(run, price_as=price_as, show=ctx.args.show)
        if not as_json:
            ctx.print(render_model("run", summaries[version], ctx.args.format))
            ctx.print()
    comparisons = [compare_runs(runs[a], runs[b]) for a, b in itertools.pairwise(DEMO_VERSIONS)]
    if not as_json:
        for comparison in comparisons:
            ctx.print(render_model("compare", comparison, ctx.args.format, limit=ctx.args.show))
            ctx.print()
    return runs, summaries, comparisons


def _gate_report(
    ctx: Context, suite: str, baseline: Run, verdict: Verdict, candidate: RunSummary
) -> str:
    """The gate's report in the asked-for format, as `evalgate gate` prints it."""
    if ctx.args.format != "markdown":
        return render_model("gate", verdict, ctx.args.format, limit=ctx.args.show)
    from evalgate.cli.gate import markdown_report

    return markdown_report(suite, verdict, candidate, baseline.name, ctx.args.show)


def _demo_comment(baseline: Run, verdict: Verdict, candidate: RunSummary) -> str:
    """The comment the action would post, with the baseline as a pull request meets it: the
    default branch's artefact."""
    from evalgate.report.comment import BaselineProvenance, CommentContext, render_comment

    context = CommentContext(
        suite=DEMO_SUITE,
        verdict=verdict,
        candidate=candidate,
        baseline=BaselineProvenance(
            run=baseline.name,
            created_at=baseline.created_at,
            model=f"{baseline.model.backend}/{baseline.model.name}",
            prompt_sha=baseline.prompt.sha256[:12],
            cases_sha=baseline.cases_sha256[:12],
            age_days=0.0,
            source="artifact",
        ),
    )
    return render_comment(context)


def _wrap(text: str, width: int = 96) -> str:
    return textwrap.fill(text, width=width, break_on_hyphens=False)


def _framed(text: str) -> str:
    """A rendered comment between two rules, so it reads as a thing apart from the reports."""
    rule = "─" * 96
    return f"{rule}\n{text.rstrip()}\n{rule}\n"


def _demo_recap(
    summaries: dict[str, RunSummary],
    kind: str,
    reasons: list[str],
    shipped: str,
    repeats: int,
) -> list[str]:
    """The demo's closing lines (the README quotes them): the scores and the verdict."""
    scores = " → ".join(f"{v} {pct(summaries[v].accuracy.rate)}" for v in DEMO_VERSIONS)
    n = summaries[DEMO_VERSIONS[-1]].n
    lines = [
        "In short",
        f"  accuracy on {n} dev and regression cases: {scores}",
        f"  gate of {DEMO_VERSIONS[-1]} against a {shipped} baseline ({repeats} repeats): {kind}",
    ]
    for reason in reasons:
        lines.extend(
            textwrap.wrap(
                reason,
                width=96,
                initial_indent="    ",
                subsequent_indent="    ",
                break_on_hyphens=False,
            )
        )
    return lines


def demo_agent(ctx: Context) -> dict[str, object]:
    """The support-agent example: a baseline of v1 (two repeats, for the noise floor), then v2
    as a pull request would be gated on it, with the broken cases' two trajectories. Printed
    in text and Markdown; returned for the JSON document either way."""
    from evalgate.gate.decide import decide

    as_json = ctx.args.format == "json"

    with tempfile.TemporaryDirectory(prefix="evalgate-demo-") as tmp:
        folder = Path(tmp) / "support-agent"
        shutil.copytree(
            bundled_example("support-agent"), folder, ignore=shutil.ignore_patterns(STATE_DIR)
        )
        loaded = load_config(folder / DEFAULT_CONFIG)
        name, suite = loaded.suite(None)
        title = (
            "The support-agent example: an order-support agent with "
            f"{len(suite.tools)} tools, gated on the tools it calls (offline fake agent)"
        )
        (ctx.write(title + "\n", err=True) if as_json else ctx.print(f"\n{title}\n"))
        baseline = ctx.run_version(loaded, name, "v1", repeats=suite.gate.baseline_repeats)
        candidate = ctx.run_version(loaded, name, "v2")
        summary = summarise(candidate, price_as=price_as_for(loaded, candidate))
        verdict = decide(baseline, candidate, suite.gate)
        if not as_json:
            ctx.print(render_model("run", summary, ctx.args.format))
            ctx.print(_gate_report(ctx, name, baseline, verdict, summary))
        return {
            "suite": name,
            "tools": len(suite.tools),
            "baseline": {"version": "v1", "run": baseline.name, "repeats": baseline.repeats},
            "candidate": summary.model_dump(mode="json"),
            "verdict": verdict.model_dump(mode="json"),
        }


def add_parser(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    demo = sub.add_parser(
        "demo", parents=[common], help="run the bundled example on the offline fake model"
    )
    demo.add_argument(
        "--show",
        type=non_negative,
        default=10,
        help="cases listed per section (default: %(default)s)",
    )
    demo.set_defaults(func=cmd_demo)
