"""What a backend offers for message batches: submit, poll, fetch results (``BatchBackend``).

The runner that sends a whole run as one batch, resumes it and scores its replies is
``evalgate.running.batch``; a backend only speaks its API here, and its SDK stays in its module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, runtime_checkable

from evalgate.backends.base import Reply, Request
from evalgate.errors import BackendError

BatchPhase = Literal["in_progress", "canceling", "ended"]


@dataclass(frozen=True)
class BatchStatus:
    id: str
    phase: BatchPhase
    processing: int = 0
    succeeded: int = 0
    errored: int = 0
    canceled: int = 0
    expired: int = 0

    @property
    def total(self) -> int:
        return self.processing + self.succeeded + self.errored + self.canceled + self.expired

    @property
    def failed(self) -> int:
        return self.errored + self.canceled + self.expired


class BatchGone(BackendError):
    """The API does not know the batch (deleted, or made with another key or workspace)."""


@runtime_checkable
class BatchBackend(Protocol):
    """What a backend offers for batches."""

    name: ClassVar[str]
    supports_batch: ClassVar[bool]

    def submit_batch(self, items: Sequence[tuple[str, Request]]) -> BatchStatus: ...

    def batch_status(self, batch_id: str) -> BatchStatus: ...

    def batch_results(self, batch_id: str) -> list[tuple[str, Reply]]:
        """(custom_id, reply) for every result; failed results are replies with ``error``."""
        ...
