"""How two runs differ besides the prompt: one answer that compare, the gate and the action
each word for their reader."""

from __future__ import annotations

from collections.abc import Callable

from conftest import sha

from evalgate.analysis.provenance import differences
from evalgate.runs.schema import Run

RunFactory = Callable[..., Run]


def test_two_versions_of_one_setup_differ_in_nothing_else(make_run: RunFactory) -> None:
    d = differences(make_run(), make_run(prompt={"name": "v2"}))
    assert d.prompt_edited is None
    assert not d.cases_changed and d.case_files == ()
    assert d.model is None and not d.settings_changed and not d.scorer_changed
    assert d.incomplete == ()


def test_an_edited_prompt_of_one_name_is_told_apart_from_another_version(
    make_run: RunFactory,
) -> None:
    d = differences(make_run(), make_run(prompt={"sha256": sha("edited")}))
    assert d.prompt_edited == (sha("text of prompt v1"), sha("edited"))


def test_other_cases_name_the_files_that_changed(make_run: RunFactory) -> None:
    b = make_run(cases_sha256=sha("other"), case_files={"cases.jsonl": sha("new")})
    d = differences(make_run(), b)
    assert d.cases_changed and d.case_files == ("cases.jsonl",)


def test_a_run_of_part_of_the_same_files_has_the_same_cases(make_run: RunFactory) -> None:
    # `run --limit 20`, a shard or a release (dev and holdout) digests other cases from the
    # same files: compare warned "the case files differ" naming none.
    part = make_run(cases_sha256=sha("twenty of them"), limited_to=20)
    d = differences(make_run(), part)
    assert not d.cases_changed and d.case_files == ()
    # Runs that name no files (results of another harness) are told apart by their cases.
    foreign = make_run(case_files={}, cases_sha256=sha("theirs"))
    assert differences(make_run(case_files={}), foreign).cases_changed


def test_another_model_is_not_also_other_settings(make_run: RunFactory) -> None:
    d = differences(make_run(), make_run(model={"name": "other", "max_tokens": 9}))
    assert d.model == ("fake/fake-classifier", "fake/other")
    assert not d.settings_changed
    d = differences(make_run(), make_run(model={"temperature": 1.0}))
    assert d.model is None and d.settings_changed


def test_scorer_and_incomplete_sides(make_run: RunFactory) -> None:
    d = differences(make_run(scorer_sha256=sha("judge")), make_run(interrupted=True))
    assert d.scorer_changed
    assert d.incomplete == ("B",)
