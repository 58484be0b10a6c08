"""The options of the proxy commands, kept light: the stdio proxy imports this at start.

``--record``, ``--queue-mb``/``--spool-mb``, ``--grace`` and ``HOST:PORT`` options. What an
editor launching ``acp-proxy --record ... -- AGENT`` waits for is the agent's first answer, so
this module imports no database driver, no store and no asyncio
(``tests/recorder/test_import_budget.py``). The other commands import their options from
here as well (:mod:`acp_proxy.commands.common` does not import this module: ``check`` and the
other readers of a recording need no recorder).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from acp_proxy.commands.stdio_launch import record_location
from acp_proxy.recorder.handle import DEFAULT_QUEUE_BYTES, DEFAULT_SPOOL_BYTES
from acp_proxy.transport.process.agent import DEFAULT_GRACE_SECONDS


def parse_listen_option(
    ctx: click.Context | None, param: click.Parameter | None, value: str | None
) -> tuple[str, int] | None:
    """Click callback for ``--listen``/``--ui``: ``HOST:PORT`` -> (host, port)."""
    if value is None:
        return None
    try:
        from acp_proxy.transport.address import parse_listen

        return parse_listen(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


MIB = 1024 * 1024

Decorator = Callable[[Callable[..., None]], Callable[..., None]]
"""A click option decorator for a command function."""


def queue_option(default_mb: int = DEFAULT_QUEUE_BYTES // MIB) -> Decorator:
    """``--queue-mb`` and ``--spool-mb``: the recorder's backlog budgets, in memory and on disk.

    (A server of many connections wants a bigger in-memory budget.)
    """
    queue = click.option(
        "--queue-mb",
        type=click.IntRange(min=1),
        default=default_mb,
        show_default=True,
        help="MiB of frames the recorder may hold in memory while SQLite is behind; beyond "
        "it they go to the spool file.",
    )
    spool = click.option(
        "--spool-mb",
        type=click.IntRange(min=0),
        default=DEFAULT_SPOOL_BYTES // MIB,
        show_default=True,
        help="MiB the recorder may spool to an anonymous temporary file beside the recording "
        "when its memory budget is full; beyond it frames are dropped (and counted). "
        "0: never spool. Forwarding never waits for the recorder.",
    )

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        return queue(spool(command))

    return decorate


def grace_option(help: str) -> Decorator:
    """``--grace SECONDS`` (the same type and default for every command; its own help)."""
    return click.option(
        "--grace",
        type=click.FloatRange(min=0),
        default=DEFAULT_GRACE_SECONDS,
        show_default=True,
        help=help,
    )


class RecordLocation(click.ParamType):  # type: ignore[type-arg]
    """A place to record into: a SQLite file (a ``Path``) or a ``postgresql://`` URL (as given)."""

    name = "path|url"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Path | str | None:
        # forwarding wins: an unknown scheme is said once, and the agent runs unrecorded
        return record_location(value if isinstance(value, Path) else str(value))


RECORD_PATH = RecordLocation()
"""The type of ``--record FILE|URL`` (the proxy commands, ``ACP_PROXY_RECORD``).

Deliberately unchecked here: for the proxy forwarding wins, so a URL of an unknown scheme
(``mysql://``) and every unusable ``--record`` path (a directory, a missing parent, an
unwritable or corrupt file, a database that refuses the login) is one ``recording
disabled: ...; forwarding continues`` line from the recorder, and the agent runs anyway.
"""
