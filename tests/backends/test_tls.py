"""The TLS context of the API backends: made on a thread while a run reads its cases, one per
client, and a CA bundle that cannot be read is an error that names its variable."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import httpcore2
import pytest
from conftest import shop_suite

from evalgate import cli
from evalgate.backends import tls
from evalgate.backends.anthropic import AnthropicBackend
from evalgate.backends.base import BackendContext, Message, Request
from evalgate.backends.fake import load_rules
from evalgate.backends.openai import OpenAIBackend
from evalgate.config.models import ModelSettings
from evalgate.errors import BackendError
from tests.support.messages_server import MessagesServer

KEY = "sk-ant-api03-" + "Tl5c0nt3xtK3y" * 6


@pytest.fixture(autouse=True)
def nothing_prepared(monkeypatch: pytest.MonkeyPatch) -> None:
    """No context left over from another test, and the CA variables unset."""
    monkeypatch.setattr(tls, "_prepared", None)
    for name in tls.CA_VARIABLES:
        monkeypatch.delenv(name, raising=False)


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
    assert exc.fix == "point SSL_CERT_FILE at a readable PEM bundle"


def test_no_thread_to_be_had_is_no_wait(
    made: list[tuple[str, ssl.SSLContext]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process at its thread limit: nothing is left pending, the context is made inline."""

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patched:
        patched.setattr(threading.Thread, "start", refuse)
        tls.prepare_tls(NO_VARIABLES)
    assert tls._prepared is None
    context = tls.take_tls(NO_VARIABLES)
    assert made == [("MainThread", context)]


def test_a_collected_backend_closes_the_sdks_client() -> None:
    backend = anthropic_backend()
    http = backend.client._client
    backend._http.close()
    del backend
    assert http.is_closed


# --- over TLS, end to end: the stand-in serving HTTPS under a CA of the test's own ----------


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A CA, and a certificate it signed for 127.0.0.1: (ca.pem, server.pem, server.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = tmp_path_factory.mktemp("tls")
    now = datetime.now(UTC)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("evalgate test CA"))
        .issuer_name(name("evalgate test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(IPv4Address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@pytest.fixture
def https_server(certificates: tuple[Path, Path, Path]) -> Iterator[MessagesServer]:
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(certificates[1], certificates[2])
    rules = load_rules(
        {"rules_file": "fake-rules.yml"}, Path(__file__).parents[2] / "examples" / "bike-shop"
    )
    with MessagesServer(rules, tls=served) as server:
        yield server


def ask(backend: AnthropicBackend) -> tuple[str | None, str | None]:
    request = Request(
        system="Sort the message: complaint, status, booking, quote, parts or other.",
        messages=(Message(role="user", content="<message>Is my bike ready?</message>"),),
        model="claude-haiku-4-5",
        max_tokens=64,
    )
    reply = backend.complete(request)
    return reply.error_kind, reply.error


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_server_is_trusted_by_the_bundle_ssl_cert_file_names(
    https_server: MessagesServer, certificates: tuple[Path, Path, Path], stream: bool
) -> None:
    env = {"ANTHROPIC_BASE_URL": https_server.url, "SSL_CERT_FILE": str(certificates[0])}
    settings = ModelSettings(
        backend="anthropic", name="claude-haiku-4-5", options={"stream": stream}
    )
    context = BackendContext(base_dir=Path("."), env={"ANTHROPIC_API_KEY": KEY} | env)
    tls.prepare_tls(context.env)
    backend = AnthropicBackend(settings, context)
    try:
        assert ask(backend) == (None, None)
    finally:
        backend.close()
    assert len(https_server.requests) == 1


def test_a_server_the_bundle_does_not_vouch_for_is_a_connection_error(
    https_server: MessagesServer,
) -> None:
    """Under the system's bundle the test's CA is unknown: the call fails, it is not trusted."""
    backend = anthropic_backend({"ANTHROPIC_BASE_URL": https_server.url})
    try:
        kind, error = ask(backend)
    finally:
        backend.close()
    assert kind == "connection" and error is not None
    assert "CERTIFICATE_VERIFY_FAILED" in error or "certificate verify failed" in error
    assert https_server.requests == []


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
