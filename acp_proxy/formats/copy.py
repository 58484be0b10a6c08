"""Copying a recording (or some of its connections) into another store, byte-exact.

An unredacted JSONL export streamed straight into the importer: no file, memory flat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from acp_proxy.formats.jsonl import ExportSummary, ImportSummary, iter_export
from acp_proxy.formats.jsonl_import import import_stream
from acp_proxy.store.engine import (
    Database,
    one_row,
)
from acp_proxy.store.schema import RecordingError


def select_connections(
    db: Database, connection_ids: Sequence[int] = (), session_id: str | None = None
) -> list[int] | None:
    """The connections a copy of part of ``db`` takes (None: all of them, and the
    recording-wide events); :class:`RecordingError` naming what is not in ``db``.

    ``session_id`` picks every connection that carries frames of that session (whole: its
    ``initialize`` and everything else, so the copy replays); with ``connection_ids`` too,
    only those of them that carry it.
    """
    if not connection_ids and session_id is None:
        return None
    chosen: list[int] = []
    if connection_ids:
        wanted = sorted(set(connection_ids))
        marks = ", ".join("?" for _ in wanted)
        found = {
            int(r[0])
            for r in db.execute(f"SELECT id FROM connections WHERE id IN ({marks})", wanted)
        }
        missing = [c for c in wanted if c not in found]
        if missing:
            raise RecordingError(f"no connection {missing[0]} in this recording")
        chosen = wanted
    if session_id is not None:
        having = [
            int(r[0])
            for r in db.execute(
                "SELECT DISTINCT connection_id FROM frames WHERE session_id = ? "
                "ORDER BY connection_id",
                (session_id,),
            )
        ]
        if not having:
            raise RecordingError(f"no session {session_id!r} in this recording")
        if connection_ids:
            having = [c for c in having if c in set(chosen)]
            if not having:
                raise RecordingError(f"session {session_id!r} is not in the connection(s) given")
        chosen = having
    return chosen


def count_frames(db: Database, connection_ids: Sequence[int] | None = None) -> int:
    """How many frames ``db`` holds (in those connections)."""
    if connection_ids is None:
        return int(one_row(db, "SELECT count(*) FROM frames")[0])
    marks = ", ".join("?" for _ in connection_ids) or "NULL"
    sql = f"SELECT count(*) FROM frames WHERE connection_id IN ({marks})"
    return int(one_row(db, sql, list(connection_ids))[0])


def copy_recording(
    source: Database,
    destination: Database,
    *,
    connection_ids: Sequence[int] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Copy the recording ``source`` (those connections) into ``destination``, byte-exact.

    An unredacted export of ``source`` streamed straight into :func:`import_stream` (no
    file, memory flat): raw bytes, seqs, times, stderr lines, events and connection columns
    are kept; connections get new ids in ``destination`` (the mapping is in the summary);
    one already there (the same :func:`connection_digest`) is skipped, so copying twice does
    not duplicate. ``progress`` is called with the number of frames read so far.
    """
    read = ExportSummary()
    lines = iter_export(source, connection_ids=connection_ids, redact=False, summary=read)
    if progress is not None:
        lines = _reporting(lines, read, progress)
    return import_stream(lines, destination, skip_duplicates=True)


def _reporting(
    lines: Iterator[bytes], read: ExportSummary, progress: Callable[[int], None]
) -> Iterator[bytes]:
    for n, line in enumerate(lines):
        if not n % 1000:
            progress(read.frames)
        yield line
    progress(read.frames)
