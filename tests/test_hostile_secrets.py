"""Secrets in every form: an upstream that echoes the key encoded, cut or bent never gets it
shown or saved.

``FORMS`` is the attack, kept as data: each way an API, a proxy or a model may write the key
back (base64, hex, HTML character references, reversed, split across lines, upper-cased,
without its prefix, a fragment of it). The safe outcome is the same for each: after a baseline
job or a pull request's job run in-process against the Messages stand-in, which echoes the
key in its error bodies and in its answers, no form of the key is in the run file (the
artefact), the comment, the job summary, stdout or stderr, searched case-insensitively, with
character references and percent escapes decoded and whitespace removed.

``ORDINARY`` is the other side: text that shares short pieces with the key (its prefix, a
15-character piece, a word of it, a run of one letter of a repetitive secret) is left as it is.
"""

from __future__ import annotations

import base64
import contextlib
import html
import json
import os
import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
from conftest import EXAMPLE
from test_action import (
    FOLDER,
    HARMLESS,
    PROMPT,
    REPO,
    comments,
    example_tree,
    make_workspace,
    open_pull,
    pr_job,
    push_event,
    run_action,
    upload,
    use_anthropic,
)

from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext, Message, Request
from evalgate.backends.command import CommandBackend
from evalgate.backends.fake import FakeRule, FakeRules, load_rules
from evalgate.backends.openai import OpenAIBackend
from evalgate.cases.holdout import keygen
from evalgate.config.models import ModelSettings
from evalgate.errors import UserError
from evalgate.publish.github import connect, find_baseline, get_repository
from evalgate.redact import ERROR_EXCERPT, REDACTED, hold, redact, redact_held, upstream_error
from evalgate.runs.schema import Outcome
from tests.support.github_server import GitHubServer
from tests.support.messages_server import Knobs, MessagesServer
from tests.support.openai_server import OpenAIServer

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_rng = random.Random(23)
# Shaped as an Anthropic key is (a prefix, 86 + 6 characters of base64url, "AA").
BODY = "".join(_rng.choice(_ALPHABET) for _ in range(86))
KEY = f"sk-ant-api03-{BODY}-{''.join(_rng.choice(_ALPHABET) for _ in range(6))}AA"
RAW = KEY.encode()


def _lines(text: str, width: int) -> str:
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


# The attack: how an upstream may write the key back.
FORMS: list[tuple[str, Callable[[str], str]]] = [
    ("raw", lambda k: k),
    ("url-quoted", lambda k: quote(k, safe="")),
    ("percent-every-byte", lambda k: "".join(f"%{b:02X}" for b in k.encode())),
    ("base64", lambda k: base64.b64encode(k.encode()).decode()),
    ("base64-url-safe", lambda k: base64.urlsafe_b64encode(k.encode()).decode()),
    ("base64-after-one-byte", lambda k: base64.b64encode(b"<" + k.encode()).decode()),
    ("base64-after-two-bytes", lambda k: base64.b64encode(b"k=" + k.encode()).decode()),
    ("base64-mime-lines", lambda k: _lines(base64.b64encode(k.encode()).decode(), 76)),
    ("upper-cased", lambda k: k.upper()),
    ("lower-cased", lambda k: k.lower()),
    ("without-prefix", lambda k: k.removeprefix("sk-ant-api03-")),
    ("split-across-lines", lambda k: _lines(k, 24)),
    ("split-with-crlf-and-indent", lambda k: k[:40] + "\r\n    " + k[40:]),
    ("hex", lambda k: k.encode().hex()),
    ("hex-upper", lambda k: k.encode().hex().upper()),
    ("hex-spaced", lambda k: " ".join(f"{b:02x}" for b in k.encode())),
    ("html-decimal", lambda k: "".join(f"&#{ord(c)};" for c in k)),
    ("html-hex", lambda k: "".join(f"&#x{ord(c):X};" for c in k)),
    ("html-some-characters", lambda k: k.replace("-", "&#45;").replace("_", "&#x5f;")),
    ("reversed", lambda k: k[::-1]),
    ("fragment-40", lambda k: k[30:70]),
    ("fragment-16", lambda k: k[50:66]),
    ("fragment-16-upper", lambda k: k[60:76].upper()),
]
IDS = [name for name, _ in FORMS]
ECHOED = {name: form(KEY) for name, form in FORMS}


def _views(text: str) -> list[str]:
    """``text`` as a reader may decode it: as it is, its JSON strings, character references
    and percent escapes decoded; each also without whitespace; all lower case."""
    views = [text]
    with contextlib.suppress(ValueError):
        views.append("\n".join(_strings(json.loads(text))))
    views += [html.unescape(v) for v in views] + [unquote(v) for v in views]
    views += [re.sub(r"\s+|\\[nrt]", "", v) for v in views]
    return [v.lower() for v in views]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def leaks(text: str) -> list[str]:
    """The forms of the key found anywhere in ``text``."""
    views = _views(text)
    found = []
    for name, echoed in ECHOED.items():
        wanted = {echoed.lower(), re.sub(r"\s+", "", echoed).lower()}
        if any(w in v for w in wanted for v in views):
            found.append(name)
    return found


@pytest.fixture(autouse=True)
def _held() -> None:
    # What the composition root does with the key it is given.
    hold(KEY)


# ----------------------------------------------------------------------- the redactor itself


@pytest.mark.parametrize("name", IDS)
def test_every_form_of_a_held_key_is_redacted(name: str) -> None:
    text = f'{{"error": {{"message": "invalid x-api-key: {ECHOED[name]} (check it)"}}}}'
    for cleaned in (redact(text), redact_held(text)):
        assert leaks(cleaned) == [], cleaned
        assert REDACTED in cleaned and cleaned.endswith(' (check it)"}}')
        assert cleaned.startswith('{"error": {"message": "invalid x-api-key: ')


def test_the_forms_are_real_attacks() -> None:
    """Each form but the raw key is something else than the raw key (url-quoting leaves a
    key of the base64url alphabet as it is), and the fragment is a piece of it."""
    same = {name for name, echoed in ECHOED.items() if echoed == KEY}
    assert same == {"raw", "url-quoted"}
    assert ECHOED["fragment-16"] in KEY and len(ECHOED["fragment-16"]) == 16


# Text that shares short pieces with the key, or with a repetitive secret, and is kept whole.
REPETITIVE = "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
ORDINARY = [
    ("the-prefix", "Anthropic keys start with sk-ant-api03- and are 108 characters long."),
    ("a-15-character-piece", f"the order code is {KEY[50:65]} today"),
    ("two-short-pieces", f"{KEY[20:32]} and {KEY[40:52]}"),
    ("a-piece-base64", base64.b64encode(KEY[20:30].encode()).decode()),
    ("a-piece-hex", KEY[20:26].encode().hex()),
    ("repetitive-run", "z" * 40 + " is the sound of sleep"),
    ("answer", '{"category": "booking"} Category: booking. The repair is ready to collect.'),
    ("path", "/home/runner/work/widgets/widgets/examples/bike-shop/evalgate.yml"),
    ("hexdigest", "sha256 " + "0123456789abcdef" * 4),
    ("entities", "&#60;b&#62; &amp; &#x41;&#x42; 100% sure"),
]


@pytest.mark.parametrize("text", [t for _, t in ORDINARY], ids=[n for n, _ in ORDINARY])
def test_ordinary_text_that_shares_short_pieces_is_left_alone(text: str) -> None:
    hold(REPETITIVE)
    assert redact_held(text) == text
    assert redact(text) == text


def test_a_public_prefix_is_no_fragment_of_a_held_key() -> None:
    # Every holdout key starts "EVALGATE-HOLDOUT-KEY-1-" (23 characters, upper case and a
    # digit): with one key held, that prefix alone was redacted as a 16-character fragment of
    # it, which left the body of another key, the part that is secret, in plain sight.
    mine, _ = keygen()
    other = "EVALGATE-HOLDOUT-KEY-1-q83vEjWf9YfR0KcA3Lx0uXWkN1"
    hold(mine)
    assert redact(f"echo: {other}") == f"echo: {REDACTED}"
    assert (
        redact_held("a key starts EVALGATE-HOLDOUT-KEY-1-")
        == "a key starts EVALGATE-HOLDOUT-KEY-1-"
    )
    # The held key itself, whole or by a fragment of its body, still goes.
    assert redact_held(f"k={mine}") == f"k={REDACTED}"
    assert redact_held(f"k={mine[23:45]}") == f"k={REDACTED}"


def test_a_repetitive_secret_is_redacted_whole_but_not_by_its_runs() -> None:
    hold(REPETITIVE)
    assert redact_held(f"key={REPETITIVE};") == f"key={REDACTED};"
    assert redact_held(f"key={REPETITIVE.upper()};") == f"key={REDACTED};"
    assert redact_held("z" * 30) == "z" * 30


def test_a_held_address_or_path_counts_only_whole() -> None:
    """A variable named like a secret may hold an address (ACTIONS_ID_TOKEN_REQUEST_URL) or a
    path: its pieces are public (the host, a folder), so only the whole value is removed."""
    url = (
        "https://pipelines.actions.githubusercontent.com/Ab3dEf9/_apis/distributedtask/hubs/Actions"
    )
    path = "/home/runner/work/_temp/Secret0Holdout1Key2.txt"
    hold(url, path)
    shared = "see pipelines.actions.githubusercontent.com/Ab3dEf9 and runner/work/_temp/Secret0Hold"
    assert redact_held(shared) == shared
    assert redact_held(f"at {url.upper()} or {path}.") == f"at {REDACTED} or {REDACTED}."


def test_a_huge_text_is_redacted_in_one_pass() -> None:
    """A 30 MB answer (as in test_hostile's huge answers) with the key somewhere in it: found,
    and the rest kept. The bound is generous: timing targets belong to benchmarks."""
    filler = "word " * 6_000_000
    text = filler + base64.b64encode(RAW).decode() + filler[:1000]
    started = time.perf_counter()
    cleaned = redact_held(text)
    elapsed = time.perf_counter() - started
    assert REDACTED in cleaned and len(cleaned) < len(text)
    assert cleaned.startswith(filler[:1000]) and cleaned.endswith(filler[:1000])
    assert elapsed < 60
    small = "Category: booking. " * 50
    assert redact_held(small) == small


def test_an_upstream_error_keeps_status_type_and_a_capped_excerpt() -> None:
    message = "messages: bad " + KEY + " " + "x" * 5_000
    line = upstream_error(400, "invalid_request_error", message)
    assert line.startswith("400 invalid_request_error: messages: bad [redacted] xxx")
    assert len(line) <= len("400 invalid_request_error: ") + ERROR_EXCERPT
    assert leaks(line) == []
    # A key cut by the excerpt's window is still a fragment of it.
    cut = upstream_error(500, "api_error", "y" * (4 * ERROR_EXCERPT + 256 - 30) + KEY)
    assert leaks(cut) == [] and KEY[:30] not in cut


# ----------------------------------------------------------------------- through the SDK


@pytest.mark.parametrize("name", IDS)
def test_an_error_body_echoing_the_key_is_kept_without_it(name: str, srv: MessagesServer) -> None:
    """The real SDK against the stand-in: a 400 whose message carries the key in one form.
    The reply's error names the status and type; no form of the key is left."""
    srv.knobs = Knobs(echo_text=ECHOED[name], echo_credentials=True, api_key=KEY)
    srv.script(["bad_request"])
    settings = ModelSettings.model_validate(
        {"backend": "anthropic", "name": "claude-haiku-4-5", "max_tokens": 16}
    )
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    backend = AnthropicBackend(settings, BackendContext(base_dir=Path("."), env=env))
    try:
        reply = backend.complete(
            Request(system="s", messages=(Message(role="user", content="hi"),), model="m")
        )
    finally:
        backend.close()
    assert reply.error is not None and reply.error.startswith("400 invalid_request_error: ")
    assert leaks(reply.error) == [] and len(reply.error) < 300


@pytest.mark.parametrize("name", IDS)
def test_an_openai_error_echoing_the_key_is_kept_without_it(name: str) -> None:
    """The openai SDK's exception text quotes the whole error body; the reply's error keeps
    the status, the error type and an excerpt, without the key in any form."""
    with OpenAIServer(FakeRules(rules=[FakeRule(label="x", phrases=["x"])])) as server:
        server.echo_text = f"(you sent {ECHOED[name]}) " + "see the docs " * 50
        server.script(["401"])
        settings = ModelSettings(backend="openai", name="gpt-4o-mini", options={})
        env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.url}
        backend = OpenAIBackend(settings, BackendContext(base_dir=Path("."), env=env))
        reply = backend.complete(
            Request(system="s", messages=(Message(role="user", content="hi"),), model="m")
        )
    assert reply.error is not None and reply.error.startswith("401 invalid_api_key: ")
    assert leaks(reply.error) == [] and len(reply.error) < 300, reply.error


# A program under test (the command backend) that prints what REPLY says and fails with what
# STDERR says: the system under test, or a tool of an agent, can read the key too.
PROGRAM = r"""
import json, os, sys
sys.stdin.read()
if os.environ.get("STDERR"):
    sys.stderr.write("Traceback: " + os.environ["STDERR"] + "\nKeyError: 'price'\n")
    sys.exit(3)
echo = os.environ["REPLY"]
print(json.dumps({"text": echo, "steps": [{"text": echo, "tool_calls": [
    {"name": "lookup", "input": {"q": "x"}, "result": echo}]}]}))
"""


@pytest.mark.parametrize("name", IDS)
def test_a_program_that_prints_the_key_has_it_kept_nowhere(name: str, tmp_path: Path) -> None:
    """The command backend: the key in a reply, in a step and a tool's result, and in the
    stderr of a failing run, in one form: none of it is in what the run file keeps."""
    (tmp_path / "app.py").write_text(PROGRAM, encoding="utf-8")

    def run(**env: str) -> dict[str, Any]:
        options = {"command": [sys.executable, "app.py"], "env": env}
        settings = ModelSettings(backend="command", name="my-app", options=options)
        backend = CommandBackend(settings, BackendContext(base_dir=tmp_path, env=dict(os.environ)))
        reply = backend.complete(
            Request(system="s", messages=(Message(role="user", content="hi"),), model="m")
        )
        return Outcome.model_validate(reply.model_dump(exclude={"attempts"})).model_dump()

    answered = run(REPLY=f"Category: booking. {ECHOED[name]}")
    assert leaks(json.dumps(answered)) == [] and REDACTED in answered["text"]
    assert answered["steps"][0]["calls"][0]["result"].startswith("Category: booking. ")
    failed = run(REPLY="", STDERR=f"bad key {ECHOED[name]}")
    assert failed["error"].startswith("exit code 3; stderr: ")
    assert failed["error"].endswith("KeyError: 'price'") and leaks(failed["error"]) == []


@pytest.mark.parametrize("name", IDS)
def test_a_github_error_that_echoes_the_token_in_any_form_names_only_the_failure(
    name: str,
) -> None:
    """GitHub (or a proxy in front of it) quoting the token, in one form, in a 401's message:
    the one-line error names the status, never the token."""
    # A token of the length of a key (the forms cut pieces up to character 76).
    rng = random.Random(12)
    token = "ghs_" + "".join(rng.choice(_ALPHABET[:62]) for _ in range(76))
    hold(token)
    with GitHubServer(write_token=token) as gh:
        gh.add_repo(REPO, files={"prompts/v1.txt": "v1\n"})
        form = dict(FORMS)[name]
        echoed = {"message": f"Bad credentials: {form(token)}" + " (see the docs)" * 40}
        gh.fail_next("GET", f"/repos/{REPO}/actions/workflows/*", status=401, body=echoed)
        gh.fail_next("GET", f"/repos/{REPO}/actions/runs", status=401, body=echoed, times=3)
        client = connect(token, gh.url)
        try:
            with pytest.raises(UserError) as caught:
                find_baseline(
                    get_repository(client, REPO), "evalgate-baseline", "main", workflow_path="x.yml"
                )
        finally:
            client.close()
    message = caught.value.one_line()
    assert "401" in message and "Bad credentials" in message
    assert len(message) < 1_000
    for shown in _views(message):
        assert form(token).lower() not in shown and token.lower() not in shown


# ----------------------------------------------------------------------- whole jobs

# Every form at once, as an answer's text and after each error message.
ECHO = " | ".join(ECHOED.values())


@pytest.fixture
def echoing() -> Iterator[MessagesServer]:
    """The Messages stand-in as a model that answers with every form of the key."""
    rules = FakeRules(rules=[FakeRule(label=ECHO, phrases=["no message says this"])], default=ECHO)
    with MessagesServer(rules) as server:
        server.knobs = Knobs(echo_text=ECHO, echo_credentials=True, api_key=KEY)
        yield server


def _everything(job: Any, **more: str) -> dict[str, str]:
    """What a job leaves for people to read, by name: its log, its summary, and ``more``."""
    return {"stdout": job.out, "stderr": job.err, "summary": job.summary} | more


def baseline_job(workspace: Path, server: MessagesServer) -> Any:
    """The push job on the anthropic backend against ``server``, with the key as its input."""
    use_anthropic(workspace)
    return run_action(
        workspace,
        "push",
        push_event(),
        ref="refs/heads/main",
        inputs={"anthropic_api_key": KEY},
        env={"ANTHROPIC_BASE_URL": server.url},
    )


def test_a_baseline_job_whose_upstream_echoes_the_key_keeps_no_form_of_it(
    tmp_path: Path, echoing: MessagesServer
) -> None:
    """Every answer is the key in every form, one call in four fails with an error that
    echoes it: the run file (the artefact) and everything the job printed hold none of it."""
    echoing.script(["ok", "bad_request", "ok", "ok"] * 60)
    workspace = make_workspace(tmp_path)
    job = baseline_job(workspace, echoing)
    assert "Traceback" not in job.err
    run_file = Path(job.outputs["run_file"])
    saved = run_file.read_text(encoding="utf-8")
    data = json.loads(saved)
    outcomes = [o for c in data["cases"] for o in c["outcomes"]]
    assert any(o.get("error") for o in outcomes) and any(o.get("text") for o in outcomes)
    assert any(REDACTED in (o.get("text") or "") for o in outcomes)
    for where, text in _everything(job, run_file=saved).items():
        assert leaks(text) == [], where
    assert (workspace / FOLDER / ".evalgate").is_dir()


@pytest.mark.parametrize("name", IDS)
def test_a_refused_first_request_names_the_failure_without_the_key(
    name: str, tmp_path: Path
) -> None:
    """The first request answered 400 with the key in one form: the job stops with one
    ::error line that names the status and type, and no form of the key anywhere."""
    rules = FakeRules(rules=[FakeRule(label="x", phrases=["x"])])
    with MessagesServer(rules) as server:
        server.knobs = Knobs(echo_text=ECHOED[name], api_key=KEY)
        server.script(["bad_request"])
        job = baseline_job(make_workspace(tmp_path), server)
    assert job.code == 2, job.out + job.err
    [error] = job.annotations("error")
    assert "400 invalid_request_error" in error
    for where, text in _everything(job).items():
        assert leaks(text) == [], where


def test_a_pull_requests_comment_holds_no_form_of_the_key(
    tmp_path: Path, echoing: MessagesServer
) -> None:
    """A baseline made on an honest upstream, then the pull request's job on the echoing one:
    every case it breaks is listed in the comment, and neither the comment,
    the summary, the log nor the run files the job leaves hold any form of the key."""
    key = {"anthropic_api_key": KEY}
    with (
        GitHubServer() as gh,
        MessagesServer(load_rules({"rules_file": "fake-rules.yml"}, EXAMPLE)) as honest,
    ):
        gh.add_repo(REPO, files=example_tree())
        base = make_workspace(tmp_path / "base")
        use_anthropic(base)
        env = {"ANTHROPIC_BASE_URL": honest.url}
        made = run_action(base, "push", push_event(), ref="refs/heads/main", inputs=key, env=env)
        assert made.code == 0, made.out + made.err
        upload(gh, Path(made.outputs["run_file"]).read_text(encoding="utf-8"))
        open_pull(gh, {PROMPT: HARMLESS})
        workspace = make_workspace(tmp_path / "head", HARMLESS)
        use_anthropic(workspace)
        echoing.script(["ok", "ok", "ok", "bad_request"] * 60)
        env = {"ANTHROPIC_BASE_URL": echoing.url}
        job = pr_job(workspace, gh, inputs=key, env=env)
        bodies = comments(gh)
    assert "Traceback" not in job.err, job.err
    assert job.outputs["verdict"] == "fail", job.out + job.err
    [body] = bodies
    assert "Broken: passed on the baseline" in body
    # The job's run files live in its own state folder outside the checkout, gone when it
    # ends (tests/test_hostile_state.py); the run file a job publishes, the baseline's, is
    # searched in test_a_baseline_job_whose_upstream_echoes_the_key_keeps_no_form_of_it.
    saved = {p.name: p.read_text(encoding="utf-8") for p in (workspace / FOLDER).rglob("*.json")}
    assert not [name for name in saved if name not in ("evalgate.yml",)], sorted(saved)
    for where, text in _everything(job, comment=body, **saved).items():
        assert leaks(text) == [], where
