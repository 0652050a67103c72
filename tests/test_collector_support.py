"""A real ``tracelens collect`` subprocess for the collector tests, and span builders."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Collector:
    proc: subprocess.Popen[str]
    db: Path
    http: str  # http://127.0.0.1:PORT
    grpc: str | None  # 127.0.0.1:PORT
    lines: list[str]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            self.lines.extend(self.proc.stderr.read().splitlines() if self.proc.stderr else [])

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def start_collector(
    db: Path,
    *args: str,
    http: str = "127.0.0.1:0",
    grpc: str = "127.0.0.1:0",
    env: dict[str, str] | None = None,
    timeout: float = 30,
    nofile: int | None = None,
) -> Collector:
    cmd = [
        sys.executable,
        "-m",
        "tracelens.cli",
        "collect",
        "--db",
        str(db),
        "--http",
        http,
        "--grpc",
        grpc,
        *args,
    ]
    proc = subprocess.Popen(
        cmd,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        preexec_fn=None if nofile is None else lambda: _limit_files(nofile),
    )
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    http_url = grpc_addr = None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"collector exited early: {proc.wait()} {lines}")
        lines.append(line.rstrip())
        if m := re.search(r"OTLP/HTTP listening on (\S+)", line):
            http_url = m.group(1)
        if m := re.search(r"OTLP/gRPC listening on (\S+)", line):
            grpc_addr = m.group(1)
        if line.strip().endswith("ready"):
            assert http_url
            return Collector(proc, db, http_url, grpc_addr, lines)
    proc.kill()
    raise AssertionError(f"collector did not start: {lines}")


def _limit_files(limit: int) -> None:
    """In the child before exec: soft and hard open-file limits of ``limit`` (a host's usual
    1,024), which the collector cannot raise."""
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Keep(SpanExporter):
    """Keeps finished spans so a test can compare them with what the collector stored."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def make_spans(n: int, service: str = "svc", prefix: str = "op") -> list[ReadableSpan]:
    """``n`` finished SDK spans with typed attributes (str, int, float, bool, arrays)."""
    keep = Keep()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("tests", "1.0")
    for i in range(n):
        with tracer.start_as_current_span(f"{prefix}{i}") as span:
            span.set_attribute("i", i)
            span.set_attribute("s", f"value {i} é")
            span.set_attribute("f", i / 4)
            span.set_attribute("b", i % 2 == 0)
            span.set_attribute("tags", ["a", f"t{i}"])
            span.set_attribute("tracelens.kind", "io")
            span.add_event("ev", {"n": i})
    provider.shutdown()
    return keep.spans


def expected_attributes(span: ReadableSpan) -> dict[str, Any]:
    return {
        k: (list(v) if isinstance(v, tuple) else v)
        for k, v in (span.attributes or {}).items()
        if not k.startswith("tracelens.")
    }


def spans_by_id(table: Any) -> dict[str, dict[str, Any]]:
    return {row["span_id"]: row for row in table.to_pylist()}


def iter_chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]
