"""Hostile input and hostile upstreams: what a pull request, an API or a proxy can send.

Each item of the issue is a table of data cases, so more can be added by adding an entry:

- ``CASES`` (templates, file reads, names, depth, strictness): files written over a copy of the
  bike-shop example, run with the real Anthropic backend against the loopback Messages
  stand-in; each ends with exit 2 and a one-line message (no traceback), before any call to
  the model, with nothing written outside the repository and nothing executed.
- ``FORGED`` text in names and log lines: no workflow command but ours.
- A huge answer: every report capped, the run file whole.
- ``ECHOES``: keys and tokens an upstream sends back, redacted (and an echoing stand-in).
- ``DECOYS``: 100 newer artefacts of runs a pull request controls; the real baseline found.

The escaping itself is checked against cmark-gfm in tests/report/test_escaping.py.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CliResult, copy_example
from test_action import edit_config, make_workspace, pr_event, run_action

from evalgate.action.inputs import Inputs
from evalgate.action.job import ActionJob
from evalgate.analysis.compare import compare_runs
from evalgate.analysis.summary import summarise
from evalgate.backends.base import Reply
from evalgate.cases.holdout import keygen, load_public_key, load_secret_key, seal, unseal
from evalgate.config.models import GatePolicy
from evalgate.errors import UserError
from evalgate.gate.decide import decide
from evalgate.limits import LABEL, MATRIX_COLUMNS, PAGE_VALUE, REPLY, VALUE, clip, excerpt
from evalgate.publish.github import connect, find_baseline, get_repository
from evalgate.redact import REDACTED, hold, redact
from evalgate.report.comment import CommentContext, render_comment
from evalgate.report.escape import escape
from evalgate.report.html import render_compare_html, render_run_html
from evalgate.report.render import HTML_ENV, code, md, render_model
from evalgate.runs.schema import Outcome, read_run, save_run
from tests.support.github_server import GitHubServer
from tests.support.messages_server import MessagesServer

KEY = "sk-ant-hostile-test-key-0000000000000000"
# A payload's command creates this file (in the folder beside the repository) if it runs.
PWNED = "pwned"


def _nest(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


def _deep_yaml(levels: int) -> str:
    return "version: 1\nsuites: " + "[" * levels + "]" * levels + "\n"


def _case_line(**fields: Any) -> str:
    record = {"id": "h1", "group": "g", "category": "parts", "message": "hi"} | fields
    return json.dumps(record) + "\n"


@dataclass(frozen=True)
class Hostile:
    """One hostile input: what is written, what the refusal must say."""

    id: str
    # The item (1: templates, 5: file reads, 7: config strictness).
    item: int
    # Relative path -> content (str or bytes) written over the example.
    files: dict[str, str | bytes] = field(default_factory=dict)
    # Relative path -> symlink target (relative to the link's folder, or absolute).
    links: dict[str, str] = field(default_factory=dict)
    # Key path (dots) -> value, set in the suite's config (``config.KEY`` sets a top-level key).
    suite: dict[str, Any] = field(default_factory=dict)
    # (old, new) text replacements in the written config, for what YAML cannot dump.
    edit: tuple[tuple[str, str], ...] = ()
    # Words the one-line message must contain.
    says: tuple[str, ...] = ()
    argv: tuple[str, ...] = ("run", "v3", "--no-save")


OUT = f"../{PWNED}"  # relative to the repository: a file beside it


CASES = [
    # 1. templates run in a sandbox: no code runs, an unsafe access is one line naming the file
    Hostile(
        "prompt-lipsum-globals",
        1,
        files={"prompts/v3.txt": f"{{{{ lipsum.__globals__['os'].system('touch {OUT}') }}}}"},
        says=("prompts/v3.txt", "unsafe"),
    ),
    Hostile(
        "prompt-cycler-os",
        1,
        files={"prompts/v3.txt": "{{ cycler.__init__.__globals__.os.popen('id').read() }}"},
        says=("prompts/v3.txt", "unsafe"),
    ),
    Hostile(
        "prompt-mro-subclasses",
        1,
        files={"prompts/v3.txt": "{{ ''.__class__.__mro__[1].__subclasses__() }}"},
        says=("prompts/v3.txt", "unsafe"),
    ),
    Hostile(
        "prompt-include-file",
        1,
        files={"prompts/v3.txt": "{% include '/etc/passwd' %}"},
        says=("prompts/v3.txt", "cannot read other files"),
    ),
    Hostile(
        "prompt-huge-string",
        1,
        files={"prompts/v3.txt": "{{ 'x' * 10 ** 12 }}"},
        says=("prompts/v3.txt", "budget", "1,000,000,000,000"),
    ),
    Hostile(
        "template-globals",
        1,
        suite={"template": f"{{{{ lipsum.__globals__.os.system('touch {OUT}') }}}}"},
        says=("template", "unsafe"),
    ),
    Hostile(
        "template-field-attribute",
        1,
        suite={"template": "{{ message.__class__.__base__.__subclasses__() }}"},
        says=("template", "unsafe"),
    ),
    # 5. one reader: OS and decode errors named; paths that leave the repository refused
    Hostile(
        "case-file-symlink-loop",
        5,
        links={"cases.jsonl": "cases.jsonl"},
        says=("cases.jsonl", "symbolic link loop"),
    ),
    Hostile(
        "config-symlink-loop",
        5,
        links={"evalgate.yml": "evalgate.yml"},
        says=("evalgate.yml", "symbolic link loop"),
    ),
    Hostile(
        "config-not-utf8",
        5,
        files={"evalgate.yml": b"version: 1\nsuites: {}\n# caf\xe9\n"},
        says=("evalgate.yml:3", "not valid UTF-8"),
    ),
    Hostile(
        "prompt-not-utf8",
        5,
        files={"prompts/v3.txt": b"Classify.\n\xff\xfe\n"},
        says=("prompts/v3.txt:2", "not valid UTF-8"),
    ),
    Hostile(
        "prompt-is-a-folder",
        5,
        files={"prompts/v3.txt/inner": "x"},
        says=("prompts/v3.txt", "is a directory"),
    ),
    Hostile(
        "config-deep-yaml",
        5,
        files={"evalgate.yml": _deep_yaml(5_000)},
        says=("evalgate.yml", "nested too deeply"),
    ),
    Hostile(
        "config-huge-int",
        5,
        suite={"concurrency": "HUGE_INT"},
        edit=(("HUGE_INT", "9" * 5_000),),
        says=("evalgate.yml", "cannot be read"),
    ),
    Hostile(
        "case-file-huge-int",
        5,
        files={"cases.jsonl": '{"id": "h", "category": "parts", "message": ' + "7" * 5000 + "}\n"},
        says=("cases.jsonl:1", "cannot be read"),
    ),
    Hostile(
        "case-input-900-deep",
        5,
        files={"cases.jsonl": _case_line(message=_nest(900))},
        says=("cases.jsonl:1", "field 'message'", "levels deep"),
    ),
    Hostile(
        "yaml-case-deep",
        5,
        suite={"cases": "cases.yml"},
        files={"cases.yml": "- id: a\n  category: x\n  message: " + "[" * 3000 + "]" * 3000},
        says=("cases.yml", "nested too deeply"),
    ),
    Hostile(
        "suite-name-slash",
        5,
        suite={"config.suites": {"a/../../b": "SUITE"}},
        says=("suite name", "'a/../../b'", "not allowed"),
    ),
    Hostile(
        "suite-name-newline-command",
        5,
        suite={"config.suites": {"x\n::error title=pwned::forged": "SUITE"}},
        says=("suite name", "not allowed"),
    ),
    Hostile(
        "prompt-version-with-newline",
        5,
        files={"prompts/v9\n::warning::x.txt": "Classify."},
        argv=("run", "v3", "--no-save"),
        says=("prompt version", "not allowed"),
    ),
    Hostile(
        "prompt-outside-repository",
        5,
        suite={"prompts": "../outside/*.txt"},
        says=("prompt", "outside the repository"),
    ),
    Hostile(
        "case-file-absolute-outside",
        5,
        suite={"cases": "ABSOLUTE_OUTSIDE/cases.jsonl"},
        says=("case file", "outside the repository"),
    ),
    Hostile(
        "case-file-symlink-out",
        5,
        links={"cases.jsonl": "../outside/cases.jsonl"},
        says=("case file", "outside the repository"),
    ),
    Hostile(
        "state-dir-outside",
        5,
        suite={"config.state_dir": "../outside/state"},
        argv=("run", "v3"),
        says=("state_dir", "outside the repository"),
    ),
    Hostile(
        "rules-file-outside",
        5,
        suite={"model.backend": "fake", "model.options.rules_file": "../outside/rules.yml"},
        says=("rules_file", "outside the repository"),
    ),
    Hostile(
        "sealed-holdout-outside",
        5,
        suite={"sealed_holdout": {"file": "../outside/sealed.jsonl"}},
        says=("sealed_holdout.file", "outside the repository"),
    ),
    Hostile(
        "sealed-ledger-outside",
        5,
        suite={"sealed_holdout": {"changes": "/tmp/ledger.jsonl"}},
        says=("sealed_holdout.changes", "outside the repository"),
    ),
    Hostile(
        "rules-file-symlink-loop",
        5,
        suite={"model.backend": "fake", "model.options.rules_file": "loop.yml"},
        links={"loop.yml": "loop.yml"},
        says=("loop.yml", "symbolic link loop"),
    ),
    Hostile(
        "schema-file-is-a-folder",
        5,
        suite={"scorer": {"kind": "json_schema", "schema_file": "schema.json"}},
        files={"schema.json/inner": "{}"},
        says=("schema.json", "is a directory"),
    ),
    Hostile(
        "schema-file-deep-json",
        5,
        suite={"scorer": {"kind": "json_schema", "schema_file": "schema.json"}},
        files={"schema.json": "[" * 100_000 + "]" * 100_000},
        says=("schema.json", "cannot be read"),
    ),
    Hostile(
        "rubric-not-utf8",
        5,
        suite={
            "scorer": {
                "kind": "judge",
                "rubric_file": "rubric.txt",
                "model": {"backend": "anthropic", "name": "claude-haiku-4-5"},
            }
        },
        files={"rubric.txt": b"Grade it.\n\xc3\x28\n"},
        says=("rubric.txt:2", "not valid UTF-8"),
    ),
    Hostile(
        "rubric-outside",
        5,
        suite={
            "scorer": {
                "kind": "judge",
                "rubric_file": "../outside/v1.txt",
                "model": {"backend": "anthropic", "name": "claude-haiku-4-5"},
            }
        },
        says=("rubric_file", "outside the repository"),
    ),
    Hostile(
        "promptfoo-var-file-outside",
        5,
        suite={
            "cases_format": "promptfoo",
            "cases": "promptfooconfig.yaml",
            "scorer": {"kind": "contains"},
            "fields": {"input": ["message"], "expected": "expected"},
        },
        files={
            "promptfooconfig.yaml": "tests:\n  - vars:\n      message: file://../outside/v1.txt\n"
            "    assert:\n      - type: icontains\n        value: parts\n"
        },
        says=("var file", "outside the repository"),
    ),
    # 7. config strictness and duplicate keys
    Hostile(
        "max-tokens-true",
        7,
        suite={"model.max_tokens": True},
        says=("max_tokens", "should be a whole number"),
    ),
    Hostile(
        "concurrency-string",
        7,
        suite={"concurrency": "8"},
        says=("concurrency", "should be a whole number"),
    ),
    Hostile(
        "mid-p-one",
        7,
        suite={"gate.mid_p": 1},
        says=("gate.mid_p", "should be true or false"),
    ),
    Hostile(
        "inconclusive-exit-true",
        7,
        suite={"gate.inconclusive_exit": True},
        says=("gate.inconclusive_exit", "not a boolean"),
    ),
    Hostile(
        "version-true",
        7,
        suite={"config.version": True},
        says=("version", "not a boolean"),
    ),
    Hostile(
        "temperature-true",
        7,
        suite={"model.temperature": True},
        says=("model.temperature", "should be a number"),
    ),
    Hostile(
        "alpha-string",
        7,
        suite={"gate.alpha": "0.05"},
        says=("gate.alpha", "should be a number"),
    ),
    Hostile(
        "seed-float",
        7,
        suite={"gate.seed": 1.5},
        says=("gate.seed", "should be a whole number"),
    ),
    Hostile(
        "yaml-case-duplicate-key",
        7,
        suite={"cases": "cases.yml"},
        files={"cases.yml": "- id: a\n  category: parts\n  category: complaint\n  message: hi\n"},
        says=("cases.yml:3", "duplicate key 'category'"),
    ),
]


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *path, last = dotted.split(".")
    for part in path:
        data = data.setdefault(part, {})
    data[last] = value


def build(case: Hostile, tmp_path: Path) -> Path:
    """The example with the case's changes, on the Anthropic backend; returns its config."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "v1.txt").write_text("a prompt from elsewhere\n", encoding="utf-8")
    (outside / "cases.jsonl").write_text(_case_line(), encoding="utf-8")
    (outside / "rules.yml").write_text("rules: []\n", encoding="utf-8")
    root = copy_example(tmp_path / "repo")
    config_path = root / "evalgate.yml"
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    suite = config["suites"]["bike-shop"]
    suite["model"] |= {"backend": "anthropic", "name": "claude-haiku-4-5", "options": {}}
    for dotted, value in case.suite.items():
        if isinstance(value, str):
            value = value.replace("ABSOLUTE_OUTSIDE", str(outside))
        if dotted.startswith("config."):
            if value and isinstance(value, dict) and "SUITE" in value.values():
                value = {k: suite for k in value}
            config[dotted.removeprefix("config.")] = value
        else:
            _set(suite, dotted, value)
    text = yaml.safe_dump(config, width=10**6)
    for old, new in case.edit:
        text = text.replace(old, new)
    config_path.write_text(text, encoding="utf-8")
    for relative, content in case.files.items():
        path = root / relative
        if path.parent.is_file():
            path.parent.unlink()  # a folder where the example has a file
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    for relative, target in case.links.items():
        link = root / relative
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    return config_path


def _listing(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_is_refused_before_any_call(
    case: Hostile,
    tmp_path: Path,
    srv: MessagesServer,
    cli: Callable[..., CliResult],
) -> None:
    config = build(case, tmp_path)
    outside_before = _listing(tmp_path / "outside")
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    code, out, err = cli(*case.argv, "--config", str(config), env=env)
    assert code == 2, (out, err)
    assert "Traceback" not in err
    message = err.strip()
    assert len(message.splitlines()) == 1, message
    for word in case.says:
        assert word in message, (word, message)
    # Refused before any call to the model, with nothing run and nothing written outside.
    assert srv.stats().requests == 0
    assert not (tmp_path / PWNED).exists()
    assert _listing(tmp_path / "outside") == outside_before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "repo"]


def test_every_refusal_case_has_its_own_id() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert {c.item for c in CASES} >= {1, 5, 7}


def test_a_sandboxed_prompt_still_renders_plain_jinja(
    tmp_path: Path, srv: MessagesServer, cli: Callable[..., CliResult]
) -> None:
    """The sandbox refuses internals, not the template language: loops, filters, ranges."""
    case = Hostile(
        "plain",
        1,
        files={
            "prompts/v3.txt": "{% for w in ['parts', 'complaint'] %}{{ w|upper }} {% endfor %}"
            "{{ range(3)|list|length }} {{ 'ab' * 2 }}\nAnswer as JSON.\n"
        },
    )
    config = build(case, tmp_path)
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    code, _, err = cli("run", "v3", "--no-save", "--limit", "2", "--config", str(config), env=env)
    assert "Traceback" not in err
    assert code == 0, err
    system = srv.requests[-1].body["system"]
    text = system if isinstance(system, str) else system[0]["text"]
    assert text.startswith("PARTS COMPLAINT 3 abab\n")


@pytest.mark.parametrize("version", [2, 0, "1", True, None, [1]])
def test_a_sealed_record_of_an_unknown_version_is_refused(version: Any) -> None:
    """Item 7: a sealed line whose ``v`` this evalgate does not know is refused by name."""
    secret_text, public_text = keygen()
    box = json.loads(seal({"id": "a", "category": "parts"}, load_public_key(public_text)))
    line = json.dumps(box | {"v": version})
    with pytest.raises(UserError, match="unknown format version") as caught:
        unseal(line, load_secret_key(secret_text), "holdout.sealed.jsonl:3")
    assert caught.value.where == "holdout.sealed.jsonl:3"
    # The same line with v = 1 opens: the refusal is the version's, not damage.
    assert unseal(json.dumps(box), load_secret_key(secret_text), "x")["id"] == "a"


# ------------------------------------------------------------------ 2. the log and the summary

FORGED = "x\n::error title=forged::pwned\n::add-mask::secret\n"


def _commands(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.lstrip().startswith("::")]


def test_a_suite_name_cannot_write_workflow_commands(tmp_path: Path) -> None:
    """A suite name from the PR's own config with a newline and ``::error``: one line of ours."""
    workspace = make_workspace(tmp_path)
    edit_config(workspace, lambda c: c.update(suites={FORGED: c["suites"]["bike-shop"]}))
    job = run_action(workspace, "pull_request", pr_event(), ref="refs/pull/7/merge")
    assert job.code == 2
    assert "Traceback" not in job.out + job.err
    commands = _commands(job.out)
    assert commands and all(line.startswith("::error title=evalgate::") for line in commands)
    # The summary quotes it escaped: no line of it starts a command or a block.
    assert all(not line.startswith("::") for line in job.summary.splitlines())


def test_untrusted_text_in_log_lines_and_annotations_stays_on_its_line() -> None:
    out = io.StringIO()
    runner = ActionJob(env={}, inputs=Inputs(), out=out, err=io.StringIO(), event={})
    runner.log(f"suite {FORGED}: PASS")
    runner.annotate("warning", f"category {FORGED}")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert not lines[0].startswith("::") and "::" not in lines[0]
    assert lines[1].startswith("::warning title=evalgate::category x%0A::error")


# ------------------------------------------------------------------ 4. secrets echoed upstream


def test_an_upstream_that_echoes_the_key_never_gets_it_shown_or_saved(
    tmp_path: Path, srv: MessagesServer, cli: Callable[..., CliResult]
) -> None:
    """A proxy quoting the request's x-api-key in its error bodies: the key appears nowhere
    evalgate writes (stderr, stdout, the run file, the Markdown and HTML reports)."""
    srv.knobs = srv.knobs.model_copy(
        update={"bad_request": 1.0, "echo_credentials": True, "api_key": KEY}
    )
    srv.script(["ok"])  # the first answers (a refused first request stops the run at once)
    config = build(Hostile("echo", 4), tmp_path)
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    code, out, err = cli(
        "run", "v3", "--limit", "3", "--concurrency", "1", "--config", str(config), env=env
    )
    assert "Traceback" not in err
    assert srv.stats().requests == 3, err
    assert KEY in json.dumps(srv.requests[-1].headers)  # the stand-in was sent it, and echoed it
    runs = sorted((config.parent / ".evalgate" / "runs").glob("*.json"))
    assert len(runs) == 1, (code, out, err)
    saved = runs[0].read_text(encoding="utf-8")
    assert "[redacted]" in saved and "request headers" in saved
    shown = [out, err, saved]
    for fmt in ("markdown", "text", "json"):
        shown.append(cli("report", runs[0].stem, "--config", str(config), "--format", fmt)[1])
    page = tmp_path / "page.html"
    cli("report", runs[0].stem, "--config", str(config), "--html", str(page))
    shown.append(page.read_text(encoding="utf-8"))
    for text in shown:
        assert KEY not in text
        assert KEY[12:30] not in text  # not even a part of it


# Texts an upstream may send back, and what must be gone from them (None: left as it is).
ECHOES = [
    ("anthropic-key", "invalid x-api-key sk-ant-api03-AbCdEf0123456789_xyz-QQ", "sk-ant-api03"),
    ("openai-key", "Incorrect API key provided: sk-proj-abcdefghijklmnop1234", "sk-proj-abc"),
    ("actions-token", "Bad credentials for ghs_16C7e42F292c6912E7710c838347Ae178B4a", "ghs_16C7"),
    ("pat", "token github_pat_11ABCDEFG0123456789_abcdefghijkl rejected", "github_pat_11"),
    ("bearer-header", "echo: Authorization: Bearer abc.def-ghi_jkl~mno", "abc.def-ghi"),
    ("basic-header", "authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "dXNlcjpw"),
    ("json-field", '{"api_key": "k3y-v4lu3-xyz", "model": "m"}', "k3y-v4lu3"),
    ("query", "GET /v1/x?access_token=s3cr3tvalue&page=2 failed", "s3cr3tvalue"),
    ("url-password", "proxy https://bot:hunter2hunter2@proxy.example:8080 refused", "hunter2"),
    ("holdout-key", "EVALGATE-HOLDOUT-KEY-1-q83vEjWf9YfR0KcA3Lx0uXWkN1", "q83vEjWf"),
    ("plain-counts", "rate limited: 120 input tokens, max_tokens: 64, retry in 2 s", None),
]


@pytest.mark.parametrize(("text", "gone"), [e[1:] for e in ECHOES], ids=[e[0] for e in ECHOES])
def test_the_redactor_removes_key_shaped_text(text: str, gone: str | None) -> None:
    cleaned = redact(text)
    if gone is None:
        assert cleaned == text
    else:
        assert gone not in cleaned and REDACTED in cleaned


def test_held_secrets_go_in_any_error_and_in_replies(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret this process holds, of no known shape, in an error or a reply: removed."""
    secret = "plain-words-correct-horse-battery"
    hold(secret)
    error = UserError(f"GitHub answered 401: {secret} is not valid", where=secret, fix=secret)
    assert secret not in str(error) and error.one_line().count(REDACTED) == 3
    reply = Reply(text=f"the key is {secret}", error=f"echo {secret}")
    outcome = Outcome(text=f"x {secret}", error=secret)
    for value in (reply.text, reply.error, outcome.text, outcome.error):
        assert value is not None and secret not in value
    # A key-shaped answer of a model is its answer: only held secrets leave a reply.
    assert Reply(text="sk-ant-api03-not-ours-0123456789").text.startswith("sk-ant-api03")


# ------------------------------------------------------------------ 3. bounded output

HUGE = 1_000_000


def test_a_huge_answer_is_capped_everywhere_it_is_shown_and_kept_in_the_run_file(
    make_case: Callable[..., Any], make_run: Callable[..., Any], tmp_path: Path
) -> None:
    """A 1 MB label (and a 1 MB answer per distinct column, 30 of them): every report is
    small, the matrix has at most MATRIX_COLUMNS answer columns, the run file keeps it all."""
    rambling = [f"{i:02d}" + "x" * HUGE for i in range(30)]
    cases = [make_case(f"c{i}", "parts", answer) for i, answer in enumerate(rambling)]
    cases += [make_case(f"ok{i}", "parts", "parts") for i in range(5)]
    baseline = make_run([make_case(c.id, "parts", "parts") for c in cases])
    candidate = make_run(cases, prompt={"name": "v2"})
    summary = summarise(candidate)
    assert summary.confusion is not None
    assert len(summary.confusion.answers) <= MATRIX_COLUMNS + 1
    assert all(len(a) <= LABEL for a in summary.confusion.answers)
    shown = {fmt: render_model("run", summary, fmt) for fmt in ("text", "markdown")}  # type: ignore[arg-type]
    shown["html"] = render_run_html(candidate, summary)
    comparison = compare_runs(baseline, candidate)
    shown["compare"] = render_model("compare", comparison, "markdown")
    shown["compare-html"] = render_compare_html(baseline, candidate, comparison)
    verdict = decide(baseline, candidate, GatePolicy())
    ctx = CommentContext(suite="bike-shop", verdict=verdict, candidate=summary)
    shown["comment"] = render_comment(ctx)
    for name, text in shown.items():
        # 30 answers of 1 MB: each report shows excerpts only (a page, its replies' starts).
        assert len(text) < 30 * (REPLY + 2_000) + 60_000, (name, len(text))
    path = save_run(candidate, tmp_path / "state")
    kept = read_run(path)  # the full text is kept (the file itself may be compressed)
    assert sum(len(c.outcomes[0].text or "") for c in kept.cases) > 30 * HUGE
    assert kept.cases[0].outcomes[0].answer == rambling[0]


def test_excerpts_cost_nothing_more_for_a_longer_text() -> None:
    assert excerpt("a  b\n c", 10) == "a b c"
    assert excerpt("x" * 10, 10) == "x" * 10
    assert excerpt("x" * 11, 10) == "x" * 9 + "…"
    # A text longer than what is looked at, but all whitespace after the start: still marked.
    assert excerpt("ab" + " " * 1_000, 10) == "ab…"
    assert clip("y" * 5, 4).startswith("yyyy…\n[1 more characters")


# ------------------------------------------------------------------ 6. baseline decoys

GH_REPO, GH_FORK, BASELINE = "octo/widgets", "forker/widgets", "evalgate-baseline"


@dataclass(frozen=True)
class Decoy:
    """100 newer artefacts named like the baseline, made by runs a PR controls."""

    id: str
    event: str = "pull_request"
    branch: str = "main"
    fork: bool = False
    # Another workflow's runs: trusted, but they hold no baseline.
    path: str = ".github/workflows/evalgate.yml"
    artefact: bool = True


DECOYS = [
    Decoy("pull-request-feature-branch", branch="feature"),
    Decoy("pull-request-head-main"),
    Decoy("pull-request-target-main", event="pull_request_target"),
    Decoy("workflow-run-main", event="workflow_run"),
    Decoy("fork-pull-request-head-main", fork=True),
    Decoy("fork-pull-request-target-main", event="pull_request_target", fork=True),
    Decoy("push-to-another-branch", event="push", branch="release"),
    # Not decoys but noise: 100 newer pushes to main whose workflow (CI) makes no baseline.
    Decoy("other-workflow-pushes", event="push", path=".github/workflows/ci.yml", artefact=False),
]


@pytest.mark.parametrize("real_event", ["push", "schedule", "workflow_dispatch"])
@pytest.mark.parametrize("decoy", DECOYS, ids=[d.id for d in DECOYS])
def test_the_real_baseline_is_found_under_100_decoys(decoy: Decoy, real_event: str) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    with GitHubServer() as gh:
        gh.add_repo(GH_REPO, files={"prompts/v1.txt": "v1\n"})
        gh.create_branch(GH_REPO, "feature")
        gh.create_branch(GH_REPO, "release")
        gh.add_repo(GH_FORK, fork_of=GH_REPO)
        real_run = gh.add_workflow_run(
            GH_REPO, event=real_event, head_branch="main", created_at=now - timedelta(days=3)
        )
        real = gh.add_artifact(GH_REPO, BASELINE, files={"run.json": "{}"}, run=real_run)
        for i in range(100):
            run = gh.add_workflow_run(
                GH_REPO,
                event=decoy.event,
                head_branch=decoy.branch,
                head_repo=GH_FORK if decoy.fork else None,
                head_sha=None if decoy.branch != "main" or not decoy.fork else "a" * 40,
                path=decoy.path,
                created_at=now - timedelta(hours=60 - i / 2),
            )
            if decoy.artefact:
                gh.add_artifact(GH_REPO, BASELINE, files={"run.json": "{}"}, run=run)
        client = connect(gh.write_token, gh.url)
        try:
            found = find_baseline(
                get_repository(client, GH_REPO),
                BASELINE,
                "main",
                workflow_path=".github/workflows/evalgate.yml",
            )
        finally:
            client.close()
        assert found is not None and found.artifact_id == real.id and found.event == real_event
        # Found in a bounded number of requests, however many decoys there are.
        assert len(gh.find_requests("GET", f"/repos/{GH_REPO}/actions/runs/*/artifacts")) <= 31


@pytest.mark.parametrize(
    ("ref", "path"),
    [
        (
            "octo/widgets/.github/workflows/evalgate.yml@refs/pull/7/merge",
            ".github/workflows/evalgate.yml",
        ),
        (
            "other/repo/.github/workflows/evalgate.yml@refs/heads/main",
            None,
        ),  # a reusable one's caller
        ("", None),
    ],
)
def test_the_action_names_its_own_workflow_for_the_baseline_search(
    ref: str, path: str | None
) -> None:
    env = {"GITHUB_WORKFLOW_REF": ref, "GITHUB_REPOSITORY": GH_REPO}
    runner = ActionJob(env=env, inputs=Inputs(), out=io.StringIO(), err=io.StringIO(), event={})
    assert runner.workflow_path == path


def test_every_escaped_value_has_a_cap() -> None:
    """Behind the caps of each place: no single Markdown value, code span or page text is
    longer than its backstop, however long the text."""
    huge = "word " * 1_000_000
    assert len(md(huge)) <= VALUE + 10 and md(huge).endswith("…")
    assert len(code(huge)) <= VALUE + 10
    page = HTML_ENV.from_string("<p>{{ text }}</p>").render(text=huge)
    assert len(page) < PAGE_VALUE + 200
    assert md("short @user") == escape("short @user", "markdown")  # short text: the escaper's own


def test_a_github_error_that_echoes_the_token_is_redacted(
    tmp_path: Path, make_run: Callable[..., Any]
) -> None:
    """GitHub (or a proxy in front of it) quoting the token in an error body: the one-line
    error names the failure, never the token."""
    with GitHubServer() as gh:
        gh.add_repo(GH_REPO, files={"prompts/v1.txt": "v1\n"})
        token = gh.write_token
        hold(token)
        echoed = {"message": f"Bad credentials: {token} (Authorization: token {token})"}
        gh.fail_next("GET", f"/repos/{GH_REPO}/actions/workflows/*", status=401, body=echoed)
        gh.fail_next("GET", f"/repos/{GH_REPO}/actions/runs", status=401, body=echoed, times=3)
        client = connect(token, gh.url)
        try:
            with pytest.raises(UserError) as caught:
                find_baseline(
                    get_repository(client, GH_REPO), BASELINE, "main", workflow_path="x.yml"
                )
        finally:
            client.close()
    message = caught.value.one_line()
    assert "401" in message and token not in message and REDACTED in message


def test_an_output_with_a_line_break_cannot_set_another_output(tmp_path: Path) -> None:
    out_file = tmp_path / "output"
    env = {"GITHUB_OUTPUT": str(out_file)}
    runner = ActionJob(env=env, inputs=Inputs(), out=io.StringIO(), err=io.StringIO(), event={})
    runner.outputs.set("run_file", "runs/x.json\nverdict=pass")
    runner.outputs.set("verdict", "fail")
    runner.flush()
    lines = out_file.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("run_file<<EVALGATE_") and lines[1:3] == [
        "runs/x.json",
        "verdict=pass",
    ]
    assert lines[3] == lines[0].removeprefix("run_file<<") and lines[4] == "verdict=fail"
