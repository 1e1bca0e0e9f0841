"""Pairing two runs case by case, the sign test in words, and provenance warnings."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import sha

from evalgate.analysis.compare import compare_runs, read_sign_test
from evalgate.runs.schema import CaseResult, Run

CaseFactory = Callable[..., CaseResult]
RunFactory = Callable[..., Run]


def pair(
    make_case: CaseFactory,
    make_run: RunFactory,
    outcomes: dict[str, tuple[bool, bool]],
) -> tuple[Run, Run]:
    """Runs A (v1) and B (v2) over the same cases; ``outcomes`` says right in A, right in B."""
    a_cases, b_cases = [], []
    for case_id, (a_right, b_right) in outcomes.items():
        a_cases.append(make_case(case_id, "booking", "booking" if a_right else "quote"))
        b_cases.append(make_case(case_id, "booking", "booking" if b_right else "status"))
    return make_run(a_cases), make_run(b_cases, prompt={"name": "v2"})


def counts(fixed: int, broken: int, right: int = 0, wrong: int = 0) -> dict[str, tuple[bool, bool]]:
    plan = [(False, True)] * fixed + [(True, False)] * broken
    plan += [(True, True)] * right + [(False, False)] * wrong
    return {f"c{i:03d}": outcome for i, outcome in enumerate(plan)}


def test_pairs_are_fixed_broken_right_in_both_or_wrong_in_both(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    a, b = pair(make_case, make_run, counts(fixed=3, broken=1, right=5, wrong=2))
    cmp = compare_runs(a, b)
    assert (cmp.a, cmp.b, cmp.a_prompt, cmp.b_prompt) == (a.name, b.name, "v1", "v2")
    assert [r.id for r in cmp.fixed] == ["c000", "c001", "c002"]
    assert [r.id for r in cmp.broken] == ["c003"]
    assert cmp.both_right == 5
    assert [r.id for r in cmp.both_wrong] == ["c009", "c010"]
    assert cmp.paired == 11
    row = cmp.fixed[0]
    assert (row.expected, row.a_answer, row.b_answer) == ("booking", "quote", "booking")
    assert row.message == "Can I book my bike in for a service on Tuesday?"
    assert cmp.warnings == []


def test_the_sign_test_uses_fixed_and_broken_only(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    # From the issue: exact two-sided sign test for 18 fixed and 0 broken is 2 * (1/2)^18
    # = 7.63e-06; the 40 unchanged cases do not enter it.
    a, b = pair(make_case, make_run, counts(fixed=18, broken=0, right=30, wrong=10))
    cmp = compare_runs(a, b)
    assert cmp.p_value == pytest.approx(2 * 0.5**18, rel=1e-9)
    assert cmp.p_value == pytest.approx(7.63e-06, rel=1e-3)
    assert "B fixed 18 and broke 0 of the 18 cases that changed" in cmp.reading
    assert "p = 7.6e-06" in cmp.reading
    assert "B is better" in cmp.reading


@pytest.mark.parametrize(
    ("fixed", "broken", "p", "words"),
    [
        # 2 * (1/2)^5 = 0.0625 (from the issue): not enough to tell.
        (5, 0, 0.0625, "cannot tell them apart"),
        # 2 * (1/2)^10 = 0.001953125: B broke more than chance would.
        (0, 10, 2 / 1024, "B is worse"),
        # 2 * P(X <= 1 | n = 4, 1/2) = 2 * (1 + 4) / 16 = 0.625.
        (3, 1, 0.625, "cannot tell them apart"),
        (0, 0, 1.0, "No paired case changed outcome"),
    ],
)
def test_the_sign_test_in_words(
    make_case: CaseFactory,
    make_run: RunFactory,
    fixed: int,
    broken: int,
    p: float,
    words: str,
) -> None:
    a, b = pair(make_case, make_run, counts(fixed=fixed, broken=broken, right=3))
    cmp = compare_runs(a, b)
    assert cmp.p_value == pytest.approx(p)
    assert words in cmp.reading


def test_the_reading_rounds_p_to_two_significant_digits() -> None:
    assert "p = 0.0625" not in read_sign_test(5, 0, 0.0625)
    assert "p = 0.062" in read_sign_test(5, 0, 0.0625)


def test_cases_in_one_run_only_are_counted_and_listed(
    make_case: CaseFactory, make_run: RunFactory
) -> None:
    a = make_run([make_case("shared"), make_case("gone-1"), make_case("gone-2")])
    b = make_run([make_case("new"), make_case("shared")], prompt={"name": "v2"})
    cmp = compare_runs(a, b)
    assert cmp.only_a == ["gone-1", "gone-2"]
    assert cmp.only_b == ["new"]
    assert cmp.paired == 1


def test_edited_cases_are_left_out_and_listed(make_case: CaseFactory, make_run: RunFactory) -> None:
    a = make_run([make_case("same"), make_case("edited", "booking", "quote")])
    b = make_run(
        [make_case("same"), make_case("edited", message="Can I book for Wednesday instead?")],
        prompt={"name": "v2"},
    )
    cmp = compare_runs(a, b)
    # Wrong in A and right in B, but not the same case: not a fix.
    assert cmp.edited == ["edited"]
    assert cmp.fixed == []
    assert cmp.paired == 1


def test_errors_are_left_out_and_listed(make_case: CaseFactory, make_run: RunFactory) -> None:
    a = make_run(
        [make_case("ok"), make_case("err-a", error="x"), make_case("err-b", "booking", "quote")]
    )
    b = make_run(
        [make_case("ok"), make_case("err-a"), make_case("err-b", error="timeout")],
        prompt={"name": "v2"},
    )
    cmp = compare_runs(a, b)
    assert cmp.errored == ["err-a", "err-b"]
    assert (cmp.fixed, cmp.broken, cmp.both_right) == ([], [], 1)


def test_repeats_pass_at_half_or_more(make_case: CaseFactory, make_run: RunFactory) -> None:
    a = make_run([make_case("c", "booking", ["quote", "quote", "booking"])], repeats=3)
    b = make_run(
        [make_case("c", "booking", ["booking", "quote", "booking"])],
        repeats=3,
        prompt={"name": "v2"},
    )
    # 1/3 is a fail, 2/3 a pass: fixed.
    assert [r.id for r in compare_runs(a, b).fixed] == ["c"]


# ------------------------------------------------------------------------------------------
# Provenance warnings: what differs besides the prompt, and what to do about it
# ------------------------------------------------------------------------------------------


def warnings_for(make_run: RunFactory, **b_overrides: object) -> list[str]:
    return compare_runs(make_run(), make_run(**b_overrides)).warnings


def test_no_warnings_when_only_the_prompt_differs(make_run: RunFactory) -> None:
    assert warnings_for(make_run, prompt={"name": "v2"}) == []


def test_same_prompt_name_different_text_is_a_warning(make_run: RunFactory) -> None:
    [warning] = warnings_for(make_run, prompt={"name": "v1", "sha256": sha("edited v1")})
    assert "both runs are of prompt 'v1' but its text differs" in warning
    assert sha("edited v1")[:12] in warning
    assert "name versions apart" in warning


def test_different_case_files_are_a_warning_naming_them(make_run: RunFactory) -> None:
    [warning] = warnings_for(
        make_run,
        cases_sha256=sha("other cases"),
        case_files={"cases.jsonl": sha("edited"), "more.jsonl": sha("more")},
    )
    assert "the case files differ between the runs (cases.jsonl, more.jsonl)" in warning
    assert "only cases with the same id and content are paired" in warning


def test_a_different_model_is_a_warning(make_run: RunFactory) -> None:
    [warning] = warnings_for(make_run, model={"backend": "anthropic", "name": "claude-haiku-4-5"})
    assert "different models (fake/fake-classifier vs anthropic/claude-haiku-4-5)" in warning


def test_different_model_settings_are_a_warning(make_run: RunFactory) -> None:
    [warning] = warnings_for(make_run, model={"max_tokens": 1024})
    assert "different model settings" in warning


def test_a_different_scorer_is_a_warning(make_run: RunFactory) -> None:
    [warning] = warnings_for(make_run, scorer={"kind": "exact"}, scorer_sha256=sha("exact"))
    assert "scored differently" in warning


def test_incomplete_runs_are_warnings(make_case: CaseFactory, make_run: RunFactory) -> None:
    errored = make_run([make_case("a", error="x"), make_case("b")])
    stopped = make_run(interrupted=True, prompt={"name": "v2"})
    warnings = compare_runs(errored, stopped).warnings
    assert warnings == [
        "run A is incomplete (1 of 2 cases errored): re-run it before trusting the comparison",
        "run B is incomplete (0 of 2 cases errored, interrupted): re-run it before trusting "
        "the comparison",
    ]


def test_a_row_shows_every_repeats_answer(make_case: CaseFactory, make_run: RunFactory) -> None:
    # A passed 2 of 3 repeats, B none: the first repeat alone showed both as answering "quote".
    a = make_run([make_case("c1", "booking", ["quote", "booking", "booking"])])
    b = make_run([make_case("c1", "booking", ["quote"] * 3)], prompt={"name": "v2"})
    [row] = compare_runs(a, b).broken
    assert (row.a_answer, row.b_answer) == ("booking (2 of 3), quote (1 of 3)", "quote")
