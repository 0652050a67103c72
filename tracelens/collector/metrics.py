"""``GET /metrics``: the collector in the Prometheus exposition format.

Served by the collector's own HTTP server (the OTLP/HTTP address), behind the same token rule as
every other endpoint (``auth``): with ``--token`` set, Prometheus sends it as a bearer token
(``authorization: {credentials_file: ...}`` in its scrape config).  Everything is registered in a
``CollectorRegistry`` of this collector (never the process-global one, so several collectors, or
tests, in one process do not clash) and rendered by ``prometheus_client.generate_latest``.

Three sources:

- ingest health, read from ``Stats`` at each scrape (received, stored, rejected and duplicate
  spans, refused requests, queue bytes, degraded parts) plus merge and request latency
  histograms fed through ``Stats``' observer lists;
- span metrics (``span_metrics``), on unless ``--no-span-metrics``: ``completion`` notes each
  batch of spans as it reaches the store (the merger's listener; no read of the store) and
  declares a trace complete once its root came and no span came for ``--metrics-quiet-s``, or
  at once when more than ``--metrics-max-open-traces`` are open (the cap that bounds its
  memory).  Every ``interval`` seconds this loop takes the complete traces, reads just their
  spans back (``DuckDBStore.read(trace_ids=...)``, ``BATCH_SPANS`` at a time), runs
  the embedded engine's per-trace part on them (``engines``: the one interface every analysis
  goes through) and adds the result: each trace is counted once;
- the loop's own health (pending traces, late spans, folded spans, failures, its duration).

A read by trace ids passes once over the stored ids, so its cost still grows with the store
(about 25 ns a stored span); the loop waits at least ``READ_LOAD`` times as long as its reads
took before its next round, so on a very large store the counts lag rather than take a core.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Final

import pyarrow as pa
from prometheus_client import CollectorRegistry, Histogram, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from tracelens.analysis.core import ANALYSIS_COLUMNS
from tracelens.analysis.kinds import ANALYSIS_ATTRIBUTES
from tracelens.collector.completion import Completed, CompletionTracker
from tracelens.collector.config import CollectorConfig
from tracelens.collector.span_metrics import SpanMetrics, StageTimes
from tracelens.collector.stats import Stats
from tracelens.engines import SpanTable, get_engine
from tracelens.errors import StoreError
from tracelens.store import DuckDBStore

log = logging.getLogger("tracelens.collector")

CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4
MAX_INTERVAL_S: Final = 5.0  # the loop looks for complete traces at least this often ...
READ_LOAD: Final = 10  # ... unless its last read took over a tenth of that
RETRIES: Final = 3  # reads of a batch the store refused, before its traces are dropped
BATCH_SPANS: Final = 100_000  # spans read back and analysed at once (bounds the analysis' memory)
MAX_QUEUE: Final = 100_000  # complete traces waiting to be read (about 150 bytes each), at least
MERGE_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
REQUEST_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
ANALYSIS_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_COUNTS: Final = {  # Stats counter -> (metric, help)
    "requests": ("tracelens_collector_requests", "OTLP export requests received."),
    "spans_received": ("tracelens_collector_spans_received", "Spans received (valid or not)."),
    "spans_acknowledged": (
        "tracelens_collector_spans_acknowledged",
        "Spans journaled (durable) and acknowledged to the exporter.",
    ),
    "spans_stored": ("tracelens_collector_spans_stored", "Spans merged into the store."),
    "spans_rejected": (
        "tracelens_collector_spans_rejected",
        "Spans refused as invalid (partial success answers).",
    ),
    "spans_duplicate": (
        "tracelens_collector_spans_duplicate",
        "Spans not stored because the store already held them (retried exports).",
    ),
    "spans_recovered": (
        "tracelens_collector_spans_recovered",
        "Spans merged from the journal of a previous run.",
    ),
    "batches_committed": ("tracelens_collector_batches", "Journal commits (fsyncs)."),
    "merges": ("tracelens_collector_merges", "Merges of journaled spans into the store."),
    "store_errors": ("tracelens_collector_store_errors", "Failed merges into the store."),
    "connections_evicted": (
        "tracelens_collector_connections_evicted",
        "Idle HTTP connections closed to admit new ones.",
    ),
}
_REFUSED: Final = {
    "busy": "requests_refused_busy",
    "bad": "requests_bad",
    "unauthorized": "requests_unauthorized",
    "too_large": "requests_too_large",
}
_COMPONENTS: Final = ("journal", "store")


class _IngestCollector:
    """Ingest counters and gauges, read from ``Stats`` at each scrape."""

    def __init__(self, stats: Stats, config: CollectorConfig) -> None:
        self._stats = stats
        self._config = config

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        snap = self._stats.snapshot()
        for key, (name, doc) in _COUNTS.items():
            yield CounterMetricFamily(name, doc, value=snap.get(key, 0))
        refused = CounterMetricFamily(
            "tracelens_collector_requests_refused",
            "Requests answered with an error, by reason (busy: 503 retry later; bad: "
            "malformed; unauthorized: missing or wrong token; too_large: over a size limit).",
            labels=["reason"],
        )
        for reason, key in _REFUSED.items():
            refused.add_metric([reason], snap.get(key, 0))
        yield refused
        yield GaugeMetricFamily(
            "tracelens_collector_queue_bytes",
            "Decoded spans waiting for the journal or the store, in bytes.",
            value=snap["queue_bytes"],
        )
        yield GaugeMetricFamily(
            "tracelens_collector_queue_limit_bytes",
            "The queue's limit (--queue-mb); beyond it exports are told to retry.",
            value=self._config.max_queue_bytes,
        )
        yield GaugeMetricFamily(
            "tracelens_collector_queue_requests",
            "Decoded requests waiting for the journal.",
            value=snap["queue_depth"],
        )
        degraded = GaugeMetricFamily(
            "tracelens_collector_degraded",
            "1 while this part cannot be written (see /health for why), else 0.",
            labels=["component"],
        )
        for component in _COMPONENTS:
            degraded.add_metric([component], 1.0 if component in snap["degraded"] else 0.0)
        yield degraded


class AnalysisLoop:
    """Takes complete traces, reads them back, analyses them, adds them to ``SpanMetrics``."""

    def __init__(
        self,
        store: DuckDBStore,
        tracker: CompletionTracker,
        spans: SpanMetrics,
        duration: Histogram | None = None,
        *,
        batch_spans: int = BATCH_SPANS,
    ) -> None:
        self.tracker = tracker
        self.spans = spans
        self._store = store
        self._engine = get_engine("embedded")  # the counts need only the per-trace part
        self._duration = duration
        self._batch_spans = max(1, batch_spans)
        self.interval_s = min(MAX_INTERVAL_S, max(0.25, tracker.quiet_s / 2))
        self._wait_s = self.interval_s
        # Complete traces not read yet, oldest first (at most the larger of the tracker's cap
        # and MAX_QUEUE: see run_once).
        self._queue: deque[Completed] = deque()
        self._attempts = 0  # failed reads of the batch at the head of the queue
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.traces_counted = 0
        self.traces_dropped = 0  # not found in the store, given up after RETRIES, or overflow
        self.failures = {"read": 0, "analysis": 0}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tracelens-metrics", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self._wait_s):
            try:
                self.run_once(time.monotonic())
            except Exception:  # never let the metrics take the collector down
                log.exception("the metrics analysis failed")
                self.failures["analysis"] += 1

    def run_once(self, now: float) -> int:
        """One round: analyse what is complete at ``now``, ``batch_spans`` spans at a time (the
        analysis' memory is one batch's); returns the traces counted."""
        self._queue.extend(self.tracker.complete(now))
        overflow = len(self._queue) - max(self.tracker.max_pending, MAX_QUEUE)
        if overflow > 0:  # the loop fell far behind (a failing store): the oldest go uncounted
            log.error("metrics: %d complete traces not counted (the loop fell behind)", overflow)
            for _ in range(overflow):
                self._queue.popleft()
            self.traces_dropped += overflow
        counted = 0
        read_s = 0.0
        while self._queue:
            batch = self._head()
            started = time.perf_counter()
            try:
                table = self._store.read(
                    ANALYSIS_COLUMNS,
                    trace_ids=pa.array([c.trace_id for c in batch], pa.string()),
                    attribute_keys=ANALYSIS_ATTRIBUTES,  # what the analysis reads of the map
                )
            except StoreError as exc:
                read_s += time.perf_counter() - started
                self.failures["read"] += 1
                self._attempts += 1
                if self._attempts < RETRIES:
                    break  # the next round tries again
                log.error("metrics: %d complete traces not counted: %s", len(batch), exc)
                self._drop(len(batch))
                self.traces_dropped += len(batch)
                continue
            read_s += time.perf_counter() - started
            self._drop(len(batch))
            counted += self._count(table, len(batch), started)
        self._wait_s = max(self.interval_s, READ_LOAD * read_s)
        return counted

    def _head(self) -> list[Completed]:
        """The oldest complete traces, up to ``batch_spans`` spans (one trace at least)."""
        batch: list[Completed] = []
        spans = 0
        for c in self._queue:
            if batch and spans + c.spans > self._batch_spans:
                break
            batch.append(c)
            spans += c.spans
        return batch

    def _drop(self, n: int) -> None:
        for _ in range(n):
            self._queue.popleft()
        self._attempts = 0

    def _count(self, table: pa.Table, wanted: int, started: float) -> int:
        if table.num_rows == 0:
            self.traces_dropped += wanted
            return 0
        try:
            analysis = self._engine.traces(SpanTable(table))
        except Exception:
            log.exception("metrics: analysing %d spans failed", table.num_rows)
            self.failures["analysis"] += 1
            self.traces_dropped += wanted
            return 0
        self.spans.record(analysis)
        counted = analysis.traces.height
        self.traces_counted += counted
        self.traces_dropped += max(0, wanted - counted)  # not in the store
        if self._duration is not None:
            self._duration.observe(time.perf_counter() - started)
        return counted


class _LoopCollector:
    """The analysis loop's own health."""

    def __init__(self, loop: AnalysisLoop) -> None:
        self._loop = loop

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        loop, tracker = self._loop, self._loop.tracker
        yield GaugeMetricFamily(
            "tracelens_metrics_quiet_seconds",
            "A trace is complete (and counted) once no span arrived for it for this long "
            "(--metrics-quiet-s) after its root.",
            value=tracker.quiet_s,
        )
        yield GaugeMetricFamily(
            "tracelens_metrics_pending_traces",
            "Traces with spans received, not complete yet.",
            value=tracker.pending(),
        )
        yield GaugeMetricFamily(
            "tracelens_metrics_pending_traces_limit",
            "The cap on open traces (--metrics-max-open-traces); past it the one quiet the "
            "longest is counted at once (tracelens_metrics_traces_forced_total).",
            value=tracker.max_pending,
        )
        yield CounterMetricFamily(
            "tracelens_metrics_traces_counted",
            "Complete traces analysed and counted in the span metrics.",
            value=loop.traces_counted,
        )
        yield CounterMetricFamily(
            "tracelens_metrics_traces_dropped",
            "Complete traces not counted (not found in the store, the store kept failing, or "
            "the analysis fell far behind).",
            value=loop.traces_dropped,
        )
        yield CounterMetricFamily(
            "tracelens_metrics_traces_forced",
            "Open traces counted early, with the spans they had, because more than "
            "--metrics-max-open-traces were open.",
            value=tracker.forced,
        )
        yield CounterMetricFamily(
            "tracelens_metrics_late_spans",
            "Spans that arrived after their trace was counted (not in the span metrics).",
            value=tracker.late_spans,
        )
        yield CounterMetricFamily(
            "tracelens_metrics_folded_spans",
            "Spans counted as operation 'other' because of the operation cap.",
            value=loop.spans.folded_spans,
        )
        yield GaugeMetricFamily(
            "tracelens_metrics_operations",
            "Distinct (service, operation) label pairs in use.",
            value=len(loop.spans.cap),
        )
        yield GaugeMetricFamily(
            "tracelens_metrics_operations_limit",
            "The cap on distinct (service, operation) pairs (--metrics-max-operations).",
            value=loop.spans.cap.limit,
        )
        failures = CounterMetricFamily(
            "tracelens_metrics_failures",
            "Failed rounds of the metrics analysis, by step.",
            labels=["step"],
        )
        for step, count in sorted(loop.failures.items()):
            failures.add_metric([step], count)
        yield failures


class CollectorMetrics:
    """The registry behind ``GET /metrics`` and, unless disabled, the analysis loop."""

    def __init__(
        self,
        config: CollectorConfig,
        stats: Stats,
        store: DuckDBStore,
        stages: StageTimes | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_IngestCollector(stats, config))
        merge = Histogram(
            "tracelens_collector_merge_duration_seconds",
            "Time to merge a batch of journaled spans into the store.",
            buckets=MERGE_BUCKETS,
            registry=self.registry,
        )
        request = Histogram(
            "tracelens_collector_request_duration_seconds",
            "Time from a decoded export request to its answer (decode, journal).",
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        stats.merge_observers.append(merge.observe)
        stats.request_observers.append(request.observe)
        ProcessCollector(registry=self.registry)
        self.loop: AnalysisLoop | None = None
        if config.span_metrics:
            duration = Histogram(
                "tracelens_metrics_analysis_duration_seconds",
                "Time of one round of the metrics analysis (read back, analyse, add).",
                buckets=ANALYSIS_BUCKETS,
                registry=self.registry,
            )
            spans = SpanMetrics(config.metrics_max_operations, stages)
            tracker = CompletionTracker(
                config.metrics_quiet_s, max_pending=config.metrics_max_open_traces
            )
            self.loop = AnalysisLoop(store, tracker, spans, duration)
            self.registry.register(spans)
            self.registry.register(_LoopCollector(self.loop))

    def merged(self, spans: pa.Table) -> None:
        """The merger's listener: these spans are in the store now."""
        if self.loop is not None:
            self.loop.tracker.seen(spans, time.monotonic())

    def start(self) -> None:
        if self.loop is not None:
            self.loop.start()

    def close(self) -> None:
        if self.loop is not None:
            self.loop.close()

    def exposition(self) -> bytes:
        """The scrape's body (``CONTENT_TYPE``)."""
        return generate_latest(self.registry)
