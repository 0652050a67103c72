"""The compiled builder's Jaeger and Zipkin walks (``_json_jaeger.h``, ``_json_zipkin.h``) give
what the Python decoders give.

The Python decoders are the oracle, as for OTLP (``test_ingest_native.py``, whose comparison is
used here): hypothesis-made Jaeger and Zipkin documents full of the shapes those decoders treat
specially (consumed tags of every type and spelling, references of every kind, logs, inline and
missing processes; shared span ids, spans without timestamp or duration, endpoints, tags of every
JSON type, bad values) must give the same table, warnings and errors with the compiled builder
switched on and off.  Separate tests check that the compiled path really takes the fixtures, that
a file mixing formats line by line keeps its rows in order, and that a bad record is named by its
line whichever path met it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ingest_native import _same

from tracelens.ingest import _json_fast, jaeger, read_bytes, read_files, zipkin

pytestmark = pytest.mark.skipif(
    not _json_fast.AVAILABLE,
    reason="the compiled builder is not built or TRACELENS_NO_NATIVE is set",
)

JAEGER = sorted((FIXTURES / "jaeger").rglob("*.json"))
ZIPKIN = sorted((FIXTURES / "zipkin").rglob("*.json"))


def _encode(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


def _lines(docs: list[Any]) -> bytes:
    return b"\n".join(_encode(d) for d in docs) + b"\n"


@pytest.mark.parametrize("module", [jaeger, zipkin], ids=["jaeger", "zipkin"])
def test_the_compiled_path_takes_the_fixtures(module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Jaeger and Zipkin fixture (shared ids, missing durations, logs, references and all)
    is decoded by the compiled builder, none falls back; the tables equal the Python decoders'
    (``test_ingest_native.test_fixtures_read_the_same`` compares every fixture)."""
    taken = {"native": 0, "python": 0}
    document = module._document

    def counting(doc: Any, batch: Any, warnings: Any, native: Any) -> None:
        taken["python" if native is None else "native"] += 1
        document(doc, batch, warnings, native)

    monkeypatch.setattr(module, "_document", counting)
    files = JAEGER if module is jaeger else ZIPKIN
    assert len(files) >= 5
    spans = read_files(files).spans
    assert spans.num_rows > 150
    assert taken == {"native": len(files), "python": 0}


# -- hypothesis-made Jaeger documents ------------------------------------------------------------

_hex16 = st.text("0123456789abcdef", min_size=16, max_size=16)
_hex32 = st.text("0123456789abcdef", min_size=32, max_size=32)
_id16 = st.one_of(_hex16, _hex16.map(str.upper), st.sampled_from(["A", "", "ſ1"]))
_id32 = st.one_of(_hex32, _hex16, _hex16.map(str.upper), st.sampled_from(["x", ""]))
_text = st.text(max_size=5)
_micros = st.one_of(st.integers(0, 2**50), st.integers(0, 2**50).map(str))
# times Python reads (the first four: the compiled builder leaves them to it) or refuses
_wild_micros = st.sampled_from([1.5, 2.0, "+3", " 4", 2**62, None, "x", True, "1.5"])
_any_json = st.one_of(
    _text,
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.just({"a": 1}),
)
_CONSUMED = [
    "span.kind",
    "otel.status_code",
    "otel.status_description",
    "error",
    "otel.scope.name",
    "otel.library.name",
    "otel.scope.version",
    "otel.library.version",
    "tracelens.kind",
    "tracelens.cpu_ns",
    "tracelens.args_hash",
    "tracelens.arg_fps",
    "k",
]
_consumed_value = st.one_of(
    st.sampled_from(
        ["server", "CLIENT", "Producer", "internal", "weird", "ſerver", "OK", "error", "Unset"]
    ),
    st.sampled_from(["UNſET", "true", "TRUE", "false", "", "12", "-7", "1_0"]),
    _any_json,
)


def _pick(draw: st.DrawFn, wild: bool, good: Any, bad: Any) -> Any:
    """A good value, or in a wild document now and then a bad (or merely odd) one."""
    return draw(bad if wild and draw(st.integers(0, 6)) == 0 else good)


@st.composite
def _jaeger_tag(draw: st.DrawFn, wild: bool) -> Any:
    key = draw(st.one_of(st.sampled_from(_CONSUMED), _text))
    kind = draw(st.sampled_from([None, "absent", "string", "bool", "int64", "float64", "binary"]))
    good: dict[Any, st.SearchStrategy[Any]] = {
        "bool": st.one_of(st.booleans(), st.sampled_from(["true", "False"])),
        "int64": st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from(["12", 1.0])),
        "float64": st.one_of(st.floats(), st.integers(-(2**20), 2**20), st.just("1e3")),
        "binary": st.just("AAE="),
    }
    bad: dict[Any, st.SearchStrategy[Any]] = {
        "bool": st.just("yes"),
        "int64": st.sampled_from([2**64, "x", 1.5]),
        "binary": st.sampled_from(["not base64", 5]),
    }
    value = _pick(draw, wild, good.get(kind, _consumed_value), bad.get(kind, _consumed_value))
    tag: dict[str, Any] = {"key": key, "value": value}
    if kind != "absent":
        tag["type"] = kind
    if wild and draw(st.integers(0, 20)) == 0:
        return draw(st.sampled_from([{"value": "x"}, {"key": "k", "type": "nope"}, "tag"]))
    return tag


def _tags(wild: bool) -> st.SearchStrategy[Any]:
    good = st.one_of(st.lists(_jaeger_tag(wild), max_size=7), st.none(), st.just({}))
    return st.one_of(good, st.just("x")) if wild else good


def _reference(ids: st.SearchStrategy[str], wild: bool) -> st.SearchStrategy[Any]:
    ref_type = st.sampled_from(["CHILD_OF", "FOLLOWS_FROM", "child_of", "OTHER", None])
    if wild:
        return st.fixed_dictionaries(
            {}, optional={"refType": ref_type, "traceID": _id32, "spanID": ids}
        )
    return st.fixed_dictionaries({"spanID": ids}, optional={"refType": ref_type, "traceID": _id32})


@st.composite
def _jaeger_span(draw: st.DrawFn, ids: st.SearchStrategy[str], wild: bool) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceID": draw(_id32),
        "spanID": draw(ids),
        "startTime": _pick(draw, wild, _micros, _wild_micros),
        "processID": _pick(draw, wild, st.sampled_from(["p1", "p2"]), st.sampled_from(["p3", 4])),
    }
    fields = st.fixed_dictionaries(
        {"key": st.sampled_from(["event", "k"]), "type": st.just("string"), "value": _text}
    )
    logs = st.lists(
        st.fixed_dictionaries({"timestamp": _micros}, optional={"fields": st.lists(fields)}),
        max_size=2,
    )
    optional: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
        "traceID": (_id32, st.one_of(st.none(), st.just("absent"))),
        "operationName": (_text, st.none()),
        "duration": (_micros, _wild_micros),
        "tags": (_tags(wild), _tags(wild)),
        "references": (
            st.one_of(st.lists(_reference(ids, wild), max_size=3), st.none()),
            st.just({}),
        ),
        "parentSpanID": (st.one_of(ids, st.just(""), st.just(0)), st.just(7)),
        "logs": (st.one_of(logs, st.none()), st.just("x")),
        "process": (st.none(), st.one_of(st.just({"serviceName": "inline"}), st.just("p"))),
        "warnings": (st.none(), st.none()),
    }
    for key, (good, bad) in optional.items():
        if draw(st.booleans()):
            span[key] = _pick(draw, wild, good, bad)
    if span["traceID"] == "absent":  # the trace's traceID then
        del span["traceID"]
    return span


@st.composite
def _jaeger_doc(draw: st.DrawFn) -> Any:
    wild = draw(st.integers(0, 3)) == 0
    ids = st.sampled_from(draw(st.lists(_id16, min_size=1, max_size=4)))
    process = st.fixed_dictionaries(
        {}, optional={"serviceName": st.one_of(_text, st.none()), "tags": _tags(wild)}
    )
    processes = st.fixed_dictionaries({"p1": process, "p2": process})
    if wild:  # processes the spans name may be missing
        processes = st.dictionaries(st.sampled_from(["p1", "p2"]), process, max_size=2)
    traces = st.fixed_dictionaries(
        {"spans": st.lists(_jaeger_span(ids, wild), max_size=5), "processes": processes},
        optional={"traceID": _id32},
    )
    shape = draw(st.integers(0, 5))  # a bare trace, a list of traces, the API's {data}
    if shape == 0:
        return draw(traces)
    if shape == 1:
        return draw(st.lists(traces, min_size=1, max_size=2))
    return {"data": draw(st.lists(traces, max_size=3))}


@settings(deadline=None)
@given(docs=st.lists(_jaeger_doc(), min_size=1, max_size=3))
def test_jaeger_documents_read_the_same(docs: list[Any]) -> None:
    """JSON Lines of hypothesis-made Jaeger documents: same table, warnings and error either way."""
    data = _lines(docs)
    _same(lambda warnings: read_bytes(data, "made.jsonl", "jaeger", warnings=warnings))


# -- hypothesis-made Zipkin documents ------------------------------------------------------------


_endpoint = st.fixed_dictionaries(
    {},
    optional={
        "serviceName": st.one_of(_text, st.none(), st.just(3)),
        "ipv4": st.one_of(st.just("10.0.0.1"), st.just(""), st.none()),
        "ipv6": st.one_of(st.just("::1"), st.none()),
        "port": st.one_of(st.integers(0, 70000), st.just("80")),
    },
)
_wild_endpoint = st.sampled_from(["x", {"ipv4": 5}, {"port": 2**70}, {"port": True}, {"port": 1.5}])
_zipkin_tags = st.one_of(
    st.dictionaries(
        st.one_of(
            st.sampled_from(
                ["error", "peer.service", "server.port", "network.local.address", *_CONSUMED]
            ),
            _text,
        ),
        st.one_of(_consumed_value, _any_json),
        max_size=6,
    ),
    st.none(),
    st.just([]),
)
_annotations = st.lists(
    st.fixed_dictionaries({"timestamp": _micros}, optional={"value": _text}), max_size=2
)


@st.composite
def _zipkin_span(draw: st.DrawFn, ids: st.SearchStrategy[str], traces: Any, wild: bool) -> Any:
    span: dict[str, Any] = {"traceId": draw(traces), "id": draw(ids)}
    optional: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
        "parentId": (st.one_of(ids, st.just(""), st.none()), st.just(4)),
        "name": (_text, st.none()),
        "kind": (
            st.sampled_from(["CLIENT", "SERVER", "server", "PRODUCER", "CONSUMER", None]),
            st.sampled_from(["INTERNAL", "ſERVER", 5]),
        ),
        "shared": (st.booleans(), st.just("true")),
        "timestamp": (_micros, _wild_micros),
        "duration": (st.one_of(_micros, st.none()), _wild_micros),
        "localEndpoint": (st.one_of(_endpoint, st.none()), _wild_endpoint),
        "remoteEndpoint": (st.one_of(_endpoint, st.none()), _wild_endpoint),
        "tags": (_zipkin_tags, st.just("x")),
        "annotations": (_annotations, st.one_of(st.just("x"), st.just([{"value": 1}]))),
    }
    for key, (good, bad) in optional.items():
        if key == "timestamp" or draw(st.integers(0, 3)):
            span[key] = _pick(draw, wild, good, bad)
    if wild and draw(st.integers(0, 20)) == 0:
        return draw(st.sampled_from(["span", {"id": "a"}, {"traceId": 1, "id": "b"}]))
    return span


@st.composite
def _zipkin_doc(draw: st.DrawFn) -> Any:
    """Few ids, so that spans share them (client and server halves, plain repeats)."""
    wild = draw(st.integers(0, 3)) == 0
    ids = st.sampled_from(draw(st.lists(_id16, min_size=1, max_size=4)))
    traces = st.sampled_from(draw(st.lists(_id32, min_size=1, max_size=2)))
    return draw(st.lists(_zipkin_span(ids, traces, wild), max_size=8))


@settings(deadline=None)
@given(docs=st.lists(_zipkin_doc(), min_size=1, max_size=3))
def test_zipkin_documents_read_the_same(docs: list[Any]) -> None:
    """JSON Lines of hypothesis-made Zipkin arrays: same table, warnings and error either way."""
    data = _lines(docs)
    _same(lambda warnings: read_bytes(data, "made.jsonl", "zipkin", warnings=warnings))


# -- files ---------------------------------------------------------------------------------------


def _zipkin(n: int, **extra: Any) -> dict[str, Any]:
    return {
        "traceId": f"{n:016x}",
        "id": f"{n + 1:016x}",
        "name": f"z-{n}",
        "timestamp": 1000 + n,
        "duration": 5,
        "localEndpoint": {"serviceName": "zs"},
        **extra,
    }


def _jaeger(n: int, **extra: Any) -> dict[str, Any]:
    span = {
        "traceID": f"{n:032x}",
        "spanID": f"{n + 1:016x}",
        "operationName": f"j-{n}",
        "startTime": 2000 + n,
        "duration": 7,
        "processID": "p1",
        "tags": [{"key": "n", "type": "int64", "value": n}],
        **extra,
    }
    return {"data": [{"spans": [span], "processes": {"p1": {"serviceName": "js"}}}]}


def _otlp(n: int) -> dict[str, Any]:
    span = {
        "traceId": f"{n:032x}",
        "spanId": f"{n + 1:016x}",
        "name": f"o-{n}",
        "startTimeUnixNano": "1",
        "endTimeUnixNano": "2",
    }
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def test_a_file_mixing_formats_keeps_its_rows_in_order() -> None:
    """OTLP, Jaeger and Zipkin lines in turn (each format its own builder, and one line the
    Python decoder takes: a Jaeger span with an inline process): rows in file order, the same
    table either way."""
    docs: list[Any] = []
    for i in range(4):
        docs += [_otlp(i), _jaeger(i), [_zipkin(i)]]
    docs.insert(4, _jaeger(9, process={"serviceName": "inline"}))
    data = _lines(docs)
    _, table, _ = _same(lambda warnings: read_bytes(data, "mixed.jsonl", warnings=warnings))
    expected = [f"{f}-{i}" for i in range(4) for f in "ojz"]
    expected.insert(4, "j-9")
    assert table["name"].to_pylist() == expected
    assert table["service"].to_pylist()[4] == "inline"
    assert table["trace_id"].to_pylist()[2] == "0" * 32  # Zipkin's 64-bit id widened


@pytest.mark.parametrize(
    ("fmt", "bad", "message"),
    [
        (
            "jaeger",
            _jaeger(3, startTime="soon"),
            "bad.jsonl:3: field data[0].spans[0].startTime: not an integer: 'soon'",
        ),
        (
            "zipkin",
            [_zipkin(3), _zipkin(4, duration=[1])],
            "bad.jsonl:3: field [1].duration: not an integer: [1]",
        ),
    ],
)
def test_a_bad_record_is_named_by_its_line_whichever_path_met_it(
    fmt: str, bad: Any, message: str
) -> None:
    """Lines 1-2 and 4 the compiled builder takes; line 3 it leaves to the Python decoder, which
    names the file, line and field: the same error either way."""
    good = _jaeger if fmt == "jaeger" else lambda n: [_zipkin(n)]
    data = _lines([good(1), good(2), bad, good(5)])
    on = _same(lambda warnings: read_bytes(data, "bad.jsonl", warnings=warnings))
    assert on == ("error", message)


def test_zipkin_shared_ids_split_on_the_compiled_path() -> None:
    """A client half, its server half (shared: true) and a child of the shared id: the server half
    gets sha256(id + ":server")[:16] and the client as its parent, the child attaches to the
    server half (hand-derived from the module's rule), on the compiled path."""
    shared = "00000000000000aa"
    server = "c447d063b99d2a6d"  # hashlib.sha256(b"00000000000000aa:server").hexdigest()[:16]
    doc = [
        _zipkin(1, id=shared, kind="CLIENT", name="client"),
        _zipkin(1, id=shared, kind="SERVER", shared=True, name="server"),
        _zipkin(1, id="00000000000000bb", parentId=shared, name="child"),
    ]
    _, table, warnings = _same(lambda w: read_bytes(_encode(doc), "s.json", warnings=w))
    rows = {r["name"]: r for r in table.to_pylist()}
    assert rows["client"]["span_id"] == shared
    assert rows["server"]["span_id"] == server
    assert rows["server"]["parent_span_id"] == shared
    assert rows["child"]["parent_span_id"] == server
    assert warnings == []


def test_jaeger_consumed_tags_on_the_compiled_path(tmp_path: Path) -> None:
    """span.kind, otel.status_code/description and the scope tags become columns, not
    attributes; an error tag beside a known status code stays an attribute."""
    tags = [
        {"key": "span.kind", "type": "string", "value": "Client"},
        {"key": "otel.status_code", "type": "string", "value": "Ok"},
        {"key": "otel.status_description", "type": "string", "value": "fine"},
        {"key": "error", "type": "bool", "value": True},
        {"key": "otel.library.name", "type": "string", "value": "lib"},
        {"key": "otel.scope.name", "type": "string", "value": "scope"},
        {"key": "tracelens.cpu_ns", "type": "string", "value": "42"},
    ]
    path = tmp_path / "t.json"
    path.write_bytes(_encode(_jaeger(1, tags=tags)))
    _, table, _ = _same(lambda w: read_bytes(path.read_bytes(), str(path), warnings=w))
    [row] = table.to_pylist()
    assert (row["span_kind"], row["status_code"], row["status_message"]) == ("client", "ok", "fine")
    assert (row["scope_name"], row["cpu_ns"]) == ("scope", 42)
    assert row["attributes"] == [("error", "true")]
    assert row["json_attributes"] == ["error"]


def test_jaeger_processes_are_each_traces_own_when_they_repeat() -> None:
    """Traces that name the same process id with different processes, and one that repeats an
    earlier trace's processes exactly (what the compiled path reuses instead of decoding them
    again): each span gets its own trace's service and resource, written out by hand here."""

    def trace(n: int, process: dict[str, Any]) -> dict[str, Any]:
        return {**_jaeger(n)["data"][0], "processes": {"p1": process}}

    tagged = {"serviceName": "a", "tags": [{"key": "x", "type": "int64", "value": 1}]}
    processes = [
        tagged,
        {"serviceName": "a", "tags": [{"key": "x", "type": "float64", "value": 1}]},
        {"serviceName": "b"},
        {"serviceName": "a", "tags": [{"key": "x", "type": "bool", "value": True}]},
        dict(tagged),  # equal to the first
        {"serviceName": ""},
    ]
    doc = {"data": [trace(n, p) for n, p in enumerate(processes)]}
    _, table, _ = _same(lambda w: read_bytes(_encode(doc), "p.json", warnings=w))
    assert table["service"].to_pylist() == ["a", "a", "b", "a", "a", "unknown_service"]
    assert table["resource"].to_pylist() == [
        '{"service.name":"a","x":1}',
        '{"service.name":"a","x":1.0}',
        '{"service.name":"b"}',
        '{"service.name":"a","x":true}',
        '{"service.name":"a","x":1}',
        '{"service.name":"unknown_service"}',
    ]


# -- Jaeger read straight from the bytes ---------------------------------------------------------


def _api_line(t: int, **extra: Any) -> bytes:
    """A Jaeger API response of one trace of four spans in the common shape: typed tags (the
    consumed ones too), a CHILD_OF reference, a parentSpanID, a 64-bit trace id, upper-case hex,
    two processes; ``extra`` is merged into its third span."""
    tid = f"{t + 1:016X}"
    spans: list[dict[str, Any]] = []
    for k in range(4):
        span: dict[str, Any] = {
            "traceID": tid,
            "spanID": f"{t * 10 + k + 1:016X}",
            "operationName": f"op é {k}",
            "startTime": 1_700_000_000_000_000 + k,
            "duration": 250 + k,
            "processID": f"p{k % 2 + 1}",
            "tags": [
                {"key": "span.kind", "type": "string", "value": ["server", "client"][k % 2]},
                {"key": "http.status_code", "type": "int64", "value": 200 + k},
                {"key": "ratio", "type": "float64", "value": 0.25 + k},
                {"key": "cache.hit", "type": "bool", "value": k % 2 == 0},
                {"key": "error", "type": "bool", "value": k == 3},
                {"key": "otel.scope.name", "value": "lib"},
                {"key": "tracelens.kind", "type": "string", "value": "io"},
            ],
            "logs": [],
            "warnings": None,
            "flags": 1,
        }
        if k == 1:
            span["references"] = [
                {"refType": "CHILD_OF", "traceID": tid, "spanID": f"{t * 10 + 1:016X}"}
            ]
        elif k > 1:
            span["references"] = []
            span["parentSpanID"] = f"{t * 10 + 2:016x}"
        if k == 2:
            span.update(extra)
        spans.append(span)
    processes = {
        "p1": {"serviceName": "front", "tags": [{"key": "host", "type": "string", "value": "h"}]},
        "p2": {"serviceName": "tools", "tags": []},
    }
    doc = {"data": [{"traceID": tid, "spans": spans, "processes": processes, "warnings": None}]}
    return json.dumps(doc, ensure_ascii=False).encode() + b"\n"


def _direct_taken(data: bytes, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether the direct reader took each line it was offered (with the compiled builder on),
    after checking that the table equals the Python decoder's."""
    taken: list[bool] = []
    direct = jaeger.decode_bytes

    def counting(line: bytes, batch: Any) -> bool:
        got = direct(line, batch)
        if _json_fast.USE_NATIVE:
            taken.append(got)
        return got

    monkeypatch.setattr(jaeger, "decode_bytes", counting)
    _same(lambda warnings: read_bytes(data, "api.jsonl", "jaeger", warnings=warnings))
    return taken


def test_the_direct_reader_takes_jaeger_api_responses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line after the first (which is parsed to find the format) in the common shape is
    read straight from its bytes, and the table equals the Python decoder's."""
    data = b"".join(_api_line(t) for t in range(6))
    assert _direct_taken(data, monkeypatch) == [True] * 5
    table = read_bytes(data, "api.jsonl", "jaeger")
    rows = {r["span_id"]: r for r in table.to_pylist()}
    third = rows[f"{12 + 1:016x}"]  # trace 1, span 2: values written by hand
    assert third["trace_id"] == f"{2:032x}" and third["parent_span_id"] == f"{12:016x}"
    assert third["start_ns"] == 1_700_000_000_000_002_000
    assert third["end_ns"] - third["start_ns"] == 252_000
    assert third["service"] == "front" and third["span_kind"] == "server"
    assert third["scope_name"] == "lib" and third["kind"] == "io"
    assert rows[f"{14:016x}"]["status_code"] == "error"  # its error tag is true


_OTHER_SHAPES: list[tuple[dict[str, Any], list[bool]]] = [
    # left to the parsed way
    ({"logs": [{"timestamp": 1, "fields": [{"key": "event", "value": "x"}]}]}, [False, True]),
    ({"operationName": 'esc\\aped "name"'}, [False, True]),
    ({"process": {"serviceName": "inline"}}, [False, True]),
    ({"references": [{"spanID": "01"}, {"spanID": "02"}]}, [False, True]),
    ({"references": [{"refType": "OTHER", "spanID": "01"}]}, [False, True]),
    ({"startTime": 1.5}, [False, True]),
    ({"processID": "p9"}, [False, True]),
    ({"tags": [{"key": "b", "type": "binary", "value": "AAE="}]}, [False, True]),
    ({"tags": [{"key": "f", "type": "float64", "value": 3}]}, [False, True]),
    ({"tags": [{"key": "i", "type": "int64", "value": "12"}]}, [False, True]),
    # beyond int64: an error either way, and the read stops there
    ({"tags": [{"key": "i", "type": "int64", "value": 2**63}]}, [False]),
    ({"tags": [{"key": "s", "type": "string"}]}, [False, True]),
    ({"tags": [{"key": "s", "type": None, "value": "v"}]}, [False, True]),
    # taken
    ({"startTime": "17", "duration": "9"}, [True, True]),
    ({"tags": [{"key": "dup", "value": "a"}, {"key": "dup", "value": "b"}]}, [True, True]),
    (
        {
            "tags": [
                {"key": "otel.status_code", "value": "ERROR"},
                {"key": "otel.status_description", "value": "boom"},
                {"key": "span.kind", "value": "weird"},
            ]
        },
        [True, True],
    ),
    ({"tags": None, "references": None, "logs": None}, [True, True]),
    ({"references": [{"spanID": ""}]}, [True, True]),
    (
        {"parentSpanID": None, "references": [], "traceID": "0000000000000000ABCDEF0123456789"},
        [True, True],
    ),
]


@pytest.mark.parametrize(
    ("extra", "taken"), _OTHER_SHAPES, ids=[json.dumps(e)[:40] for e, _ in _OTHER_SHAPES]
)
def test_jaeger_spans_of_other_shapes_read_the_same(
    extra: dict[str, Any], taken: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A span of a shape the direct reader leaves aside sends its line the parsed way; either way
    the table equals the Python decoder's."""
    data = _api_line(0) + _api_line(1, **extra) + _api_line(2)
    assert _direct_taken(data, monkeypatch) == taken
