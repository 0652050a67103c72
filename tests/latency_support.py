"""Real services with real delays for the latency-model tests.

* ``table_of``: OpenTelemetry SDK spans -> the tracelens span table (through OTLP protobuf and
  the real importer).
* ``DelayProxy``: a TCP proxy on 127.0.0.1 that holds every chunk for ``delay_s`` in each
  direction (an injected network delay) and measures how long it really held them.
* ``TracedServer``: an HTTP server whose handler is a SERVER span joined to the caller's trace
  (``traceparent``), doing a fixed amount of work.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pyarrow as pa
from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from tracelens.ingest import read_bytes


def table_of(spans: Sequence[ReadableSpan]) -> pa.Table:
    data = encode_spans(spans).SerializeToString()
    return read_bytes(data, "memory.pb", "otlp-proto")


class DelayProxy:
    """Forwards 127.0.0.1:port -> target, each chunk held ``delay_s`` (measured in ``held``)."""

    def __init__(self, target: tuple[str, int], delay_s: float) -> None:
        self.target = target
        self.delay_s = delay_s
        self.held: list[float] = []
        self._lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            up = socket.create_connection(self.target)
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                t0 = time.perf_counter()
                time.sleep(self.delay_s)
                with self._lock:
                    self.held.append(time.perf_counter() - t0)
                dst.sendall(chunk)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        self._stop = True
        self.sock.close()


class TracedServer(ThreadingHTTPServer):
    """GET any path: a SERVER span (parented by the request's ``traceparent``) that sleeps
    ``work_s`` and answers a small JSON body."""

    def __init__(self, tracer: Any, work_s: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tracer = tracer
        self.work_s = work_s
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", int(self.server_address[1])


class _Handler(BaseHTTPRequestHandler):
    server: TracedServer
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        ctx = propagate.extract({k.lower(): v for k, v in self.headers.items()})
        with self.server.tracer.start_as_current_span(
            f"GET {self.path.split('?')[0]}", context=ctx, kind=trace.SpanKind.SERVER
        ):
            time.sleep(self.server.work_s)
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass
