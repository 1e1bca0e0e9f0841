"""Pairing: each candidate case with its baseline case, over the repeats the comparison uses
(matched for the sign test, every repeat for the conditional test), and a scenario group's
run totals for the group-level test."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from evalgate.analysis.conditional import MatchedSet
from evalgate.analysis.run_permutation import Block
from evalgate.config.models import GatePolicy
from evalgate.gate.verdict import PairedCase, _Findings, _pct
from evalgate.runs.schema import PASS_AT, CaseResult, Outcome, Run
from evalgate.trajectory import expected_label


def _passed(o: Outcome) -> bool:
    return (o.score or 0.0) >= PASS_AT


def _tally(outcomes: Sequence[Outcome], k: int) -> tuple[float, int, int]:
    """The summed score, the passes and the replies in format over the first ``k`` outcomes:
    one loop, as the gate runs it for every case of both runs."""
    total, passes, formats = 0.0, 0, 0
    for o in outcomes[:k]:
        score = o.score or 0.0
        total += score
        passes += score >= PASS_AT
        formats += bool(o.format_ok)
    return total, passes, formats


@dataclass(frozen=True)
class _Pair:
    """A baseline and a candidate case, compared over ``kb`` and ``kc`` of their repeats."""

    base: CaseResult
    cand: CaseResult
    kb: int
    kc: int
    base_score: float
    cand_score: float
    # Passes and replies in the asked-for format, over the compared repeats.
    base_passes: int
    cand_passes: int
    base_formats: int
    cand_formats: int

    @classmethod
    def of(cls, base: CaseResult, cand: CaseResult, matched: bool) -> _Pair:
        if matched:
            kb = kc = min(len(base.outcomes), len(cand.outcomes))
        else:
            kb, kc = len(base.outcomes), len(cand.outcomes)
        b_total, b_passes, b_formats = _tally(base.outcomes, kb)
        c_total, c_passes, c_formats = _tally(cand.outcomes, kc)
        return cls(
            base=base,
            cand=cand,
            kb=kb,
            kc=kc,
            base_score=b_total / kb,
            cand_score=c_total / kc,
            base_passes=b_passes,
            cand_passes=c_passes,
            base_formats=b_formats,
            cand_formats=c_formats,
        )

    @property
    def diff(self) -> float:
        return self.cand_score - self.base_score

    @property
    def base_format(self) -> float:
        return self.base_formats / self.kb

    @property
    def cand_format(self) -> float:
        return self.cand_formats / self.kc

    def matched_set(self, which: Literal["score", "format"]) -> MatchedSet:
        if which == "score":
            return (self.base_passes, self.kb, self.cand_passes, self.kc)
        return (self.base_formats, self.kb, self.cand_formats, self.kc)

    def held_out_flipped(self) -> bool:
        """Whether the case flipped between baseline repeats that the comparison does not use."""
        held = {_passed(o) for o in self.base.outcomes[self.kb :]}
        return len(held) > 1

    def group(self) -> str:
        return self.cand.group or self.cand.id


def _paired(base: CaseResult | None, cand: CaseResult, pair: _Pair | None = None) -> PairedCase:
    return PairedCase(
        id=cand.id,
        category=cand.category,
        group=cand.group,
        expected=expected_label(cand.expected),
        baseline_answer=base.answered() if base else "",
        candidate_answer=cand.answered(),
        baseline_score=pair.base_score if pair else (base.score if base else None),
        candidate_score=pair.cand_score if pair else cand.score,
        message=cand.message(),
        candidate_reason=next(
            (o.reason for o in cand.outcomes if o.reason and (o.score or 0.0) < 0.5), None
        ),
    )


def _is_binary(runs: Sequence[Run]) -> bool:
    return all(
        o.score in (0.0, 1.0) for r in runs for c in r.cases for o in c.outcomes if o.error is None
    )


def _blocks(
    pairs: Sequence[_Pair], which: Literal["score", "format", "value"], unit: str = "group"
) -> list[Block]:
    """Each scenario group's (or case's) run totals: per baseline and per candidate repeat, the
    group's passes, replies in format or summed scores in that repeat, over the repeats every
    case of the group has (a merged run can give cases unequal repeats)."""
    by_group: dict[str, list[_Pair]] = defaultdict(list)
    for pair in pairs:
        by_group[pair.group() if unit == "group" else pair.cand.id].append(pair)
    hit: Callable[[Outcome], float] = (
        _passed
        if which == "score"
        else (lambda o: bool(o.format_ok))
        if which == "format"
        else (lambda o: o.score or 0.0)
    )
    blocks: list[Block] = []
    for rows in by_group.values():
        r, k = min(p.kb for p in rows), min(p.kc for p in rows)
        base = [sum(hit(p.base.outcomes[i]) for p in rows) for i in range(r)]
        cand = [sum(hit(p.cand.outcomes[i]) for p in rows) for i in range(k)]
        blocks.append((base, cand))
    return blocks


@dataclass
class _Pairing:
    """The dev cases of a candidate matched with the baseline's, and what could not be."""

    pairs: list[_Pair]
    edited: list[str]
    only_candidate: list[str]
    only_baseline: list[str]
    unstable: list[PairedCase]


def _pair_cases(
    baseline: Run,
    dev: Sequence[CaseResult],
    policy: GatePolicy,
    matched: bool,
    found: _Findings,
) -> _Pairing:
    """Each dev case with the baseline's case of the same id and content; new, edited,
    errored and (when the baseline's held-out repeats show it) unstable cases left out."""
    base_by_id = {c.id: c for c in baseline.cases if c.split == "dev"}
    edited: list[str] = []
    only_candidate: list[str] = []
    pairs: list[_Pair] = []
    unstable: list[PairedCase] = []
    kept_unstable = 0
    for cand in dev:
        base = base_by_id.get(cand.id)
        if base is None:
            only_candidate.append(cand.id)
        elif base.hash != cand.hash:
            edited.append(cand.id)
        elif base.error is not None or cand.error is not None:
            continue
        else:
            pair = _Pair.of(base, cand, matched=matched)
            if matched and policy.exclude_unstable and pair.held_out_flipped():
                unstable.append(_paired(base, cand, pair))
            else:
                # Flipped, but only where the held-out repeats cannot show it (too few of them).
                kept_unstable += base.flipped and len(base.outcomes) - pair.kb < 2
                pairs.append(pair)
    if kept_unstable and policy.exclude_unstable and matched:
        k = min((p.kb for p in pairs), default=1)
        found.warnings.append(
            f"{kept_unstable} cases that flipped between the baseline's repeats stay in the test: "
            "leaving them out of a comparison with those same repeats would bias it towards "
            "'worse' (only the settled cases would be left, and noise can only break a settled "
            f"pass); a baseline with --repeats {k + 2} lets the gate leave them out"
        )
    unpaired = len(only_candidate) + len(edited)
    if dev and unpaired / len(dev) > policy.max_unpaired_share:
        found.blockers.append(
            f"{unpaired} of {len(dev)} candidate cases have no unchanged counterpart in the "
            f"baseline (new or edited), over the {_pct(policy.max_unpaired_share)}% allowed: "
            "refresh the baseline"
        )
    if edited:
        found.warnings.append(
            f"{len(edited)} cases were edited since the baseline and are left out"
        )
    only_baseline = sorted(set(base_by_id) - {c.id for c in dev})
    return _Pairing(pairs, edited, only_candidate, only_baseline, unstable)
