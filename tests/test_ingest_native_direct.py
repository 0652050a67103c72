"""OTLP/JSON read straight from the bytes (``_json_direct.h``, ``otlp_json.decode_bytes``) gives
what parsing gives.

Three ways read the same JSON Lines: straight from the bytes (where the reader takes a line),
parsed by orjson and walked by the compiled builder, and the Python decoder alone (the oracle).
Hypothesis makes documents in the Collector's key order (resource, then scopeSpans; scope, then
spans), which the direct reader takes, mixed with what it must leave to the parsed way (keys in
another order, escapes, text that is not UTF-8, odd events, links, names for enums, wild values,
invalid JSON): same table, warnings and error all three ways.  Separate tests check that the direct
reader really takes the common shape, and one span's columns against values written by hand.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ingest_native import _GOOD, _REQUIRED, _WILD, _first_difference, _resource, _text

from tracelens.errors import InputError
from tracelens.ingest import _json_fast, otlp_json, read_bytes

pytestmark = pytest.mark.skipif(
    not _json_fast.AVAILABLE,
    reason="the compiled builder is not built or TRACELENS_NO_NATIVE is set",
)


def _read(data: bytes, way: str) -> tuple[Any, ...]:
    """("ok", table, warnings) or ("error", message), read one of the three ways."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_json_fast, "USE_NATIVE", way != "python")
        if way == "parsed":
            m.setattr(otlp_json, "decode_bytes", lambda data, batch: False)
        warnings: list[str] = []
        try:
            table = read_bytes(data, "made.jsonl", warnings=warnings)
        except InputError as exc:
            return ("error", str(exc))
    return ("ok", table, warnings)


def _all_same(data: bytes) -> tuple[Any, ...]:
    outcomes = {way: _read(data, way) for way in ("direct", "parsed", "python")}
    oracle = outcomes["python"]
    for way in ("direct", "parsed"):
        got = outcomes[way]
        assert got[0] == oracle[0], (way, got[:1] + got[-1:], oracle[:1] + oracle[-1:])
        if got[0] == "error":
            assert got == oracle, way
        else:
            assert got[1].schema.equals(oracle[1].schema, check_metadata=True), way
            assert got[1].equals(oracle[1]), (way, _first_difference(got[1], oracle[1]))
            assert got[2] == oracle[2], way
    return oracle


_ascii = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=6)
_hex32 = st.text("0123456789abcdef", min_size=32, max_size=32)
_hex16 = st.text("0123456789abcdef", min_size=16, max_size=16)
_int64 = st.integers(-(2**63), 2**63 - 1)
_time = st.one_of(st.integers(0, 2**62).map(str), st.integers(0, 2**62))
_plain_value = st.one_of(
    st.builds(lambda s: {"stringValue": s}, _ascii),
    st.builds(lambda i: {"intValue": i}, st.one_of(_int64.map(str), _int64)),
    st.builds(
        lambda d: {"doubleValue": d},
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            st.integers(-(2**50), 2**50),
        ),
    ),
    st.builds(lambda b: {"boolValue": b}, st.booleans()),
)
_plain_key = st.one_of(
    st.sampled_from(["tracelens.kind", "tracelens.cpu_ns", "tracelens.args_hash", "k"]), _ascii
)
# What the exporter writes: the values the direct reader takes.
_PLAIN: dict[str, st.SearchStrategy[Any]] = {
    "traceId": st.one_of(_hex32, _hex32.map(str.upper), _hex16),
    "spanId": st.one_of(_hex16, _hex16.map(str.upper)),
    "parentSpanId": st.one_of(_hex16, st.just(""), st.none()),
    "name": _ascii,
    "kind": st.integers(0, 5),
    "startTimeUnixNano": _time,
    "endTimeUnixNano": _time,
    "attributes": st.one_of(
        st.lists(
            st.builds(lambda k, v: {"key": k, "value": v}, _plain_key, _plain_value), max_size=8
        ),
        st.none(),
    ),
    "status": st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {}, optional={"code": st.integers(0, 2), "message": st.one_of(_ascii, st.none())}
        ),
    ),
    "events": st.one_of(
        st.sampled_from([[], None]),
        st.lists(
            st.fixed_dictionaries(
                {"timeUnixNano": _time},
                optional={
                    "name": _ascii,
                    "attributes": st.lists(
                        st.builds(lambda k, v: {"key": k, "value": v}, _plain_key, _plain_value),
                        max_size=4,
                    ),
                    "droppedAttributesCount": st.integers(0, 2),
                },
            ),
            min_size=1,
            max_size=3,
        ),
    ),
    "links": st.sampled_from([[], None]),
    "flags": st.integers(0, 3),
}


@st.composite
def _span(draw: st.DrawFn, odd: bool) -> dict[str, Any]:
    """A span in the exporter's key order with the values it writes; when ``odd``, now and then
    a value of another shape (``_GOOD``, ``_WILD`` of test_ingest_native: names for enums,
    base64 ids, events and links, bad values) that the parsed way must take or refuse."""
    span: dict[str, Any] = {}
    for key, plain in _PLAIN.items():
        if key not in _REQUIRED and draw(st.integers(0, 2)) == 0:
            continue
        if odd and draw(st.integers(0, 30)) == 0:
            span[key] = draw(_WILD[key] if key in _WILD and draw(st.booleans()) else _GOOD[key])
        else:
            span[key] = draw(plain)
    return span


@st.composite
def _document(draw: st.DrawFn) -> dict[str, Any]:
    """Resource before scopeSpans, scope before spans, as the exporter writes them; now and then
    in another order (the parsed way)."""
    odd = draw(st.booleans())
    resource_spans = []
    for _ in range(draw(st.integers(1, 2))):
        scopes = []
        for _ in range(draw(st.integers(1, 2))):
            scope = draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "name": st.one_of(_ascii, _ascii, _ascii, _text, st.none()),
                        "version": _ascii,
                    },
                )
            )
            spans = draw(st.lists(_span(odd), min_size=1, max_size=3))
            scopes.append({"scope": scope, "spans": spans})
            if draw(st.booleans()):
                scopes[-1]["schemaUrl"] = draw(_ascii)
        resource = draw(st.one_of(_resource.filter(lambda r: r is not None), st.just({})))
        entry = {"resource": resource, "scopeSpans": scopes}
        if draw(st.integers(0, 5)) == 0:
            entry = {"scopeSpans": scopes, "resource": resource}
        resource_spans.append(entry)
    return {"resourceSpans": resource_spans}


def _encode(doc: Any, seed: int) -> bytes:
    """JSON as producers write it: compact or spaced, ASCII-escaped or raw UTF-8."""
    rng = random.Random(seed)
    separators = rng.choice([(",", ":"), (", ", ": ")])
    text = json.dumps(doc, allow_nan=True, ensure_ascii=rng.random() < 0.8, separators=separators)
    return text.encode()


@settings(deadline=None)
@given(
    docs=st.lists(_document(), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
    broken=st.integers(0, 9),
)
def test_documents_read_the_same_three_ways(
    docs: list[dict[str, Any]], seed: int, broken: int
) -> None:
    """JSON Lines of made documents (the first line is always parsed, so a line of its own
    starts them; sometimes a line is cut short: invalid JSON): the same table, warnings and
    error straight from the bytes, parsed, and by the Python decoder."""
    lines = [b'{"resourceSpans": []}'] + [_encode(d, seed + i) for i, d in enumerate(docs)]
    if broken == 0:
        lines[-1] = lines[-1][: len(lines[-1]) // 2]
    _all_same(b"\n".join(lines) + b"\n")


def _exporter_span(n: int, **extra: Any) -> dict[str, Any]:
    return {
        "traceId": f"{n:032X}",
        "spanId": f"{n + 1:016x}",
        "parentSpanId": "",
        "name": f"op-{n}",
        "kind": 2,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000000500000",
        "attributes": [
            {"key": "http.response.status_code", "value": {"intValue": "200"}},
            {"key": "latency.ratio", "value": {"doubleValue": 0.1}},
            {"key": "cache.hit", "value": {"boolValue": True}},
            {"key": "tracelens.cpu_ns", "value": {"intValue": 42}},
            {"key": "tracelens.kind", "value": {"stringValue": "io"}},
            {"key": "model", "value": {"stringValue": "a"}},
            {"key": "model", "value": {"stringValue": "b"}},
        ],
        "status": {"code": 2, "message": "boom"},
        "events": [],
        "links": [],
        "flags": 1,
        **extra,
    }


def _exporter_line(*spans: dict[str, Any]) -> bytes:
    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]
                },
                "scopeSpans": [{"scope": {"name": "lib", "version": "1"}, "spans": list(spans)}],
                "schemaUrl": "https://opentelemetry.io/schemas/1.21.0",
            }
        ]
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def test_events_are_read_straight_from_the_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception event (the shape SDKs export) is read by the direct reader, and its JSON is
    the text written here by hand; a repeated key in an event sends the line the parsed way."""
    taken: list[bool] = []
    decode_bytes = otlp_json.decode_bytes

    def counting(data: bytes, batch: Any) -> bool:
        taken.append(decode_bytes(data, batch))
        return taken[-1]

    def value(v: Any) -> dict[str, Any]:
        return {"bool": {"boolValue": v}, "int": {"intValue": str(v)}, "float": {"doubleValue": v},
                "str": {"stringValue": v}}[type(v).__name__]  # fmt: skip

    def event(*attrs: tuple[str, Any]) -> dict[str, Any]:
        return {
            "timeUnixNano": "1700000000000000100",
            "name": "exception",
            "attributes": [{"key": k, "value": value(v)} for k, v in attrs],
        }

    monkeypatch.setattr(otlp_json, "decode_bytes", counting)
    plain = event(("exception.type", "ValueError: bad"), ("n", 3), ("x", 0.5), ("b", True))
    repeated = event(("k", "a"), ("k", "b"))
    data = b"\n".join(
        [
            _exporter_line(_exporter_span(1)),
            _exporter_line(_exporter_span(2, events=[plain, {"timeUnixNano": None}])),
            _exporter_line(_exporter_span(3, events=[repeated])),
        ]
    )
    table = _all_same(data)[1]
    assert taken[:2] == [True, False]
    assert table["events"][1].as_py() == (
        '[{"time_ns":1700000000000000100,"name":"exception","attributes":'
        '{"exception.type":"ValueError: bad","n":3,"x":0.5,"b":true}},'
        '{"time_ns":0,"name":"","attributes":{}}]'
    )
    assert table["events"][2].as_py() == (
        '[{"time_ns":1700000000000000100,"name":"exception","attributes":{"k":"b"}}]'
    )


def test_the_direct_reader_takes_the_exporters_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines in the Collector file exporter's shape are read straight from the bytes (none goes
    the parsed way), and one span's columns are the values written out here by hand: the id
    lower-cased, an empty parent null, kind 2 server, status 2 error with its message, the
    repeated key's last value kept, tracelens.cpu_ns and tracelens.kind in their columns, the
    non-string values as their JSON text, the resource and scope from their parts."""
    taken = {True: 0, False: 0}
    decode_bytes = otlp_json.decode_bytes

    def counting(data: bytes, batch: Any) -> bool:
        done = decode_bytes(data, batch)
        taken[done] += 1
        return done

    monkeypatch.setattr(otlp_json, "decode_bytes", counting)
    first = _exporter_line(_exporter_span(9))
    data = first + b"\n" + _exporter_line(_exporter_span(10), _exporter_span(11)) + b"\n" + first
    table = read_bytes(data, "exporter.jsonl")
    assert taken == {True: 2, False: 0}
    row = table.to_pylist()[1]
    assert row["trace_id"] == "0000000000000000000000000000000a"
    assert (row["span_id"], row["parent_span_id"], row["name"]) == (
        "000000000000000b",
        None,
        "op-10",
    )
    assert (row["span_kind"], row["status_code"], row["status_message"]) == (
        "server",
        "error",
        "boom",
    )
    assert (row["start_ns"], row["end_ns"]) == (
        1_700_000_000_000_000_000,
        1_700_000_000_000_500_000,
    )
    assert (row["kind"], row["cpu_ns"]) == ("io", 42)
    assert sorted(row["attributes"]) == [
        ("cache.hit", "true"),
        ("http.response.status_code", "200"),
        ("latency.ratio", "0.1"),
        ("model", "b"),
    ]
    assert sorted(row["json_attributes"]) == [
        "cache.hit",
        "http.response.status_code",
        "latency.ratio",
    ]
    assert (row["service"], row["resource"]) == ("svc", '{"service.name":"svc"}')
    assert (row["scope_name"], row["scope_version"]) == ("lib", "1")
    assert (row["events"], row["links"]) == (None, None)
    _all_same(data)


@pytest.mark.parametrize(
    "line",
    [
        b'{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[{"a":["b":1]}]}]}]}',
        b'{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[{"a":{"b"}}]}]}]}',
        b'{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[{"a":01}]}]}]}',
        b'{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[{"a":[1,]}]}]}]}',
        b'{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[{}]}]}]} x',
        b'{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[{"a":tru}]}]}]}',
    ],
)
def test_invalid_json_is_never_taken(line: bytes) -> None:
    """Invalid JSON in a value the direct reader skips unread (an array with a key, an object
    without a value, a leading zero, a trailing comma, text after the document, a cut literal):
    it leaves the line to the parsed way, which names the line, as parsing does."""
    oracle = _all_same(b'{"resourceSpans": []}\n' + line + b"\n")
    assert oracle[0] == "error" and "made.jsonl:2" in oracle[1]


@pytest.mark.parametrize(
    "literal",
    [
        b"1e-400",
        b"1E5",
        b"-0.0",
        b"2.2250738585072011e-308",
        b"0.1e1",
        b"4.9e-324",
        b"1e400",
        b"123456789012345678",
        b"-9007199254740993",
        b"0.30000000000000004",
    ],
)
def test_double_literals_read_the_same(literal: bytes) -> None:
    """doubleValue written as JSON literals no encoder here writes (underflow, overflow, an
    exponent without a fraction, integers past 2**53): the same value all three ways."""
    span = (
        b'{"traceId":"0000000000000000000000000000000a","spanId":"000000000000000b",'
        b'"startTimeUnixNano":"1","endTimeUnixNano":"2",'
        b'"attributes":[{"key":"d","value":{"doubleValue":' + literal + b"}}]}"
    )
    line = (
        b'{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[' + span + b"]}]}]}"
    )
    _all_same(b'{"resourceSpans": []}\n' + line + b"\n")


@pytest.mark.parametrize(
    ("text", "taken"),
    [
        ("é 😀 中".encode(), True),
        (b"\x7f", True),
        (b"\xff", False),
        (b"\xc0\xaf", False),  # an overlong "/"
        (b"\xed\xa0\x80", False),  # a surrogate
        (b"\xf4\x90\x80\x80", False),  # past U+10FFFF
        (b"\xe2\x82", False),  # cut short
    ],
)
def test_utf8_text(text: bytes, taken: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Text past ASCII in a name and a value: well-formed UTF-8 is read straight from the bytes
    (the same table as parsing makes); anything else is left to the parsed way, which refuses
    the line as parsing does."""
    span = _exporter_span(3)
    line = _exporter_line(span).replace(b'"op-3"', b'"' + text + b'"')
    line = line.replace(b'{"stringValue":"a"}', b'{"stringValue":"' + text + b'"}')
    seen: list[bool] = []
    decode_bytes = otlp_json.decode_bytes
    monkeypatch.setattr(
        otlp_json,
        "decode_bytes",
        lambda data, batch: seen.append(decode_bytes(data, batch)) or seen[-1],
    )
    oracle = _all_same(_exporter_line(_exporter_span(1)) + b"\n" + line + b"\n")
    assert seen == [taken, False]  # the direct way's read; the Python way's declines at once
    if taken:
        assert oracle[1]["name"].to_pylist()[1] == text.decode()
    else:
        assert oracle[0] == "error" and "made.jsonl:2" in oracle[1]
