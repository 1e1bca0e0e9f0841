"""The pull-request comment: verdict first, then the numbers behind it, then the cases.

One comment per suite, found again by the hidden marker on its first line. GitHub refuses a
body over 65,536 characters, so the long sections (cases, categories, reasons) are shortened,
largest first, until the comment fits; the marker and the verdict always stay, and a note says
what was shortened and where the full report is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evalgate import __version__
from evalgate.analysis.summary import RunSummary
from evalgate.defaults import COMMENT_LIMIT
from evalgate.gate.verdict import Verdict, VerdictKind
from evalgate.limits import counted
from evalgate.report.escape import fence, visible
from evalgate.report.render import macros, money

# GITHUB_STEP_SUMMARY takes at most 1 MiB per step.
SUMMARY_LIMIT = 1_048_576
# Broken cases shown in the open table; the rest go in a collapsed block.
OPEN_ROWS = 20
# A per-category table longer than this is collapsed.
CATEGORY_ROWS_OPEN = 10

_TEMPLATE = "comment.md.j2"
_MARKER_PREFIX = "<!-- evalgate:"
# An HTML comment opener anywhere after the marker line is defused by a zero-width space, so no
# text (not even inside a code span, where escapes do not apply) can forge a marker.
_COMMENT_OPEN = "<!--"
_DEFUSED = "<!\u200b--"

BaselineSource = Literal["artifact", "same job", "local"]


class BaselineProvenance(BaseModel):
    """Where the baseline came from, and what about it deserves a warning."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str
    commit: str | None = None
    age_days: float | None = Field(default=None, ge=0)
    created_at: datetime | None = None
    model: str | None = None
    prompt_sha: str | None = None
    cases_sha: str | None = None
    source: BaselineSource = "artifact"
    artifact_url: str | None = None
    # Known keys ("stale", "other-commit", "other-cases", "other-model") are phrased with what
    # to do next; any other text is shown as it is (escaped), so it should say that itself.
    warnings: list[str] = []
    # Baselines that learn (history.py): how many baseline runs were pooled, the repeats a case
    # that gives, the newest A/A comparison when it says the model changed, and cases that
    # flipped in earlier baselines as (id, flipped in, of).
    pooled_runs: int = Field(default=1, ge=1)
    pooled_repeats: int | None = None
    drift_p: float | None = None
    drift_worse: int = 0
    drift_better: int = 0
    flips: list[tuple[str, int, int]] = []


class CommentFlags(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # A fork's pull request: no secrets, so nothing ran (unless a verdict is given anyway).
    fork: bool = False
    # No baseline could be found: the verdict is inconclusive, and the comment says how to fix it.
    no_baseline: bool = False
    # Why the suite was skipped (the PR changes nothing it depends on); None when it ran.
    skipped: str | None = None
    # Why nothing could be run safely (the base commit's split could not be read): the verdict
    # is inconclusive and nothing was spent.
    stopped: str | None = None
    # Why a fork's pull request was refused (its data changes what only the default branch may).
    refused: str | None = None
    # The line naming a state folder (.evalgate/) the checkout holds, which the job ignored.
    ignored_state: str | None = None


class CommentLinks(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workflow_run: str | None = None
    artifact: str | None = None


class CommentContext(BaseModel):
    """Everything the comment shows; built by the publisher, rendered by :func:`render_comment`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str
    verdict: Verdict | None = None
    candidate: RunSummary | None = None
    baseline: BaselineProvenance | None = None
    flags: CommentFlags = CommentFlags()
    links: CommentLinks = CommentLinks()
    # The shell command that reproduces the verdict locally.
    reproduce: str | None = None
    # The pull request's number, for the commands in the fork comment.
    pull_request: int | None = None
    # Cases listed per section (`gate --show N`); None: as many as fit.
    max_rows: int | None = Field(default=None, ge=0)
    # The whole pull request's verdict when it has several suites (one familywise alpha), and
    # every suite's part, as (suite, kind).
    pull_request_kind: VerdictKind | None = None
    pull_request_tests: int | None = None
    suite_parts: list[tuple[str, VerdictKind]] = []
    # The judge's agreement with human labels (judge.md.j2), for suites that have labels.
    judge: str | None = None
    # What the run was expected to cost before it started (``estimated``: an estimate was
    # made; its ``expected_usd`` None when the model has no price).
    estimated: bool = False
    expected_usd: float | None = None
    version: str = __version__

    @model_validator(mode="after")
    def _report_needs_numbers(self) -> CommentContext:
        quiet = self.flags.skipped or self.flags.stopped or self.flags.refused
        if quiet is None and not self.flags.fork:
            if self.verdict is None or self.candidate is None:
                raise ValueError("a report comment needs the verdict and the candidate summary")
        elif self.verdict is not None and self.candidate is None:
            raise ValueError("a verdict needs the candidate summary beside it")
        return self


def marker(suite: str) -> str:
    """The hidden first line that identifies this suite's comment on a pull request.

    The suite name is percent-encoded, so no name can end the HTML comment early.
    """
    return f"{_MARKER_PREFIX}suite={quote(suite, safe='')} -->"


def suite_of_marker(line: str) -> str | None:
    """The suite a comment's first line names, when it is a suite's :func:`marker` and names
    a suite as a config could (None otherwise)."""
    from urllib.parse import unquote

    from evalgate.config.models import valid_name

    found = re.fullmatch(re.escape(_MARKER_PREFIX) + r"suite=([A-Za-z0-9%._~-]+) -->", line)
    if found is None:
        return None
    name = unquote(found.group(1))
    return name if valid_name(name) and marker(name) == line else None


def _safe_url(url: str | None) -> str | None:
    """An http(s) URL fit for a Markdown link target, or None."""
    if not url or not re.match(r"https?://", url):
        return None
    return quote(url, safe=":/?#@!$&'*+,;=%~-._")


def _sha(value: str | None) -> str | None:
    """A hash shortened for people; anything but hex digits is dropped."""
    digits = re.sub(r"[^0-9a-fA-F]", "", value or "")[:12]
    return digits or None


def _shown_baseline(p: BaselineProvenance | None) -> BaselineProvenance | None:
    """The provenance as the comment shows it: short hashes, a safe link."""
    if p is None:
        return None
    return p.model_copy(
        update={
            "commit": _sha(p.commit),
            "prompt_sha": _sha(p.prompt_sha),
            "cases_sha": _sha(p.cases_sha),
            "artifact_url": _safe_url(p.artifact_url),
        }
    )


def _days(age: float | None) -> str:
    if age is None:
        return "some"
    return counted(round(age), "day")


def _baseline_lines(ctx: CommentContext) -> list[str]:
    """The baseline's warnings, each with what to do next."""
    p = ctx.baseline
    if p is None:
        return []
    refresh = "refresh it by running the workflow on the default branch (a push or a manual run)"
    known = {
        "stale": f"the baseline is {_days(p.age_days)} old: the model behind the API may have "
        f"changed since, and this PR would be blamed for it; {refresh}",
        "other-commit": f"the baseline was made on commit {_sha(p.commit) or 'unknown'}, not on "
        f"this PR's base: changes merged since then count as this PR's; {refresh}",
        "other-cases": f"the baseline was run on other cases (cases {_sha(p.cases_sha) or '?'}): "
        f"only cases unchanged in both are compared; {refresh}",
        "other-model": f"the baseline used another model ({p.model or 'unknown'}): a model change "
        f"is not a prompt change; {refresh} with the configured model",
    }
    lines = [known.get(w, w) for w in p.warnings]
    if p.drift_p is not None:
        lines.append(
            f"the model answered differently at this baseline than at the one before it, with "
            f"the same prompt, cases and model ({p.drift_worse} cases worse, {p.drift_better} "
            f"better, p = {p.drift_p:.2g}): the provider may have changed the model under its "
            "name; baselines before the change are not pooled, and this PR is compared with "
            "the model as it answers now"
        )
    if p.flips:
        shown = ", ".join(f"{i} (in {n} of the last {of})" for i, n, of in p.flips[:5])
        more = f" and {len(p.flips) - 5} more" if len(p.flips) > 5 else ""
        lines.append(
            f"{len(p.flips)} cases flipped between repeats in earlier baselines too: {shown}"
            f"{more}; they are noise, not this PR"
        )
    if p.source == "same job":
        lines.append(
            "no stored baseline, so this job ran the base branch's prompt too (twice the cost); "
            "keep one as an artefact by running the workflow on pushes to the default branch"
        )
    elif p.source == "local":
        lines.append(
            "the baseline is a local run, not the default branch's: make sure it is the version "
            "this PR changes"
        )
    return lines


def _advice(ctx: CommentContext) -> list[str]:
    """What to do next for the flags the verdict itself does not know about."""
    advice = []
    if ctx.flags.no_baseline:
        advice.append(
            "no baseline artefact for this suite was found (none made yet, or it expired after "
            "90 days): run the workflow on the default branch (a push or a manual run) to make "
            "one, then push to this PR again"
        )
    if ctx.flags.ignored_state:
        advice.append(ctx.flags.ignored_state)
    return advice


def _notes(v: Verdict, s: RunSummary) -> list[str]:
    """The caption under the summary row: what the numbers mean and what was left out."""
    notes = []
    if v.p_value is not None:
        notes.append(f"p: {v.test}, that the PR is worse than the baseline")
    if v.drop_bound is not None:
        notes.append(
            f"ruled out: drops above this are excluded at {100 * (1 - v.alpha):.0f}% "
            f"confidence ({v.bound_method}); a pass needs it under the "
            f"{100 * v.tolerance:.1f}-point tolerance"
        )
    if v.mde is not None:
        note = f"MDE: the smallest drop this suite detects 80% of the time at n = {v.n_tested:,}"
        if v.cases_needed:
            note += f"; about {v.cases_needed:,} {v.unit}s would bring it to the tolerance"
        notes.append(note)
    if v.edited or v.only_candidate or v.only_baseline:
        notes.append(
            f"not compared: {len(v.edited)} edited, {len(v.only_candidate)} new, "
            f"{len(v.only_baseline)} only in the baseline"
        )
    if v.format_broken or v.format_fixed:
        notes.append(
            f"format: {v.format_broken} replies lost the asked-for format, "
            f"{v.format_fixed} gained it"
        )
    if s.offline and s.costs.priced_as and s.costs.priced_as_cost is not None:
        notes.append(
            f"on {s.costs.priced_as} these tokens would cost ${s.costs.priced_as_cost:.4f}"
        )
    return notes


@dataclass
class _Part:
    """A section of the comment: fixed, or a list of rows that can be shortened or dropped."""

    title: str
    render: Callable[[int], str]
    rows: int = 0
    # The verdict cannot be dropped, only lose its bullets.
    droppable: bool = True
    shown: int = 0
    dropped: bool = False
    text: str = ""

    def __post_init__(self) -> None:
        self.shown = self.rows
        self.text = self.draw(self.rows)

    def draw(self, rows: int) -> str:
        return _inert(self.render(rows))

    @property
    def shortened(self) -> bool:
        return self.dropped or self.shown < self.rows


# No comment can show more rows than this (a row takes well over 40 of 65,536 characters), so
# a section of 10,000 cases is never drawn whole: the rest is counted, not rendered.
ROW_CAP = 1_500


def _parts(ctx: CommentContext, m: Any, where: str) -> list[_Part]:
    """The comment's sections, in order (see comment.md.j2)."""
    v, s = ctx.verdict, ctx.candidate
    assert v is not None and s is not None
    advice = _advice(ctx)
    bullets = len(v.reasons[1:]) + len(advice) + len(v.warnings)
    passes = {u.id: f"{u.passes}/{u.repeats}" for u in (v.noise.unstable if v.noise else [])}
    run_url = _safe_url(ctx.links.workflow_run)
    artifact = _safe_url(ctx.links.artifact)
    baseline = _shown_baseline(ctx.baseline)
    # A fenced block shows its text literally: bidi and invisible characters too, unless shown.
    reproduce = visible(ctx.reproduce or "")
    links = [
        (label, url)
        for label, url in (("Workflow run", run_url), ("Run artefact", artifact))
        if url
    ]

    def fixed(text: str) -> _Part:
        return _Part("", lambda _: text)

    cap = ROW_CAP if ctx.max_rows is None else min(ROW_CAP, ctx.max_rows)

    return [
        _Part(
            "Reasons", lambda k: m.verdict(ctx, v, k, advice, where), rows=bullets, droppable=False
        ),
        fixed(m.summary(v, s, _notes(v, s), money(ctx.expected_usd) if ctx.estimated else None)),
        fixed(m.provenance(baseline, _baseline_lines(ctx))),
        fixed(ctx.judge or ""),
        _Part(
            "Regression failures",
            lambda k: m.regression(v.regression_failures, k, where),
            rows=min(len(v.regression_failures), cap),
        ),
        _Part(
            "Broken cases",
            lambda k: m.broken(v.broken, k, OPEN_ROWS, where),
            rows=min(len(v.broken), cap),
        ),
        _Part(
            "Fixed cases",
            lambda k: m.collapsed(
                "Fixed: failed on the baseline, pass on this PR", v.fixed, k, "fixed cases", where
            ),
            rows=min(len(v.fixed), cap),
        ),
        _Part(
            "Unstable cases",
            lambda k: m.unstable(v.unstable, k, passes, where),
            rows=min(len(v.unstable), cap),
        ),
        _Part(
            "Errored cases",
            lambda k: m.errors(v.errored, s.error_kinds, k, where),
            rows=min(len(v.errored), cap),
        ),
        _Part(
            "Categories",
            lambda k: m.categories(v.categories, k, CATEGORY_ROWS_OPEN, where),
            rows=min(len(v.categories), ROW_CAP),
        ),
        fixed(m.reproduce(reproduce, fence(reproduce))),
        fixed(m.links(links)),
        fixed(m.footer(ctx.version)),
    ]


def _most_rows(part: _Part, cap: int, measure: Callable[[str], int]) -> int | None:
    """The most rows whose text measures at most ``cap`` (None when even no rows do not fit).

    Gallops from an estimate made from the average row, then bisects, so a section of
    thousands of rows is drawn a dozen times, each at about the size it will have.
    """
    empty = measure(part.draw(0))
    if empty > cap:
        return None
    per_row = max(1.0, (measure(part.text) - empty) / max(1, part.rows))
    guess = min(part.rows, int((cap - empty) / per_row))

    def fits(k: int) -> bool:
        return k == 0 or measure(part.draw(k)) <= cap

    # Find low that fits and high that does not (part.rows + 1 stands for "all rows fit").
    low, high, step = (guess, -1, 1) if fits(guess) else (-1, guess, 1)
    while low < 0:
        probe = max(0, high - step)
        low, high = (probe, high) if fits(probe) else (-1, probe)
        step *= 2
    while high < 0:
        probe = low + step
        if probe > part.rows:
            high = part.rows + 1
        elif fits(probe):
            low = probe
        else:
            high = probe
        step *= 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def _shed(
    parts: list[_Part],
    budget: int,
    measure: Callable[[str], int],
    drop: Callable[[_Part], str],
) -> None:
    """Shorten the largest sections first until the parts fit ``budget``.

    Water-filling: find the largest size cap such that capping every long section at it fits
    the budget, then give each longer section as many rows as fit under the cap. So the largest
    section is shortened first, down to the next largest, then both together, and so on. A
    section that cannot fit even without rows is dropped for a one-line mention (the verdict
    keeps its first reason instead).
    """
    sizes = {id(p): measure(p.text) for p in parts}
    long = [p for p in parts if p.rows]
    room = budget - sum(sizes[id(p)] for p in parts if not p.rows)
    if sum(sizes[id(p)] for p in long) <= room:
        return
    low, high = 0, max(sizes[id(p)] for p in long)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(sizes[id(p)], mid) for p in long) <= room:
            low = mid
        else:
            high = mid - 1
    for part in long:
        if sizes[id(part)] <= low:
            continue
        k = _most_rows(part, low, measure)
        if k is None and not part.droppable:
            k = 0
        if k is None:
            part.dropped, part.text = True, _inert(drop(part))
        else:
            part.shown, part.text = k, part.draw(k)


def _inert(text: str) -> str:
    """Text after the marker line: every HTML comment opener made inert."""
    return text.replace(_COMMENT_OPEN, _DEFUSED)


def _cut(text: str, limit: int, measure: Callable[[str], int]) -> str:
    """A last resort: cut at a line, closing what the cut leaves open, to fit ``limit``."""

    def closed(lines: list[str]) -> str:
        fences = [line for line in lines if line.startswith("```")]
        tail = ["`" * (len(fences[-1]) - len(fences[-1].lstrip("`")))] if len(fences) % 2 else []
        depth = sum(line.count("<details>") - line.count("</details>") for line in lines)
        tail += ["", "</details>"] * max(0, depth)
        tail += ["", "… (cut to fit the size limit; the full report is in the run artefact)", ""]
        return "\n".join([*lines, *tail])

    lines = text.split("\n")
    while lines and measure(closed(lines)) > limit:
        lines.pop()
    return closed(lines) if lines else ""


def _fit(head: str, body: str, limit: int, measure: Callable[[str], int]) -> str:
    body = _inert(body)
    if measure(head + body) <= limit:
        return head + body
    return head + _cut(body, limit - measure(head), measure)


def _render(
    ctx: CommentContext,
    limit: int,
    measure: Callable[[str], int],
    head: str,
    limit_text: str,
    where_full: str,
) -> str:
    m = macros(_TEMPLATE)
    footer = str(m.footer(ctx.version))
    if ctx.flags.skipped is not None:
        return _fit(head, m.skipped(ctx, ctx.flags.skipped) + footer, limit, measure)
    if ctx.flags.stopped is not None:
        return _fit(head, m.stopped(ctx, ctx.flags.stopped) + footer, limit, measure)
    if ctx.flags.refused is not None:
        return _fit(head, m.refused(ctx, ctx.flags.refused) + footer, limit, measure)
    if ctx.verdict is None:
        return _fit(head, m.fork(ctx, ctx.pull_request) + footer, limit, measure)

    artifact = _safe_url(ctx.links.artifact)
    if artifact:
        where_full = where_full.replace("the run artefact", f"[the run artefact]({artifact})")
    parts = _parts(ctx, m, where_full)

    def drop(part: _Part) -> str:
        return str(m.left_out(part.title, part.rows, where_full))

    if measure(head) + sum(measure(p.text) for p in parts) > limit:
        widest_note = _inert(m.shed_note(len(parts), limit_text, where_full))
        _shed(parts, limit - measure(head) - measure(widest_note), measure, drop)
    shortened = sum(1 for p in parts if p.shortened)
    note = m.shed_note(shortened, limit_text, where_full) if shortened else ""
    body = parts[0].text + note + "".join(p.text for p in parts[1:])
    return _fit(head, body, limit, measure)


def render_comment(ctx: CommentContext, max_chars: int = COMMENT_LIMIT) -> str:
    """The pull-request comment for one suite, at most ``max_chars`` characters long.

    Its first line is :func:`marker`; then the verdict; then the summary numbers, the baseline,
    the cases and the rest, long sections shortened largest first when the whole would not fit.
    """
    head = marker(ctx.suite) + "\n"
    if max_chars < len(head) + 500:
        raise ValueError(f"max_chars={max_chars} leaves no room for a verdict")
    limit_text = (
        f"GitHub's {COMMENT_LIMIT:,}-character limit"
        if max_chars == COMMENT_LIMIT
        else f"the {max_chars:,}-character limit"
    )
    return _render(ctx, max_chars, len, head, limit_text, "the job summary and the run artefact")


def render_job_summary(ctx: CommentContext, max_bytes: int = SUMMARY_LIMIT) -> str:
    """The same report for the job summary: no marker, at most ``max_bytes`` of UTF-8."""
    if max_bytes < 500:
        raise ValueError(f"max_bytes={max_bytes} leaves no room for a verdict")
    return _render(
        ctx,
        max_bytes,
        lambda text: len(text.encode("utf-8")),
        "",
        f"the job summary's {max_bytes:,}-byte limit",
        "the run artefact",
    )
