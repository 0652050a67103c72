"""The importers on every fixture, field by field, and on bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import FIXTURES

from tracelens.errors import InputError
from tracelens.ingest import read_bytes, read_files
from tracelens.ingest.zipkin import server_span_id
from tracelens.schema import SPAN_SCHEMA, attribute_dict


def _fixture_files() -> list[Path]:
    # (fixtures/verdicts/labels.json is the corpus's labels, not traces: tests/test_verdicts.py)
    return sorted(
        p
        for p in FIXTURES.rglob("*.json")
        if not p.name.endswith(".expected.json") and p.name != "labels.json"
    )


def _count_spans(doc: Any) -> int:
    """Spans in a document, counted by a plain walk of its JSON (independent of the importers)."""
    if isinstance(doc, list):  # Zipkin v2
        return len(doc)
    if "result" in doc:
        doc = doc["result"]
    if "resourceSpans" in doc:
        return sum(
            len(ss.get("spans", []))
            for rs in doc["resourceSpans"]
            for ss in rs.get("scopeSpans", [])
        )
    traces = doc.get("data", [doc])
    return sum(len(t["spans"]) for t in traces)


def _rows(table: pa.Table) -> dict[str, dict[str, Any]]:
    return {r["span_id"]: r for r in table.to_pylist()}


def _attrs(row: dict[str, Any]) -> dict[str, Any]:
    return attribute_dict(row["attributes"], row["json_attributes"])


def _read(path: Path, **kw: Any) -> pa.Table:
    return read_files([path], **kw).spans


FIXTURE_FILES = _fixture_files()


def test_fixture_set_is_complete() -> None:
    names = {p.relative_to(FIXTURES).parts[0] for p in FIXTURE_FILES}
    assert names == {
        "agent",
        "critical-path",
        "crisp_test_cases",
        "jaeger",
        "otlp",
        "vllm",
        "zipkin",
    }
    assert len(FIXTURE_FILES) >= 73


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_imports_with_the_right_span_count(path: Path) -> None:
    result = read_files([path])
    assert result.errors == []
    assert result.spans.schema.equals(SPAN_SCHEMA, check_metadata=True)
    assert result.spans.num_rows == _count_spans(json.loads(path.read_text()))
    assert pa.compute.min(result.spans["end_ns"].combine_chunks()).as_py() >= 0


def test_all_fixtures_in_one_call() -> None:
    result = read_files(FIXTURE_FILES)
    expected = sum(_count_spans(json.loads(p.read_text())) for p in FIXTURE_FILES)
    assert result.spans.num_rows == expected
    assert result.errors == []


# --- OTLP JSON ------------------------------------------------------------------------------


def test_hotrod_trace() -> None:
    path = FIXTURES / "otlp/hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"
    doc = json.loads(path.read_text())["result"]
    table = _read(path)
    assert table.num_rows == 40
    assert set(table["trace_id"].to_pylist()) == {"2ea75461946a7dd10f2c15ab36a076cb"}
    services = {
        a["value"]["stringValue"]
        for rs in doc["resourceSpans"]
        for a in rs["resource"]["attributes"]
        if a["key"] == "service.name"
    }
    assert set(table["service"].to_pylist()) == services
    assert {"frontend", "redis-manual", "mysql"} <= services
    rows = _rows(table)
    http = rows["9082d67808fc8870"]
    assert http["name"] == "HTTP GET"
    assert http["span_kind"] == "client"
    assert http["parent_span_id"] == "c8d93156b47cd010"
    assert http["start_ns"] == 1782036644636668325
    assert http["end_ns"] == 1782036644898226779
    assert http["scope_name"] == "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
    assert http["scope_version"] == "0.69.0"
    attrs = _attrs(http)
    assert attrs["http.response.status_code"] == 200  # intValue "200" stays an int
    assert attrs["http.request.method"] == "GET"
    assert "http.response.status_code" in http["json_attributes"]
    assert json.loads(http["resource"])["service.name"] == "frontend"
    errors = [r for r in rows.values() if r["status_code"] == "error"]
    assert errors and all(r["service"] == "redis-manual" for r in errors)
    with_events = [r for r in rows.values() if r["events"]]
    assert with_events
    event = json.loads(with_events[0]["events"])[0]
    assert set(event) == {"time_ns", "name", "attributes"} and isinstance(event["time_ns"], int)


def test_opentelemetry_proto_example_ids_lowercased_and_orphan_kept() -> None:
    table = _read(FIXTURES / "otlp/opentelemetry-proto_examples_trace.json")
    [row] = table.to_pylist()
    assert row["trace_id"] == "5b8efff798038103d269b633813fc60c"
    assert row["span_id"] == "eee19b7ec3c1b174"
    assert row["parent_span_id"] == "eee19b7ec3c1b173"  # not in the file: an orphan, kept
    assert row["service"] == "my.service"
    assert row["span_kind"] == "server"
    assert (row["scope_name"], row["scope_version"]) == ("my.library", "1.0.0")
    assert row["start_ns"] == 1544712660000000000
    assert row["end_ns"] == 1544712661000000000
    assert _attrs(row) == {"my.span.attr": "some value"}


def test_v3_envelope_equals_bare_request() -> None:
    path = FIXTURES / "otlp/hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"
    doc = json.loads(path.read_text())
    wrapped = read_bytes(path.read_bytes(), "wrapped")
    bare = read_bytes(json.dumps(doc["result"]).encode(), "bare")
    assert wrapped.equals(bare)


def _span(**over: Any) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": "0AF7651916CD43DD8448EB211C80319C",
        "spanId": "B7AD6B7169203331",
        "name": "op",
        "kind": "SPAN_KIND_CLIENT",
        "startTimeUnixNano": 1000,
        "endTimeUnixNano": "2000",
    }
    span.update(over)
    return span


def _otlp(*spans: dict[str, Any], resource: list[Any] | None = None) -> bytes:
    rs: dict[str, Any] = {"scopeSpans": [{"spans": list(spans)}]}
    if resource is not None:
        rs["resource"] = {"attributes": resource}
    return json.dumps({"resourceSpans": [rs]}).encode()


def test_every_any_value_type_round_trips() -> None:
    values = [
        {"key": "s", "value": {"stringValue": "42"}},
        {"key": "b", "value": {"boolValue": True}},
        {"key": "i_str", "value": {"intValue": "-9007199254740993"}},
        {"key": "i_num", "value": {"intValue": 7}},
        {"key": "d", "value": {"doubleValue": 0.5}},
        {"key": "d_int", "value": {"doubleValue": 2}},
        {"key": "d_nan", "value": {"doubleValue": "NaN"}},
        {"key": "bytes", "value": {"bytesValue": "AAEC/w=="}},
        {
            "key": "arr",
            "value": {
                "arrayValue": {
                    "values": [{"stringValue": "x"}, {"intValue": "1"}, {"boolValue": False}]
                }
            },
        },
        {
            "key": "kv",
            "value": {
                "kvlistValue": {
                    "values": [
                        {"key": "inner", "value": {"doubleValue": 1.25}},
                        {"key": "deep", "value": {"arrayValue": {"values": []}}},
                    ]
                }
            },
        },
        {"key": "empty", "value": {}},
    ]
    [row] = read_bytes(_otlp(_span(attributes=values)), "t").to_pylist()
    attrs = _attrs(row)
    assert attrs["s"] == "42" and "s" not in row["json_attributes"]  # strings stay raw
    assert attrs["b"] is True
    assert attrs["i_str"] == -9007199254740993
    assert attrs["i_num"] == 7
    assert attrs["d"] == 0.5
    assert attrs["d_int"] == 2.0 and dict(row["attributes"])["d_int"] == "2.0"
    assert attrs["d_nan"] != attrs["d_nan"]  # NaN
    assert attrs["bytes"] == "AAEC/w=="  # bytes are kept as base64 text
    assert attrs["arr"] == ["x", 1, False]
    assert attrs["kv"] == {"inner": 1.25, "deep": []}
    assert attrs["empty"] is None


def test_kind_status_as_ints_or_names_and_ids_normalised() -> None:
    spans = [
        _span(spanId="00000000000000A1", kind=4, status={"code": 2, "message": "boom"}),
        _span(
            spanId="00000000000000a2", kind="SPAN_KIND_CONSUMER", status={"code": "STATUS_CODE_OK"}
        ),
        _span(spanId="AAAAAAAAAKM=", parentSpanId="", status={}),  # base64 id (proto3 JSON)
    ]
    rows = _rows(read_bytes(_otlp(*spans), "t"))
    assert rows["00000000000000a1"]["span_kind"] == "producer"
    assert rows["00000000000000a1"]["status_code"] == "error"
    assert rows["00000000000000a1"]["status_message"] == "boom"
    assert rows["00000000000000a2"]["span_kind"] == "consumer"
    assert rows["00000000000000a2"]["status_code"] == "ok"
    assert rows["00000000000000a3"]["parent_span_id"] is None
    assert {r["trace_id"] for r in rows.values()} == {"0af7651916cd43dd8448eb211c80319c"}


def test_odd_ids_are_kept_and_counted_in_a_warning() -> None:
    warnings: list[str] = []
    table = read_bytes(_otlp(_span(traceId="A", spanId="Span-1")), "odd.json", warnings=warnings)
    assert table["trace_id"].to_pylist() == ["A"]
    assert table["span_id"].to_pylist() == ["Span-1"]
    assert any("odd.json" in w and "1 spans" in w for w in warnings)


def test_events_links_resource_and_missing_service() -> None:
    span = _span(
        events=[
            {
                "timeUnixNano": "1500",
                "name": "retry",
                "attributes": [{"key": "n", "value": {"intValue": "2"}}],
            },
        ],
        links=[{"traceId": "FF" * 16, "spanId": "EE" * 8, "attributes": []}],
    )
    resource = [{"key": "host.name", "value": {"stringValue": "h1"}}]
    [row] = read_bytes(_otlp(span, resource=resource), "t").to_pylist()
    assert json.loads(row["events"]) == [{"time_ns": 1500, "name": "retry", "attributes": {"n": 2}}]
    assert json.loads(row["links"]) == [
        {"trace_id": "ff" * 16, "span_id": "ee" * 8, "attributes": {}}
    ]
    assert json.loads(row["resource"]) == {"host.name": "h1"}
    assert row["service"] == "unknown_service"


def test_promoted_tracelens_attributes_get_their_columns() -> None:
    attrs = [
        {"key": "tracelens.kind", "value": {"stringValue": "io"}},
        {"key": "tracelens.cpu_ns", "value": {"intValue": "1234"}},
        {"key": "tracelens.arg_fps", "value": {"arrayValue": {"values": [{"stringValue": "a"}]}}},
        {"key": "x", "value": {"stringValue": "y"}},
    ]
    [row] = read_bytes(_otlp(_span(attributes=attrs)), "t").to_pylist()
    assert (row["kind"], row["cpu_ns"], row["arg_fps"]) == ("io", 1234, ["a"])
    assert row["attributes"] == [("x", "y")]


# --- Jaeger ---------------------------------------------------------------------------------


def test_jaeger_genai_trace() -> None:
    path = FIXTURES / "jaeger/genaiTestTrace.json"
    doc = json.loads(path.read_text())
    table = _read(path)
    rows = _rows(table)
    assert table.num_rows == len(doc["spans"])
    assert set(table["trace_id"].to_pylist()) == {doc["traceID"]}
    tool_calls = [
        _attrs(r)["gen_ai.tool.call.arguments"]
        for r in rows.values()
        if "gen_ai.tool.call.arguments" in _attrs(r)
    ]
    expected = [
        t["value"]
        for s in doc["spans"]
        for t in s["tags"]
        if t["key"] == "gen_ai.tool.call.arguments"
    ]
    assert tool_calls and sorted(tool_calls) == sorted(expected)
    root = rows["0000000000000001"]
    assert root["span_kind"] == "server"
    assert root["parent_span_id"] is None
    assert root["start_ns"] == 1770000000001000 * 1000
    assert root["end_ns"] - root["start_ns"] == 44000000 * 1000
    assert _attrs(root)["http.response.status_code"] == 200
    assert "span.kind" not in _attrs(root)  # consumed into span_kind
    services = {p["serviceName"] for p in doc["processes"].values()}
    assert set(table["service"].to_pylist()) <= services
    assert rows["0000000000000002"]["parent_span_id"] == "0000000000000001"


def test_jaeger_references_errors_and_follows_from() -> None:
    rows = _rows(_read(FIXTURES / "jaeger/tableValuesTestTrace/testTrace.json"))
    assert rows["span-2"]["status_code"] == "error"  # error tag typed bool, valued "true"
    assert "error" not in _attrs(rows["span-2"])
    assert rows["span-7"]["parent_span_id"] == "span-6"  # FOLLOWS_FROM without a CHILD_OF
    assert rows["span-1"]["trace_id"] == "trace-123"  # odd ids kept as they are
    assert rows["span-1"]["span_kind"] == "server"


def test_crisp_logs_become_events_and_ids_are_kept() -> None:
    path = FIXTURES / "crisp_test_cases/15.json"
    table = _read(path)
    assert set(table["trace_id"].to_pylist()) == {"A"}
    events = [json.loads(e) for e in table["events"].to_pylist() if e]
    assert events
    assert events[0][0]["time_ns"] == 50_000
    assert events[0][0]["attributes"]["error.object"].startswith("com.uber")


def test_crisp_error_pattern_status() -> None:
    rows = _rows(_read(FIXTURES / "crisp_test_cases/err_pattern1/err1.json"))
    assert rows["A"]["status_code"] == "error"
    assert rows["A"]["service"] == "S1"
    assert rows["B"]["parent_span_id"] == "A"


def _jaeger_trace(tags: list[Any], refs: list[Any] | None = None, **span: Any) -> dict[str, Any]:
    return {
        "traceID": "a03ee8fff1dcd9b9",
        "spans": [
            {
                "traceID": "a03ee8fff1dcd9b9",
                "spanID": "00000000000000AB",
                "operationName": "op",
                "references": refs or [],
                "startTime": 10,
                "duration": 5,
                "tags": tags,
                "processID": "p1",
                **span,
            }
        ],
        "processes": {
            "p1": {"serviceName": "svc", "tags": [{"key": "host", "type": "string", "value": "h"}]}
        },
    }


def test_jaeger_typed_tags_status_scope_and_links() -> None:
    tags = [
        {"key": "i", "type": "int64", "value": "12"},
        {"key": "f", "type": "float64", "value": 1},
        {"key": "b", "type": "bool", "value": False},
        {"key": "bin", "type": "binary", "value": "AQI="},
        {"key": "span.kind", "type": "string", "value": "consumer"},
        {"key": "otel.status_code", "type": "string", "value": "ERROR"},
        {"key": "otel.status_description", "type": "string", "value": "bad"},
        {"key": "otel.scope.name", "type": "string", "value": "lib"},
    ]
    refs = [
        {"refType": "FOLLOWS_FROM", "traceID": "a03ee8fff1dcd9b9", "spanID": "00000000000000F0"},
        {"refType": "CHILD_OF", "traceID": "a03ee8fff1dcd9b9", "spanID": "00000000000000C0"},
    ]
    doc = {"data": [_jaeger_trace(tags, refs)]}
    [row] = read_bytes(json.dumps(doc).encode(), "j").to_pylist()
    assert row["trace_id"] == "0000000000000000a03ee8fff1dcd9b9"  # 64-bit id widened
    assert row["span_id"] == "00000000000000ab"
    assert row["parent_span_id"] == "00000000000000c0"
    assert json.loads(row["links"]) == [
        {
            "trace_id": "0000000000000000a03ee8fff1dcd9b9",
            "span_id": "00000000000000f0",
            "attributes": {"opentracing.ref_type": "follows_from"},
        }
    ]
    assert (row["span_kind"], row["status_code"], row["status_message"]) == (
        "consumer",
        "error",
        "bad",
    )
    assert row["scope_name"] == "lib"
    assert _attrs(row) == {"i": 12, "f": 1.0, "b": False, "bin": "AQI="}
    assert json.loads(row["resource"]) == {"service.name": "svc", "host": "h"}
    assert (row["start_ns"], row["end_ns"]) == (10_000, 15_000)


# --- Zipkin ---------------------------------------------------------------------------------


def test_zipkin_yelp_shared_ids_become_parent_and_child() -> None:
    table = _read(FIXTURES / "zipkin/yelp.json")
    assert table.num_rows == 16
    ids = table["span_id"].to_pylist()
    assert len(set(ids)) == 16  # every half has its own id now
    rows = _rows(table)
    assert set(table["trace_id"].to_pylist()) == {"0000000000000000a03ee8fff1dcd9b9"}
    client, server = rows["7a778764a0d0b594"], rows[server_span_id("7a778764a0d0b594")]
    assert (client["span_kind"], server["span_kind"]) == ("client", "server")
    assert server["parent_span_id"] == "7a778764a0d0b594"
    assert server["service"] == "spectre"
    # the client half's parent is the shared id f5f2...: it attaches to that id's server half
    assert client["parent_span_id"] == server_span_id("f5f268651b2a2b34")
    assert rows[server_span_id("f5f268651b2a2b34")]["parent_span_id"] == "f5f268651b2a2b34"
    assert rows["f5f268651b2a2b34"]["span_kind"] == "client"
    assert rows["241cea1aa4cb2884"]["parent_span_id"] == server_span_id("668ed78ad94b35a1")
    # a lone server half keeps its id
    assert rows["2e8cfb154b59a41f"]["parent_span_id"] is None
    assert _attrs(client)["peer.service"] == "spectre"
    assert _attrs(client)["server.port"] == 31286


def test_zipkin_skew_children_of_shared_id_attach_to_server_half() -> None:
    rows = {r["name"]: r for r in _read(FIXTURES / "zipkin/skew.json").to_pylist()}
    assert rows["async"]["parent_span_id"] == server_span_id("74280ae0c10d8062")


def test_zipkin_missing_duration_warns() -> None:
    path = FIXTURES / "zipkin/smartthings-oauth-authorization.json"
    doc = json.loads(path.read_text())
    result = read_files([path])
    no_duration = sorted(s["timestamp"] * 1000 for s in doc if not s.get("duration"))
    assert len(no_duration) == 19
    assert any("19 Zipkin spans have no duration" in w for w in result.warnings)
    assert result.spans.num_rows == 175
    assert len(set(result.spans["span_id"].to_pylist())) == 175  # 5 server halves of one client
    zero = sorted(r["start_ns"] for r in result.spans.to_pylist() if r["end_ns"] == r["start_ns"])
    assert zero == no_duration


def test_zipkin_tags_error_annotations_and_endpoints() -> None:
    spans = [
        {
            "traceId": "1" * 32,
            "id": "2" * 16,
            "kind": "SERVER",
            "name": "get",
            "timestamp": 1_000,
            "duration": 10,
            "localEndpoint": {"serviceName": "api", "ipv4": "10.0.0.1", "port": 80},
            "remoteEndpoint": {"ipv6": "::1", "port": 5555},
            "tags": {"error": "timeout", "http.path": "/x"},
            "annotations": [{"timestamp": 1_002, "value": "wr"}],
        }
    ]
    [row] = read_bytes(json.dumps(spans).encode(), "z").to_pylist()
    assert (row["status_code"], row["status_message"]) == ("error", "timeout")
    assert row["service"] == "api"
    assert json.loads(row["events"]) == [{"time_ns": 1_002_000, "name": "wr", "attributes": {}}]
    assert _attrs(row) == {
        "http.path": "/x",
        "network.local.address": "10.0.0.1",
        "network.local.port": 80,
        "client.address": "::1",
        "client.port": 5555,
    }
    assert (row["start_ns"], row["end_ns"]) == (1_000_000, 1_010_000)


# --- containers: gzip, JSON Lines, forced formats --------------------------------------------


def test_gzip_of_any_format(tmp_path: Path) -> None:
    for name in (
        "zipkin/yelp.json",
        "jaeger/genaiTestTrace.json",
        "otlp/opentelemetry-proto_examples_trace.json",
    ):
        path = FIXTURES / name
        packed = tmp_path / (path.name + ".gz")
        packed.write_bytes(gzip.compress(path.read_bytes()))
        assert _read(packed).equals(_read(path))


def test_json_lines_equal_the_documents(tmp_path: Path) -> None:
    agents = sorted((FIXTURES / "agent").glob("*.json"))
    lines = [json.dumps(json.loads(p.read_text())) for p in agents]
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:]) + "\n")
    expected = pa.concat_tables([_read(p) for p in agents])
    assert _read(path).equals(expected)
    gz = tmp_path / "spans.jsonl.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert _read(gz).equals(expected)


def test_json_lines_may_mix_formats() -> None:
    zipkin = json.dumps(json.loads((FIXTURES / "zipkin/ascend.json").read_text()))
    otlp = json.dumps(
        json.loads((FIXTURES / "otlp/opentelemetry-proto_examples_trace.json").read_text())
    )
    assert read_bytes(f"{zipkin}\n{otlp}\n".encode(), "mixed").num_rows == 8 + 1


def test_forced_format() -> None:
    path = FIXTURES / "zipkin/yelp.json"
    assert _read(path, input_format="zipkin").equals(_read(path))
    with pytest.raises(InputError, match="not an OTLP JSON document"):
        _read(path, input_format="otlp-json")
    with pytest.raises(InputError, match="Zipkin"):
        _read(FIXTURES / "jaeger/genaiTestTrace.json", input_format="zipkin")
    with pytest.raises(InputError, match="not JSON"):
        read_bytes(b"\x0a\x00", "p", input_format="jaeger")
    with pytest.raises(ValueError, match="unknown input format"):
        read_files([path], input_format="csv")


# --- bad input ------------------------------------------------------------------------------


def _error(data: bytes, source: str = "bad.json", **kw: Any) -> InputError:
    with pytest.raises(InputError) as info:
        read_bytes(data, source, **kw)
    assert info.value.source == source
    return info.value


def test_truncated_json_names_the_line() -> None:
    text = (FIXTURES / "otlp/opentelemetry-proto_examples_trace.json").read_text()
    cut = "\n".join(text.splitlines()[:30])
    err = _error(cut.encode())
    assert err.line is not None and 28 <= err.line <= 31
    assert "invalid JSON" in str(err) and f"bad.json:{err.line}" in str(err)


def test_wrong_typed_field_names_the_field() -> None:
    doc = json.loads(
        (FIXTURES / "otlp/hotrod_dispatch_jaeger-ui_v3_getTrace-response.json").read_text()
    )
    doc["result"]["resourceSpans"][0]["scopeSpans"][0]["spans"][3]["startTimeUnixNano"] = "soon"
    err = _error(json.dumps(doc, indent=1).encode())
    assert err.field == "result.resourceSpans[0].scopeSpans[0].spans[3].startTimeUnixNano"
    assert "not an integer" in err.message


def test_bad_attribute_value_names_the_field() -> None:
    attrs = [
        {"key": "ok", "value": {"stringValue": "x"}},
        {"key": "n", "value": {"intValue": "x1"}},
    ]
    err = _error(_otlp(_span(attributes=attrs)))
    assert err.field == "resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value.intValue"


def test_jaeger_and_zipkin_field_errors() -> None:
    doc = {"data": [_jaeger_trace([{"key": "i", "type": "int64", "value": "many"}])]}
    assert _error(json.dumps(doc).encode()).field == "data[0].spans[0].tags[0].value"
    spans = [{"traceId": "1" * 32, "id": "2" * 16, "timestamp": "later"}]
    assert _error(json.dumps(spans).encode()).field == "[0].timestamp"
    assert _error(b'[{"traceId": 5, "id": "a"}]').field == "[0].traceId"


def test_json_lines_error_names_the_line() -> None:
    good = json.dumps(json.loads(_otlp(_span())))
    err = _error(f"{good}\n{good}\n{good[:-3]}\n{good}\n".encode())
    assert err.line == 3
    bad_field = json.loads(good)
    bad_field["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["kind"] = [1]
    err = _error(f"{good}\n{json.dumps(bad_field)}\n".encode())
    assert (err.line, err.field) == (2, "resourceSpans[0].scopeSpans[0].spans[0].kind")


def test_unknown_format_says_what_was_tried() -> None:
    err = _error(b'{"hello": "world"}')
    assert "unrecognised format" in err.message and "hello" in err.message
    for fmt in ("otlp-json", "jaeger", "zipkin", "otlp-proto"):
        assert fmt in err.message
    assert "unrecognised format" in _error(b"just some text\n").message
    assert "unrecognised format" in _error(b"[1, 2]").message


@pytest.mark.parametrize("data", [b"", b"\n  \n", gzip.compress(b"", mtime=0)])
def test_empty_input(data: bytes) -> None:
    assert "empty" in _error(data).message


def test_corrupt_gzip() -> None:
    data = gzip.compress((FIXTURES / "zipkin/yelp.json").read_bytes())
    assert "gzip" in _error(data[: len(data) // 2]).message


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file") as info:
        read_files([tmp_path / "nope.json"])
    assert info.value.source == str(tmp_path / "nope.json")
    with pytest.raises(InputError, match="directory"):
        read_files([tmp_path])


def test_keep_going_collects_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"resourceSpans": [')
    good = FIXTURES / "zipkin/ascend.json"
    result = read_files([bad, good, tmp_path / "missing.json"], keep_going=True)
    assert [e.source for e in result.errors] == [str(bad), str(tmp_path / "missing.json")]
    assert result.spans.num_rows == 8
    with pytest.raises(InputError):
        read_files([good, bad])


def test_deep_nesting_is_an_input_error() -> None:
    deep = b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert isinstance(_error(deep), InputError)


def _nested_value(levels: int) -> dict[str, Any]:
    """An AnyValue ``levels`` arrays deep around a string (built without recursion)."""
    value: dict[str, Any] = {"stringValue": "core"}
    for _ in range(levels):
        value = {"arrayValue": {"values": [value]}}
    return value


def _doc_with_attribute(value: dict[str, Any]) -> bytes:
    span = {
        "traceId": "0" * 31 + "1",
        "spanId": "0" * 15 + "1",
        "name": "s",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
        "attributes": [{"key": "deep", "value": value}],
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


@pytest.mark.parametrize("native", [True, False])
def test_values_nested_past_the_limit_are_a_field_error(
    native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 levels of arrays read as 64 nested lists; 65 are refused with the path of the
    attribute, not a RecursionError (the readers recurse once per level: the limit bounds it).
    Both decoders: the compiled builder hands such values to the Python reader."""
    from tracelens.ingest import _json_fast
    from tracelens.ingest.otlp_json import MAX_VALUE_DEPTH

    monkeypatch.setattr(_json_fast, "USE_NATIVE", native and _json_fast.AVAILABLE)
    table = read_bytes(_doc_with_attribute(_nested_value(MAX_VALUE_DEPTH)), "ok.json")
    got = attribute_dict(table["attributes"][0].as_py(), table["json_attributes"][0].as_py())
    value: Any = got["deep"]
    for _ in range(MAX_VALUE_DEPTH):
        assert isinstance(value, list) and len(value) == 1
        value = value[0]
    assert value == "core"
    err = _error(_doc_with_attribute(_nested_value(MAX_VALUE_DEPTH + 1)))
    assert "nested more than 64 deep" in str(err) and "attributes[0]" in str(err), str(err)
