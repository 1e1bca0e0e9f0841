"""How far a judge agrees with people: agreement statistics on (judge, human) verdicts. Pure.

Each labelled item gives a pair of pass / fail verdicts, the judge's and a person's. The 2x2
table of those pairs (judge in rows, human in columns) is the whole data:

                    human pass   human fail
    judge pass          a            b        b: the judge passed what a person failed (lenient)
    judge fail          c            d        c: the judge failed what a person passed (strict)

From it: raw agreement (a + d) / n with a Wilson interval; Cohen's kappa with a 95% interval,
either the large-sample (analytic) one of Fleiss, Cohen & Everitt (1969) or a seeded bootstrap
over the labels' groups (items of one group are not independent); Gwet's AC1, which stays readable
when nearly every item is a pass (the "prevalence paradox", where kappa collapses although the
raters almost always agree); McNemar's exact test on b against c (does the judge lean lenient or
strict?); the judge's sensitivity and specificity, and the Rogan-Gladen pass rate corrected for
the judge's errors, with a delta-method interval that carries the calibration's own uncertainty.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from statistics import NormalDist
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

from evalgate.analysis.continuous import BootstrapMethod, cluster_bootstrap
from evalgate.analysis.intervals import wilson_interval
from evalgate.analysis.sign_test import sign_test_two_sided, sign_test_worse
from evalgate.analysis.summary import Rate

KAPPA_INTERVAL = (
    "analytic (Fleiss, Cohen & Everitt 1969), 95%; Wilson-based low end at full agreement"
)
IntervalKind = Literal["analytic", "bootstrap"]
# The bootstrap's resamples and its interval (benchmarks/judge_calibration.py measured both
# methods' coverage; docs/statistics.md gives the numbers).
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_METHOD: BootstrapMethod = "bca"
Lean = Literal["lenient", "strict", "balanced"]


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


class Table(BaseModel):
    """The judge-by-human confusion matrix of pass / fail verdicts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    both_pass: int  # a
    judge_only: int  # b: judge pass, human fail
    human_only: int  # c: judge fail, human pass
    both_fail: int  # d

    @classmethod
    def of(cls, pairs: Sequence[tuple[bool, bool]]) -> Table:
        """From (judge passes, human passes) pairs."""
        a = sum(1 for j, h in pairs if j and h)
        b = sum(1 for j, h in pairs if j and not h)
        c = sum(1 for j, h in pairs if not j and h)
        return cls(both_pass=a, judge_only=b, human_only=c, both_fail=len(pairs) - a - b - c)

    @property
    def n(self) -> int:
        return self.both_pass + self.judge_only + self.human_only + self.both_fail

    @property
    def agreed(self) -> int:
        return self.both_pass + self.both_fail


class Kappa(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    low: float
    high: float
    se: float


def cohen_kappa(table: Table, confidence: float = 0.95) -> Kappa | None:
    """Cohen's kappa and its large-sample interval; None when it is undefined (n = 0, or both
    raters gave one and the same verdict to every item, so chance agreement is 1).

    ``kappa = (po - pe) / (1 - pe)`` with ``po`` the observed and ``pe`` the chance agreement
    from the marginals. Its variance (Fleiss, Cohen & Everitt 1969, "Large sample standard
    errors of kappa and weighted kappa", Psychol Bull 72:323; Fleiss, Levin & Paik 2003, eq.
    18.15), with ``r_i`` the judge's and ``c_i`` the humans' marginals::

        A = sum_i p_ii [1 - (r_i + c_i)(1 - kappa)]^2
        B = (1 - kappa)^2 sum_{i != j} p_ij (c_i + r_j)^2
        C = [kappa - pe (1 - kappa)]^2
        var = (A + B - C) / (n (1 - pe)^2)

    The interval is ``kappa ± z·se``, clipped to [-1, 1]. When every item agrees the analytic
    standard error is 0, which would claim certainty from any n; the low end is then the
    kappa of the Wilson interval's low end of the agreement, chance agreement held fixed:
    ``(wilson_low(n, n) - pe) / (1 - pe)``.
    """
    n = table.n
    if n == 0:
        return None
    p = [[table.both_pass / n, table.judge_only / n], [table.human_only / n, table.both_fail / n]]
    rows = [p[0][0] + p[0][1], p[1][0] + p[1][1]]
    cols = [p[0][0] + p[1][0], p[0][1] + p[1][1]]
    po = p[0][0] + p[1][1]
    pe = rows[0] * cols[0] + rows[1] * cols[1]
    if pe >= 1.0:
        return None
    kappa = (po - pe) / (1.0 - pe)
    w = 1.0 - kappa
    a = sum(p[i][i] * (1.0 - (rows[i] + cols[i]) * w) ** 2 for i in range(2))
    b = (
        w
        * w
        * sum(p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(2) for j in range(2) if i != j)
    )
    c = (kappa - pe * w) ** 2
    var = max(0.0, (a + b - c) / (n * (1.0 - pe) ** 2))
    se = math.sqrt(var)
    half = _z(confidence) * se
    low = kappa - half
    if table.agreed == n:
        low = (wilson_interval(n, n, confidence)[0] - pe) / (1.0 - pe)
    return Kappa(value=kappa, low=max(-1.0, low), high=min(1.0, kappa + half), se=se)


def kappa_of_cells(cells: NDArray[np.float64]) -> NDArray[np.float64]:
    """Cohen's kappa of 2x2 tables given by their cells ``(..., 4)`` = (a, b, c, d), at once.

    A table whose items all fall in one agreeing cell has chance agreement 1 and kappa 0 / 0;
    it counts as 1 here: every table of full agreement with both verdicts in it has kappa 1, and
    this one is their limit. (Only bootstrap resamples meet it: an observed table like that has
    no kappa, see cohen_kappa.)
    """
    a, b, c, d = (cells[..., i] for i in range(4))
    n = a + b + c + d
    judge = (a + b) / n
    human = (a + c) / n
    pe = judge * human + (1.0 - judge) * (1.0 - human)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = ((a + d) / n - pe) / (1.0 - pe)
    return np.where(pe >= 1.0, 1.0, kappa)


def _cell(judge: bool, human: bool) -> int:
    return (0 if human else 1) if judge else (2 if human else 3)


def bootstrap_kappa(
    pairs: Sequence[tuple[bool, bool]],
    groups: Sequence[str] | None = None,
    *,
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    method: BootstrapMethod = BOOTSTRAP_METHOD,
) -> Kappa | None:
    """Cohen's kappa with a bootstrap interval; None when kappa is undefined.

    The resampled unit is the group (each label's group, or the label itself when it has none):
    labels of one group (phrasings of one message, say) are not independent, and resampling
    them one by one would give too narrow an interval. ``scipy.stats.bootstrap`` draws
    ``resamples`` sets of as many groups as there are, with replacement, from
    ``numpy.random.default_rng(seed)``. At full agreement every resample agrees fully too and
    the bootstrap has no spread: the low end is then the Wilson-based one of cohen_kappa.
    """
    table = Table.of(pairs)
    point = cohen_kappa(table, confidence)
    if point is None or table.agreed == table.n:
        return point
    clusters: dict[str, list[int]] = {}
    for i, (judge, human) in enumerate(pairs):
        key = groups[i] if groups is not None else f"#{i}"
        clusters.setdefault(key, [0, 0, 0, 0])[_cell(judge, human)] += 1
    found = cluster_bootstrap(
        list(clusters.values()),
        kappa_of_cells,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
        method=method,
    )
    return Kappa(
        value=point.value, low=max(-1.0, found.low), high=min(1.0, found.high), se=found.se
    )


def interval_name(
    kind: IntervalKind, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0, unit: str = "groups"
) -> str:
    """What the report says of kappa's interval: which one, and how it was made."""
    if kind == "analytic":
        return KAPPA_INTERVAL
    return (
        f"bootstrap ({'BCa' if BOOTSTRAP_METHOD == 'bca' else 'percentile'}, {resamples} resamples of the labels' {unit}, seed "
        f"{seed}), 95%; Wilson-based low end at full agreement"
    )


def gwet_ac1(table: Table) -> float | None:
    """Gwet's AC1 for two raters and two categories; None for an empty table.

    ``AC1 = (po - pe) / (1 - pe)`` with chance agreement ``pe = 2 q (1 - q)``, ``q`` the mean
    of the two raters' pass rates (Gwet 2008, "Computing inter-rater reliability and its variance
    in the presence of high agreement", Br J Math Stat Psychol 61:29, eq. 4 with K = 2). Unlike
    kappa's ``pe``, this one is small when nearly everything passes, so high agreement on a
    lopsided set reads as high agreement.
    """
    n = table.n
    if n == 0:
        return None
    po = table.agreed / n
    q = ((table.both_pass + table.judge_only) / n + (table.both_pass + table.human_only) / n) / 2
    pe = 2.0 * q * (1.0 - q)
    return (po - pe) / (1.0 - pe)


class Bias(BaseModel):
    """McNemar's exact test on the disagreements: does the judge pass more than people do?"""

    model_config = ConfigDict(extra="forbid", frozen=True)

    lenient: int  # judge pass, human fail
    strict: int  # judge fail, human pass
    p_value: float  # two-sided exact binomial on lenient vs strict
    lean: Lean


def mcnemar(table: Table, alpha: float = 0.05) -> Bias:
    b, c = table.judge_only, table.human_only
    p = sign_test_two_sided(c, b)
    lean: Lean = "balanced"
    if p < alpha:
        lean = "lenient" if b > c else "strict"
    return Bias(lenient=b, strict=c, p_value=p, lean=lean)


class Corrected(BaseModel):
    """A pass rate measured by the judge, corrected for the judge's errors (Rogan-Gladen)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    raw: float
    n: int
    value: float
    low: float
    high: float
    sensitivity: float
    specificity: float


def rogan_gladen(passed: int, n: int, table: Table, confidence: float = 0.95) -> Corrected | None:
    """The true pass rate behind a judge-measured ``passed / n``; None when it cannot be read.

    With the judge's sensitivity ``Se = a / (a + c)`` and specificity ``Sp = d / (b + d)`` on
    the labels, ``pi = (p + Sp - 1) / (Se + Sp - 1)`` (Rogan & Gladen 1978, Am J Epidemiol
    107:71), clipped to [0, 1]. The delta-method variance carries the run's sampling error and
    the calibration's (Greenland 1996; Lang & Reiczigel 2014, Prev Vet Med 113:13)::

        var = [V(p, n) + pi^2 V(Se, n_pos) + (1 - pi)^2 V(Sp, n_neg)] / (Se + Sp - 1)^2

    Each binomial variance ``V`` is Agresti & Coull's (1998): ``q(1 - q)/(m + z^2)`` with
    ``q = (x + z^2/2)/(m + z^2)`` for ``x`` of ``m``, so a judge that got all 23 human passes
    right still carries the uncertainty of 23 labels instead of a zero-width interval.

    None when the labels hold no human pass or no human fail (Se or Sp unmeasured), when the
    judge is no better than a coin (Se + Sp <= 1), or when ``n == 0``.
    """
    n_pos = table.both_pass + table.human_only
    n_neg = table.judge_only + table.both_fail
    if n == 0 or n_pos == 0 or n_neg == 0:
        return None
    se_ = table.both_pass / n_pos
    sp = table.both_fail / n_neg
    youden = se_ + sp - 1.0
    if youden <= 0:
        return None
    p = passed / n
    pi = min(1.0, max(0.0, (p + sp - 1.0) / youden))
    z = _z(confidence)

    def v(x: int, m: int) -> float:
        q = (x + z * z / 2) / (m + z * z)
        return q * (1 - q) / (m + z * z)

    var = (
        v(passed, n)
        + pi * pi * v(table.both_pass, n_pos)
        + (1 - pi) ** 2 * v(table.both_fail, n_neg)
    ) / (youden * youden)
    half = z * math.sqrt(var)
    return Corrected(
        raw=p,
        n=n,
        value=pi,
        low=max(0.0, pi - half),
        high=min(1.0, pi + half),
        sensitivity=se_,
        specificity=sp,
    )


class GroupAgreement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str
    n: int
    agreement: Rate


class Agreement(BaseModel):
    """Everything measured on one split's labels."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int
    table: Table
    agreement: Rate
    kappa: Kappa | None
    kappa_interval: str = KAPPA_INTERVAL
    ac1: float | None
    judge_pass: Rate
    human_pass: Rate
    bias: Bias
    groups: list[GroupAgreement]


def agreement(
    pairs: Sequence[tuple[bool, bool]],
    groups: Sequence[str] | None = None,
    alpha: float = 0.05,
    *,
    interval: IntervalKind = "analytic",
    seed: int = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Agreement:
    """The agreement report for (judge passes, human passes) pairs, with per-group rows;
    kappa's interval is ``interval``'s (the bootstrap resamples the groups)."""
    table = Table.of(pairs)
    n = table.n
    by_group: dict[str, list[bool]] = defaultdict(list)
    for (j, h), g in zip(pairs, groups or [], strict=False):
        by_group[g].append(j == h)
    if interval == "bootstrap":
        kappa = bootstrap_kappa(pairs, groups, resamples=resamples, seed=seed)
        unit = "groups" if any(len(v) > 1 for v in by_group.values()) else "items"
        name = interval_name(interval, resamples=resamples, seed=seed, unit=unit)
    else:
        kappa, name = cohen_kappa(table), interval_name(interval)
    return Agreement(
        n=n,
        table=table,
        agreement=Rate.of(table.agreed, n),
        kappa=kappa,
        kappa_interval=name,
        ac1=gwet_ac1(table),
        judge_pass=Rate.of(table.both_pass + table.judge_only, n),
        human_pass=Rate.of(table.both_pass + table.human_only, n),
        bias=mcnemar(table, alpha),
        groups=[
            GroupAgreement(group=g, n=len(v), agreement=Rate.of(sum(v), len(v)))
            for g, v in sorted(by_group.items())
        ]
        if groups is not None
        else [],
    )


class AgreementChange(BaseModel):
    """A new judge against the old one on the same labelled items, item by item."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int
    base: Rate
    head: Rate
    # Items the old judge got right and the new one wrong, and the reverse.
    lost: int
    gained: int
    p_value: float  # one-sided exact McNemar: the new judge agrees less
    kind: Literal["dropped", "not_dropped", "unproven"]


def agreement_change(
    base_right: Sequence[bool], head_right: Sequence[bool], alpha: float = 0.05
) -> AgreementChange:
    """Paired comparison of two judges' agreement with people on the same items.

    ``dropped``: the one-sided exact sign test on (lost, gained) is significant; ``unproven``:
    the new judge agrees with fewer items but not significantly so; ``not_dropped``: it agrees
    with as many or more.
    """
    if len(base_right) != len(head_right):
        raise ValueError("both judges must have graded the same items")
    lost = sum(1 for b, h in zip(base_right, head_right, strict=True) if b and not h)
    gained = sum(1 for b, h in zip(base_right, head_right, strict=True) if h and not b)
    p = sign_test_worse(lost, gained)
    kind: Literal["dropped", "not_dropped", "unproven"] = "not_dropped"
    if p < alpha:
        kind = "dropped"
    elif lost > gained:
        kind = "unproven"
    n = len(base_right)
    return AgreementChange(
        n=n,
        base=Rate.of(sum(base_right), n),
        head=Rate.of(sum(head_right), n),
        lost=lost,
        gained=gained,
        p_value=p,
        kind=kind,
    )
