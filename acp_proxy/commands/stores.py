"""Writing into a recording argument, for ``import`` and ``copy``'s DST.

The arguments themselves are :data:`~acp_proxy.commands.common.RECORDING_PATH` (a file, or
a ``postgresql://`` URL as a :class:`~acp_proxy.store.engine.RecordingUrl`), read through
:func:`~acp_proxy.commands.common.recording`; what only a writer needs is here (kept apart
so the commands that only read do not import the search module this uses).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from acp_proxy.commands.common import reported
from acp_proxy.store.engine import Database, create_database, database_url, location_name
from acp_proxy.store.search import writable


@contextmanager
def open_destination(location: Path | str) -> Iterator[Database]:
    """A recording opened for writing (``import``, ``copy``'s DST): a missing file is
    created (and removed again if the block fails), an empty database gets acp-proxy's
    schema.
    """
    url = database_url(location)
    path = Path(location)
    created = url is None and not path.exists()
    if url is None and not created and not writable(path):
        raise click.ClickException(f"cannot write {path}: it (or its directory) is read-only")
    with reported(f"cannot write {location_name(location)}", name_recording_errors=False):
        db: Database = create_database(location)
    ok = False
    try:
        yield db
        ok = True
    finally:
        db.close()
        if not ok and created:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    Path(f"{path}{suffix}").unlink()


def same_store(a: Path | str, b: Path | str) -> bool:
    """Whether two recording arguments name the same recording (``copy`` refuses that)."""
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and location_name(a) == location_name(b)
    with contextlib.suppress(OSError):
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    return False
