"""The TLS context an API backend's HTTP client verifies servers with.

It is the context httpx2 would make for itself (httpcore2's default: the system's CA bundle,
or the one ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` name), with three differences:

- The variables are read from the backend's environment, as its key and base URL are, not
  from the process's.

- :func:`prepare_tls` starts making it on a thread. Loading the CA bundle is about 40 ms of
  OpenSSL that releases the GIL, so it runs while the caller reads its cases; :func:`take_tls`
  waits for it. A context is given to one client only: httpcore2 sets the ALPN protocols of
  the context of every connection it opens, so two clients never share one.
- A bundle that cannot be read is a :class:`BackendError` that names the variable, not a
  traceback from inside the HTTP client.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING

from evalgate.errors import BackendError

if TYPE_CHECKING:
    import ssl

# The variables that name the CA bundle, in the order httpx2 reads them (the first one set).
CA_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")

_lock = threading.Lock()
# The context on its way, and the variables it was started under.
_prepared: tuple[Future[ssl.SSLContext], tuple[str, str] | None] | None = None


def _named(env: Mapping[str, str]) -> tuple[str, str] | None:
    """The variable that names the CA bundle, and its value (None: the system's bundle)."""
    return next(((name, env[name]) for name in CA_VARIABLES if env.get(name)), None)


def _make(named: tuple[str, str] | None) -> ssl.SSLContext:
    """What httpx2 makes with ``trust_env``, from the caller's environment, not the process's."""
    import ssl

    import httpx2

    if named is None:
        return httpx2.create_ssl_context(verify=True, trust_env=False)
    name, value = named
    if name == "SSL_CERT_FILE":
        return ssl.create_default_context(cafile=value)
    return ssl.create_default_context(capath=value)


def prepare_tls(env: Mapping[str, str]) -> None:
    """Start making the next context on a thread (nothing when one is already on its way)."""
    global _prepared
    named = _named(env)
    with _lock:
        if _prepared is not None:
            return
        future: Future[ssl.SSLContext] = Future()
        _prepared = future, named

    def work() -> None:
        try:
            future.set_result(_make(named))
        except BaseException as exc:  # handed to take_tls(), which says what it was
            future.set_exception(exc)

    try:
        threading.Thread(target=work, name="evalgate-tls", daemon=True).start()
    except RuntimeError:  # no thread to be had (a process limit): take_tls() makes it itself
        with _lock:
            if _prepared is not None and _prepared[0] is future:
                _prepared = None


def take_tls(env: Mapping[str, str]) -> ssl.SSLContext:
    """The context :func:`prepare_tls` started (waited for), or one made now when none was
    (or when the variables that name the CA bundle have changed since)."""
    global _prepared
    named = _named(env)
    with _lock:
        prepared, _prepared = _prepared, None
    try:
        if prepared is None or prepared[1] != named:
            return _make(named)
        return prepared[0].result()
    except OSError as exc:  # ssl.SSLError among them
        raise unreadable(exc, named) from None


def unreadable(exc: Exception, named: tuple[str, str] | None) -> BackendError:
    """What a CA bundle that OpenSSL cannot load is, said with the variable that named it."""
    if named is None:
        where, fix = "the system's CA bundle", "point SSL_CERT_FILE at a readable PEM bundle"
    else:
        where = f"{named[0]}={named[1]}"
        fix = (
            "point SSL_CERT_FILE at a readable PEM bundle, or unset SSL_CERT_FILE and "
            "SSL_CERT_DIR to use the system's"
        )
    return BackendError(
        f"cannot load the certificates that verify the API's TLS ({where}): {exc}", fix=fix
    )
