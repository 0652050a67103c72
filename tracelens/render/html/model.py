"""What a report shows, computed from an ``Analysis``: plain dicts the templates only lay out.

It reads the analysis' typed results (``Analysis.summary``, ``.operations``, ``.findings``) and
its tables, never the JSON form.  Everything is aggregated before it reaches a template (top-N
tables, fixed histogram bins, a few waterfalls), so a report over a million spans stays a few
hundred kilobytes and renders in milliseconds once the analysis is done.  Numbers stay numbers
here; ``fmt`` turns them into text.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
from markupsafe import Markup

from tracelens.analysis import Analysis, TraceAnalysis
from tracelens.analysis import summary as s
from tracelens.analysis.findings.finding import Fact, Finding
from tracelens.analysis.kinds import KINDS
from tracelens.render.html import fmt

TOP_OPERATIONS = 20
TOP_ROOTS = 12
TOP_CPU = 15
TOP_FINDINGS = 20
HEADLINE_FINDINGS = 3


def kind_class(kind: Any) -> str:
    """A CSS class for a kind; anything unexpected is drawn as unknown (never data in markup)."""
    return kind if kind in KINDS else "unknown"


def segments(by_kind: dict[str, float], scale: float) -> list[dict[str, Any]]:
    """Stacked-bar pieces: width in percent of ``scale``, in the fixed kind order."""
    out = []
    for k in KINDS:
        v = float(by_kind.get(k, 0.0) or 0.0)
        if v > 0 and scale > 0:
            out.append({"kind": k, "value": v, "width": 100.0 * v / scale})
    return out


def headline(analysis: Analysis) -> dict[str, Any]:
    summ = analysis.summary
    tr = analysis.traces.traces
    first = int(tr["start_ns"].min()) if tr.height else None  # type: ignore[arg-type]
    last = int(tr["end_ns"].max()) if tr.height else None  # type: ignore[arg-type]
    crit = summ.critical_path_ms
    total = sum(crit.values())
    return {
        "traces": summ.traces,
        "spans": summ.spans,
        "latency": summ.latency_ms,
        "critical_ms": crit,
        "share": summ.critical_path_share,
        "share_bar": segments(crit, total),
        "split_note": summ.critical_path_split,
        "first_ns": first,
        "last_ns": last,
        "dominant": max(KINDS, key=lambda k: crit[k]) if total > 0 else None,
    }


def latency_histogram(durations_ms: np.ndarray, bins: int = 40) -> dict[str, Any]:
    """Fixed-count bins, log-spaced when latencies span more than a factor of 50.

    Geometry is in a 0..100 x 0..100 box; the template scales it with a viewBox.
    """
    d = durations_ms[np.isfinite(durations_ms)]
    if len(d) == 0:
        return {"bars": [], "ticks": [], "marks": [], "log": False, "max_count": 0}
    lo, hi = float(d.min()), float(d.max())
    log = lo > 0 and hi / lo > 50
    if hi <= lo:  # one latency (or one trace): centre it in a window around it
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = max(lo - pad, 0.0), hi + pad
    if log:
        edges = np.logspace(math.log10(lo), math.log10(hi), bins + 1)
    else:
        edges = np.linspace(lo, hi, bins + 1)
    edges[0], edges[-1] = lo, hi  # logspace rounds: the extremes must fall inside
    counts, _ = np.histogram(d, bins=edges)
    peak = int(counts.max()) if len(counts) else 0

    def x(v: float) -> float:
        if log:
            return 100.0 * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
        return 100.0 * (v - lo) / (hi - lo)

    bars = [
        {
            "x": x(float(edges[i])),
            "w": max(x(float(edges[i + 1])) - x(float(edges[i])), 0.0),
            "h": 100.0 * int(c) / peak if peak else 0.0,
            "count": int(c),
            "lo": float(edges[i]),
            "hi": float(edges[i + 1]),
        }
        for i, c in enumerate(counts)
    ]
    pcts = s.percentiles(d)
    marks = [{"label": k, "value": v, "x": x(min(max(v, lo), hi))} for k, v in pcts.items()]
    return {
        "bars": bars,
        "ticks": [{"x": x(t), "value": t} for t in _ticks(lo, hi, log)],
        "marks": marks,
        "log": log,
        "max_count": peak,
        "n": len(d),
    }


def axis_ticks(span_ms: float) -> list[float]:
    """Round tick values from 0 to ``span_ms`` (at most about six)."""
    if span_ms <= 0:
        return [0.0]
    return _ticks(0.0, span_ms, log=False)


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        out = []
        e = math.floor(math.log10(lo))
        while 10**e <= hi * 1.0001:
            for m in (1, 2, 5):
                v = m * 10.0**e
                if lo <= v <= hi:
                    out.append(v)
            e += 1
        return out if len(out) <= 12 else [v for v in out if math.log10(v).is_integer()]
    span = hi - lo
    raw = span / 5
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 9) for i in range(int((hi - first) / step + 1e-9) + 1)]


def roots_breakdown(trace_analysis: TraceAnalysis, top: int = TOP_ROOTS) -> dict[str, Any]:
    """Per root operation: mean critical-path time per trace by kind, plus its latency."""
    kind_cols = [f"{k}_ns" for k in KINDS]
    dur = pl.col("duration_ns").cast(pl.Float64) / 1e6
    g = (
        trace_analysis.traces.group_by("root_service", "root_name")
        .agg(
            pl.len().alias("count"),
            (pl.col("duration_ns").sum() / 1e6).alias("total_ms"),
            dur.quantile(0.5, interpolation="linear").alias("p50_ms"),
            dur.quantile(0.95, interpolation="linear").alias("p95_ms"),
            *[(pl.col(c).mean() / 1e6).alias(c) for c in kind_cols],
        )
        .sort(
            ["total_ms", "count", "root_service", "root_name"],
            descending=[True, True, False, False],
        )
    )
    shown = g.head(top)
    rows = shown.to_dicts()
    scale = max((sum(r[c] for c in kind_cols) for r in rows), default=0.0)
    out = []
    for r in rows:
        by_kind = {k: float(r[f"{k}_ns"] or 0.0) for k in KINDS}
        mean = sum(by_kind.values())
        out.append(
            {
                "service": r["root_service"],
                "name": r["root_name"],
                "count": r["count"],
                "p50_ms": r["p50_ms"],
                "p95_ms": r["p95_ms"],
                "mean_ms": mean,
                "by_kind": by_kind,
                "segments": segments(by_kind, scale),
                "share": {k: (v / mean if mean > 0 else 0.0) for k, v in by_kind.items()},
            }
        )
    return {"rows": out, "hidden": g.height - shown.height}


def top_operations(analysis: Analysis, top: int = TOP_OPERATIONS) -> dict[str, Any]:
    ops = analysis.operations
    n_traces = analysis.summary.traces
    rows = [
        {
            "service": o.service,
            "name": o.name,
            "kind": kind_class(o.kind),
            "count": o.count,
            "p50_ms": o.p50_ms,
            "p95_ms": o.p95_ms,
            "critical_ms": o.critical_ms,
            "critical_share": o.critical_share,
            "per_trace_ms": o.critical_ms / n_traces if n_traces else 0.0,
            "cpu_share": o.cpu_share,
            "gpu_busy_share": o.gpu_busy_share,
        }
        for o in ops[:top]
    ]
    gpu = any(o.gpu_busy_share is not None for o in ops)
    return {"rows": rows, "hidden": len(ops) - len(rows), "gpu": gpu}


def gpu_view(analysis: Analysis, top: int = TOP_OPERATIONS) -> dict[str, Any] | None:
    """The request-level GPU idle share and the GPU-measured model calls, host on-CPU share
    beside device busy share; None when nothing in the input was GPU-measured."""
    summ = analysis.summary
    if not summ.gpu_measured_traces:
        return None
    calls = analysis.gpu_model_calls
    return {
        "measured_traces": summ.gpu_measured_traces,
        "idle_share": summ.gpu_idle_share,
        "calls": [c.to_dict() for c in calls[:top]],
        "hidden": max(len(calls) - top, 0),
    }


def cpu_split(trace_analysis: TraceAnalysis, top: int = TOP_CPU) -> dict[str, Any]:
    """Each operation's own time (children excluded), on-CPU versus off-CPU by kind."""
    sp = trace_analysis.spans
    self_ms = pl.col("self_ns").cast(pl.Float64).clip(lower_bound=0) / 1e6
    g = (
        sp.group_by("service", "name")
        .agg(
            pl.len().alias("count"),
            self_ms.sum().alias("self_ms"),
            *[(self_ms * pl.col(f"mix_{k}")).sum().alias(k) for k in KINDS],
            pl.col("cpu_ns").is_not_null().any().alias("measured"),
        )
        .filter(pl.col("self_ms") > 0)
        .sort(["self_ms", "count", "service", "name"], descending=[True, True, False, False])
    )
    rows = g.head(top).to_dicts()
    peak = max((r["self_ms"] for r in rows), default=0.0)
    out = []
    for r in rows:
        by_kind = {k: float(r[k] or 0.0) for k in KINDS}
        total = sum(by_kind.values())
        out.append(
            {
                "service": r["service"],
                "name": r["name"],
                "count": r["count"],
                "self_ms": r["self_ms"],
                "measured": bool(r["measured"]),
                "segments": segments(by_kind, peak),
                "cpu_share": by_kind["cpu"] / total if total > 0 else 0.0,
                "off_ms": total - by_kind["cpu"],
                "cpu_ms": by_kind["cpu"],
            }
        )
    any_measured = bool(sp.height) and bool(sp["cpu_ns"].is_not_null().any())
    return {"rows": out, "hidden": g.height - len(rows), "any_measured": any_measured}


def finding_view(f: Finding) -> dict[str, Any]:
    """One finding in words, with its further figures listed (``facts``)."""
    return {
        "type": f.type.value,
        "title": f.title,
        "saving_p50": f.saving_ms["p50"],
        "saving_p95": f.saving_ms["p95"],
        "projected_p50": f.projected_latency_ms["p50"],
        "projected_p95": f.projected_latency_ms["p95"],
        "traces": f.traces,
        "occurrences": f.occurrences,
        "explanation": f.explanation,
        "confidence": f.confidence,
        "extra": facts(f),
    }


def facts(f: Finding) -> list[tuple[str, str]]:
    """The finding's figures beyond title, saving and explanation, by name, as text."""
    pairs: list[tuple[str, Fact]] = [
        ("confidence", f.confidence),
        ("parent_service", f.parent_service if f.parent is not None else None),
        ("total_saving_ms", f.total_saving_ms),
        ("traces_on_critical_path", f.traces_on_critical_path),
        (
            "alternative_to",
            None if f.alternative_to is None else f"finding #{f.alternative_to + 1}",
        ),
    ]
    if f.details is not None:
        pairs += f.details.facts()
    if f.example is not None:
        pairs += [
            ("example_trace_id", f.example.trace_id),
            ("example_latency_ms", f.example.latency_ms),
            ("example_projected_latency_ms", f.example.projected_latency_ms),
        ]
    return sorted((k, _text(v)) for k, v in pairs if v is not None)


def _text(v: str | float | bool) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return v if len(v) <= 200 else v[:199] + "…"
    return fmt.num(v)


def findings(analysis: Analysis) -> dict[str, Any]:
    views = [finding_view(f) for f in analysis.findings[:TOP_FINDINGS]]
    # The headline cards are changes worth making: no alternatives, notes or tiny savings.
    top = [v for f, v in zip(analysis.findings, views, strict=False) if f.top_change]
    return {
        "top": top[:HEADLINE_FINDINGS],
        "rows": views,
        "hidden": max(len(analysis.findings) - TOP_FINDINGS, 0),
        "total": len(analysis.findings),
    }


def representative(traces: pl.DataFrame, target_ms: float) -> str | None:
    """The trace whose latency is nearest ``target_ms`` (ties: smallest trace id)."""
    if traces.height == 0:
        return None
    picked = (
        traces.select("trace_id", (pl.col("duration_ns") / 1e6 - target_ms).abs().alias("_gap"))
        .sort(["_gap", "trace_id"])
        .head(1)
    )
    return str(picked["trace_id"][0])


# -- the latency model (issue 13) and the flame graphs (issue 14) ----------------------------

TOP_STAGE_OPERATIONS = 6
TOP_MODELS = 6
MIN_SIZING_TRACES = 10
UNFITTED = ("too_few_calls", "no_token_spread")  # nothing per token to draw against


def stages_view(analysis: Analysis, top: int = TOP_STAGE_OPERATIONS) -> dict[str, Any]:
    """``Analysis.stages`` per root operation: each stage's p50/p95/p99 per trace and its share
    of the p99 traces' critical time, largest share first (as computed)."""
    st = analysis.stages
    ops = [
        {
            "service": op.service,
            "name": op.name,
            "traces": op.traces,
            "p99_traces": op.p99_traces,
            "latency": op.latency_ms,
            "rows": [
                {
                    "stage": s.stage.value,
                    "p50_ms": s.p50_ms,
                    "p95_ms": s.p95_ms,
                    "p99_ms": s.p99_ms,
                    "mean_ms": s.mean_ms,
                    "p99_share": s.p99_share,
                }
                for s in op.stages
            ],
        }
        for op in st.operations[:top]
    ]
    return {
        "operations": ops,
        "hidden": max(len(st.operations) - top, 0),
        "cold_start_traces": st.cold_start_traces,
        "rules": st.rules,
    }


def models_view(analysis: Analysis, top: int = TOP_MODELS) -> dict[str, Any]:
    """``Analysis.models``: each fit's figures and, when it has per-token costs, its scatter of
    latency against the fitted token load (``tokens.scatter_svg``: numbers and an escaped
    title only, so it is marked safe here)."""
    from tracelens.analysis.tokens import scatter_svg

    rows = []
    for fit in analysis.models[:top]:
        d = fit.to_dict()
        drawn = fit.reliable and fit.status not in UNFITTED and fit.points
        plot = scatter_svg(fit) if drawn else ""
        rows.append({**d, "plot": Markup(plot) if plot else None})
    return {"rows": rows, "hidden": max(len(analysis.models) - top, 0)}


def sizing_view(analysis: Analysis) -> dict[str, Any]:
    """``tracelens size`` at the load the traces show: the arrival rate of the request traces
    (cold starts apart) over the window they span, and their p95 as the latency target, so the
    concurrency is Little's law's λ × p95.  ``reason`` says why it is left out when the traces
    cannot support it."""
    from tracelens.analysis.sizing import size_traces

    head = analysis.request_latency
    cold = {c.trace_id for c in head.cold_starts}
    tr = analysis.traces.traces.filter(~pl.col("trace_id").is_in(list(cold)))
    n = tr.height
    if n < MIN_SIZING_TRACES:
        return {"reason": f"{n} request trace{'' if n == 1 else 's'}: sizing needs at least "
                f"{MIN_SIZING_TRACES} to tell the load"}  # fmt: skip
    window_s = (int(tr["end_ns"].max()) - int(tr["start_ns"].min())) / 1e9  # type: ignore[arg-type]
    target_ms = float(head.latency_ms["p95"])
    if window_s <= 0 or target_ms <= 0:
        return {"reason": "the request traces span no time: no arrival rate to size for"}
    arrival = n / window_s
    concurrency = max(1, round(arrival * target_ms / 1e3))
    sized = size_traces(analysis.traces, concurrency=concurrency, latency_target_ms=target_ms)
    d = sized.demand
    if d.cpu_s <= 0 and d.model_s <= 0:
        return {"reason": "no measured CPU (tracelens.cpu_ns) and no model calls with token "
                "counts: no demand to size"}  # fmt: skip
    return {
        "reason": None,
        "requests": n,
        "window_s": window_s,
        "observed_arrival_per_s": arrival,
        "concurrency": sized.concurrency,
        "latency_target_ms": sized.latency_target_ms,
        "arrival_per_s": sized.arrival_per_s,
        "cpu_ms": d.cpu_s * 1e3,
        "model_ms": d.model_s * 1e3,
        "cpu_share": d.cpu_share,
        "model_share": d.model_share,
        "model_calls": d.model_calls,
        "tool_calls": d.tool_calls,
        "cpu_measured": d.cpu_measured,
        "resources": [
            {
                "name": r.name,
                "unit": "cores" if r.name == "cpu" else "model slots",
                "demand_ms": r.demand_s * 1e3,
                "needed": r.needed,
                "headroom": r.headroom,
                "utilisation": r.utilisation,
                "wait_probability": r.wait_probability,
                "expected_wait_ms": r.expected_wait_ms,
            }
            for r in sized.resources
        ],
        "binding": sized.binding,
    }


def flames(analysis: Analysis) -> Markup:
    """The flame-graph section (``render.html.flame``): critical path by operation for the median
    and slowest-5 % traces, and the CPU flame graph of critical-path samples."""
    from tracelens.render.html.flame import flame_section

    return flame_section(analysis.traces, analysis.cpu_hotspots)
