"""One decision per pull request: its suites' verdicts, their routes settled together so an
unchanged prompt fails the pull request at most alpha of the time however many suites it has."""

from collections import defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from evalgate.analysis.multiplicity import weighted_holm
from evalgate.gate.settle import _settle
from evalgate.gate.verdict import Verdict, VerdictKind


class SuiteVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str
    verdict: Verdict


class PullRequestVerdict(BaseModel):
    """One decision for a pull request: every suite's fail routes share one familywise alpha."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: VerdictKind
    alpha: float
    tests: int
    suites: list[SuiteVerdict]

    def line(self) -> str:
        counts = {k: sum(1 for s in self.suites if s.verdict.kind == k) for k in _ORDER}
        parts = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        return (
            f"pull request: {self.kind.upper()} ({len(self.suites)} suites: {parts}; "
            f"{self.tests} tests share alpha {self.alpha:g})"
        )


_ORDER: tuple[VerdictKind, ...] = ("fail", "inconclusive", "pass")


def decide_pull_request(parts: Sequence[tuple[str, Verdict]]) -> PullRequestVerdict:
    """Re-settle every suite's verdict with one familywise alpha over all suites and routes.

    Each suite gets an equal share of alpha, split among its routes as in :func:`decide`
    (weighted Holm: a suite whose routes all fail to reject passes its share on). The alpha is
    the smallest of the suites' alphas, and a suite that set a larger one has its pass bound
    computed again at it, so the fail routes and the bounds use one alpha. A pass needs every
    suite to rule out its drop: an intersection-union test, level alpha without adjustment. The pull request fails when any
    suite fails, else is inconclusive when any suite is, else passes.
    """
    if not parts:
        raise ValueError("a pull request verdict needs at least one suite")
    alpha = min(v.alpha for _, v in parts)
    share = 1.0 / max(1, sum(1 for _, v in parts if v.routes))
    family = [(i, r) for i, (_, v) in enumerate(parts) for r in v.routes]
    weights = [r.weight * share for _, r in family]
    adjusted = weighted_holm([r.p_value for _, r in family], weights) if family else []
    by_suite: dict[int, list[float]] = defaultdict(list)
    for (i, _), adj in zip(family, adjusted, strict=True):
        by_suite[i].append(adj)
    suites = []
    for i, (name, v) in enumerate(parts):
        # One alpha for the whole pull request: the pass bound too, not the suite's own.
        again = v.rebound(alpha) if v.rebound is not None and v.alpha != alpha else {}
        settled = _settle(
            v.model_copy(update={"alpha": alpha, **again}),
            [r.weight * share for r in v.routes],
            adjusted=by_suite[i],
            family=len(family),
        )
        suites.append(SuiteVerdict(suite=name, verdict=settled))
    kinds = {s.verdict.kind for s in suites}
    kind = next(k for k in _ORDER if k in kinds)
    return PullRequestVerdict(kind=kind, alpha=alpha, tests=len(family), suites=suites)
