"""Moves journaled spans into the DuckDB store in large transactions (see ``journal``).

A merge runs when a row group's worth of spans is waiting, when the oldest has waited a second and
no request came for a quarter of one (a lull), when the oldest has waited three seconds, when a
reader asks for everything acknowledged so far (``flush``), and at shutdown.  Under steady load a
plain one-second clock would merge ~70k spans at a time, under a row group, and DuckDB then writes
them through its WAL at twice the CPU per span; waiting for the lull (or three seconds) lets
sustained load fill row groups while a trickle is still stored within about a second.

A failed merge keeps its spans (they are in the journal too) and is retried; meanwhile the backlog
counts against the queue limit, so the collector pushes back instead of growing.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pyarrow as pa

from tracelens.collector import journal
from tracelens.collector.stats import Stats
from tracelens.store import DuckDBStore

log = logging.getLogger("tracelens.collector")

MERGE_ROWS = 131_072  # at least DuckDB's row group (122,880): written without its WAL
MERGE_INTERVAL_S = 1.0  # the oldest span's wait before a merge in a lull
MERGE_IDLE_S = 0.25  # no request for this long: a lull
MERGE_MAX_WAIT_S = 3.0  # the oldest span's wait before a merge in any case
RETRY_S = 1.0


class Merger:
    def __init__(
        self, store: DuckDBStore, jour: journal.Journal, stats: Stats, lock: threading.Lock
    ) -> None:
        self._store = store
        self._journal = jour
        self._stats = stats
        self._lock = lock  # held by the writer while it journals and hands tables over
        self._cond = threading.Condition()
        self._tables: list[pa.Table] = []
        self._rows = 0
        self.pending_bytes = 0
        self._oldest = 0.0
        self._newest = 0.0
        self._added = 0  # tables handed over so far
        self._merged = 0  # of which merged
        self._flush_to = 0
        self._closing = False
        self._segments: list[Path] = []
        self._thread = threading.Thread(target=self._run, name="tracelens-merger", daemon=True)
        self._thread.start()

    def add(self, tables: list[pa.Table]) -> None:
        """Hand over journaled tables (the caller holds the journal lock)."""
        with self._cond:
            first = not self._tables
            self._newest = time.monotonic()
            if first:
                self._oldest = self._newest
            self._tables.extend(tables)
            self._rows += sum(t.num_rows for t in tables)
            self.pending_bytes += sum(t.nbytes for t in tables)
            self._added += len(tables)
            if first or self._rows >= MERGE_ROWS:
                self._cond.notify()  # start the interval clock, or merge now

    def flush(self, timeout: float = 300.0) -> bool:
        """Wait until everything handed over before this call is in the store."""
        with self._cond:
            target = self._added
            self._flush_to = max(self._flush_to, target)
            self._cond.notify_all()
            return self._cond.wait_for(lambda: self._merged >= target, timeout)

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()

    def _due(self) -> bool:
        if not self._tables:
            return False
        return (
            self._closing
            or self._rows >= MERGE_ROWS
            or self._flush_to > self._merged
            or time.monotonic() >= self._deadline()
        )

    def _deadline(self) -> float:
        lull = max(self._oldest + MERGE_INTERVAL_S, self._newest + MERGE_IDLE_S)
        return min(lull, self._oldest + MERGE_MAX_WAIT_S)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due():
                    if self._closing:
                        return
                    wait = self._deadline() - time.monotonic() if self._tables else None
                    self._cond.wait(wait if wait is None else max(wait, 0.01))
            self._merge_once()

    def _merge_once(self) -> None:
        with self._lock:  # the writer is not mid-append: the segment holds exactly these tables
            segment = self._journal.rotate()
            with self._cond:
                tables, count = self._tables, len(self._tables)
                nbytes = self.pending_bytes
                self._tables, self._rows = [], 0
        if segment is not None:
            self._segments.append(segment)
        table = pa.concat_tables(tables)
        started = time.perf_counter()
        try:
            stored = self._store.append_new(table)
        except Exception as exc:
            log.error(
                "merging %d journaled spans into the store failed (will retry): %s",
                table.num_rows,
                exc,
            )
            self._stats.add(store_errors=1)
            with self._cond:
                self._tables[:0] = tables
                self._rows += table.num_rows
                self._cond.wait(RETRY_S)
            return
        journal.remove(self._segments)
        self._segments = []
        self._stats.merge(time.perf_counter() - started, stored, table.num_rows - stored)
        with self._cond:
            self.pending_bytes -= nbytes
            self._merged += count
            self._cond.notify_all()


def recover(store: DuckDBStore, db: str, chunk_rows: int = MERGE_ROWS) -> int:
    """Merge what a stopped (or killed) collector left in the journal; returns spans replayed."""
    from tracelens.collector.otlp import decode_record

    replayed = 0
    for segment in journal.segments(db):
        tables: list[pa.Table] = []
        rows = 0
        for kind, body in journal.read_segment(segment):
            try:
                table = decode_record(kind, body)
            except Exception as exc:  # it was decoded once, so this is a damaged journal
                log.error("skipping an unreadable journal record in %s: %s", segment, exc)
                continue
            tables.append(table)
            rows += table.num_rows
            if rows >= chunk_rows:
                store.append_new(pa.concat_tables(tables))
                replayed += rows
                tables, rows = [], 0
        if tables:
            store.append_new(pa.concat_tables(tables))
            replayed += rows
        journal.remove([segment])
    return replayed
