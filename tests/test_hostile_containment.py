"""Containment: nothing a pull request writes reaches past the files it may change.

Each attack is data (the attack, the safe outcome), so more can be added by adding an entry:

- ``BASE_GLOBS`` x ``PROTECTED``: a fork's data, laid onto the default branch's checkout by the
  real fork job (in-process, against the GitHub and Messages stand-ins, as
  tests/action/test_fork.py drives it), never writes evalgate's state, git's or GitHub's files,
  the judge's labels, rules, programs, keys or the config, whatever the base config's case globs
  say; the whole run is refused with one line naming each path and why, and no model is called.
- ``GLOBS``: the one glob matcher (evalgate.globs) agrees with :func:`glob.glob`, which expands
  the config's globs.
- ``OUTSIDE``: every kind of promptfoo ``file://`` reference that leads out of the repository
  (absolute, ``..``, a symbolic link) is refused by ``evalgate split`` and ``evalgate run``.
- ``BOMBS``: a YAML file whose aliases expand past the bound, and a file past the size limit
  (an 8 GB sparse file), are refused within seconds, exit 2, one line naming the file (by
  ``evalgate doctor``, one FAIL finding naming it, exit 1); so is a pipe in place of a case
  file.
- ``NAMED_OUTSIDE``: files the config names deeper than its top-level options (a judge's rules,
  a command's or a tool command's files) stay inside the repository.
"""

from __future__ import annotations

import glob
import json
import os
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CliResult, copy_example
from test_action import REPO, comments, gh, messages, open_pull
from test_fork import gate_in

from evalgate import files, globs
from evalgate.action.fork import ForkData
from evalgate.errors import UserError
from tests.support.github_server import GitHubServer
from tests.support.measured import run_measured
from tests.support.messages_server import MessagesServer

FORK = "forker/widgets"
__all__ = ["gh", "messages"]  # fixtures, imported to be used here
KEY = "sk-ant-containment-test-key-000000000000"

# --------------------------------------------------------------------------- the fork overlay

# The base config's case globs a fork's data is matched against (beside cases.jsonl).
BASE_GLOBS = ["*.json", "*.jsonl", "*.yml", "agent/*", "*", "**/*", "**/*.yml", "**"]


@dataclass(frozen=True)
class Protected:
    """A file of the default branch's checkout that a fork's data must never write."""

    id: str
    path: str
    # What the attacker writes there.
    text: str
    # Words the refusal shows beside the path.
    why: str


PROTECTED = [
    Protected(
        "response-cache",
        ".evalgate/cache/3f/3f2a9c.json",
        '{"text": "{\\"category\\": \\"parts\\"}"}',
        "evalgate's state",
    ),
    Protected("read-ledger", ".evalgate/holdout-ledger.jsonl", "", "evalgate's state"),
    Protected("judge-labels", "judge-labels.jsonl", '{"id": "jl-1"}\n', "the judge's labels"),
    Protected("nested-rules", "rules/deep/fake-rules.yml", "rules: []\n", "names"),
    Protected("tool-script", "agent/tool.py", "print('{}')\n", "code"),
    Protected("tool-data", "agent/answers.json", '{"result": 1}\n', "a program the suite runs"),
    Protected("program-under-test", "app/answer.txt", "parts\n", "a program the suite runs"),
    Protected("executable", "bin/answer", "#!/bin/sh\necho parts\n", "code"),
    Protected("holdout-key", "holdout.pub", "evalgate-holdout-pub-1 x\n", "the sealed holdout"),
    Protected("sealed-holdout", "holdout.sealed.jsonl", "", "the sealed holdout"),
    Protected("config", "evalgate.yml", "version: 1\n", "the config"),
    Protected("git-config", ".git/config", "[core]\n\thooksPath = /tmp\n", "git's"),
    Protected("workflow", ".github/workflows/x.yml", "on: push\n", "git's or GitHub's"),
    Protected("gitattributes", ".gitattributes", "* filter=x\n", "git's"),
]


def _base_workspace(root: Path, glob_: str, folder: str = ".") -> Path:
    """The default branch's checkout: the example at the repository's top, with a judged suite,
    an agent suite whose tool command runs agent/tool.py on agent/answers.json, a command
    backend's suite, a rules file in a nested folder, git's folder, evalgate's state and a key.
    Returns the config's folder (``folder`` of the checkout)."""
    workspace = copy_example(root / "workspace" / folder)
    extra = {
        ".git/config": "[core]\n",
        ".github/workflows/evalgate.yml": "on: pull_request\n",
        ".gitattributes": "",
        ".evalgate/cache/3f/3f2a9c.json": "{}",
        ".evalgate/holdout-ledger.jsonl": "",
        "rules/deep/fake-rules.yml": (workspace / "fake-rules.yml").read_text(encoding="utf-8"),
        "agent/tool.py": "import json\nprint(json.dumps({'result': 'ok'}))\n",
        "agent/answers.json": "{}\n",
        "app/answer.txt": "other\n",
        "holdout.pub": "evalgate-holdout-pub-1 key\n",
        "holdout.sealed.jsonl": "",
        "bin/answer": "#!/bin/sh\necho other\n",
    }
    for path, text in extra.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(text, encoding="utf-8")
    (workspace / "bin/answer").chmod(0o755)
    (workspace / "cases.jsonl").chmod(0o755)  # data with the executable bit stays data
    config = yaml.safe_load((workspace / "evalgate.yml").read_text(encoding="utf-8"))
    shop = config["suites"]["bike-shop"]
    shop["cases"] = ["cases.jsonl", glob_]
    shop["model"] = {"backend": "anthropic", "name": "claude-haiku-4-5", "max_tokens": 64}
    judged = yaml.safe_load((workspace / "judge.yml").read_text(encoding="utf-8"))
    judged = judged["suites"]["bike-shop-judged"]
    judged["model"]["options"]["rules_file"] = "rules/deep/fake-rules.yml"
    agent = shop | {
        "tools": [{"name": "lookup"}],
        "agent": {"tool_command": ["python3", "agent/tool.py", "agent/answers.json"]},
    }
    app = shop | {"model": {"backend": "command", "options": {"command": "cat app/answer.txt"}}}
    config["suites"] = {"bike-shop": shop, "judged": judged, "agent": agent, "app": app}
    (workspace / "evalgate.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return workspace


def _fork_job(
    gh: GitHubServer,
    messages: MessagesServer,
    workspace: Path,
    files: dict[str, str],
    folder: str = ".",
) -> Any:
    """The base repository's workflow_run job for fork pull request #8 whose data is ``files``
    (paths relative to the checkout's top), with the config in ``folder``."""
    open_pull(gh, {"prompts/v3.txt": "x"}, number=8, fork=True)
    head = gh.branch_sha(FORK, "feature") or ""
    data = ForkData(pull_request=8, head_sha=head, files=files)
    return gate_in(
        workspace,
        gh,
        data,
        inputs={"working_directory": folder, "anthropic_api_key": KEY},
        env={"ANTHROPIC_BASE_URL": messages.url},
    )


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("target", PROTECTED, ids=[t.id for t in PROTECTED])
@pytest.mark.parametrize("glob_", BASE_GLOBS)
def test_fork_data_never_writes_a_protected_file_whatever_the_globs(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer, glob_: str, target: Protected
) -> None:
    workspace = _base_workspace(tmp_path, glob_)
    before = _snapshot(workspace)
    job = _fork_job(gh, messages, workspace, {target.path: target.text})
    assert job.code == 1, job.out + job.err
    assert job.outputs["verdict"] == "fail"
    assert messages.requests == []
    # Nothing of the checkout changed (the job's own state folder aside).
    after = _snapshot(workspace)
    assert {k: v for k, v in after.items() if k in before} == before
    [line] = [a for a in job.annotations("error") if "refused" in a]
    assert f"{target.path} (" in line and target.why in line, line
    bodies = comments(gh, 8)  # one for each suite of the config
    assert len(bodies) == 4 and all("was refused" in b and target.path in b for b in bodies)
    assert gh.check_runs(REPO)[0].conclusion == "failure"


# The fork's data that the base globs do name: laid onto the checkout, and the job runs (the
# suite in a folder of the repository, as in tests/action).
ALLOWED = [
    ("*.jsonl", "more.jsonl"),
    ("*.jsonl", "cases.jsonl"),  # executable bit set: still data
    ("**/*.jsonl", "extra/more.jsonl"),
    ("agent/*", "agent/more.jsonl"),
    ("*", "more.jsonl"),
]


@pytest.mark.parametrize(("glob_", "path"), ALLOWED)
def test_fork_data_the_globs_name_is_laid_onto_the_checkout(
    tmp_path: Path, gh: GitHubServer, messages: MessagesServer, glob_: str, path: str
) -> None:
    folder = "examples/bike-shop"
    config = _base_workspace(tmp_path, glob_, folder)
    case = {"id": "fork-1", "group": "fork-1", "category": "parts", "split": "dev"}
    text = json.dumps(case | {"message": "Do you sell bells?"}) + "\n"
    job = _fork_job(gh, messages, config.parents[1], {f"{folder}/{path}": text}, folder)
    assert "was refused" not in job.out + job.summary, job.out
    assert (config / path).read_text(encoding="utf-8") == text
    assert "laid onto the default branch's checkout" in job.out


# --------------------------------------------------------------------------- the glob matcher

# Files of a tree, and patterns: the matcher must list what glob.glob lists, no more, no less.
TREE = [
    "a.json",
    ".hidden.json",
    "cases.jsonl",
    "judge-labels.jsonl",
    "agent/tool.py",
    "agent/.secret",
    "agent/deep/x.json",
    ".evalgate/cache/3f/3f2a.json",
    ".git/config",
    "rules/deep/fake-rules.yml",
    "x.yml",
    "prompts/v1.txt",
    "prompts/.v0.txt",
]
GLOBS = [
    "*.json",
    "*.jsonl",
    "*.yml",
    "agent/*",
    "*",
    "**",
    "**/*",
    "**/*.json",
    "**/*.yml",
    "agent/**",
    "agent/**/*.json",
    ".*",
    ".*/*",
    ".evalgate/**",
    "prompts/?1.txt",
    "prompts/[v]*.txt",
    "./prompts/*.txt",
    "prompts//*.txt",
    "*/*",
    "*/deep/*",
    "**/deep/**",
    "[.]*",
]


@pytest.mark.parametrize("pattern", GLOBS)
def test_the_glob_matcher_names_what_glob_lists(tmp_path: Path, pattern: str) -> None:
    for path in TREE:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x", encoding="utf-8")
    listed = {
        Path(p).relative_to(tmp_path).as_posix()
        for p in glob.glob(str(tmp_path / pattern), recursive=True)
        if Path(p).is_file()
    }
    assert {p for p in TREE if globs.matches(p, pattern)} == listed
    # The walker that expands the config's globs finds the same files.
    found = globs.expand(tmp_path, pattern, globs.MAX_MATCHES)
    assert {p.relative_to(tmp_path).as_posix() for p in found if p.is_file()} == listed


def test_the_glob_matcher_never_names_absolute_or_folder_patterns() -> None:
    assert not globs.matches("a.json", "/a.json")
    assert not globs.matches("agent/x", "agent/")
    assert not globs.matches("", "**")


# --------------------------------------------------------------------------- promptfoo files

SECRET = "outside-secret-7f3a"
# Files beside the repository (in the folder ``outside``), each holding SECRET.
OUTSIDE_FILES = {
    "x.jsonl": json.dumps(
        {"vars": {"message": SECRET}, "assert": [{"type": "contains", "value": "x"}]}
    )
    + "\n",
    "x.csv": f"message,__expected\n{SECRET},contains:x\n",
    "x.yaml": f"- vars: {{message: {SECRET}}}\n  assert: [{{type: contains, value: x}}]\n",
    "x.json": json.dumps(
        [{"vars": {"message": SECRET}, "assert": [{"type": "contains", "value": "x"}]}]
    ),
    "p.txt": f"{SECRET} {{{{message}}}}\n",
    "p.json": json.dumps(
        [{"role": "system", "content": SECRET}, {"role": "user", "content": "{{message}}"}]
    ),
    "d.yaml": f"vars: {{message: {SECRET}}}\nassert: [{{type: contains, value: x}}]\n",
    "a.json": json.dumps({"type": "object", "title": SECRET}),
}
TEST = "  - vars: {message: hello}\n    assert: [{type: contains, value: x}]\n"


@dataclass(frozen=True)
class Outside:
    """A promptfoo config (promptfooconfig.yaml, read with ``cases_format: promptfoo``) whose
    reference leads out of the repository; OUT is the outside folder's absolute path."""

    id: str
    config: str
    # Other files of the repository, and symbolic links (path -> target).
    files: dict[str, str] | None = None
    links: dict[str, str] | None = None


OUTSIDE = [
    Outside("tests-jsonl-absolute", "tests: [file://OUT/x.jsonl]\n"),
    Outside("tests-csv-dotdot", "tests: [file://../outside/x.csv]\n"),
    Outside("tests-yaml-dotdot", "tests: [file://../outside/x.yaml]\n"),
    Outside("tests-json-absolute", "tests: file://OUT/x.json\n"),
    Outside("tests-plain-path-dotdot", "tests: [../outside/x.yaml]\n"),
    Outside("tests-glob-dotdot", "tests: [file://../outside/*.csv]\n"),
    Outside("tests-glob-climbs-after-magic", "tests: [file://*/../../outside/x.jsonl]\n"),
    Outside(
        "tests-csv-symlink", "tests: [file://link.csv]\n", links={"link.csv": "../outside/x.csv"}
    ),
    Outside("tests-folder-symlink", "tests: [file://away/x.jsonl]\n", links={"away": "../outside"}),
    Outside(
        "tests-file-refers-out",
        "tests: [file://more/tests.yaml]\n",
        files={"more/tests.yaml": "- file://../../outside/x.csv\n"},
    ),
    Outside("default-test-dotdot", "defaultTest: file://../outside/d.yaml\ntests:\n" + TEST),
    Outside("prompt-text-dotdot", "prompts: [file://../outside/p.txt]\ntests:\n" + TEST),
    Outside("prompt-chat-absolute", "prompts: [file://OUT/p.json]\ntests:\n" + TEST),
    Outside("prompt-glob-absolute", "prompts: [file://OUT/*.txt]\ntests:\n" + TEST),
    Outside("prompt-glob-dotdot", "prompts: [file://../outside/*.txt]\ntests:\n" + TEST),
    Outside(
        "prompt-symlink",
        "prompts: [file://p.txt]\ntests:\n" + TEST,
        links={"p.txt": "../outside/p.txt"},
    ),
    Outside(
        "var-file-absolute",
        "tests:\n  - vars: {message: file://OUT/p.txt}\n    assert: [{type: contains, value: x}]\n",
    ),
    Outside(
        "assertion-text-dotdot",
        "tests:\n  - vars: {message: hi}\n    assert: [{type: contains, value: file://../outside/p.txt}]\n",
    ),
    Outside(
        "assertion-json-absolute",
        "tests:\n  - vars: {message: hi}\n    assert: [{type: is-json, value: file://OUT/a.json}]\n",
    ),
    Outside(
        "assertion-yaml-symlink",
        "tests:\n  - vars: {message: hi}\n    assert: [{type: contains, value: file://a.yaml}]\n",
        links={"a.yaml": "../outside/d.yaml"},
    ),
]


def _promptfoo_repo(tmp_path: Path, case: Outside | None) -> Path:
    """The example, its cases read from promptfooconfig.yaml; returns the config's path."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for name, text in OUTSIDE_FILES.items():
        (outside / name).write_text(text, encoding="utf-8")
    repo = copy_example(tmp_path / "repo")
    (repo / ".git").mkdir()
    config_path = repo / "evalgate.yml"
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    config["suites"]["bike-shop"] |= {
        "cases": "promptfooconfig.yaml",
        "cases_format": "promptfoo",
        "scorer": {"kind": "contains"},
        "fields": {"input": ["message"], "expected": "expected"},
    }
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    text = case.config.replace("OUT", str(outside)) if case else "tests:\n" + TEST
    (repo / "promptfooconfig.yaml").write_text(text, encoding="utf-8")
    for path, content in ((case and case.files) or {}).items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(content, encoding="utf-8")
    for path, target in ((case and case.links) or {}).items():
        (repo / path).symlink_to(target)
    return config_path


def test_a_promptfoo_config_inside_the_repository_is_read(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    config = _promptfoo_repo(tmp_path, None)
    code, out, err = cli("run", "v3", "--no-save", "--config", str(config))
    assert code in (0, 1) and "1 case" in out, out + err


@pytest.mark.parametrize("argv", [("split",), ("run", "v3", "--no-save")], ids=["split", "run"])
@pytest.mark.parametrize("case", OUTSIDE, ids=[c.id for c in OUTSIDE])
def test_promptfoo_references_never_read_outside_the_repository(
    tmp_path: Path, cli: Callable[..., CliResult], case: Outside, argv: tuple[str, ...]
) -> None:
    config = _promptfoo_repo(tmp_path, case)
    code, out, err = cli(*argv, "--config", str(config))
    assert code == 2, out + err
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert "outside the repository" in line, line
    assert SECRET not in out + err


# --------------------------------------------------------------------------- bombs and sizes


def _laughs(indent: str = "  ") -> str:
    """Ten anchors, each a list of ten aliases of the one before: 10^10 nodes in about 600 B."""
    lines = [f"{indent}l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"{indent}l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def _merges() -> str:
    """The same growth through merge keys: each mapping merges the one before ten times."""
    lines = ["  m0: &m0 {a: x, b: x, c: x, d: x, e: x, f: x, g: x, h: x, i: x, j: x}"]
    for i in range(1, 10):
        keys = ", ".join(f"k{k}: *m{i - 1}" for k in range(10))
        lines.append(f"  m{i}: &m{i} {{<<: *m{i - 1}, {keys}}}")
    return "\n".join(lines) + "\n"


CASE = "- id: a0\n  group: g\n  category: parts\n  message: hello\n"
BIG = 8 << 30  # bytes of a sparse file: nothing of it is on disk


@dataclass(frozen=True)
class Bomb:
    """A file that costs nothing to write and everything to read: refused, exit 2, one line."""

    id: str
    # The file written into the example, and what it holds (an int: a sparse file that size).
    path: str
    content: str | int
    # Suite keys set in evalgate.yml so the file is read.
    suite: dict[str, Any]
    argv: tuple[str, ...]
    # Words the one line says.
    says: tuple[str, ...]
    # Where the line is: the one line of a refusal (exit 2), or the one FAIL finding of
    # `evalgate doctor` (which reports every problem it finds, exit 1).
    finding: bool = False


CASES_YML = {"cases": "cases.yml"}
PROMPTFOO = {
    "cases": "promptfooconfig.yaml",
    "cases_format": "promptfoo",
    "scorer": {"kind": "contains"},
    "fields": {"input": ["message"], "expected": "expected"},
}
RUN = ("run", "v3", "--no-save")
ALIASES = ("alias", "100,000 nodes")
TOO_BIG = ("8,589,934,592 bytes", "over the")

BOMBS = [
    Bomb("yaml-case-aliases-split", "cases.yml", CASE + _laughs(), CASES_YML, ("split",), ALIASES),
    Bomb("yaml-case-aliases-run", "cases.yml", CASE + _laughs(), CASES_YML, RUN, ALIASES),
    Bomb("yaml-case-merge-keys", "cases.yml", CASE + _merges(), CASES_YML, RUN, ALIASES),
    Bomb(
        "yaml-case-under-cases-key",
        "cases.yml",
        "cases:\n  - id: a0\n    group: g\n    category: parts\n    message: hi\n"
        + _laughs("    "),
        CASES_YML,
        ("split",),
        ALIASES,
    ),
    Bomb(
        "promptfoo-tests-aliases",
        "promptfooconfig.yaml",
        "tests:\n  - vars: {message: hi}\n    assert: [{type: contains, value: x}]\n"
        "    metadata:\n" + _laughs("      "),
        PROMPTFOO,
        RUN,
        ALIASES,
    ),
    Bomb(
        "rules-file-aliases",
        "fake-rules.yml",
        "field: category\n" + _laughs(""),
        {},
        RUN,
        ALIASES,
    ),
    Bomb(
        "yaml-case-alias-to-itself",
        "cases.yml",
        CASE + "  loop: &a [x, *a]\n",
        CASES_YML,
        RUN,
        ("refers to itself",),
    ),
    Bomb(
        "doctor-workflow-aliases",
        ".github/workflows/evalgate.yml",
        "on: [pull_request]\njobs:\n  gate:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: evalgate/evalgate@v1\n        with:\n          mode: pr\n"
        "          extra:\n" + _laughs("            "),
        {},
        ("doctor",),
        ALIASES,
        finding=True,
    ),
    Bomb(
        "doctor-case-aliases",
        "cases.yml",
        CASE + _laughs(),
        CASES_YML,
        ("doctor",),
        ALIASES,
        finding=True,
    ),
    Bomb(
        "init-case-aliases",
        "cases.yml",
        CASE + _laughs(),
        {},
        ("init", "--yes", "--force", "--cases", "cases.yml"),
        ALIASES,
    ),
    Bomb("sparse-jsonl-case-file", "big.jsonl", BIG, {"cases": "big.jsonl"}, ("split",), TOO_BIG),
    Bomb("sparse-yaml-case-file", "big.yml", BIG, {"cases": "big.yml"}, RUN, TOO_BIG),
    Bomb("sparse-prompt", "prompts/v3.txt", BIG, {}, RUN, TOO_BIG),
    Bomb("sparse-rules-file", "fake-rules.yml", BIG, {}, RUN, TOO_BIG),
    Bomb(
        "sparse-promptfoo-csv",
        "t.csv",
        BIG,
        PROMPTFOO | {"cases": "promptfooconfig.yaml"},
        RUN,
        TOO_BIG,
    ),
]


def _bomb_repo(tmp_path: Path, bomb: Bomb) -> Path:
    repo = copy_example(tmp_path / "repo")
    (repo / ".git").mkdir()
    config_path = repo / "evalgate.yml"
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    config["suites"]["bike-shop"] |= bomb.suite
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    if bomb.id == "sparse-promptfoo-csv":
        (repo / "promptfooconfig.yaml").write_text("tests: [file://t.csv]\n", encoding="utf-8")
    target = repo / bomb.path
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(bomb.content, int):
        with target.open("wb") as handle:
            handle.truncate(bomb.content)
    else:
        target.write_text(bomb.content, encoding="utf-8")
    return config_path


@pytest.mark.parametrize("bomb", BOMBS, ids=[b.id for b in BOMBS])
def test_bombs_and_huge_files_are_refused_in_seconds(tmp_path: Path, bomb: Bomb) -> None:
    config = _bomb_repo(tmp_path, bomb)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    # init and doctor take the repository's folder (and the config relative to it).
    where = ["--dir", str(config.parent)] if bomb.argv[0] in ("init", "doctor") else []
    argv = [*bomb.argv, *where, "--config", str(config)]
    done = run_measured(argv, env | {"NO_COLOR": "1"}, tmp_path)
    assert "Traceback" not in done.stderr
    if bomb.finding:
        assert done.returncode == 1, done.stdout + done.stderr
        [line] = [x for x in done.stdout.splitlines() if x.startswith("FAIL ")]
    else:
        assert done.returncode == 2, done.stdout + done.stderr
        [line] = done.stderr.strip().splitlines()
    assert bomb.path in line, line
    for word in bomb.says:
        assert word in line, line
    # Refused soon, and nothing was read into memory: the command's own CPU time and memory
    # high-water mark (tests/support/measured.py).
    assert done.cpu_s < 10, done.cpu_s
    assert done.peak_mb < 300, done.peak_mb


# --------------------------------------------------------------------------- named files

# Files the config names deeper than rules_file / schema_file / rubric_file: a judge's own
# options, the files a command or a tool command is handed. (config, suite key, value, says)
NAMED_OUTSIDE = [
    (
        "judge.yml",
        "scorer.model.options.judge_rules_file",
        "../outside/rules.yml",
        "scorer.model.options.judge_rules_file",
    ),
    (
        "evalgate.yml",
        "agent",
        {"tool_command": ["python3", "../outside/tool.py"]},
        "agent.tool_command",
    ),
    (
        "evalgate.yml",
        "model",
        {"backend": "command", "options": {"command": "python3 ../outside/app.py"}},
        "model.options.command",
    ),
]


@pytest.mark.parametrize(("config", "key", "value", "says"), NAMED_OUTSIDE)
def test_files_the_config_names_at_any_depth_stay_inside_the_repository(
    tmp_path: Path, cli: Callable[..., CliResult], config: str, key: str, value: Any, says: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("rules.yml", "tool.py", "app.py"):
        (outside / name).write_text(f"# {SECRET}\n", encoding="utf-8")
    repo = copy_example(tmp_path / "repo")
    (repo / ".git").mkdir()
    data = yaml.safe_load((repo / config).read_text(encoding="utf-8"))
    suite = next(iter(data["suites"].values()))
    *parents, last = key.split(".")
    for part in parents:
        suite = suite[part]
    suite[last] = value
    if key == "agent":
        suite["tools"] = [{"name": "lookup"}]
    (repo / config).write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out, err = cli("run", "v3", "--no-save", "--config", str(repo / config))
    assert code == 2, out + err
    [line] = err.strip().splitlines()
    assert says in line and "outside the repository" in line, line
    assert SECRET not in out + err


def test_a_pipe_in_place_of_a_case_file_is_refused_without_waiting(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    repo = copy_example(tmp_path / "repo")
    (repo / "cases.jsonl").unlink()
    os.mkfifo(repo / "cases.jsonl")  # opening it to read would wait for a writer forever
    code, out, err = cli("split", "--config", str(repo / "evalgate.yml"))
    assert code == 2, out + err
    [line] = err.strip().splitlines()
    assert "cases.jsonl" in line and "not a regular file" in line, line


@pytest.mark.parametrize(("size", "refused"), [(64, False), (65, True)])
def test_the_one_reader_reads_up_to_its_limit_and_refuses_past_it(
    tmp_path: Path, size: int, refused: bool
) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"x" * size)
    if refused:
        with pytest.raises(UserError, match="over the 64-byte limit"):
            files.read_bytes(path, "case file", limit=64)
    else:
        assert files.read_bytes(path, "case file", limit=64) == b"x" * size


def test_links_to_the_folder_itself_do_not_make_a_recursive_glob_endless(
    tmp_path: Path,
) -> None:
    repo = copy_example(tmp_path / "repo")
    config = repo / "evalgate.yml"
    config.write_text(
        config.read_text(encoding="utf-8").replace("cases: cases.jsonl", "cases: '**/cases.jsonl'"),
        encoding="utf-8",
    )
    for name in ("a", "b", "c"):
        (repo / name).symlink_to(".")  # glob.glob's ** would walk 3^40 paths
    # An endless walk is a hang (the wall bound) or minutes of CPU; the walk takes well under
    # 10 s of the command's own CPU time (tests/support/measured.py).
    done = run_measured(["split", "--config", str(config)], dict(os.environ), tmp_path, hang_s=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.cpu_s < 10, done.cpu_s


def test_links_to_the_folder_itself_do_not_make_a_promptfoo_glob_endless(tmp_path: Path) -> None:
    config = _promptfoo_repo(tmp_path, Outside("loop", "tests: [file://**/t.yaml]\n"))
    (config.parent / "t.yaml").write_text(textwrap.dedent(TEST), encoding="utf-8")
    for name in ("a", "b", "c"):
        (config.parent / name).symlink_to(".")
    # An endless walk is a hang (the wall bound) or minutes of CPU; the walk takes well under
    # 10 s of the command's own CPU time (tests/support/measured.py).
    done = run_measured(["split", "--config", str(config)], dict(os.environ), tmp_path, hang_s=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.cpu_s < 10, done.cpu_s


def test_a_private_read_takes_only_the_users_own_file_never_a_link(tmp_path: Path) -> None:
    from evalgate import files
    from evalgate.errors import UserError

    own = tmp_path / "own"
    own.write_bytes(b"mine")
    own.chmod(0o600)
    assert files.read_bytes(own, private=True) == b"mine"
    link = tmp_path / "link"
    link.symlink_to(own)
    assert files.read_bytes(link) == b"mine"  # an ordinary read follows it
    with pytest.raises(UserError, match="symbolic link loop"):
        files.read_bytes(link, private=True)  # O_NOFOLLOW: the kernel says ELOOP
    own.chmod(0o666)
    with pytest.raises(UserError, match="not the user's own"):
        files.read_bytes(own, private=True)
