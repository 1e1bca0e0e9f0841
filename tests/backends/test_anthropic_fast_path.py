"""The anthropic backend reads a message's JSON itself, and leaves every other body to the SDK.

The fast path (``message_data``) must give the reply the SDK's models give, for the stand-in's
answers, and must decline every body that is not a well-formed message, so that the SDK's
own reading (and its errors) decide those as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from evalgate.backends.anthropic import (
    AnthropicBackend,
    _as_data,
    _kind,
    _message,
    _reply,
    _retry_after,
    _without_none,
    message_data,
)
from evalgate.backends.base import BackendContext, Message, Request
from evalgate.config.models import ModelSettings
from tests.support.messages_server import MessagesServer

KEY = "sk-ant-api03-" + "F4stP4thK3y" * 6
MODEL = "claude-haiku-4-5"
SYSTEM = "Sort the message into complaint, status, booking, quote, parts or other. Reply in JSON."
MESSAGES = [
    "My bike was promised for last Friday and I still have nothing.",
    "Do you have SPD cleats in stock?",
    "How much for a new chain fitted?",
    "",  # an empty user turn: the stand-in still answers
    'Ünïcödé ✓ and "quotes" and \\ backslashes',
]


@pytest.fixture
def client(srv: MessagesServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(api_key=KEY, base_url=srv.url, max_retries=0) as made:
        yield made


def params(message: str) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 64,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": f"<message>{message}</message>"}],
    }


@pytest.mark.parametrize("message", MESSAGES)
def test_the_fast_path_reads_what_the_sdk_reads(
    srv: MessagesServer, client: anthropic.Anthropic, message: str
) -> None:
    raw = client.messages.with_raw_response.create(**params(message))
    data = message_data(raw.http_response)
    assert data is not None
    parsed = raw.parse()
    assert isinstance(parsed, anthropic.types.Message)
    fast, sdk = _reply(data, 0.5, 1), _reply(_as_data(parsed), 0.5, 1)
    assert fast == sdk
    assert fast.text and fast.input_tokens > 0 and fast.output_tokens > 0
    assert fast.stop_reason == parsed.stop_reason
    # What an agent case sends back as the assistant's turn: the blocks without empty fields.
    assert [_without_none(b) for b in data["content"]] == [
        block.model_dump(mode="json", exclude_none=True) for block in parsed.content
    ]


def test_the_backend_answers_as_before_across_the_prompt_cache(srv: MessagesServer) -> None:
    settings = ModelSettings(backend="anthropic", name=MODEL, options={})
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    backend = AnthropicBackend(settings, BackendContext(base_dir=Path("."), env=env))
    try:
        replies = [
            backend.complete(
                Request(
                    system=SYSTEM,
                    messages=(Message(role="user", content=f"<message>{m}</message>"),),
                    model=MODEL,
                    max_tokens=64,
                )
            )
            for m in MESSAGES[:3]
        ]
    finally:
        backend.close()
    assert [r.error for r in replies] == [None, None, None]
    # The first call writes the system prompt to the cache, the next ones read it.
    assert replies[0].cache_write_tokens > 0 and replies[0].cache_read_tokens == 0
    assert all(r.cache_read_tokens == replies[0].cache_write_tokens for r in replies[1:])
    assert all(r.stop_reason == "end_turn" and r.text for r in replies)


GOOD: dict[str, Any] = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": MODEL,
    "content": [{"type": "text", "text": "parts"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 12, "output_tokens": 3},
}


def response(body: bytes, content_type: str = "application/json") -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": content_type}, content=body)


def test_a_good_body_is_read_and_absent_cache_counts_are_zero() -> None:
    data = message_data(response(json.dumps(GOOD).encode()))
    assert data == GOOD
    reply = _reply(data, 0.1, 2)
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("parts", 12, 3)
    assert (reply.cache_write_tokens, reply.cache_read_tokens, reply.attempts) == (0, 0, 2)


def _with(**changes: Any) -> bytes:
    return json.dumps(GOOD | changes).encode()


# Bodies that are not a well-formed message: the SDK's reading decides each (kept as data).
DECLINED: list[tuple[str, bytes, str]] = [
    ("html page", b"<html><body>502 Bad Gateway</body></html>", "text/html"),
    (
        "truncated",
        b'{"id": "msg_01", "type": "message", "content": [{"type": "te',
        "application/json",
    ),
    ("not json at all", b"\x00\xff\xfe", "application/json"),
    ("a list", b"[1, 2, 3]", "application/json"),
    ("an error object", b'{"type": "error", "error": {"type": "api_error"}}', "application/json"),
    (
        "no type",
        json.dumps({k: v for k, v in GOOD.items() if k != "type"}).encode(),
        "application/json",
    ),
    ("content not a list", _with(content="parts"), "application/json"),
    ("a block not an object", _with(content=["parts"]), "application/json"),
    ("text not a string", _with(content=[{"type": "text", "text": 7}]), "application/json"),
    ("block without a type", _with(content=[{"text": "parts"}]), "application/json"),
    (
        "tool_use without input",
        _with(content=[{"type": "tool_use", "id": "t1", "name": "lookup"}]),
        "application/json",
    ),
    (
        "usage missing",
        json.dumps({k: v for k, v in GOOD.items() if k != "usage"}).encode(),
        "application/json",
    ),
    ("tokens as text", _with(usage={"input_tokens": "12", "output_tokens": 3}), "application/json"),
    (
        "tokens as a float",
        _with(usage={"input_tokens": 12.0, "output_tokens": 3}),
        "application/json",
    ),
    (
        "tokens as a bool",
        _with(usage={"input_tokens": True, "output_tokens": 3}),
        "application/json",
    ),
    (
        "cache tokens as text",
        _with(usage={"input_tokens": 1, "output_tokens": 3, "cache_read_input_tokens": "9"}),
        "application/json",
    ),
    ("stop reason a number", _with(stop_reason=1), "application/json"),
    ("json, but said to be text", json.dumps(GOOD).encode(), "text/plain"),
]


@pytest.mark.parametrize(
    ("body", "content_type"), [d[1:] for d in DECLINED], ids=[d[0] for d in DECLINED]
)
def test_anything_else_is_left_to_the_sdk(body: bytes, content_type: str) -> None:
    assert message_data(response(body, content_type)) is None


def test_a_truncated_body_is_still_a_malformed_reply_retried(srv: MessagesServer) -> None:
    """Declined by the fast path, the SDK's reading fails as it did: malformed, retried."""
    srv.script(["malformed"])
    settings = ModelSettings(
        backend="anthropic",
        name=MODEL,
        options={"retry": {"base_s": 0.01, "cap_s": 0.02, "max_attempts": 3}},
    )
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    backend = AnthropicBackend(settings, BackendContext(base_dir=Path("."), env=env))
    try:
        reply = backend.complete(
            Request(
                system=SYSTEM,
                messages=(Message(role="user", content="<message>tape?</message>"),),
                model=MODEL,
                max_tokens=64,
            )
        )
    finally:
        backend.close()
    assert reply.error is None and reply.text
    assert reply.attempts == 2


# Every fault the stand-in can put on a plain call. The backend sends plain calls over its own
# httpx2 client; what each failure is called must be what the SDK's exception for the same
# answer says (evalgate's names for SDK exceptions: _kind, _message, _retry_after).
FAULTED = ["rate_limit", "overloaded", "server_error", "bad_request", "auth", "drop"]


def sdk_failure(client: anthropic.Anthropic, fault: str) -> tuple[str, str, float | None]:
    try:
        client.messages.create(**params("tape?"))
    except anthropic.APIError as exc:
        return _kind(exc), _message(exc), _retry_after(exc)
    raise AssertionError(f"the SDK did not fail on {fault}")


@pytest.mark.parametrize("fault", FAULTED)
def test_a_failure_is_named_as_the_sdk_names_it(
    srv: MessagesServer, client: anthropic.Anthropic, fault: str
) -> None:
    srv.script([fault])
    expected = sdk_failure(client, fault)
    settings = ModelSettings(
        backend="anthropic", name=MODEL, options={"retry": {"max_attempts": 1}}
    )
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    backend = AnthropicBackend(settings, BackendContext(base_dir=Path("."), env=env))
    srv.script([fault])
    try:
        attempt = backend._once(params("tape?"))
    finally:
        backend.close()
    assert (attempt.kind, attempt.message, attempt.retry_after_s) == expected
    assert KEY not in (attempt.message or "")


def test_a_timeout_is_named_as_the_sdk_names_it(srv: MessagesServer) -> None:
    srv.knobs = srv.knobs.model_copy(update={"slow_s": 1.0})
    with anthropic.Anthropic(api_key=KEY, base_url=srv.url, max_retries=0, timeout=0.2) as sdk:
        srv.script(["slow"])
        expected = sdk_failure(sdk, "slow")
    assert expected[0] == "timeout"
    settings = ModelSettings(
        backend="anthropic", name=MODEL, options={"timeout_s": 0.2, "retry": {"max_attempts": 1}}
    )
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.url}
    backend = AnthropicBackend(settings, BackendContext(base_dir=Path("."), env=env))
    srv.script(["slow"])
    try:
        attempt = backend._once(params("tape?"))
    finally:
        backend.close()
    assert (attempt.kind, attempt.message, attempt.retry_after_s) == expected


def test_a_plain_call_does_not_import_the_sdk(tmp_path: Path, srv: MessagesServer) -> None:
    """The SDK's import is over a second of CPU: a run of plain calls never needs it."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from evalgate.backends.anthropic import AnthropicBackend\n"
        "from evalgate.backends.base import BackendContext, Message, Request\n"
        "from evalgate.config.models import ModelSettings\n"
        f"env = {{'ANTHROPIC_API_KEY': 'k', 'ANTHROPIC_BASE_URL': {srv.url!r}}}\n"
        f"settings = ModelSettings(backend='anthropic', name={MODEL!r})\n"
        "backend = AnthropicBackend(settings, BackendContext(base_dir=Path('.'), env=env))\n"
        "reply = backend.complete(Request(system='s', model="
        f"{MODEL!r}, max_tokens=64, messages=(Message(role='user', content='tape?'),)))\n"
        "assert reply.error is None and reply.text, reply\n"
        "print('anthropic' in sys.modules)\n"
    )
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
