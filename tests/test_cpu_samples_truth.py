"""CPU samples in proportion to CPU: the flame-graph truth at 5 points.

One traced step alternates a C-heavy function (``json.dumps``, which holds the GIL for long
stretches), a pure-Python loop and a generator-heavy function; each part is timed with
``thread_time`` around blocks of calls (the truth).  The span's ``tracelens.cpu_stacks``
must give each part its share within 5 percentage points.  The stacks are sampled by the
thread's own CPU clock (``_cpusample.c``: a timer per thread, its signal handler copies the
stack wherever the thread is).  The sampler thread's own stacks, read where the thread yields
the GIL (the fallback), failed this test on 2026-12-06's VM: the generator got 0-12% against
15% (its body ``gen_items`` 1% of the weight against 9% by the CPU clock), the step's own frame
3-8% against 1%, and JSON up to 86% against 72%.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_instrumentation_helpers import named, spans
from tracelens_instrumentation import sampler, stacks, trace

__all__ = ["spans"]  # fixture, imported for pytest

pytestmark = [
    pytest.mark.measures,
    pytest.mark.skipif(
        sampler._TIMER is None or not sampler._TIMER.supported(),
        reason="CPU-clock samples need CPython 3.11 on Linux (elsewhere: GIL-switch stacks)",
    ),
]
TOLERANCE = 0.05
DOCS = [
    {"id": i, "title": f"doc {i}", "body": "lorem ipsum " * 8, "score": i / 7,
     "tags": ["a", "b", "c"], "meta": {"n": i, "ok": True}}
    for i in range(24)
]  # fmt: skip


def own_math(n: int) -> int:
    total = 0
    for i in range(n):
        total += (i * i) % 7
    return total


def gen_items(n: int) -> Iterator[int]:
    for i in range(n):
        yield i * 3 % 11


def consume_gen(n: int) -> int:
    return sum(x for x in gen_items(n))


def run_once(exporter: InMemorySpanExporter) -> tuple[dict[str, float], dict[str, float]]:
    tt = time.thread_time_ns
    truth: Counter[str] = Counter()

    @trace
    def mixed_step(cpu_s: float) -> None:
        start = tt()
        while tt() - start < cpu_s * 1e9:
            a = tt()
            for _ in range(6):
                json.dumps(DOCS)
            b = tt()
            own_math(1200)
            c = tt()
            consume_gen(1000)
            d = tt()
            truth["json"] += b - a
            truth["loop"] += c - b
            truth["gen"] += d - c

    exporter.clear()
    mixed_step(2.0)
    attrs = dict(named(exporter, "mixed_step").attributes or {})
    lines = attrs["tracelens.cpu_stacks"]
    assert isinstance(lines, tuple), attrs
    got: Counter[str] = Counter()
    for line in lines:
        stack, us = str(line).rsplit(" ", 1)
        frames = stack.split(";")
        if any(f.startswith("json") for f in frames):
            got["json"] += int(us)
        elif any("gen_items" in f or "consume_gen" in f for f in frames):
            got["gen"] += int(us)
        elif any("own_math" in f for f in frames):
            got["loop"] += int(us)
        else:
            got["other"] += int(us)
    # Shares of the three parts, on both sides: the truth does not time the step's own lines
    # between the blocks (the clock reads, the sums), which the samples see in ``other``.
    parts = ("json", "loop", "gen")
    total_truth = sum(truth.values())
    total = sum(got[k] for k in parts)
    want = {k: truth[k] / total_truth for k in parts}
    return want, {**{k: got[k] / total for k in parts}, "other": got["other"] / sum(got.values())}


def test_shares_within_5_points(spans: InMemorySpanExporter) -> None:
    before, every = stacks.ENABLED[0], sampler.TIMER_NS[0]
    stacks.ENABLED[0] = True
    # A sample every 2 ms of CPU on average (5 by default): ~1000 in the 2 s step, so that the
    # sampling error of a 72% share is ~1.4 points (at 5 ms, ~400 samples: 2.3-3.3 points
    # measured over runs, and 1 run in 7 beyond 5 points; README "CPU stacks")
    sampler.TIMER_NS[0] = 2_000_000
    sampler.use_timer(False)  # (re-armed at the next tick, with that period)
    sampler.use_timer(True)
    try:
        # A loaded machine (other processes taking the cores mid-run) gets two more tries;
        # wrong three times fails.
        for _ in range(3):
            want, got = run_once(spans)
            if all(abs(got[k] - want[k]) <= TOLERANCE for k in want):
                break
    finally:
        stacks.ENABLED[0] = before
        sampler.TIMER_NS[0] = every
        sampler.use_timer(False)
        sampler.use_timer(True)
    assert want["json"] > 0.5 and want["loop"] > 0.05 and want["gen"] > 0.05, want  # the shape
    assert got["other"] < 0.05, got  # the step's own lines: about 1-2% by the CPU clock
    assert sampler.timer_state() == "cpu-clock"  # (GIL-switch stacks do not hold this truth)
    for k in want:
        assert abs(got[k] - want[k]) <= TOLERANCE, (k, want, got)
