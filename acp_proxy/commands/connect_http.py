"""``acp-proxy connect http://HOST:PORT/acp``: the stdio bridge over Streamable HTTP.

Called by ``acp-proxy connect`` (:mod:`acp_proxy.commands.ws`) for ``http://`` and
``https://`` URLs; ``ws://`` URLs stay on the WebSocket bridge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from acp_proxy.commands.common import run_stdio_bridge
from acp_proxy.record.writer import Recorder

if TYPE_CHECKING:
    import ssl


def connect_http(
    url: str,
    recorder: Recorder,
    headers: list[tuple[str, str]],
    token: str | None,
    max_message: int,
    label: str | None,
    grace: float,
    tls: ssl.SSLContext | None = None,
) -> NoReturn:
    """``acp-proxy connect http://...``: the stdio bridge over Streamable HTTP; exits."""
    from acp_proxy.transport.http_connect import HttpConnectSettings, run_http_connect

    run_stdio_bridge(
        run_http_connect(
            HttpConnectSettings(
                url=url,
                recorder=recorder,
                headers=headers,
                token=token,
                max_message=max_message,
                label=label,
                grace=grace,
                tls=tls,
            )
        ),
        recorder,
    )
