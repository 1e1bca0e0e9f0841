"""Reports of agent runs: a broken case's trajectory beside the baseline's, in the run and
compare reports, the HTML pages, the gate's text and the PR comment, escaped and capped."""

from __future__ import annotations

import re
from typing import Any

import pytest
from test_agent import support_run
from test_html_report import HOSTILE, SCRIPT_TAG, parse

from evalgate.analysis.compare import compare_runs
from evalgate.analysis.summary import summarise
from evalgate.config.models import GatePolicy
from evalgate.gate.decide import decide
from evalgate.report.comment import BaselineProvenance, CommentContext, render_comment
from evalgate.report.html import render_compare_html, render_run_html
from evalgate.report.render import render_model
from evalgate.runs.schema import Run
from evalgate.trajectory import CallRecord, Step

BROKEN = "sa-007"  # a refund: v1 looks the order up first, v2 does not


@pytest.fixture(scope="module")
def runs() -> tuple[Run, Run]:
    return support_run("v1"), support_run("v2")


def test_the_compare_reports_show_both_trajectories(runs: tuple[Run, Run]) -> None:
    a, b = runs
    comparison = compare_runs(a, b)
    row = next(r for r in comparison.broken if r.id == BROKEN)
    assert (row.a_answer, row.b_answer) == ("lookup_order → issue_refund", "issue_refund")
    assert row.expected == "lookup_order → issue_refund(order_id='A4211')"
    text = render_model("compare", comparison, "text", limit=50)
    assert (
        f"{BROKEN}     expected lookup_order → issue_refund(order_id='A4211'): "
        "A lookup_order → issue_refund, B issue_refund" in text
    )
    md = render_model("compare", comparison, "markdown", limit=50)
    assert (
        f"| {BROKEN} | lookup\\_order → issue\\_refund\\(order\\_id='A4211'\\) | "
        "lookup\\_order → issue\\_refund | issue\\_refund |" in md
    )


def test_the_html_compare_page_lists_every_call_with_its_result_and_the_reason(
    runs: tuple[Run, Run],
) -> None:
    a, b = runs
    page = parse(render_compare_html(a, b, compare_runs(a, b)))
    row = next(r for r in page.rows if r.id == BROKEN)
    assert "lookup_order(order_id='A4211') → {\"items\": 2" in row.text
    assert 'issue_refund(order_id=\'A4211\') → {"refund_id": "R-A4211"' in row.text
    assert (
        "failed: tool_sequence (call 1: expected lookup_order, got issue_refund(order_id='A4211'))"
        in row.text
    )
    run_page = parse(render_run_html(b, summarise(b)))
    row = next(r for r in run_page.rows if r.id == BROKEN)
    assert 'issue_refund(order_id=\'A4211\') → {"refund_id": "R-A4211"' in row.text


def test_the_gate_text_and_the_pr_comment_say_which_criterion_failed(
    runs: tuple[Run, Run],
) -> None:
    a, b = runs
    verdict = decide(a, b, GatePolicy())
    assert verdict.kind == "fail"
    text = render_model("gate", verdict, "text", limit=50)
    line = next(i for i, t in enumerate(text.splitlines()) if t.strip().startswith(BROKEN))
    lines = text.splitlines()
    assert "baseline lookup_order → issue_refund, candidate issue_refund" in lines[line]
    assert lines[line + 1].strip() == (
        "failed: tool_sequence (call 1: expected lookup_order, got issue_refund(order_id='A4211'))"
    )
    comment = render_comment(
        CommentContext(
            suite="support-agent",
            verdict=verdict,
            candidate=summarise(b),
            baseline=BaselineProvenance(run=a.name, source="local"),
        )
    )
    row = next(r for r in comment.splitlines() if r.startswith(f"| {BROKEN} |"))
    shown = re.sub(r"\\(.)", r"\1", row)
    assert (
        "| lookup_order → issue_refund | issue_refund<br>failed: tool_sequence (call 1: "
        "expected lookup_order, got issue_refund(order_id='A4211')) |" in shown
    )


def test_the_run_report_shows_the_trajectories_of_the_worst_category(
    runs: tuple[Run, Run],
) -> None:
    _, b = runs
    text = render_model("run", summarise(b), "text", limit=50)
    steps = sum(len(o.steps or []) for c in b.cases for o in c.outcomes)
    assert f"per case, its whole agent loop (81 cases, {steps} model calls)" in text
    # address and refund both score 0 on v2; the report names the first by name
    assert "Worst category: address, 0.0% (0/15)\n  answered instead as: update_address 15" in text
    assert (
        "sa-067  expected lookup_order → update_address(order_id='A4951', address='12 Elm Road'), "
        "answered update_address:" in text
    )


def test_hostile_tool_inputs_results_and_reasons_are_escaped(
    runs: tuple[Run, Run],
) -> None:
    a, b = runs
    case = next(c for c in b.cases if c.id == BROKEN)
    steps = [Step(calls=[CallRecord(name="issue_refund", input={"x": HOSTILE}, result=HOSTILE)])]
    outcome = case.outcomes[0].model_copy(update={"steps": steps, "reason": HOSTILE})
    hostile = b.model_copy(
        update={
            "cases": [
                c.model_copy(update={"outcomes": [outcome]}) if c.id == BROKEN else c
                for c in b.cases
            ]
        }
    )
    html = render_compare_html(a, hostile, compare_runs(a, hostile))
    assert SCRIPT_TAG not in html and "<img" not in html
    page = parse(html)
    assert not [t for t, attrs in page.tags for k in attrs if k.startswith("on")]
    row = next(r for r in page.rows if r.id == BROKEN)
    assert row.text.count(SCRIPT_TAG) >= 3  # the input, the result and the reason, as text
    verdict = decide(a, hostile, GatePolicy())
    comment = render_comment(
        CommentContext(
            suite="support-agent",
            verdict=verdict,
            candidate=summarise(hostile),
            baseline=BaselineProvenance(run=a.name, source="local"),
        )
    )
    # Markdown escaping: every < of the hostile text is backslash-escaped (GitHub shows it)
    assert not re.search(r"(?<!\\)<(script|img|/textarea)", comment)
    assert "\\<script\\>alert\\(1\\)\\</script\\>" in comment
    # capped: a long reason is cut in the comment
    long: Any = "why " * 500
    outcome = outcome.model_copy(update={"reason": long})
    capped = hostile.model_copy(
        update={
            "cases": [
                c.model_copy(update={"outcomes": [outcome]}) if c.id == BROKEN else c
                for c in hostile.cases
            ]
        }
    )
    comment = render_comment(
        CommentContext(
            suite="support-agent",
            verdict=decide(a, capped, GatePolicy()),
            candidate=summarise(capped),
            baseline=BaselineProvenance(run=a.name, source="local"),
        )
    )
    row = next(r for r in comment.splitlines() if r.startswith(f"| {BROKEN} |"))
    assert len(row) < 600
