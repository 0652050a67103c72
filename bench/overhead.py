"""Cost of a ``@trace``-decorated call against a bare OpenTelemetry span, sync and async.

Both sides run in one process on one TracerProvider, with the same processors (a
BatchSpanProcessor feeding the exporter, plus the child tracker tracelens adds) and the same
exporter, so the difference is what the decorator adds: measuring (thread CPU clock per step),
fingerprinting the arguments and the result, and writing the tracelens attributes.

    python bench/overhead.py [--calls 5000] [--repeats 21] [--exporter null|file] [--clock wall|cpu]

``--clock cpu`` times the calling thread's CPU instead of wall time: on a shared, loaded machine
the wall-clock figures swing with other processes, the CPU figures much less.  Many short rounds,
the cases interleaved, keep a burst of load from landing on one case only.

Prints, per shape, the median cost per call of: the plain function, a bare
``tracer.start_as_current_span`` around it, and the decorated function; the decorator's overhead
in microseconds per call over the bare span, and the ratio decorated / bare (target: <= 1.25).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from tracelens_instrumentation import trace
from tracelens_instrumentation.jsonl import OTLPJsonLinesExporter


class NullExporter(SpanExporter):
    """Drops batches: the export path costs the same for both sides and is off the hot path."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def plain(a: int, b: str) -> int:
    return a + len(b)


async def plain_async(a: int, b: str) -> int:
    return a + len(b)


decorated = trace(name="plain")(plain)
decorated_async = trace(name="plain_async")(plain_async)


def setup(exporter_name: str) -> tuple[Any, Callable[[], None]]:
    if exporter_name == "file":
        tmp = tempfile.TemporaryDirectory()
        exporter: SpanExporter = OTLPJsonLinesExporter(Path(tmp.name) / "spans.jsonl")
    else:
        tmp = None
        exporter = NullExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1 << 16))
    otel_trace.set_tracer_provider(provider)
    decorated(1, "x")  # activates tracelens on this provider (adds its child tracker)

    def close() -> None:
        provider.shutdown()
        if tmp is not None:
            tmp.cleanup()

    return provider.get_tracer("bench"), close


CLOCK = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}
clock = CLOCK["wall"]


def time_sync(fn: Callable[[], Any], calls: int) -> float:
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) / calls / 1000


def time_async(fn: Callable[[], Awaitable[Any]], calls: int) -> float:
    async def run() -> float:
        start = clock()
        for _ in range(calls):
            await fn()
        return (clock() - start) / calls / 1000

    return asyncio.run(run())


def measure(
    cases: dict[str, Callable[[], Any]], timer: Callable[..., float], calls: int, repeats: int
) -> dict[str, float]:
    """Median microseconds per call of each case, the cases interleaved round by round."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for fn in cases.values():  # warm-up
        timer(fn, max(1, calls // 10))
    for _ in range(repeats):
        for name, fn in cases.items():
            samples[name].append(timer(fn, calls))
    return {name: statistics.median(values) for name, values in samples.items()}


def report(shape: str, medians: dict[str, float]) -> float:
    base, bare, ours = medians["plain"], medians["bare span"], medians["@trace"]
    ratio = ours / bare
    print(f"{shape}:")
    print(f"  plain call          {base:8.2f} us")
    print(f"  bare span           {bare:8.2f} us")
    print(f"  @trace              {ours:8.2f} us")
    print(f"  overhead vs bare    {ours - bare:+8.2f} us per call")
    print(f"  ratio @trace / bare {ratio:8.2f}x   (target <= 1.25x)")
    return ratio


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--exporter", choices=("null", "file"), default="null")
    parser.add_argument("--clock", choices=tuple(CLOCK), default="wall")
    parser.add_argument(
        "--fresh-args",
        action="store_true",
        help="a new argument value on every call (no fingerprint cache hits)",
    )
    args = parser.parse_args(argv)
    counter = itertools.count(1_000_000_000)

    def arg() -> int:
        return next(counter) if args.fresh_args else 1

    global clock
    clock = CLOCK[args.clock]
    tracer, close = setup(args.exporter)

    def bare() -> int:
        with tracer.start_as_current_span("plain"):
            return plain(arg(), "x")

    async def bare_async() -> int:
        with tracer.start_as_current_span("plain_async"):
            return await plain_async(arg(), "x")

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"python {sys.version.split()[0]}, {args.calls} calls x {args.repeats} repeats, "
        f"BatchSpanProcessor + {args.exporter} exporter; {args.clock} clock medians; "
        f"{'fresh' if args.fresh_args else 'repeated'} arguments; "
        f"load average {load} on {os.cpu_count()} CPUs"
    )
    sync_cases = {
        "plain": lambda: plain(arg(), "x"),
        "bare span": bare,
        "@trace": lambda: decorated(arg(), "x"),
    }
    async_cases = {
        "plain": lambda: plain_async(arg(), "x"),
        "bare span": bare_async,
        "@trace": lambda: decorated_async(arg(), "x"),
    }
    ratios = [
        report("sync", measure(sync_cases, time_sync, args.calls, args.repeats)),
        report("async", measure(async_cases, time_async, args.calls, args.repeats)),
    ]
    close()
    return 0 if max(ratios) <= 1.25 else 1


if __name__ == "__main__":
    sys.exit(main())
