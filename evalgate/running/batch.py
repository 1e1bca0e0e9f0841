"""Message batches: a whole run sent as one batch, at half the price, for runs that need no quick
answer (baselines, nightly noise runs, releases).

``running.suite.run_suite`` calls ``BatchExecutor.execute`` instead of ``running.execute.execute``. It builds every
request, submits one batch, and saves the batch's id in ``<state dir>/batches/<run key>.json``,
where the run key is a hash of the suite and every request (prompt, cases, settings, repeats):
a restarted job finds the file and resumes polling that batch instead of paying twice. It polls
with a progress line, maps each result back to its job by custom_id (results come in any order),
scores the replies, and returns the outcomes ``execute`` would. A request that errored, expired
or was canceled is an error outcome with its reason: never wrong, never dropped. The state file
is removed once every reply is scored, so the next run with the same key starts a new batch.

Batches have no response cache (a cached reply would measure nothing on a noise run anyway) and
no early stop. A backend offers batches by declaring ``supports_batch = True`` and implementing
``BatchBackend``; its SDK stays in its own module.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from evalgate.backends.base import Reply, Request
from evalgate.backends.batch import BatchBackend, BatchGone, BatchStatus
from evalgate.errors import UserError
from evalgate.running.execute import Job, Progress, ProgressCallback, score_reply
from evalgate.runs.schema import Outcome
from evalgate.scorers.base import Scorer

_FIRST_POLL_S = 5.0


def custom_id(position: int, job: Job) -> str:
    """A stable id of a job in its run: a hash of its position and case id (the API allows
    1 to 64 of ``[a-zA-Z0-9_-]``; a hash also keeps case ids out of the batch's metadata)."""
    return hashlib.sha256(f"{position}\0{job.case_id}".encode()).hexdigest()[:32]


def run_key(label: str, backend: str, items: Sequence[tuple[str, Request]]) -> str:
    """A hash of everything that decides the batch's answers: the suite, the backend, and every
    request (prompt, case, model settings), once per repeat."""
    digest = hashlib.sha256(f"{label}\0{backend}\0".encode())
    for cid, request in items:
        digest.update(f"{cid}\0{request.model_dump_json()}\n".encode())
    return digest.hexdigest()[:32]


class BatchState(BaseModel):
    """The state file: which batch this run is waiting for."""

    model_config = ConfigDict(extra="forbid")

    batch_id: str
    run_key: str
    backend: str
    requests: int
    submitted_at: datetime


class BatchExecutor:
    def __init__(
        self,
        backend: BatchBackend,
        folder: Path,
        *,
        poll_s: float = 30.0,
        concurrency: int = 16,
        sleep: Callable[[float], None] = time.sleep,
        on_status: Callable[[str], object] | None = None,
    ) -> None:
        self.backend = backend
        self.folder = folder
        self.poll_s = poll_s
        self.concurrency = concurrency
        self.sleep = sleep
        self.on_status = on_status or (lambda _: None)

    @classmethod
    def for_backend(
        cls,
        backend: object,
        folder: Path,
        *,
        concurrency: int = 16,
        on_status: Callable[[str], object] | None = None,
    ) -> BatchExecutor:
        """A runner for a backend that offers batches (polling at its ``batch_poll_s``), or a
        one-line error saying it has none."""
        if not getattr(backend, "supports_batch", False) or not isinstance(backend, BatchBackend):
            name = getattr(backend, "name", type(backend).__name__)
            raise UserError(
                f"the {name} backend has no batch API",
                fix="drop --batch (and model.options.batch), or use backend: anthropic",
            )
        poll_s = float(getattr(backend, "batch_poll_s", 30.0))
        return cls(backend, folder, poll_s=poll_s, concurrency=concurrency, on_status=on_status)

    def state_path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def execute(
        self,
        jobs: Sequence[Job],
        scorer: Scorer,
        *,
        label: str,
        on_progress: ProgressCallback | None = None,
    ) -> tuple[list[Outcome], bool]:
        """Every job through one batch; one outcome per job, in order (never interrupted: a
        Ctrl-C leaves the batch running and the state file in place, and raises)."""
        if not jobs:
            return [], False
        items = [(custom_id(i, job), job.request) for i, job in enumerate(jobs)]
        key = run_key(label, self.backend.name, items)
        path = self.state_path(key)
        started = time.perf_counter()
        status = self._resume(path) if path.exists() else None
        if status is None:
            status = self.backend.submit_batch(items)
            self._save(
                path,
                BatchState(
                    batch_id=status.id,
                    run_key=key,
                    backend=self.backend.name,
                    requests=len(items),
                    submitted_at=datetime.now(UTC),
                ),
            )
            self.on_status(
                f"submitted batch {status.id} of {len(items)} requests (half price; state in "
                f"{path}: a restarted job resumes it)"
            )
        progress = Progress(total=len(jobs), started=started)
        polls = 0
        try:
            while status.phase != "ended":
                self._report(progress, status, on_progress)
                # Soon at first (a small batch may end in seconds), then every poll_s.
                self.sleep(min(self.poll_s, _FIRST_POLL_S * 2**polls))
                polls += 1
                status = self.backend.batch_status(status.id)
        except KeyboardInterrupt:
            self.on_status(
                f"interrupted: batch {status.id} keeps running; run the same command again to "
                f"resume polling it (state in {path})"
            )
            raise
        self._report(progress, status, on_progress)
        replies = self._map(status.id, items)
        outcomes = self._score(jobs, replies, scorer)
        path.unlink(missing_ok=True)
        self.on_status(
            f"batch {status.id} ended: {status.succeeded} succeeded, {status.errored} errored, "
            f"{status.expired} expired, {status.canceled} canceled"
        )
        return outcomes, False

    def _resume(self, path: Path) -> BatchStatus | None:
        try:
            state = BatchState.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError) as exc:
            raise UserError(
                f"cannot read the batch state file: {exc}",
                where=str(path),
                fix="delete it to submit the batch again (paying again if the old one ran)",
            ) from None
        try:
            status = self.backend.batch_status(state.batch_id)
        except BatchGone as exc:
            self.on_status(f"batch {state.batch_id} is gone ({exc.what}); submitting it again")
            path.unlink(missing_ok=True)
            return None
        self.on_status(f"resuming batch {state.batch_id} (state in {path})")
        return status

    def _save(self, path: Path, state: BatchState) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(state.model_dump_json(indent=1), encoding="utf-8")
        tmp.replace(path)

    def _report(
        self, progress: Progress, status: BatchStatus, on_progress: ProgressCallback | None
    ) -> None:
        progress.done = status.total - status.processing
        progress.errors = status.failed
        if on_progress is not None:
            on_progress(progress)

    def _map(self, batch_id: str, items: Sequence[tuple[str, Request]]) -> list[Reply]:
        """The replies in job order; a job without a result is an error, never dropped."""
        wanted = {cid for cid, _ in items}
        found: dict[str, Reply] = {}
        stray = 0
        for cid, reply in self.backend.batch_results(batch_id):
            if cid in wanted:
                found[cid] = reply
            else:
                stray += 1
        if stray:
            self.on_status(f"warning: batch {batch_id} returned {stray} results of no request")
        missing = Reply(
            error=f"batch {batch_id} returned no result for this request",
            error_kind="other",
        )
        return [found.get(cid, missing) for cid, _ in items]

    def _score(self, jobs: Sequence[Job], replies: list[Reply], scorer: Scorer) -> list[Outcome]:
        # In threads: a judge scorer makes its own calls for each reply.
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            pairs = zip(jobs, replies, strict=True)
            return list(pool.map(lambda pair: score_reply(pair[0], pair[1], scorer), pairs))
