"""OTLP protobuf and OTLP JSON of the same trace read as the same span table."""

from __future__ import annotations

import base64
import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import FIXTURES
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracelens.errors import InputError
from tracelens.ingest import read_bytes, read_files

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tracelens.ingest.otlp_proto") is None
    or not hasattr(importlib.import_module("tracelens.ingest.otlp_proto"), "decode_export_request"),
    reason="tracelens.ingest.otlp_proto.decode_export_request (the collector's decoder) is not "
    "written yet",
)

OTLP_FIXTURES = sorted(
    [
        *FIXTURES.glob("otlp/*.json"),
        *FIXTURES.glob("critical-path/*.otlp.json"),
        *FIXTURES.glob("agent/*.json"),
        *FIXTURES.glob("vllm/*.json"),
    ]
)


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def to_protobuf(doc: dict[str, Any]) -> bytes:
    """OTLP JSON -> binary ExportTraceServiceRequest, through protobuf's own JSON mapping (which
    wants ids in base64, where OTLP/JSON writes hex)."""
    doc = json.loads(json.dumps(doc.get("result", doc)))
    for rs in doc["resourceSpans"]:
        for ss in rs.get("scopeSpans", []):
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = _b64(span[key])
                for link in span.get("links", []):
                    link["traceId"], link["spanId"] = _b64(link["traceId"]), _b64(link["spanId"])
    message = json_format.ParseDict(doc, ExportTraceServiceRequest())
    return message.SerializeToString()


def _diff(a: pa.Table, b: pa.Table) -> str:
    if a.num_rows != b.num_rows:
        return f"{a.num_rows} rows vs {b.num_rows}"
    for name in a.column_names:
        left, right = a[name].to_pylist(), b[name].to_pylist()
        for i, (x, y) in enumerate(zip(left, right, strict=True)):
            if x != y:
                return f"column {name}, row {i}: {x!r} != {y!r}"
    return "schemas differ" if not a.schema.equals(b.schema) else "equal"


@pytest.mark.parametrize("path", OTLP_FIXTURES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_protobuf_and_json_decode_to_equal_tables(path: Path) -> None:
    from tracelens.ingest.otlp_proto import decode_export_request

    data = to_protobuf(json.loads(path.read_text()))
    from_json = read_files([path]).spans
    from_proto = decode_export_request(data, "proto")
    assert from_proto.equals(from_json), _diff(from_proto, from_json)
    detected = read_bytes(data, "auto")  # binary input is detected as protobuf
    assert detected.equals(from_json), _diff(detected, from_json)


def test_gzipped_protobuf_file(tmp_path: Path) -> None:
    path = FIXTURES / "otlp/hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"
    target = tmp_path / "trace.pb.gz"
    target.write_bytes(gzip.compress(to_protobuf(json.loads(path.read_text()))))
    assert read_files([target]).spans.num_rows == 40
    assert read_files([target], input_format="otlp-proto").spans.num_rows == 40


def test_garbage_bytes_are_an_input_error() -> None:
    with pytest.raises(InputError) as info:
        read_bytes(b"\x0a\xff\xff\xff\xff\x0f\x01\x02", "junk.bin")
    assert info.value.source == "junk.bin"
