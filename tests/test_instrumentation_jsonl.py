"""The OTLP JSON Lines exporter writes exactly what the OTLP/JSON spec says.

Checked against the SDK's own protobuf encoding of the same spans (``encode_spans``), turned into
OTLP/JSON by the rules the spec adds to proto3's JSON mapping (hex ids instead of base64).
"""

from __future__ import annotations

import base64
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace as otel_trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from reference_jsonl import traces_data
from test_instrumentation_helpers import spans
from tracelens_instrumentation import trace
from tracelens_instrumentation.jsonl import OTLPJsonLinesExporter, traces_data_json

ID_KEYS = ("traceId", "spanId", "parentSpanId")
__all__ = ["spans"]  # the fixture, imported for pytest


def _spans() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "jsonl-test"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("scope-a", "1.2.3")
    other = provider.get_tracer("scope-b")
    remote = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    parent_ctx = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(remote))
    with tracer.start_as_current_span(
        "root",
        context=parent_ctx,
        kind=SpanKind.SERVER,
        links=[Link(remote, {"link.attr": 1})],
        attributes={
            "s": "text ü",
            "i": -(2**62),
            "f": 1.5,
            "nan": math.nan,
            "inf": -math.inf,
            "b": True,
            "strs": ["a", "b"],
            "ints": [1, 2],
            "bytes": b"\x00\xff",
        },
    ) as root:
        root.add_event("ev", {"k": "v"})
        with other.start_as_current_span("child", kind=SpanKind.CLIENT) as child:
            child.set_status(Status(StatusCode.ERROR, "broke"))
        with tracer.start_as_current_span("ok") as done:
            done.set_status(Status(StatusCode.OK))
    provider.shutdown()
    return list(exporter.get_finished_spans())


def _hex_ids(node: Any) -> Any:
    """proto3 JSON (base64 ids) -> OTLP/JSON (hex ids)."""
    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in ID_KEYS else _hex_ids(v) for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def _without_trace_flags(node: Any) -> Any:
    """The SDK's encoder leaves the W3C trace-flag bits out of ``flags``; we keep them."""
    if isinstance(node, dict):
        return {
            k: (v & ~0xFF if k == "flags" else _without_trace_flags(v)) for k, v in node.items()
        }
    if isinstance(node, list):
        return [_without_trace_flags(v) for v in node]
    return node


def _by_name(doc: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                out[span["name"]] = {"span": span, "scope": ss["scope"], "resource": rs["resource"]}
    return out


def _canon(doc: dict[str, Any]) -> dict[str, Any]:
    doc = json.loads(json.dumps(doc))  # tuples -> lists: the same JSON either way
    return _by_name(_without_trace_flags(doc))


def test_matches_the_sdk_protobuf_encoding() -> None:
    spans = _spans()
    ours = traces_data(spans)
    reference = _hex_ids(MessageToDict(encode_spans(spans), use_integers_for_enums=True))
    mine, theirs = _canon(ours), _canon(reference)
    assert mine.keys() == theirs.keys() == {"root", "child", "ok"}
    for name in mine:
        assert mine[name]["scope"] == theirs[name]["scope"], name
        assert mine[name]["resource"] == theirs[name]["resource"], name
        assert mine[name]["span"] == theirs[name]["span"], name


def _same_document(spans: list[ReadableSpan]) -> None:
    """The text the exporter writes is the reference document (key order aside)."""
    reference = json.loads(json.dumps(traces_data(spans), ensure_ascii=False))
    assert json.loads(traces_data_json(spans)) == reference


def test_the_written_text_is_the_reference_document() -> None:
    _same_document(_spans())


def test_the_decorators_spans_written_as_text(spans: InMemorySpanExporter) -> None:
    @trace
    def work(a: int, b: str) -> list[str]:
        return [b] * a

    for i in range(5):
        work(i, f"text {i} é")
    done = list(spans.get_finished_spans())
    assert len(done) == 5 and "tracelens.result_fps" in (done[-1].attributes or {})
    _same_document(done)


scalars = st.one_of(
    st.text(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),  # NaN and infinities included
    st.booleans(),
    st.binary(max_size=16),
)
values = st.one_of(
    scalars,
    st.lists(st.text(max_size=5), max_size=3).map(tuple),
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=3),
    st.lists(st.floats(), max_size=3),
    st.lists(st.booleans(), max_size=3).map(tuple),
)


@settings(deadline=None)
@given(
    attributes=st.dictionaries(st.text(max_size=8), values, max_size=6),
    name=st.text(max_size=10),
    state=st.sampled_from([None, {"vendor": "v1", "other": "x"}]),
)
def test_generated_spans_written_as_text(
    attributes: dict[str, Any], name: str, state: dict[str, str] | None
) -> None:
    from opentelemetry.trace import TraceState

    ctx = SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0x1234,
        is_remote=False,
        trace_state=TraceState(list(state.items())) if state else None,
    )
    span = ReadableSpan(
        name=name, context=ctx, parent=None, attributes=attributes, start_time=1, end_time=2
    )
    _same_document([span])


def test_otlp_json_specifics() -> None:
    spans = _spans()
    doc = traces_data(spans)
    by_name = _by_name(doc)
    root = by_name["root"]["span"]
    assert root["traceId"] == "0af7651916cd43dd8448eb211c80319c"
    assert root["parentSpanId"] == "00f067aa0ba902b7"
    assert root["kind"] == 2  # SPAN_KIND_SERVER
    assert isinstance(root["startTimeUnixNano"], str) and root["startTimeUnixNano"].isdigit()
    assert root["flags"] & 0x300 == 0x300  # has-is-remote + is-remote (remote parent)
    values = {a["key"]: a["value"] for a in root["attributes"]}
    assert values["i"] == {"intValue": str(-(2**62))}
    assert values["f"] == {"doubleValue": 1.5}
    assert values["nan"] == {"doubleValue": "NaN"}
    assert values["inf"] == {"doubleValue": "-Infinity"}
    assert values["b"] == {"boolValue": True}
    assert values["bytes"] == {"bytesValue": "AP8="}
    assert values["strs"] == {
        "arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "b"}]}
    }
    assert by_name["child"]["span"]["status"] == {"code": 2, "message": "broke"}
    assert by_name["ok"]["span"]["status"] == {"code": 1}
    assert by_name["child"]["scope"] == {"name": "scope-b"}
    json.dumps(doc, allow_nan=False)  # strict JSON: no bare NaN/Infinity tokens


def test_exporter_writes_one_traces_data_per_line(tmp_path: Path) -> None:
    spans = _spans()
    path = tmp_path / "out.jsonl"
    exporter = OTLPJsonLinesExporter(path)
    assert not path.exists()  # nothing is created before there is something to write
    assert exporter.export(spans[:1]) == SpanExportResult.SUCCESS
    assert exporter.export(spans[1:]) == SpanExportResult.SUCCESS
    assert exporter.export([]) == SpanExportResult.SUCCESS
    exporter.shutdown()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    names = [set(_by_name(json.loads(line))) for line in lines]
    assert names[0] | names[1] == {"root", "child", "ok"}
    assert exporter.export(spans) == SpanExportResult.FAILURE  # after shutdown


def test_unwritable_path_fails_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    exporter = OTLPJsonLinesExporter(blocker / "cannot" / "be.jsonl")
    assert exporter.export(_spans()) == SpanExportResult.FAILURE
    assert "cannot write spans" in caplog.text
    exporter.shutdown()


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_read_only_directory_fails_quietly(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    tmp_path.chmod(0o500)
    try:
        exporter = OTLPJsonLinesExporter(tmp_path / "x.jsonl")
        assert exporter.export(_spans()) == SpanExportResult.FAILURE
    finally:
        tmp_path.chmod(0o700)
