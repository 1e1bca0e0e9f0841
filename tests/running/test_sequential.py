"""The anytime-valid sequential early stop: the e-value, the runner's stop, the pipeline's
skipped cases, the monitor's pairing, and `evalgate gate --early-stop` end to end.

The e-value is checked against hand-worked answers and an independent midpoint-rule integral;
its validity (false stops under no change stay under alpha however often it looks) against a
seeded simulation, both of the bare e-value and of the monitor fed noisy repeated runs.
"""

from __future__ import annotations

import functools
import io
import itertools
import json
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import EXAMPLE, fake_backend

from evalgate.analysis.sequential import sequential_e_value
from evalgate.backends.base import Message, Reply, Request
from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.config.models import GatePolicy
from evalgate.gate import sequential as gate_module
from evalgate.gate.decide import decide
from evalgate.gate.sequential import SequentialMonitor
from evalgate.running.execute import Job, execute
from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite
from evalgate.runs.schema import CaseResult, Outcome, Run, iter_runs
from evalgate.scorers.base import Score

ALPHA = 0.05


@pytest.fixture(autouse=True)
def not_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)  # CI would switch the response cache on


# The simulations ask for the same few (broken, fixed) pairs thousands of times.
cached_e = functools.lru_cache(maxsize=None)(sequential_e_value)


# ------------------------------------------------------------------------------------------
# The e-value
# ------------------------------------------------------------------------------------------


def midpoint_e(broken: int, fixed: int, steps: int = 20_000) -> float:
    """E = 2 * integral_{1/2}^{1} theta^b (1 - theta)^c d theta / (1/2)^(b + c), by the midpoint
    rule: the definition, integrated without scipy's beta functions."""
    h = 0.5 / steps
    total = math.fsum(
        (0.5 + (k + 0.5) * h) ** broken * (0.5 - (k + 0.5) * h) ** fixed for k in range(steps)
    )
    return 2.0 * total * h * 2.0 ** (broken + fixed)


def test_e_value_known_answers_by_hand() -> None:
    # Nothing changed yet: the mixture of likelihood ratios is 1.
    assert sequential_e_value(0, 0) == pytest.approx(1.0, rel=1e-12)
    # One broken: 2^2 * B(2, 1) * P(Beta(2, 1) > 1/2) = 4 * (1/2) * (3/4).
    assert sequential_e_value(1, 0) == pytest.approx(1.5, rel=1e-12)
    # One fixed: 2^2 * B(1, 2) * P(Beta(1, 2) > 1/2) = 4 * (1/2) * (1/4), i.e. 2 * 2 * 1/8.
    assert sequential_e_value(0, 1) == pytest.approx(0.5, rel=1e-12)
    # b broken, none fixed: 2^(b+1) * integral_{1/2}^1 theta^b = (2^(b+1) - 1) / (b + 1).
    for b in range(12):
        assert sequential_e_value(b, 0) == pytest.approx((2 ** (b + 1) - 1) / (b + 1), rel=1e-10)
    # One each: 2^3 * integral theta (1 - theta) over [1/2, 1] = 8 * (1/12).
    assert sequential_e_value(1, 1) == pytest.approx(2 / 3, rel=1e-12)


def test_e_value_first_crosses_twenty_at_seven_broken() -> None:
    # (2^7 - 1)/7 = 18.1 < 20 <= (2^8 - 1)/8 = 31.9: seven straight breaks stop a run at 5%.
    assert sequential_e_value(6, 0) < 1 / ALPHA <= sequential_e_value(7, 0)


@pytest.mark.parametrize(("broken", "fixed"), [(3, 1), (7, 2), (10, 3), (20, 8), (5, 5), (0, 6)])
def test_e_value_matches_a_midpoint_integral(broken: int, fixed: int) -> None:
    assert sequential_e_value(broken, fixed) == pytest.approx(midpoint_e(broken, fixed), rel=1e-7)


def test_e_value_grows_with_broken_and_shrinks_with_fixed() -> None:
    for c in range(10):
        row = [sequential_e_value(b, c) for b in range(40)]
        assert all(x < y for x, y in itertools.pairwise(row)), c
    for b in range(10):
        col = [sequential_e_value(b, c) for c in range(40)]
        assert all(x > y for x, y in itertools.pairwise(col)), b


def test_e_value_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="broken"):
        sequential_e_value(-1, 0)
    with pytest.raises(ValueError, match="fixed"):
        sequential_e_value(0, -1)


def test_e_value_stays_right_on_large_suites() -> None:
    # None broken: 2^(c+1) * integral (1 - theta)^c over [1/2, 1] = 1/(c + 1), however many
    # were fixed. (The Beta tail underflows past ~1000 changed cases; a candidate that fixed
    # 1100 cases once got e = 2.5e28, a certain fail.)
    for c in (999, 1100, 5000, 20_000):
        assert sequential_e_value(0, c) == pytest.approx(1 / (c + 1), rel=1e-9)
    assert sequential_e_value(10, 1200) < 1e-3
    assert sequential_e_value(100, 2000) < 1e-3
    assert sequential_e_value(1000, 1000) < 1.0  # half broken: no evidence of harm
    # Overwhelming evidence is capped, not infinite.
    assert math.isfinite(sequential_e_value(5000, 0)) and sequential_e_value(5000, 0) > 1e300


def stops(n: int, flip: float, drop: float, sims: int, seed: int) -> int:
    """Runs (of ``sims``) whose e-value ever reaches 1/alpha, looking after every changed case.

    Each case is broken with probability flip/2 + drop and fixed with flip/2 (the trinomial
    model of the gate's MDE)."""
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(sims):
        u = rng.random(n)
        broken = u < flip / 2 + drop
        changed = u < flip + drop
        b = c = 0
        for is_broken in broken[changed]:
            b, c = (b + 1, c) if is_broken else (b, c + 1)
            if cached_e(b, c) >= 1 / ALPHA:
                count += 1
                break
    return count


def test_false_stops_under_no_change_stay_under_alpha() -> None:
    sims = 300
    false_stops = stops(n=300, flip=0.10, drop=0.0, sims=sims, seed=20250601)
    # Ville's inequality bounds the true rate by alpha, so the count is at most Bin(300, 0.05):
    # mean 15, SD sqrt(300 * 0.05 * 0.95) = 3.8. The margin of 3 SDs (0.038 as a rate) is
    # exceeded by chance with probability about 0.002 if the test is valid, so a failure here
    # means the test looks too often or the e-value is wrong, not bad luck (and the seed fixes
    # the draws anyway).
    margin = 3 * math.sqrt(ALPHA * (1 - ALPHA) / sims)
    assert false_stops / sims <= ALPHA + margin
    # The mixture is conservative: in practice far fewer than alpha of unchanged runs stop.
    assert false_stops / sims < ALPHA


def test_a_clear_regression_stops_most_runs() -> None:
    # A 20-point drop on 300 cases: about 75 broken to 15 fixed; the test stops nearly always.
    assert stops(n=300, flip=0.10, drop=0.20, sims=50, seed=7) >= 48


# ------------------------------------------------------------------------------------------
# runner.execute with stop_when
# ------------------------------------------------------------------------------------------


class CountingBackend:
    """Answers "a" to every request, counting the calls made. With ``slow`` set, case
    ``slow`` takes 0.5 s and the cases after it wait for ``release`` (a slow model's calls)."""

    name = "counting"
    offline = True

    def __init__(self, slow: int | None = None) -> None:
        self.calls: list[int] = []
        self.lock = threading.Lock()
        self.slow = slow
        self.release = threading.Event()

    def complete(self, request: Request) -> Reply:
        index = int(request.case["id"])
        with self.lock:
            self.calls.append(index)
        if self.slow is not None and index == self.slow:
            time.sleep(0.5)
        elif self.slow is not None and index > self.slow:
            assert self.release.wait(10), "never released"
        return Reply(text="a", input_tokens=10, output_tokens=1, latency_s=0.001)


def scorer(expected: object, text: str) -> Score:
    return Score(answer=text, score=float(text == expected), format_ok=True)


def jobs(n: int) -> list[Job]:
    return [
        Job(
            case_index=i,
            repeat=0,
            case_id=f"c{i}",
            expected="a",
            request=Request(
                system="s",
                messages=(Message(role="user", content=f"m{i}"),),
                model="m",
                case={"id": i},
            ),
        )
        for i in range(n)
    ]


def after(k: int) -> tuple[Callable[[Job, Outcome], bool], list[int]]:
    """A stop_when that decides on the k-th scored job, and the jobs it saw."""
    seen: list[int] = []

    def stop_when(job: Job, outcome: Outcome) -> bool:
        seen.append(job.case_index)
        return len(seen) >= k

    return stop_when, seen


def test_a_decision_on_the_first_job_sends_nothing_more() -> None:
    backend = CountingBackend()
    stop_when, seen = after(1)
    outcomes, interrupted = execute(jobs(50), backend, scorer, concurrency=4, stop_when=stop_when)
    assert backend.calls == [0] and seen == [0]
    assert outcomes[0].score == 1.0
    assert all(o.error_kind == "skipped" for o in outcomes[1:])
    assert "not sent" in (outcomes[1].error or "")
    assert interrupted is False


@pytest.mark.parametrize("concurrency", [1, 4])
def test_after_the_decision_only_calls_in_flight_finish(concurrency: int) -> None:
    backend = CountingBackend()
    stop_when, seen = after(10)
    outcomes, interrupted = execute(
        jobs(200), backend, scorer, concurrency=concurrency, stop_when=stop_when
    )
    assert interrupted is False
    sent = sorted(backend.calls)
    # Every call made is kept and scored; every job not sent comes back as skipped.
    assert [i for i, o in enumerate(outcomes) if o.error_kind != "skipped"] == sent
    assert all(outcomes[i].score == 1.0 for i in sent)
    # The monitor stops being asked once it has decided.
    assert len(seen) == 10
    # At most the pool's window (2 x concurrency submitted) was in flight at the decision.
    assert 10 <= len(sent) <= 10 + 2 * concurrency
    assert sum(o.error_kind == "skipped" for o in outcomes) == 200 - len(sent) > 0


def test_jobs_queued_but_not_started_at_the_decision_are_not_sent() -> None:
    # Two workers and a window of four: while case 10 takes its time, case 11 holds the other
    # worker and cases 12 and 13 wait in the pool's queue. Case 10 decides; its worker may
    # pick up case 12 before the runner reacts, but case 13 was never sent and must not be,
    # even once the workers free up again.
    backend = CountingBackend(slow=10)

    def stop_when(job: Job, outcome: Outcome) -> bool:
        if job.case_index == 10:
            threading.Timer(1.0, backend.release.set).start()
            return True
        return False

    outcomes, interrupted = execute(jobs(100), backend, scorer, concurrency=2, stop_when=stop_when)
    assert interrupted is False
    assert sorted(backend.calls)[:12] == list(range(12))
    assert set(backend.calls) <= set(range(13))
    assert sum(o.error_kind == "skipped" for o in outcomes) == 100 - len(backend.calls)


# ------------------------------------------------------------------------------------------
# The pipeline drops skipped cases and counts the calls saved
# ------------------------------------------------------------------------------------------


def test_pipeline_drops_skipped_cases_and_sets_calls_saved() -> None:
    loaded = load_config(EXAMPLE / "evalgate.yml")
    name, suite = loaded.suite(None)
    spec = RunSpec(
        suite_name=name,
        suite=suite,
        prompt=load_prompt(loaded, suite, "v2"),
        cases=load_suite_cases(loaded, suite),
        concurrency=2,
    )
    stop_when, _ = after(20)
    run = run_suite(
        spec, fake_backend(suite.model.options, loaded.root), loaded.root, stop_when=stop_when
    )
    total = sum(1 for c in spec.cases.cases if c.split in ("dev", "regression"))
    assert 20 <= len(run.cases) <= 24
    assert run.calls_saved == total - len(run.cases)
    assert all(c.error is None for c in run.cases)
    assert not run.interrupted and not run.incomplete
    # The cases kept are the first ones sent, in the suite's order.
    dev_ids = [c.id for c in spec.cases.cases if c.split in ("dev", "regression")]
    assert [c.id for c in run.cases] == dev_ids[: len(run.cases)]
    # A run that is not stopped saves nothing.
    whole = run_suite(spec, fake_backend(suite.model.options, loaded.root), loaded.root)
    assert whole.calls_saved == 0 and len(whole.cases) == total


# ------------------------------------------------------------------------------------------
# SequentialMonitor
# ------------------------------------------------------------------------------------------


def repeated(
    make_case: Callable[..., CaseResult], id: str, scores: list[int], **overrides: Any
) -> CaseResult:
    """A case whose repeats scored ``scores`` (1 right, 0 wrong)."""
    return make_case(id, "quote", ["quote" if s else "other" for s in scores], **overrides)


def test_monitor_ignores_edited_holdout_regression_errored_and_unstable_cases(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    cases = [
        repeated(make_case, "ok", [1, 1, 1]),
        repeated(make_case, "edited", [1, 1, 1]),
        repeated(make_case, "held", [1, 1, 1], split="holdout"),
        repeated(make_case, "reg", [1, 1, 1], split="regression"),
        make_case("err", error="boom"),
        # Flipped between the repeats the comparison does not use (2nd and 3rd): unstable.
        repeated(make_case, "unstable", [1, 1, 0]),
        # Flipped between the compared 1st repeat and the rest: kept, as the gate keeps it.
        repeated(make_case, "flip-first", [1, 0, 0]),
    ]
    baseline = make_run(cases, repeats=3)
    hashes = {c.id: c.hash for c in cases} | {"edited": "another hash"}
    monitor = SequentialMonitor(baseline, hashes, GatePolicy())
    assert set(monitor.baseline) == {"ok", "flip-first"}
    assert monitor.baseline["flip-first"] == 1.0  # the first repeat, not the mean
    for case_id in ("edited", "held", "reg", "err", "unstable", "unknown"):
        assert monitor.observe(case_id, 0.0) is False
    assert (monitor.broken, monitor.fixed) == (0, 0)  # "ok" (first in file order) not in yet
    monitor.observe("ok", 0.0)
    monitor.observe("flip-first", 0.0)
    assert (monitor.broken, monitor.fixed) == (2, 0)
    # With the noise check off, flipped cases all count.
    everything = SequentialMonitor(baseline, hashes, GatePolicy(exclude_unstable=False))
    assert set(everything.baseline) == {"ok", "flip-first", "unstable"}


def test_monitor_decides_once_the_e_value_reaches_its_share_of_alpha(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    cases = [repeated(make_case, f"c{i}", [1, 1]) for i in range(20)]
    baseline = make_run(cases, repeats=2)
    monitor = SequentialMonitor(baseline, {c.id: c.hash for c in cases}, GatePolicy())
    # The paired test has 0.9 of alpha (format validity the rest), and half of that goes to
    # the e-value: stop at E >= 2 / (0.05 * 0.9) = 44.4.
    assert monitor.threshold == pytest.approx(2 / (ALPHA * 0.9))
    decisions = [monitor.observe(f"c{i}", 0.0) for i in range(9)]
    # E(b, 0) = (2^(b+1) - 1)/(b + 1): E(7, 0) = 31.9, E(8, 0) = 511/9 = 56.8.
    assert decisions == [False] * 7 + [True, True]
    assert monitor.e_max == pytest.approx(1023 / 10)
    strict = SequentialMonitor(baseline, {c.id: c.hash for c in cases}, GatePolicy(alpha=0.01))
    # Threshold 222.2: E(10, 0) = 2047/11 = 186.1, E(11, 0) = 4095/12 = 341.3.
    assert [strict.observe(f"c{i}", 0.0) for i in range(12)].index(True) == 10


def test_monitor_reads_outcomes_in_case_file_order(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    """Calls complete in an order that can depend on the outcome (a refusal is fast); the
    monitor waits for every earlier case before it counts a later one."""
    cases = [repeated(make_case, f"c{i}", [1, 1]) for i in range(12)]
    monitor = SequentialMonitor(
        make_run(cases, repeats=2), {c.id: c.hash for c in cases}, GatePolicy()
    )
    # Eleven fast failures arrive before the first case: nothing is counted yet.
    assert not any(monitor.observe(f"c{i}", 0.0) for i in range(1, 12))
    assert (monitor.broken, monitor.fixed, monitor.e_max) == (0, 0, 1.0)
    # The first case arrives (a pass: a tie); all twelve are now read, eleven broken.
    assert monitor.observe("c0", 1.0) is True
    assert (monitor.broken, monitor.fixed) == (11, 0)
    # A second repeat of a case, or the same case again, changes nothing.
    assert monitor.observe("c0", 0.0, repeat=1) is True
    assert (monitor.broken, monitor.fixed) == (11, 0)


def test_monitor_counts_what_the_gate_counts(
    make_case: Callable[..., CaseResult], make_run: Callable[..., Run]
) -> None:
    rng = np.random.default_rng(3)
    for repeats in (1, 2, 3):
        base_cases = [
            repeated(make_case, f"c{i}", [int(x) for x in rng.random(repeats) < 0.7])
            for i in range(40)
        ]
        baseline = make_run(base_cases, repeats=repeats)
        candidate = make_run(
            [repeated(make_case, f"c{i}", [int(rng.random() < 0.7)]) for i in range(40)]
        )
        monitor = SequentialMonitor(baseline, {c.id: c.hash for c in base_cases}, GatePolicy())
        for case in candidate.cases:
            monitor.observe(case.id, case.score)
        # The monitor's own test compares matched first repeats, as the sign test does.
        verdict = decide(baseline, candidate, GatePolicy(test="sign"))
        assert (monitor.broken, monitor.fixed) == (len(verdict.broken), len(verdict.fixed))


def test_monitor_false_stops_under_no_change_stay_under_alpha(
    make_case: Callable[..., CaseResult],
    make_run: Callable[..., Run],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unchanged prompt on a noisy model: a baseline with 2 repeats, a candidate run once.

    Four cases in ten pass with probability 0.85 (a flip rate of about 10%). Comparing the
    candidate with baseline cases that were settled over both repeats would count broken about
    0.85/0.15 times as often as fixed, and stop most runs; paired with one repeat, each change is
    broken or fixed with probability 1/2 and the e-value's guarantee holds.
    """
    monkeypatch.setattr(gate_module, "sequential_e_value", cached_e)
    rng = np.random.default_rng(11)
    n, sims = 200, 150
    p = np.where(rng.random(n) < 0.4, 0.85, np.where(rng.random(n) < 0.8, 1.0, 0.0))
    template = [repeated(make_case, f"c{i}", [1, 1]) for i in range(n)]
    hashes = {c.id: c.hash for c in template}
    right, wrong = template[0].outcomes[0], make_case(answer="other").outcomes[0]
    false_stops = 0
    for _ in range(sims):
        draws = rng.random((n, 2)) < p[:, None]
        cases = [
            c.model_copy(update={"outcomes": [right if d else wrong for d in row]})
            for c, row in zip(template, draws, strict=True)
        ]
        monitor = SequentialMonitor(make_run(cases, repeats=2), hashes, GatePolicy())
        candidate = rng.random(n) < p
        false_stops += any(monitor.observe(f"c{i}", float(candidate[i])) for i in range(n))
    # As in the bare simulation: alpha plus 3 Monte Carlo SDs of a rate over 150 runs (0.053).
    assert false_stops / sims <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / sims)


# ------------------------------------------------------------------------------------------
# evalgate gate --early-stop
# ------------------------------------------------------------------------------------------


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_gate_early_stop_end_to_end(bike_shop: Path) -> None:
    config = str(bike_shop / "evalgate.yml")
    code, _, err = cli("run", "v2", "--repeats", "2", "--config", config)
    assert code == 0, err
    (baseline_name,) = [r.name for _, r in iter_runs(bike_shop / ".evalgate")]
    suite_size = 143  # the bike-shop dev cases

    # v1 answers in its own words: a certain fail, decided long before the suite ends.
    code, out, err = cli(
        "gate", "--baseline", baseline_name, "--candidate", "v1", "--early-stop", "--config", config
    )
    assert code == 1, err
    assert out.startswith("Verdict: FAIL")
    reason = next(line for line in out.splitlines() if "sequential test" in line)
    assert "e-value crossed its threshold" in reason and "stopped early" in reason
    saved_run = next(r for _, r in iter_runs(bike_shop / ".evalgate") if r.prompt.name == "v1")
    assert f"saved {saved_run.calls_saved} calls" in reason
    # The run file keeps the largest e-value, so the gate can split alpha with it later.
    assert saved_run.sequential_e_max is not None
    assert saved_run.sequential_e_max >= 2 / (ALPHA * 0.9)
    assert "alpha split with the sequential e-value" in out
    assert 8 <= len(saved_run.cases) < suite_size
    assert saved_run.calls_saved == suite_size - len(saved_run.cases)
    assert not saved_run.interrupted

    # v3 makes no difference on the fake model: nothing is stopped and the gate passes.
    code, out, err = cli(
        "gate",
        "--baseline",
        baseline_name,
        "--candidate",
        "v3",
        "--early-stop",
        "--config",
        config,
        "--json",
    )
    assert code == 0, err
    verdict = json.loads(out)
    assert verdict["kind"] == "pass"
    assert verdict["unit"] == "group"  # the example's cases carry scenario groups
    assert verdict["unchanged"] == suite_size
    assert not any("sequential" in r for r in verdict["reasons"])
    v3 = next(r for _, r in iter_runs(bike_shop / ".evalgate") if r.prompt.name == "v3")
    assert v3.calls_saved == 0 and len(v3.cases) == suite_size


def test_a_watched_run_splits_the_paired_alpha_with_its_largest_e_value() -> None:
    """The paired route's p-value of a run the monitor watched is 2 min(p, 1 / max E)
    (Bonferroni over the two looks). By hand: 5 broken of 25 cases, one draw a side: the final
    p = 1/32; with max E = 100 the route's p is 2 * min(1/32, 1/100) = 0.02; with max E = 1
    (never rose) it is 2/32."""
    from test_gate import policy, sign_pair

    base, cand = sign_pair(broken=5, same=20)
    watched = decide(base, cand.model_copy(update={"sequential_e_max": 100.0}), policy())
    assert watched.p_value == pytest.approx(0.02)
    assert watched.test.endswith("alpha split with the sequential e-value")
    quiet = decide(base, cand.model_copy(update={"sequential_e_max": 1.0}), policy())
    assert quiet.p_value == pytest.approx(2 / 32)
    assert decide(base, cand, policy()).p_value == pytest.approx(1 / 32)
