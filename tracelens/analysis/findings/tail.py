"""What sets the slowest traces apart: the operations whose critical-path time grows most.

The slowest 5% of traces (latency at or above the 95th percentile) are compared with the
median ones (between the 40th and 60th percentiles): per operation, the mean exclusive
critical-path time per trace in each band.  The operations that grow most, together covering
most of the difference, are the finding.  The replay brings their spans in the slow traces
back to the median band's typical self time (a span already faster keeps its own), which is
what "fix the tail" would buy if those operations behaved as they usually do.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.findings.candidate import Candidate, Evidence
from tracelens.analysis.findings.features import Features
from tracelens.analysis.findings.finding import FindingType, TailDetails
from tracelens.analysis.findings.replay import Change
from tracelens.analysis.findings.timeline import Timeline

MIN_TRACES = 20
TAIL_Q = 95.0
MEDIAN_BAND = (40.0, 60.0)
_MAX_OPS = 3
_EXPLAINED = 0.8  # stop adding operations once they explain this share of the gap


def tail_candidates(
    trace_analysis: TraceAnalysis, timeline: Timeline, span_features: Features
) -> list[Candidate]:
    lat = timeline.latency.astype(np.float64)
    if len(lat) < MIN_TRACES:
        return []
    p95 = float(np.percentile(lat, TAIL_Q))
    lo, hi = np.percentile(lat, MEDIAN_BAND)
    slow = np.flatnonzero(lat >= p95)
    mid = np.flatnonzero((lat >= lo) & (lat <= hi))
    if len(slow) == 0 or len(mid) == 0:
        return []
    gap_ns = float(lat[slow].mean() - lat[mid].mean())
    if gap_ns <= 0:
        return []
    per_op = _critical_by_op(trace_analysis, timeline, span_features, slow, mid)
    if per_op.height == 0:
        return []
    picked = _pick(per_op, gap_ns)
    if not picked:
        return []
    return [
        _candidate(trace_analysis, timeline, span_features, per_op, picked, slow, mid, gap_ns, p95)
    ]


def _critical_by_op(
    trace_analysis: TraceAnalysis,
    timeline: Timeline,
    span_features: Features,
    slow: np.ndarray,
    mid: np.ndarray,
) -> pl.DataFrame:
    """Per operation: mean critical-path ns per trace in the slow and in the median band."""
    main = trace_analysis.sections.filter(pl.col("main")).select("_i", "start_ns", "end_ns")
    rows = main["_i"].to_numpy()
    trace = timeline.trace[rows]
    band = np.full(timeline.n_traces, -1, dtype=np.int8)
    band[mid] = 0
    band[slow] = 1
    b = band[trace]
    keep = b >= 0
    sec = pl.DataFrame(
        {
            "op": span_features.op[rows[keep]],
            "band": b[keep],
            "ns": (main["end_ns"].to_numpy() - main["start_ns"].to_numpy())[keep],
            "row": rows[keep],
        }
    )
    sums = sec.group_by("op", "band").agg(pl.col("ns").sum(), pl.col("row").first())
    wide = (
        sums.filter(pl.col("band") == 1)
        .select("op", pl.col("ns").alias("slow_ns"), "row")
        .join(
            sums.filter(pl.col("band") == 0).select("op", pl.col("ns").alias("mid_ns")),
            on="op",
            how="full",
            coalesce=True,
        )
        .with_columns(
            (pl.col("slow_ns").fill_null(0) / len(slow)).alias("slow_mean"),
            (pl.col("mid_ns").fill_null(0) / len(mid)).alias("mid_mean"),
        )
        .with_columns((pl.col("slow_mean") - pl.col("mid_mean")).alias("growth"))
        .filter(pl.col("row").is_not_null())
        .sort("growth", descending=True)
    )
    return wide


def _pick(per_op: pl.DataFrame, gap_ns: float) -> list[int]:
    """Indices (into ``per_op``) of the operations that explain most of the gap."""
    picked: list[int] = []
    covered = 0.0
    for k, g in enumerate(per_op["growth"].to_list()):
        if g <= 0 or len(picked) >= _MAX_OPS or covered >= _EXPLAINED * gap_ns:
            break
        if g < 0.1 * gap_ns and picked:
            break
        picked.append(k)
        covered += g
    return picked


def _candidate(
    trace_analysis: TraceAnalysis,
    timeline: Timeline,
    span_features: Features,
    per_op: pl.DataFrame,
    picked: list[int],
    slow: np.ndarray,
    mid: np.ndarray,
    gap_ns: float,
    p95: float,
) -> Candidate:
    ops = per_op["op"].to_numpy()[picked]
    rows = per_op["row"].to_numpy()[picked].astype(np.int64)
    labels = trace_analysis.spans.select("name", "service")[rows.tolist()]
    names = labels["name"].to_list()
    services = labels["service"].to_list()
    growth = per_op["growth"].to_numpy()[picked]
    slow_mean = per_op["slow_mean"].to_numpy()[picked]
    mid_mean = per_op["mid_mean"].to_numpy()[picked]
    change = _change(trace_analysis, timeline, span_features, ops, slow, mid)
    parts = [
        f"{n}: {s / 1e6:,.1f} ms vs {m / 1e6:,.1f} ms (+{g / 1e6:,.1f})"
        for n, s, m, g in zip(names, slow_mean, mid_mean, growth, strict=True)
    ]
    share = float(growth.sum() / gap_ns)
    return Candidate(
        type=FindingType.TAIL,
        names=names,
        services=services,
        change=change,
        traces=np.sort(slow),
        confidence="medium" if share >= 0.5 else "low",
        evidence=[
            Evidence(
                "tail_gap",
                f"the slowest 5% of traces ({len(slow)}, at or above {p95 / 1e6:,.1f} ms) take "
                f"{gap_ns / 1e6:,.1f} ms longer on average than the median ones ({len(mid)})",
            ),
            Evidence(
                "tail_growth",
                "critical-path time per trace, slow vs median: "
                + "; ".join(parts)
                + f" ({share:.0%} of the difference)",
            ),
        ],
        occurrences=len(slow),
        example=[],
        details=TailDetails(
            growth_ms={n: round(float(g) / 1e6, 3) for n, g in zip(names, growth, strict=True)},
            tail_traces=len(slow),
        ),
    )


def _change(
    trace_analysis: TraceAnalysis,
    timeline: Timeline,
    span_features: Features,
    ops: np.ndarray,
    slow: np.ndarray,
    mid: np.ndarray,
) -> Change:
    """Scale the self time of those operations' spans in slow traces to the median band's."""
    self_ns = trace_analysis.spans["self_ns"].to_numpy().astype(np.float64)
    in_slow = np.zeros(timeline.n_traces, dtype=bool)
    in_slow[slow] = True
    in_mid = np.zeros(timeline.n_traces, dtype=bool)
    in_mid[mid] = True
    rows_out: list[np.ndarray] = []
    factors: list[np.ndarray] = []
    for op in ops.tolist():
        of_op = span_features.op == op
        typical = self_ns[of_op & in_mid[timeline.trace]]
        target = float(np.median(typical)) if len(typical) else 0.0
        r = np.flatnonzero(of_op & in_slow[timeline.trace] & (self_ns > target))
        rows_out.append(r)
        factors.append(np.where(self_ns[r] > 0, target / np.maximum(self_ns[r], 1.0), 1.0))
    rows = np.concatenate(rows_out) if rows_out else np.zeros(0, dtype=np.int64)
    fac = np.concatenate(factors) if factors else np.zeros(0)
    return Change(factor_rows=rows.astype(np.int64), factor=fac)
