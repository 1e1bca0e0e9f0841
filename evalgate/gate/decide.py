"""The gate's decision: paired comparison + policy -> verdict with reasons. Pure.

The steps live apart: pairing (gate.pairing), the routes and their tests (gate.routes), their
familywise settlement (gate.settle) and the verdict (gate.verdict); :func:`decide` runs them.

Pairs the candidate with the baseline case by case (dev split only; regression cases must
never fail and are judged alone; the holdout never enters a PR gate). A verdict has three
outcomes:

* ``fail``: a regression case failed, or a fail route rejected: the paired test (the candidate
  is worse), format validity, a critical category, or the noise check when it is set to fail.
  The routes of a suite, and of every suite of one pull request (:func:`decide_pull_request`),
  share one familywise alpha by weighted Holm, so an unchanged prompt fails a pull request at
  most alpha of the time however many suites and routes it has.
* ``pass``: nothing failed and the data rule out a drop of ``tolerance`` or more (a one-sided
  upper confidence bound on the drop below the margin: a non-inferiority test).
* ``inconclusive``: otherwise (not shown worse, not shown within the margin), or when the runs
  cannot be compared (another model or scorer, incomplete runs, too many unpaired cases).

The paired test for pass/fail scores is, by default, the exact conditional test over every
repeat of both runs (analysis.conditional): given a case's total passes over its R
baseline and K candidate draws, the candidate's share is hypergeometric under no change,
whatever the case's own pass rate, so no case needs to be left out as unstable and every
repeat a baseline paid for is used. With scenario groups the default unit is the group: whole
runs are permuted within each group (analysis.run_permutation), which stays exact when
phrasings of one scenario move together. Continuous scores are tested the same way over every
repeat (the run totals are sums of scores), or by Wilcoxon over matched repeats.

``test: sign`` keeps the sign test over matched repeats. Why it uses matched repeats: the sign
test is exact when, for an unchanged prompt, a case's baseline and candidate scores are
exchangeable, so each side's score is the mean over the same number of repeats, k = the
smaller repeat count. Leaving out the cases that flipped between the very repeats being
compared would keep only the settled cases, which the candidate's noise can only break (about
98% false fails at a flip rate of 10%); so a case is left out as unstable only when it flipped
between baseline repeats that the comparison does not use.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Literal

from evalgate.analysis.noise import measure_noise
from evalgate.analysis.provenance import differences
from evalgate.analysis.sequential import sequential_e_value
from evalgate.config.models import GatePolicy
from evalgate.gate.pairing import _is_binary, _Pair, _pair_cases, _paired
from evalgate.gate.routes import (
    Route,
    _binary_p,
    _design_effect,
    _format_and_category_routes,
    _noise_route,
    _paired_test,
    _route_tests,
    _unit_of,
)
from evalgate.gate.settle import _bounds, _rebound, _settle
from evalgate.gate.two_stage import first_stage, two_stage_p
from evalgate.gate.verdict import PairedCase, PowerModel, Verdict, _Findings, _rate
from evalgate.runs.resume import cases_not_run
from evalgate.runs.schema import CaseResult, Run


def decide(baseline: Run | None, candidate: Run, policy: GatePolicy) -> Verdict:
    """The verdict for a candidate run against a baseline run, with every reason.

    The suite's fail routes form one familywise family here; :func:`decide_pull_request`
    widens the family to every suite of a pull request. The steps: the candidate's own rules,
    the two runs' provenance, the pairing, the paired test with its unit, the other fail routes
    (noise, format, critical categories), and the numbers that report the comparison.
    """
    found = _Findings()
    regression_failures = _candidate_rules(candidate, found)
    full = candidate
    if candidate.stage_one is not None:
        # gate.repeats: two-stage: every route but the paired test reads the first stage, one
        # run a case sent before anything was seen; the paired test reads both (gate.two_stage).
        candidate = first_stage(candidate)
    dev = [c for c in candidate.cases if c.split == "dev"]
    numbers = _empty_numbers(policy, dev)

    def result() -> Verdict:
        draft = Verdict(
            kind="inconclusive",
            reasons=[],
            warnings=found.warnings,
            baseline_run=baseline.name if baseline else None,
            candidate_run=candidate.name,
            regression_failures=regression_failures,
            errored=sorted(c.id for c in full.cases if c.error is not None),
            rule_failures=found.rule_failures,
            mismatch=found.mismatch,
            blockers=found.blockers,
            notes=found.notes,
            **numbers,
        )
        return _settle(draft, [r.weight for r in draft.routes])

    if baseline is None:
        found.blockers.insert(0, "no usable baseline: there is nothing to compare against")
        return result()
    _provenance(baseline, candidate, found)
    binary = _is_binary([baseline, candidate])
    conditional = binary and policy.test == "conditional"
    # The sign test and Wilcoxon need each side's score over the same number of repeats.
    matched = policy.test == "sign" if binary else policy.continuous_test == "wilcoxon"
    noise = measure_noise(baseline, policy)
    if noise is None:
        found.warnings.append(
            "the baseline has no repeats, so the noise floor is not measured: the MDE assumes "
            "a noise-free model; make baselines with "
            + _repeats_of(baseline, max(2, policy.baseline_repeats))
        )
    pairing = _pair_cases(baseline, dev, policy, matched, found)
    pairs = pairing.pairs
    unit, groups, n_units = _unit_of(pairs, policy, found)
    r = max((p.kb for p in pairs), default=1)
    k = max((p.kc for p in pairs), default=1)
    if candidate.allocation is not None:
        # Adaptive repeats: most cases were sent once; the power model must not assume more.
        k = min((p.kc for p in pairs), default=1)
    p_value, test = _paired_test(pairs, policy, binary, unit, n_units, (r, k), candidate)
    if full.stage_one is not None:
        p_value, test = _both_stages(
            baseline, full, pairs, policy, unit, conditional, found, (p_value, test)
        )
    if conditional and unit == "group":
        numbers["case_level_p"] = _binary_p(pairs, "score", policy, "case")
    broken = [_paired(p.base, p.cand, p) for p in pairs if p.diff < 0]
    fixed = [_paired(p.base, p.cand, p) for p in pairs if p.diff > 0]
    routes: list[Route] = [
        (
            "paired",
            p_value,
            f"significantly worse: broke {len(broken)}, fixed {len(fixed)} ({test})",
        )
    ]
    noise_p = _noise_route(pairs, noise, policy, routes, found)
    if candidate.calls_saved:
        e_value = sequential_e_value(len(broken), len(fixed))
        found.notes.append(
            f"the sequential test's e-value crossed its threshold, so the run stopped early and "
            f"saved {candidate.calls_saved} calls (largest e = "
            f"{candidate.sequential_e_max or e_value:.3g})"
        )
    numbers.update(_format_and_category_routes(pairs, policy, unit, routes))
    numbers.update(
        test=test,
        unit=unit,
        n_tested=n_units,
        broken=broken,
        fixed=fixed,
        unchanged=len(pairs) - len(broken) - len(fixed),
        unstable=pairing.unstable,
        edited=pairing.edited,
        only_candidate=pairing.only_candidate,
        only_baseline=pairing.only_baseline,
        p_value=p_value,
        noise_p=noise_p,
        noise=noise,
        routes=_route_tests(routes, policy),
        baseline_accuracy=_rate([p.base_score for p in pairs]),
        # No pair, no power: the MDE at n = 0 would read "100.0 points".
        power_model=None
        if not pairs
        else PowerModel(
            n=n_units,
            cases=len(pairs),
            design_effect=_design_effect(pairs, unit, groups),
            flip_rate=noise.flip_rate if noise else 0.0,
            baseline_draws=r if conditional else 1,
            candidate_draws=k if conditional else 1,
            power=policy.power,
            tolerance=policy.tolerance,
        ),
    )
    if pairs:
        numbers.update(_bounds(pairs, binary, unit, groups, policy))
        numbers["rebound"] = partial(_rebound, pairs, binary, unit, groups, policy)
    else:
        found.blockers.append("no case could be paired with the baseline")
    return result()


def _both_stages(
    baseline: Run,
    full: Run,
    pairs: Sequence[_Pair],
    policy: GatePolicy,
    unit: Literal["case", "group"],
    conditional: bool,
    found: _Findings,
    first: tuple[float, str],
) -> tuple[float, str]:
    """The paired test over both stages of a two-stage candidate, or (saying why) over the
    first stage alone, which is exact whatever the second stage did."""
    if not conditional:
        found.warnings.append(
            "two-stage repeats serve the exact conditional test of pass/fail scores: this "
            "suite's paired test read the candidate's first stage alone"
        )
        return first
    p_value, line = two_stage_p(baseline, full, pairs, policy, unit)
    if p_value is None:
        found.warnings.append(f"{line}: the paired test read the candidate's first stage alone")
        return first
    return p_value, f"{first[1]}; {line}"


# How another harness's results get repeats (a results file's backend is its harness).
_HARNESS_REPEATS = {
    "promptfoo": "`promptfoo eval --repeat {n}`",
    "inspect": "`inspect eval --epochs {n}`",
    "junit": "each test run {n} times into one report",
}


def _repeats_of(run: Run, n: int) -> str:
    """How ``run``'s maker gives each case ``n`` repeats."""
    return _HARNESS_REPEATS.get(run.model.backend, "--repeats {n}").format(n=n)


def _candidate_rules(candidate: Run, found: _Findings) -> list[PairedCase]:
    """What the candidate fails on its own: regression cases, and an incomplete run."""
    regression = [c for c in candidate.cases if c.split == "regression"]
    failures = [_paired(None, c) for c in regression if c.passed is False]
    for failure in failures:
        found.rule_failures.append(
            f"regression case {failure.id} failed (expected {failure.expected}, answered "
            f"{failure.candidate_answer}); regression cases must never fail"
        )
    if candidate.budget_stop is not None:
        found.blockers.append(
            f"the candidate run is incomplete: {candidate.budget_stop}; raise the budget and "
            "resume it with `evalgate run VERSION --resume RUN`"
        )
    elif candidate.interrupted and candidate.model.backend == "inspect":
        found.blockers.append(
            f"the candidate is the log of an Inspect run that did not finish (cancelled or "
            f"failed; {len(candidate.cases)} samples logged); finish it with "
            "`inspect eval-retry LOG`, then gate its log"
        )
    elif candidate.interrupted:
        found.blockers.append(
            f"the candidate run is incomplete: it was interrupted with "
            f"{cases_not_run(candidate)} of {len(candidate.cases)} cases not run; resume it "
            "with `evalgate run VERSION --resume RUN`"
        )
    elif candidate.incomplete:
        found.blockers.append(
            f"the candidate run is incomplete: {candidate.errors} of {len(candidate.cases)} "
            "cases errored; re-run it"
        )
    return failures


def _empty_numbers(policy: GatePolicy, dev: Sequence[CaseResult]) -> dict[str, object]:
    """The verdict's numbers before anything is compared (what a verdict without a baseline
    reports)."""
    return dict(
        test="none",
        unit="group" if policy.unit == "group" else "case",
        n_tested=0,
        broken=[],
        fixed=[],
        unchanged=0,
        unstable=[],
        edited=[],
        only_candidate=[],
        only_baseline=[],
        p_value=None,
        noise_p=None,
        noise=None,
        mde=None,
        cases_needed=None,
        format_broken=0,
        format_fixed=0,
        format_p=None,
        categories=[],
        baseline_accuracy=None,
        candidate_accuracy=_rate([c.score or 0.0 for c in dev if c.error is None]),
        difference=None,
        alpha=policy.alpha,
        routes=[],
        family_tests=0,
        drop_bound=None,
        bound_method=None,
        tolerance=policy.tolerance,
        cases_to_decide=None,
        power_model=None,
    )


def _part_of_suite(run: Run) -> str | None:
    """How a run covers only part of its suite (``--limit N``, one shard), or None."""
    if run.shard is not None:
        return f"shard {run.shard}, {len(run.cases)} cases"
    if run.limited_to is not None:
        return f"--limit {run.limited_to}"
    return None


def _provenance(baseline: Run, candidate: Run, found: _Findings) -> None:
    """What makes the two runs incomparable (another model, another scorer) or unusable."""
    d = differences(baseline, candidate)
    if d.model is not None:
        found.mismatch.append(
            f"baseline and candidate used different models ({d.model[0]} vs {d.model[1]})"
        )
    if d.scorer_changed:
        found.mismatch.append(
            "baseline and candidate were scored differently (scorer config changed)"
        )
    if baseline.suite != candidate.suite:
        found.warnings.append(
            f"the baseline is a run of suite {baseline.suite!r} and the candidate of suite "
            f"{candidate.suite!r}: their cases are paired by id as given"
        )
    for side, run in (("candidate", candidate), ("baseline", baseline)):
        part = _part_of_suite(run)
        if part is not None:
            # A verdict on a slice is not one on the suite: the rest was never run.
            found.blockers.append(
                f"the {side} ran part of the suite ({part}): only the cases both ran are "
                f"compared; run it whole (or merge its shards with `evalgate merge`) for a "
                "verdict on the suite"
            )
    if d.tools_changed:
        # Like a prompt edit, a change of what answers the agent's calls is what is gated.
        found.warnings.append(
            "the candidate's tools differ from the baseline's (tools:, agent: or the files the "
            "tool command runs): the verdict gates that change together with the prompt's"
        )
    if "A" in d.incomplete:
        missing = cases_not_run(baseline)
        found.blockers.append(
            f"the baseline run is incomplete ({missing} of {len(baseline.cases)} cases not run)"
            if missing
            else f"the baseline run is incomplete ({baseline.errors} of {len(baseline.cases)} "
            "errored)"
        )
