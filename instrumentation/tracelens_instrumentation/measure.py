"""Per-span bookkeeping of on-CPU time and of off-CPU time split into io and wait.

A ``Record`` lives as long as one span of the decorator.  Its execution comes in *steps*: the
whole call for a plain function, each ``send`` for a coroutine or generator.  On-CPU time is the
thread CPU clock summed over steps, so a coroutine is not charged for the time it sits suspended
(nor for other tasks that run meanwhile), and a generator only while it runs.

*Self time* is the span's duration minus the time covered by its child spans (ours, and those of
other OpenTelemetry instrumentations, reported by ``children.ChildTracker``).  Two gated clocks
measure the covered part exactly: covered wall time runs while at least one child is open, and
covered CPU time counts this span's own CPU only while a child is open.  Then

* ``self_cpu = cpu - covered_cpu`` (clamped to ``[0, self_wall]``);
* ``self_off = self_wall - self_cpu``: the time suspended (a coroutine awaiting, a generator
  between items) is known exactly and judged by what was awaited (``classify.awaiting``;
  generator gaps wait for the consumer); the rest happened inside steps, where the stack
  sampler saw the thread blocked on io, waiting, or off-CPU in plain Python code, and the
  kernel's run delay says how much was preemption, which is shared out in proportion to what
  the steps were doing.  Off-CPU time in plain Python code that preemption does not explain
  waited for the GIL (CPU side) as far as the process's other threads ran meanwhile; the rest
  blocked in a call nobody names (wait).  Steps too short to be sampled: wait.

What is written: ``tracelens.cpu_ns`` = ``cpu`` (children running inline on the same thread
included, per attributes.md); ``tracelens.io_ns`` and ``tracelens.wait_ns``, the self off-CPU
time blocked on io and waiting (so ``self time - io_ns - wait_ns`` is the CPU side: on-CPU,
waiting for the GIL, preempted while computing); ``tracelens.kind`` = the largest of that CPU
side, io and wait.  Spans with an explicit kind get ``kind`` and ``cpu_ns`` only.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from tracelens_instrumentation import _native
from tracelens_instrumentation import attributes as A

perf = time.perf_counter_ns
thread_cpu = time.thread_time_ns
ident = threading.get_ident

# Live records by span id, so children (ours or other instrumentations') find their parent.
records: dict[int, Record] = {}
RUN: Final = "run"
PLAIN: Final = "plain"  # evidence: off-CPU in plain Python code (preempted, the GIL, or unnamed)
_CPU: Final = A.CPU
_WAIT: Final = A.WAIT  # evidence: kernel run delay (preempted, waiting for a CPU)
# Records currently executing a step, per thread, innermost last: what the sampler inspects.
stacks: dict[int, list[Record]] = {}

_local = threading.local()
_linux = sys.platform.startswith("linux")


def native_id() -> int:
    """This thread's kernel id, cached per thread (thread-local, so never stale)."""
    tid: int = getattr(_local, "tid", 0)
    if not tid:
        tid = _local.tid = threading.get_native_id()
    return tid


def other_thread_cpu(tid: int) -> int | None:
    """CPU clock of another thread by kernel id (Linux), or None where that cannot be read.

    The clock id is computed the way the kernel defines it (``MAKE_THREAD_CPUCLOCK``) rather
    than through ``pthread_getcpuclockid``, which must not be given a thread that may have
    exited meanwhile; a stale id here just fails with EINVAL.
    """
    if not _linux or tid <= 0:
        return None
    try:
        return time.clock_gettime_ns(((~tid) << 3) | 6)
    except OSError:
        return None


class Record:
    """Clocks and evidence of one span.  No ``__slots__``: the counters default to class
    attributes, so creating a record (once per traced call) writes only what differs.

    The reference implementation: ``_record.c`` is the same class compiled (``Base`` is the one
    in use), line for line, since this runs several times on every traced call.
    """

    thread = native = 0
    cpu = 0
    in_step = False
    step_w = step_c = step_no = 0
    last_w = last_c = 0
    open = 0
    cov_w = cov_c = mark_w = mark_c = 0
    # Off-CPU time the sampler saw while a step ran: blocked on io, waiting, in plain Python
    # code (``plain``), of which at most ``gil`` can have been the GIL; kernel run delay.
    io = wait = plain = gil = run = 0
    sw_io = sw_wait = 0  # suspended (coroutines, generators): measured exactly
    susp_t = susp_cov = 0
    susp_kind: str | None = None
    suspended = False
    samp_w = samp_c = samp_step = 0
    ended = False
    prof: dict[tuple[str, ...], int] | None = None  # CPU stacks seen by the sampler (stacks.py)

    def __init__(self, measured: bool) -> None:
        self.measured = measured  # False for an explicit kind: CPU only, no io/wait evidence
        self.t0 = perf()

    # -- clocks ---------------------------------------------------------------------------
    def cpu_now(self, thread: int, reading: int | None) -> int:
        """This span's CPU so far, read from any thread (``reading``: that thread's clock)."""
        if not self.in_step:
            return self.cpu
        if thread == self.thread:
            now = reading if reading is not None else thread_cpu()
        else:
            other = other_thread_cpu(self.native)
            if other is None:
                return self.cpu
            now = other
        return self.cpu + now - self.step_c

    def covered_at(self, now: int) -> int:
        return self.cov_w + (now - self.mark_w if self.open else 0)

    # -- children -------------------------------------------------------------------------
    def child_open(self, now: int, thread: int, reading: int | None) -> None:
        if self.ended:
            return
        if not self.open:
            self.mark_w = now
            self.mark_c = self.cpu_now(thread, reading)
        self.open += 1

    def child_close(self, now: int, thread: int, reading: int | None) -> None:
        if self.ended or not self.open:
            return
        self.open -= 1
        if not self.open:
            self.cov_w += now - self.mark_w
            self.cov_c += max(0, self.cpu_now(thread, reading) - self.mark_c)

    # -- steps ----------------------------------------------------------------------------
    def step_begin(self, thread: int) -> None:
        measured = self.measured
        if measured and _parked[0]:
            _wake[0]()  # before the clocks are read: waking the sampler is not this span's time
        self.thread = thread
        self.native = getattr(_local, "tid", 0) or native_id()
        self.step_no = step_no = self.step_no + 1
        # The thread's CPU clock is a system call (about as costly as the rest of a step's
        # bookkeeping), so a real reading this thread took within REUSE_NS is reused instead.
        # Here it is taken as it is (as if the thread was off the CPU since: at most the truth);
        # at the end of the step it is carried forward (as if the thread stayed on the CPU: at
        # least the truth, see ``step_end``).  So a step's CPU time can only come out long, by
        # less than REUSE_NS, and is capped at the step's wall time: a short computing step never
        # reads as waiting.  A step shorter than REUSE_NS costs at most one clock read, and
        # traced calls come in bursts (a parent and its children, a loop): many steps reuse the
        # reading of the step before.
        self.step_w = now = perf()
        recent = _recent[0]
        if recent[0] == thread and now - recent[1] < REUSE_NS:
            self.step_c = recent[2]
        else:
            self.step_c = c = thread_cpu()
            _recent[0] = (thread, now, c)
        if step_no == 1:
            self.t0 = now  # the span's own time starts with its first step
        self.in_step = True
        if measured:
            stack = stacks.get(thread)
            if stack is None:
                stack = stacks[thread] = []
            stack.append(self)

    def step_end(self) -> None:
        self.last_w = now = perf()
        recent = _recent[0]  # only real readings are kept there: estimates never compound
        if recent[0] == self.thread and now - recent[1] < REUSE_NS:
            c = recent[2] + (now - recent[1])
        else:
            c = thread_cpu()
            _recent[0] = (self.thread, now, c)
        self.last_c = c
        used = c - self.step_c
        if used > now - self.step_w:  # (a reading carried forward): no more than the wall time
            used = now - self.step_w
        if used > 0:
            self.cpu += used
        self.in_step = False
        if self.measured:
            stack = stacks.get(self.thread)
            if stack:  # (an emptied list stays: a thread's next call reuses it)
                if stack[-1] is self:
                    stack.pop()
                else:
                    _remove(stack, self)

    def suspend(self, now: int, kind: str | None) -> None:
        """The span stops running until ``resume``; ``kind`` None: a child span has the time."""
        self.susp_t = now
        self.susp_kind = kind
        self.susp_cov = self.covered_at(now)
        self.suspended = True

    def resume(self, now: int) -> None:
        if not self.suspended:
            return
        self.suspended = False
        kind = self.susp_kind
        if kind is None:
            return
        own = (now - self.susp_t) - (self.covered_at(now) - self.susp_cov)
        if own > 0:
            if kind == A.IO:
                self.sw_io += own
            else:
                self.sw_wait += own

    def evidence(self, kind: str, amount: int) -> None:
        """Off-CPU time seen by samples: blocked on io, waiting, or ``PLAIN`` (in plain Python
        code); ``cpu``: the most of the plain part that can have been the GIL (the other
        threads' running time over the same intervals); ``RUN``: kernel run delay."""
        if kind == A.IO:
            self.io += amount
        elif kind == A.WAIT:
            self.wait += amount
        elif kind == PLAIN:
            self.plain += amount
        elif kind == A.CPU:
            self.gil += amount
        else:
            self.run += amount

    # -- result ---------------------------------------------------------------------------
    def finish(self, now: int) -> tuple[str, int, int, int]:
        """(kind, cpu_ns, io_ns, wait_ns) as written on the span; see the module docstring."""
        if self.open:
            self.cov_w += now - self.mark_w
            self.cov_c += max(0, self.cpu - self.mark_c)
            self.open = 0
        self.ended = True
        # Comparisons rather than min()/max() calls: this runs on every traced call.
        self_wall = now - self.t0 - self.cov_w
        if self_wall < 0:
            self_wall = 0
        self_cpu = self.cpu - self.cov_c
        if self_cpu < 0:
            self_cpu = 0
        elif self_cpu > self_wall:
            self_cpu = self_wall
        off = self_wall - self_cpu
        if not (self.sw_io or self.sw_wait or self.io or self.wait or self.plain):
            # Nothing suspended or sampled (most short calls): off-CPU time is wait.
            return (_CPU if self_cpu >= off else _WAIT), self.cpu, 0, off
        # Suspended time is known exactly and by kind; the rest of the off-CPU time happened
        # inside steps, where samples saw it blocked on io, waiting, or off-CPU in plain Python,
        # and the kernel's run delay tells how much of it was preemption.
        suspended = self.sw_io + self.sw_wait
        if suspended > off:  # clock granularity: scale the suspensions into what there is
            sus_io = off * self.sw_io // suspended
            sus_wait = off - sus_io
        else:
            sus_io, sus_wait = self.sw_io, self.sw_wait
        in_step = off - sus_io - sus_wait
        in_cpu, in_io, in_wait = _split_in_step(
            in_step, self_cpu, self.io, self.wait, self.plain, self.gil, self.run
        )
        io = sus_io + in_io
        wait = sus_wait + in_wait
        cpu_side = self_cpu + in_cpu
        if cpu_side >= io and cpu_side >= wait:
            return A.CPU, self.cpu, io, wait
        return (A.IO if io >= wait else A.WAIT), self.cpu, io, wait


def _split_in_step(
    off: int, on_cpu: int, io: int, wait: int, plain: int, gil: int, run: int
) -> tuple[int, int, int]:
    """Off-CPU time inside steps as (cpu side, io, wait), from sampled evidence.

    Samples classified the off-CPU time they saw by stack: ``io``, ``wait``, and ``plain``
    (plain Python code: preempted, waiting for the GIL, or blocked in a call nobody names);
    ``run`` is the kernel's run delay over those intervals, the part that was preemption, and
    ``gil`` the other Python threads' running time over the plain ones, the most of them that
    can have been the GIL.  Preemption stretches whatever the thread was doing, so it is shared
    out in proportion to the activities of the steps (on-CPU and the GIL count as CPU): a sleep
    delayed by an overloaded machine stays a wait, a preempted loop stays CPU.  So it is taken
    out of each kind of evidence alike first; only then is the plain part that is left the GIL,
    up to ``gil``, and the rest a wait (a preempted loop is not read as blocked).  Without
    samples (steps shorter than a tick), off-CPU time counts as wait.
    """
    seen = io + wait + plain
    if seen <= 0 or off <= 0:
        return 0, 0, max(0, off)
    if run > seen:
        run = seen
    kept = seen - run  # sampled off-CPU time that was not preemption
    plain_kept = plain * kept // seen
    gil_kept = plain_kept if plain_kept < gil else gil
    preempted = off * run // seen
    rest = off - preempted
    rest_io = rest * io // seen
    rest_cpu = rest * gil_kept // kept if kept > 0 else 0
    rest_wait = rest - rest_io - rest_cpu
    weight = on_cpu + rest_cpu + rest_io + rest_wait
    if weight <= 0:
        return preempted + rest_cpu, rest_io, rest_wait
    run_io = preempted * rest_io // weight
    run_wait = preempted * rest_wait // weight
    run_cpu = preempted - run_io - run_wait
    return rest_cpu + run_cpu, rest_io + run_io, rest_wait + run_wait


def _remove(stack: list[Record], rec: Record) -> None:
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] is rec:
            del stack[i]
            return


def _noop() -> None:
    return None


REUSE_NS: Final = 20_000  # a CPU clock reading younger than this is carried forward
# The latest real CPU clock reading of any thread: (thread ident, wall clock, CPU clock).
_recent: list[tuple[int, int, int]] = [(0, 0, 0)]

# Device waits the sampler saw per record (``classify.device_wait``): [on-CPU ns, off-CPU ns].
# Read (and emptied) by ``_call.end`` through ``device_split``; empty unless a device is waited
# for, so the hot path only tests it for truth.
device_waits: dict[Any, list[int]] = {}


def device_split(
    kind: str, io: int, wait: int, self_wall: int, on: int, off: int
) -> tuple[str, int, int]:
    """(kind, wait_ns, gpu_wait_ns) once the sampler saw the span wait for a device: ``on``
    (spinning, on-CPU) leaves the CPU side, ``off`` (blocked) leaves the wait it was split as;
    the kind is the largest of the CPU side, io, wait and gpu (ties: cpu, io, wait, gpu)."""
    off = min(off, wait)
    wait -= off
    gpu = on + off
    if gpu > self_wall:
        gpu = self_wall
    cpu_side = self_wall - io - wait - gpu
    if cpu_side < 0:
        cpu_side = 0
    best = max(cpu_side, io, wait, gpu)
    if best == cpu_side:
        kind = _CPU
    elif best == io:
        kind = A.IO
    elif best == wait:
        kind = _WAIT
    else:
        kind = A.GPU
    return kind, wait, gpu


# Set by the sampler module: whether it is parked, and how to wake it (kept here so that the
# hot path reads a list cell instead of importing the sampler).
_parked: list[bool] = [False]
_wake: list[Callable[[], None]] = [_noop]


def _load_native() -> Any:
    """The compiled ``Record`` (Linux, when built), wired to this module's shared state."""
    module: Any = _native.load("tracelens_instrumentation._record")  # built on Linux only
    if module is None:
        return None
    module.install(stacks, _parked, _wake, A.CPU, A.IO, A.WAIT, PLAIN)
    return module


def _after_fork() -> None:
    """The child's one thread is new to the kernel: its cached id and clock reading are not."""
    global _local
    _local = threading.local()
    _recent[0] = (0, 0, 0)


native = _load_native()
# The record class the decorator uses: the compiled one when built, else the reference.
Base: type[Record] = native.Record if native is not None else Record
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
