"""The Messages API stand-in, driven by the real anthropic SDK."""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import pytest
from pydantic import ValidationError

from evalgate.backends.fake import FakeRules, rough_tokens
from tests.support.messages_server import Knobs, MessagesServer

RULES = FakeRules.model_validate(
    {
        "rules": [
            {"label": "booking", "phrases": ["book", "reserve"], "alias": "reservation"},
            {"label": "quote", "phrases": ["price", "cost"], "alias": "pricing"},
        ],
        "default": "other",
    }
)
SYSTEM = "Classify the message as booking, quote or other."
JSON_SYSTEM = SYSTEM + " Reply in JSON."
MODEL = "claude-stand-in"
ANSWERS = {
    "booking": "Category: booking.",
    "quote": "Category: quote.",
    "other": "Category: other.",
}
MESSAGES = {
    "booking": "Can I book a bike for Saturday?",
    "quote": "How much does a tune-up cost?",
    "other": "Are you open on Sundays?",
}


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": f"<message>{text}</message>"}]


def ask(client: anthropic.Anthropic, text: str, **kwargs: Any) -> anthropic.types.Message:
    params: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "system": SYSTEM}
    params.update(kwargs)
    return client.messages.create(messages=user(text), **params)


def reply_text(message: anthropic.types.Message) -> str:
    block = message.content[0]
    assert block.type == "text"
    return block.text


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[MessagesServer, anthropic.Anthropic]]:
    # One server and client for the module: creating an SDK client costs ~50 ms.
    with (
        MessagesServer(RULES) as server,
        anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=0) as c,
    ):
        yield server, c


@pytest.fixture
def srv(shared: tuple[MessagesServer, anthropic.Anthropic]) -> Iterator[MessagesServer]:
    server = shared[0]
    server.knobs = Knobs()
    server.reset()
    yield server
    assert server.errors == []


@pytest.fixture
def client(
    srv: MessagesServer, shared: tuple[MessagesServer, anthropic.Anthropic]
) -> anthropic.Anthropic:
    return shared[1]


def test_happy_path_json(srv: MessagesServer, client: anthropic.Anthropic) -> None:
    raw = client.messages.with_raw_response.create(
        model=MODEL, max_tokens=64, system=SYSTEM, messages=user(MESSAGES["quote"])
    )
    message = raw.parse()
    assert reply_text(message) == "Category: quote."
    assert message.role == "assistant" and message.model == MODEL
    assert message.stop_reason == "end_turn"
    assert message.id.startswith("msg_")
    assert raw.request_id is not None and raw.request_id.startswith("req_")
    sent = SYSTEM + f"<message>{MESSAGES['quote']}</message>"
    assert message.usage.input_tokens == rough_tokens(sent)
    assert message.usage.output_tokens == rough_tokens("Category: quote.")
    assert message.usage.cache_creation_input_tokens == 0
    assert message.usage.cache_read_input_tokens == 0

    assert reply_text(ask(client, MESSAGES["booking"])) == "Category: booking."
    assert reply_text(ask(client, MESSAGES["other"])) == "Category: other."
    # no labels named in the system prompt: the fake answers in its own words
    assert reply_text(ask(client, MESSAGES["booking"], system="Classify.")) == (
        "Category: reservation."
    )
    stats = srv.stats()
    assert stats.by_status == {200: 4} and stats.by_outcome == {"ok": 4}
    assert stats.connections <= 1  # the SDK's pool keeps its connection alive
    assert stats.in_flight == 0
    assert srv.requests[0].body["model"] == MODEL
    assert srv.requests[0].headers["anthropic-version"]


def test_json_reply_and_block_inputs(client: anthropic.Anthropic) -> None:
    assert reply_text(ask(client, MESSAGES["booking"], system=JSON_SYSTEM)) == (
        '{"category": "booking"}'
    )
    message = client.messages.create(
        model=MODEL,
        max_tokens=64,
        system=[{"type": "text", "text": JSON_SYSTEM}],
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": f"<message>{MESSAGES['quote']}"}],
            },
        ],
    )
    # content blocks are joined; without the closing tag the whole turn is the message
    assert json.loads(reply_text(message)) == {"category": "quote"}


def test_streaming_gives_the_same_text(client: anthropic.Anthropic) -> None:
    expected = reply_text(ask(client, MESSAGES["quote"], system=JSON_SYSTEM))
    with client.messages.stream(
        model=MODEL, max_tokens=64, system=JSON_SYSTEM, messages=user(MESSAGES["quote"])
    ) as stream:
        deltas = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(deltas) == expected and len(deltas) == 3
    assert reply_text(final) == expected
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == rough_tokens(expected)

    events = client.messages.create(
        model=MODEL,
        max_tokens=64,
        system=JSON_SYSTEM,
        messages=user(MESSAGES["quote"]),
        stream=True,
    )
    types = [event.type for event in events]
    assert types == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 3,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_sse_wire_format(srv: MessagesServer) -> None:
    body = {"model": MODEL, "max_tokens": 64, "messages": user("book"), "stream": True}
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=5)
    try:
        conn.request("POST", "/v1/messages", json.dumps(body), {"x-api-key": "k"})
        response = conn.getresponse()
        assert response.status == 200
        assert response.getheader("content-type", "").startswith("text/event-stream")
        assert response.getheader("request-id", "").startswith("req_")
        raw = response.read().decode()
    finally:
        conn.close()
    frames = [f for f in raw.split("\n\n") if f]
    names = []
    for frame in frames:
        match = re.fullmatch(r"event: (\w+)\ndata: (.*)", frame)
        assert match, frame
        names.append(match[1])
        assert json.loads(match[2])["type"] == match[1]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]


def test_prompt_caching_token_accounting(srv: MessagesServer, client: anthropic.Anthropic) -> None:
    cached_system = "You sort a bike shop's mail. " * 20 + "Labels: booking, quote, other."
    system: Any = [
        {"type": "text", "text": cached_system, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Answer briefly."},
    ]
    full_system = cached_system + "\nAnswer briefly."
    total = rough_tokens(full_system + f"<message>{MESSAGES['quote']}</message>")
    prefix = rough_tokens(cached_system)

    first = ask(client, MESSAGES["quote"], system=system).usage
    assert first.cache_creation_input_tokens == prefix
    assert first.cache_read_input_tokens == 0
    assert first.input_tokens == total - prefix
    assert (
        first.cache_creation is not None
        and first.cache_creation.ephemeral_5m_input_tokens == prefix
    )

    second = ask(client, MESSAGES["quote"], system=system).usage
    assert second.cache_creation_input_tokens == 0
    assert second.cache_read_input_tokens == prefix
    assert second.input_tokens == total - prefix

    # same prefix, other message: still a read; another model: a write
    assert ask(client, MESSAGES["other"], system=system).usage.cache_read_input_tokens == prefix
    other_model = ask(client, MESSAGES["quote"], system=system, model="other-model").usage
    assert other_model.cache_creation_input_tokens == prefix
    # no cache_control: no caching
    plain = ask(client, MESSAGES["quote"], system=full_system).usage
    assert (plain.cache_creation_input_tokens, plain.cache_read_input_tokens) == (0, 0)
    assert plain.input_tokens == total
    stats = srv.stats()
    assert (stats.cache_writes, stats.cache_reads) == (2, 2)

    # 1-hour TTL is reported separately; prefixes below the minimum are not cached
    system[0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    hour = ask(client, MESSAGES["booking"], system=[*system, {"type": "text", "text": "x"}]).usage
    assert hour.cache_creation is not None
    assert hour.cache_creation.ephemeral_1h_input_tokens == hour.cache_creation_input_tokens
    srv.knobs.cache_min_tokens = prefix + 1
    small = ask(client, MESSAGES["quote"], system=system, model="third-model").usage
    assert (small.cache_creation_input_tokens, small.cache_read_input_tokens) == (0, 0)

    # expiry
    srv.knobs.cache_min_tokens = 0
    srv.knobs.cache_ttl_s = 0.05
    top = [{"type": "text", "text": "Short prompt naming booking, quote and other."}]
    ask(client, "x", system=top, extra_body={"cache_control": {"type": "ephemeral"}})
    time.sleep(0.1)
    again = ask(client, "x", system=top, extra_body={"cache_control": {"type": "ephemeral"}})
    assert again.usage.cache_creation_input_tokens > 0


def test_max_tokens_stop_reason(client: anthropic.Anthropic) -> None:
    message = ask(client, MESSAGES["quote"], max_tokens=2)
    assert message.stop_reason == "max_tokens"
    assert reply_text(message) == "Category: quote."[:8]
    assert message.usage.output_tokens == 2
    with client.messages.stream(
        model=MODEL, max_tokens=2, system=SYSTEM, messages=user(MESSAGES["quote"])
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "max_tokens" and reply_text(final) == "Category"


@pytest.mark.parametrize(
    ("fault", "error", "etype"),
    [
        ("429", anthropic.RateLimitError, "rate_limit_error"),
        ("529", anthropic.OverloadedError, "overloaded_error"),
        ("500", anthropic.InternalServerError, "api_error"),
        ("400", anthropic.BadRequestError, "invalid_request_error"),
        ("401", anthropic.AuthenticationError, "authentication_error"),
    ],
)
def test_status_faults_map_to_sdk_errors(
    srv: MessagesServer,
    client: anthropic.Anthropic,
    fault: str,
    error: type[anthropic.APIStatusError],
    etype: str,
) -> None:
    srv.script([fault])
    with pytest.raises(error) as caught:
        ask(client, MESSAGES["quote"])
    assert caught.value.type == etype
    assert caught.value.request_id is not None
    assert caught.value.request_id == caught.value.response.headers["request-id"]
    assert caught.value.body == {
        "type": "error",
        "error": {"type": etype, "message": caught.value.api_message},
        "request_id": caught.value.request_id,
    }
    assert len(srv.requests) == 1
    assert reply_text(ask(client, MESSAGES["quote"])) == "Category: quote."  # script used up


def test_overloaded_is_an_internal_server_error() -> None:
    assert issubclass(anthropic.OverloadedError, anthropic.InternalServerError)


def test_drop_is_a_connection_error(srv: MessagesServer, client: anthropic.Anthropic) -> None:
    srv.script(["drop"])
    with pytest.raises(anthropic.APIConnectionError) as caught:
        ask(client, MESSAGES["quote"])
    assert not isinstance(caught.value, anthropic.APITimeoutError)
    assert srv.requests[0].outcome == "drop" and srv.requests[0].status is None
    assert reply_text(ask(client, MESSAGES["quote"])) == "Category: quote."


def test_slow_is_a_timeout() -> None:
    with (
        MessagesServer(RULES, slow_s=5.0) as server,
        anthropic.Anthropic(api_key="t", base_url=server.url, max_retries=0, timeout=0.2) as c,
    ):
        server.script(["slow"])
        started = time.monotonic()
        with pytest.raises(anthropic.APITimeoutError):
            ask(c, MESSAGES["quote"])
        assert time.monotonic() - started < 1.5
        # The next request is answered normally (a generous timeout: CI machines can be busy).
        assert reply_text(ask(c.with_options(timeout=30), MESSAGES["quote"])) == "Category: quote."
        assert server.stats().in_flight == 1  # still sleeping; close() wakes it


def test_malformed_bodies(srv: MessagesServer, client: anthropic.Anthropic) -> None:
    # truncated JSON: the SDK raises the bare json error (not an AnthropicError, not retried)
    srv.script(["malformed"])
    with pytest.raises(json.JSONDecodeError):
        ask(client, MESSAGES["quote"])
    srv.script(["malformed"])
    with (
        pytest.raises(json.JSONDecodeError),
        client.messages.stream(
            model=MODEL, max_tokens=64, system=SYSTEM, messages=user("x")
        ) as stream,
    ):
        stream.get_final_message()
    # an HTML page with a 200: create() silently returns the page as a str
    srv.knobs.malformed_kind = "html"
    srv.script(["malformed"])
    page: object = ask(client, MESSAGES["quote"])
    assert isinstance(page, str) and "502 Bad Gateway" in page
    with pytest.raises(anthropic.RateLimitError):  # max_retries=0 above; retried below
        srv.script(["429"])
        ask(client, MESSAGES["quote"])
    with anthropic.Anthropic(api_key="t", base_url=srv.url, max_retries=2) as retrying:
        srv.script(["malformed"])
        assert isinstance(ask(retrying, MESSAGES["quote"]), str)
    assert srv.stats().by_outcome["malformed"] == 4


def test_mid_stream_error_event(srv: MessagesServer, client: anthropic.Anthropic) -> None:
    srv.script(["stream_error"])
    with (
        pytest.raises(anthropic.APIStatusError) as caught,
        client.messages.stream(
            model=MODEL, max_tokens=64, system=SYSTEM, messages=user("x")
        ) as stream,
    ):
        stream.get_final_message()
    # the SDK raises a plain APIStatusError carrying the 200 of the stream
    assert type(caught.value) is anthropic.APIStatusError
    assert caught.value.status_code == 200 and caught.value.type == "overloaded_error"
    # not streaming, the same fault is a 529
    srv.script(["stream_error"])
    with pytest.raises(anthropic.OverloadedError):
        ask(client, MESSAGES["quote"])


def test_api_key_and_unknown_models(srv: MessagesServer) -> None:
    srv.knobs.api_key = "right"
    srv.knobs.unknown_models = ["not-a-model"]
    with anthropic.Anthropic(api_key="wrong", base_url=srv.url, max_retries=2) as c:
        with pytest.raises(anthropic.AuthenticationError):
            ask(c, MESSAGES["quote"])
        assert len(srv.requests) == 1  # a 401 is not retried
    with anthropic.Anthropic(api_key="right", base_url=srv.url, max_retries=0) as c:
        assert reply_text(ask(c, MESSAGES["quote"])) == "Category: quote."
        with pytest.raises(anthropic.NotFoundError) as missing:
            ask(c, MESSAGES["quote"], model="not-a-model")
        assert missing.value.api_message == "model: not-a-model"
        srv.knobs.unknown_model_status = 400
        with pytest.raises(anthropic.BadRequestError):
            ask(c, MESSAGES["quote"], model="not-a-model")
        with pytest.raises(anthropic.NotFoundError):
            c.models.list()
        counted = c.messages.count_tokens(model=MODEL, system=SYSTEM, messages=user("hi"))
        assert counted.input_tokens == rough_tokens(SYSTEM + "<message>hi</message>")
    # x-api-key works too
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=5)
    try:
        body = json.dumps({"model": MODEL, "max_tokens": 9, "messages": user("book")})
        conn.request("POST", "/v1/messages", body, {"x-api-key": "right"})
        assert conn.getresponse().read() and True
        body = json.dumps({"model": MODEL, "messages": user("book")})
        conn.request("POST", "/v1/messages", body, {"x-api-key": "right"})
        response = conn.getresponse()
        assert response.status == 400
        assert json.loads(response.read())["error"] == {
            "type": "invalid_request_error",
            "message": "max_tokens: Field required",
        }
    finally:
        conn.close()


def test_sdk_retry_honours_retry_after(srv: MessagesServer) -> None:
    srv.knobs.retry_after_s = 0.05
    srv.script(["429", "ok"])
    with anthropic.Anthropic(api_key="t", base_url=srv.url, max_retries=2) as c:
        assert reply_text(ask(c, MESSAGES["quote"])) == "Category: quote."
        first, second = srv.requests
        assert (first.status, second.status) == (429, 200)
        assert first.headers["x-stainless-retry-count"] == "0"
        assert second.headers["x-stainless-retry-count"] == "1"
        # retry-after 0.05 s, not the SDK's own backoff (at least 0.375 s)
        assert 0.05 <= second.t - first.t < 0.3

        srv.knobs.should_retry_header = True
        srv.script(["400"])
        with pytest.raises(anthropic.BadRequestError) as caught:
            ask(c, MESSAGES["quote"])
        assert caught.value.response.headers["x-should-retry"] == "false"
        assert len(srv.requests) == 3


def test_rate_limit_bucket_headers(srv: MessagesServer, client: anthropic.Anthropic) -> None:
    srv.knobs.requests_per_minute = 3
    srv.knobs.input_tokens_per_minute = 10_000
    remaining = []
    for _ in range(3):
        raw = client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, system=SYSTEM, messages=user("book")
        )
        assert raw.headers["anthropic-ratelimit-requests-limit"] == "3"
        remaining.append(raw.headers["anthropic-ratelimit-requests-remaining"])
        assert re.fullmatch(
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", raw.headers["anthropic-ratelimit-requests-reset"]
        )
        assert raw.headers["anthropic-ratelimit-input-tokens-limit"] == "10000"
        assert "anthropic-ratelimit-tokens-remaining" in raw.headers
    assert remaining == ["2", "1", "0"]
    with pytest.raises(anthropic.RateLimitError) as caught:
        ask(client, "book")
    headers = caught.value.response.headers
    assert 1 <= int(headers["retry-after"]) <= 20  # one request refills in 20 s
    assert headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert srv.stats().by_outcome["bucket"] == 1
    srv.knobs.requests_per_minute = None  # unlimited again
    assert (
        "anthropic-ratelimit-requests-limit"
        not in client.messages.with_raw_response.create(
            model=MODEL, max_tokens=64, messages=user("book")
        ).headers
    )


def run_sequence(
    seed: int, flip_rate: float, texts: list[str], script: tuple[str, ...] = ()
) -> list[str]:
    with (
        MessagesServer(RULES, seed=seed, flip_rate=flip_rate) as server,
        anthropic.Anthropic(api_key="t", base_url=server.url, max_retries=0) as c,
    ):
        server.script(script)
        answers = []
        for text in texts:
            while True:
                try:
                    answers.append(reply_text(ask(c, text)))
                    break
                except anthropic.RateLimitError:
                    continue
        return answers


def test_flips_are_seeded_and_independent_of_faults() -> None:
    texts = [MESSAGES[label] for label in ("booking", "quote", "other")] * 6
    first = run_sequence(7, 0.5, texts)
    assert run_sequence(7, 0.5, texts) == first
    # faults (and the retries they cause) do not shift the answers
    assert run_sequence(7, 0.5, texts, ("429", "ok", "429", "429")) == first
    assert run_sequence(8, 0.5, texts) != first
    # repeated identical requests flip independently
    booking = [a for a, t in zip(first, texts, strict=True) if t == MESSAGES["booking"]]
    assert len(set(booking)) > 1
    assert run_sequence(7, 0.0, texts) == [ANSWERS[k] for k in ("booking", "quote", "other")] * 6


def test_flip_rate_is_approximately_right(srv: MessagesServer, client: anthropic.Anthropic) -> None:
    srv.knobs.flip_rate = 0.25
    srv.knobs.seed = 3
    flips = 0
    for i in range(400):
        label = ("booking", "quote", "other")[i % 3]
        text = reply_text(ask(client, MESSAGES[label]))
        assert text in ANSWERS.values()
        flips += text != ANSWERS[label]
    assert srv.stats().flips == flips
    assert 0.17 <= flips / 400 <= 0.33


def test_concurrent_clients_get_scheduling_independent_answers() -> None:
    texts = [f"{MESSAGES['booking']} #{i}" for i in range(32)]
    sequential = run_sequence(11, 0.5, texts)
    with (
        MessagesServer(RULES, seed=11, flip_rate=0.5, latency_s=0.01) as server,
        anthropic.Anthropic(api_key="t", base_url=server.url, max_retries=0) as c,
        ThreadPoolExecutor(16) as pool,
    ):
        concurrent = list(pool.map(lambda t: reply_text(ask(c, t)), texts))
        stats = server.stats()
    assert concurrent == sequential
    assert stats.max_in_flight > 1 and stats.by_status == {200: 32}


def test_fault_rates_are_seeded() -> None:
    def statuses(seed: int) -> list[int | None]:
        with (
            MessagesServer(RULES, seed=seed, rate_limit=0.2, server_error=0.1) as server,
            anthropic.Anthropic(api_key="t", base_url=server.url, max_retries=0) as c,
        ):
            for i in range(40):
                with contextlib.suppress(anthropic.APIStatusError):
                    ask(c, f"book #{i}")
            return [ex.status for ex in server.requests]

    first = statuses(1)
    assert statuses(1) == first
    assert statuses(2) != first
    assert 3 <= first.count(429) <= 16 and 1 <= first.count(500) <= 10


def test_latency(srv: MessagesServer, client: anthropic.Anthropic) -> None:
    srv.knobs.latency_s = 0.2
    started = time.monotonic()
    ask(client, "book")
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    with client.messages.stream(
        model=MODEL, max_tokens=64, system=SYSTEM, messages=user("book")
    ) as stream:
        first_event = next(iter(stream))
        first_at = time.monotonic() - started
        stream.get_final_message()
    assert first_event.type == "message_start"
    # spread over the events: the first comes after a quarter of it (1 + 3 deltas)
    assert first_at < 0.15 and time.monotonic() - started >= 0.2


def test_knobs_are_validated_and_script_names_checked(srv: MessagesServer) -> None:
    with pytest.raises(ValidationError):
        srv.knobs.flip_rate = 1.5
    with pytest.raises(ValidationError):
        Knobs(latency_s=-1)
    with pytest.raises(ValueError, match="unknown faults"):
        srv.script(["teapot"])
    srv.script(["529", "drop"])
    assert srv.scripted == ["overloaded", "drop"]
    srv.reset()
    assert srv.scripted == [] and srv.stats().requests == 0


def test_close_is_prompt_with_open_connections_and_sleepers() -> None:
    server = MessagesServer(RULES, slow_s=30.0)
    with anthropic.Anthropic(api_key="t", base_url=server.url, max_retries=0, timeout=0.1) as c:
        ask(c, "book")  # leaves a kept-alive connection open
        server.script(["slow"])
        with pytest.raises(anthropic.APITimeoutError):
            ask(c, "book")
        started = time.monotonic()
        server.close()
        server.close()  # idempotent
        assert time.monotonic() - started < 1.0
        with pytest.raises(anthropic.APIConnectionError):
            ask(c, "book")


def test_a_client_that_resets_its_connection_is_no_fault_of_the_stand_in(
    srv: MessagesServer,
) -> None:
    """A client's timeout closes its connection with the answer unread (the kernel sends a
    reset): the stand-in counts it and notes no error of its own (the fixture checks)."""
    import socket
    import struct

    with socket.create_connection((srv.host, srv.port)) as sock:
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Le")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    deadline = time.monotonic() + 5
    while srv.stats().resets == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.stats().resets == 1
