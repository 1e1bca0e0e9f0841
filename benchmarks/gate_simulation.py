"""How often the gate fails or passes whole pull requests, by simulation (prints a table).

    python -m benchmarks.gate_simulation                 # 400 pull requests a row, ~15 min
    python -m benchmarks.gate_simulation --stand-in 200  # and end to end through the SDK (slow)

The pull-request model: per-case pass rates from a heterogeneous noisy model (f = 0.09: 75% of
cases lean pass, 15% lean fail with a small per-call error set to reach f, 10% noisy with a pass
rate from U(0.2, 0.8)), 3% of replies losing the format at random, a baseline of R repeats
(default 2), the candidate run once; runs are built from numpy draws and judged by gate.decide
and gate.decide_pull_request, as the action does. Rows, each with a 95% Wilson interval:

* the per-PR false-fail rate on unchanged prompts with 1, 3, 5 and 10 suites of 300 cases;
* a scenario-clustered PR with zero expected change (165 groups of 2 phrasings sharing their
  group's pass rates; each pass-leaning group breaks with probability 0.04, each fail-leaning
  group is fixed with probability 0.2), by groups (the default) and by cases (contrast);
* power at drops of 3, 4.7 and 8 points with R = 2, 3 and 5 (n = 300);
* the pass rate at the margin (a true drop equal to the 5-point tolerance) at n = 40 and 300;
  ``--margin [N ...]`` gives only these, under both drop models (broken cases always fail, or a
  diffuse drop that lowers every case's pass rate in proportion);
* the pass rate on unchanged prompts at n = 300 and 40;
* the false-fail rate with the early stop (the sequential monitor fed in a random completion
  order, then the final gate with alpha split) at n = 300, 1,000 and 3,000.

``--power-grid N [N ...]`` gives only the power the gate predicts (analysis.power, from each
simulated baseline's flip rate and design effect) beside the paired test's simulated power, over
groups of 1, of 3 flipping independently and of 3 flipping together, f = 0.05 and 0.09, (R, K) =
(2, 1), (3, 1), (2, 2) and two drops a size, with the largest difference (target 5 points)
and how many baselines had no group flipping (their design effect unmeasured); each cell is
split by that too (predicted - simulated where the design effect was measured; the stated and
the simulated power where it was not), and the settings are named at which no one stated power
for the unmeasured baselines, which give the power model the same inputs in both structures,
puts both the cell of groups moving together and the skewed cell within 5 points;
``--known-design-effect`` predicts with each structure's true design effect instead;
``--halfway-when-unmeasured`` tries the rule the gate does not use for a baseline where no group
of several cases flips: the mean of the powers with groups moving together and with cases
independent, instead of the first alone.
``--stand-in N`` adds N end-to-end comparisons of the older single-suite setting (n = 300,
f = 0.10, an 8-point drop): every run made through the real AnthropicBackend (the anthropic SDK
over HTTP) and pipeline.run_suite against the Messages stand-in with seeded flip noise, judged
by the gate, beside an absolute threshold rule (fail below the baseline - 2 points), the
leave-out rule the gate once used (cases that flipped between the baseline's two repeats left
out of a sign test against those repeats), and the broke-more-than-noise check.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from evalgate.analysis import power as power_model
from evalgate.analysis.conditional import (
    clustered_test_worse,
    conditional_residuals,
    conditional_test_worse,
)
from evalgate.analysis.intervals import wilson_interval
from evalgate.analysis.run_permutation import Block, run_permutation_test_worse
from evalgate.analysis.sign_test import flip_rate, sign_test_worse
from evalgate.backends.base import BackendContext
from evalgate.config.load import LoadedConfig, load_config
from evalgate.config.models import GatePolicy
from evalgate.gate.decide import decide
from evalgate.gate.pull_request import decide_pull_request
from evalgate.gate.sequential import SequentialMonitor
from evalgate.gate.verdict import Verdict
from evalgate.runs.schema import CaseResult, ModelInfo, Outcome, PromptInfo, Run

N_CASES = 300
FLIP_RATE = 0.10
DROP_CASES = 25
HARD_CASES = 30
THRESHOLD = 0.02
REQUIRED = 200  # comparisons a source needs before its rates are held to the targets
MODEL = "claude-stand-in"

# The fake model's rules: the first rule whose phrase is in the message gives the label. Only
# "warranty" has an alias, so a prompt that does not name it changes those answers only.
PHRASES = {
    "booking": "please book",
    "quote": "how much",
    "status": "is it ready",
    "parts": "in stock",
    "warranty": "warranty claim",
}
DEFAULT = "other"
LABELS = [*PHRASES, DEFAULT]
RULES = {
    "rules": [
        {"label": label, "phrases": [phrase]}
        | ({"alias": "guarantee claim"} if label == "warranty" else {})
        for label, phrase in PHRASES.items()
    ],
    "default": DEFAULT,
}
BASE_PROMPT = (
    "Sort each customer message into one of: booking, quote, status, parts, warranty, other.\n"
    'Reply with only a JSON object: {"category": "<label>"}.\n'
)
PR_PROMPT = (
    "Sort each customer message into one of: booking, quote, status, parts, other.\n"
    'Reply with only a JSON object: {"category": "<label>"}.\n'
)
MESSAGES = {
    "booking": "Could you please book my bike in for a service?",
    "quote": "How much would a new chain cost?",
    "status": "I left my bike on Monday, is it ready?",
    "parts": "Is the red saddle in stock?",
    "warranty": "The frame cracked after a month, this is a warranty claim.",
    "other": "Thanks for the help last week!",
    "hard": "What would you charge to true a buckled wheel?",  # a quote no phrase catches
}


@dataclass(frozen=True)
class SimCase:
    id: str
    kind: str  # a label, or "hard" (expected quote, answered other)

    @property
    def expected(self) -> str:
        return "quote" if self.kind == "hard" else self.kind


def suite_cases() -> list[SimCase]:
    cases = [SimCase(f"w{i:03d}", "warranty") for i in range(DROP_CASES)]
    cases += [SimCase(f"h{i:03d}", "hard") for i in range(HARD_CASES)]
    plain = [label for label in LABELS if label != "warranty"]
    cases += [
        SimCase(f"n{i:03d}", plain[i % len(plain)])
        for i in range(N_CASES - DROP_CASES - HARD_CASES)
    ]
    return cases


def pass_probabilities(cases: Sequence[SimCase], phi: float) -> tuple[np.ndarray, np.ndarray]:
    """Per case, the chance one call is scored right: under the baseline and the PR prompt.

    A flip replaces the answer by one of the other 5 labels' answers, uniformly: a right answer
    becomes wrong; a wrong one becomes right only if it lands on the expected label (1 in 5).
    Under the PR prompt the warranty cases' answers ("guarantee claim", or a flip to one of the
    other labels) are never "warranty".
    """
    base = np.array([phi / 5 if c.kind == "hard" else 1 - phi for c in cases])
    pr = np.where([c.kind == "warranty" for c in cases], 0.0, base)
    return base, pr


def calibrate_phi(cases: Sequence[SimCase], flip_rate: float) -> float:
    """The per-call flip probability whose expected pairwise flip rate is ``flip_rate``."""
    lo, hi = 0.0, 0.5
    for _ in range(60):
        mid = (lo + hi) / 2
        p, _ = pass_probabilities(cases, mid)
        if float(np.mean(2 * p * (1 - p))) < flip_rate:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# ---------------------------------------------------------------- what each comparison records


@dataclass
class Tally:
    n: int = 0
    gate: int = 0
    threshold: int = 0
    leave_out: int = 0
    noise_check: int = 0
    flip_rates: list[float] = field(default_factory=list)
    drops: list[float] = field(default_factory=list)

    def add(self, baseline: Run, candidate: Run, verdict: Verdict, alpha: float) -> None:
        base_acc = accuracy(baseline)
        cand_acc = accuracy(candidate)
        self.n += 1
        self.gate += verdict.kind == "fail"
        self.threshold += cand_acc < base_acc - THRESHOLD
        self.leave_out += leave_out_rule(baseline, candidate, alpha)
        self.noise_check += verdict.noise_p is not None and verdict.noise_p < alpha
        if verdict.noise is not None:
            self.flip_rates.append(verdict.noise.flip_rate)
        self.drops.append(base_acc - cand_acc)


def accuracy(run: Run) -> float:
    scores = [c.score for c in run.cases if c.score is not None]
    return sum(scores) / len(scores)


def leave_out_rule(baseline: Run, candidate: Run, alpha: float) -> bool:
    """The gate before the fix: leave out cases that flipped between the baseline's repeats,
    sign-test the rest against the baseline (whose repeats then agree)."""
    cand = candidate.by_id()
    broken = fixed = 0
    for case in baseline.cases:
        if case.flipped or case.score is None or cand[case.id].score is None:
            continue
        before, after = case.score, cand[case.id].score or 0.0
        broken += after < before
        fixed += after > before
    return sign_test_worse(broken, fixed) < alpha


# ---------------------------------------------------------------- the stand-in, end to end


def serve(conn: Connection, phi: float, seed: int) -> None:
    """The stand-in with flip noise, in its own process, until told to stop."""
    from evalgate.backends.fake import FakeRules
    from tests.support.messages_server import Knobs, MessagesServer

    rules = FakeRules.model_validate(RULES)
    with MessagesServer(rules, Knobs(flip_rate=phi, seed=seed), log_limit=0) as server:
        conn.send(server.url)
        conn.recv()  # "stop"
        conn.send({"requests": server.stats().requests, "errors": len(server.errors)})


def write_suite(root: Path, cases: Sequence[SimCase]) -> LoadedConfig:
    (root / "prompts").mkdir()
    (root / "prompts" / "base.txt").write_text(BASE_PROMPT, encoding="utf-8")
    (root / "prompts" / "pr.txt").write_text(PR_PROMPT, encoding="utf-8")
    with (root / "cases.jsonl").open("w", encoding="utf-8") as out:
        for i, c in enumerate(cases):
            record = {
                "id": c.id,
                "category": c.expected,
                # The number makes every request distinct, as real messages are.
                "message": f"#{i}: {MESSAGES[c.kind]}",
                "split": "dev",
            }
            out.write(json.dumps(record) + "\n")
    suite = {
        "prompts": "prompts/*.txt",
        "cases": "cases.jsonl",
        "fields": {"input": ["message"], "expected": "category", "category": "category"},
        "template": "<message>\n{{ message }}\n</message>",
        "model": {"backend": "anthropic", "name": MODEL, "max_tokens": 64, "temperature": 0},
        "scorer": {"kind": "label", "field": "category"},
        "concurrency": 16,
        "split": {"holdout_fraction": 0.0, "min_holdout": 0},
    }
    config = root / "evalgate.yml"
    config.write_text(yaml.safe_dump({"version": 1, "suites": {"sim": suite}}), encoding="utf-8")
    return load_config(config)


def stand_in(
    iterations: int, cases: Sequence[SimCase], phi: float, seed: int, policy: GatePolicy
) -> tuple[Tally, Tally, dict[str, Any]]:
    from evalgate.backends.anthropic import AnthropicBackend
    from evalgate.running.suite import RunSpec, load_prompt, load_suite_cases, run_suite

    aa, pr = Tally(), Tally()
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    server = context.Process(target=serve, args=(child, phi, seed), daemon=True)
    server.start()
    try:
        url = parent.recv()
        with tempfile.TemporaryDirectory(prefix="gate-sim-") as tmp:
            root = Path(tmp)
            loaded = write_suite(root, cases)
            name, suite = loaded.suite(None)
            suite_cases_ = load_suite_cases(loaded, suite)
            env = {"ANTHROPIC_API_KEY": "sk-stand-in", "ANTHROPIC_BASE_URL": url}
            backend = AnthropicBackend(suite.model, BackendContext(base_dir=root, env=env))

            def one(version: str, repeats: int) -> Run:
                spec = RunSpec(
                    suite_name=name,
                    suite=suite,
                    prompt=load_prompt(loaded, suite, version),
                    cases=suite_cases_,
                    repeats=repeats,
                )
                run = run_suite(spec, backend, root)
                if run.errors or len(run.cases) != len(cases):
                    raise RuntimeError(f"a stand-in run went wrong: {run.errors} errors")
                return run

            try:
                for i in range(iterations):
                    baseline = one("base", 2)
                    for tally, version in ((aa, "base"), (pr, "pr")):
                        candidate = one(version, 1)
                        verdict = decide(baseline, candidate, policy)
                        tally.add(baseline, candidate, verdict, policy.alpha)
                    progress(f"stand-in {i + 1}/{iterations}")
            finally:
                backend.close()
        parent.send("stop")
        stats: dict[str, Any] = parent.recv()
    finally:
        server.join(timeout=10)
        if server.is_alive():
            server.terminate()
    return aa, pr, stats


# ---------------------------------------------------------------- the per-call model, with numpy


_CREATED = datetime(2025, 1, 1, tzinfo=UTC)
_RIGHT = Outcome(answer="right", score=1.0, format_ok=True, stop_reason="end_turn")
_WRONG = Outcome(answer="wrong", score=0.0, format_ok=True, stop_reason="end_turn")


def model_run(cases: Sequence[SimCase], passed: np.ndarray, name: str) -> Run:
    """A run whose case i, repeat r passed when ``passed[i, r]`` (shared Outcome objects:
    pydantic keeps model instances as they are, which keeps 300-case runs cheap to build)."""
    results = [
        CaseResult(
            id=c.id,
            category=c.expected,
            expected=c.expected,
            hash=c.id,
            outcomes=[_RIGHT if x else _WRONG for x in row],
        )
        for c, row in zip(cases, passed, strict=True)
    ]
    return Run(
        name=name,
        created_at=_CREATED,
        suite="sim",
        prompt=PromptInfo(name=name, sha256=name),
        cases_sha256="cases",
        case_files={},
        model=ModelInfo(
            backend="anthropic", name=MODEL, max_tokens=64, temperature=0.0, options_sha256="-"
        ),
        scorer={"kind": "label"},
        scorer_sha256="label",
        evalgate_version="sim",
        repeats=passed.shape[1],
        cases=results,
    )


# ---------------------------------------------------------------- the pull-request model

# The heterogeneous model of the pull-request table: a case leans pass (75%) or fail (15%) with
# a small per-call error eps, or is noisy (10%) with a pass rate drawn from U(0.2, 0.8); eps is
# set so that two runs of one prompt differ on a share F_PR of cases.
F_PR = 0.09
FORMAT_NOISE = 0.03
TOLERANCE = 0.05
_OUTCOMES = {
    (passed, fmt): Outcome(
        answer="right" if passed else "wrong",
        score=1.0 if passed else 0.0,
        format_ok=fmt,
        stop_reason="end_turn",
    )
    for passed in (True, False)
    for fmt in (True, False)
}


@dataclass(frozen=True)
class Suite:
    """One simulated suite: per-case pass rates, kinds and scenario groups."""

    p: np.ndarray
    kind: np.ndarray  # 0 leans pass, 1 leans fail, 2 noisy
    groups: list[str] | None


def _pass_rates(kind: np.ndarray, noisy: np.ndarray, eps: float) -> np.ndarray:
    return np.where(kind == 0, 1 - eps, np.where(kind == 1, eps, noisy))


def make_suite(
    rng: np.random.Generator, n: int, groups: int | None = None, flip: float = F_PR
) -> Suite:
    """``n`` cases; with ``groups``, cases share their group's kind (phrasings of one request
    move together)."""
    units = groups or n
    unit_kind = rng.choice(3, size=units, p=[0.75, 0.15, 0.10])
    unit_noisy = rng.uniform(0.2, 0.8, size=units)
    member = np.arange(n) % units if groups else np.arange(n)
    kind, noisy = unit_kind[member], unit_noisy[member]
    lo, hi = 0.0, 0.2
    for _ in range(50):
        eps = (lo + hi) / 2
        p = _pass_rates(kind, noisy, eps)
        if float(np.mean(2 * p * (1 - p))) < flip:
            lo = eps
        else:
            hi = eps
    names = [f"g{m:03d}" for m in member] if groups else None
    return Suite(p=_pass_rates(kind, noisy, (lo + hi) / 2), kind=kind, groups=names)


def draw_run(
    rng: np.random.Generator, suite: Suite, p: np.ndarray, repeats: int, name: str, label: str
) -> Run:
    passed = rng.random((len(p), repeats)) < p[:, None]
    fmt = rng.random((len(p), repeats)) >= FORMAT_NOISE
    cases = [
        CaseResult(
            id=f"c{i:04d}",
            group=suite.groups[i] if suite.groups else None,
            category="sim",
            expected="right",
            hash=f"c{i:04d}",
            outcomes=[_OUTCOMES[(bool(x), bool(y))] for x, y in zip(row, frow, strict=True)],
        )
        for i, (row, frow) in enumerate(zip(passed, fmt, strict=True))
    ]
    run = model_run([SimCase(c.id, "quote") for c in cases], passed, name)
    return run.model_copy(update={"cases": cases, "suite": label, "repeats": repeats})


def with_drop(rng: np.random.Generator, suite: Suite, drop: float) -> np.ndarray:
    """The candidate's pass rates: a random share of pass-leaning cases always fails, so the
    expected accuracy falls by ``drop``."""
    p = suite.p.copy()
    leaning = np.flatnonzero(suite.kind == 0)
    k = round(drop * len(p) / float(np.mean(suite.p[leaning])))
    p[rng.choice(leaning, size=min(k, len(leaning)), replace=False)] = 0.0
    return p


def with_diffuse_drop(suite: Suite, drop: float) -> np.ndarray:
    """The candidate's pass rates under a diffuse drop: every case's rate falls in proportion,
    ``p (1 - drop / mean p)``, so the expected accuracy falls by ``drop`` with no case broken
    outright (changes are spread over many cases, each also flipping by noise)."""
    return suite.p * (1.0 - drop / float(np.mean(suite.p)))


def margin_table(
    sims: int, seed: int, sizes: Sequence[int] = (40, 100, 300)
) -> list[tuple[str, str, Count, str, bool]]:
    """Passes at a true drop equal to the tolerance under both drop models, at each n of
    ``sizes`` (a pass there is the margin test's error; at most alpha is the target)."""
    rng = np.random.default_rng(seed)
    policy = GatePolicy(tolerance=TOLERANCE)
    rows = []
    for model in ("broken cases always fail", "diffuse drop"):
        for n in sizes:
            c = Count()
            for _ in range(sims):
                s = make_suite(rng, n)
                cand = (
                    with_drop(rng, s, TOLERANCE)
                    if model.startswith("broken")
                    else with_diffuse_drop(s, TOLERANCE)
                )
                c.add(pull_request(rng, [s], [cand], policy) == "pass")
            rows.append(
                (
                    "pass at the margin (drop = tolerance)",
                    f"{model}, n = {n}",
                    c,
                    "<= 5%",
                    c.hits / c.n <= 0.05,
                )
            )
            progress(f"margin {model} n={n}")
    return rows


# The predicted-versus-simulated power grid. Each cell: a suite of n cases whose groups are of
# one case, of three cases that flip independently (labels only), or of three cases that flip
# together (one draw a group and run, a drop breaking whole groups); a flip rate f; R baseline
# and K candidate draws; a true drop. Drops by n put the cells across the power curve.
GRID_DROPS = {40: (0.08, 0.15), 100: (0.047, 0.08), 300: (0.03, 0.047)}
GRID_STRUCTURES = (
    "groups of 1",
    "groups of 3, independent",
    "groups of 3, together",
    "groups of 3, hard (skewed)",
)
# E[2p(1 - p)] for p ~ U(0.05, 0.15): 2 (E p - E p^2) = 2 (0.1 - (0.01 + 0.1^2 / 12)).
HARD_FLIP = 2 * (0.1 - (0.01 + 0.01 / 12))
GRID_FLIPS = (0.05, 0.09)
GRID_DRAWS = ((2, 1), (3, 1), (2, 2))


@dataclass
class GridCell:
    """One cell of the power grid: its setting, the simulated fails and the mean prediction."""

    n: int
    structure: str
    flip: float
    draws: tuple[int, int]
    drop: float
    count: Count = field(default_factory=lambda: Count())
    predicted: float = 0.0
    # Baselines in which no group of several cases flipped: their design effect is not measured
    # and the model counts each group as one unit (analysis.power).
    unmeasured: int = 0
    # The same pull requests split by whether the baseline measured its design effect (grouped
    # structures only): their fails, and the summed prediction (a mean once the cell is done).
    measured_count: Count = field(default_factory=lambda: Count())
    measured_predicted: float = 0.0
    unmeasured_count: Count = field(default_factory=lambda: Count())
    unmeasured_predicted: float = 0.0

    @property
    def difference(self) -> float:
        """Predicted minus simulated, in points."""
        return 100 * (self.predicted - self.count.hits / self.count.n)

    @property
    def measured_difference(self) -> float | None:
        """Predicted minus simulated over the pull requests whose baseline measured its design
        effect, in points (``None`` when none did)."""
        c = self.measured_count
        return 100 * (self.measured_predicted - c.hits / c.n) if c.n else None

    def fitting_values(self, within: float) -> tuple[float, float] | None:
        """The one power stated for every unmeasured baseline of this cell (their inputs to the
        power model are the same: no case flips, so f = 0 and no design effect) that would put
        the cell's predicted - simulated within ``within`` points, as an interval of powers
        in [0, 1], the rest of the cell's predictions as they are; ``None`` when there are no
        unmeasured baselines."""
        share = self.unmeasured_count.n / self.count.n
        if share == 0.0:
            return None
        rest = (1.0 - share) * self.measured_predicted
        sim = self.count.hits / self.count.n
        low = (sim - within / 100 - rest) / share
        high = (sim + within / 100 - rest) / share
        return max(0.0, low), min(1.0, high)


def _grid_suite(rng: np.random.Generator, n: int, structure: str, flip: float) -> Suite:
    if structure == "groups of 3, hard (skewed)":
        # The skewed configuration: a share of the groups is hard (its cases pass with the
        # group's rate from U(0.05, 0.15), each case drawn on its own), the rest always pass;
        # the hard share sets the flip rate. The informative cases are then mostly failing ones.
        units = n // 3
        member = np.arange(n) % units
        hard = rng.random(units) < min(1.0, flip / HARD_FLIP)
        rate = np.where(hard, rng.uniform(0.05, 0.15, size=units), 1.0)
        names = [f"g{m:03d}" for m in member]
        return Suite(p=rate[member], kind=np.where(hard, 1, 0)[member], groups=names)
    if structure == "groups of 3, together":
        return make_suite(rng, n, groups=n // 3, flip=flip)
    s = make_suite(rng, n, flip=flip)
    if structure == "groups of 1":
        return s
    return Suite(p=s.p, kind=s.kind, groups=[f"g{i % (n // 3):03d}" for i in range(n)])


def _grid_drop(rng: np.random.Generator, s: Suite, drop: float, member: np.ndarray) -> np.ndarray:
    """The candidate's pass rates under a true drop of ``drop`` as the power model defines it:
    each pass-leaning case (or, when a group's cases move together, each pass-leaning group)
    independently always fails, with the chance that lowers the expected accuracy by
    ``drop``."""
    units = int(member.max()) + 1
    leaning = s.kind[:units] == 0  # unit u's first case is case u
    lost = np.zeros(units)
    np.add.at(lost, member, s.p)
    room = float(np.sum(lost[leaning]))
    chance = min(1.0, drop * len(s.p) / room) if room > 0.0 else 0.0  # no case to break
    broken = leaning & (rng.random(units) < chance)
    p = s.p.copy()
    p[broken[member]] = 0.0
    return p


def grid_cell(
    rng: np.random.Generator,
    cell: GridCell,
    sims: int,
    level: float,
    *,
    known: bool = False,
    halfway: bool = False,
) -> None:
    """Simulate ``sims`` pull requests of one cell: the paired test the gate runs (the exact
    conditional test over cases, or the group-level test over groups of 3) at its one-suite
    alpha share, and the power the gate predicts from each baseline (its measured flip rate and
    design effect, analysis.power; with ``known``, the structure's true design effect instead:
    3 for groups that move together, else 1; with ``halfway``, where no group flips, the mean of
    the powers at the correlated and at the independent design effect)."""
    r, k = cell.draws
    together = cell.structure == "groups of 3, together"
    grouped = cell.structure != "groups of 1"
    predicted = 0.0
    for _ in range(sims):
        s = _grid_suite(rng, cell.n, cell.structure, cell.flip)
        units = cell.n // 3 if grouped else cell.n
        member = np.arange(cell.n) % units
        cand_p = _grid_drop(rng, s, cell.drop, member if together else np.arange(cell.n))
        if together:
            base = rng.random((units, r))[member] < s.p[:, None]
            cand = rng.random((units, k))[member] < cand_p[:, None]
        else:
            base, cand = _draws(rng, s.p, r), _draws(rng, cand_p, k)
        if grouped:
            p_value = run_permutation_test_worse(group_blocks(base, cand, member))
        else:
            sets = [(int(b.sum()), r, int(c.sum()), k) for b, c in zip(base, cand, strict=True)]
            p_value = conditional_test_worse(sets)
        cell.count.add(p_value <= level)
        outcomes = base.tolist()
        effect = 1.0
        if grouped:
            names = [str(m) for m in member]
            measured = power_model.design_effect(outcomes, names)
            cell.unmeasured += measured is None
            effect = power_model.bounded_effect(measured, [3] * units)
            if known:
                effect = 3.0 if together else 1.0
        f = flip_rate(outcomes)
        stated = power_model.power(cell.n / effect, f, cell.drop, level, r, k)
        if halfway and grouped and measured is None and not known:
            independent = power_model.power(cell.n, f, cell.drop, level, r, k)
            stated = (stated + independent) / 2.0
        predicted += stated
        if grouped and measured is None:
            cell.unmeasured_count.add(p_value <= level)
            cell.unmeasured_predicted += stated
        elif grouped:
            cell.measured_count.add(p_value <= level)
            cell.measured_predicted += stated
    cell.predicted = predicted / sims
    cell.measured_predicted /= max(1, cell.measured_count.n)
    cell.unmeasured_predicted /= max(1, cell.unmeasured_count.n)


def power_grid_table(
    sims: int,
    seed: int,
    sizes: Sequence[int],
    structures: Sequence[str] = GRID_STRUCTURES,
    *,
    known: bool = False,
    halfway: bool = False,
) -> list[GridCell]:
    """Every cell of the grid at each n of ``sizes``, from one seeded generator (``known``: see
    :func:`grid_cell`)."""
    rng = np.random.default_rng(seed)
    cells = []
    for n in sizes:
        for structure in structures:
            for flip in GRID_FLIPS:
                for draws in GRID_DRAWS:
                    for drop in GRID_DROPS[n]:
                        cell = GridCell(n, structure, flip, draws, drop)
                        grid_cell(rng, cell, sims, PAIRED_SHARE, known=known, halfway=halfway)
                        cells.append(cell)
                        progress(f"power grid n={n} {structure} f={flip} {draws} d={drop}")
    return cells


def print_power_grid(cells: Sequence[GridCell]) -> float:
    """The grid as a Markdown table; returns the largest |predicted - simulated| in points."""
    print(
        "| n | groups | f | R | K | drop | predicted | simulated (95% Wilson interval) "
        "| predicted − simulated | where the design effect was measured: predicted − simulated "
        "| where no group flipped: baselines, predicted, simulated |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for c in cells:
        r, k = c.draws
        measured = unmeasured = ""
        if c.structure != "groups of 1":
            if c.measured_difference is not None:
                measured = f"{c.measured_difference:+.1f}"
            u = c.unmeasured_count
            unmeasured = f"{u.n}/{c.count.n}"
            if u.n:
                unmeasured += f", {100 * c.unmeasured_predicted:.1f}%, {100 * u.hits / u.n:.1f}%"
        print(
            f"| {c.n} | {c.structure} | {c.flip:g} | {r} | {k} | {100 * c.drop:g} "
            f"| {100 * c.predicted:.1f}% | {rate_cell(c.count)} | {c.difference:+.1f} "
            f"| {measured} | {unmeasured} |"
        )
    return max((abs(c.difference) for c in cells), default=0.0)


def measured_worst(cells: Sequence[GridCell], least: int = 200) -> float:
    """The largest |predicted - simulated| over the pull requests whose baseline measured its
    design effect (cells of groups of 1 whole), over cells with at least ``least`` of them."""
    worst = 0.0
    for c in cells:
        if c.structure == "groups of 1":
            worst = max(worst, abs(c.difference))
        elif c.measured_count.n >= least and c.measured_difference is not None:
            worst = max(worst, abs(c.measured_difference))
    return worst


def unfittable(cells: Sequence[GridCell], within: float = 5.0) -> list[str]:
    """Settings (n, f, R, K, drop) at which no one stated power for the baselines where no
    group flips puts both the cell of groups moving together and the skewed cell within
    ``within`` points: those baselines give the power model the same inputs in both
    structures (no case flips), so any rule that reads what it reads states one number for
    both."""
    by_setting: dict[tuple[int, float, tuple[int, int], float], dict[str, GridCell]] = {}
    for c in cells:
        by_setting.setdefault((c.n, c.flip, c.draws, c.drop), {})[c.structure] = c
    out = []
    for (n, f, (r, k), drop), group in by_setting.items():
        pair = [group.get("groups of 3, together"), group.get("groups of 3, hard (skewed)")]
        if any(c is None for c in pair):
            continue
        fits = [c.fitting_values(within) for c in pair if c is not None]
        if any(v is None for v in fits):
            continue
        low = max(v[0] for v in fits if v is not None)
        high = min(v[1] for v in fits if v is not None)
        if low > high:
            a, b = (_span(v) for v in fits)
            out.append(
                f"n={n} f={f:g} R={r} K={k} drop {100 * drop:g}: groups moving together need "
                f"{a}, the skewed {b}"
            )
    return out


def _span(values: tuple[float, float] | None) -> str:
    assert values is not None
    low, high = values
    return f"{100 * low:.1f}-{100 * high:.1f}%" if low <= high else "none (no value fits)"


def with_scenario_churn(rng: np.random.Generator, suite: Suite) -> np.ndarray:
    """A PR that breaks about as many scenarios as it fixes (expected change zero): each
    pass-leaning group breaks with probability 0.04, each fail-leaning group is fixed with
    probability 0.2 (0.75 * 0.04 = 0.15 * 0.2), every phrasing of a group together."""
    assert suite.groups is not None
    p = suite.p.copy()
    names = sorted(set(suite.groups))
    draw = dict(zip(names, rng.random(len(names)), strict=True))
    for i, g in enumerate(suite.groups):
        chance = {0: 0.04, 1: 0.2}.get(int(suite.kind[i]), 0.0)
        if draw[g] < chance:
            p[i] = 1 - p[i]
    return p


@dataclass
class Count:
    hits: int = 0
    n: int = 0

    def add(self, hit: bool) -> None:
        self.hits += hit
        self.n += 1


def pull_request(
    rng: np.random.Generator,
    suites: list[Suite],
    candidate_p: list[np.ndarray],
    policy: GatePolicy,
    base_repeats: int = 2,
) -> str:
    parts = []
    for i, (suite, cand_p) in enumerate(zip(suites, candidate_p, strict=True)):
        base = draw_run(rng, suite, suite.p, base_repeats, "baseline", f"s{i}")
        cand = draw_run(rng, suite, cand_p, 1, "candidate", f"s{i}")
        parts.append((f"s{i}", decide(base, cand, policy)))
    return decide_pull_request(parts).kind


def early_stop_pr(rng: np.random.Generator, suite: Suite, policy: GatePolicy) -> bool:
    """An unchanged prompt watched by the sequential monitor: outcomes arrive in a random
    completion order (the monitor reads them in file order), the run stops when the e-value
    crosses its threshold, else the final gate decides with alpha split. True: a false fail."""
    base = draw_run(rng, suite, suite.p, 2, "baseline", "s0")
    cand = draw_run(rng, suite, suite.p, 1, "candidate", "s0")
    monitor = SequentialMonitor(base, {c.id: c.hash for c in base.cases}, policy)
    stopped = False
    for i in rng.permutation(len(cand.cases)):
        case = cand.cases[i]
        if monitor.observe(case.id, case.score):
            stopped = True
            break
    if stopped:
        return True
    watched = cand.model_copy(update={"sequential_e_max": monitor.e_max})
    return decide(base, watched, policy).kind == "fail"


def noise_check_table(sims: int, seed: int) -> list[tuple[str, str, Count, str, bool]]:
    """Broke-more-than-noise warnings on unchanged prompts (its false-alarm rate), by R and K."""
    rng = np.random.default_rng(seed)
    policy = GatePolicy(tolerance=TOLERANCE)
    rows = []
    for r, k in ((2, 1), (2, 2), (3, 2), (5, 1)):
        c = Count()
        for _ in range(sims):
            s = make_suite(rng, N_CASES)
            base = draw_run(rng, s, s.p, r, "baseline", "s0")
            cand = draw_run(rng, s, s.p, k, "candidate", "s0")
            v = decide(base, cand, policy)
            c.add(v.noise_p is not None and v.noise_p < policy.alpha)
        rows.append(
            (
                "noise-check warning, unchanged prompt",
                f"R = {r}, K = {k}, n = 300",
                c,
                "<= 5%",
                c.hits / c.n <= 0.05,
            )
        )
        progress(f"noise check R={r} K={k}")
    return rows


# ---------------------------------------------------------------- the adaptive design


def draw_adaptive_run(
    rng: np.random.Generator, suite: Suite, p: np.ndarray, repeats: np.ndarray, label: str
) -> Run:
    """The candidate with ``repeats[i]`` calls for case i (the adaptive design's run)."""
    most = int(repeats.max())
    run = draw_run(rng, suite, p, most, "candidate", label)
    cases = [
        c.model_copy(update={"outcomes": c.outcomes[: int(k)]})
        for c, k in zip(run.cases, repeats, strict=True)
    ]
    return run.model_copy(update={"cases": cases})


ADAPTIVE_DESIGNS = [
    ("fixed K = 1", None, 1),
    ("fixed K = 2", None, 2),
    ("adaptive, u = 2", "earlier", 2),
    ("adaptive, u = 3", "earlier", 3),
    ("two-stage, u = 2", "two-stage", 2),
    ("two-stage, u = 3", "two-stage", 3),
    ("adaptive, u = 2, own baseline", "own", 2),
    ("contrast: settled passes sent twice", "passes", 2),
]


def two_stage_run(
    rng: np.random.Generator, suite: Suite, p: np.ndarray, base: Run, u: int, policy: GatePolicy
) -> tuple[Run, int]:
    """The two-stage design's candidate, chosen by the gate's own rule (gate.two_stage): every
    case once, then ``u`` runs in all of each block whose baseline and first run disagree."""
    from evalgate.app import join_stages
    from evalgate.gate.two_stage import first_stage, select

    whole = draw_run(rng, suite, p, u, "candidate", "s0")
    first = first_stage(whole)
    chosen = select(base, first, policy)
    second = whole.model_copy(
        update={
            "cases": [
                c.model_copy(update={"outcomes": c.outcomes[1:]})
                for c in whole.cases
                if c.id in chosen.cases
            ]
        }
    )
    run = join_stages(first, second, chosen.record(base, u))
    return run, len(first.cases) + (u - 1) * len(chosen.cases)


def adaptive_table(
    sims: int, seed: int, only: Sequence[str] = (), diffuse: bool = False
) -> list[tuple[str, str, Count, str, bool]]:
    """Fixed K = 1 and K = 2 candidate repeats beside the adaptive design (allocation from an
    earlier, independent baseline of R = 2; settled cases sent once, the rest ``u`` times), the
    two-stage design (every case once, then ``u`` runs of each case its baseline and first run
    disagree on) and, as contrasts, the adaptive rule fed the test's own baseline (not exact).
    Per design: the false-fail rate on unchanged prompts, power at a 4.7-point drop, candidate
    calls a PR. ``only``: these designs (by name) alone. ``diffuse``: the drop lowers every
    case's pass rate in proportion instead of breaking pass-leaning cases."""
    from evalgate.running.allocation import allocate

    rng = np.random.default_rng(seed)
    policy = GatePolicy(tolerance=TOLERANCE)
    rows = []
    for design, source, u in ADAPTIVE_DESIGNS:
        if only and design not in only:
            continue
        for drop in (0.0, 0.047):
            c = Count()
            calls = 0
            for _ in range(sims):
                s = make_suite(rng, N_CASES)
                base = draw_run(rng, s, s.p, 2, "baseline", "s0")
                if source is None or source == "two-stage":
                    k = np.full(N_CASES, u)
                elif source == "passes":
                    # Where a break shows: cases that passed every earlier repeat.
                    earlier = draw_run(rng, s, s.p, 2, "earlier", "s0")
                    k = np.array(
                        [u if all(o.score == 1.0 for o in x.outcomes) else 1 for x in earlier.cases]
                    )
                else:
                    earlier = (
                        draw_run(rng, s, s.p, 2, "earlier", "s0") if source == "earlier" else base
                    )
                    data = {x.id: [o.score for o in x.outcomes] for x in earlier.cases}
                    given = allocate(base.cases, data, u, "the earlier baseline")
                    k = np.array([given.repeats[x.id] for x in base.cases])
                if not drop:
                    cand_p = s.p
                else:
                    cand_p = with_diffuse_drop(s, drop) if diffuse else with_drop(rng, s, drop)
                if source == "two-stage":
                    cand, sent = two_stage_run(rng, s, cand_p, base, u, policy)
                    calls += sent
                else:
                    cand = draw_adaptive_run(rng, s, cand_p, k, "s0")
                    calls += int(k.sum())
                verdict = decide_pull_request([("s0", decide(base, cand, policy))]).kind
                c.add(verdict == "fail")
            per_pr = calls / sims
            measure = "false fail, unchanged prompt" if not drop else "power at a 4.7-point drop"
            rows.append(
                (
                    measure,
                    f"{design}: {per_pr:.0f} calls/PR ({100 * per_pr / (2 * N_CASES):.0f}% of K=2)",
                    c,
                    "<= 5%" if not drop else "",
                    c.hits / c.n <= 0.05 if not drop and source not in ("own", "passes") else True,
                )
            )
            progress(f"adaptive {design} drop={drop}")
    return rows


def rate_cell(c: Count) -> str:
    low, high = wilson_interval(c.hits, c.n)
    return f"{c.hits}/{c.n} = {100 * c.hits / c.n:.1f}% ({100 * low:.1f}–{100 * high:.1f})"


def pull_request_table(
    sims: int, seed: int, early_sims: int
) -> tuple[list[tuple[str, str, Count, str, bool]], float]:
    """Rows: (measure, setting, count, target, met)."""
    rng = np.random.default_rng(seed)
    policy = GatePolicy(tolerance=TOLERANCE)
    rows: list[tuple[str, str, Count, str, bool]] = []
    started = time.perf_counter()

    def row(measure: str, setting: str, c: Count, target: str, met: bool) -> None:
        rows.append((measure, setting, c, target, met))
        progress(f"{measure} {setting}")

    for suites in (1, 3, 5, 10):
        c = Count()
        for _ in range(sims):
            ss = [make_suite(rng, N_CASES) for _ in range(suites)]
            c.add(pull_request(rng, ss, [s.p for s in ss], policy) == "fail")
        row(
            "false fail, unchanged prompt",
            f"{suites} suite{'s' if suites > 1 else ''} × 300 cases",
            c,
            "<= 5%",
            c.hits / c.n <= 0.05,
        )
    for unit in ("auto", "case"):
        c = Count()
        unit_policy = policy.model_copy(update={"unit": unit})
        for _ in range(sims):
            s = make_suite(rng, 330, groups=165)
            c.add(pull_request(rng, [s], [with_scenario_churn(rng, s)], unit_policy) == "fail")
        label = "165 groups × 2 (default: groups)" if unit == "auto" else "same, unit: case"
        row(
            "false fail, scenarios broken = fixed",
            label,
            c,
            "<= 5%" if unit == "auto" else "(contrast)",
            c.hits / c.n <= 0.05 or unit == "case",
        )
    for drop in (0.03, 0.047, 0.08):
        for repeats in (2, 3, 5):
            c = Count()
            for _ in range(sims):
                s = make_suite(rng, N_CASES)
                c.add(pull_request(rng, [s], [with_drop(rng, s, drop)], policy, repeats) == "fail")
            target = ">= 80%" if (drop, repeats) == (0.047, 2) else ""
            row(
                f"power at {'an' if drop == 0.08 else 'a'} {100 * drop:g}-point drop",
                f"R = {repeats}, n = 300",
                c,
                target,
                c.hits / c.n >= 0.8 if target else True,
            )
    for n in (40, 300):
        c = Count()
        for _ in range(sims):
            s = make_suite(rng, n)
            c.add(pull_request(rng, [s], [with_drop(rng, s, TOLERANCE)], policy) == "pass")
        row("pass at the margin (drop = tolerance)", f"n = {n}", c, "<= 5%", c.hits / c.n <= 0.05)
    for n in (300, 40):
        c = Count()
        for _ in range(sims):
            s = make_suite(rng, n)
            c.add(pull_request(rng, [s], [s.p], policy) == "pass")
        target = ">= 80%" if n == 300 else "(reported)"
        row(
            "pass, unchanged prompt",
            f"n = {n}",
            c,
            target,
            c.hits / c.n >= 0.8 if n == 300 else True,
        )
    for n in (300, 1000, 3000):
        c = Count()
        for _ in range(early_sims):
            c.add(early_stop_pr(rng, make_suite(rng, n), policy))
        row("false fail with early stop", f"n = {n}", c, "<= 5%", c.hits / c.n <= 0.05)
    return rows, time.perf_counter() - started


# ---------------------------------------------------------------- the group-level test

# The skewed hard-group configuration: 150 scenario groups of 2 phrasings; half the groups are
# hard (both phrasings pass with the group's rate from U(0.05, 0.15)), half lean pass (0.97).
# The informative cases are then mostly failing ones, whose conditional scores are skewed.
HARD_GROUPS = 150
HARD_SHARE = 0.5
PAIRED_SHARE = 0.9 * 0.05  # the paired route's alpha share in a one-suite pull request


def make_hard_suite(rng: np.random.Generator, groups: int = HARD_GROUPS, size: int = 2) -> Suite:
    hard = rng.random(groups) < HARD_SHARE
    rate = np.where(hard, rng.uniform(0.05, 0.15, size=groups), 0.97)
    member = np.arange(groups * size) // size
    kind = np.where(hard[member], 1, 0)
    names = [f"g{m:03d}" for m in member]
    return Suite(p=rate[member], kind=kind, groups=names)


def _draws(rng: np.random.Generator, p: np.ndarray, repeats: int) -> np.ndarray:
    return rng.random((len(p), repeats)) < p[:, None]


def group_blocks(base: np.ndarray, cand: np.ndarray, member: np.ndarray) -> list[Block]:
    """Each group's run totals, baseline and candidate (cases x repeats summed over the cases
    ``member`` puts in it): the blocks the group-level permutation test takes."""
    units = int(member.max()) + 1
    base_totals = np.zeros((units, base.shape[1]))
    cand_totals = np.zeros((units, cand.shape[1]))
    np.add.at(base_totals, member, base)
    np.add.at(cand_totals, member, cand)
    return [(b.tolist(), c.tolist()) for b, c in zip(base_totals, cand_totals, strict=True)]


def group_p_values(
    base: np.ndarray, cand: np.ndarray, member: np.ndarray
) -> tuple[float, float, float]:
    """On one pull request's draws (cases x repeats), the paired test three ways: the exact
    group-level test (whole runs permuted within groups), the cluster-level t test of summed
    conditional scores it replaced, and the case-level exact conditional test."""
    r, k = base.shape[1], cand.shape[1]
    units = int(member.max()) + 1
    blocks = group_blocks(base, cand, member)
    sets = [(int(b.sum()), r, int(c.sum()), k) for b, c in zip(base, cand, strict=True)]
    residuals = np.zeros(units)
    np.add.at(residuals, member, conditional_residuals(sets))
    return (
        run_permutation_test_worse(blocks),
        clustered_test_worse(residuals.tolist()),
        conditional_test_worse(sets),
    )


def skewed_null_table(sims: int, seed: int) -> list[tuple[str, str, Count, str, bool]]:
    """The skewed hard-group null, at R = 2 and 3: whole pull requests through the gate (every
    route under one familywise alpha), and the paired route alone three ways on the same draws."""
    rng = np.random.default_rng(seed)
    policy = GatePolicy(tolerance=TOLERANCE)
    rows = []
    for repeats in (2, 3):
        gate, exact, t_test, by_case = Count(), Count(), Count(), Count()
        for _ in range(sims):
            s = make_hard_suite(rng)
            assert s.groups is not None
            base = draw_run(rng, s, s.p, repeats, "baseline", "s0")
            cand = draw_run(rng, s, s.p, 1, "candidate", "s0")
            gate.add(decide_pull_request([("s0", decide(base, cand, policy))]).kind == "fail")
            member = np.arange(len(s.p)) // 2
            b = np.array([[o.score == 1.0 for o in c.outcomes] for c in base.cases])
            c = np.array([[o.score == 1.0 for o in c_.outcomes] for c_ in cand.cases])
            p_exact, p_t, p_case = group_p_values(b, c, member)
            exact.add(p_exact <= PAIRED_SHARE)
            t_test.add(p_t <= PAIRED_SHARE)
            by_case.add(p_case <= PAIRED_SHARE)
        setting = f"R = {repeats}, 150 groups × 2, half hard"
        rows += [
            (
                "skewed null: the gate fails the PR",
                setting,
                gate,
                "<= 5%",
                gate.hits <= 0.05 * gate.n,
            ),
            (
                "skewed null: group-level exact route",
                setting,
                exact,
                "<= 4.5%",
                exact.hits <= PAIRED_SHARE * exact.n,
            ),
            ("skewed null: the t test it replaced", setting, t_test, "(contrast)", True),
            ("skewed null: case-level exact test", setting, by_case, "(contrast)", True),
        ]
        progress(f"skewed null R={repeats}")
    churn = Count()
    for _ in range(sims):
        s = make_suite(rng, 330, groups=165)
        churn.add(pull_request(rng, [s], [with_scenario_churn(rng, s)], policy) == "fail")
    rows.append(
        (
            "false fail, scenarios broken = fixed",
            "165 groups × 2, R = 2 (the churn PR)",
            churn,
            "(reported)",
            True,
        )
    )
    return rows


def grouped_power_table(sims: int, seed: int) -> list[tuple[str, str, Count, str, bool]]:
    """Power of the paired route at its one-suite share on grouped suites, the exact group-level
    test beside the t test it replaced, on the same draws: 300 cases in 100 groups of 3 with
    independent noise (the groups are labels: each case its own pass rate), and the same with
    a group's phrasings sharing their kind, at a 4.7-point drop; R = 2 and 3, K = 1."""
    rng = np.random.default_rng(seed)
    rows = []
    for shared in (False, True):
        for repeats in (2, 3):
            exact, t_test = Count(), Count()
            for _ in range(sims):
                s = make_suite(rng, N_CASES, groups=100 if shared else None)
                cand_p = with_drop(rng, s, 0.047)
                member = np.arange(N_CASES) % 100
                p_exact, p_t, _ = group_p_values(
                    _draws(rng, s.p, repeats), _draws(rng, cand_p, 1), member
                )
                exact.add(p_exact <= PAIRED_SHARE)
                t_test.add(p_t <= PAIRED_SHARE)
            setting = (
                f"R = {repeats}, 100 groups × 3, {'shared kinds' if shared else 'independent'}"
            )
            close = exact.hits >= t_test.hits - 0.03 * exact.n
            rows += [
                ("power at 4.7 points: group-level exact", setting, exact, "t - 3 pts", close),
                ("power at 4.7 points: the t test", setting, t_test, "(contrast)", True),
            ]
            progress(f"grouped power R={repeats}")
    return rows


# ---------------------------------------------------------------- the table


def progress(text: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write(f"\r{text:<40}")
        sys.stderr.flush()


def rate(hits: int, n: int) -> str:
    low, high = wilson_interval(hits, n)
    return f"{hits:>4}/{n:<4} {100 * hits / n:5.1f}% ({100 * low:4.1f}-{100 * high:5.1f})"


def table(rows: list[tuple[str, str, Tally]]) -> str:
    head = (
        f"{'source':<15} {'comparison':<13} {'gate fails (95% CI)':<28} "
        f"{'threshold -2 pts (95% CI)':<28} {'leave-out rule*':<28} {'noise check**':<28}"
    )
    lines = [head, "-" * len(head)]
    for source, scenario, t in rows:
        lines.append(
            f"{source:<15} {scenario:<13} {rate(t.gate, t.n):<28} {rate(t.threshold, t.n):<28} "
            f"{rate(t.leave_out, t.n):<28} {rate(t.noise_check, t.n):<28}"
        )
    return "\n".join(lines)


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gate_simulation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--sims", type=positive, default=400, metavar="N", help="simulated PRs a row (>= 400)"
    )
    parser.add_argument(
        "--early-sims", type=positive, default=400, metavar="N", help="PRs a row with early stop"
    )
    parser.add_argument(
        "--stand-in",
        type=int,
        default=0,
        metavar="N",
        help="also N end-to-end A/A and 8-point-drop comparisons through the stand-in (slow)",
    )
    parser.add_argument(
        "--noise-check",
        action="store_true",
        help="only the broke-more-than-noise check's warnings on unchanged prompts, by repeats",
    )
    parser.add_argument(
        "--groups",
        action="store_true",
        help="only the group-level test: the skewed hard-group null and power on grouped suites",
    )
    parser.add_argument(
        "--margin",
        type=positive,
        nargs="*",
        metavar="N",
        help="only passes at a true drop equal to the tolerance, under both drop models, at "
        "suites of N cases (default 40 100 300)",
    )
    parser.add_argument(
        "--power-grid",
        type=int,
        nargs="+",
        choices=sorted(GRID_DROPS),
        metavar="N",
        help="only the power the gate predicts beside simulated pull requests, over the grid "
        "of group structures, flip rates and draws at suites of N cases",
    )
    parser.add_argument(
        "--grid-structure",
        choices=GRID_STRUCTURES,
        action="append",
        metavar="S",
        help="with --power-grid, only these group structures (repeatable; default all: "
        + "; ".join(GRID_STRUCTURES)
        + ")",
    )
    parser.add_argument(
        "--known-design-effect",
        action="store_true",
        help="with --power-grid, predict with each structure's true design effect (3 for "
        "groups that move together, else 1) instead of the one each baseline measures",
    )
    parser.add_argument(
        "--halfway-when-unmeasured",
        action="store_true",
        help="with --power-grid, where no group of several cases flips, predict the mean of the "
        "powers with groups moving together and with cases independent (a rule the gate does "
        "not use: it shows what the baseline cannot tell)",
    )
    parser.add_argument(
        "--adaptive",
        action="store_true",
        help="only the adaptive design beside fixed K = 1 and K = 2 candidate repeats: false "
        "fails, power at 4.7 points and calls a PR",
    )
    parser.add_argument(
        "--design",
        action="append",
        choices=[name for name, _, _ in ADAPTIVE_DESIGNS],
        metavar="NAME",
        help="with --adaptive, only these designs (repeatable; default all: "
        + "; ".join(name for name, _, _ in ADAPTIVE_DESIGNS)
        + ")",
    )
    parser.add_argument(
        "--diffuse",
        action="store_true",
        help="with --adaptive, a diffuse drop (every case's pass rate lowered in proportion) "
        "instead of broken pass-leaning cases",
    )
    parser.add_argument("--seed", type=int, default=20250601)
    args = parser.parse_args(argv)

    if args.noise_check:
        started = time.perf_counter()
        rows = noise_check_table(args.sims, args.seed)
        seconds = time.perf_counter() - started
    elif args.power_grid:
        started = time.perf_counter()
        structures = args.grid_structure or GRID_STRUCTURES
        cells = power_grid_table(
            args.sims,
            args.seed,
            args.power_grid,
            structures,
            known=args.known_design_effect,
            halfway=args.halfway_when_unmeasured,
        )
        progress("")
        print(
            f"The paired test at its one-suite alpha share {PAIRED_SHARE:g}: power the gate "
            f"predicts (the mean over each cell's baselines) beside the share of {args.sims} "
            "simulated pull requests it fails.\n"
        )
        worst = print_power_grid(cells)
        print(f"\nlargest |predicted - simulated|: {worst:.1f} points (target <= 5)")
        print(
            "largest where the design effect was measured (cells with 200 or more such "
            f"pull requests): {measured_worst(cells):.1f} points"
        )
        for line in unfittable(cells):
            print(f"no one power for the baselines where no group flips fits both: {line}")
        print(f"\n{time.perf_counter() - started:.0f} s")
        return 0 if worst <= 5.0 else 1
    elif args.margin is not None:
        started = time.perf_counter()
        rows = margin_table(args.sims, args.seed, args.margin or (40, 100, 300))
        seconds = time.perf_counter() - started
    elif args.adaptive:
        started = time.perf_counter()
        rows = adaptive_table(args.sims, args.seed, args.design or (), args.diffuse)
        seconds = time.perf_counter() - started
    elif args.groups:
        started = time.perf_counter()
        rows = skewed_null_table(args.sims, args.seed) + grouped_power_table(args.sims, args.seed)
        seconds = time.perf_counter() - started
    else:
        rows, seconds = pull_request_table(args.sims, args.seed, args.early_sims)
    progress("")
    print(
        f"Pull-request simulation: flip rate f = {F_PR} (a heterogeneous model: 75% of cases lean "
        "pass, 15% lean fail, 10% noisy with a pass rate from U(0.2, 0.8)),\n"
        f"{100 * FORMAT_NOISE:g}% of replies lose the format at random, baseline 2 repeats "
        f"(R), candidate run once, alpha 0.05, tolerance {100 * TOLERANCE:g} points, the "
        "default policy. Counts with 95% Wilson intervals.\n"
    )
    head = f"| {'measure':<38} | {'setting':<34} | {'result (95% CI)':<30} | target | met |"
    print(head)
    print("|" + "|".join("-" * (len(part)) for part in head.split("|")[1:-1]) + "|")
    ok = True
    for measure, setting, count, target, met in rows:
        mark = (
            "yes"
            if met and target not in ("", "(contrast)", "(reported)")
            else ("NO" if not met else "")
        )
        print(
            f"| {measure:<38} | {setting:<34} | {rate_cell(count):<30} | {target:<6} | {mark:<3} |"
        )
        ok = ok and met
    print(f"\n{seconds:.0f} s")
    if args.stand_in > 0:
        cases = suite_cases()
        phi = calibrate_phi(cases, FLIP_RATE)
        aa, pr, stats = stand_in(args.stand_in, cases, phi, args.seed, GatePolicy())
        print()
        print(table([("stand-in", "A/A", aa), ("stand-in", "8-point drop", pr)]))
        ok = ok and not stats.get("errors")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
