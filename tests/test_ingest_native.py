"""The compiled OTLP/JSON builder (``ingest/_json_native.c``) gives what the Python decoder gives.

The Python decoder is the oracle: every fixture, and hypothesis-made documents full of the odd
shapes real producers write (upper-case and base64 ids, enum names, int64 as numbers, every
AnyValue type, repeated keys, promoted ``tracelens.*`` values of any type, events and links, bad
values), must give the same table, warnings and errors with the compiled builder switched on and
off.  Separate tests check that the compiled path really runs and that a bad record in the middle
of a JSON Lines file is reported at its line whichever path met it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from tracelens.errors import InputError
from tracelens.ingest import _json_fast, otlp_json, read_bytes, read_files

pytestmark = pytest.mark.skipif(
    not _json_fast.AVAILABLE,
    reason="the compiled builder is not built or TRACELENS_NO_NATIVE is set",
)

FILES = sorted(
    p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", "")
)


def _outcome(read: Any, native: bool) -> tuple[Any, ...]:
    """What reading gives: ("ok", table, warnings) or ("error", message)."""
    before = _json_fast.USE_NATIVE
    _json_fast.USE_NATIVE = native
    try:
        warnings: list[str] = []
        table = read(warnings)
    except InputError as exc:
        return ("error", str(exc))
    finally:
        _json_fast.USE_NATIVE = before
    return ("ok", table, warnings)


def _same(read: Any) -> tuple[Any, ...]:
    on, off = _outcome(read, True), _outcome(read, False)
    assert on[0] == off[0], (on[:1] + on[-1:], off[:1] + off[-1:])
    if on[0] == "error":
        assert on == off
    else:
        assert on[1].schema.equals(off[1].schema, check_metadata=True)
        assert on[1].equals(off[1]), _first_difference(on[1], off[1])
        assert on[2] == off[2]
    return on


def _first_difference(a: Any, b: Any) -> str:
    for name in a.column_names:
        x, y = a[name].to_pylist(), b[name].to_pylist()
        if x != y:
            row = next((i for i, (u, v) in enumerate(zip(x, y, strict=False)) if u != v), 0)
            return f"{name}[{row}]: {x[row : row + 1]} != {y[row : row + 1]}"
    return "rows differ in number"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixtures_read_the_same(path: Path) -> None:
    def read(warnings: list[str]) -> Any:
        result = read_files([path])
        warnings.extend(result.warnings)
        return result.spans

    _same(read)


def test_the_compiled_path_takes_the_otlp_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every OTLP JSON fixture document is decoded by the compiled builder, none falls back."""
    taken = {"native": 0, "python": 0}
    document = otlp_json._document

    def counting(doc: Any, batch: Any, native: Any) -> None:
        taken["python" if native is None else "native"] += 1
        document(doc, batch, native)

    monkeypatch.setattr(otlp_json, "_document", counting)
    files = [p for p in FILES if ".otlp." in p.name or p.suffix == ".jsonl"]
    assert len(files) > 50
    spans = read_files(files).spans
    assert spans.num_rows > 1000
    assert taken["python"] == 0
    assert taken["native"] > 100


# -- hypothesis-made documents -------------------------------------------------------------------
# Good values are ones the Python decoder accepts (many of them shapes the compiled builder leaves
# to it); wild values include ones it refuses.  Documents are mostly good, so most examples compare
# tables, and some wild, so errors are compared too.

_hex32 = st.text("0123456789abcdef", min_size=32, max_size=32)
_hex16 = st.text("0123456789abcdef", min_size=16, max_size=16)
_text = st.text(max_size=6)
_good_trace_id = st.one_of(
    _hex32,
    _hex32.map(str.upper),
    st.just("AAECAwQFBgcICQoLDA0ODw=="),  # base64 of 16 bytes
    st.just("0123456789ABCDEF0123456789abcdeZ"),
    st.text(min_size=1, max_size=6),
)
_good_span_id = st.one_of(
    _hex16, _hex16.map(str.upper), st.just("AAECAwQFBgc="), st.text(min_size=1, max_size=6)
)
_int64 = st.integers(-(2**63), 2**63 - 1)
_good_time = st.one_of(
    st.integers(0, 2**62).map(str),
    st.integers(0, 2**62),
    _int64.map(str),
    st.sampled_from(["+5", " 7", "1_000", "007", "-0", "5.0"]).filter(lambda v: v != "5.0"),
    st.just(5.0),
)
_wild_time = st.one_of(
    st.sampled_from(["1.5", "9223372036854775808", "", "x"]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(2**63, 2**64),
    st.none(),
)
_good_scalar = st.one_of(
    st.builds(lambda s: {"stringValue": s}, _text),
    st.builds(lambda i: {"intValue": i}, st.one_of(_int64, _int64.map(str), _good_time)),
    st.builds(
        lambda d: {"doubleValue": d},
        st.one_of(st.floats(), st.integers(-(2**60), 2**60), st.just("NaN")),
    ),
    st.builds(lambda b: {"boolValue": b}, st.booleans()),
    st.builds(lambda b: {"bytesValue": b}, st.sampled_from(["AAE=", ""])),
    st.builds(lambda s, i: {"intValue": i, "stringValue": s}, _text, _int64),
    st.just({}),
)
_wild_scalar = st.one_of(
    st.sampled_from(
        [
            {"stringValue": None},
            {"unknownValue": 1},
            {"intValue": True},
            {"boolValue": "true"},
            {"doubleValue": "x"},
            {"bytesValue": "not base64"},
            {"intValue": "1.5"},
        ]
    ),
    st.none(),
)


def _values(scalar: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalar,
        lambda inner: st.one_of(
            st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(inner, max_size=3)),
            st.builds(
                lambda kvs: {"kvlistValue": {"values": kvs}},
                st.lists(st.fixed_dictionaries({"key": _text, "value": inner}), max_size=3),
            ),
        ),
        max_leaves=4,
    )


_good_value = _values(_good_scalar)
_wild_value = _values(st.one_of(_good_scalar, _wild_scalar))
_key = st.one_of(
    st.sampled_from(
        [
            "tracelens.kind",
            "tracelens.cpu_ns",
            "tracelens.args_hash",
            "tracelens.result_hash",
            "tracelens.arg_fps",
            "tracelens.result_fps",
            "http.method",
            "k",
        ]
    ),
    _text,
)


def _attributes(value: st.SearchStrategy[Any], wild: bool) -> st.SearchStrategy[Any]:
    attribute = st.one_of(
        st.fixed_dictionaries({"key": _key, "value": value}),
        st.fixed_dictionaries({"key": _key}),
    )
    if wild:
        attribute = st.one_of(
            attribute,
            st.sampled_from([{"value": {"stringValue": "x"}}, {"key": 1, "value": {}}, "kv"]),
        )
    return st.one_of(st.lists(attribute, max_size=8), st.none(), st.just({}))


_good_attributes = _attributes(_good_value, wild=False)
_wild_attributes = st.one_of(_attributes(_wild_value, wild=True), st.just("x"))
_good_kind = st.one_of(
    st.integers(0, 5),
    st.sampled_from(["SPAN_KIND_SERVER", "CLIENT", "span_kind_client", "internal"]),
)
_wild_kind = st.one_of(st.sampled_from([-1, 6, "nope", True]), st.none())
_good_status = st.one_of(
    st.none(),
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "code": st.one_of(
                st.integers(0, 2), st.sampled_from(["STATUS_CODE_ERROR", "OK", "ok"])
            ),
            "message": st.one_of(_text, st.none()),
        },
    ),
)
_wild_status = st.one_of(
    st.just("error"), st.just({"code": 3}), st.just({"message": 1}), st.just({"code": None})
)


def _events(attributes: st.SearchStrategy[Any], time: st.SearchStrategy[Any]) -> Any:
    return st.lists(
        st.fixed_dictionaries(
            {"timeUnixNano": time}, optional={"name": _text, "attributes": attributes}
        ),
        max_size=2,
    )


def _links(attributes: st.SearchStrategy[Any], trace: Any, span: Any) -> Any:
    return st.lists(
        st.fixed_dictionaries(
            {"traceId": trace, "spanId": span}, optional={"attributes": attributes}
        ),
        max_size=2,
    )


_GOOD: dict[str, st.SearchStrategy[Any]] = {
    "traceId": st.one_of(_hex32, _good_trace_id),
    "spanId": st.one_of(_hex16, _good_span_id),
    "startTimeUnixNano": st.one_of(st.integers(1, 2**62).map(str), _good_time),
    "endTimeUnixNano": st.one_of(st.integers(1, 2**62).map(str), _good_time),
    "parentSpanId": st.one_of(_hex16, _good_span_id, st.just(""), st.just(0), st.none()),
    "name": _text,
    "kind": _good_kind,
    "attributes": _good_attributes,
    "status": _good_status,
    "events": st.one_of(_events(_good_attributes, _good_time), st.none()),
    "links": st.one_of(_links(_good_attributes, _good_trace_id, _good_span_id), st.none()),
    "flags": st.integers(0, 3),
}
_WILD: dict[str, st.SearchStrategy[Any]] = {
    "traceId": st.one_of(st.just(""), st.integers(0, 9), st.none()),
    "spanId": st.one_of(st.just(""), st.integers(0, 9)),
    "startTimeUnixNano": _wild_time,
    "endTimeUnixNano": _wild_time,
    "parentSpanId": st.one_of(st.just([1]), st.just(5)),
    "name": st.one_of(st.none(), st.just(3)),
    "kind": _wild_kind,
    "attributes": _wild_attributes,
    "status": _wild_status,
    "events": st.one_of(_events(_wild_attributes, _wild_time), st.just("x"), st.just([5])),
    "links": st.one_of(_links(_good_attributes, st.just(""), _good_span_id), st.just([{}])),
}
_REQUIRED = ("traceId", "spanId", "startTimeUnixNano", "endTimeUnixNano")


@st.composite
def _span(draw: st.DrawFn, wild: bool) -> dict[str, Any]:
    span: dict[str, Any] = {}
    for key, good in _GOOD.items():
        if key not in _REQUIRED and draw(st.booleans()):
            continue
        if wild and key in _WILD and draw(st.integers(0, 5)) == 0:
            span[key] = draw(_WILD[key])
        else:
            span[key] = draw(good)
    return span


_resource = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "attributes": st.lists(
                st.fixed_dictionaries({"key": _key, "value": _good_value}), max_size=3
            )
        }
    ),
)


@st.composite
def _document(draw: st.DrawFn) -> dict[str, Any]:
    wild = draw(st.integers(0, 3)) == 0
    scope = st.fixed_dictionaries(
        {"spans": st.lists(_span(wild), max_size=5)},
        optional={
            "scope": st.fixed_dictionaries(
                {}, optional={"name": st.one_of(_text, st.none()), "version": _text}
            )
        },
    )
    resource_spans = st.fixed_dictionaries(
        {"scopeSpans": st.lists(scope, min_size=1, max_size=2)}, optional={"resource": _resource}
    )
    return {"resourceSpans": draw(st.lists(resource_spans, min_size=1, max_size=2))}


def _encode(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


@settings(deadline=None)
@given(docs=st.lists(_document(), min_size=1, max_size=4))
def test_documents_read_the_same(docs: list[dict[str, Any]]) -> None:
    """JSON Lines of hypothesis-made documents: same table, warnings and error either way."""
    data = b"\n".join(_encode(d) for d in docs) + b"\n"

    def read(warnings: list[str]) -> Any:
        return read_bytes(data, "made.jsonl", warnings=warnings)

    _same(read)


def _plain_span(n: int, **extra: Any) -> dict[str, Any]:
    return {
        "traceId": f"{n:032x}",
        "spanId": f"{n + 1:016x}",
        "name": f"op-{n}",
        "startTimeUnixNano": str(1_000 + n),
        "endTimeUnixNano": str(2_000 + n),
        "attributes": [{"key": "n", "value": {"intValue": str(n)}}],
        **extra,
    }


def _line(*spans: dict[str, Any]) -> bytes:
    return _encode({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def test_fast_and_python_documents_keep_their_order() -> None:
    """Documents the compiled builder leaves aside (a base64 id) sit between ones it takes: rows
    stay in file order, and the table equals the Python decoder's."""
    odd = _plain_span(99, spanId="AAECAwQFBgc=")
    lines = [_line(_plain_span(i)) if i % 3 else _line(_plain_span(i), odd) for i in range(12)]
    data = b"\n".join(lines)
    _, table, _ = _same(lambda warnings: read_bytes(data, "mixed.jsonl", warnings=warnings))
    names = table["name"].to_pylist()
    assert names == [n for i in range(12) for n in ([f"op-{i}"] if i % 3 else [f"op-{i}", "op-99"])]
    assert table["span_id"].to_pylist()[1] == "0001020304050607"


def test_a_bad_record_is_named_by_its_line_whichever_path_met_it() -> None:
    """Line 3 of 4 holds a span whose start time is not an integer: the compiled builder takes
    lines 1-2, leaves line 3 to the Python decoder, which names the file, line and field."""
    lines = [
        _line(_plain_span(1)),
        _line(_plain_span(2)),
        _line(_plain_span(3), _plain_span(4, startTimeUnixNano="soon")),
        _line(_plain_span(5)),
    ]
    on = _same(lambda warnings: read_bytes(b"\n".join(lines), "bad.jsonl", warnings=warnings))
    assert on[0] == "error"
    assert on[1] == (
        "bad.jsonl:3: field resourceSpans[0].scopeSpans[0].spans[1].startTimeUnixNano: "
        "not an integer: 'soon'"
    )
