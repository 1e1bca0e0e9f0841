"""Scorers of an agent's trajectory, with known answers worked out by hand in the comments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from evalgate.config.models import ScorerConfig
from evalgate.errors import UserError
from evalgate.scorers.base import Score, build_scorer, needs_expected
from evalgate.trajectory import CallRecord, Step, json_subset, show_expected

CONFIG: TypeAdapter[Any] = TypeAdapter(ScorerConfig)


def steps(*calls: str | tuple[str, dict[str, Any]], final: str = "done") -> list[Step]:
    """One step per call (as models mostly call), then a final step with no calls."""
    made = []
    for call in calls:
        name, args = (call, {}) if isinstance(call, str) else call
        made.append(Step(calls=[CallRecord(name=name, input=args, result="ok")]))
    return [*made, Step(text=final)]


def score(config: dict[str, Any], expected: Any, trajectory: list[Step] | None) -> Score:
    scorer = build_scorer(CONFIG.validate_python(config), Path("."))
    assert getattr(scorer, "needs_trajectory", False)
    result: Score = scorer(expected, "text", trajectory=trajectory)
    return result


# Expected [a, b] against five trajectories, by the definitions in config.ToolSequenceScorer:
# exact = same calls, same order; in_order = a before b, others between; any_order = the same
# multiset; subset = a and b somewhere.
TABLE = [
    (["a", "b"], {"exact": 1, "in_order": 1, "any_order": 1, "subset": 1}),
    (["b", "a"], {"exact": 0, "in_order": 0, "any_order": 1, "subset": 1}),
    (["a", "x", "b"], {"exact": 0, "in_order": 1, "any_order": 0, "subset": 1}),
    (["b", "x", "a"], {"exact": 0, "in_order": 0, "any_order": 0, "subset": 1}),
    (["a"], {"exact": 0, "in_order": 0, "any_order": 0, "subset": 0}),
    ([], {"exact": 0, "in_order": 0, "any_order": 0, "subset": 0}),
]


@pytest.mark.parametrize(("made", "want"), TABLE)
@pytest.mark.parametrize("match", ["exact", "in_order", "any_order", "subset"])
def test_every_match_mode_on_a_table_of_trajectories(
    made: list[str], want: dict[str, int], match: str
) -> None:
    result = score({"kind": "tool_sequence", "match": match}, ["a", "b"], steps(*made))
    assert result.score == want[match]
    assert result.format_ok
    assert (result.reason is None) == bool(want[match])


def test_the_answer_is_the_calls_made_and_the_reason_names_the_first_difference() -> None:
    result = score(
        {"kind": "tool_sequence"},
        {"tool_sequence": ["lookup_order", "issue_refund"]},
        steps("lookup_order", "escalate"),
    )
    assert result.answer == "lookup_order → escalate"
    assert result.reason == "call 2: expected issue_refund, got escalate()"
    none = score({"kind": "tool_sequence"}, ["a"], steps())
    assert none.answer == "(no tool calls)"
    assert none.reason == "missing call 1: a"


@pytest.mark.parametrize(
    ("expected", "made", "partial", "value"),
    [
        # Levenshtein over calls, 1 - d / max(len): [a b c] -> [a c] deletes b: 1 - 1/3.
        (["a", "b", "c"], ["a", "c"], "edit_distance", 1 - 1 / 3),
        # [a b] -> [a x b] inserts x: 1 - 1/3.
        (["a", "b"], ["a", "x", "b"], "edit_distance", 1 - 1 / 3),
        # [a b] -> [b a]: two substitutions (or a delete and an insert): 1 - 2/2.
        (["a", "b"], ["b", "a"], "edit_distance", 0.0),
        # one substitution in two: 1 - 1/2.
        (["lookup", "refund"], ["lookup", "escalate"], "edit_distance", 0.5),
        # F1 of matched calls: 2 matched, precision 2/4, recall 2/3, F1 = 2PR/(P+R) = 4/7.
        (["a", "b", "c"], ["a", "c", "d", "e"], "f1", 4 / 7),
        # each expected call is matched once: [a a] vs [a]: P 1, R 1/2, F1 2/3.
        (["a", "a"], ["a"], "f1", 2 / 3),
        # exact fails on [b a], so the partial measure is the score; F1 is blind to order: 1.
        (["a", "b"], ["b", "a"], "f1", 1.0),
        # nothing in common: 0 either way.
        (["a"], ["b"], "f1", 0.0),
        (["a"], [], "edit_distance", 0.0),
    ],
)
def test_partial_credit_known_answers(
    expected: list[str], made: list[str], partial: str, value: float
) -> None:
    result = score({"kind": "tool_sequence", "partial": partial}, expected, steps(*made))
    assert result.score == pytest.approx(value)


def test_a_matching_trajectory_scores_one_whatever_the_partial_measure() -> None:
    # subset passes [a x b] for [a b]; its edit distance alone would give 1 - 1/3.
    config = {"kind": "tool_sequence", "match": "subset", "partial": "edit_distance"}
    assert score(config, ["a", "b"], steps("a", "x", "b")).score == 1.0


def test_argument_checks_by_json_subset_and_by_schema() -> None:
    refund = {"name": "issue_refund", "input": {"order_id": "A1"}}
    ok = steps("lookup", ("issue_refund", {"order_id": "A1", "reason": "broken"}))
    wrong = steps("lookup", ("issue_refund", {"order_id": "A2"}))
    assert score({"kind": "tool_sequence"}, ["lookup", refund], ok).score == 1.0
    result = score({"kind": "tool_sequence"}, ["lookup", refund], wrong)
    assert result.score == 0.0
    assert result.reason == (
        "call 2: expected issue_refund(order_id='A1'), got issue_refund(order_id='A2')"
    )
    schema = {
        "name": "issue_refund",
        "input_schema": {"type": "object", "required": ["reason"]},
    }
    assert score({"kind": "tool_sequence"}, ["lookup", schema], ok).score == 1.0
    assert score({"kind": "tool_sequence"}, ["lookup", schema], wrong).score == 0.0


def test_any_order_pairs_calls_by_a_maximum_matching_not_greedily() -> None:
    # Expected x(any) then x(k=1); made x(k=1), x(k=2). Pairing x(any) with x(k=1) first would
    # leave x(k=1) unmatched; the maximum matching pairs x(any)-x(k=2), x(k=1)-x(k=1).
    expected = ["x", {"name": "x", "input": {"k": 1}}]
    made = steps(("x", {"k": 1}), ("x", {"k": 2}))
    assert score({"kind": "tool_sequence", "match": "any_order"}, expected, made).score == 1.0


def test_a_reply_without_a_trajectory_is_a_format_failure() -> None:
    for config in (
        {"kind": "tool_sequence"},
        {"kind": "tool_used", "tools": ["a"]},
        {"kind": "tool_not_used", "tools": ["a"]},
        {"kind": "max_steps", "limit": 3},
    ):
        result = score(config, ["a"], None)
        assert (result.score, result.format_ok, result.answer) == (0.0, False, None)


def test_tool_used_and_not_used_from_the_config_or_the_case() -> None:
    made = steps("lookup_order", "escalate")
    assert score({"kind": "tool_used", "tools": ["escalate"]}, None, made).score == 1.0
    missing = score({"kind": "tool_used", "tools": ["escalate", "refund"]}, None, made)
    assert (missing.score, missing.reason) == (0.0, "not called: refund")
    called = score({"kind": "tool_not_used"}, ["escalate", "refund"], made)
    assert (called.score, called.reason) == (0.0, "called: escalate")
    assert score({"kind": "tool_not_used"}, "refund", made).score == 1.0
    with pytest.raises(UserError, match="needs tool names"):
        score({"kind": "tool_used"}, {"x": 1}, made)


def test_max_steps_counts_model_calls() -> None:
    made = steps("a", "b")  # two calling steps and the final answer: 3 model calls
    assert score({"kind": "max_steps", "limit": 3}, None, made).score == 1.0
    over = score({"kind": "max_steps"}, 2, made)
    assert (over.score, over.answer, over.reason) == (
        0.0,
        "3 steps",
        "3 model calls, over the limit of 2",
    )


def test_all_of_passes_when_every_criterion_does_and_names_the_failed_ones() -> None:
    config = {
        "kind": "all_of",
        "scorers": [
            {"kind": "tool_sequence", "match": "in_order"},
            {"kind": "tool_not_used"},
            {"kind": "max_steps", "limit": 3},
        ],
    }
    expected = {"tool_sequence": ["lookup"], "tool_not_used": ["escalate"]}
    good = score(config, expected, steps("lookup", "refund"))
    assert (good.score, good.reason, good.answer) == (1.0, None, "lookup → refund")
    bad = score(config, expected, steps("lookup", "escalate", "refund"))
    assert bad.score == 0.0
    assert bad.reason == (
        "failed: tool_not_used (called: escalate); max_steps (4 model calls, over the limit of 3)"
    )
    assert needs_expected(CONFIG.validate_python(config))


def test_all_of_with_partial_credit_scores_the_lowest_member() -> None:
    config = {
        "kind": "all_of",
        "scorers": [
            {"kind": "tool_sequence", "partial": "edit_distance"},
            {"kind": "max_steps", "limit": 9},
        ],
    }
    # [a b c] vs [a c]: 1 - 1/3 (see above); max_steps passes with 1.
    assert score(config, ["a", "b", "c"], steps("a", "c")).score == pytest.approx(2 / 3)


def test_a_malformed_expected_sequence_is_a_user_error() -> None:
    with pytest.raises(UserError, match="must be a list of calls"):
        score({"kind": "tool_sequence"}, "lookup", steps())
    with pytest.raises(UserError, match=r"tool_sequence\[1\] must be a tool name"):
        score({"kind": "tool_sequence"}, ["a", {"tool": "b"}], steps())
    with pytest.raises(UserError, match="not a valid JSON schema"):
        score({"kind": "tool_sequence"}, [{"name": "a", "input_schema": {"type": 3}}], steps())


def test_json_subset() -> None:
    assert json_subset({"a": 1}, {"a": 1, "b": 2})
    assert not json_subset({"a": 1, "c": 3}, {"a": 1})
    assert json_subset({"a": {"b": [1, {"c": 2}]}}, {"a": {"b": [1, {"c": 2, "d": 0}]}})
    assert not json_subset([1], [1, 2])  # lists compare element by element, same length
    assert not json_subset(True, 1) and not json_subset(1, True)
    assert json_subset(1, 1.0)


def test_expected_trajectories_read_as_arrows_in_reports() -> None:
    shown = show_expected(
        {"tool_sequence": ["lookup_order", {"name": "issue_refund", "input": {"order_id": "A1"}}]}
    )
    assert shown == "lookup_order → issue_refund(order_id='A1')"
    assert show_expected({"tool_sequence": [], "tool_not_used": ["x"]}) == (
        "(no tool calls); tool_not_used: ['x']"
    )
    assert show_expected("billing") == "billing"
