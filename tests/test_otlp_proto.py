"""Both OTLP protobuf decoders equal the OTLP JSON importer on the same content.

The reference for a protobuf request is the JSON importer reading ``MessageToDict`` of it (proto3's
own JSON mapping: base64 ids, int64 as strings, enum names, all of which the importer accepts), so
neither side is checked against code that shares its assumptions.  Each case runs through the
generated-class decoder and, where it is built, the compiled one.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tracelens.errors import InputError
from tracelens.ingest import read_bytes
from tracelens.ingest.otlp_proto import (
    _decode,
    _fastpath,
    check_spans,
    decode_export_request,
    decode_export_request_checked,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OTLP_JSON_FIXTURES = sorted(
    [
        *FIXTURES.glob("agent/*.json"),
        *FIXTURES.glob("vllm/*.json"),
        *FIXTURES.glob("otlp/*.json"),
        *FIXTURES.glob("critical-path/*.otlp.json"),
    ]
)
_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def json_to_request(doc: dict[str, Any]) -> ExportTraceServiceRequest:
    """OTLP JSON (hex ids) as the protobuf request it stands for."""
    doc = doc.get("result", doc) if "resourceSpans" not in doc else doc
    stack: list[Any] = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in _ID_KEYS:
                if isinstance(node.get(key), str):
                    node[key] = base64.b64encode(bytes.fromhex(node[key])).decode()
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=True)


def reference(request: ExportTraceServiceRequest) -> pa.Table:
    doc = json_format.MessageToDict(request, always_print_fields_with_no_presence=True)
    return read_bytes(json.dumps(doc).encode(), "<reference>", "otlp-json")


NATIVE_CHOICES = (False, True) if _fastpath.AVAILABLE else (False,)


def both_paths(data: bytes) -> list[pa.Table]:
    """The table from the generated-class decoder and from the compiled one (where built)."""
    tables = []
    for native in NATIVE_CHOICES:
        decoded = _decode(data, "<test>", native=native)
        assert decoded.problems.first is None
        tables.append(decoded.table)
    return tables


def assert_same(got: pa.Table, want: pa.Table) -> None:
    assert got.schema == want.schema
    got_rows, want_rows = got.to_pylist(), want.to_pylist()
    assert len(got_rows) == len(want_rows)
    for g, w in zip(got_rows, want_rows, strict=True):
        assert _nan_safe(g) == _nan_safe(w)


def _nan_safe(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=False, default=str)


@pytest.mark.parametrize("path", OTLP_JSON_FIXTURES, ids=lambda p: p.name)
def test_fixture_decodes_like_the_json_importer(path: Path) -> None:
    data = path.read_bytes()
    request = json_to_request(json.loads(data))
    want = read_bytes(data, str(path), "otlp-json")
    assert want.num_rows > 0
    for got in both_paths(request.SerializeToString()):
        assert_same(got, want)


def test_file_importer_reads_binary_otlp(tmp_path: Path) -> None:
    path = FIXTURES / "agent" / "any-agent-OPENAI.otlp.json"
    request = json_to_request(json.loads(path.read_bytes()))
    binary = tmp_path / "trace.pb.gz"
    binary.write_bytes(gzip.compress(request.SerializeToString()))
    from tracelens.ingest import read_files

    assert_same(read_files([binary]).spans, read_bytes(path.read_bytes(), "x", "otlp-json"))


# -- random requests ---------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20)
_keys = st.sampled_from(
    [
        "a",
        "b",
        "http.request.method",
        "gen_ai.usage.input_tokens",
        "tracelens.kind",
        "tracelens.cpu_ns",
        "tracelens.args_hash",
        "tracelens.arg_fps",
        "tracelens.result_fps",
        "k" * 200,
    ]
)


def _any_value(depth: int = 0) -> st.SearchStrategy[AnyValue]:
    scalars = st.one_of(
        _text.map(lambda s: AnyValue(string_value=s)),
        st.integers(-(2**63), 2**63 - 1).map(lambda i: AnyValue(int_value=i)),
        st.booleans().map(lambda b: AnyValue(bool_value=b)),
        st.floats(-1e18, 1e18).map(lambda f: AnyValue(double_value=f)),
        st.binary(max_size=8).map(lambda b: AnyValue(bytes_value=b)),
        st.just(AnyValue()),
    )
    if depth >= 2:
        return scalars
    nested = st.lists(_any_value(depth + 1), max_size=3)
    return st.one_of(
        scalars,
        nested.map(_array),
        st.lists(st.tuples(_keys, _any_value(depth + 1)), max_size=3).map(_kvlist),
    )


def _array(values: list[AnyValue]) -> AnyValue:
    v = AnyValue()
    v.array_value.values.extend(values)
    return v


def _kvlist(items: list[tuple[str, AnyValue]]) -> AnyValue:
    v = AnyValue()
    v.kvlist_value.values.extend(KeyValue(key=k, value=x) for k, x in items)
    return v


_attributes = st.lists(st.tuples(_keys, _any_value()), max_size=8)


@st.composite
def requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(1, 3))):
        rs = req.resource_spans.add()
        for k, v in draw(_attributes):
            rs.resource.attributes.add(key=k, value=v)
        if draw(st.booleans()):
            rs.resource.attributes.add(key="service.name", value=AnyValue(string_value="svc"))
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add()
            ss.scope.name = draw(_text)
            ss.scope.version = draw(_text)
            for _ in range(draw(st.integers(0, 4))):
                _span(draw, ss.spans.add())
    return req


def _span(draw: st.DrawFn, span: Any) -> None:
    span.trace_id = draw(st.binary(min_size=16, max_size=16))
    span.span_id = draw(st.binary(min_size=8, max_size=8))
    span.parent_span_id = draw(st.sampled_from([b"", b"\x01" * 8]))
    span.name = draw(_text)
    span.kind = draw(st.integers(0, 5))
    span.start_time_unix_nano = draw(st.integers(0, 2**63 - 1))
    span.end_time_unix_nano = draw(st.integers(0, 2**63 - 1))
    span.status.code = draw(st.integers(0, 2))
    span.status.message = draw(_text)
    for k, v in draw(_attributes):
        span.attributes.add(key=k, value=v)
    for _ in range(draw(st.integers(0, 2))):
        ev = span.events.add(name=draw(_text), time_unix_nano=draw(st.integers(0, 2**63 - 1)))
        for k, v in draw(_attributes):
            ev.attributes.add(key=k, value=v)
    for _ in range(draw(st.integers(0, 1))):
        link = span.links.add(trace_id=b"\x02" * 16, span_id=b"\x03" * 8)
        for k, v in draw(_attributes):
            link.attributes.add(key=k, value=v)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_random_requests_decode_like_the_json_importer(request: ExportTraceServiceRequest) -> None:
    want = reference(request)
    for got in both_paths(request.SerializeToString()):
        assert_same(got, want)


# -- bad input ---------------------------------------------------------------------------------


@settings(deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_decode_or_raise_input_error(data: bytes) -> None:
    for native in NATIVE_CHOICES:
        try:
            table = _decode(data, "<request>", native=native).table
        except InputError as exc:
            assert exc.source == "<request>"
            continue
        assert table.schema.names[0] == "trace_id"


def test_truncated_request_is_an_input_error() -> None:
    request = json_to_request(
        json.loads((FIXTURES / "otlp" / "opentelemetry-proto_examples_trace.json").read_bytes())
    )
    data = request.SerializeToString()
    with pytest.raises(InputError, match="not a valid OTLP protobuf"):
        decode_export_request(data[: len(data) // 2], "cut.pb")


def test_invalid_utf8_in_an_attribute_is_an_input_error() -> None:
    req = ExportTraceServiceRequest()
    span = (
        req.resource_spans.add()
        .scope_spans.add()
        .spans.add(
            trace_id=b"\x01" * 16, span_id=b"\x02" * 8, start_time_unix_nano=1, end_time_unix_nano=2
        )
    )
    span.attributes.add(key="k", value=AnyValue(string_value="XY"))
    data = req.SerializeToString().replace(b"XY", b"\xff\xfe")
    with pytest.raises(InputError):
        decode_export_request(data)


def test_checked_decode_rejects_bad_spans_one_by_one() -> None:
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    good = {
        "trace_id": b"\x01" * 16,
        "span_id": b"\x02" * 8,
        "start_time_unix_nano": 10,
        "end_time_unix_nano": 20,
    }
    spans.add(**good)
    spans.add(**{**good, "trace_id": b"\x01" * 8})  # short trace id
    spans.add(**{**good, "span_id": b""})  # no span id
    spans.add(**{**good, "span_id": b"\x00" * 8})  # zero span id
    spans.add(**{**good, "end_time_unix_nano": 5})  # ends before it starts
    spans.add(**{**good, "start_time_unix_nano": 0})  # no start
    spans.add(**{**good, "kind": 9})  # no such span kind
    spans.add(**{**good, "span_id": b"\x03" * 8, "parent_span_id": b"\x04" * 8})
    checked = decode_export_request_checked(req.SerializeToString())
    assert checked.rejected == 6
    for native in NATIVE_CHOICES:
        problems = _decode(req.SerializeToString(), "<test>", native=native).problems
        assert problems.mask.tolist() == [False, False, True, False, False, False, True, False]
    assert checked.message
    assert checked.spans["span_id"].to_pylist() == ["02" * 8, "03" * 8]
    with pytest.raises(InputError, match="spanId: empty"):
        decode_export_request(req.SerializeToString())


def test_the_first_invalid_span_is_reported_with_its_first_problem() -> None:
    """Row order first, then the order of docs/otlp-proto.md ("Invalid spans")."""
    req = ExportTraceServiceRequest()
    good = {"trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, "start_time_unix_nano": 1}
    first = req.resource_spans.add().scope_spans.add()
    first.spans.add(**good, end_time_unix_nano=2)
    second = req.resource_spans.add()
    second.scope_spans.add()  # no spans: not counted in span numbers
    spans = second.scope_spans.add().spans
    spans.add(**good, end_time_unix_nano=2**64 - 1, kind=7)  # kind first, then the end time
    spans.add(**{**good, "trace_id": b""}, end_time_unix_nano=2)  # a later span, an earlier reason
    for native in NATIVE_CHOICES:
        problems = _decode(req.SerializeToString(), "<test>", native=native).problems
        assert problems.mask.tolist() == [False, True, True]
        assert problems.first == "resourceSpans[1].scopeSpans[1].spans[0]: kind: not a span kind"


def test_check_spans_passes_a_clean_table_through() -> None:
    path = FIXTURES / "agent" / "any-agent-OPENAI.otlp.json"
    table = read_bytes(path.read_bytes(), "x", "otlp-json")
    checked = check_spans(table)
    assert checked.rejected == 0 and checked.spans.num_rows == table.num_rows


def test_repeated_key_keeps_first_place_and_last_value() -> None:
    req = ExportTraceServiceRequest()
    span = (
        req.resource_spans.add()
        .scope_spans.add()
        .spans.add(
            trace_id=b"\x01" * 16, span_id=b"\x02" * 8, start_time_unix_nano=1, end_time_unix_nano=2
        )
    )
    for k, v in [("a", "1"), ("b", "2"), ("a", "3")]:
        span.attributes.add(key=k, value=AnyValue(string_value=v))
    for table in both_paths(req.SerializeToString()):
        assert table["attributes"].to_pylist() == [[("a", "3"), ("b", "2")]]
        assert_same(table, reference(req))


def test_empty_request_is_an_empty_table() -> None:
    table = decode_export_request(b"")
    assert table.num_rows == 0


def test_non_finite_doubles_are_json_text() -> None:
    req = ExportTraceServiceRequest()
    span = (
        req.resource_spans.add()
        .scope_spans.add()
        .spans.add(
            trace_id=b"\x01" * 16, span_id=b"\x02" * 8, start_time_unix_nano=1, end_time_unix_nano=2
        )
    )
    span.attributes.add(key="x", value=AnyValue(double_value=math.inf))
    span.attributes.add(key="y", value=AnyValue(double_value=0.1))
    for table in both_paths(req.SerializeToString()):
        assert table["attributes"].to_pylist() == [[("x", "Infinity"), ("y", "0.1")]]
