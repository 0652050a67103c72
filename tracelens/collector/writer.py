"""One thread commits requests: many per group, answered after the group is durable.

Requests queue here and the thread takes everything waiting as one group: their bodies are
appended to the journal and fsynced (``journal``), then every request of the group is answered,
and their decoded spans are handed to the merger, which moves them into DuckDB in large
transactions (``merger``).  A ``kill -9`` right after an answer loses nothing: the requests are in
the journal, which the next start (or the next ``read_store``) merges.  The queue, together with
the merger's backlog, is bounded in bytes; ``try_submit`` refuses instead of growing, which the
transports turn into retry-later.

A group the journal cannot make durable (a full disk, an I/O error) is answered with the error,
which ``ingest`` turns into 503 / UNAVAILABLE with a retry delay: never 200.  ``Stats`` then
reports the journal as degraded until a group is written again; with no traffic to try, the
thread probes the disk every ``PROBE_S`` so ``/health`` returns to ok by itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from tracelens.collector.journal import Journal
from tracelens.collector.merger import CLOSE_MERGE_S, Merger
from tracelens.collector.stats import Stats
from tracelens.store import DuckDBStore

log = logging.getLogger("tracelens.collector")

PROBE_S = 1.0  # while the journal cannot be written and no request comes, test the disk this often


@dataclass(frozen=True)
class Committed:
    """A request's spans are durable (journaled); ``spans`` of them."""

    spans: int


Done = Callable[[Committed | BaseException], None]


@dataclass
class _Item:
    table: pa.Table
    record: tuple[int, bytes]  # (journal.PROTOBUF or journal.JSON, body as decoded)
    nbytes: int
    done: Done


class BatchWriter:
    def __init__(
        self,
        store: DuckDBStore,
        db: str,
        stats: Stats,
        *,
        max_queue_bytes: int,
        max_batch_rows: int,
        backlog: Iterable[Path] = (),
    ) -> None:
        self._stats = stats
        self._max_queue_bytes = max_queue_bytes
        self._max_batch_rows = max_batch_rows
        self._journal = Journal(db)
        self._journal_lock = threading.Lock()
        self.merger = Merger(store, self._journal, stats, self._journal_lock, backlog)
        self._journal_failure: str | None = None
        self._queue: deque[_Item] = deque()
        self._queued_bytes = 0
        self._cond = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="tracelens-writer", daemon=True)
        self._thread.start()

    def _held(self) -> int:
        return self._queued_bytes + self.merger.pending_bytes

    def has_room(self) -> bool:
        """Cheap check before decoding a request (the decoded size is not known yet)."""
        with self._cond:
            return not self._queue or self._held() < self._max_queue_bytes

    def try_submit(self, table: pa.Table, record: tuple[int, bytes], done: Done) -> bool:
        """Queue ``table`` (decoded from ``record``, which goes to the journal); ``done`` is called
        from the writer thread once it is durable (or with the exception that prevented it).
        False when full or closing: nothing was queued."""
        nbytes = table.nbytes + len(record[1])  # held until journaled: the spans and the body
        with self._cond:
            full = self._held() + nbytes > self._max_queue_bytes and (
                self._queue or self.merger.pending_bytes
            )
            if self._closing or full:
                return False
            self._queue.append(_Item(table, record, nbytes, done))
            self._queued_bytes += nbytes
            self._publish_depth()
            self._cond.notify()
        return True

    def close(self, merge_timeout: float = CLOSE_MERGE_S) -> None:
        """Journal and answer everything queued, merge everything (giving up after
        ``merge_timeout`` if the store keeps failing: it stays journaled), then stop both
        threads."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()
        self.merger.close(merge_timeout)
        with self._journal_lock:
            self._journal.close()

    def _publish_depth(self) -> None:
        self._stats.queue_depth = len(self._queue)
        self._stats.queue_bytes = self._held()

    def _take(self) -> list[_Item] | None:
        with self._cond:
            while not self._queue and not self._closing:
                if self._journal_failure is None:
                    self._cond.wait()
                elif not self._cond.wait(PROBE_S) and not self._queue:
                    self._cond.release()  # probing touches the disk: not under the queue's lock
                    try:
                        self._probe()
                    finally:
                        self._cond.acquire()
            if not self._queue:
                return None
            items = [self._queue.popleft()]
            rows = items[0].table.num_rows
            while self._queue and rows + self._queue[0].table.num_rows <= self._max_batch_rows:
                item = self._queue.popleft()
                items.append(item)
                rows += item.table.num_rows
            return items

    def _run(self) -> None:
        while (items := self._take()) is not None:
            self._commit(items)

    def _commit(self, items: list[_Item]) -> None:
        tables = [i.table for i in items]
        started = time.perf_counter()
        try:
            with self._journal_lock:
                self._journal.append([i.record for i in items])
                self.merger.add(tables)
        except Exception as exc:  # the disk failed: every request in the group is refused
            self._stats.add(store_errors=1)
            self._journal_failed(exc)
            self._release(items)
            for item in items:
                item.done(exc)
            return
        self._journal_ok()
        self._release(items)
        self._stats.batch(time.perf_counter() - started, sum(t.num_rows for t in tables))
        for item in items:
            item.done(Committed(item.table.num_rows))

    def _release(self, items: list[_Item]) -> None:
        with self._cond:
            self._queued_bytes -= sum(i.nbytes for i in items)
            self._publish_depth()

    def _journal_failed(self, exc: Exception) -> None:
        if self._journal_failure is None:
            log.error("the journal cannot be written; answering 503 until it can: %s", exc)
        self._journal_failure = str(exc)
        self._stats.set_degraded("journal", f"cannot write the journal: {exc}")

    def _journal_ok(self) -> None:
        if self._journal_failure is not None:
            log.info("the journal is writable again")
            self._journal_failure = None
            self._stats.set_degraded("journal", None)

    def _probe(self) -> None:
        try:
            with self._journal_lock:
                self._journal.probe()
        except OSError as exc:
            self._journal_failure = str(exc)
            return
        self._journal_ok()
