"""The door every request of a pull-request or fork job goes out through: the holdout guard.

:func:`guarded` wraps a backend so that each request passes :class:`LeakGuard` before the
backend sees it. A request that carries a holdout case is not sent: it comes back as a Reply
with ``error_kind="holdout"`` (an error outcome, never scored), and from then on nothing more
of the job is sent. Inside an agent loop, the tools' results and a tool command's stdin pass
the same guard (through :data:`evalgate.backends.agent.OUTGOING`) before they go. Token counts
and message batches are sent too, so they are checked the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from evalgate.backends.agent import OUTGOING
from evalgate.backends.base import Backend, Reply, Request
from evalgate.cases.leakguard import LeakGuard, Part, request_parts, strings
from evalgate.errors import BackendError


class GuardedBackend:
    """A backend whose requests pass the guard first; everything else is the backend's."""

    def __init__(self, inner: Backend, guard: LeakGuard, role: str) -> None:
        self._inner = inner
        self._guard = guard
        self._role = role

    def _parts(self, request: Request) -> list[Part]:
        parts = request_parts(request, self._role)
        if self._inner.name == "command":
            # The command backend hands the program the case's input values as well.
            case = request.case.get("id")
            of = f" of case {case}" if case else ""
            parts.append((f"the case input{of}", list(strings(request.case.get("input")))))
        return parts

    def complete(self, request: Request) -> Reply:
        refusal = self._guard.refusal(self._parts(request))
        if refusal is not None:
            return Reply(error=refusal, error_kind="holdout")
        case = request.case.get("id")
        of = f" of case {case}" if case else ""

        def outgoing(what: str, text: str) -> str | None:
            return self._guard.check(f"{what}{of}", text)

        token = OUTGOING.set(outgoing)
        try:
            return self._inner.complete(request)
        finally:
            OUTGOING.reset(token)

    def _count_tokens(self, request: Request) -> int:
        refusal = self._guard.refusal(self._parts(request))
        if refusal is not None:
            raise BackendError(f"tokens not counted ({refusal})")
        count: Callable[[Request], int] = self._inner.count_tokens  # type: ignore[attr-defined]
        return count(request)

    def _submit_batch(self, items: Sequence[tuple[str, Request]]) -> Any:
        for _, request in items:
            if self._guard.refusal(self._parts(request)) is not None:
                leak = self._guard.leak()
                assert leak is not None
                raise leak
        return self._inner.submit_batch(items)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name == "count_tokens":
            return self._count_tokens
        if name == "submit_batch":
            return self._submit_batch
        return value


def guarded(backend: Backend, guard: LeakGuard | None, role: str = "model") -> Backend:
    """``backend`` behind ``guard`` (as it is when there is no guard)."""
    if guard is None:
        return backend
    return cast(Backend, GuardedBackend(backend, guard, role))
