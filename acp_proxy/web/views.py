"""Derived views for the inspector: the reconstructed session, the conformance findings,
the timeline (waterfall, turns and performance figures of one connection), the side-by-side
diff of two connections (:mod:`acp_proxy.analysis.compare`, what ``acp-proxy diff`` runs) and
the text filter through the search index (:mod:`acp_proxy.store.search`).

The session timeline comes from :class:`acp_proxy.acp.model.ConnectionModel`, findings from
:class:`acp_proxy.analysis.connection.ConnectionCheck` (the code ``acp-proxy check`` runs), both
fed one connection's frames streamed by a read-only
:class:`~acp_proxy.store.reader.RecordingReader`. Findings are cached per connection and
fed only what was recorded since, so the connection list can show counts without
re-checking; the end-of-connection rules run once the connection has ended, which includes
a connection whose recorder is gone (:mod:`acp_proxy.store.liveness`).
"""

from __future__ import annotations

import contextlib
import copy
import threading
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from acp_proxy.acp.model import ConnectionModel
from acp_proxy.acp.waterfall import WaterfallBuilder, needs_payload
from acp_proxy.analysis.aggregates import Aggregate, aggregates
from acp_proxy.analysis.compare import compare_connections, member_json
from acp_proxy.analysis.connection import ConnectionCheck
from acp_proxy.store.engine import database_errors
from acp_proxy.store.pg import describe_error
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.rows import ConnectionRow, SessionSpan
from acp_proxy.store.schema import RecordingError
from acp_proxy.store.search import open_unwritten_index
from acp_proxy.store.transport_events import placed_events
from acp_proxy.web import store
from acp_proxy.wire.jsonrpc import parse_json

_cache_lock = threading.Lock()
_CACHE_MAX = 64


@dataclass
class _SessionModel:
    model: Any
    last_seq: int = 0
    plans: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    """Every state a plan went through: (seq of the update, the plan entity as JSON then)."""


@dataclass(frozen=True, slots=True)
class _PlanAtTurn:
    """A plan as it stood at the end of one turn (the session view shows one per turn)."""

    seq: int
    turn: int | None
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {**self.data, "firstSeq": self.seq, "turn": self.turn, "atTurnEnd": True}


def _position(item: Any) -> int:
    seq = item.seq if hasattr(item, "seq") else getattr(item, "first_seq", None)
    return seq if isinstance(seq, int) else 0


def _plans_per_turn(
    items: list[Any], plans: list[tuple[int, dict[str, Any]]], turn_starts: list[int]
) -> list[Any]:
    """``items`` with each plan entity replaced by its state at the end of every turn that
    changed it, placed where that turn first changed it (not one card with the last state)."""
    if not plans:
        return items
    per_turn: dict[tuple[str, int | None], tuple[int, dict[str, Any]]] = {}
    for seq, data in plans:
        turn = bisect_right(turn_starts, seq) - 1 if turn_starts else None
        key = (str(data.get("id")), None if turn is None or turn < 0 else turn)
        first = per_turn[key][0] if key in per_turn else seq
        per_turn[key] = (first, data)  # the last state in the turn, at its first change
    cards = sorted(
        (_PlanAtTurn(first, key[1], data) for key, (first, data) in per_turn.items()),
        key=lambda c: c.seq,
    )
    rest = [it for it in items if not (it.item == "entity" and it.type == "plan")]
    out: list[Any] = []
    i = 0
    for it in rest:
        while i < len(cards) and cards[i].seq <= _position(it):
            out.append(cards[i])
            i += 1
        out.append(it)
    out.extend(cards[i:])
    return out


_session_models: OrderedDict[tuple[str, int, str], _SessionModel] = OrderedDict()
_SESSION_MODELS_MAX = 2
SESSION_ITEMS = 2000
"""Items per session page: a long session is sent (and rendered) a page at a time."""
SESSION_TURNS = 50
SESSION_TEXT_MAX = 65536
"""Longest string an item carries in the session view; the raw frame has the rest. A
multi-megabyte tool output or message would otherwise stall the browser's layout."""


def session_view(
    path: store.Location,
    reader: RecordingReader,
    connection_id: int,
    session_id: str,
    *,
    offset: int = 0,
    limit: int = SESSION_ITEMS,
) -> dict[str, Any]:
    """The reconstructed conversation of one session, as plain data.

    The shape follows :meth:`acp_proxy.acp.model.ConnectionModel.to_json` (``show --json``)
    for one session, with the session's items sliced (``offset``/``limit``,
    ``totalItems``) and the last :data:`SESSION_TURNS` turns. Only the session's frames and
    the connection-level ones (``initialize``...) are fed, streamed in sequence order. The
    model of the last few sessions viewed is kept and fed only the frames recorded since,
    so a live session refreshes cheaply.
    """
    key = (store.location_key(path), connection_id, session_id)
    with _cache_lock:
        entry = _session_models.pop(key, None)  # exclusive while we feed it
    max_seq = reader.max_seq(connection_id)
    if entry is None or entry.last_seq > max_seq:  # new, or the file was replaced
        entry = _SessionModel(ConnectionModel(connection_id))
    model = entry.model
    for f in reader.wire_frames(
        connection_id,
        session_id=session_id,
        with_connection_frames=True,
        after_seq=entry.last_seq,
    ):
        model.feed(f)
        entry.last_seq = f.seq
        if b'"plan' in f.raw:
            tl = model.sessions.get(session_id)
            for it in tl.items if tl is not None else ():
                if it.item == "entity" and it.type == "plan" and it.last_seq == f.seq:
                    entry.plans.append((f.seq, copy.deepcopy(it.to_json())))
    timeline = model.sessions.get(session_id)
    turns = [t for t in [*model.turns, *model.tracker.unfinished()] if t.session_id == session_id]
    turns.sort(key=lambda t: t.start_seq or 0)
    items = list(timeline.items) if timeline is not None else []
    items = _plans_per_turn(items, entry.plans, [t.start_seq or 0 for t in turns])
    offset = max(0, offset)
    page = items[offset : offset + max(1, limit)]
    data: dict[str, Any] = {
        "connectionId": connection_id,
        "protocolVersion": model.protocol_version,
        "clientInfo": model.client_info,
        "agentInfo": model.agent_info,
        "frames": model.frames,
        "session": {
            "sessionId": session_id,
            "facts": timeline.facts.to_json() if timeline is not None else {},
            "items": [_clip(item.to_json()) for item in page],
        },
        "offset": offset,
        "totalItems": len(items),
        "turnCount": len(turns),
        "turns": [t.to_json() for t in turns[-SESSION_TURNS:]],
    }
    data["seqToId"] = _seq_ids(reader, connection_id, data)
    with _cache_lock:
        _session_models[key] = entry
        while len(_session_models) > _SESSION_MODELS_MAX:
            _session_models.popitem(last=False)
    return data


def _clip(value: Any) -> Any:
    """``value`` with every string longer than :data:`SESSION_TEXT_MAX` cut, and saying so."""
    if isinstance(value, str):
        if len(value) <= SESSION_TEXT_MAX:
            return value
        rest = len(value) - SESSION_TEXT_MAX
        return value[:SESSION_TEXT_MAX] + f"\u2026 [{rest} more characters: see the raw frame]"
    if isinstance(value, dict):
        return {key: _clip(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_clip(inner) for inner in value]
    return value


def _seq_ids(reader: RecordingReader, connection_id: int, data: dict[str, Any]) -> dict[str, int]:
    """Frame ids for the sequence numbers the view mentions (for links to raw frames)."""
    seqs: set[int] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key in ("seq", "firstSeq", "lastSeq", "responseSeq", "startSeq", "endSeq"):
                    if isinstance(inner, int):
                        seqs.add(inner)
                elif isinstance(inner, (dict, list)) and key in ("session", "items", "turns"):
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                if isinstance(inner, dict):
                    walk(inner)

    walk({"session": data.get("session"), "turns": data.get("turns")})
    return {str(seq): fid for seq, fid in reader.frame_ids(connection_id, seqs).items()}


@dataclass
class _Checked:
    """A connection's check, advanced up to ``check.last_seq``, and its last JSON result."""

    check: ConnectionCheck
    found: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None


_checked: OrderedDict[tuple[str, int], _Checked] = OrderedDict()


def findings(path: store.Location, reader: RecordingReader, connection_id: int) -> dict[str, Any]:
    """Conformance findings of one connection, each with the frame ids it points at.

    The check streams: it is kept per connection and fed only the frames recorded since the
    last call, so watching a live connection costs what the new frames cost. While the
    connection is still being recorded the end-of-connection rules (a request never
    answered...) wait: ``complete`` says whether they ran.
    """
    key = (store.location_key(path), connection_id)
    row = reader.connection(connection_id, sizes=False)
    max_seq = reader.max_seq(connection_id)
    with _cache_lock:
        entry = _checked.pop(key, None)  # exclusive while we feed it
    if (
        entry is None
        or entry.check.last_seq > max_seq  # the file was replaced
        or (entry.check.finished and row.running)
    ):
        entry = _Checked(ConnectionCheck(row))
        entry.found.extend(_finding_json(f) for f in entry.check.findings)
    changed = entry.result is None
    new = entry.check.advance(reader)
    if not row.running and not entry.check.finished:
        new.extend(entry.check.finish())
    elif row.running:
        new.extend(entry.check.settle())
    if new:
        entry.found.extend(_finding_json(f) for f in new)
        changed = True
    if changed or entry.result is None:
        entry.result = _findings_result(reader, connection_id, entry)
    result = entry.result
    with _cache_lock:
        _checked[key] = entry
        while len(_checked) > _CACHE_MAX:
            _checked.popitem(last=False)
    return result


def _findings_result(
    reader: RecordingReader, connection_id: int, entry: _Checked
) -> dict[str, Any]:
    items = [dict(item) for item in entry.found]
    summary = {"error": 0, "warning": 0, "info": 0}
    for item in items:
        tier = item.get("tier")
        if tier in summary:
            summary[tier] += 1
    counts = entry.check.checker.counts  # includes findings over the per-rule cap
    summary = {t: int(counts.get(t, summary[t])) for t in summary}
    ids = reader.frame_ids(connection_id, (s for item in items for s in item["seqs"]))
    for item in items:
        item["frame_ids"] = [ids.get(s) for s in item["seqs"]]
    return {
        "findings": items,
        "summary": summary,
        "complete": entry.check.finished,
        "checked_to_seq": entry.check.last_seq,
    }


@dataclass(frozen=True, slots=True)
class ConnectionTotals:
    """What the connection list and the filters count of one connection's frames."""

    frame_count: int
    sessions: list[SessionSpan]
    methods: dict[str, int]
    updates: dict[str, int]

    @classmethod
    def of(cls, agg: Aggregate) -> ConnectionTotals:
        """What the list counts, from the connection's aggregate (derived to ``counts``)."""
        assert agg.counts is not None
        methods: dict[str, int] = {}
        updates: dict[str, int] = {}
        for method, update, n in agg.counts.kinds:
            if method is not None:
                methods[str(method)] = methods.get(str(method), 0) + n
            if update is not None:
                updates[str(update)] = updates.get(str(update), 0) + n
        return cls(agg.frames, list(agg.counts.spans), methods, updates)


def connection_totals(
    path: store.Location, reader: RecordingReader, rows: list[ConnectionRow]
) -> dict[int, ConnectionTotals]:
    """The totals of every connection in ``rows``, by id.

    From :func:`acp_proxy.analysis.aggregates.aggregates`: an ended connection's are
    counted once and kept in this process (or read from the recording, where ``ls`` or
    ``stats`` stored them; the inspector never writes a recording), so a refresh of the list
    while frames arrive counts only the connections still being recorded (and new ones)
    instead of every frame of the store (3M frames: 1.3 s each time).
    """
    return {
        cid: ConnectionTotals.of(agg)
        for cid, agg in aggregates(path, reader, rows, "counts", write=False).items()
    }


def connections(path: store.Location, reader: RecordingReader) -> list[dict[str, Any]]:
    """The connection list: oldest first, each with its sessions, frame count and state
    (:func:`acp_proxy.web.store.connection_json`), counted through :func:`connection_totals`."""
    rows = reader.connections(sizes=False, counts=False)
    totals = connection_totals(path, reader, rows)
    return [
        store.connection_json(
            reader, replace(row, frame_count=totals[row.id].frame_count), totals[row.id].sessions
        )
        for row in rows
    ]


def values(path: store.Location, reader: RecordingReader) -> dict[str, list[dict[str, Any]]]:
    """The methods and update variants recorded, with counts (the filters' choices),
    summed from :func:`connection_totals`."""
    totals = connection_totals(path, reader, reader.connections(sizes=False, counts=False))
    out: dict[str, list[dict[str, Any]]] = {}
    for name in ("methods", "updates"):
        summed: dict[str, int] = {}
        for t in totals.values():
            for value, n in getattr(t, name).items():
                summed[value] = summed.get(value, 0) + n
        out[name] = [{"value": v, "count": n} for v, n in sorted(summed.items())]
    return out


def findings_summary(path: store.Location, reader: RecordingReader, row: Any) -> Any:
    """The last computed per-tier counts for the connection list, without checking.

    ``row`` is the connection as :func:`connections` gives it.
    ``None`` when never computed. The counts may lag a live connection by a moment: the
    page asks for the findings (which catches up) when ``stale`` is true, and the badge
    keeps its place meanwhile instead of blinking out.
    """
    key = (store.location_key(path), int(row["id"]))
    with _cache_lock:
        entry = _checked.get(key)
    if entry is None or entry.result is None:
        return None
    max_seq = reader.max_seq(int(row["id"]))
    ended = not row["live"]
    stale = max_seq != entry.check.last_seq or ended != entry.check.finished
    return {**entry.result["summary"], "stale": stale}


def _finding_json(finding: Any) -> dict[str, Any]:
    if isinstance(finding, dict):
        data = dict(finding)
    elif hasattr(finding, "to_json"):
        data = dict(finding.to_json())
    else:
        data = {"reason": str(finding)}
    seqs = data.get("seqs") or data.get("frames") or data.get("seq") or []
    if isinstance(seqs, int):
        seqs = [seqs]
    data["seqs"] = [s for s in seqs if isinstance(s, int)]
    return data


_timelines: OrderedDict[tuple[str, int], tuple[int, dict[str, Any]]] = OrderedDict()
_TIMELINES_MAX = 4


def timeline(path: store.Location, reader: RecordingReader, connection_id: int) -> dict[str, Any]:
    """The waterfall of one connection (:class:`~acp_proxy.acp.waterfall.WaterfallBuilder`)
    with frame ids for the sequence numbers it names (links to the frames).

    Built from the index columns; only responses, ``initialize`` and state updates are
    parsed. Kept per connection until it grows.
    """
    key = (store.location_key(path), connection_id)
    max_seq = reader.max_seq(connection_id)
    with _cache_lock:
        hit = _timelines.get(key)
    if hit is not None and hit[0] == max_seq:
        return hit[1]
    builder = WaterfallBuilder()
    for f in reader.frames(connection_id=connection_id):
        payload = None
        if needs_payload(f.kind, f.method, f.update_kind):
            payload, _ = parse_json(f.raw)
        builder.feed(f, payload)
    data = builder.to_json()
    seqs: set[int] = set()
    for bar in [*data["bars"], *data["performance"]["slowest"]]:
        seqs.update(s for s in (bar["startSeq"], bar["endSeq"]) if isinstance(s, int))
    for turn in data["turns"]:
        seqs.update(
            s
            for s in (turn["startSeq"], turn["endSeq"], turn["firstChunkSeq"], turn["cancelSeq"])
            if isinstance(s, int)
        )
    data["connectionId"] = connection_id
    data["seqToId"] = {str(q): fid for q, fid in reader.frame_ids(connection_id, seqs).items()}
    with _cache_lock:
        _timelines[key] = (max_seq, data)
        while len(_timelines) > _TIMELINES_MAX:
            _timelines.popitem(last=False)
    return data


def transport_events(reader: RecordingReader, connection_id: int) -> dict[str, Any]:
    """The connection's transport events (HTTP requests, SSE streams, closes...) in the
    order recorded, each with the frame it follows (``afterSeq``, and its id for a link)."""
    events = placed_events(reader, connection_id)
    ids = reader.frame_ids(connection_id, {e.after_seq for e in events if e.after_seq})
    return {
        "connectionId": connection_id,
        "events": [{**e.to_json(), "afterFrameId": ids.get(e.after_seq)} for e in events],
    }


DIFF_ROWS = 3000
"""Aligned rows the side-by-side diff sends at most (the summary covers them all)."""


def seq_range(text: str | None) -> tuple[int, int] | None:
    """``FIRST-LAST`` (frame sequence numbers, e.g. a turn's ``12-40``) of a query, or None."""
    if not text:
        return None
    first, sep, last = text.partition("-")
    if not sep or not first.isdigit() or not last.isdigit() or int(first) > int(last):
        raise ValueError(f"a frame range is FIRST-LAST (e.g. 12-40), not {text!r}")
    return int(first), int(last)


def turn_spans(query: Any) -> dict[str, tuple[int, int] | None]:
    """``a_seqs``/``b_seqs`` for :func:`diff` from a query's ``as``/``bs`` (a turn each)."""
    return {"a_seqs": seq_range(query.get("as")), "b_seqs": seq_range(query.get("bs"))}


def diff(
    path: store.Location,
    reader: RecordingReader,
    a: int,
    b: int,
    *,
    a_seqs: tuple[int, int] | None = None,
    b_seqs: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Two connections of the recording side by side: :func:`acp_proxy.analysis.compare.
    compare_connections` (what ``acp-proxy diff`` runs) plus the aligned rows in order,
    each ``equal``, ``changed`` (with its members), ``removed`` (A only) or ``added`` (B only).
    ``a_seqs``/``b_seqs`` narrow each side to a range of its frames (one turn each).
    """
    result = compare_connections(reader.db, a, reader.db, b, a_seqs=a_seqs, b_seqs=b_seqs)
    data = result.to_json(str(path), str(path))
    data["a"]["seqs"] = list(a_seqs) if a_seqs else None
    data["b"]["seqs"] = list(b_seqs) if b_seqs else None
    changed = {(c.a, c.b): [member_json(d) for d in c.members] for c in result.changes}
    slower = {
        (t.a, t.b): {"a_ms": t.a_ns / 1e6, "b_ms": t.b_ns / 1e6, "what": t.what, "fails": t.fails}
        for t in result.slower
    }
    rows: list[dict[str, Any]] = []
    total = 0
    for i, j in result.alignment.rows:
        total += 1
        if len(rows) >= DIFF_ROWS:
            continue
        row: dict[str, Any] = {
            "a": None if i is None else result.frame_json(result.a, i),
            "b": None if j is None else result.frame_json(result.b, j),
        }
        if i is None:
            row["tag"] = "added"
        elif j is None:
            row["tag"] = "removed"
        elif (i, j) in changed:
            row["tag"] = "changed"
            row["members"] = changed[(i, j)]
        else:
            row["tag"] = "equal"
        if i is not None and j is not None and (i, j) in slower:
            row["slower"] = slower[(i, j)]
        rows.append(row)
    data["rows"] = rows
    data["rowsTotal"] = total
    return data


@dataclass
class _HeldIndex:
    index: Any
    lock: threading.Lock = field(default_factory=threading.Lock)


_indexes: OrderedDict[str, _HeldIndex] = OrderedDict()
_INDEXES_MAX = 2


def _held_index(path: store.Location) -> _HeldIndex:
    """The search index the inspector reads for ``path``, without writing the recording.

    A SQLite file: an up-to-date index saved in it (by ``acp-proxy search``) is used as it
    is; otherwise the inspector keeps its own copy of the same index in memory, brought up
    to date with each search (:func:`acp_proxy.store.search.open_unwritten_index`).
    PostgreSQL: the index in the database (:class:`acp_proxy.store.search.PgSearchIndex`,
    full-text, what ``acp-proxy search`` keeps: derived data, the one thing the inspector
    writes), brought up to date the same way, without reading the whole store into memory
    (in memory only for a role that may not write it).
    """
    key = store.location_key(path)
    with _cache_lock:
        held = _indexes.get(key)
        if held is not None:
            _indexes.move_to_end(key)
            return held
    return _keep_index(key, open_unwritten_index(path, application_name="acp web"))


def _keep_index(key: str, index: Any) -> _HeldIndex:
    held = _HeldIndex(index)
    with _cache_lock:
        _indexes[key] = held
        while len(_indexes) > _INDEXES_MAX:
            _, old = _indexes.popitem(last=False)
            with old.lock:
                old.index.close()
    return held


def search(
    path: store.Location,
    reader: RecordingReader,
    text: str,
    *,
    connection_id: int | None,
    session_id: str | None,
    limit: int = 200,
    _retried: bool = False,
) -> dict[str, Any]:
    """The inspector's text filter through the search index ``acp-proxy search`` uses
    (messages joined across chunks, tool output, methods, errors): each hit with its frame's
    list summary, so the frame list can show it."""
    held = _held_index(path)
    with held.lock:
        if held.index.saved_copy_behind():
            # the index saved in the file fell behind (frames recorded since): the inspector
            # does not write the file, so it keeps a copy in memory
            with _cache_lock:
                _indexes.pop(store.location_key(path), None)
            held.index.close()
            return search(
                path, reader, text, connection_id=connection_id, session_id=session_id, limit=limit
            )
        try:
            held.index.update()
            hits = held.index.search(
                text, connection_id=connection_id, session_id=session_id, limit=limit
            )
        except database_errors() as exc:
            if not held.index.on_server:
                raise
            # the database went away under the held index: searched again, connected afresh
            with _cache_lock:
                _indexes.pop(store.location_key(path), None)
            with contextlib.suppress(*database_errors()):
                held.index.close()
            if _retried:
                raise RecordingError(f"{path}: {describe_error(exc)}") from None
            retry = True
        else:
            retry = False
    if retry:  # (a restarted server): once, on a fresh connection
        return search(
            path,
            reader,
            text,
            connection_id=connection_id,
            session_id=session_id,
            limit=limit,
            _retried=True,
        )
    out = []
    for hit in hits:
        summary = store.frame_summary_json(reader, hit.frame_id)
        if summary is None:  # deleted since the index held in memory took it in (a purge)
            continue
        item = hit.to_json()
        item["summary"] = summary
        out.append(item)
    return {"hits": out, "limit": limit, "more": len(hits) >= limit}
