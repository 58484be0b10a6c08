"""Analyses of one recorded connection: stats and reindex, for the CLI and the inspector.

:func:`collect_stats` feeds :class:`~acp_proxy.acp.stats.StatsAccumulator` (``acp-proxy
stats``) and :func:`reindex_connection` re-derives index columns with
:class:`~acp_proxy.acp.index.ConnectionIndexer` (``acp-proxy reindex``); the check
(:class:`ConnectionCheck`, :func:`check_connection`) lives in :mod:`acp_proxy.analysis.check`
and is imported here too. Frames are read through
:class:`~acp_proxy.store.reader.RecordingReader` and written through
:mod:`acp_proxy.store.edit`; nothing here holds a whole connection in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp_proxy.acp.index import ConnectionIndexer
from acp_proxy.acp.stats import StatsAccumulator
from acp_proxy.analysis.aggregates import aggregates, merged_counts, merged_stats
from acp_proxy.analysis.check import ConnectionCheck, ConnectionReport, check_connection
from acp_proxy.store.connection_aggregates import forget_aggregates
from acp_proxy.store.edit import (
    WritableDatabase,
    update_connection_facts,
    update_index_columns,
    write_transaction,
)
from acp_proxy.store.reader import RecordingReader
from acp_proxy.wire.jsonrpc import parse_json

__all__ = [
    "ConnectionCheck",
    "ConnectionReport",
    "check_connection",
    "collect_stats",
    "reindex_connection",
]

REINDEX_BATCH = 5000
"""Frames read and rewritten per ``reindex`` transaction."""


def collect_stats(
    reader: RecordingReader,
    connection_id: int | None = None,
    *,
    location: str | Path | None = None,
    write: bool = True,
) -> dict[str, Any]:
    """All statistics of a recording (or one connection) as plain data (``stats --json``).

    With the recording's ``location``, from each connection's aggregate
    (:mod:`acp_proxy.analysis.aggregates`: kept for ended connections, so only the live
    ones' frames are read; ``write``: what is derived may be stored in the recording).
    Without, from the frames: counts and bytes aggregated by the
    reader; latencies and turns from one streamed pass that parses only the frames the
    accumulator needs (``stats --recount``). Both give the same numbers.
    """
    ids = None if connection_id is None else [connection_id]
    connections = len(ids) if ids is not None else len(reader.connection_ids())  # as ls counts
    if location is not None:
        return _stats_of_aggregates(reader, connection_id, location, connections, write)
    frames, size, _with_frames = reader.totals(ids)
    methods = reader.method_counts(ids)
    updates = reader.update_counts(ids)
    acc = StatsAccumulator()
    for f in reader.indexed_frames(connection_id):
        payload = parse_json(f.raw)[0] if f.raw else None
        acc.feed(f, payload)
    acc.finish()
    return _stats_json(frames, size, connections, methods, updates, acc.to_json())


def _stats_of_aggregates(
    reader: RecordingReader,
    connection_id: int | None,
    location: str | Path,
    connections: int,
    write: bool,
) -> dict[str, Any]:
    if connection_id is None:
        rows = reader.connections(sizes=False, counts=False)
    else:
        rows = [reader.connection(connection_id, sizes=False)]
    aggs = list(aggregates(location, reader, rows, "stats", write=write).values())
    methods, updates = merged_counts(aggs)
    frames = sum(a.frames for a in aggs)
    size = sum(a.bytes for a in aggs)
    return _stats_json(frames, size, connections, methods, updates, merged_stats(aggs))


def _stats_json(
    frames: int,
    size: int,
    connections: int,
    methods: list[dict[str, Any]],
    updates: list[dict[str, Any]],
    derived: dict[str, Any],
) -> dict[str, Any]:
    latency = {(x["method"], x["direction"]): x for x in derived["latency"]}
    for m in methods:
        lat = latency.get((m["method"], m["direction"]))
        if lat is not None:
            m.update({k: v for k, v in lat.items() if k not in ("method", "direction")})
    sessions = derived["sessions"]  # by lineage, with their frames and bytes
    return {
        "frames": frames,
        "bytes": size,
        "connections": connections,
        "sessions": sessions,
        "methods": methods,
        "updates": updates,
    }


def reindex_connection(
    reader: RecordingReader,
    db: WritableDatabase,
    connection_id: int,
    progress: Callable[[int], None] | None = None,
) -> tuple[int, int]:
    """Re-derive one connection's index columns from its raw bytes; (frames seen, rows changed).

    ``reader`` reads and ``db`` (opened for writing) takes the changes, a batch of
    :data:`REINDEX_BATCH` frames per transaction, only rows whose columns changed, so proxies
    may keep recording into the same file. ``progress`` is called with the frames seen.
    """
    indexer = ConnectionIndexer()
    last_seq = 0
    seen = changed = 0
    while True:
        batch = list(
            reader.frames(connection_id=connection_id, after_seq=last_seq, limit=REINDEX_BATCH)
        )
        if not batch:
            break
        updates: list[tuple[Any, ...]] = []
        patches: list[tuple[str | None, str | None, int]] = []
        for f in batch:
            new = indexer.values(f.direction, f.raw, None, f.id)
            old = (f.kind, f.rpc_id, f.method, f.session_id, f.update_kind, f.entity_type)
            if new != (*old, f.entity_id):
                updates.append((*new, f.id))
            if indexer.paired_early:
                # responses recorded before their request, answered now: patch their rows
                patches.extend((m, sid, ref) for ref, m, sid in indexer.paired_early)
                indexer.paired_early.clear()
            last_seq = f.seq
        seen += len(batch)
        update_index_columns(db, updates, patches)
        changed += len(updates) + len(patches)
        if progress is not None:
            progress(seen)
    if indexer.facts.changed:
        update_connection_facts(db, connection_id, indexer.facts)
    if changed or indexer.facts.changed:
        with write_transaction(db):
            forget_aggregates(db, [connection_id])  # derived from the old columns
    return seen, changed
