"""The compiled OTLP protobuf decoder gives exactly what the generated-class decoder gives.

The oracle is ``_classes``: the protobuf library's own ``ExportTraceServiceRequest`` (upb decides
what is valid protobuf), walked span by span; ``test_otlp_proto.py`` checks it against the JSON
importer.  Both decode the same bytes and must agree on everything: the span table (``equals``),
the invalid-span mask and first message, the collector's checked answer, and whether the input is
refused (``InputError``).  Inputs are hypothesis-generated requests built with the real
``opentelemetry.proto`` classes (odd ids, every attribute value type, duplicate keys, promoted
attributes of odd types, events, links, statuses, schema URLs, trace states, several resources and
scopes, out-of-range kinds and times), spans sent as two concatenated parts (protobuf merges them),
hand-made encodings the generated classes never write, and corrupted bytes (truncations, bit
flips, random bytes).  What the compiled decoder accepts is listed in ``docs/otlp-proto.md``.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

pytest.importorskip("tracelens.ingest.otlp_proto._native")

from test_otlp_proto import _array, _kvlist

from tracelens.errors import InputError
from tracelens.ingest import otlp_proto
from tracelens.ingest._native_columns import PROMOTED_KEYS
from tracelens.ingest.otlp_proto import _decode, _fastpath
from tracelens.schema import SPAN_KINDS, STATUS_CODES

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not _fastpath.AVAILABLE, reason="TRACELENS_NO_NATIVE is set")


def _outcome(data: bytes, native: bool) -> Any:
    try:
        decoded = _decode(data, "<test>", native=native)
    except InputError as exc:
        assert "not a valid OTLP protobuf trace request" in exc.message
        return None
    return decoded.table, decoded.problems


def _checked(data: bytes, native: bool) -> Any:
    """The collector's answer through one path (the module switch, restored after)."""
    before = otlp_proto.USE_NATIVE
    otlp_proto.USE_NATIVE = native
    try:
        return otlp_proto.decode_export_request_checked(data)
    except InputError:
        return None
    finally:
        otlp_proto.USE_NATIVE = before


def assert_same(data: bytes) -> bool:
    """Both decoders agree on ``data``; returns whether it decoded at all."""
    native, python = _outcome(data, True), _outcome(data, False)
    assert (native is None) == (python is None)
    if native is None:
        return False
    (got, got_problems), (want, want_problems) = native, python
    assert got.schema == want.schema
    assert got.equals(want), _first_difference(got, want)
    assert got_problems.mask.tolist() == want_problems.mask.tolist()
    assert got_problems.first == want_problems.first
    got_checked = _checked(data, True)
    want_checked = _checked(data, False)
    assert got_checked is not None and want_checked is not None
    assert got_checked.spans.equals(want_checked.spans)
    assert (got_checked.rejected, got_checked.message) == (
        want_checked.rejected,
        want_checked.message,
    )
    return True


def _first_difference(got: Any, want: Any) -> str:
    for name in got.column_names:
        g, w = got[name].to_pylist(), want[name].to_pylist()
        if g != w:
            row = next(i for i, (a, b) in enumerate(zip(g, w, strict=True)) if a != b)
            return f"{name}[{row}]: native {g[row]!r} != python {w[row]!r}"
    return "tables differ"


def _compiled_path_ran(data: bytes) -> bool:
    return _fastpath.decode(data) is not None


# -- generated requests ------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8"), max_size=12)
_keys = st.sampled_from(
    [
        "a",
        "b",
        "",
        "é",
        "service.name",
        "http.request.method",
        "tracelens.kind",
        "tracelens.cpu_ns",
        "tracelens.args_hash",
        "tracelens.result_hash",
        "tracelens.arg_fps",
        "tracelens.result_fps",
        "tracelens.kindx",
        "k" * 130,
    ]
)
_ids = st.one_of(
    st.binary(min_size=16, max_size=16),
    st.binary(min_size=8, max_size=8),
    st.sampled_from([b"", b"\x00" * 16, b"\x00" * 8]),
    st.binary(max_size=20),
)
_times = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**63 - 1, 2**63, 2**64 - 1]))


def _any_value(depth: int = 0) -> st.SearchStrategy[AnyValue]:
    scalars = st.one_of(
        _text.map(lambda s: AnyValue(string_value=s)),
        st.integers(-(2**63), 2**63 - 1).map(lambda i: AnyValue(int_value=i)),
        st.sampled_from([0, -1, 2**63 - 1, -(2**63)]).map(lambda i: AnyValue(int_value=i)),
        st.booleans().map(lambda b: AnyValue(bool_value=b)),
        st.floats().map(lambda f: AnyValue(double_value=f)),
        st.sampled_from([math.nan, -math.nan, math.inf, -math.inf, -0.0, 1e16, 5e-324]).map(
            lambda f: AnyValue(double_value=f)
        ),
        st.binary(max_size=6).map(lambda b: AnyValue(bytes_value=b)),
        st.just(AnyValue()),
    )
    if depth >= 2:
        return scalars
    inner = _any_value(depth + 1)
    return st.one_of(
        scalars,
        scalars,
        st.lists(inner, max_size=3).map(_array),
        st.lists(st.tuples(_keys, inner), max_size=3).map(_kvlist),
    )


_attributes = st.one_of(
    st.lists(st.tuples(_keys, _any_value()), max_size=8),
    st.lists(st.tuples(_keys, _any_value(2)), min_size=17, max_size=30),  # sorted dedupe
)


def _add_attributes(target: Any, items: list[tuple[str, AnyValue]]) -> None:
    for k, v in items:
        target.add(key=k, value=v)


@st.composite
def requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(1, 3))):
        rs = req.resource_spans.add()
        _add_attributes(rs.resource.attributes, draw(st.lists(st.tuples(_keys, _any_value()))))
        rs.schema_url = draw(_text)
        for _ in range(draw(st.integers(0, 2))):
            ss = rs.scope_spans.add()
            ss.scope.name = draw(_text)
            ss.scope.version = draw(_text)
            ss.schema_url = draw(_text)
            # Often every span has the same keys (the SDK's usual shape) with values of any type.
            keys = draw(st.none() | st.lists(_keys, max_size=20))
            for _ in range(draw(st.integers(0, 5))):
                _span(draw, ss.spans.add(), keys)
    return req


def _span(draw: st.DrawFn, span: Any, keys: list[str] | None) -> None:
    span.trace_id = draw(_ids)
    span.span_id = draw(_ids)
    span.parent_span_id = draw(_ids)
    span.name = draw(_text)
    span.kind = draw(st.integers(-2, 7))
    span.start_time_unix_nano = draw(_times)
    span.end_time_unix_nano = draw(st.one_of(_times, st.just(span.start_time_unix_nano)))
    span.trace_state = draw(_text)
    span.flags = draw(st.integers(0, 2**32 - 1))
    span.dropped_attributes_count = draw(st.integers(0, 3))
    if draw(st.booleans()):
        span.status.code = draw(st.integers(-1, 4))
        span.status.message = draw(_text)
    if keys is None:
        _add_attributes(span.attributes, draw(_attributes))
    else:
        _add_attributes(span.attributes, [(k, draw(_any_value(1))) for k in keys])
    for _ in range(draw(st.integers(0, 2))):
        ev = span.events.add(name=draw(_text), time_unix_nano=draw(_times))
        _add_attributes(ev.attributes, draw(st.lists(st.tuples(_keys, _any_value()), max_size=3)))
    for _ in range(draw(st.integers(0, 2))):
        link = span.links.add(trace_id=draw(_ids), span_id=draw(_ids))
        _add_attributes(link.attributes, draw(st.lists(st.tuples(_keys, _any_value()), max_size=2)))


_SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(requests())
def test_generated_requests_decode_alike(request: ExportTraceServiceRequest) -> None:
    data = request.SerializeToString()
    assert _compiled_path_ran(data)  # what the generated classes write is never handed back
    assert assert_same(data)


# -- corrupted bytes ---------------------------------------------------------------------------


@st.composite
def corrupted(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(requests()).SerializeToString())
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        how = draw(st.sampled_from(["flip", "byte", "cut", "drop", "insert"]))
        if how == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "byte":
            data[at] = draw(st.integers(0, 255))
        elif how == "cut":
            del data[at:]
        elif how == "drop":
            del data[at]
        else:
            data.insert(at, draw(st.integers(0, 255)))
    return bytes(data)


@pytest.mark.system
@_SETTINGS
@given(corrupted())
def test_corrupted_requests_decode_alike_or_are_refused_alike(data: bytes) -> None:
    assert_same(data)


@settings(deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_alike_or_are_refused_alike(data: bytes) -> None:
    assert_same(data)


# -- hand-made encodings -----------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append(n & 0x7F | 0x80)
        n >>= 7


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


_GOOD_SPAN = (
    _field(1, b"\x01" * 16)
    + _field(2, b"\x02" * 8)
    + _field(5, b"op")
    + b"\x39"
    + (10).to_bytes(8, "little")
    + b"\x41"
    + (20).to_bytes(8, "little")
)


def _request(*spans: bytes, resource: bytes = b"", scope: bytes = b"") -> bytes:
    scope_spans = _field(1, scope) + b"".join(_field(2, s) for s in spans)
    return _field(1, _field(1, resource) + _field(2, scope_spans))


def _attr(key: bytes, value: bytes) -> bytes:
    return _field(9, _field(1, key) + _field(2, value))


_ODD_SPANS = {
    "plain": b"",
    "kind as a 10-byte varint": b"\x30" + b"\xff" * 9 + b"\x01",
    "kind as an 11-byte varint": b"\x30" + b"\xff" * 10 + b"\x01",
    "kind as a length field": _field(6, b"x"),
    "non-minimal tag": b"\xaa\x00\x01x",
    "unknown fields of every wire type": b"\x98\x01\x05"
    + b"\xa1\x01"
    + b"\x00" * 8
    + _field(99, b"?")
    + b"\xad\x01\x00\x00\x00\x00",
    "unknown group": b"\xfb\x01\xfc\x01",
    "unbalanced group": b"\xfb\x01",
    "field number zero": b"\x02\x00",
    "wire type 7": b"\x0f",
    "length past the end": b"\x2a\x7f",
    "length in six bytes": b"\x2a\x81\x80\x80\x80\x80\x00x",
    "name twice, bad UTF-8 first": _field(5, b"\xff") + _field(5, b"ok"),
    "name with a surrogate": _field(5, b"\xed\xa0\x80"),
    "overlong name": _field(5, b"\xc0\xaf"),
    "status with a bad code": _field(15, b"\x18\x07"),
    "status with a negative code": _field(15, b"\x18" + b"\xff" * 9 + b"\x01"),
    "status with an unknown field": _field(15, b"\x08\x01" + _field(2, b"m") + b"\x18\x02"),
    "status message twice": _field(15, _field(2, b"one") + _field(2, b"two") + b"\x18\x02"),
    "status with bad UTF-8": _field(15, _field(2, b"\xfe")),
    "status twice": _field(15, b"\x18\x02") + _field(15, _field(2, b"m")),
    "trace_state": _field(3, b"k=v"),
    "trace_state with bad UTF-8": _field(3, b"\xff"),
    "trace_state as a varint": b"\x18\x05",
    "flags and dropped counts": b"\x85\x01\x01\x03\x00\x00" + b"\x50\x02\x60\x01\x70\x07",
    "empty status": _field(15, b""),
    "truncated status": _field(15, b"\x18"),
    "events and a link without ids": _field(11, b"\x09" + b"\x00" * 8 + _field(2, b"ev"))
    + _field(13, _field(1, b"\x03" * 16)),
    "broken event": _field(11, b"\x0a\x05"),
    "attribute: value before key": _field(9, _field(2, b"\x18\x05") + _field(1, b"n")),
    "attribute: key length in 8 bytes": _field(
        9, b"\x0a\x81\x80\x80\x80\x80\x80\x80\x00k" + _field(2, _field(1, b"v"))
    ),
    "attribute: string length in 8 bytes": _field(
        9, _field(1, b"k") + _field(2, b"\x0a\x81\x80\x80\x80\x80\x80\x80\x00v")
    ),
    "attribute: two values": _attr(b"k", b"\x18\x05" + _field(1, b"s")),
    "attribute: empty value": _attr(b"k", b""),
    "attribute: no key": _field(9, _field(2, b"\x10\x01")),
    "attribute: bad UTF-8 key": _attr(b"\xff", b"\x10\x01"),
    "attribute: bad UTF-8 value": _attr(b"k", _field(1, b"\xc3")),
    "attribute: truncated double": _attr(b"k", b"\x21\x00\x00"),
    "attribute: 10-byte int": _attr(b"k", b"\x18" + b"\xff" * 9 + b"\x7f"),
    "attribute: NaN with a payload": _attr(b"k", b"\x21" + bytes.fromhex("010000000000f8ff")),
    "attribute: bytes": _attr(b"k", _field(7, b"\x00\xff")),
    "promoted cpu_ns as a string": _attr(b"tracelens.cpu_ns", _field(1, b"12")),
    "promoted cpu_ns as a double": _attr(b"tracelens.cpu_ns", b"\x21" + bytes(8)),
    "promoted kind as a bool": _attr(b"tracelens.kind", b"\x10\x01"),
    "promoted kind as an int": _attr(b"tracelens.kind", b"\x18\x07"),
    "promoted kind twice": _attr(b"tracelens.kind", b"\x18\x07")
    + _attr(b"tracelens.kind", _field(1, b"io")),
    "promoted fingerprints as a string": _attr(b"tracelens.arg_fps", _field(1, b"f")),
    "array attribute: strings with escapes": _attr(
        b"k", _field(5, _field(1, _field(1, b'a"\\\x00\x1f\x7f\n\xe2\x80\xa8')) + _field(1, b""))
    ),
    "array attribute: nested": _attr(b"k", _field(5, _field(1, _field(5, _field(1, b"\x10\x01"))))),
    "array attribute: an element twice": _attr(b"k", _field(5, _field(1, b"\x10\x01\x18\x02"))),
    "array attribute: an unknown field": _attr(b"k", _field(5, b"\x10\x01")),
    "array attribute: bad UTF-8": _attr(b"k", _field(5, _field(1, _field(1, b"\xff")))),
    "array attribute: empty": _attr(b"k", _field(5, b"")),
    "event: name twice": _field(11, _field(2, b"a") + _field(2, b"b")),
    "event: unknown field": _field(11, _field(2, b"a") + b"\x28\x01"),
    "event: time as a varint": _field(11, b"\x08\x05"),
    "event: repeated attribute key": _field(
        11, _field(3, _field(1, b"k") + _field(2, b"\x18\x01")) + _field(3, _field(1, b"k"))
    ),
    "event: attribute with no value": _field(11, _field(3, _field(1, b"k"))),
    "event: attribute value then key": _field(
        11, _field(3, _field(2, b"\x10\x01") + _field(1, b"k"))
    ),
    "event: seventeen attributes": _field(
        11, b"".join(_field(3, _field(1, b"k%d" % i) + _field(2, b"\x18\x01")) for i in range(17))
    ),
    "link: trace_state and flags": _field(
        13,
        _field(1, b"\x03" * 16)
        + _field(2, b"\x04" * 8)
        + _field(3, b"k=v")
        + b"\x35\x01\x00\x00\x00",
    ),
    "link: bad UTF-8 trace_state": _field(13, _field(1, b"\x03" * 16) + _field(3, b"\xff")),
    "link: only a span id": _field(13, _field(2, b"\x04" * 8)),
    "promoted fingerprints as an array": _attr(
        b"tracelens.result_fps", _field(5, _field(1, _field(1, b"a")) + _field(1, b"\x18\x02"))
    ),
}


@pytest.mark.parametrize("extra", _ODD_SPANS.values(), ids=_ODD_SPANS.keys())
def test_hand_made_encodings_decode_alike(extra: bytes) -> None:
    data = _request(_GOOD_SPAN + extra, _GOOD_SPAN, _GOOD_SPAN + extra)
    assert_same(data)
    for cut in range(1, len(data), 7):
        assert_same(data[:cut])


def _fail(raw: bytes) -> Any:
    raise AssertionError(f"handed to Python: {raw!r}")


def test_common_events_links_and_arrays_are_written_by_the_compiled_decoder() -> None:
    """Events, links and array attributes of the shapes SDKs send are written as JSON by the C
    code itself (no callback, no ``extras``), with the text the generated classes give."""
    scalars = [
        _field(1, 'a"\\\x00\x1f\x7f\n é \u2028 😀'.encode()),
        b"\x10\x01",
        b"\x18" + _varint(2**64 - 1),  # -1
        b"\x21" + struct.pack("<d", 5e-324),
        b"\x21" + struct.pack("<d", -0.0),
        b"\x21" + struct.pack("<d", 1e16),
        b"\x21" + struct.pack("<d", math.inf),
        b"\x21" + struct.pack("<d", math.nan),
        b"",  # an empty value: null
    ]
    array = _field(5, b"".join(_field(1, v) for v in scalars))
    attrs = b"".join(_field(3, _field(1, b"k%d" % i) + _field(2, v)) for i, v in enumerate(scalars))
    event = _field(11, b"\x09" + (2**64 - 1).to_bytes(8, "little") + _field(2, b"ev\t") + attrs)
    link_attrs = _field(4, _field(1, b"n") + _field(2, array))
    links = _field(13, _field(1, b"\x03" * 16) + _field(2, b"\x04" * 8) + link_attrs) + _field(
        13, _field(1, b"\x03" * 16)
    )
    span = _GOOD_SPAN + _attr(b"tags", array) + _attr(b"none", _field(5, b"")) + event + links
    data = _request(span, _GOOD_SPAN, span)
    assert assert_same(data)
    out = _fastpath._native.decode(data, PROMOTED_KEYS, SPAN_KINDS, STATUS_CODES, _fail, _fail)
    assert out is not None and out[4] == []  # no extras
    table = _decode(data, "<test>", native=True).table
    events = json.loads(table["events"][0].as_py())
    assert events[0]["time_ns"] == 2**64 - 1 and events[0]["name"] == "ev\t"
    assert events[0]["attributes"]["k2"] == -1
    assert table["links"][1].as_py() is None


def test_odd_resources_and_scopes_decode_alike() -> None:
    service = _field(1, _field(1, b"service.name") + _field(2, b"\x18\x2a"))  # an int service
    for resource, scope in [
        (service, _field(1, b"s") + _field(2, b"1.0")),
        (_field(1, b"\x0a\x01\xff"), b""),  # bad UTF-8 in a resource attribute key
        (b"", _field(1, b"\xff")),  # bad UTF-8 in the scope name
        (b"\x0a\x05", b""),  # truncated resource
    ]:
        assert_same(_request(_GOOD_SPAN, resource=resource, scope=scope))
    empty_groups = _field(1, _field(1, service)) + _request(_GOOD_SPAN)  # a resource without spans
    assert assert_same(empty_groups)
    assert assert_same(_field(1, _field(1, service)))  # no spans at all
    assert assert_same(b"")


def test_message_fields_sent_twice_merge_as_protobuf_says() -> None:
    """A message field sent twice is merged (proto3 encoding spec): the scalar fields set in the
    second win, the others stay.  Written by hand; the values below follow from that rule."""
    status = _field(15, b"\x18\x02") + _field(15, _field(2, b"late"))  # code ERROR, then a message
    service = _field(1, _field(1, b"service.name") + _field(2, _field(1, b"svc")))
    other = _field(1, _field(1, b"x") + _field(2, b"\x18\x07"))
    scope = _field(1, _field(1, b"lib")) + _field(1, _field(2, b"2.0"))  # name, then version
    scope_spans = scope + _field(2, _GOOD_SPAN + status)
    data = _field(1, _field(1, service) + _field(1, other) + _field(2, scope_spans))
    assert assert_same(data)
    row = _decode(data, "<test>", native=True).table.to_pylist()[0]
    assert (row["status_code"], row["status_message"]) == ("error", "late")
    assert (row["scope_name"], row["scope_version"]) == ("lib", "2.0")
    assert (row["service"], row["resource"]) == ("svc", '{"service.name":"svc","x":7}')


@pytest.mark.parametrize("level", ["resource", "scope", "span"])
def test_string_fields_it_skips_are_still_checked_for_utf8(level: str) -> None:
    """``schema_url`` and ``trace_state`` are not stored, but a string field with bad UTF-8 makes
    the whole request invalid protobuf (the library refuses it), so the compiled decoder must not
    accept it either."""
    for value, valid in [(b"https://opentelemetry.io/schemas/1.26.0", True), (b"\xc0\xaf", False)]:
        if level == "span":
            data = _request(_GOOD_SPAN + _field(3, value))
        elif level == "scope":
            data = _field(1, _field(2, _field(2, _GOOD_SPAN) + _field(3, value)))
        else:
            data = _field(1, _field(2, _field(2, _GOOD_SPAN)) + _field(3, value))
        assert assert_same(data) is valid


@st.composite
def merged(draw: st.DrawFn) -> bytes:
    """A generated request written by hand so that each span (and sometimes a resource or scope)
    is sent as two messages one after the other, which protobuf merges into one: fields set in
    the second win, repeated fields (attributes, events, links) are joined, a status is merged."""
    req = draw(requests())
    out = b""
    for rs in req.resource_spans:
        body = _field(1, rs.resource.SerializeToString())
        if draw(st.booleans()):
            second = Resource()
            _add_attributes(second.attributes, draw(st.lists(st.tuples(_keys, _any_value(2)))))
            body += _field(1, second.SerializeToString())
        for ss in rs.scope_spans:
            scope_body = _field(1, ss.scope.SerializeToString())
            if draw(st.booleans()):
                scope_body += _field(
                    1, InstrumentationScope(version=draw(_text)).SerializeToString()
                )
            for span in ss.spans:
                other = Span()
                _span(draw, other, None)
                scope_body += _field(2, span.SerializeToString() + other.SerializeToString())
            body += _field(2, scope_body)
        out += _field(1, body)
    return out


@pytest.mark.system
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(merged())
def test_merged_messages_decode_alike(data: bytes) -> None:
    assert_same(data)


# -- the benchmark payload ---------------------------------------------------------------------


def _bench_payloads(count: int) -> list[bytes]:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from ingest import Payloads, base_payload
    finally:
        sys.path.remove(str(ROOT / "bench"))
    body, offsets = base_payload()
    payloads = Payloads(body, offsets)
    return [body] + [payloads.make() for _ in range(count - 1)]


def test_bench_payload_decodes_alike() -> None:
    for data in _bench_payloads(3):
        assert _compiled_path_ran(data)
        assert assert_same(data)
    decoded = _decode(data, "<bench>", native=True)
    table, problems = decoded.table, decoded.problems
    assert table.num_rows == 512 and problems.first is None
    assert table["cpu_ns"].null_count == 0 and set(table["kind"].to_pylist()) == {"io", "gpu"}
    assert "tracelens.kind" not in dict(table["attributes"][0].as_py())


def test_bench_payload_with_a_zero_span_id_is_rejected_alike() -> None:
    data = bytearray(_bench_payloads(1)[0])
    found = re.search(rb"\x0a\x10.{16}\x12\x08", data, re.DOTALL)  # a span's trace and span id
    assert found is not None
    data[found.end() : found.end() + 8] = bytes(8)
    checked = _checked(bytes(data), True)
    assert checked.rejected == 1 and checked.spans.num_rows == 511
    assert checked.message.endswith("span id is not 8 bytes (16 hex digits) or is all zeros")
    assert assert_same(bytes(data))


def test_switched_off_by_the_environment() -> None:
    code = (
        "from tracelens.ingest.otlp_proto import USE_NATIVE, _fastpath\n"
        "print(USE_NATIVE, _fastpath.AVAILABLE)"
    )
    env = {**os.environ, "TRACELENS_NO_NATIVE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["False", "False"]


def test_problem_rows_and_the_first_problem() -> None:
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    for kind, code, start in [(0, 0, 1), (9, 0, 1), (1, 5, 1), (1, 0, 2**64 - 1), (1, 0, 1)]:
        span = spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, kind=kind)
        span.start_time_unix_nano, span.end_time_unix_nano = start, 5
        span.status.code = code
    data = req.SerializeToString()
    problems = _decode(data, "<test>", native=True).problems
    assert np.flatnonzero(problems.mask).tolist() == [1, 2, 3]
    assert problems.first == "resourceSpans[0].scopeSpans[0].spans[1]: kind: not a span kind"
