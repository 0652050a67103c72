"""CPU stacks sampled by each thread's own CPU clock (``_cpusample.c``, ``sampler._charge``).

Real threads, real timers and signals, real spans.  The truths: each thread's CPU clock (its
samples' weights add up to about the CPU its spans used, whatever another thread does), the
code each part of a traced call runs (a child span's work in the child's stacks, the parent's
own work in the parent's), and the host's own SIGPROF handler (left alone: tracelens falls back
to the GIL-switch stacks and says so).  The stress case runs, in a subprocess, the shapes whose
frames live outside the thread's frame stack or move between its chunks (generators, coroutines,
recursion across chunk boundaries, exceptions, several threads): it must exit cleanly with
samples read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_instrumentation_helpers import attrs, named, ok, run_python, spans, spin
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation import sampler, stacks, trace

__all__ = ["spans"]  # fixture, imported for pytest

pytestmark = [
    pytest.mark.measures,
    pytest.mark.skipif(
        sampler._TIMER is None or not sampler._TIMER.supported(),
        reason="the CPU-clock sampler needs CPython 3.11 on Linux (elsewhere: GIL-switch stacks)",
    ),
]

HELPERS = """
import sys, time
sys.path.insert(0, "tests")
from test_instrumentation_helpers import provider, _exporter
from tracelens_instrumentation import _runtime, sampler, stacks, trace
_runtime.activate(provider())
stacks.ENABLED[0] = True
"""


def stack_us(a: dict[str, object], needle: str = "") -> int:
    """Microseconds of the span's folded stacks (those with a frame containing ``needle``)."""
    lines = a.get(A.CPU_STACKS, ())
    assert isinstance(lines, tuple)
    total = 0
    for line in lines:
        stack, us = str(line).rsplit(" ", 1)
        if needle in stack:
            total += int(us)
    return total


@pytest.fixture
def profiling() -> object:
    before = stacks.ENABLED[0]
    stacks.ENABLED[0] = True
    yield None
    stacks.ENABLED[0] = before


def burn(ms: float) -> int:
    return spin(ms)


@pytest.fixture(params=["perf", "posix"])
def clock(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both clocks a thread can be sampled by: its perf task clock, a POSIX CPU timer."""
    timer = sampler._TIMER
    assert timer is not None
    timer.use_perf(request.param == "perf")
    yield request.param
    timer.use_perf(True)


def test_each_thread_is_sampled_by_its_own_cpu(
    spans: InMemorySpanExporter, profiling: object, clock: str
) -> None:
    """A thread that computes 300 ms and one that mostly sleeps (50 ms of CPU in 250 ms) run at
    once: each span's stacks weigh about its own thread's CPU, not the wall time or the other's
    (at most its CPU; at least half of it: a thread is armed at the first tick that sees it,
    which a loaded machine can delay by tens of milliseconds)."""
    sources: list[str | None] = []

    @trace
    def busy() -> None:
        burn(300)
        sources.append(sampler._TIMER.source(threading.get_native_id()))  # type: ignore[union-attr]

    @trace
    def sleepy() -> None:
        for _ in range(10):
            burn(5)
            time.sleep(0.02)

    threads = [threading.Thread(target=busy), threading.Thread(target=sleepy)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sampler.timer_state() == "cpu-clock"
    # perf where the kernel allows it (perf_event_paranoid <= 2 here); else the POSIX timer
    assert sources == [{"perf": "perf", "posix": "timer"}[clock]], sources
    for name in ("busy", "sleepy"):
        a = attrs(named(spans, name))
        cpu_us = a[A.CPU_NS] / 1000
        got = stack_us(a, "burn")
        state = (sampler._failed, sampler._TIMER.stats())  # type: ignore[union-attr]
        assert 0.5 * cpu_us - 10_000 <= got <= cpu_us + 10_000, (name, got, cpu_us, state)


def test_nested_spans_each_get_their_own_code(
    spans: InMemorySpanExporter, profiling: object
) -> None:
    def parent_work() -> int:
        return spin(150)

    def child_work() -> int:
        return spin(150)

    @trace
    def child() -> None:
        child_work()

    @trace
    def parent() -> None:
        parent_work()
        child()
        parent_work()

    parent()
    p, c = attrs(named(spans, "parent")), attrs(named(spans, "child"))
    # The child's samples after the last tick before it ended go to the parent: under load a
    # tick comes every 5 ms of sleep plus up to 5 ms waiting for the GIL, so up to ~2 of those;
    # the parent's first tick arms the thread (its CPU before: no samples); ~60 samples each
    assert stack_us(c, ".child_work;") >= 100_000, c.get(A.CPU_STACKS)
    assert stack_us(c, ".parent_work;") == 0, c.get(A.CPU_STACKS)
    assert stack_us(p, ".parent_work;") >= 200_000, p.get(A.CPU_STACKS)
    assert stack_us(p, ".child_work;") <= 50_000, p.get(A.CPU_STACKS)


def test_a_host_sigprof_handler_is_left_alone() -> None:
    code = (
        HELPERS
        + """
import signal, logging
logging.basicConfig(level=logging.WARNING)
hits = []
signal.signal(signal.SIGPROF, lambda *a: hits.append(1))

@trace
def work():
    end = time.thread_time() + 0.3
    while time.thread_time() < end:
        pass

work()
span = [s for s in _exporter.get_finished_spans() if s.name.endswith("work")][0]
print(sampler.timer_state(), signal.getsignal(signal.SIGPROF).__name__,
      "cpu_stacks" if span.attributes.get("tracelens.cpu_stacks") else "none")
"""
    )
    result = run_python(code)
    assert ok(result).split() == ["gil-switch", "<lambda>", "cpu_stacks"], result
    assert "SIGPROF" in result.stderr, result.stderr


def test_sigprof_untouched_while_stacks_are_off() -> None:
    """Measured spans with CPU stacks off (``profile=False``) leave SIGPROF as the host had it:
    the handler is installed at the first tick with stacks on, not when tracing starts."""
    code = (
        HELPERS.replace("stacks.ENABLED[0] = True", "stacks.ENABLED[0] = False")
        + """
@trace
def work():
    end = time.thread_time() + 0.2
    while time.thread_time() < end:
        pass

work()
before = sampler._TIMER.owned()
stacks.ENABLED[0] = True
work()
print(before, sampler._TIMER.owned(), sampler.timer_state())
"""
    )
    result = run_python(code)
    # (owned(): whether the process's SIGPROF handler is tracelens's, read by sigaction)
    assert ok(result).split() == ["False", "True", "cpu-clock"], result


@pytest.mark.parametrize(("setting", "state"), [("0", "gil-switch"), ("posix", "cpu-clock")])
def test_chosen_by_environment(monkeypatch: pytest.MonkeyPatch, setting: str, state: str) -> None:
    """``TRACELENS_CPU_TIMER`` as read when the handler is installed (``_timer_install``)."""
    monkeypatch.setenv("TRACELENS_CPU_TIMER", setting)
    sampler.use_timer(False)
    try:
        sampler._timer_install()
        assert sampler.timer_state() == state
    finally:
        monkeypatch.undo()
        sampler.use_timer(True)  # (as the environment says now: the perf clock first)


def test_stress_generators_coroutines_deep_recursion_threads() -> None:
    """Frames outside the frame stack, frames crossing its chunks, unwinding, three threads."""
    code = (
        HELPERS
        + """
import asyncio, threading

def deep(n):
    if n == 0:
        return sum(i * i for i in range(200))
    try:
        return deep(n - 1) + 1
    finally:
        pass

def gen(n):
    for i in range(n):
        yield deep(i % 400)

async def co(n):
    total = 0
    for i in range(n):
        total += deep(i % 300)
        if i % 20 == 0:
            await asyncio.sleep(0)
    return total

def fails(n):
    if n == 0:
        raise ValueError
    return fails(n - 1)

@trace
def step(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(gen(60))
        asyncio.run(co(60))
        try:
            fails(500)
        except ValueError:
            pass

threads = [threading.Thread(target=step, args=(0.15,)) for _ in range(2)]
for t in threads:
    t.start()
step(0.15)
for t in threads:
    t.join()
taken, dropped, unreadable = sampler._TIMER.stats()
with_stacks = sum(1 for s in _exporter.get_finished_spans()
                  if s.attributes.get("tracelens.cpu_stacks"))
print(sampler.timer_state(), taken > 40, with_stacks)
"""
    )
    result = run_python(code, timeout=120)
    assert ok(result).split() == ["cpu-clock", "True", "3"], result
