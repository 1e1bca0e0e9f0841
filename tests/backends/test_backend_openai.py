"""The openai backend through the real openai SDK against a loopback chat-completions server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evalgate.backends.base import BackendContext, Message, Request, backend_class
from evalgate.backends.fake import FakeRule, FakeRules
from evalgate.backends.openai import OpenAIBackend
from evalgate.config.models import ModelSettings
from evalgate.errors import BackendError
from tests.support.openai_server import OpenAIServer

RULES = FakeRules(
    rules=[FakeRule(label="booking", phrases=["book"]), FakeRule(label="quote", phrases=["cost"])]
)
SYSTEM = "Reply in JSON: booking, quote or other."


def backend(server: OpenAIServer, **options: object) -> OpenAIBackend:
    settings = ModelSettings(
        backend="openai",
        name="gpt-4o-mini",
        options={"retry": {"base_s": 0.0, "cap_s": 0.0}, **options},
    )
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.url}
    return OpenAIBackend(settings, BackendContext(base_dir=Path("."), env=env))


def request(text: str) -> Request:
    return Request(
        system=SYSTEM,
        messages=(Message(role="user", content=f"<message>{text}</message>"),),
        model="gpt-4o-mini",
        max_tokens=32,
        temperature=0.0,
    )


def test_happy_path_reads_text_usage_and_stop_reason() -> None:
    with OpenAIServer(RULES) as server:
        b = backend(server)
        reply = b.complete(request("can I book a slot"))
        b.close()
    assert reply.error is None
    assert reply.text == '{"category": "booking"}'
    assert reply.stop_reason == "end_turn"
    assert reply.input_tokens > 0 and reply.output_tokens > 0
    sent = server.bodies[0]
    assert sent["messages"][0] == {"role": "system", "content": SYSTEM}
    assert sent["temperature"] == 0.0


def test_a_streamed_reply_is_the_same_reply() -> None:
    with OpenAIServer(RULES) as server:
        whole = backend(server)
        streamed = backend(server, stream=True)
        replies = [b.complete(request("can I book a slot")) for b in (whole, streamed)]
        whole.close()
        streamed.close()
    assert [b.get("stream", False) for b in server.bodies] == [False, True]
    assert server.bodies[1]["stream_options"] == {"include_usage": True}
    plain, joined = replies
    assert joined.error is None
    # The stand-in cut the text into pieces; the client joined them.
    assert joined.text == plain.text == '{"category": "booking"}'
    assert (joined.input_tokens, joined.output_tokens, joined.stop_reason) == (
        plain.input_tokens,
        plain.output_tokens,
        "end_turn",
    )


def test_rate_limit_is_retried_and_counted() -> None:
    with OpenAIServer(RULES) as server:
        server.script(["429", "500", "ok"])
        b = backend(server)
        reply = b.complete(request("what does it cost"))
        b.close()
    assert reply.error is None and reply.attempts == 3
    assert len(server.bodies) == 3


def test_persistent_failure_is_an_error_never_an_answer() -> None:
    with OpenAIServer(RULES) as server:
        server.script(["500"] * 3)
        b = backend(server, retry={"max_attempts": 3, "base_s": 0.0, "cap_s": 0.0})
        reply = b.complete(request("hello"))
        b.close()
    assert reply.text == "" and reply.error_kind == "server" and reply.attempts == 3


def test_bad_key_is_not_retried() -> None:
    with OpenAIServer(RULES) as server:
        server.script(["401"])
        b = backend(server)
        reply = b.complete(request("hello"))
        b.close()
    assert reply.error_kind == "auth" and reply.attempts == 1


def test_missing_key_names_the_variable() -> None:
    settings = ModelSettings(backend="openai", name="gpt-4o-mini")
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        OpenAIBackend(settings, BackendContext(base_dir=Path("."), env={}))


def test_without_the_extra_the_message_gives_the_install_command() -> None:
    # A fresh interpreter where `import openai` fails, as on an install without the extra.
    code = (
        "import sys; sys.modules['openai'] = None\n"
        "from evalgate.backends.base import backend_class\n"
        "from evalgate.errors import MissingExtraError\n"
        "try:\n    backend_class('openai')\n"
        "except MissingExtraError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # The tests run from an editable install of the checkout: the checkout's line is the one
    # that works here (tests/test_install_line.py covers an install from the repository).
    assert '(in the checkout: pip install -e ".[openai]")' in done.stdout


def test_registry_finds_the_backend() -> None:
    assert backend_class("openai") is OpenAIBackend
