"""Listening addresses: ``HOST:PORT`` parsing and the loopback rule, shared by every server.

The WebSocket proxy, the replay server and the web inspector all bind 127.0.0.1 by default
and refuse any other address without a token. Free of aiohttp, so commands can validate
their options without importing a server.
"""

from __future__ import annotations

import ipaddress


class ListenError(ValueError):
    """A ``--listen`` value that cannot be used; the message is meant for the user."""


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT`` or ``PORT`` (on 127.0.0.1) -> ``(host, port)``."""
    text = value.strip()
    if text.isdigit():
        host, port_text = "127.0.0.1", text
    elif text.startswith("["):
        end = text.find("]")
        if end < 0 or not text[end + 1 :].startswith(":"):
            raise ListenError(f"cannot parse --listen {value!r}: use [ADDRESS]:PORT for IPv6")
        host, port_text = text[1:end], text[end + 2 :]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or not host:
            raise ListenError(
                f"cannot parse --listen {value!r}: use HOST:PORT, e.g. 127.0.0.1:8765"
            )
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ListenError(f"bad port in --listen {value!r}: use 0..65535 (0 picks a free port)")
    return host, int(port_text)


LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    name = host.strip("[]").lower()
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_listen(host: str, token: str | None, what: str = "the inspector") -> None:
    """Refuse to listen beyond loopback without a token (raises :class:`ListenError`)."""
    if not is_loopback(host) and not token:
        raise ListenError(
            f"listening on {host} (not loopback) needs --token; {what} shows every byte of the "
            "recording"
        )
