"""Shared pieces of the instrumentation tests: a real SDK provider with an in-memory exporter, a
local HTTP server with a known delay, CPU burners, subprocess runners.

The in-process tests never install a global tracer provider (other test modules may need to):
they point the decorator at their own SDK ``TracerProvider`` for the duration of a test and
restore whatever it used before.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tracelens_instrumentation import _runtime

ROOT = Path(__file__).resolve().parent.parent
_provider: TracerProvider | None = None
_exporter = InMemorySpanExporter()


def provider() -> TracerProvider:
    global _provider
    if _provider is None:
        _provider = TracerProvider()
        _provider.add_span_processor(SimpleSpanProcessor(_exporter))
    return _provider


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The decorator traces into a fresh in-memory exporter for this test."""
    before = _runtime.TRACER
    _runtime.activate(provider())
    _exporter.clear()
    try:
        yield _exporter
    finally:
        _runtime.TRACER = before


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def named(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    """The one span called ``name`` (or ``outer.name``, for functions defined in a test)."""
    found = [
        s for s in exporter.get_finished_spans() if s.name == name or s.name.endswith("." + name)
    ]
    assert len(found) == 1, f"{len(found)} spans named {name!r}"
    return found[0]


def spin(ms: float) -> int:
    """Burns ``ms`` of this thread's CPU; returns the CPU time actually burnt (ns)."""
    start = time.thread_time_ns()
    while time.thread_time_ns() - start < ms * 1_000_000:
        pass
    return time.thread_time_ns() - start


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        delay = float(self.path.rsplit("/", 1)[-1] or 0)
        time.sleep(delay)
        body = b"x" * 64
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


class DelayServer:
    """HTTP server on 127.0.0.1: ``GET /delay/0.15`` answers after 150 ms."""

    def __init__(self) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, delay: float) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/delay/{delay}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def delay_server() -> Iterator[DelayServer]:
    server = DelayServer()
    yield server
    server.close()


def run_python(
    code: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Runs ``code`` in a fresh interpreter (global tracer state starts empty there)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=cwd or ROOT,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def within(measured: float, truth: float, rel: float = 0.10, abs_ns: float = 5e6) -> bool:
    """The acceptance tolerance: within 10 % or 5 ms of the truth."""
    return abs(measured - truth) <= max(rel * truth, abs_ns)


def kinds_of(spans: Sequence[ReadableSpan]) -> dict[str, str]:
    return {s.name: str(attrs(s).get("tracelens.kind")) for s in spans}
