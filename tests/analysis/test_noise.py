"""The noise floor (evalgate/analysis/noise.py) on hand-built runs, and `evalgate noise` in-process.

Flip rates are worked out by hand: the share of cases whose pass/fail differs between two
repeats, averaged over every pair of repeats.
"""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from pathlib import Path

import pytest
from conftest import copy_example
from test_gate import case, run

from evalgate.analysis import power
from evalgate.analysis.conditional import conditional_mde
from evalgate.analysis.noise import measure_noise
from evalgate.cli import main
from evalgate.config.models import GatePolicy
from evalgate.runs.schema import read_run, runs_dir


def test_ten_cases_two_repeats_three_flipped() -> None:
    noise = measure_noise(run("10 01 10 11 11 11 00 00 11 11"))
    assert noise is not None
    assert (noise.n, noise.repeats, noise.flips) == (10, 2, 3)
    assert noise.flip_rate == pytest.approx(0.3)
    assert [(u.id, u.passes, u.repeats) for u in noise.unstable] == [
        ("c000", 1, 2),
        ("c001", 1, 2),
        ("c002", 1, 2),
    ]


def test_a_run_whose_cases_have_unequal_repeats_is_measured() -> None:
    # A merged baseline: "10" flipped in its one pair, "110" in 2 of 3 pairs, "11" and "1" not
    # ("1" has no pair and is left out of the rate): (1 + 2/3 + 0) / 3 = 5/9.
    noise = measure_noise(run("10 110 11 1"))
    assert noise is not None
    assert noise.flip_rate == pytest.approx(5 / 9)
    assert noise.flips == 2 and noise.n == 4
    # The repeats every counted case has: the power model's R.
    assert noise.repeats == 2


def test_three_repeats_average_over_the_three_pairs() -> None:
    # "111" never differs; "110" differs in pairs (1,3) and (2,3); "100" in (1,2) and (1,3).
    # Share of cases that differ: pair (1,2) 1/4, pair (1,3) 2/4, pair (2,3) 1/4.
    noise = measure_noise(run("111 110 100 000"))
    assert noise is not None
    assert noise.flip_rate == pytest.approx((1 / 4 + 2 / 4 + 1 / 4) / 3)
    assert [(u.id, u.passes, u.repeats) for u in noise.unstable] == [
        ("c001", 2, 3),
        ("c002", 1, 3),
    ]
    assert noise.flips == 2


def test_the_mde_is_the_sign_tests_at_this_n_and_f() -> None:
    policy = GatePolicy(alpha=0.1, power=0.9)
    noise = measure_noise(run(" ".join(["10"] * 3 + ["11"] * 57)), policy)
    assert noise is not None
    assert noise.flip_rate == pytest.approx(0.05)
    # At the paired test's share of alpha, 0.9 * 0.1, as the gate states it.
    assert noise.mde == conditional_mde(60, 0.05, 0.09, 0.9, baseline_draws=2)
    assert (noise.alpha, noise.level, noise.power) == (0.1, pytest.approx(0.09), 0.9)
    assert (noise.unit, noise.units, noise.counted) == ("case", 60, "60 cases")


def test_a_single_run_has_no_noise_floor() -> None:
    assert measure_noise(run("1 0 1")) is None


def test_errors_regression_and_holdout_cases_are_left_out() -> None:
    noise = measure_noise(
        run(
            [
                case("a", "10"),
                case("b", "11"),
                case("err", "10", error="timeout"),
                case("reg", "10", split="regression"),
                case("hold", "10", split="holdout"),
            ]
        )
    )
    assert noise is not None
    assert (noise.n, noise.flips, noise.flip_rate) == (2, 1, 0.5)
    assert [u.id for u in noise.unstable] == ["a"]


def test_scores_are_pass_fail_at_one_half() -> None:
    noise = measure_noise(run([case("j", [0.6, 0.4]), case("k", [0.9, 0.5])]))
    assert noise is not None
    assert [u.id for u in noise.unstable] == ["j"]


def test_every_case_flipping_is_an_infinite_mde_not_a_crash() -> None:
    noise = measure_noise(run("10"))
    assert noise is not None
    assert (noise.flip_rate, noise.mde) == (1.0, math.inf)


def test_nothing_scored_measures_nothing() -> None:
    noise = measure_noise(run([case("e", "11", error="boom")]))
    assert noise is not None
    assert (noise.n, noise.flip_rate, noise.mde, noise.unstable) == (0, 0.0, 1.0, [])


def test_noise_command_saves_a_baseline_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    root = copy_example(tmp_path / "bike-shop")
    config = str(root / "evalgate.yml")
    out, err = io.StringIO(), io.StringIO()
    argv = ["noise", "v2", "--repeats", "3", "--config", config, "--format", "json"]
    assert main(argv, out=out, err=err) == 0, err.getvalue()
    noise = json.loads(out.getvalue())
    # The fake model is deterministic: nothing flips.
    assert (noise["repeats"], noise["flip_rate"], noise["unstable"]) == (3, 0.0, [])
    # The example's 143 dev cases share 54 scenario groups, which the gate counts. Nothing
    # flips, so nothing shows the groups' cases moving apart: the power model takes them as
    # moving together, design effect sum m^2 / sum m over the groups' sizes, and the MDE is
    # over 143 / that effective units at the paired test's share of alpha, 0.9 * 0.05 (not
    # 3.0% over 143 cases).
    assert (noise["n"], noise["unit"], noise["units"]) == (143, "group", 54)
    assert noise["level"] == pytest.approx(0.045)
    [made] = runs_dir(root / ".evalgate").glob("*.json")
    sizes = Counter(c.group or c.id for c in read_run(made).cases if c.split == "dev").values()
    assert sum(sizes) == 143 and len(sizes) == 54
    effect = sum(m * m for m in sizes) / 143
    assert noise["design_effect"] == pytest.approx(effect)
    assert noise["mde"] == power.mde(143 / effect, 0.0, 0.045, 0.8, 3, 1)
    assert noise["mde"] >= conditional_mde(54, 0.0, 0.045, baseline_draws=3)
    assert noise["mde"] > conditional_mde(143, 0.0, 0.05, baseline_draws=3)
    [saved] = runs_dir(root / ".evalgate").glob("*.json")
    assert f"saved {saved.stem} to " in err.getvalue()
    text = io.StringIO()
    assert main(["noise", "v2", "--config", config, "--no-save"], out=text, err=io.StringIO()) == 0
    assert text.getvalue().startswith(f"Noise floor · {noise['n']} cases × 2 repeats")
    counted = f"over 54 scenario groups, {143 / effect:.0f} effective units at a design effect"
    assert (
        f"MDE           {100 * noise['mde']:.1f} points {counted} of {effect:.2f} ("
        in text.getvalue()
    )
    assert len(list(runs_dir(root / ".evalgate").glob("*.json"))) == 1
    # The gate of a candidate against the saved noise run states the same MDE, over the same unit.
    [saved] = runs_dir(root / ".evalgate").glob("*.json")
    out = io.StringIO()
    argv = ["gate", "--baseline", str(saved), "--candidate", "v2", "--config", config]
    main([*argv, "--no-save", "--format", "json"], out=out, err=io.StringIO())
    verdict = json.loads(out.getvalue())
    verdict = verdict.get("verdict", verdict)
    assert (verdict["unit"], verdict["n_tested"]) == ("group", 54)
    assert verdict["mde"] == noise["mde"]


def test_noise_needs_two_repeats(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["noise", "v2", "--repeats", "1"])
    assert exit_.value.code == 2
    assert "needs at least 2 repeats" in capsys.readouterr().err
