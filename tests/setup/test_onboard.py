"""`evalgate init` and `evalgate doctor`: init in fresh and existing repositories, what it
refuses, and every doctor finding triggered by breaking an init'd repository one way at a time.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, triage_workspace

from evalgate.cli import main
from evalgate.config.load import load_config
from evalgate.errors import UserError
from evalgate.setup import doctor
from evalgate.setup import init as setup_init

WORKFLOW = Path(".github/workflows/evalgate.yml")
EXAMPLE_WORKFLOW = ROOT / "examples" / "workflows" / "evalgate.yml"


@pytest.fixture(autouse=True)
def not_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def init(repo: Path, *flags: str) -> tuple[int, str, str]:
    return cli("init", "--dir", str(repo), "--yes", *flags)


def findings(repo: Path) -> list[doctor.Finding]:
    return doctor.doctor(repo, repo / "evalgate.yml").findings


def not_ok(repo: Path) -> list[tuple[str, str, str]]:
    return [(f.status, f.check, f.message) for f in findings(repo) if f.status != "ok"]


@pytest.fixture(scope="module")
def initialised(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A fresh copy of a repository init'd with the given backend (made once per backend)."""
    made: dict[str, Path] = {}
    base = tmp_path_factory.mktemp("init")
    counter = iter(range(10_000))

    def get(backend: str = "fake") -> Path:
        if backend not in made:
            repo = base / f"made-{backend}"
            repo.mkdir()
            code, _, err = init(repo, "--backend", backend, "--suite", "main")
            assert code == 0, err
            made[backend] = repo
        copy = base / f"copy-{next(counter)}"
        shutil.copytree(made[backend], copy)
        return copy

    return get


# --------------------------------------------------------------------------- init


def test_init_in_a_fresh_repository_writes_every_file(tmp_path: Path) -> None:
    code, out, err = init(tmp_path, "--suite", "support")
    assert code == 0, err
    for name in ("evalgate.yml", WORKFLOW, "cases.jsonl", "prompts/v1.txt", ".gitignore"):
        assert (tmp_path / name).is_file(), name
    loaded = load_config(tmp_path / "evalgate.yml")
    name, suite = loaded.suite(None)
    assert name == "support"
    assert suite.model.backend == "fake" and suite.scorer.kind == "label"
    assert suite.template == "<message>\n{{ message }}\n</message>\n"
    assert suite.split.holdout_fraction == 0.0  # three cases: no holdout yet
    assert len((tmp_path / "cases.jsonl").read_text(encoding="utf-8").splitlines()) == 3
    assert ".evalgate/" in (tmp_path / ".gitignore").read_text(encoding="utf-8").splitlines()
    steps = re.findall(r"^  \d\. (.*)$", out, re.MULTILINE)
    assert len(steps) == 3, out
    assert "evalgate run v1" in steps[0]
    assert "No secret to add" in steps[1]
    assert "push to main" in steps[2] and "pull request" in steps[2]


def test_the_fresh_result_runs_on_the_fake_backend(initialised: Callable[[str], Path]) -> None:
    repo = initialised("fake")
    code, out, err = cli("run", "v1", "--config", str(repo / "evalgate.yml"), "--no-save")
    assert code == 0, err
    assert "3 cases" in out
    assert re.search(r"Accuracy\s+100\.0%", out), out


@pytest.mark.parametrize("backend", ["fake", "anthropic", "openai"])
def test_doctor_on_the_init_result_is_all_ok(
    backend: str, initialised: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = initialised(backend)
    # The key a run needs is set, as in a shell set up to run the suite.
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, "sk-test")
    code, out, err = cli("doctor", "--dir", str(repo), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["counts"]["warn"] == report["counts"]["FAIL"] == 0, report["findings"]
    checks = " ".join(f["check"] for f in report["findings"])
    for aspect in ("config", "prompts", "ship", "cases", "split", "permissions", "pinning"):
        assert aspect in checks
    for aspect in ("secrets", "baseline", "gitignore", "image"):
        assert aspect in checks


def test_the_workflow_names_the_secret_of_its_backend(initialised: Callable[[str], Path]) -> None:
    anthropic = (initialised("anthropic") / WORKFLOW).read_text(encoding="utf-8")
    assert anthropic.count("anthropic_api_key: ${{ secrets.ANTHROPIC_API_KEY }}") == 3
    openai = yaml.safe_load((initialised("openai") / WORKFLOW).read_text(encoding="utf-8"))
    for job in openai["jobs"].values():
        [step] = [s for s in job["steps"] if s.get("id") == "evalgate"]
        assert step["env"] == {"OPENAI_API_KEY": "${{ secrets.OPENAI_API_KEY }}"}
    fake = (initialised("fake") / WORKFLOW).read_text(encoding="utf-8")
    assert "ANTHROPIC" not in fake and "OPENAI" not in fake


def test_the_workflow_pins_the_actions_the_example_pins(
    initialised: Callable[[str], Path],
) -> None:
    """init's workflow is the copy-paste example with secrets filled in: bump both together."""

    def pinned(path: Path) -> set[str]:
        refs = re.findall(r"uses: (\S+)", path.read_text(encoding="utf-8"))
        return {r for r in refs if "evalgate" not in r}

    assert pinned(initialised("fake") / WORKFLOW) == pinned(EXAMPLE_WORKFLOW)


def test_init_in_an_existing_repository_detects_prompts_and_cases(tmp_path: Path) -> None:
    (tmp_path / "llm" / "prompts").mkdir(parents=True)
    for version in ("2024-01", "2024-06"):
        (tmp_path / "llm" / "prompts" / f"{version}.md").write_text("Route it.\n")
    (tmp_path / "data").mkdir()
    tickets = [
        {"id": f"t{i}", "question": q, "intent": intent}
        for i, (q, intent) in enumerate(
            [
                ("Where is my parcel tracking number", "tracking"),
                ("I want my money back for the broken kettle", "refund"),
                ("Parcel tracking says delivered but nothing came", "tracking"),
            ]
        )
    ]
    text = "".join(json.dumps(t) + "\n" for t in tickets)
    (tmp_path / "data" / "tickets.jsonl").write_text(text)
    (tmp_path / "data" / "notes.txt").write_text("not cases\n")
    asked: list[str] = []
    answers = iter(["", "", "gpt", "anthropic", "", "", "", "", ""])

    def ask(question: str) -> str:
        asked.append(question)
        return next(answers)

    config = tmp_path / "evalgate.yml"
    plan = setup_init.plan_init(tmp_path, config, setup_init.InitOptions(suite="tickets"), ask)
    result = setup_init.write_init(plan, cwd=tmp_path)

    assert asked[0].endswith("[llm/prompts/*.md]: ")
    assert asked[1].endswith("[data/tickets.jsonl]: ")
    assert asked[3].startswith("'gpt' is not one of them.")
    assert asked[4].endswith("[claude-haiku-4-5]: ")
    assert asked[6].endswith("[intent]: ")
    assert asked[7] == "Case field with the id [id]: "
    assert asked[8] == "Case fields the model reads (comma-separated) [question]: "
    suite = load_config(config).config.suites["tickets"]
    assert suite.prompts == ["llm/prompts/*.md"] and suite.cases == ["data/tickets.jsonl"]
    assert suite.fields.expected == "intent" and suite.fields.input == ["question"]
    assert suite.fields.category == "intent"  # the label doubles as the category
    assert suite.model.backend == "anthropic"
    assert [w.split(" ")[0] for w in result.written] == ["evalgate.yml", str(WORKFLOW)]
    assert not (tmp_path / "cases.jsonl").exists() and not (tmp_path / "prompts").exists()
    assert result.version == "2024-06"
    assert result.secrets == ["ANTHROPIC_API_KEY"]
    assert "ANTHROPIC_API_KEY" in result.next_steps[1] and "Settings" in result.next_steps[1]
    assert [f.status for f in findings(tmp_path)].count("FAIL") == 0


def test_init_with_fake_derives_rules_from_existing_cases(tmp_path: Path) -> None:
    cases = [
        {"id": "a", "message": "my invoice is wrong", "category": "billing"},
        {"id": "b", "message": "the app crashed on login", "category": "bug"},
        {"id": "c", "message": "invoice total doubled", "category": "billing"},
    ]
    (tmp_path / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    code, _, err = init(tmp_path)
    assert code == 0, err
    options = load_config(tmp_path / "evalgate.yml").config.suites[tmp_path.name].model.options
    rules = {r["label"]: r["phrases"] for r in options["rules"]["rules"]}
    assert rules == {
        "billing": ["invoice", "doubled", "total", "wrong"],
        "bug": ["crashed", "login"],
    }
    assert (tmp_path / "prompts" / "v1.txt").is_file()  # no prompt yet: the starter
    assert "billing, bug" in (tmp_path / "prompts" / "v1.txt").read_text()


def test_init_refuses_to_overwrite_without_force(initialised: Callable[[str], Path]) -> None:
    repo = initialised("fake")
    (repo / "evalgate.yml").write_text("# mine\n")
    (repo / "cases.jsonl").write_text('{"id": "x", "message": "m", "category": "bug"}\n')
    code, _, err = init(repo)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "evalgate.yml and .github/workflows/evalgate.yml already exist" in err
    assert "--force" in err
    assert (repo / "evalgate.yml").read_text() == "# mine\n"

    code, _, err = init(repo, "--force")
    assert code == 0, err
    assert load_config(repo / "evalgate.yml")
    # Cases are never replaced: they exist, so there is no starter to write.
    assert (repo / "cases.jsonl").read_text().startswith('{"id": "x"')
    assert (repo / ".gitignore").read_text().count(".evalgate/") == 1


def test_init_appends_to_gitignore_without_clobbering_it(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("node_modules/")  # no final newline
    code, _, err = init(tmp_path)
    assert code == 0, err
    lines = (tmp_path / ".gitignore").read_text().splitlines()
    assert lines[0] == "node_modules/" and lines[-1] == ".evalgate/"


@pytest.mark.parametrize("backend", setup_init.BACKENDS)
@pytest.mark.parametrize("scorer", setup_init.SCORERS)
def test_every_config_init_writes_validates(tmp_path: Path, backend: str, scorer: str) -> None:
    given = setup_init.InitOptions(backend=backend, scorer=scorer, field="intent", model="m-1")
    plan = setup_init.plan_init(tmp_path, tmp_path / "evalgate.yml", given)
    setup_init.write_init(plan)
    suite = load_config(tmp_path / "evalgate.yml").config.suites[tmp_path.name]
    assert (suite.model.backend, suite.model.name, suite.scorer.kind) == (backend, "m-1", scorer)
    assert suite.fields.expected == "intent"
    assert '"intent": "billing"' in (tmp_path / "cases.jsonl").read_text()


def test_init_puts_the_config_in_a_subfolder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = init(tmp_path, "--config", "llm/evalgate.yml")
    assert "evalgate run v1 --config llm/evalgate.yml" in out
    assert code == 0, err
    assert (tmp_path / "llm" / "cases.jsonl").is_file()
    workflow = (tmp_path / WORKFLOW).read_text()
    assert workflow.count('config: "llm/evalgate.yml"') == 3
    # The job keeps its state outside the checkout: no step restores a cache into it.
    assert "actions/cache" not in workflow and ".evalgate/cache" not in workflow
    report = doctor.doctor(tmp_path, tmp_path / "llm" / "evalgate.yml")
    # config, prompts, ship, model, cases, split, fields, template; the workflow's permissions,
    # pinning, secrets, image and baseline upload; the baseline artefact across workflows;
    # gitignore.
    assert report.counts == {"ok": 16, "warn": 0, "FAIL": 0}, report.findings


def test_starter_files_go_where_the_given_globs_find_them(tmp_path: Path) -> None:
    code, _, err = init(tmp_path, "--prompts", "llm/*.md", "--cases", "data/*.jsonl")
    assert code == 0, err
    assert (tmp_path / "llm" / "v1.md").is_file() and (tmp_path / "data" / "cases.jsonl").is_file()
    suite = load_config(tmp_path / "evalgate.yml").config.suites[tmp_path.name]
    assert (suite.prompts, suite.cases) == (["llm/*.md"], ["data/*.jsonl"])


def test_init_asks_on_a_terminal_and_not_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI asks through input() only when stdin is a terminal and --yes is not given."""
    answers = iter(["", "", "anthropic", "claude-sonnet-4-5", "exact", ""])  # starter cases
    monkeypatch.setattr("builtins.input", lambda: next(answers))
    monkeypatch.setattr("sys.stdin", type("Tty", (), {"isatty": lambda self: True})())
    code, _, err = cli("init", "--dir", str(tmp_path))
    assert code == 0, err
    assert "Backend (fake, anthropic, openai, command) [fake]: " in err
    suite = load_config(tmp_path / "evalgate.yml").config.suites[tmp_path.name]
    assert (suite.model.name, suite.scorer.kind) == ("claude-sonnet-4-5", "exact")

    monkeypatch.setattr("builtins.input", lambda: pytest.fail("asked with --yes"))
    code, _, err = cli("init", "--dir", str(tmp_path / "again"), "--yes")
    assert code == 2 and "is not a folder" in err
    (tmp_path / "again").mkdir()
    assert cli("init", "--dir", str(tmp_path / "again"), "--yes")[0] == 0

    # Not a terminal and nothing piped: a clear refusal, not defaults written silently.
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    (tmp_path / "piped").mkdir()
    code, out, err = cli("init", "--dir", str(tmp_path / "piped"))
    assert code == 2 and out == ""
    assert "stdin is not a terminal: no answer to 'Prompt files' after 0 answer(s)" in err
    assert "--yes" in err
    assert not (tmp_path / "piped" / "evalgate.yml").exists()

    # On a terminal, files init would replace are named before the first question.
    monkeypatch.setattr("builtins.input", lambda: pytest.fail("asked before refusing"))
    monkeypatch.setattr("sys.stdin", type("Tty", (), {"isatty": lambda self: True})())
    code, _, err = cli("init", "--dir", str(tmp_path))
    assert code == 2
    assert err.startswith("error: evalgate.yml and .github/workflows/evalgate.yml already exist")
    assert "Backend (" not in err


EMAILS = [
    {
        "ticket": "T-1041",
        "thread": "th-88a",
        "subject": "Refund",
        "body": "I was charged twice.",
        "queue": "billing",
    },
    {
        "ticket": "T-1042",
        "thread": "th-88b",
        "subject": "Crash",
        "body": "The app crashes on start.",
        "queue": "bug",
    },
    {
        "ticket": "T-1043",
        "thread": "th-88a",
        "subject": "Again",
        "body": "Still charged twice!",
        "queue": "billing",
    },
    {
        "ticket": "T-1044",
        "thread": "th-90c",
        "subject": "Hello",
        "body": "Do you ship to Norway?",
        "queue": "other",
    },
]


def email_repo(root: Path) -> Path:
    (root / "prompts").mkdir(parents=True)
    (root / "prompts" / "v1.txt").write_text("Route the e-mail.\n")
    (root / "emails.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EMAILS))
    return root


def test_init_detects_id_input_and_expected_fields_of_its_own_cases(tmp_path: Path) -> None:
    repo = email_repo(tmp_path / "mail")
    code, out, err = init(repo, "--cases", "emails.jsonl")
    assert code == 0, err
    suite = load_config(repo / "evalgate.yml").config.suites["mail"]
    # ticket: unique, id-like; thread: id-like (repeats across a thread), so not input either;
    # queue: short labels that repeat, so the expected answer.
    assert suite.fields.id == "ticket"
    assert suite.fields.expected == "queue"
    assert suite.fields.input == ["subject", "body"]
    assert "{{ thread }}" not in suite.template and "{{ ticket }}" not in suite.template
    assert "left out of the model's input as ids: thread" in out


def test_init_reads_answers_from_a_pipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = email_repo(tmp_path / "mail")
    # prompts, cases, backend, model, command, scorer, expected, id, inputs
    answers = ["", "emails.jsonl", "command", "triage-app", "python app.py", "", "", "", "body"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(answers) + "\n"))
    code, _, err = cli("init", "--dir", str(repo))
    assert code == 0, err
    suite = load_config(repo / "evalgate.yml").config.suites["mail"]
    assert (suite.model.backend, suite.model.name) == ("command", "triage-app")
    assert suite.model.options["command"] == ["python", "app.py"]
    assert (suite.fields.id, suite.fields.expected, suite.fields.input) == (
        "ticket",
        "queue",
        ["body"],
    )
    # Each question and the answer taken are echoed, so a log shows them.
    assert "Case fields the model reads (comma-separated) [subject, body]: body\n" in err
    # A pipe that runs out part-way is refused, naming the question it stopped at.
    monkeypatch.setattr("sys.stdin", io.StringIO("\nemails.jsonl\n"))
    code, _, err = cli("init", "--dir", str(repo), "--force")
    assert code == 2 and "no answer to 'Backend' after 2 answer(s)" in err


def test_init_takes_the_field_flags(tmp_path: Path) -> None:
    repo = email_repo(tmp_path / "mail")
    code, _, err = init(
        repo,
        "--cases",
        "emails.jsonl",
        "--id-field",
        "thread",
        "--input-fields",
        "body",
        "--expected-field",
        "subject",
    )
    assert code == 0, err
    suite = load_config(repo / "evalgate.yml").config.suites["mail"]
    assert (suite.fields.id, suite.fields.input, suite.fields.expected) == (
        "thread",
        ["body"],
        "subject",
    )
    code, _, err = init(repo, "--cases", "emails.jsonl", "--input-fields", "mesage", "--force")
    assert code == 2 and "--input-fields names 'mesage', not in the cases" in err


def test_init_refuses_a_starter_field_it_cannot_use(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="starter cases already use the field 'message'"):
        setup_init.plan_init(
            tmp_path, tmp_path / "evalgate.yml", setup_init.InitOptions(field="message")
        )


def test_default_branch_comes_from_origin_head_or_local_branches(tmp_path: Path) -> None:
    assert setup_init.default_branch(tmp_path) == "main"
    (tmp_path / ".git" / "refs" / "heads").mkdir(parents=True)
    (tmp_path / ".git" / "packed-refs").write_text("abc refs/heads/master\n")
    assert setup_init.default_branch(tmp_path) == "master"
    origin = tmp_path / ".git" / "refs" / "remotes" / "origin"
    origin.mkdir(parents=True)
    (origin / "HEAD").write_text("ref: refs/remotes/origin/trunk\n")
    assert setup_init.default_branch(tmp_path) == "trunk"


@pytest.mark.parametrize(
    ("lines", "rel", "covered"),
    [
        ([".evalgate/"], ".evalgate", True),
        (["/.evalgate"], ".evalgate", True),
        ([".evalgate/*"], "sub/.evalgate", True),
        (["**/.evalgate/"], "sub/.evalgate", True),
        (["/.evalgate/"], "sub/.evalgate", False),
        ([".evalgate/", "!.evalgate/"], ".evalgate", False),
        (["# .evalgate/", "build/"], ".evalgate", False),
    ],
)
def test_gitignore_covers(lines: list[str], rel: str, covered: bool) -> None:
    assert setup_init.gitignore_covers(lines, rel) is covered


# --------------------------------------------------------------------------- doctor


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= count, (old, path)
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_doctor_fails_a_bad_config_and_exits_1(initialised: Callable[[str], Path]) -> None:
    repo = initialised("fake")
    edit(repo / "evalgate.yml", "    model:\n", "    modle:\n")
    code, out, err = cli("doctor", "--dir", str(repo))
    assert code == 1, err
    [line] = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
    assert line.startswith("FAIL  config: ") and "suites.main.modle: unknown key" in line
    assert "unknown key; did you mean model?" in line
    assert "(fix: rename it to model; allowed here: prompts, ship, cases" in line
    assert out.splitlines()[-1].endswith("1 FAIL; fix the FAIL lines and run it again")
    # The workflow and the ignores are still checked without a config.
    assert any("gitignore" in ln for ln in out.splitlines())


def test_doctor_fails_a_missing_case_file(initialised: Callable[[str], Path]) -> None:
    repo = initialised("fake")
    (repo / "cases.jsonl").unlink()
    [(status, check, message)] = not_ok(repo)
    assert (status, check) == ("FAIL", "suite main: cases")
    assert "'cases.jsonl' matches no file" in message


def test_doctor_fails_a_planted_leak(initialised: Callable[[str], Path]) -> None:
    repo = initialised("fake")
    first = json.loads((repo / "cases.jsonl").read_text().splitlines()[0])
    leak = {**first, "id": "leak-1", "group": "g900", "split": "holdout"}
    with (repo / "cases.jsonl").open("a") as handle:
        handle.write(json.dumps(leak) + "\n")
    leaks = [(s, m) for s, c, m in not_ok(repo) if c.endswith("split")]
    assert (
        "FAIL",
        "leak: 1 holdout cases have the same input as a dev case: delete or "
        "retire the holdout copy (which cases: `evalgate split --show-holdout`, with the "
        "holdout key set)",
    ) in leaks


def test_doctor_fails_a_broken_fake_rules_file(initialised: Callable[[str], Path]) -> None:
    repo = initialised("fake")
    text = (repo / "evalgate.yml").read_text()
    start, end = text.index("      options:"), text.index("    scorer:")
    (repo / "evalgate.yml").write_text(
        text[:start] + "      options: {rules_file: rules.yml}\n" + text[end:]
    )
    statuses = {(s, c) for s, c, _ in not_ok(repo)}
    assert ("FAIL", "suite main: model") in statuses
    assert ("FAIL", "suite main: files") in statuses


Breakage = Callable[[Path], None]


def drop_pr_write(repo: Path) -> None:
    edit(repo / WORKFLOW, "      pull-requests: write # the comment\n", "")


def unpin_checkout(repo: Path) -> None:
    edit(
        repo / WORKFLOW,
        "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683",
        "actions/checkout@v4",
        count=3,
    )


def add_pull_request_target(repo: Path) -> None:
    (repo / ".github/workflows/labelled.yml").write_text(
        """on: pull_request_target
permissions: {contents: read, pull-requests: write, actions: read}
jobs:
  gate:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - uses: evalgate/evalgate@v0
"""
    )


def drop_anthropic_key(repo: Path) -> None:
    edit(repo / WORKFLOW, "          anthropic_api_key: ${{ secrets.ANTHROPIC_API_KEY }}\n", "")


def literal_anthropic_key(repo: Path) -> None:
    edit(repo / WORKFLOW, "${{ secrets.ANTHROPIC_API_KEY }}", "sk-ant-123", count=3)


def unignore_state(repo: Path) -> None:
    (repo / ".gitignore").unlink()


def write_all(repo: Path) -> None:
    edit(
        repo / WORKFLOW,
        "    permissions:\n      contents: read\n      pull-requests: write "
        "# the comment\n      checks: write # the evalgate check run (a required check)\n"
        "      actions: read # the baseline artefact\n",
        "    permissions: write-all\n",
    )


def no_permissions(repo: Path) -> None:
    text = (repo / WORKFLOW).read_text()
    text = re.sub(r"\n *permissions:\n( +[a-z-]+: \w+.*\n)+", "\n", text)
    (repo / WORKFLOW).write_text(text)


def release_without_contents_write(repo: Path) -> None:
    edit(repo / WORKFLOW, "      contents: write #", "      contents: read #")


def drop_upload(repo: Path) -> None:
    text = (repo / WORKFLOW).read_text()
    start = text.index("      - uses: actions/upload-artifact")
    end = text.index("  release:")
    (repo / WORKFLOW).write_text(text[:start] + text[end:])


def rename_artifact(repo: Path) -> None:
    edit(repo / WORKFLOW, "name: evalgate-baseline", "name: baseline")


def seal_holdout(repo: Path) -> None:
    edit(
        repo / "evalgate.yml",
        "    split: {",
        "    sealed_holdout: {file: cases.jsonl, public_key: cases.jsonl}\n    split: {",
    )


def seal_holdout_outside_environment(repo: Path) -> None:
    seal_holdout(repo)
    edit(repo / WORKFLOW, "          # holdout_key:", "          holdout_key:")
    edit(repo / WORKFLOW, "    environment: release", "    # environment: release")


def mismatched_tags(repo: Path) -> None:
    edit(repo / WORKFLOW, 'tags: ["v*"]', 'tags: ["release-*"]')


def remove_workflow(repo: Path) -> None:
    (repo / WORKFLOW).unlink()


def pr_only_workflow(repo: Path) -> None:
    text = (repo / WORKFLOW).read_text()
    (repo / WORKFLOW).write_text(text[: text.index("  baseline:")])


def missing_config_input(repo: Path) -> None:
    edit(
        repo / WORKFLOW,
        "github_token: ${{ secrets.GITHUB_TOKEN }}\n",
        "github_token: ${{ secrets.GITHUB_TOKEN }}\n          config: nope.yml\n",
    )


# (how to break it, backend, status, check suffix, words of the message)
BREAKAGES: list[tuple[Breakage, str, str, str, str]] = [
    (drop_pr_write, "fake", "FAIL", "permissions", "lacks `pull-requests: write`"),
    (unpin_checkout, "fake", "warn", "pinning", "actions/checkout@v4"),
    (add_pull_request_target, "fake", "FAIL", "pull_request_target", "anyone who opens"),
    (drop_anthropic_key, "anthropic", "FAIL", "secrets", "no input anthropic_api_key"),
    (literal_anthropic_key, "anthropic", "FAIL", "secrets", "written into the workflow"),
    (unignore_state, "fake", "warn", "gitignore", ".evalgate/ is not in .gitignore"),
    (write_all, "fake", "warn", "permissions", "`permissions: write-all`"),
    (no_permissions, "fake", "warn", "permissions", "no permissions block"),
    (release_without_contents_write, "fake", "FAIL", "permissions", "`contents: write`"),
    (drop_upload, "fake", "FAIL", "baseline", "does not upload the run file"),
    (rename_artifact, "fake", "FAIL", "baseline artefact", "looks for the artefact"),
    (seal_holdout, "fake", "FAIL", "secrets", "passes no holdout_key"),
    (seal_holdout_outside_environment, "fake", "FAIL", "secrets", "outside an environment"),
    (mismatched_tags, "fake", "warn", "tags", "differ from release_tags"),
    (remove_workflow, "fake", "warn", "workflows", "no workflow under .github/workflows"),
    (pr_only_workflow, "fake", "warn", "workflows", "no evalgate job runs on pushes"),
    (missing_config_input, "fake", "FAIL", "config", "reads nope.yml, which does not exist"),
]


@pytest.mark.parametrize(
    ("breakage", "backend", "status", "check", "words"),
    BREAKAGES,
    ids=[b[0].__name__ for b in BREAKAGES],
)
def test_doctor_finds_each_breakage(
    breakage: Breakage,
    backend: str,
    status: str,
    check: str,
    words: str,
    initialised: Callable[[str], Path],
) -> None:
    repo = initialised(backend)
    breakage(repo)
    found = [(s, c, m) for s, c, m in not_ok(repo) if c.endswith(check) and words in m]
    assert found, not_ok(repo)
    assert found[0][0] == status, found
    code, out, _ = cli("doctor", "--dir", str(repo), "--json")
    assert code == (1 if status == "FAIL" else 0)
    fixes = [f["fix"] for f in json.loads(out)["findings"] if f["status"] != "ok"]
    assert all(fixes), "every finding says what to fix"


def test_doctor_markdown_is_a_table(initialised: Callable[[str], Path]) -> None:
    repo = initialised("fake")
    unignore_state(repo)
    code, out, _ = cli("doctor", "--dir", str(repo), "--format", "markdown")
    assert code == 0
    assert out.startswith("### evalgate doctor: 15 ok, 1 warn, 0 FAIL\n")
    assert "| warn | gitignore |" in out


# ------------------------------------------------------------------------------------------
# doctor runs what run would run: the backend builds (extra, options, key), the command starts
# and answers one case, the template renders for every case, the mapped fields exist.
# ------------------------------------------------------------------------------------------


def doctor_lines(root: Path, env: dict[str, str] | None = None) -> list[doctor.Finding]:
    report = doctor.doctor(root, root / "evalgate.yml", env=env or {})
    return [f for f in report.findings if f.check.startswith("suite ")]


def by_check(findings: list[doctor.Finding], check: str) -> doctor.Finding:
    [found] = [f for f in findings if f.check == check]
    return found


def test_doctor_sends_one_case_to_the_command(tmp_path: Path) -> None:
    root = triage_workspace(tmp_path / "ok")
    model = [f for f in doctor_lines(root) if f.check == "suite triage: model"]
    assert [f.status for f in model] == ["ok", "ok"]
    assert model[1].message.startswith("the program answered case 'T-1' (")
    assert '{"label": "spam"}' in model[1].message


def test_doctor_fails_a_command_that_does_not_start(tmp_path: Path) -> None:
    missing = triage_workspace(tmp_path / "missing", command="[./no-such-program]")
    [model] = [f for f in doctor_lines(missing) if f.check == "suite triage: model"][1:]
    assert model.status == "FAIL"
    assert "cannot run './no-such-program'" in model.message
    # A program that starts and exits non-zero: the stderr tail says why.
    crash = triage_workspace(tmp_path / "crash", mode="crash")
    [model] = [f for f in doctor_lines(crash) if f.check == "suite triage: model"][1:]
    assert model.status == "FAIL"
    assert model.message.startswith("the program failed on case 'T-1': exit code 4")
    assert "KeyError: 'thread'" in model.message
    assert model.fix and "stdin" in model.fix
    # ... and the CLI exits 1 on it.
    code, out, _ = cli("doctor", "--dir", str(crash))
    assert code == 1 and "FAIL  suite triage: model: the program failed" in out


def test_doctor_fails_a_backend_whose_extra_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An install without the extra: `import openai` fails, as on a machine without it.
    monkeypatch.delitem(sys.modules, "evalgate.backends.openai", raising=False)
    monkeypatch.setitem(sys.modules, "openai", None)
    root = triage_workspace(tmp_path / "openai", model="{backend: openai, name: gpt-4o-mini}")
    model = by_check(doctor_lines(root, {"OPENAI_API_KEY": "sk-test"}), "suite triage: model")
    assert model.status == "FAIL"
    assert "needs an optional dependency that is not installed" in model.message
    # The tests run from an editable install of the checkout: the checkout's line works here.
    assert model.fix == 'in the checkout: pip install -e ".[openai]"'


def test_doctor_says_when_the_key_is_not_set(tmp_path: Path) -> None:
    root = triage_workspace(
        tmp_path / "claude", model="{backend: anthropic, name: claude-haiku-4-5}"
    )
    here = by_check(doctor_lines(root, {}), "suite triage: model")
    assert here.status == "warn"
    assert "ANTHROPIC_API_KEY is not set here" in here.message
    assert here.fix and "export ANTHROPIC_API_KEY" in here.fix
    # In CI a run without the key cannot start at all: a FAIL.
    assert by_check(doctor_lines(root, {"CI": "true"}), "suite triage: model").status == "FAIL"
    set_ = by_check(doctor_lines(root, {"ANTHROPIC_API_KEY": "sk-test"}), "suite triage: model")
    assert (set_.status, set_.message) == (
        "ok",
        "anthropic claude-haiku-4-5 builds; ANTHROPIC_API_KEY is set",
    )


def test_doctor_fails_a_template_that_does_not_render_for_a_case(tmp_path: Path) -> None:
    root = triage_workspace(tmp_path / "t", template="{{ subject }}\n{{ body }}")
    template = by_check(doctor_lines(root), "suite triage: template")
    assert template.status == "FAIL"
    assert "undefined value" in template.message and "subject" in template.message


def test_doctor_warns_when_ids_would_reach_the_model(tmp_path: Path) -> None:
    root = triage_workspace(
        tmp_path / "all", fields="{id: ticket, expected: label}", template="{{ input }}"
    )
    fields = by_check(doctor_lines(root), "suite triage: fields")
    assert fields.status == "warn"
    assert "every field of a case is input and the template sends them all" in fields.message
    assert "ids too: thread, ticket" in fields.message
    assert fields.fix and "fields.input: [body]" in fields.fix


def test_doctor_warns_of_a_mapped_field_no_case_has(tmp_path: Path) -> None:
    root = triage_workspace(
        tmp_path / "c", fields="{id: ticket, input: [body], expected: label, category: kind}"
    )
    fields = by_check(doctor_lines(root), "suite triage: fields")
    assert fields.status == "warn"
    assert fields.message == "fields.category is 'kind', which none of the 4 cases has"
    # The default names may be absent: a suite without categories is fine.
    plain = triage_workspace(tmp_path / "p")
    assert by_check(doctor_lines(plain), "suite triage: fields").status == "ok"


def _judged_repo(tmp_path: Path, pr_contents: str) -> Path:
    """The bike-shop example's judged suite as a repository's evalgate.yml, with the example
    workflow whose pull-request job has ``contents: pr_contents``."""
    repo = tmp_path / "judged"
    shutil.copytree(ROOT / "examples" / "bike-shop", repo)
    (repo / "judge.yml").replace(repo / "evalgate.yml")
    workflow = (ROOT / "examples" / "workflows" / "evalgate.yml").read_text(encoding="utf-8")
    head, gate, rest = workflow.partition("    permissions:\n      contents: read\n")
    assert gate, "the example's pull-request job grants contents: read"
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "evalgate.yml").write_text(
        head + f"    permissions:\n      contents: {pr_contents}\n" + rest, encoding="utf-8"
    )
    return repo


@pytest.mark.parametrize("pr_contents", ["read", "write"])
def test_doctor_wants_contents_write_on_the_pr_job_of_a_judged_suite(
    tmp_path: Path, pr_contents: str
) -> None:
    # A pull request's judge check reads the holdout labels, and the read is kept in the
    # suite's ledger on the data branch: a read-only token would fail the job after the read.
    repo = _judged_repo(tmp_path, pr_contents)
    report = doctor.doctor(repo, repo / "evalgate.yml", env={})
    found = [
        f
        for f in report.findings
        if f.check.endswith("permissions") and "judge's holdout labels" in f.message
    ]
    if pr_contents == "read":
        assert [f.status for f in found] == ["FAIL"]
        assert "`contents: write`" in found[0].message and found[0].fix
    else:
        assert found == []


def test_doctor_text_is_one_line_a_finding_and_forges_no_workflow_command() -> None:
    # A probed program's stderr, or a workflow's job name, lands in a finding: printed in CI,
    # a line break followed by `::error::` would be a workflow command.
    report = doctor.DoctorReport(
        repo=".",
        config="evalgate.yml",
        findings=[
            doctor.Finding(
                status="FAIL", check="suite a: model", message="died\n::error::forged", fix="x"
            )
        ],
        counts={"ok": 0, "warn": 0, "FAIL": 1},
    )
    lines = doctor.render_doctor(report, "text").splitlines()
    assert len(lines) == 3
    assert not any(line.lstrip().startswith("::") for line in lines)
    assert "::error::" not in lines[1]
