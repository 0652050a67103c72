"""Waterfalls of a few chosen traces, with each span's critical-path sections highlighted.

Only a handful of traces get one (the p50 and p95 representatives and the slowest), and a trace
with thousands of spans shows the spans that matter most: those with the most critical-path
time, then the longest.  Rows come in the analysis tree's display order (``tree.depth_first``,
an explicit stack: traces can be 50,000 levels deep).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import polars as pl

from tracelens.analysis import Analysis
from tracelens.analysis.summary import traces_list
from tracelens.analysis.tree import depth_first
from tracelens.render.html import fmt
from tracelens.render.html.model import axis_ticks, kind_class, representative

MAX_ROWS = 150
MAX_ATTRS = 6
MAX_ATTR_CHARS = 100
MIN_BAR_PCT = 0.15


def choose_traces(analysis: Analysis) -> list[tuple[str, str]]:
    """(trace_id, why) for the p95 representative, the p50 one and the slowest, deduplicated."""
    tr = analysis.traces.traces
    if tr.height == 0:
        return []
    lat = analysis.summary.latency_ms
    slowest = tr.sort(["duration_ns", "trace_id"], descending=[True, False])["trace_id"][0]
    picks = [
        (representative(tr, lat["p95"]), "p95 representative"),
        (representative(tr, lat["p50"]), "p50 representative"),
        (str(slowest), "slowest trace"),
    ]
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for tid, why in picks:
        if tid is not None and tid not in seen:
            seen.add(tid)
            out.append((tid, why))
    return out


def waterfalls(analysis: Analysis, max_rows: int = MAX_ROWS) -> list[dict[str, Any]]:
    return [waterfall(analysis, tid, why, max_rows) for tid, why in choose_traces(analysis)]


def waterfall(analysis: Analysis, trace_id: str, why: str, max_rows: int = MAX_ROWS) -> dict:
    trace_analysis = analysis.traces
    spans = trace_analysis.spans.filter(pl.col("trace_id") == trace_id).select(
        "_i",
        "_trace",
        "span_id",
        "name",
        "service",
        "kind_resolved",
        "start_ns",
        "end_ns",
        "status_code",
        "attributes",
    )
    secs = trace_analysis.sections.filter(pl.col("main") & (pl.col("trace_id") == trace_id)).select(
        "_i", "start_ns", "end_ns"
    )
    (root,) = traces_list(trace_analysis, trace_ids=[trace_id])
    crit: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for i, a, b in secs.iter_rows():
        crit[i].append((a, b))
    rows = spans.to_dicts()
    t0 = min(r["start_ns"] for r in rows)
    t1 = max(r["end_ns"] for r in rows)
    width = max(t1 - t0, 1)
    by_row = {r["_i"]: r for r in rows}
    main_root = int(trace_analysis.tree.main_root[int(spans["_trace"][0])])
    ordered = [
        (by_row[i], d)
        for i, d in depth_first(trace_analysis.tree, spans["_i"].to_numpy(), main_root)
    ]
    kept = _keep(ordered, crit, max_rows)
    out_rows = [_row(r, depth, crit.get(r["_i"], []), t0, width) for r, depth in kept]
    return {
        "trace_id": trace_id,
        "why": why,
        "root_name": root.root_name,
        "root_service": root.root_service,
        "start_ns": root.start_ns,
        "duration_ms": root.duration_ms,
        "window_ms": width / 1e6,
        "spans": len(rows),
        "shown": len(out_rows),
        "rows": out_rows,
        "ticks": [{"x": 100.0 * v * 1e6 / width, "ms": v} for v in axis_ticks(width / 1e6)],
        "critical_by_kind": root.critical_path_ms,
    }


def _keep(
    ordered: list[tuple[dict[str, Any], int]],
    crit: dict[int, list[tuple[int, int]]],
    max_rows: int,
) -> list[tuple[dict[str, Any], int]]:
    """All rows when they fit; else the most critical-path time first, then the longest."""
    if len(ordered) <= max_rows:
        return ordered

    def score(item: tuple[dict[str, Any], int]) -> tuple[int, int, int]:
        r = item[0]
        on_path = sum(b - a for a, b in crit.get(r["_i"], []))
        return (-on_path, -(r["end_ns"] - r["start_ns"]), r["_i"])

    chosen = {item[0]["_i"] for item in sorted(ordered, key=score)[:max_rows]}
    return [item for item in ordered if item[0]["_i"] in chosen]


def _row(
    r: dict[str, Any], depth: int, sections: list[tuple[int, int]], t0: int, width: int
) -> dict[str, Any]:
    dur_ms = (r["end_ns"] - r["start_ns"]) / 1e6
    crit_ms = sum(b - a for a, b in sections) / 1e6
    kind = kind_class(r["kind_resolved"])
    left = 100.0 * (r["start_ns"] - t0) / width
    bar_w = max(100.0 * (r["end_ns"] - r["start_ns"]) / width, MIN_BAR_PCT)
    return {
        "name": r["name"],
        "service": r["service"],
        "kind": kind,
        "depth": depth,
        "indent": min(depth, 12),
        "left": min(left, 100.0 - MIN_BAR_PCT),
        "width": min(bar_w, 100.0 - min(left, 100.0 - MIN_BAR_PCT)),
        "duration_ms": dur_ms,
        "critical_ms": crit_ms,
        "on_path": bool(sections),
        "error": r["status_code"] == "error",
        "sections": [
            {
                "left": 100.0 * (a - t0) / width,
                "width": max(100.0 * (b - a) / width, MIN_BAR_PCT),
            }
            for a, b in sections
        ],
        "tooltip": _tooltip(r, kind, dur_ms, crit_ms),
    }


def _tooltip(r: dict[str, Any], kind: str, dur_ms: float, crit_ms: float) -> str:
    """Plain text (the template escapes it): what a reader wants on hover."""
    lines = [
        str(r["name"]),
        f"{r['service']} · {kind} · {fmt.ms(dur_ms)}",
    ]
    if crit_ms > 0:
        lines.append(f"on the critical path: {fmt.ms(crit_ms)}")
    if r["status_code"] == "error":
        lines.append("status: error")
    attrs = _attributes(r["attributes"])
    for key, value in attrs[:MAX_ATTRS]:
        text = str(value)
        if len(text) > MAX_ATTR_CHARS:
            text = text[: MAX_ATTR_CHARS - 1] + "…"
        lines.append(f"{key}: {text}")
    if len(attrs) > MAX_ATTRS:
        lines.append(f"… {len(attrs) - MAX_ATTRS} more attributes")
    return "\n".join(lines)


def _attributes(value: Any) -> list[tuple[str, str]]:
    """Sorted (key, value) pairs from a Polars map (a dict) or a list of key/value structs."""
    if not value:
        return []
    pairs: Iterable[tuple[Any, Any]] = (
        value.items() if isinstance(value, dict) else ((a["key"], a["value"]) for a in value)
    )
    return sorted((str(k), "" if v is None else str(v)) for k, v in pairs)
