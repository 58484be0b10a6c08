"""The MCP tools as plain functions over a store: each opens a fresh read-only reader, asks the
library the CLI and the inspector use, and returns concise, bounded text.

No SQL and no analysis of its own: connections, frame pages, one frame with its pair, the
findings, the timeline and the search come from :mod:`acp_proxy.web.store` and
:mod:`acp_proxy.web.views` (what the inspector serves), the statistics from
:func:`acp_proxy.analysis.connection.collect_stats` (``stats``), the findings' check from
:func:`acp_proxy.analysis.connection.check_connection` (``check``) and the diff from
:func:`acp_proxy.analysis.compare.compare_connections` (``diff``, with its defaults).

Every result is bounded (:data:`PAGE_MAX` rows a page, raw bytes cut at :data:`RAW_MAX`
characters, the whole text at :data:`RESULT_MAX`), each cut saying so, so that a big store
never floods a model's context. A missing or damaged store, or a connection or frame that is
not there, is a :class:`ToolFailure` with a one-line message.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from acp_proxy.acp.jsonpaths import parse_path, short
from acp_proxy.acp.rules import TIER_RANK, TIERS
from acp_proxy.analysis.compare import compare_connections
from acp_proxy.analysis.connection import check_connection, collect_stats
from acp_proxy.store.engine import SQLITE, database_errors
from acp_proxy.store.liveness import END_REASONS
from acp_proxy.store.pg import describe_error
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.rows import FrameFilter
from acp_proxy.store.schema import RecordingError
from acp_proxy.web import store, views
from acp_proxy.wire.jsonrpc import parse_json

PAGE_DEFAULT = 50
PAGE_MAX = 200
"""Rows one call returns at most (connections, frames, hits, findings)."""
RAW_MAX = 4000
"""Characters of a frame's raw bytes (and of its parsed form) ``message`` shows at most."""
RESULT_MAX = 24000
"""Characters of one result at most; the rest is cut with a marker."""
CHECK_MAX_PER_RULE = 20
"""Findings listed per rule and connection, as ``acp-proxy check``'s ``--max-per-rule``."""
FINDINGS_LAST = 20
"""Connections ``findings`` checks without a ``connection``: the newest that many."""
LINE_MAX = 160
"""Characters of a preview or a snippet in a list."""


class ToolFailure(Exception):
    """A tool that cannot answer: the message is one line, meant for the model."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def bounded(text: str, limit: int = RESULT_MAX) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"\n... [truncated: {len(text) - limit} more characters; narrow the query]"
    )


def _clip(text: str | None, limit: int = LINE_MAX) -> str:
    line = _one_line(text or "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _page_size(limit: int | None) -> int:
    return PAGE_DEFAULT if limit is None else max(1, min(int(limit), PAGE_MAX))


def when(ts: Any) -> str:
    """A stored wall-clock time as ISO 8601 UTC (``2026-12-02T01:40:53Z``); ``-`` if none."""
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        return "-"
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    except (ValueError, OverflowError, OSError):
        return "?"


def ms(value: Any) -> str:
    """Milliseconds as ``12.3ms`` / ``4.56s``; ``-`` if none."""
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value:.1f}ms" if value < 1000 else f"{value / 1000:.2f}s"


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(value: str, *, now: float | None = None) -> float:
    """``since`` as a wall-clock time: ISO 8601 (UTC unless it says), Unix seconds, or a
    relative age (``30m``, ``2h``, ``7d``, ``1w``)."""
    text = value.strip()
    relative = _RELATIVE.match(text)
    if relative:
        age = float(relative.group(1)) * _UNIT_SECONDS[relative.group(2)]
        return (time.time() if now is None else now) - age
    with contextlib.suppress(ValueError):
        return float(text)
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ToolFailure(
            f"cannot read since={value!r}: use ISO 8601 (2026-12-01T10:00Z), Unix seconds or "
            "an age such as 30m, 2h, 7d"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


class StoreTools:
    """The tools over one store (a SQLite file or a ``postgresql://`` URL); nothing writes."""

    def __init__(self, location: str | Path) -> None:
        self.where = store.location(location)

    @contextlib.contextmanager
    def _reader(self) -> Iterator[RecordingReader]:
        """A fresh read-only reader; every storage error becomes a one-line :class:`ToolFailure`."""
        name = store.location_label(self.where)
        try:
            with store.read_connection(self.where) as reader:
                yield reader
        except RecordingError as exc:
            raise ToolFailure(_one_line(str(exc))) from None
        except SQLITE.damaged_errors as exc:
            raise ToolFailure(f"{name}: the recording is damaged: {_one_line(str(exc))}") from None
        except database_errors() as exc:
            raise ToolFailure(f"{name}: {_one_line(describe_error(exc))}") from None

    # -- connections ------------------------------------------------------------------------

    def list_connections(
        self,
        *,
        host: str | None = None,
        agent: str | None = None,
        client: str | None = None,
        label: str | None = None,
        since: str | None = None,
        state: str | None = None,
        limit: int | None = None,
    ) -> str:
        """The connections that match, newest first, one line each."""
        after = parse_since(since) if since else None
        if state is not None and state not in ("running", "ended", "unknown-end"):
            raise ToolFailure(f"unknown state {state!r}: use running, ended or unknown-end")
        with self._reader() as reader:
            rows = views.connections(self.where, reader)
        wanted = {"host": host, "agent": agent, "client": client, "label": label}

        def matches(row: dict[str, Any]) -> bool:
            for key, value in wanted.items():
                if value and value.lower() not in str(row.get(key) or "").lower():
                    return False
            if state is not None and row["state"] != state:
                return False
            return after is None or (row["started_at"] or 0) >= after

        chosen = [row for row in reversed(rows) if matches(row)]
        size = _page_size(limit)
        lines = [
            f"{len(chosen)} of {len(rows)} connection(s) match, newest first"
            + (f"; showing {size}" if len(chosen) > size else "")
        ]
        lines.extend(_connection_line(row) for row in chosen[:size])
        if len(chosen) > size:
            lines.append(f"... {len(chosen) - size} more: narrow with since/host/agent/state")
        return bounded("\n".join(lines))

    def connection_summary(self, connection: int) -> str:
        """Metadata, totals, latency per method, findings count and how it ended."""
        with self._reader() as reader:
            row = reader.connection(connection)
            data = store.connection_json(reader, row, reader.session_spans([connection]))
            stats = collect_stats(reader, connection, location=self.where, write=False)
            report = check_connection(reader, row, max_per_rule=CHECK_MAX_PER_RULE)
            directions = reader.direction_counts(connection)
            stderr = reader.stderr_count([connection])
        lines = [_connection_line(data)]
        lines.append(
            f"transport {data['transport']}, protocol v{data['protocol_version'] or '?'}, "
            f"started {when(data['started_at'])}, duration {ms(_ms_of(data['duration']))}"
        )
        if data["agent_command"]:
            lines.append(f"agent command: {_clip(' '.join(map(str, data['agent_command'])))}")
        for key in ("cwd", "peer", "pid"):
            if data.get(key) is not None:
                lines.append(f"{key}: {data[key]}")
        ended = f"how it ended: {data['state']} ({data['state_reason']})"
        if data["end_reason"]:
            ended += f"; {END_REASONS.get(data['end_reason'], data['end_reason'])}"
        if data["ended_at"] is not None:
            ended += f" at {when(data['ended_at'])}"
        lines.append(ended)
        lines.append(
            f"totals: {row.frame_count} frames ({directions.get('c2a', 0)} client->agent, "
            f"{directions.get('a2c', 0)} agent->client), {row.byte_count} bytes, "
            f"{len(data['sessions'])} session(s), {stderr} stderr line(s), "
            f"{row.frames_dropped} frame(s) dropped by the recorder"
        )
        counts = ", ".join(f"{report.counts.get(t, 0)} {t}" for t in TIERS)
        lines.append(f"findings: {counts} (details: findings tool)")
        for s in data["sessions"]:
            lines.append(
                f"session {s['session_id']}: {s['frame_count']} frames from #{s['first_seq']}, "
                f"{ms(_ms_of(s['duration']))}"
            )
        lines.append("latency per method (dir, requests, errors, p50, p99, max):")
        lines.extend(_method_lines([m for m in stats["methods"] if m["requests"]]))
        return bounded("\n".join(lines))

    # -- frames -----------------------------------------------------------------------------

    def messages(
        self,
        *,
        connection: int | None = None,
        session: str | None = None,
        kind: str | None = None,
        method: str | None = None,
        direction: str | None = None,
        update_variant: str | None = None,
        after: int | None = None,
        limit: int | None = None,
    ) -> str:
        """One page of frames in order, one line each; ``after`` is the cursor of the next."""
        if direction is not None and direction not in store.DIRECTIONS:
            raise ToolFailure(f"unknown direction {direction!r}: use c2a or a2c")
        flt = FrameFilter(
            connection_id=connection,
            session_id=session,
            direction=direction,
            method=method,
            update_kind=update_variant,
            kind=kind,
        )
        with self._reader() as reader:
            if connection is not None:
                reader.connection(connection, sizes=False)
            page = store.list_frames(reader, flt, after_id=after, limit=_page_size(limit))
        frames = page["frames"]
        lines = [_frame_line(f) for f in frames]
        if not lines:
            lines.append("no frames match" + (" after that cursor" if after else ""))
        if page["has_more_after"] and frames:
            lines.append(f"... more: call again with after={frames[-1]['id']}")
        return bounded("\n".join(lines))

    def message(self, connection: int, seq: int) -> str:
        """One frame by connection and sequence number: raw bytes, parsed, and its pair."""
        with self._reader() as reader:
            reader.connection(connection, sizes=False)
            frame_id = reader.frame_ids(connection, [seq]).get(seq)
            detail = None if frame_id is None else store.frame_detail(reader, frame_id)
            if detail is None:
                raise ToolFailure(f"no frame #{seq} in connection {connection}")
            pair = detail.get("pair") or {}
            other = (
                store.frame_summary_json(reader, pair["id"]) if pair.get("id") is not None else None
            )
        lines = [_frame_line(detail)]
        lines.append(f"time {when(detail['ts'])}, {detail['size']} bytes")
        if pair:
            if other is None:
                lines.append(f"pair: no {'response' if pair['role'] == 'request' else 'request'}")
            else:
                lines.append(f"pair ({ms(pair['latency_ms'])}): {_frame_line(other)}")
        text = detail["text"] if detail["utf8"] else None
        if text is None:
            lines.append("raw (not UTF-8, base64):")
            lines.append(_cut(detail["base64"] or "", f"{detail['size']} bytes"))
            return bounded("\n".join(lines))
        lines.append("raw:")
        shown = _cut(text.rstrip("\r\n"), f"{detail['size']} bytes")
        lines.append(shown)
        value, _ = (None, None) if detail["truncated"] else parse_json(text.encode("utf-8"))
        if detail["truncated"]:
            lines.append("parsed: not shown (the frame is too big to read whole here)")
        elif value is not None:
            pretty = orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
            lines.append("parsed:")
            lines.append(_cut(pretty, f"{len(pretty)}"))
        else:
            lines.append("parsed: not JSON")
        return bounded("\n".join(lines))

    def search(
        self,
        query: str,
        *,
        connection: int | None = None,
        session: str | None = None,
        limit: int | None = None,
    ) -> str:
        """The full-text index (``acp-proxy search``): message text, tool output, errors."""
        if not query.strip():
            raise ToolFailure("empty query")
        size = _page_size(limit)
        with self._reader() as reader:
            found = views.search(
                self.where,
                reader,
                query,
                connection_id=connection,
                session_id=session,
                limit=size,
            )
        hits = found["hits"]
        lines = [f"{len(hits)} hit(s)" + (f" (first {size}; more exist)" if found["more"] else "")]
        for hit in hits:
            span = f"#{hit['seq']}" + (
                f"..#{hit['last_seq']}" if hit["last_seq"] != hit["seq"] else ""
            )
            what = " ".join(str(v) for v in (hit["method"], hit["variant"]) if v)
            session_text = f" session {hit['session']}" if hit["session"] else ""
            lines.append(
                f"connection {hit['connection']} {span}{session_text} {hit['field']} {what}: "
                f"{_clip(hit['snippet'])}"
            )
        return bounded("\n".join(lines))

    # -- analysis ---------------------------------------------------------------------------

    def findings(
        self,
        *,
        connection: int | None = None,
        min_tier: str = "info",
        last: int = FINDINGS_LAST,
        limit: int | None = None,
    ) -> str:
        """Conformance findings (``acp-proxy check``), each with its rule text and side, of
        one connection or of the newest ``last`` connections."""
        if min_tier not in TIER_RANK:
            raise ToolFailure(f"unknown tier {min_tier!r}: use info, warning or error")
        threshold = TIER_RANK[min_tier]
        with self._reader() as reader:
            if connection is not None:
                rows = [reader.connection(connection, sizes=False)]
            else:
                rows = reader.connections(sizes=False, last=max(1, last))
            reports = [
                check_connection(reader, row, max_per_rule=CHECK_MAX_PER_RULE) for row in rows
            ]
        size = _page_size(limit)
        totals = {t: sum(r.counts.get(t, 0) for r in reports) for t in TIERS}
        lines = [
            f"{len(reports)} connection(s)"
            + ("" if connection is not None else f" (the newest {len(reports)})")
            + ": "
            + ", ".join(f"{totals[t]} {t}" for t in TIERS)
            + (" (a MUST is broken)" if totals["error"] else "")
        ]
        shown = 0
        left = 0
        for r in reports:
            found = [f for f in r.findings if TIER_RANK[f.tier] >= threshold]
            if not found and connection is None:
                continue
            counts = ", ".join(f"{r.counts.get(t, 0)} {t}" for t in TIERS)
            lines.append(f"== connection {r.connection_id} ({r.frames} frames): {counts}")
            for f in found:
                if shown >= size:
                    left += 1
                    continue
                shown += 1
                where = ",".join(f"#{s}" for s in f.seqs) or "-"
                session = f" session {f.session_id}" if f.session_id else ""
                reason = _one_line(f.reason)
                lines.append(f"{f.tier} {f.rule} side={f.side or '-'} {where}{session}: {reason}")
                lines.append(f"  rule: {_one_line(f.rule_text)}")
            for rule_id, n in sorted(r.suppressed.items()):
                lines.append(f"  ... and {n} more {rule_id} finding(s) not listed")
        if left:
            lines.append(f"... {left} more finding(s): pass connection= or min_tier=")
        return bounded("\n".join(lines))

    def stats(self, *, connection: int | None = None) -> str:
        """Counts, bytes and latency per method; turns per session (``acp-proxy stats``)."""
        with self._reader() as reader:
            if connection is not None:
                reader.connection(connection, sizes=False)
            data = collect_stats(reader, connection, location=self.where, write=False)
        lines = [
            f"{data['connections']} connection(s), {len(data['sessions'])} session(s), "
            f"{data['frames']} frames, {data['bytes']} bytes",
            "per method (dir, requests, notifications, responses, errors, bytes, p50, p99, max):",
        ]
        for m in data["methods"][:PAGE_MAX]:
            lines.append(
                f"  {m['method']} {m['direction']} req={m['requests']} "
                f"notif={m['notifications']} resp={m['responses']} err={m.get('errors', 0)} "
                f"bytes={m['bytes']} p50={ms(m.get('p50Ms'))} p99={ms(m.get('p99Ms'))} "
                f"max={ms(m.get('maxMs'))}"
            )
        if data["updates"]:
            lines.append("session/update variants (count, bytes):")
            lines.extend(
                f"  {u['variant']} {u['count']} {u['bytes']}" for u in data["updates"][:PAGE_MAX]
            )
        if data["sessions"]:
            lines.append("sessions (connections, frames, turns, unfinished, total, p50, max):")
            for s in data["sessions"][:PAGE_MAX]:
                stops = ", ".join(f"{k} x{v}" for k, v in (s.get("stopReasons") or {}).items())
                lines.append(
                    f"  {s['sessionId']} conn={','.join(map(str, s['connections']))} "
                    f"frames={s['frames']} turns={s['turns']} unfinished={s.get('unfinished', 0)} "
                    f"total={ms(s.get('totalMs'))} p50={ms(s.get('p50Ms'))} "
                    f"max={ms(s.get('maxMs'))}" + (f" stop: {stops}" if stops else "")
                )
        return bounded("\n".join(lines))

    def diff(
        self,
        a: int,
        b: int,
        *,
        ignore: list[str] | None = None,
        timing_threshold_ms: float = 1000.0,
        limit: int | None = None,
    ) -> str:
        """Two connections aligned (``acp-proxy diff``: ids, sessionIds, entity ids and
        timestamps ignored): what was added, removed, changed and got slower."""
        try:
            paths = [parse_path(p) for p in ignore or ()]
        except ValueError as exc:
            raise ToolFailure(f"bad ignore path: {_one_line(str(exc))}") from None
        with self._reader() as reader:
            for cid in (a, b):
                reader.connection(cid, sizes=False)
            result = compare_connections(
                reader.db,
                a,
                reader.db,
                b,
                ignores=paths,
                threshold_ns=int(max(0.0, timing_threshold_ms) * 1_000_000),
            )
        doc = result.to_json("A", "B")
        size = _page_size(limit)
        summary = doc["summary"]
        lines = [
            f"A = connection {a} ({doc['a']['frames']} frames), "
            f"B = connection {b} ({doc['b']['frames']} frames): {summary['added']} added, "
            f"{summary['removed']} removed, {summary['changed']} changed, "
            f"{summary['slower']} slower: {'equal' if summary['equal'] else 'differ'}"
        ]
        if doc["alignment"]["note"]:
            lines.append(f"note: {doc['alignment']['note']}")
        rows: list[str] = []
        rows.extend(f"- removed #{f['seq']} {f['what']}" for f in doc["removed"])
        rows.extend(f"+ added #{f['seq']} {f['what']}" for f in doc["added"])
        for c in doc["changed"]:
            rows.append(f"~ changed #{c['a']['seq']} -> #{c['b']['seq']} {c['a']['what']}")
            rows.extend(f"    {_member_line(m)}" for m in c["members"][:20])
            if len(c["members"]) > 20:
                rows.append(f"    ... {len(c['members']) - 20} more member(s)")
        rows.extend(
            f"! slower #{t['a']['seq']} -> #{t['b']['seq']} {t['what']} {t['method']}: "
            f"{ms(t['a_ms'])} -> {ms(t['b_ms'])}"
            for t in doc["timing"]
        )
        lines.extend(rows[: size * 4])
        if len(rows) > size * 4:
            lines.append(f"... {len(rows) - size * 4} more line(s)")
        return bounded("\n".join(lines))

    def timeline(self, connection: int, *, session: str | None = None) -> str:
        """A connection's (or one session's) turns with latencies, and latency per method."""
        with self._reader() as reader:
            reader.connection(connection, sizes=False)
            data = views.timeline(self.where, reader, connection)
        turns = [t for t in data["turns"] if session is None or t["sessionId"] == session]
        if session is not None and not turns:
            raise ToolFailure(f"no turns of session {session} in connection {connection}")
        perf = data["performance"]["turns"]
        lines = [
            f"connection {connection}: {len(turns)} turn(s)"
            + (f" of session {session}" if session else "")
            + f"; all turns p50 {ms(perf['p50Ms'])}, max {ms(perf['maxMs'])}, "
            f"first chunk p50 {ms(perf['firstChunkP50Ms'])}"
        ]
        for t in turns[:PAGE_MAX]:
            end = f"#{t['endSeq']}" if t["endSeq"] is not None else "(unfinished)"
            stop = t["stopReason"] or ("cancelled" if t["cancelled"] else None)
            error = f" error {_clip(str(t['error']), 80)}" if t["error"] else ""
            lines.append(
                f"turn {t['index'] + 1} session {t['sessionId']} {t['origin']} "
                f"#{t['startSeq']}..{end} at +{ms(t['startMs'])}: {ms(t['durationMs'])}, "
                f"first chunk {ms(t['firstChunkMs'])}, {len(t['bars'])} request(s) inside"
                + (f", stop {stop}" if stop else "")
                + error
            )
        if len(turns) > PAGE_MAX:
            lines.append(f"... {len(turns) - PAGE_MAX} more turn(s)")
        lines.append("latency per method (dir, requests, errors, p50, p99, max):")
        lines.extend(_method_lines(data["performance"]["methods"]))
        return bounded("\n".join(lines))


def _ms_of(seconds: Any) -> float | None:
    return None if not isinstance(seconds, (int, float)) else seconds * 1000


def _connection_line(row: dict[str, Any]) -> str:
    parts = [f"connection {row['id']}", f"{row['state']} ({row['state_reason']})"]
    parts.append(f"started {when(row['started_at'])}")
    for key in ("agent", "client", "host", "label"):
        if row.get(key):
            parts.append(f"{key}={_clip(str(row[key]), 60)}")
    parts.append(f"frames={row['frame_count']}")
    parts.append(f"sessions={len(row['sessions'])}")
    return ", ".join(parts)


def _method_lines(methods: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in methods[:PAGE_MAX]:
        count = m.get("requests", m.get("count"))
        out.append(
            f"  {m['method']} {m['direction']} {count} err={m.get('errors', 0)} "
            f"p50={ms(m.get('p50Ms'))} p99={ms(m.get('p99Ms'))} max={ms(m.get('maxMs'))}"
        )
    return out


def _frame_line(f: dict[str, Any]) -> str:
    what = f"{f['kind'] or '?'}"
    if f["method"]:
        what += f" {f['method']}"
    if f["rpc_id"] is not None:
        what += f" id={f['rpc_id']}"
    if f["update_kind"]:
        what += f" [{f['update_kind']}]"
    line = f"connection {f['connection_id']} #{f['seq']} {f['direction']} {what}"
    if f["session_id"]:
        line += f" session {f['session_id']}"
    line += f" {f['size']}B"
    pair = f.get("pair")
    if pair and pair.get("seq") is not None:
        line += f" pair #{pair['seq']} {ms(pair['latency_ms'])}"
    elif pair:
        line += " unpaired"
    shown = f.get("text") or f.get("label")
    if f.get("error"):
        shown = f"error: {f['error']}"
    if shown and f.get("preview") is not None:
        line += f": {_clip(str(shown))}"
    return line


def _cut(text: str, whole: str) -> str:
    """``text`` cut at :data:`RAW_MAX` characters, saying how much of ``whole`` that is."""
    if len(text) <= RAW_MAX:
        return text
    return text[:RAW_MAX] + f"... [truncated: {RAW_MAX} characters of {whole} shown]"


def _member_line(member: dict[str, Any]) -> str:
    if "old" not in member:
        return f"{member['path']}: added {short(member['new'])}"
    if "new" not in member:
        return f"{member['path']}: removed (was {short(member['old'])})"
    return f"{member['path']}: {short(member['old'])} -> {short(member['new'])}"
