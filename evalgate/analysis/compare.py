"""Pairing two runs case by case: fixed, broken, right in both, wrong in both. Pure."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from evalgate.analysis.provenance import differences
from evalgate.analysis.sign_test import sign_test_two_sided
from evalgate.runs.schema import CaseResult, Run
from evalgate.trajectory import expected_label


class PairRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    category: str | None
    expected: str
    a_answer: str
    b_answer: str
    message: str


class Comparison(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    a: str
    b: str
    a_prompt: str
    b_prompt: str
    paired: int
    fixed: list[PairRow]
    broken: list[PairRow]
    both_right: int
    both_wrong: list[PairRow]
    only_a: list[str]
    only_b: list[str]
    edited: list[str]
    errored: list[str]
    p_value: float
    reading: str
    warnings: list[str]


def _row(a: CaseResult, b: CaseResult) -> PairRow:
    return PairRow(
        id=a.id,
        category=b.category,
        expected=expected_label(b.expected),
        a_answer=a.answered(),
        b_answer=b.answered(),
        message=b.message() or a.message(),
    )


def provenance_warnings(a: Run, b: Run) -> list[str]:
    """What differs between two runs besides the prompt, each with what to do about it."""
    d = differences(a, b)
    warnings = []
    if d.prompt_edited is not None:
        warnings.append(
            f"both runs are of prompt {a.prompt.name!r} but its text differs "
            f"({d.prompt_edited[0][:12]} vs {d.prompt_edited[1][:12]}): the file was edited "
            "between the runs; name versions apart to compare them"
        )
    if d.cases_changed:
        warnings.append(
            "the case files differ between the runs"
            + (f" ({', '.join(d.case_files)})" if d.case_files else "")
            + ": only cases with the same id and content are paired"
        )
    if d.model is not None:
        warnings.append(
            f"the runs used different models ({d.model[0]} vs {d.model[1]}): differences mix "
            "prompt and model"
        )
    elif d.settings_changed:
        warnings.append(
            "the runs used different model settings: differences mix prompt and settings"
        )
    if d.scorer_changed:
        warnings.append("the runs were scored differently: compare runs made with one scorer")
    if d.tools_changed:
        warnings.append(
            "the runs' tools differ (tools:, agent: or the files the tool command runs): "
            "differences mix prompt and tools"
        )
    for run, side in ((a, "A"), (b, "B")):
        if side in d.incomplete:
            warnings.append(
                f"run {side} is incomplete ({run.errors} of {len(run.cases)} cases errored"
                + (", interrupted" if run.interrupted else "")
                + "): re-run it before trusting the comparison"
            )
    return warnings


def read_sign_test(fixed: int, broken: int, p: float) -> str:
    """The sign test in plain words."""
    changed = fixed + broken
    if changed == 0:
        return "No paired case changed outcome: the two runs agree on every case both scored."
    lead = f"B fixed {fixed} and broke {broken} of the {changed} cases that changed."
    if p < 0.05:
        side = "better" if fixed > broken else "worse"
        return (
            f"{lead} A split at least this lopsided would happen by chance with probability "
            f"p = {p:.2g} if the two were equally good (exact two-sided sign test): "
            f"B is {side} on these cases."
        )
    return (
        f"{lead} A split like this happens by chance with probability p = {p:.2g} even if "
        "the two were equally good (exact two-sided sign test): the data cannot tell them apart."
    )


def compare_runs(a: Run, b: Run) -> Comparison:
    a_cases, b_cases = a.by_id(), b.by_id()
    fixed, broken, both_wrong, edited, errored = [], [], [], [], []
    both_right = 0
    for case_id, ca in a_cases.items():
        cb = b_cases.get(case_id)
        if cb is None:
            continue
        if ca.hash != cb.hash:
            edited.append(case_id)
            continue
        if ca.error is not None or cb.error is not None:
            errored.append(case_id)
            continue
        if ca.passed and cb.passed:
            both_right += 1
        elif ca.passed:
            broken.append(_row(ca, cb))
        elif cb.passed:
            fixed.append(_row(ca, cb))
        else:
            both_wrong.append(_row(ca, cb))
    p = sign_test_two_sided(len(fixed), len(broken))
    return Comparison(
        a=a.name,
        b=b.name,
        a_prompt=a.prompt.name,
        b_prompt=b.prompt.name,
        paired=len(fixed) + len(broken) + both_right + len(both_wrong),
        fixed=fixed,
        broken=broken,
        both_right=both_right,
        both_wrong=both_wrong,
        only_a=sorted(set(a_cases) - set(b_cases)),
        only_b=sorted(set(b_cases) - set(a_cases)),
        edited=edited,
        errored=errored,
        p_value=p,
        reading=read_sign_test(len(fixed), len(broken), p),
        warnings=provenance_warnings(a, b),
    )
