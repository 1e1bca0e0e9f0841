"""One decision per pull request (gate.decide_pull_request) and `evalgate gate` over folders.

Known answers are worked out by hand from the weighted Holm rule: every suite has an equal share
of alpha, split 0.9 / 0.1 between its paired test and its other fail routes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from test_gate import case, policy, sign_pair

from evalgate.gate.decide import decide
from evalgate.gate.pull_request import decide_pull_request
from evalgate.runs.schema import Run

CliResult = tuple[int, str, str]


def test_one_suite_decides_as_decide_does() -> None:
    v = decide(*sign_pair(broken=5, same=20), policy())
    [part] = decide_pull_request([("a", v)]).suites
    assert part.verdict.kind == v.kind == "fail"
    assert [r.p_adjusted for r in part.verdict.routes] == pytest.approx(
        [r.p_adjusted for r in v.routes]
    )


def test_suites_share_one_alpha() -> None:
    # Alone: p = 1/32, adjusted (1/32)/0.9 = 0.035 < 0.05, a fail. Beside an unchanged suite,
    # each suite's paired test has weight 0.9/2 = 0.45: adjusted (1/32)/0.45 = 0.069, no fail.
    worse = decide(*sign_pair(broken=5, same=20), policy())
    same = decide(*sign_pair(same=25), policy())
    decision = decide_pull_request([("a", worse), ("b", same)])
    a, b = (s.verdict for s in decision.suites)
    assert a.routes[0].p_adjusted == pytest.approx((1 / 32) / 0.45)
    assert a.kind != "fail" and b.kind != "fail"
    assert decision.kind != "fail"
    assert decision.tests == 4 and a.family_tests == 4
    # Six breaks (p = 1/64, adjusted 0.035) still fail the pull request.
    worse6 = decide(*sign_pair(broken=6, same=20), policy())
    decision6 = decide_pull_request([("a", worse6), ("b", same)])
    assert decision6.kind == "fail"
    assert decision6.suites[0].verdict.kind == "fail"
    assert decision6.suites[0].verdict.routes[0].p_adjusted == pytest.approx((1 / 64) / 0.45)


def test_suites_with_different_alphas_pass_at_the_pull_requests_alpha_too() -> None:
    # Nothing changed in n cases bounds the drop at the larger root of (n + z²) D² - (2g + z²) D
    # + g²/n = 0 (Tango's bound with its correction g = 1.25, see test_gate). Suite a (alpha
    # 0.05, 120 cases): z = 1.6449, 122.7055 D² - 5.2055 D + 0.013021 = 0, 4.0 points, under
    # the 5-point tolerance. Suite b sets alpha 0.01, so the pull request's alpha is 0.01, and
    # at it (z = 2.3263) a's bound is the root of 125.4119 D² - 7.9119 D + 0.013021 = 0, 6.1
    # points: not ruled out, so a is inconclusive (its own alpha would have passed it).
    a = decide(*sign_pair(same=120), policy(tolerance=0.05))
    b = decide(*sign_pair(same=400), policy(tolerance=0.05, alpha=0.01))
    assert a.kind == "pass" and a.drop_bound == pytest.approx(0.0397538, abs=1e-6)
    decision = decide_pull_request([("a", a), ("b", b)])
    settled = decision.suites[0].verdict
    assert settled.alpha == 0.01
    assert settled.drop_bound == pytest.approx(0.0613962, abs=1e-6)
    assert settled.kind == "inconclusive"
    assert "one-sided 99.0%" in settled.reasons[0]
    assert decision.kind == "inconclusive"


def test_ten_suites_at_p_one_in_32_do_not_fail() -> None:
    # Weight 0.09 each: (1/32)/0.09 = 0.35; Holm's later steps only grow it.
    worse = decide(*sign_pair(broken=5, same=20), policy())
    decision = decide_pull_request([(f"s{i}", worse) for i in range(10)])
    assert decision.kind != "fail"
    assert min(r.p_adjusted for s in decision.suites for r in s.verdict.routes) == pytest.approx(
        (1 / 32) / 0.09
    )


def test_the_pull_request_takes_the_worst_suite() -> None:
    fail = decide(*sign_pair(broken=12, same=300), policy())
    passing = decide(*sign_pair(same=300), policy(tolerance=0.05))
    small = decide(*sign_pair(same=5), policy(tolerance=0.05))  # 5 cases rule nothing out
    assert (passing.kind, small.kind) == ("pass", "inconclusive")
    assert decide_pull_request([("p", passing), ("s", small)]).kind == "inconclusive"
    assert decide_pull_request([("p", passing), ("f", fail), ("s", small)]).kind == "fail"
    line = decide_pull_request([("p", passing), ("f", fail)]).line()
    assert line.startswith("pull request: FAIL (2 suites: 1 fail, 1 pass; 4 tests share alpha")


def test_a_baseline_from_another_model_is_inconclusive_never_a_fail() -> None:
    base, cand = sign_pair(broken=20, same=20)
    other = cand.model_copy(
        update={"model": cand.model.model_copy(update={"name": "claude-other"})}
    )
    v = decide(base, other, policy())
    assert v.kind == "inconclusive"
    assert v.reasons[0].startswith("baseline and candidate used different models")
    assert "cannot tell the prompt's effect apart" in v.reasons[-1]
    # A regression case is a rule on the candidate alone: it still fails.
    other.cases.append(case("r1", "0", split="regression"))
    assert decide(base, other, policy()).kind == "fail"


def test_a_pass_needs_the_bound_under_the_tolerance() -> None:
    # 300 unchanged cases: Tango's corrected bound, the larger root of 302.7055 D² - 5.2055 D
    # + 0.005208 = 0, is 1.6 points, under 5 points: a pass.
    v = decide(*sign_pair(same=300), policy(tolerance=0.05))
    assert v.kind == "pass"
    assert v.drop_bound == pytest.approx(0.0161300, abs=1e-6)
    assert "rule out drops above 1.6 points" in v.reasons[0]
    # 30 unchanged cases: the bound (14.8 points) is over the tolerance: inconclusive.
    small = decide(*sign_pair(same=30), policy(tolerance=0.05))
    assert small.kind == "inconclusive"
    assert small.reasons[0].startswith("not shown to be worse, nor within the 5.0-point")


# ------------------------------------------------------------------------------------------
# evalgate gate --baseline FOLDER --candidate FOLDER
# ------------------------------------------------------------------------------------------


def two_suite_config(root: Path) -> Path:
    (root / "prompts").mkdir()
    (root / "prompts" / "v1.txt").write_text("Answer.\n", encoding="utf-8")
    (root / "cases.jsonl").write_text('{"id": "c1", "input": "x", "expected": "y"}\n')
    suite = {
        "prompts": "prompts/*.txt",
        "cases": "cases.jsonl",
        "model": {"backend": "fake", "name": "fake-classifier"},
        "scorer": {"kind": "exact"},
    }
    config = root / "evalgate.yml"
    config.write_text(
        yaml.safe_dump({"version": 1, "suites": {"alpha": suite, "beta": suite}}), encoding="utf-8"
    )
    return config


def write_runs(folder: Path, runs: dict[str, Run]) -> None:
    folder.mkdir(parents=True)
    for suite, r in runs.items():
        (folder / f"{suite}.json").write_text(
            r.model_copy(update={"suite": suite}).model_dump_json(), encoding="utf-8"
        )


def test_cli_gate_over_folders_makes_the_pull_request_decision(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    config = two_suite_config(tmp_path)
    worse_base, worse_cand = sign_pair(broken=5, same=300)
    same_base, same_cand = sign_pair(same=300)
    write_runs(tmp_path / "base", {"alpha": worse_base, "beta": same_base})
    write_runs(tmp_path / "cand", {"alpha": worse_cand, "beta": same_cand})
    args = ("gate", "--config", str(config), "--baseline", str(tmp_path / "base"))
    code, out, err = cli(*args, "--candidate", str(tmp_path / "cand"))
    # alpha alone would fail (adjusted 0.035); beside beta its share halves (0.069): no fail,
    # and 5 breaks in 305 cases still rule out a 5-point drop: both suites pass.
    assert code == 0, err
    assert "== alpha ==" in out and "== beta ==" in out
    assert out.endswith("Pull request: PASS (2 suites: 2 pass; 4 tests share alpha 0.05)\n")
    code, out, _ = cli(*args, "--candidate", str(tmp_path / "cand"), "--format", "json")
    decision = json.loads(out)
    assert decision["kind"] == "pass" and decision["tests"] == 4
    assert [s["suite"] for s in decision["suites"]] == ["alpha", "beta"]
    # One suite's file against the folder: the baseline of the same suite is used.
    code, out, err = cli(*args, "--candidate", str(tmp_path / "cand" / "alpha.json"))
    assert code == 1, err  # alone, alpha's five breaks fail
    assert out.startswith("Verdict: FAIL")


def test_cli_gate_refuses_a_folder_without_runs_or_with_two_of_one_suite(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    config = two_suite_config(tmp_path)
    (tmp_path / "empty").mkdir()
    _, cand = sign_pair(same=10)
    write_runs(tmp_path / "cand", {"alpha": cand})
    code, _, err = cli(
        "gate",
        "--config",
        str(config),
        "--baseline",
        str(tmp_path / "empty"),
        "--candidate",
        str(tmp_path / "cand"),
    )
    assert code == 2 and "no run files in this folder" in err
    (tmp_path / "cand" / "copy.json").write_text(
        cand.model_copy(update={"suite": "alpha", "name": "other"}).model_dump_json()
    )
    code, _, err = cli(
        "gate",
        "--config",
        str(config),
        "--baseline",
        str(tmp_path / "cand"),
        "--candidate",
        str(tmp_path / "cand"),
    )
    assert code == 2 and "two run files of suite 'alpha'" in err
