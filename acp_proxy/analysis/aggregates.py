"""Per-connection aggregates: what ``ls``, ``stats`` and the inspector's list count, derived
once per ended connection and kept.

A connection's :class:`Aggregate` holds its frame and byte totals (``ls``), its counts by
method, update variant and session (the inspector's list and filters; ``stats``' tables)
and its :class:`~acp_proxy.acp.stats.ConnectionPart` (``stats``' latencies and turns, which
need one pass over its frames). Each level is derived when first asked for. A connection
that has ended (``ended_at`` set: the recorder writes it after the last frame, an import
writes a connection in one transaction) keeps its aggregate, stored in the recording
(:mod:`acp_proxy.store.connection_aggregates`) and in this process, under a key made of its start,
its end and its last sequence number; a connection still being recorded is counted afresh
from its own frames at every call. So a big store is read once, and then only its live
connections' frames are. ``reindex`` forgets the aggregates of the connections it rewrites;
``--recount`` (:func:`aggregates` with ``use_stored=False``) ignores every kept one.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from acp_proxy.acp.stats import ConnectionPart, StatsAccumulator
from acp_proxy.store.aggregates import method_count_order, update_count_order
from acp_proxy.store.connection_aggregates import (
    StoredAggregate,
    frame_totals,
    last_seqs,
    read_aggregates,
    write_aggregates,
)
from acp_proxy.store.engine import location_name
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.rows import ConnectionRow, SessionSpan
from acp_proxy.wire.jsonrpc import parse_json

Level = Literal["size", "counts", "stats"]
"""How much of an aggregate a caller needs: totals; plus counts; plus the stats part."""

_LEVELS: dict[str, int] = {"size": 0, "counts": 1, "stats": 2}

_FORMAT = 1
"""Bumped when what :class:`Aggregate` stores changes (older rows are derived again)."""


def _span_json(s: SessionSpan) -> list[Any]:
    return [s.session_id, s.frame_count, s.first_seq, s.last_seq, s.started_at, s.last_frame_at]


@dataclass(frozen=True, slots=True)
class Counts:
    """One connection's frames counted by method, variant and session (all SQL aggregates)."""

    methods: list[dict[str, Any]]
    """``stats``' rows: per (method, request direction): requests, ..., frames, bytes."""
    updates: list[dict[str, Any]]
    """``session/update`` variants: variant, count, bytes."""
    kinds: list[tuple[str | None, str | None, int]]
    """Frames per (method column, update variant), the inspector's filters."""
    spans: list[SessionSpan]
    """Each session on the connection with its frame count and first and last frame."""

    def to_json(self) -> dict[str, Any]:
        return {
            "methods": self.methods,
            "updates": self.updates,
            "kinds": [list(k) for k in self.kinds],
            "spans": [_span_json(s) for s in self.spans],
        }

    @classmethod
    def from_json(cls, connection_id: int, data: dict[str, Any]) -> Counts:
        return cls(
            data["methods"],
            data["updates"],
            [(m, u, n) for m, u, n in data["kinds"]],
            [SessionSpan(s[0], connection_id, *s[1:]) for s in data["spans"]],
        )


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One connection's aggregate, as far as it has been derived (see :data:`Level`)."""

    connection_id: int
    frames: int
    bytes: int
    counts: Counts | None = None
    stats: ConnectionPart | None = None

    def has(self, level: Level) -> bool:
        need = _LEVELS[level]
        return (need < 1 or self.counts is not None) and (need < 2 or self.stats is not None)

    def data(self) -> str | None:
        if self.counts is None and self.stats is None:
            return None
        obj: dict[str, Any] = {"format": _FORMAT}
        if self.counts is not None:
            obj["counts"] = self.counts.to_json()
        if self.stats is not None:
            obj["stats"] = self.stats.to_json()
        return orjson.dumps(obj).decode()

    @classmethod
    def of_stored(cls, row: StoredAggregate) -> Aggregate:
        data = orjson.loads(row.data) if row.data else {}
        if data.get("format") != _FORMAT:
            data = {}
        cid = row.connection_id
        counts = Counts.from_json(cid, data["counts"]) if "counts" in data else None
        stats = ConnectionPart.from_json(cid, data["stats"]) if "stats" in data else None
        return cls(cid, row.frames, row.bytes, counts, stats)


def _derive(reader: RecordingReader, cid: int, level: Level, have: Aggregate | None) -> Aggregate:
    """``have`` completed to ``level`` from the connection's frames."""
    if have is None:
        frames, size = frame_totals(reader.db, cid)
        have = Aggregate(cid, frames, size)
    counts, stats = have.counts, have.stats
    if _LEVELS[level] >= 1 and counts is None:
        counts = Counts(
            reader.method_counts([cid]),
            reader.update_counts([cid]),
            [(m, u, n) for _c, m, u, n in reader.kind_counts([cid])],
            reader.session_spans([cid]),
        )
    if _LEVELS[level] >= 2 and stats is None:
        acc = StatsAccumulator()
        for f in reader.indexed_frames(cid):
            acc.feed(f, parse_json(f.raw)[0] if f.raw else None)
        acc.finish()
        stats = acc.last_part or ConnectionPart(cid)
    return Aggregate(cid, have.frames, have.bytes, counts, stats)


def _key(row: ConnectionRow, last_seq: int) -> str:
    started = row.started_at if math.isfinite(row.started_at) else None
    return orjson.dumps([_FORMAT, started, row.ended_at, last_seq]).decode()


_lock = threading.Lock()
_kept: OrderedDict[str, dict[int, tuple[str, Aggregate]]] = OrderedDict()
"""Per recording: the aggregates of its ended connections seen in this process (the
inspector asks every few seconds), by id, with their keys."""
_KEPT_MAX = 64


def aggregates(
    location: str | Path,
    reader: RecordingReader,
    rows: Sequence[ConnectionRow],
    level: Level,
    *,
    use_stored: bool = True,
    write: bool = True,
) -> dict[int, Aggregate]:
    """The aggregate of every connection in ``rows``, by id, derived to ``level``.

    Ended connections' aggregates come from this process or the recording when their key
    still matches; what had to be derived for them is stored (when the recording can be
    written, and ``write``: the inspector and the MCP server never write a recording, they
    keep them in this process only). ``use_stored=False`` derives everything from the
    frames and keeps nothing.
    """
    if not use_stored:
        return {r.id: _derive(reader, r.id, level, None) for r in rows}
    where = location_name(location)
    ended = [r.id for r in rows if r.ended_at is not None]
    seqs = last_seqs(reader.db, ended)
    keys = {r.id: _key(r, seqs.get(r.id, 0)) for r in rows if r.id in seqs}
    with _lock:
        kept = dict(_kept.get(where, {}))
    stored: dict[int, StoredAggregate] | None = None
    out: dict[int, Aggregate] = {}
    to_store: list[StoredAggregate] = []
    for row in rows:
        cid = row.id
        key = keys.get(cid)
        have: Aggregate | None = None
        if key is not None:
            held = kept.get(cid)
            if held is not None and held[0] == key:
                have = held[1]
            else:
                if stored is None:
                    missing = [i for i in keys if kept.get(i, ("",))[0] != keys[i]]
                    stored = read_aggregates(reader.db, missing)
                row_stored = stored.get(cid)
                if row_stored is not None and row_stored.key == key:
                    have = Aggregate.of_stored(row_stored)
        if have is not None and have.has(level):
            agg = have
        else:
            agg = _derive(reader, cid, level, have)
            if key is not None:
                to_store.append(StoredAggregate(cid, key, agg.frames, agg.bytes, agg.data()))
        out[cid] = agg
        if key is not None:
            kept[cid] = (key, agg)
    if to_store and write:
        write_aggregates(location, to_store)
    with _lock:
        _kept.pop(where, None)
        _kept[where] = {cid: kept[cid] for cid in keys if cid in kept}
        while len(_kept) > _KEPT_MAX:
            _kept.popitem(last=False)
    return out


def merged_counts(aggs: Sequence[Aggregate]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(method rows, update rows) of those connections together, in ``stats``' order."""
    methods: dict[tuple[Any, Any], dict[str, Any]] = {}
    updates: dict[Any, dict[str, Any]] = {}
    for agg in aggs:
        assert agg.counts is not None
        for m in agg.counts.methods:
            total = methods.get((m["method"], m["direction"]))
            if total is None:
                methods[(m["method"], m["direction"])] = dict(m)
            else:
                for name in ("requests", "notifications", "responses", "frames", "bytes"):
                    total[name] += m[name]
        for u in agg.counts.updates:
            total_u = updates.get(u["variant"])
            if total_u is None:
                updates[u["variant"]] = dict(u)
            else:
                total_u["count"] += u["count"]
                total_u["bytes"] += u["bytes"]
    return (
        sorted(methods.values(), key=method_count_order),
        sorted(updates.values(), key=update_count_order),
    )


def merged_stats(aggs: Sequence[Aggregate]) -> dict[str, Any]:
    """Latencies and sessions of those connections (in connection order) together."""
    acc = StatsAccumulator()
    for agg in sorted(aggs, key=lambda a: a.connection_id):
        assert agg.stats is not None
        acc.add(agg.stats)
    return acc.to_json()
