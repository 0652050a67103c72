"""``tracelens collect`` as a process, fed by the real OpenTelemetry SDK exporters."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import grpc
import httpx
import pyarrow as pa
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from test_collector_support import (
    expected_attributes,
    iter_chunks,
    make_spans,
    spans_by_id,
    start_collector,
)

from tracelens.collector import discovery, read_store
from tracelens.errors import StoreError
from tracelens.schema import attribute_dict
from tracelens.store import DuckDBStore


def _check_stored(table: pa.Table, sent: list[ReadableSpan]) -> None:
    rows = spans_by_id(table)
    assert table.num_rows == len(sent) == len(rows)  # exactly once
    for span in sent:
        row = rows[format(span.context.span_id, "016x")]
        assert row["trace_id"] == format(span.context.trace_id, "032x")
        assert row["name"] == span.name
        assert row["service"] == "svc"
        assert row["kind"] == "io"
        assert attribute_dict(row["attributes"], row["json_attributes"]) == expected_attributes(
            span
        )
        assert json.loads(row["events"])[0]["attributes"] == dict(span.events[0].attributes or {})
        assert row["start_ns"] == span.start_time and row["end_ns"] == span.end_time


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_sdk_exporters_deliver_every_span_once_with_attributes(
    tmp_path: Path, transport: str
) -> None:
    col = start_collector(tmp_path / "t.duckdb")
    try:
        exporter: SpanExporter
        if transport == "http":
            exporter = HttpExporter(endpoint=f"{col.http}/v1/traces")
        else:
            exporter = GrpcExporter(endpoint=col.grpc, insecure=True)
        sent = make_spans(1500)
        for chunk in iter_chunks(sent, 512):
            assert exporter.export(chunk) is SpanExportResult.SUCCESS
        exporter.shutdown()
        _check_stored(read_store(str(col.db)), sent)  # read through the running collector
    finally:
        assert col.stop() == 0
    _check_stored(read_store(str(col.db)), sent)  # and from the file once it has stopped
    assert not discovery.info_path(col.db).exists()


def test_gzip_json_and_retries_do_not_duplicate(tmp_path: Path) -> None:
    col = start_collector(tmp_path / "t.duckdb", grpc="off")
    try:
        sent = make_spans(300)
        body = encode_spans(sent).SerializeToString()
        with httpx.Client(base_url=col.http) as client:
            for _ in range(3):  # an exporter retrying the same batch
                r = client.post(
                    "/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"}
                )
                assert r.status_code == 200, r.text
                assert r.headers["content-type"] == "application/x-protobuf"
                assert not ExportTraceServiceResponse.FromString(r.content).HasField(
                    "partial_success"
                )
            gz = HttpExporter(endpoint=f"{col.http}/v1/traces", compression=_gzip())
            assert gz.export(make_spans(10, prefix="gz")) is SpanExportResult.SUCCESS
            stats = client.get("/stats").json()
        assert read_store(str(col.db), ["span_id"]).num_rows == 310  # flushes the journal
        stats = httpx.get(f"{col.http}/stats").json()
        assert stats["spans_acknowledged"] == 910
        assert stats["spans_stored"] == 310
        assert stats["spans_duplicate"] == 600
    finally:
        col.stop()


def _gzip() -> Compression:

    return Compression.Gzip


def test_json_requests_and_partial_success(tmp_path: Path) -> None:
    col = start_collector(tmp_path / "t.duckdb", grpc="off")
    good = {
        "traceId": "5B8EFFF798038103D269B633813FC60C",
        "spanId": "EEE19B7EC3C1B174",
        "name": "ok",
        "startTimeUnixNano": "1544712660000000000",
        "endTimeUnixNano": "1544712661000000000",
        "kind": 2,
        "attributes": [{"key": "n", "value": {"intValue": "7"}}],
    }
    bad_ids = {**good, "spanId": "00000000000000000000", "name": "short"}
    backwards = {**good, "spanId": "EEE19B7EC3C1B175", "endTimeUnixNano": "1"}
    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "json-svc"}}]
                },
                "scopeSpans": [{"spans": [good, bad_ids, backwards]}],
            }
        ]
    }
    try:
        r = httpx.post(f"{col.http}/v1/traces", json=doc)
        assert r.status_code == 200
        assert r.headers["content-type"] == "application/json"
        partial = r.json()["partialSuccess"]
        assert partial["rejectedSpans"] == "2" and partial["errorMessage"]
        table = read_store(str(col.db))
        assert table["span_id"].to_pylist() == ["eee19b7ec3c1b174"]
        assert table["service"].to_pylist() == ["json-svc"]
        assert table["span_kind"].to_pylist() == ["server"]
        assert httpx.get(f"{col.http}/stats").json()["spans_rejected"] == 2
    finally:
        col.stop()


def test_token_is_required_on_both_transports(tmp_path: Path) -> None:
    col = start_collector(tmp_path / "t.duckdb", env={"TRACELENS_TOKEN": "s3cret"})
    try:
        spans = make_spans(5)
        assert httpx.get(f"{col.http}/health").status_code == 401
        assert (
            HttpExporter(endpoint=f"{col.http}/v1/traces").export(spans) is SpanExportResult.FAILURE
        )
        ok = HttpExporter(
            endpoint=f"{col.http}/v1/traces", headers={"Authorization": "Bearer s3cret"}
        )
        assert ok.export(spans) is SpanExportResult.SUCCESS
        body = encode_spans(spans).SerializeToString()
        with grpc.insecure_channel(col.grpc) as channel:
            export = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
            )
            with pytest.raises(grpc.RpcError) as err:
                export(body, timeout=10)
            assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
            export(body, timeout=10, metadata=[("authorization", "Bearer s3cret")])
        # the reader finds the token in the discovery file (mode 0600)
        assert discovery.info_path(col.db).stat().st_mode & 0o077 == 0
        assert read_store(str(col.db), ["span_id"]).num_rows == 5
    finally:
        col.stop()


def test_health_stats_and_other_signals(tmp_path: Path) -> None:
    col = start_collector(tmp_path / "t.duckdb", grpc="off")
    try:
        assert httpx.get(f"{col.http}/health").json() == {"status": "ok"}
        stats = httpx.get(f"{col.http}/stats").json()
        for key in (
            "spans_received",
            "spans_stored",
            "spans_rejected",
            "queue_depth",
            "batch_latency_ms",
        ):
            assert key in stats
        for signal_path in ("/v1/metrics", "/v1/logs"):
            r = httpx.post(f"{col.http}{signal_path}", json={})
            assert r.status_code == 404 and "not collected" in r.json()["message"]
        assert httpx.get(f"{col.http}/v1/traces").status_code == 405
        assert httpx.get(f"{col.http}/nope").status_code == 404
    finally:
        col.stop()


@pytest.mark.system
def test_store_is_locked_while_collecting_and_a_second_collector_says_so(tmp_path: Path) -> None:
    col = start_collector(tmp_path / "t.duckdb", grpc="off")
    try:
        with pytest.raises(StoreError):
            DuckDBStore(col.db, read_only=True)
        with pytest.raises(AssertionError, match="exited early"):
            start_collector(tmp_path / "t.duckdb", grpc="off")
    finally:
        col.stop()


def test_sigterm_drains_requests_in_flight(tmp_path: Path) -> None:
    col = start_collector(tmp_path / "t.duckdb", grpc="off")
    acked: list[int] = []
    batches = [make_spans(512, prefix=f"b{k}-") for k in range(6)]

    def send(k: int) -> None:
        exporter = HttpExporter(endpoint=f"{col.http}/v1/traces", timeout=5)
        if exporter.export(batches[k]) is SpanExportResult.SUCCESS:
            acked.append(k)

    threads = [threading.Thread(target=send, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    threads[0].join()  # at least one request is answered before the signal
    assert col.stop(signal.SIGTERM) == 0
    for t in threads:
        t.join()
    stored = set(read_store(str(col.db), ["span_id"])["span_id"].to_pylist())
    for k in acked:
        assert {format(s.context.span_id, "016x") for s in batches[k]} <= stored
    assert "stopped:" in col.lines[-1]
