"""Acknowledged means durable when the disk fills: a request is answered 200 only once all of its
bytes are journaled, a failed write answers 503 / UNAVAILABLE, and nothing torn hides what follows.

The journal-level and fault-seam tests run anywhere; the tmpfs tests need root (CI) and skip
elsewhere with the reason.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2
from reliability.durable_support import (
    PROTO,
    Bodies,
    Running,
    fill,
    free_bytes,
    health,
    resize,
    stored_ids,
    tmpfs,
    wait_for,
)
from test_collector_support import free_port

from tracelens.collector import journal

# -- the journal itself ------------------------------------------------------------------------


def _bodies_in(db: Path) -> list[bytes]:
    return [body for seg in journal.segments(db) for _, body in journal.read_segment(seg)]


def test_a_short_write_then_enospc_fails_the_append_and_leaves_no_torn_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fault seam cuts the third record short (the way a filling disk does), then refuses
    two writes, then lets writes through: exactly the appends that returned are replayed."""
    monkeypatch.setenv(journal.FAULT_ENV, "enospc-after:500:2")
    db = tmp_path / "j.duckdb"
    jour = journal.Journal(str(db))
    appended, refused = [], []
    for k in range(8):
        body = bytes([65 + k]) * 150
        try:
            jour.append([(journal.PROTOBUF, body)])
            appended.append(body)
        except journal.JournalError as exc:
            assert "No space left" in str(exc)
            refused.append(body)
    jour.close()
    assert len(refused) == 2 and len(appended) == 6
    assert _bodies_in(db) == appended
    for seg in journal.segments(db):  # cut back to whole records: nothing after the last one
        data = seg.read_bytes()
        assert data.startswith(journal.SEGMENT_MAGIC)
        assert sum(1 for _ in journal.read_segment(seg)) * (150 + 17) + 5 == len(data)


def test_a_torn_record_never_hides_a_later_complete_one(tmp_path: Path) -> None:
    db = tmp_path / "j.duckdb"
    jour = journal.Journal(str(db))
    jour.append([(journal.PROTOBUF, b"first" * 20)])
    jour.close()
    (seg,) = journal.segments(db)
    whole = journal._record(journal.JSON, b'{"later": true}' * 10)
    with open(seg, "ab") as out:  # a cut that could not be truncated, then a complete record
        out.write(journal._record(journal.PROTOBUF, b"torn" * 100)[:60])
        out.write(whole)
        damaged = bytearray(journal._record(journal.PROTOBUF, b"flipped" * 10))
        damaged[-3] ^= 0xFF  # a bit flip in a body: that record is dropped, not the next
        out.write(bytes(damaged))
        out.write(journal._record(journal.PROTOBUF, b"last"))
        out.write(whole[:25])  # and a torn tail
    assert list(journal.read_segment(seg)) == [
        (journal.PROTOBUF, b"first" * 20),
        (journal.JSON, b'{"later": true}' * 10),
        (journal.PROTOBUF, b"last"),
    ]


def test_segments_of_the_first_format_are_still_replayed(tmp_path: Path) -> None:
    folder = journal.journal_dir(tmp_path / "j.duckdb")
    folder.mkdir()
    old = b"".join(
        journal._OLD_HEADER.pack(kind, len(body)) + body
        for kind, body in [(journal.PROTOBUF, b"a" * 30), (journal.JSON, b"{}")]
    )
    (folder / f"{1:012d}{journal.SUFFIX}").write_bytes(old + b"\x00\xff\xff")
    (seg,) = journal.segments(tmp_path / "j.duckdb")
    assert list(journal.read_segment(seg)) == [(journal.PROTOBUF, b"a" * 30), (journal.JSON, b"{}")]


def test_journal_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        jour = journal.Journal(str(tmp_path / "j.duckdb"))
        jour.append([(journal.PROTOBUF, b"x")])
        jour.close()
    finally:
        os.umask(old)
    (seg,) = journal.segments(tmp_path / "j.duckdb")
    assert seg.stat().st_mode & 0o777 == 0o600
    assert seg.parent.stat().st_mode & 0o777 == 0o700


# -- a collector whose journal writes fail (the fault seam: any machine) -------------------------


@pytest.mark.system
def test_failed_journal_writes_answer_503_and_unavailable_never_200(tmp_path: Path) -> None:
    """The journal accepts a few requests, then refuses 6 writes, then works again (space came
    back).  HTTP gets 503 + Retry-After, gRPC UNAVAILABLE + RetryInfo while it fails; /health is
    degraded then ok; after kill -9 and a restart, exactly the requests answered 200 are stored."""
    db, port = tmp_path / "t.duckdb", free_port()
    sent = Bodies.make(24, 200)
    # ~4 requests fit; then 6 write calls fail (a segment header or a group each)
    limit = 4 * (len(sent.bodies[0]) + 17) + 5 + 100
    col = Running.start(
        db, port=port, grpc="127.0.0.1:0", env={journal.FAULT_ENV: f"enospc-after:{limit}:6"}
    )
    statuses: list[int] = []
    states: list[str] = []
    grpc_codes: list[grpc.StatusCode] = []
    try:
        with httpx.Client(base_url=col.url, timeout=30) as client:
            for k, body in enumerate(sent.bodies):
                if k % 4 == 3 and col.col.grpc:  # every fourth over gRPC
                    grpc_codes.append(_grpc_export(col.col.grpc, body))
                    statuses.append(200 if grpc_codes[-1] is grpc.StatusCode.OK else 503)
                else:
                    answer = client.post("/v1/traces", content=body, headers=PROTO)
                    statuses.append(answer.status_code)
                    if answer.status_code == 503:
                        assert answer.headers["Retry-After"] == "1"
                states.append(health(col.url)["status"])
            assert wait_for(lambda: health(col.url)["status"] == "ok", 10)
    finally:
        col.kill9()
    assert set(statuses) == {200, 503}, statuses
    assert statuses.count(503) >= 3
    assert grpc.StatusCode.UNAVAILABLE in grpc_codes, grpc_codes
    assert "degraded" in states and states[-1] == "ok", states
    col = Running.start(db, port=port)  # merges what the killed one left in its journal
    code, _ = col.stop(60)
    assert code == 0
    ids = stored_ids(db)
    assert len(ids) == len(set(ids))
    acked = set().union(*(sent.ids[k] for k, s in enumerate(statuses) if s == 200))
    refused = set().union(*(sent.ids[k] for k, s in enumerate(statuses) if s != 200))
    assert set(ids) == acked  # every acknowledged span, whole, and none that was refused
    assert not refused & set(ids)


def _grpc_export(address: str, body: bytes) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        try:
            export(body, timeout=30)
        except grpc.RpcError as err:
            code: grpc.StatusCode = err.code()
            if code is grpc.StatusCode.UNAVAILABLE:
                trailers = dict(err.trailing_metadata() or ())
                info = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
                assert info.retry_delay.seconds == 1
            return code
    return grpc.StatusCode.OK


# -- a real full disk (tmpfs) ------------------------------------------------------------------


class _Load:
    """Clients that send each body once (no retries) and record what they were answered."""

    def __init__(self, url: str, bodies: Bodies, clients: int) -> None:
        self.url, self.bodies = url, bodies
        self.status: dict[int, int | str] = {}
        self._next = 0
        self._lock = threading.Lock()
        self.stop = threading.Event()
        self._threads = [threading.Thread(target=self._client) for _ in range(clients)]

    def __enter__(self) -> _Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(60)

    def _take(self) -> int | None:
        with self._lock:
            if self.stop.is_set() or self._next >= len(self.bodies.bodies):
                return None
            self._next += 1
            return self._next - 1

    def _client(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            while (k := self._take()) is not None:
                try:
                    answer = client.post("/v1/traces", content=self.bodies.bodies[k], headers=PROTO)
                    self.status[k] = answer.status_code
                except httpx.HTTPError as exc:
                    self.status[k] = type(exc).__name__
                time.sleep(0.01)

    def count(self, status: int) -> int:
        return sum(1 for s in list(self.status.values()) if s == status)

    def ids(self, status: int) -> set[str]:
        return set().union(
            *(self.bodies.ids[k] for k, s in list(self.status.items()) if s == status)
        )


def _store_degrades_if_spans_wait(url: str) -> None:
    """Spans acknowledged before the fill and not merged yet cannot be merged either: /health
    names the store within the merger's longest wait.  (Rarely a merge has just taken every
    acknowledged span when the disk fills; the store then has nothing to fail on, and
    test_store_recovery covers the failing merger deterministically.)"""
    stats = httpx.get(f"{url}/stats", timeout=5).json()
    if stats["spans_acknowledged"] > stats["spans_stored"] + stats["spans_duplicate"]:
        assert wait_for(lambda: "store:" in health(url).get("reason", ""), 10), health(url)


@pytest.mark.system
def test_disk_full_under_load_then_kill_9_more_space_and_restart(tmp_path: Path) -> None:
    port = free_port()
    sent = Bodies.make(1500, 200, salt=1)
    with tmpfs(tmp_path / "fs", 48) as fs:
        db = fs / "t.duckdb"
        col = Running.start(db, port=port)
        try:
            with _Load(col.url, sent, clients=4) as load:
                assert wait_for(lambda: load.count(200) >= 20, 30)
                fill(fs, leave=8_192)  # full now, under load, but for a part of a record
                assert wait_for(lambda: load.count(503) >= 20, 30), load.status
                _store_degrades_if_spans_wait(col.url)
                degraded = health(col.url)
                load.stop.set()
        finally:
            col.kill9()
        assert degraded["status"] == "degraded" and "journal" in degraded["reason"], degraded
        assert set(load.status.values()) <= {200, 503}, set(load.status.values())
        resize(fs, 256)
        col = Running.start(db, port=port)
        code, _ = col.stop(60)
        assert code == 0, col.text()
        ids = stored_ids(db)
    assert len(ids) == len(set(ids))
    missing = load.ids(200) - set(ids)
    assert not missing, f"{len(missing)} acknowledged spans lost"
    assert "Traceback" not in col.text()
    print(f"acked {load.count(200)} requests, refused {load.count(503)}; all acked spans stored")


@pytest.mark.system
def test_space_returned_while_running_merging_resumes_and_health_recovers(tmp_path: Path) -> None:
    port = free_port()
    sent = Bodies.make(1500, 200, salt=2)
    with tmpfs(tmp_path / "fs", 48) as fs:
        db = fs / "t.duckdb"
        col = Running.start(db, port=port)
        try:
            with _Load(col.url, sent, clients=4) as load:
                assert wait_for(lambda: load.count(200) >= 20, 30)
                filler = fill(fs, leave=8_192)
                assert wait_for(lambda: load.count(503) >= 20, 30)
                _store_degrades_if_spans_wait(col.url)
                assert health(col.url)["status"] == "degraded"
                filler.unlink()  # space comes back; no restart
                refused = load.count(503)
                assert wait_for(lambda: health(col.url)["status"] == "ok", 60), health(col.url)
                assert wait_for(lambda: load.count(200) >= 200 + refused or load.stop.is_set(), 60)
            acked = load.ids(200)

            def merged() -> bool:
                stats = httpx.get(f"{col.url}/stats", timeout=5).json()
                return bool(stats["spans_stored"] + stats["spans_duplicate"] >= len(acked))

            assert wait_for(merged, 60), httpx.get(f"{col.url}/stats").json()
            assert free_bytes(fs) > 0
        finally:
            code, took = col.stop(90)
        assert code == 0 and took < 30, (took, col.text())
        ids = stored_ids(db)
    assert len(ids) == len(set(ids))
    assert not acked - set(ids)
    assert set(load.status.values()) <= {200, 503}
    assert "Traceback" not in col.text()
