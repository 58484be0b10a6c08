"""Recording arguments that name a SQLite file or a PostgreSQL URL, and opening them.

``copy``, ``export``, ``import`` and ``search`` take either kind of store: :data:`STORE`
is their click parameter type (a URL is kept as a string, a file must not be a directory),
:func:`open_source` opens one for reading and :func:`open_destination` for writing (a file
is created, an empty database migrated). Every failure is one ``Error:`` line; a URL is
only ever shown through :func:`~acp_proxy.record.pg.safe_url`.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from acp_proxy.commands.common import FilePath
from acp_proxy.record.export import Store
from acp_proxy.record.pg import connect_pg, describe_error, is_pg_url, safe_url
from acp_proxy.record.schema import RecordingError, connect
from acp_proxy.record.search import writable

Location = Path | str
"""A store: a SQLite file path, or a PostgreSQL URL (a ``str``)."""


class StoreLocation(click.ParamType):  # type: ignore[type-arg]
    """A recording argument: ``postgresql://...`` as given, anything else a file path."""

    name = "store"

    def __init__(self, what: str = "a recording") -> None:
        self.files = FilePath(what)

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Location:
        if is_pg_url(value):
            return str(value)
        return self.files.convert(value, param, ctx)


STORE = StoreLocation()


def describe(location: Location) -> str:
    """How a store is named in messages (a URL without its password)."""
    return safe_url(location) if isinstance(location, str) else str(location)


def same_store(a: Location, b: Location) -> bool:
    """Whether two locations name the same recording."""
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and safe_url(a) == safe_url(b)
    with contextlib.suppress(OSError):
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    return False


@contextmanager
def open_source(location: Location) -> Iterator[Store]:
    """A recording opened read-only (nothing is migrated or written)."""
    try:
        if isinstance(location, str):
            db: Store = connect_pg(location, create=False, readonly=True)
        else:
            db = connect(location, create=False, readonly=True)
    except RecordingError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        yield db
    finally:
        db.close()


@contextmanager
def open_destination(location: Location) -> Iterator[Store]:
    """A recording opened for writing: a missing file is created (and removed again if the
    block fails), an empty database gets acp-proxy's schema.
    """
    created = isinstance(location, Path) and not location.exists()
    if isinstance(location, Path) and not created and not writable(location):
        raise click.ClickException(f"cannot write {location}: it (or its directory) is read-only")
    try:
        if isinstance(location, str):
            db: Store = connect_pg(location, create=True)
        else:
            db = connect(location, create=True)
    except RecordingError as exc:
        raise click.ClickException(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise click.ClickException(f"cannot write {location}: {exc}") from None
    ok = False
    try:
        yield db
        ok = True
    finally:
        db.close()
        if not ok and created:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    Path(f"{location}{suffix}").unlink()


@contextmanager
def reported(prefix: str, *, database: str | None = None) -> Iterator[None]:
    """Errors of the block as one ``Error: PREFIX: ...`` line (exit 1): a
    :class:`RecordingError`, SQLite's errors (after ``database``, e.g. "the recording is
    damaged", when given) and psycopg's (a lost server, a refused write; no password).
    """
    try:
        yield
    except RecordingError as exc:
        raise click.ClickException(f"{prefix}: {exc}") from None
    except sqlite3.DatabaseError as exc:
        note = f"{database}: " if database else ""
        raise click.ClickException(f"{prefix}: {note}{exc}") from None
    except Exception as exc:
        if type(exc).__module__.split(".")[0] != "psycopg":
            raise
        raise click.ClickException(f"{prefix}: {describe_error(exc)}") from None
