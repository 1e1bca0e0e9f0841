"""The gate's decision (evalgate/gate/decide.py): known answers for every rule, properties, and the
`evalgate gate` command end to end.

Runs are built from compact specs: a case is an id and its per-repeat scores as a string
("10" = passed the first repeat, failed the second) or a list of floats (judge scores), with
overrides for format, category, group, split, hash and errors. Expected numbers are worked out
by hand in each test (binomial tails with math.comb or powers of 1/2), never by calling the
function under test.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from statistics import NormalDist
from typing import Any

import pytest
import yaml
from conftest import copy_example
from hypothesis import given, settings
from hypothesis import strategies as st

from evalgate.analysis import power
from evalgate.analysis.margin import difference_interval
from evalgate.analysis.sign_test import cases_for_mde, minimum_detectable_effect
from evalgate.cli import main
from evalgate.config.models import GatePolicy
from evalgate.gate.decide import decide
from evalgate.gate.verdict import Verdict
from evalgate.report.render import render_model
from evalgate.runs.schema import CaseResult, ModelInfo, Outcome, PromptInfo, Run

Z95 = 1.959963984540054  # the two-sided 95% normal quantile
CREATED = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


# ------------------------------------------------------------------------------------------
# Factories
# ------------------------------------------------------------------------------------------


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def case(
    id: str,
    scores: str | Sequence[float] = "1",
    *,
    format_ok: bool | str = True,
    category: str | None = None,
    group: str | None = None,
    split: str = "dev",
    hash: str | None = None,
    error: str | None = None,
    answer: str | None = None,
) -> CaseResult:
    """One case. ``scores``: one character per repeat ("1" pass, "0" fail) or a list of floats.
    ``format_ok``: one flag for every repeat, or a string of flags ("10"). ``error`` makes every
    outcome an error. The hash defaults to one derived from the id (same id, same content)."""
    values = [float(ch) for ch in scores] if isinstance(scores, str) else [float(x) for x in scores]
    formats = (
        [ch == "1" for ch in format_ok] if isinstance(format_ok, str) else [format_ok] * len(values)
    )
    outcomes = [
        Outcome(error=error, error_kind="server")
        if error is not None
        else Outcome(
            text=f'{{"category": "{answer or "x"}"}}',
            answer=answer or ("right" if v >= 0.5 else "wrong"),
            score=v,
            format_ok=ok,
        )
        for v, ok in zip(values, formats, strict=True)
    ]
    return CaseResult(
        id=id,
        split=split,
        group=group,
        category=category,
        expected="right",
        input={"message": f"message of {id}"},
        hash=hash or digest(id),
        outcomes=outcomes,
    )


def run(
    cases: Sequence[CaseResult] | str,
    *,
    name: str = "candidate",
    model: str = "claude-test",
    backend: str = "anthropic",
    **overrides: Any,
) -> Run:
    """A run of ``cases``; a string is one case per token ("11 10 01" -> c000, c001, c002)."""
    if isinstance(cases, str):
        cases = [case(f"c{i:03d}", token) for i, token in enumerate(cases.split())]
    scorer = {"kind": "label", "field": "category"}
    fields: dict[str, Any] = {
        "name": name,
        "created_at": CREATED,
        "suite": "suite",
        "prompt": PromptInfo(name=name, sha256=digest(name)),
        "cases_sha256": digest("cases"),
        "case_files": {},
        "model": ModelInfo(
            backend=backend,
            name=model,
            max_tokens=64,
            temperature=0.0,
            options_sha256=digest("options"),
        ),
        "scorer": scorer,
        "scorer_sha256": digest(json.dumps(scorer)),
        "evalgate_version": "0.1.0",
        "repeats": max((len(c.outcomes) for c in cases), default=1),
        "cases": list(cases),
    }
    return Run(**(fields | overrides))


def sign_pair(
    broken: int = 0, fixed: int = 0, same: int = 0, *, base_repeats: int = 1, **kw: Any
) -> tuple[Run, Run]:
    """A baseline and a candidate with ``broken`` right-then-wrong cases, ``fixed``
    wrong-then-right and ``same`` right in both; the baseline's repeats all agree."""
    base, cand = [], []
    for i in range(broken + fixed + same):
        before = "0" if broken <= i < broken + fixed else "1"
        after = "0" if i < broken else "1"
        base.append(case(f"c{i:03d}", before * base_repeats, **kw))
        cand.append(case(f"c{i:03d}", after, **kw))
    return run(base, name="baseline"), run(cand)


def policy(**overrides: Any) -> GatePolicy:
    # The underpowered warning searches for a sample size (about 0.15 s a call); tests that are
    # not about power use a tolerance that their small suites do not miss.
    return GatePolicy(**({"tolerance": 0.99} | overrides))


def binom_pmf(k: int, n: int, p: float) -> float:
    """P(Bin(n, p) = k), by hand."""
    return math.comb(n, k) * p**k * (1 - p) ** (n - k)


def binom_sf(k: int, n: int, p: float) -> float:
    """P(Bin(n, p) >= k), by hand."""
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


def wilson(hits: float, n: int) -> tuple[float, float]:
    """The Wilson score interval, written out (Wilson 1927)."""
    p = hits / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 / denom * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n))
    return centre - half, centre + half


def ids(cases: Sequence[Any]) -> list[str]:
    return [c.id for c in cases]


def test_the_factory_builds_what_the_spec_says() -> None:
    c = case("a", "10", format_ok="01", category="k", group="g", split="regression")
    assert [o.score for o in c.outcomes] == [1.0, 0.0]
    assert [o.format_ok for o in c.outcomes] == [False, True]
    assert (c.category, c.group, c.split, c.score, c.flipped) == ("k", "g", "regression", 0.5, True)
    assert case("a").hash == case("a", "0").hash != case("b").hash
    assert case("e", "11", error="boom").error == "boom"
    assert run("11 10 01").repeats == 2
    assert ids(run("1 0 1").cases) == ["c000", "c001", "c002"]
    base, cand = sign_pair(broken=2, fixed=1, same=1, base_repeats=2)
    assert [c.score for c in base.cases] == [1.0, 1.0, 0.0, 1.0]
    assert [c.score for c in cand.cases] == [0.0, 0.0, 1.0, 1.0]


# ------------------------------------------------------------------------------------------
# The sign test
# ------------------------------------------------------------------------------------------


def test_five_broken_none_fixed_fails_at_p_one_in_32() -> None:
    v = decide(*sign_pair(broken=5, same=20), policy())
    # One repeat a side: the conditional test is the sign test, P(Bin(5, 1/2) >= 5) = 1/32.
    assert v.p_value == pytest.approx(0.5**5)
    # Weighted Holm over the paired test (0.9 of alpha) and format validity (0.1): the
    # adjusted p is (0.9 + 0.1) * (1/32) / 0.9 = 0.0347 < 0.05.
    assert v.kind == "fail"
    assert [r.route for r in v.routes] == ["paired", "format"]
    assert [r.weight for r in v.routes] == pytest.approx([0.9, 0.1])
    assert v.routes[0].p_adjusted == pytest.approx((1 / 32) / 0.9)
    assert v.test == "exact conditional test over 1 baseline and 1 candidate repeats a case"
    assert decide(*sign_pair(broken=5, same=20), policy(test="sign")).test == (
        "one-sided exact sign test"
    )
    assert v.reasons[0].startswith("significantly worse: broke 5, fixed 0")
    assert (len(v.broken), len(v.fixed), v.unchanged, v.n_tested) == (5, 0, 20, 25)


def test_four_broken_none_fixed_passes_at_p_one_in_16() -> None:
    v = decide(*sign_pair(broken=4, same=20), policy())
    assert v.p_value == pytest.approx(0.0625)
    assert v.kind == "pass"
    assert v.reasons[0].startswith("not worse: the data rule out drops above ")
    assert re.search(r"no significant drop \(p = 0.06[23]\)$", v.reasons[0])


def test_mid_p_halves_the_observed_term() -> None:
    v = decide(*sign_pair(broken=5), policy(mid_p=True))
    assert v.p_value == pytest.approx(0.5**5 / 2)  # 0.015625
    assert v.test == "exact conditional test (mid-p) over 1 baseline and 1 candidate repeats a case"
    # b = 4: exact p = 1/16 does not fail, mid-p = 1/32 does.
    assert decide(*sign_pair(broken=4), policy()).kind != "fail"
    v4 = decide(*sign_pair(broken=4), policy(mid_p=True))
    assert (v4.kind, v4.p_value) == ("fail", pytest.approx(0.5**4 / 2))


def test_ties_are_dropped_and_fixes_count_against_breaks() -> None:
    alone = decide(*sign_pair(broken=5), policy())
    with_ties = decide(*sign_pair(broken=5, same=200), policy())
    assert alone.p_value == with_ties.p_value == pytest.approx(1 / 32)
    # b = 5, c = 2: P(Bin(7, 1/2) >= 5) = (21 + 7 + 1) / 128.
    v = decide(*sign_pair(broken=5, fixed=2, same=3), policy())
    assert v.p_value == pytest.approx(29 / 128)
    assert v.kind == "pass"


def test_p_equal_to_alpha_does_not_fail() -> None:
    # The spec: fail when the adjusted p < alpha. b = 5, c = 0 gives p = 1/32 exactly; alone in
    # its family (paired share 1) the adjusted p is 1/32 too.
    alone = {"paired_alpha_share": 1.0}
    assert decide(*sign_pair(broken=5), policy(alpha=0.03125, **alone)).kind != "fail"
    assert decide(*sign_pair(broken=5), policy(alpha=0.0313, **alone)).kind == "fail"


# ------------------------------------------------------------------------------------------
# Which cases enter the test
# ------------------------------------------------------------------------------------------


def test_edited_cases_are_left_out_and_listed() -> None:
    base, cand = sign_pair(broken=4, same=16)
    # The candidate breaks c019 too, but its content changed since the baseline.
    cand.cases[19] = case("c019", "0", hash=digest("new text"))
    v = decide(base, cand, policy())
    assert v.edited == ["c019"]
    assert "c019" not in ids(v.broken)
    assert (len(v.broken), v.p_value) == (4, pytest.approx(1 / 16))
    assert "1 cases were edited since the baseline and are left out" in v.warnings
    assert v.kind == "pass"  # 1 of 20 unpaired is under the 20% allowed


def test_new_and_removed_cases_are_listed_apart() -> None:
    base = run([case(f"c{i}") for i in range(10)], name="baseline")
    cand = run([case(f"c{i}") for i in range(1, 10)] + [case("new")])
    v = decide(base, cand, policy())
    assert (v.only_candidate, v.only_baseline, v.n_tested) == (["new"], ["c0"], 9)


def test_unstable_cases_are_left_out_when_other_repeats_show_them() -> None:
    # Baseline with 3 repeats, candidate with 1: the test compares repeat 1 with the candidate;
    # "110" flipped between repeats 2 and 3, which the comparison does not use.
    base = run([case(f"u{i}", "110") for i in range(5)] + [case(f"s{i}", "111") for i in range(10)])
    cand = run([case(f"u{i}", "0") for i in range(5)] + [case(f"s{i}", "1") for i in range(10)])
    out = decide(base, cand, policy(test="sign"))
    assert ids(out.unstable) == [f"u{i}" for i in range(5)]
    assert (out.kind, len(out.broken), out.n_tested) == ("pass", 0, 10)
    assert out.noise is not None and out.noise.flips == 5

    kept = decide(base, cand, policy(test="sign", exclude_unstable=False))
    assert kept.unstable == []
    assert (kept.kind, len(kept.broken), kept.n_tested) == ("fail", 5, 15)
    # The conditional test leaves nothing out: u* have s = 2 of 4 draws, the candidate's one
    # draw failed (P = 1 - 2/4 = 1/2 each); s* are settled. p = P(Bin(5, 1/2) <= 0) = 1/32.
    every = decide(base, cand, policy())
    assert (every.unstable, every.n_tested) == ([], 15)
    assert every.p_value == pytest.approx(1 / 32)
    assert kept.p_value == pytest.approx(1 / 32)


def test_unstable_cases_stay_in_when_leaving_them_out_would_bias_the_test() -> None:
    """With 2 baseline repeats and 1 candidate run, leaving out the cases that flipped between
    the two repeats leaves only the settled ones, and the candidate's ordinary noise can then
    only break a settled pass: an unchanged prompt would fail. The gate keeps them in, compares
    the candidate with the baseline's first repeat, and says so.

    An A/A comparison (same prompt, fresh noise): 90 settled passes, of which noise breaks 5 in
    the candidate, and 10 flippers. Leaving the flippers out gives b = 5, c = 0, p = 1/32: a
    false fail. Comparing with repeat 1: "10" -> 1 ties, "01" -> 1 is fixed, so b = 5, c = 5.
    """
    base = run(
        [case(f"s{i:02d}", "11") for i in range(90)]
        + [case(f"f{i}", "10") for i in range(5)]
        + [case(f"g{i}", "01") for i in range(5)],
        name="baseline",
    )
    cand = run(
        [case(f"s{i:02d}", "0" if i < 5 else "1") for i in range(90)]
        + [case(f"f{i}", "1") for i in range(5)]
        + [case(f"g{i}", "1") for i in range(5)]
    )
    v = decide(base, cand, policy(test="sign"))
    assert (len(v.broken), len(v.fixed), v.n_tested) == (5, 5, 100)
    assert v.p_value == pytest.approx(sum(math.comb(10, j) for j in range(5, 11)) / 1024)
    assert v.kind == "pass"
    assert v.unstable == []
    assert v.noise is not None and v.noise.flips == 10  # still measured and listed there
    warning = next(w for w in v.warnings if "flipped between the baseline's repeats" in w)
    assert warning.startswith("10 cases that flipped")
    assert "--repeats 3" in warning
    # Nothing to warn about when the policy keeps unstable cases in anyway.
    kept = decide(base, cand, policy(test="sign", exclude_unstable=False))
    assert not any("flipped between" in w for w in kept.warnings)
    assert kept.p_value == v.p_value


def test_a_baseline_without_repeats_warns_that_noise_is_not_measured() -> None:
    v = decide(*sign_pair(same=5), policy())
    assert v.noise is None and v.noise_p is None
    assert any("--repeats 2" in w and "no repeats" in w for w in v.warnings)


# ------------------------------------------------------------------------------------------
# Fail rules beyond the sign test
# ------------------------------------------------------------------------------------------


def test_a_failed_regression_case_fails_even_without_a_baseline() -> None:
    cand = run([case("ok"), case("r1", "0", split="regression"), case("r2", split="regression")])
    v = decide(None, cand, policy())
    assert v.kind == "fail"
    assert ids(v.regression_failures) == ["r1"]
    assert v.reasons == [
        "regression case r1 failed (expected right, answered wrong); regression cases must "
        "never fail"
    ]
    # ... and with a baseline, whatever the sign test says.
    base = run([case("ok"), case("r1", split="regression"), case("r2", split="regression")])
    assert decide(base, cand, policy()).kind == "fail"


def test_regression_cases_stay_out_of_the_paired_test() -> None:
    # Two dev cases: the corrected Tango bound of one unchanged case is 1 (its correction,
    # 1.25, exceeds n D0 for every D0 < 1), of two 92.7 points, under the 99-point tolerance.
    dev = [case("d0"), case("d1")]
    base = run([case(f"r{i}", split="regression") for i in range(6)] + dev, name="b")
    cand = run([case(f"r{i}", split="regression") for i in range(6)] + dev)
    v = decide(base, cand, policy())
    assert (v.kind, v.n_tested) == ("pass", 2)


def test_a_significant_drop_in_format_validity_fails() -> None:
    base, cand = sign_pair(same=20)
    # Same answers, but eight replies lost the asked-for format: p = 1/256. Format validity has
    # 0.1 of alpha; weighted Holm: (1/256) / 0.1 = 0.039 < 0.05.
    cand.cases[:8] = [case(f"c{i:03d}", "1", format_ok=False) for i in range(8)]
    v = decide(base, cand, policy())
    assert (v.format_broken, v.format_fixed, v.format_p) == (8, 0, pytest.approx(1 / 256))
    assert v.kind == "fail"
    assert v.p_value == 1.0
    assert v.reasons == [
        "format validity dropped: 8 cases lost the asked-for format, 0 gained it "
        "(p = 0.0039; weighted Holm over 2 tests: 0.039 < 0.05)"
    ]
    # 7 lost: p = 1/128, adjusted 0.078: not a fail.
    cand.cases[:8] = [case(f"c{i:03d}", "1", format_ok=False) for i in range(7)] + [case("c007")]
    assert decide(base, cand, policy()).kind == "pass"


def categorised(safety_broken: int) -> tuple[Run, Run]:
    """Category "safety" with ``safety_broken`` breaks; "billing" with 5 fixes and 5 ties."""
    base = [case(f"s{i}", "1", category="safety") for i in range(10)]
    base += [case(f"b{i}", "0" if i < 5 else "1", category="billing") for i in range(10)]
    cand = [case(f"s{i}", "0" if i < safety_broken else "1", category="safety") for i in range(10)]
    cand += [case(f"b{i}", "1", category="billing") for i in range(10)]
    return run(base, name="baseline"), run(cand)


def test_a_critical_category_that_regresses_fails() -> None:
    # Overall b = 10, c = 5: P(Bin(15, 1/2) >= 10) = 4944 / 32768 = 0.151, no overall fail.
    # safety: p = 1/1024. Routes: paired 0.9, format 0.05, safety 0.05 of alpha; weighted Holm
    # takes safety first (p / w = 0.0195, all the weight still in play): adjusted 0.0195.
    v = decide(*categorised(10), policy(critical_categories=["safety"]))
    assert v.p_value == pytest.approx(4944 / 32768)
    assert v.kind == "fail"
    assert v.reasons == [
        "critical category safety regressed: broke 10, fixed 0 (p = 0.00098; weighted Holm "
        "over 3 tests: 0.02 < 0.05)"
    ]
    row = {c.category: c for c in v.categories}["safety"]
    # The category table's own Holm over the two categories (billing p = 1): 2/1024.
    assert (row.critical, row.p_value, row.p_holm) == (
        True,
        pytest.approx(1 / 1024),
        pytest.approx(2 / 1024),
    )
    assert {r.route: r.weight for r in v.routes} == pytest.approx(
        {"paired": 0.9, "format": 0.05, "category safety": 0.05}
    )


def test_the_same_drop_in_a_category_that_is_not_critical_passes() -> None:
    v = decide(*categorised(10), policy(critical_categories=["billing"]))
    assert v.kind != "fail"
    assert {c.category: c.critical for c in v.categories} == {"billing": True, "safety": False}
    assert decide(*categorised(10), policy()).kind != "fail"


def test_holm_adjusted_category_p_values() -> None:
    # a: b = 6 (p = 1/64); b: b = 4 (p = 1/16); c: ties only (p = 1).
    # Holm, m = 3: 3 * 1/64 = 0.046875; max(0.046875, 2 * 1/16) = 0.125; max(0.125, 1) = 1.
    base, cand = [], []
    for name, broken in (("a", 6), ("b", 4), ("c", 0)):
        for i in range(8):
            base.append(case(f"{name}{i}", "1", category=name))
            cand.append(case(f"{name}{i}", "0" if i < broken else "1", category=name))
    v = decide(run(base, name="baseline"), run(cand), policy(critical_categories=["c"]))
    rows = {c.category: (c.n, c.broken, c.fixed, c.p_value, c.p_holm) for c in v.categories}
    assert rows["a"] == (8, 6, 0, pytest.approx(1 / 64), pytest.approx(3 / 64))
    assert rows["b"] == (8, 4, 0, pytest.approx(1 / 16), pytest.approx(0.125))
    assert rows["c"] == (8, 0, 0, 1.0, 1.0)
    a_rate = {c.category: c for c in v.categories}["a"]
    assert (a_rate.baseline.rate, a_rate.candidate.rate) == (1.0, 0.25)


def test_broke_more_than_noise_known_answer() -> None:
    # Baseline with R = 2: F = 2 cases flipped; the candidate breaks b = 3 settled passes.
    # p = P(Bin(b + F, 1/(1 + R)) >= b) = P(Bin(5, 1/3) >= 3) = 51/243.
    by_hand = sum(math.comb(5, j) * (1 / 3) ** j * (2 / 3) ** (5 - j) for j in (3, 4, 5))
    assert by_hand == pytest.approx(51 / 243)
    base = run("11 11 11 10 01 11 11 11 11 11", name="baseline")
    cand = run("0  0  0  1  0  1  1  1  1  1")
    v = decide(base, cand, policy())
    assert v.noise is not None and (v.noise.flips, v.noise.repeats) == (2, 2)
    # Over every repeat, c003 (baseline 1/2, candidate 1) is fixed and c004 (1/2, 0) broken;
    # against the first repeat, which the check's null is about, only c000-c002 broke.
    assert (len(v.broken), len(v.fixed)) == (4, 1)
    assert v.noise_p == pytest.approx(by_hand)
    assert not any("noise predicts" in w for w in v.warnings)  # 0.21 >= 0.05


def test_broke_more_than_noise_warns_by_default_and_can_fail() -> None:
    # 10 settled passes broken, 10 settled failures fixed, 1 flipper: the paired test sees a
    # wash, but against the first repeat b = 10 with F = 1 flip over R = 2 repeats:
    # P(Bin(11, 1/3) >= 10) = (11 * 2 + 1) / 3**11 = 23 / 177147.
    base = [case(f"h{i:02d}", "11") for i in range(20)] + [
        case(f"z{i:02d}", "00") for i in range(20)
    ]
    cand = [case(f"h{i:02d}", "0" if i < 10 else "1") for i in range(20)]
    cand += [case(f"z{i:02d}", "1" if i < 10 else "0") for i in range(20)]
    base.append(case("f", "10"))
    cand.append(case("f", "1"))
    baseline, candidate = run(base, name="baseline"), run(cand)
    p = 23 / 3**11
    message = (
        "the PR broke 10 cases (its first draw against the baseline's first repeat), more than "
        "the baseline's noise predicts (1 flips over 2 repeats)"
    )
    warned = decide(baseline, candidate, policy())
    assert warned.noise_p == pytest.approx(p)
    assert warned.kind != "fail"
    assert f"{message}; p = 0.00013" in warned.warnings
    # As a fail route it has 0.05 of alpha: weighted Holm gives p / 0.05 = 0.0026 < 0.05.
    failed = decide(baseline, candidate, policy(noise_check="fail"))
    assert failed.kind == "fail"
    assert failed.reasons == [f"{message} (p = 0.00013; weighted Holm over 3 tests: 0.0026 < 0.05)"]
    off = decide(baseline, candidate, policy(noise_check="off"))
    assert (off.kind, off.noise_p) == (warned.kind, None)


def test_the_noise_check_compares_first_draws_and_counts_flips_over_three_repeats() -> None:
    # The share 1/(1 + R) is exact for R = 2 and 3 and one draw a side: with two candidate
    # draws only the first counts; with 5 baseline repeats flips count over the first 3.
    base = run("11 11 10 11", name="baseline")
    two = decide(base, run("11 01 11 11"), policy())
    # c001: first draws 1 -> 0, broken; F = 1 (c002) over 2 repeats: P(Bin(2, 1/3) >= 1).
    assert two.noise_p == pytest.approx(1 - (2 / 3) ** 2)
    five = run("11111 11111 11100 11011", name="baseline")
    v = decide(five, run("1 0 1 1"), policy())
    # c002 flips only in repeats 4-5 and c003 within the first 3: F = 1 over R = 3; b = 1:
    # P(Bin(2, 1/4) >= 1) = 1 - (3/4)^2.
    assert v.noise_p == pytest.approx(1 - (3 / 4) ** 2)
    assert not any("did not run" in w for w in v.warnings)


def test_underpowered_warning_says_how_many_cases_would_do() -> None:
    v = decide(*sign_pair(same=20), GatePolicy())
    # The paired test has 0.9 of alpha, so its MDE and sample size are at alpha 0.045.
    needed = cases_for_mde(0.05, 0.0, alpha=0.045)
    assert v.mde == minimum_detectable_effect(20, 0.0, alpha=0.045) > 0.05
    assert v.cases_needed == needed
    warning = next(w for w in v.warnings if w.startswith("underpowered"))
    assert f"about {needed} cases would bring that under the 5.0-point tolerance" in warning
    assert f"drops of {100 * v.mde:.1f} points" in warning
    # Nothing changed in 20 cases: the corrected Tango bound (correction g = 1.25) solves
    # (n + z²) D² - (2g + z²) D + g²/n = 0: 22.7055 D² - 5.2055 D + 0.078125 = 0, larger root
    # 0.21312 (21.3 points), over the 5-point tolerance. It falls under 5 points once
    # 0.05 n - 1.25 > z sqrt(0.0475 n), n > 94.81 (by hand), so 95 cases would decide it.
    assert v.kind == "inconclusive"
    assert v.drop_bound == pytest.approx(0.2131181, abs=1e-6)
    assert v.cases_to_decide == 95
    assert "the data rule out drops above 21.3 points" in v.reasons[0]
    assert "about 95 cases at the observed rates would rule it out" in v.reasons[0]
    # A tolerance the suite meets: no warning, no count.
    easy = decide(*sign_pair(same=20), GatePolicy(tolerance=0.9))
    assert easy.cases_needed is None
    assert not any(w.startswith("underpowered") for w in easy.warnings)


def test_a_suite_that_can_detect_no_drop_says_so_not_inf_points() -> None:
    from evalgate.action.inputs import output_number
    from evalgate.analysis.summary import summarise
    from evalgate.report.comment import BaselineProvenance, CommentContext, render_comment
    from evalgate.report.render import render_model

    # One draw a side, no noise: the sign test. Even with all 4 cases broken its p is
    # (1/2)^4 = 0.0625, over the paired share 0.045, so no drop reaches 80% power; with 5 it is
    # (1/2)^5 = 0.03125, under it (by hand). These printed "drops of inf points or more".
    base, cand = sign_pair(same=4)
    v = decide(base, cand, GatePolicy())
    assert v.mde == math.inf
    warning = next(w for w in v.warnings if w.startswith("underpowered"))
    assert "this suite detects no drop, however large, with 80.0% power at its alpha" in warning
    assert "inf" not in warning
    text = render_model("gate", v, "text")
    assert "MDE       none detectable at n = 4" in text
    comment = render_comment(
        CommentContext(
            suite="shop",
            verdict=v,
            candidate=summarise(cand),
            baseline=BaselineProvenance(run=base.name, source="local"),
        )
    )
    assert "| none detectable |" in comment
    assert not re.search(r"\binf\b", text + comment)
    assert output_number(v.mde) == ""  # a step output fromJSON can read, not "inf"
    assert json.loads(v.model_dump_json())["mde"] is None
    five = decide(*sign_pair(same=5), GatePolicy())
    assert five.mde is not None and math.isfinite(five.mde)


# ------------------------------------------------------------------------------------------
# Inconclusive
# ------------------------------------------------------------------------------------------


def test_no_baseline_is_inconclusive() -> None:
    v = decide(None, run("1 1 0"), policy())
    assert v.kind == "inconclusive"
    assert v.reasons == ["no usable baseline: there is nothing to compare against"]
    assert (v.baseline_run, v.p_value, v.candidate_accuracy.rate) == (None, None, 2 / 3)


def test_an_incomplete_candidate_is_inconclusive_unless_something_failed() -> None:
    base, cand = sign_pair(same=48)
    cand.cases[:2] = [case("c000", error="529 overloaded"), case("c001", error="timeout")]
    v = decide(base, cand, policy())  # 2 of 48 errored > 2%
    assert v.kind == "inconclusive"
    assert v.reasons == ["the candidate run is incomplete: 2 of 48 cases errored; re-run it"]
    assert v.errored == ["c000", "c001"]
    base, cand = sign_pair(broken=5, same=43)
    cand.cases[-2:] = [case("c046", error="boom"), case("c047", error="boom")]
    failed = decide(base, cand, policy())
    assert failed.kind == "fail"
    assert failed.reasons[0].startswith("significantly worse: broke 5")


def test_a_candidate_with_every_case_errored_states_no_power() -> None:
    # Nothing paired, nothing tested: the report said "MDE 100.0 points at n = 0".
    base = run(" ".join(["11"] * 30), name="baseline")
    cand = run([case(f"c{i:03d}", "1", error="529 overloaded") for i in range(30)])
    v = decide(base, cand, policy(tolerance=0.05))
    assert v.kind == "inconclusive"
    assert "no case could be paired with the baseline" in v.reasons
    assert (v.n_tested, v.mde, v.power_model) == (0, None, None)
    assert not any(w.startswith("underpowered") for w in v.warnings)
    text = render_model("gate", v, "text")
    assert "MDE" not in text and "100.0 points" not in text


def test_a_candidate_of_part_of_the_suite_cannot_pass_it() -> None:
    # `run --limit 5` or one shard: a verdict on the cases run, given as the suite's (it said
    # "n = 5 paired" and nothing of the 138 others).
    base, cand = sign_pair(same=200)
    whole = decide(base, cand, policy())
    assert whole.kind == "pass"
    limited = decide(base, cand.model_copy(update={"limited_to": 200}), policy())
    assert limited.kind == "inconclusive"
    assert limited.reasons[0].startswith("the candidate ran part of the suite (--limit 200)")
    shard = cand.model_copy(update={"shard": "1/2", "shard_of_sha256": digest("all")})
    sharded = decide(base.model_copy(update={"limited_to": 300}), shard, policy())
    assert [r.split(" (")[0] for r in sharded.reasons] == [
        "the candidate ran part of the suite",
        "the baseline ran part of the suite",
    ]
    assert "shard 1/2, 200 cases" in sharded.reasons[0]
    # What it broke still fails it: those cases were run, and broke.
    b, c = sign_pair(broken=10, same=190)
    assert decide(b, c.model_copy(update={"limited_to": 200}), policy()).kind == "fail"


def test_runs_of_two_suites_are_said_to_be() -> None:
    base, cand = sign_pair(same=20)
    v = decide(base.model_copy(update={"suite": "alpha"}), cand, policy())
    assert any(
        w.startswith("the baseline is a run of suite 'alpha' and the candidate of suite 'suite'")
        for w in v.warnings
    )
    assert not any("run of suite" in w for w in decide(base, cand, policy()).warnings)


def test_an_interrupted_candidate_is_inconclusive() -> None:
    base, cand = sign_pair(same=10)
    # Ctrl-C before the last 3 cases' calls: they were not run, which is not an error.
    stopped = Outcome(error="interrupted before this call was made", error_kind="interrupted")
    cases = [
        c.model_copy(update={"outcomes": [stopped]}) if i >= 7 else c
        for i, c in enumerate(cand.cases)
    ]
    v = decide(base, cand.model_copy(update={"interrupted": True, "cases": cases}), policy())
    assert v.kind == "inconclusive"
    assert v.reasons[0] == (
        "the candidate run is incomplete: it was interrupted with 3 of 10 cases not run; "
        "resume it with `evalgate run VERSION --resume RUN`"
    )
    assert "errored" not in v.reasons[0]


def test_an_interrupted_baseline_says_its_cases_were_not_run() -> None:
    base, cand = sign_pair(same=10)
    stopped = Outcome(error="interrupted before this call was made", error_kind="interrupted")
    cases = [
        c.model_copy(update={"outcomes": [stopped]}) if i >= 6 else c
        for i, c in enumerate(base.cases)
    ]
    v = decide(base.model_copy(update={"interrupted": True, "cases": cases}), cand, policy())
    assert v.kind == "inconclusive"
    assert "the baseline run is incomplete (4 of 10 cases not run)" in v.reasons
    assert not any("errored" in r for r in v.reasons)


def test_different_models_are_inconclusive() -> None:
    base, _ = sign_pair(same=10)
    cand = run([case(f"c{i:03d}") for i in range(10)], model="claude-other")
    v = decide(base, cand, policy())
    assert v.kind == "inconclusive"
    assert v.reasons == [
        "baseline and candidate used different models (anthropic/claude-test vs "
        "anthropic/claude-other)"
    ]
    assert v.n_tested == 10  # the numbers are still there to read


def test_a_changed_scorer_is_inconclusive() -> None:
    base, cand = sign_pair(same=10)
    v = decide(base, cand.model_copy(update={"scorer_sha256": digest("other")}), policy())
    assert v.kind == "inconclusive"
    assert "scored differently" in v.reasons[0]


def test_too_many_unpaired_cases_are_inconclusive() -> None:
    base = run([case(f"c{i}") for i in range(10)], name="baseline")
    # 2 new + 1 edited of 10: 30% > 20%.
    cand = run(
        [case(f"c{i}") for i in range(7)]
        + [case("c7", hash=digest("edited")), case("n1"), case("n2")]
    )
    v = decide(base, cand, policy())
    assert v.kind == "inconclusive"
    assert v.reasons == [
        "3 of 10 candidate cases have no unchanged counterpart in the baseline (new or edited), "
        "over the 20.0% allowed: refresh the baseline"
    ]
    # 2 of 10 is allowed.
    cand.cases[7] = case("c7")
    assert decide(base, cand, policy()).kind == "pass"
    assert decide(base, cand, policy(max_unpaired_share=0.1)).kind == "inconclusive"


def test_nothing_paired_is_inconclusive() -> None:
    v = decide(run("1 1", name="baseline"), run([case("x"), case("y")]), policy())
    assert v.kind == "inconclusive"
    assert "no case could be paired with the baseline" in v.reasons


# ------------------------------------------------------------------------------------------
# Continuous scores, repeats, groups
# ------------------------------------------------------------------------------------------


def test_continuous_scores_use_the_permutation_test_and_are_never_thresholded() -> None:
    # Every judge score drops from 0.9 to 0.6: both sides of 0.5, so a threshold sees no
    # change; the exact sign-flip test over 8 equal drops gives p = 1/2**8.
    base = run([case(f"j{i}", [0.9]) for i in range(8)], name="baseline")
    cand = run([case(f"j{i}", [0.6]) for i in range(8)])
    v = decide(base, cand, policy())
    # One repeat a side: whole runs permuted within each case is the sign-flip test.
    assert v.test == (
        "permutation test of the scores, whole runs permuted within each case (1 and 1 repeats)"
    )
    assert v.p_value == pytest.approx(1 / 256)
    assert v.kind == "fail"
    assert v.difference is not None and v.difference.mean == pytest.approx(-0.3)
    assert v.candidate_accuracy.hits == pytest.approx(8 * 0.6)
    w = decide(base, cand, policy(continuous_test="wilcoxon"))
    assert w.test == "Wilcoxon signed-rank (Pratt)"
    assert w.p_value == pytest.approx(1 / 256)


def test_continuous_scores_use_every_baseline_repeat() -> None:
    # Two baseline repeats a case, one candidate run. a: 0.9, 0.3 | 0.2; b: 0.8, 0.8 | 0.4.
    # The score each side is its mean over every repeat: a 0.6 -> 0.2, b 0.8 -> 0.4.
    base = run([case("a", [0.9, 0.3]), case("b", [0.8, 0.8])], name="baseline")
    cand = run([case("a", [0.2]), case("b", [0.4])])
    v = decide(base, cand, policy())
    assert v.baseline_accuracy is not None
    assert v.baseline_accuracy.hits == pytest.approx(0.6 + 0.8)
    assert v.difference is not None and v.difference.mean == pytest.approx(-0.4)
    # Under no change each case's 3 runs are exchangeable: the candidate's score is any one of
    # them, 1/3 each: a in {0.9, 0.3, 0.2}, b in {0.8, 0.8, 0.4}; observed 0.2 + 0.4 = 0.6.
    # Of the 9 sums only 0.2 + 0.4 is <= 0.6: p = 1/9. (The first repeat alone, 0.9 | 0.2 and
    # 0.8 | 0.4, gives the sign-flip p = 1/4.)
    assert v.p_value == pytest.approx(1 / 9)
    assert v.test.endswith("(2 and 1 repeats)")


def test_a_continuous_score_crossing_one_half_is_a_small_change_not_a_fix() -> None:
    base = run([case("a", [0.45]), case("b", [0.7])], name="baseline")
    cand = run([case("a", [0.55]), case("b", [0.7])])
    v = decide(base, cand, policy())
    assert v.difference is not None and v.difference.mean == pytest.approx(0.05)
    assert v.fixed[0].candidate_score == pytest.approx(0.55)
    assert v.candidate_accuracy.hits == pytest.approx(1.25)


def test_repeats_on_both_sides_score_a_case_by_its_mean_and_count_cases() -> None:
    base = run(
        [case("a", "111"), case("b", "100"), case("c", "110"), case("d", "000")], name="baseline"
    )
    cand = run([case("a", "110"), case("b", "110"), case("c", "101"), case("d", "000")])
    v = decide(base, cand, policy())
    assert v.n_tested == 4  # cases, not 12 attempts
    assert ids(v.broken) == ["a"] and ids(v.fixed) == ["b"] and v.unchanged == 2
    assert v.broken[0].baseline_score == 1.0
    assert v.broken[0].candidate_score == pytest.approx(2 / 3)
    assert v.candidate_accuracy.hits == pytest.approx(2 / 3 + 2 / 3 + 2 / 3 + 0)
    assert v.baseline_accuracy is not None
    assert v.baseline_accuracy.hits == pytest.approx(1 + 1 / 3 + 2 / 3 + 0)
    # Every repeat counts. Given each case's total passes over its 6 draws, the candidate's
    # passes are hypergeometric: a (s = 5) 2 or 3 with 1/2 each; b (s = 3) 0..3 with
    # (1, 9, 9, 1)/20; c (s = 4) 1..3 with (4, 12, 4)/20; d carries nothing. Observed total 6.
    # P(T >= 7), enumerated by hand: (52 + 200) / 800 = 0.315, so p = P(T <= 6) = 0.685.
    assert v.p_value == pytest.approx(0.685)
    sign = decide(base, cand, policy(test="sign"))
    assert sign.p_value == pytest.approx(0.75)  # b = 1, c = 1: P(Bin(2, 1/2) >= 1)


def test_a_single_candidate_run_is_compared_with_one_baseline_repeat() -> None:
    # Baseline "10" vs candidate "0": the baseline's first repeat passed, so it broke.
    v = decide(
        run("10 01", name="baseline"), run("0 0"), policy(test="sign", exclude_unstable=False)
    )
    assert ids(v.broken) == ["c000"] and v.fixed == [] and v.unchanged == 1
    assert v.broken[0].baseline_score == 1.0


def test_a_baseline_whose_cases_have_unequal_repeats_is_compared() -> None:
    # A merged or edited baseline: 2, 1 and 3 repeats. Each case is its own matched set, its
    # candidate draw Bernoulli(s / (R + 1)): a "11" | "0" is X1 ~ Ber(2/3), b "1" | "0" is
    # X2 ~ Ber(1/2), c "101" | "1" is X3 ~ Ber(3/4); observed T = 1. P(T = 3) = 1/4 and
    # P(T = 2) = (2/3)(1/2)(1/4) + (2/3)(1/2)(3/4) + (1/3)(1/2)(3/4) = 11/24, so
    # P(T <= 1) = 1 - 6/24 - 11/24 = 7/24.
    base = run([case("a", "11"), case("b", "1"), case("c", "101")], name="baseline")
    cand = run([case("a", "0"), case("b", "0"), case("c", "1")])
    v = decide(base, cand, policy())
    assert v.p_value == pytest.approx(7 / 24)
    assert v.noise is not None and v.noise.flip_rate == pytest.approx(2 / 3 / 2)
    # ... and over groups, the run totals use the repeats every case of the group has.
    grouped = run([case("a", "11", group="g"), case("b", "1", group="g"), case("c", "101")])
    v = decide(
        grouped.model_copy(update={"name": "baseline"}),
        run([case("a", "0", group="g"), case("b", "0", group="g"), case("c", "1")]),
        policy(unit="group"),
    )
    # Group g over the one repeat both its cases have: totals 2 | 0, the candidate's 2 or 0
    # (1/2 each); c alone: 1, 0, 1 | 1, the candidate's 1 is never above the least: P = 1/2.
    assert v.p_value == pytest.approx(1 / 2)


def test_a_big_drop_over_few_groups_says_what_would_decide_it() -> None:
    # 12 cases in 5 groups (3, 3, 2, 2, 2), every baseline repeat passing; the candidate fails
    # the 6 cases of g0 and g1: 100% -> 50%. Over groups: g0 and g1 have run totals 3, 3 | 0,
    # the candidate's total is 0 with chance 1/3 each; the rest cannot move: p = 1/9, not
    # significant. Case by case each broken case is 1/3: p = 1/3**6 = 0.0014.
    sizes = [3, 3, 2, 2, 2]
    members = [(f"g{g}-{i}", f"g{g}") for g, size in enumerate(sizes) for i in range(size)]
    base = run([case(c, "11", group=g) for c, g in members], name="baseline")
    cand = run([case(c, "0" if g in ("g0", "g1") else "1", group=g) for c, g in members])
    v = decide(base, cand, policy(tolerance=0.05))
    assert v.kind == "inconclusive"
    assert v.p_value == pytest.approx(1 / 9)
    reason = v.reasons[0]
    assert "what would decide it: the observed drop of 50.0 points is not significant over 5 " in (
        reason
    )
    # The power model over groups with no noise: 3 broken units give p <= 3**-3 = 0.037, so a
    # 50-point drop needs n with P(Bin(n, 1/2) >= 3) >= 0.8: n = 8 effective units
    # (1 - 37/256 = 0.855; n = 7 gives 1 - 29/128 = 0.773). Nothing flips, so the groups count
    # as moving together: design effect (9 + 9 + 4 + 4 + 4) / 12 = 2.5, so 8 units are 20
    # cases, 20 / 2.4 = 8.3 groups of this suite's mean size: about 9 groups.
    assert "about 9 groups would show a drop this size 80.0% of the time" in reason
    assert "gate.unit: case tests the cases one by one (p = 0.0014 here)" in reason
    assert decide(base, cand, policy(tolerance=0.05, unit="case")).kind == "fail"


def test_the_count_of_cases_that_would_decide_is_never_the_suite_it_has() -> None:
    # 12 cases in 2 scenario groups of 6, every baseline repeat passing, the candidate breaks
    # one case: with 2 groups the cluster-robust bound (60.9 points) is far over Tango's, so
    # scaling Tango's bound ("about 12 cases would rule it out", on a 12-case suite) says
    # nothing true. More groups would.
    members = [(f"g{g}-{i}", f"g{g}") for g in range(2) for i in range(6)]
    base = run([case(c, "11", group=g) for c, g in members], name="baseline")
    cand = run([case(c, "0" if k == 0 else "1", group=g) for k, (c, g) in enumerate(members)])
    v = decide(base, cand, policy(tolerance=0.4))
    assert v.kind == "inconclusive"
    assert v.cases_to_decide is None
    assert "cases at the observed rates would rule it out" not in v.reasons[0]
    assert "more groups, not more cases of the same groups, would narrow it" in v.reasons[0]
    # Case by case the same data give Tango's bound alone, and a count larger than the suite.
    by_case = decide(base, cand, policy(tolerance=0.3, unit="case"))
    assert by_case.cases_to_decide is not None and by_case.cases_to_decide > 12


def groups_pair() -> tuple[Run, Run]:
    """5 groups of 2 cases that both break, 1 group with one break and one fix, 1 all ties."""
    base, cand = [], []
    for g in range(5):
        for i in range(2):
            base.append(case(f"g{g}-{i}", "1", group=f"g{g}"))
            cand.append(case(f"g{g}-{i}", "0", group=f"g{g}"))
    base += [case("m-0", "1", group="m"), case("m-1", "0", group="m")]
    cand += [case("m-0", "0", group="m"), case("m-1", "1", group="m")]
    base += [case(f"t-{i}", "1", group="t") for i in range(3)]
    cand += [case(f"t-{i}", "1", group="t") for i in range(3)]
    return run(base, name="baseline"), run(cand)


def test_group_unit_counts_groups() -> None:
    by_case = decide(*groups_pair(), policy(unit="case"))
    assert by_case.n_tested == 15
    assert by_case.p_value == pytest.approx(binom_sf(11, 12, 0.5))  # b = 11, c = 1
    # The default with groups: whole runs permuted within each group (R = K = 1). Groups g0..g4
    # have run totals 2 (baseline) and 0 (candidate): the candidate's is 2 or 0, each 1/2; m
    # (1 and 1) and t (3 and 3) cannot move. The candidate's total 0 is the least of 2**5
    # equally likely arrangements: p = 1/32.
    auto = decide(*groups_pair(), policy())
    assert auto.unit == "group" and auto.n_tested == 7
    assert auto.p_value == pytest.approx(1 / 32)
    assert auto.test.startswith("exact group-level conditional test over 7 scenario groups")
    assert any(w.startswith("only 7 scenario groups") for w in auto.warnings)
    by_group = decide(*groups_pair(), policy(unit="group", test="sign"))
    assert by_group.n_tested == 7
    assert by_group.unit == "group"
    assert by_group.test == "one-sided exact sign test, over 7 scenario groups"
    assert by_group.p_value == pytest.approx(1 / 32)  # 5 groups worse, group m ties
    assert by_group.kind == "fail"


# ------------------------------------------------------------------------------------------
# The three numbers
# ------------------------------------------------------------------------------------------


def test_accuracies_have_wilson_intervals_and_the_difference_its_se() -> None:
    # 10 cases: the baseline passes c0..c7; the candidate breaks c0..c2 and fixes c8.
    base = run([case(f"c{i}", "1" if i < 8 else "0") for i in range(10)], name="baseline")
    cand = run([case(f"c{i}", "1" if 3 <= i < 9 else "0") for i in range(10)])
    v = decide(base, cand, policy())
    assert v.baseline_accuracy is not None and v.difference is not None
    b, c = v.baseline_accuracy, v.candidate_accuracy
    assert (b.hits, b.n, c.hits, c.n) == (8, 10, 6, 10)
    # Wilson 95% for 8/10 and 6/10 (also the published values 0.4902-0.9433, 0.3127-0.8318).
    assert (b.low, b.high) == pytest.approx(wilson(8, 10))
    assert (b.low, b.high) == pytest.approx((0.4902, 0.9433), abs=1e-4)
    assert (c.low, c.high) == pytest.approx((0.3127, 0.8318), abs=1e-4)
    # Differences: -1 x 3, +1, 0 x 6; mean -0.2; residuals -0.8 x 3, 1.2, 0.2 x 6;
    # sum of squares 1.92 + 1.44 + 0.24 = 3.6; SE = sqrt(3.6 / (10 * 9)) = 0.2.
    d = v.difference
    assert (d.mean, d.se, d.n) == (pytest.approx(-0.2), pytest.approx(0.2), 10)
    assert d.low < d.mean < d.high  # the score interval: known answers below
    assert c.rate - b.rate == pytest.approx(d.mean)  # same cases on both sides


def test_the_difference_has_a_clustered_se_when_cases_carry_groups() -> None:
    # Groups g1 (differences -1, -1) and g2 (0, +1): mean -0.25; residuals -0.75, -0.75, 0.25,
    # 1.25; cluster sums -1.5 and 1.5; SE = sqrt(2/(2-1) * (2.25 + 2.25)) / 4 = 0.75.
    groups = {"a": "g1", "b": "g1", "c": "g2", "d": "g2"}
    base = run([case(i, "0" if i == "d" else "1", group=g) for i, g in groups.items()], name="b")
    cand = run([case(i, "1" if i in "cd" else "0", group=g) for i, g in groups.items()])
    v = decide(base, cand, policy())
    assert v.difference is not None
    assert (v.difference.mean, v.difference.se) == (pytest.approx(-0.25), pytest.approx(0.75))


def test_the_difference_interval_is_tangos_score_interval() -> None:
    # Fagerland, Lydersen & Laake (2014, Stat Med 33:2850, "Recommended tests and confidence
    # intervals for paired binomial proportions", Table V): 1 discordant pair one way, 7 the
    # other, of 21; Tango's 95% interval -0.5172 to -0.0260 for (1 - 7) / 21. Here 1 case
    # broken and 7 fixed: the candidate's gain 6 / 21, the same interval negated.
    base = run([case(f"c{i:02d}", "1" if i < 1 or i >= 8 else "0") for i in range(21)], name="b")
    cand = run([case(f"c{i:02d}", "0" if i < 1 else "1") for i in range(21)])
    v = decide(base, cand, policy())
    assert v.difference is not None and v.difference.mean == pytest.approx(6 / 21)
    assert (v.difference.low, v.difference.high) == pytest.approx((0.0260, 0.5172), abs=1e-4)


def test_nothing_changed_is_not_a_zero_width_interval() -> None:
    # No case changed of n: Tango's Z(D) = -n D / sqrt(n D (1 - D)) is -z at D = z² / (n + z²)
    # (by hand: square both sides, n² D² = z² n D (1 - D)); 2.6 points at n = 143. The normal
    # interval there was "+0.0 to +0.0", a certainty 143 cases cannot give.
    base = run(" ".join(["1"] * 100 + ["0"] * 43), name="baseline")
    cand = run(" ".join(["1"] * 100 + ["0"] * 43))
    v = decide(base, cand, policy())
    assert v.difference is not None and (v.difference.mean, v.difference.se) == (0.0, 0.0)
    width = Z95**2 / (143 + Z95**2)
    assert (v.difference.low, v.difference.high) == pytest.approx((-width, width))
    assert round(100 * width, 1) == 2.6


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.5, 1.0, 1 / 3, 2 / 3, 0.25]),
            st.sampled_from([0.0, 0.5, 1.0, 1 / 3, 2 / 3, 0.25]),
            st.integers(0, 3),
        ),
        min_size=2,
        max_size=40,
    ),
    st.booleans(),
)
def test_the_difference_interval_holds_its_mean_and_turns_over_with_the_sides(
    rows: list[tuple[float, float, int]], grouped: bool
) -> None:
    # Every branch (pass/fail or scores, over cases or groups): the interval holds the mean,
    # stays in [-1, 1], and swapping the prompts negates it end for end.
    base = [b for b, _, _ in rows]
    cand = [c for _, c, _ in rows]
    groups = [f"g{g}" for _, _, g in rows] if grouped else None
    binary = all(x in (0.0, 1.0) for x in base + cand)
    low, high = difference_interval(base, cand, groups, binary)
    mean = sum(c - b for b, c in zip(base, cand, strict=True)) / len(rows)
    assert -1.0 <= low <= mean + 1e-9 and mean - 1e-9 <= high <= 1.0
    back = difference_interval(cand, base, groups, binary)
    assert back == pytest.approx((-high, -low), abs=1e-9)


def test_the_accuracies_cover_the_same_cases_as_the_difference() -> None:
    # A new case the baseline never saw is in neither accuracy (it has no pair).
    base = run("1 1 1 1 1 1 1 1 1 1", name="baseline")
    cand = run([case(f"c{i:03d}") for i in range(10)] + [case("new", "0")])
    v = decide(base, cand, policy())
    assert v.baseline_accuracy is not None
    assert (v.baseline_accuracy.n, v.candidate_accuracy.n) == (10, 10)
    assert v.candidate_accuracy.rate == 1.0
    # Without a baseline, the candidate's accuracy is over all its scored dev cases.
    alone = decide(None, cand, policy())
    assert (alone.candidate_accuracy.hits, alone.candidate_accuracy.n) == (10, 11)


def test_a_pass_reports_the_mde_at_the_tested_n() -> None:
    base = run(" ".join(["11"] * 95 + ["10"] * 5), name="baseline")
    cand = run(" ".join(["1"] * 100))
    v = decide(base, cand, GatePolicy(tolerance=0.5))
    assert v.noise is not None and v.noise.flip_rate == pytest.approx(0.05)

    # The MDE is the conditional test's with 2 baseline and 1 candidate draws, at the paired
    # test's alpha share 0.045, under its model written out (analysis.conditional): noisy
    # share u = 2f; given b broken and m noisy cases the test rejects with
    # Phi((2b/3 - z sqrt(m/6 + 2b/9) - 1/2) / sqrt(m/6)) (with m = 0: when 3^-b <= alpha),
    # averaged over b ~ Bin(100, d) and m ~ Bin(100 - b, u / (1 - d)).
    def power(d: float) -> float:
        u, z, total = 0.1, NormalDist().inv_cdf(1 - 0.045), 0.0
        for b in range(101):
            for m in range(101 - b):
                weight = binom_pmf(b, 100, d) * binom_pmf(m, 100 - b, u / (1 - d))
                if m == 0:
                    total += weight * (3.0**-b <= 0.045)
                    continue
                shift = 2 * b / 3 - z * math.sqrt(m / 6 + 2 * b / 9) - 0.5
                total += weight * NormalDist().cdf(shift / math.sqrt(m / 6))
        return total

    assert v.mde is not None
    assert power(v.mde) == pytest.approx(0.8, abs=1e-4)
    assert v.kind == "pass"
    assert v.reasons[0].startswith("not worse: the data rule out drops above ")


# ------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------

QUICK = settings(max_examples=40, deadline=None)


def all_p_values(v: Verdict) -> list[float]:
    found = [v.p_value, v.noise_p, v.format_p]
    found += [c.p_value for c in v.categories] + [c.p_holm for c in v.categories]
    return [p for p in found if p is not None]


@QUICK
@given(
    b=st.integers(0, 12),
    extra=st.integers(0, 8),
    same=st.integers(0, 10),
    mid_p=st.booleans(),
)
def test_never_fails_on_the_sign_test_when_breaks_do_not_outnumber_fixes(
    b: int, extra: int, same: int, mid_p: bool
) -> None:
    v = decide(*sign_pair(broken=b, fixed=b + extra, same=same), policy(mid_p=mid_p))
    # b <= c puts b at or below the median of Bin(b + c, 1/2) (mid-p: 0.5 up to rounding).
    assert v.p_value is not None and v.p_value >= 0.5 - 1e-12
    assert v.kind != "fail"


@QUICK
@given(
    rb=st.integers(1, 3),
    rc=st.integers(1, 2),
    data=st.data(),
    mid_p=st.booleans(),
    unit=st.sampled_from(["case", "group"]),
)
def test_every_p_value_is_a_probability(
    rb: int, rc: int, data: st.DataObject, mid_p: bool, unit: str
) -> None:
    n = data.draw(st.integers(1, 30))
    base, cand = [], []
    for i in range(n):
        category = data.draw(st.sampled_from(["a", "b", None]))
        before = data.draw(st.text("01", min_size=rb, max_size=rb))
        after = data.draw(st.text("01", min_size=rc, max_size=rc))
        fmt = data.draw(st.booleans())
        base.append(case(f"c{i}", before, category=category, group=f"g{i % 4}"))
        cand.append(case(f"c{i}", after, category=category, group=f"g{i % 4}", format_ok=fmt))
    v = decide(run(base, name="baseline"), run(cand), policy(mid_p=mid_p, unit=unit))
    assert all(0.0 <= p <= 1.0 for p in all_p_values(v))


@QUICK
@given(
    labels=st.lists(st.sampled_from(["broken", "fixed", "same", "both-wrong"]), max_size=30),
    data=st.data(),
)
def test_which_cases_are_broken_does_not_change_p(labels: list[str], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(labels))
    flips = {
        "broken": ("1", "0"),
        "fixed": ("0", "1"),
        "same": ("1", "1"),
        "both-wrong": ("0", "0"),
    }

    def p_of(order: Sequence[str]) -> float | None:
        base = [case(f"c{i}", flips[x][0]) for i, x in enumerate(order)]
        cand = [case(f"c{i}", flips[x][1]) for i, x in enumerate(order)]
        return decide(run(base, name="baseline"), run(cand), policy()).p_value

    assert p_of(labels) == p_of(shuffled)


@QUICK
@given(first=st.text("01", min_size=1, max_size=25), data=st.data())
def test_the_second_baseline_repeat_never_moves_the_sign_test(
    first: str, data: st.DataObject
) -> None:
    """With 2 baseline repeats and 1 candidate run, only the first repeat is compared: the
    other one (noise measurement) cannot tip the test one way or the other."""
    second = data.draw(st.text("01", min_size=len(first), max_size=len(first)))
    after = data.draw(st.text("01", min_size=len(first), max_size=len(first)))
    cand = run(list(map(case, (f"c{i}" for i in range(len(first))), after)))

    def p_with(other: str) -> float | None:
        base = [case(f"c{i}", a + b) for i, (a, b) in enumerate(zip(first, other, strict=True))]
        return decide(run(base, name="baseline"), cand, policy(test="sign")).p_value

    assert p_with(second) == p_with(first)


# ------------------------------------------------------------------------------------------
# `evalgate gate` end to end: real processes on a copy of the bike-shop example
# ------------------------------------------------------------------------------------------

ENV = {k: v for k, v in os.environ.items() if k != "CI"}  # CI would switch the cache on


def evalgate(cwd: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "evalgate", *argv],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def edit_config(
    root: Path, *, model: str | None = None, inconclusive_exit: int | None = None
) -> None:
    path = root / "evalgate.yml"
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    suite = config["suites"]["bike-shop"]
    if model is not None:
        suite["model"]["name"] = model
    if inconclusive_exit is not None:
        suite.setdefault("gate", {})["inconclusive_exit"] = inconclusive_exit
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`noise v2 --repeats 2` in a copy of the example, then the gates, all started at once:
    in the copy itself, and in copies whose model was renamed since the baseline (with and
    without gate.inconclusive_exit: 1)."""
    root = tmp_path_factory.mktemp("gate-cli")
    home = copy_example(root / "bike-shop")
    noise = evalgate(home, "noise", "v2", "--repeats", "2")
    out, err = noise.communicate(timeout=300)
    saved = re.search(r"saved (\S+) to ", err)
    assert saved, err
    baseline = saved.group(1)
    renamed, strict = home.parent / "renamed", home.parent / "strict"
    for folder in (renamed, strict):
        shutil.copytree(home, folder)
    edit_config(renamed, model="fake-classifier-2")
    edit_config(strict, model="fake-classifier-2", inconclusive_exit=1)
    gate = ("gate", "--baseline", baseline, "--no-save", "--show", "3")
    started = {
        "pass": evalgate(home, *gate, "--candidate", "v3"),
        "fail": evalgate(home, *gate, "--candidate", "v1"),
        "inconclusive": evalgate(renamed, *gate, "--candidate", "v3", "--format", "json"),
        "strict": evalgate(strict, *gate, "--candidate", "v3"),
    }
    done: dict[str, Any] = {
        "noise": (noise.returncode, out, err),
        "home": home,
        "baseline": baseline,
    }
    for name, proc in started.items():
        o, e = proc.communicate(timeout=300)
        done[name] = (proc.returncode, o, e)
    yield done


@pytest.mark.slow
def test_cli_noise_measures_a_baseline(cli: dict[str, Any]) -> None:
    code, out, err = cli["noise"]
    assert code == 0, err
    assert out.startswith("Noise floor · ")
    assert "× 2 repeats of the same prompt" in out
    assert "(usable as a baseline)" in err


@pytest.mark.slow
def test_cli_gate_passes_an_equivalent_prompt(cli: dict[str, Any]) -> None:
    code, out, err = cli["pass"]
    assert code == 0, err
    assert out.startswith("Verdict: PASS\n")
    # The example's cases carry scenario groups: the default test works at the group level.
    assert "Test      exact group-level conditional test over " in out
    assert "Bound     rules out drops above " in out


@pytest.mark.slow
def test_cli_gate_fails_a_worse_prompt_with_exit_1(cli: dict[str, Any]) -> None:
    code, out, err = cli["fail"]
    assert code == 1, err
    assert out.startswith("Verdict: FAIL\n")
    assert "significantly worse" in out
    assert "Traceback" not in err


@pytest.mark.slow
def test_cli_inconclusive_exits_0_with_a_warning_and_json_parses(cli: dict[str, Any]) -> None:
    code, out, err = cli["inconclusive"]
    assert code == 0, err
    verdict = json.loads(out)
    assert verdict["kind"] == "inconclusive"
    assert "different models" in verdict["reasons"][0]
    assert verdict["candidate_accuracy"]["n"] > 100
    warning = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert warning and "the verdict is inconclusive" in warning[0]
    assert "(exit 0; set gate.inconclusive_exit to change it)" in warning[0]


@pytest.mark.slow
def test_cli_inconclusive_exit_is_configurable(cli: dict[str, Any]) -> None:
    code, out, err = cli["strict"]
    assert code == 1
    assert out.startswith("Verdict: INCONCLUSIVE\n")
    assert "(exit 1; set gate.inconclusive_exit to change it)" in err


@pytest.mark.slow
def test_cli_gate_markdown_is_the_job_summary(
    cli: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # There is no gate.md.j2: `--format markdown` used to end in a jinja2 traceback.
    monkeypatch.delenv("CI", raising=False)
    out, err = io.StringIO(), io.StringIO()
    config = str(cli["home"] / "evalgate.yml")
    argv = ["gate", "--baseline", cli["baseline"], "--candidate", "v3", "--no-save"]
    code = main([*argv, "--config", config, "--format", "markdown"], out=out, err=err)
    assert code == 0, err.getvalue()
    assert out.getvalue().startswith("> [!TIP]\n> **bike-shop passed")


@pytest.mark.slow
def test_cli_gate_refuses_a_run_compared_with_itself(
    cli: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The baseline is the newest saved run of v2, so latest:v2 picks its own file.
    monkeypatch.delenv("CI", raising=False)
    out, err = io.StringIO(), io.StringIO()
    config = str(cli["home"] / "evalgate.yml")
    argv = ["gate", "--baseline", cli["baseline"], "--candidate", "latest:v2", "--no-save"]
    code = main([*argv, "--config", config], out=out, err=err)
    assert code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1, lines
    assert f"the baseline and the candidate are the same run ({cli['baseline']})" in lines[0]
    assert out.getvalue() == ""


def test_overrule_makes_a_verdict_inconclusive_or_failed_and_keeps_what_the_test_said() -> None:
    from evalgate.gate.verdict import overrule

    base, cand = sign_pair(broken=0, fixed=0, same=10)
    passed = decide(base, cand, policy())
    assert passed.kind == "pass"
    assert overrule(passed, "inconclusive", []) is passed
    doubted = overrule(passed, "inconclusive", ["the judge is below its floor"])
    assert doubted.kind == "inconclusive"
    assert doubted.reasons == ["the judge is below its floor"]
    assert doubted.warnings[-1] == f"the comparison alone says pass: {passed.reasons[0]}"
    base, cand = sign_pair(broken=8, fixed=0, same=2)
    failed = decide(base, cand, policy())
    assert failed.kind == "fail"
    # A failed comparison scored by an untrusted judge is not a fail either.
    assert overrule(failed, "inconclusive", ["untrusted judge"]).kind == "inconclusive"
    both = overrule(failed, "fail", ["the judge change lowers agreement"])
    assert both.kind == "fail"
    assert both.reasons == ["the judge change lowers agreement", *failed.reasons]
    assert both.warnings == failed.warnings


def test_continuous_scores_need_enough_cases_to_pass() -> None:
    # Two identical judge scores: SE 0, so a t bound alone would rule out every drop. The
    # corrected Tango bound on the score changes (none) is the larger root of
    # (n + z²) D² - (2g + z²) D + g²/n = 0 at n = 2, g = 1.25: 4.70554 D² - 5.20554 D + 0.78125,
    # 0.92719 (by hand).
    base = run([case("a", [0.7]), case("b", [0.4])], name="baseline")
    cand = run([case("a", [0.7]), case("b", [0.4])])
    v = decide(base, cand, policy(tolerance=0.05))
    assert v.kind == "inconclusive"
    assert v.drop_bound == pytest.approx(0.9271929, abs=1e-6)
    # 300 unchanged cases: the same root at n = 300 is 1.6 points: a pass.
    many_base = run([case(f"c{i}", [0.6]) for i in range(300)], name="baseline")
    many = run([case(f"c{i}", [0.6]) for i in range(300)])
    assert decide(many_base, many, policy(tolerance=0.05)).kind == "pass"


def test_grouped_power_counts_the_effective_units_the_baseline_measures() -> None:
    # 90 cases in 30 groups of 3, baseline R = 2, every candidate draw passing. In 10 groups
    # the baseline's cases flip: one case of the group ("apart") or all three ("together").
    # Apart: each flipped case's group sums are its own residuals, design effect 10/2 over
    # 10/2 = 1, so the MDE is over 90 effective units. Together: sums +-3/2 in 10 groups,
    # 10 * 2 * 9/4 = 45 over 30 * 1/2 = 15: 3, so 30 units, the groups themselves.
    def verdict(together: bool) -> Verdict:
        cases = [
            case(
                f"g{g:02d}-{i}",
                "10" if g < 10 and (together or i == 0) else "11",
                group=f"g{g:02d}",
            )
            for g in range(30)
            for i in range(3)
        ]
        cand = [case(c.id, "1", group=c.group) for c in cases]
        return decide(run(cases, name="baseline"), run(cand), policy(tolerance=0.05))

    apart, together = verdict(False), verdict(True)
    for v, effect in ((apart, 1.0), (together, 3.0)):
        assert v.unit == "group" and v.n_tested == 30
        pm = v.power_model
        assert pm is not None
        assert pm.design_effect == pytest.approx(effect)
        assert v.mde == power.mde(90 / effect, pm.flip_rate, 0.045, 0.8, 2, 1)
    assert together.mde is not None and apart.mde is not None and together.mde > apart.mde
    # "about N groups would bring that under": the effective units the power model needs, in
    # groups of 3 at the measured design effect.
    for v in (apart, together):
        pm = v.power_model
        assert pm is not None
        needed = power.units_for(0.05, pm.flip_rate, 0.045, 0.8, 2, 1)
        assert v.cases_needed == math.ceil(needed * pm.design_effect / 3 - 1e-9)
    # The underpowered warning names the unit the power model counts: 90 effective units at
    # design effect 1 apart, 30 at design effect 3 together (the arithmetic above).
    for v, units, effect in ((apart, 90, "1.00"), (together, 30, "3.00")):
        warning = next(w for w in v.warnings if w.startswith("underpowered"))
        assert f"with 30 groups ({units} effective units, design effect {effect})" in warning


def test_one_paired_case_has_no_standard_error_and_says_so() -> None:
    from evalgate.report.render import render_model

    v = decide(*sign_pair(same=1), GatePolicy())
    assert v.difference is not None and math.isnan(v.difference.se)
    text = render_model("gate", v, "text")
    assert "(SE n/a, 95% CI" in text and "nan" not in text
    assert "underpowered: with 1 case and" in text  # not "1 cases"


def test_a_broken_case_shows_each_answer_its_baseline_repeats_gave() -> None:
    # The first repeat alone showed "baseline wrong, candidate wrong" for a broken case whose
    # baseline passed 2 of 3 repeats.
    v = decide(run([case("c000", "011")], name="baseline"), run([case("c000", "0")]), policy())
    [broken] = v.broken
    assert broken.baseline_answer == "right (2 of 3), wrong (1 of 3)"
    assert broken.candidate_answer == "wrong"
    steady = decide(run([case("c000", "111")], name="baseline"), run("0"), policy())
    assert steady.broken[0].baseline_answer == "right"
