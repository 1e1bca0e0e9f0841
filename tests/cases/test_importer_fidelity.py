"""Foreign case files read as their own tools read them: promptfoo's assertion values rendered
with the test's vars (and those vars kept out of the model's input), ``$ref`` assertion
templates, defaultTest merged as promptfoo's evaluator merges it, YAML 1.2 values, file://
references kept inside the repository; Inspect's CSV choices and stripped targets; OpenAI
evals' system-only and few-shot samples; empty answers and object inputs refused; the field
options on ``cases_format``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalgate.cases.importers import Conversion, convert
from evalgate.config.load import load_config
from evalgate.errors import CaseFileError, UserError
from evalgate.running.suite import load_suite_cases


def records(conversion: Conversion) -> list[dict[str, Any]]:
    return [r for _, r in conversion.records]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    return tmp_path / "repo"


# ------------------------------------------------------------------------------------------
# promptfoo: assertion values rendered with the test's vars
# ------------------------------------------------------------------------------------------


def test_a_templated_default_assertion_is_rendered_per_test_and_its_var_is_not_input(
    repo: Path,
) -> None:
    # promptfoo's examples/mmlu shape: the answer column is read by the assertion only.
    write(repo, "prompt.txt", "Question: {{question}}\nA) {{A}}\nB) {{B}}\nAnswer:")
    write(
        repo,
        "tests.csv",
        "question,A,B,answer\nWhat is 2+2?,3,4,B\nCapital of France?,Paris,Rome,A\n",
    )
    config = write(
        repo,
        "promptfooconfig.yaml",
        "prompts: [file://prompt.txt]\n"
        "defaultTest:\n  assert:\n    - {type: equals, value: '{{answer}}'}\n"
        "tests: file://tests.csv\n",
    )
    conversion = convert("promptfoo", config)
    got = records(conversion)
    assert [r["expected"] for r in got] == ["B", "A"]  # not the literal '{{answer}}'
    assert all("answer" not in r for r in got)
    assert conversion.inputs == ["question", "A", "B"]


def test_promptfoo_evaluator_case_expected_from_a_var(repo: Path) -> None:
    # promptfoo's own evaluator test: vars expectedHelloWorld, equals '{{expectedHelloWorld}}'.
    config = write(
        repo,
        "promptfooconfig.yaml",
        "prompts: ['Say {{ greeting }}']\n"
        "tests:\n"
        "  - vars: {greeting: hello, expectedHelloWorld: Hello World}\n"
        "    assert: [{type: equals, value: '{{expectedHelloWorld}}'}]\n"
        "  - vars: {greeting: hi, expectedHelloWorld: Hi World}\n"
        "    assert: [{type: equals, value: '{{expectedHelloWorld}}'}]\n",
    )
    got = records(convert("promptfoo", config))
    assert [(r["greeting"], r["expected"]) for r in got] == [
        ("hello", "Hello World"),
        ("hi", "Hi World"),
    ]
    assert all("expectedHelloWorld" not in r for r in got)


def test_a_rubric_reaches_the_judge_rendered(repo: Path) -> None:
    config = write(
        repo,
        "promptfooconfig.yaml",
        "prompts: ['Write about {{topic}}']\n"
        "tests:\n"
        "  - vars: {topic: bikes, customer_message: 'my chain broke'}\n"
        "    assert:\n"
        "      - {type: llm-rubric, value: 'Is about {{topic}} and answers {{customer_message}}'}\n"
        "      - {type: contains-all, value: ['{{topic}}', 'x']}\n",
    )
    got = records(convert("promptfoo", config, scorer_kind="judge"))
    assert got[0]["expected"] == "Is about bikes and answers my chain broke"
    # customer_message: read by the rubric only, so not sent; topic: the prompt reads it.
    assert "customer_message" not in got[0]
    assert got[0]["topic"] == "bikes"
    contains = records(convert("promptfoo", config, scorer_kind="contains"))
    assert contains[0]["expected"] == ["bikes", "x"]  # each string of a list rendered


def test_an_undefined_var_renders_empty_as_in_nunjucks(repo: Path) -> None:
    config = write(
        repo,
        "t.yaml",
        "- vars: {q: a}\n  assert: [{type: contains, value: 'x{{missing}}y'}]\n",
    )
    assert records(convert("promptfoo", config))[0]["expected"] == "xy"


def test_assertion_templates_are_resolved_through_ref(repo: Path) -> None:
    # promptfoo's examples/simple-test shape.
    config = write(
        repo,
        "promptfooconfig.yaml",
        "prompts: ['{{q}}']\n"
        "assertionTemplates:\n"
        "  mentions: {type: icontains, value: 'mental health'}\n"
        "tests:\n"
        "  - vars: {q: a}\n    assert: [{$ref: '#/assertionTemplates/mentions'}]\n"
        "  - vars: {q: b}\n    assert: [{$ref: '#/assertionTemplates/mentions'}]\n",
    )
    conversion = convert("promptfoo", config)
    assert [r["expected"] for r in records(conversion)] == ["mental health"] * 2
    assert "config key 'assertionTemplates'" not in conversion.notes.unmapped


def test_a_ref_that_names_nothing_is_one_line_with_the_test(repo: Path) -> None:
    config = write(
        repo,
        "promptfooconfig.yaml",
        "tests:\n  - vars: {q: a}\n    assert: [{$ref: '#/assertionTemplates/nope'}]\n",
    )
    with pytest.raises(CaseFileError) as caught:
        convert("promptfoo", config)
    assert caught.value.where == f"{config}:2"
    assert "names nothing" in str(caught.value)


def test_default_test_is_merged_as_promptfoo_merges_it(repo: Path) -> None:
    # prepareTestCaseForEval: defaultTest's asserts first unless options.disableDefaultAsserts;
    # vars and metadata under the test's own; the description is the test's only.
    config = write(
        repo,
        "promptfooconfig.yaml",
        "prompts: ['{{q}} {{lang}}']\n"
        "defaultTest:\n"
        "  description: shared\n"
        "  vars: {lang: en}\n"
        "  metadata: {category: base, owner: x}\n"
        "  assert: [{type: contains, value: default}]\n"
        "tests:\n"
        "  - vars: {q: a}\n    metadata: {category: own}\n"
        "    assert: [{type: contains, value: own}]\n"
        "  - vars: {q: b, lang: fr}\n    options: {disableDefaultAsserts: true}\n"
        "    assert: [{type: contains, value: only}]\n",
    )
    got = records(convert("promptfoo", config))
    assert got[0]["expected"] == ["default", "own"]
    assert got[0]["category"] == "own" and got[0]["metadata"] == {"owner": "x"}
    assert "description" not in got[0]
    assert got[1]["expected"] == "only"
    assert (got[0]["lang"], got[1]["lang"]) == ("en", "fr")


def test_promptfoo_yaml_values_stay_the_strings_the_file_shows(repo: Path) -> None:
    config = write(
        repo,
        "t.yaml",
        "- vars: {body: Yes, country: NO}\n  assert: [{type: equals, value: Yes}]\n",
    )
    got = records(convert("promptfoo", config))[0]
    assert (got["body"], got["country"], got["expected"]) == ("Yes", "NO", "Yes")


def test_an_object_var_is_refused_with_its_line(repo: Path) -> None:
    config = write(
        repo,
        "t.yaml",
        "- vars: {q: a}\n  assert: [{type: contains, value: x}]\n"
        "- vars: {q: {text: x}}\n  assert: [{type: contains, value: x}]\n",
    )
    with pytest.raises(CaseFileError) as caught:
        convert("promptfoo", config)
    assert caught.value.where == f"{config}:3"
    assert "object" in str(caught.value)


@pytest.mark.parametrize(
    "ref",
    [
        "file:///{outside}/x.jsonl",
        "file://../outside/x.csv",
        "file://../outside/*.yaml",
        "file://../outside/x.yaml",
    ],
)
def test_tests_files_outside_the_repository_are_refused(repo: Path, ref: str) -> None:
    outside = repo.parent / "outside"
    outside.mkdir()
    write(
        outside, "x.jsonl", '{"vars": {"q": "a"}, "assert": [{"type": "contains", "value": "x"}]}\n'
    )
    write(outside, "x.csv", "q,__expected\na,x\n")
    write(outside, "x.yaml", "- vars: {q: a}\n  assert: [{type: contains, value: x}]\n")
    config = write(repo, "promptfooconfig.yaml", f"tests:\n  - {ref.format(outside=outside)}\n")
    with pytest.raises(CaseFileError) as caught:
        convert("promptfoo", config)
    assert "outside the repository" in str(caught.value)
    assert caught.value.where == f"{config}:2"


@pytest.mark.parametrize(
    "config_text",
    [
        "prompts: [file://../outside/p.txt]\ntests:\n  - vars: {q: a}\n",
        "tests:\n  - vars: {q: file://../outside/p.txt}\n    assert: [{type: contains, value: x}]\n",
        "tests:\n  - vars: {q: a}\n    assert: [{type: contains, value: file://../outside/p.txt}]\n",
        "defaultTest: file://../outside/d.yaml\ntests:\n  - vars: {q: a}\n",
    ],
    ids=["prompt", "var", "assertion", "defaultTest"],
)
def test_every_file_reference_stays_inside_the_repository(repo: Path, config_text: str) -> None:
    outside = repo.parent / "outside"
    write(outside, "p.txt", "secret")
    write(outside, "d.yaml", "assert: [{type: contains, value: x}]\n")
    config = write(repo, "promptfooconfig.yaml", config_text)
    with pytest.raises(CaseFileError) as caught:
        convert("promptfoo", config)
    assert "outside the repository" in str(caught.value)


# ------------------------------------------------------------------------------------------
# Inspect, OpenAI evals
# ------------------------------------------------------------------------------------------


def test_inspect_csv_choices_are_sent_and_the_letter_scored_exactly(tmp_path: Path) -> None:
    # Inspect's samples-mcq.csv shape: choices in one column, split at commas (read_choices).
    path = write(
        tmp_path,
        "samples-mcq.csv",
        'input,choices,target\n"Which is a fruit?","apple, stone, iron",A\n'
        '"Which is a metal?","apple, stone, iron",C\n',
    )
    conversion = convert("inspect", path)
    got = records(conversion)
    assert conversion.plan.kind == "exact"
    assert got[0]["choices"] == "A) apple\nB) stone\nC) iron"
    assert [r["expected"] for r in got] == ["A", "C"]


def test_inspect_targets_are_compared_stripped(tmp_path: Path) -> None:
    # popularity.jsonl read with --target-field: " Yes" is Inspect's " Yes".strip() == "Yes".
    path = write(
        tmp_path, "p.jsonl", '{"question": "Is it?", "answer_matching_behavior": " Yes"}\n'
    )
    got = records(
        convert(
            "inspect",
            path,
            rename={"input": "question", "target": "answer_matching_behavior"},
        )
    )
    assert got[0]["expected"] == "Yes"


def test_openai_evals_system_only_samples_are_the_question(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "logic.jsonl",
        json.dumps({"input": [{"role": "system", "content": "If A then B. A. So?"}], "ideal": "B"})
        + "\n",
    )
    conversion = convert("openai-evals", path)
    assert records(conversion)[0]["input"] == "If A then B. A. So?"
    assert conversion.notes.unmapped["sample of system messages only"].count == 1


def test_openai_evals_few_shot_turns_keep_their_roles(tmp_path: Path) -> None:
    sample = {
        "input": [
            {"role": "system", "content": "Translate."},
            {"role": "system", "name": "example_user", "content": "chat"},
            {"role": "system", "name": "example_assistant", "content": "cat"},
            {"role": "user", "content": "chien"},
        ],
        "ideal": "dog",
    }
    path = write(tmp_path, "fewshot.jsonl", json.dumps(sample) + "\n")
    conversion = convert("openai-evals", path)
    record = records(conversion)[0]
    assert record["input"] == "chien"
    assert record["messages"] == [
        {"role": "user", "content": "chat"},
        {"role": "assistant", "content": "cat"},
    ]
    # The few-shot turns are not folded into the system message the hint asks to save.
    assert any(h.endswith("Translate.") for h in conversion.source.hints)


def test_an_empty_expected_answer_is_refused_with_its_line(tmp_path: Path) -> None:
    from evalgate.cases.importers import validate
    from evalgate.config.models import Fields

    path = write(tmp_path, "s.jsonl", '{"input": "a", "ideal": "b"}\n{"input": "c", "ideal": ""}\n')
    conversion = convert("openai-evals", path)
    with pytest.raises(CaseFileError) as caught:
        validate(conversion, Fields(), need_expected=True)
    assert caught.value.where == f"{path}:2"
    assert "empty expected answer" in str(caught.value)


def test_an_unknown_field_error_lists_the_fields_found(tmp_path: Path) -> None:
    path = write(tmp_path, "s.jsonl", '{"question": "a", "answer": "b"}\n')
    with pytest.raises(UserError) as caught:
        convert("inspect", path, rename={"input": "prompt"})
    assert "question, answer" in str(caught.value)


def test_field_options_work_on_cases_format_too(tmp_path: Path) -> None:
    write(tmp_path, "prompts/v1.txt", "Answer.")
    write(tmp_path, "data.jsonl", '{"question": "2+2?", "answer": " 4"}\n')
    write(
        tmp_path,
        "evalgate.yml",
        "suites:\n  s:\n    prompts: [prompts/v1.txt]\n    cases: [data.jsonl]\n"
        "    cases_format: inspect\n"
        "    cases_format_fields: {input: question, target: answer}\n"
        "    scorer: {kind: contains}\n",
    )
    loaded = load_config(tmp_path / "evalgate.yml")
    cases = load_suite_cases(loaded, loaded.config.suites["s"]).cases
    assert [(c.input["input"], c.expected) for c in cases] == [("2+2?", "4")]


# ------------------------------------------------------------------------------------------
# Empty expected answers: an error naming file and line, in evalgate's files and every importer
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("own.jsonl", '{"id": "a", "expected": "b"}\n{"id": "c", "expected": ""}\n', 2),
        ("own.jsonl", '{"id": "a", "expected": "b"}\n{"id": "c", "expected": "  "}\n', 2),
        ("own.jsonl", '{"id": "a", "expected": ["b", ""]}\n', 1),
        ("own.yaml", "- id: a\n  expected: b\n- id: c\n  expected: ''\n", 3),
    ],
)
def test_an_empty_expected_answer_in_evalgates_own_files_names_its_line(
    tmp_path: Path, name: str, text: str, line: int
) -> None:
    from evalgate.cases.read import load_case_file
    from evalgate.config.models import Fields

    path = write(tmp_path, name, text)
    with pytest.raises(CaseFileError) as caught:
        load_case_file(path, Fields())
    assert caught.value.where == f"{path}:{line}"
    assert "empty expected answer" in str(caught.value)


@pytest.mark.parametrize(
    ("format", "name", "text", "line"),
    [
        (
            "promptfoo",
            "promptfooconfig.yaml",
            "prompts: ['{{q}}']\ntests:\n  - vars: {q: a}\n    assert: [{type: equals, value: b}]\n"
            "  - vars: {q: c}\n    assert: [{type: equals, value: ''}]\n",
            5,
        ),
        (
            "promptfoo",
            "promptfooconfig.yaml",
            "prompts: ['{{q}}']\ntests:\n  - vars: {q: c}\n    assert: [{type: icontains, value: ''}]\n",
            3,
        ),
        ("inspect", "s.jsonl", '{"input": "a", "target": "b"}\n{"input": "c", "target": " "}\n', 2),
        (
            "openai-evals",
            "s.jsonl",
            '{"input": "a", "ideal": "b"}\n{"input": "c", "ideal": ""}\n',
            2,
        ),
        # One empty alternative among the acceptable answers would match every reply.
        ("openai-evals", "s.jsonl", '{"input": "a", "ideal": ["b", ""]}\n', 1),
        (
            "langfuse",
            "items.jsonl",
            '{"id": "1", "input": "a", "expectedOutput": "b"}\n'
            '{"id": "2", "input": "c", "expectedOutput": ""}\n',
            2,
        ),
    ],
)
def test_an_empty_expected_answer_from_every_importer_names_its_line(
    repo: Path, format: str, name: str, text: str, line: int
) -> None:
    from evalgate.cases.importers import validate
    from evalgate.config.models import Fields

    path = write(repo, name, text)
    with pytest.raises(CaseFileError) as caught:
        conversion = convert(format, path)
        validate(conversion, Fields(input=conversion.inputs), need_expected=True)
    assert caught.value.where == f"{path}:{line}"
    assert "empty" in str(caught.value)


def test_an_empty_inspect_target_is_inspects_own_no_target(tmp_path: Path) -> None:
    """Inspect's Sample.target defaults to "": an empty target is a sample without one (for a
    model-graded scorer), kept out of scoring and counted, as a CSV's empty __expected is for
    promptfoo (no assertion); a target of only spaces is refused above."""
    path = write(
        tmp_path, "s.jsonl", '{"input": "a", "target": "b"}\n{"input": "c", "target": ""}\n'
    )
    conversion = convert("inspect", path)
    assert len(conversion.records) == 1 and len(conversion.unscored) == 1
