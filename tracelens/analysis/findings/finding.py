"""What the bottleneck finder reports, typed: a :class:`Finding` per remedy, with its evidence.

Detectors, the replay, the text output and the HTML report all read and write these objects; the
one JSON form of a finding (``docs/analysis-json.md``) is written by ``Analysis.to_dict`` in
``analysis/result.py``, nowhere else.  The finding types are the members of
:class:`FindingType`: adding one means adding a member here (its rank breaks ties in the
ordering of findings) and a detector that builds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal


class FindingType(str, Enum):
    """The kinds of bottleneck, in the order that breaks ties between equal savings."""

    PARALLELIZABLE = "parallelizable"
    CACHEABLE = "cacheable"
    RETRY = "retry"
    N_PLUS_ONE = "n_plus_one"
    TAIL = "tail"
    REPEATED_WRITE = "repeated_write"
    POLLING = "polling"
    WHAT_IF = "what_if"  # a latency-model what-if asked for (analyze --what-if)
    LAUNCH_BOUND = "launch_bound"  # model calls whose GPU waits for the host

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def needs_saving(self) -> bool:
        """Types whose whole point is the latency saving: without one they are not reported."""
        return self in _NEEDS_SAVING


_RANK = {t: k for k, t in enumerate(FindingType)}
_NEEDS_SAVING = frozenset({FindingType.PARALLELIZABLE, FindingType.N_PLUS_ONE, FindingType.TAIL})

Confidence = Literal["low", "medium", "high"]
CONFIDENCE: tuple[Confidence, ...] = ("low", "medium", "high")  # weakest first


@dataclass(frozen=True)
class Evidence:
    """One reason behind a verdict: a stable machine-readable ``code`` (docs/analysis-json.md
    lists them) and the sentence a person reads."""

    code: str
    detail: str


@dataclass(frozen=True)
class ParallelDetails:
    hops_per_trace: float  # median hops of the pattern per trace


@dataclass(frozen=True)
class LoopDetails:
    calls_per_trace: float  # median calls of the N+1 loop per trace


@dataclass(frozen=True)
class CacheDetails:
    identical_results: bool | None  # None: not every repeat's result was recorded
    suggested_ttl_s: float
    changed_results: int


@dataclass(frozen=True)
class TailDetails:
    growth_ms: dict[str, float]  # per operation: slow traces' extra critical-path time
    tail_traces: int


@dataclass(frozen=True)
class WhatIfDetails:
    what_if: str  # the what-if as asked for, e.g. "trim_context=0.5"


@dataclass(frozen=True)
class LaunchBoundDetails:
    gpu_busy_share: float  # median over the calls: device busy over the call's own time
    host_on_cpu_share: float  # median: the host thread's on-CPU share of it
    busy_threshold: float  # launch-bound under this GPU busy share
    device_ms_per_call: float  # median device time (gpu_ns + gpu_after_ns): the what-if's floor
    call_ms: float  # median call duration
    launches_per_call: float  # median
    remedies: list[str]


Details = (
    ParallelDetails | LoopDetails | CacheDetails | TailDetails | WhatIfDetails | LaunchBoundDetails
)


@dataclass(frozen=True)
class PathOp:
    """One operation of a projected critical path and its exclusive time on it."""

    name: str
    ms: float


@dataclass(frozen=True)
class Example:
    """One affected trace, re-timed with the change applied and analysed again."""

    trace_id: str
    span_ids: list[str] | None  # the spans of one occurrence; None when there is none (tail)
    latency_ms: float
    projected_latency_ms: float
    projected_critical_path: list[PathOp]  # its biggest operations after the change


@dataclass
class Finding:
    """One bottleneck and what acting on it saves, from the what-if replay.

    ``saving_ms`` is over the affected traces and ``projected_latency_ms`` over all traces, both
    as ``{"p50": ..., "p95": ...}`` in milliseconds.
    """

    type: FindingType
    names: list[str]
    services: list[str]
    parent: str | None
    parent_service: str | None
    traces: int
    occurrences: int
    saving_ms: dict[str, float]
    projected_latency_ms: dict[str, float]
    total_saving_ms: float
    traces_on_critical_path: int
    confidence: Confidence
    evidence: list[Evidence]
    details: Details | None = None
    example: Example | None = None
    # Savings that add up (issue 25): the index (in the findings list) of the better finding
    # whose change touches some of the same spans (acting on both does not save both), and
    # whether this one is worth showing as a top change (``assess.top_change``).
    alternative_to: int | None = None
    top_change: bool = True

    @property
    def explanation(self) -> str:
        """The evidence in one sentence, for display."""
        return "; ".join(e.detail for e in self.evidence)


__all__ = [
    "CONFIDENCE",
    "CacheDetails",
    "Confidence",
    "Details",
    "Evidence",
    "Example",
    "Finding",
    "FindingType",
    "LaunchBoundDetails",
    "LoopDetails",
    "ParallelDetails",
    "PathOp",
    "TailDetails",
    "WhatIfDetails",
]
