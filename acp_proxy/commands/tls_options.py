"""``--tls-cert/--tls-key`` (servers) and ``--cafile`` (clients): the options and their checks.

Shared by ``serve``, ``ws``, ``web``, ``replay --listen`` and ``connect``; the contexts come
from :mod:`acp_proxy.transport.tls`, a bad file is one ``Error:`` line and exit 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    import ssl

F = TypeVar("F", bound=Callable[..., Any])


def tls_server_options(func: F) -> F:
    """``--tls-cert FILE --tls-key FILE``: serve https:// and wss:// (TLS 1.2 or newer)."""
    func = click.option(
        "--tls-key",
        metavar="FILE",
        help="The PEM private key of --tls-cert (unencrypted).",
    )(func)
    return click.option(
        "--tls-cert",
        metavar="FILE",
        help="Serve over TLS (https://, wss://; TLS 1.2+) with this PEM certificate chain; "
        "needs --tls-key. Off loopback --token is still required.",
    )(func)


def cafile_option(func: F) -> F:
    """``--cafile FILE``: a CA to trust besides the system store for https:// / wss:// peers."""
    return click.option(
        "--cafile",
        metavar="FILE",
        help="Also trust the CA certificates (PEM) in FILE when verifying an https:// or "
        "wss:// peer (default: the system trust store only).",
    )(func)


def server_tls(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """The server context for ``--tls-cert/--tls-key``, ``None`` without them."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if key is None else ("--tls-key", "--tls-cert")
        raise click.UsageError(f"{given} needs {missing} too")
    from acp_proxy.transport.tls import TlsError, server_context  # (only when given)

    try:
        return server_context(cert, key)
    except TlsError as exc:
        raise click.ClickException(str(exc)) from None


def peer_tls(cafile: str | None) -> ssl.SSLContext | None:
    """The client context for ``--cafile`` (``None`` without it: the system store)."""
    if cafile is None:
        return None
    from acp_proxy.transport.tls import TlsError, client_context  # (only when given)

    try:
        return client_context(cafile)
    except TlsError as exc:
        raise click.ClickException(str(exc)) from None
