"""Adaptive rate limiting: the pacing maths with a fake clock (answers worked out by hand), the
shared pacer, and the anthropic backend against the stand-in enforcing a rate limit."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext, Message, Request
from evalgate.backends.ratelimit import Pacer, PaceState, Reading, parse_headers
from evalgate.config.models import ModelSettings
from evalgate.running.execute import Job, execute
from evalgate.runs.schema import Outcome
from evalgate.scorers.base import Score
from tests.support.messages_server import MessagesServer

ROOT = Path(__file__).resolve().parents[2]
MODEL = "claude-haiku-4-5"
NOON = datetime(2025, 6, 1, 12, 0, tzinfo=UTC).timestamp()


def requests_limit(
    per_minute: float | None, remaining: float, reset_in: float = 1.0
) -> dict[str, Reading]:
    return {"requests": Reading(limit=per_minute, remaining=remaining, reset_in_s=reset_in)}


def send_times(state: PaceState, now: float, calls: int) -> list[float]:
    """When ``calls`` calls leave, each sent as soon as the state allows."""
    times = []
    for _ in range(calls):
        now += state.wait(now)
        state.take(now)
        times.append(round(now, 6))
    return times


def seeded(margin: float = 0.0, remaining: float = 4) -> PaceState:
    """A state whose first answer (to a call sent at 0, received at 0.5) reported 600 requests a
    minute (10 a second) with ``remaining`` left: capacity remaining + 1, level ``remaining``."""
    state = PaceState(margin=margin)
    first = state.take(0.0)
    state.observe(0.5, first, 0.0, requests_limit(600, remaining))
    return state


# ---------------------------------------------------------------- the maths, by hand


def test_headers_parse_as_the_api_sends_them() -> None:
    headers = {
        "anthropic-ratelimit-requests-limit": "600",
        "anthropic-ratelimit-requests-remaining": "37",
        "anthropic-ratelimit-requests-reset": "2025-06-01T12:00:03Z",
        "anthropic-ratelimit-input-tokens-remaining": "9000",  # no limit, no reset
        "anthropic-ratelimit-output-tokens-remaining": "lots",  # unreadable: left out
        "anthropic-ratelimit-tokens-remaining": "9000",  # the aggregate: not paced by
    }
    assert parse_headers(headers, NOON) == {
        "requests": Reading(limit=600.0, remaining=37.0, reset_in_s=3.0),
        "input-tokens": Reading(limit=None, remaining=9000.0, reset_in_s=None),
    }
    # a reset already past is 0 seconds away
    late = headers | {"anthropic-ratelimit-requests-reset": "2025-06-01T11:59:59Z"}
    assert parse_headers(late, NOON)["requests"].reset_in_s == 0.0
    assert parse_headers({}, NOON) == {}


def test_no_limit_known_means_no_wait() -> None:
    state = PaceState()
    assert state.wait(5.0) == 0.0
    assert (state.take(5.0), state.take(5.0)) == (1, 2)


def test_a_burst_of_what_remains_then_the_refill_rate() -> None:
    # 4 remain of a bucket of 5, one call's worth is kept in hand: 3 go at once; then one a
    # tenth of a second (600 a minute).
    assert send_times(seeded(), 0.5, 6) == [0.5, 0.5, 0.5, 0.6, 0.7, 0.8]


def test_the_margin_slows_the_pace() -> None:
    # 2%: the bucket refills at 10 / 1.02 a second, so a call every 0.102 s after the burst.
    times = send_times(seeded(margin=0.02), 0.5, 5)
    assert times[:3] == [0.5, 0.5, 0.5]
    assert times[3] == pytest.approx(0.602) and times[4] == pytest.approx(0.704)


def test_an_answer_lowers_the_mirror_to_the_servers_level() -> None:
    state = seeded()
    second, _, _ = (state.take(0.5) for _ in range(3))
    # Another job took 3: the answer to the second call (sent at 0.5) says 0 remained. Then the
    # third and fourth (also sent at 0.5): -2; refill to 0.6: -1. The mirror thought 2.
    state.observe(0.6, second, 0.5, requests_limit(600, 0))
    assert state.buckets["requests"].level == pytest.approx(-1.0)
    assert state.wait(0.6) == pytest.approx(0.3)  # until 2 (a call plus one kept)


def test_an_answer_never_raises_the_mirror() -> None:
    state = seeded()
    second, _, fourth = (state.take(0.5) for _ in range(3))
    # An answer that says more than the mirror holds (it had not yet counted a call sent
    # before its own) is not believed: the mirror keeps its own count, 1 + 0.1 s of refill.
    state.observe(0.6, second, 0.5, requests_limit(600, 4))
    assert state.buckets["requests"].level == pytest.approx(2.0)
    # and an answer older than one already used is stale
    state.observe(0.6, fourth, 0.5, requests_limit(600, 2))
    before = state.buckets["requests"].level
    state.observe(0.6, second, 0.5, requests_limit(600, 0))
    assert state.buckets["requests"].level == before


def test_the_first_answer_gets_no_refill_before_it_came() -> None:
    # 9 remained when the server took the call; it may have been full (refilling nothing)
    # until then, so the mirror starts at 9 when the answer comes, not 9 plus 2 s of refill.
    state = PaceState(margin=0.0)
    first = state.take(0.0)
    state.observe(2.0, first, 0.0, requests_limit(600, 9))
    bucket = state.buckets["requests"]
    assert (bucket.level, bucket.capacity, bucket.t) == (9.0, 10.0, 2.0)


def test_a_429_pauses_every_call_for_its_retry_after() -> None:
    state = seeded()
    state.pause(1.0, 2.5)
    assert state.wait(1.0) == 2.5 and state.wait(3.5) == 0.0
    state.pause(4.0, None)  # no retry-after: counted, no pause
    assert state.rate_limited == 2 and state.wait(4.0) == 0.0


def test_without_a_limit_header_what_remains_is_spread_until_the_reset() -> None:
    # 5 remain and the bucket resets in 10 s: a call every 10 / 5 = 2 s.
    state = PaceState(margin=0.0)
    first = state.take(0.0)
    state.observe(0.0, first, 0.0, requests_limit(None, 5, reset_in=10.0))
    assert send_times(state, 0.0, 3) == [2.0, 4.0, 6.0]


def test_token_limits_pace_by_the_tokens_calls_use() -> None:
    state = PaceState(margin=0.0)
    state.learn(500, 20)
    state.learn(1000, 20)
    assert state.costs["input-tokens"] == pytest.approx(650)  # 500 + 0.3 x (1000 - 500)
    state.learn(500, 20)
    state.costs["input-tokens"] = 500.0
    first = state.take(0.0)
    tokens = {"input-tokens": Reading(limit=60_000, remaining=2000, reset_in_s=1.0)}
    state.observe(0.0, first, 0.0, tokens)
    # 2000 in hand, 500 a call and 500 kept: 3 calls at once, then one per 500 tokens of
    # refill at 1000 a second.
    assert send_times(state, 0.0, 5) == [0.0, 0.0, 0.0, 0.5, 1.0]


def test_a_call_larger_than_the_bucket_waits_for_a_full_bucket() -> None:
    state = PaceState(margin=0.0)
    first = state.take(0.0)  # a call of no input tokens
    state.observe(0.0, first, 0.0, {"input-tokens": Reading(600, 50, 1.0)})  # 10 a second
    state.costs["input-tokens"] = 80.0
    # The bucket holds 50: a call of 80 goes when it is full, leaving -30; the next waits 8 s.
    assert send_times(state, 0.0, 2) == [0.0, 8.0]


# ---------------------------------------------------------------- the pacer, on a fake clock


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def wall(self) -> float:
        return NOON + self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def limit_headers(remaining: int, limit: int = 600) -> dict[str, str]:
    return {
        "anthropic-ratelimit-requests-limit": str(limit),
        "anthropic-ratelimit-requests-remaining": str(remaining),
        "anthropic-ratelimit-requests-reset": "2025-06-01T12:00:01Z",
    }


def test_the_pacer_waits_on_its_clock_and_a_429_holds_everyone() -> None:
    t = FakeTime()
    pacer = Pacer(margin=0.0, clock=t.clock, wall=t.wall, sleep=t.sleep)
    first = pacer.acquire()
    assert (first.number, first.sent_at) == (1, 0.0)
    t.now = 0.2
    pacer.observe(first, limit_headers(2), input_tokens=100, output_tokens=10)
    assert pacer.limits() == ["requests"]
    sent = [pacer.acquire() for _ in range(3)]
    assert [round(s.sent_at, 6) for s in sent] == [0.2, 0.3, 0.4]
    # a 429 seen by any worker holds the next call of every worker for its retry-after
    pacer.rate_limited(sent[-1], limit_headers(0), 1.5)
    assert pacer.acquire().sent_at == pytest.approx(1.9)
    stats = pacer.stats()
    assert (stats.calls, stats.rate_limited) == (5, 1)
    assert stats.waited_s == pytest.approx(0.1 + 0.1 + 1.5)


def test_workers_leave_in_turn_at_the_pace() -> None:
    pacer = Pacer(margin=0.0)
    first = pacer.acquire()
    pacer.observe(first, limit_headers(4, limit=6000))  # 100 a second, 4 in hand
    observed = time.monotonic()  # the pacer's clock
    sent: list[tuple[int, float]] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(4):
            ticket = pacer.acquire()
            with lock:
                sent.append((ticket.number, ticket.sent_at))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sent.sort()
    assert [n for n, _ in sent] == list(range(2, 26))
    times = [at for _, at in sent]
    assert times == sorted(times), "calls leave in the order they were let through"
    # 24 calls with at most 4 in hand when the answer came: the other 20 wait for the refill of
    # 100 a second, so the last leaves at least 0.2 s after it (counted from the answer, not
    # from the first call, which a busy machine may start late while the bucket refills).
    assert times[-1] - observed >= 0.20 - 1e-3


# ---------------------------------------------------------------- against the stand-in


@pytest.fixture
def make_backend(srv: MessagesServer) -> Iterator[Callable[..., AnthropicBackend]]:
    made: list[AnthropicBackend] = []

    def make(**options: Any) -> AnthropicBackend:
        settings = ModelSettings(backend="anthropic", name=MODEL, max_tokens=64, options=options)
        env = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": srv.url}
        backend = AnthropicBackend(settings, BackendContext(base_dir=ROOT, env=env))
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


def jobs(n: int) -> list[Job]:
    system = "Sort the message into booking or other. Reply in JSON."
    return [
        Job(
            i,
            0,
            f"c{i}",
            "booking",
            Request(
                system=system,
                messages=(Message(role="user", content=f"<message>book a service {i}</message>"),),
                model=MODEL,
                max_tokens=64,
            ),
        )
        for i in range(n)
    ]


def accept(expected: object, text: str) -> Score:
    return Score(answer=text, score=1.0, format_ok=True)


def run(backend: AnthropicBackend, n: int, concurrency: int) -> list[Outcome]:
    outcomes, interrupted = execute(jobs(n), backend, accept, concurrency=concurrency)
    assert not interrupted
    return outcomes


def test_adaptive_pacing_avoids_the_429s_fixed_concurrency_gets(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    # 1200 a minute enforced over half-second buckets (10 calls), 16 workers, 40 calls.
    srv.knobs.requests_per_minute = 1200
    srv.knobs.rate_limit_window_s = 0.5
    srv.knobs.latency_s = 0.02
    retry = {"max_attempts": 20, "base_s": 0.05, "cap_s": 0.5}
    seen = {}
    for adaptive in (True, False):
        srv.reset()
        backend = make_backend(adaptive_rate_limit=adaptive, retry=retry)
        outcomes = run(backend, 40, 16)
        assert [o.error for o in outcomes] == [None] * 40
        seen[adaptive] = srv.stats().by_status.get(429, 0)
        assert backend.rate_limited == seen[adaptive]  # the backend counts what it saw
    assert seen[True] <= 2 and seen[False] >= 5, seen


def test_a_429_pauses_every_worker_not_just_its_own(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    srv.knobs.latency_s = 0.02
    srv.knobs.retry_after_s = 0.5
    quiet: dict[bool, int] = {}
    for adaptive in (True, False):
        srv.reset()
        srv.script(["ok", "ok", "429"])  # the third call is refused, retry after 0.5 s
        backend = make_backend(adaptive_rate_limit=adaptive, retry={"base_s": 0.01})
        assert all(o.error is None for o in run(backend, 40, 4))
        log = srv.requests
        refused = next(ex for ex in log if ex.status == 429)
        # calls arriving well inside the retry-after (those in flight at the 429 excepted)
        quiet[adaptive] = sum(1 for ex in log if refused.t + 0.1 < ex.t < refused.t + 0.4)
    assert quiet[True] == 0 and quiet[False] > 0, quiet


def test_streaming_calls_are_paced_by_their_headers_too(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    srv.knobs.requests_per_minute = 600
    srv.knobs.input_tokens_per_minute = 100_000
    backend = make_backend(stream=True)
    assert backend.pacer is not None
    assert all(o.error is None for o in run(backend, 3, 1))
    assert backend.pacer.limits() == ["input-tokens", "requests"]
    # the off switch: no pacer at all
    assert make_backend(adaptive_rate_limit=False).pacer is None
