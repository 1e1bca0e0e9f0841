"""The TLS context of the API backends: made on a thread while a run reads its cases, one per
client, and a CA bundle that cannot be read is an error that names its variable."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpcore2
import pytest
from conftest import shop_suite

from evalgate import cli
from evalgate.backends import tls
from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext
from evalgate.backends.openai import OpenAIBackend
from evalgate.config.models import ModelSettings
from evalgate.errors import BackendError
from tests.support.messages_server import MessagesServer

KEY = "sk-ant-api03-" + "Tl5c0nt3xtK3y" * 6


@pytest.fixture(autouse=True)
def nothing_prepared(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No context left over from another test, the CA variables unset, and none left after."""
    monkeypatch.setattr(tls, "_prepared", None)
    for name in tls.CA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    yield
    tls._prepared = None


NO_VARIABLES: dict[str, str] = {}


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ssl.SSLContext]]:
    """Every default context httpcore2 makes (httpx2's own included), with the thread that
    made it."""
    calls: list[tuple[str, ssl.SSLContext]] = []
    real = httpcore2.default_ssl_context

    def spy(**kwargs: Any) -> ssl.SSLContext:
        context = real(**kwargs)
        calls.append((threading.current_thread().name, context))
        return context

    monkeypatch.setattr(httpcore2, "default_ssl_context", spy)
    return calls


def anthropic_backend(env: dict[str, str] | None = None) -> AnthropicBackend:
    settings = ModelSettings(backend="anthropic", name="claude-haiku-4-5")
    context = BackendContext(base_dir=Path("."), env={"ANTHROPIC_API_KEY": KEY} | (env or {}))
    return AnthropicBackend(settings, context)


def openai_backend(env: dict[str, str] | None = None) -> OpenAIBackend:
    settings = ModelSettings(backend="openai", name="gpt-4o-mini")
    context = BackendContext(base_dir=Path("."), env={"OPENAI_API_KEY": "k"} | (env or {}))
    return OpenAIBackend(settings, context)


def test_prepared_context_is_made_on_its_thread_and_is_httpx2s_default(
    made: list[tuple[str, ssl.SSLContext]],
) -> None:
    tls.prepare_tls(NO_VARIABLES)
    context = tls.take_tls(NO_VARIABLES)
    assert [(name, id(c)) for name, c in made] == [("evalgate-tls", id(context))]
    default = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    default.load_verify_locations(ssl.get_default_verify_paths().openssl_cafile)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats() == default.cert_store_stats()
    assert context.cert_store_stats()["x509_ca"] > 0


def test_a_context_goes_to_one_client(made: list[tuple[str, ssl.SSLContext]]) -> None:
    """httpcore2 sets ALPN on the context of each connection: two clients never share one."""
    tls.prepare_tls(NO_VARIABLES)
    tls.prepare_tls(NO_VARIABLES)  # one already on its way: nothing more
    first, second = tls.take_tls(NO_VARIABLES), tls.take_tls(NO_VARIABLES)
    assert first is not second
    assert [name for name, _ in made] == ["evalgate-tls", "MainThread"]


def test_without_preparing_the_context_is_made_where_it_is_taken(
    made: list[tuple[str, ssl.SSLContext]],
) -> None:
    context = tls.take_tls(NO_VARIABLES)
    assert made == [("MainThread", context)]


def test_the_backends_clients_verify_with_contexts_of_ours(
    made: list[tuple[str, ssl.SSLContext]],
) -> None:
    tls.prepare_tls(NO_VARIABLES)
    backend = anthropic_backend()
    try:
        assert [name for name, _ in made] == ["evalgate-tls"]  # httpx2 made none of its own
        _ = backend.client  # the SDK's, for streams and batches: one more, and only one
        assert [name for name, _ in made] == ["evalgate-tls", "MainThread"]
    finally:
        backend.close()
    tls.prepare_tls(NO_VARIABLES)
    other = openai_backend()
    try:
        assert [name for name, _ in made][2:] == ["evalgate-tls"]
    finally:
        other.close()


@pytest.fixture(params=["missing", "not PEM", "a directory"])
def bad_bundle(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "missing":
        return tmp_path / "no-such-bundle.pem"
    if request.param == "a directory":
        return tmp_path
    path = tmp_path / "bundle.pem"
    path.write_text("-----BEGIN NOT A CERTIFICATE-----\nAAAA\n", encoding="utf-8")
    return path


def assert_names_the_bundle(exc: BackendError, bundle: Path) -> None:
    assert f"SSL_CERT_FILE={bundle}" in exc.what
    assert "certificates that verify the API's TLS" in exc.what
    assert exc.fix is not None and "SSL_CERT_FILE" in exc.fix


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "inline"])
def test_an_unreadable_bundle_is_an_error_naming_its_variable(
    bad_bundle: Path, prepared: bool
) -> None:
    # SSL_CERT_DIR is not read when SSL_CERT_FILE is set.
    env = {"SSL_CERT_FILE": str(bad_bundle), "SSL_CERT_DIR": "/etc/ssl/certs"}
    if prepared:
        tls.prepare_tls(env)
    with pytest.raises(BackendError) as caught:
        anthropic_backend(env)
    assert_names_the_bundle(caught.value, bad_bundle)
    assert "SSL_CERT_DIR" not in caught.value.what


def test_a_context_prepared_under_other_variables_is_not_used(bad_bundle: Path) -> None:
    tls.prepare_tls(NO_VARIABLES)  # under the system's bundle
    with pytest.raises(BackendError) as caught:
        tls.take_tls({"SSL_CERT_FILE": str(bad_bundle)})
    assert_names_the_bundle(caught.value, bad_bundle)


def test_the_variables_come_from_the_backends_environment_not_the_processs(
    bad_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(bad_bundle))  # the process's: not the backend's
    anthropic_backend().close()
    monkeypatch.delenv("SSL_CERT_FILE")
    with pytest.raises(BackendError) as caught:
        anthropic_backend({"SSL_CERT_FILE": str(bad_bundle)})
    assert_names_the_bundle(caught.value, bad_bundle)


def test_the_sdk_clients_and_openais_say_the_same(bad_bundle: Path) -> None:
    """The streaming path's SDK client takes a context of its own, as does the openai SDK's."""
    env = {"SSL_CERT_FILE": str(bad_bundle)}
    backend = anthropic_backend()  # its own client made under the system's bundle
    try:
        backend.context.env.update(env)
        with pytest.raises(BackendError) as caught:
            _ = backend.client
        assert_names_the_bundle(caught.value, bad_bundle)
    finally:
        backend.close()
    with pytest.raises(BackendError) as caught:
        openai_backend(env)
    assert_names_the_bundle(caught.value, bad_bundle)


def test_the_system_bundle_is_named_when_no_variable_is_set() -> None:
    exc = tls.unreadable(ssl.SSLError("no certificate or crl found"), None)
    assert "(the system's CA bundle)" in exc.what


@pytest.fixture
def run_suite_with(
    tmp_path: Path, srv: MessagesServer, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], int]:
    srv.knobs.api_key = KEY
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)

    def run(backend: str) -> int:
        model = {"backend": backend, "name": "claude-haiku-4-5", "max_tokens": 64}
        if backend == "fake":
            model["options"] = {"rules_file": "fake-rules.yml"}
        loaded = shop_suite(tmp_path / backend, cases=4, model=model)
        return cli.main(["run", "v3", "--no-save", "--config", str(loaded.path)])

    return run


def test_a_run_makes_its_context_while_it_reads_its_cases(
    run_suite_with: Callable[[str], int],
    made: list[tuple[str, ssl.SSLContext]],
    srv: MessagesServer,
) -> None:
    assert run_suite_with("anthropic") == 0
    assert len(srv.requests) == 4
    assert [name for name, _ in made] == ["evalgate-tls"]  # and no other
    assert tls._prepared is None  # taken


def test_an_offline_run_prepares_nothing(
    run_suite_with: Callable[[str], int], made: list[tuple[str, ssl.SSLContext]]
) -> None:
    assert run_suite_with("fake") == 0
    assert made == [] and tls._prepared is None


def test_the_command_line_says_it_in_one_line(
    run_suite_with: Callable[[str], int],
    bad_bundle: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(bad_bundle))
    assert run_suite_with("anthropic") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"SSL_CERT_FILE={bad_bundle}" in err and err.count("\n") == 1
