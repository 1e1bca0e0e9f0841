"""Adaptive rate limiting: pace calls from the API's rate-limit headers, before 429s arrive.

Every answer of the Messages API (429s included) reports, for each of its limits, the limit per
minute, what remains and when the bucket is full again::

    anthropic-ratelimit-requests-limit: 1200
    anthropic-ratelimit-requests-remaining: 37
    anthropic-ratelimit-requests-reset: 2025-06-01T12:00:03Z

(and the same for ``input-tokens`` and ``output-tokens``). The limits are token buckets refilled
continuously at limit/60 a second, and ``reset`` is when the bucket would be full, not when a
window restarts. Spreading what remains evenly until the reset would leave half of each bucket
unused; so each bucket is mirrored instead, and the pace is its refill rate:

* a call is sent once every mirror holds its cost (1 request; the input and output tokens calls
  have been using) plus what is kept in hand (``margin`` of the bucket, at least one call), and
  is charged to the mirrors as it leaves. Mirrors refill ``margin`` slower than the server, so
  they never hold more than the server's buckets: calls go no faster than the limit allows;
* an answer says what remained when the server received its call; plus the refill since, minus
  the calls sent after it (in order, with the refill between them), that is the server's level
  now. It may only lower a mirror (another job on the same key, tokens above the estimate),
  never raise it: answers overtake each other, and one may not count a call sent before its own;
* a 429's retry-after pauses every worker, not just the one that got it;
* an answer without a ``-limit`` header (a proxy that strips it) falls back to spreading what
  remains evenly until the reset: a pace of time-to-reset / remaining.

``PaceState`` is the maths: it takes the time as an argument and never sleeps, so tests drive it
with a fake clock. ``Pacer`` is what a backend's worker threads share: the state behind a lock,
a first-come-first-served queue of waiting workers, a clock and sleep.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

RESOURCES = ("requests", "input-tokens", "output-tokens")
# How fast a call's estimated token cost follows the latest calls (exponential moving average).
_COST_WEIGHT = 0.3
_EPSILON_S = 1e-6


@dataclass(frozen=True)
class Reading:
    """One limit, as one answer reported it."""

    limit: float | None
    """Per minute (None: not reported)."""
    remaining: float
    reset_in_s: float | None
    """Seconds until the bucket is full (None: not reported)."""


def parse_headers(headers: Mapping[str, str], wall_now: float) -> dict[str, Reading]:
    """The readings in ``anthropic-ratelimit-*`` headers; limits not reported are left out."""
    readings: dict[str, Reading] = {}
    for name in RESOURCES:
        prefix = f"anthropic-ratelimit-{name}-"
        remaining = _number(headers.get(prefix + "remaining"))
        if remaining is None:
            continue
        reset_in: float | None = None
        reset = headers.get(prefix + "reset")
        if reset:
            try:
                reset_in = max(0.0, datetime.fromisoformat(reset).timestamp() - wall_now)
            except ValueError:
                reset_in = None
        limit = _number(headers.get(prefix + "limit"))
        readings[name] = Reading(
            limit=limit if limit and limit > 0 else None,
            remaining=max(0.0, remaining),
            reset_in_s=reset_in,
        )
    return readings


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass
class Bucket:
    """The mirror of one server-side bucket."""

    rate: float
    """Units a second (already slowed by the margin)."""
    capacity: float
    level: float
    """Units at time ``t`` (negative after a call larger than what was left)."""
    t: float
    seen: int
    """The ticket of the answer it was last corrected by (older answers are stale)."""

    def level_at(self, when: float) -> float:
        return min(self.capacity, self.level + self.rate * max(0.0, when - self.t))


@dataclass
class PaceState:
    """The pacing maths. Times are seconds on one monotonic clock, passed in by the caller."""

    margin: float = 0.02
    buckets: dict[str, Bucket] = field(default_factory=dict)
    pause_until: float = -math.inf
    # What one call costs in each bucket: 1 request; tokens learned from usage.
    costs: dict[str, float] = field(default_factory=lambda: {"requests": 1.0})
    # (ticket, time, costs) of calls sent, which answers may not have counted yet (bounded: a
    # call sent thousands of calls ago has been counted by now).
    sent: deque[tuple[int, float, dict[str, float]]] = field(
        default_factory=lambda: deque(maxlen=4096)
    )
    tickets: int = 0
    rate_limited: int = 0

    def kept(self, name: str, bucket: Bucket) -> float:
        """Units kept in hand: ``margin`` of the bucket, and at least one call's cost (the
        server charges a call when it arrives, a moment after the mirror did; while its bucket
        is full, it loses that moment's refill)."""
        return max(self.margin * bucket.capacity, self.costs.get(name, 0.0))

    def wait(self, now: float) -> float:
        """Seconds until the next call may be sent (0: now)."""
        wait = max(0.0, self.pause_until - now)
        for name, bucket in self.buckets.items():
            cost = self.costs.get(name, 0.0)
            if cost <= 0:
                continue
            # A call larger than the bucket waits for a full bucket, then goes.
            need = min(cost + self.kept(name, bucket), bucket.capacity)
            level = bucket.level_at(now)
            if level < need:
                wait = max(wait, (need - level) / bucket.rate)
        # Rounding may leave a wait too small to move the clock: that is no wait.
        return wait if wait > _EPSILON_S else 0.0

    def take(self, now: float) -> int:
        """A call leaves now: charge it to every mirror. Its ticket."""
        # Every estimate, limits not known yet included: answers to come are corrected by it.
        costs = dict(self.costs)
        for name, bucket in self.buckets.items():
            bucket.level = bucket.level_at(now) - costs.get(name, 0.0)
            bucket.t = max(bucket.t, now)
        self.tickets += 1
        self.sent.append((self.tickets, now, costs))
        return self.tickets

    def observe(
        self,
        now: float,
        ticket: int,
        sent_at: float,
        readings: Mapping[str, Reading],
        *,
        charged: bool = True,
    ) -> None:
        """Correct the mirrors by an answer to the call with ``ticket``, sent at ``sent_at``
        (``charged``: the server took the call's cost, as it does unless it answered 429)."""
        # The calls sent after this one, found from the newest back: an answer is seldom more
        # than the calls in flight behind, and ``sent`` holds thousands.
        later: list[tuple[int, float, dict[str, float]]] = []
        own: dict[str, float] = {}
        for entry in reversed(self.sent):
            if entry[0] <= ticket:
                if entry[0] == ticket and charged:
                    own = entry[2]
                break
            later.append(entry)
        later.reverse()
        for name, reading in readings.items():
            old = self.buckets.get(name)
            if old is not None and ticket < old.seen:
                continue  # a later call's answer has already corrected it
            if reading.limit is not None:
                rate = reading.limit / 60.0
                base = reading.remaining
                # A full bucket answers its size less this call's cost.
                capacity = max(reading.remaining + own.get(name, 0.0), old.capacity if old else 0)
            elif reading.reset_in_s:
                # No limit reported: the budget left must last until the reset.
                rate = reading.remaining / reading.reset_in_s
                base, capacity = 0.0, 1.0
            else:
                continue
            if rate <= 0:
                continue
            # The server's level: what remained, then the calls sent after this one, in order,
            # with the refill between them. A new mirror gets no refill before the answer came:
            # the bucket may have been full (refilling nothing) until the server got the call.
            level, t = base, sent_at if old is not None else now
            for _, when, costs in later:
                level = min(capacity, level + rate * max(0.0, when - t)) - costs.get(name, 0.0)
                t = max(t, when)
            level = min(capacity, level + rate * max(0.0, now - t))
            if old is not None:
                level = min(level, old.level_at(now))
            slowed = rate / (1.0 + self.margin)
            self.buckets[name] = Bucket(slowed, capacity, level, now, ticket)

    def learn(self, input_tokens: float, output_tokens: float) -> None:
        """A call's token use (input as the limit counts it: uncached input and cache writes),
        so that later calls wait for about as much."""
        for name, used in (("input-tokens", input_tokens), ("output-tokens", output_tokens)):
            old = self.costs.get(name)
            self.costs[name] = used if old is None else old + _COST_WEIGHT * (used - old)

    def pause(self, now: float, seconds: float | None) -> None:
        """A 429: count it, and hold every call until its retry-after has passed."""
        self.rate_limited += 1
        if seconds is not None and seconds > 0:
            self.pause_until = max(self.pause_until, now + seconds)


@dataclass(frozen=True)
class Ticket:
    """A call sent: what its answer is observed with."""

    number: int
    sent_at: float


@dataclass(frozen=True)
class PacerStats:
    calls: int
    rate_limited: int
    """429s seen."""
    waited_s: float
    """Total time calls waited for the pace or a pause (summed over workers)."""


class Pacer:
    """The pace shared by every worker thread of one backend.

    Waiting workers queue first come, first served; only the head of the queue watches the
    clock, so a call that may go wakes one worker, not all of them.
    """

    def __init__(
        self,
        *,
        margin: float = 0.02,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._state = PaceState(margin=margin)
        self._cond = threading.Condition(threading.Lock())
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self._queued = 0
        self._serving = 0
        self._waited = 0.0

    def acquire(self) -> Ticket:
        """Wait until a call may be sent without running a limit dry; its ticket."""
        with self._cond:
            place = self._queued
            self._queued += 1
            entered = self._clock()
            while self._serving != place:
                self._cond.wait()
            try:
                now = self._clock()
                while (wait := self._state.wait(now)) > 0:
                    # Sleep without the lock: answers (and 429s) update the state meanwhile.
                    self._cond.release()
                    try:
                        self._sleep(wait)
                    finally:
                        self._cond.acquire()
                    now = self._clock()
                number = self._state.take(now)
                self._waited += now - entered
            finally:
                self._serving += 1
                self._cond.notify_all()
        return Ticket(number, now)

    def observe(
        self,
        ticket: Ticket,
        headers: Mapping[str, str],
        *,
        input_tokens: float | None = None,
        output_tokens: float | None = None,
        charged: bool = True,
    ) -> None:
        """An answer (or an error response) to the call with ``ticket``."""
        readings = parse_headers(headers, self._wall())
        with self._cond:
            if readings:
                self._state.observe(
                    self._clock(), ticket.number, ticket.sent_at, readings, charged=charged
                )
            if input_tokens is not None and output_tokens is not None:
                self._state.learn(input_tokens, output_tokens)

    def rate_limited(
        self, ticket: Ticket, headers: Mapping[str, str], retry_after_s: float | None
    ) -> None:
        """A 429: pause every worker for its retry-after."""
        self.observe(ticket, headers, charged=False)
        with self._cond:
            self._state.pause(self._clock(), retry_after_s)

    def limits(self) -> list[str]:
        """The limits it paces by (those the answers so far reported)."""
        with self._cond:
            return sorted(self._state.buckets)

    def stats(self) -> PacerStats:
        with self._cond:
            return PacerStats(
                calls=self._state.tickets,
                rate_limited=self._state.rate_limited,
                waited_s=self._waited,
            )
