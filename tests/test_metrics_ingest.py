"""Span metrics counted incrementally from what a real collector receives over OTLP/HTTP.

A real ``tracelens collect`` (span metrics on: its default) gets spans from the OpenTelemetry
SDK's OTLP/HTTP exporter, in separate requests and merges; ``GET /metrics`` must then show the
hand-derived counts: how many traces, how many calls per operation and kind, what waited and
what the open-trace cap forced.  The in-process rules are in ``test_metrics``; a real
Prometheus scrape is ``test_metrics_prometheus``.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from prometheus_client.parser import text_string_to_metric_families
from test_collector_support import Collector, Keep, iter_chunks, start_collector

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _traces(n: int) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """``n`` traces of 4 spans: ``agent.run`` (cpu) over two ``tool.search`` (io) and one
    ``llm.chat`` (gpu).  Returns (children, roots), each in the order they ended."""
    keep = Keep()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("tests", "1.0")
    for _ in range(n):
        with tracer.start_as_current_span("agent.run", kind=trace.SpanKind.SERVER) as root:
            root.set_attribute("tracelens.kind", "cpu")
            for name, kind in (("tool.search", "io"), ("tool.search", "io"), ("llm.chat", "gpu")):
                with tracer.start_as_current_span(name) as span:
                    span.set_attribute("tracelens.kind", kind)
    provider.shutdown()
    roots = [s for s in keep.spans if s.parent is None]
    return [s for s in keep.spans if s.parent is not None], roots


def _send(col: Collector, spans: list[ReadableSpan], per_request: int = 25) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{col.http}/v1/traces", timeout=30)
    try:
        for chunk in iter_chunks(spans, per_request):
            assert exporter.export(chunk) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def _scrape(col: Collector) -> Samples:
    with urllib.request.urlopen(f"{col.http}/metrics", timeout=30) as r:
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _until(
    col: Collector, what: str, ok: Callable[[Samples], bool], timeout: float = 60
) -> Samples:
    deadline = time.monotonic() + timeout
    while True:
        got = _scrape(col)
        if ok(got):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f} s; last scrape: {got}")
        time.sleep(0.2)


COUNTED = "tracelens_metrics_traces_counted_total"
PENDING = "tracelens_metrics_pending_traces"
FORCED = "tracelens_metrics_traces_forced_total"
LATE = "tracelens_metrics_late_spans_total"
CALLS = "tracelens_span_calls_total"


def _calls(got: Samples, operation: str, kind: str) -> float:
    return _get(got, CALLS, service="agent", operation=operation, kind=kind)


@pytest.mark.smoke
def test_traces_sent_in_pieces_are_counted_once_whole_after_their_root(tmp_path: Path) -> None:
    """40 traces, children first (4 requests), roots later (2 more): nothing is counted while
    the roots are missing (a trace without its root waits 10 quiet periods), then every trace
    once, with every span: 80 tool.search (io), 40 llm.chat (gpu), 40 agent.run (cpu)."""
    n = 40
    children, roots = _traces(n)
    col = start_collector(tmp_path / "m.duckdb", "--metrics-quiet-s", "1", grpc="off")
    try:
        _send(col, children, per_request=30)
        _until(col, "the children are pending", lambda g: _get(g, PENDING) == n)
        time.sleep(2.5)  # past the quiet period: still no root, so nothing is complete
        early = _scrape(col)
        assert _get(early, COUNTED) == 0 and _get(early, PENDING) == n
        _send(col, roots)
        got = _until(col, "every trace counted", lambda g: _get(g, COUNTED) == n)
        time.sleep(1.5)  # more rounds of the loop: nothing may be added twice
        got = _scrape(col)
    finally:
        assert col.stop() == 0, col.lines
    assert _get(got, COUNTED) == n and _get(got, PENDING) == 0
    assert _get(got, FORCED) == 0 and _get(got, LATE) == 0
    assert _get(got, "tracelens_metrics_traces_dropped_total") == 0
    assert _calls(got, "tool.search", "io") == 2 * n
    assert _calls(got, "llm.chat", "gpu") == n
    assert _calls(got, "agent.run", "cpu") == n
    assert sum(v for (name, _), v in got.items() if name == CALLS) == 4 * n
    root = {"service": "agent", "root_operation": "agent.run"}
    assert _get(got, "tracelens_trace_duration_seconds_count", **root) == n


@pytest.mark.system
def test_past_the_open_trace_cap_the_oldest_are_counted_with_what_they_have(
    tmp_path: Path,
) -> None:
    """Cap 10, one child of each of 30 traces in one request (one merge): 20 traces are
    forced (counted with their child alone, which is then their root), 10 stay open; then the
    30 roots: 20 are late spans, 10 complete the open traces.  30 traces counted in all."""
    n, cap = 30, 10
    keep = Keep()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(keep))
    tracer = provider.get_tracer("tests", "1.0")
    for _ in range(n):
        with tracer.start_as_current_span("agent.run") as root:
            root.set_attribute("tracelens.kind", "cpu")
            with tracer.start_as_current_span("tool.search") as span:
                span.set_attribute("tracelens.kind", "io")
    provider.shutdown()
    children = [s for s in keep.spans if s.parent is not None]
    roots = [s for s in keep.spans if s.parent is None]
    col = start_collector(
        tmp_path / "m.duckdb",
        *("--metrics-quiet-s", "1", "--metrics-max-open-traces", str(cap)),
        grpc="off",
    )
    try:
        _send(col, children, per_request=n)
        forced = _until(col, "the cap forced", lambda g: _get(g, COUNTED) == n - cap)
        assert _get(forced, FORCED) == n - cap and _get(forced, PENDING) == cap
        assert _get(forced, "tracelens_metrics_pending_traces_limit") == cap
        _send(col, roots, per_request=n)
        got = _until(col, "every trace counted", lambda g: _get(g, COUNTED) == n)
        time.sleep(1.5)
        got = _scrape(col)
    finally:
        assert col.stop() == 0, col.lines
    assert _get(got, COUNTED) == n and _get(got, PENDING) == 0
    assert _get(got, FORCED) == n - cap and _get(got, LATE) == n - cap
    assert _calls(got, "tool.search", "io") == n
    assert _calls(got, "agent.run", "cpu") == cap  # the forced traces' roots came late
    assert _get(got, "tracelens_trace_duration_seconds_count", service="agent",
                root_operation="tool.search") == n - cap  # fmt: skip
