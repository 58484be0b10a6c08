"""Test collectors on 127.0.0.1 port 0: a real OTLP/HTTP receiver, a stalled one, a dead port.

The receiver decodes every ``POST /v1/traces`` body with the official
``opentelemetry-proto`` ``ExportTraceServiceRequest`` and keeps the spans.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Received:
    """What a collector got: the decoded requests, and the paths and headers of each."""

    requests: list[ExportTraceServiceRequest] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def spans(self) -> list[Any]:
        with self.lock:
            return [
                span
                for req in self.requests
                for rs in req.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
            ]

    def wait_spans(self, count: int, timeout: float = 30.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = self.spans()
            if len(spans) >= count:
                return spans
            time.sleep(0.05)
        return self.spans()


@contextlib.contextmanager
def otlp_collector() -> Iterator[tuple[str, Received]]:
    """A working OTLP/HTTP protobuf receiver: yields (base URL, what it received)."""
    got = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with got.lock:
                got.requests.append(request)
                got.paths.append(self.path)
                got.headers.append({k.lower(): v for k, v in self.headers.items()})
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def stalled_collector() -> Iterator[str]:
    """Accepts TCP connections and reads, but never answers: yields its base URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def refused_url() -> str:
    """A base URL on which nothing listens (connections are refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"
