"""Cost of a ``@trace``-decorated call against a bare OpenTelemetry span, sync and async.

Both sides run in one process on one TracerProvider, with the same processors (a
BatchSpanProcessor feeding the exporter, plus the child tracker tracelens adds) and the same
exporter, so the difference is what the decorator adds: measuring (thread CPU clock per step),
fingerprinting the arguments and the result, and writing the tracelens attributes.

    python bench/overhead.py [--calls 5000] [--repeats 21] [--exporter null|file] [--clock wall|cpu]
                             [--profile]

``--clock cpu`` times the calling thread's CPU instead of wall time: on a shared, loaded machine
the wall-clock figures swing with other processes, the CPU figures much less.  Many short rounds,
the cases interleaved, keep a burst of load from landing on one case only.

Prints, per shape, the median cost per call of: the plain function, a bare
``tracer.start_as_current_span`` around it, and the decorated function; the decorator's overhead
in microseconds per call over the bare span, and the ratio decorated / bare (target: <= 1.25).

``--gpu`` adds the GPU cases (one NVIDIA GPU, torch with CUDA; skipped with a message without
one): a launch-bound loop of tiny kernels (2,000 ``add_`` on 16 floats, then a synchronize) and
large kernels (10 bf16 8192x8192 matmuls, then a synchronize), each call its own trace, timed
untraced, traced with CUPTI off (``gpu_fraction=0``: the stack rules only), with the default
fraction of traces measured (``gpu.DEFAULT_FRACTION``) and with every trace measured
(``gpu_fraction=1``).  Targets, default setting over untraced: launch-bound <= 1.10x, large
<= 1.02x; the every-trace figure is the cost of measuring a trace.

``--profile`` switches CPU stacks on (``configure(profile=True)``, ``tracelens.cpu_stacks``) for
the same per-call figures, then measures, while a traced function computes (a JSON/logging
workload 30 frames deep), the sampler thread's own CPU per second of measured span time and the
traced thread's work per CPU second, with profiling off, on with the GIL-switch stacks, on
with the perf task clock and on with the POSIX CPU timer (whose signal handler runs on the
traced thread), interleaved (target with profiling on: sampler CPU <= 2 %; the traced thread's
work is reported as a ratio to profiling off).
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
from tracelens_instrumentation import measure as tl_measure
from tracelens_instrumentation import sampler, stacks, trace
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


def _workload(depth: int, until: float) -> int:
    """CPU work ``depth`` frames below the span: JSON encoding and log formatting."""
    if depth > 0:
        return _workload(depth - 1, until)
    import json
    import logging

    record = logging.LogRecord("bench", logging.INFO, __file__, 1, "step %s %s", (1, "x"), None)
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    data = [{"id": i, "text": "x" * 40, "tags": list(range(10))} for i in range(20)]
    n = 0
    while time.thread_time() < until:
        json.dumps(data)
        formatter.format(record)
        n += 1
    return n


@trace(name="compute")
def compute(seconds: float, depth: int) -> int:
    return _workload(depth, time.thread_time() + seconds)


SAMPLER_SETTINGS = (
    "profiling off",
    "on, GIL-switch stacks",
    "on, perf task clock",
    "on, POSIX CPU timer",
)


def sampler_cost(seconds: float, repeats: int, depth: int) -> dict[str, tuple[float, float]]:
    """Per setting (``SAMPLER_SETTINGS``), medians of: the sampler thread's CPU per second of
    measured span wall time, and the traced thread's work per CPU second (the CPU-clock timer's
    signal handler runs on that thread, so its cost shows there, not in the sampler's CPU)."""
    compute(0.05, depth)  # starts the sampler thread
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in SAMPLER_SETTINGS}
    for _ in range(repeats):
        for setting in SAMPLER_SETTINGS:
            stacks.ENABLED[0] = setting != SAMPLER_SETTINGS[0]
            timed = setting in SAMPLER_SETTINGS[2:]
            sampler.use_timer(False)  # (disarms every thread: the next tick arms it anew)
            if timed and not sampler.use_timer(True):
                continue  # no CPU-clock samples here (not CPython 3.11 on Linux, SIGPROF taken)
            if timed and sampler._TIMER is not None:
                sampler._TIMER.use_perf(setting == SAMPLER_SETTINGS[2])
            thread = sampler._thread
            assert thread is not None and thread.native_id is not None
            before = tl_measure.other_thread_cpu(thread.native_id)
            start, cpu0 = time.perf_counter_ns(), time.thread_time_ns()
            work = compute(seconds, depth)
            wall, cpu = time.perf_counter_ns() - start, time.thread_time_ns() - cpu0
            after = tl_measure.other_thread_cpu(thread.native_id)
            if before is None or after is None:
                raise SystemExit("the sampler's CPU clock cannot be read here (Linux only)")
            samples[setting].append(((after - before) / wall, work / cpu * 1e9))
    sampler.use_timer(True)
    if sampler._TIMER is not None:
        sampler._TIMER.use_perf(True)
    return {
        k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v))
        for k, v in samples.items()
        if v
    }


def report_sampler(costs: dict[str, tuple[float, float]], seconds: float, depth: int) -> bool:
    print(f"sampler, a {seconds:.1f} s CPU-bound span {depth} frames deep (5 ms ticks):")
    base = costs[SAMPLER_SETTINGS[0]][1]
    for setting, (cpu, rate) in costs.items():
        print(f"  {setting:24s} sampler CPU {cpu:7.2%} of the span's time; traced thread "
              f"{rate:9.0f} iterations per CPU s ({rate / base:6.3f}x profiling off)")  # fmt: skip
    on = max(cpu for k, (cpu, _) in costs.items() if k != SAMPLER_SETTINGS[0])
    print(f"  target: sampler CPU <= 2% with profiling on (worst: {on:.2%})")
    return on <= 0.02


GPU_TARGETS = {"launch-bound": 1.10, "large kernels": 1.02}


def gpu_cases(rounds: int) -> bool | None:
    """The GPU figures (see the module docstring); None when there is no GPU to run them on."""
    try:
        import torch
    except ImportError:
        print("GPU cases skipped: torch is not installed")
        return None
    if not torch.cuda.is_available():
        print("GPU cases skipped: no CUDA device (torch.cuda.is_available() is False)")
        return None
    from tracelens_instrumentation import gpu

    small = torch.ones(16, device="cuda")
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def launch_bound() -> None:
        for _ in range(2000):
            small.add_(1)
        torch.cuda.synchronize()

    def large() -> None:
        for _ in range(10):
            big @ big
        torch.cuda.synchronize()

    started = gpu.start()
    print(f"GPU: {torch.cuda.get_device_name()}; CUPTI collector {gpu.STATE['status']}"
          f"{' (' + gpu.STATE['reason'] + ')' if gpu.STATE['reason'] else ''}")  # fmt: skip
    settings = {"untraced": None, "CUPTI off (stacks)": 0.0,
                f"default ({gpu.DEFAULT_FRACTION:g} of traces)": gpu.DEFAULT_FRACTION,
                "every trace": 1.0}  # fmt: skip
    ok = started
    for name, fn in (("launch-bound", launch_bound), ("large kernels", large)):
        traced = trace(name=name.replace(" ", "_"))(fn)
        fn()
        traced()  # warm-up
        per: dict[str, list[float]] = {k: [] for k in settings}
        for _ in range(rounds):
            for setting, fraction in settings.items():
                if fraction is not None:
                    gpu.set_fraction(fraction)
                run = fn if fraction is None else traced
                t = time.perf_counter_ns()
                for _ in range(10):
                    run()
                per[setting].append((time.perf_counter_ns() - t) / 10 / 1000)
        gpu.flush()
        base = statistics.median(per["untraced"])
        print(f"{name}: untraced {base:.1f} us per call")
        for setting in list(settings)[1:]:
            # the mean: with a fraction of traces measured, the cost is spread over all calls
            value = statistics.fmean(per[setting])
            ratio = value / base
            line = f"  {setting:28s} {value:10.1f} us  {ratio:6.3f}x"
            if setting.startswith("default"):
                target = GPU_TARGETS[name]
                ok = ok and ratio <= target
                line += f"   (target <= {target:.2f}x)"
            print(line)
    gpu.set_fraction(gpu.DEFAULT_FRACTION)
    if not started:
        print("FAIL: the CUPTI collector did not start; the measured figures are not CUPTI's")
    return ok


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
    parser.add_argument(
        "--profile",
        action="store_true",
        help="CPU stacks on (configure(profile=True)); also print the sampler's CPU cost",
    )
    parser.add_argument("--span-seconds", type=float, default=1.0)
    parser.add_argument("--gpu", action="store_true", help="also the GPU cases (needs a GPU)")
    parser.add_argument("--gpu-only", action="store_true", help="only the GPU cases")
    parser.add_argument("--gpu-rounds", type=int, default=15)
    args = parser.parse_args(argv)
    stacks.ENABLED[0] = args.profile
    counter = itertools.count(1_000_000_000)

    def arg() -> int:
        return next(counter) if args.fresh_args else 1

    global clock
    clock = CLOCK[args.clock]
    tracer, close = setup(args.exporter)
    if args.gpu_only:
        got = gpu_cases(args.gpu_rounds)
        close()
        return 0 if got is None or got else 1

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
        f"profiling {'on' if args.profile else 'off'}; "
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
    within = max(ratios) <= 1.25
    if args.profile:
        costs = sampler_cost(args.span_seconds, max(3, args.repeats // 4), depth=30)
        within = report_sampler(costs, args.span_seconds, 30) and within
    if args.gpu:
        got = gpu_cases(args.gpu_rounds)
        within = within and (got is None or got)
    close()
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
