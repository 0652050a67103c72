"""The importers' fast column builder writes exactly what ``SpanColumns`` writes; JSON Lines and
documents agree; hypothesis-made OTLP documents survive the trip."""

from __future__ import annotations

import json
from typing import Any

from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_columns import ReferenceSpanColumns

from tracelens.errors import InputError
from tracelens.ingest import read_bytes
from tracelens.schema import COLUMNS, SpanColumns, attribute_dict, json_scalar, json_value

_text = st.text(max_size=8)
_scalar = st.one_of(
    _text,
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=6),
)
_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)),
    max_leaves=6,
)
_keys = st.one_of(
    _text,
    st.sampled_from(
        [
            "tracelens.kind",
            "tracelens.cpu_ns",
            "tracelens.args_hash",
            "tracelens.result_hash",
            "tracelens.arg_fps",
            "tracelens.result_fps",
        ]
    ),
)
_row = st.fixed_dictionaries(
    {
        "trace_id": _text,
        "span_id": _text,
        "parent_span_id": st.one_of(st.none(), _text),
        "name": _text,
        "service": _text,
        "span_kind": st.sampled_from(["internal", "server", "client"]),
        "start_ns": st.integers(min_value=0, max_value=2**62),
        "end_ns": st.integers(min_value=0, max_value=2**62),
        "status_code": st.sampled_from(["unset", "ok", "error"]),
        "status_message": st.one_of(st.none(), _text),
        "attributes": st.one_of(st.none(), st.dictionaries(_keys, _value, max_size=5)),
        "resource": st.one_of(st.none(), st.dictionaries(_text, _scalar, max_size=2)),
        "scope_name": st.one_of(st.none(), _text),
        "events": st.one_of(
            st.none(), st.lists(st.fixed_dictionaries({"time_ns": st.integers(), "name": _text}))
        ),
    }
)


@settings(deadline=None)
@given(st.lists(_row, max_size=6))
def test_fast_columns_equal_span_columns(rows: list[dict[str, Any]]) -> None:
    fast, reference = SpanColumns(), ReferenceSpanColumns()
    for row in rows:
        fast.append(**row)
        reference.append(**row)
    assert len(fast) == len(reference) == len(rows)
    got, want = fast.to_arrow(), reference.to_arrow()
    assert got.to_pylist() == want.to_pylist() or _nan_equal(got.to_pylist(), want.to_pylist())
    assert got.schema.equals(want.schema, check_metadata=True)


def _nan_equal(a: Any, b: Any) -> bool:
    return json.dumps(a, default=str) == json.dumps(b, default=str)


@given(_scalar)
def test_json_scalar_is_json_value(value: Any) -> None:
    assert json_scalar(value) == json_value(value)


_hex16 = st.text("0123456789abcdefABCDEF", min_size=16, max_size=16)
_hex32 = st.text("0123456789abcdefABCDEF", min_size=32, max_size=32)
_otlp_span = st.fixed_dictionaries(
    {
        "traceId": _hex32,
        "spanId": _hex16,
        "name": _text,
        "kind": st.integers(min_value=0, max_value=5),
        "startTimeUnixNano": st.integers(min_value=0, max_value=2**62).map(str),
        "endTimeUnixNano": st.integers(min_value=0, max_value=2**62),
        "attributes": st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.text(min_size=1, max_size=5),
                    "value": st.one_of(
                        st.builds(lambda s: {"stringValue": s}, _text),
                        st.builds(lambda i: {"intValue": str(i)}, st.integers(-(2**63), 2**63 - 1)),
                        st.builds(lambda b: {"boolValue": b}, st.booleans()),
                    ),
                }
            ),
            max_size=4,
        ),
    }
)


@settings(deadline=None)
@given(st.lists(st.lists(_otlp_span, min_size=1, max_size=4), min_size=1, max_size=4))
def test_otlp_documents_and_json_lines(batches: list[list[dict[str, Any]]]) -> None:
    docs = [{"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]} for spans in batches]
    jsonl = "\n".join(json.dumps(d) for d in docs).encode()
    merged = {"resourceSpans": [rs for d in docs for rs in d["resourceSpans"]]}
    from_lines = read_bytes(jsonl, "lines")
    from_doc = read_bytes(json.dumps(merged, indent=1).encode(), "doc")
    assert from_lines.equals(from_doc)
    spans = [s for b in batches for s in b]
    rows = from_doc.to_pylist()
    assert len(rows) == len(spans)
    for span, row in zip(spans, rows, strict=True):
        assert row["trace_id"] == span["traceId"].lower()
        assert row["span_id"] == span["spanId"].lower()
        assert row["start_ns"] == int(span["startTimeUnixNano"])
        assert row["end_ns"] == span["endTimeUnixNano"]
        expected = {}
        for kv in span["attributes"]:
            ((kind, value),) = kv["value"].items()
            expected[kv["key"]] = {"intValue": int, "stringValue": str, "boolValue": bool}[kind](
                value
            )
        promoted = {k for k in expected if k.startswith("tracelens.")}
        got = attribute_dict(row["attributes"], row["json_attributes"])
        assert got == {k: v for k, v in expected.items() if k not in promoted}


# --- robustness: a mutated real document is read or refused with InputError, never a crash ----

_SMALL_FIXTURES = [
    "otlp/opentelemetry-proto_examples_trace.json",
    "agent/any-agent-OPENAI.otlp.json",
    "jaeger/tableValuesTestTrace/testTrace.json",
    "crisp_test_cases/15.json",
    "zipkin/skew.json",
    "zipkin/yelp.json",
]
_json_value = st.recursive(
    st.one_of(
        st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**17, "18446744073709551616", "", "ZZ", {}]),
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False),
        st.text(max_size=6),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(_text, inner, max_size=2)),
    max_leaves=4,
)


def _slots(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) in a document, found with an explicit stack."""
    slots: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            slots.append((node, key))
            if isinstance(child, (dict, list)):
                stack.append(child)
    return slots


@settings(deadline=None)
@given(
    st.sampled_from(_SMALL_FIXTURES),
    st.lists(
        st.tuples(st.floats(min_value=0, max_value=1, exclude_max=True), _json_value),
        min_size=1,
        max_size=3,
    ),
)
def test_mutated_documents_are_read_or_refused(name: str, edits: list[tuple[float, Any]]) -> None:
    doc = json.loads((FIXTURES / name).read_text())
    for where, value in edits:
        slots = _slots(doc)
        if not slots:
            break
        container, key = slots[int(where * len(slots))]
        container[key] = value
    try:
        table = read_bytes(json.dumps(doc).encode(), "mutated.json")
    except InputError as exc:
        assert exc.source == "mutated.json"
    else:
        assert table.schema.names == list(COLUMNS)


@settings(deadline=None)
@given(
    st.one_of(
        st.binary(max_size=64),
        st.builds(lambda b: b"\n" + b, st.binary(max_size=64)),
        st.builds(lambda b: b'{"resourceSpans": [' + b, st.binary(max_size=32)),
        st.builds(lambda b: b"\x1f\x8b" + b, st.binary(max_size=32)),
    )
)
def test_random_bytes_are_read_or_refused(data: bytes) -> None:
    try:
        table = read_bytes(data, "random.bin")
    except InputError as exc:
        assert exc.source == "random.bin"
    else:
        assert table.schema.names == list(COLUMNS)
