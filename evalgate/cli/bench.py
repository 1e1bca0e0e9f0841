"""The bench: run, report, list, compare, merge, and the bundled demo."""

from __future__ import annotations

import itertools
import shutil
import tempfile
import textwrap
from importlib import resources
from pathlib import Path
from typing import Any

from evalgate import __version__
from evalgate.cli.context import (
    EXIT_GATE_FAILED,
    EXIT_INCOMPLETE,
    EXIT_OK,
    Context,
    price_as_for,
)
from evalgate.cli.judge import demo_judge
from evalgate.compare import compare_runs
from evalgate.config import DEFAULT_CONFIG, LoadedConfig, load_config
from evalgate.errors import UserError
from evalgate.merge import merge_runs
from evalgate.pipeline import (
    DEFAULT_SPLITS,
)
from evalgate.report.html import render_compare_html, render_run_html
from evalgate.report.render import pct, render_model
from evalgate.runs import Run, find_run, iter_runs, save_run
from evalgate.summary import RunSummary, summarise

HTML_HELP = (
    "write the report as one self-contained HTML page (searchable, no network) to PATH and "
    "print only its path"
)


def cmd_run(ctx: Context) -> int:
    loaded = ctx.config()
    files = [Path(p) for p in ctx.args.cases] if ctx.args.cases else None
    splits = frozenset(ctx.args.split or DEFAULT_SPLITS)
    run = ctx.run_version(
        loaded,
        ctx.args.suite,
        ctx.args.version,
        repeats=ctx.args.repeats,
        limit=ctx.args.limit,
        case_files=files,
        splits=splits,
        shard=ctx.args.shard,
    )
    ctx.print(render_model("run", run_summary(ctx, loaded, run), ctx.args.format))
    if not ctx.args.no_save:
        path = save_run(run, loaded.state_dir)
        ctx.err.write(f"saved {run.name} to {path}\n")
    return run_exit(ctx, run)


def run_summary(ctx: Context, loaded: LoadedConfig, run: Run) -> RunSummary:
    show = getattr(ctx.args, "show", None)
    return summarise(run, price_as=price_as_for(loaded, run), show=10 if show is None else show)


def run_exit(ctx: Context, run: Run) -> int:
    """0, or EXIT_INCOMPLETE with a line on stderr saying why, for a run too broken to measure."""
    if not run.incomplete:
        return EXIT_OK
    why = (
        "it was interrupted"
        if run.interrupted
        else (
            f"{run.errors} of {len(run.cases)} cases errored (max_error_share "
            f"{run.max_error_share:g})"
        )
    )
    ctx.warn(f"the run is incomplete: {why}; see the errors listed above (exit {EXIT_INCOMPLETE})")
    return EXIT_INCOMPLETE


def write_html(ctx: Context, page: str) -> int:
    """Write an HTML report to --html PATH and print only its (absolute) path."""
    path = Path(ctx.args.html)
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise UserError(
            f"cannot write the HTML report: {exc.strerror or exc}",
            where=str(path),
            fix="pass --html a path in a folder that exists and that you can write to",
        ) from None
    ctx.out.write(f"{path.resolve()}\n")
    return EXIT_OK


def cmd_report(ctx: Context) -> int:
    loaded = ctx.config()
    run = find_run(ctx.args.run, loaded.state_dir)
    summary = run_summary(ctx, loaded, run)
    if getattr(ctx.args, "html", None):
        write_html(ctx, render_run_html(run, summary))
        return run_exit(ctx, run)
    ctx.print(render_model("run", summary, ctx.args.format))
    return run_exit(ctx, run)


def cmd_list(ctx: Context) -> int:
    loaded = ctx.config()
    rows: list[dict[str, Any]] = []
    for _, run in iter_runs(loaded.state_dir):
        s = summarise(run)
        rows.append(
            {
                "name": run.name,
                "prompt": run.prompt.name,
                "backend": run.model.backend,
                "model": run.model.name,
                "n": s.n,
                "accuracy": s.accuracy.rate,
                "format": s.format.rate,
                "errors": s.errors,
            }
        )
    if ctx.args.format == "json":
        import json

        ctx.print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        ctx.print(
            f"no saved runs in {loaded.state_dir / 'runs'} (make one with `evalgate run VERSION`)"
        )
        return EXIT_OK
    width = max(len(r["name"]) for r in rows)
    ctx.print(
        f"{'run':<{width}}  {'prompt':<8} {'backend':<9} {'model':<20} {'n':>5} {'accuracy':>8} {'format':>7} errors"
    )
    for r in rows:
        acc = "n/a" if r["accuracy"] is None else f"{100 * r['accuracy']:.1f}%"
        fmt = "n/a" if r["format"] is None else f"{100 * r['format']:.1f}%"
        ctx.print(
            f"{r['name']:<{width}}  {r['prompt']:<8} {r['backend']:<9} {r['model']:<20} "
            f"{r['n']:>5} {acc:>8} {fmt:>7} {r['errors']}"
        )
    return EXIT_OK


def cmd_compare(ctx: Context) -> int:
    loaded = ctx.config()
    a = find_run(ctx.args.a, loaded.state_dir)
    b = find_run(ctx.args.b, loaded.state_dir)
    comparison = compare_runs(a, b)
    if getattr(ctx.args, "html", None):
        page = render_compare_html(a, b, comparison, price_as=price_as_for(loaded, b))
        return write_html(ctx, page)
    ctx.print(render_model("compare", comparison, ctx.args.format, limit=ctx.args.show))
    return EXIT_OK


def cmd_merge(ctx: Context) -> int:
    loaded = ctx.config()
    merged = merge_runs([find_run(ref, loaded.state_dir) for ref in ctx.args.runs])
    if ctx.args.output:
        path = Path(ctx.args.output)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(merged.model_dump_json(indent=1), encoding="utf-8")
    else:
        path = save_run(merged, loaded.state_dir)
    ctx.err.write(f"merged {len(ctx.args.runs)} shards into {path}\n")
    ctx.print(render_model("run", run_summary(ctx, loaded, merged), ctx.args.format))
    return run_exit(ctx, merged)


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
    from evalgate.gate import decide
    from evalgate.report.comment import BaselineProvenance, CommentContext, render_comment
    from evalgate.report.plain import markdown_to_terminal

    fmt = ctx.args.format
    as_json = fmt == "json"

    def say(text: str = "") -> None:
        if as_json:
            ctx.err.write(text + "\n")
        else:
            ctx.print(text)

    with tempfile.TemporaryDirectory(prefix="evalgate-demo-") as tmp:
        folder = Path(tmp) / DEMO_SUITE
        shutil.copytree(bundled_example(), folder, ignore=shutil.ignore_patterns(".evalgate"))
        loaded = load_config(folder / DEFAULT_CONFIG)
        _, suite = loaded.suite(DEMO_SUITE)
        say(f"evalgate {__version__} demo: the bike-shop example on the offline fake model")
        say("(a copy in a temporary folder; nothing is written to your working tree)")
        say()
        say(f"1. Three prompt versions ({', '.join(DEMO_VERSIONS)}) over the same cases")
        say()
        runs: dict[str, Run] = {}
        summaries: dict[str, RunSummary] = {}
        for version in DEMO_VERSIONS:
            run = ctx.run_version(loaded, DEMO_SUITE, version)
            save_run(run, loaded.state_dir)
            runs[version] = run
            summaries[version] = summarise(run, price_as=suite.price_as, show=ctx.args.show)
            if not as_json:
                ctx.print(render_model("run", summaries[version], fmt))
                ctx.print()
        comparisons = [compare_runs(runs[a], runs[b]) for a, b in itertools.pairwise(DEMO_VERSIONS)]
        if not as_json:
            for comparison in comparisons:
                ctx.print(render_model("compare", comparison, fmt, limit=ctx.args.show))
                ctx.print()

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
            ctx.print(render_model("gate", verdict, fmt, limit=ctx.args.show))
        context = CommentContext(
            suite=DEMO_SUITE,
            verdict=verdict,
            candidate=summaries[proposed],
            baseline=BaselineProvenance(
                run=baseline.name,
                created_at=baseline.created_at,
                model=f"{baseline.model.backend}/{baseline.model.name}",
                prompt_sha=baseline.prompt.sha256[:12],
                cases_sha=baseline.cases_sha256[:12],
                age_days=0.0,
                # As a pull request meets it: the default branch's baseline artefact.
                source="artifact",
            ),
        )
        comment = render_comment(context)
        say()
        say("3. The comment the action would post on the pull request")
        say()
        if not as_json:
            ctx.print(comment if fmt == "markdown" else _framed(markdown_to_terminal(comment)))
            say("4. An agent suite, gated on the tools it calls")
            demo_agent(ctx)
            say()
            say("5. A judge, checked against people's labels before it may gate")
            demo_judge(ctx, folder)
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
        import json

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
            "why_tie": DEMO_WHY_TIE,
        }
        ctx.out.write(json.dumps(document, indent=2) + "\n")
    if verdict.kind == "fail":
        return EXIT_GATE_FAILED
    return EXIT_OK


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


def demo_agent(ctx: Context) -> None:
    """The support-agent example: a baseline of v1 (two repeats, for the noise floor), then v2
    as a pull request would be gated on it, with the broken cases' two trajectories."""
    from evalgate.gate import decide

    with tempfile.TemporaryDirectory(prefix="evalgate-demo-") as tmp:
        folder = Path(tmp) / "support-agent"
        shutil.copytree(
            bundled_example("support-agent"), folder, ignore=shutil.ignore_patterns(".evalgate")
        )
        loaded = load_config(folder / DEFAULT_CONFIG)
        name, suite = loaded.suite(None)
        ctx.print(
            "\nThe support-agent example: an order-support agent with "
            f"{len(suite.tools)} tools, gated on the tools it calls (offline fake agent)\n"
        )
        baseline = ctx.run_version(loaded, name, "v1", repeats=suite.gate.baseline_repeats)
        candidate = ctx.run_version(loaded, name, "v2")
        ctx.print(
            render_model(
                "run",
                summarise(candidate, price_as=price_as_for(loaded, candidate)),
                ctx.args.format,
            )
        )
        verdict = decide(baseline, candidate, suite.gate)
        ctx.print(render_model("gate", verdict, ctx.args.format, limit=ctx.args.show))
