"""Cold starts apart: engine and process start-up traces are not request latency.

A vLLM engine's start-up (``SyncMPClient init`` > ``Load model`` > ``Load weights`` ...) is one
trace of tens of seconds; mixed into the request traces it owns the headline p95.  A trace is a
*cold start* when its main root's name says start-up (init, initialise, start-up, boot, warm-up,
loading, load model/weights/checkpoint/tokenizer/engine; not a bare "load": ``load_account_page``
is a request), or when it holds a start-up span and no model call, server or tool span (nothing a
request does).  Cold starts are reported apart (count and durations); the headline
percentiles are over the other traces, overall and per root operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.fields import Record

# "load" alone is no start-up word: ``load_account_page`` is a request.  Loading a model, its
# weights, checkpoint, tokenizer or engine is (vLLM: ``Load model``, ``Load weights``), and so
# is a bare ``Loading`` (vLLM's ``Overall Loading``).
STARTUP_NAME = (
    r"(?i)(^|[^a-z])(init|initiali[sz]e|initiali[sz]ation|initiali[sz]ing|start[-_ ]?up"
    r"|boot|bootstrap|warm[-_ ]?up|cold[-_ ]?start|loading"
    r"|load(ing)?[-_ ](the[-_ ])?(model|weights|checkpoint|tokenizer|engine)s?)([^a-z]|$)"
)


def cold_start_mask(trace_analysis: TraceAnalysis) -> np.ndarray:
    """Per trace (trace-number order): whether it is a cold start."""
    n = trace_analysis.traces.height
    root_says = (
        trace_analysis.traces["root_name"].str.contains(STARTUP_NAME).fill_null(False).to_numpy()
    )
    sp = trace_analysis.spans.select(
        "_trace",
        pl.col("name").str.contains(STARTUP_NAME).fill_null(False).alias("startup"),
        (
            pl.col("model_call")
            | pl.col("span_kind").is_in(["server", "client", "consumer"])
            | (pl.col("kind_resolved") == "io")
        ).alias("request"),
    )
    trace = sp["_trace"].to_numpy()
    has_startup = np.bincount(trace, weights=sp["startup"].to_numpy(), minlength=n) > 0
    has_request = np.bincount(trace, weights=sp["request"].to_numpy(), minlength=n) > 0
    out: np.ndarray = root_says | (has_startup & ~has_request)
    return out


@dataclass(frozen=True)
class ColdStart(Record):
    trace_id: str
    service: str
    name: str
    duration_ms: float


@dataclass(frozen=True)
class OperationLatency(Record):
    """The request latency of one root operation (service, name of the main root)."""

    service: str
    name: str
    traces: int
    latency_ms: dict[str, float]  # p50, p95, p99, max


@dataclass(frozen=True)
class Headline:
    """Request latency without cold starts: overall and per root operation."""

    latency_ms: dict[str, float]
    by_operation: list[OperationLatency] = field(default_factory=list)
    cold_starts: list[ColdStart] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The ``summary`` fields of docs/analysis-json.md ("The latency model")."""
        return {
            "request_latency_ms": self.latency_ms,
            "latency_by_operation": [o.to_dict() for o in self.by_operation],
            "cold_starts": [c.to_dict() for c in self.cold_starts],
        }


def _latency(ms: np.ndarray) -> dict[str, float]:
    if len(ms) == 0:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    p = np.percentile(ms, (50, 95, 99))
    return {
        "p50": round(float(p[0]), 3),
        "p95": round(float(p[1]), 3),
        "p99": round(float(p[2]), 3),
        "max": round(float(ms.max()), 3),
    }


def headline(trace_analysis: TraceAnalysis) -> Headline:
    cold = cold_start_mask(trace_analysis)
    tr = trace_analysis.traces.with_columns(pl.Series("_cold", cold))
    warm = tr.filter(~pl.col("_cold"))
    by_op = [
        OperationLatency(
            str(service), str(name), part.height, _latency(part["duration_ns"].to_numpy() / 1e6)
        )
        for (service, name), part in warm.group_by("root_service", "root_name", maintain_order=True)
    ]
    by_op.sort(key=lambda o: (-o.traces, o.service, o.name))
    starts = [
        ColdStart(
            r["trace_id"], r["root_service"], r["root_name"], round(r["duration_ns"] / 1e6, 3)
        )
        for r in tr.filter(pl.col("_cold")).iter_rows(named=True)
    ]
    return Headline(_latency(warm["duration_ns"].to_numpy() / 1e6), by_op, starts)


__all__ = [
    "STARTUP_NAME",
    "ColdStart",
    "Headline",
    "OperationLatency",
    "cold_start_mask",
    "headline",
]
