"""GPU activity per span (``gpu_attribution.attribute``), on hand-made cases and on the CUPTI
records of a real run on one NVIDIA H200 (``fixtures/gpu/``, reduced from the recording).

The truth for the recorded run is what the recording itself states (``fixtures/README.md``):
``torch.profiler`` and the probe's own join give ``gpu_matmul`` 474 of 477 ms busy over its two
calls (150 bf16 8192² matmuls each, then a synchronize: the device is busy all along) and
``llm_generate`` 112 ms of kernels over 4 calls that took about 16 s under recording (a few
percent busy: the host launches one small kernel at a time).  ``cpu_tool`` and ``search_tool``
launch nothing.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation.gpu_attribution import (
    MEMCPY,
    ApiCall,
    DeviceOp,
    SpanGpu,
    Window,
    attribute,
    span_attributes,
    union_ns,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"
KIND_OF = {"K": "kernel", "C": "memcpy", "S": "memset"}
Recorded = dict[str, list[tuple[Window, "SpanGpu | None"]]]

# -- hand-made cases: every figure below is worked out by hand --------------------------------


def test_union_clips_and_merges() -> None:
    # [0,10) and [5,20) merge into [0,20); [30,40) apart; clipped to [2,35]: 18 + 5
    assert union_ns([(0, 10), (5, 20), (30, 40)], 2, 35) == 23
    assert union_ns([], 0, 10) == 0
    assert union_ns([(50, 60)], 0, 10) == 0


def test_innermost_span_on_the_launching_thread_owns_the_work() -> None:
    outer = Window(1, thread=7, start=0, end=1000)
    inner = Window(2, thread=7, start=100, end=200)
    other = Window(3, thread=8, start=0, end=1000)
    calls = [
        ApiCall(7, 150, 160, correlation=10),  # in inner
        ApiCall(7, 300, 310, correlation=11),  # in outer only
        ApiCall(9, 150, 160, correlation=12),  # a thread with no span: nobody's
        ApiCall(7, 900, 990, correlation=13, name="cudaStreamSynchronize_v3020"),
    ]
    ops = [
        DeviceOp("kernel", 170, 260, 10),  # 30 ns inside inner, 60 after its end
        DeviceOp("kernel", 400, 500, 11),
        DeviceOp("kernel", 450, 700, 11),  # overlaps the one before: union 300
        DeviceOp(MEMCPY, 800, 1100, 11),  # 200 in outer, 100 after outer's end
        DeviceOp("kernel", 150, 160, 12),
    ]
    got = attribute([outer, inner, other], ops, calls)
    assert got[2].gpu_ns == 30 and got[2].gpu_after_ns == 60 and got[2].launches == 1
    assert got[1].gpu_ns == 300 + 200 and got[1].gpu_after_ns == 100 and got[1].launches == 3
    assert got[1].gpu_wait_ns == 90  # the synchronize call, by its name
    assert got[1].link == A.GPU_LINK_THREAD_TIME
    assert 3 not in got  # the other thread's span launched nothing


def test_external_correlation_wins_over_thread_and_time() -> None:
    a = Window(1, thread=7, start=0, end=100)
    b = Window(2, thread=7, start=200, end=300)  # e.g. a coroutine's span resumed later
    calls = [ApiCall(7, 50, 60, correlation=5), ApiCall(7, 250, 260, correlation=6)]
    ops = [DeviceOp("kernel", 55, 95, 5), DeviceOp("kernel", 255, 280, 6, device=1)]
    got = attribute([a, b], ops, calls, sync_correlations=[6], external={5: 2})
    assert got[2].launches == 2 and got[2].link == A.GPU_LINK_CORRELATION
    assert got[2].gpu_ns == 25  # (55, 95) lies before b's window: all of it is outside
    assert got[2].gpu_wait_ns == 10  # call 6 has a SYNCHRONIZATION record
    assert 1 not in got
    values = span_attributes(got[2], {0: "NVIDIA H200", 1: "NVIDIA H200"})
    assert values[A.GPU_DEVICE] == "NVIDIA H200:0,NVIDIA H200:1"
    assert values[A.GPU_SOURCE] == A.GPU_SOURCE_CUPTI


# -- the recorded run ------------------------------------------------------------------------


def _recorded() -> tuple[list[Window], dict[int, str], list[DeviceOp], list[ApiCall], set[int]]:
    summary = json.loads((FIXTURES / "h200_cupti.summary.expected.json").read_text())
    (thread,) = (int(t) for t in summary["busy_ms_by_thread"])  # the one launching thread
    windows, names = [], {}
    for line in (FIXTURES / "h200_cupti.spans.jsonl").open():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    sid = int(s["spanId"], 16)
                    names[sid] = s["name"]
                    start, end = int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])
                    windows.append(Window(sid, thread, start, end))
    ops, calls, syncs = [], [], set()
    t = 0
    with gzip.open(FIXTURES / "h200_cupti.records.tsv.gz", "rt") as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            t += int(f[1])
            end, corr = t + int(f[2]), int(f[3])
            if f[0] in KIND_OF:
                ops.append(DeviceOp(KIND_OF[f[0]], t, end, corr, int(f[4])))
            elif f[0] in "RD":
                calls.append(ApiCall(int(f[4]), t, end, corr, f[5]))
            elif f[0] == "Y":
                syncs.add(corr)
    return windows, names, ops, calls, syncs


@pytest.fixture(scope="module")
def recorded() -> Recorded:
    windows, names, ops, calls, syncs = _recorded()
    got = attribute(windows, ops, calls, syncs)
    by_name: Recorded = defaultdict(list)
    for w in windows:
        by_name[names[w.span_id]].append((w, got.get(w.span_id)))
    return by_name


def test_gpu_matmul_is_busy_all_along(recorded: Recorded) -> None:
    for name in ("gpu_matmul", "gpu_matmul_declared"):
        calls = recorded[name]
        assert len(calls) == 2
        wall = sum(w.end - w.start for w, _ in calls)
        busy = sum(g.gpu_ns for _, g in calls if g is not None)
        assert busy >= 0.99 * wall, (name, busy, wall)
        for _, g in calls:
            assert g is not None
            assert g.launches >= 150 and g.link == A.GPU_LINK_THREAD_TIME
            # the synchronize at the end: the host waited most of the span for the device
            assert g.gpu_wait_ns > 0.5 * g.gpu_ns
    matmul = recorded["gpu_matmul"]
    wall = sum(w.end - w.start for w, _ in matmul)
    busy = sum(g.gpu_ns for _, g in matmul if g is not None)
    assert abs(wall / 1e6 - 477) < 3 and abs(busy / 1e6 - 474) < 3, (wall, busy)


def test_llm_generate_is_launch_bound(recorded: Recorded) -> None:
    calls = recorded["llm_generate"]
    assert len(calls) == 4
    wall = sum(w.end - w.start for w, _ in calls)
    busy = sum(g.gpu_ns + g.gpu_after_ns for _, g in calls if g is not None)
    assert abs(busy / 1e6 - 112) < 0.05 * 112, busy  # "112 ms of kernels in 4 calls"
    assert 0.002 < busy / wall < 0.05, busy / wall  # a few percent busy
    for _, g in calls:
        assert g is not None and g.launches > 1000


def test_host_steps_launch_nothing(recorded: Recorded) -> None:
    for name in ("cpu_tool", "search_tool"):
        assert recorded[name] and all(g is None for _, g in recorded[name]), name
