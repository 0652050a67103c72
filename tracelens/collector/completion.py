"""Which traces are complete: no span has arrived for them for a quiet period.

``/metrics`` counts each trace once, after it is complete, so a trace must not be analysed while
spans are still on their way.  Exporters send a span when it ends, so a trace's root (a span with
no parent) usually arrives last: a trace is complete once its root has arrived and no span of it
has arrived for ``quiet_s``.  A trace whose root never comes (its caller is not instrumented, or
the root was lost) is complete after ``rootless_s`` without a span.

The tracker is fed incrementally, with each batch of spans as it reaches the store (the merger's
listener): it never reads the store.  What it keeps per open trace is a few numbers (last arrival,
earliest start, span count, whether the root came), not its spans.

Memory is bounded by a cap on open traces: at most ``max_pending`` (``--metrics-max-open-traces``,
default ``MAX_PENDING``) wait; past it, the trace quiet the longest is declared complete at once
(``forced``, exported as ``tracelens_metrics_traces_forced_total``) and counted with the spans it
has so far; a span of it arriving later is a late span.  The ids of the last ``remember``
completed traces are kept so that a span arriving after its trace was counted is recognised
(``late_spans``) instead of starting the trace again.  An open trace costs at most
``BYTES_PER_TRACE`` bytes (286 measured), a remembered id less (224), so the defaults hold at
most 80 MB (about 51 MB measured).  Times are ``time.monotonic()`` seconds, passed in by the
caller so the rules can be tested without waiting.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

MAX_PENDING: Final = 100_000  # open traces: waiting to be complete (``BYTES_PER_TRACE`` each)
REMEMBER: Final = 100_000  # ids of completed traces kept to recognise late spans
BYTES_PER_TRACE: Final = 400  # an open trace's entry, or a remembered id (measured: test_metrics)
ROOTLESS_FACTOR: Final = 10  # a trace without a root waits this many quiet periods


@dataclass(slots=True)
class _Pending:
    last_seen: float
    t0: int  # the earliest span start seen (the trace's start once every span is in)
    spans: int  # spans seen (a retried span counts again: an estimate of the trace's size)
    has_root: bool


@dataclass(frozen=True, slots=True)
class Completed:
    """A complete trace: its id, start (``start_ns`` of its earliest span) and spans seen."""

    trace_id: str
    t0: int
    spans: int = 1


class CompletionTracker:
    """Thread-safe: the merger reports spans, the metrics loop takes complete traces."""

    def __init__(
        self,
        quiet_s: float,
        rootless_s: float | None = None,
        *,
        max_pending: int = MAX_PENDING,
        remember: int = REMEMBER,
    ) -> None:
        if quiet_s <= 0:
            raise ValueError(f"the quiet period must be positive, not {quiet_s}")
        self.quiet_s = quiet_s
        self.rootless_s = max(quiet_s, rootless_s or ROOTLESS_FACTOR * quiet_s)
        self._max_pending = max(1, max_pending)
        self._remember = max(1, remember)
        self._lock = threading.Lock()
        # Ordered by last arrival, oldest first: an update moves the trace to the end.  Both are
        # queues taken from the front, so OrderedDicts: in a plain dict each ``next(iter(...))``
        # after front deletions scans the deleted slots first (quadratic: under bench/ingest.py
        # that scan was 40% of the metrics thread and 9% of the merger's).
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._done: OrderedDict[str, None] = OrderedDict()  # completed ids, oldest first
        self.late_spans = 0  # spans of traces already counted (late, or a retried export)
        self.forced = 0  # traces declared complete early because too many were waiting
        self._forced: list[Completed] = []  # those, until the next ``complete`` takes them

    @property
    def max_pending(self) -> int:
        """The cap on open traces."""
        return self._max_pending

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def seen(self, spans: pa.Table, now: float) -> None:
        """Spans that arrived at ``now`` (a table with ``trace_id``, ``parent_span_id`` and
        ``start_ns``)."""
        if spans.num_rows == 0:
            return
        grouped = (
            pa.table(
                {
                    "trace_id": spans.column("trace_id"),
                    "start_ns": spans.column("start_ns"),
                    "root": pc.is_null(spans.column("parent_span_id")),
                }
            )
            .group_by("trace_id")
            .aggregate([("start_ns", "min"), ("root", "any"), ("trace_id", "count")])
        )
        ids = grouped.column("trace_id").to_pylist()
        t0s = grouped.column("start_ns_min").to_pylist()
        roots = grouped.column("root_any").to_pylist()
        counts = grouped.column("trace_id_count").to_pylist()
        with self._lock:
            for trace_id, t0, root, count in zip(ids, t0s, roots, counts, strict=True):
                if trace_id in self._done:
                    self.late_spans += count
                    continue
                entry = self._pending.get(trace_id)
                if entry is None:
                    self._pending[trace_id] = _Pending(now, t0, count, bool(root))
                else:
                    entry.last_seen = now
                    entry.t0 = min(entry.t0, t0)
                    entry.spans += count
                    entry.has_root = entry.has_root or bool(root)
                    self._pending.move_to_end(trace_id)
            while len(self._pending) > self._max_pending:
                oldest, entry = self._pending.popitem(last=False)
                self._finish(oldest)
                self._forced.append(Completed(oldest, entry.t0, entry.spans))
                self.forced += 1

    def complete(self, now: float) -> list[Completed]:
        """Take the traces complete at ``now``; each is returned once (a trace is recognised as
        counted while it is among the last ``remember`` completed)."""
        out: list[Completed] = []
        with self._lock:
            out.extend(self._forced)
            self._forced = []
            quiet_before = now - self.quiet_s
            rootless_before = now - self.rootless_s
            ready: list[str] = []
            for trace_id, entry in self._pending.items():
                if entry.last_seen > quiet_before:
                    break  # ordered by arrival: every later one is more recent
                if entry.has_root or entry.last_seen <= rootless_before:
                    ready.append(trace_id)
            for trace_id in ready:
                entry = self._pending.pop(trace_id)
                self._finish(trace_id)
                out.append(Completed(trace_id, entry.t0, entry.spans))
        return out

    def _finish(self, trace_id: str) -> None:
        self._done[trace_id] = None
        if len(self._done) > self._remember:
            self._done.popitem(last=False)
