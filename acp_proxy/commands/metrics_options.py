"""``--metrics HOST:PORT`` and ``--metrics-token``: the options of every long-running command.

The click side of :mod:`acp_proxy.transport.metrics`. Use :func:`metrics_options` as a
decorator (the command gets ``metrics`` and ``metrics_token``), start the recorder inside
:func:`live_check_for_writer` (its writer then checks the protocol live, for
``acp_proxy_findings_total``) and call :func:`start_metrics_option` once the recorder
exists. The server's address is printed on stderr (stdout may be the ACP channel). TLS:
the command's ``--tls-cert/--tls-key``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import click

from acp_proxy.commands.options import parse_listen_option
from acp_proxy.console import warn
from acp_proxy.recorder.writer.switches import LIVE_CHECK_ENV

if TYPE_CHECKING:
    import ssl

    from acp_proxy.transport.metrics import MetricsHandle

F = TypeVar("F", bound=Callable[..., Any])


def metrics_options(func: F) -> F:
    """Add ``--metrics HOST:PORT`` and ``--metrics-token`` to a command."""
    func = click.option(
        "--metrics-token",
        envvar="ACP_PROXY_METRICS_TOKEN",
        show_envvar=True,
        help="Token --metrics requires (Authorization: Bearer or ?token=); mandatory when "
        "--metrics is not loopback.",
    )(func)
    return click.option(
        "--metrics",
        callback=parse_listen_option,
        metavar="HOST:PORT",
        help="Serve /metrics (Prometheus), /healthz and /readyz on HOST:PORT "
        "(e.g. 127.0.0.1:9464; port 0 picks a free one). With --record, the writer "
        "also checks the protocol live (acp_proxy_findings_total; off with "
        "ACP_PROXY_LIVE_CHECK=0).",
    )(func)


def check_metrics_option(metrics: tuple[str, int] | None, token: str | None) -> None:
    """A non-loopback ``--metrics`` without a token is a usage error (said before starting)."""
    if metrics is None:
        return
    from acp_proxy.transport.address import check_listen

    try:
        check_listen(metrics[0], token, what="the metrics server")
    except ValueError as exc:
        raise click.UsageError(
            str(exc).replace("--token", "--metrics-token").split(";")[0]
        ) from None


@contextlib.contextmanager
def live_check_for_writer(metrics: tuple[str, int] | None) -> Iterator[None]:
    """Around starting the recorder: with ``--metrics``, its writer checks every connection
    live (unless ``ACP_PROXY_LIVE_CHECK=0`` says not to). The variable is restored after, so
    the agent started later does not inherit it."""
    saved = os.environ.get(LIVE_CHECK_ENV)
    if metrics is not None and saved != "0":
        os.environ[LIVE_CHECK_ENV] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(LIVE_CHECK_ENV, None)
        else:
            os.environ[LIVE_CHECK_ENV] = saved


def start_metrics_option(
    metrics: tuple[str, int] | None,
    token: str | None,
    recorder: Any,
    *,
    tls: ssl.SSLContext | None = None,
    required: bool = True,
) -> MetricsHandle | None:
    """Start the metrics server if ``--metrics`` was given; say where on stderr.

    A port that cannot be bound is one ``Error:`` line (exit 1) for a server command; with
    ``required=False`` (the stdio proxy, which an editor may start several of with the same
    options) it only warns and forwarding goes on.
    """
    if metrics is None:
        return None
    check_metrics_option(metrics, token)
    host, port = metrics
    from acp_proxy.transport.metrics import start_metrics  # prometheus_client when asked for

    try:
        handle = start_metrics(host, port, recorder, token=token, tls=tls)
    except OSError as exc:
        message = f"cannot serve --metrics on {host}:{port}: {exc.strerror or exc}"
        if required:
            raise click.ClickException(message) from None
        warn(f"metrics not served: {message}; proxying anyway")
        return None
    warn(f"metrics on {handle.url}")
    return handle
