"""The live GPU collector: CUPTI activity records of the traces chosen for GPU measurement.

Why it is shaped this way (``docs/attributes.md``, "GPU activity"; README, "GPU"):

* Nothing happens until a device runtime is in use: the sampler thread calls ``detect`` about
  once a second (``sys.modules`` lookups and ``torch.cuda.is_initialized()``, never an import),
  and only then does the decorator's hot path see ``ON[0]`` turn true.  Without a GPU the cost
  per traced call is one list-cell test in ``_call.begin`` and one in ``_call.end``.
* A fraction of traces is measured (``configure(gpu_fraction=...)``, ``TRACELENS_GPU_FRACTION``,
  default ``DEFAULT_FRACTION``), decided from the trace id like trace sampling, so every span of
  a trace agrees without any state; each span of a measured trace gets ``tracelens.gpu_measured``.
* CUPTI activity (kernels, memcpy, memset, synchronization, the runtime/driver API records that
  tie them to a thread, external correlation) is enabled only while a measured span is open.
  A plain function's span pushes its span id as CUPTI external correlation id on entry and pops
  it on exit (``link = correlation``); other shapes (coroutines, generators, which interleave on
  one thread) are linked by launching thread and time (``link = thread_time``).
* Device records arrive in buffers after the fact, so a measured span is *held*: ``_call.end``
  writes its other attributes and hands it here instead of ending it; the worker thread flushes
  CUPTI every ``POLL_S``, joins the records to the held windows (``gpu_attribution``), writes
  ``tracelens.gpu_*`` and the kind with the device's share (``measure.device_split``), and ends
  the span with its real end time once ``HOLD_NS`` have passed since it ended.  Device work of
  a span still running after that is not counted (a documented limit).
* Never break the host: no cupti-python, no libcupti, CUPTI owned by another tool (torch.profiler
  running, Nsight's injection), or any CUPTI error: log once, stop collecting, go on; the stack
  rules (``classify.DEVICE_WAITS``) still give ``gpu_wait_ns`` with ``gpu_source = stacks``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from typing import Any, Final

from tracelens_instrumentation import _runtime, classify, measure
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation import gpu_attribution as G

DEFAULT_FRACTION: Final = 0.1
POLL_S: Final = 0.1
HOLD_NS: Final = int(float(os.environ.get("TRACELENS_GPU_HOLD_MS", "300")) * 1e6)
MAX_HELD: Final = 10_000  # spans waiting for their records; beyond, they end unmeasured
MAX_RECORDS: Final = 2_000_000  # records kept; beyond, the oldest half is dropped
BUFFER_BYTES: Final = 8 * 1024 * 1024
_ALL: Final = 1 << 64
Split = tuple[str, int, int, int]  # (kind, io_ns, wait_ns, self wall ns) without the device


def _fraction_from_env() -> float:
    raw = os.environ.get("TRACELENS_GPU_FRACTION", "").strip()
    if not raw:
        return DEFAULT_FRACTION
    try:
        value = float(raw)
    except ValueError:
        _runtime.log.warning("tracelens: TRACELENS_GPU_FRACTION=%r is not a number", raw)
        return DEFAULT_FRACTION
    return min(1.0, max(0.0, value))


ON: list[bool] = [False]  # read by the hot path: a collector is running
FRACTION: list[float] = [_fraction_from_env()]
STATE: dict[str, Any] = {"status": "idle", "reason": ""}  # idle | on | off (with the reason)
_lock = threading.Lock()
_checked: list[int] = [0]


def set_fraction(value: float) -> None:
    FRACTION[0] = min(1.0, max(0.0, float(value)))


def measured(trace_id: int) -> bool:
    """Whether the trace ``trace_id`` is measured: its low 64 bits under the fraction, as the
    SDK's TraceIdRatioBased sampler decides (the same answer in every span, at no cost)."""
    fraction = FRACTION[0]
    if fraction >= 1.0:
        return True
    return (trace_id & (_ALL - 1)) < int(fraction * _ALL)


def device_runtime_in_use() -> bool:
    """A CUDA runtime initialised in this process (read from loaded modules, never imported)."""
    return classify.torch_cuda_initialized() or "cupy.cuda" in sys.modules


def detect(now_ns: int) -> None:
    """Called by the sampler thread every tick; looks at most once a second."""
    if STATE["status"] != "idle" or FRACTION[0] <= 0.0 or now_ns - _checked[0] < 1_000_000_000:
        return
    _checked[0] = now_ns
    if device_runtime_in_use():
        start()


def _off(reason: str) -> bool:
    first = STATE["status"] != "off"
    STATE["status"], STATE["reason"] = "off", reason
    ON[0] = False
    collector = _collector[0]
    if collector is not None:  # end what it holds, unmeasured, and stop recording
        _collector[0] = None
        with collector.lock:
            held, collector.held = collector.held, []
        for span, *_ in held:
            _end(span, {A.GPU_MEASURED: False})
        with contextlib.suppress(Exception):
            collector._enable(False)
    if not first:
        return False
    _runtime.log.warning("tracelens: GPU activity not recorded (%s); device waits come from "
                         "the stacks (tracelens.gpu_source=stacks)", reason)  # fmt: skip
    return False


def _other_owner() -> str:
    """Another tool that owns CUPTI in this process, or ''."""
    if os.environ.get("CUDA_INJECTION64_PATH") or os.environ.get("NSYS_PROFILING_SESSION_ID"):
        return "a CUDA injection tool (Nsight) owns CUPTI"
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.autograd.profiler._is_profiler_enabled:
            return "torch.profiler is running"
    except Exception:
        pass
    return ""


def start() -> bool:
    """Starts the collector once; False (logged once) when it cannot run here."""
    with _lock:
        if STATE["status"] != "idle":
            return STATE["status"] == "on"
        owner = _other_owner()
        if owner:
            return _off(owner)
        try:
            from cupti import cupti
        except Exception as exc:  # ImportError, or libcupti not loadable
            return _off(f"cupti-python unavailable: {type(exc).__name__}: {exc}"[:300])
        try:
            _collector[0] = Collector(cupti)
        except Exception as exc:
            return _off(f"CUPTI refused: {type(exc).__name__}: {exc}"[:300])
        STATE["status"] = "on"
        ON[0] = True
        return True


class Collector:
    """CUPTI activity buffers in, held spans out (see the module docstring)."""

    def __init__(self, cupti: Any) -> None:
        self.cupti = cupti
        K = cupti.ActivityKind
        self.kinds = [K.CONCURRENT_KERNEL, K.MEMCPY, K.MEMSET, K.SYNCHRONIZATION, K.RUNTIME,
                      K.DRIVER, K.EXTERNAL_CORRELATION]  # fmt: skip
        self.op_kinds = {
            int(K.CONCURRENT_KERNEL): G.KERNEL, int(K.MEMCPY): G.MEMCPY, int(K.MEMSET): G.MEMSET
        }  # fmt: skip
        self.api_kinds = {int(K.RUNTIME), int(K.DRIVER)}
        self.sync = int(K.SYNCHRONIZATION)
        self.external = int(K.EXTERNAL_CORRELATION)
        self.ext_kind = cupti.ExternalCorrelationKind.CUSTOM2  # CUSTOM0/1: Kineto's
        self.ops: list[G.DeviceOp] = []
        self.calls: list[G.ApiCall] = []
        self.syncs: set[int] = set()
        self.ext: dict[int, int] = {}
        self.held: list[tuple[Any, G.Window, Split | None]] = []
        self.done: list[G.Window] = []
        self.open = 0  # measured spans open: activity is enabled while > 0
        self.enabled = False
        self.lock = threading.Lock()
        # CUPTI's clock against time.time_ns (the spans' clock): pairs read together
        pairs = [(time.time_ns(), int(cupti.get_timestamp())) for _ in range(5)]
        self.offset = sorted(t - c for t, c in pairs)[2]
        self.names = _device_names()
        cupti.activity_register_callbacks(self._requested, self._completed)
        self.worker = threading.Thread(target=self._run, name="tracelens-gpu", daemon=True)
        self.worker.start()

    # -- CUPTI side ------------------------------------------------------------------------
    def _requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0

    def _completed(self, records: Any) -> None:
        """A full buffer: copy the few fields the join reads, keep no record object."""
        ops: list[G.DeviceOp] = []
        calls: list[G.ApiCall] = []
        syncs: list[int] = []
        ext: dict[int, int] = {}
        op_kinds, api_kinds, sync, external = (
            self.op_kinds,
            self.api_kinds,
            self.sync,
            self.external,
        )
        for r in records:
            k = int(r.kind)
            op = op_kinds.get(k)
            if op is not None:
                ops.append(
                    G.DeviceOp(
                        op, int(r.start), int(r.end), int(r.correlation_id), int(r.device_id)
                    )
                )
            elif k in api_kinds:
                calls.append(
                    G.ApiCall(int(r.thread_id), int(r.start), int(r.end), int(r.correlation_id))
                )
            elif k == sync:
                syncs.append(int(r.correlation_id))
            elif k == external:
                ext[int(r.correlation_id)] = int(r.external_id)
        with self.lock:
            self.ops += ops
            self.calls += calls
            self.syncs.update(syncs)
            self.ext.update(ext)

    def _enable(self, on: bool) -> None:
        for kind in self.kinds:
            (self.cupti.activity_enable if on else self.cupti.activity_disable)(kind)
        self.enabled = on

    # -- span side -------------------------------------------------------------------------
    def begin(self, call: Any, push: bool) -> bool:
        with self.lock:
            self.open += 1
            if not self.enabled:
                self._enable(True)
        if push:
            self.cupti.activity_push_external_correlation_id(self.ext_kind, call.span_id)
        return True

    def end(self, call: Any, pushed: bool, split: Split | None) -> bool:
        """Holds the span (True) until its records are in; ``split``: (kind, io, wait,
        self_wall) as measured without the device."""
        if pushed:
            self.cupti.activity_pop_external_correlation_id(self.ext_kind)
        span = call.span
        start = getattr(span, "start_time", None)
        with self.lock:
            self.open -= 1
            if start is None or len(self.held) >= MAX_HELD:
                return False
            end = time.time_ns()
            window = G.Window(call.span_id, call.thread, start - self.offset, end - self.offset)
            self.held.append((span, window, split))
        return True

    # -- worker ----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            time.sleep(POLL_S)
            try:
                self.drain(force=False)
            except Exception:
                _runtime.complain("gpu", "tracelens: GPU records could not be joined")
                with self.lock:
                    held, self.held = self.held, []
                for span, *_ in held:
                    _end(span, None)

    def drain(self, force: bool) -> None:
        """Flush CUPTI, write the held spans whose time is up (all with ``force``)."""
        with self.lock:
            if not self.held:
                if self.enabled and not self.open:
                    self._enable(False)
                return
        self.cupti.activity_flush_all(1)  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
        cutoff = time.time_ns() - self.offset - (0 if force else HOLD_NS)
        with self.lock:
            ready = [h for h in self.held if h[1].end <= cutoff]
            if not ready:
                return
            self.held = [h for h in self.held if h[1].end > cutoff]
            ops, calls, syncs, ext = self.ops, self.calls, self.syncs, self.ext
            keep_from = min((h[1].start for h in self.held), default=cutoff)
            self.ops = [o for o in ops if o.end >= keep_from][-MAX_RECORDS:]
            self.calls = [c for c in calls if c.end >= keep_from][-MAX_RECORDS:]
            kept = {c.correlation for c in self.calls}
            self.syncs = {c for c in syncs if c in kept}
            self.ext = {c: x for c, x in ext.items() if c in kept}
            # windows released before still own their launches (a parent must not take them)
            done = [w for w in self.done if w.end >= keep_from]
            self.done = done + [h[1] for h in ready]
        got = G.attribute([*done, *(h[1] for h in ready)], ops, calls, syncs, ext)
        for span, window, split in ready:
            g = got.get(window.span_id)
            extra: dict[str, Any] = {}
            if g is not None:
                extra = G.span_attributes(g, self.names)
                if split is not None:  # a measured kind: the device's share decides it too
                    kind, io, wait, self_wall = split
                    blocked = min(g.gpu_wait_ns, wait)
                    kind, wait, gpu_wait = measure.device_split(
                        kind, io, wait, self_wall, g.gpu_wait_ns - blocked, blocked
                    )
                    extra[A.GPU_WAIT_NS] = gpu_wait
                    extra[A.WAIT_NS] = wait
                    extra[A.KIND] = kind
            else:
                extra = {A.GPU_NS: 0, A.GPU_LAUNCHES: 0, A.GPU_SOURCE: A.GPU_SOURCE_CUPTI}
            _end(span, extra, window.end + self.offset)


_collector: list[Collector | None] = [None]


def _device_names() -> dict[int, str]:
    torch = sys.modules.get("torch")
    names: dict[int, str] = {}
    try:
        if torch is not None and torch.cuda.is_initialized():
            for i in range(torch.cuda.device_count()):
                names[i] = str(torch.cuda.get_device_name(i))
    except Exception:
        pass
    return names


def _end(span: Any, extra: dict[str, Any] | None, end_ns: int | None = None) -> None:
    try:
        if extra:
            span.set_attributes(extra)
        span.end(end_time=end_ns)
    except Exception:
        _runtime.complain("gpu-end", "tracelens: ending a GPU-measured span failed")


# -- the decorator's calls (only while ON[0]) ----------------------------------------------


def begin(call: Any, values: dict[str, Any], push: bool) -> bool:
    """At a span's start: whether its trace is measured (then it is marked and, for a plain
    function, its id pushed as external correlation id).  Returns whether it was pushed."""
    try:
        trace_id = call.span.get_span_context().trace_id
        if not measured(trace_id):
            values[A.GPU_MEASURED] = False
            return False
        collector = _collector[0]
        if collector is None:
            return False
        values[A.GPU_MEASURED] = True
        _measured_open[call.span_id] = push
        return collector.begin(call, push) and push
    except Exception:
        _off("CUPTI failed at a span's start")
        return False


_measured_open: dict[int, bool] = {}  # span id -> whether its id was pushed


def end(call: Any, split: Split | None) -> bool:
    """At a span's end: True when the collector holds it (the caller must not end it)."""
    pushed = _measured_open.pop(call.span_id, None)
    collector = _collector[0]
    if pushed is None or collector is None:
        return False
    try:
        return collector.end(call, pushed, split)
    except Exception:
        _off("CUPTI failed at a span's end")
        return False


def flush() -> None:
    """Writes and ends every held span now (``tracelens_instrumentation.flush``, exit)."""
    collector = _collector[0]
    if collector is not None:
        try:
            collector.drain(force=True)
        except Exception:
            _runtime.complain("gpu", "tracelens: GPU records could not be joined")


def reset(end_held: bool = True) -> None:
    """Back to the state before any detection (for tests; after a fork, whose child has no
    collector thread and must not end its parent's spans a second time: ``end_held`` False).
    What is held is ended, unmeasured."""
    collector = _collector[0]
    _collector[0] = None
    ON[0] = False
    if collector is not None and end_held:
        with collector.lock:
            held, collector.held = collector.held, []
        for span, *_ in held:
            _end(span, {A.GPU_MEASURED: False})
    _measured_open.clear()
    STATE["status"], STATE["reason"] = "idle", ""
    _checked[0] = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: reset(end_held=False))
