"""Aggregate per-trace results into the ``tracelens.analysis/1`` document.

See ``docs/analysis-json.md``: field names and meanings there are a contract.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from tracelens.analysis.core import KIND_NS, TraceAnalysis
from tracelens.analysis.kinds import KINDS

SCHEMA = "tracelens.analysis/1"
SPLIT_NOTE = (
    "critical-path sections of spans with a measured tracelens.cpu_ns are split between cpu "
    "and the span's off-CPU kind in proportion to its self time; vLLM llm_request sections "
    "are split into queueing (wait) and model time (gpu)"
)


def percentiles(values: np.ndarray, qs: tuple[float, ...] = (50, 95, 99)) -> dict[str, float]:
    """Linear interpolation between order statistics (NumPy's default), in the unit given."""
    if len(values) == 0:
        return {f"p{int(q)}": 0.0 for q in qs}
    got = np.percentile(values, qs)
    return {f"p{int(q)}": round(float(v), 3) for q, v in zip(qs, got, strict=True)}


def summary(ta: TraceAnalysis) -> dict[str, Any]:
    lat_ms = ta.traces["duration_ns"].to_numpy() / 1e6
    by_kind = {k: float(ta.traces[f"{k}_ns"].sum()) / 1e6 for k in KINDS}
    total = sum(by_kind.values())
    latency = percentiles(lat_ms)
    latency["max"] = round(float(lat_ms.max()), 3) if len(lat_ms) else 0.0
    return {
        "traces": ta.traces.height,
        "spans": ta.spans.height,
        "latency_ms": latency,
        "critical_path_ms": {k: round(v, 3) for k, v in by_kind.items()},
        "critical_path_share": {
            k: (round(v / total, 4) if total > 0 else 0.0) for k, v in by_kind.items()
        },
        "critical_path_split": SPLIT_NOTE,
    }


def operations(ta: TraceAnalysis) -> pl.DataFrame:
    """One row per (service, name): its kind, count, duration percentiles, critical time."""
    main = ta.sections.filter(pl.col("main"))
    crit = main.group_by("service", "name").agg(
        ((pl.col("end_ns") - pl.col("start_ns")).sum() / 1e6).alias("critical_ms")
    )
    total_crit = float(crit["critical_ms"].sum()) if crit.height else 0.0
    dur_ms = (pl.col("end_ns") - pl.col("start_ns")) / 1e6
    ops = (
        ta.spans.group_by("service", "name")
        .agg(
            pl.col("kind_resolved").mode().sort().first().alias("kind"),
            pl.len().alias("count"),
            dur_ms.quantile(0.5, interpolation="linear").alias("p50_ms"),
            dur_ms.quantile(0.95, interpolation="linear").alias("p95_ms"),
            (pl.col("self_cpu_ns").sum() / 1e6).alias("cpu_ms"),
            (pl.col("end_ns") - pl.col("start_ns")).sum().alias("_total_ns"),
        )
        .join(crit, on=["service", "name"], how="left")
        .with_columns(pl.col("critical_ms").fill_null(0.0))
        .with_columns(
            (pl.col("critical_ms") / total_crit if total_crit > 0 else pl.lit(0.0)).alias(
                "critical_share"
            )
        )
        .sort(["critical_ms", "count", "service", "name"], descending=[True, True, False, False])
    )
    return ops.drop("_total_ns")


def traces_list(ta: TraceAnalysis, top: int | None = None) -> list[dict[str, Any]]:
    """Traces slowest first, each with its main root's critical path."""
    tr = ta.traces.sort(["duration_ns", "trace_id"], descending=[True, False])
    if top is not None:
        tr = tr.head(top)
    keep = tr["trace_id"].to_list()
    secs = (
        ta.sections.filter(pl.col("main") & pl.col("trace_id").is_in(keep))
        .select("trace_id", "span_id", "name", "kind", "start_ns", "end_ns")
        .partition_by("trace_id", as_dict=True, maintain_order=True)
    )
    out = []
    for row in tr.iter_rows(named=True):
        path = secs.get((row["trace_id"],))
        out.append(
            {
                "trace_id": row["trace_id"],
                "root_span_id": row["root_span_id"],
                "root_name": row["root_name"],
                "root_service": row["root_service"],
                "start_ns": row["start_ns"],
                "duration_ms": row["duration_ns"] / 1e6,
                "spans": row["spans"],
                "critical_path_ms": {k: round(row[f"{k}_ns"] / 1e6, 3) for k in KINDS},
                "critical_path": (path.drop("trace_id").to_dicts() if path is not None else []),
            }
        )
    return out


def operations_list(ta: TraceAnalysis, top: int | None = None) -> list[dict[str, Any]]:
    ops = operations(ta)
    if top is not None:
        ops = ops.head(top)
    rows = ops.to_dicts()
    for r in rows:
        for k in ("p50_ms", "p95_ms", "critical_ms", "cpu_ms"):
            r[k] = round(float(r[k] or 0.0), 3)
        r["critical_share"] = round(float(r["critical_share"]), 4)
    return rows


__all__ = [
    "KIND_NS",
    "SCHEMA",
    "operations",
    "operations_list",
    "percentiles",
    "summary",
    "traces_list",
]
