"""The pull-request comment: golden files for each kind of comment, GitHub-Markdown validity,
size shedding, and untrusted text that must not ping, inject HTML, break tables or forge the
marker.

Regenerate the golden files with ``EVALGATE_REGEN_GOLDEN=1 python -m pytest tests/report/test_comment.py``
(or scripts/regen-golden) and review ``git diff tests/golden``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

import pytest
from conftest import CREATED, GOLDEN
from pydantic import ValidationError

from evalgate.analysis.summary import summarise
from evalgate.config.models import GatePolicy
from evalgate.defaults import COMMENT_LIMIT
from evalgate.gate.decide import decide
from evalgate.gate.pull_request import decide_pull_request
from evalgate.report.comment import (
    BaselineProvenance,
    CommentContext,
    CommentFlags,
    CommentLinks,
    _most_rows,
    _Part,
    marker,
    render_comment,
    render_job_summary,
)
from evalgate.runs.schema import CaseResult, Run

SUITE = "bike-shop"
VERSION = "0.1.0"  # fixed, so a version bump does not rewrite every golden file
REPO = "https://github.com/acme/support-bot"
RUN_URL = f"{REPO}/actions/runs/9876543211"
ARTIFACT_URL = f"{REPO}/actions/runs/9876543211/artifacts/2345678"
BASELINE_ARTIFACT_URL = f"{REPO}/actions/runs/9876500000/artifacts/2345001"
BASE_COMMIT = "4f6ce87a1b2c3d4e5f60718293a4b5c6d7e8f901"
REAL_MODEL = {"backend": "anthropic", "name": "claude-haiku-4-5", "offline": False}
CATEGORIES = ["booking", "complaint", "quote", "refund"]
MESSAGES = {
    "booking": "Can I book my {n}-speed in for a service on Tuesday morning?",
    "complaint": "The brake pads you fitted last week squeal on every stop ({n} days now).",
    "quote": "How much would a new rear wheel for a {n}-inch frame cost, fitted?",
    "refund": "I returned the helmet {n} days ago and still have no money back.",
}
ALERTS = {"NOTE", "TIP", "IMPORTANT", "WARNING", "CAUTION"}
ALLOWED_TAGS = {"details", "summary", "sub"}

MakeCase = Callable[..., CaseResult]
MakeRun = Callable[..., Run]


def _wrong(expected: str) -> str:
    return CATEGORIES[(CATEGORIES.index(expected) + 1) % len(CATEGORIES)]


def make_pair(
    make_case: MakeCase,
    make_run: MakeRun,
    *,
    n: int,
    broken: Iterable[int] = (),
    fixed: Iterable[int] = (),
    unstable: Iterable[int] = (),
    errored: Iterable[int] = (),
    regression: Iterable[int] = (),
    messages: Callable[[int, str], str] | None = None,
    categories: list[str] | None = None,
    repeats: int = 2,
    **candidate: Any,
) -> tuple[Run, Run]:
    """A baseline (prompt v2, ``repeats`` repeats) and a candidate (v3) over the same cases.

    Case ``i`` is ``case-0001``...; every case is right in both unless listed: ``broken`` right
    then wrong, ``fixed`` wrong then right, ``unstable`` flips in the baseline, ``errored``
    errors in the candidate, ``regression`` is a regression case the candidate gets wrong.
    """
    broken, fixed, unstable = set(broken), set(fixed), set(unstable)
    errored, regression = set(errored), set(regression)
    names = categories or CATEGORIES
    base_cases, cand_cases = [], []
    for i in range(n):
        cid = f"case-{i:04d}"
        expected = names[i % len(names)]
        wrong = _wrong(expected) if expected in CATEGORIES else "other"
        message = (
            messages(i, expected)
            if messages
            else MESSAGES.get(expected, "Where is my order {n}?").format(n=i + 3)
        )
        split = "regression" if i in regression else "dev"
        base = [wrong] * repeats if i in fixed else [expected] * repeats
        if i in unstable:
            base = [expected, wrong] * (repeats // 2) + [expected] * (repeats % 2)
        cand = wrong if i in broken or i in regression else expected
        common = {"message": message, "split": split}
        base_cases.append(make_case(cid, expected, base, **common))
        if i in errored:
            cand_cases.append(
                make_case(
                    cid, expected, error="429 rate limited", error_kind="rate_limit", **common
                )
            )
        else:
            cand_cases.append(make_case(cid, expected, cand, **common))
    baseline = make_run(base_cases, prompt={"name": "v2"}, model=REAL_MODEL, repeats=repeats)
    overrides = {"wall_s": 42.0} | candidate
    model = overrides.pop("model", REAL_MODEL)
    cand_run = make_run(cand_cases, prompt={"name": "v3"}, model=model, **overrides)
    return baseline, cand_run


def provenance(baseline: Run, **overrides: Any) -> BaselineProvenance:
    fields: dict[str, Any] = {
        "run": baseline.name,
        "commit": BASE_COMMIT,
        "age_days": 1.0,
        "created_at": CREATED - timedelta(days=1),
        "model": f"{baseline.model.backend}/{baseline.model.name}",
        "prompt_sha": baseline.prompt.sha256,
        "cases_sha": baseline.cases_sha256,
        "source": "artifact",
        "artifact_url": BASELINE_ARTIFACT_URL,
    }
    return BaselineProvenance(**(fields | overrides))


def reproduce(baseline: Run | None) -> str:
    if baseline is None:
        return "evalgate gate --candidate v3"
    return (
        "evalgate baseline pull --run-id 9876500000 && "
        f"evalgate gate --baseline {baseline.name} --candidate v3"
    )


def context(
    base: Run | None,
    candidate: Run,
    policy: GatePolicy | None = None,
    **overrides: Any,
) -> CommentContext:
    fields: dict[str, Any] = {
        "suite": SUITE,
        "verdict": decide(base, candidate, policy or GatePolicy()),
        "candidate": summarise(candidate),
        "baseline": provenance(base) if base else None,
        "links": CommentLinks(workflow_run=RUN_URL, artifact=ARTIFACT_URL),
        "reproduce": reproduce(base),
        "version": VERSION,
    }
    return CommentContext(**(fields | overrides))


# ------------------------------------------------------------------------------------------
# The contexts of the golden files
# ------------------------------------------------------------------------------------------


def pass_context(make_case: MakeCase, make_run: MakeRun) -> CommentContext:
    baseline, candidate = make_pair(
        make_case, make_run, n=80, broken=[7], fixed=[12, 33], unstable=[21]
    )
    return context(baseline, candidate)


def fail_context(make_case: MakeCase, make_run: MakeRun) -> CommentContext:
    def message(i: int, expected: str) -> str:
        if i == 3:
            return "Ping @support: order #1234 arrived with a bent wheel | twice <b>now</b>"
        return MESSAGES[expected].format(n=i + 3)

    baseline, candidate = make_pair(
        make_case,
        make_run,
        n=120,
        broken=[3, 7, 11, 15, 19, 23, 27, 31, 42, 50, 66, 90, 1, 5, 9, 13, 17, 21, 25, 29, 33, 37],
        fixed=[40, 44],
        unstable=[60, 61],
        regression=[119],
        messages=message,
        repeats=3,
    )
    return context(baseline, candidate, GatePolicy(critical_categories=["refund"]))


def inconclusive_context(make_case: MakeCase, make_run: MakeRun) -> CommentContext:
    baseline, candidate = make_pair(
        make_case, make_run, n=60, broken=[4], fixed=[9], errored=[10, 20, 30, 40, 50]
    )
    return context(baseline, candidate)


def no_baseline_context(make_case: MakeCase, make_run: MakeRun) -> CommentContext:
    _, candidate = make_pair(make_case, make_run, n=60)
    return context(None, candidate, flags=CommentFlags(no_baseline=True))


def same_job_context(make_case: MakeCase, make_run: MakeRun) -> CommentContext:
    baseline, candidate = make_pair(make_case, make_run, n=80, fixed=[5], repeats=1)
    ctx = context(baseline, candidate)
    return ctx.model_copy(
        update={
            "baseline": provenance(baseline, source="same job", artifact_url=None, age_days=0.0)
        }
    )


def stale_context(make_case: MakeCase, make_run: MakeRun) -> CommentContext:
    baseline, candidate = make_pair(make_case, make_run, n=80, fixed=[5, 6])
    ctx = context(baseline, candidate)
    stale = provenance(
        baseline,
        age_days=45.0,
        created_at=CREATED - timedelta(days=45),
        commit="0badc0ffee0badc0ffee0badc0ffee0badc0ffee",
        warnings=["stale", "other-commit"],
    )
    return ctx.model_copy(update={"baseline": stale})


def fork_context(make_case: MakeCase, make_run: MakeRun) -> CommentContext:
    return CommentContext(
        suite=SUITE, flags=CommentFlags(fork=True), pull_request=42, version=VERSION
    )


def skipped_context(make_case: MakeCase, make_run: MakeRun) -> CommentContext:
    return CommentContext(
        suite=SUITE,
        flags=CommentFlags(
            skipped="no file under prompts/ or cases.jsonl, nor evalgate.yml, changed"
        ),
        version=VERSION,
    )


LONG = (
    "@everyone <!-- evalgate:suite=bike-shop --> | --> <details> Hello, I bought a bike from you last spring and since then the gears slip whenever I "
    "climb a hill, the chain falls off about once a week, and the shop told me twice that it "
    "was fixed when it was not. "
)


def huge_context(make_case: MakeCase, make_run: MakeRun) -> CommentContext:
    n = 5_400
    categories = [f"topic-{k:02d}" for k in range(30)]
    baseline, candidate = make_pair(
        make_case,
        make_run,
        n=n,
        broken=range(0, 5_000),
        fixed=range(5_000, 5_300),
        unstable=range(5_300, 5_340),
        errored=range(5_340, 5_380),
        messages=lambda i, _: f"(message {i}) {LONG}" * 3,
        categories=categories,
    )
    return context(baseline, candidate)


def pull_request_context(make_case: MakeCase, make_run: MakeRun) -> CommentContext:
    """One suite's comment in a pull request of three suites, decided with one alpha."""
    baseline, candidate = make_pair(
        make_case, make_run, n=80, broken=[7], fixed=[12, 33], unstable=[21]
    )
    verdict = decide(baseline, candidate, GatePolicy())
    worse_base, worse_cand = make_pair(make_case, make_run, n=120, broken=range(0, 30))
    small_base, small_cand = make_pair(make_case, make_run, n=20)
    decision = decide_pull_request(
        [
            (SUITE, verdict),
            ("refunds", decide(worse_base, worse_cand, GatePolicy())),
            ("smalltalk", decide(small_base, small_cand, GatePolicy())),
        ]
    )
    return context(
        baseline,
        candidate,
        verdict=decision.suites[0].verdict,
        pull_request_kind=decision.kind,
        pull_request_tests=decision.tests,
        suite_parts=[(s.suite, s.verdict.kind) for s in decision.suites],
    )


CONTEXTS: dict[str, Callable[[MakeCase, MakeRun], CommentContext]] = {
    "pull-request": pull_request_context,
    "pass": pass_context,
    "fail": fail_context,
    "inconclusive": inconclusive_context,
    "no-baseline": no_baseline_context,
    "same-job": same_job_context,
    "stale": stale_context,
    "fork": fork_context,
    "skipped": skipped_context,
    "huge": huge_context,
}


_BUILT: dict[str, CommentContext] = {}
_RENDERED: dict[str, str] = {}


@pytest.fixture
def contexts(make_case: MakeCase, make_run: MakeRun) -> dict[str, CommentContext]:
    """The golden files' contexts, built once for the module (the huge one takes seconds)."""
    if not _BUILT:
        _BUILT.update((name, build(make_case, make_run)) for name, build in CONTEXTS.items())
    return _BUILT


@pytest.fixture
def rendered(contexts: dict[str, CommentContext]) -> dict[str, str]:
    if not _RENDERED:
        _RENDERED.update((name, render_comment(ctx)) for name, ctx in contexts.items())
    return _RENDERED


# ------------------------------------------------------------------------------------------
# A checker of the GitHub-flavoured Markdown the comment relies on
# ------------------------------------------------------------------------------------------


def _cells(row: str) -> int:
    """The number of cells of a table row: its unescaped pipes, less one."""
    pipes = [m.start() for m in re.finditer(r"\|", row)]
    unescaped = [p for p in pipes if (len(row[:p]) - len(row[:p].rstrip("\\"))) % 2 == 0]
    return len(unescaped) - 1


def markdown_problems(text: str, suite: str = SUITE, limit: int = COMMENT_LIMIT) -> list[str]:
    """What GitHub would render wrongly (or refuse) in a comment body; [] when it is sound."""
    problems = []
    lines = text.split("\n")
    if len(text) > limit:
        problems.append(f"{len(text)} characters, over {limit}")
    if lines[0] != marker(suite):
        problems.append(f"first line is {lines[0]!r}, not the marker")
    if text.count("<!-- evalgate:") != 1 or text.count("<!--") != 1:
        problems.append("the marker (or another HTML comment) appears more than once")

    depth = 0
    fence = False
    table_cells: int | None = None
    for no, line in enumerate(lines, 1):
        if line.startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        if re.search(r"@(?=\w)", re.sub(r"`[^`]*`", "", line)):
            problems.append(f"line {no}: an @mention")
        for tag in re.finditer(r"(?<!\\)</?([A-Za-z][\w-]*)", line):
            if tag.group(1).lower() not in ALLOWED_TAGS:
                problems.append(f"line {no}: raw HTML tag {tag.group(0)!r}")
        depth += line.count("<details>") - line.count("</details>")
        if depth < 0:
            problems.append(f"line {no}: </details> without <details>")
        if "<details>" in line:
            if not re.fullmatch(r"<details><summary>[^<>]*</summary>", line):
                problems.append(f"line {no}: <details> without a one-line <summary>")
            elif no < len(lines) and lines[no] != "":
                problems.append(
                    f"line {no}: no blank line after <summary>, Markdown would not render"
                )
        alert = re.fullmatch(r"> \[!(\w+)\]", line)
        if alert:
            if alert.group(1) not in ALERTS:
                problems.append(f"line {no}: unknown alert type {alert.group(1)}")
            if no > 1 and lines[no - 2].strip() not in ("", marker(suite)):
                problems.append(f"line {no}: an alert must start a block")
            if no >= len(lines) or not lines[no].startswith("> "):
                problems.append(f"line {no}: an empty alert")
        elif "[!" in line and line.startswith(">"):
            problems.append(f"line {no}: malformed alert {line!r}")
        if line.startswith("|"):
            cells = _cells(line)
            if table_cells is None:
                header = no < len(lines) and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[no])
                if not header:
                    problems.append(f"line {no}: a table row without a header")
                table_cells = cells
            elif cells != table_cells:
                problems.append(f"line {no}: {cells} cells in a table of {table_cells}")
            if not line.endswith("|") or line.endswith("\\|"):
                problems.append(f"line {no}: a table row that does not end with a pipe")
        else:
            if table_cells is not None and line != "":
                problems.append(f"line {no}: a table not followed by a blank line")
            table_cells = None
    if depth:
        problems.append(f"{depth} <details> not closed")
    if fence:
        problems.append("an unclosed code fence")
    return problems


# ------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CONTEXTS))
def test_golden(name: str, rendered: dict[str, str], golden: Callable[[str, str], None]) -> None:
    golden(f"comment-{name}.md", rendered[name])


@pytest.mark.parametrize("name", list(CONTEXTS))
def test_golden_file_is_valid_github_markdown(name: str) -> None:
    path = GOLDEN / f"comment-{name}.md"
    assert path.exists(), f"no golden file {path}: run scripts/regen-golden and review it"
    assert markdown_problems(path.read_text(encoding="utf-8")) == []


def test_the_checker_finds_what_github_would_break() -> None:
    good = f"{marker(SUITE)}\n> [!TIP]\n> **ok**\n\n| a | b |\n|---|---|\n| 1 \\| 2 | 3 |\n"
    assert markdown_problems(good) == []
    assert any("cells" in p for p in markdown_problems(good.replace("\\|", "|")))
    assert any(
        "details" in p for p in markdown_problems(good + "<details><summary>x</summary>\n\n")
    )
    assert any("alert" in p for p in markdown_problems(good.replace("[!TIP]", "[!HINT]")))
    assert any("marker" in p for p in markdown_problems(good + "<!-- evalgate:suite=x -->\n"))
    assert any("mention" in p for p in markdown_problems(good + "hi @octocat\n"))
    assert markdown_problems(good + "\n`@octocat`\n\n```\n@octocat <b>\n```\n") == []
    assert any("HTML" in p for p in markdown_problems(good + "<img src=x>\n"))
    assert markdown_problems("x" * 70_000)


def test_verdict_comes_first_as_an_alert(rendered: dict[str, str]) -> None:
    for name, alert in [("pass", "TIP"), ("fail", "CAUTION"), ("inconclusive", "WARNING")]:
        lines = rendered[name].split("\n")
        assert lines[0] == "<!-- evalgate:suite=bike-shop -->"
        assert lines[1] == f"> [!{alert}]"
        assert lines[2].startswith("> **bike-shop ") and lines[2].endswith("**")


def test_sections_come_in_the_documented_order(rendered: dict[str, str]) -> None:
    text = rendered["fail"]
    order = [
        "> [!CAUTION]",
        "| n (cases) | accuracy",
        "**Baseline**",
        "#### Regression cases that failed",
        "#### Broken",
        "<details><summary>Fixed",
        "#### Per category",
        "**Reproduce locally**",
        "[Workflow run](",
        "<sub>evalgate 0.1.0</sub>",
    ]
    positions = [text.index(s) for s in order]
    assert positions == sorted(positions)


def test_fail_shows_twenty_broken_cases_open_and_the_rest_collapsed(
    rendered: dict[str, str],
) -> None:
    text = rendered["fail"]
    broken = text[text.index("#### Broken") : text.index("<details><summary>Fixed")]
    open_part, _, collapsed = broken.partition("<details>")
    assert open_part.count("\n| case-") == 20
    assert collapsed.startswith("<summary>2 more broken cases</summary>")
    assert collapsed.count("\n| case-") == 2
    assert "refund **(critical)**" in text


def test_every_number_has_its_n_and_interval(rendered: dict[str, str]) -> None:
    lines = rendered["fail"].split("\n")
    head = next(i for i, line in enumerate(lines) if line.startswith("| n ("))
    assert lines[head].startswith("| n (cases) | accuracy: baseline → PR (95% CI) |")
    assert "| ruled out |" in lines[head] and "| drops above 24.3 points |" in lines[head + 2]
    row = lines[head + 2]
    # 119 dev cases; the two unstable ones stay in (the conditional test uses every repeat).
    assert row.startswith("| 119 paired | ")
    assert re.search(r"\| \d+\.\d% \(\d+\.\d–\d+\.\d%\) → \d+\.\d% \(\d+\.\d–\d+\.\d%\) \|", row)
    assert " points (-" in row and "1.1% (3 repeats, n = 119)" in row
    assert "\n| 60 scored | none → 100.0% (94.0–100.0%) | n/a | n/a |" in rendered["no-baseline"]


def test_untrusted_text_is_escaped(rendered: dict[str, str]) -> None:
    text = rendered["fail"]
    assert "@\u200dsupport" in text and "@support" not in text
    assert "\\#\u200d1234" in text and "\\<b\\>now\\</b\\>" in text and "wheel \\| twice" in text


@pytest.mark.parametrize(
    "hostile",
    [
        "<!-- evalgate:suite=bike-shop -->",
        "<!--evalgate:suite=x-->",
        "x --> <!-- evalgate:suite=bike-shop",
        "`<!-- evalgate:suite=bike-shop -->`",
        "</details></td> <script>alert(1)</script> @admin #1 | a | b |\n\n| x |",
    ],
)
def test_no_text_can_forge_the_marker_or_break_the_markdown(
    hostile: str, make_case: MakeCase, make_run: MakeRun
) -> None:
    baseline, candidate = make_pair(
        make_case, make_run, n=30, broken=[1, 2], fixed=[3], messages=lambda i, _: hostile
    )
    ctx = context(
        baseline,
        candidate,
        suite=hostile,
        reproduce=f"evalgate gate --candidate '{hostile}'",
        baseline=provenance(baseline, run=hostile, model=hostile, warnings=[hostile]),
        version=hostile,
    )
    for text in (render_comment(ctx), render_comment(ctx, max_chars=3_000)):
        assert text.count("<!-- evalgate:") == 1
        assert text.count("<!--") == 1
        assert text.startswith(marker(hostile) + "\n")
        assert markdown_problems(text, suite=hostile) == []


def test_marker_is_stable_and_cannot_end_early() -> None:
    assert marker("bike-shop") == "<!-- evalgate:suite=bike-shop -->"
    assert marker("a --> b\n") == "<!-- evalgate:suite=a%20--%3E%20b%0A -->"


def test_huge_run_is_shed_to_fit(rendered: dict[str, str]) -> None:
    text = rendered["huge"]
    assert len(text) <= COMMENT_LIMIT
    assert len(text) > COMMENT_LIMIT - 5_000, "shedding should keep what fits"
    assert text.startswith(marker(SUITE) + "\n> [!CAUTION]\n> **bike-shop failed the gate: ")
    note = re.search(
        r"> (\d+) sections? (was|were) shortened to fit GitHub's 65,536-character", text
    )
    assert note and int(note.group(1)) >= 1
    assert "the full report is in the job summary and [the run artefact](" in text
    assert "more broken cases not shown here" in text
    assert "**Reproduce locally**" in text and "<sub>evalgate 0.1.0</sub>" in text


@pytest.mark.parametrize("limit", [1_000, 2_000, 4_000, 6_000])
def test_any_limit_is_respected_and_keeps_the_verdict(
    limit: int, make_case: MakeCase, make_run: MakeRun
) -> None:
    text = render_comment(fail_context(make_case, make_run), max_chars=limit)
    assert len(text) <= limit
    assert text.startswith(marker(SUITE) + "\n> [!CAUTION]\n> **bike-shop failed the gate: ")
    assert markdown_problems(text, limit=limit) == []
    assert "shortened to fit the " in text


def test_a_comment_that_fits_is_not_shortened(rendered: dict[str, str]) -> None:
    for name in ("pass", "fail", "inconclusive", "stale"):
        assert "shortened" not in rendered[name]
        assert "not shown here" not in rendered[name]


def test_shedding_takes_the_largest_section_first(make_case: MakeCase, make_run: MakeRun) -> None:
    baseline, candidate = make_pair(
        make_case, make_run, n=400, broken=range(0, 30), fixed=range(100, 400), repeats=1
    )
    ctx = context(baseline, candidate)
    full = render_comment(ctx, max_chars=10**7)
    text = render_comment(ctx, max_chars=len(full) - 2_000)
    assert "more fixed cases not shown here" in text
    assert "more broken cases not shown here" not in text
    assert "> 1 section was shortened" in text


def test_job_summary_has_no_marker_and_fits_bytes(contexts: dict[str, CommentContext]) -> None:
    summary = render_job_summary(contexts["huge"], max_bytes=200_000)
    assert "<!--" not in summary
    assert summary.startswith("> [!CAUTION]\n")
    assert len(summary.encode()) <= 200_000
    assert "shortened to fit the job summary's 200,000-byte limit" in summary


def test_fork_comment_spends_nothing_and_suggests_only_safe_patterns(
    rendered: dict[str, str],
) -> None:
    text = rendered["fork"]
    assert "Nothing was spent" in text
    assert "label" in text and "`workflow_run`" in text
    assert "gh pr checkout 42" in text
    # pull_request_target is named once, only to warn against it.
    assert text.count("pull_request_target") == 1
    assert "Never hand a fork's code your secrets" in text


def test_skipped_comment_says_why(rendered: dict[str, str]) -> None:
    text = rendered["skipped"]
    assert "> [!NOTE]" in text and "was skipped" in text and "Nothing was run" in text


def test_no_baseline_says_what_to_do(rendered: dict[str, str]) -> None:
    text = rendered["no-baseline"]
    assert "> [!WARNING]" in text and "no usable baseline" in text
    assert "run the workflow on the default branch" in text
    assert "**Baseline** none." in text


def test_same_job_baseline_says_it_doubles_the_cost(rendered: dict[str, str]) -> None:
    assert "twice the cost" in rendered["same-job"]
    assert "computed in this job" in rendered["same-job"]


def test_stale_baseline_warns_with_the_fix(rendered: dict[str, str]) -> None:
    text = rendered["stale"]
    assert "(45 days old)" in text
    assert "the baseline is 45 days old" in text and "refresh it by running the workflow" in text
    assert "made on commit 0badc0ffee0b" in text


def test_links_must_be_http(make_case: MakeCase, make_run: MakeRun) -> None:
    baseline, candidate = make_pair(make_case, make_run, n=10)
    ctx = context(
        baseline,
        candidate,
        links=CommentLinks(workflow_run="javascript:alert(1)", artifact=f"{ARTIFACT_URL}?a=(b c)"),
    )
    text = render_comment(ctx)
    assert "javascript" not in text
    assert f"[Run artefact]({ARTIFACT_URL}?a=%28b%20c%29)" in text


def test_a_report_needs_a_verdict() -> None:
    with pytest.raises(ValidationError, match="needs the verdict"):
        CommentContext(suite=SUITE)


def test_too_small_a_limit_is_refused(make_case: MakeCase, make_run: MakeRun) -> None:
    with pytest.raises(ValueError, match="no room"):
        render_comment(fork_context(make_case, make_run), max_chars=100)


@pytest.mark.parametrize("cap", [0, 5, 17, 40, 99, 250, 1_000, 10_000])
def test_most_rows_finds_the_exact_answer(cap: int) -> None:
    widths = [1, 30, 2, 2, 50, 1, 1, 9, 80, 3] * 5

    def render(k: int) -> str:
        return "head\n" + "".join("x" * w for w in widths[:k])

    part = _Part("rows", render, rows=len(widths))
    best = max((k for k in range(len(widths) + 1) if len(render(k)) <= cap), default=None)
    assert _most_rows(part, cap, len) == best
