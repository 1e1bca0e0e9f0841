"""Dev / holdout / regression assignment, and leak checks. Pure.

A case's side is a stable hash (sha256, never Python's ``hash()``) of its group key with the
suite's salt, against the holdout fraction; a split written on the case wins. Adding cases
never moves an existing case, since each case's side depends only on its own group key.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from evalgate.cases.read import Case, SplitName
from evalgate.config.models import Fields, SplitPolicy

# A holdout of about 0.3 x 150 = 45 cases clears the default min_holdout (40): below that, a new
# suite (init, an imported snippet) starts without a holdout rather than with one too small to
# read, and every case stays in dev.
STARTING_HOLDOUT_FRACTION = 0.3
STARTING_HOLDOUT_MIN_CASES = 150


def starting_holdout_fraction(cases: int) -> float:
    """The holdout fraction a new suite of ``cases`` cases starts with."""
    return STARTING_HOLDOUT_FRACTION if cases >= STARTING_HOLDOUT_MIN_CASES else 0.0


def group_key(case: Case, policy: SplitPolicy) -> str:
    if policy.group_field is not None:
        value = case.input.get(policy.group_field)
        if value is not None:
            return str(value)
    return case.group if case.group is not None else case.id


def hashed_side(key: str, policy: SplitPolicy) -> SplitName:
    digest = hashlib.sha256(f"{policy.salt}\0{key}".encode()).digest()
    # The first 8 bytes as a number in [0, 1): uniform enough, stable across machines.
    position = int.from_bytes(digest[:8], "big") / 2**64
    return "holdout" if position < policy.holdout_fraction else "dev"


def assign(case: Case, policy: SplitPolicy) -> SplitName:
    """The case's split: the one written on it, else its group's hashed side."""
    return case.split if case.split is not None else hashed_side(group_key(case, policy), policy)


def assign_all(cases: Sequence[Case], policy: SplitPolicy) -> list[Case]:
    return [
        c if c.split is not None else c.model_copy(update={"split": assign(c, policy)})
        for c in cases
    ]


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.findall(r"\w+", text))


def not_input(fields: Fields | None) -> frozenset[str]:
    """Fields that are bookkeeping, not input: with ``fields.input`` unset a case's input is the
    whole record, and its id or label would make identical messages look different."""
    if fields is None or fields.input is not None:
        return frozenset()
    names = (fields.id, fields.expected, fields.group, fields.category, fields.split)
    return frozenset(n for n in names if n is not None)


def input_text(case: Case, skip: frozenset[str] = frozenset()) -> str:
    """A case's input fields, as text: what its templated user turn is made of (the pull
    request's holdout check looks for a holdout case's copy in the turn a head case sends)."""
    return " ".join(str(v) for k, v in case.input.items() if k not in skip)


def case_text(case: Case, skip: frozenset[str] = frozenset()) -> str:
    """All a case gives the model, for telling two cases apart: its input fields and, for an
    agent case, the turns before the last and what its tools answer (two conversations that
    end alike but differ earlier are two cases, not a holdout case leaked into dev)."""
    parts = [input_text(case, skip)]
    parts += [f"{m.get('role', '')}: {m.get('content', '')}" for m in case.messages]
    if case.fixtures:
        parts.append(json.dumps(case.fixtures, sort_keys=True, ensure_ascii=False, default=str))
    return " ".join(parts)


def shingles(text: str, size: int) -> frozenset[str]:
    words = text.split()
    if len(words) < size:
        return frozenset({" ".join(words)}) if words else frozenset()
    return frozenset(" ".join(words[i : i + size]) for i in range(len(words) - size + 1))


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    message: str
    # Ids are shown to whoever runs `evalgate split` locally (with the cases in hand), never
    # in a PR comment.
    ids: list[str] = []


class SplitReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    counts: dict[str, int]
    by_category: dict[str, dict[str, int]]
    groups: dict[str, int]
    findings: list[Finding]

    @property
    def leaks(self) -> list[Finding]:
        return [f for f in self.findings if f.kind in LEAK_KINDS]


LEAK_KINDS = frozenset({"group_on_both_sides", "identical_input", "near_duplicate"})


def near_duplicates(
    dev: Sequence[Case],
    holdout: Sequence[Case],
    policy: SplitPolicy,
    skip: frozenset[str] = frozenset(),
) -> list[tuple[str, str, float]]:
    """Pairs (dev id, holdout id, similarity) at or above the threshold.

    An inverted index on shingles keeps this near-linear: only pairs sharing a shingle are
    scored, so large suites do not pay for every pair.
    """
    dev_sh = {c.id: shingles(normalise(case_text(c, skip)), policy.shingle_words) for c in dev}
    index: dict[str, list[str]] = defaultdict(list)
    for case_id, sh in dev_sh.items():
        for s in sh:
            index[s].append(case_id)
    found = []
    for case in holdout:
        sh = shingles(normalise(case_text(case, skip)), policy.shingle_words)
        shared: Counter[str] = Counter()
        for s in sh:
            shared.update(index.get(s, ()))
        for dev_id, common in shared.items():
            union = len(sh) + len(dev_sh[dev_id]) - common
            similarity = common / union if union else 1.0
            if similarity >= policy.near_duplicate:
                found.append((dev_id, case.id, similarity))
    return sorted(found)


def check_split(
    cases: Sequence[Case],
    policy: SplitPolicy,
    fields: Fields | None = None,
    *,
    reveal: bool = False,
) -> SplitReport:
    """Counts per split, per category and per group side, and the leak findings.

    A leak finding names holdout cases (or the dev cases and groups that would give them away)
    only with ``reveal``, which the CLI grants to whoever holds the holdout key and asks for it;
    otherwise it counts them.
    """
    report = _check_split(cases, policy, fields)
    if reveal:
        return report
    hidden = [
        f.model_copy(
            update={
                "ids": [],
                "message": f.message + " (which cases: `evalgate split --show-holdout`, "
                "with the holdout key set)",
            }
        )
        if f.kind in LEAK_KINDS and f.ids
        else f
        for f in report.findings
    ]
    return report.model_copy(update={"findings": hidden})


def _check_split(
    cases: Sequence[Case], policy: SplitPolicy, fields: Fields | None = None
) -> SplitReport:
    skip = not_input(fields)
    assigned = assign_all(cases, policy)
    counts = Counter(c.split or "dev" for c in assigned)
    by_category: dict[str, dict[str, int]] = defaultdict(
        lambda: {"dev": 0, "holdout": 0, "regression": 0}
    )
    for c in assigned:
        by_category[c.category or "(none)"][c.split or "dev"] += 1
    sides: dict[str, set[str]] = defaultdict(set)
    for c in assigned:
        if c.split in ("dev", "holdout"):
            sides[group_key(c, policy)].add(c.split)
    groups = Counter("both" if len(s) > 1 else next(iter(s)) for s in sides.values())

    findings: list[Finding] = []
    both = sorted(k for k, s in sides.items() if len(s) > 1)
    if both:
        findings.append(
            Finding(
                kind="group_on_both_sides",
                message=f"{len(both)} groups have cases on both sides (explicit splits disagree with "
                "the group): move the whole group to one side",
                ids=both,
            )
        )
    dev = [c for c in assigned if c.split == "dev"]
    holdout = [c for c in assigned if c.split == "holdout"]
    dev_texts: dict[str, str] = {}
    for c in dev:
        dev_texts.setdefault(normalise(case_text(c, skip)), c.id)
    identical = [
        (dev_texts[t], c.id) for c in holdout if (t := normalise(case_text(c, skip))) in dev_texts
    ]
    if identical:
        findings.append(
            Finding(
                kind="identical_input",
                message=f"{len(identical)} holdout cases have the same input as a dev case: "
                "delete or retire the holdout copy",
                ids=[f"{a}={b}" for a, b in identical],
            )
        )
    exact = set(identical)
    near = [
        (a, b, s) for a, b, s in near_duplicates(dev, holdout, policy, skip) if (a, b) not in exact
    ]
    if near:
        findings.append(
            Finding(
                kind="near_duplicate",
                message=f"{len(near)} holdout cases are near-duplicates of dev cases (word-shingle "
                f"Jaccard >= {policy.near_duplicate:g}): put each pair in one group",
                ids=[f"{a}~{b} ({s:.2f})" for a, b, s in near],
            )
        )
    if policy.holdout_fraction > 0 and len(holdout) < policy.min_holdout:
        findings.append(
            Finding(
                kind="small_holdout",
                message=f"the holdout has {len(holdout)} cases, under {policy.min_holdout}: too few "
                "to read a dev-vs-holdout gap; add cases (with `evalgate holdout add` if sealed)",
            )
        )
    for category, row in sorted(by_category.items()):
        missing = [side for side in ("dev", "holdout") if row[side] == 0]
        if missing and policy.holdout_fraction > 0:
            findings.append(
                Finding(
                    kind="category_missing",
                    message=f"category {category} has no {missing[0]} cases: add some, or the "
                    "gap cannot be read for it",
                )
            )
    return SplitReport(
        counts={k: counts.get(k, 0) for k in ("dev", "holdout", "regression")},
        by_category=dict(sorted(by_category.items())),
        groups={k: groups.get(k, 0) for k in ("dev", "holdout", "both")},
        findings=findings,
    )
