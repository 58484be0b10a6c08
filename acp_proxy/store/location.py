"""Where a recording is: a SQLite file or a ``postgresql://`` URL, named without a password.

The part of the store a forwarding process needs before its first byte: telling a URL from
a path, showing either without its password, and whether the engine it names is installed.
It imports neither ``sqlite3`` nor psycopg (nor the schema): starting the stdio proxy, which
an editor does for every agent session, pays for the database only in the writer process
(``tests/recorder/test_import_budget.py`` keeps it so). :mod:`acp_proxy.store.engine` and
:mod:`acp_proxy.store.pg` re-export these names.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

PG_SCHEMES = ("postgresql://", "postgres://")

NO_PSYCOPG = "recording into PostgreSQL needs psycopg: pip install 'acp-proxy[postgres]'"
"""What a bare install (no ``postgres`` extra) is told for a ``postgresql://`` URL."""


def is_pg_url(location: object) -> bool:
    """Whether ``location`` names a PostgreSQL database (else it is a SQLite file path)."""
    return isinstance(location, str) and location.startswith(PG_SCHEMES)


def safe_url(url: str) -> str:
    """``url`` with its password (and any ``password=`` query parameter) removed, for display."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://…"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, hostport = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hostport}" if user else hostport
    query = "&".join(
        q for q in parts.query.split("&") if q and not q.lower().startswith("password=")
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def psycopg_installed() -> bool:
    """Whether psycopg can be found, without importing it (the forwarding process never does)."""
    try:
        return importlib.util.find_spec("psycopg") is not None
    except (ImportError, ValueError):
        return False


class RecordingUrl(str):
    """A ``postgresql://`` recording location as the commands carry it.

    Its text is the URL without its password (:func:`safe_url`), so printing it anywhere
    (``ls``'s empty line, a report's ``recording`` field, an error) never shows the
    password; :attr:`url` keeps the whole URL to connect with.
    """

    url: str

    def __new__(cls, url: str) -> RecordingUrl:
        self = super().__new__(cls, safe_url(url))
        self.url = url
        return self


def parse_location(value: str | Path) -> Path | RecordingUrl:
    """A recording location as given: a :class:`RecordingUrl` for a ``postgresql://`` URL,
    else a path."""
    if isinstance(value, RecordingUrl):
        return value
    if isinstance(value, str) and is_pg_url(value):
        return RecordingUrl(value)
    return Path(value)


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def unknown_scheme(value: str) -> str | None:
    """What is wrong with ``value`` when it is a URL of a scheme that names no store
    (``mysql://``, ``http://``...), else None. (A path never has ``://``; as a path the
    ``//`` would be collapsed into a "no such recording: mysql:/..." that misleads.)

    The URL itself is not repeated: it may hold a password.
    """
    match = _SCHEME.match(value)
    if match is None or is_pg_url(value):
        return None
    accepted = " or ".join(PG_SCHEMES)
    return f"unknown scheme {match.group(1)}://: a recording is a SQLite file or a {accepted} URL"


def database_url(location: str | os.PathLike[str]) -> str | None:
    """The whole URL (password included) to connect to when ``location`` names a
    PostgreSQL database (a :class:`RecordingUrl` or a ``postgresql://`` string), else None.

    ``str()`` of a :class:`RecordingUrl` has no password: whatever connects uses this.
    """
    if isinstance(location, RecordingUrl):
        return location.url
    return str(location) if is_pg_url(location) else None


def location_name(location: str | Path) -> str:
    """How a recording's location is shown: the path, or the URL without its password."""
    text = str(location)
    return safe_url(text) if is_pg_url(text) else text


class Place(NamedTuple):
    """What the forwarding process knows of a recording location before opening it."""

    label: str
    """The engine's name in messages and statistics (``SQLite``, ``PostgreSQL``)."""
    remote: bool
    """A server, reached over the network (no folder of its own; connecting may wait)."""
    shown: str
    """The location as messages name it (never a password)."""
    missing_driver: str | None
    """What a bare install lacks to record there (None: nothing)."""


def place_of(location: str | os.PathLike[str]) -> Place:
    """The :class:`Place` of a recording location, found without importing a database driver."""
    if database_url(location) is None:
        return Place("SQLite", False, str(location), None)
    return Place(
        "PostgreSQL",
        True,
        safe_url(str(location)),
        None if psycopg_installed() else NO_PSYCOPG,
    )
