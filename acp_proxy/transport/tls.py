"""TLS for every server and client connector: ``--tls-cert/--tls-key`` and ``--cafile``.

One place builds the server context (TLS 1.2 minimum) that ``serve``, ``ws``, ``web`` and
``replay --listen`` listen with, and the client context that ``connect`` and ``--upstream``
verify ``https://`` / ``wss://`` peers with (the system trust store, plus ``--cafile``).
Failures become one line for the user (:class:`TlsError`, :func:`tls_failure`).
"""

from __future__ import annotations

import ssl
from pathlib import Path


class TlsError(ValueError):
    """A certificate, key or CA file that cannot be used; the message is meant for the user."""


def _readable(option: str, path: str) -> None:
    try:
        with Path(path).open("rb") as handle:
            handle.read(1)
    except OSError as exc:
        raise TlsError(f"cannot read {option} {path}: {exc.strerror or exc}") from None


def _encrypted_key(key: str) -> str:
    raise TlsError(f"the key {key} is encrypted: give --tls-key an unencrypted PEM key")


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """The context a server listens with: ``cert`` (PEM chain) and its ``key``, TLS 1.2+."""
    _readable("--tls-cert", cert)
    _readable("--tls-key", key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key, password=lambda: _encrypted_key(key))
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise TlsError(f"the key {key} does not belong to the certificate {cert}") from None
        detail = f" ({exc.reason})" if exc.reason else ""
        raise TlsError(
            f"cannot load the certificate {cert} with the key {key}: not a PEM certificate "
            f"and its private key{detail}"
        ) from None
    return context


def client_context(cafile: str | None = None) -> ssl.SSLContext:
    """The context ``https://`` / ``wss://`` peers are verified with: system store + ``cafile``."""
    context = ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cafile is not None:
        _readable("--cafile", cafile)
        try:
            context.load_verify_locations(cafile=cafile)
        except ssl.SSLError as exc:
            raise TlsError(
                f"cannot load --cafile {cafile}: not PEM certificates ({exc.reason or exc})"
            ) from None
    return context


def tls_failure(exc: BaseException) -> str | None:
    """``TLS certificate not trusted: ...`` when ``exc`` (or what it wraps) is a TLS failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # aiohttp's wrappers first: some also subclass ssl's errors without their attributes
        wrapped = getattr(current, "certificate_error", None) or getattr(current, "os_error", None)
        if isinstance(wrapped, BaseException):
            current = wrapped
            continue
        if isinstance(current, ssl.SSLCertVerificationError):
            reason = getattr(current, "verify_message", None) or current.reason or str(current)
            return f"TLS certificate not trusted: {reason} (--cafile FILE adds a CA)"
        if isinstance(current, ssl.SSLError):
            return f"TLS handshake failed: {getattr(current, 'reason', None) or current}"
        current = current.__cause__
    return None


def scheme_for(base: str, tls: object | None) -> str:
    """``base`` (``ws``/``http``) with an ``s`` when the server listens with TLS."""
    return base + "s" if tls is not None else base
