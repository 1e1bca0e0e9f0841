"""Hostile templates: a budget for every render, errors that show nothing of the holdout,
pure renders, and tracebacks that cannot write workflow commands.

Each attack is data: ``BUDGET`` (payload, where it goes, what the one line says) runs through
``evalgate run`` in a child process (its peak memory read from ``wait4``), ``evalgate doctor``
and the action; ``IMPURE`` holds the mutating and random templates; ``FORGED_TRACES`` the texts
an exception may carry into the log.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import CliResult, copy_example
from test_action import (
    FOLDER,
    PROMPT,
    REPO,
    Job,
    api,
    api_env,
    edit_config,
    example_tree,
    holdout_cases,
    make_workspace,
    push_event,
    run_action,
    suite_of,
)
from test_hostile import KEY, Hostile, build

from evalgate.action.main import write_trace
from evalgate.cases.templating import compile_template, render_turn
from evalgate.errors import UserError
from evalgate.report.escape import inert
from tests.support.github_server import GitHubServer
from tests.support.measured import run_measured
from tests.support.messages_server import MessagesServer

PEAK_MB = 300
SECONDS = 10


@dataclass(frozen=True)
class Attack:
    """One template payload and the safe outcome: exit 2, one line with ``says`` in it."""

    id: str
    text: str
    # "prompt": the text is the v3 prompt file; "turn": the suite's user-turn template.
    into: str = "prompt"
    says: tuple[str, ...] = ("budget",)

    def hostile(self) -> Hostile:
        if self.into == "prompt":
            return Hostile(self.id, 1, files={"prompts/v3.txt": self.text})
        return Hostile(self.id, 1, suite={"template": self.text})

    @property
    def where(self) -> str:
        # The user-turn template is written in evalgate.yml: its errors say where.
        return "prompts/v3.txt" if self.into == "prompt" else "suites.bike-shop.template (case "


DOUBLING = (
    '{% set ns = namespace(s="x") %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}'
    "{% endfor %}{{ ns.s|length }}"
)
BUDGET = [
    Attack("center-1e9", '{{ "x"|center(10**9) }}'),
    Attack("center-literal", '{{ "x"|center(1000000000) }}'),
    Attack("percent-format-filter", '{{ "%01000000000d"|format(1) }}'),
    Attack("percent-operator-star", '{{ "%*d" % (10**9, 1) }}'),
    Attack("str-format-width", '{{ "{:>1000000000}".format(1) }}'),
    Attack("str-format-nested-width", '{{ "{0:{1}}".format(1, 10**9) }}'),
    Attack("markup-format-width", '{{ ("{:>1000000000}"|safe).format(1) }}'),
    Attack("indent-1e9", '{{ "a\nb"|indent(10**9, true) }}'),
    Attack("ljust-method", '{{ "x".ljust(10**9) }}'),
    Attack("namespace-doubling-concat", DOUBLING),
    Attack("namespace-doubling-plus", DOUBLING.replace("ns.s ~ ns.s", "ns.s + ns.s")),
    Attack(
        "big-integer-squaring",
        "{% set ns = namespace(n=3) %}{% for i in range(100000) %}"
        "{% set ns.n = ns.n * ns.n %}{% endfor %}{{ ns.n % 7 }}",
    ),
    Attack(
        "big-integer-slow-loop",
        "{% set ns = namespace(n=3) %}{% for i in range(100000) %}{% for j in range(100000) %}"
        "{% set ns.n = (ns.n * 7) % 1000003 %}{% endfor %}{% endfor %}{{ ns.n }}",
    ),
    Attack(
        "empty-nested-loop",
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    ),
    Attack("join-shared-string", '{% set b = "x" * 1000000 %}{{ ([b] * 1000)|join }}'),
    Attack("print-shared-list", '{% set b = "x" * 1000000 %}{{ [b] * 1000 }}'),
    Attack("str-join-method", '{% set b = "x" * 1000000 %}{{ ",".join([b] * 1000) }}'),
    Attack(
        "output-over-1mib",
        '{% set b = "x" * 100000 %}{% for i in range(1000) %}{{ b }}{% endfor %}',
    ),
    Attack(
        "macro-buffer",
        '{% macro m() %}{% for i in range(100000) %}{{ "y" * 1000 }}{% endfor %}{% endmacro %}'
        "{{ m()|length }}",
    ),
    Attack(
        "many-distinct-strings",
        "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
        '{% set ns.l = ns.l + [("x" * 900000) ~ i] %}{% endfor %}{{ ns.l|length }}',
    ),
    Attack("batch-fill", '{{ [1]|batch(10**9, "x")|list }}'),
    Attack("tojson-indent", '{{ {"a": 1}|tojson(indent=1000000000) }}'),
    Attack("wordwrap-wrapstring", '{{ "a b c d"|wordwrap(1, wrapstring="z" * 1000000) }}'),
    # These ended in a traceback and exit 1.
    Attack("format-missing-name", '{{ "{a}".format() }}', says=("KeyError",)),
    Attack("format-missing-index", '{{ "{}".format() }}', says=("IndexError",)),
    Attack("xmlattr-on-string", "{{ message|xmlattr }}", "turn", ("AttributeError",)),
    Attack("dictsort-on-string", "{{ message|dictsort }}", "turn", ("AttributeError",)),
    Attack("encode-rot13", '{{ message.encode("rot13") }}', "turn", ("LookupError",)),
    Attack("divide-by-zero", "{{ 1 // 0 }}", says=("ZeroDivisionError",)),
]


def test_every_attack_has_its_own_id() -> None:
    assert len({a.id for a in BUDGET}) == len(BUDGET)


def _example(attack: Attack, root: Path) -> Path:
    """The bike-shop example (its offline fake model) with the attack written in."""
    repo = copy_example(root / "repo")
    if attack.into == "prompt":
        (repo / "prompts" / "v3.txt").write_text(attack.text, encoding="utf-8")
    else:
        config = yaml.safe_load((repo / "evalgate.yml").read_text(encoding="utf-8"))
        config["suites"]["bike-shop"]["template"] = attack.text
        (repo / "evalgate.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return repo / "evalgate.yml"


@pytest.mark.parametrize("attack", BUDGET, ids=[a.id for a in BUDGET])
def test_run_refuses_the_template_in_one_line_soon_and_small(
    attack: Attack, tmp_path: Path
) -> None:
    config = _example(attack, tmp_path)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "NO_COLOR": "1"}
    done = run_measured(["run", "v3", "--no-save", "--config", str(config)], env, tmp_path)
    err = done.stderr
    assert done.returncode == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for word in (attack.where, *attack.says):
        assert word in lines[0], (word, lines[0])
    # The child's own CPU time and memory high-water mark (tests/support/measured.py).
    assert done.cpu_s < SECONDS, done.cpu_s
    assert done.peak_mb < PEAK_MB, done.peak_mb


@pytest.mark.parametrize("attack", BUDGET, ids=[a.id for a in BUDGET])
def test_doctor_names_the_template_in_one_line(
    attack: Attack, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    config = build(attack.hostile(), tmp_path)
    # CPU time, not wall time: load on the machine does not stretch it.
    started = time.process_time()
    code, out, err = cli("doctor", "--config", str(config), env={"ANTHROPIC_API_KEY": KEY})
    assert time.process_time() - started < SECONDS
    # doctor reports every check; a FAIL line exits 1, as its help says.
    assert code == 1 and "Traceback" not in out + err
    named = [line for line in (out + err).splitlines() if attack.where in line]
    assert named, out + err
    assert any(all(word in line for word in attack.says) for line in named), named


@pytest.mark.parametrize("attack", BUDGET[::3] + BUDGET[-6:], ids=lambda a: a.id)
def test_the_action_stops_with_one_error_line(attack: Attack, tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    if attack.into == "prompt":
        (workspace / PROMPT).write_text(attack.text, encoding="utf-8")
    else:
        edit_config(workspace, lambda c: suite_of(c).update(template=attack.text))
    started = time.process_time()
    job = run_action(workspace, "push", push_event(), ref="refs/heads/main")
    assert time.process_time() - started < SECONDS
    assert job.code == 2, job.out + job.err
    assert "Traceback" not in job.out + job.err
    errors = job.annotations("error")
    assert len(errors) == 1 and attack.where in errors[0], job.out
    assert all(word in errors[0] for word in attack.says), errors
    assert [line for line in job.out.splitlines() if line.startswith("::")] == errors
    assert "evalgate stopped" in job.summary


# ------------------------------------------------------------ a template error at release


@pytest.fixture
def gh() -> Iterator[GitHubServer]:
    with GitHubServer() as server:
        server.add_repo(REPO, files=example_tree())
        yield server


def test_a_template_error_on_a_holdout_case_shows_nothing_of_it(
    tmp_path: Path, gh: GitHubServer
) -> None:
    """``{{ {}[message] }}`` for every message that is not a dev one: the error meets a
    holdout case first, and its text (a KeyError, an UndefinedError) would quote it."""
    workspace = make_workspace(tmp_path)
    holdout = [message for _, message in holdout_cases(workspace)]
    assert holdout
    lines = (workspace / FOLDER / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    dev = [r["message"] for r in rows if r["message"] not in holdout]
    template = (
        "{% if message in " + json.dumps(dev) + " %}<message>{{ message }}</message>"
        "{% else %}{{ {}[message] }}{% endif %}"
    )
    edit_config(workspace, lambda c: suite_of(c).update(template=template))
    sha = gh.branch_sha(REPO, "main")
    assert sha is not None
    job: Job = run_action(
        workspace,
        "push",
        push_event(),
        ref="refs/tags/v1.0.0",
        inputs=api(gh),
        env=api_env(gh) | {"GITHUB_SHA": sha},
    )
    assert job.code == 2, job.out + job.err
    errors = job.annotations("error")
    assert len(errors) == 1 and "a holdout case" in errors[0], job.out
    published = [r.body.decode("utf-8", "replace") for r in gh.requests if r.body]
    shown = "\n".join([job.out, job.err, job.summary, *published])
    for message in holdout:
        for text in {message, json.dumps(message)[1:-1], message[:40]}:
            assert text not in shown, text
        # Escaped for Markdown or the log, a value would still read the same: no word run.
        assert " ".join(message.split()[:6]) not in shown.replace("\\", "")


def test_a_dev_case_error_may_name_its_case_but_a_holdout_one_never() -> None:
    template = compile_template("{{ {}[message] }}", "template")
    with pytest.raises(UserError) as dev:
        render_turn(template, {"message": "dev text"}, "template (case 'd1')")
    assert "d1" in str(dev.value)
    for holdout_text in ("sealed text 123", "{{ x }}", "%s"):
        with pytest.raises(UserError) as sealed:
            render_turn(
                template, {"message": holdout_text}, "template (a holdout case)", holdout=True
            )
        assert holdout_text not in str(sealed.value)
        assert str(sealed.value).startswith("template (a holdout case): template uses")


# ------------------------------------------------------------ pure renders

IMPURE = [
    ("list-append", "{{ history.append('x') or '' }}{{ history|join(',') }}", "unsafe"),
    ("list-pop", "{% set _ = history.pop() %}{{ history|join(',') }}", "unsafe"),
    ("list-extend", "{{ history.extend([1]) }}", "unsafe"),
    ("list-clear", "{{ history.clear() }}", "unsafe"),
    ("dict-update", "{{ meta.update({'a': 1}) }}", "unsafe"),
    ("dict-setdefault", "{{ meta.setdefault('k', 'v') }}", "unsafe"),
    ("random-filter", "{{ history|random }}", "random"),
    ("lipsum", "{{ lipsum(1) }}", "lipsum"),
]


@pytest.mark.parametrize(("text", "says"), [a[1:] for a in IMPURE], ids=[a[0] for a in IMPURE])
def test_a_template_that_is_not_pure_is_refused(text: str, says: str) -> None:
    values = {"history": ["a", "b"], "meta": {"k": "v"}, "message": "hi"}
    before = json.dumps(values)
    template = compile_template(text, "template")
    with pytest.raises(UserError, match=says):
        render_turn(template, values, "template (case 'c1')")
    assert json.dumps(values) == before  # the case's values are untouched


def test_each_render_sees_its_own_copy_of_the_values() -> None:
    """A namespace that keeps a field's list cannot carry one render into the next."""
    text = (
        "{% set ns = namespace(seen=history) %}{% set ns.seen = ns.seen + ['x'] %}"
        "{{ ns.seen|length }}"
    )
    template = compile_template(text, "template")
    values = {"history": ["a"]}
    first = render_turn(template, values, "t")
    assert [render_turn(template, values, "t") for _ in range(3)] == [first] * 3 == ["2"] * 3
    assert values == {"history": ["a"]}


def test_a_mutating_template_in_a_run_is_refused_before_any_call(
    tmp_path: Path, srv: MessagesServer, cli: Callable[..., CliResult]
) -> None:
    """The issue's attack: a template that changes a list field on its first render, so the
    copy check would see one text and the run another. Refused, nothing sent."""
    attack = Hostile(
        "mutate",
        1,
        suite={"template": "{{ message }}{% set _ = [message].append(message) %}"},
    )
    config = build(attack, tmp_path)
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    code, _, err = cli("run", "v3", "--no-save", "--config", str(config), env=env)
    assert code == 2 and "unsafe" in err and len(err.strip().splitlines()) == 1, err
    assert srv.stats().requests == 0


def test_plain_templates_still_render() -> None:
    text = (
        "{% for h in history %}{{ loop.index }}. {{ h|upper|center(9) }}\n{% endfor %}"
        "{{ '%-5s|' % message }}{{ '{:>6}'.format(message) }} {{ meta|dictsort|list|length }}"
        "{{ (history * 2)|join('+') }} {{ message ~ '!' }} {{ 2 ** 10 }} {{ 'ab' * 3 }}"
        "{% macro m(x) %}[{{ x }}]{% endmacro %}{{ m(message) }}"
    )
    turn = render_turn(
        compile_template(text, "t"), {"history": ["a", "b"], "meta": {"k": 1}, "message": "hi"}, "t"
    )
    assert turn == ("1.     A    \n2.     B    \nhi   |    hi 1a+b+a+b hi! 1024 ababab[hi]")


# ------------------------------------------------------------ workflow commands in a traceback

FORGED_TRACES = [
    "boom\n::warning title=forged::pwned",
    "boom\n::add-mask::ghp_not_a_secret",
    "boom\n::stop-commands::tok\n::error::after stop\n::tok::",
    "boom\r\n  ::set-output name=verdict::pass",
    "boom\x0b::error::vertical tab\u2028::error::line separator",
    "boom ##[error]old form in the middle of a line",
    "boom\n:::error::three colons",
]


def _commands(text: str) -> list[str]:
    """Lines the runner reads as workflow commands (it breaks lines at CR and LF alone)."""
    lines = re.split(r"\r\n|\r|\n", text)
    return [line for line in lines if line.lstrip().startswith("::") or "##[" in line]


@pytest.mark.parametrize("payload", FORGED_TRACES)
def test_a_crash_writes_no_workflow_command_but_its_own(payload: str, tmp_path: Path) -> None:
    """An exception whose text carries workflow commands (an upstream's error, a file's
    content): one error line, and the trace in a group with commands stopped."""

    def connect(env: Mapping[str, str], inputs: Any) -> Any:
        raise RuntimeError(payload)

    workspace = make_workspace(tmp_path)
    job = run_action(
        workspace,
        "push",
        push_event(),
        ref="refs/heads/main",
        inputs={"github_token": "t"},
        connect=connect,
    )
    assert job.code == 1
    assert "Traceback" in job.err
    out_commands = _commands(job.out)
    assert len(out_commands) == 1 and out_commands[0].startswith("::error title=evalgate::")
    err_commands = _commands(job.err)
    assert err_commands[0] == "::group::evalgate crashed: the traceback"
    assert err_commands[1].startswith("::stop-commands::")
    token = err_commands[1].removeprefix("::stop-commands::")
    assert len(token) == 32 and token not in payload
    assert err_commands[2:] == [f"::{token}::", "::endgroup::"]
    assert len(err_commands) == 4


@pytest.mark.parametrize("payload", FORGED_TRACES)
def test_every_line_of_a_trace_is_inert(payload: str) -> None:
    import io

    stream = io.StringIO()
    write_trace(stream, f"Traceback (most recent call last):\n  File 'x'\nRuntimeError: {payload}")
    lines = stream.getvalue().splitlines()
    inside = lines[2:-2]
    assert inside and not _commands("\n".join(inside))
    assert lines[2] == "Traceback (most recent call last):" and lines[3] == "  File 'x'"


def test_inert_keeps_text_and_breaks_every_command_form() -> None:
    assert inert("  plain line: a value") == "  plain line: a value"
    for text in ("::x::", ":::x", "a ##[x]", "###[x", "::::"):
        assert "::" not in inert(text) and "##[" not in inert(text)
