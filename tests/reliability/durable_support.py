"""Helpers for the durability tests: a real tmpfs, distinct OTLP bodies with known span ids, a
collector whose stderr is drained (a full disk makes it log, and an undrained pipe would block
it), and what the store holds afterwards."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from test_collector_support import Collector, make_spans, start_collector  # noqa: E402

from tracelens.store import DuckDBStore  # noqa: E402

PROTO = {"Content-Type": "application/x-protobuf"}


@contextlib.contextmanager
def tmpfs(where: Path, size_mb: int) -> Iterator[Path]:
    """A real tmpfs of ``size_mb`` at ``where`` (unmounted afterwards); skips the test where the
    machine does not allow mounting (not root)."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}M,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); the journal's "
            "TRACELENS_JOURNAL_FAULT seam covers the same logic (test_disk_full.py)"
        )
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)


def resize(where: Path, size_mb: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size_mb}M", str(where)], check=True)


def fill(where: Path, name: str = "filler", leave: int = 0) -> Path:
    """Fill the filesystem at ``where`` to the last block (ENOSPC), then give back ``leave``
    bytes: less than a request's record, so the next journal write is cut short (the bug this
    guards against: a short write taken for a whole one).  Returns the filler file."""
    path = where / name
    chunk = 1 << 20
    with open(path, "ab", buffering=0) as out:
        while chunk >= 512:
            try:
                out.write(b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 4
        if leave:
            out.truncate(max(out.tell() - leave, 0))
    return path


def free_bytes(where: Path) -> int:
    st = os.statvfs(where)
    return st.f_bavail * st.f_frsize


@dataclass
class Bodies:
    """Export requests with known, distinct span ids (a template's content, new ids)."""

    bodies: list[bytes]
    ids: list[set[str]]

    @classmethod
    def make(cls, count: int, spans: int, salt: int = 0) -> Bodies:
        base = encode_spans(make_spans(spans))
        bodies, ids = [], []
        for k in range(count):
            req = ExportTraceServiceRequest()
            req.CopyFrom(base)
            got = set()
            for i, span in enumerate(req.resource_spans[0].scope_spans[0].spans):
                span_id = ((salt << 40) + k * 100_003 + i + 1).to_bytes(8, "big")
                span.span_id = span_id
                got.add(span_id.hex())
            bodies.append(req.SerializeToString())
            ids.append(got)
        return cls(bodies, ids)


@dataclass
class Running:
    """A collector subprocess whose stderr is read continuously into ``lines``."""

    col: Collector
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    @classmethod
    def start(
        cls,
        db: Path,
        *args: str,
        port: int,
        grpc: str = "off",
        env: dict[str, str] | None = None,
    ) -> Running:
        col = start_collector(db, *args, http=f"127.0.0.1:{port}", grpc=grpc, env=env)
        run = cls(col, list(col.lines))
        run._reader = threading.Thread(target=run._drain, daemon=True)
        run._reader.start()
        return run

    def _drain(self) -> None:
        stream = self.col.proc.stderr
        assert stream is not None
        for line in stream:
            self.lines.append(line.rstrip())

    @property
    def url(self) -> str:
        return self.col.http

    def kill9(self) -> None:
        self.col.proc.kill()
        self.col.proc.wait(10)
        self._join()

    def stop(self, timeout: float) -> tuple[int, float]:
        """SIGTERM; returns (exit status, seconds it took).  Kills it if it overruns ``timeout``
        (the caller's assertion then fails on the time)."""
        began = time.monotonic()
        self.col.proc.send_signal(signal.SIGTERM)
        try:
            code = self.col.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.col.proc.kill()
            code = self.col.proc.wait(10)
        took = time.monotonic() - began
        self._join()
        return code, took

    def _join(self) -> None:
        if self._reader is not None:
            self._reader.join(10)

    def text(self) -> str:
        return "\n".join(self.lines)


def health(url: str) -> dict[str, str]:
    try:
        answer = httpx.get(f"{url}/health", timeout=5)
    except httpx.HTTPError as exc:
        return {"status": f"unreachable: {exc}"}
    body: dict[str, str] = answer.json()
    return body


def wait_for(predicate: object, timeout: float, step: float = 0.1) -> bool:
    """Poll ``predicate`` (a callable) until it is true or ``timeout`` passes."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def stored_ids(db: Path) -> list[str]:
    """Every stored span id, repeats included (the caller checks there are none)."""
    with DuckDBStore(db, read_only=True) as store:
        ids: list[str] = store.read(["span_id"])["span_id"].to_pylist()
    return ids
