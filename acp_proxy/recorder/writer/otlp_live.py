"""Live OTLP export from the recorder's writer process: spans of what is being recorded.

The writer process (:mod:`acp_proxy.recorder.writer.main`) hands :class:`LiveExporter` every frame
it records (:meth:`LiveExporter.feed`), in order, and :meth:`LiveExporter.close` when a
connection ends. Frames are mapped to spans by :class:`~acp_proxy.acp.spans.SpanMapper`
(the same mapping as ``export --format otlp``, so the same ids) and each span that ends
goes to the official SDK's ``BatchSpanProcessor`` and ``OTLPSpanExporter`` (OTLP/HTTP,
protobuf), which send from their own thread.

Best-effort and bounded: at most :data:`QUEUE_SPANS` spans wait to be sent; a span that
finds the queue full, a batch the collector refused or never answered, and what is still
queued at exit are *dropped and counted*. The first loss of an incident prints one line on
stderr; an incident ends when a batch goes through again. Each connection's losses are
written to its ``events`` rows (kind ``otlp_drop``, detail ``{"spans": n, "reason": ...}``)
through the ``on_drop`` callback. Nothing here ever blocks the caller on the network.

Settings: ``--otlp-endpoint``/``--otlp-header`` reach this process as
:data:`ENDPOINT_ENV`/:data:`HEADERS_ENV`; otherwise the standard
``OTEL_EXPORTER_OTLP_ENDPOINT``/``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` switch it on, and the
SDK reads the other ``OTEL_EXPORTER_OTLP_*`` variables (headers, timeout, compression,
certificates) itself. ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` turn it off.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from acp_proxy.console import warn
from acp_proxy.recorder.writer.switches import CONTENT_ENV as CONTENT_ENV
from acp_proxy.recorder.writer.switches import ENDPOINT_ENV as ENDPOINT_ENV
from acp_proxy.recorder.writer.switches import HEADERS_ENV as HEADERS_ENV
from acp_proxy.recorder.writer.switches import STANDARD_ENDPOINT_ENVS, otlp_off
from acp_proxy.wire.frame import Direction, Frame

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

    from acp_proxy.acp.spans import SpanMapper

QUEUE_SPANS = 2048
"""Most spans waiting to be sent (the SDK's default queue size); beyond, spans are dropped."""

BATCH_SPANS = 512
"""Most spans per OTLP request (the SDK's default)."""

SCHEDULE_MILLIS = 500
"""How long ended spans gather before a request is sent (the SDK's default: 5 s)."""

SHUTDOWN_SECONDS = 2.0
"""At exit, how long queued spans may take to be sent before they count as dropped."""

FAILING_SHUTDOWN_SECONDS = 0.2
"""... and how long when the collector is failing at that moment."""

REQUEST_SETTLE_SECONDS = 0.5
"""At exit, past those, how long a request in progress may take to say whether its spans
arrived (they are counted by its outcome: sent or dropped, never both)."""

DROP_EVENT = "otlp_drop"
"""``events.kind`` of a connection's OTLP losses."""


@dataclass(frozen=True, slots=True)
class LiveSettings:
    """Where to send spans: the traces URL (``None``: the SDK's from the environment)."""

    endpoint: str | None
    headers: dict[str, str] = field(default_factory=dict)
    include_content: bool = False


def traces_url(endpoint: str) -> str:
    """``--otlp-endpoint``: a base URL gets ``/v1/traces``; a URL with a path is used as is."""
    parts = urlsplit(endpoint)
    if parts.path in ("", "/"):
        return endpoint.rstrip("/") + "/v1/traces"
    return endpoint


def settings_from_env(env: Mapping[str, str] | None = None) -> LiveSettings | None:
    """The live export settings in ``env`` (default: this process's), or ``None``: off."""
    env = os.environ if env is None else env
    if otlp_off(env):
        return None
    content = env.get(CONTENT_ENV) == "1"
    headers: dict[str, str] = {}
    with contextlib.suppress(ValueError):
        loaded = json.loads(env.get(HEADERS_ENV) or "{}")
        if isinstance(loaded, dict):
            headers = {str(k): str(v) for k, v in loaded.items()}
    ours = env.get(ENDPOINT_ENV)
    if ours:
        return LiveSettings(traces_url(ours), headers, content)
    if any(env.get(name) for name in STANDARD_ENDPOINT_ENVS):
        return LiveSettings(None, headers, content)
    return None


def _quiet_sdk_logging() -> None:
    """The SDK and urllib3 log each failure; our own counted line is the report."""
    for name in ("opentelemetry", "urllib3"):
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


@dataclass(slots=True)
class _Connection:
    mapper: SpanMapper | None  # None: closed, only its losses are left to report
    dropped: int = 0  # spans lost, not yet written as an event row
    reasons: set[str] = field(default_factory=set)


class LiveExporter:
    """Map recorded frames to spans and send them, best-effort, with a bounded queue.

    ``on_drop(connection_id, spans, reason)`` is called (from any thread) with each
    connection's losses when an incident ends and at :meth:`shutdown`.
    """

    def __init__(
        self,
        settings: LiveSettings,
        *,
        on_drop: Callable[[Any, int, str], None] | None = None,
        queue_spans: int = QUEUE_SPANS,
        warn_line: Callable[[str], None] = warn,
    ) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from acp_proxy.formats.otlp import resource

        _quiet_sdk_logging()
        self.settings = settings
        self._on_drop = on_drop
        self._warn = warn_line
        self._resource = resource()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # a request in progress ended
        self._sending: set[int] = set()  # span ids in a request in progress
        self._connections: dict[Any, _Connection] = {}
        self._owner: dict[int, Any] = {}  # span id -> connection, while queued
        self._closed_losses: dict[Any, _Connection] = {}  # losses of closed connections
        self._queue_spans = queue_spans
        self.in_flight = 0
        self.sent = 0
        self.dropped = 0
        self._incident = False
        self._finished = False
        self._target = settings.endpoint or "the OTLP endpoint"
        inner = OTLPSpanExporter(endpoint=settings.endpoint, headers=settings.headers or None)
        self._processor = BatchSpanProcessor(
            cast("SpanExporter", _CountingExporter(inner, self)),
            max_queue_size=queue_spans,
            schedule_delay_millis=SCHEDULE_MILLIS,
            max_export_batch_size=min(BATCH_SPANS, queue_spans),
        )

    # -- the writer's calls ----------------------------------------------------------------

    def open(self, connection_id: Any, started_at: float, transport: Any = None) -> None:
        """A connection starts (``started_at`` as stored in its row: the ids derive from it)."""
        from acp_proxy.acp.spans import SpanMapper
        from acp_proxy.formats.otlp import connection_attributes, connection_identity

        mapper = SpanMapper(
            connection_identity(started_at),
            include_content=self.settings.include_content,
            connection_attributes=connection_attributes(transport),
        )
        self._connections[connection_id] = _Connection(mapper)

    def feed(
        self,
        connection_id: Any,
        direction: Direction,
        raw: bytes,
        seq: int,
        ts: float,
        mono_ns: int,
    ) -> None:
        """One recorded frame of ``connection_id``."""
        conn = self._connections.get(connection_id)
        if conn is None:  # never opened: ids derive from its first frame's time
            self.open(connection_id, ts)
            conn = self._connections[connection_id]
        assert conn.mapper is not None
        ended = conn.mapper.feed(Frame(0, 0, seq, ts, mono_ns, direction, raw, len(raw)))
        if ended:
            self._emit(connection_id, ended)

    def close(self, connection_id: Any) -> None:
        """The connection ended: its open spans end and are sent."""
        conn = self._connections.pop(connection_id, None)
        if conn is None or conn.mapper is None:
            return
        self._emit(connection_id, conn.mapper.finish())
        if conn.dropped:
            self._report_connection(connection_id, conn)

    def shutdown(self, timeout: float = SHUTDOWN_SECONDS) -> int:
        """End every connection, send what is queued (up to ``timeout`` s); return drops."""
        for connection_id in list(self._connections):
            self.close(connection_id)
        if self._incident:  # the collector is failing already: do not hold the exit for it
            timeout = min(timeout, FAILING_SHUTDOWN_SECONDS)
        # BatchSpanProcessor.shutdown() waits up to 30 s for a stuck request: bound it here
        stopper = threading.Thread(target=self._processor.shutdown, daemon=True)
        stopper.start()
        stopper.join(timeout)
        with self._lock:
            # From now on no request starts (the exporter refuses it); what is queued is lost.
            self._finished = True
            left = [cid for sid, cid in self._owner.items() if sid not in self._sending]
            for sid in [sid for sid in self._owner if sid not in self._sending]:
                del self._owner[sid]
        if left:
            self._lost_spans(left, "not sent before exit")
        # A request in progress is waited for (a working collector answers in milliseconds):
        # its spans count as sent or lost by its outcome, never both.
        with self._settled:
            self._settled.wait_for(lambda: not self._sending, REQUEST_SETTLE_SECONDS)
            stuck = [self._owner.pop(sid) for sid in list(self._sending) if sid in self._owner]
            self._sending.clear()
            self.in_flight = 0
        if stuck:
            self._lost_spans(stuck, "a request still in progress at exit")
        self._flush_reports()
        if self.dropped:
            self._warn(
                f"OTLP: {self.dropped} span(s) could not be exported to {self._target} "
                f"({self.sent} sent); counted as {DROP_EVENT} events"
            )
        return self.dropped

    # -- internals -------------------------------------------------------------------------

    def _emit(self, connection_id: Any, records: Sequence[Any]) -> None:
        from acp_proxy.formats.otlp import readable_span

        full = 0
        for record in records:
            with self._lock:
                if self.in_flight >= self._queue_spans:
                    full += 1
                    continue
                self.in_flight += 1
                self._owner[record.span_id] = connection_id
            self._processor.on_end(readable_span(record, self._resource))
        if full:
            self._lost_spans([connection_id] * full, "queue full")

    def _sending_batch(self, batch: Sequence[ReadableSpan]) -> bool:
        """A request is about to carry ``batch``; False once shutdown has counted it lost."""
        with self._lock:
            if self._finished:
                return False
            self._sending.update(span.context.span_id for span in batch)
            return True

    def _exported(self, batch: Sequence[ReadableSpan], ok: bool, reason: str) -> None:
        owners: list[Any] = []
        with self._lock:
            for span in batch:
                sid = span.context.span_id
                if sid not in self._sending:  # counted already (shutdown gave up on it)
                    continue
                self._sending.discard(sid)
                owners.append(self._owner.pop(sid, None))
                self.in_flight = max(0, self.in_flight - 1)
            if ok:
                self.sent += len(owners)
            self._settled.notify_all()
        if not owners:
            return
        if ok:
            if self._incident and not self._finished:
                self._incident = False
                self._flush_reports()
            return
        self._lost_spans(owners, reason)

    def _lost_spans(self, owners: list[Any], reason: str) -> None:
        warn_now = False
        with self._lock:
            self.dropped += len(owners)
            for cid in owners:
                conn = self._connections.get(cid)
                if conn is None:
                    conn = self._closed_losses.setdefault(cid, _Connection(None))
                conn.dropped += 1
                conn.reasons.add(reason)
            if not self._incident:
                self._incident = warn_now = True
        if warn_now:
            self._warn(
                f"OTLP export to {self._target} failing ({reason}): spans are dropped and "
                "counted; forwarding and recording go on"
            )

    def _report_connection(self, connection_id: Any, conn: _Connection) -> None:
        with self._lock:
            spans, reasons = conn.dropped, sorted(conn.reasons)
            conn.dropped = 0
            conn.reasons.clear()
        if spans and self._on_drop is not None:
            with contextlib.suppress(Exception):
                self._on_drop(connection_id, spans, ", ".join(reasons))

    def _flush_reports(self) -> None:
        with self._lock:
            pending = [
                (cid, c) for cid, c in (*self._connections.items(), *self._closed_losses.items())
            ]
        for cid, conn in pending:
            if conn.dropped:
                self._report_connection(cid, conn)
        with self._lock:
            self._closed_losses = {k: v for k, v in self._closed_losses.items() if v.dropped}


class _CountingExporter:
    """The OTLP exporter, with each batch's outcome reported to the :class:`LiveExporter`."""

    def __init__(self, inner: Any, owner: LiveExporter) -> None:
        self._inner = inner
        self._owner = owner

    def export(self, spans: Sequence[ReadableSpan]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        if not self._owner._sending_batch(spans):
            return SpanExportResult.FAILURE  # past the exit's deadline: counted as not sent
        try:
            result = self._inner.export(spans)
        except Exception as exc:  # the SDK returns FAILURE; be sure anyway
            self._owner._exported(spans, False, f"{type(exc).__name__}")
            return SpanExportResult.FAILURE
        ok = result == SpanExportResult.SUCCESS
        self._owner._exported(spans, ok, "the collector did not accept them")
        return result

    def shutdown(self, timeout_millis: float = 30_000, **_kwargs: Any) -> None:
        with contextlib.suppress(Exception):
            self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


# -- the writer-side hook (recorder/writer/main.py passes live_observer() to its pipeline) ---------


class LiveObserver:
    """Feeds the writer pipeline's operations to a :class:`LiveExporter` (a pipeline observer).

    :meth:`observe` sees every batch where the writer has numbered the frames (its rows
    thread, off the forwarding path), in order; frames go to :meth:`LiveExporter.feed`,
    connection opens and closes to :meth:`~LiveExporter.open` / :meth:`~LiveExporter.close`.
    Losses the exporter reports (from any thread) come back as ``otlp_drop`` event rows with
    the next batch; :meth:`finish` ends the last spans once everything was observed and
    returns the last event rows, before the database closes.
    """

    def __init__(self, settings: LiveSettings) -> None:
        self._events: list[Any] = []
        self._lock = threading.Lock()
        self.live = LiveExporter(settings, on_drop=self._dropped)

    def _dropped(self, conn: Any, spans: int, reason: str) -> None:
        from acp_proxy.recorder.writer.rows import ControlOp

        op = ControlOp(
            conn,
            "event",
            {"kind": DROP_EVENT, "detail": {"spans": spans, "reason": reason}, "ts": time.time()},
        )
        with self._lock:
            self._events.append(op)

    def _take_events(self) -> list[Any]:
        with self._lock:
            events, self._events = self._events, []
        return events

    def observe(self, ops: Sequence[Any]) -> list[Any]:
        """Feed one batch of operations; return event operations to store with it."""
        from acp_proxy.recorder.writer.rows import ControlOp, RowsOp

        live = self.live
        for op in ops:
            if isinstance(op, RowsOp):
                for row in op.frames:  # (cid, seq, ts, mono_ns, direction, raw, size, ...)
                    live.feed(op.conn, row[4], bytes(row[5]), row[1], row[2], row[3])
            elif isinstance(op, ControlOp):
                if op.op == "open":
                    started = op.fields.get("started_at")
                    if isinstance(started, (int, float)):
                        live.open(op.conn, float(started), op.fields.get("transport"))
                elif op.op == "close":
                    live.close(op.conn)
        return self._take_events()

    def finish(self) -> list[Any]:
        """End of input: end every span, send what can be sent; the last event operations."""
        self.live.shutdown()
        return self._take_events()


NO_SDK = "OTLP export disabled: it needs pip install 'acp-proxy[otlp]'"
"""What a bare install (no ``otlp`` extra) is told when live export is asked for."""


def sdk_installed() -> bool:
    """Whether the OpenTelemetry SDK and its OTLP/HTTP exporter can be found (not imported)."""
    try:
        return all(
            importlib.util.find_spec(name) is not None
            for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
        )
    except (ImportError, ValueError):
        return False


def live_observer() -> LiveObserver | None:
    """A :class:`LiveObserver` for the writer process if the environment asks for live export.

    Returns ``None`` (nothing attached) when live export is off or the SDK cannot start.
    """
    settings = settings_from_env()
    if settings is None:
        return None
    try:
        return LiveObserver(settings)
    except ImportError:
        warn(NO_SDK)
        return None
    except Exception as exc:  # a broken install must not stop the recording
        warn(f"OTLP export disabled: {type(exc).__name__}: {exc}")
        return None
