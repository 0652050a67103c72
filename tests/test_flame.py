"""``render.html.flame``: layouts, operation paths and groups worked out by hand; SVG safety;
bounds."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from spans import make_spans
from tracelens_instrumentation import attributes as A

from tracelens.analysis import analyze_traces
from tracelens.analysis.hotspots import cpu_hotspots
from tracelens.render.html import flame

MS = 1_000_000
SVG_NS = "{http://www.w3.org/2000/svg}"


def test_layout_by_hand() -> None:
    boxes, total = flame.layout([(("a", "b"), 3.0), (("a", "c"), 1.0), (("d",), 4.0)], "all")
    assert total == 8.0
    got = [(b.name, b.depth, b.x, b.width, b.value) for b in boxes]
    assert sorted(got, key=lambda t: (t[1], t[2])) == [
        ("all", 0, 0.0, 1.0, 8.0),
        ("a", 1, 0.0, 0.5, 4.0),  # a and d tie at 4: by name
        ("d", 1, 0.5, 0.5, 4.0),
        ("b", 2, 0.0, 0.375, 3.0),
        ("c", 2, 0.375, 0.125, 1.0),
    ]


def test_layout_is_bounded() -> None:
    many = [((f"f{i}", "g"), 1.0) for i in range(5000)]  # each 0.02 % wide: not drawn
    boxes, total = flame.layout(many, "all")
    assert total == 5000.0 and [b.name for b in boxes] == ["all"]
    wide = [((f"f{i}", f"g{j}"), 1.0) for i in range(300) for j in range(10)]
    boxes, _ = flame.layout(wide, "all")
    assert len(boxes) <= flame.MAX_BOXES


def one_trace() -> list[dict[str, object]]:
    return [
        {"id": 0, "start": 0, "end": 1000 * MS, "name": "handle"},
        {"id": 1, "parent": 0, "start": 0, "end": 400 * MS, "name": "plan"},
        {"id": 2, "parent": 0, "start": 400 * MS, "end": 1000 * MS, "name": "fetch"},
        {"id": 3, "parent": 2, "start": 500 * MS, "end": 900 * MS, "name": "GET"},
        {"id": 4, "parent": 0, "start": 450 * MS, "end": 600 * MS, "name": "side"},  # off path
    ]


def test_operation_stacks_by_hand() -> None:
    ta = analyze_traces(make_spans(one_trace()))
    got = flame.operation_stacks(ta, ta.traces["_trace"].to_numpy())
    assert got == pytest.approx(
        {("handle", "plan"): 400.0, ("handle", "fetch"): 200.0, ("handle", "fetch", "GET"): 400.0}
    )


def test_trace_groups() -> None:
    rows = []
    for k in range(1, 21):  # 20 traces of 1..20 ms
        rows.append({"id": f"{k:016x}", "trace": f"{k:032x}", "start": 0, "end": k * MS})
    ta = analyze_traces(make_spans(rows))
    median, slow = flame.trace_groups(ta)
    lat = dict(zip(ta.traces["_trace"].to_list(), ta.traces["duration_ns"].to_list(), strict=True))
    # p40 = 8.6 ms, p60 = 12.4 ms, p95 = 19.05 ms
    assert sorted(lat[t] // MS for t in median) == [9, 10, 11, 12]
    assert [lat[t] // MS for t in slow] == [20]
    med, slo = flame.critical_path_flames(ta)
    assert med.total_ms == pytest.approx(10.5) and slo.total_ms == pytest.approx(20)


def test_deep_chain_is_cut_not_recursed() -> None:
    n = 20_000
    rows = [{"id": 0, "start": 0, "end": 10 * n, "name": "n0"}]
    rows += [
        {"id": i, "parent": i - 1, "start": i, "end": 10 * n - i, "name": f"n{i}"}
        for i in range(1, n)
    ]
    ta = analyze_traces(make_spans(rows))
    got = flame.operation_stacks(ta, ta.traces["_trace"].to_numpy())
    assert max(len(s) for s in got) == flame.MAX_OP_DEPTH
    deepest = next(s for s in got if s[-1] == f"n{n - 1}")
    assert len(deepest) == flame.MAX_OP_DEPTH and deepest[0] == "n0"
    keep = flame.MAX_OP_DEPTH // 2
    assert deepest[keep] == flame.ELLIPSIS and deepest[keep - 1] == f"n{keep - 1}"
    assert deepest[keep + 1 :] == tuple(
        f"n{i}" for i in range(n - (flame.MAX_OP_DEPTH - keep - 1), n)
    )


def test_svg_escapes_and_has_titles() -> None:
    hostile = '<script>alert(1)</script>"&'
    graph = flame.FlameGraph(
        "t<i>", "c", flame.layout([((hostile, "ok"), 5.0)], "all")[0], 5.0, 1, "cpu"
    )
    out = str(graph.svg())
    assert "<script" not in out and "<i>" not in out
    root = ET.fromstring(out)  # well-formed XML: every name escaped
    titles = [t.text for t in root.iter(f"{SVG_NS}title")]
    assert any(t and t.startswith(hostile + "\n") for t in titles), titles
    assert root.get("aria-label") == "t<i>"
    assert len(list(root.iter(f"{SVG_NS}rect"))) == 3


def test_flame_section_with_cpu() -> None:
    rows = one_trace()
    rows[1]["attributes"] = {
        A.KIND: "cpu", A.IO_NS: 0, A.WAIT_NS: 0,
        A.CPU_STACKS: ["app:plan;json:dumps 7", "app:plan;logging:Formatter.format 3"],
    }  # fmt: skip
    ta = analyze_traces(make_spans(rows))
    section = str(flame.flame_section(ta, cpu_hotspots(ta)))
    ids = re.findall(r'<figure id="([^"]+)"', section)
    assert ids == ["flame-median", "flame-slow", "flame-cpu"]
    assert "json:dumps" in section and "<script" not in section
    bare = str(flame.flame_section(analyze_traces(make_spans(one_trace()))))
    assert 'id="flame-cpu-none"' in bare
