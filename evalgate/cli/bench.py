"""The bench: run, report, list, compare, merge, and the bundled demo."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from evalgate import __version__
from evalgate.cli.context import (
    EXIT_OK,
    Context,
    execute_version,
    price_as_for,
)
from evalgate.compare import compare_runs
from evalgate.config import DEFAULT_CONFIG, load_config
from evalgate.errors import UserError
from evalgate.merge import merge_runs
from evalgate.pipeline import (
    DEFAULT_SPLITS,
)
from evalgate.report.html import render_compare_html, render_run_html
from evalgate.report.render import render_model
from evalgate.runs import find_run, iter_runs, save_run
from evalgate.summary import summarise

HTML_HELP = (
    "write the report as one self-contained HTML page (searchable, no network) to PATH and "
    "print only its path"
)


def cmd_run(ctx: Context) -> int:
    loaded = ctx.config()
    files = [Path(p) for p in ctx.args.cases] if ctx.args.cases else None
    splits = frozenset(ctx.args.split or DEFAULT_SPLITS)
    run = execute_version(
        ctx,
        loaded,
        ctx.args.suite,
        ctx.args.version,
        repeats=ctx.args.repeats,
        limit=ctx.args.limit,
        case_files=files,
        splits=splits,
        shard=ctx.args.shard,
    )
    ctx.print(
        render_model("run", summarise(run, price_as=price_as_for(loaded, run)), ctx.args.format)
    )
    if not ctx.args.no_save:
        path = save_run(run, loaded.state_dir)
        ctx.err.write(f"saved {run.name} to {path}\n")
    return EXIT_OK


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
    summary = summarise(run, price_as=price_as_for(loaded, run))
    if getattr(ctx.args, "html", None):
        return write_html(ctx, render_run_html(run, summary))
    ctx.print(render_model("run", summary, ctx.args.format))
    return EXIT_OK


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
    ctx.print(
        render_model(
            "run", summarise(merged, price_as=price_as_for(loaded, merged)), ctx.args.format
        )
    )
    return EXIT_OK


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


def cmd_demo(ctx: Context) -> int:
    with tempfile.TemporaryDirectory(prefix="evalgate-demo-") as tmp:
        folder = Path(tmp) / "bike-shop"
        shutil.copytree(bundled_example(), folder, ignore=shutil.ignore_patterns(".evalgate"))
        loaded = load_config(folder / DEFAULT_CONFIG)
        ctx.print(f"evalgate {__version__} demo: the bike-shop example on the offline fake model")
        ctx.print("(a copy in a temporary folder; nothing is written to your working tree)\n")
        runs = []
        for version in ("v1", "v2", "v3"):
            run = execute_version(ctx, loaded, "bike-shop", version)
            save_run(run, loaded.state_dir)
            runs.append(run)
            ctx.print(
                render_model(
                    "run", summarise(run, price_as=price_as_for(loaded, run)), ctx.args.format
                )
            )
        for a, b in itertools.pairwise(runs):
            ctx.print(
                render_model("compare", compare_runs(a, b), ctx.args.format, limit=ctx.args.show)
            )
    demo_agent(ctx)
    ctx.print(
        "Next: copy examples/bike-shop (or examples/support-agent for an agent), point "
        "evalgate.yml at your prompts and cases, and run `evalgate run VERSION`."
    )
    return EXIT_OK


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
        baseline = execute_version(ctx, loaded, name, "v1", repeats=suite.gate.baseline_repeats)
        candidate = execute_version(ctx, loaded, name, "v2")
        ctx.print(
            render_model(
                "run",
                summarise(candidate, price_as=price_as_for(loaded, candidate)),
                ctx.args.format,
            )
        )
        verdict = decide(baseline, candidate, suite.gate)
        ctx.print(render_model("gate", verdict, ctx.args.format, limit=ctx.args.show))
