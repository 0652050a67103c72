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

Three views per side: *entry points* (the call by which the traced code handed the CPU to
other code: ``json:dumps`` 70 %, ``logging:Logger.info`` 20 %; what a reader acts on),
*functions* (self and inclusive time, as a profiler's top table), *modules* (self time by
top-level package).  Pure: a ``TraceAnalysis`` in, a ``CpuHotspots`` out; ``to_dict`` is the
JSON ``cpu_hotspots``; its terminal table is ``tracelens.render.text.hotspots_text``, its
flamegraph.pl / speedscope input ``tracelens.render.folded``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import polars as pl
from tracelens_instrumentation import attributes as A

from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.fields import Record, fields_dict

TOP: Final = 20
MAX_WARNINGS: Final = 5
WEIGHTING: Final = (
    "each span's CPU side (self time minus io and wait) is shared out over its "
    "tracelens.cpu_stacks in proportion to their weights; the part equal to the CPU time of the "
    "span's critical-path sections counts as on the critical path, the rest as off it"
)

Stack = tuple[str, ...]


@dataclass(frozen=True)
class Quantiles(Record):
    """Per-trace milliseconds over the profiled traces (traces without the function count 0)."""

    DIGITS: ClassVar[Mapping[str, int]] = {"p50": 3, "p95": 3}

    p50: float
    p95: float


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
            **fields_dict(
                self,
                *("function", "self_ms", "inclusive_ms", "self_share", "inclusive_share"),
                digits={"self_ms": 3, "inclusive_ms": 3, "self_share": 4, "inclusive_share": 4},
            ),
            "per_trace": {
                "self_ms": self.per_trace_self_ms.to_dict(),
                "inclusive_ms": self.per_trace_inclusive_ms.to_dict(),
            },
        }


@dataclass(frozen=True)
class ModuleTime(Record):
    DIGITS: ClassVar[Mapping[str, int]] = {"self_ms": 3, "share": 4}

    module: str  # top-level package of the innermost frame ("json", "logging", "myagent")
    self_ms: float
    share: float


@dataclass(frozen=True)
class EntryPoint:
    """Where the traced code handed the CPU over: the first frame of a stack in another
    top-level package than the span's own function (``json:dumps``, ``logging:Logger.info``),
    or, for a stack that never leaves that package, its innermost frame."""

    function: str
    ms: float  # inclusive: everything below the call
    share: float
    per_trace_ms: Quantiles

    def to_dict(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "ms": round(self.ms, 3),
            "share": round(self.share, 4),
            "per_trace_ms": self.per_trace_ms.to_dict(),
        }


@dataclass(frozen=True)
class Profile:
    """One side (on or off the critical path): totals, top functions, modules, folded stacks."""

    total_ms: float
    entry_points: tuple[EntryPoint, ...]  # heaviest first, every one
    functions: tuple[FunctionTime, ...]  # by self time, then inclusive time; every one
    modules: tuple[ModuleTime, ...]  # by self time, heaviest first
    stacks: tuple[tuple[Stack, float], ...]  # every folded stack with its ms, heaviest first

    def to_dict(self, top: int = TOP) -> dict[str, Any]:
        return {
            "total_ms": round(self.total_ms, 3),
            "entry_points": [e.to_dict() for e in self.entry_points[:top]],
            "functions": [f.to_dict() for f in self.functions[:top]],
            "modules": [m.to_dict() for m in self.modules[:top]],
        }

    def function(self, name: str) -> FunctionTime | None:
        return next((f for f in self.functions if f.function == name), None)

    def entry_point(self, name: str) -> EntryPoint | None:
        return next((e for e in self.entry_points if e.function == name), None)


@dataclass(frozen=True)
class CpuHotspots:
    critical_path: Profile
    off_path: Profile
    traces: int  # traces with at least one profiled span
    spans: int  # spans with usable stacks
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self, top: int = TOP) -> dict[str, Any]:
        """The JSON ``cpu_hotspots`` (``docs/analysis-json.md``), ``top`` entries per list."""
        return {
            "profiled_traces": self.traces,
            "profiled_spans": self.spans,
            "weighting": WEIGHTING,
            "critical_path": self.critical_path.to_dict(top),
            "off_path": self.off_path.to_dict(top),
            "warnings": list(self.warnings),
        }


_COUNT: Final = re.compile(r"[0-9]{1,18}").fullmatch


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
        # ASCII digits that fit an int64 (isdigit() also takes "²", which int() refuses, and
        # int() refuses a count of more than 4,300 digits): anything else is malformed.
        if not stack or _COUNT(count) is None or int(count) <= 0:
            errors.append(f"entry {j}: not 'frame;frame COUNT': {entry[:60]!r}")
            continue
        frames = tuple(stack.split(";"))
        if any(not f for f in frames):
            errors.append(f"entry {j}: an empty frame: {entry[:60]!r}")
            continue
        out.append((frames, int(count)))
    return out, errors


def cpu_hotspots(trace_analysis: TraceAnalysis) -> CpuHotspots:
    """The functions behind critical-path CPU time, and those off it (see the module doc)."""
    sp = trace_analysis.spans
    stacks_col = pl.col("attributes").map.get(A.CPU_STACKS)
    prof = sp.select(
        "_i", "_trace", "span_id", "self_ns", "mix_cpu", stacks_col.alias("_s")
    ).filter(pl.col("_s").is_not_null())
    if prof.height == 0:
        empty = Profile(0.0, (), (), (), ())
        return CpuHotspots(empty, empty, 0, 0)
    main = trace_analysis.sections.filter(pl.col("main") & pl.col("_i").is_in(prof["_i"].implode()))
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
        critical_path=on_acc.profile(n),
        off_path=off_acc.profile(n),
        traces=n,
        spans=used_spans,
        warnings=tuple(warnings),
    )


def module_of(frame: str) -> str:
    """The top-level package of a ``module:qualname`` frame (a marker frame is its own)."""
    module, sep, _ = frame.partition(":")
    return module.split(".", 1)[0] if sep else frame


def entry_of(frames: Stack) -> str:
    """The stack's entry point (see ``EntryPoint``)."""
    home = module_of(frames[0])
    for f in frames[1:]:
        if module_of(f) != home:
            return f
    return frames[-1]


_PerTrace = dict[str, dict[int, float]]


class _Acc:
    """Sums of one side: by stack, entry point, function (self, inclusive), and per trace."""

    def __init__(self) -> None:
        self.total = 0.0
        self.stacks: dict[Stack, float] = defaultdict(float)
        self.entry: _PerTrace = defaultdict(lambda: defaultdict(float))
        self.self_tr: _PerTrace = defaultdict(lambda: defaultdict(float))
        self.incl_tr: _PerTrace = defaultdict(lambda: defaultdict(float))

    def add(self, frames: Stack, ms: float, trace: int) -> None:
        self.total += ms
        self.stacks[frames] += ms
        self.entry[entry_of(frames)][trace] += ms
        self.self_tr[frames[-1]][trace] += ms
        for f in set(frames):
            self.incl_tr[f][trace] += ms

    def profile(self, n_traces: int) -> Profile:
        total = self.total

        def share(ms: float) -> float:
            return ms / total if total > 0 else 0.0

        entries = sorted(
            (EntryPoint(f, ms, share(ms), _quantiles(tr, n_traces)) for f, tr in self.entry.items()
             for ms in (sum(tr.values()),)),
            key=lambda e: (-e.ms, e.function),
        )  # fmt: skip
        self_ms = {f: sum(tr.values()) for f, tr in self.self_tr.items()}
        functions = []
        for f, tr in self.incl_tr.items():
            incl = sum(tr.values())
            own = self_ms.get(f, 0.0)
            functions.append(
                FunctionTime(
                    function=f,
                    self_ms=own,
                    inclusive_ms=incl,
                    self_share=share(own),
                    inclusive_share=share(incl),
                    per_trace_self_ms=_quantiles(self.self_tr.get(f, {}), n_traces),
                    per_trace_inclusive_ms=_quantiles(tr, n_traces),
                )
            )
        functions.sort(key=lambda x: (-x.self_ms, -x.inclusive_ms, x.function))
        by_module: dict[str, float] = defaultdict(float)
        for f, ms in self_ms.items():
            by_module[module_of(f)] += ms
        modules = tuple(
            ModuleTime(m, ms, share(ms))
            for m, ms in sorted(by_module.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        stacks = tuple(sorted(self.stacks.items(), key=lambda kv: (-kv[1], kv[0])))
        return Profile(total, tuple(entries), tuple(functions), modules, stacks)


def _quantiles(per_trace: dict[int, float], n_traces: int) -> Quantiles:
    """p50 and p95 of the per-trace values, the traces not in ``per_trace`` counting 0, as
    ``np.percentile`` (linear) would give over the zero-padded array, without building it."""
    values = sorted(per_trace.values())
    n = max(n_traces, len(values))
    if n == 0:
        return Quantiles(0.0, 0.0)
    zeros = n - len(values)

    def at(k: int) -> float:
        return 0.0 if k < zeros else values[k - zeros]

    def q(p: float) -> float:
        pos = p * (n - 1)
        lo = int(pos)
        hi = min(lo + 1, n - 1)
        return at(lo) + (at(hi) - at(lo)) * (pos - lo)

    return Quantiles(q(0.50), q(0.95))
