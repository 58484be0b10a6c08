"""Helpers shared by the CLI commands: opening recordings with friendly errors, formatting."""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from acp_proxy.console import Terminal, pager
from acp_proxy.store.engine import (
    SQLITE,
    Database,
    RecordingUrl,
    database_errors,
    location_name,
    open_database,
    parse_location,
    unknown_scheme,
)
from acp_proxy.store.pg import describe_error
from acp_proxy.store.schema import RecordingError

if TYPE_CHECKING:
    from acp_proxy.acp.diff import SlowerLimit
    from acp_proxy.commands.options import Decorator
    from acp_proxy.recorder.handle import Recorder


class OptionConflict(click.UsageError):
    """Options that cannot go together: a usage mistake, one line and exit 2 as every usage
    error (:class:`acp_proxy.cli.UsageLine`), naming the command being parsed or run."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ctx=click.get_current_context(silent=True))


def _given_once(ctx: click.Context, param: click.Parameter, values: tuple[Any, ...]) -> Any:
    if len(values) > 1:
        name = max(param.opts, key=len)
        given = ", ".join(str(v) for v in values)
        raise OptionConflict(f"{name} takes one value; it was given {len(values)} ({given})")
    return values[0] if values else None


def single_option(*param_decls: str, **attrs: Any) -> Decorator:
    """A ``click.option`` taking one value that refuses to be repeated (a usage error, exit
    2) instead of silently keeping the last one: ``-c 1 -c 2`` is a mistake to report.
    """
    return click.option(*param_decls, multiple=True, callback=_given_once, **attrs)


class FilePath(click.ParamType):  # type: ignore[type-arg]
    """A path that must not be a directory; a directory is one ``Error:`` line and exit 1.

    With ``urls`` (the recording arguments) a ``postgresql://`` URL is taken as is, as a
    :class:`~acp_proxy.store.engine.RecordingUrl` (printed without its password).

    Every command that takes a recording (or an export file) uses it, so a directory given by
    mistake reads the same everywhere: ``Error: d is a directory, not a recording`` (click's
    own ``Path(dir_okay=False)`` prints a four-line usage error with exit 2 instead). Missing
    files are left to the command (a reader says "no such recording", a writer creates it).
    ``-`` is passed through when ``allow_dash`` (stdin).
    """

    name = "path"

    def __init__(
        self, what: str = "a recording", *, allow_dash: bool = False, urls: bool = False
    ) -> None:
        self.what = what
        self.allow_dash = allow_dash
        self.urls = urls

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Path:
        where = parse_location(value) if self.urls and isinstance(value, str) else None
        if isinstance(where, RecordingUrl):
            return where  # type: ignore[return-value]  # a Path for the commands
        wrong = unknown_scheme(str(value)) if self.urls else None
        if wrong is not None:
            raise click.ClickException(wrong)
        path = value if isinstance(value, Path) else Path(str(value))
        if self.allow_dash and str(value) == "-":
            return path
        try:
            is_dir = path.is_dir()
        except OSError as exc:  # a directory on the way that the user may not enter
            raise click.ClickException(f"cannot read {path}: {exc.strerror or exc}") from None
        if is_dir:
            raise click.ClickException(f"{path} is a directory, not {self.what}")
        return path


RECORDING_PATH = FilePath(urls=True)
"""The parameter type of every recording argument (``DB``: a file or a ``postgresql://`` URL)."""


RECORDING_ARG = click.argument("recording_path", type=RECORDING_PATH, metavar="DB")


def terminal_options(*, wide: bool = True, paged: bool = True) -> Decorator:
    """``--color``, ``--wide`` and ``--no-pager`` for a command that prints for a person; the
    command gets the :class:`~acp_proxy.console.Terminal` as ``terminal`` and runs with its
    output in a pager on a terminal (see :mod:`acp_proxy.console`).

    ``wide=False``: no ``--wide`` (output that has nothing to cut); ``paged=False``: no pager.
    """

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def run(*args: Any, color: str, no_pager: bool, **kwargs: Any) -> None:
            terminal = Terminal.for_stdout(color, kwargs.pop("wide", False))  # type: ignore[arg-type]
            click.get_current_context().color = terminal.colour  # click.echo keeps or strips
            with pager(paged and not no_pager):
                command(*args, terminal=terminal, **kwargs)

        run = click.option(
            "--color",
            "--colour",
            "color",
            type=click.Choice(["auto", "always", "never"]),
            default="auto",
            show_default=True,
            help="Colour: auto is on a terminal unless NO_COLOR is set.",
        )(run)
        if paged:
            run = click.option(
                "--no-pager", is_flag=True, help="Print straight to the terminal, no pager."
            )(run)
        else:
            run = click.option("--no-pager", is_flag=True, hidden=True)(run)
        if wide:
            run = click.option(
                "--wide",
                is_flag=True,
                help="Print whole lines (cut to the terminal's width otherwise; whole when piped).",
            )(run)
        return run

    return decorate


@contextmanager
def serving(host: str, port: int) -> Iterator[None]:
    """Around a server that runs until Ctrl-C: a port it cannot listen on is one line, exit 1;
    Ctrl-C ends it quietly."""
    try:
        yield
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    except KeyboardInterrupt:
        pass


def run_stdio_bridge(bridge: Coroutine[Any, Any, int], recorder: Recorder) -> NoReturn:
    """Run a ``connect`` stdio bridge to its exit code (130 on Ctrl-C), close the recording,
    and exit with that code.
    """
    import asyncio  # (here: commands that only read a recording need no asyncio)

    code = 1
    try:
        code = asyncio.run(bridge)
    except KeyboardInterrupt:
        code = 130
    finally:
        recorder.close()
    sys.exit(code)


DAMAGED = "the recording is damaged"
"""What a SQLite error while reading a recording means (:func:`reported`'s ``database``)."""


@contextmanager
def reported(
    prefix: str, *, database: str | None = None, name_recording_errors: bool = True
) -> Iterator[None]:
    """Errors of the block as one ``Error: PREFIX: ...`` line (exit 1): a
    :class:`RecordingError` (without the prefix unless ``name_recording_errors``: its text
    names the place already), SQLite's errors (after ``database``, e.g. :data:`DAMAGED`,
    when given) and PostgreSQL's (a lost server, a refused write; never a password).
    """
    try:
        yield
    except RecordingError as exc:
        raise click.ClickException(
            f"{prefix}: {exc}" if name_recording_errors else str(exc)
        ) from None
    except SQLITE.damaged_errors as exc:
        note = f"{database}: " if database else ""
        raise click.ClickException(f"{prefix}: {note}{exc}") from None
    except database_errors() as exc:  # PostgreSQL: the server went away, a query failed
        raise click.ClickException(f"{prefix}: {describe_error(exc)}") from None


@contextmanager
def recording(path: Path | str, *, writable: bool = False) -> Iterator[Database]:
    """Open a recording (a file or a ``postgresql://`` URL) for a command; user mistakes
    become one-line errors (exit 1), the URL shown without its password.

    ``writable``: opened for writing (an old schema migrated), as ``reindex`` needs.
    """
    with reported(location_name(path), name_recording_errors=False):
        db = open_database(path, writable=writable)
    try:
        with reported(location_name(path), database=DAMAGED, name_recording_errors=False):
            yield db
    finally:
        db.close()


def fmt_duration(seconds: float | None) -> str:
    """A duration: ``850ms``, ``12.3s``, ``4m05s``; ``-`` for None or a nonsense value."""
    if seconds is None:
        return "-"
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        return "?"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 120:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{n}B"


def fmt_exit(status: object) -> str:
    """An agent's exit status: ``0``, ``signal 9``, ``-`` (unknown or not a number)."""
    if not isinstance(status, int) or isinstance(status, bool):
        return "-"
    if status < 0:
        return f"signal {-status}"
    return str(status)


PROGRESS_STEP = 5000
"""The fewest frames between two progress lines."""


class Progress:
    """Progress lines on stderr for long work on many frames (a rewritten line on a terminal).

    ``reindex``, ``copy`` and ``search`` (its first index of a big recording). Nothing for
    under twice :data:`PROGRESS_STEP` frames, or with ``quiet``.
    """

    def __init__(self, total: int, quiet: bool, name: str = "reindex", verb: str = "") -> None:
        self.name = f"{name}: {verb}" if verb else f"{name}:"
        self.total = total
        self.enabled = not quiet and total >= 2 * PROGRESS_STEP
        self.tty = sys.stderr.isatty()
        self.step = max(PROGRESS_STEP, total // 20)
        self.next = self.step

    def update(self, done: int) -> None:
        if not self.enabled or done < self.next:
            return
        self.next = done + self.step
        text = f"acp-proxy {self.name} {done}/{self.total} frames ({100 * done // self.total}%)"
        sys.stderr.write(("\r" + text) if self.tty else text + "\n")
        sys.stderr.flush()

    def after(self, done: int) -> Callable[[int], None]:
        """A progress callback for a part that starts after ``done`` frames."""
        return lambda seen: self.update(done + seen)

    def end(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def ignore_paths(texts: Iterable[str]) -> list[tuple[str, ...]]:
    """The ``--ignore`` paths parsed (:func:`acp_proxy.acp.jsonpaths.parse_path`); a bad one is
    a usage error naming the option."""
    from acp_proxy.acp.jsonpaths import parse_path  # (only the commands that compare)

    try:
        return [parse_path(p) for p in texts]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--ignore") from None


def slower_limit(text: str | None) -> SlowerLimit | None:
    """``--fail-slower`` parsed (None when not given); a bad one is a usage error naming it."""
    from acp_proxy.acp.diff import SlowerLimit  # (only the commands that compare)

    try:
        return None if text is None else SlowerLimit.parse(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--fail-slower") from None
