"""Counters the stats endpoint reports.  Plain integers updated under one lock: the rates involved
(hundreds of requests a second) make contention irrelevant.  ``/metrics`` (``metrics``) reads the
same counters, and adds its latency histograms through the observer lists."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

Observer = Callable[[float], None]


class Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.time()
        self.counts: dict[str, int] = {
            "requests": 0,
            "spans_received": 0,
            "spans_acknowledged": 0,  # journaled (durable) and answered
            "spans_stored": 0,  # merged into the DuckDB store
            "spans_duplicate": 0,
            "spans_rejected": 0,
            "connections_evicted": 0,
            "requests_cut_at_shutdown": 0,  # bodies still arriving when the drain began
            "batches_committed": 0,
            "merges": 0,
            "spans_recovered": 0,
            "requests_refused_busy": 0,
            "requests_bad": 0,
            "requests_unauthorized": 0,
            "requests_too_large": 0,
            "store_errors": 0,
        }
        self._batch_ms: deque[float] = deque(maxlen=2048)
        self._merge_ms: deque[float] = deque(maxlen=2048)
        self._request_ms: deque[float] = deque(maxlen=2048)
        self.queue_depth = 0  # decoded requests waiting for the writer
        self.queue_bytes = 0
        self._degraded: dict[str, str] = {}  # component ("journal", "store") -> why
        # Called with each merge's / request's seconds (outside the lock), e.g. by histograms.
        self.merge_observers: list[Observer] = []
        self.request_observers: list[Observer] = []

    def set_degraded(self, component: str, reason: str | None) -> None:
        """Mark ``component`` as unable to write (``reason``), or as working again (None)."""
        with self._lock:
            if reason is None:
                self._degraded.pop(component, None)
            else:
                self._degraded[component] = reason

    def degraded(self) -> dict[str, str]:
        """What cannot be written now, and why; empty while everything works."""
        with self._lock:
            return dict(self._degraded)

    def add(self, **deltas: int) -> None:
        with self._lock:
            for key, value in deltas.items():
                self.counts[key] = self.counts.get(key, 0) + value

    def batch(self, seconds: float, acknowledged: int) -> None:
        with self._lock:
            self._batch_ms.append(seconds * 1000)
            self.counts["batches_committed"] += 1
            self.counts["spans_acknowledged"] += acknowledged

    def merge(self, seconds: float, stored: int, duplicate: int) -> None:
        with self._lock:
            self._merge_ms.append(seconds * 1000)
            self.counts["merges"] += 1
            self.counts["spans_stored"] += stored
            self.counts["spans_duplicate"] += duplicate
        for observe in self.merge_observers:
            observe(seconds)

    def request(self, seconds: float) -> None:
        with self._lock:
            self._request_ms.append(seconds * 1000)
        for observe in self.request_observers:
            observe(seconds)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                **self.counts,
                "queue_depth": self.queue_depth,
                "queue_bytes": self.queue_bytes,
                "degraded": dict(self._degraded),
                "batch_latency_ms": _summary(self._batch_ms),
                "merge_latency_ms": _summary(self._merge_ms),
                "request_latency_ms": _summary(self._request_ms),
                "uptime_s": round(time.time() - self.started, 3),
            }


def _summary(values: deque[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None, "count": 0}
    ordered = sorted(values)
    n = len(ordered)
    return {
        "p50": round(ordered[n // 2], 3),
        "p99": round(ordered[min(n - 1, (n * 99) // 100)], 3),
        "max": round(ordered[-1], 3),
        "count": n,
    }
