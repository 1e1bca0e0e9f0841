"""What every importer shares: a case as read (a draft), notes on what did not map, the choice of
the suite's one scorer, stable ids, and the evalgate records that come out.

A format's reader turns a file into drafts; ``finish`` turns drafts into records for one scorer.
The ``import`` command and ``cases_format`` in evalgate.yml both go through ``finish``, so a file
read directly loads the same cases as its converted copy.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from evalgate.cases.read import field_names
from evalgate.errors import CaseFileError

# evalgate's scorer kinds an assertion can map onto, in the order that breaks a tie between
# equally common kinds (offline, deterministic scorers first).
FAMILIES = (
    "exact",
    "label",
    "contains",
    "regex",
    "json_schema",
    "judge",
    "tool_sequence",
    "tool_used",
    "tool_not_used",
)
# Scorers of an agent's trajectory; a source whose cases check several of them is scored by an
# all_of of those, each case's expected answer an object keyed by kind.
TRAJECTORY = ("tool_sequence", "tool_used", "tool_not_used")
# What a member of that all_of expects of a case that checks nothing of its kind: nothing,
# so the member passes (an empty sequence is a subset of any calls).
NOTHING_EXPECTED: dict[str, Any] = {
    "tool_sequence": {"tool_sequence": [], "match": "subset"},
    "tool_used": [],
    "tool_not_used": [],
}
# A check of the "label" family is one field of an expected JSON object (``field`` names it):
# a label scorer with that ``field`` checks it.
LABEL = "label"
# A check of the "answer" family (an ideal, a target, an expected output) fits every scorer.
ANSWER = "answer"
RESERVED = ("id", "expected", "group", "category", "split")
SPLIT_NAMES = {
    "dev": "dev",
    "development": "dev",
    "train": "dev",
    "training": "dev",
    "validation": "dev",
    "valid": "dev",
    "val": "dev",
    "test": "holdout",
    "holdout": "holdout",
    "held-out": "holdout",
    "heldout": "holdout",
    "regression": "regression",
}
JUDGE_RUBRIC = (
    "The reply meets every criterion given as the reference. Score 1 when it meets them all, "
    "0 when it misses one."
)
ANSWER_RUBRIC = (
    "The reply gives the reference answer (the wording may differ). Score 1 when it does, "
    "0 when it contradicts the reference or leaves it out."
)
DEFAULT_JUDGE_MODEL = {"backend": "anthropic", "name": "claude-sonnet-4-5", "max_tokens": 256}
PYTHON_FUNCTION = "scorers:check"
SHOWN_LOCATIONS = 3


@dataclass(frozen=True)
class Check:
    """One thing the source says about a good reply: an assertion, an ideal, a target."""

    # The source's own name for it (icontains, llm-rubric, ideal, target, expectedOutput).
    kind: str
    # The evalgate scorer kind it maps onto, ANSWER for a reference answer, None for nothing.
    family: str | None
    value: Any = None
    case_sensitive: bool = True
    # The assertion as written (for a python scorer, which gets them all).
    raw: Any = None
    # For the label family: the field of the reply's JSON object this check expects.
    field: str | None = None


@dataclass
class Draft:
    """One case as read from the foreign file, before a scorer is chosen."""

    where: str
    source_id: str | None
    inputs: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    group: Any = None
    category: Any = None
    split: Any = None
    # Kept in the case record, never sent to the model (description, metadata, history).
    extra: dict[str, Any] = field(default_factory=dict)
    # What a made-up id is a hash of (default: the inputs): the case's own content, so that
    # adding, moving or editing other cases, or shared defaults, renumbers nothing.
    identity: Any = None
    # Why the case is kept out of scoring although it has a check: its input lost what the
    # source sends with it (an image), so a score would be of a question no model was asked.
    withheld: str | None = None


class Note(BaseModel):
    """Something that did not map (or mapped only partly): how often, where, what to do."""

    model_config = ConfigDict(extra="forbid")

    what: str
    count: int
    fix: str
    at: list[str]


class Mapped(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    to: str
    count: int


class Unscored(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    where: str
    reason: str


class Notes:
    """Counts of what mapped and what did not, in the order first seen."""

    def __init__(self) -> None:
        self.unmapped: dict[str, Note] = {}
        self.mapped: dict[tuple[str, str], int] = {}

    def add(self, what: str, fix: str, where: str | None = None, count: int = 1) -> None:
        note = self.unmapped.setdefault(what, Note(what=what, count=0, fix=fix, at=[]))
        note.count += count
        if where is not None and len(note.at) < SHOWN_LOCATIONS:
            note.at.append(where)

    def map(self, source: str, to: str, count: int = 1) -> None:
        self.mapped[(source, to)] = self.mapped.get((source, to), 0) + count

    def mapped_list(self) -> list[Mapped]:
        return [Mapped(source=s, to=t, count=n) for (s, t), n in self.mapped.items()]


@dataclass
class Source:
    """What a format's reader found in one file."""

    format: str
    path: Path
    # What the source calls a case, for the summary: tests, samples, items.
    noun: str
    drafts: list[Draft]
    notes: Notes
    # Every file read (the file itself and any it refers to), for hashes and PR dependencies.
    files: list[Path]
    # Records read, including those skipped (archived items).
    read: int
    # Prefix of ids made from a hash of the content.
    id_prefix: str
    # Advice for the config: the system prompt to write, the model the source used.
    hints: list[str] = field(default_factory=list)
    model: dict[str, Any] | None = None
    # The source's own user turn (promptfoo's prompt), a jinja2 template of the inputs' names.
    user_turn: str | None = None


@dataclass(frozen=True)
class Plan:
    """The suite's one scorer, as evalgate.yml spells it."""

    kind: str
    config: dict[str, Any]

    @property
    def family(self) -> str:
        # A label scorer compares with an expected label, as an exact match does.
        return "exact" if self.kind == "label" else self.kind

    @property
    def members(self) -> list[str]:
        """The kinds an all_of plan composes (the plan's own kind otherwise)."""
        if self.kind == "all_of":
            return [str(m["kind"]) for m in self.config.get("scorers", [])]
        return [self.family]

    @property
    def case_sensitive(self) -> bool:
        if self.kind == "regex":
            return not self.config.get("ignore_case", True)
        return bool(self.config.get("case_sensitive", False))


@dataclass
class Conversion:
    """Evalgate case records made from one foreign file, and the report of what mapped."""

    source: Source
    plan: Plan
    # (file:line, record): the cases the plan's scorer checks as the source meant.
    records: list[tuple[str, dict[str, Any]]]
    # Cases no check of the plan's kind covers: expected null, kept apart, listed.
    unscored: list[tuple[str, dict[str, Any]]]
    unscored_list: list[Unscored]
    inputs: list[str]

    @property
    def notes(self) -> Notes:
        return self.source.notes


# ------------------------------------------------------------------------------------------
# Datasets with their own field names
# ------------------------------------------------------------------------------------------

# The format's own field names that `evalgate import --input-field ...` can point elsewhere.
FIELD_OPTIONS = {
    "input": "--input-field",
    "target": "--target-field",
    "ideal": "--target-field",
    "id": "--id-field",
    "choices": "--choices-field",
}


def found_fields(record: Any) -> str:
    """`` (fields found: ...)`` for an error about a record of the wrong fields."""
    if not isinstance(record, dict):
        return f" (found {type(record).__name__})"
    return f" (fields found: {field_names(record)})"


def own_names(example: str, *standard: str) -> str:
    """What to do when a record lacks the format's fields: write them as ``example``, or, when
    the dataset names them its own way, map them (the import's flags, the config's key)."""
    flags = " ".join(f"{FIELD_OPTIONS.get(s, s)} NAME" for s in standard)
    keys = ", ".join(f"{s}: NAME" for s in standard)
    return (
        f"write {example}; or, if the fields are there under names of their own, map them: "
        f"`evalgate import ... {flags}`, or cases_format_fields: {{{keys}}} in evalgate.yml"
    )


def rename_fields(
    records: list[tuple[int, Any]], rename: dict[str, str], path: Path, notes: Notes
) -> list[tuple[int, Any]]:
    """Records with the dataset's own field names (``rename``: the format's name -> the
    dataset's) moved to the format's, as an Inspect FieldSpec does."""
    if not rename:
        return records
    for standard, own in rename.items():
        if not any(isinstance(r, dict) and own in r for _, r in records):
            first = next((r for _, r in records if isinstance(r, dict)), {})
            raise CaseFileError(
                f"{FIELD_OPTIONS.get(standard, standard)} {own}: no record has a field {own!r}",
                where=str(path),
                fix=f"the first record's fields: {', '.join(map(str, first)) or 'none'}",
            )
    out = []
    for line, record in records:
        if isinstance(record, dict):
            moved = {k: v for k, v in record.items() if k not in rename.values()}
            for standard, own in rename.items():
                if standard in moved and standard != own:
                    notes.add(
                        f"field {standard!r} replaced by {own!r}",
                        f"{FIELD_OPTIONS.get(standard, standard)} {own} takes its place",
                        f"{path}:{line}",
                    )
                if own in record:
                    moved[standard] = record[own]
                    notes.map(own, f"{standard} ({FIELD_OPTIONS.get(standard, standard)})")
            record = moved
        out.append((line, record))
    return out


# ------------------------------------------------------------------------------------------
# Choosing the scorer
# ------------------------------------------------------------------------------------------


def _answers(check: Check) -> list[Any]:
    value = check.value
    return list(value) if isinstance(value, list) else [value]


def _answer_kind(drafts: list[Draft]) -> str:
    """The scorer that fits reference answers: contains; regex for any-of lists; a judge for
    answers that are objects rather than text."""
    answers = [c for d in drafts for c in d.checks if c.family == ANSWER]
    if any(not isinstance(a, str) for c in answers for a in _answers(c)):
        return "judge"
    if any(len(_answers(c)) > 1 for c in answers):
        return "regex"
    return "contains"


def choose(source: Source, kind: str | None = None) -> Plan:
    """The scorer for the suite: ``kind`` when given, else the kind most cases can be scored by."""
    drafts = source.drafts
    if kind is None:
        votes: Counter[str] = Counter()
        for draft in drafts:
            families = {c.family for c in draft.checks if c.family is not None}
            if ANSWER in families:
                families = (families - {ANSWER}) | {_answer_kind(drafts)}
            votes.update(families)
        if votes:
            best = max(votes.values())
            kind = next(f for f in FAMILIES if votes[f] == best)
        else:
            kind = "python"
    if kind in (*TRAJECTORY, "all_of"):
        present = [f for f in TRAJECTORY if any(c.family == f for d in drafts for c in d.checks)]
        if kind == "all_of" or len(present) > 1:
            if not present:
                raise CaseFileError(
                    "no trajectory assertion to compose with all_of", where=str(source.path)
                )
            return Plan("all_of", {"kind": "all_of", "scorers": [{"kind": f} for f in present]})
    relevant = [c for d in drafts for c in d.checks if c.family in (kind, ANSWER)]
    sensitive = all(c.case_sensitive for c in relevant) if relevant else False
    if kind == LABEL:
        fields = Counter(str(c.field) for c in relevant if c.family == LABEL)
        if fields:
            # The field most cases expect; the others are reported, each a suite of its own.
            field_name = max(fields, key=lambda f: (fields[f], -list(fields).index(f)))
            return Plan(kind, {"kind": "label", "field": field_name})
        return Plan(kind, {"kind": "label"})
    if kind in ("exact", "contains"):
        return Plan(kind, {"kind": kind, "case_sensitive": sensitive})
    if kind == "regex":
        return Plan(kind, {"kind": "regex", "ignore_case": not sensitive})
    if kind == "json_schema":
        schemas = Counter(_schema_key(c.value) for c in relevant if c.family == "json_schema")
        schema = json.loads(schemas.most_common(1)[0][0]) if schemas else {}
        return Plan(kind, {"kind": "json_schema", "schema": schema})
    if kind == "judge":
        answers = any(c.family == ANSWER for c in relevant)
        rubric = ANSWER_RUBRIC if answers else JUDGE_RUBRIC
        return Plan(kind, {"kind": "judge", "rubric": rubric, "model": dict(DEFAULT_JUDGE_MODEL)})
    if kind == "python":
        return Plan(kind, {"kind": "python", "function": PYTHON_FUNCTION})
    return Plan(kind, {"kind": kind})


def plan_from_config(scorer: Any) -> Plan:
    """The plan of a scorer already configured in evalgate.yml (reading a foreign file directly)."""
    config = scorer.model_dump(mode="json", by_alias=True, exclude_none=True)
    return Plan(str(config["kind"]), config)


def _schema_key(schema: Any) -> str:
    return json.dumps(schema if schema is not None else {}, sort_keys=True)


# ------------------------------------------------------------------------------------------
# Expected answers under a plan
# ------------------------------------------------------------------------------------------

NOT_CHECKED_FIX = (
    "this suite has one scorer, {kind}; to check these too, put them in a second suite whose "
    "scorer is {family}"
)


def _expected(draft: Draft, plan: Plan, notes: Notes) -> tuple[bool, Any, str]:
    """(scored, expected, reason): the expected answer of a draft under the plan."""
    family = plan.family
    if plan.kind == "python":
        if not draft.checks:
            return False, None, "no assertion"
        written = [c.raw if c.raw is not None else c.value for c in draft.checks]
        answers = [c for c in draft.checks if c.family == ANSWER]
        if len(answers) == len(draft.checks) == 1:
            given = _answers(answers[0])
            return True, given[0] if len(given) == 1 else given, ""
        return True, written, ""
    if plan.kind == "all_of":
        expected: dict[str, Any] = {}
        for member in plan.members:
            scored, value, _ = _expected(draft, Plan(member, {"kind": member}), notes)
            if scored:
                expected[member] = value
        if not expected:
            kinds = sorted({c.kind for c in draft.checks})
            members = " / ".join(plan.members)
            return False, None, f"no {members} check (has {', '.join(kinds) or 'none'})"
        return True, {m: expected.get(m, NOTHING_EXPECTED.get(m)) for m in plan.members}, ""
    answers = [c for c in draft.checks if c.family == ANSWER]
    if answers:
        return True, _answer_expected(_answers(answers[0]), plan, draft.where, notes), ""
    fields = [c for c in draft.checks if c.family == LABEL]
    if plan.kind == LABEL and fields:
        wanted = plan.config.get("field")
        mine = [c for c in fields if c.field == wanted]
        if mine:
            return True, mine[0].value, ""
        names = ", ".join(str(c.field) for c in fields)
        return False, None, f"no expected {wanted!r} (has {names})"
    if plan.kind == "judge" and fields and len(fields) == len(draft.checks):
        # A judge grades against the whole expected object, as the source wrote it.
        return True, {str(c.field): c.value for c in fields}, ""
    own = [c for c in draft.checks if c.family == family]
    if not own:
        kinds = sorted({c.kind for c in draft.checks})
        reason = f"no {family} check (has {', '.join(kinds)})" if kinds else "no assertion"
        return False, None, reason
    if family in ("contains", "tool_used", "tool_not_used"):
        # Each is checked on its own, so several checks of one case are one list.
        values: list[Any] = []
        for check in own:
            values += _answers(check)
        if family != "contains":
            return True, values, ""
        return True, values[0] if len(values) == 1 else values, ""
    if family == "judge":
        return True, "\n".join(str(c.value) for c in own), ""
    if family == "json_schema":
        wanted = plan.config.get("schema")
        if wanted is not None and any(_schema_key(c.value) != _schema_key(wanted) for c in own):
            return False, None, "is-json with another schema than the suite's"
        if plan.config.get("field") is not None:
            return False, None, "is-json gives no expected value for the scorer's field"
        return True, None, ""
    if len(own) > 1:
        notes.add(
            f"several {own[0].kind} assertions on one case",
            f"only the first is checked; {family} takes one expected answer",
            draft.where,
        )
    return True, own[0].value, ""


def _answer_expected(answers: list[Any], plan: Plan, where: str, notes: Notes) -> Any:
    empty = [i for i, a in enumerate(answers, 1) if not str(a).strip()]
    if empty and len(answers) > 1:
        # One empty alternative makes any-of match every reply ("(?:b|)"): never a test. (A
        # single empty answer is refused with every case file's, in parse_case.)
        raise CaseFileError(
            f"acceptable answer {empty[0]} of {len(answers)} is empty, so every reply (or "
            "none) would match it",
            where=where,
            fix="remove the empty answer, or write the one the reply must give",
        )
    if plan.kind == "regex":
        parts = [re.escape(str(a)) for a in answers]
        return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    if len(answers) == 1:
        return answers[0]
    if plan.kind == "judge":
        return "Any of:\n" + "\n".join(f"- {a}" for a in answers)
    if plan.kind == "python":
        return answers
    notes.add(
        "several acceptable answers",
        f"checked against the first only ({plan.kind} takes one answer); with scorer regex "
        "any of them counts, as the source meant",
        where,
    )
    return answers[0]


def _note_other_checks(draft: Draft, plan: Plan, scored: bool, notes: Notes) -> None:
    for check in draft.checks:
        if check.family is None or check.family == ANSWER or plan.kind == "python":
            continue
        if check.family == LABEL:
            if plan.kind == LABEL and check.field == plan.config.get("field"):
                continue
            if plan.kind == "judge":
                continue
            if scored:
                notes.add(
                    f"{check.kind} not checked",
                    "this suite's scorer checks one field; to check this one too, put it in a "
                    f"second suite whose scorer is {{kind: label, field: {check.field}}}",
                    draft.where,
                )
            continue
        if check.family in plan.members:
            if plan.kind in ("exact", "contains") and check.case_sensitive != plan.case_sensitive:
                how = "case-sensitive" if check.case_sensitive else "case-insensitive"
                now = "case-sensitively" if plan.case_sensitive else "case-insensitively"
                notes.add(
                    f"{check.kind} assertions checked {now}",
                    f"they are {how} in the source; the suite's scorer sets case_sensitive "
                    "once for every case",
                    draft.where,
                )
            continue
        if scored:
            notes.add(
                f"{check.kind} assertion not checked",
                NOT_CHECKED_FIX.format(kind=plan.kind, family=check.family),
                draft.where,
            )


# ------------------------------------------------------------------------------------------
# Ids, splits and records
# ------------------------------------------------------------------------------------------


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def assign_ids(source: Source) -> list[str]:
    """The source's ids, or a hash of the inputs: adding or moving a case renumbers nothing.

    Cases with the same inputs are told apart by a hash of their checks too; cases identical
    in every way get -2, -3 in order (and are reported).
    """
    drafts = source.drafts
    base = [_digest(d.inputs if d.identity is None else d.identity)[:10] for d in drafts]
    shared = Counter(base)
    ids: list[str] = []
    seen: dict[str, str] = {}
    for draft, key in zip(drafts, base, strict=True):
        if draft.source_id is not None:
            case_id = draft.source_id
            if case_id in seen:
                raise CaseFileError(
                    f"duplicate id {case_id!r} (first at {seen[case_id]})",
                    where=draft.where,
                    fix="every case needs its own id",
                )
        else:
            case_id = f"{source.id_prefix}-{key}"
            if shared[key] > 1:
                checks = [(c.kind, c.value) for c in draft.checks]
                case_id += "-" + _digest([draft.inputs, checks, draft.extra])[:6]
            if case_id in seen:
                source.notes.add(
                    f"{source.noun} identical to an earlier one",
                    "kept, with -2, -3 added to the id; delete the copies if they are mistakes",
                    draft.where,
                )
                n = 2
                while f"{case_id}-{n}" in seen:
                    n += 1
                case_id = f"{case_id}-{n}"
        seen[case_id] = draft.where
        ids.append(case_id)
    return ids


def _scalar(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    return str(value)


def _split(draft: Draft, notes: Notes) -> str | None:
    raw = _scalar(draft.split)
    if raw is None:
        return None
    split = SPLIT_NAMES.get(raw.strip().lower())
    if split is None:
        notes.add(
            f"split value {raw!r}",
            "left unset, so evalgate assigns dev or holdout by hash; use train, dev, validation "
            "(dev), test, holdout (holdout) or regression",
            draft.where,
        )
        return None
    notes.map(f"split {raw}", split)
    return split


def finish(source: Source, plan: Plan) -> Conversion:
    """Evalgate records for every draft: the scored ones, and apart those the plan cannot score."""
    notes = source.notes
    ids = assign_ids(source)
    names: list[str] = []
    for draft in source.drafts:
        names += [k for k in draft.inputs if k not in names]
    renamed = {n: f"input_{n}" if n in RESERVED else n for n in names}
    for old, new in renamed.items():
        if old != new:
            notes.add(f"input {old!r}", f"renamed {new!r}: {old!r} is one of evalgate's fields")
    records: list[tuple[str, dict[str, Any]]] = []
    unscored: list[tuple[str, dict[str, Any]]] = []
    listed: list[Unscored] = []
    scored_drafts: list[Draft] = []
    for draft, case_id in zip(source.drafts, ids, strict=True):
        missing = [n for n in names if n not in draft.inputs]
        for name in missing:
            notes.add(
                f"input {name!r} missing",
                "filled with an empty string, as the source's template would render it",
                draft.where,
            )
        for name, value in draft.inputs.items():
            if isinstance(value, dict):
                # A template would render it as a Python repr: no model was ever sent that.
                raise CaseFileError(
                    f"input {name!r} is an object, not text",
                    where=draft.where,
                    fix="write the input as text (JSON inside a string, if the prompt wants JSON)",
                )
        scored, expected, reason = _expected(draft, plan, notes)
        if scored and draft.withheld is not None:
            scored, expected, reason = False, None, draft.withheld
        _note_other_checks(draft, plan, scored, notes)
        record: dict[str, Any] = {"id": case_id}
        for name in names:
            record[renamed[name]] = draft.inputs.get(name, "")
        record["expected"] = expected
        for key, value in (("group", draft.group), ("category", draft.category)):
            text = _scalar(value)
            if text is not None:
                record[key] = text
        split = _split(draft, notes)
        if split is not None:
            record["split"] = split
        for key, value in draft.extra.items():
            record[key if key not in record else f"source_{key}"] = value
        if scored:
            records.append((draft.where, record))
            scored_drafts.append(draft)
        else:
            record["checks"] = [
                c.raw if c.raw is not None else {"type": c.kind, "value": c.value}
                for c in draft.checks
            ]
            unscored.append((draft.where, record))
            listed.append(Unscored(id=case_id, where=draft.where, reason=reason))
    _count_mapped(source, plan, scored_drafts)
    return Conversion(
        source=source,
        plan=plan,
        records=records,
        unscored=unscored,
        unscored_list=listed,
        inputs=[renamed[n] for n in names],
    )


def _count_mapped(source: Source, plan: Plan, scored: list[Draft]) -> None:
    counts: Counter[str] = Counter()
    for draft in scored:
        for check in draft.checks:
            if check.family == LABEL:
                if plan.kind == "judge" or (
                    plan.kind == LABEL and check.field == plan.config.get("field")
                ):
                    counts[check.kind] += 1
            elif check.family in (*plan.members, ANSWER) or plan.kind == "python":
                counts[check.kind] += 1
    for kind, count in counts.items():
        source.notes.map(kind, f"expected (scorer {plan.kind})", count)


def from_metadata(draft: Draft, metadata: Any, notes: Notes, prefix: str = "metadata") -> None:
    """Lift group, category and split out of a metadata mapping; keep the rest on the case."""
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        draft.extra["metadata"] = metadata
        return
    for key in ("group", "category", "split"):
        if key in metadata:
            setattr(draft, key, metadata[key])
            notes.map(f"{prefix}.{key}", key)
    rest = {k: v for k, v in metadata.items() if k not in ("group", "category", "split")}
    if rest:
        draft.extra["metadata"] = rest
