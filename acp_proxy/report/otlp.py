"""A recording as OpenTelemetry spans: OTLP JSON lines (``export --format otlp``).

One OTLP ``ExportTraceServiceRequest`` per connection, as a line of JSON (the collector's
file exporter format); the mapping is :mod:`acp_proxy.acp.spans` (docs/otlp.md), the
encoding :mod:`acp_proxy.formats.otlp` (the OpenTelemetry packages, imported only when a
line is asked for).
"""

from __future__ import annotations

from collections.abc import Iterator

from acp_proxy.acp.span_records import SpanRecord
from acp_proxy.formats.redact import redact_frame
from acp_proxy.store.engine import Database
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import RecordingError


def select_session(spans: list[SpanRecord], session_id: str) -> list[SpanRecord]:
    """The spans of one session: those naming it, and everything under them."""
    kept: set[int] = set()
    by_id = {s.span_id: s for s in spans}
    out: list[SpanRecord] = []

    def keep(span: SpanRecord, seen: int = 0) -> bool:
        if span.span_id in kept or span.attributes.get("gen_ai.conversation.id") == session_id:
            return True
        parent = by_id.get(span.parent_span_id) if span.parent_span_id is not None else None
        return parent is not None and seen < 64 and keep(parent, seen + 1)

    for span in spans:
        if keep(span):
            kept.add(span.span_id)
            out.append(span)
    return out


def otlp_lines(
    db: Database,
    *,
    connection_id: int | None = None,
    session_id: str | None = None,
    include_content: bool = False,
    redact: bool = True,
) -> Iterator[tuple[str, int]]:
    """(OTLP JSON line, span count) per connection with spans, oldest connection first."""
    from acp_proxy.formats.otlp import (  # the OpenTelemetry packages: only when asked for
        connection_attributes,
        connection_identity,
        export_request,
        frames_to_spans,
        json_line,
        resource,
    )

    res = resource()
    connections = RecordingReader(db).connections()
    if connection_id is not None:
        connections = [c for c in connections if c.id == connection_id]
        if not connections:
            raise RecordingError(f"no connection {connection_id} in this recording")
    for conn in connections:
        frames = (
            (
                f.direction,
                redact_frame(f.raw, binary=f.binary) if include_content and redact else f.raw,
                f.seq,
                f.ts,
                f.mono_ns,
            )
            for f in RecordingReader(db).frames(connection_id=conn.id)
        )
        spans = frames_to_spans(
            connection_identity(conn.started_at),
            frames,
            include_content=include_content,
            attributes=connection_attributes(conn.transport),
        )
        if session_id is not None:
            spans = select_session(spans, session_id)
        if spans:
            yield json_line(export_request(spans, res)), len(spans)
