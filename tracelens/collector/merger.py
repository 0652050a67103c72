"""Moves journaled spans into the DuckDB store in large transactions (see ``journal``).

A merge runs when a row group's worth of spans is waiting, when the oldest has waited a second and
no request came for a quarter of one (a lull), when the oldest has waited three seconds, when a
reader asks for everything acknowledged so far (``flush``), and at shutdown.  Under steady load a
plain one-second clock would merge ~70k spans at a time, under a row group, and DuckDB then writes
them through its WAL at twice the CPU per span; waiting for the lull (or three seconds) lets
sustained load fill row groups while a trickle is still stored within about a second.

Under load a merge takes whole row groups only (``ROW_GROUP`` rows, or a multiple) and keeps the
rest for the next one.  A transaction of, say, 131,072 spans leaves a row group of 8,192 beside a
full one; DuckDB's checkpoint then merges such small row groups with their neighbours, reading
back and compressing again nearly everything stored (measured: 2.9 us a span on top of the 5 us
of the INSERT, against 0.05 with aligned merges).  A lull, a ``flush``, the three-second bound
when under a row group waits, and shutdown merge everything.  A journal segment is removed only
once every span it holds is in the store (``_segments`` keeps each closed segment with the count
of tables handed over when it was closed).

A failed merge (a full disk, an invalidated DuckDB) keeps its spans (they are in the journal too)
and is retried after a bounded exponential backoff (``RETRY_S`` doubling up to ``RETRY_MAX_S``):
it resumes by itself once space returns, without a restart; the store reopens an invalidated
database on the retry.  Meanwhile the backlog counts against the queue limit, so the collector
pushes back instead of growing, and ``Stats`` reports the store as degraded (``/health``).  The
same loop replays the journal a previous run left (``backlog``) when start-up could not.  At
shutdown a failing merge is retried for ``CLOSE_MERGE_S`` at most; what is still unmerged then
stays in the journal, for the next start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa

from tracelens.collector import journal
from tracelens.collector.stats import Stats
from tracelens.store import DuckDBStore

log = logging.getLogger("tracelens.collector")

ROW_GROUP = 122_880  # DuckDB's row group: a transaction of whole ones is written without its WAL
MERGE_ROWS = ROW_GROUP  # a merge is due once this many spans wait
MERGE_INTERVAL_S = 1.0  # the oldest span's wait before a merge in a lull
MERGE_IDLE_S = 0.25  # no request for this long: a lull
MERGE_MAX_WAIT_S = 3.0  # the oldest span's wait before a merge in any case
RETRY_S = 0.5  # the first retry of a failed merge; doubled per failure
RETRY_MAX_S = 30.0
CLOSE_MERGE_S = 10.0  # at shutdown, how long failing merges are retried before giving up


class Merger:
    def __init__(
        self,
        store: DuckDBStore,
        jour: journal.Journal,
        stats: Stats,
        lock: threading.Lock,
        backlog: Iterable[Path] = (),
    ) -> None:
        self._store = store
        self._journal = jour
        self._stats = stats
        self._lock = lock  # held by the writer while it journals and hands tables over
        self._cond = threading.Condition()
        self._tables: list[pa.Table] = []
        self._arrived: list[float] = []  # when each of ``_tables`` was handed over
        self._rows = 0
        self.pending_bytes = 0
        self._oldest = 0.0
        self._newest = 0.0
        self._added = 0  # tables handed over so far
        self._merged = 0  # of which merged
        self._flush_to = 0
        self._closing = False
        self._give_up_at = 0.0
        # Closed segments, each with ``_added`` when it was closed: it holds those tables only,
        # so it goes once ``_merged`` reaches that count.
        self._segments: list[tuple[int, list[Path]]] = []
        self._backlog = list(backlog)  # segments of a previous run, not replayed yet
        self._delay = 0.0  # the current backoff; 0 while merges succeed
        self._retry_at = 0.0
        self.failure: str | None = None  # the last merge's error, None once one succeeds
        self._stopped = False
        # Called (on this thread) with each merged table, once its spans are in the store: how
        # ``/metrics`` learns which traces got spans when (``completion``).  Set before the
        # first export is accepted; a failing listener is logged, never fails the merge.
        self.on_merged: Callable[[pa.Table], None] | None = None
        if self._backlog:
            self.failure = "the journal of a previous run is not merged yet"
            stats.set_degraded("store", self.failure)
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
            self._arrived.extend([self._newest] * len(tables))
            self._rows += sum(t.num_rows for t in tables)
            self.pending_bytes += sum(t.nbytes for t in tables)
            self._added += len(tables)
            if first or self._rows >= MERGE_ROWS:
                self._cond.notify()  # start the interval clock, or merge now

    def flush(self, timeout: float = 300.0) -> bool:
        """Wait until everything handed over before this call is in the store.  False at once
        while merges fail (the caller says so instead of waiting for the disk), or after
        ``timeout``."""
        with self._cond:
            target = self._added
            self._flush_to = max(self._flush_to, target)
            self._cond.notify_all()
            return self._cond.wait_for(
                lambda: self._merged >= target or self.failure is not None or self._stopped,
                timeout,
            ) and (self._merged >= target and not self._backlog)

    def close(self, timeout: float = CLOSE_MERGE_S) -> None:
        """Merge what is left; give up after ``timeout`` if merges keep failing (it stays in the
        journal for the next start)."""
        with self._cond:
            self._closing = True
            self._give_up_at = time.monotonic() + timeout
            self._cond.notify_all()
        self._thread.join()

    def _due(self, now: float) -> bool:
        if self._backlog:
            return now >= self._retry_at
        if not self._tables or now < self._retry_at:
            return False
        return (
            self._closing
            or self._rows >= MERGE_ROWS
            or self._flush_to > self._merged
            or now >= self._deadline()
        )

    def _lull(self, now: float) -> bool:
        return now >= max(self._oldest + MERGE_INTERVAL_S, self._newest + MERGE_IDLE_S)

    def _deadline(self) -> float:
        lull = max(self._oldest + MERGE_INTERVAL_S, self._newest + MERGE_IDLE_S)
        return min(lull, self._oldest + MERGE_MAX_WAIT_S)

    def _wake_at(self) -> float | None:
        times = []
        if self._tables or self._backlog:
            times.append(max(self._retry_at, self._deadline() if self._tables else 0.0))
        if self._closing:
            times.append(self._give_up_at)
        return min(times) if times else None

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due(now := time.monotonic()):
                    if self._closing and (
                        not (self._tables or self._backlog) or now >= self._give_up_at
                    ):
                        self._stopped = True
                        self._cond.notify_all()  # flush waiters: nothing more will be merged
                        return
                    wake = self._wake_at()
                    self._cond.wait(None if wake is None else max(wake - now, 0.01))
                if self._closing and now >= self._give_up_at:
                    self._stopped = True
                    self._cond.notify_all()
                    return
            if self._backlog:
                self._replay_backlog()
            else:
                self._merge_once()

    def _failed(self, what: str, exc: Exception) -> None:
        """Back off (bounded, exponential) and report the store as degraded."""
        self._delay = min(max(self._delay * 2, RETRY_S), RETRY_MAX_S)
        log.error("%s failed (retrying in %.1f s): %s", what, self._delay, exc)
        self._stats.add(store_errors=1)
        self._stats.set_degraded("store", f"{what} failed: {exc}")
        with self._cond:
            self._retry_at = time.monotonic() + self._delay
            self.failure = str(exc)
            self._cond.notify_all()

    def _succeeded(self) -> None:
        if self._delay or self.failure is not None:
            log.info("the store accepts writes again")
        self._delay = 0.0
        self._stats.set_degraded("store", None)
        with self._cond:
            self._retry_at = 0.0
            self.failure = None

    def _replay_backlog(self) -> None:
        segment = self._backlog[0]
        try:
            replayed = replay(self._store, [segment])
        except Exception as exc:
            self._failed(f"merging the journal of a previous run ({segment.name})", exc)
            return
        self._stats.add(spans_recovered=replayed)
        with self._cond:
            self._backlog.pop(0)
            if self._backlog:
                return
        log.info("the journal of a previous run is merged")
        self._succeeded()

    def _merge_once(self) -> None:
        with self._lock:  # the writer is not mid-append: the segments hold exactly these tables
            closed = self._journal.rotate()
            with self._cond:
                tables, arrived = self._tables, self._arrived
                added = self._added
                whole = (
                    self._closing or self._flush_to > self._merged or self._lull(time.monotonic())
                )
                nbytes = self.pending_bytes
                self._tables, self._arrived, self._rows = [], [], 0
        if closed:
            self._segments.append((added, closed))
        table = pa.concat_tables(tables)
        count, kept = len(tables), []  # tables merged whole; what waits for the next merge
        if not whole and table.num_rows > ROW_GROUP and table.num_rows % ROW_GROUP:
            take = table.num_rows - table.num_rows % ROW_GROUP
            table, count, rows = table.slice(0, take), 0, 0
            while rows + tables[count].num_rows <= take:
                rows += tables[count].num_rows
                count += 1
            kept = [tables[count].slice(take - rows), *tables[count + 1 :]]
        started = time.perf_counter()
        try:
            stored = self._store.append_new(table)
        except Exception as exc:
            with self._cond:
                self._tables[:0] = tables
                self._arrived[:0] = arrived
                self._rows += sum(t.num_rows for t in tables)
            self._failed(f"merging {table.num_rows} journaled spans into the store", exc)
            return
        kept_bytes = sum(t.nbytes for t in kept)
        with self._cond:
            self._merged += count
            done = [paths for upto, paths in self._segments if upto <= self._merged]
            self._segments = [(u, paths) for u, paths in self._segments if u > self._merged]
        for paths in done:
            journal.remove(paths)
        self._succeeded()
        self._stats.merge(time.perf_counter() - started, stored, table.num_rows - stored)
        with self._cond:
            if kept:  # the rest waits for the next merge, before what came since
                self._tables[:0] = kept
                self._arrived[:0] = arrived[count:]
                self._rows += sum(t.num_rows for t in kept)
                self._oldest = arrived[count]
            self.pending_bytes -= nbytes - kept_bytes
            self._cond.notify_all()
        if self.on_merged is not None:
            try:
                self.on_merged(table)
            except Exception:
                log.exception("the merge listener failed (the spans are stored)")


def recover(store: DuckDBStore, db: str, chunk_rows: int = MERGE_ROWS) -> int:
    """Merge what a stopped (or killed) collector left in the journal; returns spans replayed.
    Raises (``StoreError``) when the store cannot take them; what is left stays in the journal."""
    return replay(store, journal.segments(db), chunk_rows)


def replay(store: DuckDBStore, segments: list[Path], chunk_rows: int = MERGE_ROWS) -> int:
    """Merge ``segments`` into the store, removing each once it is stored; returns spans."""
    from tracelens.collector.otlp import decode_record

    replayed = 0
    for segment in segments:
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
