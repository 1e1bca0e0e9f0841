"""The TLS context an API backend's HTTP client verifies servers with.

It is the context httpx2 would make for itself (httpcore2's default: the system's CA bundle,
or the one ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name), with two differences:

- :func:`prepare_tls` starts making it on a thread. Loading the CA bundle is about 40 ms of
  OpenSSL that releases the GIL, so it runs while the caller reads its cases; :func:`take_tls`
  waits for it. A context is given to one client only: httpcore2 sets the ALPN protocols of
  the context of every connection it opens, so two clients never share one.
- A bundle that cannot be read is a :class:`BackendError` that names the variable, not a
  traceback from inside the HTTP client.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

from evalgate.errors import BackendError

if TYPE_CHECKING:
    import ssl

# The variables httpcore2 reads, in the order it reads them.
CA_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")

_lock = threading.Lock()
# The context on its way, and the variables it was started under.
_prepared: tuple[Future[ssl.SSLContext], tuple[str | None, ...]] | None = None


def _variables() -> tuple[str | None, ...]:
    return tuple(os.environ.get(name) for name in CA_VARIABLES)


def _make() -> ssl.SSLContext:
    import httpcore2

    return httpcore2.default_ssl_context()


def prepare_tls() -> None:
    """Start making the next context on a thread (nothing when one is already on its way)."""
    global _prepared
    with _lock:
        if _prepared is not None:
            return
        future: Future[ssl.SSLContext] = Future()
        _prepared = future, _variables()

    def work() -> None:
        try:
            future.set_result(_make())
        except BaseException as exc:  # handed to take_tls(), which says what it was
            future.set_exception(exc)

    threading.Thread(target=work, name="evalgate-tls", daemon=True).start()


def take_tls() -> ssl.SSLContext:
    """The context :func:`prepare_tls` started (waited for), or one made now when none was
    (or when the variables that name the CA bundle have changed since)."""
    global _prepared
    with _lock:
        prepared, _prepared = _prepared, None
    try:
        if prepared is None or prepared[1] != _variables():
            return _make()
        return prepared[0].result()
    except OSError as exc:  # ssl.SSLError among them
        raise unreadable(exc) from None


def unreadable(exc: Exception) -> BackendError:
    """What a CA bundle that OpenSSL cannot load is, said with the variable that named it."""
    # httpcore2 reads the first of them that is set, and only that one.
    named = next(
        (f"{name}={os.environ[name]}" for name in CA_VARIABLES if os.environ.get(name)), None
    )
    where = named or "the system's CA bundle"
    return BackendError(
        f"cannot load the certificates that verify the API's TLS ({where}): {exc}",
        fix="point SSL_CERT_FILE at a readable PEM bundle, or unset SSL_CERT_FILE and "
        "SSL_CERT_DIR to use the system's",
    )
