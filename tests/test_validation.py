"""The replay's projections against reality: apply the reported change for real and measure.

A purpose-built asyncio agent, traced with ``@trace`` into the real OpenTelemetry SDK: run it
with its hops in sequence, take the parallelizable finding, run it again with exactly those
hops under ``asyncio.gather``, and compare the measured p50 saving with the projected one.  The
same for a cacheable finding: run again with a cache in front of exactly the reported calls.
Hops sleep 20-60 ms and each variant runs 10 requests, so the test takes a few seconds; medians
keep it steady on a noisy 2-core machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import numpy as np
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_instrumentation_helpers import spans
from tracelens_instrumentation import trace

from tracelens.analysis import analyze_traces
from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.findings import FindingType, find_all
from tracelens.ingest import read_bytes
from tracelens.render.json import finding_json

__all__ = ["spans"]  # the fixture, imported for pytest

REQUESTS = 10
TOLERANCE = 0.20


@trace(kind="io")
async def fetch_schema(q: str) -> str:
    await asyncio.sleep(0.030)
    return f"schema for {q}"


@trace(kind="io")
async def fetch_logs(q: str) -> str:
    await asyncio.sleep(0.050)
    return f"logs for {q}"


@trace(kind="io")
async def search_docs(q: str) -> str:
    await asyncio.sleep(0.040)
    return f"docs for {q}"


@trace(kind="io")
async def summarise(a: str, b: str, c: str) -> str:
    await asyncio.sleep(0.020)
    return a + b + c


HOPS: dict[str, Callable[[str], Awaitable[str]]] = {
    "fetch_schema": fetch_schema,
    "fetch_logs": fetch_logs,
    "search_docs": search_docs,
}


@trace
async def handle(q: str, together: frozenset[str]) -> str:
    """Gathers the hops named in ``together``, awaits the others one by one."""
    out: dict[str, str] = {}
    names = list(HOPS)
    batch = [n for n in names if n in together]
    if batch:
        for n, v in zip(batch, await asyncio.gather(*(HOPS[n](q) for n in batch)), strict=True):
            out[n] = v
    for n in names:
        if n not in together:
            out[n] = await HOPS[n](q)
    return await summarise(out["fetch_schema"], out["fetch_logs"], out["search_docs"])


@trace(kind="io")
async def get_config(version: str) -> dict[str, str]:
    await asyncio.sleep(0.040)
    return {"version": version, "model": "m"}


@trace(kind="io")
async def answer(q: str, config: dict[str, str]) -> str:
    await asyncio.sleep(0.020)
    return f"{q} with {config['model']}"


async def _cached(
    fn: Callable[[str], Awaitable[Any]], arg: str, cache: dict[tuple[str, str], Any] | None
) -> Any:
    if cache is None:
        return await fn(arg)
    key = (fn.__name__, arg)
    if key not in cache:
        cache[key] = await fn(arg)
    return cache[key]


@trace
async def handle_config(q: str, cache: dict[tuple[str, str], Any] | None) -> str:
    config = await _cached(get_config, "v1", cache)
    check = await _cached(get_config, "v1", cache)  # asks again for the same thing
    assert check == config
    return await answer(q, config)


def _analysed(exporter: InMemorySpanExporter) -> TraceAnalysis:
    data = encode_spans(exporter.get_finished_spans()).SerializeToString()
    exporter.clear()
    return analyze_traces(read_bytes(data, "in-memory spans", "otlp-proto"))


def _run(
    requests: Callable[[], Coroutine[Any, Any, None]], exporter: InMemorySpanExporter
) -> TraceAnalysis:
    exporter.clear()
    asyncio.run(requests())
    return _analysed(exporter)


def _p50_ms(ta: TraceAnalysis) -> float:
    return float(np.median(ta.traces["duration_ns"].to_numpy())) / 1e6


def test_applying_the_parallelization_saves_what_the_replay_projected(
    spans: InMemorySpanExporter,
) -> None:
    async def requests(together: frozenset[str]) -> None:
        for k in range(REQUESTS):
            await handle(f"q{k}", together)

    before = _run(lambda: requests(frozenset()), spans)
    found = [finding_json(f) for f in find_all(before) if f.type is FindingType.PARALLELIZABLE]
    assert len(found) == 1, found
    finding = found[0]
    assert set(finding["names"]) == set(HOPS)  # summarise consumes their results: not in it
    assert finding["confidence"] == "high"
    after = _run(lambda: requests(frozenset(finding["names"])), spans)
    measured = _p50_ms(before) - _p50_ms(after)
    projected = finding["saving_ms"]["p50"]
    assert measured > 50  # 120 ms of hops became 50 ms
    assert abs(projected - measured) <= TOLERANCE * measured, (projected, measured)
    assert finding["projected_latency_ms"]["p50"] <= _p50_ms(before)


def test_applying_the_cache_saves_what_the_replay_projected(
    spans: InMemorySpanExporter,
) -> None:
    async def requests(cache: dict[tuple[str, str], Any] | None) -> None:
        for k in range(REQUESTS):
            await handle_config(f"q{k}", cache)

    before = _run(lambda: requests(None), spans)
    found = [finding_json(f) for f in find_all(before) if f.type is FindingType.CACHEABLE]
    assert [f["names"] for f in found] == [["get_config"]]
    finding = found[0]
    assert finding["identical_results"] is True
    assert finding["occurrences"] == 2 * REQUESTS - 1  # every call after the very first
    after = _run(lambda: requests({}), spans)
    measured = _p50_ms(before) - _p50_ms(after)
    projected = finding["saving_ms"]["p50"]
    assert measured > 60  # two 40 ms lookups became none (after the first request)
    assert abs(projected - measured) <= TOLERANCE * measured, (projected, measured)
