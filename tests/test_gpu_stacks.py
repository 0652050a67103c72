"""Device waits seen in the stacks, and waiting for the GIL measured, on real threads sampled
by the real sampler.

No GPU here: the device-wait calls are stand-ins, real functions whose code objects carry the
module and qualified name of the table's entries (``classify.DEVICE_WAITS``), compiled into a
module namespace of that name.  ``torch.cuda.synchronize`` under CUDA's default scheduling
spins on the CPU until the device is done; under blocking sync it sleeps in the driver: the two
stand-ins do the same for a known time, which is the truth (clocks around them).

The GIL: a C call that releases the GIL and blocks, with a name no rule knows (``hold``, an
alias of ``time.sleep``), is neither CPU nor GIL time when no other Python thread runs; with a
real contending thread computing meanwhile, the part charged to the CPU side is bounded by the
time the other Python threads ran or were runnable (the kernel's schedstat of each).
"""

from __future__ import annotations

import sys
import threading
import time
import types
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_instrumentation_helpers import attrs, named, spans, spin
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation import classify, stacks, trace

__all__ = ["spans"]  # fixture, imported for pytest

pytestmark = [
    pytest.mark.measures,
    pytest.mark.skipif(
        not sys.platform.startswith("linux"),
        reason="the sampler reads per-thread CPU clocks (Linux)",
    ),
]

STAND_INS = '''
import time

def synchronize(device=None):
    """CUDA's default: the host thread spins until the device is done."""
    end = time.thread_time() + SPIN_S
    while time.thread_time() < end:
        pass

class Event:
    def synchronize(self):
        """cudaDeviceScheduleBlockingSync: the thread sleeps in the driver."""
        time.sleep(BLOCK_S)

class ArrayImpl:
    def block_until_ready(self):
        time.sleep(BLOCK_S)
        return self
'''


def stand_in(module: str, spin_s: float = 0.3, block_s: float = 0.3) -> types.ModuleType:
    mod = types.ModuleType(module)  # never put in sys.modules: nothing else sees it
    mod.__dict__.update(SPIN_S=spin_s, BLOCK_S=block_s)
    exec(compile(STAND_INS, f"<{module}>", "exec"), mod.__dict__)
    return mod


cuda = stand_in("torch.cuda")
streams = stand_in("torch.cuda.streams")
jax_array = stand_in("jax._src.array")


def test_the_table_names_the_stand_ins() -> None:
    names = {
        (cuda.__name__, cuda.synchronize.__qualname__),
        (streams.__name__, streams.Event.synchronize.__qualname__),
        (jax_array.__name__, jax_array.ArrayImpl.block_until_ready.__qualname__),
    }
    assert names <= classify.DEVICE_WAITS


def cpu_side(a: dict[str, Any], wall: int) -> int:
    return wall - a[A.IO_NS] - a[A.WAIT_NS] - a.get(A.GPU_WAIT_NS, 0)


def test_spinning_synchronize_is_gpu_and_not_a_hotspot(spans: InMemorySpanExporter) -> None:
    before = stacks.ENABLED[0]
    stacks.ENABLED[0] = True
    truth: dict[str, int] = {}

    @trace
    def gpu_step() -> None:
        truth["host"] = spin(60)
        t = time.perf_counter_ns()
        cuda.synchronize()
        truth["sync"] = time.perf_counter_ns() - t  # the host waited this long, on-CPU or not

    try:
        gpu_step()
    finally:
        stacks.ENABLED[0] = before
    span = named(spans, "gpu_step")
    a = attrs(span)
    assert span.end_time is not None and span.start_time is not None
    wall = span.end_time - span.start_time
    assert a[A.KIND] == A.GPU, a
    assert a[A.GPU_SOURCE] == A.GPU_SOURCE_STACKS
    # sampled every 5 ms: within two ticks and 15 % of the call's wall time
    assert abs(a[A.GPU_WAIT_NS] - truth["sync"]) < max(10e6, 0.15 * truth["sync"]), (a, truth)
    assert cpu_side(a, wall) < truth["host"] + 0.15 * truth["sync"], (a, truth)
    profile = a.get(A.CPU_STACKS, ())
    assert not any("torch.cuda:synchronize" in line for line in profile), profile


@pytest.mark.parametrize(
    "call",
    [lambda: streams.Event().synchronize(), lambda: jax_array.ArrayImpl().block_until_ready()],
    ids=["torch.cuda.Event.synchronize", "jax.Array.block_until_ready"],
)
def test_blocking_device_wait_is_gpu_not_wait(spans: InMemorySpanExporter, call: Any) -> None:
    @trace
    def blocking_step() -> None:
        call()

    t = time.perf_counter_ns()
    blocking_step()
    truth = time.perf_counter_ns() - t
    a = attrs(named(spans, "blocking_step"))
    assert a[A.KIND] == A.GPU, a
    assert a[A.GPU_WAIT_NS] > 0.8 * truth, (a, truth)
    assert a[A.WAIT_NS] < 0.2 * truth, a


def test_unnamed_blocking_c_call_alone_is_not_cpu(spans: InMemorySpanExporter) -> None:
    hold = time.sleep  # releases the GIL and blocks; no rule knows the name "hold"

    @trace
    def blocked() -> None:
        hold(0.3)

    blocked()
    span = named(spans, "blocked")
    a = attrs(span)
    assert span.end_time is not None and span.start_time is not None
    wall = span.end_time - span.start_time
    assert a[A.KIND] == A.WAIT, a
    assert cpu_side(a, wall) < 0.1 * wall, a  # no other Python thread ran: no GIL wait


def schedstat(tid: int) -> int:
    """The kernel's own account of a thread: ns on a CPU plus ns runnable waiting for one."""
    with open(f"/proc/self/task/{tid}/schedstat") as fh:
        on_cpu, run_delay = fh.read().split()[:2]
    return int(on_cpu) + int(run_delay)


def test_gil_share_is_bounded_by_the_contending_thread(spans: InMemorySpanExporter) -> None:
    hold = time.sleep
    stop = threading.Event()
    used: list[int] = []

    def contender() -> None:
        # computes a fifth of the time: 2 ms of Python, then 8 ms asleep
        t = time.thread_time_ns()
        while not stop.is_set():
            spin(2)
            time.sleep(0.008)
        used.append(time.thread_time_ns() - t)

    @trace
    def blocked_beside_a_busy_thread() -> None:
        hold(0.4)  # blocked in C, the GIL released

    worker = threading.Thread(target=contender)
    worker.start()
    try:
        time.sleep(0.02)
        others = [t.native_id for t in threading.enumerate() if t is not threading.current_thread()]
        before = sum(schedstat(t) for t in others if t)
        blocked_beside_a_busy_thread()
        after = sum(schedstat(t) for t in others if t)
    finally:
        stop.set()
        worker.join()
    span = named(spans, "blocked_beside_a_busy_thread")
    a = attrs(span)
    assert span.end_time is not None and span.start_time is not None
    wall = span.end_time - span.start_time
    gil = cpu_side(a, wall) - a[A.CPU_NS]  # the CPU side beyond the span's own CPU
    ran = after - before  # the other Python threads (contender, sampler): on a CPU or runnable
    assert ran < 0.8 * wall, (ran, wall)  # the workload's shape: they left room
    # never more GIL wait than the others ran (one tick of slack at each end)
    assert gil <= ran + 10e6, (a, ran, wall)
    # the rest is the blocking call's (wait): not all of it assumed to be the GIL
    assert a[A.WAIT_NS] >= wall - ran - a[A.CPU_NS] - 20e6, (a, ran, wall)
    assert a[A.KIND] == A.WAIT, (a, ran, wall)
