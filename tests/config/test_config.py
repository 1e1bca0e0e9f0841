"""evalgate.yml: validation with pydantic, and errors that name file, line, key path, what was
found and what is allowed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import EXAMPLE, ROOT

from evalgate.config.load import load_config, parse_config
from evalgate.config.models import Config, ExactScorer, LabelScorer
from evalgate.errors import ConfigError

# Line numbers in the tests below count lines of this text (line 1 is "version: 1").
MINIMAL = """\
version: 1
suites:
  demo:
    prompts: prompts/*.txt
    cases: cases.jsonl
    model:
      backend: fake
      name: fake-classifier
      max_tokens: 64
    scorer:
      kind: label
      field: category
"""


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    """Write evalgate.yml (MINIMAL unless given) with two prompt files and a case file."""

    def write(text: str = MINIMAL) -> Path:
        (tmp_path / "prompts").mkdir(exist_ok=True)
        (tmp_path / "prompts" / "v1.txt").write_text("Classify.\n")
        (tmp_path / "prompts" / "v2.txt").write_text("Classify as JSON.\n")
        (tmp_path / "cases.jsonl").write_text('{"id": "a", "category": "x"}\n')
        path = tmp_path / "evalgate.yml"
        path.write_text(text)
        return path

    return write


def config_error(text: str, path: Path = Path("evalgate.yml")) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, path)
    return str(caught.value)


# ------------------------------------------------------------------------------------------
# Valid configs
# ------------------------------------------------------------------------------------------


def test_the_example_config_loads() -> None:
    loaded = load_config(EXAMPLE / "evalgate.yml")
    name, suite = loaded.suite(None)
    assert name == "bike-shop"
    assert suite.model.backend == "fake"
    assert isinstance(suite.scorer, LabelScorer)
    assert suite.scorer.field == "category"
    assert loaded.root == EXAMPLE.resolve()
    assert loaded.state_dir == EXAMPLE.resolve() / ".evalgate"


def test_minimal_config_gets_defaults() -> None:
    config = parse_config(MINIMAL, Path("evalgate.yml"))
    suite = config.suites["demo"]
    # A single string is one pattern.
    assert suite.prompts == ["prompts/*.txt"]
    assert suite.cases == ["cases.jsonl"]
    assert suite.concurrency == 16
    assert suite.max_error_share == 0.02
    assert suite.fields.id == "id"
    assert suite.fields.expected == "expected"
    assert config.state_dir == ".evalgate"


def test_the_scorer_kind_picks_the_scorer_model() -> None:
    text = MINIMAL.replace("kind: label\n      field: category", "kind: exact\n      strip: false")
    suite = parse_config(text, Path("evalgate.yml")).suites["demo"]
    assert isinstance(suite.scorer, ExactScorer)
    assert suite.scorer.strip is False


def test_prompt_files_are_versions_by_stem(write_config: Callable[..., Path]) -> None:
    loaded = load_config(write_config())
    _, suite = loaded.suite("demo")
    versions = loaded.prompt_files(suite)
    assert sorted(versions) == ["v1", "v2"]
    assert versions["v1"].name == "v1.txt"


# ------------------------------------------------------------------------------------------
# Errors: file, line, key path, found, allowed
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where", "key_path", "allowed"),
    [
        (MINIMAL + "colour: red\n", "evalgate.yml:13", "colour", ["version", "suites"]),
        (
            MINIMAL.replace("    cases: cases.jsonl\n", "    cases: cases.jsonl\n    casez: x\n"),
            "evalgate.yml:6",
            "suites.demo.casez",
            ["prompts", "cases", "scorer"],
        ),
        (
            MINIMAL.replace("      max_tokens: 64\n", "      max_tokens: 64\n      top_p: 1\n"),
            "evalgate.yml:10",
            "suites.demo.model.top_p",
            ["backend", "name", "max_tokens"],
        ),
        (
            MINIMAL + "      strict: true\n",
            "evalgate.yml:13",
            "suites.demo.scorer.strict",
            # The label scorer's own keys: pydantic's union tag must not hide them.
            ["kind", "field"],
        ),
    ],
    ids=["top", "suite", "model", "scorer"],
)
def test_an_unknown_key_is_an_error_that_says_what_is_allowed(
    text: str, where: str, key_path: str, allowed: list[str]
) -> None:
    message = config_error(text)
    assert message.startswith(f"{where}: {key_path}: unknown key")
    listed = message.split("allowed here:")[1]
    for key in allowed:
        assert key in listed


def test_a_wrong_value_names_what_was_found() -> None:
    message = config_error(MINIMAL.replace("max_tokens: 64", "max_tokens: -1"))
    assert message.startswith("evalgate.yml:9: suites.demo.model.max_tokens:")
    assert "greater than 0" in message
    assert "found -1" in message


def test_a_wrong_type_names_what_was_found() -> None:
    text = MINIMAL.replace(
        "    cases: cases.jsonl\n", "    cases: cases.jsonl\n    concurrency: lots\n"
    )
    message = config_error(text)
    assert message.startswith("evalgate.yml:6: suites.demo.concurrency:")
    assert "found 'lots'" in message


def test_a_missing_key_is_named() -> None:
    message = config_error(MINIMAL.replace("    cases: cases.jsonl\n", ""))
    assert "suites.demo.cases: required key is missing" in message
    assert message.startswith("evalgate.yml:")


def test_an_unknown_scorer_kind_lists_the_kinds() -> None:
    message = config_error(MINIMAL.replace("kind: label", "kind: fuzzy"))
    assert message.startswith("evalgate.yml:10: suites.demo.scorer:")
    assert "'fuzzy'" in message
    assert "scorer kinds: label, exact, contains, regex, json_schema, python" in message


def test_a_scorer_needs_exactly_one_schema() -> None:
    text = MINIMAL.replace("kind: label\n      field: category", "kind: json_schema")
    assert "give exactly one of 'schema' or 'schema_file'" in config_error(text)


def test_a_python_scorer_needs_module_and_function() -> None:
    text = MINIMAL.replace("kind: label\n      field: category", "kind: python\n      function: x")
    message = config_error(text)
    assert "suites.demo.scorer.function" in message
    assert "found 'x'" in message


def test_the_version_must_be_1() -> None:
    assert config_error(MINIMAL.replace("version: 1", "version: 2")).startswith(
        "evalgate.yml:1: version:"
    )


def test_a_config_needs_a_suite() -> None:
    assert "suites" in config_error("version: 1\nsuites: {}\n")


def test_invalid_yaml_names_the_line() -> None:
    message = config_error(MINIMAL + "  broken: [\n")
    assert message.startswith("evalgate.yml:")
    assert "invalid YAML" in message


@pytest.mark.parametrize("text", ["", "- a list\n", "just text\n"])
def test_a_config_must_be_a_mapping(text: str) -> None:
    assert "must be a mapping" in config_error(text)


def test_errors_name_the_file_they_came_from(write_config: Callable[..., Path]) -> None:
    path = write_config(MINIMAL + "colour: red\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}:13: colour: unknown key")


def test_a_missing_config_file_says_how_to_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"does not exist.*evalgate demo"):
        load_config(tmp_path / "evalgate.yml")


def test_a_directory_is_not_a_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)


def test_only_one_error_is_shown_with_a_count_of_the_rest() -> None:
    message = config_error(MINIMAL + "colour: red\nshape: round\n")
    assert "(and 1 more)" in message


def test_every_model_forbids_unknown_keys() -> None:
    # Walk every model reachable from Config: none may accept keys it does not know.
    seen: set[type] = set()
    todo: list[type] = [Config]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        assert model.model_config.get("extra") == "forbid", model.__name__
        for field in model.model_fields.values():
            stack = [field.annotation]
            while stack:
                annotation = stack.pop()
                if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                    todo.append(annotation)
                stack.extend(getattr(annotation, "__args__", ()))
    assert len(seen) > 5


# ------------------------------------------------------------------------------------------
# Suites, globs, prompt versions
# ------------------------------------------------------------------------------------------


def test_several_suites_need_a_name(write_config: Callable[..., Path]) -> None:
    two = MINIMAL + MINIMAL.split("suites:\n")[1].replace("  demo:", "  other:")
    loaded = load_config(write_config(two))
    with pytest.raises(ConfigError, match=r"defines 2 suites.*--suite \(demo, other\)"):
        loaded.suite(None)
    assert loaded.suite("other")[0] == "other"
    with pytest.raises(ConfigError, match=r"no suite named 'nope'.*demo, other"):
        loaded.suite("nope")


def test_a_pattern_that_matches_nothing_is_named(write_config: Callable[..., Path]) -> None:
    loaded = load_config(write_config(MINIMAL.replace("cases.jsonl", "data/*.jsonl")))
    _, suite = loaded.suite("demo")
    with pytest.raises(ConfigError, match=r"case file 'data/\*.jsonl' matches no file"):
        loaded.expand(suite.cases, "case file")


def test_two_prompt_files_with_one_stem_are_an_error(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    path = write_config(MINIMAL.replace("prompts/*.txt", "[prompts/*.txt, other/*.md]"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "v1.md").write_text("Another v1.\n")
    loaded = load_config(path)
    with pytest.raises(ConfigError, match="share the version name 'v1'"):
        loaded.prompt_files(loaded.suite("demo")[1])


# ------------------------------------------------------------------------------------------
# A typo reads as a typo, and pydantic's own phrasing never reaches the user.
# ------------------------------------------------------------------------------------------

PYDANTIC_PHRASES = (
    "Input should",
    "Input tag",
    "Field required",
    "Extra inputs",
    "Value error",
    "discriminator",
    "Unable to extract",
    "valid integer",
)


def test_a_misspelt_required_key_is_an_unknown_key_with_a_suggestion() -> None:
    message = config_error(MINIMAL.replace("    scorer:", "    scorrer:"))
    assert message.startswith(
        "evalgate.yml:10: suites.demo.scorrer: unknown key; did you mean scorer?"
    )
    # The scorer it leaves missing is the same mistake: not "(and 1 more)".
    assert "more)" not in message
    assert "required key is missing" not in message
    assert "rename it to scorer; allowed here: " in message


def test_a_misspelt_scorer_kind_suggests_the_kind() -> None:
    message = config_error(MINIMAL.replace("kind: label", "kind: lable"))
    assert message.startswith(
        "evalgate.yml:10: suites.demo.scorer: unknown scorer kind 'lable'; did you mean label?"
    )


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("kind: label\n", "", "suites.demo.scorer: needs a kind"),
        ("max_tokens: 64", "max_tokens: lots", "should be a whole number (found 'lots')"),
        ("max_tokens: 64", "max_tokens: -1", "should be greater than 0 (found -1)"),
        ("max_tokens: 64", "max_tokens: 1.5", "should be a whole number (found 1.5)"),
        ("name: fake-classifier", "name: [a, b]", "suites.demo.model.name: should be text"),
        ("    cases: cases.jsonl\n", "    cases: cases.jsonl\n    fields: [a]\n", "a mapping"),
        (
            "    cases: cases.jsonl\n",
            "    cases: cases.jsonl\n    max_error_share: 2\n",
            "should be at most 1.0 (found 2)",
        ),
        ("version: 1", "version: 2", "version: should be 1 (found 2)"),
    ],
)
def test_pydantic_messages_are_rewritten_in_the_house_form(old: str, new: str, says: str) -> None:
    message = config_error(MINIMAL.replace(old, new))
    assert says in message
    for phrase in PYDANTIC_PHRASES:
        assert phrase not in message, message


def test_a_template_syntax_error_points_at_its_line_in_the_config(
    write_config: Callable[..., Path],
) -> None:
    block = MINIMAL + "    template: |\n      <message>\n      {{ message }\n      </message>\n"
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(block))
    message = str(caught.value)
    # MINIMAL is 12 lines; "template: |" is line 13, so the template's second line is 15.
    assert message.startswith(f"{write_config(block)}:15: suites.demo.template: template syntax")
    inline = MINIMAL + '    template: "{{ message }"\n'
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(inline))
    assert str(caught.value).startswith(f"{write_config(inline)}:13: suites.demo.template:")


def test_a_suite_name_may_not_end_in_a_line_break(write_config: Callable[..., Path]) -> None:
    # `$` alone matches before a final newline: the name would carry it into file names, the
    # data branch's paths and log lines.
    text = MINIMAL.replace("  demo:\n", '  "demo\\n":\n')
    with pytest.raises(ConfigError, match="suite name"):
        load_config(write_config(text))


def test_the_judge_labels_stay_inside_the_repository(write_config: Callable[..., Path]) -> None:
    judged = (ROOT / "examples" / "bike-shop" / "judge.yml").read_text(encoding="utf-8")
    assert "labels: judge-labels.jsonl" in judged
    path = write_config(judged.replace("labels: judge-labels.jsonl", "labels: ../outside.jsonl"))
    with pytest.raises(ConfigError, match=r"judge\.labels"):
        load_config(path)


def test_a_program_named_by_path_is_one_of_its_files() -> None:
    from evalgate.config.models import file_arguments

    # A program found on PATH is not the repository's; one named by a path into it is, and an
    # edit of it changes what the results depend on (a judge's identity, a suite's tools).
    assert file_arguments(["python", "judge.py", "--strict"]) == ["judge.py"]
    assert file_arguments(["./judge.sh", "rubric.txt"]) == ["./judge.sh", "rubric.txt"]
    assert file_arguments(["bin/judge"]) == ["bin/judge"]
    assert file_arguments(["/usr/bin/judge", "x.json"]) == ["x.json"]


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["python", "-m", "pkg.app"], "pkg.app"),
        (["uv", "run", "python3", "-u", "-m", "pkg.app", "--fast"], "pkg.app"),
        (["python", "-mpkg.app"], "pkg.app"),
        (["python3", "-um", "pkg"], "pkg"),
        (["/usr/bin/python3.12", "-W", "ignore", "-X", "dev", "-m", "a.b"], "a.b"),
        (["python", "app.py", "-m", "z"], None),  # -m is the script's own option
        (["python", "-c", "import x", "-m", "y"], None),
        (["git", "commit", "-m", "msg"], None),  # not an interpreter
        (["python", "-m", "../x"], None),
    ],
)
def test_the_module_a_python_command_line_runs(argv: list[str], module: str | None) -> None:
    from evalgate.config.load import module_argument

    assert module_argument(argv) == module


def test_a_module_is_its_package_in_the_repository(tmp_path: Path) -> None:
    from evalgate.config.load import module_files

    for name in ("app/__init__.py", "app/answer.py", "app/lib/reply.py", "solo.py", "app/x.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    expected = ["app/__init__.py", "app/answer.py", "app/lib/reply.py"]
    assert sorted(module_files("app.answer", tmp_path)) == expected
    assert module_files("solo", tmp_path) == ["solo.py"]
    assert module_files("json.tool", tmp_path) == []  # the standard library's
