"""The run file: the artefact that holds everything needed to compare later.

A versioned pydantic schema, saved as JSON under ``<state_dir>/runs/``. The file is written
compact (see :func:`write_run`) and read in every form evalgate has written (:func:`read_run`).
"""

import gzip
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalgate.compact import Compact, cycles_uncollected
from evalgate.errors import RunFileError, did_you_mean, from_validation
from evalgate.limits import MESSAGE, excerpt, label
from evalgate.redact import RedactedError, RedactedReply
from evalgate.trajectory import Step

SCHEMA_VERSION: Literal[1] = 1
# A score at or above this is a pass: for a case, a repeat, a judge's grade.
PASS_AT = 0.5


Score = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


class Outcome(Compact):
    """One call for one case: the reply and how it scored (or the error that stopped it)."""

    model_config = ConfigDict(extra="forbid")

    text: RedactedReply | None = None
    answer: str | None = None
    # A run file is read from an artefact or a pull request's state folder: a score outside
    # [0, 1] (a percent, NaN) would be counted as that many passes, and a negative count or
    # time would be subtracted from the cost. Each is refused where the file is read.
    score: Score | None = None
    format_ok: bool | None = None
    reason: str | None = None
    input_tokens: Count = 0
    output_tokens: Count = 0
    cache_write_tokens: Count = 0
    cache_read_tokens: Count = 0
    latency_s: Seconds = 0.0
    stop_reason: str | None = None
    error: RedactedError | None = None
    error_kind: str | None = None
    attempts: int = 1
    cached: bool = False
    judge_calls: Count = 0
    judge_input_tokens: Count = 0
    judge_output_tokens: Count = 0
    # An agent case's steps: every model call, its tool calls, their inputs and results.
    steps: list[Step] | None = None


class CaseResult(Compact):
    model_config = ConfigDict(extra="forbid")

    id: str
    split: Literal["dev", "holdout", "regression"] = "dev"
    group: str | None = None
    category: str | None = None
    expected: Any = None
    # The case's input fields; None for holdout cases, whose content never leaves the job.
    input: dict[str, Any] | None = None
    hash: str
    outcomes: list[Outcome] = Field(min_length=1)

    # Derived, not stored (a copy with other outcomes must not keep stale values); written as
    # plain loops because reports and the gate read them for every case many times.
    @property
    def error(self) -> str | None:
        """A case is an error when any of its calls failed: its score would mean fewer repeats."""
        for outcome in self.outcomes:
            if outcome.error is not None:
                return outcome.error
        return None

    @property
    def score(self) -> float | None:
        total = 0.0
        for outcome in self.outcomes:
            if outcome.error is not None:
                return None
            total += outcome.score or 0.0
        return total / len(self.outcomes)

    @property
    def passed(self) -> bool | None:
        score = self.score
        return None if score is None else score >= PASS_AT

    @property
    def format_ok(self) -> bool | None:
        if self.error is not None:
            return None
        return all(bool(o.format_ok) for o in self.outcomes)

    @property
    def answer(self) -> str | None:
        return self.outcomes[0].answer

    def answered(self, name: Callable[[object], str] = label) -> str:
        """What the run answered: the answer, or, when the repeats answered differently, each
        answer with how many of them gave it, most given first ("billing (2 of 3), other (1 of
        3)"): the first repeat alone could show a case the run passed on the whole as answered
        wrongly. ``name`` shows one answer (shortened, by default)."""
        given = Counter(name(o.answer) for o in self.outcomes if o.error is None)
        if len(given) == 1:
            return next(iter(given))
        if not given:
            return name(self.answer)
        total = sum(given.values())
        return ", ".join(f"{answer} ({n} of {total})" for answer, n in given.most_common())

    @property
    def flipped(self) -> bool:
        """Whether the outcome (pass / fail) differed between repeats of this case."""
        passes = {(o.score or 0.0) >= PASS_AT for o in self.outcomes if o.error is None}
        return len(passes) > 1

    def message(self) -> str:
        """A one-line excerpt of the input, for reports."""
        if not self.input:
            return ""
        return excerpt(" ".join(str(v) for v in self.input.values()), MESSAGE)


class PromptInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    sha256: str
    path: str | None = None


class ModelInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: str
    name: str
    max_tokens: int
    temperature: float | None
    options_sha256: str
    offline: bool = False


class StageOne(BaseModel):
    """``gate.repeats: two-stage``: what chose the candidate's second stage
    (analysis/two_stage.py). The gate checks it against the baseline it compares with."""

    model_config = ConfigDict(extra="forbid")

    # The baseline run whose repeats, with the candidate's first, chose the second stage.
    baseline: str
    baseline_created_at: datetime
    # The candidate's runs of a block that was not settled (gate.unstable_repeats).
    repeats: int = Field(ge=2)
    unit: Literal["case", "group"]
    # Blocks (cases or scenario groups) paired with the baseline, and those sent again.
    blocks: int = Field(ge=0)
    selected: int = Field(ge=0)


class Run(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = SCHEMA_VERSION
    name: str
    created_at: datetime
    suite: str
    prompt: PromptInfo
    cases_sha256: str
    case_files: dict[str, str]
    model: ModelInfo
    scorer: dict[str, Any]
    scorer_sha256: str
    # What answers an agent's tool calls (tools, agent settings, the tool command's files);
    # None for a suite without tools.
    tools_sha256: str | None = None
    git_commit: str | None = None
    git_ref: str | None = None
    evalgate_version: str
    repeats: int = Field(default=1, ge=1)
    wall_s: float = 0.0
    limited_to: int | None = None
    # "i/n" for one shard of a sharded run; the hash of the whole case set it is a slice of.
    shard: str | None = None
    shard_of_sha256: str | None = None
    interrupted: bool = False
    # Calls a sequential test made unnecessary (the run stopped early, with its verdict known).
    calls_saved: int = 0
    # The largest e-value the sequential test saw while the run went (None: not monitored).
    # The gate splits the paired test's alpha between it and the final test.
    sequential_e_max: float | None = None
    # Sent through the Message Batches API: every call at half price.
    batch: bool = False
    # Why the budget stopped the run, with the calls and dollars spent (None: it did not).
    # Its unsent calls are ``budget`` error outcomes, which `evalgate run --resume` sends.
    budget_stop: str | None = None
    # gate.repeats: adaptive: how each case's repeats were allocated, and from what data.
    allocation: str | None = None
    # gate.repeats: two-stage: how the second stage was chosen (None: a one-stage run).
    stage_one: StageOne | None = None
    max_error_share: float = 0.02
    cases: list[CaseResult]

    def by_id(self) -> dict[str, CaseResult]:
        return {c.id: c for c in self.cases}

    @property
    def errors(self) -> int:
        return sum(1 for c in self.cases if c.error is not None)

    @property
    def incomplete(self) -> bool:
        """Too many errors (or an interrupted run): a gate must not pass on it."""
        if self.interrupted or self.budget_stop is not None:
            return True
        return bool(self.cases) and self.errors / len(self.cases) > self.max_error_share

    def scored(self) -> list[CaseResult]:
        return [c for c in self.cases if c.error is None]


def runs_dir(state_dir: Path) -> Path:
    return state_dir / "runs"


# A run file's JSON longer than this is written gzip-compressed (a run of 20,000 cases is
# 13 MB of JSON, 2 MB compressed); a shorter one stays plain JSON, to read as it is.
COMPRESS_OVER = 1 << 20
# How large a compressed run file may grow when read: far above any real run (a run of
# 20,000 cases is 13 MB), far below what would exhaust a runner's memory.
MAX_RUN_BYTES = 1 << 30
_GZIP_MAGIC = b"\x1f\x8b"
# How a plain run file starts: its first field (a compressed one starts with gzip's magic).
RUN_HEAD = re.compile(rb'\s*\{\s*"schema_version"\s*:')


def starts_as_run(path: Path) -> bool:
    """Whether ``path`` is a file that starts as a run file does, plain or compressed: a look at
    its first bytes, so that a gate of two run files never loads other harnesses' readers."""
    try:
        with path.open("rb") as raw:
            head = raw.read(256)
    except OSError:
        return False
    return head.startswith(_GZIP_MAGIC) or RUN_HEAD.match(head) is not None


# Where a run file written a case a line starts its cases: the head (the run's own fields)
# ends the first line, each case is a line of its own (compact JSON has no raw line break),
# and the last line closes the list. Still one JSON document, so any JSON reader reads it.
_CASES_START = b',"cases":['
_CASES_END = b"]}"


def run_json_chunks(run: Run) -> Iterator[str]:
    """The run as compact JSON, a case a line: no indentation, and in each case the fields at
    their defaults left out (reading fills them in again). The file is never built whole in
    memory, nor read whole (see :func:`read_run`); the run's own fields are all written,
    defaults too (``schema_version`` is one)."""
    head = run.model_dump_json(exclude={"cases"})
    yield head[:-1] + _CASES_START.decode() + "\n"
    for i, case in enumerate(run.cases):
        yield ("," if i else "") + case.model_dump_json(exclude_defaults=True) + "\n"
    yield _CASES_END.decode()


def write_run(run: Run, path: Path) -> None:
    """Write ``run`` to ``path`` (atomically): plain JSON, or gzip once past COMPRESS_OVER."""
    tmp = path.with_name(path.name + ".tmp")
    pending: list[bytes] = []
    size = 0
    with tmp.open("wb") as raw:
        sink: Any = None
        for chunk in run_json_chunks(run):
            data = chunk.encode("utf-8")
            if sink is None:
                pending.append(data)
                size += len(data)
                if size <= COMPRESS_OVER:
                    continue
                # No name, mtime 0: the same run gives the same bytes.
                sink = gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=1, mtime=0)
                sink.write(b"".join(pending))
                pending = []
            else:
                sink.write(data)
        if sink is None:
            raw.write(b"".join(pending))
        else:
            sink.close()
    tmp.replace(path)


def save_run(run: Run, state_dir: Path) -> Path:
    folder = runs_dir(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run.name}.json"
    write_run(run, path)
    return path


def _inflated(path: Path) -> Iterator[bytes]:
    """A run file's bytes as UTF-8 JSON, a piece at a time, whichever form it was written in
    (``ValueError`` for a broken compressed file; ``OSError`` as reading raises it)."""
    with path.open("rb") as raw:
        first = raw.read(1 << 16)
        if not first.startswith(_GZIP_MAGIC):
            while first:
                yield first
                first = raw.read(1 << 16)
            return
        inflate = zlib.decompressobj(wbits=31)  # 31: a gzip header
        total = 0
        data = first
        while data:
            try:
                out = inflate.decompress(data, 1 << 20)
                while True:
                    total += len(out)
                    if total > MAX_RUN_BYTES:
                        raise ValueError(
                            f"the run file is over {MAX_RUN_BYTES >> 20} MiB uncompressed"
                        )
                    yield out
                    if not inflate.unconsumed_tail:
                        break
                    out = inflate.decompress(inflate.unconsumed_tail, 1 << 20)
            except zlib.error as exc:
                raise ValueError(f"the compressed run file is damaged ({exc})") from None
            if inflate.eof:
                break
            data = raw.read(1 << 16)
        if not inflate.eof:
            raise ValueError("the compressed run file is cut short")


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The lines of the pieces, each with its line break."""
    rest = b""
    for chunk in chunks:
        rest += chunk
        start = 0
        while (end := rest.find(b"\n", start)) >= 0:
            yield rest[start : end + 1]
            start = end + 1
        rest = rest[start:]
    if rest:
        yield rest


def run_json(data: bytes) -> bytes:
    """A run file's bytes as UTF-8 JSON, whichever form it was written in (``ValueError`` for
    a broken compressed file or text that is not UTF-8). Bytes, not text: pydantic reads them
    as they are, and a str of a large run would hold a second copy while it is parsed."""
    if data.startswith(_GZIP_MAGIC):
        inflate = zlib.decompressobj(wbits=31)  # 31: a gzip header
        try:
            data = inflate.decompress(data, MAX_RUN_BYTES)
        except zlib.error as exc:
            raise ValueError(f"the compressed run file is damaged ({exc})") from None
        if inflate.unconsumed_tail:
            raise ValueError(f"the run file is over {MAX_RUN_BYTES >> 20} MiB uncompressed")
        if not inflate.eof:
            raise ValueError("the compressed run file is cut short")
    data.decode("utf-8")  # the check alone: the text is not kept
    return data


def run_text(data: bytes) -> str:
    """A run file's bytes as JSON text, whichever form it was written in (see run_json)."""
    return run_json(data).decode("utf-8")


def parse_run(data: bytes) -> Run:
    """A run from a run file's bytes: ``ValueError`` (a ``ValidationError`` among them) if it
    is not one."""
    return Run.model_validate_json(run_json(data))


class _NotByLine(Exception):
    """The file is not in the case-a-line form: it is read whole."""


def _by_line(lines: Iterator[bytes], head_only: bool) -> Run:
    """A run file of the case-a-line form, a case at a time: the whole text is never held
    (a run of 20,000 cases is 13 MB of it), only each case's line while it is read."""
    first = next(lines, b"").rstrip(b"\n")
    if not first.endswith(_CASES_START):
        raise _NotByLine(first)
    first.decode("utf-8")
    run = Run.model_validate_json(first + _CASES_END)
    if head_only:
        return run
    cases = run.cases
    for line in lines:
        line = line.rstrip(b"\n")
        if line == _CASES_END:
            if next(lines, None) is not None:
                raise ValueError("the run file goes on after its last case")
            return run
        if cases:
            if not line.startswith(b","):
                raise ValueError(f"case {len(cases) + 1} is not separated from the one before")
            line = line[1:]
        line.decode("utf-8")
        try:
            cases.append(CaseResult.model_validate_json(line))
        except ValidationError as exc:
            raise ValueError(f"case {len(cases) + 1}: {from_validation(exc)}") from None
    raise ValueError("the run file is cut short")


def _read(path: Path, head_only: bool = False) -> Run:
    """The run in ``path``: ``ValueError`` (a ``ValidationError`` among them), ``OSError``."""
    lines = _lines(_inflated(path))
    with cycles_uncollected():
        try:
            return _by_line(lines, head_only)
        except _NotByLine as exc:
            # An earlier form (one line, or indented): read whole.
            rest = b"".join([exc.args[0], b"\n", *lines])
            return Run.model_validate_json(run_json(rest))


def read_run(path: Path) -> Run:
    try:
        return _read(path)
    except FileNotFoundError:
        raise RunFileError("run file does not exist", where=str(path)) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        found = first.get("input")
        if first["type"] == "json_invalid" and isinstance(found, bytes | str) and not found.strip():
            raise RunFileError(
                "the run file is empty", where=str(path), fix="re-create it with `evalgate run`"
            ) from None
        raise RunFileError(
            f"not a run file of this evalgate version: {from_validation(exc)}",
            where=str(path),
            fix="re-create it with `evalgate run`",
        ) from None
    except (OSError, ValueError) as exc:
        # A directory, a truncated download, a binary file: unreadable, not a crash.
        raise RunFileError(
            f"cannot read the run file: {exc}",
            where=str(path),
            fix="re-create it with `evalgate run`",
        ) from None


def iter_runs(state_dir: Path) -> Iterator[tuple[Path, Run]]:
    folder = runs_dir(state_dir)
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.json")):
        try:
            yield path, read_run(path)
        except RunFileError:
            continue


class _RunHead(BaseModel):
    """What choosing the latest run reads of each file: its cases are parsed, never built."""

    model_config = ConfigDict(extra="ignore")

    created_at: datetime
    prompt: PromptInfo
    suite: str = ""
    shard: str | None = None
    limited_to: int | None = None


def _head(path: Path) -> _RunHead:
    """A run file's head: in the case-a-line form its first line alone is inflated and read."""
    lines = _lines(_inflated(path))
    try:
        run = _by_line(lines, head_only=True)
        return _RunHead.model_validate(run, from_attributes=True)
    except _NotByLine as exc:
        rest = b"".join([exc.args[0], b"\n", *lines])
        return _RunHead.model_validate_json(run_json(rest))


def _newest(state_dir: Path, version: str, suite: str | None = None) -> Run | None:
    """The newest readable run (of prompt ``version``, when given), building only that one:
    each file's head is read first, and the files are tried newest first (the first of equals
    in name order, as ``max`` over ``iter_runs`` would pick)."""
    folder = runs_dir(state_dir)
    if not folder.is_dir():
        return None
    heads: list[tuple[datetime, bool, Path]] = []
    for path in sorted(folder.glob("*.json")):
        try:
            head = _head(path)
        except (OSError, ValueError):
            continue
        if suite is not None and head.suite != suite:
            continue
        if not version or head.prompt.name == version:
            # Of runs made at one time, the whole one first: `merge` dates the merged run
            # as its last shard.
            whole = head.shard is None and head.limited_to is None
            heads.append((head.created_at, whole, path))
    for *_, path in sorted(heads, key=lambda h: (h[0], h[1]), reverse=True):
        try:
            run = read_run(path)
        except RunFileError:
            continue
        if not version or run.prompt.name == version:
            return run
    return None


def _not_foreign(path: Path) -> None:
    """Refuse another harness's results where only evalgate runs are read (a run file, told by
    its first bytes, loads no other harness's reader)."""
    if starts_as_run(path):
        return
    from evalgate.foreign import is_foreign

    if is_foreign(path):
        raise RunFileError(
            "another harness's results, where an evalgate run is read",
            where=str(path),
            fix="gate them against a baseline of the same harness: "
            "`evalgate gate --baseline A --candidate B`",
        )


def journal_for(ref: str, state_dir: Path) -> Path | None:
    """The killed run's journal ``ref`` names: its path, or its run's name where no saved run
    has that name (what a report of it says to resume, `evalgate run VERSION --resume NAME`);
    ``None`` when ``ref`` names no journal. :func:`find_run` reads runs by the same rule."""
    from evalgate.runs.journal import journal_path

    path = Path(ref)
    if path.suffix == ".jsonl" and path.exists():
        return path
    if (path.suffix == ".json" and path.exists()) or (runs_dir(state_dir) / f"{ref}.json").exists():
        return None
    if ref == "latest" or ref.startswith("latest:") or path.name != ref or ref in ("", ".", ".."):
        # `latest:` is a lookup over saved runs, and a name is one file of the journal folder:
        # a committed `.evalgate/journal/latest:v1.jsonl` or a `../` reaches nothing.
        return None
    journal = journal_path(state_dir, ref)
    return journal if journal.is_file() else None


def find_run(ref: str, state_dir: Path, suite: str | None = None) -> Run:
    """A run by file path (a run file, or a killed run's journal), by name (a saved run's, or
    a killed run's journal's), by unique name prefix, or ``latest:VERSION`` (of ``suite`` when
    it is given)."""
    path = Path(ref)
    if path.suffix == ".json" and path.exists():
        if path.is_file():
            _not_foreign(path)
        return read_run(path)
    journal = journal_for(ref, state_dir)
    if journal is not None:
        from evalgate.runs.journal import read_journal  # a killed run's journal

        return read_journal(journal)
    folder = runs_dir(state_dir)
    exact = folder / f"{ref}.json"
    if exact.exists():
        return read_run(exact)
    if path.is_file():
        # A file by any other name (a downloaded artefact saved as `baseline`, say).
        _not_foreign(path)
        return read_run(path)
    candidates = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if ref.startswith("latest:") or ref == "latest":
        version = ref.partition(":")[2]
        latest = _newest(state_dir, version, suite)
        if latest is not None:
            return latest
        if suite is not None and _newest(state_dir, version) is not None:
            raise RunFileError(
                f"no saved run of prompt {version!r} in suite {suite!r}"
                if version
                else f"no saved run of suite {suite!r}",
                fix=f"make one with `evalgate run {version or 'VERSION'} --suite {suite}`",
            )
        prompts = sorted({r.prompt.name for _, r in iter_runs(state_dir)})
        close = did_you_mean(version, prompts) if version else None
        raise RunFileError(
            f"no saved run of prompt {version!r}" if version else "no saved runs",
            fix=(f"did you mean latest:{close}? " if close else "")
            + (f"saved runs are of prompts {', '.join(prompts)}; or " if prompts else "")
            + "make one with `evalgate run VERSION`",
        )
    matches = [p for p in candidates if p.stem.startswith(ref)]
    if len(matches) == 1:
        return read_run(matches[0])
    if len(matches) > 1:
        names = ", ".join(p.stem for p in matches[:5])
        raise RunFileError(f"{ref!r} matches {len(matches)} runs: {names}", fix="be more specific")
    newest = sorted(candidates, key=lambda p: p.stat().st_mtime, reverse=True)[:3]
    known = f"the newest: {', '.join(p.stem for p in newest)}; " if newest else ""
    raise RunFileError(
        f"no run named {ref!r} in {folder}",
        fix=f"{known}see `evalgate list`, or pass a run file's path or latest:VERSION",
    )
