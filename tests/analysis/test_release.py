"""Release reports and the release gate (evalgate/analysis/release.py, `evalgate release`), and the rule
that the holdout is only ever reported in aggregate.

Known answers are worked by hand in the comments: clustered SEs with Miller's formula
``SE = sqrt(C/(C-1) * sum_clusters (sum of residuals)^2) / n``, sign-test p-values as binomial
tail sums ``P(X >= b)`` with ``X ~ Bin(b + c, 1/2)``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CliResult
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from evalgate.analysis.release import (
    READINGS,
    HoldoutScore,
    ReleaseRecord,
    Score,
    chart_title,
    make_record,
    mermaid_chart,
    release_report,
)
from evalgate.analysis.summary import Rate
from evalgate.cases.holdout import HoldoutKey, line_digest, read_ledger, redact
from evalgate.cases.read import Case, record_hash
from evalgate.config.load import load_config
from evalgate.config.models import GatePolicy, SplitPolicy
from evalgate.report.render import md, render
from evalgate.running.suite import load_prompt, load_suite_cases
from evalgate.runs.schema import CaseResult, PromptInfo, Run, read_run

KEY = "EVALGATE_HOLDOUT_KEY"
GATE = GatePolicy()  # alpha 0.05, tolerance 0.05
SPLIT = SplitPolicy()  # read budget 10, min holdout 40


def record(
    name: str,
    day: int,
    dev: int,
    holdout: int,
    *,
    n: int = 1000,
    se: float = 0.02,
    cases: list[HoldoutScore] | None = None,
    regression: tuple[int, int] = (0, 0),
) -> ReleaseRecord:
    """A release with ``dev`` and ``holdout`` hits out of ``n`` each, and the given SEs."""
    return ReleaseRecord(
        name=name,
        time=datetime(2025, 1, day, tzinfo=UTC),
        git_commit=None,
        git_ref=None,
        prompt=PromptInfo(name=name, sha256="0" * 64),
        model="fake/fake-classifier",
        dev=Score(rate=Rate.of(dev, n), se=se),
        holdout=Score(rate=Rate.of(holdout, n), se=se),
        holdout_sha256="holdout-content",
        holdout_cases=cases or [],
        # As a sealed (keyed) holdout's release writes it; the plaintext warning has its own test.
        holdout_keyed=True,
        regression_failed=regression[0],
        regression_n=regression[1],
    )


def scores(
    values: list[float], *, start: int = 0, groups: list[str] | None = None
) -> list[HoldoutScore]:
    return [
        HoldoutScore(
            id=f"h-{start + i:04d}",
            hash=f"hash-{start + i}",
            group=groups[i] if groups else None,
            score=v,
        )
        for i, v in enumerate(values)
    ]


# --- the record --------------------------------------------------------------------------------


def test_make_record_scores_dev_and_holdout_apart(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    right = {"expected": "booking", "answer": "booking"}
    wrong = {"expected": "booking", "answer": "quote"}
    dev = [
        make_case("d1", **right, group="x"),
        make_case("d2", **right, group="x"),
        make_case("d3", **wrong, group="y"),
        make_case("d4", **wrong, group="y"),
    ]
    holdout = [
        redact(
            make_case(f"hold-{i}", **(right if i < 4 else wrong), split="holdout", group=f"hg{i}"),
            HoldoutKey(),
        )
        for i in range(5)
    ]
    holdout.append(
        redact(make_case("hold-err", error="timeout", split="holdout", group="hg9"), HoldoutKey())
    )
    regression = [
        make_case("r1", **right, split="regression"),
        make_case("r2", **wrong, split="regression"),
    ]
    run = make_run([*dev, *holdout, *regression])
    rec = make_record("v1.0", run, datetime(2025, 6, 1, tzinfo=UTC), "sha-of-holdout")

    # dev 2/4 = 0.5; residuals +.5 +.5 -.5 -.5 in clusters x, y: sums +1, -1, C = 2:
    # SE = sqrt(2/1 * (1 + 1)) / 4 = 0.5 (the unclustered SE would be sqrt(1/12) = 0.289).
    assert (rec.dev.rate.hits, rec.dev.rate.n, rec.dev.rate.rate) == (2, 4, 0.5)
    assert rec.dev.se == pytest.approx(0.5)
    # holdout 4/5 = 0.8 (the errored case is left out); residuals .2 x4, -.8 in 5 clusters:
    # SE = sqrt(5/4 * (4 * .04 + .64)) / 5 = sqrt(1) / 5 = 0.2.
    assert (rec.holdout.rate.hits, rec.holdout.rate.n) == (4, 5)
    assert rec.holdout.se == pytest.approx(0.2)
    # gap 0.5 - 0.8 = -0.3; its SE sqrt(0.5² + 0.2²) = sqrt(0.29) = 0.5385.
    assert rec.gap == pytest.approx(-0.3)
    assert rec.gap_se == pytest.approx(math.sqrt(0.29))
    # 95% Wilson intervals of 2/4 and 4/5 (tabulated: 0.150-0.850 and 0.376-0.964).
    assert (rec.dev.rate.low, rec.dev.rate.high) == pytest.approx((0.150, 0.850), abs=1e-3)
    assert (rec.holdout.rate.low, rec.holdout.rate.high) == pytest.approx((0.376, 0.964), abs=1e-3)
    assert (rec.regression_failed, rec.regression_n) == (1, 2)
    # Listed by keyed name, not in file order (a position would tell which case a name is).
    assert sorted(h.score for h in rec.holdout_cases) == [0, 1, 1, 1, 1]
    assert [h.id for h in rec.holdout_cases] == sorted(h.id for h in rec.holdout_cases)
    assert all(h.id.startswith("h-") for h in rec.holdout_cases)
    assert "hold-" not in rec.model_dump_json()


# --- the reading of the gap --------------------------------------------------------------------
# Every record has SE 0.02 on both sides: the noise band is 2 * sqrt(.02² + .02²) = 0.0566, and
# the tolerance 0.05, so a gap counts as large above 0.0566.


def reading(current: ReleaseRecord, history: list[ReleaseRecord]) -> str:
    return release_report(current, history, gate=GATE, split=SPLIT, reads=1).reading


def test_a_small_gap_reads_stable() -> None:
    # gap 0.80 - 0.78 = 0.02, inside the band: small on the first release (no trend to read
    # yet), stable once a release came before it.
    assert reading(record("r1", 1, 800, 780), []) == "small"
    past = [record("r0", 1, 700, 690)]
    assert reading(record("r1", 2, 800, 780), past) == "stable"


def test_a_gap_growing_while_dev_climbs_reads_overfitting() -> None:
    # first gap 0.70 - 0.69 = 0.01; now 0.90 - 0.70 = 0.20 > 0.01 + 0.0566, and dev 0.90 > 0.70.
    history = [record("r1", 1, 700, 690), record("r2", 2, 800, 700)]
    report = release_report(record("r3", 3, 900, 700), history, gate=GATE, split=SPLIT, reads=1)
    assert report.reading == "overfitting"
    assert report.reading_text == READINGS["overfitting"]
    assert "fitted to the dev cases" in report.reading_text


def test_a_gap_large_from_the_first_release_reads_distribution() -> None:
    # first gap 0.80 - 0.60 = 0.20; now 0.82 - 0.62 = 0.20, not beyond 0.20 + 0.0566.
    assert reading(record("r2", 2, 820, 620), [record("r1", 1, 800, 600)]) == "distribution"
    # The very first release with a large gap reads the same.
    assert reading(record("r1", 1, 800, 600), []) == "distribution"


def test_a_holdout_above_dev_reads_leak() -> None:
    # gap 0.60 - 0.80 = -0.20 < -0.0566.
    report = release_report(record("r1", 1, 600, 800), [], gate=GATE, split=SPLIT, reads=1)
    assert report.reading == "leak"
    assert "leak" in report.reading_text and "wrong expected answers" in report.reading_text


def test_the_noise_band_widens_with_the_se() -> None:
    # The same 0.20 gap with SEs of 0.08: band 2 * sqrt(2) * 0.08 = 0.226 -> within it, not
    # leak (small: the first release).
    assert reading(record("r1", 1, 600, 800, se=0.08), []) == "small"


# --- the release gate --------------------------------------------------------------------------


def gate(before: list[float], after: list[float], *, policy: GatePolicy = GATE, **kw: Any) -> Any:
    previous = record("r1", 1, 800, 800, cases=scores(before))
    current = record("r2", 2, 800, 800, cases=scores(after), **kw)
    return release_report(current, [previous], gate=policy, split=SPLIT, reads=2)


def test_six_broken_none_fixed_fails_the_release() -> None:
    # P(X >= 6), X ~ Bin(6, 1/2) = 1/64 = 0.0156 < 0.05.
    report = gate([1.0] * 10, [0.0] * 6 + [1.0] * 4)
    assert (report.paired, report.broken, report.fixed) == (10, 6, 0)
    assert report.p_value == pytest.approx(1 / 64)
    assert report.kind == "fail"
    assert report.reasons == [
        "the holdout dropped significantly since r1: 6 cases worse, 0 better of 10 paired "
        "(one-sided sign test, p = 0.016)"
    ]


def test_four_broken_none_fixed_passes() -> None:
    # P(X >= 4), X ~ Bin(4, 1/2) = 1/16 = 0.0625 > 0.05.
    report = gate([1.0] * 10, [0.0] * 4 + [1.0] * 6)
    assert report.p_value == pytest.approx(1 / 16)
    assert (report.kind, report.reasons) == ("pass", [])


def test_fixes_count_against_breaks() -> None:
    # 6 broken, 1 fixed: P(X >= 6), X ~ Bin(7, 1/2) = (7 + 1) / 128 = 0.0625.
    report = gate([1.0] * 9 + [0.0], [0.0] * 6 + [1.0] * 4)
    assert (report.broken, report.fixed) == (6, 1)
    assert report.p_value == pytest.approx(8 / 128)
    assert report.kind == "pass"


def test_mid_p_is_less_conservative() -> None:
    # 4 broken, 0 fixed: P(X > 4) + P(X = 4) / 2 = 0 + 1/32 = 0.03125 < 0.05.
    report = gate([1.0] * 10, [0.0] * 4 + [1.0] * 6, policy=GatePolicy(mid_p=True))
    assert report.p_value == pytest.approx(1 / 32)
    assert report.kind == "fail"


def test_only_cases_scored_in_both_releases_are_paired() -> None:
    previous = record("r1", 1, 800, 800, cases=scores([1.0] * 10))
    # Hashes 4..13: 4..9 paired (6), 10..13 new. Four of the six paired now fail.
    current = record("r2", 2, 800, 800, cases=scores([0.0] * 4 + [1.0] * 6, start=4))
    report = release_report(current, [previous], gate=GATE, split=SPLIT, reads=2)
    assert (report.paired, report.broken, report.fixed) == (6, 4, 0)
    assert report.p_value == pytest.approx(1 / 16)


def test_the_groups_that_moved_are_listed() -> None:
    groups = ["gA", "gA", "gB", "gB", "gC"]
    previous = record("r1", 1, 800, 800, cases=scores([1, 1, 0, 1, 1], groups=groups))
    current = record("r2", 2, 800, 800, cases=scores([0, 1, 1, 1, 1], groups=groups))
    report = release_report(current, [previous], gate=GATE, split=SPLIT, reads=2)
    moved = [(g.group, g.n, g.before, g.after) for g in report.groups_moved]
    assert moved == [("gA", 2, 1.0, 0.5), ("gB", 2, 0.5, 1.0)]  # gC did not move


def test_the_gate_compares_with_the_latest_earlier_release() -> None:
    r1 = record("r1", 1, 800, 800, cases=scores([0.0] * 10))
    r2 = record("r2", 2, 800, 800, cases=scores([1.0] * 10))
    # Against r2 (all passing) six breaks fail; against r1 (all failing) they would be fixes.
    current = record("r3", 3, 800, 800, cases=scores([0.0] * 6 + [1.0] * 4))
    report = release_report(current, [r2, r1], gate=GATE, split=SPLIT, reads=3)
    assert report.previous is not None and report.previous.name == "r2"
    assert report.kind == "fail"
    # A re-run of the same release name is not its own previous release.
    again = release_report(current, [r1, current], gate=GATE, split=SPLIT, reads=3)
    assert again.previous is not None and again.previous.name == "r1"
    assert [r.name for r in again.history] == ["r1", "r3"]


def test_a_failed_regression_case_fails_the_release() -> None:
    report = gate([1.0] * 10, [1.0] * 10, regression=(1, 3))
    assert report.kind == "fail"
    assert report.reasons == ["1 of 3 regression cases failed; they must never fail"]


def test_the_first_release_passes_with_a_warning() -> None:
    report = release_report(record("r1", 1, 800, 780), [], gate=GATE, split=SPLIT, reads=1)
    assert (report.kind, report.previous, report.p_value) == ("pass", None, None)
    assert report.warnings == ["no previous release to compare the holdout with: this is the first"]


def test_the_read_budget_only_warns() -> None:
    at = gate([1.0] * 10, [1.0] * 10)
    assert at.warnings == [] and at.reads == 2
    for reads, warned in ((10, False), (11, True)):
        previous = record("r1", 1, 800, 800)
        report = release_report(
            record("r2", 2, 800, 800), [previous], gate=GATE, split=SPLIT, reads=reads
        )
        assert report.kind == "pass"
        budget = [w for w in report.warnings if "budget" in w]
        assert bool(budget) is warned
    assert budget == [
        "this holdout has been read 11 times, over the budget of 10: every read leaks a "
        "little; add fresh holdout cases and retire the old ones"
    ]


def test_a_small_holdout_warns() -> None:
    report = release_report(record("r1", 1, 30, 30, n=39), [], gate=GATE, split=SPLIT, reads=1)
    assert any("39 scored cases, under 40" in w for w in report.warnings)


def test_the_chart_title_says_which_line_is_upper() -> None:
    dev_above = [record("v1", 1, 700, 690), record("v2", 2, 905, 700)]
    hold_above = [record("v1", 1, 600, 690), record("v2", 2, 650, 700)]
    crossing = [record("v1", 1, 600, 690), record("v2", 2, 905, 700)]
    assert chart_title(dev_above) == "dev (upper) and holdout (lower) accuracy by release"
    assert chart_title(hold_above) == "holdout (upper) and dev (lower) accuracy by release"
    assert chart_title(crossing) == (
        "holdout (upper at v1) and dev accuracy by release; they cross by v2"
    )
    assert f'title "{chart_title(hold_above)}"' in mermaid_chart(hold_above)


def test_mermaid_chart_text() -> None:
    history = [record("v1", 1, 700, 690), record('v2 "beta"', 2, 905, 700)]
    assert mermaid_chart(history) == (
        "xychart-beta\n"
        '    title "dev (upper) and holdout (lower) accuracy by release"\n'
        '    x-axis ["v1", "v2 \'beta\'"]\n'
        '    y-axis "accuracy %" 0 --> 100\n'
        "    line [70.0, 90.5]\n"
        "    line [69.0, 70.0]"
    )
    report = release_report(history[1], history[:1], gate=GATE, split=SPLIT, reads=1)
    assert report.mermaid == mermaid_chart(history)


def test_the_reports_show_the_trend_the_reading_and_the_chart() -> None:
    history = [record("r1", 1, 700, 690), record("r2", 2, 800, 700)]
    report = release_report(record("r3", 3, 900, 700), history, gate=GATE, split=SPLIT, reads=3)
    markdown = render("release.md.j2", s=report)
    # One row per release, newest first: gaps 20, 10 and 1 points, each ± 1.96 * sqrt(2) * 2 = 5.5.
    rows = [line for line in markdown.splitlines() if line.startswith(("| r1 ", "| r2 ", "| r3 "))]
    assert [row.split(" | ")[0] for row in rows] == ["| r3", "| r2", "| r1"]
    assert [row.split(" | ")[-1] for row in rows] == [
        "20.0 pt (± 5.5) |",
        "10.0 pt (± 5.5) |",
        "1.0 pt (± 5.5) |",
    ]
    assert f"```mermaid\n{report.mermaid}\n```" in markdown
    assert f"**Reading:** {READINGS['overfitting']}" in markdown
    assert "Holdout reads: 3 (budget 10)" in markdown
    text = render("release.txt.j2", s=report)
    assert text.startswith("Release r3: PASS")
    assert f"Reading: {READINGS['overfitting']}" in text


# --- `evalgate release` end to end -------------------------------------------------------------


def release(
    cli: Callable[..., CliResult], root: Path, name: str, *extra: str, **kw: Any
) -> tuple[int, dict[str, Any], str]:
    options = ("--config", str(root / "evalgate.yml"), "--name", name, "--format", "json")
    code, out, err = cli("release", "v2", *options, *extra, **kw)
    return code, json.loads(out) if out else {}, err


def suite_cases(root: Path) -> list[Case]:
    loaded = load_config(root / "evalgate.yml")
    _, suite = loaded.suite(None)
    return list(load_suite_cases(loaded, suite).cases)


def test_each_release_appends_to_the_ledger(cli: Callable[..., CliResult], bike_shop: Path) -> None:
    holdout = [c for c in suite_cases(bike_shop) if c.split == "holdout"]
    loaded = load_config(bike_shop / "evalgate.yml")
    prompt = load_prompt(loaded, loaded.suite(None)[1], "v2")
    ledger = bike_shop / ".evalgate" / "holdout-ledger.jsonl"

    code, first, err = release(cli, bike_shop, "r1")
    assert code == 0 and first["reads"] == 1
    assert "(1 read of this holdout)" in err
    code, second, err = release(cli, bike_shop, "r2")
    assert code == 0 and second["reads"] == 2
    assert "(2 reads of this holdout)" in err

    records = read_ledger(ledger)
    assert len(records) == 2
    assert {r.holdout_sha256 for r in records} == {first["current"]["holdout_sha256"]}
    assert {(r.prompt, r.prompt_sha256, r.n, r.purpose) for r in records} == {
        ("v2", prompt.sha256, len(holdout), "release")
    }
    assert records[0].score == pytest.approx(first["current"]["holdout"]["rate"]["rate"])
    # The second release pairs every holdout case with the first (the fake model is
    # deterministic), so nothing moved.
    assert (second["paired"], second["broken"], second["fixed"]) == (len(holdout), 0, 0)
    assert second["previous"]["name"] == "r1"


def test_a_significant_holdout_drop_exits_1(cli: Callable[..., CliResult], bike_shop: Path) -> None:
    code, _, _ = release(cli, bike_shop, "r1")
    assert code == 0
    # Pretend every holdout case passed at r1: each one v2 gets wrong is now a break.
    saved = bike_shop / ".evalgate" / "releases" / "r1.json"
    data = json.loads(saved.read_text())
    wrong = sum(1 for h in data["holdout_cases"] if h["score"] < 1)
    assert wrong >= 6
    for h in data["holdout_cases"]:
        h["score"] = 1.0
    saved.write_text(json.dumps(data))
    code, second, _ = release(cli, bike_shop, "r2")
    assert code == 1 and second["kind"] == "fail"
    assert (second["broken"], second["fixed"]) == (wrong, 0)
    assert second["p_value"] == pytest.approx(0.5**wrong)


def test_a_failed_regression_case_exits_1(cli: Callable[..., CliResult], bike_shop: Path) -> None:
    # The fake model reads "refund" as a complaint: labelled booking, this case always fails.
    case = {"id": "reg-1", "category": "booking", "split": "regression", "message": "A refund?"}
    with (bike_shop / "cases.jsonl").open("a") as handle:
        handle.write(json.dumps(case) + "\n")
    code, report, _ = release(cli, bike_shop, "r1")
    assert code == 1
    assert report["reasons"] == ["1 of 1 regression cases failed; they must never fail"]


def test_reads_past_the_budget_warn_but_pass(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    config = bike_shop / "evalgate.yml"
    data = yaml.safe_load(config.read_text())
    data["suites"]["bike-shop"]["split"]["read_budget"] = 1
    config.write_text(yaml.safe_dump(data))
    code, first, _ = release(cli, bike_shop, "r1")
    assert code == 0 and not [w for w in first["warnings"] if "budget" in w]
    code, second, err = release(cli, bike_shop, "r2")
    assert code == 0 and second["kind"] == "pass"
    assert "read 1 times (budget 1)" in err
    assert [w for w in second["warnings"] if "over the budget of 1" in w]


# --- the holdout stays held out ----------------------------------------------------------------


def seal_the_holdout(cli: Callable[..., CliResult], root: Path) -> str:
    """Move the example's hashed holdout cases into a sealed store; returns the secret key."""
    config = root / "evalgate.yml"
    data = yaml.safe_load(config.read_text())
    data["suites"]["bike-shop"]["sealed_holdout"] = {
        "file": "holdout.sealed.jsonl",
        "public_key": "holdout.pub",
    }
    config.write_text(yaml.safe_dump(data))
    code, out, _ = cli("holdout", "keygen", "--config", str(config))
    assert code == 0
    held = {c.source.rsplit(":", 1)[1] for c in suite_cases(root) if c.split == "holdout"}
    lines = (root / "cases.jsonl").read_text().split("\n")
    keep = [line for n, line in enumerate(lines, start=1) if str(n) not in held]
    moved = [line for n, line in enumerate(lines, start=1) if str(n) in held]
    (root / "cases.jsonl").write_text("\n".join(keep))
    new = root / "new-holdout.jsonl"
    new.write_text("\n".join(moved) + "\n")
    code, _, _ = cli("holdout", "add", str(new), "--config", str(config))  # no key needed
    assert code == 0
    new.unlink()
    return out.strip().splitlines()[-1]


def needles(case: Case) -> list[str]:
    """What would give a holdout case away, in every escaping an output might use."""
    message = case.input["message"]
    return [
        case.id,
        message,
        json.dumps(message)[1:-1],
        json.dumps(message, ensure_ascii=False)[1:-1],
        md(message),
    ]


@pytest.mark.parametrize("sealed", [False, True], ids=["hashed", "sealed"])
def test_a_release_never_discloses_a_holdout_case(
    cli: Callable[..., CliResult], bike_shop: Path, sealed: bool
) -> None:
    everything = suite_cases(bike_shop)
    holdout = [c for c in everything if c.split == "holdout"]
    dev = [c for c in everything if c.split == "dev"]
    assert len(holdout) >= 40
    env = {KEY: seal_the_holdout(cli, bike_shop)} if sealed else {}
    if sealed:
        assert not [c for c in suite_cases(bike_shop) if c.split == "holdout"]

    config = str(bike_shop / "evalgate.yml")
    outputs: dict[str, str] = {}
    for fmt in ("text", "markdown", "json"):
        options = ("--format", fmt, "--name", f"release-{fmt}")
        code, out, err = cli("release", "v2", "--config", config, *options, env=env)
        assert code == 0, err
        outputs[f"stdout ({fmt})"], outputs[f"stderr ({fmt})"] = out, err
    state = bike_shop / ".evalgate"
    files = sorted(p for p in state.rglob("*") if p.is_file())
    for path in files:
        outputs[str(path.relative_to(bike_shop))] = path.read_text(encoding="utf-8")
    kinds = {p.parent.name for p in files} | {p.name for p in files if p.parent == state}
    assert {"runs", "releases", "holdout-ledger.jsonl"} <= kinds
    assert len([p for p in files if p.parent.name == "runs"]) == 3

    # The holdout was read, in full, three times...
    report = json.loads(outputs["stdout (json)"])
    assert report["current"]["holdout"]["rate"]["n"] == len(holdout)
    assert report["reads"] == 3
    # ... and not one case of it shows anywhere.
    found = [
        (where, needle)
        for where, text in outputs.items()
        for case in holdout
        for needle in needles(case)
        if needle in text
    ]
    assert found == []
    # The search does find what is there: dev cases are in the run file, in JSON.
    run_file = next(p for p in files if p.parent.name == "runs")
    assert all(json.dumps(c.input["message"])[1:-1] in run_file.read_text() for c in dev)
    # The holdout part of the run file is hashes and scores.
    run = read_run(run_file)
    held = [c for c in run.cases if c.split == "holdout"]
    assert len(held) == len(holdout)
    # No group, not even keyed: a keyed group's size would match a plaintext group's.
    assert {c.group for c in held} == {None}
    for c in held:
        assert c.id.startswith("h-") and c.score is not None
        assert (c.input, c.expected, c.category) == (None, None, None)
        assert all(o.text is None and o.answer is None for o in c.outcomes)


def test_pull_request_runs_never_read_the_holdout(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    everything = suite_cases(bike_shop)
    holdout_ids = {c.id for c in everything if c.split == "holdout"}
    config = str(bike_shop / "evalgate.yml")
    code, _, err = cli("run", "v2", "--config", config)
    assert code == 0 and "holdout" not in err
    runs = list((bike_shop / ".evalgate" / "runs").glob("*.json"))
    assert len(runs) == 1
    run = read_run(runs[0])
    assert {c.split for c in run.cases} == {"dev"}
    assert len(run.cases) == len(everything) - len(holdout_ids)
    assert not holdout_ids & {c.id for c in run.cases}
    # The gate's candidate run, made from a prompt version, leaves the holdout out too.
    cli("gate", "--config", config, "--baseline", run.name, "--candidate", "v2")
    runs = list((bike_shop / ".evalgate" / "runs").glob("*.json"))
    assert len(runs) == 2
    for path in runs:
        assert "holdout" not in {c.split for c in read_run(path).cases}
    assert not (bike_shop / ".evalgate" / "holdout-ledger.jsonl").exists()


TRAP_CONFIG = """
version: 1
suites:
  trap:
    prompts: prompts/*.txt
    cases: cases.jsonl
    fields: {input: [message]}
    model:
      backend: fake
      name: fake-classifier
      options: {rules: {rules: [{label: booking, phrases: [book]}]}}
    scorer: {kind: python, function: "holdout_trap_scorer:score"}
    split: {min_holdout: 0}
"""
TRAP_SCORER = """
def score(expected, text):
    return "not a score" if expected == "trap" else 1.0
"""


def test_an_error_on_a_holdout_case_does_not_name_it(
    cli: Callable[..., CliResult], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "v1.txt").write_text("Label the message: booking or other.")
    (tmp_path / "evalgate.yml").write_text(TRAP_CONFIG)
    (tmp_path / "holdout_trap_scorer.py").write_text(TRAP_SCORER)
    cases = [
        {"id": "dev-1", "message": "book me in", "expected": "booking", "split": "dev"},
        {"id": "secret-hold-7", "message": "book it", "expected": "trap", "split": "holdout"},
    ]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    monkeypatch.syspath_prepend(str(tmp_path))  # restored after the test
    code, _, err = cli("release", "v1", "--config", str(tmp_path / "evalgate.yml"))
    assert code == 2
    assert "the scorer failed on case 'h-" in err and "secret-hold-7" not in err


# --- a dictionary attack on what a release publishes --------------------------------------------


def _guesses(root: Path) -> list[tuple[Case, dict[str, Any]]]:
    """The attacker's best guesses: every holdout case exactly as written (an upper bound on
    what guessing from the dev file and the labels can produce)."""
    records = {
        json.loads(line)["id"]: json.loads(line)
        for line in (root / "cases.jsonl").read_text().splitlines()
        if line.strip()
    }
    return [(c, records[c.id]) for c in suite_cases(root) if c.split == "holdout"]


def _fingerprints(case: Case, record: dict[str, Any]) -> set[str]:
    """Every name a guessed case could be checked against without the secret: the record's
    hash and its prefixes, the unkeyed names, the old "h-" name, the group and its hash."""
    content = record_hash({k: v for k, v in record.items() if k != "split"})
    assert content == case.hash  # the guess is the case itself
    plain = HoldoutKey()
    group = case.group or ""
    names = {
        content,
        content[:12],
        content[:16],
        plain.case(case.id, content),
        plain.content(content),
        plain.group(group) or "",
        "h-" + hashlib.sha256(f"{case.id}\0{content}".encode()).hexdigest()[:16],
        hashlib.sha256(group.encode()).hexdigest(),
        hashlib.sha256(f"{case.id}\0{content}\n".encode()).hexdigest(),  # a one-case set hash
    }
    return {n for n in names if n}


@pytest.mark.parametrize("setup", ["sealed", "plaintext with a key", "plaintext without a key"])
def test_a_dictionary_attack_on_every_published_artefact_recovers_nothing(
    cli: Callable[..., CliResult], bike_shop: Path, setup: str
) -> None:
    guesses = _guesses(bike_shop)
    assert len(guesses) > 40
    env: dict[str, str] = {}
    if setup == "sealed":
        env = {KEY: seal_the_holdout(cli, bike_shop)}
    elif setup == "plaintext with a key":
        code, out, _ = cli("holdout", "keygen", "--config", str(bike_shop / "evalgate.yml"))
        assert code == 0
        env = {KEY: out.strip().splitlines()[-1]}
    published: dict[str, str] = {}
    for name in ("r1", "r2"):
        code, report, err = release(cli, bike_shop, name, env=env)
        assert code == 0, err
        published[f"{name} report"] = json.dumps(report)
        published[f"{name} log"] = err
    for path in bike_shop.rglob("*"):
        # Everything a release leaves (state, ledger, cache) and everything committed beside
        # the config (the sealed file and its change ledger), except the case file itself.
        if path.is_file() and path.name != "cases.jsonl":
            published[str(path.relative_to(bike_shop))] = path.read_text(errors="replace")

    recovered = {
        case.id
        for case, record in guesses
        for needle in _fingerprints(case, record)
        for text in published.values()
        if re.search(rf"\b{re.escape(needle)}\b", text)
    }
    if setup == "plaintext without a key":
        # The documented limit (docs/holdout.md): unkeyed names can be recomputed. This also
        # shows that the attack above is real: without the key it recovers every case.
        assert len(recovered) == len(guesses)
        assert any("no holdout key is set" in w for w in report["warnings"])
    else:
        assert recovered == set()
        assert report["current"]["holdout"]["rate"]["n"] == len(guesses)


# --- the sealed store is tamper-evident --------------------------------------------------------


def _sealed(root: Path) -> Path:
    return root / "holdout.sealed.jsonl"


def test_a_trimmed_or_emptied_sealed_file_fails_the_release(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    secret = {KEY: seal_the_holdout(cli, bike_shop)}
    lines = _sealed(bike_shop).read_text().splitlines()
    assert len(lines) > 40
    code, first, err = release(cli, bike_shop, "r1", env=secret)
    assert code == 0, err
    assert first["current"]["sealed_lines"] and first["current"]["mac"]

    # A pull request trims the sealed file to 10 lines: the release fails and says why.
    _sealed(bike_shop).write_text("\n".join(lines[:10]) + "\n")
    code, trimmed, _ = release(cli, bike_shop, "r2", env=secret)
    assert code == 1
    assert trimmed["reasons"][0] == (
        f"the sealed holdout lost {len(lines) - 10} of its {len(lines)} cases since r1 without a "
        "recorded `evalgate holdout retire` (it has 10 now): restore the sealed file from "
        "version control"
    )
    # Emptied: the same, and the holdout is empty besides.
    _sealed(bike_shop).write_text("")
    code, emptied, _ = release(cli, bike_shop, "r3", env=secret)
    assert code == 1
    assert emptied["reasons"][0].startswith(f"the sealed holdout lost {len(lines)} of its")
    assert any("the holdout has no scored cases" in r for r in emptied["reasons"])

    # Restored, the next release compares with r1 (the last good one), not with r3.
    _sealed(bike_shop).write_text("\n".join(lines) + "\n")
    code, restored, err = release(cli, bike_shop, "r4", env=secret)
    assert code == 0, (restored, err)


def test_a_recorded_retire_passes_and_a_forged_one_fails(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    held = [c for c in suite_cases(bike_shop) if c.split == "holdout"]
    secret = {KEY: seal_the_holdout(cli, bike_shop)}
    config = str(bike_shop / "evalgate.yml")
    assert release(cli, bike_shop, "r1", env=secret)[0] == 0
    retired = bike_shop / "retired.jsonl"
    code, _, err = cli(
        "holdout",
        "retire",
        held[0].id,
        held[1].id,
        "--to",
        str(retired),
        "--config",
        config,
        env=secret,
    )
    assert code == 0, err
    changes = (bike_shop / "holdout.changes.jsonl").read_text().splitlines()
    kinds = [json.loads(line)["change"] for line in changes]
    assert kinds == ["add", "retire"]
    retire = json.loads(changes[1])
    assert retire["count"] == 2 and len(retire["lines"]) == 2 and retire["mac"]
    # The change ledger holds counts and ciphertext digests, never a case.
    for case in held[:2]:
        assert case.id not in changes[1] and case.input["message"] not in changes[1]
    code, report, err = release(cli, bike_shop, "r2", env=secret)
    assert code == 0, (report, err)
    assert report["current"]["holdout"]["rate"]["n"] == len(held) - 2

    # Someone without the key removes a line and writes a retire record for it.
    lines = _sealed(bike_shop).read_text().splitlines()
    _sealed(bike_shop).write_text("\n".join(lines[1:]) + "\n")
    forged = dict(retire, lines=[line_digest(lines[0])], count=1, mac="0" * 64)
    with (bike_shop / "holdout.changes.jsonl").open("a") as handle:
        handle.write(json.dumps(forged) + "\n")
    code, report, _ = release(cli, bike_shop, "r3", env=secret)
    assert code == 1
    assert "not signed by the holdout key" in report["reasons"][0]
    assert "without a recorded `evalgate holdout retire`" in report["reasons"][1]


def test_a_release_record_edited_on_the_history_is_refused(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    secret = {KEY: seal_the_holdout(cli, bike_shop)}
    assert release(cli, bike_shop, "r1", env=secret)[0] == 0
    path = bike_shop / ".evalgate" / "releases" / "r1.json"
    data = json.loads(path.read_text())
    for case in data["holdout_cases"]:
        case["score"] = 0.0  # make the last release look worse, so a drop would not show
    path.write_text(json.dumps(data))
    code, _, err = release(cli, bike_shop, "r2", env=secret)
    assert code == 2
    assert "release record 'r1' was changed after it was written" in err


# --- the pull request's other routes at release ----------------------------------------------


def test_a_release_that_loses_the_format_fails_and_the_report_shows_it() -> None:
    # Scores unchanged (a label read from free text still scores), but 8 of 10 holdout replies
    # lost the asked-for format: 8 lost, 0 gained, P(Bin(8, 1/2) >= 8) = 1/256. Holm over the
    # two comparisons (score, format): 2/256 = 0.0078 < 0.05.
    before = [h.model_copy(update={"format_ok": 1.0}) for h in scores([1.0] * 10)]
    after = [
        h.model_copy(update={"format_ok": 0.0 if i < 8 else 1.0})
        for i, h in enumerate(scores([1.0] * 10))
    ]
    previous = record("r1", 1, 800, 800, cases=before)
    current = record("r2", 2, 800, 800, cases=after)
    report = release_report(current, [previous], gate=GATE, split=SPLIT, reads=2)
    assert report.kind == "fail"
    assert report.reasons == [
        "format validity dropped on the holdout since r1: 8 cases lost the asked-for format, "
        "0 gained it of 10 paired (one-sided sign test, p = 0.0039, Holm-adjusted 0.0078)"
    ]
    text = render("release.txt.j2", s=report)
    assert "Format validity: 20% of the holdout's replies in the asked-for format (100% at r1)" in (
        text
    )
    assert "Holdout format vs r1: 10 paired, 8 lost the format, 0 gained it" in text
    markdown = render("release.md.j2", s=report)
    assert "Format validity: 20% of the holdout's replies in the asked-for format" in markdown


def test_critical_categories_at_release_are_said_not_to_be_checked() -> None:
    report = gate([1.0] * 10, [1.0] * 10, policy=GatePolicy(critical_categories=["refund"]))
    assert report.kind == "pass"
    assert any(
        w.startswith("critical categories are not checked at release") for w in report.warnings
    )


def test_a_record_signed_before_formats_were_kept_still_verifies() -> None:
    key = HoldoutKey(X25519PrivateKey.generate())
    old = record("r1", 1, 800, 800, cases=scores([1.0] * 3))
    # The body such a record was signed over had no format_ok field at all.
    assert "format_ok" not in old.body()
    signed = old.model_copy(update={"mac": key.sign(old.body())})
    current = record("r2", 2, 800, 800, cases=scores([1.0] * 3))
    report = release_report(current, [signed], gate=GATE, split=SPLIT, reads=1, key=key)
    assert report.previous is not None and report.previous.name == "r1"
    with_format = record(
        "r3", 3, 800, 800, cases=[h.model_copy(update={"format_ok": 1.0}) for h in scores([1.0])]
    )
    assert '"format_ok":1.0' in with_format.body()


# --- slow drift ---------------------------------------------------------------------------------


def test_ten_small_drops_do_not_all_pass_against_the_reference() -> None:
    """179 holdout cases, all passing at r0; each release breaks 2 or 3 more (1.4 points).

    Against the previous release each step is small: b broken and 0 fixed give the exact
    one-sided sign test p = 0.5**b, 0.25 for b = 2 and 0.125 for b = 3. Against r0 the breaks
    add up: 2, 5, 7, ... With two comparisons Holm doubles the smallest p, so a release fails
    once 2 * 0.5**b < 0.05, i.e. b >= 6: r3 (7 broken since r0, 2 * 0.5**7 = 0.0156).
    """
    n = 179
    steps = [2, 3] * 5
    history: list[ReleaseRecord] = []
    broken = 0
    kinds = []
    for k in range(11):
        if k:
            broken += steps[k - 1]
        cases = scores([0.0] * broken + [1.0] * (n - broken))
        current = record(f"r{k}", k + 1, n - broken, n - broken, n=n, cases=cases)
        report = release_report(current, history, gate=GATE, split=SPLIT, reads=k + 1)
        if k:
            step = report.comparisons[0]
            assert (step.against, step.broken, step.fixed) == (f"r{k - 1}", steps[k - 1], 0)
            assert step.p_value == pytest.approx(0.5 ** steps[k - 1])  # alone: never < 0.05
        kinds.append(report.kind)
        history.append(current)
    assert kinds[:3] == ["pass", "pass", "pass"]
    assert kinds[3] == "fail" and kinds[3:] == ["fail"] * 8
    last = release_report(history[3], history[:3], gate=GATE, split=SPLIT, reads=4)
    [since_r0] = [c for c in last.comparisons if c.against == "r0"]
    assert (since_r0.broken, since_r0.p_adjusted) == (7, pytest.approx(2 * 0.5**7))
    assert "since r0" in last.reasons[0]


def test_a_pinned_reference_release_is_the_one_compared_with() -> None:
    n = 50
    history = [record(f"r{k}", k + 1, 45, n, n=n, cases=scores([1.0] * n)) for k in range(3)]
    current = record("r3", 4, 45, n - 1, n=n, cases=scores([0.0] + [1.0] * (n - 1)))
    pinned = SplitPolicy(reference_release="r1")
    report = release_report(current, history, gate=GATE, split=pinned, reads=4)
    assert report.reference is not None and report.reference.name == "r1"
    assert [c.against for c in report.comparisons] == ["r2", "r1"]
    missing = SplitPolicy(reference_release="v9")
    report = release_report(current, history, gate=GATE, split=missing, reads=4)
    assert [c.against for c in report.comparisons] == ["r2"]
    assert any("reference release 'v9' is not in the history" in w for w in report.warnings)


def test_sealing_cannot_be_dropped_or_dodged_at_release(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    """After a sealed release: a re-run of the same tag on a trimmed store, a config without
    sealed_holdout, and a renamed suite (a new history) on a trimmed store all fail."""
    secret = {KEY: seal_the_holdout(cli, bike_shop)}
    store = _sealed(bike_shop)
    lines = store.read_text().splitlines()
    assert release(cli, bike_shop, "r1", env=secret)[0] == 0

    store.write_text("\n".join(lines[:10]) + "\n")
    code, again, _ = release(cli, bike_shop, "r1", env=secret)  # the same tag, re-run
    assert code == 1 and "lost" in again["reasons"][0]

    config = bike_shop / "evalgate.yml"
    original = config.read_text()
    data = yaml.safe_load(original)
    data["suites"]["bike-shop"].pop("sealed_holdout")
    config.write_text(yaml.safe_dump(data))
    code, unsealed, _ = release(cli, bike_shop, "r2", env=secret)
    assert code == 1
    assert any("sealed at release r1 and is not now" in r for r in unsealed["reasons"])

    data = yaml.safe_load(original)
    data["suites"] = {"renamed": data["suites"].pop("bike-shop")}
    config.write_text(yaml.safe_dump(data))
    code, out, err = cli(
        "release",
        "v2",
        "--config",
        str(config),
        "--name",
        "r9",
        "--format",
        "json",
        "--suite",
        "renamed",
        env=secret,
    )
    renamed = json.loads(out)
    assert code == 1, err
    # The good r1 is kept beside its failing re-run, so the renamed suite compares with it.
    assert renamed["reasons"][0].startswith(f"the sealed holdout lost {len(lines) - 10} of its")


def test_an_unreadable_change_ledger_is_one_line(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    secret = {KEY: seal_the_holdout(cli, bike_shop)}
    with (bike_shop / "holdout.changes.jsonl").open("ab") as handle:
        handle.write(b"\xff\xfe not text\n")
    code, _, err = release(cli, bike_shop, "r1", env=secret)
    assert code == 2 and "Traceback" not in err
    assert "holdout.changes.jsonl:2: not valid UTF-8" in err
    assert "calls" not in err  # refused before any call


def test_a_release_without_holdout_cases_shows_no_gap(
    cli: Callable[..., CliResult], bike_shop: Path
) -> None:
    # No holdout at all: no fraction, and no split written on any case.
    config = bike_shop / "evalgate.yml"
    config.write_text(config.read_text().replace("holdout_fraction: 0.3", "holdout_fraction: 0.0"))
    rows = [json.loads(x) for x in (bike_shop / "cases.jsonl").read_text().splitlines()]
    for row in rows:
        row.pop("split", None)
    (bike_shop / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for fmt in ("text", "markdown"):
        code, out, _ = cli("release", "v2", "--config", str(config), "--format", fmt, "--no-save")
        assert code == 1
        assert "the holdout has no scored cases" in out
        # A gap against nothing is no number: not the dev score passed off as a gap.
        assert "n/a (no holdout cases)" in out
        assert " pt (± " not in out
