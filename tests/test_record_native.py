"""The compiled per-span clocks (``_record.c``) behave exactly as ``measure.Record``, the reference.

Both are driven through the same generated sequences of operations with explicit clock values
(children opening and closing, suspensions, sampled evidence, ``finish``) and compared field by
field after every step.  ``step_begin`` / ``step_end`` read the real clocks, so they are checked
for what they promise rather than for equal numbers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracelens_instrumentation import _call, measure

pytestmark = [
    pytest.mark.measures,
    pytest.mark.skipif(measure.native is None, reason="compiled record not built or off"),
]

FIELDS = (
    "thread", "native", "cpu", "in_step", "step_w", "step_c", "step_no", "last_w", "last_c",
    "open", "cov_w", "cov_c", "mark_w", "mark_c", "io", "wait", "plain", "gil", "run", "sw_io",
    "sw_wait", "susp_t", "susp_cov", "susp_kind", "suspended", "samp_w", "samp_c", "samp_step",
    "ended", "measured", "t0",
)  # fmt: skip
COUNTERS = tuple(f for f in FIELDS if f not in ("in_step", "suspended", "ended", "measured"))
THREAD = 4242


def pair(measured: bool = True) -> tuple[Any, Any]:
    return measure.Record(measured), measure.native.Record(measured)


def state(rec: Any) -> dict[str, Any]:
    return {f: getattr(rec, f) for f in FIELDS}


ns = st.integers(min_value=0, max_value=1 << 40)
big = st.integers(min_value=0, max_value=1 << 58)  # 9 years in ns; sums stay in 64 bits
kinds = st.sampled_from(["io", "wait", "cpu", "run", None])
ops = st.one_of(
    st.tuples(st.just("child_open"), ns, st.sampled_from([THREAD, 7]), st.one_of(st.none(), ns)),
    st.tuples(st.just("child_close"), ns, st.sampled_from([THREAD, 7]), st.one_of(st.none(), ns)),
    st.tuples(st.just("suspend"), ns, kinds),
    st.tuples(st.just("resume"), ns),
    st.tuples(st.just("evidence"), st.sampled_from(["io", "wait", "plain", "cpu", "run"]), ns),
    st.tuples(st.just("covered_at"), ns),
    st.tuples(st.just("cpu_now"), st.sampled_from([THREAD, 7]), ns),
)


@settings(deadline=None)
@given(
    start=st.fixed_dictionaries({f: ns for f in ("cpu", "step_c", "t0")}),
    in_step=st.booleans(),
    script=st.lists(ops, max_size=30),
    end=ns,
)
def test_same_fields_after_every_operation(
    start: dict[str, int], in_step: bool, script: list[tuple[Any, ...]], end: int
) -> None:
    ref, fast = pair()
    for rec in (ref, fast):
        for key, value in start.items():
            setattr(rec, key, value)
        rec.thread = THREAD
        rec.native = -1  # another thread's clock: unreadable, as in the reference
        rec.in_step = in_step
    for op, *args in script:
        reads_clock = op in ("child_open", "child_close") and args[1] == THREAD and args[2] is None
        if in_step and reads_clock:
            continue  # would read this thread's real CPU clock
        assert getattr(ref, op)(*args) == getattr(fast, op)(*args), op
        assert state(ref) == state(fast), op
    assert ref.finish(end) == fast.finish(end)
    assert state(ref) == state(fast)


@settings(deadline=None)
@given(
    fields=st.fixed_dictionaries({f: st.one_of(ns, big) for f in COUNTERS if f != "thread"}),
    flags=st.fixed_dictionaries({"open": st.integers(0, 3), "ended": st.booleans()}),
    now=st.one_of(ns, big),
)
def test_finish_gives_the_references_answer(
    fields: dict[str, int], flags: dict[str, Any], now: int
) -> None:
    """Counters up to 2**58: the products (up to 2**116) are taken without overflow."""
    ref, fast = pair()
    for rec in (ref, fast):
        for key, value in {**fields, **flags}.items():
            setattr(rec, key, value)
    assert ref.finish(now) == fast.finish(now)
    assert state(ref) == state(fast)


def test_kind_strings_are_the_attribute_constants() -> None:
    _, fast = pair()
    fast.cpu = 10
    fast.t0 = 0
    kind, cpu, io, wait = fast.finish(10)
    assert (kind, cpu, io, wait) == ("cpu", 10, 0, 0)
    assert kind is measure.A.CPU


def test_steps_measure_this_threads_cpu() -> None:
    rec = measure.native.Record(True)
    me = threading.get_ident()
    before = measure.stacks.get(me, [])[:]
    rec.step_begin(me)
    assert rec.in_step and rec.step_no == 1 and rec.t0 == rec.step_w
    assert measure.stacks[me][-1] is rec
    assert rec.native == threading.get_native_id()
    sum(i * i for i in range(200_000))  # ~ms of CPU
    rec.step_end()
    assert not rec.in_step and measure.stacks[me] == before
    assert 0 < rec.cpu <= rec.last_w - rec.step_w  # never more than the step's wall time
    assert rec.cpu > (rec.last_w - rec.step_w) // 4  # it was computing, not waiting
    first_t0 = rec.t0
    rec.step_begin(me)
    rec.step_end()
    assert rec.step_no == 2 and rec.t0 == first_t0


def test_an_explicit_kind_stays_off_the_sampled_stacks() -> None:
    rec = measure.native.Record(False)
    me = threading.get_ident()
    before = measure.stacks.get(me, [])[:]
    rec.step_begin(me)
    assert measure.stacks.get(me, []) == before
    rec.step_end()


def test_a_parked_sampler_is_woken_by_a_measured_step() -> None:
    woken: list[bool] = []
    saved = measure._parked[0], measure._wake[0]
    measure._parked[0] = True
    measure._wake[0] = lambda: woken.append(True)
    try:
        rec = measure.native.Record(True)
        rec.step_begin(threading.get_ident())
        rec.step_end()
    finally:
        measure._parked[0], measure._wake[0] = saved
    assert woken == [True]


def test_the_decorators_call_is_the_compiled_record() -> None:
    assert issubclass(_call.Call, measure.native.Record)
    assert measure.Base is measure.native.Record


def test_no_reference_leaks() -> None:
    me = threading.get_ident()

    def work() -> None:
        for _ in range(3000):
            rec = measure.native.Record(True)
            rec.step_begin(me)
            rec.child_open(rec.step_w, me, None)
            rec.child_close(rec.step_w + 5, me, None)
            rec.suspend(rec.step_w, "io")
            rec.resume(rec.step_w + 10)
            rec.step_end()
            rec.evidence("wait", 5)
            rec.finish(rec.last_w)

    work()
    before = sys.getallocatedblocks()
    work()
    assert sys.getallocatedblocks() - before < 200


def test_a_forked_child_reads_its_own_thread() -> None:
    me = threading.get_ident()
    measure.native.Record(True).step_begin(me)  # caches this process's kernel thread id
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            rec = measure.native.Record(True)
            rec.step_begin(me)
            rec.step_end()
            os.write(write, f"{rec.native} {threading.get_native_id()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    got = os.read(read, 100).decode().split()
    os.close(read)
    os.waitpid(pid, 0)
    assert got[0] == got[1] and int(got[0]) != threading.get_native_id()


def test_switching_it_off_uses_the_reference() -> None:
    code = (
        "from tracelens_instrumentation import measure, _call;"
        "print(measure.native is None, measure.Base is measure.Record,"
        " issubclass(_call.Call, measure.Record))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "TRACELENS_NO_NATIVE": "1"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.split() == ["True", "True", "True"]
