"""What each HTTP path answers.

``POST /v1/traces``   OTLP/HTTP export (protobuf or JSON, optionally gzip/deflate)
``POST /v1/metrics``, ``/v1/logs``   404 with a Status saying they are not collected
``GET /health``       ``{"status": "ok"}``; 503 ``draining`` while shutting down, 503 ``degraded``
                      (with ``reason``) while the journal or the store cannot be written
``GET /stats``        counters (received, stored, rejected, queue depth, latencies)
``GET /metrics``      the same and the span metrics, in the Prometheus text format (``metrics``)
``GET /v1/spans``     the stored spans as an Arrow IPC stream (``columns``, ``start_ns``,
                      ``end_ns`` query parameters): how other processes read while the collector
                      holds the DuckDB file
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

import pyarrow as pa

from tracelens.collector import otlp
from tracelens.collector.auth import bearer_matches
from tracelens.collector.http import Request, Response
from tracelens.collector.metrics import CONTENT_TYPE as METRICS_TYPE
from tracelens.collector.metrics import CollectorMetrics
from tracelens.collector.receive import Outcome, Receiver, Status
from tracelens.errors import StoreError
from tracelens.store import DuckDBStore

ARROW_STREAM: Final = "application/vnd.apache.arrow.stream"
_SIGNALS: Final = {"/v1/metrics": "metrics", "/v1/logs": "logs"}
FLUSH_S: Final = 30.0  # a read waits this long for acknowledged spans to reach the store
READ_BATCH: Final = 16_384  # spans per Arrow message of GET /v1/spans


class _Unavailable(Exception):
    """A read the store cannot answer now (503 with the reason, at once)."""


@dataclass(eq=False)
class Routes:
    """The collector's endpoints over its receiver (writes) and reader (reads); ``token``, when
    set, guards every one of them.  A service object: equal only to itself."""

    receiver: Receiver
    reader: DuckDBStore
    token: str | None = field(repr=False)
    metrics: CollectorMetrics | None = None
    draining: bool = field(default=False, init=False)

    def refuse(self, status: int, message: str, media: str = otlp.JSON) -> Response:
        code = {
            400: otlp.INVALID_ARGUMENT,
            401: otlp.UNAUTHENTICATED,
            404: otlp.NOT_FOUND,
            408: otlp.DEADLINE_EXCEEDED,
            413: otlp.RESOURCE_EXHAUSTED,
            501: otlp.UNIMPLEMENTED,
            503: otlp.UNAVAILABLE,
        }.get(status, otlp.INTERNAL)
        if status in (415, 405, 431):
            code = otlp.INVALID_ARGUMENT
        return Response(status, otlp.status_body(code, message, media), media)

    async def __call__(self, request: Request, body: Callable[[], Awaitable[bytes]]) -> Response:
        if not self._authorized(request):
            self.receiver.stats.add(requests_unauthorized=1)
            response = self.refuse(
                401, "missing or wrong Authorization: Bearer token", _answer_media(request)
            )
            response.headers["WWW-Authenticate"] = "Bearer"
            return response
        path = request.path.rstrip("/") or "/"
        if path == "/v1/traces":
            if request.method != "POST":
                return self._method_not_allowed("POST")
            return await self._traces(request, body)
        if path in _SIGNALS:
            signal = _SIGNALS[path]
            return self.refuse(
                404,
                f"tracelens collects traces only: {signal} are not collected "
                f"(send {signal} to another OTLP receiver)",
                _answer_media(request),
            )
        if request.method != "GET":
            return (
                self._method_not_allowed("GET")
                if path in ("/health", "/stats", "/metrics", "/v1/spans")
                else self.refuse(404, f"no such endpoint: {path}")
            )
        if path in ("/health", "/healthz"):
            return self._health()
        if path == "/stats":
            return Response(200, json.dumps(self.receiver.stats.snapshot()).encode())
        if path == "/v1/spans":
            return await self._spans(request)
        if path == "/metrics" and self.metrics is not None:
            text = await asyncio.get_running_loop().run_in_executor(None, self.metrics.exposition)
            return Response(200, text, METRICS_TYPE)
        return self.refuse(404, f"no such endpoint: {path}")

    def _health(self) -> Response:
        if self.draining:
            return Response(503, json.dumps({"status": "draining"}).encode())
        degraded = self.receiver.stats.degraded()
        if degraded:
            reason = "; ".join(f"{part}: {why}" for part, why in sorted(degraded.items()))
            return Response(503, json.dumps({"status": "degraded", "reason": reason}).encode())
        return Response(200, json.dumps({"status": "ok"}).encode())

    def _authorized(self, request: Request) -> bool:
        if not self.token:
            return True
        return bearer_matches(request.headers.get("authorization", ""), self.token)

    def _method_not_allowed(self, allowed: str) -> Response:
        response = self.refuse(405, f"method not allowed; use {allowed}")
        response.headers["Allow"] = allowed
        return response

    async def _traces(self, request: Request, body: Callable[[], Awaitable[bytes]]) -> Response:
        try:
            media = otlp.media_type(request.headers.get("content-type"))
        except otlp.UnsupportedMedia as exc:
            return self.refuse(415, str(exc), otlp.PROTOBUF)
        if self.draining or not self.receiver.writer.has_room():
            return self._busy(media, "tracelens collect is busy; retry later")
        data = await body()
        outcome = await self.receiver.export(data, media, request.headers.get("content-encoding"))
        return self._answer(outcome, media)

    def _answer(self, outcome: Outcome, media: str) -> Response:
        if outcome.status is Status.OK:
            assert outcome.checked is not None
            return Response(200, otlp.success_body(outcome.checked, media), media)
        if outcome.status in (Status.BUSY, Status.FAILED):
            return self._busy(media, outcome.message)
        status = {Status.BAD: 400, Status.UNSUPPORTED: 415, Status.TOO_LARGE: 413}[outcome.status]
        return self.refuse(status, outcome.message, media)

    def _busy(self, media: str, message: str) -> Response:
        response = self.refuse(503, message, media)
        response.headers["Retry-After"] = str(self.receiver.config.retry_after_s)
        return response

    async def _spans(self, request: Request) -> Response:
        try:
            columns = _columns(request.query.get("columns"))
            start_ns = _int(request.query.get("start_ns"))
            end_ns = _int(request.query.get("end_ns"))
        except ValueError as exc:
            return self.refuse(400, str(exc))
        loop = asyncio.get_running_loop()
        try:
            pieces = await loop.run_in_executor(None, self._read, columns, start_ns, end_ns)
        except ValueError as exc:
            return self.refuse(400, str(exc))
        except (_Unavailable, StoreError) as exc:
            return self._busy(otlp.JSON, str(exc))
        return Response(200, content_type=ARROW_STREAM, stream=_in_executor(pieces))

    def _read(
        self, columns: list[str] | None, start_ns: int | None, end_ns: int | None
    ) -> Iterator[bytes]:
        """The Arrow IPC stream of the spans, ``READ_BATCH`` spans a message, made as the client
        takes it (``GET /v1/spans`` over 1M spans held 2.4 GB when built whole first)."""
        merger = self.receiver.writer.merger
        if not merger.flush(FLUSH_S):  # every acknowledged span is in the store first
            why = merger.failure or f"merging took over {FLUSH_S:.0f} s"
            raise _Unavailable(
                "the collector cannot bring every acknowledged span into its store now (they "
                f"are safe in its journal): retry when its /health says ok; {why}"
            )
        schema, batches = self.reader.read_batches(
            columns, start_ns=start_ns, end_ns=end_ns, batch_rows=READ_BATCH
        )
        return _ipc_pieces(schema, batches)


class _Pieces:
    """A write-only file that keeps what is written until taken (the IPC writer's sink)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts.clear()
        return data


def _ipc_pieces(schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Iterator[bytes]:
    sink = _Pieces()
    with pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), schema) as out:
        yield sink.take()
        for batch in batches:
            out.write_batch(batch)
            yield sink.take()
    yield sink.take()


async def _in_executor(pieces: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Each piece made on a worker thread (DuckDB and Arrow work), handed to the event loop."""
    loop = asyncio.get_running_loop()
    done = object()
    try:
        while True:
            piece = await loop.run_in_executor(None, next, pieces, done)
            if piece is done:
                return
            assert isinstance(piece, bytes)
            yield piece
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            await loop.run_in_executor(None, close)


def _answer_media(request: Request) -> str:
    ctype = request.headers.get("content-type", "")
    return otlp.PROTOBUF if "protobuf" in ctype else otlp.JSON


def _columns(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [c for v in values for c in v.split(",") if c]


def _int(values: list[str] | None) -> int | None:
    if not values:
        return None
    try:
        return int(values[-1])
    except ValueError:
        raise ValueError(f"not an integer: {values[-1]!r}") from None
