"""Span records as OpenTelemetry objects: SDK spans, OTLP protobuf requests and OTLP JSON.

:mod:`acp_proxy.acp.spans` maps frames to plain :class:`~acp_proxy.acp.span_records.SpanRecord`
items; this module turns them into the official SDK's ``ReadableSpan`` (what the live
exporter's ``BatchSpanProcessor``/``OTLPSpanExporter`` take) and, through the official
encoder, into ``opentelemetry-proto`` ``ExportTraceServiceRequest`` messages. The OTLP JSON
lines of ``export --format otlp`` are those messages printed by protobuf's ``json_format``,
with the one change the OTLP/JSON specification makes to protobuf's JSON mapping: trace and
span ids are hex strings, not base64 (what the collector's file exporter writes and its
``otlpjsonfile`` receiver reads).

One connection's frames are mapped by :func:`connection_spans` (the export) or fed frame by
frame (the live exporter); both use :func:`connection_identity` so ids agree.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from acp_proxy.acp.span_records import AttrValue, SpanRecord
from acp_proxy.acp.spans import SpanMapper
from acp_proxy.wire.frame import Direction, Frame

SERVICE_NAME = "acp-proxy"
SCOPE = InstrumentationScope("acp_proxy", "0.1.0")

_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT, "server": SpanKind.SERVER}
_STATUS = {"unset": StatusCode.UNSET, "ok": StatusCode.OK, "error": StatusCode.ERROR}
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def connection_identity(started_at: float) -> str:
    """The text span ids of a connection derive from: its start time, exactly."""
    return repr(float(started_at))


def connection_attributes(transport: Any) -> dict[str, AttrValue]:
    """Facts about the connection for its root span (known alike live and from the file)."""
    return {"acp.connection.transport": transport} if isinstance(transport, str) else {}


def resource() -> Resource:
    """The resource every span is exported under (``service.name`` acp-proxy).

    Built directly, not with ``Resource.create``: that adds a random
    ``service.instance.id``, and an export must be reproducible.
    """
    return Resource({"service.name": SERVICE_NAME, "service.version": SCOPE.version or ""})


def _trace_state(text: str | None) -> TraceState | None:
    if not text:
        return None
    try:
        return TraceState.from_header([text])
    except ValueError:
        return None


def readable_span(record: SpanRecord, res: Resource) -> ReadableSpan:
    """One record as the SDK's ``ReadableSpan``."""
    flags = TraceFlags(TraceFlags.SAMPLED)
    context = SpanContext(
        record.trace_id,
        record.span_id,
        is_remote=False,
        trace_flags=flags,
        trace_state=_trace_state(record.trace_state),
    )
    parent = (
        SpanContext(
            record.trace_id,
            record.parent_span_id,
            is_remote=record.remote_parent,
            trace_flags=flags,
        )
        if record.parent_span_id is not None
        else None
    )
    events = [Event(e.name, dict(e.attributes), e.time_ns) for e in record.events]
    links = [
        Link(SpanContext(trace_id, span_id, is_remote=False, trace_flags=flags))
        for trace_id, span_id in record.links
    ]
    return ReadableSpan(
        record.name,
        context=context,
        parent=parent,
        resource=res,
        attributes=dict(record.attributes),
        events=events,
        links=links,
        kind=_KINDS.get(record.kind, SpanKind.INTERNAL),
        status=Status(_STATUS.get(record.status, StatusCode.UNSET), record.status_message),
        start_time=record.start_ns,
        end_time=record.end_ns,
        instrumentation_scope=SCOPE,
    )


def export_request(records: Sequence[SpanRecord], res: Resource) -> ExportTraceServiceRequest:
    """The OTLP request (official encoder) carrying ``records``."""
    return encode_spans([readable_span(r, res) for r in records])


def _hex_ids(value: Any) -> None:
    """Protobuf JSON spells bytes as base64; OTLP/JSON wants trace/span ids in hex."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _ID_FIELDS and isinstance(item, str):
                value[key] = base64.b64decode(item).hex()
            else:
                _hex_ids(item)
    elif isinstance(value, list):
        for item in value:
            _hex_ids(item)


def json_line(request: ExportTraceServiceRequest) -> str:
    """One line of the collector's OTLP JSON file format for ``request``."""
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    _hex_ids(data)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def parse_json_line(line: str) -> ExportTraceServiceRequest:
    """An OTLP JSON line back as the protobuf request (hex ids converted back)."""
    data = json.loads(line)

    def unhex(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in _ID_FIELDS and isinstance(item, str):
                    value[key] = base64.b64encode(bytes.fromhex(item)).decode()
                else:
                    unhex(item)
        elif isinstance(value, list):
            for item in value:
                unhex(item)

    unhex(data)
    request = ExportTraceServiceRequest()
    json_format.ParseDict(data, request)
    return request


def frames_to_spans(
    identity: str,
    frames: Iterable[tuple[Direction, bytes, int, float, int]],
    *,
    include_content: bool = False,
    attributes: dict[str, AttrValue] | None = None,
) -> list[SpanRecord]:
    """All spans of one connection from its frames (direction, raw, seq, ts, mono_ns)."""
    mapper = SpanMapper(identity, include_content=include_content, connection_attributes=attributes)
    out: list[SpanRecord] = []
    for direction, raw, seq, ts, mono_ns in frames:
        out.extend(mapper.feed(Frame(0, 0, seq, ts, mono_ns, direction, raw, len(raw))))
    out.extend(mapper.finish())
    return out
