"""Capacity sizing: the CPU cores and model-server capacity a target concurrency needs.

The rule of thumb is cores ≈ C × (R_cpu × L) / per-core throughput, with R_cpu a guessed CPU
share of the latency L.  tracelens measures instead, per request (cold starts left out):
CPU seconds (the sum of ``tracelens.cpu_ns`` over the trace's spans, each counted once), model
seconds (the innermost model calls' time, queueing excluded), the number of model and tool
calls, and the CPU and model shares of end-to-end time.

With C requests in flight and each taking L (the latency target), Little's law gives the
arrival rate λ = C / L; L is a *mean* latency (``latency_mean_ms`` is the traces' own, so C
and that mean give the load the traces were taken at).  A resource with per-request demand D
(s) and capacity k (cores, or model slots that serve one call at a time) runs at utilisation
ρ = λ·D / k: at the stated current capacity (``current_utilisation``) and at the size, the
smallest k with ρ ≤ 1 - headroom (30 % for CPU, 20 % for the model server).  The binding
resource is the one that caps concurrency first at the stated current capacity, i.e. the
highest ρ / (1 - headroom).  The queueing check is M/M/k (Erlang C): the probability a unit
of work waits and the expected wait at that load.

What the demand can and cannot see, measured on the demo agent against psutil
(``tests/test_sizing_measured.py``; figures in the README):

* CPU seconds are those spent inside spans.  CPU outside every span is not in the traces:
  the event loop's own callbacks, tasks a span starts without tracing them (``asyncio.wait_for``
  runs its coroutine in one before Python 3.12), the instrumentation's sampler thread and the
  exporter.  So the CPU demand is a lower bound (on the demo, 80–90 % of the process's CPU).
* Model seconds are engine-timed (vLLM's prefill + decode) when the spans carry them, else the
  client's view (``model_timing``): the time a slot is held, which includes the client's own
  delays.  A client whose CPU is saturated resumes each call late: at 2 % of its model's
  delays the demo's client-timed model seconds were 14–43 times the model's own.  That cannot
  make the model bind while every request in flight has a slot, and the CPU's own demand is
  never inflated by the model, but with few slots and a saturated CPU a client-timed model
  verdict is suspect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracelens.analysis.coldstart import cold_start_mask
from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.outputs import render
from tracelens.analysis.stages import inherited_classes, span_classes
from tracelens.analysis.tokens import calls

CPU_HEADROOM = 0.3
GPU_HEADROOM = 0.2


@dataclass(frozen=True)
class Demand:
    """Measured per request (medians over the request traces, means where they add up)."""

    requests: int
    latency_s: float  # median end-to-end
    latency_mean_s: float  # what Little's law relates to concurrency and throughput
    cpu_s: float  # mean CPU seconds per request
    model_s: float  # mean model seconds per request
    model_calls: float
    tool_calls: float
    cpu_share: float  # of end-to-end time
    model_share: float
    cpu_measured: bool  # whether any span carried tracelens.cpu_ns
    model_timing: str  # engine | client | mixed | none: who timed the model seconds


def demand(trace_analysis: TraceAnalysis) -> Demand:
    cold = cold_start_mask(trace_analysis)
    warm = np.flatnonzero(~cold)
    n_tr = trace_analysis.traces.height
    sp = trace_analysis.spans
    trace = sp["_trace"].to_numpy()
    cpu_ns = sp["self_cpu_ns"].fill_null(0).to_numpy().astype(np.float64)
    cpu = np.bincount(trace, weights=cpu_ns, minlength=n_tr)
    c = calls(trace_analysis)
    parent = sp["_parent"].to_numpy().astype(np.int64)
    # Model seconds: every call with tokens, minus the time counted by a traced call inside it.
    model = np.zeros(n_tr)
    timing = "none"
    if c.height:
        rows = c["_i"].to_numpy().astype(np.int64)
        is_call = np.zeros(sp.height, dtype=bool)
        is_call[rows] = True
        inner = np.ones(len(rows), dtype=bool)
        inner_of = is_call[np.maximum(parent, 0)] & (parent >= 0)
        inner[np.isin(rows, parent[inner_of & is_call])] = False
        np.add.at(model, c["_trace"].to_numpy()[inner], c["model_s"].to_numpy()[inner])
        engine = c["engine_timings"].to_numpy().astype(bool)[inner & ~cold[c["_trace"].to_numpy()]]
        if len(engine):
            timing = "engine" if engine.all() else "client" if not engine.any() else "mixed"
    model_calls = np.bincount(trace, weights=sp["model_call"].to_numpy(), minlength=n_tr)
    own = span_classes(sp)
    cls = inherited_classes(own, parent)
    outer_tool = (own == 2) & ((parent < 0) | (cls[np.maximum(parent, 0)] != 2))
    tool_calls = np.bincount(trace, weights=outer_tool, minlength=n_tr)
    lat = trace_analysis.traces["duration_ns"].to_numpy().astype(np.float64) / 1e9
    w = warm
    if len(w) == 0:
        return Demand(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, False, timing)
    total_lat = float(lat[w].sum())
    return Demand(
        requests=len(w),
        latency_s=float(np.median(lat[w])),
        latency_mean_s=float(lat[w].mean()),
        cpu_s=float(cpu[w].mean()) / 1e9,
        model_s=float(model[w].mean()),
        model_calls=float(model_calls[w].mean()),
        tool_calls=float(tool_calls[w].mean()),
        cpu_share=float(cpu[w].sum()) / 1e9 / total_lat if total_lat > 0 else 0.0,
        model_share=float(model[w].sum()) / total_lat if total_lat > 0 else 0.0,
        cpu_measured=bool(sp["cpu_ns"].is_not_null().any()),
        model_timing=timing,
    )


def erlang_c(servers: int, offered: float) -> float:
    """Probability that work waits in an M/M/k queue (k = servers, offered load a = λ·S)."""
    if servers <= 0:
        return 1.0
    if offered >= servers:
        return 1.0
    term, total = 1.0, 1.0
    for k in range(1, servers):
        term *= offered / k
        total += term
    last = term * offered / servers
    last_q = last * servers / (servers - offered)
    return last_q / (total + last_q)


@dataclass(frozen=True)
class Resource:
    name: str  # cpu | model
    demand_s: float  # per request
    needed: int  # cores / model slots at the headroom
    headroom: float
    utilisation: float  # at ``needed``
    wait_probability: float
    expected_wait_ms: float
    current: int | None  # stated capacity
    current_utilisation: float | None  # at the stated capacity (may exceed 1: saturated)
    max_concurrency: float | None  # at the stated capacity and headroom

    def to_dict(self) -> dict[str, Any]:
        return {
            "resource": self.name,
            "demand_s_per_request": round(self.demand_s, 6),
            "needed": self.needed,
            "headroom": self.headroom,
            "utilisation": round(self.utilisation, 4),
            "wait_probability": round(self.wait_probability, 4),
            "expected_wait_ms": round(self.expected_wait_ms, 3),
            "current": self.current,
            "current_utilisation": None
            if self.current_utilisation is None
            else round(self.current_utilisation, 4),
            "max_concurrency": None
            if self.max_concurrency is None
            else round(self.max_concurrency, 2),
        }


@dataclass(frozen=True)
class Sizing:
    concurrency: int
    latency_target_ms: float
    arrival_per_s: float
    demand: Demand
    resources: list[Resource]
    binding: str | None

    def to_dict(self) -> dict[str, Any]:
        d = self.demand
        return {
            "concurrency": self.concurrency,
            "latency_target_ms": self.latency_target_ms,
            "arrival_per_s": round(self.arrival_per_s, 3),
            "measured": {
                "requests": d.requests,
                "latency_p50_ms": round(d.latency_s * 1e3, 3),
                "latency_mean_ms": round(d.latency_mean_s * 1e3, 3),
                "cpu_s_per_request": round(d.cpu_s, 6),
                "model_s_per_request": round(d.model_s, 6),
                "model_calls_per_request": round(d.model_calls, 3),
                "tool_calls_per_request": round(d.tool_calls, 3),
                "cpu_share": round(d.cpu_share, 4),
                "model_share": round(d.model_share, 4),
                "cpu_measured": d.cpu_measured,
                "model_timing": d.model_timing,
            },
            "resources": [r.to_dict() for r in self.resources],
            "binding": self.binding,
        }

    def to_json(self) -> str:
        """``to_dict`` as JSON text (``tracelens.render.json``, once ``tracelens.render`` is
        imported): ``tracelens size --format json``."""
        return render(self, "json")

    def to_text(self) -> str:
        """The terminal lines (``tracelens.render.text``, once ``tracelens.render`` is
        imported)."""
        return render(self, "text")


def _resource(
    name: str, lam: float, demand_s: float, headroom: float, current: int | None, target_s: float
) -> Resource:
    offered = lam * demand_s
    needed = max(1, math.ceil(offered / (1.0 - headroom))) if offered > 0 else 0
    util = offered / needed if needed else 0.0
    pw = erlang_c(needed, offered) if needed else 0.0
    wait_s = pw * demand_s / (needed - offered) if needed and offered < needed else 0.0
    max_c = None
    if current is not None and demand_s > 0:
        max_c = current * (1.0 - headroom) * target_s / demand_s
    now = None if current is None else offered / current
    return Resource(name, demand_s, needed, headroom, util, pw, wait_s * 1e3, current, now, max_c)


def size_traces(
    trace_analysis: TraceAnalysis,
    *,
    concurrency: int,
    latency_target_ms: float,
    cores: int | None = None,
    model_slots: int | None = None,
) -> Sizing:
    """The sizing of ``docs/analysis-json.md`` ("Sizing") for analysed traces."""
    if concurrency < 1 or latency_target_ms <= 0:
        raise ValueError("concurrency must be >= 1 and latency_target_ms > 0")
    d = demand(trace_analysis)
    target_s = latency_target_ms / 1e3
    lam = concurrency / target_s
    res = [
        _resource("cpu", lam, d.cpu_s, CPU_HEADROOM, cores, target_s),
        _resource("model", lam, d.model_s, GPU_HEADROOM, model_slots, target_s),
    ]
    capped = [r for r in res if r.max_concurrency is not None]
    if capped:
        binding: str | None = min(capped, key=lambda r: r.max_concurrency or 0.0).name
    else:
        loaded = [r for r in res if r.demand_s > 0]
        binding = max(loaded, key=lambda r: r.needed / (1 - r.headroom)).name if loaded else None
    return Sizing(concurrency, latency_target_ms, lam, d, res, binding)


__all__ = ["CPU_HEADROOM", "GPU_HEADROOM", "Demand", "Sizing", "demand", "erlang_c", "size_traces"]
