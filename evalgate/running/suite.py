"""Config + cases + a prompt version -> a Run. Receives the backend and cache; builds nothing."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from evalgate import __version__, files
from evalgate.backends.base import Backend, Message, Request
from evalgate.cases.holdout import HoldoutKey, SecretKey, open_sealed, redact_all
from evalgate.cases.read import Case, CaseSet, check_agent_case, hash_cases, load_cases, parse_case
from evalgate.cases.split import assign_all
from evalgate.cases.templating import compile_template, render_template, render_turn
from evalgate.config.load import LoadedConfig
from evalgate.config.models import ScorerConfig, Suite, file_arguments
from evalgate.errors import CaseFileError, ConfigError, UserError, did_you_mean
from evalgate.running.execute import Budget, Cache, Job, ProgressCallback, execute
from evalgate.runs.journal import Journal, places
from evalgate.runs.resume import INTERRUPTED
from evalgate.runs.schema import CaseResult, ModelInfo, Outcome, PromptInfo, Run
from evalgate.scorers.base import build_scorer, needs_expected, read_files
from evalgate.trajectory import AgentSpec, ToolSpec

if TYPE_CHECKING:
    from evalgate.running.batch import BatchExecutor  # imported by the runs that batch

DEFAULT_SPLITS = frozenset({"dev", "regression"})


def shard_of(case_id: str, shards: int) -> int:
    """The 1-based shard of a case: a hash of its id, so shards are stable as cases are added."""
    digest = hashlib.sha256(case_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards + 1


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def sha256_json(value: Any) -> str:
    return sha256_text(json.dumps(value, sort_keys=True, default=str))


def scorer_sha256(scorer: ScorerConfig, base_dir: Path) -> str:
    """A scorer's identity: its config and the text of every file it reads. A judge's rubric,
    rules files and command program are part of what it is (the config holds their names
    alone); configs that name no file keep the hash they had."""
    dump = scorer.model_dump(mode="json", by_alias=True)
    files = read_files(scorer, base_dir)
    return sha256_json({**dump, "files": files} if files else dump)


@dataclass(frozen=True)
class Prompt:
    name: str
    text: str
    path: str | None

    @property
    def sha256(self) -> str:
        return sha256_text(self.text)


def load_prompt(loaded: LoadedConfig, suite: Suite, version: str) -> Prompt:
    versions = loaded.prompt_files(suite)
    if version not in versions:
        close = did_you_mean(version, sorted(versions))
        raise UserError(
            f"unknown prompt version {version!r}",
            where=str(loaded.path),
            fix=(f"did you mean {close}? " if close else "")
            + f"prompt versions: {', '.join(sorted(versions))}",
        )
    path = versions[version]
    raw = files.read_text(path, "prompt file")
    text = render_template(compile_template(raw, str(path)), {}, str(path))
    return Prompt(name=version, text=text, path=path.relative_to(loaded.root).as_posix())


def load_suite_cases(
    loaded: LoadedConfig,
    suite: Suite,
    case_files: Sequence[Path] | None = None,
    *,
    holdout_secret: SecretKey | None = None,
    on_note: Callable[[str], None] | None = None,
    assign: Callable[[CaseSet], CaseSet] | None = None,
) -> CaseSet:
    """The suite's cases with their splits assigned; sealed holdout cases when the key is given.

    ``on_note`` hears what reading another tool's case files left out (``cases_format``).
    ``assign`` replaces the suite's own split policy: it receives the cases with only the
    splits written on them (sealed ones are holdout) and returns them with every split set; a
    pull request's job passes the default branch's policy here (see base_split.py).
    """
    read = read_suite_cases(
        loaded, suite, case_files, holdout_secret=holdout_secret, on_note=on_note
    )
    if assign is not None:
        return assign(read)
    return CaseSet(cases=tuple(assign_all(read.cases, suite.split)), file_hashes=read.file_hashes)


def read_suite_cases(
    loaded: LoadedConfig,
    suite: Suite,
    case_files: Sequence[Path] | None = None,
    *,
    holdout_secret: SecretKey | None = None,
    on_note: Callable[[str], None] | None = None,
) -> CaseSet:
    """The suite's cases as written: a split only where a case names one (sealed: holdout)."""
    paths = list(case_files) if case_files else loaded.expand(suite.cases, "case file")
    by = suite.split.group_field
    visible = [*(suite.fields.input or []), suite.fields.group]
    if by is not None and suite.fields.input is not None and by not in visible:
        # A case keeps only its input fields, so the group key would silently be the case id.
        raise ConfigError(
            f"split.group_field {by!r} is not one of fields.input, so cases cannot be grouped by it",
            where=str(loaded.path),
            fix=f"map it as fields.group: {by} (and drop split.group_field)",
        )
    need = needs_expected(suite.scorer)
    if suite.cases_format == "evalgate":
        plain = load_cases(paths, suite.fields, root=loaded.root, need_expected=need)
    else:
        from evalgate.cases.importers import load_foreign

        plain = load_foreign(
            suite.cases_format,
            paths,
            suite.fields,
            suite.scorer,
            root=loaded.root,
            need_expected=need,
            on_note=on_note,
            rename={str(k): v for k, v in suite.cases_format_fields.items()},
        )
    cases = list(plain.cases)
    hashes = dict(plain.file_hashes)
    if suite.sealed_holdout is not None and holdout_secret is not None:
        path = loaded.root / suite.sealed_holdout.file
        if not path.is_file():
            raise UserError(
                "the sealed holdout file does not exist",
                where=str(path),
                fix="seal holdout cases into it with `evalgate holdout add FILE`",
            )
        seen = {c.id: c.source for c in cases}
        for where, record in open_sealed(path, holdout_secret):
            case = parse_case(record, suite.fields, where, need_expected=need)
            if case.id in seen:
                raise CaseFileError(
                    f"duplicate case id {case.id!r} (also at {seen[case.id]})",
                    where=where,
                    fix=f"take the sealed copies out with `evalgate holdout retire {case.id} "
                    "--to FILE` (written there in plain), give each a new id and seal it again "
                    "with `evalgate holdout add FILE`, or drop it",
                )
            seen[case.id] = where
            cases.append(case.model_copy(update={"split": "holdout"}))
        hashes[suite.sealed_holdout.file] = sha256_text(files.read_text(path, "sealed holdout"))
    for case in cases:
        check_agent_case(case, suite.tools)
    return CaseSet(cases=tuple(cases), file_hashes=hashes)


def agent_spec(suite: Suite, case: Case, tools_sha256: str | None = None) -> AgentSpec | None:
    """What the agent loop needs for one case; None when the suite offers no tools."""
    if not suite.tools:
        return None
    settings = suite.agent
    argv = settings.tool_argv()
    return AgentSpec(
        tools=tuple(ToolSpec.model_validate(t.model_dump()) for t in suite.tools),
        fixtures={name: list(entries) for name, entries in (case.fixtures or {}).items()},
        max_steps=settings.max_steps,
        on_missing_fixture=settings.on_missing_fixture,
        tool_command=tuple(argv) if argv else None,
        tool_timeout_s=settings.tool_timeout_s,
        tools_sha256=tools_sha256,
    )


def tools_sha(suite: Suite, base_dir: Path) -> str | None:
    """A hash of what answers an agent's calls: the tools offered, the loop's settings and the
    files the tool command runs (its script changes the results as a fixture would). None when
    the suite offers no tools."""
    if not suite.tools:
        return None
    names = file_arguments(suite.agent.tool_argv())
    return sha256_json(
        {
            "tools": [t.model_dump(mode="json") for t in suite.tools],
            "agent": suite.agent.model_dump(mode="json"),
            "files": {
                name: files.read_text(base_dir / name, "tool command file")
                if (base_dir / name).is_file()
                else None
                for name in names
            },
        }
    )


def public_cases_sha(cases: Sequence[Case], key: HoldoutKey) -> str:
    """The run's cases hash, with each holdout case under its keyed name, so that the published
    hash cannot confirm a guessed holdout case."""
    if not any(c.split == "holdout" for c in cases):
        return hash_cases(cases)
    return hash_cases(
        c.model_copy(update={"id": key.case(c.id, c.hash), "hash": key.content(c.hash)})
        if c.split == "holdout"
        else c
        for c in cases
    )


class Jobs(Sequence[Job]):
    """A run's jobs, each made when it is asked for: a case's request (its system prompt, its
    rendered turn, its case) is built for the call and dropped after it, so a run of 20,000
    cases does not hold 20,000 requests (2 KB each) from the start to the end. Every turn is
    rendered up front, so a template error still stops the run before its first call."""

    def __init__(
        self,
        suite: Suite,
        prompt: Prompt,
        cases: Sequence[Case],
        repeats: int,
        key: HoldoutKey,
        tools_sha256: str | None,
        template_at: str = "template",
    ) -> None:
        template = compile_template(suite.template, template_at)
        self._suite, self._prompt, self._repeats = suite, prompt, repeats
        self._tools_sha256 = tools_sha256
        self._cases = list(cases)
        self._names: list[str] = []
        self._turns: list[str] = []
        for case in self._cases:
            holdout = case.split == "holdout"
            # Errors name a case by its job's id: a holdout case's id stays out of any message.
            name = key.case(case.id, case.hash) if holdout else case.id
            self._names.append(name)
            try:
                turn = render_turn(template, case.input, template_at, holdout=holdout)
            except UserError as exc:
                # Where is said once it is wrong, not made for each of 20,000 cases. A holdout
                # case is not named in a template error, nor are its values quoted.
                where = (
                    f"{template_at} (a holdout case)"
                    if holdout
                    else f"{template_at} (case {name!r}, {case.source})"
                )
                raise UserError(exc.what, where=where, fix=exc.fix) from None
            self._turns.append(turn)

    def __len__(self) -> int:
        return len(self._cases) * self._repeats

    def case_index(self, index: int) -> int:
        """The case of job ``index``, without building its request."""
        return index // self._repeats

    def request(self, index: int) -> Request:
        """The request of job ``index``'s case (a case's repeats send the same request)."""
        case_index = self.case_index(index)
        case, model = self._cases[case_index], self._suite.model
        return Request(
            system=self._prompt.text,
            messages=(
                *(Message(role=m["role"], content=m["content"]) for m in case.messages),
                Message(role="user", content=self._turns[case_index]),
            ),
            model=model.name,
            max_tokens=model.max_tokens,
            temperature=model.temperature,
            options=model.options,
            case={"id": case.id, "input": case.input},
            agent=agent_spec(self._suite, case, self._tools_sha256),
        )

    def _job(self, index: int) -> Job:
        if not 0 <= index < len(self):
            raise IndexError(index)
        case_index = self.case_index(index)
        case = self._cases[case_index]
        return Job(
            case_index,
            index % self._repeats,
            self._names[case_index],
            case.expected,
            self.request(index),
            case.input,
            # A holdout reply is never written to the response cache, which is not secret.
            cacheable=case.split != "holdout",
        )

    @overload
    def __getitem__(self, index: int) -> Job: ...
    @overload
    def __getitem__(self, index: slice) -> list[Job]: ...
    def __getitem__(self, index: int | slice) -> Job | list[Job]:
        if isinstance(index, slice):
            return [self._job(i) for i in range(*index.indices(len(self)))]
        return self._job(index + len(self) if index < 0 else index)


def build_jobs(
    suite: Suite,
    prompt: Prompt,
    cases: Sequence[Case],
    repeats: int,
    key: HoldoutKey | None = None,
    tools_sha256: str | None = None,
    template_at: str = "template",
) -> Jobs:
    """Each case's jobs, its repeats next to each other (see :class:`Jobs`). ``tools_sha256``
    (see :func:`tools_sha`) joins each agent request, so a cached reply is never reused after
    the tool command's files change. ``template_at``: where the user-turn template is written
    (``evalgate.yml: suites.NAME.template``), for its errors."""
    return Jobs(suite, prompt, cases, repeats, key or HoldoutKey(), tools_sha256, template_at)


@dataclass(frozen=True)
class RunSpec:
    suite_name: str
    suite: Suite
    prompt: Prompt
    cases: CaseSet
    repeats: int = 1
    limit: int | None = None
    concurrency: int | None = None
    git_commit: str | None = None
    git_ref: str | None = None
    # Pull-request runs never include the holdout; release runs ask for it explicitly.
    splits: frozenset[str] = DEFAULT_SPLITS
    # (i, n): run only the i-th of n deterministic slices (1-based), for sharded CI jobs.
    shard: tuple[int, int] | None = None
    # Names the holdout's cases in the run file (keyed when the holdout secret is known).
    holdout_key: HoldoutKey = field(default_factory=HoldoutKey)
    # Send only these (case id, repeat) jobs: a resumed run's unsent calls, or extra repeats.
    only: frozenset[tuple[str, int]] | None = None
    # Where the user-turn template is written, for its errors.
    template_at: str = "template"
    # The adaptive design's allocation (running/allocation.py), said in the run and the gate.
    allocation: str | None = None


def cases_to_run(spec: RunSpec) -> list[Case]:
    """The cases a run of ``spec`` sends, in case-file order: its splits, shard and limit."""
    cases = [c for c in spec.cases.cases if (c.split or "dev") in spec.splits]
    if spec.shard is not None:
        cases = [c for c in cases if shard_of(c.id, spec.shard[1]) == spec.shard[0]]
    if spec.limit is not None:
        cases = cases[: spec.limit]
    return cases


def run_suite(
    spec: RunSpec,
    backend: Backend,
    base_dir: Path,
    *,
    cache: Cache | None = None,
    on_progress: ProgressCallback | None = None,
    judge: Backend | None = None,
    stop_when: Callable[[Job, Outcome], bool] | None = None,
    batch: BatchExecutor | None = None,
    budget: Budget | None = None,
    journal_dir: Path | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Run:
    """``batch``: send every call in one message batch (half price, no cache, no early stop).
    ``budget`` is asked before each call (see running/budget.py). ``journal_dir``: each outcome
    is written there as it arrives, and the journal removed once the run is whole
    (runs/journal.py); a journal that cannot be written (a read-only folder, a full disk) is
    given up with a note to ``on_note``, never the run."""
    suite = spec.suite
    cases = [c for c in spec.cases.cases if (c.split or "dev") in spec.splits]
    if not cases:
        raise UserError(
            f"no cases in the split(s) {', '.join(sorted(spec.splits))}",
            fix="check the case files, the split policy, or the holdout key",
        )
    # The hash of the cases a shard is one of: only a shard's run file holds it.
    whole_sha = public_cases_sha(cases, spec.holdout_key) if spec.shard is not None else None
    cases = cases_to_run(spec)
    scorer = build_scorer(suite.scorer, base_dir, judge)
    tools = tools_sha(suite, base_dir)
    jobs = build_jobs(
        suite, spec.prompt, cases, spec.repeats, spec.holdout_key, tools, spec.template_at
    )
    chosen: Sequence[Job] = jobs
    # The case of each job sent, in order (read without building the jobs' requests).
    case_of = [jobs.case_index(i) for i in range(len(jobs))]
    if spec.only is not None:
        chosen = [j for j in jobs if (cases[j.case_index].id, j.repeat) in spec.only]
        case_of = [j.case_index for j in chosen]
    started = time.perf_counter()
    if batch is not None and suite.tools:
        raise UserError(
            "agent cases cannot go through the Message Batches API: each step needs the "
            "answer to the last",
            fix="drop model.options.batch (or --batch) for a suite with tools",
        )
    journal: Journal | None = None
    on_outcome: Callable[[int, Outcome], None] | None = None
    if journal_dir is not None and batch is None and all(c.split != "holdout" for c in cases):
        at = places(case_of)

        given_up = False

        def journaled(index: int, outcome: Outcome) -> None:
            nonlocal given_up
            if given_up:
                return
            try:
                _journal(index, outcome)
            except OSError as exc:
                given_up = True
                if journal is not None:
                    journal.abandon()  # removed with the rest once the run is whole
                if on_note is not None:
                    on_note(
                        f"the run is not journaled ({exc.strerror or exc}): a killed run would "
                        "lose its outcomes"
                    )

        def _journal(index: int, outcome: Outcome) -> None:
            nonlocal journal
            if journal is None:
                # Made at the first outcome, not before the first call: nothing is kept until
                # something was paid for, and the first request is not kept waiting.
                skeleton = _record(
                    spec,
                    backend,
                    base_dir,
                    cases,
                    whole_sha,
                    tools,
                    _case_results(cases, case_of, [INTERRUPTED] * len(case_of), spec.holdout_key),
                    False,
                )
                journal = Journal(journal_dir / f"{skeleton.name}.jsonl", skeleton)
            journal.write(*at[index], outcome)

        on_outcome = journaled

    try:
        if batch is not None:
            outcomes, interrupted = batch.execute(
                chosen, scorer, label=spec.suite_name, on_progress=on_progress
            )
        else:
            outcomes, interrupted = execute(
                chosen,
                backend,
                scorer,
                concurrency=spec.concurrency or suite.concurrency,
                cache=None if spec.repeats > 1 else cache,  # a cached reply measures no noise
                on_progress=on_progress,
                stop_when=stop_when,
                budget=budget,
                on_outcome=on_outcome,
            )
    finally:
        if journal is not None:
            journal.close()  # a run that raised keeps what it paid for
    wall = time.perf_counter() - started
    results = _case_results(cases, case_of, outcomes, spec.holdout_key)
    saved = sum(1 for o in outcomes if o.error_kind == "skipped")
    run = _record(spec, backend, base_dir, cases, whole_sha, tools, results, batch is not None)
    if journal is not None:
        journal.remove()  # the run is whole in memory: its file is written next
    return run.model_copy(
        update={"wall_s": round(wall, 4), "interrupted": interrupted, "calls_saved": saved}
    )


def _record(
    spec: RunSpec,
    backend: Backend,
    base_dir: Path,
    cases: Sequence[Case],
    whole_sha: str | None,
    tools: str | None,
    results: list[CaseResult],
    batch: bool,
) -> Run:
    """The run of ``spec`` with these case results, made now (its wall time, interruption and
    saved calls the caller's to set)."""
    suite = spec.suite
    created = datetime.now(UTC)
    scorer_dump = suite.scorer.model_dump(mode="json", by_alias=True)
    return Run(
        name=f"{spec.suite_name}-{spec.prompt.name}-{created:%Y%m%dT%H%M%S}-"
        f"{sha256_text(created.isoformat())[:4]}",
        created_at=created,
        suite=spec.suite_name,
        prompt=PromptInfo(name=spec.prompt.name, sha256=spec.prompt.sha256, path=spec.prompt.path),
        cases_sha256=public_cases_sha(cases, spec.holdout_key),
        shard=f"{spec.shard[0]}/{spec.shard[1]}" if spec.shard else None,
        shard_of_sha256=whole_sha,
        case_files=spec.cases.file_hashes,
        model=ModelInfo(
            backend=suite.model.backend,
            name=suite.model.name,
            max_tokens=suite.model.max_tokens,
            temperature=suite.model.temperature,
            options_sha256=sha256_json(suite.model.options),
            offline=bool(getattr(backend, "offline", False)),
        ),
        scorer=scorer_dump,
        scorer_sha256=scorer_sha256(suite.scorer, base_dir),
        tools_sha256=tools,
        git_commit=spec.git_commit,
        git_ref=spec.git_ref,
        evalgate_version=__version__,
        repeats=spec.repeats,
        limited_to=spec.limit,
        batch=batch,
        max_error_share=suite.max_error_share,
        allocation=spec.allocation,
        cases=results,
    )


def _case_results(
    cases: Sequence[Case], case_of: Sequence[int], outcomes: Sequence[Outcome], key: HoldoutKey
) -> list[CaseResult]:
    """Each case with its outcomes (jobs come back in any order), the holdout redacted, and
    the cases a sequential test made unnecessary left out (they were never sent)."""
    per_case: list[list[Outcome]] = [[] for _ in cases]
    for case_index, outcome in zip(case_of, outcomes, strict=True):
        per_case[case_index].append(outcome)
    results = [
        # Built from values already validated (the case's, the outcomes'): constructed, so
        # the result shares the case's input instead of holding a copy of it.
        CaseResult.model_construct(
            id=case.id,
            split=case.split or "dev",
            group=case.group,
            category=case.category,
            expected=case.expected,
            input=case.input,
            hash=case.hash,
            outcomes=per_case[i],
        )
        for i, case in enumerate(cases)
        # A case none of whose jobs was asked for (``RunSpec.only``) has no result.
        if per_case[i]
    ]
    # The holdout keeps only hashes, groups and scores, from here on.
    results = redact_all(results, key)
    return [r for r in results if not all(o.error_kind == "skipped" for o in r.outcomes)]
