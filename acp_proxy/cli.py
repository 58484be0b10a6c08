"""The ``acp-proxy`` command line: a thin click group over the library.

``acp-proxy [OPTIONS] -- AGENT...`` (no subcommand) runs the stdio proxy; everything else
is a subcommand. Each command family lives in :mod:`acp_proxy.commands`.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import os
import shutil
import sys
from collections.abc import Sequence
from typing import Any

import click

from acp_proxy import __version__
from acp_proxy.commands import LAZY_COMMANDS


class ProxyByDefaultGroup(click.Group):
    """Lazily loaded subcommands; the default action is the proxy (``acp-proxy -- AGENT``)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(LAZY_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = LAZY_COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; stdout's reader going away (``acp-proxy export DB | head``) ends
        it quietly, for every command alike, as ``git log | head`` does: no traceback, no
        "Exception ignored" at exit, exit code 1."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            quiet_closed_stdout()
            sys.exit(1)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        named = args[0] if args else ""
        if (
            named in LAZY_COMMANDS
            and named != "proxy"
            and sys.stderr.isatty()
            and shutil.which(named)
        ):
            # e.g. tail, diff, ls: the person may have meant the program of that name
            click.echo(
                f"acp-proxy: running the {named!r} subcommand (to run the program {named!r} "
                f"as the agent: acp-proxy [OPTIONS] -- {named} ...)",
                err=True,
            )
        if args and args[0] not in LAZY_COMMANDS and args[0] not in ("--help", "-h", "--version"):
            if not args[0].startswith("-") and "--" not in args:
                close = difflib.get_close_matches(args[0], list(LAZY_COMMANDS), n=1)
                if close:
                    raise click.UsageError(
                        f"no command {args[0]!r}; did you mean {close[0]!r}? (to run an agent "
                        "named like that: acp-proxy -- AGENT)"
                    )
            args = ["proxy", *args]
        return super().parse_args(ctx, args)


def quiet_closed_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what is buffered
    for the closed pipe meets nothing (and prints nothing)."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


@click.group(
    cls=ProxyByDefaultGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="acp-proxy")
def cli() -> None:
    """Transparent recording proxy, replay server and inspector for ACP agents.

    \b
    Put it between an editor and an agent:
      acp-proxy --record session.db -- AGENT [ARGS]...
    Then look at what happened:
      acp-proxy ls session.db
      acp-proxy dump session.db
    Try it without an agent of your own:
      acp-proxy demo

    The proxy forwards every byte unchanged; recording happens off the forwarding path.
    """


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry point."""
    return cli.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name="acp-proxy")
