"""Flame graphs as inline SVG: where the critical path's time goes, by operation and by code.

Why: a table of operations says how much each costs; a flame graph shows *where in the call
tree* the time goes, and two of them side by side (median traces, slowest 5 %) show how the
shape changes when a trace is slow, the way CRISP draws critical-path flame graphs.

* ``critical_path_flames``: every critical-path section of a trace's main root, stacked under
  the path of operations from the root to the span that owns it (root -> ... -> leaf operation),
  aggregated over a group of traces; width = mean critical-path time per trace.
* ``cpu_flame``: the CPU flame graph of the critical-path samples (``analysis.hotspots``).

Drawing: root at the top ("icicle"), children heaviest first, one ``<g>`` per box with a
``<title>`` (the browser's hover tip, also read by screen readers), no script and no external
reference, so it renders under the report's Content-Security-Policy and prints (light fills,
dark text, scaled to the page width).  Every name is escaped here; ``svg`` returns ``Markup``.
Trees are built and laid out with explicit stacks (no recursion), boxes narrower than
``MIN_FRACTION`` of the width are dropped (their time stays in their parent) and at most
``MAX_BOXES`` are drawn, so a huge or deep input gives a bounded page.
"""

from __future__ import annotations

import colorsys
import hashlib
import html
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl
from markupsafe import Markup

from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.hotspots import CpuHotspots, Stack, module_of
from tracelens.render.html import fmt

WIDTH: Final = 1200  # viewBox units; the SVG scales to the page
ROW: Final = 18
FONT: Final = 11
CHAR: Final = 6.4  # mean advance of a character at FONT, for cutting labels
MIN_FRACTION: Final = 0.001
MAX_BOXES: Final = 1500
MAX_OP_DEPTH: Final = 48
ELLIPSIS: Final = "…"
MEDIAN_BAND: Final = (40.0, 60.0)  # percentiles of latency that make the "median traces"
SLOW_FROM: Final = 95.0
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class Box:
    name: str
    depth: int
    x: float  # left edge, fraction of the width
    width: float  # fraction of the width
    value: float  # ms


@dataclass(frozen=True)
class FlameGraph:
    """One drawable graph: its boxes, what the width means, and the figures for its caption."""

    title: str
    caption: str
    boxes: tuple[Box, ...]
    total_ms: float
    traces: int
    palette: str  # "cpu" (warm) or "ops" (cool)

    def svg(self) -> Markup:
        return svg(self)


def layout(stacks: Iterable[tuple[Stack, float]], root: str) -> tuple[tuple[Box, ...], float]:
    """Boxes of the merged ``stacks`` under one ``root`` box, and the total (ms)."""
    names: list[str] = [root]
    values: list[float] = [0.0]
    kids: list[dict[str, int]] = [{}]
    for stack, value in stacks:
        if value <= 0:
            continue
        node = 0
        values[0] += value
        for frame in stack:
            nxt = kids[node].get(frame)
            if nxt is None:
                nxt = len(names)
                names.append(frame)
                values.append(0.0)
                kids.append({})
                kids[node][frame] = nxt
            values[nxt] += value
            node = nxt
    total = values[0]
    if total <= 0:
        return (), 0.0
    boxes: list[Box] = []
    todo = [(0, 0, 0.0)]  # (node, depth, left edge)
    while todo and len(boxes) < MAX_BOXES:
        node, depth, x = todo.pop()
        width = values[node] / total
        boxes.append(Box(names[node], depth, x, width, values[node]))
        children = sorted(kids[node].values(), key=lambda k: (-values[k], names[k]))
        left = x
        placed = []
        for child in children:
            w = values[child] / total
            if w >= MIN_FRACTION:
                placed.append((child, depth + 1, left))
            left += w
        todo.extend(reversed(placed))  # heaviest popped first: drawn left to right
    return tuple(boxes), total


def _clean(name: str) -> str:
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", name)


def _fill(name: str, palette: str) -> str:
    """A stable colour per name (per module for code), light enough for dark text and print."""
    key = module_of(name) if palette == "cpu" else name
    h = int.from_bytes(hashlib.blake2b(key.encode("utf-8", "replace"), digest_size=2).digest())
    t = h / 65535
    if palette == "cpu":
        hue, light, sat = (0.0 + 0.14 * t), 0.72, 0.75  # reds to yellows
    else:
        hue, light, sat = (0.45 + 0.2 * t), 0.78, 0.45  # teals to blues
    r, g, b = colorsys.hls_to_rgb(hue, light, sat)
    return f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"


def _label(name: str, width_units: float) -> str:
    fits = int((width_units - 6) / CHAR)
    if fits < 3:
        return ""
    return name if len(name) <= fits else name[: fits - 1] + ELLIPSIS


def svg(graph: FlameGraph) -> Markup:
    """The graph as one ``<svg>`` element (escaped, script-free)."""
    depth = max((b.depth for b in graph.boxes), default=0) + 1
    height = depth * ROW + 2
    esc = html.escape
    total = graph.total_ms or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="flame" '
        f'viewBox="0 0 {WIDTH} {height}" width="100%" '
        f'preserveAspectRatio="xMinYMin meet" role="img" aria-label="{esc(_clean(graph.title))}" '
        f'font-family="system-ui, sans-serif" font-size="{FONT}" '
        f'style="display:block;max-width:100%;height:auto">'
    ]
    for b in graph.boxes:
        x = b.x * WIDTH
        w = b.width * WIDTH
        y = b.depth * ROW + 1
        name = _clean(b.name)
        tip = f"{name}\n{fmt.ms(b.value)} ({fmt.pct(b.value / total, 1)})"
        label = _label(name, w)
        text = (
            f'<text x="{x + 3:.2f}" y="{y + ROW - 6}" fill="#1a1a1a">{esc(label)}</text>'
            if label
            else ""
        )
        parts.append(
            f"<g><title>{esc(tip)}</title>"
            f'<rect x="{x:.2f}" y="{y}" width="{max(w - 0.5, 0.3):.2f}" height="{ROW - 1}" '
            f'rx="2" fill="{_fill(b.name, graph.palette)}"/>{text}</g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


# -- the critical path by operation ----------------------------------------------------------


def trace_groups(trace_analysis: TraceAnalysis) -> tuple[np.ndarray, np.ndarray]:
    """Trace numbers of the median traces (latency between p40 and p60; at least the one
    nearest the median) and of the slowest 5 % (latency at or above p95; at least the slowest)."""
    tr = trace_analysis.traces
    if tr.height == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    lat = tr["duration_ns"].to_numpy().astype(np.float64)
    ids = tr["_trace"].to_numpy()
    lo, hi, mid, slow = np.percentile(lat, (*MEDIAN_BAND, 50.0, SLOW_FROM))
    median = ids[(lat >= lo) & (lat <= hi)]
    if len(median) == 0:
        median = ids[[int(np.argmin(np.abs(lat - mid)))]]
    return median, ids[lat >= slow]


def operation_stacks(trace_analysis: TraceAnalysis, traces: np.ndarray) -> dict[Stack, float]:
    """Critical-path ms per operation path (root -> ... -> owner), mean over ``traces``."""
    return _OperationPaths(trace_analysis).stacks(traces)


class _OperationPaths:
    """The span columns the operation paths need, read once for several groups of traces."""

    def __init__(self, trace_analysis: TraceAnalysis) -> None:
        sp = trace_analysis.spans
        self.parent = sp["_parent"].to_numpy()
        services = sp["service"].fill_null("")
        self.several = services.n_unique() > 1
        self.names = sp["name"].fill_null("").to_list()
        self.svc = services.to_list()
        self.trace_of = sp["_trace"].to_numpy()
        sec = trace_analysis.sections.filter(pl.col("main"))
        self.owner = sec["_i"].to_numpy()
        self.dur = (sec["end_ns"].to_numpy() - sec["start_ns"].to_numpy()).astype(np.float64) / 1e6
        self.memo: dict[int, Stack] = {}

    def label(self, i: int) -> str:
        name, svc = self.names[i], self.svc[i]
        return f"{name} ({svc})" if self.several and svc else name

    def path(self, i: int) -> Stack:
        """Root-to-``i`` operation names, bounded (``_extend``); parents first, no recursion."""
        memo, parent = self.memo, self.parent
        chain: list[int] = []
        j = i
        while j >= 0 and j not in memo and len(chain) <= len(parent):
            chain.append(j)
            j = int(parent[j])
        base = memo.get(j, ()) if j >= 0 else ()
        for k in reversed(chain):
            base = _extend(base, self.label(k))
            memo[k] = base
        return base

    def stacks(self, traces: np.ndarray) -> dict[Stack, float]:
        if len(traces) == 0:
            return {}
        keep = np.isin(self.trace_of[self.owner], traces)
        out: dict[Stack, float] = defaultdict(float)
        for i, ms in zip(self.owner[keep].tolist(), self.dur[keep].tolist(), strict=True):
            out[self.path(i)] += ms / len(traces)
        return dict(out)


def _extend(path: Stack, name: str) -> Stack:
    if len(path) < MAX_OP_DEPTH:
        return (*path, name)
    keep = MAX_OP_DEPTH // 2
    tail = (*path[keep + 1 :], name) if path[keep] == ELLIPSIS else (*path[keep:], name)
    return (*path[:keep], ELLIPSIS, *tail[-(MAX_OP_DEPTH - keep - 1) :])


def critical_path_flames(trace_analysis: TraceAnalysis) -> tuple[FlameGraph, FlameGraph]:
    """The CRISP-style operation flame graphs of the median traces and of the slowest 5 %."""
    median, slow = trace_groups(trace_analysis)
    paths = _OperationPaths(trace_analysis)
    out = []
    for group, title, who in (
        (median, "Critical path of the median traces", "traces between p40 and p60 latency"),
        (slow, "Critical path of the slowest 5% of traces", "traces at or above p95 latency"),
    ):
        root = f"{len(group):,} trace{'' if len(group) == 1 else 's'}"
        boxes, total = layout(paths.stacks(group).items(), root)
        caption = (
            f"{root} {who.split(' ', 1)[1]}; width = mean critical-path time per trace "
            f"({fmt.ms(total)}), root operation at the top"
        )
        out.append(FlameGraph(title, caption, boxes, total, len(group), "ops"))
    return out[0], out[1]


def cpu_flame(hotspots: CpuHotspots) -> FlameGraph:
    """The CPU flame graph of the critical-path samples (code frames, span's function on top)."""
    cp = hotspots.critical_path
    boxes, total = layout(cp.stacks, "critical-path CPU")
    caption = (
        f"{fmt.ms(total)} of CPU on the critical path in {hotspots.spans:,} profiled spans of "
        f"{hotspots.traces:,} traces; width = CPU time, the traced function at the top"
    )
    return FlameGraph(
        "CPU on the critical path, by function", caption, boxes, total, hotspots.traces, "cpu"
    )


def flame_section(trace_analysis: TraceAnalysis, hotspots: CpuHotspots | None = None) -> Markup:
    """The report's flame-graph section (``<section id="flames">``), ready to place in a page."""
    if hotspots is None:
        from tracelens.analysis.hotspots import cpu_hotspots

        hotspots = cpu_hotspots(trace_analysis)
    median, slow = critical_path_flames(trace_analysis)
    esc = html.escape
    parts = [
        '<section class="card" id="flames">',
        "<h2>Flame graphs</h2>",
        '<p class="hint">Where the critical path\'s time goes: width is time, the root at the top; '
        "hover a box for its name and time.  Compare the median traces with the slowest ones to "
        "see which part grows.</p>",
    ]
    graphs = [("flame-median", median), ("flame-slow", slow)]
    if hotspots.spans:
        graphs.append(("flame-cpu", cpu_flame(hotspots)))
    for fig_id, graph in graphs:
        parts.append(
            f'<figure id="{fig_id}" class="flame-figure"><figcaption><strong>'
            f"{esc(graph.title)}</strong>: {esc(graph.caption)}</figcaption>"
        )
        parts.append(
            graph.svg() if graph.boxes else '<p class="empty">No critical-path time to draw.</p>'
        )
        parts.append("</figure>")
    if not hotspots.spans:
        parts.append(
            '<p class="empty" id="flame-cpu-none">No CPU flame graph: no span carries '
            "<code>tracelens.cpu_stacks</code> (the decorator records them unless "
            "<code>configure(profile=False)</code>).</p>"
        )
    parts.append("</section>")
    return Markup("".join(str(p) for p in parts))
