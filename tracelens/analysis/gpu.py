"""What the GPU did for each span, operation and request, where it was measured.

The decorator writes ``tracelens.gpu_*`` per span (docs/attributes.md); this module turns them
into the figures the outputs state beside the CPU ones:

* per span: whether it was *measured* (its trace was chosen for GPU measurement, or it carries
  device figures), its device-busy time (``gpu_ns``) and its device side (``kinds.gpu_fraction``:
  device busy or host waiting for the device, the ``gpu`` share of its split);
* per operation: the GPU busy share of its self time beside its on-CPU share;
* per request: ``gpu_idle_share``, the share of the main critical path during which no GPU
  worked for the request (1 minus the device side of the path's sections).

Absent GPU data is *not measured* (``None``), never 0 %: a trace nobody measured says nothing
about its GPU.  GPU time of other processes, or of a remote model's GPUs, is not seen here.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import polars as pl
from tracelens_instrumentation import attributes as A

from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.kinds import attribute_columns, gpu_fraction

_KEYS = (A.GPU_NS, A.GPU_WAIT_NS, A.GPU_AFTER_NS, A.GPU_LAUNCHES, A.GPU_MEASURED)
_TRUE = ("true", "1", "True")
_FALSE = ("false", "0", "False")


@dataclass(frozen=True)
class SpanGpu:
    """Per row of ``TraceAnalysis.spans`` (NumPy arrays, ns as float)."""

    measured: np.ndarray  # bool: GPU figures mean something for this span
    busy_ns: np.ndarray  # tracelens.gpu_ns (0 where measured and absent)
    wait_ns: np.ndarray  # tracelens.gpu_wait_ns
    after_ns: np.ndarray  # tracelens.gpu_after_ns
    launches: np.ndarray  # tracelens.gpu_launches
    device: np.ndarray  # the device side of the self time, a fraction (kinds.gpu_fraction)
    trace_measured: np.ndarray  # per trace number: any span of it measured


# The last ``span_gpu`` answer and the tables it was computed from (weakly held): the summary,
# the operations, the model calls and a finder each ask for the same analysis's figures, and
# each computation reads every span's attribute map (0.1 s a time on 250k spans).
_LAST: list[tuple[weakref.ref[pl.DataFrame], weakref.ref[pl.DataFrame], SpanGpu]] = []


def span_gpu(trace_analysis: TraceAnalysis) -> SpanGpu:
    """The GPU figures of every span.  A span is measured when its trace was chosen for GPU
    measurement (``tracelens.gpu_measured`` true on any of its spans: the choice is made at
    the root) or it carries ``gpu_ns`` / ``gpu_wait_ns`` itself, unless it says
    ``gpu_measured`` false.  Computed once per analysis (the tables are only read once made)."""
    for spans, traces, got in _LAST:
        if spans() is trace_analysis.spans and traces() is trace_analysis.traces:
            return got
    got = _span_gpu(trace_analysis)
    # Dropped with its tables (the callback may drop a newer answer: a recomputation, no harm).
    _LAST[:] = [
        (
            weakref.ref(trace_analysis.spans, _forget),
            weakref.ref(trace_analysis.traces, _forget),
            got,
        )
    ]
    return got


def _forget(_: object) -> None:
    _LAST.clear()


def _span_gpu(trace_analysis: TraceAnalysis) -> SpanGpu:
    sp = trace_analysis.spans
    cols = {c.name: c for c in attribute_columns(sp, _KEYS)}

    def num(key: str) -> np.ndarray:
        """The attribute as ns; a value that is no number, or negative, counts as absent (0)."""
        got = cols[key].cast(pl.Float64, strict=False).fill_null(0.0).to_numpy()
        out: np.ndarray = np.nan_to_num(np.maximum(got.astype(np.float64), 0.0))
        return out

    flag = cols[A.GPU_MEASURED]
    said_yes = flag.is_in(_TRUE).fill_null(False).to_numpy()
    said_no = flag.is_in(_FALSE).fill_null(False).to_numpy()
    has_figures = (cols[A.GPU_NS].is_not_null() | cols[A.GPU_WAIT_NS].is_not_null()).to_numpy()
    trace = sp["_trace"].to_numpy()
    n_traces = trace_analysis.traces.height
    chosen = np.bincount(trace, weights=said_yes, minlength=n_traces) > 0
    own = (said_yes | has_figures) & ~said_no
    measured = (own | chosen[trace]) & ~said_no
    device = (
        pl.DataFrame(
            {
                "b": pl.Series(num(A.GPU_NS)),
                "w": pl.Series(num(A.GPU_WAIT_NS)),
                "s": sp["self_ns"],
            }
        )
        .select(gpu_fraction(pl.col("b"), pl.col("w"), pl.col("s")))
        .to_series()
        .to_numpy()
        .astype(np.float64)
    )
    trace_measured = np.bincount(trace, weights=measured, minlength=n_traces) > 0
    return SpanGpu(
        measured=measured,
        busy_ns=num(A.GPU_NS),
        wait_ns=num(A.GPU_WAIT_NS),
        after_ns=num(A.GPU_AFTER_NS),
        launches=num(A.GPU_LAUNCHES),
        device=np.where(measured, device, 0.0),
        trace_measured=trace_measured,
    )


def busy_share(busy_ns: float, window_ns: float) -> float:
    """Device-busy time over the time it is measured against, capped at 1 (a span's own
    launches may run while its children do)."""
    return min(1.0, busy_ns / window_ns) if window_ns > 0 else 0.0


def operation_gpu(trace_analysis: TraceAnalysis, g: SpanGpu | None = None) -> pl.DataFrame:
    """Per (service, name): ``cpu_share`` (on-CPU share of the self time of its spans with
    ``cpu_ns``), ``gpu_ms`` and ``gpu_busy_share`` (over its GPU-measured spans' self time;
    null when none was measured)."""
    g = span_gpu(trace_analysis) if g is None else g
    sp = trace_analysis.spans
    has_cpu = sp["self_cpu_ns"].is_not_null()
    df = pl.DataFrame(
        {
            "service": sp["service"],
            "name": sp["name"],
            "_self": sp["self_ns"].cast(pl.Float64),
            "_cpu": sp["self_cpu_ns"].cast(pl.Float64),
            "_has_cpu": has_cpu,
            "_m": pl.Series(g.measured),
            "_busy": pl.Series(g.busy_ns),
        }
    )
    agg = df.group_by("service", "name").agg(
        pl.col("_cpu").filter(pl.col("_has_cpu")).sum().alias("_cpu_ns"),
        pl.col("_self").filter(pl.col("_has_cpu")).sum().alias("_cpu_self"),
        pl.col("_has_cpu").any().alias("_any_cpu"),
        pl.col("_busy").filter(pl.col("_m")).sum().alias("_gpu_ns"),
        pl.col("_self").filter(pl.col("_m")).sum().alias("_gpu_self"),
        pl.col("_m").any().alias("_any_gpu"),
    )
    share = pl.when(pl.col("_cpu_self") > 0).then(
        (pl.col("_cpu_ns") / pl.col("_cpu_self")).clip(0.0, 1.0)
    )
    gshare = pl.when(pl.col("_gpu_self") > 0).then(
        (pl.col("_gpu_ns") / pl.col("_gpu_self")).clip(0.0, 1.0)
    )
    return agg.select(
        "service",
        "name",
        pl.when(pl.col("_any_cpu")).then(share.fill_null(0.0)).alias("cpu_share"),
        pl.when(pl.col("_any_gpu")).then(pl.col("_gpu_ns") / 1e6).alias("gpu_ms"),
        pl.when(pl.col("_any_gpu")).then(gshare.fill_null(0.0)).alias("gpu_busy_share"),
    )


def trace_gpu_idle(
    trace_analysis: TraceAnalysis, g: SpanGpu | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per trace number: (critical-path ns with a GPU working for the request, path ns), NaN
    busy where the trace was not GPU-measured.  A section's GPU-working time is its length
    times its span's device side (``kinds.gpu_fraction``)."""
    g = span_gpu(trace_analysis) if g is None else g
    n = trace_analysis.traces.height
    main = trace_analysis.sections.filter(pl.col("main"))
    rows = main["_i"].to_numpy().astype(np.int64)
    dur = (main["end_ns"] - main["start_ns"]).to_numpy().astype(np.float64)
    trace = trace_analysis.spans["_trace"].to_numpy()[rows]
    busy = np.bincount(trace, weights=dur * g.device[rows], minlength=n)
    path = np.bincount(trace, weights=dur, minlength=n)
    return np.where(g.trace_measured, busy, np.nan), path


def idle_share(busy_ns: float, path_ns: float) -> float | None:
    """``gpu_idle_share`` from a trace's (or a set of traces') figures; None: not measured."""
    if np.isnan(busy_ns) or path_ns <= 0:
        return None
    return round(max(0.0, 1.0 - busy_ns / path_ns), 4)


@dataclass(frozen=True)
class ModelCallGpu:
    """One GPU-measured model call: what the host and the device did during it."""

    trace_id: str
    span_id: str
    name: str
    service: str
    duration_ms: float
    cpu_share: float | None  # on-CPU share of its self time (thread clock)
    gpu_ms: float  # device-busy time inside its window
    gpu_after_ms: float  # device time of its launches after it ended
    gpu_busy_share: float  # gpu_ms over its self time
    gpu_wait_ms: float  # the host waiting for the device
    launches: int
    on_critical_path: bool

    def to_dict(self) -> dict[str, Any]:
        """``summary.gpu_model_calls[]`` of docs/analysis-json.md: ms to 1e-3, shares 1e-4."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float):
                v = round(v, 4 if f.name.endswith("share") else 3)
            out[f.name] = v
        return out


MAX_MODEL_CALLS = 20  # GPU-measured model calls the analysis document lists


def model_calls(trace_analysis: TraceAnalysis, g: SpanGpu | None = None) -> list[ModelCallGpu]:
    """Every GPU-measured model call (``kinds.model_call``), longest first."""
    g = span_gpu(trace_analysis) if g is None else g
    sp = trace_analysis.spans
    rows = np.flatnonzero(sp["model_call"].to_numpy() & g.measured)
    on_path = np.zeros(sp.height, dtype=bool)
    on_path[trace_analysis.sections.filter(pl.col("main"))["_i"].to_numpy()] = True
    part = sp.select("trace_id", "span_id", "name", "service", "start_ns", "end_ns",
                     "self_ns", "self_cpu_ns")[rows.tolist()]  # fmt: skip
    out = []
    for k, r in enumerate(part.iter_rows(named=True)):
        row = int(rows[k])
        self_ns = float(r["self_ns"])
        cpu = r["self_cpu_ns"]
        out.append(
            ModelCallGpu(
                trace_id=r["trace_id"],
                span_id=r["span_id"],
                name=r["name"],
                service=r["service"],
                duration_ms=(r["end_ns"] - r["start_ns"]) / 1e6,
                cpu_share=None if cpu is None else busy_share(float(cpu), self_ns),
                gpu_ms=g.busy_ns[row] / 1e6,
                gpu_after_ms=g.after_ns[row] / 1e6,
                gpu_busy_share=busy_share(g.busy_ns[row], self_ns),
                gpu_wait_ms=g.wait_ns[row] / 1e6,
                launches=int(g.launches[row]),
                on_critical_path=bool(on_path[row]),
            )
        )
    out.sort(key=lambda c: (-c.duration_ms, c.trace_id, c.span_id))
    return out


__all__ = [
    "MAX_MODEL_CALLS",
    "ModelCallGpu",
    "SpanGpu",
    "busy_share",
    "idle_share",
    "model_calls",
    "operation_gpu",
    "span_gpu",
    "trace_gpu_idle",
]
