"""The hard budget: consulted before each call, it refuses the call that would pass the limit.

A call is admitted only while the calls made (every attempt, retries included) and those in
flight leave room for one more, and while the dollars spent and reserved leave room for this
call's most: its input at about three characters a token (more than any tokenizer gives for
text) and a reply of ``max_tokens``, at the price table's prices. When the call returns, its
reservation is replaced by what it cost. A cached reply is never sent, so it costs nothing and
is never asked about. A call's own retries happen inside the backend and are counted when it
returns: a call admitted with room for one may use a few more attempts than the limit allows.

One guard can have a parent (the action's per-job total across suites): a call must fit both.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from evalgate.analysis.pricing import Usage, cost, price_for
from evalgate.backends.base import Reply, Request
from evalgate.config.models import Budget
from evalgate.errors import ConfigError


def _most(request: Request) -> Usage:
    """The most a call may use: its text at three characters a token, and a full reply."""
    chars = len(request.system) + sum(len(m.content) for m in request.messages)
    return Usage(input_tokens=chars // 3 + 16, output_tokens=request.max_tokens)


@dataclass
class BudgetGuard:
    """The running totals of one budget; thread-safe (the runner's workers share it)."""

    max_calls: int | None
    max_usd: float | None
    # The model the dollars are priced as; None: offline (costs nothing).
    model: str | None
    label: str
    parent: BudgetGuard | None = None
    calls: int = 0
    usd: float = 0.0
    _reserved_calls: int = 0
    _reserved_usd: float = 0.0
    stopped: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(
        cls, budget: Budget, model: str | None, label: str, parent: BudgetGuard | None = None
    ) -> BudgetGuard | None:
        """The guard of a suite's budget (None when it sets no limit and has no parent)."""
        if budget.max_calls is None and budget.max_usd is None and parent is None:
            return None
        if budget.max_usd is not None and model is not None and price_for(model) is None:
            raise ConfigError(
                f"budget.max_usd cannot be kept: {model} is not in the price table, so what a "
                "call costs is unknown",
                fix="set budget.max_calls instead, or add the model's prices",
            )
        return cls(budget.max_calls, budget.max_usd, model, label, parent)

    def _price(self, usage: Usage) -> float:
        if self.model is None:
            return 0.0
        return cost(usage, self.model) or 0.0

    def _room(self, usd: float) -> str | None:
        """Why one more call of at most ``usd`` does not fit (None: it fits). Lock held."""
        if self.max_calls is not None and self.calls + self._reserved_calls + 1 > self.max_calls:
            return f"{self.label}max_calls {self.max_calls} reached"
        if self.max_usd is not None and self.usd + self._reserved_usd + usd > self.max_usd:
            return (
                f"{self.label}max_usd {self.max_usd:g} would be passed by the next call "
                f"(up to ${usd:.4f})"
            )
        return None

    def admit(self, request: Request) -> bool:
        """Reserve room for one call of ``request``; False (and the reason kept) when none."""
        return self._admit(self._price(_most(request)))

    def _admit(self, most: float) -> bool:
        with self._lock:
            # Once a call is refused the run stops: no later, smaller call slips in after it.
            why = self.stopped or self._room(most)
            if why is None and self.parent is not None and not self.parent._admit(most):
                why = self.parent.stopped
            if why is not None:
                self.stopped = self.stopped or why
                return False
            self._reserved_calls += 1
            self._reserved_usd += most
            return True

    def settle(self, request: Request, reply: Reply) -> None:
        """Replace the call's reservation by what it cost: its attempts and its tokens."""
        spent = Usage(
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cache_write_tokens=reply.cache_write_tokens,
            cache_read_tokens=reply.cache_read_tokens,
        )
        self._settle(self._price(_most(request)), self._price(spent), max(1, reply.attempts))

    def _settle(self, most: float, spent: float, attempts: int) -> None:
        with self._lock:
            self._reserved_calls -= 1
            self._reserved_usd -= most
            self.calls += attempts
            self.usd += spent
        if self.parent is not None:
            self.parent._settle(most, spent, attempts)

    def line(self) -> str | None:
        """Why the run stopped, with what it spent; None when the budget never refused."""
        if self.stopped is None:
            return None
        return (
            f"the budget stopped the run: {self.stopped}; {self.calls} calls made, "
            f"${self.usd:.4f} spent by this command"
        )
