"""Reports as people read them: terminal text, Markdown and JSON, for a run and a comparison,
compared whole against golden files (regenerate with scripts/regen-golden); and the escaping of
untrusted text in Markdown."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from conftest import CREATED, sha

from evalgate.analysis.compare import Comparison, compare_runs
from evalgate.analysis.summary import RunSummary, summarise
from evalgate.report.render import (
    code,
    count,
    excerpt,
    interval,
    md,
    money,
    pct,
    pvalue,
    render_model,
)
from evalgate.runs.schema import CaseResult, Run

CaseFactory = Callable[..., CaseResult]
RunFactory = Callable[..., Run]
Golden = Callable[..., None]

HOSTILE = "<img src=x onerror=alert(1)> @octocat see #12 | a | b `tick` <!-- hide --> *bold* [x](y)\nline two"


def settle(run: Run, name: str) -> Run:
    """A real run with its volatile fields fixed: name, time, wall clock, latencies."""
    data = run.model_dump(mode="json")
    data |= {"name": name, "created_at": CREATED.isoformat(), "wall_s": 0.25}
    data |= {"git_commit": None, "git_ref": None}
    for case in data["cases"]:
        for outcome in case["outcomes"]:
            outcome["latency_s"] = 0.002
    return Run.model_validate(data)


# ------------------------------------------------------------------------------------------
# Synthetic runs that exercise every part of the templates
# ------------------------------------------------------------------------------------------


@pytest.fixture
def eventful_run(make_case: CaseFactory, make_run: RunFactory) -> Run:
    """A real-model run with wrong answers, format slips, errors, a cut-off reply, cached
    replies and a hostile message in its worst category."""
    cases = [
        make_case(f"book-{i}", "booking", "booking", outcome={"latency_s": 0.4 + i / 10})
        for i in range(5)
    ]
    cases += [
        make_case("book-5", "booking", "quote", message="Can I come in Tuesday | or Wednesday?"),
        make_case("book-6", "booking", error="HTTP 529 overloaded", error_kind="overloaded"),
        make_case("quote-1", "quote", "quote", outcome={"cached": True, "cache_read_tokens": 900}),
        make_case("quote-2", "quote", "quote", outcome={"format_ok": False}),
        make_case("quote-3", "quote", "quote"),
        make_case("quote-4", "quote", "booking", message="How much to book a full service?"),
        make_case("quote-5", "quote", error="timed out after 60 s", error_kind="timeout"),
        make_case("other-1", "other", "other"),
        make_case("other-2", "other", "other", outcome={"format_ok": False}),
        make_case("other-3", "other", "appointment", message=HOSTILE),
        make_case(
            "other-4",
            "other",
            None,
            message="Where do I park?",
            outcome={"stop_reason": "max_tokens", "output_tokens": 64, "text": '{"cat'},
        ),
    ]
    return make_run(
        cases,
        name="support-v3-20250601T120000-beef",
        suite="support",
        prompt={"name": "v3", "sha256": sha("v3")},
        model={"backend": "anthropic", "name": "claude-haiku-4-5", "offline": False},
        wall_s=3.75,
    )


@pytest.fixture
def eventful_comparison(make_case: CaseFactory, make_run: RunFactory) -> Comparison:
    """v2 -> v3 with every kind of pair, unpaired and edited cases, and warnings."""
    a = make_run(
        [
            make_case("c01", "booking", "quote"),  # fixed
            make_case("c02", "quote", "booking"),  # fixed
            make_case("c03", "booking", "booking"),  # broken
            make_case("c04", "status", "status"),  # broken
            make_case("c05", "other", "other", message=HOSTILE),  # broken
            make_case("c06", "parts", "parts"),  # right in both
            make_case("c07", "parts", "quote"),  # wrong in both
            make_case("c08", "quote", "quote", message="Old wording"),  # edited
            make_case("c09", "quote", error="overloaded"),  # errored
            make_case("gone", "other", "other"),  # only in A
        ],
        name="support-v2-20250601T120000-abcd",
        suite="support",
        prompt={"name": "v2"},
        case_files={"cases.jsonl": sha("old cases")},
        cases_sha256=sha("old set"),
    )
    b = make_run(
        [
            make_case("c01", "booking", "booking"),
            make_case("c02", "quote", "quote"),
            make_case("c03", "booking", "complaint"),
            make_case("c04", "status", "other"),
            make_case("c05", "other", "parts|<b>", message=HOSTILE),
            make_case("c06", "parts", "parts"),
            make_case("c07", "parts", "booking"),
            make_case("c08", "quote", "quote", message="New wording"),
            make_case("c09", "quote", "quote"),
            make_case("new-1", "other", "other"),
            make_case("new-2", "booking", "booking"),
        ],
        name="support-v3-20250601T130000-cafe",
        suite="support",
        prompt={"name": "v3"},
        case_files={"cases.jsonl": sha("new cases")},
        cases_sha256=sha("new set"),
        interrupted=True,
    )
    return compare_runs(a, b)


# ------------------------------------------------------------------------------------------
# Golden files
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "suffix"), [("text", "txt"), ("markdown", "md")])
def test_eventful_run_report(eventful_run: Run, golden: Golden, fmt: Any, suffix: str) -> None:
    golden(f"run-eventful.{suffix}", render_model("run", summarise(eventful_run), fmt))


@pytest.mark.parametrize(("fmt", "suffix"), [("text", "txt"), ("markdown", "md")])
def test_eventful_comparison_report(
    eventful_comparison: Comparison, golden: Golden, fmt: Any, suffix: str
) -> None:
    # limit: how many cases a text section lists before "... and N more".
    text = render_model("compare", eventful_comparison, fmt, limit=2)
    golden(f"compare-eventful.{suffix}", text)


def rounded(value: Any) -> Any:
    """JSON with floats to 9 decimals: the last bits of an interval are not what is tested."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("kind", ["run", "compare"])
def test_json_reports(
    eventful_run: Run, eventful_comparison: Comparison, golden: Golden, kind: str
) -> None:
    model = summarise(eventful_run) if kind == "run" else eventful_comparison
    text = render_model(kind, model, "json")
    parsed = json.loads(text)
    assert type(model).model_validate(parsed) == model  # the JSON holds the whole model
    golden(f"{kind}-eventful.json", text, lambda t: rounded(json.loads(t)))


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize(("fmt", "suffix"), [("text", "txt"), ("markdown", "md")])
def test_bike_shop_run_reports(
    example_run: Callable[[str], Run], golden: Golden, version: str, fmt: Any, suffix: str
) -> None:
    run = settle(example_run(version), f"bike-shop-{version}-20250601T120000-0000")
    summary = summarise(run, price_as="claude-haiku-4-5")
    golden(f"bike-shop-{version}.{suffix}", render_model("run", summary, fmt))


@pytest.mark.parametrize(("fmt", "suffix"), [("text", "txt"), ("markdown", "md")])
def test_bike_shop_comparison_report(
    example_run: Callable[[str], Run], golden: Golden, fmt: Any, suffix: str
) -> None:
    a = settle(example_run("v1"), "bike-shop-v1-20250601T120000-0000")
    b = settle(example_run("v2"), "bike-shop-v2-20250601T120000-0000")
    golden(f"bike-shop-v1-v2.{suffix}", render_model("compare", compare_runs(a, b), fmt, limit=5))


# ------------------------------------------------------------------------------------------
# What the reports must say, whatever the layout
# ------------------------------------------------------------------------------------------


def test_every_rate_has_its_n_and_interval(eventful_run: Run) -> None:
    summary = summarise(eventful_run)
    # 10 of 14 scored are right; 95% Wilson interval for 10/14.
    low, high = summary.accuracy.low, summary.accuracy.high
    text = render_model("run", summary, "text")
    assert f"(10/14)  95% CI {interval(low, high)}" in text
    markdown = render_model("run", summary, "markdown")
    assert f"| 10/14 | {interval(low, high)} |" in markdown


def test_the_offline_note_is_shown_for_fake_runs(make_run: RunFactory) -> None:
    summary: RunSummary = summarise(make_run())
    assert "these numbers test the bench" in render_model("run", summary, "text")
    assert "> [!NOTE]" in render_model("run", summary, "markdown")


def test_the_comparison_shows_the_known_p_value(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    # 18 fixed and 0 broken: p = 2 * (1/2)^18 = 7.63e-06 (from the issue).
    a = make_run([make_case(f"c{i}", "booking", "quote") for i in range(18)])
    b = make_run([make_case(f"c{i}") for i in range(18)], prompt={"name": "v2"})
    cmp = compare_runs(a, b)
    assert "Sign test p = 7.6e-06." in render_model("compare", cmp, "text", limit=3)
    assert "| 7.6e-06 |" in render_model("compare", cmp, "markdown")


# ------------------------------------------------------------------------------------------
# Markdown escaping of untrusted text
# ------------------------------------------------------------------------------------------

RAW_TAG = re.compile(r"(?<!\\)<(?!/?(?:details|summary)>)[!/A-Za-z]")  # unescaped


def test_a_one_case_run_says_one_case_and_one_call(
    make_run: RunFactory, make_case: Callable[..., CaseResult]
) -> None:
    text = render_model("run", summarise(make_run([make_case("c1")])), "text")
    assert text.splitlines()[0].endswith(" · 1 case")
    assert "per call (1 call) · wall" in text
    assert "1 cases" not in text and "1 calls" not in text
    two = render_model("run", summarise(make_run()), "text")
    assert two.splitlines()[0].endswith(" · 2 cases") and "per call (2 calls) · wall" in two


def test_md_leaves_no_raw_html_mentions_or_pipes() -> None:
    escaped = md(HOSTILE)
    assert not RAW_TAG.search(escaped)
    assert "<!--" not in escaped
    assert not re.search(r"@(?=\w)", escaped)  # a zero-width joiner breaks every mention
    assert "@\u200doctocat" in escaped
    assert not re.search(r"#(?=\d)", escaped)  # nor an issue reference
    assert not re.search(r"(?<!\\)\|", escaped)  # every pipe escaped
    assert "\n" not in escaped
    assert r"\*bold\*" in escaped
    assert r"\[x\]\(y\)" in escaped


def test_code_spans_are_literal_not_backslash_escaped() -> None:
    # Inside a code span GitHub shows backslashes as they are, so nothing is escaped there,
    # and a backtick (which would end the span) is replaced.
    assert code("v2_short") == "`v2_short`"
    assert code("a`b\nc") == "`a'b c`"


def markdown_reports(run: Run, comparison: Comparison) -> list[str]:
    return [
        render_model("run", summarise(run), "markdown"),
        render_model("compare", comparison, "markdown"),
    ]


def test_rendered_markdown_has_no_raw_html_or_mentions(
    eventful_run: Run, eventful_comparison: Comparison
) -> None:
    for text in markdown_reports(eventful_run, eventful_comparison):
        assert "octocat" in text  # the hostile text is shown...
        assert not RAW_TAG.search(text)  # ...but opens no tag but our own details/summary
        assert not re.search(r"@(?=\w)", text)
        assert not re.search(r"#(?=\d)", text)


def test_every_table_row_has_its_header_columns(
    eventful_run: Run, eventful_comparison: Comparison
) -> None:
    for text in markdown_reports(eventful_run, eventful_comparison):
        columns = None
        for line in text.splitlines():
            if not line.startswith("|"):
                columns = None
                continue
            cells = len(re.findall(r"(?<!\\)\|", line))
            columns = columns or cells
            assert cells == columns, line


# ------------------------------------------------------------------------------------------
# Filters
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"), [(None, "n/a"), (0.0, "0.0%"), (0.7333, "73.3%"), (1.0, "100.0%")]
)
def test_pct(value: float | None, text: str) -> None:
    assert pct(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "unknown"), (0.0, "$0.0000"), (0.01518, "$0.0152"), (1234.5, "$1,234.50")],
)
def test_money(value: float | None, text: str) -> None:
    assert money(value) == text


@pytest.mark.parametrize(
    ("value", "text"), [(2 * 0.5**18, "7.6e-06"), (0.0625, "0.062"), (1.0, "1.000")]
)
def test_pvalue(value: float, text: str) -> None:
    assert pvalue(value) == text


def test_count_interval_and_excerpt() -> None:
    assert count(1234) == "1,234"
    assert count(2.5) == "2.50"
    assert interval(0.556, 0.858) == "55.6–85.8%"
    assert excerpt("a  b\nc") == "a b c"
    assert excerpt("x" * 100, 10) == "x" * 9 + "…"
