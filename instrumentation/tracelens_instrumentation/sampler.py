"""Low-rate stack sampling of threads that are inside a measured span.

Why: a thread blocked in ``recv`` and a thread sleeping look the same to the CPU clock (both are
off-CPU); only their stacks tell io from wait.  Every ``INTERVAL_S`` (5 ms, override with
``TRACELENS_SAMPLE_INTERVAL_MS``) a daemon thread looks at each thread's innermost measured
span that is executing a step, reads that thread's CPU clock (by kernel thread id, Linux), and
when the thread spent part of the interval off-CPU, charges that part to io, wait or the CPU
side according to ``classify.blocked_in`` of its current stack.  The exact off-CPU total comes
from the clocks at the end of the span; samples only set the proportions.  The kernel's run
delay over the same intervals (``/proc/self/task/TID/schedstat``: runnable, waiting for a CPU)
says how much of it was preemption rather than blocking (see ``measure._split_in_step``).
With profiling on (``stacks.ENABLED``), each tick also drains the CPU-clock stack samples of
the threads it inspects (``_cpusample.c``: taken after every 5 ms of a thread's own CPU,
wherever it is) and charges them to their spans (``_charge``); where those are not available,
the stack the tick itself reads, where the thread yielded the GIL (biased), is recorded for
its span with the CPU it used during the interval (``stacks.record``).

Cost: nothing while no measured span is running (the thread parks after a second of idleness);
otherwise one ``sys._current_frames()``, one clock read and one ``schedstat`` read per active
thread per tick, plus a walk over the span's frames when profiling.  Limits: blocking shorter
than a tick may go unsampled (it then counts as wait); platforms without per-thread CPU clocks
(non-Linux) get no samples.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import types
from typing import Final

from tracelens_instrumentation import _native, _runtime, classify, gpu, measure, stacks
from tracelens_instrumentation import attributes as A

INTERVAL_S: Final = max(0.001, float(os.environ.get("TRACELENS_SAMPLE_INTERVAL_MS", "5")) / 1000)
INTERVAL_NS: Final = int(INTERVAL_S * 1e9)
PARK_AFTER_NS: Final = 1_000_000_000
MIN_OFF_NS: Final = 100_000
MAX_THREADS: Final = 256  # Python threads whose clocks bound a GIL wait
MIN_ON_NS: Final = 1  # any CPU used: dropping short intervals would bias the stacks (load)
profiling = stacks.ENABLED  # configure(profile=...) sets it

_lock = threading.Lock()
_event = threading.Event()
_thread: threading.Thread | None = None
_boundaries: set[types.CodeType] = set()
_frozen: list[frozenset[types.CodeType]] = [frozenset()]
_installed: list[bool] = [False]
_last_delay: dict[int, int] = {}  # kernel thread id -> its run delay at the latest tick


def add_boundary(code: types.CodeType) -> None:
    """A wrapper's code object: a stack walk reaching it has left the innermost span."""
    _boundaries.add(code)
    _frozen[0] = frozenset(_boundaries)
    classify.register_stop(code)


def wake() -> None:
    """Called on the hot path when the sampler is parked and a measured step begins."""
    measure._parked[0] = False
    _event.set()
    if _thread is None or not _thread.is_alive():
        _start()


def _start() -> None:
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="tracelens-sampler", daemon=True)
            _thread.start()


def _run() -> None:
    _event.wait()
    _event.clear()
    idle_since: int | None = None
    woke = measure.perf()
    while True:
        slept = measure.perf()
        # how long this thread held the GIL: from its sleep's return (which takes the GIL) to
        # its next sleep, on the CPU or not (a page fault or a system call that keeps the GIL
        # keeps the others waiting just the same)
        _held[0] += slept - woke
        time.sleep(INTERVAL_S)
        woke = measure.perf()
        try:
            # beyond the sleep: mostly waiting for the GIL, held by a thread that was running
            late = measure.perf() - slept - INTERVAL_NS
            busy = tick(late if late > 0 else 0)
        except Exception:  # never let a sampling bug kill the thread or reach the app
            busy = False
        now = time.monotonic_ns()
        if busy and gpu.STATE["status"] == "idle":
            with contextlib.suppress(Exception):
                gpu.detect(now)  # a CUDA runtime came into use: start the collector
        if busy:
            idle_since = None
            continue
        if idle_since is None:
            idle_since = now
            continue
        if now - idle_since < PARK_AFTER_NS:
            continue
        _prune()
        _park()
        idle_since = None


def _park() -> None:
    _disarm_all()
    measure._parked[0] = True
    if _has_work():  # a step began between our last tick and parking: stay up
        measure._parked[0] = False
        return
    _event.clear()
    if _has_work():
        measure._parked[0] = False
        return
    _event.wait()


def _has_work() -> bool:
    return any(list(measure.stacks.values()))  # list(): a C-level copy, safe while others write


def _prune() -> None:
    """Drops the emptied stacks of threads that are gone."""
    alive = sys._current_frames()
    for thread, stack in list(measure.stacks.items()):
        if not stack and thread not in alive:
            measure.stacks.pop(thread, None)
    if _armed:
        _drop_dead()


def tick(late: int = 0) -> bool:
    """One sampling round; False when no measured span was running.  ``late``: how long the
    sampler waited beyond its sleep (for the GIL): see ``_weight``."""
    active = [(thread, stack) for thread, stack in list(measure.stacks.items()) if stack]
    if not active:
        return False
    frames = sys._current_frames()
    now = measure.perf()
    stops = _frozen[0]
    others = _OthersCpu()
    timed: frozenset[int] | set[int] = _NONE
    if profiling[0] and not _timer_tried[0]:
        _timer_tried[0] = True  # SIGPROF is taken only once stacks are asked for
        _timer_install()
    if _timer_on[0]:
        try:
            timed = _timer_tick(active)
        except Exception:  # a bug here must not cost the ticks their io/wait evidence
            _timer_on[0] = False
            _runtime.complain(
                "cpu-timer", "tracelens: the CPU-clock samples failed; CPU stacks are sampled "
                "where threads yield the GIL from now on (biased)"
            )  # fmt: skip
    for thread, stack in active:
        frame = frames.get(thread)
        rec = stack[-1]
        if rec.native in timed:
            with contextlib.suppress(Exception):  # a sample lost, not the span's problem
                _charge(_TIMER.drain(rec.native), stack, frame, stops)  # type: ignore[union-attr]
        _sample(thread, rec, now, frame, stops, others, stack, late, rec.native in timed)
    others.keep()
    if len(_carry) > 4096:
        _carry.clear()
    return True


class _OthersCpu:
    """How long the process's other Python threads ran or were runnable since the previous
    tick (CPU clock plus schedstat run delay, read lazily once per tick), so that off-CPU time
    in plain Python code counts as waiting for the GIL only as far as that.  Why this bounds
    it: the GIL's holder (or the thread it is being handed to) is running or waiting for a
    core; a thread blocked in a call released it.  The sampler thread counts too, by how long
    it held the GIL (``_held``) plus its run delay: its ticks take the GIL, and on a loaded
    machine waking it to take it is most of that wait."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now: dict[int, int] | None = None

    def used(self, target: int) -> int:
        """Running or runnable ns of Python threads other than ``target`` (a kernel id) since
        the last tick; a thread first seen counts with all of it (an upper bound)."""
        now = self.now
        if now is None:
            now = self.now = _python_thread_cpu()
        before = _prev_cpu
        total = 0
        for tid, cpu in now.items():
            if tid != target:
                total += cpu - before.get(tid, 0) if cpu >= before.get(tid, 0) else cpu
        return total

    def keep(self) -> None:
        if self.now is not None:
            _prev_cpu.clear()
            _prev_cpu.update(self.now)
        else:  # not read this tick: the next window starts now
            _prev_cpu.clear()
            _prev_cpu.update(_python_thread_cpu())


_prev_cpu: dict[int, int] = {}  # kernel thread id -> its CPU clock at the previous tick
# The sampler thread's wall time from each sleep's return to its next sleep: how long it held
# the GIL, on the CPU or not (its CPU time alone missed a tick that kept the GIL while off the
# CPU: a page fault, a system call; the thread it kept waiting then read as blocked, 14-18 ms
# of wait on an 80 ms loop in the measures run).  Its whole CPU clock would also count each
# wake-up (the timer, the system call's return, the GIL's hand-over: 80-90% of its CPU on a VM,
# with the GIL held by nobody or by the thread that yields it).
_held: list[int] = [0]


def _python_thread_cpu() -> dict[int, int]:
    """Kernel thread id -> CPU clock + run delay, for every Python thread (the sampler: the
    time it held the GIL, ``_held``, + run delay)."""
    out: dict[int, int] = {}
    me = _thread
    for t in threading.enumerate()[:MAX_THREADS]:
        tid = t.native_id
        if tid is None:
            continue
        cpu = _held[0] if t is me else measure.other_thread_cpu(tid)
        if cpu is not None:
            out[tid] = cpu + (run_delay(tid) or 0)
    return out


def _sample(
    thread: int,
    rec: measure.Record,
    now: int,
    frame: types.FrameType | None,
    stops: frozenset[types.CodeType],
    others: _OthersCpu | None = None,
    stack: list[measure.Record] | None = None,
    late: int = 0,
    timed: bool = False,
) -> None:
    if not rec.in_step:
        return
    cpu = measure.other_thread_cpu(rec.native)
    if cpu is None:
        return
    if stack is not None and len(stack) > 1:
        # the spans further out are covered by this one until now: their next interval
        # starts here (else it would hold the child's time, judged by the parent's stack)
        for outer in stack[:-1]:
            if outer.in_step and outer.native == rec.native:
                outer.samp_step, outer.samp_w, outer.samp_c = outer.step_no, now, cpu
    if rec.samp_step == rec.step_no:
        prev_w, prev_c = rec.samp_w, rec.samp_c
    else:
        prev_w, prev_c = rec.step_w, rec.step_c
    rec.samp_step, rec.samp_w, rec.samp_c = rec.step_no, now, cpu
    delay = run_delay(rec.native)
    # The run delay over this interval: exact from a reading taken at its start (the previous
    # tick sampled this thread); else the delay since the latest earlier reading (or since the
    # thread started), capped below at the interval's length: an upper bound, and a thread
    # off-CPU in plain Python code is far more often preempted than blocked in a call nobody
    # names (a cold sampler's first interval would otherwise read a preempted loop as waiting).
    prev_delay = _last_delay.get(rec.native, 0)
    if delay is not None:
        if len(_last_delay) > 4096:
            _last_delay.clear()
        _last_delay[rec.native] = delay
    if rec.open or frame is None:
        return
    used = cpu - prev_c
    off = (now - prev_w) - used
    if classify.device_wait(frame, stops):
        # waiting for the device, spinning (on-CPU) or blocked: the device's time, and no CPU
        # stack (a synchronize is not a CPU hotspot); the off-CPU part is split as a wait
        seen = measure.device_waits.get(rec)
        if seen is None:
            if len(measure.device_waits) > 4096:
                measure.device_waits.clear()
            seen = measure.device_waits[rec] = [0, 0]
        seen[0] += max(0, used)
        if off >= MIN_OFF_NS:
            seen[1] += off
            rec.evidence(A.WAIT, off)
        return
    if used >= MIN_ON_NS and profiling[0] and not rec.ended and not timed:
        # a stack that cannot be read is a sample lost, not the span's problem
        with contextlib.suppress(Exception):
            stacks.record(rec, frame, _weight(rec, used, late), stops)
    if delay is not None:
        # The kernel adds a wait for a CPU to the run delay only when the thread runs again,
        # so the delay and the off-CPU time it explains may fall in different intervals:
        # both are summed over the span and compared at its end (measure.Record.finish).
        rec.evidence(measure.RUN, min(now - prev_w, max(0, delay - prev_delay)))
    if off >= MIN_OFF_NS:
        kind = classify.blocked_in(frame, stops)
        if kind == A.CPU:
            # off-CPU in plain Python code: preempted (the run delay), waiting for the GIL
            # (at most as long as other Python threads ran in the window), or blocked in a
            # call we cannot name (native code that released the GIL and waits); which is
            # decided at the span's end, once the run delay is summed (measure._split_in_step)
            rec.evidence(measure.PLAIN, off)
            gil = off if others is None else min(off, others.used(rec.native))
            if gil > 0:
                rec.evidence(A.CPU, gil)
        else:
            rec.evidence(kind, off)


_carry: dict[object, int] = {}  # record -> CPU carried to its next sample (see _weight)


def _weight(rec: object, used: int, late: int) -> int:
    """The CPU a stack sample stands for.  The sampler asks for the GIL at times that do not
    depend on what the thread runs, and the stack where the thread then yields it is what ran
    at that moment (a C call holding the GIL yields right after it, in its Python caller).
    But the CPU since the previous sample includes the wait for the GIL, which is long exactly
    when the thread was in a long GIL-holding call: charging it to this sample over-weights
    such calls (JSON encoding) and under-weights code that yields often (loops, generators).
    So the wait's CPU is carried to the next sample: each weight then covers request to
    request, independent of the stack it is given to; the totals are unchanged but for the
    last wait of a span."""
    carried = _carry.pop(rec, 0)
    wait = late if late < used else used
    if wait > 0 and not getattr(rec, "ended", False):
        _carry[rec] = wait
    return used - wait + carried


# -- CPU stacks by each thread's own CPU clock -------------------------------------------------
# Why: the stack this sampler reads at a tick is where the thread yielded the GIL to it, and
# where a thread yields depends on its code, so stacks read that way are biased (README, "CPU
# stacks").  With ``_cpusample`` (CPython 3.11 on Linux), every thread running a measured span
# gets a clock of its own CPU time: after each ``TIMER_NS[0]`` (on average, randomised) of CPU it
# uses, a signal handler in C copies its Python stack, wherever it is.  The clock is the
# thread's perf task clock where the kernel allows it (exact instants), else a POSIX CPU timer
# (instants on the scheduler's tick); ``TRACELENS_CPU_TIMER=posix`` asks for the latter (its
# handler costs less on a VM), ``=0`` for neither.  The ticks only drain those samples and
# charge each to its span (``_charge``).  Without the module, when SIGPROF belongs to another
# handler, or for threads beyond the module's 64 slots, the ticks' own stacks are recorded.
# CPU time between two samples of a thread (on average), for threads armed from now on
TIMER_NS: list[int] = [INTERVAL_NS]
TIMER_IDLE_NS: Final = PARK_AFTER_NS  # a thread without a measured span this long: disarmed
_TIMER = _native.load("tracelens_instrumentation._cpusample")
_timer_on: list[bool] = [False]
_timer_tried: list[bool] = [False]  # SIGPROF's handler installed at the first tick with stacks on
_armed: dict[int, int] = {}  # kernel thread id -> when it last ran a measured span (perf ns)
_failed: dict[int, int] = {}  # kernel thread id -> when arming it failed (retried after a second)
_NONE: Final[frozenset[int]] = frozenset()


def timer_state() -> str:
    """How CPU stacks are sampled now: ``cpu-clock`` (per-thread CPU timers) or ``gil-switch``
    (this thread's ticks), for the README's claims and the tests."""
    return "cpu-clock" if _timer_on[0] else "gil-switch"


def use_timer(on: bool) -> bool:
    """Switches the CPU-clock samples on or off at run time (benchmarks and tests compare the
    two in one process); whether they are on now."""
    if not on:
        _timer_on[0] = False
        _disarm_all()
        return False
    _timer_tried[0] = True
    _timer_install(force=True)
    return _timer_on[0]


def _timer_install(force: bool = False) -> None:
    if _TIMER is None or not sys.platform.startswith("linux"):
        return
    setting = os.environ.get("TRACELENS_CPU_TIMER", "").strip().lower()
    if not force and setting in ("0", "false", "no", "off"):
        return  # asked for the ticks' stacks (to compare, or to leave SIGPROF alone)
    try:
        ok = bool(_TIMER.supported()) and bool(_TIMER.install())
        if ok:
            _TIMER.use_perf(setting != "posix")
    except Exception:
        ok = False
    if not ok and bool(getattr(_TIMER, "supported", lambda: False)()):
        _runtime.complain(
            "cpu-timer",
            "tracelens: SIGPROF is handled by another profiler; CPU stacks are sampled where "
            "threads yield the GIL instead (biased, see README 'CPU stacks')",
        )
    _timer_on[0] = ok


def _timer_tick(active: list[tuple[int, list[measure.Record]]]) -> frozenset[int] | set[int]:
    """Arms the timers of the threads running a measured span, disarms those idle for
    ``TIMER_IDLE_NS``; the kernel ids whose samples this tick charges."""
    timer = _TIMER
    if timer is None or not profiling[0] or not timer.owned():
        if timer is not None and _timer_on[0] and profiling[0]:
            _timer_on[0] = False  # another library took SIGPROF: back to the ticks' stacks
            _disarm_all()
            _runtime.complain(
                "cpu-timer", "tracelens: SIGPROF was taken by another handler; CPU stacks are "
                "sampled where threads yield the GIL from now on (biased)"
            )  # fmt: skip
        else:
            _disarm_all()
        return _NONE
    now = measure.perf()
    timed: set[int] = set()
    for _thread, stack in active:
        tid = stack[-1].native
        if tid in _armed:
            _armed[tid] = now
            timed.add(tid)
        elif now - _failed.get(tid, -PARK_AFTER_NS) >= PARK_AFTER_NS:
            every = TIMER_NS[0]
            if timer.arm(tid, every) or (_drop_dead() and timer.arm(tid, every)):
                _armed[tid] = now
                _failed.pop(tid, None)
            else:
                if len(_failed) > 4096:
                    _failed.clear()
                _failed[tid] = now
            # the first tick of a thread charges no stack: its samples start now
    for tid, seen in list(_armed.items()):
        if tid not in timed:
            timer.drain(tid)  # samples of spans that ended since the last tick: too late
            if now - seen >= TIMER_IDLE_NS:
                timer.disarm(tid)  # (its slot is free again; arming it anew is cheap)
                del _armed[tid]
    return timed


def _disarm_all() -> None:
    if _TIMER is None or not _armed:
        return
    for tid in list(_armed):
        with contextlib.suppress(Exception):
            _TIMER.disarm(tid)
    _armed.clear()


def _drop_dead() -> bool:
    """Frees the timers of armed threads that have exited (all slots taken); whether any."""
    living = {t.native_id for t in threading.enumerate()}
    dead = [tid for tid in _armed if tid not in living]
    for tid in dead:
        del _armed[tid]
        with contextlib.suppress(Exception):
            _TIMER.disarm(tid)  # type: ignore[union-attr]
    return bool(dead)


def _charge(
    samples: list[tuple[int, int, tuple[types.CodeType | None, ...], tuple[int, ...], int, int]],
    stack: list[measure.Record],
    frame: types.FrameType | None,
    stops: frozenset[types.CodeType],
) -> None:
    """Charges a thread's timer samples to the spans it is running now, each to the innermost
    one whose wrapper frame the sample's stack holds (the frame at the same address, its step
    begun before the sample).  A sample of a span that has ended since goes to its parent, the
    ended span's frames included, as the ticks' stacks did; one outside every span is dropped."""
    if not samples or frame is None or not profiling[0]:
        return
    live: dict[int, measure.Record] = {}
    owners: dict[int, measure.Record] = {}
    walked = False
    for one in stack:
        if not one.ended:
            live[id(one)] = one
            known = _wrappers.get(id(one))
            if known is not None and known[0] is one:
                owners[known[1]] = one
            else:
                walked = True
    if walked:  # a span this thread runs has not been seen here: find its wrapper's frame
        owners = stacks.note(frame, stops, live, _TIMER.frame_addr)  # type: ignore[union-attr]
        if len(_wrappers) > 4096:
            _wrappers.clear()
        for addr, one in owners.items():
            _wrappers[id(one)] = (one, addr)
    if not owners:
        return
    folded = _folded
    if len(folded) > 4096:
        folded.clear()
    for used, clock, codes, addrs, lasti, _truncated in samples:
        if used <= 0:
            continue
        for i, addr in enumerate(addrs):
            rec = owners.get(addr)
            if rec is not None and rec.in_step and rec.step_c <= clock and codes[i] in stops:
                inner = codes[:i]
                ids = tuple(map(id, inner))
                seen = folded.get(ids)
                if seen is None or seen[0] != inner:
                    # (the stored codes keep the ids valid)
                    if not walked:  # name the live frames' codes by their globals first
                        walked = True
                        stacks.note(frame, stops, live, _TIMER.frame_addr)  # type: ignore[union-attr]
                    wait = classify.device_wait_codes(inner, -1, stacks.module_of)
                    seen = folded[ids] = (inner, None if wait else stacks.fold_codes(inner))
                key = seen[1]
                if key is None or (
                    lasti >= 0 and classify.device_wait_codes(inner[:1], lasti, stacks.module_of)
                ):
                    break  # waiting for a device: not a CPU hotspot (see _sample)
                stacks.add(rec, key, used)
                break


_wrappers: dict[int, tuple[measure.Record, int]] = {}  # id(record) -> (it, its wrapper's frame)
# codes of a sample (ids, innermost first) -> (the codes, their folded stack; None: a device wait)
_folded: dict[
    tuple[int, ...], tuple[tuple[types.CodeType | None, ...], tuple[str, ...] | None]
] = {}


def run_delay(tid: int) -> int | None:
    """Nanoseconds a thread has spent runnable but waiting for a CPU (Linux schedstat)."""
    try:
        fd = os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY)
    except OSError:
        return None
    try:
        return int(os.read(fd, 256).split()[1])
    except (OSError, IndexError, ValueError):
        return None
    finally:
        os.close(fd)


def _after_fork() -> None:
    global _thread
    _thread = None
    _armed.clear()
    if _TIMER is not None and _timer_on[0]:
        with contextlib.suppress(Exception):
            _TIMER.after_fork()
    _last_delay.clear()
    measure._parked[0] = True
    measure.stacks.clear()


def install() -> None:
    """Wires the hot path to this sampler (done once, when tracing becomes active)."""
    if _installed[0]:
        return
    _installed[0] = True
    measure._wake[0] = wake
    measure._parked[0] = True
    _start()
    with contextlib.suppress(AttributeError):
        os.register_at_fork(after_in_child=_after_fork)
