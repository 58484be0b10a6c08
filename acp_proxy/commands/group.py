"""The ``acp-proxy`` click group: a thin command line over the library.

``acp-proxy [OPTIONS] -- AGENT...`` (no subcommand) runs the stdio proxy; everything else
is a subcommand. Each command family lives in :mod:`acp_proxy.commands`; the console script
(:func:`acp_proxy.cli.main`) hands a command line here unless it is the plain launch of the
stdio proxy (:mod:`acp_proxy.commands.stdio_launch`).
"""

from __future__ import annotations

import importlib
import shutil
import sys
from typing import Any

import click

from acp_proxy import __version__
from acp_proxy.commands import LAZY_COMMANDS
from acp_proxy.console import quiet_closed_stdout


class UsageLine(click.ClickException):
    """A usage mistake as one line on stderr, exit 2, in one style for every command:
    ``acp-proxy CMD: what is wrong (see acp-proxy CMD --help)``.

    (click's own :class:`click.UsageError` prints the usage, a help hint, a blank line and
    ``Error: ...``; the commands' :class:`~acp_proxy.commands.common.OptionConflict` and
    ``BadParameter`` are turned into this as well.)
    """

    exit_code = 2

    def __init__(self, message: str, command_path: str) -> None:
        super().__init__(message)
        self.command_path = command_path

    def show(self, file: Any = None) -> None:
        line = f"{self.command_path}: {self.format_message()} (see {self.command_path} --help)"
        click.echo(line, err=True)


def _usage_line(exc: click.ClickException, ctx: click.Context | None) -> UsageLine:
    where = getattr(exc, "ctx", None) or ctx
    path = where.command_path if where is not None else "acp-proxy"
    if getattr(exc, "ctx", None) is None and ctx is not None and ctx.invoked_subcommand:
        path = f"{ctx.command_path} {ctx.invoked_subcommand}"  # raised by the command itself
    message = exc.format_message().rstrip(".")
    if message[1:2].islower():  # click's "No such option" / "Missing argument": lower case
        message = message[:1].lower() + message[1:]
    return UsageLine(message, path)


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
        except click.ClickException as exc:
            if isinstance(exc, UsageLine) or exc.exit_code != 2:
                raise
            raise _usage_line(exc, ctx) from None

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """The group's own context; a usage mistake at this level reads as one line too."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _usage_line(exc, None) from None

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
                f"acp-proxy: running the {named!r} subcommand (for the program: acp-proxy -- "
                f"{named} ...)",
                err=True,
            )
        if args and args[0] not in LAZY_COMMANDS and args[0] not in ("--help", "-h", "--version"):
            if not args[0].startswith("-") and "--" not in args:
                import difflib  # a mistake only

                close = difflib.get_close_matches(args[0], list(LAZY_COMMANDS), n=1)
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
