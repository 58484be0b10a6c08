"""The ``--metrics HOST:PORT`` server: ``/metrics`` (Prometheus text), ``/healthz``, ``/readyz``.

A small :class:`http.server.ThreadingHTTPServer` in a daemon thread of its own, never on a
forwarding thread or event loop. Every figure is read at scrape time: the forwarding paths
only add to plain integers (:mod:`~acp_proxy.counters`), and the recorder's
figures come from what the journal and the writer process already report to the proxy (its
progress lines). Access rules are the inspector's: loopback by default, a token
(``Authorization: Bearer`` or ``?token=``) required when given, and mandatory off loopback;
TLS with the server context of :mod:`~acp_proxy.transport.tls`.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from acp_proxy.counters import COUNTERS, Counters
from acp_proxy.transport.address import check_listen
from acp_proxy.transport.ws.rules import token_from, token_ok

DIRECTIONS = ("c2a", "a2c")
"""The forwarded directions always exposed (at 0 before the first frame)."""


class RecorderFigures:
    """What a :class:`~acp_proxy.recorder.handle.Recorder` says about itself, read at scrape time.

    With the process backend, the written, dropped and backlog figures are the writer's own
    progress lines (``WriterProcess``); with threads, the pipeline's attributes.
    """

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder

    def _writer(self) -> Any:
        shipper = getattr(self.recorder, "_shipper", None)
        if shipper is not None:
            return shipper.writer
        return getattr(self.recorder, "_pipeline", None)

    def readiness(self) -> tuple[bool, str]:
        """``(ready, one line)``: ready while frames are accepted and the store is reachable."""
        recorder = self.recorder
        if recorder is None:
            return True, "ready"
        if not recorder.enabled:
            return True, "ready: forwarding (not recording)"
        failed = recorder.journal.failed
        if failed is not None:
            return False, f"not ready: {failed}"
        shipper = getattr(recorder, "_shipper", None)
        if shipper is not None and shipper.died:
            return False, "not ready: the recorder's writer process exited"
        writer = self._writer()
        if writer is not None and getattr(writer, "store_away", False):
            return False, f"not ready: the store {recorder.where} is unreachable; frames wait"
        return True, f"ready: recording to {recorder.where}"

    def collect(self) -> Iterator[Metric]:
        recorder = self.recorder
        if recorder is None or not recorder.enabled:
            return
        journal = recorder.journal
        writer = self._writer()
        written, dropped, in_writer = 0, journal.unreported_frames(), 0
        if writer is not None:
            written = writer.frames_written
            # the writer process reports a count; the threads' pipeline counts on demand
            dropped += writer.dropped if isinstance(writer.dropped, int) else writer.dropped()
            in_writer = getattr(writer, "queued_bytes", 0)
        queued, spooled = journal.queued_bytes(), journal.spooled_bytes()
        progressed = getattr(writer, "progressed_at", None)
        behind = queued + in_writer
        lag = time.monotonic() - progressed if behind and progressed is not None else 0.0
        yield _counter("frames_recorded", "Frames committed to the store.", written)
        yield _counter(
            "frames_dropped",
            "Frames forwarded but not recorded (backlog full, store failed).",
            dropped,
        )
        yield _gauge(
            "recorder_queue_bytes",
            "Bytes waiting for the writer in memory.",
            queued - spooled + in_writer,
        )
        yield _gauge("recorder_spool_bytes", "Bytes waiting for the writer on disk.", spooled)
        yield _gauge(
            "recorder_lag_seconds",
            "Seconds since the writer last committed, while a backlog waits (0: caught up).",
            lag,
        )
        away = bool(getattr(writer, "store_away", False)) if writer is not None else False
        yield _gauge(
            "store_up",
            "1 while the store accepts batches, 0 during an outage or after a failure.",
            0 if away or journal.failed is not None else 1,
        )
        yield _counter(
            "store_outages",
            "Times the database server went away (each is waited out, frames kept).",
            getattr(writer, "outages", 0) if writer is not None else 0,
        )
        measures: Any = getattr(writer, "measures", None)
        if hasattr(measures, "snapshot"):  # the threads' pipeline: its Measures itself
            measures = measures.snapshot()
        measures = measures or {}
        yield from timing_families(measures.get("timings") or {})
        yield from finding_families(measures.get("findings"))
        if "check_cpu" in measures:
            yield _counter(
                "live_check_cpu_seconds",
                "CPU seconds the recorder's writer spent on the live conformance check.",
                measures["check_cpu"],
            )
        otlp = measures.get("otlp")
        if otlp is not None:
            yield _counter(
                "otlp_spans_exported", "Spans the OTLP collector accepted.", otlp["exported"]
            )
            yield _counter(
                "otlp_spans_dropped",
                "Spans not exported (queue full, collector failing, exit deadline).",
                otlp["dropped"],
            )


def finding_families(findings: list[list[Any]] | None) -> Iterator[Metric]:
    """The live conformance findings (rule id, tier, side, count) as one counter family;
    nothing when the live check is off."""
    if findings is None:
        return
    family = CounterMetricFamily(
        "acp_proxy_findings",
        "Conformance findings (as acp-proxy check reports them), by rule, tier and side.",
        labels=["rule", "tier", "side"],
    )
    for rule, tier, side, count in findings:
        family.add_metric([str(rule), str(tier), str(side)], count)
    yield family


def _histogram(family: HistogramMetricFamily, labels: list[str], data: dict[str, Any]) -> None:
    """Add one histogram of a :meth:`~acp_proxy.recorder.writer.timings.Timings.snapshot`."""
    running, buckets = 0, []
    for bound, count in zip([*data["bounds"], "+Inf"], data["counts"], strict=True):
        running += count
        buckets.append((str(float(bound)) if bound != "+Inf" else bound, running))
    family.add_metric(labels, buckets, data["sum"])


def timing_families(snapshot: dict[str, Any]) -> Iterator[Metric]:
    """The writer's request, turn and first-chunk histograms as metric families."""
    requests = HistogramMetricFamily(
        "acp_proxy_request_duration_seconds",
        "Request to response, by method (the spec's methods, else other).",
        labels=["method"],
    )
    for method, data in sorted(snapshot.get("requests", {}).items()):
        _histogram(requests, [method], data)
    yield requests
    turns = HistogramMetricFamily(
        "acp_proxy_turn_duration_seconds", "session/prompt to its response."
    )
    first = HistogramMetricFamily(
        "acp_proxy_first_chunk_seconds", "session/prompt to the first agent_message_chunk."
    )
    for family, key in ((turns, "turns"), (first, "first_chunk")):
        if key in snapshot:
            _histogram(family, [], snapshot[key])
        yield family


def _counter(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> Metric:
    family = CounterMetricFamily(f"acp_proxy_{name}", doc, labels=list(labels or ()))
    family.add_metric(list((labels or {}).values()), value)
    return family


def _gauge(name: str, doc: str, value: float) -> Metric:
    return GaugeMetricFamily(f"acp_proxy_{name}", doc, value=value)


class ProxyCollector(Collector):
    """The process's figures as Prometheus metric families, built anew at every scrape."""

    def __init__(self, counters: Counters, figures: RecorderFigures) -> None:
        self.counters = counters
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        counters = self.counters
        is_open = GaugeMetricFamily(
            "acp_proxy_connections_open", "Connections open now.", labels=["transport"]
        )
        total = CounterMetricFamily(
            "acp_proxy_connections", "Connections accepted or started.", labels=["transport"]
        )
        for transport, count in sorted(counters.connections_total.items()):
            is_open.add_metric([transport], counters.connections_open[transport])
            total.add_metric([transport], count)
        yield is_open
        yield total
        frames = CounterMetricFamily(
            "acp_proxy_frames_forwarded", "Frames forwarded, by direction.", labels=["direction"]
        )
        nbytes = CounterMetricFamily(
            "acp_proxy_bytes_forwarded", "Bytes forwarded, by direction.", labels=["direction"]
        )
        for direction in sorted({*DIRECTIONS, *counters.forwarded}):
            seen = counters.forwarded[direction]
            frames.add_metric([direction], seen.frames)
            nbytes.add_metric([direction], seen.nbytes)
        yield frames
        yield nbytes
        yield from self.figures.collect()


class MetricsHandle:
    """A running metrics server: its URL, and how to stop it."""

    def __init__(self, server: ThreadingHTTPServer, url: str, thread: threading.Thread) -> None:
        self.server = server
        self.url = url
        self.thread = thread

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()


def _handler(
    registry: CollectorRegistry, readiness: Callable[[], tuple[bool, str]], token: str | None
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "acp-proxy-metrics"
        timeout = 10.0  # a client that stops sending mid-request holds only its own thread

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            if token is not None:
                query = dict(parse_qsl(parts.query))
                if not token_ok(token_from(dict(self.headers.items()), query), token):
                    self._reply(401, b"a valid token is required (Authorization: Bearer ...)\n")
                    return
            if parts.path == "/metrics":
                self._reply(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif parts.path == "/healthz":
                self._reply(200, b"ok\n")
            elif parts.path == "/readyz":
                ready, line = readiness()
                self._reply(200 if ready else 503, line.encode() + b"\n")
            else:
                self._reply(404, b"not found: try /metrics, /healthz or /readyz\n")

        def _reply(self, status: int, body: bytes, kind: str = "text/plain; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # stderr belongs to the agent and the proxy's own one-line messages

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def start_metrics(
    host: str,
    port: int,
    recorder: Any,
    *,
    token: str | None = None,
    tls: ssl.SSLContext | None = None,
    counters: Counters = COUNTERS,
) -> MetricsHandle:
    """Serve the metrics of this process (and of ``recorder``, if any) from a daemon thread.

    Raises :class:`~acp_proxy.transport.address.ListenError` for a non-loopback address
    without a token and :class:`OSError` when the address cannot be bound.
    """
    check_listen(host, token, what="the metrics server")
    figures = RecorderFigures(recorder)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ProxyCollector(counters, figures))
    kind = _Server6 if ":" in host else _Server
    server = kind((host.strip("[]"), port), _handler(registry, figures.readiness, token))
    if tls is not None:
        # The handshake happens on the request's own thread (its first read), not in accept.
        server.socket = tls.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    counters.enabled = True
    bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    url = f"{'https' if tls is not None else 'http'}://{shown}:{bound_port}/metrics"
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.5}, name="metrics", daemon=True
    )
    thread.start()
    return MetricsHandle(server, url, thread)
