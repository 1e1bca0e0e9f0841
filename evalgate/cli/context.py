"""What every command shares: the context read once from argv and the environment, and the one
function that builds a backend and runs a prompt version (recording every holdout read)."""

from __future__ import annotations

import argparse
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from evalgate.backends.base import Backend, BackendContext, backend_class
from evalgate.backends.batch import BatchRunner
from evalgate.cache import ResponseCache
from evalgate.cases import SPLITS, CaseSet
from evalgate.config import LoadedConfig, ModelSettings, Suite, load_config
from evalgate.errors import UserError
from evalgate.gate import SequentialMonitor
from evalgate.holdout import (
    HoldoutKey,
    LedgerRecord,
    SecretKey,
    append_ledger,
    forged_retires,
    load_secret_key,
    read_changes,
    read_ledger,
    reads_of,
    replayed_changes,
    sealed_digests,
    unrecorded_changes,
)
from evalgate.pipeline import (
    DEFAULT_SPLITS,
    Prompt,
    RunSpec,
    cases_to_run,
    load_prompt,
    load_suite_cases,
    run_suite,
)
from evalgate.progress import ProgressPrinter
from evalgate.redact import hold_environment
from evalgate.release import (
    ReleaseRecord,
    ReleaseReport,
    make_record,
    release_report,
    usable_history,
)
from evalgate.report.escape import escape
from evalgate.runs import Run
from evalgate.terminal import colourise, wants_colour

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2
# A run whose errored share exceeds max_error_share (or that was interrupted): its report is
# printed and it is saved, but a script must not take its numbers for a measurement.
EXIT_INCOMPLETE = 3
EXIT_CODES = (
    (EXIT_OK, "ok (a passing gate; an inconclusive one too, unless `gate.inconclusive_exit: 1`)"),
    (
        EXIT_GATE_FAILED,
        "a failed gate (`gate`, `release`, the action per `fail_on`), a leak found by `split`, "
        "or a `doctor` finding to fix",
    ),
    (
        EXIT_USAGE,
        "a usage or input error: one line saying what, where and how to fix it, no traceback "
        "(with `--json`, a JSON object on stdout)",
    ),
    (
        EXIT_INCOMPLETE,
        "an incomplete run (`run`, `report`, `merge`): more cases errored than "
        "`max_error_share` allows, or the run was interrupted; the report lists the errors",
    ),
)


class Context:
    """What every command receives: parsed args, streams, and the environment, read once here."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.env = dict(os.environ)

    @property
    def env(self) -> dict[str, str]:
        return self._env

    @env.setter
    def env(self, value: dict[str, str]) -> None:
        # The secrets among them are kept out of every error text printed or saved.
        hold_environment(value)
        self._env = value

    def config(self) -> LoadedConfig:
        return load_config(Path(self.args.config))

    def print(self, text: str = "") -> None:
        if getattr(self.args, "format", "text") == "text" and wants_colour(self.out, self.env):
            text = colourise(text)
        self.out.write(text if text.endswith("\n") else text + "\n")

    def warn(self, text: str) -> None:
        # One line, whatever it quotes (a case's text, an importer's note): no workflow command.
        line = f"warning: {escape(text, 'log')}"
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
    assign: Callable[[CaseSet], CaseSet] | None = None,
) -> Run:
    """Run one prompt version (or the given prompt text) of a suite; record holdout reads."""
    name, suite = loaded.suite(suite_name)
    prompt = prompt or load_prompt(loaded, suite, version)
    secret = holdout_secret(ctx, suite) if "holdout" in splits else None
    key = HoldoutKey(secret)
    cases = load_suite_cases(
        loaded, suite, case_files, holdout_secret=secret, on_note=ctx.warn, assign=assign
    )
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
        holdout_key=key,
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
    monitor = None
    if early_stop_against is not None:
        monitor = SequentialMonitor(
            early_stop_against, {c.id: c.hash for c in cases_to_run(spec)}, suite.gate
        )
        stop_when = lambda job, outcome: monitor.observe(  # noqa: E731
            job.case_id, None if outcome.error else outcome.score, job.repeat
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
    if monitor is not None:
        # The gate splits the paired test's alpha with the e-value the run was watched by.
        run = run.model_copy(update={"sequential_e_max": monitor.e_max})
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
                holdout_sha256=holdout_sha(cases, key),
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
    """The holdout secret: required for a sealed holdout, optional for a plaintext one (where
    it keys the names that published records give holdout cases)."""
    text = ctx.env.get(HOLDOUT_KEY_VARIABLE, "")
    if suite.sealed_holdout is None:
        return load_secret_key(text) if text else None
    if not text:
        raise UserError(
            f"this suite's holdout is sealed and {HOLDOUT_KEY_VARIABLE} is not set",
            fix="run release jobs in the protected environment that holds the key",
        )
    return load_secret_key(text)


def ledger_path(loaded: LoadedConfig) -> Path:
    return loaded.state_dir / "holdout-ledger.jsonl"


def holdout_sha(cases: CaseSet, key: HoldoutKey) -> str:
    """The holdout's keyed digest: the same cases under the same key give the same digest."""
    return key.digest(key.case(c.id, c.hash) for c in cases.cases if c.split == "holdout")


def price_as_for(loaded: LoadedConfig, run: Run) -> str | None:
    suite = loaded.config.suites.get(run.suite)
    return suite.price_as if suite else None


def release_version(
    ctx: Context,
    loaded: LoadedConfig,
    name: str,
    version: str,
    tag: str,
    history: list[ReleaseRecord],
    *,
    ledger: Path,
) -> tuple[Run, ReleaseRecord, ReleaseReport]:
    """Run a release (dev, holdout and regression cases) and decide its gate against the
    history; the record is signed, names holdout cases under the key and commits to the
    sealed store's lines, which must match the previous release's but for recorded changes."""
    _, suite = loaded.suite(name)
    secret = holdout_secret(ctx, suite)
    key = HoldoutKey(secret)
    cases = load_suite_cases(loaded, suite, holdout_secret=secret)
    # Everything the integrity check reads is read before any call: a bad file costs nothing.
    usable_history(history, key)
    if suite.sealed_holdout is not None:
        read_changes(loaded.root / suite.sealed_holdout.changes)
    run = execute_version(ctx, loaded, name, version, splits=frozenset(SPLITS), purpose="release")
    sealed = None
    integrity: list[str] = []
    usable, _ = usable_history(sorted(history, key=lambda r: r.time), key)
    if suite.sealed_holdout is not None:
        store = loaded.root / suite.sealed_holdout.file
        sealed = sealed_digests(store)
        changes_file = loaded.root / suite.sealed_holdout.changes
        changes = read_changes(changes_file)
        # The last good release (a re-run of this very tag included: a re-run on a trimmed
        # store must not pass) is what the store may differ from, by recorded changes only.
        earlier = [r for r in usable if r.sealed_lines is not None and r.sealed_ok]
        if earlier:
            integrity = unrecorded_changes(
                earlier[-1].sealed_lines or [], sealed, changes, key, since=earlier[-1].name
            )
        elif changes_file.exists():
            integrity = forged_retires(changes, key) + replayed_changes(sealed, changes, key)
    else:
        was_sealed = [r.name for r in usable if r.sealed_lines]
        if was_sealed:
            integrity = [
                f"the holdout was sealed at release {was_sealed[-1]} and is not now "
                "(sealed_holdout is gone from the config): restore it"
            ]
    record = make_record(
        tag,
        run,
        run.created_at,
        holdout_sha(cases, key),
        key=key,
        sealed_lines=sealed,
        sealed_ok=not integrity,
    )
    reads = reads_of(read_ledger(ledger), record.holdout_sha256)
    report = release_report(
        record,
        history,
        gate=suite.gate,
        split=suite.split,
        reads=reads,
        key=key,
        integrity=integrity,
    )
    return run, record, report
