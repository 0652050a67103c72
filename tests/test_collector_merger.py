"""When the merger moves journaled spans into DuckDB without being asked (no reader flushing).

Under steady load it waits for a row group's worth (cheaper per span in DuckDB); a trickle must
still reach the store about a second after it stops, and a steady stream within three seconds.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from test_collector_support import make_spans

from tracelens.collector.journal import Journal
from tracelens.collector.merger import MERGE_MAX_WAIT_S, Merger
from tracelens.collector.stats import Stats
from tracelens.ingest.otlp_proto import decode_export_request
from tracelens.store import DuckDBStore


def _table(prefix: str) -> pa.Table:
    return decode_export_request(encode_spans(make_spans(5, prefix=prefix)).SerializeToString())


def _stored(stats: Stats) -> int:
    return int(stats.snapshot()["spans_stored"])


def _wait_stored(stats: Stats, spans: int, timeout: float) -> float:
    began = time.monotonic()
    while _stored(stats) < spans and time.monotonic() - began < timeout:
        time.sleep(0.02)
    return time.monotonic() - began


@pytest.mark.system
def test_a_lull_merges_after_a_second_and_a_stream_within_the_longest_wait(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "m.duckdb")
    store, stats, lock = DuckDBStore(db), Stats(), threading.Lock()
    jour = Journal(db)
    merger = Merger(store, jour, stats, lock)
    try:
        merger.add([_table("lull")])
        time.sleep(0.5)
        assert _stored(stats) == 0  # younger than a second: not merged yet
        assert _wait_stored(stats, 5, 10.0) < MERGE_MAX_WAIT_S
        merger.add([_table("stream0")])
        began = time.monotonic()
        rows = 5
        while time.monotonic() - began < MERGE_MAX_WAIT_S + 1.0 and _stored(stats) < 10:
            merger.add([_table(f"stream{rows}")])  # never a lull
            rows += 5
            time.sleep(0.05)
        assert _stored(stats) >= 10, "a steady stream was not merged within the longest wait"
    finally:
        merger.close()
        jour.close()
        store.close()
    assert DuckDBStore(db).count() == rows + 5


@pytest.mark.system
def test_queued_bytes_return_to_zero_so_the_queue_limit_keeps_working(tmp_path: Path) -> None:
    """Every byte counted in is counted out (a drift below zero once let the queue grow past
    its limit under sustained load), and a full queue refuses instead of growing."""
    from tracelens.collector import journal
    from tracelens.collector.writer import BatchWriter, Committed

    db = str(tmp_path / "w.duckdb")
    store, stats = DuckDBStore(db), Stats()
    body = encode_spans(make_spans(5, prefix="q")).SerializeToString()
    table = decode_export_request(body)
    limit = 3 * (table.nbytes + len(body))
    writer = BatchWriter(store, db, stats, max_queue_bytes=limit, max_batch_rows=100_000)
    done: list[object] = []
    try:
        for k in range(20):
            t = decode_export_request(
                encode_spans(make_spans(5, prefix=f"q{k}")).SerializeToString()
            )
            while not writer.try_submit(t, (journal.PROTOBUF, body), done.append):
                assert stats.queue_bytes > 0, "refused with nothing held"
                time.sleep(0.01)
            assert stats.queue_bytes <= limit + table.nbytes + len(body)
        deadline = time.monotonic() + 10
        while len(done) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(isinstance(d, Committed) for d in done) and len(done) == 20
        assert writer.merger.flush(30)  # (everything is handed over once answered)
        assert writer._held() == 0
    finally:
        writer.close()
        store.close()
    assert DuckDBStore(db).count() == 100


def test_under_load_a_merge_takes_whole_row_groups_and_keeps_the_journal_of_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With 2.6 row groups waiting, the merge under load stores 2 (a partial one would make
    DuckDB's checkpoint rewrite its neighbours); the rest waits for the lull, and the journal
    segment holding it stays until it is stored.  The row group is made small (20 spans) so
    the rule, not DuckDB's size, is what is exercised."""
    from tracelens.collector import journal
    from tracelens.collector import merger as merger_module

    monkeypatch.setattr(merger_module, "ROW_GROUP", 20)
    monkeypatch.setattr(merger_module, "MERGE_ROWS", 20)
    db = str(tmp_path / "g.duckdb")
    store, stats, lock = DuckDBStore(db), Stats(), threading.Lock()
    jour = Journal(db)
    merger = Merger(store, jour, stats, lock)
    tables = [_table(f"g{k}") for k in range(11)]  # 55 spans: 2 row groups and 15
    try:
        with lock:
            jour.append([(journal.PROTOBUF, b"unread")])  # what the writer journals first
            merger.add(tables)
        assert _wait_stored(stats, 40, 5.0) < 5.0
        time.sleep(0.1)
        assert _stored(stats) == 40  # whole row groups only, under a second after the add
        assert store.count() == 40
        assert journal.segments(db), "the segment was removed before all its spans were stored"
        assert _wait_stored(stats, 55, 5.0) < 5.0  # the lull merges the rest
        deadline = time.monotonic() + 5.0
        while journal.segments(db) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert journal.segments(db) == []
        assert merger.pending_bytes == 0
    finally:
        merger.close()
        jour.close()
        store.close()
    stored = DuckDBStore(db).read(["name"]).column("name").to_pylist()
    assert sorted(stored) == sorted(f"g{k}{i}" for k in range(11) for i in range(5))
