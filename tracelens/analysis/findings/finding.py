"""What the bottleneck finder reports, typed: a :class:`Finding` per remedy, with its evidence.

Detectors, the replay, the text output and the HTML report all read and write these objects; the
one JSON form of a finding (``docs/analysis-json.md``) is written by ``Analysis.to_dict`` in
``analysis/result.py``, nowhere else.  :class:`FindingType` is the table of finding types:
adding one means a member there (its position is its rank, which breaks ties in the ordering of
findings) and its own module (its detector and details class).

What each type shows lives with the type, not in the renderers: its headline
(``FindingType.headline``, the ``title`` of a :class:`Finding`) and its own figures (the
``facts`` and ``text_lines`` of its details class), so the text and HTML renderers hold no
per-type branches.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Literal


class FindingType(str, Enum):
    """The finding types, one table: a member per type, in the order that breaks ties between
    equal savings (its ``rank``).  Each member's entry: its JSON ``type`` (the schema name),
    its headline (``headline``, over the finding's names; None: "<Type>: {names}"), its detector
    (``"module:function"`` in ``tracelens.analysis.findings``: a ``Detector`` that reads
    ``detectors.Inputs``, called by ``candidates``; None: built elsewhere, e.g. the what-ifs asked
    for, or by another type's detector) and whether it is reported only with a saving on the
    critical path.  Its details class and its detector live in its own module; adding a type is
    a member here plus that module (``docs/architecture.md``, "How to add")."""

    _value_: str
    headline: str | None
    detector: str | None
    needs_saving: bool

    def __new__(
        cls,
        value: str,
        headline: str | None = None,
        detector: str | None = None,
        needs_saving: bool = False,
    ) -> FindingType:
        member = str.__new__(cls, value)
        member._value_ = value
        member.headline = headline
        member.detector = detector
        member.needs_saving = needs_saving
        return member

    # fmt: off
    PARALLELIZABLE = ("parallelizable", "Run {names} in parallel", "detectors:parallelizable", True)
    CACHEABLE = ("cacheable", "Cache {names}", "detectors:cacheable")
    RETRY = ("retry", "Stop the retries of {names}", "detectors:retry")
    N_PLUS_ONE = ("n_plus_one", "Batch the repeated {names} calls", "detectors:n_plus_one", True)
    TAIL = ("tail", None, "detectors:tail", True)
    REPEATED_WRITE = ("repeated_write", None, "detectors:repeated_write")
    POLLING = ("polling", None, None)  # found with the repeats (detectors:cacheable)
    WHAT_IF = ("what_if", None, None)  # a latency-model what-if asked for (analyze --what-if)
    LAUNCH_BOUND = ("launch_bound", "Keep the GPU busy: {names} is launch-bound", "detectors:launch_bound")  # noqa: E501
    # fmt: on

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {t: k for k, t in enumerate(FindingType)}

Confidence = Literal["low", "medium", "high"]
CONFIDENCE: tuple[Confidence, ...] = ("low", "medium", "high")  # weakest first


@dataclass(frozen=True)
class Evidence:
    """One reason behind a verdict: a stable machine-readable ``code`` (docs/analysis-json.md
    lists them) and the sentence a person reads."""

    code: str
    detail: str


# A figure as a report lists it: a number, a yes/no, a text (None: not shown).
Fact = str | float | bool | None


@dataclass(frozen=True)
class Shown:
    """The base of every type's details class (``Details``): its fields are the finding's own
    in the JSON (``docs/analysis-json.md``), its methods what the text and HTML outputs show
    beyond the common fields.  A new type's details class derives from it in the type's own
    module; no union, no renderer changes."""

    def text_label(self) -> str | None:
        """The finding's name in the terminal output, when not its type's."""
        return None

    def title(self, names: str) -> str | None:
        """The finding's headline, when the details say more than the type's title."""
        return None

    def facts(self) -> list[tuple[str, Fact]]:
        """The type's own figures, by name (the HTML report's list)."""
        return []

    def text_lines(self) -> list[str]:
        """Lines the terminal output adds under the finding."""
        return []


@dataclass(frozen=True)
class ParallelDetails(Shown):
    hops_per_trace: float  # median hops of the pattern per trace

    def facts(self) -> list[tuple[str, Fact]]:
        return [("hops_per_trace", self.hops_per_trace)]


@dataclass(frozen=True)
class LoopDetails(Shown):
    calls_per_trace: float  # median calls of the N+1 loop per trace

    def facts(self) -> list[tuple[str, Fact]]:
        return [("calls_per_trace", self.calls_per_trace)]


@dataclass(frozen=True)
class CacheDetails(Shown):
    identical_results: bool | None  # None: not every repeat's result was recorded
    suggested_ttl_s: float
    changed_results: int

    def facts(self) -> list[tuple[str, Fact]]:
        return [
            ("identical_results", self.identical_results),
            ("suggested_ttl_s", self.suggested_ttl_s),
            ("changed_results", self.changed_results),
        ]

    def text_lines(self) -> list[str]:
        extra = []
        if self.identical_results is not None:
            extra.append(f"identical results: {'yes' if self.identical_results else 'no'}")
        extra.append(f"suggested TTL {self.suggested_ttl_s:g} s")
        return ["; ".join(extra)]


@dataclass(frozen=True)
class TailDetails(Shown):
    growth_ms: dict[str, float]  # per operation: slow traces' extra critical-path time
    tail_traces: int

    def facts(self) -> list[tuple[str, Fact]]:
        return [("tail_traces", self.tail_traces)]


@dataclass(frozen=True)
class WhatIfDetails(Shown):
    what_if: str  # the what-if as asked for, e.g. "trim_context=0.5"

    def title(self, names: str) -> str | None:
        return f"What if {self.what_if}: {names}"

    def text_label(self) -> str | None:
        return f"what_if {self.what_if}"

    def facts(self) -> list[tuple[str, Fact]]:
        return [("what_if", self.what_if)]


def _pct1(value: float) -> str:
    """A share as a percentage with one decimal ("–" for NaN), as the report prints shares."""
    return "–" if value != value else f"{float(value) * 100:.1f}%"


@dataclass(frozen=True)
class LaunchBoundDetails(Shown):
    gpu_busy_share: float  # median over the calls: device busy over the call's own time
    host_on_cpu_share: float  # median: the host thread's on-CPU share of it
    busy_threshold: float  # launch-bound under this GPU busy share
    device_ms_per_call: float  # median device time (gpu_ns + gpu_after_ns): the what-if's floor
    call_ms: float  # median call duration
    launches_per_call: float  # median
    remedies: list[str]

    def facts(self) -> list[tuple[str, Fact]]:
        return [
            ("gpu_busy_share", _pct1(self.gpu_busy_share)),
            ("host_on_cpu_share", _pct1(self.host_on_cpu_share)),
            ("device_ms_per_call", self.device_ms_per_call),
            ("call_ms", self.call_ms),
            ("remedies", "; ".join(r.split(" (")[0] for r in self.remedies)),
        ]


Details = Shown  # every type's details class derives from it


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

    @property
    def title(self) -> str:
        """The headline a report gives the finding: the type's ``headline`` over its
        names (the first four), or what its details say instead (a what-if: what was asked)."""
        names = _names(self.names)
        shown = self.details.title(names) if self.details is not None else None
        if shown is not None:
            return shown
        generic = self.type.value.replace("_", " ").capitalize() + ": {names}"
        title = (self.type.headline or generic).format(names=names)
        if self.type is FindingType.PARALLELIZABLE and self.parent:
            title += f" under {self.parent}"
        return title

    @property
    def label(self) -> str:
        """The finding's name in the terminal output: its type, or what its details call it."""
        shown = self.details.text_label() if self.details is not None else None
        return self.type.value if shown is None else shown


def _names(names: list[str]) -> str:
    items = names if len(names) <= 4 else [*names[:4], f"{len(names) - 4} more"]
    return ", ".join(items)


__all__ = [
    "CONFIDENCE",
    "CacheDetails",
    "Confidence",
    "Details",
    "Evidence",
    "Example",
    "Fact",
    "Finding",
    "FindingType",
    "LaunchBoundDetails",
    "LoopDetails",
    "ParallelDetails",
    "PathOp",
    "Shown",
    "TailDetails",
    "WhatIfDetails",
]
