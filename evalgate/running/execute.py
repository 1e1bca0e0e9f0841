"""Sends cases through a Backend with bounded concurrency, scores every reply, loses nothing.

A failed call comes back from the backend as a Reply with ``error`` set and is kept as an
error outcome: never scored as wrong, never dropped. Ctrl-C stops cleanly: what was scored is
kept and the rest is recorded as interrupted.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol

from evalgate.backends.base import Backend, Reply, Request
from evalgate.errors import BackendError, UserError
from evalgate.runs.resume import INTERRUPTED, UNSENT
from evalgate.runs.schema import Outcome
from evalgate.scorers.base import Scorer, ScoringError

# Errors that say the whole run is misconfigured: stop before flooding the API.
FATAL_KINDS = frozenset({"bad_request", "auth", "not_found"})


@dataclass(frozen=True)
class Job:
    case_index: int
    repeat: int
    case_id: str
    expected: object
    request: Request
    case_input: dict[str, object] | None = None
    # False for holdout cases: their replies never reach the (unencrypted) response cache.
    cacheable: bool = True


class Cache(Protocol):
    def get(self, request: Request, backend: str) -> Reply | None: ...
    def put(self, request: Request, backend: str, reply: Reply) -> None: ...


class Budget(Protocol):
    """Asked before each call the backend is sent (running/budget.py); told what it cost."""

    def admit(self, request: Request) -> bool: ...
    def settle(self, request: Request, reply: Reply) -> None: ...


# What a job the budget had no room for comes back as: an error outcome, never sent.
NOT_SENT = Reply(error="not sent: the run's budget had no room for this call", error_kind="budget")


@dataclass
class Progress:
    total: int
    done: int = 0
    errors: int = 0
    cache_hits: int = 0
    started: float = 0.0
    # Jobs not sent (the budget had no room, or the run was stopped): not errors, and not done.
    unsent: int = 0


ProgressCallback = Callable[[Progress], None]


def score_reply(job: Job, reply: Reply, scorer: Scorer, cached: bool = False) -> Outcome:
    usage = dict(
        input_tokens=reply.input_tokens,
        output_tokens=reply.output_tokens,
        cache_write_tokens=reply.cache_write_tokens,
        cache_read_tokens=reply.cache_read_tokens,
        latency_s=reply.latency_s,
        stop_reason=reply.stop_reason,
        attempts=reply.attempts,
        cached=cached,
    )
    if reply.error is not None:
        # An agent's steps before the failure are kept: the report shows how far it got.
        return Outcome(
            error=reply.error, error_kind=reply.error_kind or "other", steps=reply.steps, **usage
        )
    extra: dict[str, object] = {}
    if getattr(scorer, "needs_input", False):
        extra["case_input"] = job.case_input
    if getattr(scorer, "needs_trajectory", False):
        extra["trajectory"] = reply.steps
    try:
        score = scorer(job.expected, reply.text, **extra)
    except ScoringError as exc:
        return Outcome(
            text=reply.text, error=str(exc), error_kind=exc.kind, steps=reply.steps, **usage
        )
    except UserError as exc:
        # A bad per-case regex or a scorer's bad return value: say which case, among hundreds.
        raise UserError(
            f"the scorer failed on case {job.case_id!r}: {exc.what}", where=exc.where, fix=exc.fix
        ) from None
    except Exception as exc:
        raise UserError(
            f"the scorer failed on case {job.case_id!r}: {type(exc).__name__}: {exc}",
            # A holdout reply never goes into a message (its job id is hashed: "h-...").
            fix="fix the scorer"
            + ("" if job.case_id.startswith("h-") else "; the reply was: " + reply.text[:200]),
        ) from exc
    return Outcome(
        text=reply.text,
        answer=score.answer,
        score=score.score,
        format_ok=score.format_ok,
        reason=score.reason,
        judge_calls=score.judge_calls,
        judge_input_tokens=score.judge_input_tokens,
        judge_output_tokens=score.judge_output_tokens,
        steps=reply.steps,
        **usage,
    )


def _call(
    backend: Backend, job: Job, cache: Cache | None, budget: Budget | None = None
) -> tuple[Reply, bool]:
    if not job.cacheable:
        cache = None
    if cache is not None:
        hit = cache.get(job.request, backend.name)
        if hit is not None:
            return hit, True
    if budget is not None and not budget.admit(job.request):
        return NOT_SENT.model_copy(), False
    started = time.perf_counter()
    reply = backend.complete(job.request)
    if budget is not None:
        budget.settle(job.request, reply)
    if not reply.latency_s:
        reply.latency_s = time.perf_counter() - started
    if cache is not None and reply.error is None:
        cache.put(job.request, backend.name, reply)
    return reply, False


def execute(
    jobs: Sequence[Job],
    backend: Backend,
    scorer: Scorer,
    *,
    concurrency: int,
    cache: Cache | None = None,
    on_progress: ProgressCallback | None = None,
    stop: threading.Event | None = None,
    stop_when: Callable[[Job, Outcome], bool] | None = None,
    budget: Budget | None = None,
    on_outcome: Callable[[int, Outcome], None] | None = None,
) -> tuple[list[Outcome], bool]:
    """Run every job; returns one outcome per job (same order) and whether it was interrupted.

    The first job is sent alone: a bad model name or key fails the run after one request
    instead of one per case. ``stop_when`` sees each scored job and may end the run early (a
    sequential test that has decided): jobs not yet sent then come back as ``skipped``
    outcomes, which the pipeline leaves out, and the run is not counted as interrupted.
    ``budget`` is asked before each call (a cached reply is no call): a call it refuses comes
    back as a ``budget`` error outcome, not sent. ``on_outcome`` is told each outcome (by its
    job's index) as it is scored, in the calling thread (runs/journal.py writes it down).

    Kept whole: the first call, the pool, the interrupt and the early stop share the running
    futures, the completion queue and the stop events; split up, that state would be passed
    between functions.
    """
    outcomes: list[Outcome | None] = [None] * len(jobs)
    progress = Progress(total=len(jobs), started=time.perf_counter())
    stop = stop or threading.Event()

    def work(index: int) -> Outcome:
        # Calls and scoring both happen in the worker: a judge scorer makes calls too.
        job = jobs[index]  # made when asked for (running/suite.py's Jobs): ask once
        reply, cached = _call(backend, job, cache, budget)
        return score_reply(job, reply, scorer, cached)

    decided = threading.Event()

    def record(index: int, outcome: Outcome) -> None:
        outcomes[index] = outcome
        if on_outcome is not None:
            on_outcome(index, outcome)
        if stop_when is not None and not decided.is_set() and stop_when(jobs[index], outcome):
            decided.set()
        if outcome.error_kind in UNSENT:
            progress.unsent += 1
        else:
            progress.done += 1
            progress.errors += outcome.error is not None
            progress.cache_hits += outcome.cached
        if on_progress is not None:
            on_progress(progress)

    interrupted = False
    if jobs:
        first = jobs[0]
        reply, cached = _call(backend, first, cache, budget)
        if reply.error is not None and reply.error_kind in FATAL_KINDS:
            raise BackendError(
                f"the API refused the first request (case {first.case_id!r}): {reply.error}",
                fix="check the model name, settings and key before running the suite",
            )
        record(0, score_reply(first, reply, scorer, cached))
    pending_index = 1
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="evalgate") as pool:
        running: dict[Future[Outcome], int] = {}
        # Finished futures announce themselves here: cheaper than polling them all with wait().
        completed: queue.SimpleQueue[Future[Outcome]] = queue.SimpleQueue()
        try:
            while pending_index < len(jobs) or running:
                while pending_index < len(jobs) and len(running) < concurrency * 2:
                    if stop.is_set() or decided.is_set():
                        break
                    future = pool.submit(work, pending_index)
                    future.add_done_callback(completed.put)
                    running[future] = pending_index
                    pending_index += 1
                if not running:
                    break
                if decided.is_set():
                    pending_index = len(jobs)  # send nothing more; let in-flight calls finish
                    # Jobs queued in the pool but not started are not in flight: unsend them.
                    for future in [f for f in running if f.cancel()]:
                        del running[future]
                    if not running:
                        break
                try:
                    finished = completed.get(timeout=0.5)
                except queue.Empty:
                    continue
                if finished in running:  # a cancelled future announces itself too
                    record(running.pop(finished), finished.result())
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            # Calls already in flight are paid for: wait briefly and keep their replies.
            in_flight = [f for f in running if not f.cancel()]
            done, _ = wait(in_flight, timeout=30)
            for future in done:
                record(running[future], future.result())
        if stop.is_set():
            interrupted = True
    final: list[Outcome] = []
    for outcome in outcomes:
        if outcome is not None:
            final.append(outcome)
        elif decided.is_set() and not interrupted:
            final.append(
                Outcome(error="not sent: the run had already decided", error_kind="skipped")
            )
        else:
            final.append(INTERRUPTED.model_copy())
    return final, interrupted
