"""The ``html`` export format: one self-contained file a bug report can carry.

What the inspector shows of the chosen connections (the conversation of each session,
every frame's exact bytes, the conformance findings, the timeline of requests and turns)
is gathered through the inspector's own views (:mod:`acp_proxy.web.views`), redacted like
the JSONL export (:mod:`acp_proxy.formats.redact`) unless asked not to, and embedded as
JSON in a page with its CSS and JavaScript inline. The page makes no request to any host:
its Content-Security-Policy forbids every fetch, image and font, and the script builds the
page with ``textContent`` only, never HTML from the data. The embedded JSON escapes ``<``,
``>``, ``&`` and the line separators, so no recorded text can end the script element.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from importlib import resources
from typing import IO, Any

import orjson

from acp_proxy.formats.redact import RedactRules, redact_argv, redact_value, rules_for
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import RecordingError
from acp_proxy.web import store, views

DEFAULT_MAX_FRAMES = 5000
"""Frames embedded at most, over all the chosen connections (``--max-frames``)."""

SESSION_ITEMS_MAX = 5000
"""Conversation items embedded at most per session."""

FRAME_BYTES_MAX = 256 * 1024
"""A frame longer than this is embedded cut (its size says how long it was)."""


@dataclass
class HtmlSummary:
    """What one HTML export holds."""

    connections: int = 0
    frames: int = 0
    frames_cut: int = 0
    redacted: int = 0


def _escaped_json(data: Any) -> bytes:
    """JSON that is safe inside a ``<script>`` element and in any HTML parser state."""
    raw = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    for char, escape in (
        (b"&", b"\\u0026"),
        (b"<", b"\\u003c"),
        (b">", b"\\u003e"),
        ("\u2028".encode(), b"\\u2028"),
        ("\u2029".encode(), b"\\u2029"),
    ):
        raw = raw.replace(char, escape)
    return raw


def _frame_json(f: Any, redact: RedactRules | None, summary: HtmlSummary) -> dict[str, Any]:
    raw: bytes = f.raw
    if redact is not None:
        clean = redact.frame(raw, binary=f.binary)
        if clean != raw:
            summary.redacted += 1
        raw = clean
    item: dict[str, Any] = {
        "seq": f.seq,
        "ts": f.ts,
        "direction": f.direction,
        "kind": f.kind,
        "method": f.method,
        "rpcId": f.rpc_id,
        "sessionId": f.session_id,
        "update": f.update_kind,
        "size": len(raw),
        "cut": len(raw) > FRAME_BYTES_MAX,
    }
    shown = raw[:FRAME_BYTES_MAX]
    try:
        item["text"] = shown.decode("utf-8")
    except UnicodeDecodeError:
        item["base64"] = base64.b64encode(shown).decode("ascii")
    return item


def _connection(
    where: store.Location,
    reader: RecordingReader,
    row: dict[str, Any],
    budget: int,
    summary: HtmlSummary,
    redact: RedactRules | None,
) -> dict[str, Any]:
    cid = int(row["id"])
    sessions = []
    for span in row.get("sessions") or ():
        view = views.session_view(where, reader, cid, span["session_id"], limit=SESSION_ITEMS_MAX)
        sessions.append({"sessionId": span["session_id"], "view": view})
    frames = []
    total = reader.frame_count(cid)
    for f in reader.frames(connection_id=cid, limit=max(0, budget)):
        frames.append(_frame_json(f, redact, summary))
    summary.frames += len(frames)
    summary.frames_cut += total - len(frames)
    data: dict[str, Any] = {
        "connection": row,
        "sessions": sessions,
        "findings": views.findings(where, reader, cid),
        "timeline": views.timeline(where, reader, cid),
        "frames": frames,
        "framesTotal": total,
    }
    if redact is not None:
        data["connection"], hit = redact_value(data["connection"], rules=redact)
        if isinstance(row.get("agent_command"), list):
            data["connection"]["agent_command"], changed = redact_argv(row["agent_command"])
            hit = hit or changed
        for key in ("sessions", "findings", "timeline"):
            data[key], changed = redact_value(data[key], rules=redact)
            hit = hit or changed
        summary.redacted += hit
    return data


def export_html(
    path: store.Location | str,
    out: IO[bytes],
    *,
    connection_ids: list[int] | None = None,
    redact: bool | RedactRules | None = True,
    max_frames: int = DEFAULT_MAX_FRAMES,
    title: str | None = None,
) -> HtmlSummary:
    """Write the HTML report of ``connection_ids`` (all when ``None``) of the store at
    ``path`` to ``out``; :class:`RecordingError` for an unknown connection."""
    where = store.location(path)
    rules = rules_for(redact)
    summary = HtmlSummary()
    with store.read_connection(where) as reader:
        rows = views.connections(where, reader)
        if connection_ids is not None:
            known = {int(r["id"]) for r in rows}
            for cid in connection_ids:
                if cid not in known:
                    raise RecordingError(f"no connection {cid} in this recording")
            rows = [r for r in rows if int(r["id"]) in connection_ids]
        conns = []
        for row in rows:
            budget = max_frames - summary.frames
            conns.append(_connection(where, reader, row, budget, summary, rules))
        summary.connections = len(conns)
    data = {
        "title": title or store.location_label(where),
        "redacted": rules is not None,
        "maxFrames": max_frames,
        "framesCut": summary.frames_cut,
        "connections": conns,
    }
    assets = resources.files("acp_proxy.web").joinpath("static")
    css = assets.joinpath("report.css").read_bytes()
    js = assets.joinpath("report.js").read_bytes()
    name = (title or store.location_label(where)).encode()
    safe_name = name.replace(b"&", b"&amp;").replace(b"<", b"&lt;").replace(b">", b"&gt;")
    out.write(
        b'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
        b'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        b"style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src 'none'; "
        b"connect-src 'none'; form-action 'none'; base-uri 'none'\">\n"
        b'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        b"<title>acp-proxy report: " + safe_name + b"</title>\n<style>\n" + css + b"</style>\n"
        b'</head><body>\n<div id="report"><noscript>This report needs JavaScript to show '
        b"the recording (it is embedded below as JSON).</noscript></div>\n"
        b'<script type="application/json" id="report-data">' + _escaped_json(data) + b"</script>\n"
        b"<script>\n" + js + b"</script>\n</body></html>\n"
    )
    return summary
