"""``gate.repeats: adaptive`` through the runner: each case sent as often as the allocation says
(once when settled in the earlier baseline, ``unstable_repeats`` times when it flipped there or
is missing from it), the calls counted exactly by the estimate, the design named in the run and
in the gate's test, and the key's bad values refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import fake_backend, shop_suite, spec_of, with_repeats

from evalgate.backends.base import Backend, Reply, Request
from evalgate.config.models import GatePolicy
from evalgate.gate.decide import decide
from evalgate.running.allocation import (
    AdaptiveSource,
    allocate,
    candidate_repeats,
    held_out,
    plan_adaptive,
)
from evalgate.running.estimate import estimate_run
from evalgate.running.suite import run_suite
from evalgate.runs.history import pool, record_of

FAKE = {"backend": "fake", "name": "fake-classifier", "options": {"rules_file": "fake-rules.yml"}}


@dataclass
class Counting:
    """A backend that counts the calls sent to the one it wraps."""

    inner: Backend
    offline: bool = True
    sent: list[str] = field(default_factory=list)

    def complete(self, request: Request) -> Reply:
        self.sent.append(str((request.case or {}).get("id")))
        return self.inner.complete(request)


def test_each_case_is_sent_as_often_as_its_allocation_says(tmp_path: Path) -> None:
    loaded = shop_suite(tmp_path / "s", cases=10, model=FAKE)
    backend = Counting(fake_backend({"rules_file": "fake-rules.yml"}, loaded.root))
    # The earlier baseline: c0000 and c0001 flipped, c0002 is missing, the rest settled.
    data: dict[str, list[float | None]] = {f"c{i:04d}": [1.0, 1.0] for i in range(3, 10)}
    data |= {"c0000": [1.0, 0.0], "c0001": [0.0, None, 1.0]}
    # c0009 had one scored repeat only: it cannot show a flip, so it counts as unknown.
    data["c0009"] = [1.0, None]
    spec = plan_adaptive(spec_of(loaded, "v3"), AdaptiveSource(data, "run earlier", 3))
    est = estimate_run(spec, loaded.root, counter=None, baseline=None, offline=True)
    run = run_suite(spec, backend, loaded.root)  # type: ignore[arg-type]
    sent = {c.id: len(c.outcomes) for c in run.cases}
    want = {f"c{i:04d}": 1 for i in range(10)} | {"c0000": 3, "c0001": 3, "c0002": 3, "c0009": 3}
    assert sent == want
    # 6 settled cases once, 4 others three times: 6 + 12 = 18 calls, each one sent.
    assert len(backend.sent) == 18
    assert est.calls == 18
    assert (
        run.allocation is not None and "6 settled cases sent once, 4 sent 3 times" in run.allocation
    )
    assert "(1 flipped there" not in run.allocation  # two flipped: c0000 and c0001
    assert "2 flipped there, 2 not in it" in run.allocation


def test_the_estimate_scales_tokens_by_each_cases_repeats(tmp_path: Path) -> None:
    loaded = shop_suite(tmp_path / "s", cases=4, model=FAKE)
    fixed = estimate_run(
        spec_of(loaded, "v3"), loaded.root, counter=None, baseline=None, offline=True
    )
    data: dict[str, list[float | None]] = {f"c{i:04d}": [1.0, 1.0] for i in range(4)}
    data["c0000"] = [0.0, 1.0]
    spec = plan_adaptive(spec_of(loaded, "v3"), AdaptiveSource(data, "run earlier", 2))
    est = estimate_run(spec, loaded.root, counter=None, baseline=None, offline=True)
    assert (fixed.calls, est.calls) == (4, 5)
    # No baseline: max_tokens for every call, so output tokens follow the calls exactly.
    assert est.output_tokens == fixed.output_tokens // 4 * 5
    assert est.input_tokens > fixed.input_tokens
    assert any("adaptive repeats allocated from run earlier" in n for n in est.notes)


def test_the_gate_names_the_design_in_its_test(tmp_path: Path) -> None:
    loaded = shop_suite(tmp_path / "s", cases=8, model=FAKE)
    backend = fake_backend({"rules_file": "fake-rules.yml"}, loaded.root)
    baseline = run_suite(spec_of(loaded, "v3", repeats=2), backend, loaded.root)
    data: dict[str, list[float | None]] = {f"c{i:04d}": [1.0, 1.0] for i in range(8)}
    data["c0003"] = [1.0, 0.0]
    spec = plan_adaptive(spec_of(loaded, "v3"), AdaptiveSource(data, "run earlier", 2))
    candidate = run_suite(spec, backend, loaded.root)
    verdict = decide(baseline, candidate, GatePolicy())
    assert verdict.test is not None
    assert "adaptive repeats allocated from run earlier" in verdict.test
    # The power model assumes the repeats most cases had (1), not the most any had (2).
    assert "2 baseline and 1 candidate repeats a case" in verdict.test


def test_fixed_repeats_and_no_earlier_baseline() -> None:
    assert candidate_repeats(GatePolicy(), None) == (1, None)
    assert candidate_repeats(GatePolicy(repeats=3), None) == (3, None)
    repeats, source = candidate_repeats(GatePolicy(repeats="adaptive", unstable_repeats=4), None)
    assert repeats == 1 and source is not None
    # Nothing to allocate from: every case is unknown, sent unstable_repeats times.
    assert (source.data, source.unstable_repeats, source.by_group) == ({}, 4, True)
    by_case = candidate_repeats(GatePolicy(repeats="adaptive", unit="case"), None)[1]
    assert by_case is not None and not by_case.by_group


@pytest.mark.parametrize("bad", [True, 0, -1, "adaptiv", "2", 2.5, None])
def test_bad_repeats_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        GatePolicy(repeats=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [1, 0, True, "adaptive"])
def test_bad_unstable_repeats_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        GatePolicy(unstable_repeats=bad)  # type: ignore[arg-type]


def test_the_cli_gate_allocates_from_an_earlier_run_never_the_compared_one(
    bike_shop: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    config = with_repeats(bike_shop, "adaptive")
    assert cli("run", "v2", "--repeats", "2", "--config", config)[0] == 0
    earlier = sorted((bike_shop / ".evalgate" / "runs").glob("*.json"))
    assert cli("run", "v2", "--repeats", "2", "--config", config)[0] == 0
    [baseline] = sorted(set((bike_shop / ".evalgate" / "runs").glob("*.json")) - set(earlier))
    cases = len(json.loads(baseline.read_text(encoding="utf-8"))["cases"])
    flips = sum(
        len({o["score"] for o in c["outcomes"]}) > 1
        for c in json.loads(earlier[0].read_text(encoding="utf-8"))["cases"]
    )
    argv = ["gate", "--baseline", str(baseline), "--candidate", "v3", "--config", config]
    # The estimate counts the allocated calls: settled cases once, flipped ones twice.
    code, out, err = cli(*argv, "--estimate", "--json", "--allocate-from", str(earlier[0]))
    assert code == 0, err
    assert json.loads(out)["calls"] == cases + flips
    # With nothing to allocate from, every case is unknown: two calls each.
    code, out, _ = cli(*argv, "--estimate", "--json")
    assert code == 0 and json.loads(out)["calls"] == 2 * cases
    code, out, err = cli(*argv, "--no-save", "--allocate-from", str(earlier[0]))
    assert code in (0, 1), err
    assert "adaptive repeats allocated from run bike-shop-v2-" in out
    code, out, err = cli(*argv, "--no-save", "--allocate-from", str(baseline))
    assert code == 2 and out == ""
    assert "--allocate-from names the baseline the gate compares with" in err


def test_the_earlier_baselines_pooled_into_a_baseline_are_held_out_to_allocate(
    tmp_path: Path,
) -> None:
    # What the pull request's job does: pool() adds the earlier baselines' repeats after the
    # artefact's own; under adaptive repeats they allocate and the artefact alone is tested.
    loaded = shop_suite(tmp_path / "s", cases=6, model=FAKE)
    backend = fake_backend({"rules_file": "fake-rules.yml"}, loaded.root)
    earlier = run_suite(spec_of(loaded, "v2", repeats=2), backend, loaded.root)
    # One earlier case flipped (as a noisy model would make it), one was edited since.
    flipped_case = earlier.cases[0]
    outcomes = [
        flipped_case.outcomes[0],
        flipped_case.outcomes[1].model_copy(update={"score": 0.5}),
    ]
    edited = earlier.cases[1].model_copy(update={"hash": "an older text"})
    earlier = earlier.model_copy(
        update={
            "cases": [
                flipped_case.model_copy(update={"outcomes": outcomes}),
                edited,
                *earlier.cases[2:],
            ]
        }
    )
    own = run_suite(spec_of(loaded, "v2", repeats=2), backend, loaded.root)
    own = own.model_copy(update={"created_at": earlier.created_at + timedelta(hours=1)})
    pooled, _ = pool(own, [record_of(earlier)], now=own.created_at, max_age_days=14, alpha=0.05)
    data = held_out(own, pooled)
    assert set(data) == {c.id for c in own.cases} - {own.cases[1].id}
    assert all(len(v) == 2 for v in data.values())
    given = allocate(own.cases, data, 2, "1 earlier baseline")
    assert given.repeats[own.cases[0].id] == 2  # flipped there
    assert given.repeats[own.cases[1].id] == 2  # edited: not in the earlier data
    assert [given.repeats[c.id] for c in own.cases[2:]] == [1, 1, 1, 1]
