"""Helpers for the hostile-input tests: raw HTTP, peak RSS, file descriptors, valid bodies.

Everything talks to a real ``tracelens collect`` process (``test_collector_support``) on
127.0.0.1; nothing here knows how the collector works inside.
"""

from __future__ import annotations

import gzip
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import psutil
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from test_collector_support import ROOT, Collector, make_spans

PROTO = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}
MiB = 1 << 20


def port_of(col: Collector) -> int:
    return int(col.http.rsplit(":", 1)[1])


def valid_body(n: int = 3, prefix: str = "ok") -> bytes:
    """A real SDK-encoded ExportTraceServiceRequest of ``n`` spans."""
    return encode_spans(make_spans(n, prefix=prefix)).SerializeToString()


def raw_exchange(port: int, data: bytes, *, timeout: float = 10) -> bytes:
    """Send ``data`` on a fresh connection, half-close, return everything answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def status_of(answer: bytes) -> int:
    """The status code of the first HTTP/1.1 response in ``answer`` (0: none)."""
    if not answer.startswith(b"HTTP/1.1 "):
        return 0
    return int(answer.split(b" ", 2)[1])


def gzip_bomb(inflated: int, prefix: bytes = b"", block: int = MiB) -> bytes:
    """``prefix`` then zeros-like filler up to ``inflated`` bytes, gzip-compressed while it is
    written (never held inflated)."""
    import io

    sink = io.BytesIO()
    with gzip.GzipFile(fileobj=sink, mode="wb", compresslevel=9) as out:
        out.write(prefix)
        filler = b"a" * block
        left = inflated - len(prefix)
        while left > 0:
            out.write(filler[: min(block, left)])
            left -= block
    return sink.getvalue()


def raise_nofile(wanted: int) -> int:
    """Raise this process's soft open-file limit toward ``wanted`` (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class PeakRss:
    """Samples a process's resident set size every ``interval`` seconds until stopped."""

    def __init__(self, pid: int, interval: float = 0.01) -> None:
        self._proc = psutil.Process(pid)
        self._interval = interval
        self._stop = threading.Event()
        self.peak = self._proc.memory_info().rss
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self._proc.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(self._interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.peak


@dataclass
class Prober:
    """A well-behaved client: one valid export every ``every`` seconds on a fresh connection,
    recording each status and how long the answer took."""

    url: str
    every: float = 0.2
    results: list[tuple[int, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._body = valid_body(2, prefix="probe")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                answer = httpx.post(
                    f"{self.url}/v1/traces", content=self._body, headers=PROTO, timeout=10
                )
                self.results.append((answer.status_code, time.monotonic() - started))
            except httpx.HTTPError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.every)

    def stop(self) -> list[tuple[int, float]]:
        self._stop.set()
        self._thread.join(15)
        return self.results

    def assert_all_fast(self, minimum: int = 3, within: float = 1.0) -> None:
        assert not self.errors, self.errors[:3]
        assert len(self.results) >= minimum, self.results
        slow = [r for r in self.results if r[0] != 200 or r[1] > within]
        assert not slow, f"{len(slow)} of {len(self.results)} probes failed or slow: {slow[:5]}"


@contextmanager
def probing(col: Collector, every: float = 0.2) -> Iterator[Prober]:
    prober = Prober(col.http, every)
    try:
        yield prober
    finally:
        prober.stop()


def no_tracebacks(col: Collector) -> None:
    """After ``col.stop()``: the collector's stderr holds no Python traceback."""
    text = "\n".join(col.lines)
    assert "Traceback" not in text, text[-3000:]


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``tracelens ARGS`` in a fresh process, from the checkout's root."""
    return subprocess.run(
        [sys.executable, "-m", "tracelens.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


def clean_exit_2(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2, no traceback, and every needle (the file, the field) in the message."""
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr[-2000:])
