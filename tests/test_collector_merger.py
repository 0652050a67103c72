"""When the merger moves journaled spans into DuckDB without being asked (no reader flushing).

Under steady load it waits for a row group's worth (cheaper per span in DuckDB); a trickle must
still reach the store about a second after it stops, and a steady stream within three seconds.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
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
