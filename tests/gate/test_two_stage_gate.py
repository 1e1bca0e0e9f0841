"""``gate.repeats: two-stage`` at the gate: the second stage goes to exactly the blocks whose
baseline repeats and first candidate run disagree, the paired test reads both stages by the
exact law given that choice, every other route reads the first stage, and a candidate whose
repeats the design did not make is read by its first stage alone, with the reason."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import with_repeats

from evalgate.analysis.conditional import conditional_test_worse
from evalgate.analysis.two_stage import two_stage_test_worse
from evalgate.app import join_stages
from evalgate.config.models import GatePolicy
from evalgate.gate.decide import decide
from evalgate.gate.two_stage import first_stage, select
from evalgate.runs.schema import CaseResult, Run

MakeCase = Callable[..., CaseResult]
MakeRun = Callable[..., Run]

# Per case: the baseline's two answers and the candidate's first answer; "b" is right.
FIRST = [
    (["b", "b"], "b"),  # settled pass
    (["q", "q"], "q"),  # settled fail
    (["b", "b"], "q"),  # broken in the first run: selected
    (["b", "q"], "b"),  # flipped in the baseline: selected
    (["q", "b"], "q"),  # selected
    (["b", "b"], "b"),
    (["b", "b"], "q"),  # selected
    (["b", "b"], "q"),  # selected
]
# The second candidate answer of each selected case (in FIRST's order of the selected).
SECOND = {"c2": "q", "c3": "q", "c4": "q", "c6": "q", "c7": "b"}


def _runs(make_case: MakeCase, make_run: MakeRun, group: bool = False) -> tuple[Run, Run, Run]:
    def case(i: int, answers: list[str]) -> CaseResult:
        # Groups of one when group is False (make_case's default group is per case).
        extra = {"group": f"g{i // 2}"} if group else {}
        return make_case(f"c{i}", "b", answers, **extra)

    baseline = make_run([case(i, base) for i, (base, _) in enumerate(FIRST)])
    first = make_run([case(i, [c1]) for i, (_, c1) in enumerate(FIRST)], prompt={"name": "v2"})
    second_cases = [case(int(cid[1:]), [a]) for cid, a in SECOND.items()]
    second = make_run(second_cases, prompt={"name": "v2"}, repeats=2)
    return baseline, first, second


def test_the_second_stage_goes_to_the_cases_that_disagree(
    make_case: MakeCase, make_run: MakeRun
) -> None:
    baseline, first, _ = _runs(make_case, make_run)
    chosen = select(baseline, first, GatePolicy(repeats="two-stage"))
    # By hand from FIRST: c2, c3, c4, c6, c7 disagree somewhere; c0, c1, c5 agree throughout.
    assert chosen.cases == frozenset(SECOND)
    assert (chosen.unit, chosen.blocks, chosen.selected) == ("case", 8, 5)


def test_the_paired_test_reads_both_stages_by_the_exact_law(
    make_case: MakeCase, make_run: MakeRun
) -> None:
    baseline, first, second = _runs(make_case, make_run)
    policy = GatePolicy(repeats="two-stage")
    record = select(baseline, first, policy).record(baseline, 2)
    candidate = join_stages(first, second, record)
    assert [len(c.outcomes) for c in candidate.cases] == [1, 1, 2, 2, 2, 1, 2, 2]
    verdict = decide(baseline, candidate, policy)
    # The law's own input, built here from FIRST and SECOND (1 = pass).
    blocks = []
    for i, (base, c1) in enumerate(FIRST):
        cand = [c1, SECOND[f"c{i}"]] if f"c{i}" in SECOND else [c1]
        blocks.append(([(int(a == "b"),) for a in base], [(int(a == "b"),) for a in cand]))
    assert verdict.p_value == pytest.approx(two_stage_test_worse(blocks), rel=1e-12)
    assert verdict.test is not None
    assert "two-stage repeats: 5 of 8 cases were not settled" in verdict.test
    # Every other number reads the first stage: one candidate run a case.
    assert verdict.power_model is not None and verdict.power_model.candidate_draws == 1
    rate = verdict.candidate_accuracy
    assert rate is not None and (rate.hits, rate.n) == (3, 8)  # c0, c3, c5 right first time


def test_a_candidate_chosen_against_another_baseline_is_read_by_its_first_stage(
    make_case: MakeCase, make_run: MakeRun
) -> None:
    baseline, first, second = _runs(make_case, make_run)
    policy = GatePolicy(repeats="two-stage")
    other = baseline.model_copy(update={"name": "bike-shop-v1-20250602T120000-ffff"})
    candidate = join_stages(first, second, select(other, first, policy).record(other, 2))
    verdict = decide(baseline, candidate, policy)
    assert any("chosen against baseline bike-shop-v1-20250602" in w for w in verdict.warnings)
    # The first stage alone: the exact conditional test over 2 baseline and 1 candidate runs.
    sets = [(sum(a == "b" for a in base), 2, int(c1 == "b"), 1) for base, c1 in FIRST]
    assert verdict.p_value == pytest.approx(conditional_test_worse(sets), rel=1e-12)


def test_repeats_the_design_did_not_give_are_read_by_the_first_stage(
    make_case: MakeCase, make_run: MakeRun
) -> None:
    baseline, first, second = _runs(make_case, make_run)
    policy = GatePolicy(repeats="two-stage")
    record = select(baseline, first, policy).record(baseline, 2)
    # c0 was settled and must have been sent once; here it was sent twice.
    extra = make_run([make_case("c0", "b", ["b"])], prompt={"name": "v2"})
    second = second.model_copy(update={"cases": [*second.cases, *extra.cases]})
    verdict = decide(baseline, join_stages(first, second, record), policy)
    assert any(
        "block c0 has other repeats than the design gives it (1)" in w for w in verdict.warnings
    )


def test_groups_are_chosen_whole(make_case: MakeCase, make_run: MakeRun) -> None:
    baseline, first, _ = _runs(make_case, make_run, group=True)
    chosen = select(baseline, first, GatePolicy(repeats="two-stage"))
    # Groups of two: g0 = c0, c1 (both settled), g1 = c2, c3, g2 = c4, c5, g3 = c6, c7.
    assert chosen.unit == "group"
    assert (chosen.blocks, chosen.selected) == (4, 3)
    assert chosen.cases == frozenset({"c2", "c3", "c4", "c5", "c6", "c7"})


def test_first_stage_keeps_each_cases_first_outcome(make_case: MakeCase, make_run: MakeRun) -> None:
    run = make_run([make_case("c1", "b", ["b", "q", "q"])], repeats=3)
    one = first_stage(run)
    assert [o.answer for o in one.cases[0].outcomes] == ["b"] and one.repeats == 1


def _noisy_baseline(
    root: Path, cli: Callable[..., tuple[int, str, str]], config: str, *, every: int
) -> tuple[Path, dict[str, Any]]:
    """A baseline of v2 with two repeats whose second repeat is flipped on every ``every``-th
    case, as a noisy model's would be (the fake model answers the same every time)."""
    assert cli("run", "v2", "--repeats", "2", "--config", config)[0] == 0
    [baseline] = sorted((root / ".evalgate" / "runs").glob("*.json"))
    data = json.loads(baseline.read_text(encoding="utf-8"))
    for case in data["cases"][::every]:
        second = case["outcomes"][1]
        second["score"] = 1.0 - second["score"]
    baseline.write_text(json.dumps(data), encoding="utf-8")
    return baseline, data


def test_the_cli_gate_runs_both_stages(
    bike_shop: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    config = with_repeats(bike_shop, "two-stage")
    baseline, data = _noisy_baseline(bike_shop, cli, config, every=7)
    argv = ["gate", "--baseline", str(baseline), "--candidate", "v3", "--config", config]
    code, out, err = cli(*argv)
    assert code in (0, 1), err
    runs = sorted(set((bike_shop / ".evalgate" / "runs").glob("*.json")) - {baseline})
    [candidate_file] = runs
    candidate = json.loads(candidate_file.read_text(encoding="utf-8"))
    base = {c["id"]: c for c in data["cases"]}
    assert candidate["stage_one"]["repeats"] == 2
    assert candidate["stage_one"]["unit"] == "group"  # the example's cases share scenarios
    # Which groups a second stage was owed, counted here from the two files' scores alone.
    mixed: dict[str, bool] = {}
    for case in candidate["cases"]:
        scores = [o["score"] for o in base[case["id"]]["outcomes"]]
        scores.append(case["outcomes"][0]["score"])
        group = case.get("group") or case["id"]
        mixed[group] = mixed.get(group, False) or len(set(scores)) > 1
    owed = sum(mixed.values())
    assert 0 < owed < len(mixed)
    for case in candidate["cases"]:
        want = 2 if mixed[case.get("group") or case["id"]] else 1
        assert len(case["outcomes"]) == want, case["id"]
    assert candidate["stage_one"]["selected"] == owed
    assert f"two-stage repeats: {owed} of {len(mixed)} scenario groups" in out
    # --early-stop cannot watch a design whose second stage waits for the first.
    code, out, err = cli(*argv, "--early-stop", "--no-save")
    assert code == 2 and "--early-stop and gate.repeats: two-stage do not combine" in err


def test_the_estimate_counts_the_second_stage_the_baseline_decides(
    bike_shop: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    config = with_repeats(bike_shop, "two-stage")
    baseline, _ = _noisy_baseline(bike_shop, cli, config, every=5)
    # The candidate is the baseline's own prompt on a model that answers the same every time:
    # no settled case moves, so the estimate's calls are the run's calls exactly.
    argv = ["gate", "--baseline", str(baseline), "--candidate", "v2", "--config", config]
    code, out, err = cli(*argv, "--estimate", "--format", "json")
    assert code == 0, err
    estimate = json.loads(out)
    [line] = [n for n in estimate["notes"] if n.startswith("two-stage repeats:")]
    assert "cases were not settled in the baseline and are sent 1 more times" in line
    code, out, err = cli(*argv)
    assert code in (0, 1), err
    [candidate_file] = set((bike_shop / ".evalgate" / "runs").glob("*.json")) - {baseline}
    candidate = json.loads(candidate_file.read_text(encoding="utf-8"))
    sent = sum(len(case["outcomes"]) for case in candidate["cases"])
    assert estimate["calls"] == sent
    assert len(candidate["cases"]) < sent < 2 * len(candidate["cases"])
