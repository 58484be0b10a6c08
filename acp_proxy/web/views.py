"""Derived views for the inspector: the reconstructed session and the conformance findings.

Both are computed by the pure ACP core (:mod:`acp_proxy.acp.model` for the session
timeline, :mod:`acp_proxy.acp.conformance` for findings) from one connection's frames,
streamed from a read-only connection. Findings are cached per connection and invalidated
when the connection grows, so the connection list can show counts without re-checking.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp_proxy.acp.conformance import ConnectionChecker
from acp_proxy.acp.model import ConnectionModel
from acp_proxy.web import store

_cache_lock = threading.Lock()
_CACHE_MAX = 64


@dataclass
class _SessionModel:
    model: Any
    last_seq: int = 0


_session_models: OrderedDict[tuple[str, int, str], _SessionModel] = OrderedDict()
_SESSION_MODELS_MAX = 2
SESSION_ITEMS = 2000
"""Items per session page: a long session is sent (and rendered) a page at a time."""
SESSION_TURNS = 50
SESSION_TEXT_MAX = 65536
"""Longest string an item carries in the session view; the raw frame has the rest. A
multi-megabyte tool output or message would otherwise stall the browser's layout."""


def session_view(
    path: Path,
    conn: sqlite3.Connection,
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
    key = (str(path.resolve()), connection_id, session_id)
    with _cache_lock:
        entry = _session_models.pop(key, None)  # exclusive while we feed it
    max_seq = conn.execute(
        "SELECT coalesce(max(seq), 0) FROM frames WHERE connection_id = ?", (connection_id,)
    ).fetchone()[0]
    if entry is None or entry.last_seq > max_seq:  # new, or the file was replaced
        entry = _SessionModel(ConnectionModel(connection_id))
    model = entry.model
    cur = conn.execute(
        "SELECT seq, direction, raw, mono_ns FROM frames WHERE connection_id = ? "
        "AND (session_id = ? OR session_id IS NULL) AND seq > ? ORDER BY seq",
        (connection_id, session_id, entry.last_seq),
    )
    for seq, direction, raw, mono_ns in cur:
        model.feed(direction, bytes(raw), seq=seq, mono_ns=mono_ns)
        entry.last_seq = seq
    timeline = model.sessions.get(session_id)
    items = list(timeline.items) if timeline is not None else []
    offset = max(0, offset)
    page = items[offset : offset + max(1, limit)]
    turns = [t for t in [*model.turns, *model.tracker.unfinished()] if t.session_id == session_id]
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
    data["seqToId"] = _seq_ids(conn, connection_id, data)
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


def _seq_ids(conn: sqlite3.Connection, connection_id: int, data: dict[str, Any]) -> dict[str, int]:
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
    return {str(seq): fid for seq, fid in _frame_ids(conn, connection_id, seqs).items()}


def _frame_ids(conn: sqlite3.Connection, connection_id: int, seqs: Iterable[int]) -> dict[int, int]:
    """Frame id of each of the connection's sequence numbers (missing ones are left out)."""
    out: dict[int, int] = {}
    ordered = sorted(set(seqs))
    for start in range(0, len(ordered), 500):
        chunk = ordered[start : start + 500]
        marks = ",".join("?" for _ in chunk)
        for seq, fid in conn.execute(
            f"SELECT seq, id FROM frames WHERE connection_id = ? AND seq IN ({marks})",
            (connection_id, *chunk),
        ):
            out[int(seq)] = int(fid)
    return out


@dataclass
class _Checked:
    """A connection's checker, fed up to ``last_seq``, and what it found so far."""

    checker: Any
    last_seq: int = 0
    found: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    result: dict[str, Any] | None = None


_checked: OrderedDict[tuple[str, int], _Checked] = OrderedDict()


def findings(path: Path, conn: sqlite3.Connection, connection_id: int) -> dict[str, Any]:
    """Conformance findings of one connection, each with the frame ids it points at.

    The checker streams: it is kept per connection and fed only the frames recorded since the
    last call, so watching a live connection costs what the new frames cost. While the
    connection is still being recorded the end-of-connection rules (a request never
    answered...) wait: ``complete`` says whether they ran.
    """
    key = (str(path.resolve()), connection_id)
    row = conn.execute(
        "SELECT transport, frames_dropped, ended_at FROM connections WHERE id = ?",
        (connection_id,),
    ).fetchone()
    transport, dropped, ended = row if row else (None, 0, None)
    max_seq = conn.execute(
        "SELECT coalesce(max(seq), 0) FROM frames WHERE connection_id = ?", (connection_id,)
    ).fetchone()[0]
    with _cache_lock:
        entry = _checked.pop(key, None)  # exclusive while we feed it
    if entry is None or entry.last_seq > max_seq or (entry.finished and ended is None):
        entry = _Checked(
            ConnectionChecker(connection_id, transport=transport, frames_dropped=int(dropped or 0))
        )
    changed = entry.result is None
    for seq, direction, raw, mono_ns, binary in store.iter_frames_after(
        conn, connection_id, entry.last_seq
    ):
        # The first feed() also returns findings queued when the checker was created.
        entry.found.extend(
            _finding_json(f)
            for f in entry.checker.feed(seq, direction, raw, mono_ns, binary=binary)
        )
        entry.last_seq = seq
        changed = True
    if ended is not None and not entry.finished:
        entry.found.extend(_finding_json(f) for f in entry.checker.finish())
        entry.finished = True
        changed = True
    if changed or entry.result is None:
        entry.result = _findings_result(conn, connection_id, entry)
    result = entry.result
    with _cache_lock:
        _checked[key] = entry
        while len(_checked) > _CACHE_MAX:
            _checked.popitem(last=False)
    return result


def _findings_result(
    conn: sqlite3.Connection, connection_id: int, entry: _Checked
) -> dict[str, Any]:
    items = [dict(item) for item in entry.found]
    summary = {"error": 0, "warning": 0, "info": 0}
    for item in items:
        tier = item.get("tier")
        if tier in summary:
            summary[tier] += 1
    counts = getattr(entry.checker, "counts", None)
    if isinstance(counts, dict):  # includes findings over the per-rule cap
        summary = {t: int(counts.get(t, summary[t])) for t in summary}
    ids = _frame_ids(conn, connection_id, (s for item in items for s in item["seqs"]))
    for item in items:
        item["frame_ids"] = [ids.get(s) for s in item["seqs"]]
    return {
        "findings": items,
        "summary": summary,
        "complete": entry.finished,
        "checked_to_seq": entry.last_seq,
    }


def findings_summary(path: Path, conn: sqlite3.Connection, connection_id: int) -> Any:
    """The last computed per-tier counts for the connection list, without checking.

    ``None`` when never computed. The counts may lag a live connection by a moment: the
    page asks for the findings (which catches up) when ``stale`` is true, and the badge
    keeps its place meanwhile instead of blinking out.
    """
    key = (str(path.resolve()), connection_id)
    with _cache_lock:
        entry = _checked.get(key)
    if entry is None or entry.result is None:
        return None
    max_seq, ended = conn.execute(
        "SELECT (SELECT coalesce(max(seq), 0) FROM frames WHERE connection_id = ?), ended_at "
        "FROM connections WHERE id = ?",
        (connection_id, connection_id),
    ).fetchone()
    stale = max_seq != entry.last_seq or (ended is not None) != entry.finished
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
