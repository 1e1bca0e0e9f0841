"""Audit mode: a searched prompt on the holdout, reported in the job summary only."""

from __future__ import annotations

from evalgate.action.inputs import output_number
from evalgate.action.job import ActionJob
from evalgate.action.ledger import pull_ledger, push_ledger
from evalgate.analysis.audit import audit
from evalgate.app import (
    RunOptions,
    run_version,
)
from evalgate.config.load import LoadedConfig
from evalgate.config.models import Suite
from evalgate.errors import UserError
from evalgate.report.render import render


def run_audit(runner: ActionJob, loaded: LoadedConfig, name: str, suite: Suite) -> None:
    """Audit a searched prompt on the holdout; the report goes to the job summary only."""
    inputs = runner.inputs
    if not inputs.candidate or not inputs.baseline_version:
        raise UserError(
            "audit mode needs the candidate and baseline_version inputs",
            fix="run it from workflow_dispatch with both set",
        )
    if suite.sealed_holdout is not None and not inputs.holdout_key.get_secret_value():
        raise UserError(
            "audit mode reads the sealed holdout and has no holdout_key",
            fix="run the audit job in the protected environment that holds the key",
        )
    holdout_only = frozenset({"holdout"})
    pulled = pull_ledger(runner, loaded, name) if runner.repo is not None else None
    runs = [
        run_version(
            runner.world(),
            loaded,
            name,
            version,
            RunOptions(cache=True, splits=holdout_only, purpose="audit"),
        )
        for version in (inputs.candidate, inputs.baseline_version)
    ]
    if runner.repo is not None:
        push_ledger(runner, loaded, name, pulled, f"evalgate: holdout read by an audit of {name}")
    report = audit(
        runs[0],
        runs[1],
        fitted_score=inputs.fitted_score,
        searched=inputs.searched,
        tuning_cases=inputs.tuning_cases,
        alpha=suite.gate.alpha,
        seed=suite.gate.seed,
    )
    runner.add_summary(render("audit.md.j2", s=report))
    runner.outputs.set("accuracy", output_number(report.candidate_holdout.rate))
    runner.outputs.set("baseline_accuracy", output_number(report.baseline_holdout.rate))
    runner.verdicts.append("pass")
