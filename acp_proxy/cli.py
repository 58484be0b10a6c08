"""The ``acp-proxy`` command line: a thin click group over the library.

``acp-proxy [OPTIONS] -- AGENT...`` (no subcommand) runs the stdio proxy; everything else
is a subcommand. Each command family lives in :mod:`acp_proxy.commands`.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Sequence
from typing import Any

import click

from acp_proxy import __version__
from acp_proxy.commands.check import check_command
from acp_proxy.commands.demo import demo_command
from acp_proxy.commands.inspect import dump_command, ls_command
from acp_proxy.commands.proxy import proxy_command
from acp_proxy.commands.reindex import reindex_command
from acp_proxy.commands.replay import replay_command
from acp_proxy.commands.show import show_command
from acp_proxy.commands.stats import stats_command
from acp_proxy.commands.transfer import export_command, import_command
from acp_proxy.commands.web import web_command
from acp_proxy.commands.ws import connect_command, ws_command


class ProxyByDefaultGroup(click.Group):
    """A group whose default action is the proxy: ``acp-proxy --record x -- agent``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            if not args[0].startswith("-") and "--" not in args:
                close = difflib.get_close_matches(args[0], list(self.commands), n=1)
                if close:
                    raise click.UsageError(
                        f"no command {args[0]!r}; did you mean {close[0]!r}? (to run an agent "
                        "named like that: acp-proxy -- AGENT)"
                    )
            args = ["proxy", *args]
        return super().parse_args(ctx, args)


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


COMMANDS: list[click.Command] = [
    proxy_command,
    ls_command,
    dump_command,
    demo_command,
    web_command,
    export_command,
    import_command,
    ws_command,
    connect_command,
    show_command,
    replay_command,
    check_command,
    stats_command,
    reindex_command,
]
for _command in COMMANDS:
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry point."""
    return cli.main(args=list(argv) if argv is not None else sys.argv[1:], prog_name="acp-proxy")
