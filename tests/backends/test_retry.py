"""Retries: the Retrier's policy, and every fault kind through the Anthropic backend and the SDK."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext, Message, Request
from evalgate.backends.retry import RETRYABLE, Attempt, Retrier, RetryPolicy
from evalgate.config.models import ModelSettings
from tests.support.messages_server import Knobs, MessagesServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bike-shop"
MODEL = "claude-haiku-4-5"
SYSTEM = "Sort the message into complaint, status, booking, quote, parts or other. Reply in JSON."
FAST = {"base_s": 0.01, "cap_s": 0.05}

# ---------------------------------------------------------------- the policy, without a network


def attempts_of(*kinds: str | None, retry_after: float | None = None) -> Callable[[], Attempt]:
    queue = list(kinds)

    def call() -> Attempt:
        kind = queue.pop(0)
        return Attempt(
            value=None if kind else "answer",
            kind=kind,
            message=f"{kind} fault" if kind else "",
            retry_after_s=retry_after,
        )

    return call


def recording(policy: RetryPolicy, seed: int = 0) -> tuple[Retrier, list[float]]:
    slept: list[float] = []
    return Retrier(policy, sleep=slept.append, rng=random.Random(seed)), slept


def test_success_first_time_does_not_sleep() -> None:
    retrier, slept = recording(RetryPolicy())
    result, attempts = retrier.run(attempts_of(None))
    assert (result.value, attempts, slept) == ("answer", 1, [])


def test_retryable_faults_are_retried_until_an_answer() -> None:
    retrier, slept = recording(RetryPolicy(**FAST))
    result, attempts = retrier.run(attempts_of("rate_limit", "overloaded", "server", None))
    assert (result.value, result.kind, attempts) == ("answer", None, 4)
    assert len(slept) == 3


def test_attempts_run_out_and_the_last_fault_is_kept() -> None:
    retrier, slept = recording(RetryPolicy(max_attempts=3, **FAST))
    result, attempts = retrier.run(attempts_of("timeout", "connection", "malformed", None))
    assert (result.kind, result.message, attempts, len(slept)) == (
        "malformed",
        "malformed fault",
        3,
        2,
    )


@pytest.mark.parametrize("kind", ["bad_request", "auth", "not_found", "command", "other"])
def test_faults_that_another_try_cannot_fix_are_not_retried(kind: str) -> None:
    retrier, slept = recording(RetryPolicy())
    result, attempts = retrier.run(attempts_of(kind, None))
    assert (result.kind, attempts, slept) == (kind, 1, [])
    assert kind not in RETRYABLE


def test_full_jitter_stays_within_the_exponential_cap() -> None:
    policy = RetryPolicy(base_s=0.5, cap_s=4.0)
    retrier, _ = recording(policy, seed=1)
    for attempt in range(8):
        bound = min(4.0, 0.5 * 2**attempt)
        delays = [retrier.delay(attempt, None) for _ in range(200)]
        assert all(0 <= d <= bound for d in delays)
        assert max(delays) > 0.8 * bound  # jitter uses the whole range, not a fixed wait
    assert retrier.delay(0, 7.5) == 7.5  # the server's retry-after wins over a shorter backoff


def test_retry_after_is_honoured_and_too_long_a_one_is_not_waited_for() -> None:
    retrier, slept = recording(RetryPolicy(max_retry_after_s=10, **FAST))
    result, attempts = retrier.run(attempts_of("rate_limit", None, retry_after=3.0))
    assert (result.value, attempts, slept) == ("answer", 2, [3.0])

    retrier, slept = recording(RetryPolicy(max_retry_after_s=10, **FAST))
    result, attempts = retrier.run(attempts_of("rate_limit", None, retry_after=60.0))
    assert (result.kind, attempts, slept) == ("rate_limit", 1, [])
    assert "retry-after 60s exceeds the 10s limit" in result.message


# ---------------------------------------------------------------- through the SDK


@pytest.fixture
def srv(server: MessagesServer) -> Iterator[MessagesServer]:
    server.knobs = Knobs(retry_after_s=0.01, slow_s=3.0)
    server.reset()
    yield server
    assert server.errors == []


@pytest.fixture
def make_backend(srv: MessagesServer) -> Iterator[Callable[..., AnthropicBackend]]:
    made: list[AnthropicBackend] = []

    def make(retry: dict[str, Any] | None = None, **options: Any) -> AnthropicBackend:
        # a generous timeout, so a loaded machine does not add timeouts of its own
        options = {"timeout_s": 5.0, "retry": {**FAST, **(retry or {})}, **options}
        settings = ModelSettings(backend="anthropic", name=MODEL, options=options)
        env = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": srv.url}
        backend = AnthropicBackend(settings, BackendContext(base_dir=Path("."), env=env))
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


REQUEST = Request(
    system=SYSTEM,
    messages=(Message(role="user", content="<message>Can I book my bike in?</message>"),),
    model=MODEL,
    max_tokens=64,
)
RIGHT = {"category": "booking"}

# (server fault, knobs, the error kind evalgate records when it keeps failing)
FAULTS: list[tuple[str, dict[str, Any], str]] = [
    ("rate_limit", {}, "rate_limit"),
    ("overloaded", {}, "overloaded"),
    ("server_error", {}, "server"),
    ("slow", {}, "timeout"),
    ("drop", {}, "connection"),
    ("malformed", {"malformed_kind": "truncated"}, "malformed"),
    ("malformed", {"malformed_kind": "html"}, "malformed"),
    ("stream_error", {}, "overloaded"),
]


def timeout_for(fault: str) -> dict[str, float]:
    """A client timeout well below the stand-in's slow answer (3 s) for the slow fault."""
    return {"timeout_s": 0.3} if fault == "slow" else {}


IDS = [f"{fault}-{knobs.get('malformed_kind', '')}".strip("-") for fault, knobs, _ in FAULTS]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize(("fault", "knobs", "kind"), FAULTS, ids=IDS)
def test_a_fault_then_an_answer_recovers(
    srv: MessagesServer,
    make_backend: Callable[..., AnthropicBackend],
    fault: str,
    knobs: dict[str, Any],
    kind: str,
    stream: bool,
) -> None:
    for name, value in knobs.items():
        setattr(srv.knobs, name, value)
    srv.script([fault, "ok"])
    reply = make_backend(stream=stream, **timeout_for(fault)).complete(REQUEST)
    assert reply.error is None, reply.error
    assert json.loads(reply.text) == RIGHT
    assert reply.attempts == 2
    assert [ex.fault for ex in srv.requests] == [fault, None]


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize(("fault", "knobs", "kind"), FAULTS, ids=IDS)
def test_a_fault_that_persists_is_an_error_with_its_kind(
    srv: MessagesServer,
    make_backend: Callable[..., AnthropicBackend],
    fault: str,
    knobs: dict[str, Any],
    kind: str,
    stream: bool,
) -> None:
    for name, value in knobs.items():
        setattr(srv.knobs, name, value)
    srv.script([fault] * 3)
    backend = make_backend(stream=stream, retry={"max_attempts": 3}, **timeout_for(fault))
    reply = backend.complete(REQUEST)
    assert reply.error_kind == kind
    assert reply.error  # a message for the report
    assert reply.text == ""  # never an answer, so never scored as wrong
    assert reply.attempts == 3 and len(srv.requests) == 3


def slept(backend: AnthropicBackend) -> list[float]:
    """The backend's retry waits, recorded instead of slept (a logical clock: a loaded machine
    cannot make a test of how long it waits fail)."""
    waits: list[float] = []
    backend.retrier = Retrier(backend.retrier.policy, sleep=waits.append)
    return waits


def test_rate_limit_waits_for_retry_after(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    srv.knobs.retry_after_s = 0.4
    srv.script(["rate_limit", "ok"])
    backend = make_backend()
    waits = slept(backend)
    reply = backend.complete(REQUEST)
    assert reply.error is None and reply.attempts == 2
    first, second = srv.requests
    assert (first.status, second.status) == (429, 200)
    # waited retry-after (0.4 s), not the policy's backoff (at most 0.05 s)
    assert waits == [0.4]


def test_retry_after_ms_is_honoured_too(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    srv.knobs.retry_after_s = 0.25
    srv.knobs.retry_after_ms_header = True
    srv.script(["rate_limit", "ok"])
    backend = make_backend()
    waits = slept(backend)
    assert backend.complete(REQUEST).attempts == 2
    assert waits == [0.25]


def test_a_retry_after_beyond_the_limit_is_not_waited_for(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    srv.knobs.retry_after_s = 30
    srv.script(["rate_limit", "ok"])
    backend = make_backend(retry={"max_retry_after_s": 5})
    waits = slept(backend)
    reply = backend.complete(REQUEST)
    assert waits == []
    assert reply.error_kind == "rate_limit" and reply.attempts == 1
    assert "429 rate_limit_error" in (reply.error or "")
    assert "retry-after 30s exceeds the 5s limit" in (reply.error or "")
    assert len(srv.requests) == 1


def test_a_slow_answer_times_out_at_the_clients_timeout(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    srv.script(["slow"])
    started = time.monotonic()
    reply = make_backend(timeout_s=0.2, retry={"max_attempts": 1}).complete(REQUEST)
    elapsed = time.monotonic() - started
    assert reply.error_kind == "timeout" and "Timeout" in (reply.error or "")
    # at the client's timeout: the stand-in would have answered after 3 s; how much later than
    # 0.2 s the client gave up is the machine's load, not evalgate's
    assert elapsed >= 0.2


@pytest.mark.parametrize(
    ("fault", "kind", "text"),
    [
        ("bad_request", "bad_request", "400 invalid_request_error: messages: injected"),
        ("auth", "auth", "401 authentication_error: invalid x-api-key"),
    ],
)
def test_client_errors_are_not_retried(
    srv: MessagesServer,
    make_backend: Callable[..., AnthropicBackend],
    fault: str,
    kind: str,
    text: str,
) -> None:
    srv.script([fault, "ok"])
    reply = make_backend().complete(REQUEST)
    assert (reply.error_kind, reply.attempts, len(srv.requests)) == (kind, 1, 1)
    assert text in (reply.error or "")


def test_the_sdk_does_not_retry_behind_evalgates_back(
    srv: MessagesServer, make_backend: Callable[..., AnthropicBackend]
) -> None:
    srv.script(["server_error", "server_error", "ok"])
    reply = make_backend(retry={"max_attempts": 1}).complete(REQUEST)
    # one attempt means one request: the SDK's own retries are off, so every one is counted
    assert (reply.error_kind, reply.attempts, len(srv.requests)) == ("server", 1, 1)
    assert all(ex.headers.get("x-stainless-retry-count", "0") == "0" for ex in srv.requests)
