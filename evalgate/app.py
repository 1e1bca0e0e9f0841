"""The service both entry points call: run one prompt version of a suite, run a release.

The CLI (``evalgate.cli``) and the action (``evalgate.action``) each build a :class:`World`
(the environment and the streams, read once at their root) and frozen :class:`RunOptions`, and
call :func:`run_version` or :func:`release_version`. Nothing here reads argv or ``os.environ``;
the backend, the cache and the batch runner are built here, from the world and the config.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from evalgate.backends.base import Backend, BackendContext, backend_class, prepare_backend
from evalgate.backends.guarded import guarded
from evalgate.cases.holdout import (
    HoldoutKey,
    LedgerRecord,
    SealedChange,
    SecretKey,
    anchors_of,
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
from evalgate.cases.read import SPLITS, CaseSet
from evalgate.config.load import LoadedConfig
from evalgate.config.models import ModelSettings, Suite
from evalgate.defaults import HOLDOUT_KEY_VARIABLE
from evalgate.errors import UserError
from evalgate.running.allocation import AdaptiveSource, plan_adaptive
from evalgate.running.budget import BudgetGuard
from evalgate.running.cache import ResponseCache
from evalgate.running.progress import ProgressPrinter
from evalgate.running.suite import (
    DEFAULT_SPLITS,
    Prompt,
    RunSpec,
    cases_to_run,
    load_prompt,
    load_suite_cases,
    run_suite,
)
from evalgate.runs.journal import journal_dir
from evalgate.runs.resume import check_resumable, fill, unsent
from evalgate.runs.schema import Run, StageOne

if TYPE_CHECKING:
    from evalgate.analysis.release import ReleaseRecord, ReleaseReport
    from evalgate.cases.judge_labels import Label
    from evalgate.cases.leakguard import LeakGuard
    from evalgate.gate.sequential import SequentialMonitor
    from evalgate.running.estimate import Estimate
    from evalgate.running.judge_check import Graded, JudgeReport, SplitCheck

# A run imports what it sends with; the release's history and signatures, the judge's check,
# the estimate, message batches and the sequential monitor are imported by the functions that
# use them (each costs a command that does not need it its import at start-up).


@dataclass(frozen=True)
class World:
    """What a run may read of the outside: the environment and where to talk.

    ``warn`` takes a one-line warning, ``say`` a line of the report (the per-case lines of a
    verbose run); ``err`` receives progress and status lines.
    """

    env: Mapping[str, str]
    err: TextIO
    warn: Callable[[str], None]
    say: Callable[[str], None]
    # The action's per-job key for the response cache (evalgate/action/state.py); None: the
    # cache is plain files, as the local ``--cache`` keeps them.
    cache_key: bytes | None = field(default=None, repr=False)

    @property
    def in_ci(self) -> bool:
        return self.env.get("CI", "").lower() in ("1", "true")

    @property
    def interactive(self) -> bool:
        return self.err.isatty() and not self.env.get("CI")

    def status(self, text: str) -> None:
        from evalgate.report.escape import printed

        self.err.write(printed(text + "\n", "stream"))


@dataclass(frozen=True)
class RunOptions:
    """How to run one prompt version: what of the suite, how often, and how to call the model.

    ``cache`` True reads and writes the response cache; None or False leave it alone.
    ``prompt`` runs that text instead of the version's file; ``assign`` re-splits the cases
    (a pull request takes its split from the base commit); ``early_stop_against`` watches the
    run against that baseline and stops once the verdict cannot change.
    """

    repeats: int = 1
    limit: int | None = None
    case_files: tuple[Path, ...] | None = None
    splits: frozenset[str] = DEFAULT_SPLITS
    purpose: str = "run"
    prompt: Prompt | None = None
    shard: tuple[int, int] | None = None
    early_stop_against: Run | None = None
    assign: Callable[[CaseSet], CaseSet] | None = None
    concurrency: int | None = None
    verbose: bool = False
    cache: bool | None = None
    batch: bool = False
    force_reason: str | None = None
    # The action's per-job total, which every suite's budget also answers to.
    budget_parent: BudgetGuard | None = None
    # A run the budget stopped: send its unsent calls and return it filled in.
    resume: Run | None = None
    # Send only these (case id, repeat) jobs (the adaptive design's extra repeats).
    only: frozenset[tuple[str, int]] | None = None
    # Pull-request and fork jobs: every request (the judge's too) passes this holdout guard.
    guard: LeakGuard | None = None
    # gate.repeats: adaptive: each case's repeats allocated from this (running/allocation.py).
    adaptive: AdaptiveSource | None = None
    # Journal each outcome as it arrives (runs/journal.py), so a killed run keeps them.
    journal: bool = True


def git_info(folder: Path) -> tuple[str | None, str | None]:
    """The commit and ref of the repository holding ``folder``, or (None, None)."""
    return git_info_started(folder)()


def git_info_started(folder: Path) -> Callable[[], tuple[str | None, str | None]]:
    """:func:`git_info`, its two git processes started now and run while the caller goes on
    (reading 20,000 cases, say); the returned function waits for them and gives the answer."""

    def start(*argv: str) -> subprocess.Popen[str] | None:
        try:
            return subprocess.Popen(
                ["git", *argv],
                cwd=folder,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError:
            return None

    def answer(process: subprocess.Popen[str] | None) -> str | None:
        if process is None:
            return None
        try:
            out, _ = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            return None
        return out.strip() or None if process.returncode == 0 else None

    commit, ref = start("rev-parse", "HEAD"), start("rev-parse", "--abbrev-ref", "HEAD")
    return lambda: (answer(commit), answer(ref))


def build_backend(env: Mapping[str, str], loaded: LoadedConfig, settings: ModelSettings) -> Backend:
    cls = backend_class(settings.backend)
    instance: Backend = cls(settings, BackendContext(base_dir=loaded.root, env=dict(env)))
    return instance


def holdout_secret(env: Mapping[str, str], suite: Suite) -> SecretKey | None:
    """The holdout secret: required for a sealed holdout, optional for a plaintext one (where
    it keys the names that published records give holdout cases)."""
    text = env.get(HOLDOUT_KEY_VARIABLE, "")
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


def plan_run(
    world: World, loaded: LoadedConfig, suite_name: str, version: str, options: RunOptions
) -> RunSpec:
    """What a run of one prompt version would send: the suite, prompt, cases and repeats."""
    name, suite = loaded.suite(suite_name)
    prompt = options.prompt or load_prompt(loaded, suite, version)
    secret = holdout_secret(world.env, suite) if "holdout" in options.splits else None
    git = git_info_started(loaded.root)  # git runs while the cases are read
    try:
        prepare_backend(suite.model.backend, world.env)  # and so does the backend's TLS context
        cases = load_suite_cases(
            loaded,
            suite,
            list(options.case_files) if options.case_files is not None else None,
            holdout_secret=secret,
            on_note=world.warn,
            assign=options.assign,
        )
    finally:
        commit, ref = git()  # waited for either way: no git process outlives the plan
    spec = RunSpec(
        suite_name=name,
        suite=suite,
        prompt=prompt,
        cases=cases,
        repeats=options.repeats,
        limit=options.limit,
        concurrency=options.concurrency,
        git_commit=commit,
        git_ref=ref,
        splits=options.splits,
        shard=options.shard,
        holdout_key=HoldoutKey(secret),
        template_at=f"{loaded.path.name}: suites.{name}.template",
    )
    return plan_adaptive(spec, options.adaptive) if options.adaptive is not None else spec


def estimate_version(
    world: World,
    loaded: LoadedConfig,
    suite_name: str,
    version: str,
    options: RunOptions,
    baseline: Run | None = None,
) -> Estimate:
    """What running one prompt version would cost, without calling a model: the backend is
    built only to count input tokens where that is free (see running/estimate.py)."""
    from evalgate.running.estimate import estimate_run

    two_stage = loaded.suite(suite_name)[1].gate.repeats == "two-stage"
    if two_stage:
        options = replace(options, repeats=1, adaptive=None, only=None)
    spec = plan_run(world, loaded, suite_name, version, options)
    suite = spec.suite
    backend: Backend | None
    try:
        backend = guarded(build_backend(world.env, loaded, suite.model), options.guard)
    except UserError:
        backend = None  # no key, say: the input tokens are approximated

    def estimate(of: RunSpec) -> Estimate:
        return estimate_run(
            of,
            loaded.root,
            counter=getattr(backend, "count_tokens", None),
            baseline=baseline,
            offline=bool(getattr(backend, "offline", suite.model.backend == "fake")),
            batch=options.batch or bool(getattr(backend, "batch_by_default", False)),
            price_as=suite.price_as,
            caches_system=bool(getattr(backend, "caches_system", False)),
        )

    try:
        first = estimate(spec)
        return _second_stage(first, spec, baseline, estimate) if two_stage else first
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()


def _second_stage(
    first: Estimate, spec: RunSpec, baseline: Run | None, estimate: Callable[[RunSpec], Estimate]
) -> Estimate:
    """A two-stage run's estimate: the first stage's, plus the second stage the baseline
    already decides (every block whose baseline repeats differ is sent it, whatever the first
    stage does). A block the baseline settled is sent it only if the candidate moves it, which
    no estimate can foresee: the note names that upper bound."""
    from evalgate.gate.two_stage import first_stage, select

    extra = spec.suite.gate.unstable_repeats - 1
    cases = cases_to_run(spec)
    if baseline is None:
        return first.model_copy(
            update={
                "notes": [
                    *first.notes,
                    "two-stage repeats: no baseline to choose by, so the run is the first stage "
                    "alone",
                ]
            }
        )
    chosen = select(baseline, first_stage(baseline), spec.suite.gate)
    ids = {c.id for c in cases}
    sure = [case for case in chosen.cases if case in ids]
    rest = len(cases) - len(sure)
    note = (
        f"two-stage repeats: {len(sure)} of {len(cases)} cases were not settled in the baseline "
        f"and are sent {extra} more times; a settled case the candidate moves is too "
        f"(at most {rest * extra} more calls)"
    )
    if not sure:
        return first.model_copy(update={"notes": [*first.notes, note]})
    more = frozenset((case, r) for case in sure for r in range(1, extra + 1))
    second = estimate(replace(spec, repeats=extra + 1, only=more))
    usd = None if first.usd is None or second.usd is None else first.usd + second.usd
    priced = (
        None
        if first.priced_as_usd is None or second.priced_as_usd is None
        else first.priced_as_usd + second.priced_as_usd
    )
    return first.model_copy(
        update={
            "calls": first.calls + second.calls,
            "input_tokens": first.input_tokens + second.input_tokens,
            "output_tokens": first.output_tokens + second.output_tokens,
            "usd": usd,
            "priced_as_usd": priced,
            "notes": [*first.notes, note],
        }
    )


def run_version(
    world: World, loaded: LoadedConfig, suite_name: str, version: str, options: RunOptions
) -> Run:
    """Run one prompt version (or ``options.prompt``) of a suite; record holdout reads."""
    spec = plan_run(world, loaded, suite_name, version, options)
    suite, prompt, cases, key = spec.suite, spec.prompt, spec.cases, spec.holdout_key
    commit, ref = spec.git_commit, spec.git_ref
    if options.resume is not None:
        check_resumable(options.resume, spec.suite_name, prompt.sha256)
        spec = replace(spec, only=unsent(options.resume), repeats=options.resume.repeats)
    elif options.only is not None:
        spec = replace(spec, only=options.only)
    backend = guarded(build_backend(world.env, loaded, suite.model), options.guard)
    offline = bool(getattr(backend, "offline", False))
    guard = BudgetGuard.of(
        suite.budget,
        None if offline else suite.model.name,
        "budget.",
        parent=options.budget_parent,
    )
    judge = None
    if suite.scorer.kind == "judge":
        judge = guarded(
            build_backend(world.env, loaded, suite.scorer.model), options.guard, "judge"
        )
    # Opt-in: in CI the checkout's folder is whoever wrote the checkout's (the action passes
    # True, with its own folder and key).
    use_cache = options.cache is True
    folder = loaded.state_dir / "cache"
    cache = ResponseCache(folder, key=world.cache_key) if use_cache else None
    batch = None
    if options.batch or getattr(backend, "batch_by_default", False):
        from evalgate.running.batch import BatchExecutor

        batch = BatchExecutor.for_backend(
            backend,
            loaded.state_dir / "batches",
            concurrency=spec.concurrency or suite.concurrency,
            on_status=world.status,
        )
        cache = None  # a batch is sent whole: nothing is looked up
        if guard is not None:
            raise UserError(
                "a budget cannot stop a message batch, which is sent whole",
                where=str(loaded.path),
                fix="drop the budget or model.options.batch (--batch) for this suite",
            )
    monitor = None
    if options.early_stop_against is not None:
        from evalgate.gate.sequential import SequentialMonitor

        hashes = {c.id: c.hash for c in cases_to_run(spec)}
        monitor = SequentialMonitor(options.early_stop_against, hashes, suite.gate)
    progress = ProgressPrinter(world.err, interactive=world.interactive)
    _say_left_over(world, loaded, spec.suite_name, options.resume)
    try:
        run = run_suite(
            spec,
            backend,
            loaded.root,
            cache=cache,
            on_progress=None if options.verbose else progress,
            judge=judge,
            stop_when=_watch(monitor),
            batch=batch,
            budget=guard,
            journal_dir=journal_dir(loaded.state_dir) if options.journal else None,
            on_note=world.warn,
        )
    finally:
        for used in (backend, judge):
            close = getattr(used, "close", None)
            if close is not None:
                close()
    if guard is not None and guard.line() is not None:
        run = run.model_copy(update={"budget_stop": guard.line()})
    if options.resume is not None:
        run = fill(options.resume, run)
    if monitor is not None:
        # The gate splits the paired test's alpha with the e-value the run was watched by.
        run = run.model_copy(update={"sequential_e_max": monitor.e_max})
    if cache is not None and options.repeats == 1:
        world.status(f"cache: {cache.hits} hits, {cache.misses} misses")
    if "holdout" in options.splits:
        _record_holdout_read(world, loaded, run, prompt, cases, key, options, (commit, ref))
    if options.verbose:
        for case in run.cases:
            mark = "ERROR" if case.error else ("ok   " if case.passed else "WRONG")
            detail = case.error or f"expected {case.expected}, answered {case.answer}"
            world.say(f"{mark} {case.id}: {detail}")
    return run


def _say_left_over(world: World, loaded: LoadedConfig, suite: str, resume: Run | None) -> None:
    """Name each journal a killed run of this suite left, and how to resume it."""
    from evalgate.runs.journal import left_over

    for path, run in left_over(loaded.state_dir, suite):
        if resume is not None and resume.name == run.name:
            continue
        calls = sum(len(c.outcomes) for c in run.cases)
        made = calls - len(unsent(run))
        world.warn(
            f"a run of suite {suite} (prompt {run.prompt.name}) was cut off with {made} of "
            f"{calls} calls made; they are kept in {path}: `evalgate run {run.prompt.name} "
            f"--resume {path}` sends the rest"
        )


def run_two_stage(
    world: World,
    loaded: LoadedConfig,
    suite_name: str,
    version: str,
    options: RunOptions,
    baseline: Run | None,
) -> Run:
    """``gate.repeats: two-stage``: every case once, then ``gate.unstable_repeats - 1`` more
    runs of each block (case, or scenario group) whose baseline repeats and first run were not
    all the same, chosen the gate's way (gate/two_stage.py); one run file of both stages.

    Without a baseline there is nothing to choose by: the first stage is the run. The suite's
    budget holds over both stages together."""
    from evalgate.gate.two_stage import select

    _, suite = loaded.suite(suite_name)
    policy = suite.gate
    total = BudgetGuard.of(
        suite.budget,
        None if suite.model.backend == "fake" else suite.model.name,
        "budget.",
        parent=options.budget_parent,
    )
    first_options = replace(options, repeats=1, adaptive=None, only=None, budget_parent=total)
    first = run_version(world, loaded, suite_name, version, first_options)
    if baseline is None or first.incomplete:
        return first
    chosen = select(baseline, first, policy)
    record = chosen.record(baseline, policy.unstable_repeats)
    if not chosen.cases:
        return first.model_copy(update={"stage_one": record})
    more = {(case, r) for case in chosen.cases for r in range(1, policy.unstable_repeats)}
    world.status(
        f"two-stage repeats: {chosen.selected} of {chosen.blocks} "
        f"{'scenario groups' if chosen.unit == 'group' else 'cases'} not settled after the "
        f"first run; sending them {policy.unstable_repeats - 1} more times ({len(more)} calls)"
    )
    second = run_version(
        world,
        loaded,
        suite_name,
        version,
        replace(first_options, repeats=policy.unstable_repeats, only=frozenset(more)),
    )
    return join_stages(first, second, record)


def join_stages(first: Run, second: Run, record: StageOne) -> Run:
    """One run of both stages: each case's first outcome, then its second-stage outcomes."""
    more = second.by_id()
    cases = [
        c.model_copy(update={"outcomes": [*c.outcomes, *more[c.id].outcomes]})
        if c.id in more
        else c
        for c in first.cases
    ]
    return first.model_copy(
        update={
            "cases": cases,
            "repeats": max(first.repeats, second.repeats),
            "wall_s": round(first.wall_s + second.wall_s, 4),
            "budget_stop": second.budget_stop,
            "interrupted": second.interrupted,
            "stage_one": record,
        }
    )


def _watch(monitor: SequentialMonitor | None) -> Callable[..., bool] | None:
    if monitor is None:
        return None
    return lambda job, outcome: monitor.observe(
        job.case_id, None if outcome.error else outcome.score, job.repeat
    )


def _record_holdout_read(
    world: World,
    loaded: LoadedConfig,
    run: Run,
    prompt: Prompt,
    cases: CaseSet,
    key: HoldoutKey,
    options: RunOptions,
    git: tuple[str | None, str | None],
) -> None:
    """Count this read of the holdout in the ledger: every read, whatever the purpose."""
    scored = [c.score or 0.0 for c in run.cases if c.split == "holdout" and c.error is None]
    reads = _append_read(
        world,
        loaded,
        git,
        time=run.created_at,
        prompt=prompt.name,
        prompt_sha256=prompt.sha256,
        holdout_sha256=holdout_sha(cases, key),
        score=sum(scored) / len(scored) if scored else None,
        n=len(scored),
        purpose=options.purpose,
        forced_reason=options.force_reason,
    )
    world.status(
        f"holdout read recorded in the ledger ({reads} read{'' if reads == 1 else 's'} "
        "of this holdout)"
    )


def _append_read(
    world: World, loaded: LoadedConfig, git: tuple[str | None, str | None], **fields: Any
) -> int:
    """One read in the config's ledger, with the commit and ref it was made at; the reads of
    that holdout so far."""
    commit, ref = git
    record = LedgerRecord(git_ref=world.env.get("GITHUB_REF") or ref, git_commit=commit, **fields)
    return append_ledger(ledger_path(loaded), record)


def release_version(
    world: World,
    loaded: LoadedConfig,
    name: str,
    version: str,
    tag: str,
    history: list[ReleaseRecord],
    *,
    ledger: Path,
    options: RunOptions | None = None,
    anchors: Sequence[tuple[str, SealedChange]] = (),
    where: str = "the release history",
) -> tuple[Run, ReleaseRecord, ReleaseReport]:
    """Run a release (dev, holdout and regression cases) and decide its gate against the
    history; the record is signed, names holdout cases under the key, commits to the sealed
    store's lines (which must match the previous release's but for recorded changes) and to
    the record before it. ``anchors``: release anchors read from elsewhere than the checkout
    (the default branch's change ledger)."""
    from evalgate.analysis.history import (
        check_anchors,
        check_chain,
        check_ledger,
        effective,
        next_link,
    )
    from evalgate.analysis.release import (
        make_record,
        release_report,
        sign_record,
        usable_history,
    )

    _, suite = loaded.suite(name)
    secret = holdout_secret(world.env, suite)
    key = HoldoutKey(secret)
    cases = load_suite_cases(loaded, suite, holdout_secret=secret)
    shipped = (options.prompt if options else None) or load_prompt(loaded, suite, version)
    contaminated(shipped, suite, cases)
    # Everything the integrity check reads is read before any call: a bad file costs nothing.
    usable_history(history, key)
    known = list(anchors)
    sealed_since = None
    if suite.sealed_holdout is not None:
        changes = read_changes(loaded.root / suite.sealed_holdout.changes)
        known += anchors_of(changes)
        sealed_since = min((c.time for _, c in changes), default=None)
    check_chain(history, key, where, sealed_since=sealed_since)
    check_anchors(history, known, key, where)
    if key.keyed:
        check_ledger(history, known, ledger.read_text("utf-8") if ledger.is_file() else None)
    every_split = replace(options or RunOptions(), splits=frozenset(SPLITS), purpose="release")
    run = run_version(world, loaded, name, version, every_split)
    usable, _ = usable_history(effective(history), key)
    sealed, integrity = _sealed_integrity(loaded, suite, usable, key)
    seq, previous = next_link(history) if key.keyed else (None, None)
    record = make_record(
        tag,
        run,
        run.created_at,
        holdout_sha(cases, key),
        key=key,
        sealed_lines=sealed,
        sealed_ok=not integrity,
        seq=seq,
        previous=previous,
    )
    reads = reads_of(read_ledger(ledger), record.holdout_sha256)
    report = release_report(
        record,
        effective(history),
        gate=suite.gate,
        split=suite.split,
        reads=reads,
        key=key,
        integrity=integrity,
    )
    # The verdict is part of the signed record: a failing re-run never stands in for a pass.
    record = sign_record(record.model_copy(update={"passed": report.kind == "pass"}), key)
    report = report.model_copy(
        update={"current": record, "history": [*report.history[:-1], record]}
    )
    return run, record, report


class Contamination(UserError):
    """The shipped prompt carries holdout cases: its holdout score would mean nothing."""


def contaminated(prompt: Prompt, suite: Suite, cases: CaseSet) -> None:
    """Refuse a release whose shipped prompt (or user-turn template) carries holdout cases,
    read as the pull-request guard reads requests (the holdout's plaintext, sealed cases
    too, is at hand here); nothing of the holdout is named."""
    from evalgate.cases.leakguard import contamination, holdout_index

    held = [c for c in cases.cases if c.split == "holdout"]
    public = [c for c in cases.cases if c.split != "holdout"]
    texts = {f"the shipped prompt {prompt.name} ({prompt.path or 'given'})": prompt.text}
    texts["the user-turn template"] = suite.template
    found = contamination(holdout_index(held, public), texts)
    if found:
        raise Contamination(
            f"{' and '.join(found)} carries holdout cases: a prompt that contains holdout "
            "cases is contamination (it would ace the holdout it is gated on), so the release "
            "fails",
            fix="take the holdout cases out of the prompt (use dev cases as examples) and tag "
            "again",
        )


def _sealed_integrity(
    loaded: LoadedConfig, suite: Suite, usable: list[ReleaseRecord], key: HoldoutKey
) -> tuple[list[str] | None, list[str]]:
    """The sealed store's line digests now, and what is wrong with them against the releases
    before (changes nobody recorded, forged retires, a store that stopped being sealed)."""
    if suite.sealed_holdout is None:
        was_sealed = [r.name for r in usable if r.sealed_lines]
        if not was_sealed:
            return None, []
        return None, [
            f"the holdout was sealed at release {was_sealed[-1]} and is not now "
            "(sealed_holdout is gone from the config): restore it"
        ]
    sealed = sealed_digests(loaded.root / suite.sealed_holdout.file)
    changes_file = loaded.root / suite.sealed_holdout.changes
    changes = read_changes(changes_file)
    # The last good release (a re-run of this very tag included: a re-run on a trimmed store
    # must not pass) is what the store may differ from, by recorded changes only.
    earlier = [r for r in usable if r.sealed_lines is not None and r.sealed_ok]
    if earlier:
        last = earlier[-1]
        return sealed, unrecorded_changes(
            last.sealed_lines or [], sealed, changes, key, since=last.name
        )
    if changes_file.exists():
        return sealed, forged_retires(changes, key) + replayed_changes(sealed, changes, key)
    if sealed:
        # With no release to compare with and no change ledger, a trimmed store (a suite
        # renamed, its ledger moved) would pass as it stands.
        return sealed, [
            f"the sealed holdout has {len(sealed)} cases but its change ledger "
            f"{suite.sealed_holdout.changes} is missing and no earlier release records its "
            "lines: restore the change ledger from version control"
        ]
    return sealed, []


LEDGER_PURPOSE = "judge check"


def check_judge(
    world: World,
    loaded: LoadedConfig,
    name: str,
    suite: Suite,
    labels: Sequence[Label],
    *,
    splits: frozenset[str],
    repeats: int = 1,
    show: int = 20,
    base_dir: Path | None = None,
    judge_sha: str | None = None,
    concurrency: int | None = None,
    force_reason: str | None = None,
    guard: LeakGuard | None = None,
    reuse: bool = True,
) -> tuple[JudgeReport, dict[str, Graded]]:
    """Grade the labels of the asked-for splits with the suite's judge; the report, and each
    label's grades by id (for pairing two judges). A holdout read goes in the ledger.
    ``judge_sha``: the judge's identity when its files were moved (the base branch's judge).
    ``guard``: a pull request's holdout guard (the labels themselves are what it lets through).
    ``reuse``: show the recorded holdout result when this judge identity read these holdout
    labels before (else they are graded again, to be paired label by label, uncounted)."""
    from evalgate.cases.judge_labels import labels_sha, leak_warnings
    from evalgate.running.judge_check import (
        JudgeReport,
        LabelSplit,
        floor_of,
        grade,
        judge_sha256,
        measure_split,
    )
    from evalgate.scorers.judge import JudgeScorer

    assert suite.judge is not None and suite.scorer.kind == "judge"
    root = base_dir or loaded.root
    identity = judge_sha or judge_sha256(root, suite)
    measure = {
        "alpha": suite.gate.alpha,
        "interval": suite.judge.interval,
        "seed": suite.gate.seed,
        "repeats": repeats,
    }
    earlier = (
        _earlier_label_read(loaded, identity, labels_sha(labels, "holdout"), measure)
        if "holdout" in splits
        else None
    )
    # The holdout labels are read once per judge identity: the same judge on the same labels
    # shows its recorded result (or, to be paired with another judge, is graded again) and the
    # read budget is not spent again.
    reused = earlier is not None and reuse
    graded_splits = splits - {"holdout"} if reused else splits
    backend = guarded(build_backend(world.env, loaded, suite.scorer.model), guard, "judge")
    try:
        scorer = JudgeScorer(suite.scorer, root, backend)
        chosen = [x for x in labels if x.split in graded_splits]
        concurrency = concurrency or suite.concurrency
        graded = grade(chosen, scorer, repeats=repeats, concurrency=concurrency)
    finally:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
    by_id = {x.id: g for x, g in zip(chosen, graded, strict=True)}
    checks = []
    order: tuple[LabelSplit, ...] = ("dev", "holdout")
    for split in order:
        if split not in splits:
            continue
        mine = [x for x in chosen if x.split == split]
        if split == "holdout" and reused and earlier is not None:
            checks.append(earlier)
            continue
        if split == "holdout" and not mine:
            continue
        checks.append(
            measure_split(
                split,
                mine,
                [by_id[x.id] for x in mine],
                alpha=suite.gate.alpha,
                show=show,
                interval=suite.judge.interval,
                seed=suite.gate.seed,
            )
        )
    judge = suite.judge
    floor = floor_of(checks, judge)
    warnings = leak_warnings(labels, suite)
    holdout_unread = 0 if "holdout" in splits else sum(1 for x in labels if x.split == "holdout")
    if floor.split == "dev" and holdout_unread:
        warnings.append(
            "the floor is read on the dev labels, which rubric tuning has seen: check the "
            "holdout labels (--split holdout) before trusting the judge to gate"
        )
    for check in checks:
        if check.errored:
            warnings.append(
                f"{check.errored} {check.split} labels errored (the judge call failed or its "
                "verdict could not be read) and are left out"
            )
    settings = suite.scorer.model
    report = JudgeReport(
        suite=name,
        created_at=datetime.now(UTC),
        judge=f"{settings.backend}/{settings.name}",
        judge_sha256=identity,
        labels_sha256=labels_sha(labels),
        repeats=repeats,
        interval=judge.interval,
        calls=sum(g.calls for g in graded),
        input_tokens=sum(g.input_tokens for g in graded),
        output_tokens=sum(g.output_tokens for g in graded),
        splits=checks,
        holdout_unread=holdout_unread,
        floor=floor,
        warnings=warnings,
    )
    holdout = next((c for c in checks if c.split == "holdout"), None)
    if holdout is not None and earlier is None:
        report = _record_label_read(
            world, loaded, suite, report, labels, holdout, force_reason, measure
        )
    elif holdout is not None:
        reads = reads_of(read_ledger(ledger_path(loaded)), labels_sha(labels, "holdout"))
        note = (
            "this judge read these holdout labels before: "
            + ("its recorded result is shown" if reused else "graded again to be paired")
            + "; the read is not counted again"
        )
        report = report.model_copy(
            update={
                "holdout_reads": reads,
                "read_budget": suite.split.read_budget,
                "warnings": [*report.warnings, note],
            }
        )
    return report, by_id


def _earlier_label_read(
    loaded: LoadedConfig, identity: str, holdout_sha: str, measure: dict[str, Any]
) -> SplitCheck | None:
    """The holdout labels' check recorded for this judge identity, measured the same way."""
    from evalgate.running.judge_check import SplitCheck

    for record in reversed(read_ledger(ledger_path(loaded))):
        result = record.result or {}
        if (
            record.purpose == LEDGER_PURPOSE
            and record.prompt_sha256 == identity
            and record.holdout_sha256 == holdout_sha
            and result.get("measure") == measure
        ):
            return SplitCheck.model_validate(result["check"])
    return None


def _record_label_read(
    world: World,
    loaded: LoadedConfig,
    suite: Suite,
    report: JudgeReport,
    labels: Sequence[Label],
    holdout: SplitCheck,
    force_reason: str | None,
    measure: dict[str, Any],
) -> JudgeReport:
    """Count a read of the judge's holdout labels in the ledger; the report with the reads so
    far, warned past the read budget."""
    from evalgate.cases.judge_labels import labels_sha

    reads = _append_read(
        world,
        loaded,
        git_info(loaded.root),
        time=report.created_at,
        prompt=f"judge:{report.suite}",
        prompt_sha256=report.judge_sha256,
        holdout_sha256=labels_sha(labels, "holdout"),
        score=holdout.agreement.agreement.rate,
        n=holdout.agreement.n,
        purpose=LEDGER_PURPOSE,
        forced_reason=force_reason,
        # Aggregate only, as shown in the report (no label is listed for the holdout).
        result={"measure": measure, "check": holdout.model_dump(mode="json")},
    )
    world.status(
        f"holdout labels read recorded in the ledger ({reads} read{'' if reads == 1 else 's'} "
        "of these labels)"
    )
    budget = suite.split.read_budget
    over = []
    if reads > budget:
        over.append(
            f"the judge's holdout labels have been read {reads} times, over the budget of "
            f"{budget} (split.read_budget): every read leaks a little into rubric tuning; "
            "add fresh holdout labels"
        )
    report = report.model_copy(
        update={
            "holdout_reads": reads,
            "read_budget": budget,
            "warnings": [*report.warnings, *over],
        }
    )
    return report
