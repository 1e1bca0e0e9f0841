"""Human labels for the judge: reading them (JSONL or YAML, file:line errors) and their split.

A label is a case (its id, input fields, reference answer, group, split: mapped by the suite's
``fields:`` like case files), the ``reply`` a person graded, and that person's verdict. Labels
are split dev / holdout by the same salted group hash as cases, with the judge's own salt and
fraction, so tuning a rubric on the dev labels never sees the holdout ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from evalgate.cases.read import Case, add_unique, hash_cases, parse_case, read_records, record_hash
from evalgate.cases.split import LEAK_KINDS, assign_all, check_split
from evalgate.config.models import Fields, JudgeCalibration, SplitPolicy, Suite
from evalgate.errors import CaseFileError

PASS_WORDS = {"pass": True, "passed": True, "fail": False, "failed": False}


class Label(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    case: Case
    reply: str
    human: bool
    # The person's score, when they gave one instead of pass / fail.
    human_score: float | None = None

    @property
    def id(self) -> str:
        return self.case.id

    @property
    def split(self) -> str:
        return self.case.split or "dev"


def split_policy(judge: JudgeCalibration, suite: Suite) -> SplitPolicy:
    """The labels' split: the cases' policy with the judge's own salt and fraction."""
    return suite.split.model_copy(
        update={"salt": judge.salt, "holdout_fraction": judge.holdout_fraction}
    )


def _verdict(value: Any, judge: JudgeCalibration, where: str) -> tuple[bool, float | None]:
    if isinstance(value, bool):
        return value, None
    if isinstance(value, int | float):
        if not 0.0 <= value <= 1.0:
            raise CaseFileError(
                f"field {judge.human_field!r} is {value!r}, outside [0, 1]", where=where
            )
        return value >= judge.human_threshold, float(value)
    if isinstance(value, str) and value.strip().lower() in PASS_WORDS:
        return PASS_WORDS[value.strip().lower()], None
    raise CaseFileError(
        f"field {judge.human_field!r} is {value!r}",
        where=where,
        fix="write pass or fail, true or false, or a score in [0, 1]",
    )


def parse_label(record: Any, judge: JudgeCalibration, fields: Fields, where: str) -> Label:
    if not isinstance(record, dict):
        raise CaseFileError(
            f"a label must be an object, found {type(record).__name__}", where=where
        )
    for name, what in ((judge.reply_field, "reply"), (judge.human_field, "human verdict")):
        if name not in record:
            raise CaseFileError(
                f"missing {what} field {name!r}",
                where=where,
                fix=f"add it, or name another field with judge.{what.split()[0]}_field",
            )
    reply = record[judge.reply_field]
    if not isinstance(reply, str):
        raise CaseFileError(
            f"field {judge.reply_field!r} must be the reply's text, found {type(reply).__name__}",
            where=where,
        )
    human, score = _verdict(record[judge.human_field], judge, where)
    rest = {k: v for k, v in record.items() if k not in (judge.reply_field, judge.human_field)}
    case = parse_case(rest, fields, where, need_expected=False)
    if case.split == "regression":
        raise CaseFileError(
            f"label {case.id!r} has split 'regression'",
            where=where,
            fix="labels are dev or holdout",
        )
    # An edited reply or verdict is an edited label: the hash covers the whole record except
    # where it is kept (its split), as a case's does.
    kept = {k: v for k, v in record.items() if k != fields.split}
    return Label(
        case=case.model_copy(update={"hash": record_hash(kept)}),
        reply=reply,
        human=human,
        human_score=score,
    )


def load_labels(path: Path, suite: Suite) -> list[Label]:
    """Every label of the file, each with its split assigned."""
    judge = suite.judge
    assert judge is not None
    labels: list[Label] = []
    cases: list[Case] = []
    seen: dict[str, str] = {}
    for line, record in read_records(path):
        label = parse_label(record, judge, suite.fields, f"{path}:{line}")
        add_unique(label.case, cases, seen)
        labels.append(label)
    assigned = assign_all(cases, split_policy(judge, suite))
    return [
        label.model_copy(update={"case": case})
        for label, case in zip(labels, assigned, strict=True)
    ]


def labels_sha(labels: Sequence[Label], split: str | None = None) -> str:
    """One hash for the labels (of one split): changes when any is added, removed or edited."""
    return hash_cases(x.case for x in labels if split is None or x.split == split)


def leak_warnings(labels: Sequence[Label], suite: Suite) -> list[str]:
    """Dev and holdout labels that share a group or an input: tuning on dev would see them."""
    assert suite.judge is not None
    report = check_split([x.case for x in labels], split_policy(suite.judge, suite), suite.fields)
    # Counts and advice only: the findings' ids would name holdout labels.
    return [f"labels: {f.message}" for f in report.findings if f.kind in LEAK_KINDS]
