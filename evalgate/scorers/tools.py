"""Scorers over an agent's trajectory: tool_sequence, tool_used, tool_not_used, max_steps, all_of.

They read the reply's steps (``trajectory=``), not its text. A reply with no trajectory (a
backend that made no agent loop, a command whose reply had no tool calls field) is scored 0
with ``format_ok`` false: format validity for an agent is "the reply had a parseable
trajectory". The answer shown in reports is the calls made, ``lookup_order → issue_refund``.

Expected sequences (the case's expected answer, or its ``tool_sequence`` key, as Langfuse
writes it) list steps as tool names or objects: ``{"name": ..., "input": {...}}`` checks the
call's input contains that JSON (a subset), ``{"name": ..., "input_schema": {...}}`` checks
it against a JSON schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalgate.config.models import (
    AllOfScorer,
    MaxStepsScorer,
    ToolNotUsedScorer,
    ToolSequenceScorer,
    ToolUsedScorer,
)
from evalgate.errors import UserError
from evalgate.scorers.base import Score, Scorer
from evalgate.trajectory import CallRecord, Step, calls_of, json_subset, show_calls, show_names

_STEP_KEYS = frozenset({"name", "input", "input_schema"})


class ExpectedStep:
    """One expected call: a tool name and an optional check of its input."""

    def __init__(self, raw: Any, index: int) -> None:
        if isinstance(raw, str):
            raw = {"name": raw}
        if (
            not isinstance(raw, dict)
            or not isinstance(raw.get("name"), str)
            or set(raw) - _STEP_KEYS
        ):
            raise UserError(
                f"expected tool_sequence[{index}] must be a tool name or an object with 'name' "
                "and optionally 'input' (a JSON subset) or 'input_schema' (a JSON schema)",
                fix='e.g. ["lookup_order", {"name": "issue_refund", "input": {"order_id": "A1"}}]',
            )
        if "input" in raw and "input_schema" in raw:
            raise UserError(
                f"expected tool_sequence[{index}] has both 'input' and 'input_schema'",
                fix="give one check per step",
            )
        self.name: str = raw["name"]
        self.input: Any = raw.get("input")
        self.schema: dict[str, Any] | None = raw.get("input_schema")
        self._validator: Any = None
        if self.schema is not None:
            import jsonschema

            try:
                self._validator = jsonschema.Draft202012Validator(self.schema)
                self._validator.check_schema(self.schema)
            except jsonschema.SchemaError as exc:
                raise UserError(
                    f"expected tool_sequence[{index}].input_schema is not a valid JSON schema: "
                    f"{exc.message}"
                ) from None

    def matches(self, call: CallRecord) -> bool:
        if call.name != self.name:
            return False
        if self.input is not None:
            return json_subset(self.input, call.input)
        if self._validator is not None:
            return bool(self._validator.is_valid(call.input))
        return True

    def __str__(self) -> str:
        if self.input is not None:
            return f"{self.name}({_args(self.input)})"
        if self.schema is not None:
            return f"{self.name}(input matching a schema)"
        return self.name


def _args(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v!r}" for k, v in value.items())
    return repr(value)


def expected_sequence(expected: Any) -> list[ExpectedStep]:
    if isinstance(expected, dict) and "tool_sequence" in expected:
        expected = expected["tool_sequence"]
    if not isinstance(expected, list):
        raise UserError(
            "a tool_sequence case's expected answer must be a list of calls (or an object with "
            f"a 'tool_sequence' list), found {type(expected).__name__}",
            fix='e.g. "expected": ["lookup_order", "issue_refund"]',
        )
    return [ExpectedStep(raw, i) for i, raw in enumerate(expected)]


# --- matching ---------------------------------------------------------------------------------


def max_matching(expected: Sequence[ExpectedStep], calls: Sequence[CallRecord]) -> int:
    """The most expected steps that can each be paired with a different call they match
    (a maximum bipartite matching, by augmenting paths: sequences are short)."""
    owner: dict[int, int] = {}  # call index -> expected index

    def augment(e: int, seen: set[int]) -> bool:
        for c, call in enumerate(calls):
            if c in seen or not expected[e].matches(call):
                continue
            seen.add(c)
            if c not in owner or augment(owner[c], seen):
                owner[c] = e
                return True
        return False

    return sum(augment(e, set()) for e in range(len(expected)))


def in_order(expected: Sequence[ExpectedStep], calls: Sequence[CallRecord]) -> int:
    """How many expected steps, from the first, appear in order (others allowed between).

    Taking the earliest matching call each time is optimal for a subsequence test."""
    found, position = 0, 0
    for step in expected:
        while position < len(calls) and not step.matches(calls[position]):
            position += 1
        if position == len(calls):
            break
        found += 1
        position += 1
    return found


def edit_distance(expected: Sequence[ExpectedStep], calls: Sequence[CallRecord]) -> int:
    """Levenshtein distance over calls (insert, delete, substitute: 1 each; a match is free)."""
    previous = list(range(len(calls) + 1))
    for i, step in enumerate(expected, start=1):
        current = [i]
        for j, call in enumerate(calls, start=1):
            cost = 0 if step.matches(call) else 1
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost))
        previous = current
    return previous[-1]


def partial_score(
    kind: str, expected: Sequence[ExpectedStep], calls: Sequence[CallRecord]
) -> float:
    if not expected and not calls:
        return 1.0
    if kind == "edit_distance":
        return 1.0 - edit_distance(expected, calls) / max(len(expected), len(calls))
    matched = max_matching(expected, calls)
    if matched == 0:
        return 0.0
    precision, recall = matched / len(calls), matched / len(expected)
    return 2 * precision * recall / (precision + recall)


def sequence_verdict(
    match: str, expected: Sequence[ExpectedStep], calls: Sequence[CallRecord]
) -> str | None:
    """None when the calls satisfy the match mode, else why not (one line)."""
    if match == "exact":
        for i, (step, call) in enumerate(zip(expected, calls, strict=False)):
            if not step.matches(call):
                return f"call {i + 1}: expected {step}, got {call.name}({_args(call.input)})"
        if len(calls) != len(expected):
            if len(calls) > len(expected):
                return (
                    f"{len(calls) - len(expected)} extra call(s) from {calls[len(expected)].name}"
                )
            return f"missing call {len(calls) + 1}: {expected[len(calls)]}"
        return None
    if match == "in_order":
        found = in_order(expected, calls)
        return None if found == len(expected) else f"{expected[found]} not called in order"
    matched = max_matching(expected, calls)
    if matched < len(expected):
        missing = [str(s) for s in expected if not any(s.matches(c) for c in calls)]
        return "not called: " + (", ".join(missing) if missing else "each expected call once")
    if match == "any_order" and len(calls) != len(expected):
        return f"{len(calls) - len(expected)} extra call(s)"
    return None


# --- the scorers ------------------------------------------------------------------------------


def _no_trajectory() -> Score:
    return Score(answer=None, score=0.0, format_ok=False, reason="the reply had no trajectory")


def _names(configured: list[str], expected: Any, what: str) -> list[str]:
    if configured:
        return configured
    if isinstance(expected, str):
        return [expected]
    if isinstance(expected, list) and all(isinstance(n, str) for n in expected):
        return list(expected)
    raise UserError(
        f"a {what} scorer needs tool names: set tools: in the scorer, or give the case's "
        "expected answer as a name or a list of names"
    )


class TrajectoryScorer:
    needs_trajectory = True
    needs_input = False

    def __call__(
        self, expected: Any, text: str, *, trajectory: list[Step] | None = None, **_: Any
    ) -> Score:
        if trajectory is None:
            return _no_trajectory()
        return self.grade(expected, trajectory)

    def grade(self, expected: Any, steps: list[Step]) -> Score:
        raise NotImplementedError


class ToolSequence(TrajectoryScorer):
    def __init__(self, config: ToolSequenceScorer) -> None:
        self.config = config

    def grade(self, expected: Any, steps: list[Step]) -> Score:
        wanted = expected_sequence(expected)
        calls = calls_of(steps)
        why = sequence_verdict(self.config.match, wanted, calls)
        score = 1.0 if why is None else 0.0
        if why is not None and self.config.partial is not None:
            score = partial_score(self.config.partial, wanted, calls)
        return Score(answer=show_calls(steps), score=score, format_ok=True, reason=why)


class ToolUsed(TrajectoryScorer):
    def __init__(self, config: ToolUsedScorer | ToolNotUsedScorer) -> None:
        self.config = config
        self.used = config.kind == "tool_used"

    def grade(self, expected: Any, steps: list[Step]) -> Score:
        names = _names(self.config.tools, expected, self.config.kind)
        made = {c.name for c in calls_of(steps)}
        wrong = [n for n in names if (n in made) != self.used]
        reason = None
        if wrong:
            reason = ("not called: " if self.used else "called: ") + ", ".join(wrong)
        return Score(
            answer=show_calls(steps), score=float(not wrong), format_ok=True, reason=reason
        )


class MaxSteps(TrajectoryScorer):
    def __init__(self, config: MaxStepsScorer) -> None:
        self.config = config

    def grade(self, expected: Any, steps: list[Step]) -> Score:
        limit = self.config.limit if self.config.limit is not None else expected
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise UserError(
                "a max_steps scorer needs a limit: set limit: in the scorer, or give the case's "
                f"expected answer as a whole number, found {limit!r}"
            )
        over = len(steps) > limit
        return Score(
            answer=f"{len(steps)} step{'s' if len(steps) != 1 else ''}",
            score=float(not over),
            format_ok=True,
            reason=f"{len(steps)} model calls, over the limit of {limit}" if over else None,
        )


class AllOf:
    """Every criterion must pass; the score is the lowest; the reason names the failed ones."""

    def __init__(self, config: AllOfScorer, members: Sequence[tuple[str, Scorer]]) -> None:
        self.config = config
        self.members = list(members)
        self.needs_input = any(getattr(s, "needs_input", False) for _, s in members)
        self.needs_trajectory = any(getattr(s, "needs_trajectory", False) for _, s in members)

    def __call__(
        self,
        expected: Any,
        text: str,
        *,
        trajectory: list[Step] | None = None,
        case_input: dict[str, Any] | None = None,
    ) -> Score:
        scores: list[tuple[str, Score]] = []
        for kind, scorer in self.members:
            own = expected[kind] if isinstance(expected, dict) and kind in expected else expected
            extra: dict[str, Any] = {}
            if getattr(scorer, "needs_trajectory", False):
                extra["trajectory"] = trajectory
            if getattr(scorer, "needs_input", False):
                extra["case_input"] = case_input
            scores.append((kind, scorer(own, text, **extra)))
        failed = [(k, s) for k, s in scores if s.score < 0.5]
        reason = None
        if failed:
            reason = "failed: " + "; ".join(
                f"{k} ({s.reason})" if s.reason else k for k, s in failed
            )
        answer = show_calls(trajectory) if trajectory is not None else scores[0][1].answer
        return Score(
            answer=answer,
            score=min(s.score for _, s in scores),
            format_ok=all(s.format_ok for _, s in scores),
            reason=reason,
            judge_calls=sum(s.judge_calls for _, s in scores),
            judge_input_tokens=sum(s.judge_input_tokens for _, s in scores),
            judge_output_tokens=sum(s.judge_output_tokens for _, s in scores),
        )


def tool_sequence(config: ToolSequenceScorer, _base: Path) -> Scorer:
    return ToolSequence(config)


def tool_used(config: ToolUsedScorer | ToolNotUsedScorer, _base: Path) -> Scorer:
    return ToolUsed(config)


def max_steps(config: MaxStepsScorer, _base: Path) -> Scorer:
    return MaxSteps(config)


__all__ = ["AllOf", "expected_sequence", "show_names"]
