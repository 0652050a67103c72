"""Launch-bound model calls: the host thread busy launching work while the GPU mostly idles.

A model call on a trace's critical path is *launch-bound* when its device was busy for less than
``BUSY_MAX`` of its own time (``tracelens.gpu_ns`` over its self time: the union of the device
intervals its own launches produced, measured from device records) while its host thread was
on-CPU for at least ``HOST_ON_CPU_MIN`` of it (``tracelens.cpu_ns``, the thread clock).  The GPU
is waiting for the CPU: decoding token by token with a small model, hundreds of tiny kernels per
step, each launched from Python.  More or faster GPUs do not help; fewer, larger launches do.

Only calls whose device-busy time was *measured* count (``gpu_ns`` present: device records, not
the sampled device-wait stacks, which see waits but not busy time), and only calls that used the
GPU at all (some launch or device time): a remote model API call has no local device work and is
not launch-bound, whatever its host did.

The what-if is bounded by the GPU time: each call shrinks to its device time (``gpu_ns`` +
``gpu_after_ns``), the least it could take if the host kept the device busy all along.  That is
an upper bound on what the remedies buy (a real one keeps some host time), and the replay turns
it into trace latency like every other finding.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from tracelens_instrumentation import attributes as A

from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.findings.candidate import Candidate, Evidence, count
from tracelens.analysis.findings.finding import Confidence, FindingType, LaunchBoundDetails
from tracelens.analysis.findings.replay import Change
from tracelens.analysis.findings.timeline import Timeline
from tracelens.analysis.gpu import SpanGpu, span_gpu
from tracelens.analysis.kinds import attribute_columns

BUSY_MAX = 0.30  # GPU busy under this share of the call's own time ...
HOST_ON_CPU_MIN = 0.50  # ... while its host thread was on-CPU at least this share of it
REMEDIES = (
    "CUDA graphs (capture the decode step once, replay it: one launch instead of hundreds)",
    "torch.compile (fuses kernels; mode='reduce-overhead' also uses CUDA graphs)",
    "a serving engine with continuous batching (vLLM, SGLang, TGI: many requests per launch)",
    "larger batches (more work per kernel, the same number of launches)",
)


def launch_bound_candidates(trace_analysis: TraceAnalysis, timeline: Timeline) -> list[Candidate]:
    """One candidate per (service, name) of launch-bound model calls on critical paths."""
    sp = trace_analysis.spans
    if sp.height == 0:
        return []
    g = span_gpu(trace_analysis)
    self_ns = sp["self_ns"].to_numpy().astype(np.float64)
    cpu = sp["self_cpu_ns"].cast(pl.Float64).to_numpy()
    cpu_known = ~np.isnan(cpu)
    with np.errstate(divide="ignore", invalid="ignore"):
        busy_share = np.where(self_ns > 0, np.minimum(g.busy_ns / self_ns, 1.0), 1.0)
        on_cpu = np.where(self_ns > 0, np.minimum(np.nan_to_num(cpu) / self_ns, 1.0), 0.0)
    device_ns = g.busy_ns + g.after_ns
    on_path = np.zeros(sp.height, dtype=bool)
    on_path[trace_analysis.sections.filter(pl.col("main"))["_i"].to_numpy()] = True
    hit = (
        sp["model_call"].to_numpy()
        & g.measured
        & cpu_known
        & on_path
        & ((g.launches > 0) | (device_ns > 0))
        & (busy_share < BUSY_MAX)
        & (on_cpu >= HOST_ON_CPU_MIN)
        & (self_ns > 0)
    )
    if not hit.any():  # most analyses: no GPU-measured model call; skip reading the attributes
        return []
    source, busy_col = attribute_columns(sp, (A.GPU_SOURCE, A.GPU_NS))
    hit &= busy_col.is_not_null().to_numpy()
    rows = np.flatnonzero(hit)
    if len(rows) == 0:
        return []
    names = sp["name"].to_numpy()[rows]
    services = sp["service"].to_numpy()[rows]
    cupti = (source == A.GPU_SOURCE_CUPTI).fill_null(False).to_numpy()
    out: list[Candidate] = []
    keys = sorted({(str(s), str(n)) for s, n in zip(services, names, strict=True)})
    for service, name in keys:
        mine = rows[(services == service) & (names == name)]
        out.append(
            _candidate(
                trace_analysis,
                timeline,
                mine,
                service,
                name,
                busy_share,
                on_cpu,
                device_ns,
                g,
                cupti,
            )
        )
    return out


def _candidate(
    trace_analysis: TraceAnalysis,
    timeline: Timeline,
    rows: np.ndarray,
    service: str,
    name: str,
    busy_share: np.ndarray,
    on_cpu: np.ndarray,
    device_ns: np.ndarray,
    g: SpanGpu,
    cupti: np.ndarray,
) -> Candidate:
    sp = trace_analysis.spans
    self_ns = sp["self_ns"].to_numpy().astype(np.float64)[rows]
    dur_ms = float(np.median((timeline.dur[rows]).astype(np.float64))) / 1e6
    busy = busy_share[rows]
    host = on_cpu[rows]
    dev_ms = float(np.median(device_ns[rows])) / 1e6
    launches = g.launches[rows]
    traces = np.unique(timeline.trace[rows]).astype(np.int64)
    host_cpu_ns = host * self_ns
    per_launch_us = (
        float(np.median(host_cpu_ns[launches > 0] / launches[launches > 0])) / 1e3
        if (launches > 0).any()
        else None
    )
    measured_by_records = bool(cupti[rows].all())
    confidence: Confidence = "high" if measured_by_records else "medium"
    evidence = [
        Evidence(
            "launch_bound",
            f"{count(len(rows), 'call')} of {name} on the critical path in "
            f"{count(len(traces), 'trace')}: the GPU was busy {float(np.median(busy)):.1%} of "
            f"each call's own time (at most {float(busy.max()):.1%}; launch-bound under "
            f"{BUSY_MAX:.0%}) while the host thread was on-CPU {float(np.median(host)):.0%} of it "
            f"(at least {HOST_ON_CPU_MIN:.0%}); per call (median) {dur_ms:,.1f} ms, of which "
            f"{dev_ms:,.1f} ms device time"
            + (
                f", {float(np.median(launches)):,.0f} launches at {per_launch_us:,.1f} us of host "
                "CPU each"
                if per_launch_us is not None
                else ""
            ),
        ),
    ]
    if measured_by_records:
        evidence.append(
            Evidence(
                "device_measured",
                "device-busy time from CUPTI activity records (tracelens.gpu_source cupti) for "
                "every call counted",
            )
        )
    else:
        evidence.append(
            Evidence(
                "device_source_unstated",
                "not every call's device time says it came from CUPTI records "
                "(tracelens.gpu_source): medium at most",
            )
        )
    evidence += [
        Evidence("remedies", "what applies: " + "; ".join(REMEDIES)),
        Evidence(
            "bounded_by_device_time",
            "what-if: each call shrinks to its device time (gpu_ns + gpu_after_ns), the least it "
            "can take with the GPU kept busy: an upper bound on the saving, a real remedy keeps "
            "some host time",
        ),
    ]
    factor = np.clip(device_ns[rows] / np.maximum(self_ns, 1.0), 0.0, 1.0)
    return Candidate(
        type=FindingType.LAUNCH_BOUND,
        names=[name],
        services=[service],
        change=Change(factor_rows=rows.astype(np.int64), factor=factor.astype(np.float64)),
        traces=traces,
        confidence=confidence,
        evidence=evidence,
        occurrences=len(rows),
        example=[int(rows[int(np.argmax(self_ns))])],
        details=LaunchBoundDetails(
            gpu_busy_share=round(float(np.median(busy)), 4),
            host_on_cpu_share=round(float(np.median(host)), 4),
            busy_threshold=BUSY_MAX,
            device_ms_per_call=round(dev_ms, 3),
            call_ms=round(dur_ms, 3),
            launches_per_call=round(float(np.median(launches)), 1),
            remedies=list(REMEDIES),
        ),
    )


__all__ = ["BUSY_MAX", "HOST_ON_CPU_MIN", "REMEDIES", "launch_bound_candidates"]
