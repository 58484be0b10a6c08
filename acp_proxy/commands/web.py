"""``acp-proxy web DB``: serve the live web inspector for a recording."""

from __future__ import annotations

from pathlib import Path

import click

from acp_proxy.commands.common import RECORDING_PATH, serving
from acp_proxy.commands.metrics_options import (
    check_metrics_option,
    metrics_options,
    start_metrics_option,
)
from acp_proxy.commands.options import parse_listen_option
from acp_proxy.commands.tls_options import server_tls, tls_server_options
from acp_proxy.store.schema import RecordingError
from acp_proxy.transport.address import check_listen

LISTEN_HELP = "Address to serve on; anything but loopback needs --token."
TOKEN_HELP = "Require this token on every request (?token=... once in the browser, then a cookie)."


@click.command("web")
@click.argument("recording_path", type=RECORDING_PATH, metavar="DB")
@click.option(
    "--listen",
    default="127.0.0.1:8080",
    show_default=True,
    callback=parse_listen_option,
    metavar="HOST:PORT",
    help=LISTEN_HELP + " Port 0 picks a free port.",
)
@click.option("--token", envvar="ACP_PROXY_WEB_TOKEN", show_envvar=True, help=TOKEN_HELP)
@metrics_options
@tls_server_options
def web_command(
    recording_path: Path,
    listen: tuple[str, int],
    token: str | None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    metrics: tuple[str, int] | None = None,
    metrics_token: str | None = None,
) -> None:
    """Open a browser inspector on a recording: sessions, frames, findings, live.

    The inspector reads the file read-only, so it can watch a recording that proxies are
    still writing: new frames appear without reload.

    \b
    Examples:
      acp-proxy web session.db                      # http://127.0.0.1:8080/
      acp-proxy web session.db --listen 127.0.0.1:0 # any free port
      acp-proxy web session.db --listen 0.0.0.0:8080 --token "$(openssl rand -hex 16)"
    """
    from acp_proxy.web import server, store  # aiohttp is imported only for this command

    host, port = listen
    try:
        check_listen(host, token)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    tls = server_tls(tls_cert, tls_key)
    check_metrics_option(metrics, metrics_token)
    try:
        store.open_checked(recording_path)  # a damaged file: the one line `ls` gives, exit 1
    except RecordingError as exc:
        raise click.ClickException(str(exc)) from None

    def ready(url: str) -> None:
        click.echo(f"acp-proxy: inspector for {recording_path} on {url} (Ctrl-C to stop)")

    exporter = start_metrics_option(metrics, metrics_token, None, tls=tls)
    try:
        with serving(host, port):
            server.serve_forever(recording_path, host, port, token=token, on_ready=ready, tls=tls)
    finally:
        if exporter is not None:
            exporter.stop()
