"""Which span caused which device work: CUPTI activity records joined to span windows.

Why a pure core: the join is the part that must be right (it decides ``tracelens.gpu_ns``), and
it can be checked without a GPU on recorded CUPTI records (``fixtures/gpu/``).  The live
collector (``gpu.py``) only turns CUPTI buffers into the plain records below and calls
``attribute``.  Nothing here imports CUDA.

The join (``docs/attributes.md``, "GPU activity"):

* a device record (kernel, memcpy, memset) carries the *correlation id* of the runtime/driver
  API call that launched it; the API record carries the launching thread and the call's time;
* the owning span is the one whose id the collector pushed as CUPTI *external correlation id*
  around that API call (``link = correlation``), else the innermost span open on the launching
  thread when the call began (``link = thread_time``);
* ``gpu_ns``: the union of the span's device intervals, clipped to its window;
  ``gpu_after_ns``: the part of that union after the span ended (charged to the span, kept out
  of its window's split); ``gpu_wait_ns``: the union of the span's host waits for the device
  (API calls that synchronise: a SYNCHRONIZATION record names them, or their name is one of
  ``SYNC_APIS``), clipped to the window; ``launches``: device records linked to the span.

Everything is one sweep per thread and one sort per span: O(n log n) in the records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from tracelens_instrumentation import attributes as A

KERNEL: Final = "kernel"
MEMCPY: Final = "memcpy"
MEMSET: Final = "memset"
DEVICE_KINDS: Final = (KERNEL, MEMCPY, MEMSET)
# API calls that make the host thread wait for the device (CUDA runtime and driver names,
# without their ``_vNNNN`` suffix).  One table: the collector and the fixture reader use it.
SYNC_APIS: Final = frozenset(
    {
        "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
        "cudaStreamWaitEvent", "cudaMemcpy", "cudaMemcpy2D", "cudaMemset",
        "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpyDtoH",
        "cuMemcpyHtoD", "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2",
    }
)  # fmt: skip


def api_base_name(name: str) -> str:
    """``cudaStreamSynchronize_v3020`` -> ``cudaStreamSynchronize``."""
    head, sep, tail = name.rpartition("_v")
    return head if sep and tail.isdigit() else name


@dataclass(frozen=True, slots=True)
class Window:
    """A span as the join sees it: its id, its thread (the id CUPTI records as ``thread_id``:
    the pthread id on Linux), and its start and end (ns, the clock of the records)."""

    span_id: int
    thread: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class DeviceOp:
    kind: str  # one of DEVICE_KINDS
    start: int
    end: int
    correlation: int
    device: int = 0


@dataclass(frozen=True, slots=True)
class ApiCall:
    """A runtime or driver API record: who called (thread), when, and its correlation id."""

    thread: int
    start: int
    end: int
    correlation: int
    name: str = ""


@dataclass(slots=True)
class SpanGpu:
    """What ``attribute`` writes for one span (the ``tracelens.gpu_*`` attributes)."""

    span_id: int
    gpu_ns: int = 0
    gpu_after_ns: int = 0
    gpu_wait_ns: int = 0
    launches: int = 0
    devices: tuple[int, ...] = ()
    link: str | None = None  # GPU_LINK_CORRELATION, GPU_LINK_THREAD_TIME, or None (nothing)
    _busy: list[tuple[int, int]] = field(default_factory=list, repr=False)
    _waits: list[tuple[int, int]] = field(default_factory=list, repr=False)


def union_ns(intervals: Iterable[tuple[int, int]], lo: int, hi: int) -> int:
    """Length of the union of ``intervals`` clipped to ``[lo, hi]``."""
    total = 0
    cur_s = cur_e = None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def owners_by_thread_time(windows: Iterable[Window], calls: Iterable[ApiCall]) -> dict[int, int]:
    """correlation id -> span id of the innermost window open on the call's thread when the
    call began.  Windows of one thread nest (a span's children end before it does); a call in
    no window has no owner."""
    by_thread: dict[int, list[Window]] = {}
    for w in windows:
        by_thread.setdefault(w.thread, []).append(w)
    calls_by_thread: dict[int, list[ApiCall]] = {}
    for c in calls:
        if c.thread in by_thread:
            calls_by_thread.setdefault(c.thread, []).append(c)
    out: dict[int, int] = {}
    for thread, ws in by_thread.items():
        ws.sort(key=lambda w: (w.start, -w.end))
        cs = sorted(calls_by_thread.get(thread, ()), key=lambda c: c.start)
        open_: list[Window] = []
        i = 0
        for c in cs:
            t = c.start
            while i < len(ws) and ws[i].start <= t:
                open_.append(ws[i])
                i += 1
            while open_ and open_[-1].end < t:
                open_.pop()
            # a window that ended under a longer one that is still open (not nested): skip it
            j = len(open_) - 1
            while j >= 0 and open_[j].end < t:
                j -= 1
            if j >= 0:
                out[c.correlation] = open_[j].span_id
    return out


def attribute(
    windows: Iterable[Window],
    ops: Iterable[DeviceOp],
    calls: Iterable[ApiCall],
    sync_correlations: Iterable[int] = (),
    external: Mapping[int, int] | None = None,
) -> dict[int, SpanGpu]:
    """Per span id, its GPU activity.  ``sync_correlations``: correlation ids of SYNCHRONIZATION
    records (their API call waited for the device); ``external``: correlation id -> the span
    id pushed as external correlation id around that call (wins over thread and time)."""
    wins = {w.span_id: w for w in windows}
    calls = list(calls)
    syncs = set(sync_correlations)
    owner = owners_by_thread_time(wins.values(), calls)
    link: dict[int, str] = dict.fromkeys(owner, A.GPU_LINK_THREAD_TIME)
    for corr, span_id in (external or {}).items():
        if span_id in wins:
            owner[corr] = span_id
            link[corr] = A.GPU_LINK_CORRELATION
    out: dict[int, SpanGpu] = {}

    def slot(span_id: int, corr: int) -> SpanGpu:
        got = out.get(span_id)
        if got is None:
            got = out[span_id] = SpanGpu(span_id)
        how = link[corr]
        if got.link is None or how == A.GPU_LINK_CORRELATION:
            got.link = how
        return got

    devices: dict[int, set[int]] = {}
    for op in ops:
        op_owner = owner.get(op.correlation)
        if op_owner is None:
            continue
        g = slot(op_owner, op.correlation)
        g.launches += 1
        g._busy.append((op.start, op.end))
        devices.setdefault(op_owner, set()).add(op.device)
    for c in calls:
        if c.correlation in syncs or api_base_name(c.name) in SYNC_APIS:
            waiter = owner.get(c.correlation)
            if waiter is not None:
                slot(waiter, c.correlation)._waits.append((c.start, c.end))
    for span_id, g in out.items():
        w = wins[span_id]
        g.gpu_ns = union_ns(g._busy, w.start, w.end)
        g.gpu_after_ns = union_ns(g._busy, w.end, 1 << 62)
        g.gpu_wait_ns = union_ns(g._waits, w.start, w.end)
        g.devices = tuple(sorted(devices.get(span_id, ())))
        g._busy = []
        g._waits = []
    return out


def span_attributes(g: SpanGpu, device_names: Mapping[int, str] | None = None) -> dict[str, object]:
    """The ``tracelens.gpu_*`` attributes of one span's activity (source ``cupti``)."""
    names = device_names or {}
    values: dict[str, object] = {
        A.GPU_NS: g.gpu_ns,
        A.GPU_AFTER_NS: g.gpu_after_ns,
        A.GPU_WAIT_NS: g.gpu_wait_ns,
        A.GPU_LAUNCHES: g.launches,
        A.GPU_SOURCE: A.GPU_SOURCE_CUPTI,
    }
    if g.link is not None:
        values[A.GPU_LINK] = g.link
    if g.devices:
        values[A.GPU_DEVICE] = ",".join(f"{names.get(d, 'cuda')}:{d}" for d in g.devices)
    return values
