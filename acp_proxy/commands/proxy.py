"""``acp-proxy [--record DB] -- AGENT...``: the stdio proxy an editor launches.

The click command, for every option; the plain launch (``[--record X] [--label L] -- AGENT``)
is read without click first (:mod:`acp_proxy.commands.stdio_launch`), and both run the proxy
with :func:`~acp_proxy.commands.stdio_launch.run_stdio_proxy`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from acp_proxy.commands.metrics_options import (
    check_metrics_option,
    live_check_for_writer,
    metrics_options,
    start_metrics_option,
)
from acp_proxy.commands.options import MIB, RECORD_PATH, grace_option, queue_option
from acp_proxy.commands.otlp_live import LiveExport, otlp_live_options
from acp_proxy.commands.redact_options import redact_options
from acp_proxy.commands.stdio_launch import RECORD_ENV, run_stdio_proxy
from acp_proxy.commands.tls_options import server_tls, tls_server_options
from acp_proxy.commands.ui import start_ui, ui_options

if TYPE_CHECKING:
    from acp_proxy.formats.redact import RedactRules
    from acp_proxy.recorder.handle import Recorder


@click.command(
    "proxy",
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": False},
)
@click.option(
    "--record",
    "record",
    type=RECORD_PATH,
    envvar=RECORD_ENV,
    show_envvar=True,
    help="SQLite file (created 0600 if missing; several proxies may share one) or "
    "postgresql:// URL to record into.",
)
@click.option("--label", help="A label stored on the connection row (e.g. the editor window).")
@grace_option(
    "Seconds the agent gets after its stdin closes before SIGTERM (and again before SIGKILL)."
)
@queue_option()
@otlp_live_options
@redact_options(stored=True)
@ui_options
@metrics_options
@tls_server_options
@click.argument("agent_command", nargs=-1, required=True, metavar="-- AGENT [ARGS]...")
def proxy_command(
    record: Path | str | None,
    label: str | None,
    grace: float,
    queue_mb: int,
    spool_mb: int,
    agent_command: tuple[str, ...],
    ui: tuple[str, int] | None = None,
    ui_token: str | None = None,
    otlp: LiveExport | None = None,
    redact: RedactRules | None = None,
    metrics: tuple[str, int] | None = None,
    metrics_token: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
) -> None:
    """Run AGENT behind a transparent, byte-exact stdio proxy, optionally recording.

    Launch this instead of the agent. Every byte passes through unchanged in both
    directions (and the agent's stderr to ours); with --record a copy goes to SQLite off
    the forwarding path. The proxy exits with the agent's exit code.

    \b
    Examples:
      acp-proxy --record session.db -- claude-code-acp
      ACP_PROXY_RECORD=session.db acp-proxy -- python my_agent.py --verbose
      acp-proxy ls session.db
    """
    check_metrics_option(metrics, metrics_token)
    tls = server_tls(tls_cert, tls_key)  # --tls-cert here: for --metrics
    inspector = start_ui(ui, ui_token, record)
    exporters: list[Any] = []

    @contextmanager
    def around_recorder() -> Iterator[None]:
        with (otlp or LiveExport()).for_writer(), live_check_for_writer(metrics):
            yield

    def with_recorder(recorder: Recorder) -> None:
        exporter = start_metrics_option(metrics, metrics_token, recorder, tls=tls, required=False)
        if exporter is not None:
            exporters.append(exporter)

    code = 1
    try:
        code = run_stdio_proxy(
            agent_command,
            record,
            label=label,
            grace=grace,
            queue_bytes=queue_mb * MIB,
            spool_bytes=spool_mb * MIB,
            redact=redact,
            around_recorder=around_recorder,
            with_recorder=with_recorder,
        )
    finally:
        if inspector is not None:
            inspector.stop()
        for exporter in exporters:
            exporter.stop()
    sys.exit(code)
