"""The ``--ui HOST:PORT`` option shared by the proxy commands: serve the inspector live.

The click side of it (the inspector itself is :func:`acp_proxy.web.server.start_in_thread`).
Use :data:`ui_options` as a click decorator (it adds ``--ui`` and ``--ui-token``, passed to
the command as ``ui`` and ``ui_token``) and call :func:`start_ui` before proxying. The
inspector runs in a daemon thread with its own asyncio loop and reads the recording through
fresh read-only connections, so it never slows the forwarding path. Its address is printed
on stderr (stdout may be the ACP channel).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from acp_proxy.commands.options import parse_listen_option
from acp_proxy.console import warn

if TYPE_CHECKING:
    from acp_proxy.web.server import InspectorHandle

F = TypeVar("F", bound=Callable[..., Any])


def ui_options(func: F) -> F:
    """Add ``--ui HOST:PORT`` and ``--ui-token`` to a proxy command."""
    func = click.option(
        "--ui-token",
        envvar="ACP_PROXY_UI_TOKEN",
        show_envvar=True,
        help="Token the --ui inspector requires (mandatory when --ui is not loopback).",
    )(func)
    func = click.option(
        "--ui",
        callback=parse_listen_option,
        metavar="HOST:PORT",
        help="Serve the live web inspector for the --record file while proxying "
        "(e.g. 127.0.0.1:8080; port 0 picks a free one).",
    )(func)
    return func


def start_ui(
    ui: tuple[str, int] | None, token: str | None, record: Path | str | None
) -> InspectorHandle | None:
    """Start the inspector for ``record`` if ``--ui`` was given; report where on stderr.

    ``--ui`` without ``--record`` and a non-loopback address without a token are usage
    errors. A port that cannot be bound only warns: the proxy still runs (an editor may
    start several proxies with the same options).
    """
    if ui is None:
        return None
    if record is None:
        raise click.UsageError("--ui needs --record (the inspector shows the recording)")
    host, port = ui
    if isinstance(record, Path) and record.is_dir():  # forwarding wins (the recorder says so)
        warn(f"inspector not started: {record} is a directory; proxying anyway")
        return None
    from acp_proxy.transport.address import check_listen

    try:
        check_listen(host, token)
    except ValueError as exc:
        raise click.UsageError(str(exc).replace("--token", "--ui-token")) from None
    from acp_proxy.web.server import start_in_thread  # aiohttp only when asked for

    try:
        handle = start_in_thread(record, host, port, token=token)
    except OSError as exc:
        warn(
            f"inspector not started: cannot listen on {host}:{port}: "
            f"{exc.strerror or exc}; proxying anyway"
        )
        return None
    warn(f"inspector on {handle.url}")
    return handle
