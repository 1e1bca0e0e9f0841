"""Retries with exponential backoff and full jitter, honouring the server's retry-after.

evalgate owns retries (the SDKs' own are turned off) so that every attempt is counted, the
policy is the same for every backend, and a CI job cannot hang: total wait is bounded.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

# Faults worth another attempt. A bad request, a bad key or an unknown model is not.
RETRYABLE = frozenset({"rate_limit", "overloaded", "server", "timeout", "connection", "malformed"})


def kind_for_status(status: int) -> str:
    """The fault kind of an HTTP error status, the same for every backend's API."""
    if status == 429:
        return "rate_limit"
    if status == 529:
        return "overloaded"
    if status >= 500 or status in (408, 409):
        return "server"
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    return "bad_request"


class RetryPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(default=6, ge=1, le=20)
    base_s: float = Field(default=0.5, ge=0.0)
    cap_s: float = Field(default=30.0, ge=0.0)
    # A retry-after longer than this is not waited for: the case becomes an error instead.
    max_retry_after_s: float = Field(default=120.0, ge=0.0)


@dataclass
class Attempt:
    """What one try produced: a value, or a fault kind with an optional retry-after."""

    value: object = None
    kind: str | None = None
    message: str = ""
    retry_after_s: float | None = None
    elapsed_s: float = 0.0


@dataclass
class Retrier:
    policy: RetryPolicy
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Full jitter (AWS architecture blog): uniform(0, min(cap, base * 2^attempt))."""
        with self._lock:
            jitter = self.rng.uniform(0, min(self.policy.cap_s, self.policy.base_s * 2**attempt))
        return max(retry_after_s or 0.0, jitter)

    def run(self, call: Callable[[], Attempt]) -> tuple[Attempt, int]:
        """Call until success, a fault that is not retryable, or the attempts run out."""
        for attempt in range(1, self.policy.max_attempts + 1):
            result = call()
            if result.kind is None or result.kind not in RETRYABLE:
                return result, attempt
            if attempt == self.policy.max_attempts:
                return result, attempt
            if (result.retry_after_s or 0.0) > self.policy.max_retry_after_s:
                result.message += (
                    f" (retry-after {result.retry_after_s:.0f}s exceeds the "
                    f"{self.policy.max_retry_after_s:.0f}s limit)"
                )
                return result, attempt
            self.sleep(self.delay(attempt - 1, result.retry_after_s))
        raise AssertionError("unreachable")
