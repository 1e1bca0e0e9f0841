"""The local HTML report: one self-contained file for a run or a comparison of two runs.

Inline CSS and a small inline script, nothing fetched: a Content-Security-Policy in the page
allows no source at all but that one script (by its hash), so even text that escaped the
escaping could neither run nor load anything. Everything from cases, replies and run files is
HTML-escaped by the template environment (autoescape on). Holdout cases are counted in the
numbers but never listed: their ids are hashes and their content stays out of reports.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from evalgate.analysis.compare import Comparison
from evalgate.analysis.summary import CategoryRow, Confusion, RunSummary, summarise
from evalgate.limits import NO_ANSWER, clip, label
from evalgate.report.render import HTML_ENV
from evalgate.report.render import template as compiled
from evalgate.runs.schema import PASS_AT, CaseResult, Run
from evalgate.trajectory import calls_of, expected_label, show_args

# Kinds of listed case, in the order the page shows them, with their labels.
COMPARE_KINDS = {
    "broken": "broken",
    "fixed": "fixed",
    "both-wrong": "wrong in both",
    "errored": "errored",
    "only-a": "only in A",
    "only-b": "only in B",
    "edited": "edited",
}
RUN_KINDS = {"wrong": "wrong", "errored": "errored", "right": "right"}


@dataclass(frozen=True)
class CallView:
    """One tool call of an agent's trajectory: ``name(args)``, what it was answered, how."""

    call: str
    result: str
    status: str


@dataclass(frozen=True)
class Reply:
    """One call's reply (or its error), with the answer read from it."""

    text: str
    answer: str
    passed: bool | None
    error: bool
    # An agent case: every tool call in order, and why the scorer failed it (if it says).
    calls: list[CallView] = field(default_factory=list)
    reason: str | None = None


@dataclass(frozen=True)
class Side:
    """A case as one run saw it: every repeat's reply, the answer and whether it passed."""

    answer: str
    passed: bool | None
    error: str | None
    replies: list[Reply]


@dataclass(frozen=True)
class CaseRow:
    kind: str
    id: str
    category: str | None
    expected: str
    message: str
    a: Side | None
    b: Side | None = None


@dataclass(frozen=True)
class HeatCell:
    count: int
    # Background opacity, 0 to 1, by count relative to the largest cell.
    alpha: float
    diagonal: bool
    answer: str


@dataclass(frozen=True)
class HeatRow:
    expected: str
    total: int
    cells: list[HeatCell]


@dataclass(frozen=True)
class HeatMap:
    answers: list[str]
    rows: list[HeatRow]


@dataclass(frozen=True)
class CategoryPair:
    category: str
    a: CategoryRow | None
    b: CategoryRow | None


def _input_text(case: CaseResult) -> str:
    """The case's input (up to REPLY characters): the one field's value, or ``name: value``
    lines."""
    if not case.input:
        return ""

    def text(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    if len(case.input) == 1:
        return clip(text(next(iter(case.input.values()))))
    return clip("\n".join(f"{name}: {text(value)}" for name, value in case.input.items()))


def _side(case: CaseResult) -> Side:
    replies = [
        Reply(
            # The page shows the start of a reply; the run file keeps all of it.
            text=clip((o.error or "error") if o.error is not None else (o.text or "(no reply)")),
            answer=label(o.answer),
            passed=None if o.error is not None else (o.score or 0.0) >= PASS_AT,
            error=o.error is not None,
            calls=[
                CallView(f"{c.name}({show_args(c.input)})", c.result or "", c.status)
                for c in calls_of(o.steps or [])
            ],
            reason=o.reason,
        )
        for o in case.outcomes
    ]
    return Side(answer=case.answered(), passed=case.passed, error=case.error, replies=replies)


def _listed(*cases: CaseResult | None) -> bool:
    """Whether a case may be listed with its text: never when either run has it as holdout."""
    return all(c is None or c.split != "holdout" for c in cases)


def heat_map(confusion: Confusion | None) -> HeatMap | None:
    """The confusion matrix as cells whose shade grows with their count."""
    if confusion is None:
        return None
    largest = max((k for row in confusion.counts for k in row), default=0) or 1
    rows = [
        HeatRow(
            expected=expected,
            total=sum(counts),
            cells=[
                HeatCell(
                    count=k,
                    # A floor, so that a cell of one case among hundreds still shows.
                    alpha=round(0.12 + 0.88 * k / largest, 3) if k else 0.0,
                    diagonal=answer == expected,
                    answer=answer,
                )
                for answer, k in zip(confusion.answers, counts, strict=True)
            ],
        )
        for expected, counts in zip(confusion.expected, confusion.counts, strict=True)
    ]
    return HeatMap(answers=confusion.answers, rows=rows)


def _script() -> tuple[str, str]:
    """The page's one script and its CSP hash."""
    script = compiled("script.html.j2", HTML_ENV).render()
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return script, f"sha256-{digest}"


def _counts(rows: list[CaseRow], kinds: dict[str, str]) -> dict[str, Any]:
    """What the filter buttons show: rows per kind and per category."""
    by_kind = {kind: sum(1 for r in rows if r.kind == kind) for kind in kinds}
    categories: dict[str | None, int] = {}
    for row in rows:
        categories[row.category] = categories.get(row.category, 0) + 1
    ordered = sorted(categories.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))
    return {
        "kinds": [(kind, label, by_kind[kind]) for kind, label in kinds.items() if by_kind[kind]],
        "categories": ordered,
    }


def _page(template: str, rows: list[CaseRow], kinds: dict[str, str], **context: Any) -> str:
    script, script_hash = _script()
    return compiled(template, HTML_ENV).render(
        rows=rows,
        kind_labels=kinds,
        filters=_counts(rows, kinds),
        script=script,
        script_hash=script_hash,
        **context,
    )


def render_run_html(run: Run, summary: RunSummary) -> str:
    """One run's report as a self-contained HTML page."""
    rows = []
    for case in run.cases:
        if not _listed(case):
            continue
        kind = "errored" if case.error is not None else ("right" if case.passed else "wrong")
        rows.append(
            CaseRow(
                kind=kind,
                id=case.id,
                category=case.category,
                expected=expected_label(case.expected),
                message=_input_text(case),
                a=_side(case),
            )
        )
    order = list(RUN_KINDS)
    rows.sort(key=lambda r: order.index(r.kind))
    return _page(
        "run.html.j2",
        rows,
        RUN_KINDS,
        run=run,
        s=summary,
        heat=heat_map(summary.confusion),
        holdout=sum(1 for c in run.cases if not _listed(c)),
    )


def _category_pairs(a: RunSummary, b: RunSummary) -> list[CategoryPair]:
    rows_a = {r.category: r for r in a.categories}
    rows_b = {r.category: r for r in b.categories}
    names = sorted(set(rows_a) | set(rows_b), key=lambda c: (c == NO_ANSWER, c))
    return [CategoryPair(name, rows_a.get(name), rows_b.get(name)) for name in names]


def render_compare_html(
    a: Run, b: Run, comparison: Comparison, *, price_as: str | None = None
) -> str:
    """A comparison of run A (the reference) with run B (the change) as one HTML page.

    The pairs come from ``comparison``; each pair's full replies come from the runs.
    """
    cases_a, cases_b = a.by_id(), b.by_id()
    # A case either run holds as holdout is counted in the numbers, never listed.
    hidden = {
        case_id
        for case_id in cases_a.keys() | cases_b.keys()
        if not _listed(cases_a.get(case_id), cases_b.get(case_id))
    }
    rows: list[CaseRow] = []

    def add(kind: str, case_id: str) -> None:
        if case_id in hidden:
            return
        ca, cb = cases_a.get(case_id), cases_b.get(case_id)
        shown = cb or ca
        assert shown is not None, f"{case_id} is in neither run"
        message = _input_text(shown)
        if ca and cb and _input_text(ca) != message:  # an edited case: both wordings
            message = f"A: {_input_text(ca)}\nB: {message}"
        rows.append(
            CaseRow(
                kind=kind,
                id=case_id,
                category=shown.category,
                expected=expected_label(shown.expected),
                message=message,
                a=_side(ca) if ca else None,
                b=_side(cb) if cb else None,
            )
        )

    for kind, pairs in (
        ("broken", comparison.broken),
        ("fixed", comparison.fixed),
        ("both-wrong", comparison.both_wrong),
    ):
        for pair in pairs:
            add(kind, pair.id)
    for kind, ids in (
        ("errored", comparison.errored),
        ("only-a", comparison.only_a),
        ("only-b", comparison.only_b),
        ("edited", comparison.edited),
    ):
        for case_id in ids:
            add(kind, case_id)
    sa, sb = summarise(a, price_as=price_as), summarise(b, price_as=price_as)
    return _page(
        "compare.html.j2",
        rows,
        COMPARE_KINDS,
        run_a=a,
        run_b=b,
        c=comparison,
        sa=sa,
        sb=sb,
        categories=_category_pairs(sa, sb),
        heat_a=heat_map(sa.confusion),
        heat_b=heat_map(sb.confusion),
        holdout=len(hidden),
    )
