"""``analysis.hotspots`` on traces whose critical path and CPU split are worked out by hand.

Trace A (ms): ``handle`` 0-1000 has ``plan`` 0-400 (all CPU, stacks 70 % json, 20 % logging,
10 % its own code), then ``fetch`` 400-1000 (io), and ``index`` 400-700 (all CPU) in parallel
with ``fetch``.  The path is handle, plan, fetch: plan's 400 ms of CPU are on it, index's 300 ms
are off it.  Trace B: ``handle`` 0-1000 and ``late`` 600-1200, a span that outlives its parent:
clamped to 600-1000, so 400 of its 600 ms of CPU are on the path, 200 off it.
"""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
from spans import make_spans, sid
from tracelens_instrumentation import attributes as A

from tracelens.analysis import analyze_traces
from tracelens.analysis.hotspots import (
    _quantiles,
    cpu_hotspots,
    entry_of,
    module_of,
    parse_stacks,
)
from tracelens.render.folded import folded, write_folded
from tracelens.render.text import hotspots_text as render_text

MS = 1_000_000
TA = "a" * 32
TB = "b" * 32


def cpu_span(stacks: list[str]) -> dict[str, object]:
    return {A.KIND: "cpu", A.IO_NS: 0, A.WAIT_NS: 0, A.CPU_STACKS: stacks}


def rows() -> list[dict[str, object]]:
    return [
        {"id": 0, "trace": TA, "start": 0, "end": 1000 * MS, "name": "handle"},
        {"id": 1, "trace": TA, "parent": 0, "start": 0, "end": 400 * MS, "name": "plan",
         "attributes": cpu_span(["a:plan;json:dumps;json.encoder:JSONEncoder.iterencode 700",
                                 "a:plan;logging:Formatter.format 200", "a:plan 100"])},
        {"id": 2, "trace": TA, "parent": 0, "start": 400 * MS, "end": 1000 * MS, "name": "fetch",
         "attributes": {A.KIND: "io", A.IO_NS: 600 * MS, A.WAIT_NS: 0}},
        {"id": 3, "trace": TA, "parent": 0, "start": 400 * MS, "end": 700 * MS, "name": "index",
         "attributes": cpu_span(["a:index;numpy.linalg:dot 3"])},
        {"id": 10, "trace": TB, "start": 0, "end": 1000 * MS, "name": "handle"},
        {"id": 11, "trace": TB, "parent": 10, "start": 600 * MS, "end": 1200 * MS,
         "name": "late", "attributes": cpu_span(["a:late;a:hot 1"])},
    ]  # fmt: skip


@pytest.fixture(scope="module")
def hot():  # type: ignore[no-untyped-def]
    return cpu_hotspots(analyze_traces(make_spans(rows())))


def test_critical_path_side(hot) -> None:  # type: ignore[no-untyped-def]
    cp = hot.critical_path
    assert hot.spans == 3 and hot.traces == 2
    assert cp.total_ms == pytest.approx(400 + 400)
    it = cp.function("json.encoder:JSONEncoder.iterencode")
    assert it is not None and it.self_ms == pytest.approx(280)
    dumps = cp.function("json:dumps")
    assert dumps is not None
    assert dumps.self_ms == 0 and dumps.inclusive_ms == pytest.approx(280)
    assert dumps.inclusive_share == pytest.approx(280 / 800)
    # per trace: 280 in trace A, 0 in B -> p50 140, p95 266 (linear interpolation)
    assert dumps.per_trace_inclusive_ms.p50 == pytest.approx(140)
    assert dumps.per_trace_inclusive_ms.p95 == pytest.approx(266)
    plan = cp.function("a:plan")
    assert plan is not None and plan.self_ms == pytest.approx(40)
    assert plan.inclusive_ms == pytest.approx(400)
    hot_fn = cp.function("a:hot")
    assert hot_fn is not None and hot_fn.self_ms == pytest.approx(400)
    assert cp.function("numpy.linalg:dot") is None  # index ran off the path
    # ordered by self time
    assert [f.function for f in cp.functions[:2]] == [
        "a:hot",
        "json.encoder:JSONEncoder.iterencode",
    ]
    mods = {m.module: m.self_ms for m in cp.modules}
    assert mods == pytest.approx({"a": 440, "json": 280, "logging": 80})
    # entry points: the first frame outside the span function's package, else the leaf
    entries = [(e.function, e.ms) for e in cp.entry_points]
    assert entries == [
        ("a:hot", pytest.approx(400)),
        ("json:dumps", pytest.approx(280)),
        ("logging:Formatter.format", pytest.approx(80)),
        ("a:plan", pytest.approx(40)),
    ]
    assert cp.entry_point("json:dumps").share == pytest.approx(0.35)  # type: ignore[union-attr]


def test_off_path_side(hot) -> None:  # type: ignore[no-untyped-def]
    off = hot.off_path
    assert off.total_ms == pytest.approx(300 + 200)
    dot = off.function("numpy.linalg:dot")
    assert dot is not None and dot.self_ms == pytest.approx(300)
    assert off.function("a:hot").self_ms == pytest.approx(200)  # type: ignore[union-attr]
    assert off.function("json:dumps") is None
    assert {m.module: m.self_ms for m in off.modules} == pytest.approx({"numpy": 300, "a": 200})
    assert [e.function for e in off.entry_points] == ["numpy.linalg:dot", "a:hot"]


def test_folded_and_dict(hot) -> None:  # type: ignore[no-untyped-def]
    assert folded(hot).splitlines() == [
        "a:late;a:hot 400000",
        "a:plan 40000",
        "a:plan;json:dumps;json.encoder:JSONEncoder.iterencode 280000",
        "a:plan;logging:Formatter.format 80000",
    ]
    d = hot.to_dict()
    json.dumps(d)  # plain JSON types only
    assert d["profiled_traces"] == 2 and d["profiled_spans"] == 3
    assert d["critical_path"]["total_ms"] == 800.0
    first = d["critical_path"]["functions"][0]
    assert first["function"] == "a:hot" and first["self_ms"] == 400.0
    assert d["off_path"]["modules"][0] == {"module": "numpy", "self_ms": 300.0, "share": 0.6}
    text = render_text(hot)
    assert "json.encoder:JSONEncoder.iterencode" in text and "off the critical path" in text


def test_no_stacks_and_bad_stacks() -> None:
    plain = make_spans([{"id": 0, "start": 0, "end": MS}])
    empty = cpu_hotspots(analyze_traces(plain))
    assert empty.spans == 0 and empty.critical_path.total_ms == 0
    assert "configure(profile=True)" in render_text(empty)
    bad = make_spans(
        [
            {
                "id": 0,
                "start": 0,
                "end": 10 * MS,
                "attributes": cpu_span(["x;y 5", "no-count", ";z 3"]),
            }
        ]
    )
    got = cpu_hotspots(analyze_traces(bad))
    assert got.critical_path.total_ms == pytest.approx(10)  # the good entry carries it all
    assert len(got.warnings) == 2 and all("0000000000000001" in w for w in got.warnings)


def test_parse_and_modules() -> None:
    assert parse_stacks('["a:f;b:g 12"]') == ([(("a:f", "b:g"), 12)], [])
    assert parse_stacks(42)[1] == ["not a string array but int"]
    assert parse_stacks("not json")[1] == ["not a JSON string array"]
    assert module_of("json.encoder:JSONEncoder.iterencode") == "json"
    assert module_of("[other]") == "[other]"


def test_entry_of() -> None:
    assert (
        entry_of(("app.main:run", "app.util:helper", "json:dumps", "json.encoder:x"))
        == "json:dumps"
    )
    assert entry_of(("app.main:run", "app.util:helper")) == "app.util:helper"
    assert entry_of(("app:run",)) == "app:run"


def test_sparse_quantiles_match_numpy() -> None:
    """p50/p95 over the traces, absent ones as 0, against NumPy on the zero-padded array."""
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 60)
        k = rng.randint(0, n)
        per_trace = {t: rng.uniform(0, 100) for t in rng.sample(range(n), k)}
        padded = np.zeros(n)
        padded[:k] = list(per_trace.values())
        p50, p95 = np.percentile(padded, (50, 95))
        got = _quantiles(per_trace, n)
        assert got.p50 == pytest.approx(p50) and got.p95 == pytest.approx(p95)


def test_folded_file_is_the_documented_format(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """flamegraph.pl's collapsed format, byte for byte: UTF-8 lines ``frame;...;frame COUNT\\n``
    (COUNT a positive integer; its stackcollapse tools write the same), no carriage returns;
    a line break smuggled into a frame name cannot split a line."""
    rows = [
        {"id": 0, "start": 0, "end": 10 * MS, "name": "root",
         "attributes": cpu_span(["app:run;evil\nname 3", "app:run;ünï:cödé 1"])},
    ]  # fmt: skip
    hot = cpu_hotspots(analyze_traces(make_spans(rows)))
    out = tmp_path / "cpu.folded"
    assert write_folded(hot, str(out)) == 2
    raw = out.read_bytes()
    assert b"\r" not in raw and raw.endswith(b"\n")
    lines = raw.decode("utf-8").split("\n")[:-1]
    line_re = re.compile(r"^[^;\n]+(;[^;\n]+)* [1-9][0-9]*$")
    assert all(line_re.match(line) for line in lines), lines
    assert lines == ["app:run;evil_name 7500", "app:run;ünï:cödé 2500"]


def _otlp_value(v: object) -> dict[str, object]:
    if isinstance(v, list):
        return {"arrayValue": {"values": [_otlp_value(x) for x in v]}}
    if isinstance(v, int):
        return {"intValue": str(v)}
    return {"stringValue": str(v)}


def otlp_json(table_rows: list[dict[str, object]]) -> dict[str, object]:
    """The rows as an OTLP/JSON export (what a collector writes), written out by hand."""
    spans = [
        {
            "traceId": r.get("trace", TA),
            "spanId": sid(int(r["id"])),  # type: ignore[call-overload]
            **({"parentSpanId": sid(int(r["parent"]))} if "parent" in r else {}),  # type: ignore[call-overload]
            "name": r["name"],
            "kind": 1,
            "startTimeUnixNano": str(r["start"]),
            "endTimeUnixNano": str(r["end"]),
            "attributes": [
                {"key": k, "value": _otlp_value(v)}
                for k, v in dict(r.get("attributes") or {}).items()  # type: ignore[call-overload]
            ],
        }
        for r in table_rows
    ]
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}


def test_flamegraph_out_of_the_command_and_the_library(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``tracelens analyze --flamegraph-out`` on an OTLP file of the hand-built traces writes
    the folded critical-path stacks worked out above (plan's 400 ms shared 70/20/10, late's
    400 ms on the path; index is off the path and absent), and the library parameter of the
    same name writes the same bytes."""
    from click.testing import CliRunner

    from tracelens.api import analyze
    from tracelens.cli import main

    src = tmp_path / "traces.json"
    src.write_text(json.dumps(otlp_json(rows())), encoding="utf-8")
    cli_out, lib_out, doc = tmp_path / "cli.folded", tmp_path / "lib.folded", tmp_path / "a.json"
    argv = ["analyze", str(src), "--flamegraph-out", str(cli_out), "--format", "json"]
    res = CliRunner().invoke(main, [*argv, "--out", str(doc)])
    assert res.exit_code == 0, res.output
    assert cli_out.read_text(encoding="utf-8").splitlines() == [
        "a:late;a:hot 400000",
        "a:plan 40000",
        "a:plan;json:dumps;json.encoder:JSONEncoder.iterencode 280000",
        "a:plan;logging:Formatter.format 80000",
    ]
    hot = json.loads(doc.read_text(encoding="utf-8"))["cpu_hotspots"]
    assert hot["critical_path"]["total_ms"] == 800.0 and hot["off_path"]["total_ms"] == 500.0
    analyze([src], flamegraph_out=lib_out)
    assert lib_out.read_bytes() == cli_out.read_bytes()
    bad = CliRunner().invoke(main, [*argv[:2], "--flamegraph-out", str(tmp_path / "no" / "f")])
    assert bad.exit_code == 2 and "--flamegraph-out" in bad.output
