"""Where each request's critical-path time went, by stage: transfer, schedule, tool, llm, other.

Agent latency is end to end: T_e2e = T_transfer + T_schedule + T_tool + T_llm (+ the rest).
Every critical-path section of a trace's main root (``TraceAnalysis.sections``) goes to one
stage by the rules below (docs/analysis-json.md, "Stages"), first match wins:

1. **transfer**: the section is a CLIENT span's own time and one of its children is a SERVER
   span (both sides traced): the client's time outside the server's work is the network and
   the (de)serialisation between them.
2. **llm**: the span, or its nearest classified ancestor, is a model call
   (``kinds.model_call``, the one rule).  Queueing for the model and the HTTP hop of a model
   call are part of the call.
3. **tool**: the span, or its nearest classified ancestor, is a tool, retrieval, DB or other
   I/O hop: ``gen_ai.operation.name`` = ``execute_tool``, OpenInference ``TOOL`` /
   ``RETRIEVER``, or a span whose kind resolves to ``io`` (DB, RPC/HTTP client, messaging).
4. **schedule**: the agent's own CPU: the ``cpu`` share of the section (``tracelens.cpu_ns``
   measured, or a span declared ``cpu``).
5. **other**: the rest (off-CPU time nothing explains, waits outside a model call): never
   silently schedule.

"Nearest classified ancestor" means the closest span at or above the section's span that is a
model call or a tool (a model called inside a tool counts as llm; the HTTP hop of a tool as
tool).  It is resolved for all spans at once by pointer jumping (no recursion).

Per root operation (service, name of the main root), each stage gets p50/p95/p99 over traces
and its share of the p99 traces (those at or above the operation's 99th latency percentile);
stages are listed by that share, largest first.  Cold-start traces (``coldstart``) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import polars as pl
from tracelens_instrumentation import attributes as A

from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.fields import Record


class Stage(str, Enum):
    TRANSFER = "transfer"
    SCHEDULE = "schedule"
    TOOL = "tool"
    LLM = "llm"
    OTHER = "other"


STAGES: tuple[Stage, ...] = tuple(Stage)
STAGE_NS: tuple[str, ...] = tuple(f"{s.value}_ns" for s in STAGES)
_OI_TOOL_KINDS = ("TOOL", "RETRIEVER")
_EXECUTE_TOOL = "execute_tool"
_NONE, _LLM, _TOOL = 0, 1, 2
RULES = (
    "transfer: a CLIENT span's own critical time when a child of it is a SERVER span; "
    "llm: at or under a model call (kinds.model_call); tool: at or under an execute_tool, "
    "OpenInference TOOL/RETRIEVER or io-kind span (DB, HTTP/RPC client, messaging); "
    "schedule: the cpu share of the rest; other: what remains"
)


def span_classes(spans: pl.DataFrame) -> np.ndarray:
    """Per span row: 1 when it is a model call, 2 a tool hop, 0 neither (its own class)."""
    attrs = pl.col("attributes")
    op = attrs.map.get(A.GEN_AI_OPERATION_NAME)
    oi = attrs.map.get(A.OPENINFERENCE_SPAN_KIND).str.to_uppercase()
    tool = (
        (op == _EXECUTE_TOOL).fill_null(False)
        | oi.is_in(list(_OI_TOOL_KINDS)).fill_null(False)
        | (pl.col("kind_resolved") == A.IO)
    )
    got = spans.select(
        pl.when(pl.col("model_call"))
        .then(pl.lit(_LLM))
        .when(tool)
        .then(pl.lit(_TOOL))
        .otherwise(pl.lit(_NONE))
        .cast(pl.Int8)
        .alias("c")
    )
    out: np.ndarray = got["c"].to_numpy().astype(np.int8)
    return out


def inherited_classes(own: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Each span's nearest classified ancestor-or-self class, by pointer jumping (log depth
    NumPy passes; no recursion over the tree)."""
    val = own.copy()
    anc = parent.astype(np.int64).copy()
    open_ = (val == _NONE) & (anc >= 0)
    while open_.any():
        idx = np.flatnonzero(open_)
        a = anc[idx]
        va, aa = val[a], anc[a]  # read before any write: one synchronous jump
        val[idx] = va
        anc[idx] = np.where(va == _NONE, aa, -1)
        open_[idx] = (val[idx] == _NONE) & (anc[idx] >= 0)
    return val


def calls_a_server(spans: pl.DataFrame, parent: np.ndarray) -> np.ndarray:
    """Per span row: a CLIENT span with at least one SERVER child."""
    n = spans.height
    server = (spans["span_kind"] == "server").to_numpy()
    client = (spans["span_kind"] == "client").to_numpy()
    has_server_kid = np.zeros(n, dtype=bool)
    kids = np.flatnonzero(server & (parent >= 0))
    has_server_kid[parent[kids]] = True
    out: np.ndarray = client & has_server_kid
    return out


def stage_table(trace_analysis: TraceAnalysis) -> pl.DataFrame:
    """One row per trace (trace-number order): main root, latency and ns per stage.

    The stages of a trace sum to its main root's critical-path time.
    """
    sp = trace_analysis.spans
    parent = sp["_parent"].to_numpy().astype(np.int64)
    cls = inherited_classes(span_classes(sp), parent)
    transfer = calls_a_server(sp, parent)
    main = trace_analysis.sections.filter(pl.col("main"))
    rows = main["_i"].to_numpy().astype(np.int64)
    dur = (main["end_ns"] - main["start_ns"]).to_numpy().astype(np.float64)
    cpu = main["cpu_ns"].to_numpy().astype(np.float64)
    is_transfer = transfer[rows]
    c = cls[rows]
    llm = ~is_transfer & (c == _LLM)
    tool = ~is_transfer & (c == _TOOL)
    rest = ~is_transfer & (c == _NONE)
    schedule = np.where(rest, np.minimum(cpu, dur), 0.0)
    per = {
        Stage.TRANSFER: np.where(is_transfer, dur, 0.0),
        Stage.LLM: np.where(llm, dur, 0.0),
        Stage.TOOL: np.where(tool, dur, 0.0),
        Stage.SCHEDULE: schedule,
        Stage.OTHER: np.where(rest, dur - schedule, 0.0),
    }
    trace = sp["_trace"].to_numpy()[rows]
    n_traces = trace_analysis.traces.height
    cols = [
        pl.Series(f"{s.value}_ns", np.bincount(trace, weights=per[s], minlength=n_traces))
        for s in STAGES
    ]
    return trace_analysis.traces.select(
        "trace_id", "root_service", "root_name", "duration_ns", "start_ns"
    ).with_columns(cols)


@dataclass(frozen=True)
class StageStats(Record):
    stage: Stage
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    p99_share: float  # share of the p99 traces' critical time


@dataclass(frozen=True)
class OperationStages(Record):
    """The stage breakdown of one root operation."""

    service: str
    name: str
    traces: int
    p99_traces: int
    latency_ms: dict[str, float]
    stages: list[StageStats]


@dataclass(frozen=True)
class Stages:
    """``summary.stages`` of docs/analysis-json.md."""

    operations: list[OperationStages] = field(default_factory=list)
    cold_start_traces: int = 0
    rules: str = RULES

    def to_dict(self) -> dict[str, Any]:
        return {
            "rules": self.rules,
            "cold_start_traces": self.cold_start_traces,
            "operations": [o.to_dict() for o in self.operations],
        }


def _pct(v: np.ndarray, q: float) -> float:
    return round(float(np.percentile(v, q)), 3) if len(v) else 0.0


def stages(trace_analysis: TraceAnalysis, table: pl.DataFrame | None = None) -> Stages:
    """The stage breakdown per root operation, cold starts left out, busiest operation first."""
    from tracelens.analysis.coldstart import cold_start_mask

    table = stage_table(trace_analysis) if table is None else table
    cold = cold_start_mask(trace_analysis)
    warm = table.filter(pl.Series(~cold))
    ops: list[OperationStages] = []
    for (service, name), part in warm.group_by("root_service", "root_name", maintain_order=True):
        lat = part["duration_ns"].to_numpy() / 1e6
        p99 = float(np.percentile(lat, 99))
        tail = lat >= p99
        ns = {s: part[f"{s.value}_ns"].to_numpy() for s in STAGES}
        tail_total = float(sum(v[tail].sum() for v in ns.values()))
        stats = [
            StageStats(
                stage=s,
                p50_ms=_pct(v / 1e6, 50),
                p95_ms=_pct(v / 1e6, 95),
                p99_ms=_pct(v / 1e6, 99),
                mean_ms=round(float(v.mean()) / 1e6, 3),
                p99_share=round(float(v[tail].sum()) / tail_total, 4) if tail_total > 0 else 0.0,
            )
            for s, v in ns.items()
        ]
        stats.sort(key=lambda x: (-x.p99_share, -x.mean_ms, STAGES.index(x.stage)))
        ops.append(
            OperationStages(
                service=str(service),
                name=str(name),
                traces=part.height,
                p99_traces=int(tail.sum()),
                latency_ms={"p50": _pct(lat, 50), "p95": _pct(lat, 95), "p99": _pct(lat, 99)},
                stages=stats,
            )
        )
    ops.sort(key=lambda o: (-o.traces, o.service, o.name))
    return Stages(operations=ops, cold_start_traces=int(cold.sum()))


__all__ = [
    "RULES",
    "STAGES",
    "STAGE_NS",
    "OperationStages",
    "Stage",
    "StageStats",
    "Stages",
    "stage_table",
    "stages",
]
