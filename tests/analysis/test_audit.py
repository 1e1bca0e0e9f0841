"""`evalgate audit`: a searched prompt's honest held-out number beside its fitted one.

Known answers are independent arithmetic: per-case SD 0.33 on 200 cases gives SE 0.0233; the
expected maximum of 400 standard normals (2.97, integrated here by the midpoint rule) and their
95th percentile (the normal quantile at 0.95^(1/400), 3.66) put the best of 400 candidates all
worth 0.79 at 0.859 on average and 0.875 at the 95th percentile. The seeded simulation must land
within 0.002 of both.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist, stdev

import pytest
from conftest import EXAMPLE

from evalgate.analysis.audit import CANNOT_SEE, audit, selection_inflation
from evalgate.analysis.intervals import standard_error
from evalgate.analysis.margin import tango_z
from evalgate.cases.holdout import read_ledger
from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.errors import UserError
from evalgate.running.suite import load_suite_cases
from evalgate.runs.schema import CaseResult, Run

SE_200 = 0.33 / math.sqrt(200)


@pytest.fixture(autouse=True)
def not_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("GITHUB_REF", raising=False)


def expected_max_of_normals(n: int, steps: int = 40_000) -> float:
    """E[max of n standard normals] = integral of x * n * phi(x) * Phi(x)^(n-1), midpoint rule."""
    normal = NormalDist()
    low, high = -8.0, 8.0
    h = (high - low) / steps
    xs = (low + (k + 0.5) * h for k in range(steps))
    return h * math.fsum(x * n * normal.pdf(x) * normal.cdf(x) ** (n - 1) for x in xs)


# ------------------------------------------------------------------------------------------
# Known answers
# ------------------------------------------------------------------------------------------


def test_standard_errors_of_the_known_answers() -> None:
    assert standard_error(0.33, 200) == pytest.approx(0.0233, abs=5e-5)
    assert standard_error(0.33, 86) == pytest.approx(0.036, abs=5e-4)


def test_the_independent_oracles_give_the_quoted_numbers() -> None:
    e_max = expected_max_of_normals(400)
    q95 = NormalDist().inv_cdf(0.95 ** (1 / 400))
    assert e_max == pytest.approx(2.97, abs=0.005)
    assert q95 == pytest.approx(3.66, abs=0.005)
    assert 0.79 + SE_200 * e_max == pytest.approx(0.859, abs=5e-4)
    assert 0.79 + SE_200 * q95 == pytest.approx(0.875, abs=5e-4)


@pytest.mark.parametrize("seed", [0, 1])
def test_selection_inflation_matches_the_known_answers(seed: int) -> None:
    sel = selection_inflation(400, 200, 0.33, 0.79, reported_gain=0.14, seed=seed)
    assert sel.se == pytest.approx(SE_200, rel=1e-12)
    # Within 0.002 of the quoted numbers and of the independent integral / quantile.
    assert 0.79 + sel.expected_inflation == pytest.approx(0.859, abs=0.002)
    assert 0.79 + sel.inflation_p95 == pytest.approx(0.875, abs=0.002)
    assert sel.expected_inflation == pytest.approx(SE_200 * expected_max_of_normals(400), abs=0.002)
    assert sel.inflation_p95 == pytest.approx(
        SE_200 * NormalDist().inv_cdf(0.95 ** (1 / 400)), abs=0.002
    )
    assert sel.expected_inflation == pytest.approx(0.069, abs=0.002)
    assert sel.inflation_p95 == pytest.approx(0.085, abs=0.002)
    # Half of a reported 14-point gain is what picking the best of 400 does by itself.
    assert sel.share_explained == pytest.approx(sel.expected_inflation / 0.14, rel=1e-12)
    assert sel.share_explained == pytest.approx(0.49, abs=0.02)
    assert (sel.searched, sel.tuning_cases, sel.per_case_sd) == (400, 200, 0.33)


def test_selection_inflation_share_is_capped_and_needs_a_positive_gain() -> None:
    def share(gain: float | None) -> float | None:
        return selection_inflation(400, 200, 0.33, 0.79, gain, seed=0).share_explained

    assert share(0.03) == 1.0  # selection could explain all of a 3-point gain
    assert share(None) is None
    assert share(0.0) is None and share(-0.05) is None
    # The inflation does not depend on the true score, only on SE and N; it is seeded.
    a = selection_inflation(400, 200, 0.33, 0.50, None, seed=3)
    b = selection_inflation(400, 200, 0.33, 0.79, None, seed=3)
    assert a.expected_inflation == pytest.approx(b.expected_inflation, abs=1e-12)
    assert selection_inflation(1, 200, 0.33, 0.79, None, seed=0).expected_inflation == (
        pytest.approx(0.0, abs=0.001)
    )


# ------------------------------------------------------------------------------------------
# audit() on hand-built runs
# ------------------------------------------------------------------------------------------


def holdout_runs(
    make_case: Callable[..., CaseResult],
    make_run: Callable[..., Run],
    baseline_right: list[int],
    candidate_right: list[int],
    *,
    candidate_tokens: int = 300,
    latencies: tuple[float, float] = (0.0, 0.0),
) -> tuple[Run, Run]:
    """Baseline (v1) and candidate (v2) runs on the same holdout cases, plus a dev case each
    that the audit must ignore."""

    def cases(right: list[int], tokens: int, latency: float = 0.0) -> list[CaseResult]:
        held = [
            make_case(
                f"h{i}",
                "quote",
                "quote" if ok else "other",
                split="holdout",
                outcome={"input_tokens": tokens, "latency_s": latency},
            )
            for i, ok in enumerate(right)
        ]
        dev = make_case("dev-1", "quote", "other", outcome={"input_tokens": tokens})
        return [*held, dev]

    baseline = make_run(cases(baseline_right, 120, latencies[0]), prompt={"name": "v1"})
    candidate = make_run(
        cases(candidate_right, candidate_tokens, latencies[1]), prompt={"name": "v2"}
    )
    return candidate, baseline


def test_an_audit_with_no_holdout_case_scored_on_both_sides_says_so(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    # Every candidate call failed (an outage): it was a ValueError from the mean of nothing.
    held = [make_case(f"h{i}", "quote", "quote", split="holdout") for i in range(5)]
    down = [make_case(f"h{i}", "quote", error="529 overloaded", split="holdout") for i in range(5)]
    baseline = make_run(held, prompt={"name": "v1"})
    candidate = make_run(down, prompt={"name": "v2"})
    with pytest.raises(UserError) as caught:
        audit(candidate, baseline)
    assert str(caught.value).startswith(
        "no holdout case was scored in both runs (5 holdout cases errored)"
    )


def test_audit_gain_counts_and_sign_test_by_hand(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    # Ten holdout cases: the candidate breaks h5 and fixes h6, h7, h8.
    base = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    cand = [1, 1, 1, 1, 1, 0, 1, 1, 1, 0]
    candidate, baseline = holdout_runs(make_case, make_run, base, cand)
    report = audit(candidate, baseline)
    diffs = [c - b for b, c in zip(base, cand, strict=True)]
    # Mean 2/10; sample SD sqrt(3.6 / 9); SE = SD / sqrt(10) = 0.2 (each case its own group).
    assert report.gain.mean == pytest.approx(0.2)
    assert report.gain.se == pytest.approx(stdev(diffs) / math.sqrt(10)) == pytest.approx(0.2)
    # The interval is the gate's: the cases carry groups (one case each), so the larger of
    # Tango's and the cluster-robust t bound at each end. Here t's, over ten clusters:
    # t(0.975, 9 df) = 2.262157 from the t table. Tango's ends, where its Z (held to a grid
    # search of the likelihood in tests/analysis/test_stats.py) is -z, lie inside them.
    assert report.gain.low == pytest.approx(0.2 - 2.262157 * 0.2, abs=1e-6)
    assert report.gain.high == pytest.approx(0.2 + 2.262157 * 0.2, abs=1e-6)
    z = 1.959963984540054
    assert tango_z(1, 3, 10, -report.gain.low) < -z and tango_z(3, 1, 10, report.gain.high) < -z
    assert report.gain.n == 10
    assert (report.better, report.worse) == (3, 1)
    # Two-sided sign test on 4 changed cases, 1 the rarer way: 2 * P(Bin(4, 1/2) <= 1) = 10/16.
    assert report.p_value == pytest.approx(10 / 16)
    assert report.test == "exact two-sided sign test"
    assert not report.significant
    assert report.candidate_holdout.n == report.baseline_holdout.n == 10  # the dev case is out
    assert report.candidate_holdout.rate == pytest.approx(0.8)
    assert report.baseline_holdout.rate == pytest.approx(0.6)
    assert (report.candidate, report.baseline) == ("v2", "v1")
    # Not significant: keep the baseline, and say what the candidate costs more per call.
    assert report.recommendation.startswith("Keep v1: the held-out gain of +20.0 points")
    assert "not significant" in report.recommendation
    assert "+180 input tokens per call (300 vs 120)" in report.recommendation
    assert report.candidate_per_call.input_tokens == 300
    assert report.baseline_per_call.input_tokens == 120
    assert report.cannot_see == CANNOT_SEE
    assert report.selection is None and report.baseline_gap is None


def test_audit_recommends_adopting_a_significant_gain(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    # Twelve cases: the candidate fixes ten, breaks none: p = 2 / 2^10 = 0.00195.
    base = [1, 1] + [0] * 10
    cand = [1] * 12
    candidate, baseline = holdout_runs(make_case, make_run, base, cand, candidate_tokens=120)
    report = audit(candidate, baseline)
    assert (report.better, report.worse) == (10, 0)
    assert report.p_value == pytest.approx(2 / 1024)
    assert report.significant
    assert report.recommendation.startswith("Adopt v2: it is better on the holdout by 83.3 points")
    assert "+0 input tokens per call (120 vs 120)" in report.recommendation


@pytest.mark.parametrize(
    ("latencies", "said"),
    [
        ((0.2003, 0.2001), "+0 ms per call"),
        ((0.2, 0.25), "+50 ms per call"),
        ((0.25, 0.2), "-50 ms per call"),
    ],
)
def test_audit_never_says_minus_zero_ms(
    make_case: Callable[..., CaseResult],
    make_run: Callable[..., Run],
    latencies: tuple[float, float],
    said: str,
) -> None:
    # The candidate 0.2 ms faster a call rounds to 0 ms: "+0", never "-0".
    candidate, baseline = holdout_runs(make_case, make_run, [1, 0], [1, 0], latencies=latencies)
    # The dev case (latency 0) is left out of neither: per call is over every outcome.
    report = audit(candidate, baseline)
    assert "-0 ms" not in report.recommendation
    if latencies == (0.2003, 0.2001):
        assert said in report.recommendation


def test_audit_never_recommends_a_significantly_worse_candidate_as_a_tie(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    candidate, baseline = holdout_runs(make_case, make_run, [1] * 12, [1, 1] + [0] * 10)
    report = audit(candidate, baseline)
    assert report.p_value == pytest.approx(2 / 1024) and not report.significant
    assert report.recommendation.startswith("Keep v1: v2 is worse on the holdout by 83.3 points")
    assert "not significant" not in report.recommendation


def test_audit_pairs_by_content_and_leaves_out_errors(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    candidate, baseline = holdout_runs(make_case, make_run, [1, 0, 1], [1, 1, 0])
    candidate.cases[2] = make_case("h2", "quote", split="holdout", error="timeout")
    candidate.cases.append(make_case("only-cand", "quote", split="holdout"))
    report = audit(candidate, baseline)
    assert report.gain.n == 2 and (report.better, report.worse) == (1, 0)


def test_audit_with_selection_and_the_baselines_own_gap(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    base = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    cand = [1, 1, 1, 1, 1, 0, 1, 1, 1, 0]
    candidate, baseline = holdout_runs(make_case, make_run, base, cand)
    report = audit(
        candidate,
        baseline,
        fitted_score=0.93,
        baseline_fitted_score=0.79,
        searched=400,
        tuning_cases=200,
        per_case_sd=0.33,
    )
    sel = report.selection
    assert sel is not None
    assert sel.reported_gain == pytest.approx(0.14)  # fitted minus the baseline's tuning score
    assert sel.expected_inflation == pytest.approx(0.069, abs=0.002)
    assert sel.share_explained == pytest.approx(sel.expected_inflation / 0.14)
    # The baseline scored 0.79 on the tuning cases and 0.6 on the holdout.
    assert report.baseline_gap == pytest.approx(0.19)
    # Without a per-case SD it is measured on the candidate's holdout scores (population SD).
    measured = audit(candidate, baseline, searched=400, tuning_cases=200).selection
    assert measured is not None and measured.per_case_sd == pytest.approx(0.4)


def test_audit_of_continuous_scores_uses_the_permutation_test(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    def runs(scores: list[float], name: str) -> Run:
        cases = [
            make_case(f"h{i}", split="holdout", outcome={"score": s}) for i, s in enumerate(scores)
        ]
        return make_run(cases, prompt={"name": name})

    report = audit(runs([0.9, 0.8, 0.7, 0.6], "v2"), runs([0.5, 0.8, 0.6, 0.7], "v1"))
    assert report.test == "two-sided paired sign-flip permutation test"
    # Nonzero differences 0.4, 0.1, -0.1: of the 8 sign flips, |sum| >= 0.4 for the 6 that
    # keep the 0.1s from cancelling the 0.4 (all but +-0.4 with both 0.1s against it).
    assert report.p_value == pytest.approx(6 / 8)
    assert (report.better, report.worse) == (2, 1)


# ------------------------------------------------------------------------------------------
# evalgate audit end to end, on a copy of the bike-shop example
# ------------------------------------------------------------------------------------------


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


AUDIT = ["audit", "v3", "--baseline", "v2", "--fitted-score", "0.93"]
SEARCH = ["--searched", "400", "--tuning-cases", "143"]


def holdout_secrets() -> list[str]:
    """Every holdout case id and message of the example (what no output may show)."""
    loaded = load_config(EXAMPLE / "evalgate.yml")
    _, suite = loaded.suite(None)
    held = [c for c in load_suite_cases(loaded, suite).cases if c.split == "holdout"]
    assert len(held) > 50
    return [c.id for c in held] + [str(c.input["message"]) for c in held]


@pytest.mark.parametrize("score", ["93", "-0.1", "nan", "high"])
def test_a_fitted_score_that_is_no_share_is_refused_before_any_read(
    bike_shop: Path, score: str
) -> None:
    # "93" (a percent) was read as 9300% and spent two holdout reads on the report.
    ledger = bike_shop / ".evalgate" / "holdout-ledger.jsonl"
    argv = ["audit", "v3", "--baseline", "v2", "--fitted-score", score, *SEARCH]
    err = io.StringIO()
    with pytest.raises(SystemExit) as caught, contextlib.redirect_stderr(err):
        cli(*argv, "--config", str(bike_shop / "evalgate.yml"))
    assert caught.value.code == 2
    said = err.getvalue()
    assert "--fitted-score" in said and ("outside 0 to 1" in said or "not a number" in said)
    assert not ledger.exists() or read_ledger(ledger) == []


def test_audit_end_to_end_on_the_example(bike_shop: Path) -> None:
    config = str(bike_shop / "evalgate.yml")
    ledger = bike_shop / ".evalgate" / "holdout-ledger.jsonl"
    code, out, err = cli(*AUDIT, *SEARCH, "--config", config)
    assert code == 0, err
    records = read_ledger(ledger)
    assert len(records) == 2
    assert [r.purpose for r in records] == ["audit", "audit"]
    assert [r.prompt for r in records] == ["v3", "v2"]
    assert all(r.forced_reason is None for r in records)
    n = records[0].n
    # The three numbers: fitted, the candidate's holdout score and the baseline's, with n.
    assert "Audit of v3 against v2 on the holdout" in out
    assert "fitted (as the search said)      93.0%" in out
    for version, record in zip(("v3", "v2"), records, strict=True):
        line = next(x for x in out.splitlines() if x.startswith(f"{version} on the holdout"))
        assert f"{100 * (record.score or 0):.1f}%" in line and line.endswith(f"  {n}")
    assert "Held-out gain " in out and "exact two-sided sign test p = " in out
    assert "Selection: the best of 400 equal candidates on 143 tuning cases" in out
    assert "selection alone could explain" in out
    assert "Recommendation: Keep v2:" in out
    assert "input tokens per call" in out
    assert "What this audit cannot see:" in out

    # JSON and Markdown carry the same numbers; no output shows a holdout case.
    code, md, md_err = cli(*AUDIT, *SEARCH, "--config", config, "--format", "markdown")
    assert code == 0, md_err
    assert "**Recommendation**: Keep v2:" in md
    code, js, js_err = cli(*AUDIT, "--config", config, "--json")
    assert code == 0, js_err
    report = json.loads(js)
    assert report["candidate_holdout"]["n"] == report["baseline_holdout"]["n"] == n
    assert report["recommendation"].startswith("Keep v2")
    assert not report["significant"]
    assert len(read_ledger(ledger)) == 6
    shown = "\n".join([out, err, md, md_err, js, js_err])
    leaked = [s for s in holdout_secrets() if s in shown]
    assert leaked == []


def test_audit_past_the_read_budget_needs_a_reason(bike_shop: Path) -> None:
    config = bike_shop / "evalgate.yml"
    text = config.read_text(encoding="utf-8")
    assert "read_budget: 10" in text
    config.write_text(text.replace("read_budget: 10", "read_budget: 1"), encoding="utf-8")
    ledger = bike_shop / ".evalgate" / "holdout-ledger.jsonl"

    code, out, err = cli(*AUDIT, "--config", str(config))
    assert code == 2
    assert err.startswith("error: the holdout has been read 0 times")
    assert "budget of 1" in err and "--force-reason" in err and err.count("\n") == 1
    assert out == ""
    assert read_ledger(ledger) == []  # refused before anything was read

    reason = "one-off audit of the searched prompt before retiring the search"
    code, out, err = cli(*AUDIT, "--config", str(config), "--force-reason", reason)
    assert code == 0, err
    records = read_ledger(ledger)
    assert len(records) == 2
    assert all(r.purpose == "audit" and r.forced_reason == reason for r in records)
    assert "Recommendation: Keep v2" in out
