"""The command backend: the user's program as the system under test (case JSON in, reply out)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from evalgate.backends.base import BackendContext, Message, Request
from evalgate.backends.command import STDERR_TAIL, CommandBackend
from evalgate.config.models import LabelScorer, ModelSettings
from evalgate.errors import BackendError
from evalgate.running.execute import Job, execute
from evalgate.scorers.base import build_scorer

# The application under test. MODE (from the backend's options.env) says how it behaves.
APP = r"""
import json, os, sys, time

case = json.load(sys.stdin)
mode = os.environ.get("MODE", "text")
message = case["input"]["message"].lower()
label = "booking" if "book" in message else "quote" if "cost" in message else "other"
if mode == "text":
    print(f"Category: {label}.")
elif mode == "json":
    print(json.dumps({"text": json.dumps({"category": label}), "input_tokens": 42,
                      "output_tokens": 7, "stop_reason": "end_turn"}))
elif mode == "echo":
    print(json.dumps({k: case[k] for k in sorted(case)}))
elif mode == "raw":
    print(os.environ["REPLY"])
elif mode == "fail":
    sys.stderr.write("HEAD-" + "x" * 2000 + "-Traceback: KeyError: 'price'\n")
    sys.exit(3)
elif mode == "sleep":
    sys.stderr.write("loading the model\n")
    sys.stderr.flush()
    time.sleep(10)
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(APP, encoding="utf-8")
    return tmp_path


def backend(base_dir: Path, *, mode: str = "text", **options: Any) -> CommandBackend:
    options = {"command": [sys.executable, "app.py"], "env": {"MODE": mode}, **options}
    settings = ModelSettings(backend="command", name="my-app", options=options)
    # the composition root hands down the real environment; the program inherits it
    return CommandBackend(settings, BackendContext(base_dir=base_dir, env=dict(os.environ)))


def request(message: str, case_id: str = "c1") -> Request:
    return Request(
        system="Sort the message.",
        messages=(Message(role="user", content=f"<message>{message}</message>"),),
        model="my-app",
        max_tokens=64,
        temperature=0.0,
        case={"id": case_id, "input": {"message": message}},
    )


def test_the_program_gets_the_case_on_stdin(app: Path) -> None:
    reply = backend(app, mode="echo").complete(request("Book me in", "bk-7"))
    assert reply.error is None
    assert json.loads(reply.text) == {
        "id": "bk-7",
        "input": {"message": "Book me in"},
        "system": "Sort the message.",
        "messages": [{"role": "user", "content": "<message>Book me in</message>"}],
        "model": "my-app",
        "max_tokens": 64,
        "temperature": 0.0,
    }


def test_a_text_reply(app: Path) -> None:
    reply = backend(app).complete(request("How much does a service cost?"))
    assert (reply.text, reply.stop_reason, reply.error) == ("Category: quote.", "end_turn", None)
    assert (reply.input_tokens, reply.output_tokens) == (0, 0)
    assert reply.latency_s > 0


def test_a_json_reply_reports_usage(app: Path) -> None:
    reply = backend(app, mode="json").complete(request("Can I book a slot?"))
    assert json.loads(reply.text) == {"category": "booking"}
    assert (reply.input_tokens, reply.output_tokens, reply.stop_reason) == (42, 7, "end_turn")


def test_a_non_zero_exit_is_an_error_with_the_stderr_tail(app: Path) -> None:
    reply = backend(app, mode="fail").complete(request("hello"))
    assert reply.error_kind == "command" and reply.text == ""
    error = reply.error or ""
    assert error.startswith("exit code 3; stderr: ")
    assert error.endswith("-Traceback: KeyError: 'price'")
    assert "HEAD-" not in error  # only the tail
    assert len(error) <= len("exit code 3; stderr: ") + STDERR_TAIL


def test_a_timeout_is_an_error_of_kind_timeout(app: Path) -> None:
    started = time.monotonic()
    reply = backend(app, mode="sleep", timeout_s=1.0).complete(request("hello"))
    assert time.monotonic() - started < 5.0  # killed, not waited for
    assert reply.error_kind == "timeout"
    assert (reply.error or "").startswith("timed out after 1s")
    assert "loading the model" in (reply.error or "")


def test_a_missing_program_stops_the_run(tmp_path: Path) -> None:
    missing = backend(tmp_path, command=[str(tmp_path / "no-such-program")])
    with pytest.raises(BackendError, match=r"cannot run .*no-such-program"):
        missing.complete(request("hello"))
    scorer = build_scorer(LabelScorer(kind="label"), tmp_path)
    jobs = [Job(i, 0, f"c{i}", "other", request("hi", f"c{i}")) for i in range(5)]
    with pytest.raises(BackendError, match="cannot run"):
        execute(jobs, missing, scorer, concurrency=2)


def test_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match=r"model\.options\.command"):
        CommandBackend(ModelSettings(backend="command"), BackendContext(base_dir=tmp_path))
    with pytest.raises(BackendError, match="empty"):
        backend(tmp_path, command="")


def test_a_command_string_is_split_like_a_shell(app: Path) -> None:
    spaced = app / "my app.py"
    spaced.write_text(APP, encoding="utf-8")
    b = backend(app, command=f"{sys.executable} 'my app.py'")
    assert b.argv == [sys.executable, "my app.py"]
    assert b.complete(request("book it")).text == "Category: booking."


def test_a_run_through_the_runner_scores_every_case(app: Path) -> None:
    messages = {
        "c1": ("Can I book a service?", "booking"),
        "c2": ("What does a tune-up cost?", "quote"),
        "c3": ("Are you open on Sunday?", "other"),
        "c4": ("Book my wheel in", "booking"),
        "c5": ("Anything", "quote"),
    }
    jobs = [
        Job(i, 0, cid, expected, request(text, cid), {"message": text})
        for i, (cid, (text, expected)) in enumerate(messages.items())
    ]
    scorer = build_scorer(LabelScorer(kind="label"), app)
    outcomes, interrupted = execute(jobs, backend(app, mode="json"), scorer, concurrency=3)
    assert not interrupted
    assert [o.answer for o in outcomes] == ["booking", "quote", "other", "booking", "other"]
    assert [o.score for o in outcomes] == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert all(o.format_ok and o.input_tokens == 42 for o in outcomes)


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ('{"text": 5}', '"text": 5 (int), not a string'),
        ('{"text": null}', '"text": null (NoneType), not a string'),
        ('{"text": ["a"]}', '"text": ["a"] (list), not a string'),
        ('{"text": "ok", "input_tokens": "12"}', '"input_tokens": "12" (str), not a whole number'),
        ('{"text": "ok", "output_tokens": 1.5}', '"output_tokens": 1.5 (float)'),
        ('{"text": "ok", "output_tokens": true}', '"output_tokens": true (bool)'),
        ('{"text": "ok", "input_tokens": -3}', '"input_tokens": -3, a negative count'),
        ('{"text": "ok", "stop_reason": 7}', '"stop_reason": 7 (int), not a string or null'),
    ],
)
def test_a_json_reply_of_the_wrong_type_is_an_error_with_the_reason(
    app: Path, reply: str, says: str
) -> None:
    got = backend(app, mode="raw", env={"MODE": "raw", "REPLY": reply}).complete(request("hi"))
    assert got.error_kind == "command"
    assert got.text == ""
    assert (got.error or "").startswith("the program's JSON reply has ")
    assert says in (got.error or "")


def test_a_json_object_without_text_is_the_reply_itself(app: Path) -> None:
    got = backend(app, env={"MODE": "raw", "REPLY": '{"category": "quote"}'}).complete(
        request("hi")
    )
    assert got.error is None
    assert json.loads(got.text) == {"category": "quote"}


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (
            {"comand": ["python", "app.py"]},
            "model.options.comand: unknown key; did you mean command? (allowed here: command, "
            "timeout_s, env",
        ),
        (
            {"command": "x", "timeout_s": "lots"},
            "model.options.timeout_s: should be a number (found 'lots')",
        ),
        (
            {"command": "x", "timeout_s": 0},
            "model.options.timeout_s: should be greater than 0.0 (found 0)",
        ),
    ],
)
def test_bad_options_are_said_in_the_house_form(
    tmp_path: Path, options: dict[str, Any], says: str
) -> None:
    settings = ModelSettings(backend="command", name="my-app", options=options)
    with pytest.raises(BackendError) as caught:
        CommandBackend(settings, BackendContext(base_dir=tmp_path))
    assert str(caught.value).startswith(says)
    assert "Input should" not in str(caught.value) and "Extra inputs" not in str(caught.value)
