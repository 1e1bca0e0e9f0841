"""The composition root: reads argv and the environment, builds the real backend and clients,
calls the pipeline, prints, and maps errors to exit codes (0 ok, 1 failed gate, 2 user error).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from evalgate import __version__, doctor, onboard
from evalgate.audit import audit
from evalgate.backends.base import Backend, BackendContext, backend_class
from evalgate.backends.batch import BatchRunner
from evalgate.cache import ResponseCache
from evalgate.cases import SPLITS, CaseSet, hash_cases, load_case_file
from evalgate.compare import compare_runs
from evalgate.config import DEFAULT_CONFIG, LoadedConfig, ModelSettings, Suite, load_config
from evalgate.errors import EvalgateError, RunFileError, UserError
from evalgate.gate import SequentialMonitor, decide
from evalgate.holdout import (
    LedgerRecord,
    SecretKey,
    append_ledger,
    keygen,
    load_public_key,
    load_secret_key,
    open_sealed,
    read_ledger,
    reads_of,
    seal,
    sealed_lines,
)
from evalgate.importers import FORMATS
from evalgate.merge import merge_runs
from evalgate.noise import measure_noise
from evalgate.pipeline import (
    DEFAULT_SPLITS,
    Prompt,
    RunSpec,
    load_prompt,
    load_suite_cases,
    run_suite,
)
from evalgate.progress import ProgressPrinter
from evalgate.release import make_record, read_releases, release_report, write_release
from evalgate.report.html import render_compare_html, render_run_html
from evalgate.report.render import render, render_model
from evalgate.runs import Run, find_run, iter_runs, save_run
from evalgate.split import check_split
from evalgate.summary import summarise
from evalgate.terminal import colourise, wants_colour

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2
HTML_HELP = (
    "write the report as one self-contained HTML page (searchable, no network) to PATH and "
    "print only its path"
)
IMPORT_SCORERS = ("exact", "contains", "regex", "json_schema", "judge", "label", "python")


class Context:
    """What every command receives: parsed args, streams, and the environment, read once here."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.env = dict(os.environ)

    def config(self) -> LoadedConfig:
        return load_config(Path(self.args.config))

    def print(self, text: str = "") -> None:
        if getattr(self.args, "format", "text") == "text" and wants_colour(self.out, self.env):
            text = colourise(text)
        self.out.write(text if text.endswith("\n") else text + "\n")

    def warn(self, text: str) -> None:
        line = f"warning: {text}"
        self.err.write((colourise(line) if wants_colour(self.err, self.env) else line) + "\n")


def git_info(folder: Path) -> tuple[str | None, str | None]:
    """The commit and ref of the repository holding ``folder``, or (None, None)."""

    def git(*argv: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *argv], cwd=folder, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() or None if done.returncode == 0 else None

    return git("rev-parse", "HEAD"), git("rev-parse", "--abbrev-ref", "HEAD")


def build_backend(ctx: Context, loaded: LoadedConfig, settings: ModelSettings) -> Backend:
    cls = backend_class(settings.backend)
    instance: Backend = cls(settings, BackendContext(base_dir=loaded.root, env=ctx.env))
    return instance


def execute_version(
    ctx: Context,
    loaded: LoadedConfig,
    suite_name: str,
    version: str,
    *,
    repeats: int = 1,
    limit: int | None = None,
    case_files: list[Path] | None = None,
    splits: frozenset[str] = DEFAULT_SPLITS,
    purpose: str = "run",
    prompt: Prompt | None = None,
    shard: tuple[int, int] | None = None,
    early_stop_against: Run | None = None,
) -> Run:
    """Run one prompt version (or the given prompt text) of a suite; record holdout reads."""
    name, suite = loaded.suite(suite_name)
    prompt = prompt or load_prompt(loaded, suite, version)
    secret = holdout_secret(ctx, suite) if "holdout" in splits else None
    cases = load_suite_cases(loaded, suite, case_files, holdout_secret=secret, on_note=ctx.warn)
    commit, ref = git_info(loaded.root)
    backend = build_backend(ctx, loaded, suite.model)
    spec = RunSpec(
        suite_name=name,
        suite=suite,
        prompt=prompt,
        cases=cases,
        repeats=repeats,
        limit=limit,
        concurrency=getattr(ctx.args, "concurrency", None),
        git_commit=commit,
        git_ref=ref,
        splits=splits,
        shard=shard,
    )
    verbose = getattr(ctx.args, "verbose", False)
    interactive = ctx.err.isatty() and not ctx.env.get("CI")
    printer = ProgressPrinter(ctx.err, interactive=interactive)
    cache = None
    if getattr(ctx.args, "cache", None) is True or (
        getattr(ctx.args, "cache", None) is None and ctx.env.get("CI", "").lower() in ("1", "true")
    ):
        cache = ResponseCache(loaded.state_dir / "cache")
    stop_when = None
    if early_stop_against is not None:
        monitor = SequentialMonitor(
            early_stop_against, {c.id: c.hash for c in cases.cases}, suite.gate
        )
        stop_when = lambda job, outcome: monitor.observe(  # noqa: E731
            job.case_id, None if outcome.error else outcome.score
        )
    batch = None
    if getattr(ctx.args, "batch", False) or getattr(backend, "batch_by_default", False):
        batch = BatchRunner.for_backend(
            backend,
            loaded.state_dir / "batches",
            concurrency=spec.concurrency or suite.concurrency,
            on_status=lambda text: ctx.err.write(text + "\n"),
        )
        cache = None  # a batch is sent whole: nothing is looked up
    judge = None
    if suite.scorer.kind == "judge":
        judge = build_backend(ctx, loaded, suite.scorer.model)
    try:
        run = run_suite(
            spec,
            backend,
            loaded.root,
            cache=cache,
            on_progress=None if verbose else printer,
            judge=judge,
            stop_when=stop_when,
            batch=batch,
        )
    finally:
        for used in (backend, judge):
            close = getattr(used, "close", None)
            if close is not None:
                close()
    if cache is not None and repeats == 1:
        ctx.err.write(f"cache: {cache.hits} hits, {cache.misses} misses\n")
    if "holdout" in splits:
        holdout = [c for c in run.cases if c.split == "holdout"]
        scored = [c.score or 0.0 for c in holdout if c.error is None]
        reads = append_ledger(
            ledger_path(loaded),
            LedgerRecord(
                time=run.created_at,
                git_ref=ctx.env.get("GITHUB_REF") or ref,
                git_commit=commit,
                prompt=prompt.name,
                prompt_sha256=prompt.sha256,
                holdout_sha256=holdout_sha(cases),
                score=sum(scored) / len(scored) if scored else None,
                n=len(scored),
                purpose=purpose,
                forced_reason=getattr(ctx.args, "force_reason", None),
            ),
        )
        ctx.err.write(f"holdout read recorded in the ledger ({reads} reads of this holdout)\n")
    if verbose:
        for case in run.cases:
            mark = "ERROR" if case.error else ("ok   " if case.passed else "WRONG")
            detail = case.error or f"expected {case.expected}, answered {case.answer}"
            ctx.print(f"{mark} {case.id}: {detail}")
    return run


HOLDOUT_KEY_VARIABLE = "EVALGATE_HOLDOUT_KEY"


def holdout_secret(ctx: Context, suite: Suite) -> SecretKey | None:
    """The sealed holdout's secret key, when the suite seals its holdout."""
    if suite.sealed_holdout is None:
        return None
    text = ctx.env.get(HOLDOUT_KEY_VARIABLE, "")
    if not text:
        raise UserError(
            f"this suite's holdout is sealed and {HOLDOUT_KEY_VARIABLE} is not set",
            fix="run release jobs in the protected environment that holds the key",
        )
    return load_secret_key(text)


def ledger_path(loaded: LoadedConfig) -> Path:
    return loaded.state_dir / "holdout-ledger.jsonl"


def holdout_sha(cases: CaseSet) -> str:
    return hash_cases(c for c in cases.cases if c.split == "holdout")


def _price_as(loaded: LoadedConfig, run: Run) -> str | None:
    suite = loaded.config.suites.get(run.suite)
    return suite.price_as if suite else None


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
    ctx.print(render_model("run", summarise(run, price_as=_price_as(loaded, run)), ctx.args.format))
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
    summary = summarise(run, price_as=_price_as(loaded, run))
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
        page = render_compare_html(a, b, comparison, price_as=_price_as(loaded, b))
        return write_html(ctx, page)
    ctx.print(render_model("compare", comparison, ctx.args.format, limit=ctx.args.show))
    return EXIT_OK


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


def cmd_gate(ctx: Context) -> int:
    loaded = ctx.config()
    baseline = find_run(ctx.args.baseline, loaded.state_dir)
    name, suite = loaded.suite(ctx.args.suite or baseline.suite)
    ref = ctx.args.candidate
    try:
        candidate = find_run(ref, loaded.state_dir)
    except RunFileError:
        versions = loaded.prompt_files(suite)
        if ref not in versions:
            raise
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
            candidate=summarise(candidate, price_as=_price_as(loaded, candidate)),
            baseline=BaselineProvenance(run=baseline.name, source="local"),
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


def cmd_split(ctx: Context) -> int:
    loaded = ctx.config()
    name, suite = loaded.suite(ctx.args.suite)
    # A sealed holdout is counted and checked only where its key is (it is not in the files).
    secret = None
    if suite.sealed_holdout is not None:
        if ctx.env.get(HOLDOUT_KEY_VARIABLE):
            secret = holdout_secret(ctx, suite)
        else:
            ctx.warn(
                f"the sealed holdout is left out: set {HOLDOUT_KEY_VARIABLE} to count it and "
                "check it for leaks"
            )
    cases = load_suite_cases(loaded, suite, holdout_secret=secret, on_note=ctx.warn)
    report = check_split(cases.cases, suite.split, suite.fields)
    if ctx.args.format == "json":
        ctx.print(report.model_dump_json(indent=2))
    else:
        ctx.print(render("split.txt.j2", s=report, suite=name, policy=suite.split))
    if ctx.args.apply:
        written = apply_splits(loaded, suite, cases)
        ctx.err.write(f"wrote the split of {written} cases into the case files\n")
    return EXIT_GATE_FAILED if report.leaks else EXIT_OK


def apply_splits(loaded: LoadedConfig, suite: Suite, cases: CaseSet) -> int:
    """Write each case's assigned split into its JSONL file (other formats are refused)."""
    field = suite.fields.split
    if field is None:
        raise UserError("fields.split is null, so there is no field to write the split into")
    if suite.cases_format != "evalgate":
        raise UserError(
            f"--apply writes evalgate case files; these are read as {suite.cases_format}",
            fix=f"convert them with `evalgate import {suite.cases_format} FILE` first",
        )
    by_source = {c.source: c.split for c in cases.cases}
    written = 0
    for path in loaded.expand(suite.cases, "case file"):
        if path.suffix.lower() not in (".jsonl", ".ndjson"):
            raise UserError(
                "--apply rewrites JSONL case files only", where=str(path), fix="convert it to JSONL"
            )
        lines = path.read_text(encoding="utf-8").split("\n")
        out = []
        for number, line in enumerate(lines, start=1):
            split = by_source.get(f"{path}:{number}")
            if split is not None and line.strip():
                record = json.loads(line)
                if record.get(field) != split:
                    record[field] = split
                    written += 1
                line = json.dumps(record, ensure_ascii=False)
            out.append(line)
        path.write_text("\n".join(out), encoding="utf-8")
    return written


def cmd_holdout(ctx: Context) -> int:
    loaded = ctx.config()
    _, suite = loaded.suite(ctx.args.suite)
    sealed = suite.sealed_holdout
    action = ctx.args.holdout_command
    if action == "keygen":
        secret, public = keygen()
        target = loaded.root / (sealed.public_key if sealed else "holdout.pub")
        if target.exists() and not ctx.args.force:
            raise UserError(
                f"{target} exists",
                fix="pass --force to replace it (old sealed cases stay sealed to the old key)",
            )
        target.write_text(public, encoding="utf-8")
        ctx.print(f"public key written to {target} (commit it)")
        ctx.print(
            f"secret key (store it as the {HOLDOUT_KEY_VARIABLE} secret of a protected "
            "environment; it is not saved anywhere):"
        )
        ctx.print(secret)
        return EXIT_OK
    if sealed is None:
        raise UserError(
            "this suite has no sealed holdout",
            where=str(loaded.path),
            fix="add `sealed_holdout: {file: holdout.sealed.jsonl, public_key: holdout.pub}`",
        )
    store = loaded.root / sealed.file
    if action == "add":
        public_path = loaded.root / sealed.public_key
        if not public_path.is_file():
            raise UserError(
                "the holdout public key does not exist",
                where=str(public_path),
                fix="make one with `evalgate holdout keygen` and commit it",
            )
        recipient = load_public_key(public_path.read_text(encoding="utf-8"))
        added = load_case_file(Path(ctx.args.file), suite.fields)
        with store.open("a", encoding="utf-8") as handle:
            for case in added:
                record = json.loads(json.dumps(_raw_record(Path(ctx.args.file), case.source)))
                handle.write(seal(record, recipient) + "\n")
        ctx.print(f"sealed {len(added)} cases into {store}; delete {ctx.args.file} now")
        return EXIT_OK
    if action == "list":
        count = len(sealed_lines(store))
        text = ctx.env.get(HOLDOUT_KEY_VARIABLE)
        ctx.print(f"{count} sealed holdout cases in {store}")
        if text:
            records = open_sealed(store, load_secret_key(text))
            field = suite.fields.category
            per = Counter(str(r.get(field)) if field else "(none)" for _, r in records)
            for category, n in sorted(per.items()):
                ctx.print(f"  {category}: {n}")
        return EXIT_OK
    # retire: move leaked cases to the regression split, in a plain file.
    if suite.fields.split is None:
        raise UserError(
            "fields.split is null, so a retired case could not be marked regression and would be "
            "hashed onto a side again",
            fix="map fields.split (e.g. split: split) before retiring cases",
        )
    key = holdout_secret(ctx, suite)
    assert key is not None
    wanted = set(ctx.args.ids)
    keep: list[tuple[str, dict[str, Any]]] = []
    retired: list[tuple[str, dict[str, Any]]] = []
    for (_, line), (_, record) in zip(sealed_lines(store), open_sealed(store, key), strict=True):
        (retired if str(record.get(suite.fields.id)) in wanted else keep).append((line, record))
    missing = wanted - {str(r.get(suite.fields.id)) for _, r in retired}
    if missing:
        raise UserError(f"no sealed case with id {sorted(missing)[0]!r}")
    target = Path(ctx.args.to)
    with target.open("a", encoding="utf-8") as handle:
        for _, record in retired:
            if suite.fields.split:
                record[suite.fields.split] = "regression"
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    store.write_text("".join(line + "\n" for line, _ in keep), encoding="utf-8")
    ctx.print(
        f"retired {len(retired)} cases to {target} as regression cases; make sure the "
        "config's cases include it"
    )
    return EXIT_OK


def _raw_record(path: Path, source: str) -> Any:
    number = int(source.rsplit(":", 1)[1])
    if path.suffix.lower() in (".yml", ".yaml"):
        raise UserError("holdout add takes JSONL", where=str(path))
    return json.loads(path.read_text(encoding="utf-8").split("\n")[number - 1])


def cmd_import(ctx: Context) -> int:
    """Convert another tool's case file to evalgate JSONL, with a summary of what mapped."""
    from pydantic import TypeAdapter

    from evalgate.config import Fields, ScorerConfig
    from evalgate.importers import convert, validate
    from evalgate.importers.output import (
        config_snippet,
        jsonl,
        render_text,
        report_of,
        unscored_path,
    )
    from evalgate.scorers.base import needs_expected

    args = ctx.args
    to_stdout = args.out == "-"
    if args.config_snippet and to_stdout:
        raise UserError(
            "--config-snippet names the case file in the snippet, so it needs --out FILE",
            fix="pass --out cases.jsonl",
        )
    source = Path(args.file)
    conversion = convert(args.source_format, source, scorer_kind=args.scorer)
    scorer = TypeAdapter(ScorerConfig).validate_python(conversion.plan.config)
    validate(conversion, Fields(input=conversion.inputs), need_expected=needs_expected(scorer))
    out = None if to_stdout else Path(args.out)
    side = unscored_path(out) if out is not None else None
    written = [p for p in (out, side if conversion.unscored else None) if p is not None]
    for path in written:
        if path.exists() and not args.force:
            raise UserError(f"{path} exists", fix="pass --force to replace it, or choose --out")
    snippet = None
    if args.config_snippet:
        snippet = config_snippet(conversion, args.out, args.suite or "main", args.file)
    report = report_of(
        conversion, None if to_stdout else args.out, str(side) if side else None, snippet
    )
    text = report.model_dump_json(indent=2) + "\n" if args.format == "json" else render_text(report)
    if out is None:
        ctx.out.write(jsonl(conversion.records))
        ctx.err.write(text)
        return EXIT_OK
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(jsonl(conversion.records), encoding="utf-8")
    if side is not None and conversion.unscored:
        side.write_text(jsonl(conversion.unscored), encoding="utf-8")
    if snippet is not None and args.format != "json":
        # The snippet is what stdout is for (`> evalgate.yml`); the summary goes to stderr.
        ctx.out.write(snippet)
        ctx.err.write(text)
    else:
        ctx.out.write(text)
    return EXIT_OK


def cmd_release(ctx: Context) -> int:
    loaded = ctx.config()
    name, suite = loaded.suite(ctx.args.suite)
    history_dir = loaded.state_dir / "releases"
    history = read_releases(history_dir)
    tag = ctx.args.name or ctx.env.get("GITHUB_REF_NAME") or ctx.args.version
    ledger = read_ledger(ledger_path(loaded))
    cases = load_suite_cases(loaded, suite, holdout_secret=holdout_secret(ctx, suite))
    reads_so_far = reads_of(ledger, holdout_sha(cases))
    if reads_so_far >= suite.split.read_budget and not ctx.args.force_reason:
        ctx.warn(
            f"this holdout has been read {reads_so_far} times (budget {suite.split.read_budget})"
        )
    run = execute_version(
        ctx, loaded, name, ctx.args.version, splits=frozenset(SPLITS), purpose="release"
    )
    if not ctx.args.no_save:
        save_run(run, loaded.state_dir)
    record = make_record(tag, run, run.created_at, holdout_sha(cases))
    reads = reads_of(read_ledger(ledger_path(loaded)), record.holdout_sha256)
    report = release_report(record, history, gate=suite.gate, split=suite.split, reads=reads)
    if not ctx.args.no_save:
        write_release(history_dir, record)
    fmt = ctx.args.format
    if fmt == "json":
        ctx.print(report.model_dump_json(indent=2))
    else:
        ctx.print(render("release.md.j2" if fmt == "markdown" else "release.txt.j2", s=report))
    return EXIT_GATE_FAILED if report.kind == "fail" else EXIT_OK


def cmd_action(ctx: Context) -> int:
    from evalgate.action import action

    return action(ctx.env, ctx.out, ctx.err)


def cmd_baseline_pull(ctx: Context) -> int:
    """Fetch the default branch's baseline artefact, as the pull-request gate does."""
    from evalgate import github as gh

    token = ctx.env.get("GITHUB_TOKEN") or ctx.env.get("GH_TOKEN")
    if not token:
        raise UserError(
            "baseline pull needs a token to read workflow artefacts",
            fix="set GITHUB_TOKEN (a token with actions: read on the repository)",
        )
    api = ctx.env.get("GITHUB_API_URL", "https://api.github.com")
    repo = gh.get_repository(gh.connect(token, api), ctx.args.repo)
    branch = ctx.args.branch or repo.default_branch
    ref = gh.find_baseline(repo, ctx.args.artifact, branch, prefer_sha=ctx.args.sha)
    if ref is None:
        raise UserError(
            f"no unexpired {ctx.args.artifact!r} artefact from a push to {branch}",
            fix="run the baseline job on the default branch (or wait for its weekly run)",
        )
    out = Path(ctx.args.out)
    folder = gh.download_artifact(ref, token, out)
    ctx.print(f"baseline from {ref.head_sha[:12]} ({ref.created_at:%Y-%m-%d}, run {ref.html_url})")
    for path in sorted(folder.glob("*.json")):
        # One file per suite, where `evalgate gate --baseline` finds it.
        shutil.copy(path, out / path.name)
        ctx.print(f"  {out / path.name}")
    return EXIT_OK


def cmd_audit(ctx: Context) -> int:
    loaded = ctx.config()
    name, suite = loaded.suite(ctx.args.suite)
    cases = load_suite_cases(loaded, suite, holdout_secret=holdout_secret(ctx, suite))
    reads = reads_of(read_ledger(ledger_path(loaded)), holdout_sha(cases))
    if reads + 2 > suite.split.read_budget and not ctx.args.force_reason:
        raise UserError(
            f"the holdout has been read {reads} times; an audit reads it twice more, past the "
            f"budget of {suite.split.read_budget}",
            fix='pass --force-reason "why" (kept in the ledger), or add fresh holdout cases',
        )
    holdout_only = frozenset({"holdout"})
    runs = [
        execute_version(ctx, loaded, name, version, splits=holdout_only, purpose="audit")
        for version in (ctx.args.candidate, ctx.args.baseline)
    ]
    report = audit(
        runs[0],
        runs[1],
        fitted_score=ctx.args.fitted_score,
        baseline_fitted_score=ctx.args.baseline_fitted_score,
        searched=ctx.args.searched,
        tuning_cases=ctx.args.tuning_cases,
        per_case_sd=ctx.args.per_case_sd,
        alpha=suite.gate.alpha,
        seed=suite.gate.seed,
    )
    fmt = ctx.args.format
    if fmt == "json":
        ctx.print(report.model_dump_json(indent=2))
    else:
        ctx.print(render("audit.md.j2" if fmt == "markdown" else "audit.txt.j2", s=report))
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
        render_model("run", summarise(merged, price_as=_price_as(loaded, merged)), ctx.args.format)
    )
    return EXIT_OK


def _shard(text: str) -> tuple[int, int]:
    index, _, total = text.partition("/")
    try:
        i, n = int(index), int(total)
    except ValueError:
        raise argparse.ArgumentTypeError("write it as i/N, e.g. 2/4") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError("needs 1 <= i <= N")
    return i, n


def completion_script(parser: argparse.ArgumentParser) -> str:
    """A bash completion script for every subcommand and its options, built from the parser."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    cases = []
    for name, child in sub.choices.items():
        words = sorted(
            {o for a in child._actions for o in a.option_strings}
            | (set(nested.choices) if (nested := _subparsers(child)) else set())
        )
        cases.append(f'    {name}) words="{" ".join(words)}" ;;')
    commands = " ".join(sub.choices)
    body = "\n".join(cases)
    return (
        '# bash completion for evalgate: eval "$(evalgate completion)"\n'
        "_evalgate() {\n"
        '  local cur="${COMP_WORDS[COMP_CWORD]}" words\n'
        '  if [ "$COMP_CWORD" -eq 1 ]; then\n'
        f'    COMPREPLY=($(compgen -W "{commands} --help --version" -- "$cur")); return\n'
        "  fi\n"
        '  case "${COMP_WORDS[1]}" in\n'
        f"{body}\n"
        "  esac\n"
        '  COMPREPLY=($(compgen -W "$words" -f -- "$cur"))\n'
        "}\n"
        "complete -F _evalgate evalgate\n"
    )


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def cmd_completion(ctx: Context) -> int:
    ctx.out.write(completion_script(build_parser()))
    return EXIT_OK


def cmd_init(ctx: Context) -> int:
    """Write evalgate.yml, the workflow and starter files; ask on a terminal unless --yes."""
    args = ctx.args
    repo = Path(args.dir)
    if not repo.is_dir():
        raise UserError(f"{repo} is not a folder", fix="pass --dir with the repository's root")

    def ask(question: str) -> str:
        ctx.err.write(question)
        ctx.err.flush()
        try:
            return input()
        except EOFError:
            raise UserError("no answer (end of input)", fix="pass --yes for the defaults") from None

    interactive = not args.yes and sys.stdin.isatty()
    given = onboard.InitOptions(
        prompts=args.prompts,
        cases=args.cases,
        backend=args.backend,
        model=args.model,
        scorer=args.scorer,
        field=args.field,
        command=args.command,
        suite=args.suite,
        branch=args.branch,
    )
    plan = onboard.plan_init(repo, repo / args.config, given, ask if interactive else None)
    result = onboard.write_init(plan, force=args.force, cwd=Path.cwd())
    ctx.print(onboard.render_init(result, args.format))
    return EXIT_OK


def cmd_doctor(ctx: Context) -> int:
    repo = Path(ctx.args.dir)
    report = doctor.doctor(repo, repo / ctx.args.config, ctx.args.suite)
    ctx.print(doctor.render_doctor(report, ctx.args.format))
    return EXIT_GATE_FAILED if report.failed else EXIT_OK


def bundled_example() -> Path:
    """The bike-shop example: shipped inside the package, or beside it in a source checkout."""
    packaged = resources.files("evalgate").joinpath("bundled/bike-shop")
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[1] / "examples" / "bike-shop"
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
                    "run", summarise(run, price_as=_price_as(loaded, run)), ctx.args.format
                )
            )
        for a, b in itertools.pairwise(runs):
            ctx.print(
                render_model("compare", compare_runs(a, b), ctx.args.format, limit=ctx.args.show)
            )
    ctx.print(
        "Next: copy examples/bike-shop, point evalgate.yml at your prompts and cases, "
        "and run `evalgate run VERSION`."
    )
    return EXIT_OK


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _at_least_two(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError("needs at least 2 repeats to see flips")
    return value


BATCH_HELP = (
    "send every call through the Message Batches API: half the price, answers within 24 hours; "
    "a restarted job resumes polling the same batch (also: model.options.batch)"
)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        default=argparse.SUPPRESS,
        help="same as --format json, for scripting",
    )
    common.add_argument(
        "--config", default=DEFAULT_CONFIG, help="path of evalgate.yml (default: %(default)s)"
    )
    common.add_argument(
        "--suite", default=None, help="suite name (needed when the config has several)"
    )
    common.add_argument(
        "--format", choices=["text", "markdown", "json"], default="text", help="output format"
    )

    parser = argparse.ArgumentParser(
        prog="evalgate",
        description="Run prompt versions over labelled cases, compare runs case by case, and gate changes.",
        epilog="Exit codes: 0 ok, 1 a failed gate, 2 a usage or input error.",
    )
    parser.add_argument("--version", action="version", version=f"evalgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo", parents=[common], help="run the bundled example on the offline fake model"
    )
    demo.add_argument(
        "--show", type=int, default=10, help="cases listed per section (default: %(default)s)"
    )
    demo.set_defaults(func=cmd_demo)

    run = sub.add_parser(
        "run", parents=[common], help="run one prompt version over the suite's cases"
    )
    run.add_argument("version", help="prompt version (the prompt file's stem)")
    run.add_argument("--limit", type=_positive, help="only the first N cases")
    run.add_argument("--no-save", action="store_true", help="do not save the run")
    run.add_argument("-v", "--verbose", action="store_true", help="print each case as it is scored")
    run.add_argument(
        "--cases",
        action="append",
        metavar="FILE",
        help="case file instead of the config's (repeatable)",
    )
    run.add_argument(
        "--repeats", type=_positive, default=1, help="send each case K times (default: 1)"
    )
    run.add_argument(
        "--concurrency", type=_positive, help="calls in flight (default: the suite's, 16)"
    )
    run.add_argument(
        "--shard", type=_shard, help="run the i-th of N stable slices (by case id hash), e.g. 2/4"
    )
    run.add_argument(
        "--split",
        action="append",
        choices=["dev", "holdout", "regression"],
        help="splits to run (repeatable; default: dev and regression; a holdout read is "
        "recorded in the ledger)",
    )
    run.add_argument(
        "--cache",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="reuse cached replies (default: on when CI is set; always off with --repeats)",
    )
    run.add_argument("--batch", action="store_true", help=BATCH_HELP)
    run.set_defaults(func=cmd_run)

    noise = sub.add_parser(
        "noise", parents=[common], help="measure the noise floor: one prompt, R repeats"
    )
    noise.add_argument("version", help="prompt version")
    noise.add_argument("--repeats", type=_at_least_two, default=2, help="R >= 2 (default: 2)")
    noise.add_argument("--no-save", action="store_true", help="do not save the run")
    noise.add_argument("--concurrency", type=_positive, help="calls in flight")
    noise.add_argument("--batch", action="store_true", help=BATCH_HELP)
    noise.add_argument("--show", type=int, default=20, help="unstable cases listed")
    noise.set_defaults(func=cmd_noise, verbose=False)

    gate = sub.add_parser(
        "gate", parents=[common], help="decide pass / fail / inconclusive against a baseline"
    )
    gate.add_argument("--baseline", required=True, help="baseline run (name, prefix, path)")
    gate.add_argument(
        "--candidate",
        required=True,
        help="candidate run, or a prompt version to run now",
    )
    gate.add_argument("--no-save", action="store_true", help="do not save a candidate run")
    gate.add_argument(
        "--early-stop",
        action="store_true",
        help="stop running the candidate once a fail is certain (anytime-valid sequential test)",
    )
    gate.add_argument("--show", type=int, default=20, help="cases listed per section")
    gate.add_argument("--concurrency", type=_positive, help="calls in flight")
    gate.set_defaults(func=cmd_gate, verbose=False, cache=None)

    split = sub.add_parser(
        "split", parents=[common], help="dev / holdout / regression counts and leak checks"
    )
    split.add_argument("--apply", action="store_true", help="write the split into the case files")
    split.set_defaults(func=cmd_split)

    holdout = sub.add_parser("holdout", parents=[common], help="the sealed holdout")
    hsub = holdout.add_subparsers(dest="holdout_command", required=True, metavar="ACTION")
    keygen_ = hsub.add_parser("keygen", parents=[common], help="make a key pair")
    keygen_.add_argument("--force", action="store_true", help="replace an existing public key")
    add = hsub.add_parser("add", parents=[common], help="seal cases with the public key")
    add.add_argument("file", help="JSONL file of new holdout cases")
    hsub.add_parser("list", parents=[common], help="count sealed cases (by category with the key)")
    retire = hsub.add_parser("retire", parents=[common], help="move leaked cases to regression")
    retire.add_argument("ids", nargs="+", help="case ids to retire")
    retire.add_argument("--to", default="regression.jsonl", help="plain case file to append to")
    holdout.set_defaults(func=cmd_holdout)

    release = sub.add_parser(
        "release", parents=[common], help="score dev and holdout, report the gap, gate the release"
    )
    release.add_argument("version", help="prompt version being released")
    release.add_argument("--name", help="release name (default: GITHUB_REF_NAME or the version)")
    release.add_argument("--no-save", action="store_true", help="do not save the run or record")
    release.add_argument("--concurrency", type=_positive, help="calls in flight")
    release.add_argument(
        "--force-reason", help="read the holdout past its budget; the reason goes in the ledger"
    )
    release.set_defaults(func=cmd_release, verbose=False, cache=False)

    audit_ = sub.add_parser(
        "audit", parents=[common], help="a searched prompt's held-out score beside its fitted one"
    )
    audit_.add_argument("candidate", help="the searched prompt version")
    audit_.add_argument("--baseline", required=True, help="the prompt version it replaces")
    audit_.add_argument("--fitted-score", type=float, help="the score the search reported")
    audit_.add_argument("--baseline-fitted-score", type=float, help="the baseline's tuning score")
    audit_.add_argument("--searched", type=_positive, help="how many candidates were tried")
    audit_.add_argument("--tuning-cases", type=_positive, help="cases the search selected on")
    audit_.add_argument(
        "--per-case-sd", type=float, help="per-case SD of scores (default: measured)"
    )
    audit_.add_argument(
        "--force-reason", help="read past the budget; the reason goes in the ledger"
    )
    audit_.add_argument("--concurrency", type=_positive, help="calls in flight")
    audit_.set_defaults(func=cmd_audit, verbose=False, cache=False)

    action_ = sub.add_parser(
        "action", help="the GitHub Action's entry point (inside its container)"
    )
    action_.set_defaults(func=cmd_action)

    baseline = sub.add_parser("baseline", help="baseline artefacts of the default branch")
    bsub = baseline.add_subparsers(dest="baseline_command", required=True, metavar="ACTION")
    pull = bsub.add_parser("pull", parents=[common], help="download the newest baseline artefact")
    pull.add_argument("--repo", required=True, help="OWNER/NAME")
    pull.add_argument("--artifact", default="evalgate-baseline", help="artefact name")
    pull.add_argument("--branch", help="default branch (default: the repository's)")
    pull.add_argument("--sha", help="prefer the baseline built at this commit (the merge base)")
    pull.add_argument("--out", default=".evalgate/baseline", help="folder to extract into")
    pull.set_defaults(func=cmd_baseline_pull)

    merge = sub.add_parser("merge", parents=[common], help="combine shard runs into one run")
    merge.add_argument("runs", nargs="+", help="the shard runs (names, prefixes or paths)")
    merge.add_argument("--output", help="write the merged run here instead of the runs folder")
    merge.set_defaults(func=cmd_merge)

    init = sub.add_parser(
        "init",
        parents=[common],
        help="set a repository up: evalgate.yml, the workflow, starter prompt and cases",
        description="Write evalgate.yml, .github/workflows/evalgate.yml and, where none exist, "
        "a starter prompt and case file; add .evalgate/ to .gitignore. On a terminal it asks "
        "for what the flags leave open, with defaults found in the repository. --config is "
        "relative to --dir.",
    )
    init.add_argument("--dir", default=".", help="the repository's root (default: .)")
    init.add_argument(
        "--prompts", metavar="GLOB", help="prompt files (default: found, or prompts/*.txt)"
    )
    init.add_argument("--cases", metavar="GLOB", help="case files (default: found, or cases.jsonl)")
    init.add_argument(
        "--backend", choices=onboard.BACKENDS, help="the model backend (default: fake)"
    )
    init.add_argument("--model", metavar="NAME", help="the model name (default: per backend)")
    init.add_argument(
        "--scorer", choices=onboard.SCORERS, help="how replies are scored (default: label)"
    )
    init.add_argument("--field", metavar="NAME", help="the case field holding the expected answer")
    init.add_argument(
        "--command", metavar="CMD", help="the command backend's program (default: python app.py)"
    )
    init.add_argument("--branch", help="the default branch (default: found in .git, or main)")
    init.add_argument("--yes", action="store_true", help="ask nothing: take the defaults")
    init.add_argument("--force", action="store_true", help="replace evalgate.yml and the workflow")
    init.set_defaults(func=cmd_init)

    doctor_ = sub.add_parser(
        "doctor",
        parents=[common],
        help="check the setup: config, cases, split, workflow permissions and secrets",
        description="Check a repository's evalgate setup and say what to fix, one line per "
        "finding (ok, warn, FAIL). Exit 1 when anything FAILs. --config is relative to --dir.",
    )
    doctor_.add_argument("--dir", default=".", help="the repository's root (default: .)")
    doctor_.set_defaults(func=cmd_doctor)

    completion = sub.add_parser("completion", help="print a bash completion script")
    completion.set_defaults(func=cmd_completion)

    import_ = sub.add_parser(
        "import",
        parents=[common],
        help="convert promptfoo, OpenAI evals, Inspect or Langfuse cases to evalgate JSONL",
        description="Convert another tool's case file to evalgate JSONL and say what mapped, "
        "what did not, and what to do about it (docs/importers.md). The summary goes to "
        "stdout, or to stderr when stdout carries the cases (--out -) or the snippet.",
    )
    import_.add_argument(
        "source_format", metavar="FORMAT", choices=FORMATS, help="one of: " + ", ".join(FORMATS)
    )
    import_.add_argument(
        "file", help="the file to convert (promptfooconfig.yaml, samples.jsonl, ...)"
    )
    import_.add_argument(
        "--out",
        default="cases.jsonl",
        metavar="FILE",
        help="evalgate JSONL to write, '-' for stdout (default: %(default)s); cases the scorer "
        "cannot check go beside it in FILE.unscored.jsonl",
    )
    import_.add_argument("--force", action="store_true", help="replace files that exist")
    import_.add_argument(
        "--config-snippet",
        action="store_true",
        help="print an evalgate.yml for the cases (fields, template, model, scorer) to stdout",
    )
    import_.add_argument(
        "--scorer",
        choices=IMPORT_SCORERS,
        help="the suite's scorer kind (default: the kind most cases can be scored by)",
    )
    import_.set_defaults(func=cmd_import)

    lst = sub.add_parser("list", parents=[common], help="list saved runs")
    lst.set_defaults(func=cmd_list)

    report = sub.add_parser("report", parents=[common], help="print the report of a saved run")
    report.add_argument("run", help="run name, unique prefix, file path, or latest:VERSION")
    report.add_argument("--html", metavar="PATH", help=HTML_HELP)
    report.set_defaults(func=cmd_report)

    cmp_ = sub.add_parser("compare", parents=[common], help="pair two runs case by case")
    cmp_.add_argument("a", help="run A (the reference)")
    cmp_.add_argument("b", help="run B (the change)")
    cmp_.add_argument(
        "--show", type=int, default=20, help="cases listed per section (default: %(default)s)"
    )
    cmp_.add_argument("--html", metavar="PATH", help=HTML_HELP)
    cmp_.set_defaults(func=cmd_compare)
    return parser


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    ctx = Context(args, out, err)
    try:
        code: int = args.func(ctx)
        return code
    except EvalgateError as exc:
        err.write(f"error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
