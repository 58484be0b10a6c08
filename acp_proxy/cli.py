"""The ``acp-proxy`` console script: the plain stdio proxy launch first, click for the rest.

``acp-proxy [--record X] [--label L] -- AGENT...``, what an editor runs for every agent
session, starts the agent without importing click (:mod:`acp_proxy.commands.stdio_launch`);
every other command line goes, unchanged, to the click group
(:mod:`acp_proxy.commands.group`, also reachable here as ``cli``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

ABORTED = "\nAborted!\n"
"""What click says on stderr when a command is interrupted (exit code 1)."""


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry point."""
    args = list(argv) if argv is not None else sys.argv[1:]
    from acp_proxy.commands.stdio_launch import launch

    try:
        code = launch(args)
    except (EOFError, KeyboardInterrupt):  # as click's main has it
        sys.stderr.write(ABORTED)
        sys.exit(1)
    except BrokenPipeError:  # as the click group has it
        from acp_proxy.console import quiet_closed_stdout

        quiet_closed_stdout()
        sys.exit(1)
    if code is not None:
        sys.exit(code)
    from acp_proxy.commands.group import cli

    return cli.main(args=args, prog_name="acp-proxy")


def __getattr__(name: str) -> Any:
    """``cli``, ``UsageLine``, ``ProxyByDefaultGroup``: the click group's, imported when asked
    for (importing this module must not import click)."""
    if name in ("cli", "UsageLine", "ProxyByDefaultGroup"):
        from acp_proxy.commands import group

        return getattr(group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
