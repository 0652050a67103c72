"""Span RED metrics, end-to-end latency and critical-path time, from analysed complete traces.

The collector's metrics loop (``metrics``) hands each batch of complete traces, analysed by the
same pure ``analyze_traces`` as ``tracelens analyze``, to ``SpanMetrics.record``; a scrape reads
the totals through ``collect`` (the ``prometheus_client`` collector protocol), which renders them
with the library's metric families.  Aggregation is vectorised (one Polars group-by per family
and batch); the totals are plain bucket-count arrays under one lock, so a batch of 100k spans
costs one pass, not 100k ``observe`` calls.

Families (``service``, ``operation``, ``root_operation``, ``kind`` and ``stage`` labels):

- ``tracelens_span_calls_total``, ``tracelens_span_errors_total`` and the histogram
  ``tracelens_span_duration_seconds``, per service, operation and kind;
- ``tracelens_trace_duration_seconds`` (histogram) and ``tracelens_trace_errors_total``, per
  root operation: end-to-end latency, one observation per trace;
- ``tracelens_critical_path_seconds_total`` per root operation and kind: the main root's
  critical-path time, split by kind as ``tracelens analyze`` splits it (they sum to the trace's
  critical path);
- ``tracelens_critical_path_operation_seconds_total`` per operation and kind: which operations
  the critical paths ran through;
- ``tracelens_critical_path_stage_seconds_total`` per root operation and stage, only when a
  stage function is given (``StageTimes``: the hook for the stage breakdown).

Cardinality is bounded by ``OperationCap``: at most ``max_operations`` distinct (service,
operation) pairs; later ones are counted as operation ``other`` (and service ``other`` when the
service has no admitted operation either).  Kinds are the analysis' five.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from tracelens.analysis.core import KIND_NS, TraceAnalysis
from tracelens.analysis.kinds import KINDS

# Upper bounds (seconds) of the duration buckets: agent hops run from a millisecond (a cache
# hit) to minutes (a long generation, a human in the loop); denser where requests usually end.
DURATION_BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75,
    1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
DEFAULT_MAX_OPERATIONS: Final = 200
OTHER: Final = "other"

SPAN_CALLS: Final = "tracelens_span_calls"
SPAN_ERRORS: Final = "tracelens_span_errors"
SPAN_DURATION: Final = "tracelens_span_duration_seconds"
TRACE_DURATION: Final = "tracelens_trace_duration_seconds"
TRACE_ERRORS: Final = "tracelens_trace_errors"
CRITICAL: Final = "tracelens_critical_path_seconds"
CRITICAL_OPERATION: Final = "tracelens_critical_path_operation_seconds"
CRITICAL_STAGE: Final = "tracelens_critical_path_stage_seconds"

_SPAN_LABELS: Final = ("service", "operation", "kind")
_ROOT_LABELS: Final = ("service", "root_operation")
_COUNTERS: Final = {
    SPAN_CALLS: ("Spans of complete traces, per service, operation and kind.", _SPAN_LABELS),
    SPAN_ERRORS: ("Spans with status error, per service, operation and kind.", _SPAN_LABELS),
    TRACE_ERRORS: ("Complete traces whose root has status error.", _ROOT_LABELS),
    CRITICAL: (
        "Critical-path time of complete traces by kind (cpu/gpu/io/wait/unknown), per root "
        "operation; summed over kinds, the traces' critical-path time.",
        (*_ROOT_LABELS, "kind"),
    ),
    CRITICAL_OPERATION: (
        "Critical-path time spent in each operation, by kind.",
        _SPAN_LABELS,
    ),
}
_HISTOGRAMS: Final = {
    SPAN_DURATION: ("Span durations, per service, operation and kind.", _SPAN_LABELS),
    TRACE_DURATION: (
        "End-to-end latency of complete traces (their main root's duration), per root operation.",
        _ROOT_LABELS,
    ),
}
_STAGE: Final = (
    "Critical-path time per stage (from the stage function), per root operation.",
    (*_ROOT_LABELS, "stage"),
)


@dataclass(frozen=True)
class TraceResult:
    """One analysed trace, as a stage function sees it."""

    trace_id: str
    service: str
    root_operation: str
    duration_s: float
    critical_s: dict[str, float]  # the main root's critical-path time by kind
    # The main root's critical-path sections in time order: span_id, name, service, kind,
    # start_ns, end_ns and the section's time split by kind (``cpu_ns`` ... ``unknown_ns``).
    path: pl.DataFrame


# The hook for "critical-path time per stage": from one trace, seconds per stage label.
StageTimes = Callable[[TraceResult], Mapping[str, float]]


class OperationCap:
    """Admits the first ``limit`` (service, operation) pairs; folds the rest into ``other``."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._pairs: set[tuple[str, str]] = set()
        self._services: set[str] = set()

    def __len__(self) -> int:
        return len(self._pairs)

    def fold(self, service: str, operation: str) -> tuple[str, str]:
        pair = (service, operation)
        if pair in self._pairs:
            return pair
        if len(self._pairs) < self.limit:
            self._pairs.add(pair)
            self._services.add(service)
            return pair
        return (service if service in self._services else OTHER, OTHER)


@dataclass
class _Histogram:
    counts: np.ndarray  # per bucket, not cumulative; the last is above the last bound
    total: float = 0.0


class SpanMetrics:
    """The totals; thread-safe (the metrics loop records, scrapes collect)."""

    def __init__(
        self,
        max_operations: int = DEFAULT_MAX_OPERATIONS,
        stages: StageTimes | None = None,
        buckets: tuple[float, ...] = DURATION_BUCKETS,
    ) -> None:
        self.cap = OperationCap(max_operations)
        self._stages = stages
        self._stage_cap = OperationCap(max_operations)  # (root operation, stage) pairs
        self._bounds = np.asarray(buckets, dtype=np.float64)
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[str, ...], float]] = {n: {} for n in _COUNTERS}
        self._counters[CRITICAL_STAGE] = {}
        self._histograms: dict[str, dict[tuple[str, ...], _Histogram]] = {
            n: {} for n in _HISTOGRAMS
        }
        self.folded_spans = 0  # spans counted under ``other`` by the cap

    def record(self, trace_analysis: TraceAnalysis) -> None:
        """Add a batch of analysed complete traces."""
        if trace_analysis.traces.height == 0:
            return
        with self._lock:
            labels = self._fold(trace_analysis)
            self._record_spans(trace_analysis.spans, labels)
            self._record_traces(trace_analysis.traces, labels)
            self._record_critical(trace_analysis.sections.filter(pl.col("main")), labels)
            if self._stages is not None:
                self._record_stages(trace_analysis)

    def _fold(self, trace_analysis: TraceAnalysis) -> pl.DataFrame:
        """(service, name) -> (svc, op): the capped labels of every pair in the batch, admitted
        in name order so a batch folds the same way whatever order its spans came in."""
        pairs = trace_analysis.spans.select("service", "name").unique().sort("service", "name")
        folded = [self.cap.fold(s, n) for s, n in pairs.iter_rows()]
        return pairs.with_columns(
            pl.Series("svc", [f[0] for f in folded], dtype=pl.String),
            pl.Series("op", [f[1] for f in folded], dtype=pl.String),
        )

    def _bucket(self, seconds: pl.Series) -> pl.Series:
        # Prometheus' ``le``: a value equal to a bound belongs to that bound's bucket.
        index = np.searchsorted(self._bounds, seconds.to_numpy(), side="left")
        return pl.Series("_bucket", index, dtype=pl.Int32)

    def _record_spans(self, spans: pl.DataFrame, labels: pl.DataFrame) -> None:
        df = spans.select(
            "service",
            "name",
            pl.col("kind_resolved").alias("kind"),
            ((pl.col("end_ns") - pl.col("start_ns")) / 1e9).alias("_s"),
            (pl.col("status_code") == "error").alias("_error"),
        ).join(labels, on=["service", "name"], how="left")
        self.folded_spans += df.filter(
            (pl.col("op") != pl.col("name")) | (pl.col("svc") != pl.col("service"))
        ).height
        df = df.with_columns(self._bucket(df["_s"]))
        by_bucket = df.group_by("svc", "op", "kind", "_bucket").agg(
            pl.len().alias("n"), pl.col("_s").sum().alias("s"), pl.col("_error").sum().alias("e")
        )
        calls, errors = self._counters[SPAN_CALLS], self._counters[SPAN_ERRORS]
        hists = self._histograms[SPAN_DURATION]
        for svc, op, kind, bucket, n, s, e in by_bucket.iter_rows():
            key = (svc, op, kind)
            calls[key] = calls.get(key, 0.0) + n
            errors[key] = errors.get(key, 0.0) + e  # zero too: the series exists
            self._observe(hists, key, bucket, n, s)

    def _record_traces(self, traces: pl.DataFrame, labels: pl.DataFrame) -> None:
        df = traces.select(
            pl.col("root_service").alias("service"),
            pl.col("root_name").alias("name"),
            (pl.col("duration_ns") / 1e9).alias("_s"),
            (pl.col("root_status") == "error").alias("_error"),
            *KIND_NS,
        ).join(labels, on=["service", "name"], how="left")
        df = df.with_columns(self._bucket(df["_s"]))
        hists = self._histograms[TRACE_DURATION]
        errors = self._counters[TRACE_ERRORS]
        by_bucket = df.group_by("svc", "op", "_bucket").agg(
            pl.len().alias("n"), pl.col("_s").sum().alias("s"), pl.col("_error").sum().alias("e")
        )
        for svc, op, bucket, n, s, e in by_bucket.iter_rows():
            self._observe(hists, (svc, op), bucket, n, s)
            errors[(svc, op)] = errors.get((svc, op), 0.0) + e
        critical = self._counters[CRITICAL]
        sums = df.group_by("svc", "op").agg(pl.col(c).sum() for c in KIND_NS)
        for row in sums.iter_rows(named=True):
            for kind, column in zip(KINDS, KIND_NS, strict=True):
                key = (row["svc"], row["op"], kind)
                critical[key] = critical.get(key, 0.0) + row[column] / 1e9

    def _record_critical(self, main: pl.DataFrame, labels: pl.DataFrame) -> None:
        sums = (
            main.select("service", "name", *KIND_NS)
            .join(labels, on=["service", "name"], how="left")
            .group_by("svc", "op")
            .agg(pl.col(c).sum() for c in KIND_NS)
        )
        critical = self._counters[CRITICAL_OPERATION]
        for row in sums.iter_rows(named=True):
            for kind, column in zip(KINDS, KIND_NS, strict=True):
                if row[column] > 0:
                    key = (row["svc"], row["op"], kind)
                    critical[key] = critical.get(key, 0.0) + row[column] / 1e9

    def _record_stages(self, trace_analysis: TraceAnalysis) -> None:
        assert self._stages is not None
        stages = self._counters[CRITICAL_STAGE]
        for trace in trace_results(trace_analysis):
            svc, op = self.cap.fold(trace.service, trace.root_operation)
            for stage, seconds in self._stages(trace).items():
                _, label = self._stage_cap.fold(op, str(stage))
                key = (svc, op, label)
                stages[key] = stages.get(key, 0.0) + float(seconds)

    def _observe(
        self,
        hists: dict[tuple[str, ...], _Histogram],
        key: tuple[str, ...],
        bucket: int,
        n: int,
        seconds: float,
    ) -> None:
        hist = hists.get(key)
        if hist is None:
            hist = hists[key] = _Histogram(np.zeros(len(self._bounds) + 1, dtype=np.int64))
        hist.counts[bucket] += n
        hist.total += seconds

    def collect(self) -> Iterator[Metric]:
        """The ``prometheus_client`` collector protocol."""
        les = [floatToGoString(b) for b in self._bounds] + ["+Inf"]
        with self._lock:
            for name, (doc, label_names) in _COUNTERS.items():
                counter = CounterMetricFamily(name, doc, labels=label_names)
                for key, value in sorted(self._counters[name].items()):
                    counter.add_metric(key, value)
                yield counter
            if self._stages is not None:
                doc, label_names = _STAGE
                counter = CounterMetricFamily(CRITICAL_STAGE, doc, labels=label_names)
                for key, value in sorted(self._counters[CRITICAL_STAGE].items()):
                    counter.add_metric(key, value)
                yield counter
            for name, (doc, label_names) in _HISTOGRAMS.items():
                family = HistogramMetricFamily(name, doc, labels=label_names)
                for key, hist in sorted(self._histograms[name].items()):
                    cumulative = np.cumsum(hist.counts).tolist()
                    family.add_metric(key, list(zip(les, cumulative, strict=True)), hist.total)
                yield family

    def describe(self) -> list[Metric]:
        return []  # no name checks at registration: the names are fixed above


def trace_results(trace_analysis: TraceAnalysis) -> Iterator[TraceResult]:
    """Each trace of an analysis as a ``TraceResult`` (for stage functions)."""
    main = trace_analysis.sections.filter(pl.col("main")).sort("trace_id", "start_ns")
    paths = main.select(
        "trace_id", "span_id", "name", "service", "kind", "start_ns", "end_ns", *KIND_NS
    ).partition_by("trace_id", as_dict=True, maintain_order=True)
    empty = main.select(
        "span_id", "name", "service", "kind", "start_ns", "end_ns", *KIND_NS
    ).clear()
    for row in trace_analysis.traces.iter_rows(named=True):
        path = paths.get((row["trace_id"],))
        yield TraceResult(
            trace_id=row["trace_id"],
            service=row["root_service"],
            root_operation=row["root_name"],
            duration_s=row["duration_ns"] / 1e9,
            critical_s={k: row[c] / 1e9 for k, c in zip(KINDS, KIND_NS, strict=True)},
            path=path.drop("trace_id") if path is not None else empty,
        )
