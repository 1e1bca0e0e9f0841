"""The sequential monitor: a candidate run stopped early once the mixture e-value of the
broken and fixed cases so far reaches the suite's threshold."""

from __future__ import annotations

from evalgate.analysis.sequential import sequential_e_value
from evalgate.config.models import GatePolicy
from evalgate.gate.pairing import _passed
from evalgate.gate.routes import route_weights
from evalgate.runs.schema import Run


def sequential_threshold(policy: GatePolicy, others: int) -> float:
    """The e-value at which a monitored run stops with a certain fail.

    The paired test's alpha share ``alpha * w`` is split in two: half for the e-value watched
    during the run, half for the final test, so the paired route's p-value
    ``2 min(p_final, 1 / max E)`` is at most ``alpha * w`` once ``E >= 2 / (alpha * w)``, which
    weighted Holm rejects at its first step whatever the other routes say.
    """
    w_paired, _ = route_weights(policy, others)
    return 2.0 / (policy.alpha * w_paired)


class SequentialMonitor:
    """Watches candidate scores arrive and says when a fail verdict is already certain.

    It pairs each case's first candidate draw with the baseline's first repeat (same id and
    content, dev split) and keeps the broken / fixed counts; the run may stop once the mixture
    e-value reaches :func:`sequential_threshold`, which is anytime-valid (see
    analysis.sequential). Outcomes are fed to the test in case-file order, not in the
    order calls complete (which can depend on the outcome: a refusal returns faster): an
    early completion waits in a buffer until every case before it has arrived. A case is left
    out as unstable only when it flipped between baseline repeats the comparison does not use.
    """

    def __init__(self, baseline: Run, case_hashes: dict[str, str], policy: GatePolicy) -> None:
        self.baseline: dict[str, float] = {}
        categories = set()
        for c in baseline.cases:
            if c.split != "dev" or c.error is not None or case_hashes.get(c.id) != c.hash:
                continue
            categories.add(c.category or "(none)")
            held = {_passed(o) for o in c.outcomes[1:]}
            if policy.exclude_unstable and len(held) > 1:
                continue
            self.baseline[c.id] = c.outcomes[0].score or 0.0
        others = 1 + len(categories & set(policy.critical_categories))
        others += policy.noise_check == "fail"
        self.threshold = sequential_threshold(policy, others)
        self.order = list(case_hashes)
        self.arrived: dict[str, float | None] = {}
        self.next = 0
        self.broken = 0
        self.fixed = 0
        self.e_max = 1.0

    def observe(self, case_id: str, score: float | None, repeat: int = 0) -> bool:
        if repeat != 0 or case_id in self.arrived:
            return self.e_max >= self.threshold
        self.arrived[case_id] = score
        while self.next < len(self.order) and self.order[self.next] in self.arrived:
            ready = self.order[self.next]
            self.next += 1
            base = self.baseline.get(ready)
            value = self.arrived[ready]
            if base is None or value is None:
                continue
            if value < base:
                self.broken += 1
            elif value > base:
                self.fixed += 1
            else:
                continue
            self.e_max = max(self.e_max, sequential_e_value(self.broken, self.fixed))
        return self.e_max >= self.threshold
