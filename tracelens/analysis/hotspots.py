"""The code behind critical-path CPU time: ``tracelens.cpu_stacks`` weighted by the critical path.

Why: "38 % of critical-path time is CPU in ``plan``" begs the question *which code*.  Spans of
the decorator with profiling on carry folded CPU stacks (``docs/attributes.md``).  This module
turns them into the functions and modules that cost latency, and, separately, the ones whose CPU
ran off the critical path (capacity, not latency).

Weighting (``docs/critical-path.md``, "CPU hotspots"): samples carry no timestamps, so a span's
stacks share out its CPU side (self time x ``mix_cpu``: self time minus io and wait) in
proportion to their weights, and that CPU side is split between on and off the path in the
ratio the path gives: the CPU time of the span's main-root critical-path sections (the
``cpu_ns`` of those sections, which the summary reports too) is on the path, the rest is off.

Pure: a ``TraceAnalysis`` in, a ``CpuHotspots`` out; ``to_dict`` is the JSON ``cpu_hotspots``,
``render_text`` the terminal table, ``folded`` the flamegraph.pl / speedscope input.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import polars as pl
from tracelens_instrumentation import attributes as A

from tracelens.analysis.core import TraceAnalysis

TOP: Final = 20
MAX_WARNINGS: Final = 5
WEIGHTING: Final = (
    "each span's CPU side (self time minus io and wait) is shared out over its "
    "tracelens.cpu_stacks in proportion to their weights; the part equal to the CPU time of the "
    "span's critical-path sections counts as on the critical path, the rest as off it"
)

Stack = tuple[str, ...]


@dataclass(frozen=True)
class Quantiles:
    """Per-trace milliseconds over the profiled traces (traces without the function count 0)."""

    p50: float
    p95: float

    def to_dict(self) -> dict[str, float]:
        return {"p50": round(self.p50, 3), "p95": round(self.p95, 3)}


@dataclass(frozen=True)
class FunctionTime:
    function: str  # "module:qualname", as in the stacks
    self_ms: float  # in stacks where it is the innermost frame (C calls included)
    inclusive_ms: float  # in stacks where it appears at all (once per stack)
    self_share: float  # of the profile's total
    inclusive_share: float
    per_trace_self_ms: Quantiles
    per_trace_inclusive_ms: Quantiles

    def to_dict(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "self_ms": round(self.self_ms, 3),
            "inclusive_ms": round(self.inclusive_ms, 3),
            "self_share": round(self.self_share, 4),
            "inclusive_share": round(self.inclusive_share, 4),
            "per_trace": {
                "self_ms": self.per_trace_self_ms.to_dict(),
                "inclusive_ms": self.per_trace_inclusive_ms.to_dict(),
            },
        }


@dataclass(frozen=True)
class ModuleTime:
    module: str  # top-level package of the innermost frame ("json", "logging", "myagent")
    self_ms: float
    share: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "self_ms": round(self.self_ms, 3),
            "share": round(self.share, 4),
        }


@dataclass(frozen=True)
class Profile:
    """One side (on or off the critical path): totals, top functions, modules, folded stacks."""

    total_ms: float
    functions: tuple[FunctionTime, ...]  # by self time, heaviest first (at most ``top``)
    modules: tuple[ModuleTime, ...]  # by self time, heaviest first (at most ``top``)
    stacks: tuple[tuple[Stack, float], ...]  # every folded stack with its ms, heaviest first

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_ms": round(self.total_ms, 3),
            "functions": [f.to_dict() for f in self.functions],
            "modules": [m.to_dict() for m in self.modules],
        }

    def function(self, name: str) -> FunctionTime | None:
        return next((f for f in self.functions if f.function == name), None)


@dataclass(frozen=True)
class CpuHotspots:
    critical_path: Profile
    off_path: Profile
    traces: int  # traces with at least one profiled span
    spans: int  # spans with usable stacks
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The JSON ``cpu_hotspots`` (``docs/analysis-json.md``)."""
        return {
            "profiled_traces": self.traces,
            "profiled_spans": self.spans,
            "weighting": WEIGHTING,
            "critical_path": self.critical_path.to_dict(),
            "off_path": self.off_path.to_dict(),
        }

    def folded(self, off_path: bool = False) -> str:
        """flamegraph.pl's collapsed format, one ``frame;frame;frame COUNT`` line per stack,
        COUNT in microseconds (integers, as the format wants); critical path by default."""
        side = self.off_path if off_path else self.critical_path
        return folded_text(side.stacks)


def folded_text(stacks: tuple[tuple[Stack, float], ...]) -> str:
    lines = []
    for stack, ms in sorted(stacks):
        us = round(ms * 1000)
        if us > 0:
            lines.append(f"{';'.join(stack)} {us}\n")
    return "".join(lines)


def write_folded(hotspots: CpuHotspots, path: str, off_path: bool = False) -> int:
    """Writes ``hotspots.folded()`` to ``path`` (UTF-8); returns the number of stacks."""
    text = hotspots.folded(off_path)
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write(text)
    return text.count("\n")


def parse_stacks(value: Any) -> tuple[list[tuple[Stack, int]], list[str]]:
    """One span's ``tracelens.cpu_stacks`` (a string array, or its JSON text as the store keeps
    it) as ``(frames, weight)`` pairs, and a message per malformed entry."""
    errors: list[str] = []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return [], ["not a JSON string array"]
    if not isinstance(value, list | tuple):
        return [], [f"not a string array but {type(value).__name__}"]
    out: list[tuple[Stack, int]] = []
    for j, entry in enumerate(value):
        if not isinstance(entry, str):
            errors.append(f"entry {j}: not a string")
            continue
        stack, _, count = entry.rpartition(" ")
        if not stack or not count.isdigit() or int(count) <= 0:
            errors.append(f"entry {j}: not 'frame;frame COUNT': {entry[:60]!r}")
            continue
        frames = tuple(stack.split(";"))
        if any(not f for f in frames):
            errors.append(f"entry {j}: an empty frame: {entry[:60]!r}")
            continue
        out.append((frames, int(count)))
    return out, errors


def cpu_hotspots(ta: TraceAnalysis, top: int = TOP) -> CpuHotspots:
    """The functions behind critical-path CPU time, and those off it (see the module doc)."""
    sp = ta.spans
    stacks_col = pl.col("attributes").map.get(A.CPU_STACKS)
    prof = sp.select(
        "_i", "_trace", "span_id", "self_ns", "mix_cpu", stacks_col.alias("_s")
    ).filter(pl.col("_s").is_not_null())
    if prof.height == 0:
        empty = Profile(0.0, (), (), ())
        return CpuHotspots(empty, empty, 0, 0)
    main = ta.sections.filter(pl.col("main") & pl.col("_i").is_in(prof["_i"].implode()))
    on_by_span = dict(main.group_by("_i").agg(pl.col("cpu_ns").sum()).iter_rows())
    on_acc = _Acc()
    off_acc = _Acc()
    warnings: list[str] = []
    used_spans = 0
    traces: set[int] = set()
    for i, trace, span_id, self_ns, mix_cpu, raw in prof.iter_rows():
        parsed, errors = parse_stacks(raw)
        for err in errors:
            if len(warnings) < MAX_WARNINGS:
                warnings.append(f"span {span_id}: {A.CPU_STACKS} {err}")
        weight = sum(w for _, w in parsed)
        cpu_side = float(self_ns or 0) * float(mix_cpu or 0.0)
        if weight <= 0 or cpu_side <= 0:
            continue
        used_spans += 1
        traces.add(trace)
        on = min(max(float(on_by_span.get(i, 0.0)), 0.0), cpu_side)
        for frames, w in parsed:
            share = w / weight
            if on > 0:
                on_acc.add(frames, on * share / 1e6, trace)
            if cpu_side - on > 0:
                off_acc.add(frames, (cpu_side - on) * share / 1e6, trace)
    if len(warnings) >= MAX_WARNINGS:
        warnings.append(f"(further malformed {A.CPU_STACKS} values not listed)")
    n = len(traces)
    return CpuHotspots(
        critical_path=on_acc.profile(n, top),
        off_path=off_acc.profile(n, top),
        traces=n,
        spans=used_spans,
        warnings=tuple(warnings),
    )


def module_of(frame: str) -> str:
    """The top-level package of a ``module:qualname`` frame (a marker frame is its own)."""
    module, sep, _ = frame.partition(":")
    return module.split(".", 1)[0] if sep else frame


class _Acc:
    """Sums of one side: by stack, by function (self, inclusive) and by function and trace."""

    def __init__(self) -> None:
        self.total = 0.0
        self.stacks: dict[Stack, float] = defaultdict(float)
        self.self_ms: dict[str, float] = defaultdict(float)
        self.incl_ms: dict[str, float] = defaultdict(float)
        self.self_tr: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        self.incl_tr: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))

    def add(self, frames: Stack, ms: float, trace: int) -> None:
        self.total += ms
        self.stacks[frames] += ms
        leaf = frames[-1]
        self.self_ms[leaf] += ms
        self.self_tr[leaf][trace] += ms
        for f in set(frames):
            self.incl_ms[f] += ms
            self.incl_tr[f][trace] += ms

    def profile(self, n_traces: int, top: int) -> Profile:
        total = self.total
        names = sorted(self.incl_ms, key=lambda f: (-self.self_ms.get(f, 0.0), -self.incl_ms[f], f))
        functions = tuple(
            FunctionTime(
                function=f,
                self_ms=self.self_ms.get(f, 0.0),
                inclusive_ms=self.incl_ms[f],
                self_share=self.self_ms.get(f, 0.0) / total if total > 0 else 0.0,
                inclusive_share=self.incl_ms[f] / total if total > 0 else 0.0,
                per_trace_self_ms=_quantiles(self.self_tr.get(f, {}), n_traces),
                per_trace_inclusive_ms=_quantiles(self.incl_tr[f], n_traces),
            )
            for f in names[:top]
        )
        by_module: dict[str, float] = defaultdict(float)
        for f, ms in self.self_ms.items():
            by_module[module_of(f)] += ms
        modules = tuple(
            ModuleTime(m, ms, ms / total if total > 0 else 0.0)
            for m, ms in sorted(by_module.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        )
        stacks = tuple(sorted(self.stacks.items(), key=lambda kv: (-kv[1], kv[0])))
        return Profile(total, functions, modules, stacks)


def _quantiles(per_trace: dict[int, float], n_traces: int) -> Quantiles:
    values = np.zeros(max(n_traces, len(per_trace)), dtype=np.float64)
    values[: len(per_trace)] = list(per_trace.values())
    if len(values) == 0:
        return Quantiles(0.0, 0.0)
    p50, p95 = np.percentile(values, (50, 95))
    return Quantiles(float(p50), float(p95))


def render_text(hotspots: CpuHotspots, top: int = 10) -> str:
    """The terminal table: critical-path CPU by function and module, then off the path."""
    if hotspots.spans == 0:
        return "CPU hotspots: no span carries tracelens.cpu_stacks (configure(profile=True))\n"
    lines = [
        f"CPU hotspots ({hotspots.spans} profiled spans in {hotspots.traces} traces)",
    ]
    for title, side in (
        ("on the critical path (latency)", hotspots.critical_path),
        ("off the critical path (capacity, not latency)", hotspots.off_path),
    ):
        lines.append(f"  {title}: {side.total_ms:,.1f} ms CPU")
        if side.total_ms <= 0:
            continue
        width = max([len(f.function) for f in side.functions[:top]] + [8])
        width = min(width, 60)
        lines.append(
            f"    {'function':<{width}}  {'self ms':>10} {'self':>6}  {'incl ms':>10} "
            f"{'incl':>6}  {'p50/p95 per trace (incl)':>24}"
        )
        for f in side.functions[:top]:
            name = f.function if len(f.function) <= width else "…" + f.function[-(width - 1) :]
            pt = f.per_trace_inclusive_ms
            lines.append(
                f"    {name:<{width}}  {f.self_ms:>10,.1f} {f.self_share:>6.1%}  "
                f"{f.inclusive_ms:>10,.1f} {f.inclusive_share:>6.1%}  "
                f"{f'{pt.p50:,.1f} / {pt.p95:,.1f} ms':>24}"
            )
        mods = ", ".join(f"{m.module} {m.share:.0%}" for m in side.modules[:top])
        lines.append(f"    by module (self): {mods}")
    for w in hotspots.warnings:
        lines.append(f"  warning: {w}")
    return "\n".join(lines) + "\n"
