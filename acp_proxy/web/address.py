"""Listening addresses for the inspector: parsing ``HOST:PORT`` and the loopback rule.

Kept free of aiohttp so the proxy commands can validate ``--ui`` without importing the
server (a proxy without ``--ui`` starts as fast as before).
"""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses (``127.0.0.0/8``, ``::1``)."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(value: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``[::1]:8080`` for IPv6; ``:8080`` means loopback)."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port_text)


def check_listen(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token (raises ``ValueError``)."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"listening on {host} (not loopback) needs --token; the inspector shows every "
            "byte of the recording"
        )
