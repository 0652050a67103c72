"""The store survives a full disk: recovery on a still-full disk starts degraded (one clear line,
no traceback) and finishes by itself once space returns; reads answer at once with a clear
message meanwhile; SIGTERM exits in bounded time; an invalidated DuckDB is reopened; the files
are private."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
from reliability.durable_support import (
    PROTO,
    Bodies,
    Running,
    fill,
    health,
    resize,
    stored_ids,
    tmpfs,
    wait_for,
)
from test_collector_support import ROOT, free_port

from tracelens.collector import discovery, journal
from tracelens.collector.merger import CLOSE_MERGE_S, Merger
from tracelens.collector.otlp import decode_record
from tracelens.collector.stats import Stats
from tracelens.errors import StoreError
from tracelens.store import DuckDBStore


def _analyze(db: Path, timeout: float = 60) -> tuple[int, str, float]:
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "tracelens.cli", "analyze", "--db", str(db), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stderr, time.monotonic() - began


def _post_all(url: str, sent: Bodies) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        for body in sent.bodies:
            assert client.post("/v1/traces", content=body, headers=PROTO).status_code == 200


@pytest.mark.system
def test_recovery_on_a_full_disk_degrades_reads_fail_fast_and_it_resumes(tmp_path: Path) -> None:
    port = free_port()
    sent = Bodies.make(5, 200, salt=3)
    acked = set().union(*sent.ids)
    with tmpfs(tmp_path / "fs", 48) as fs:
        db = fs / "t.duckdb"
        col = Running.start(db, port=port)
        _post_all(col.url, sent)
        col.kill9()  # answered, journaled, not merged yet
        assert journal.segments(db)
        filler = fill(fs)

        # start-up on the full disk: one clear line, serving, degraded
        col = Running.start(db, port=port)
        try:
            assert any("degraded: cannot merge the journal" in line for line in col.lines)
            state = health(col.url)
            assert state["status"] == "degraded" and "store" in state["reason"], state
            code, err, took = _analyze(db)  # reads through the collector: prompt and clear
            assert code == 2 and took < 20, (code, took, err)
            assert "Traceback" not in err and "/health" in err, err
            assert len(err.strip().splitlines()) == 1, err
        finally:
            code, took = col.stop(120)  # the store stays wedged: SIGTERM still ends it
        assert code == 0, col.text()
        assert took < CLOSE_MERGE_S + 15, took
        assert "Traceback" not in col.text(), col.text()
        assert journal.segments(db), "unmerged spans must stay in the journal"

        # no collector: analyze merges the journal itself, and says clearly that it cannot
        code, err, took = _analyze(db)
        assert code == 2 and "Traceback" not in err, err
        assert "journal" in err and len(err.strip().splitlines()) == 1, err

        # again degraded; then space returns and it catches up without a restart
        col = Running.start(db, port=port)
        try:
            assert health(col.url)["status"] == "degraded"
            filler.unlink()
            assert wait_for(lambda: health(col.url)["status"] == "ok", 60), health(col.url)
            assert not journal.segments(db)
            stats = httpx.get(f"{col.url}/stats", timeout=5).json()
            assert stats["spans_recovered"] == len(acked)
        finally:
            code, _ = col.stop(60)
        assert code == 0
        ids = stored_ids(db)
        assert len(ids) == len(set(ids)) and set(ids) == acked
        code, err, _ = _analyze(db)
        assert code == 0, err


def _spans(rows: int, salt: int) -> pa.Table:
    """``rows`` spans with distinct ids (copies of a decoded request with new span ids)."""
    sent = Bodies.make(1, 200, salt=salt)
    base = decode_record(journal.PROTOBUF, sent.bodies[0])
    copies = []
    at = base.schema.get_field_index("span_id")
    for k in range(rows // base.num_rows):
        ids = pa.array([f"{salt:04x}{k:06x}{i:06x}" for i in range(base.num_rows)])
        copies.append(base.set_column(at, "span_id", ids))
    return pa.concat_tables(copies)


@pytest.mark.system
def test_an_invalidated_store_is_reopened_once_space_returns(tmp_path: Path) -> None:
    """A checkpoint that fails for lack of space invalidates the DuckDB database; the store
    notices, and its next call after space returns works (no restart of the process)."""
    with tmpfs(tmp_path / "fs", 40) as fs:
        store = DuckDBStore(fs / "s.duckdb")
        stored = 0
        errors: list[str] = []
        try:
            for k in range(60):
                try:
                    stored += store.append_new(_spans(20_000, k))
                except StoreError as exc:
                    errors.append(str(exc))
                    if store.broken:
                        break
            assert store.broken is not None, errors
            assert "invalidated" in store.broken or "checkpoint" in store.broken, store.broken
            assert all("\n" not in e for e in errors)
            resize(fs, 400)
            stored += store.append_new(_spans(200, 999))
            assert store.broken is None
            assert store.count() == stored
            store.checkpoint()
        finally:
            store.close()


def test_files_are_private_even_with_umask_0(tmp_path: Path) -> None:
    db, old = tmp_path / "t.duckdb", os.umask(0)
    try:
        col = Running.start(db, port=free_port())
    finally:
        os.umask(old)
    try:
        sent = Bodies.make(1, 50, salt=4)
        _post_all(col.url, sent)
        modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir() if p.is_file()}
        (segment,) = journal.segments(db)
        assert segment.stat().st_mode & 0o777 == 0o600
        assert journal.journal_dir(db).stat().st_mode & 0o777 == 0o700
    finally:
        col.stop(60)
    assert modes["t.duckdb"] == 0o600 and modes["t.duckdb.collector.json"] == 0o600, modes
    assert all(mode & 0o077 == 0 for mode in modes.values()), modes


def test_the_discovery_file_replaces_a_planted_symlink_instead_of_writing_through_it(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    db = tmp_path / "t.duckdb"
    discovery.info_path(db).symlink_to(victim)
    assert discovery.find(db) is None  # a symlink is not followed when read either
    path = discovery.publish(str(db), discovery.CollectorInfo(os.getpid(), "http://x", None, None))
    assert victim.read_text() == "keep me"
    assert not path.is_symlink() and path.stat().st_mode & 0o777 == 0o600
    found = discovery.find(db)
    assert found is not None and found.http == "http://x"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_at_first_start_is_one_clear_line(tmp_path: Path) -> None:
    """No store yet and no room to create one: the collector exits with one line, no traceback."""
    with tmpfs(tmp_path / "fs", 1) as fs:
        fill(fs)
        command = [sys.executable, "-m", "tracelens.cli", "collect", "--db", str(fs / "t.duckdb")]
        done = subprocess.run(
            [*command, "--http", "127.0.0.1:0", "--grpc", "off"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            check=False,
        )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert "No space left" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


class _FailingStore:
    """A store whose first ``failures`` merges fail like a full disk; records when each came."""

    def __init__(self, store: DuckDBStore, failures: int) -> None:
        self.store, self.failures = store, failures
        self.calls: list[float] = []

    def append_new(self, spans: pa.Table) -> int:
        self.calls.append(time.monotonic())
        if len(self.calls) <= self.failures:
            raise StoreError("storing spans failed: No space left on device")
        return self.store.append_new(spans)


@pytest.mark.system
def test_failed_merges_back_off_resume_and_leave_no_empty_segment(tmp_path: Path) -> None:
    db = str(tmp_path / "m.duckdb")
    store, stats = DuckDBStore(db), Stats()
    failing = _FailingStore(store, failures=4)
    jour, lock = journal.Journal(db), threading.Lock()
    merger = Merger(failing, jour, stats, lock)  # type: ignore[arg-type]
    sent = Bodies.make(3, 100, salt=6)
    try:
        for body in sent.bodies:
            with lock:
                jour.append([(journal.PROTOBUF, body)])
                merger.add([decode_record(journal.PROTOBUF, body)])
        assert not merger.flush(5)  # answers at once while merges fail: False, not a hang
        assert "store" in stats.degraded()
        assert len(journal.segments(db)) == 1  # retries add no segment
        assert wait_for(lambda: merger.flush(0.1), 30)
        assert stats.degraded() == {}
        assert not journal.segments(db)
    finally:
        merger.close()
        jour.close()
    gaps = [b - a for a, b in itertools.pairwise(failing.calls)]
    assert len(failing.calls) == 5
    assert all(later > earlier * 1.5 for earlier, later in itertools.pairwise(gaps)), gaps
    assert store.count() == 300
    store.close()


def test_the_stop_watchdog_ends_a_wedged_process_at_its_bound(tmp_path: Path) -> None:
    """What bounds SIGTERM when something below the collector never returns: here the main
    thread sleeps far past the bound, and the watchdog still ends the process, exit status 1."""
    script = (
        "import time\n"
        "from tracelens.collector.service import _watchdog\n"
        f"_watchdog(1.0, {str(tmp_path / 't.duckdb')!r})\n"
        "time.sleep(60)\n"
    )
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=30
    )
    took = time.monotonic() - began
    assert done.returncode == 1 and took < 20, (done.returncode, took, done.stderr)
    assert "could not stop in 1 s" in done.stderr


def test_a_collector_that_never_answers_is_reported_not_mistaken_for_a_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live collector whose HTTP side hangs: the read says so after the timeout, instead of
    trying the file it holds and failing with DuckDB's "Conflicting lock"."""
    from tracelens.collector import reader

    db = tmp_path / "t.duckdb"
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        discovery.publish(str(db), discovery.CollectorInfo(os.getpid(), url, None, None))
        monkeypatch.setattr(reader, "READ_TIMEOUT_S", 1.0)
        began = time.monotonic()
        with pytest.raises(StoreError, match="did not answer within 1 s"):
            reader.read_store(str(db), ["span_id"])
    assert time.monotonic() - began < 10
