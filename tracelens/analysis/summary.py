"""Aggregate per-trace results into the typed summary of an analysis.

:class:`Summary`, :class:`Operation` and :class:`TraceSummary` hold the figures of the
``tracelens.analysis/1`` document.  Percentiles and per-kind times are rounded here (to the
microsecond, shares to 1e-4), as every output states them; an :class:`Operation` keeps its
full precision for the HTML report's own formatting, and ``Operation.rounded`` gives the
figures the JSON and the terminal tables state.  Field names and meanings are a contract
(``docs/analysis-json.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from tracelens.analysis import gpu
from tracelens.analysis.core import KIND_NS, TraceAnalysis
from tracelens.analysis.kinds import KINDS

SCHEMA = "tracelens.analysis/1"
SPLIT_NOTE = (
    "critical-path sections of spans with a measured tracelens.cpu_ns are split between cpu "
    "and the span's off-CPU kind in proportion to its self time; vLLM llm_request sections "
    "are split into queueing (wait) and model time (gpu); a span's measured device time "
    "(tracelens.gpu_ns, or its thread waiting for the device, tracelens.gpu_wait_ns) is gpu "
    "first, the rest split as above"
)


def percentiles(values: np.ndarray, qs: tuple[float, ...] = (50, 95, 99)) -> dict[str, float]:
    """Linear interpolation between order statistics (NumPy's default), in the unit given."""
    if len(values) == 0:
        return {f"p{int(q)}": 0.0 for q in qs}
    got = np.percentile(values, qs)
    return {f"p{int(q)}": round(float(v), 3) for q, v in zip(qs, got, strict=True)}


@dataclass(frozen=True)
class Summary:
    """Over all traces: counts, end-to-end latency, critical-path time and share by kind."""

    traces: int
    spans: int
    latency_ms: dict[str, float]  # p50, p95, p99, max
    critical_path_ms: dict[str, float]  # per kind, in KINDS order
    critical_path_share: dict[str, float]  # per kind; adds up to 1 (or all 0)
    critical_path_split: str  # how sections are split between kinds, in words
    gpu_measured_traces: int = 0  # traces with GPU measurement (tracelens.gpu_*)
    gpu_idle_share: float | None = None  # critical-path share with no GPU working; None: none


@dataclass(frozen=True)
class Operation:
    """One (service, span name): its usual kind, count, duration and critical-path time
    (full precision)."""

    service: str
    name: str
    kind: str
    count: int
    p50_ms: float
    p95_ms: float
    cpu_ms: float
    critical_ms: float  # exclusive time on the main critical paths, all traces
    critical_share: float
    cpu_share: float | None = None  # on-CPU share of its self time; None: cpu_ns not measured
    gpu_ms: float | None = None  # device-busy time of its GPU-measured spans; None: not measured
    gpu_busy_share: float | None = None  # gpu_ms over those spans' self time

    def rounded(self) -> Operation:
        """The figures as the analysis document states them: ms to 1e-3, the share to 1e-4."""
        return replace(
            self,
            cpu_share=None if self.cpu_share is None else round(self.cpu_share, 4),
            gpu_ms=None if self.gpu_ms is None else round(self.gpu_ms, 3),
            gpu_busy_share=None if self.gpu_busy_share is None else round(self.gpu_busy_share, 4),
            p50_ms=round(self.p50_ms, 3),
            p95_ms=round(self.p95_ms, 3),
            cpu_ms=round(self.cpu_ms, 3),
            critical_ms=round(self.critical_ms, 3),
            critical_share=round(self.critical_share, 4),
        )


# The columns of a critical path, one row per section (docs/critical-path.md).
PATH_COLUMNS = ("span_id", "name", "kind", "start_ns", "end_ns")


@dataclass(frozen=True)
class TraceSummary:
    """One trace: its main root, latency and critical path."""

    trace_id: str
    root_span_id: str
    root_name: str
    root_service: str
    start_ns: int
    duration_ms: float
    spans: int
    critical_path_ms: dict[str, float]  # per kind
    gpu_idle_share: float | None  # path share with no GPU working for it; None: not measured
    # PATH_COLUMNS, in path order.  A table, not objects: the traces of an analysis hold a row
    # per critical-path section (hundreds of thousands), and only the JSON reads them all.
    critical_path: pl.DataFrame

    def largest_kind(self) -> tuple[str, float] | None:
        """The kind with the most critical-path time and its share; None when there is none."""
        ms = self.critical_path_ms
        total = sum(ms.values())
        if total <= 0:
            return None
        k = max(ms, key=lambda key: ms[key])
        return k, ms[k] / total


def summary(trace_analysis: TraceAnalysis) -> Summary:
    busy, path = gpu.trace_gpu_idle(trace_analysis)
    measured = ~np.isnan(busy)
    lat_ms = trace_analysis.traces["duration_ns"].to_numpy() / 1e6
    by_kind = {k: float(trace_analysis.traces[f"{k}_ns"].sum()) / 1e6 for k in KINDS}
    total = sum(by_kind.values())
    latency = percentiles(lat_ms)
    latency["max"] = round(float(lat_ms.max()), 3) if len(lat_ms) else 0.0
    return Summary(
        traces=trace_analysis.traces.height,
        spans=trace_analysis.spans.height,
        latency_ms=latency,
        critical_path_ms={k: round(v, 3) for k, v in by_kind.items()},
        critical_path_share={
            k: (round(v / total, 4) if total > 0 else 0.0) for k, v in by_kind.items()
        },
        critical_path_split=SPLIT_NOTE,
        gpu_measured_traces=int(measured.sum()),
        gpu_idle_share=(
            gpu.idle_share(float(busy[measured].sum()), float(path[measured].sum()))
            if measured.any()
            else None
        ),
    )


def operations(trace_analysis: TraceAnalysis) -> pl.DataFrame:
    """One row per (service, name): its kind, count, duration percentiles, critical time."""
    main = trace_analysis.sections.filter(pl.col("main"))
    crit = main.group_by("service", "name").agg(
        ((pl.col("end_ns") - pl.col("start_ns")).sum() / 1e6).alias("critical_ms")
    )
    total_crit = float(crit["critical_ms"].sum()) if crit.height else 0.0
    dur_ms = (pl.col("end_ns") - pl.col("start_ns")) / 1e6
    ops = (
        trace_analysis.spans.group_by("service", "name")
        .agg(
            pl.col("kind_resolved").mode().sort().first().alias("kind"),
            pl.len().alias("count"),
            dur_ms.quantile(0.5, interpolation="linear").alias("p50_ms"),
            dur_ms.quantile(0.95, interpolation="linear").alias("p95_ms"),
            (pl.col("self_cpu_ns").sum() / 1e6).alias("cpu_ms"),
            (pl.col("end_ns") - pl.col("start_ns")).sum().alias("_total_ns"),
        )
        .join(crit, on=["service", "name"], how="left")
        .join(gpu.operation_gpu(trace_analysis), on=["service", "name"], how="left")
        .with_columns(pl.col("critical_ms").fill_null(0.0))
        .with_columns(
            (pl.col("critical_ms") / total_crit if total_crit > 0 else pl.lit(0.0)).alias(
                "critical_share"
            )
        )
        .sort(["critical_ms", "count", "service", "name"], descending=[True, True, False, False])
    )
    return ops.drop("_total_ns")


def traces_list(
    trace_analysis: TraceAnalysis, top: int | None = None, trace_ids: Sequence[str] | None = None
) -> list[TraceSummary]:
    """Traces slowest first, each with its main root's critical path (only ``trace_ids`` when
    given)."""
    tr = trace_analysis.traces
    if trace_ids is not None:
        tr = tr.filter(pl.col("trace_id").is_in(list(trace_ids)))
    tr = tr.sort(["duration_ns", "trace_id"], descending=[True, False])
    if top is not None:
        tr = tr.head(top)
    keep = tr["trace_id"].to_list()
    main = trace_analysis.sections.filter(pl.col("main") & pl.col("trace_id").is_in(keep))
    secs = main.select("trace_id", *PATH_COLUMNS).partition_by(
        "trace_id", as_dict=True, maintain_order=True, include_key=False
    )
    no_path = main.select(PATH_COLUMNS).clear()
    busy, path_ns = gpu.trace_gpu_idle(trace_analysis)
    out = []
    for row in tr.iter_rows(named=True):
        path = secs.get((row["trace_id"],))
        out.append(
            TraceSummary(
                trace_id=row["trace_id"],
                root_span_id=row["root_span_id"],
                root_name=row["root_name"],
                root_service=row["root_service"],
                start_ns=row["start_ns"],
                duration_ms=row["duration_ns"] / 1e6,
                spans=row["spans"],
                critical_path_ms={k: round(row[f"{k}_ns"] / 1e6, 3) for k in KINDS},
                gpu_idle_share=gpu.idle_share(
                    float(busy[row["_trace"]]), float(path_ns[row["_trace"]])
                ),
                critical_path=path if path is not None else no_path,
            )
        )
    return out


def operations_list(trace_analysis: TraceAnalysis) -> list[Operation]:
    """Every operation, most critical-path time first (the rows of ``operations``)."""
    return [
        Operation(
            service=r["service"],
            name=r["name"],
            kind=r["kind"],
            count=r["count"],
            p50_ms=float(r["p50_ms"] or 0.0),
            p95_ms=float(r["p95_ms"] or 0.0),
            cpu_ms=float(r["cpu_ms"] or 0.0),
            critical_ms=float(r["critical_ms"] or 0.0),
            critical_share=float(r["critical_share"]),
            cpu_share=r["cpu_share"],
            gpu_ms=r["gpu_ms"],
            gpu_busy_share=r["gpu_busy_share"],
        )
        for r in operations(trace_analysis).iter_rows(named=True)
    ]


__all__ = [
    "KIND_NS",
    "PATH_COLUMNS",
    "SCHEMA",
    "Operation",
    "Summary",
    "TraceSummary",
    "operations",
    "operations_list",
    "percentiles",
    "summary",
    "traces_list",
]
