"""What a comparison needs from one analysis, and nothing more: per trace, its root operation,
its end-to-end latency and its critical-path time by kind and by operation; the operations
seen; the findings.

A ``Profile`` is small (a few numbers per trace and per operation on its critical path), so the
weekly report can keep last week's while it analyses this one.  ``profile`` is the one adapter
between the analysis result and the comparison: when the analysis result changes shape, only
this module changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from tracelens.analysis.core import KIND_NS
from tracelens.analysis.findings.finding import Finding
from tracelens.analysis.kinds import KINDS
from tracelens.analysis.result import Analysis

# An operation: (service, span name).
Op = tuple[str, str]


@dataclass(frozen=True)
class FindingBrief:
    """A finding as a comparison sees it: what it is about (its key) and how much it saves."""

    type: str
    names: tuple[str, ...]
    parent: str | None
    confidence: str | None
    traces: int | None
    saving_p50_ms: float | None

    @property
    def key(self) -> tuple[str, str | None, tuple[str, ...]]:
        """Two runs hold "the same" finding when type, parent and names agree."""
        return (self.type, self.parent, self.names)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "names": list(self.names),
            "parent": self.parent,
            "confidence": self.confidence,
            "traces": self.traces,
            "saving_p50_ms": self.saving_p50_ms,
        }


@dataclass
class RootSample:
    """The traces whose main root is one operation.

    ``latency_ms[t]`` and ``by_kind_ms[t, k]`` per trace; the critical-path time of each
    operation in each trace is a sparse table sorted by operation: rows ``op_start[j]`` to
    ``op_start[j + 1]`` are operation ``ops[j]``, with their trace numbers and milliseconds.
    Each trace's operation times add up to its latency (the sections partition the root).
    """

    root: Op
    latency_ms: np.ndarray
    by_kind_ms: np.ndarray
    ops: tuple[Op, ...]
    op_kind: tuple[str, ...]
    op_start: np.ndarray
    row_trace: np.ndarray
    row_ms: np.ndarray

    @property
    def traces(self) -> int:
        return len(self.latency_ms)

    def op_values(self, j: int) -> np.ndarray:
        """Operation ``j``'s critical-path time in every trace (0 where it is not on it)."""
        out = np.zeros(self.traces)
        lo, hi = self.op_start[j], self.op_start[j + 1]
        np.add.at(out, self.row_trace[lo:hi], self.row_ms[lo:hi])
        return out

    def op_on_path(self, j: int) -> int:
        """In how many traces operation ``j`` is on the critical path."""
        lo, hi = self.op_start[j], self.op_start[j + 1]
        return len(np.unique(self.row_trace[lo:hi]))

    def band_means(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean critical-path time per operation and per kind over the traces ``rows``."""
        take = np.zeros(self.traces, dtype=bool)
        take[rows] = True
        n = max(len(rows), 1)
        op_of_row = np.repeat(np.arange(len(self.ops)), np.diff(self.op_start))
        keep = take[self.row_trace]
        per_op = np.bincount(op_of_row[keep], weights=self.row_ms[keep], minlength=len(self.ops))
        return per_op / n, self.by_kind_ms[rows].sum(axis=0) / n


@dataclass
class Profile:
    """One run (a file set, a store, a window of a store) as a comparison needs it."""

    traces: int
    spans: int
    roots: dict[Op, RootSample]
    operations: dict[Op, int]  # spans per operation, on the critical path or not
    findings: dict[tuple[str, str | None, tuple[str, ...]], FindingBrief]
    warnings: list[str] = field(default_factory=list)


def profile(analysis: Analysis) -> Profile:
    """The comparison's view of ``analysis``."""
    trace_analysis = analysis.traces
    tr = trace_analysis.traces.select(
        "trace_id", "root_service", "root_name", "duration_ns", *KIND_NS
    ).with_row_index("_t")
    crit = (
        trace_analysis.sections.filter(pl.col("main"))
        .group_by("trace_id", "service", "name", "kind")
        .agg(((pl.col("end_ns") - pl.col("start_ns")).sum() / 1e6).alias("ms"))
        .join(tr.select("trace_id", "_t", "root_service", "root_name"), on="trace_id")
    )
    roots: dict[Op, RootSample] = {}
    crit_parts = crit.partition_by("root_service", "root_name", as_dict=True)
    for key, traces in tr.partition_by("root_service", "root_name", as_dict=True).items():
        root = (str(key[0]), str(key[1]))
        part = crit_parts.get(key)
        roots[root] = _root_sample(root, traces, part if part is not None else crit.clear())
    ops = trace_analysis.spans.group_by("service", "name").len()
    operations = {(str(s), str(n)): int(c) for s, n, c in ops.sort("service", "name").iter_rows()}
    briefs = [_brief(f) for f in analysis.findings]
    return Profile(
        traces=tr.height,
        spans=trace_analysis.spans.height,
        roots=dict(sorted(roots.items())),
        operations=operations,
        findings={b.key: b for b in briefs},
        warnings=list(analysis.warnings),
    )


def _root_sample(root: Op, traces: pl.DataFrame, crit: pl.DataFrame) -> RootSample:
    t_global = traces["_t"].to_numpy()
    local = np.zeros(int(t_global.max()) + 1 if len(t_global) else 0, dtype=np.int64)
    local[t_global] = np.arange(len(t_global))
    # An operation's kind: the kind it spends most of its critical-path time in.
    kinds = (
        crit.group_by("service", "name", "kind")
        .agg(pl.col("ms").sum())
        .sort(["ms", "kind"], descending=[True, False])
        .unique(["service", "name"], keep="first", maintain_order=True)
        .sort("service", "name")
        .with_row_index("_op")
    )
    rows = (
        crit.group_by("_t", "service", "name")
        .agg(pl.col("ms").sum())
        .join(kinds.select("service", "name", "_op"), on=["service", "name"])
        .sort("_op", "_t")
    )
    op_of_row = rows["_op"].to_numpy().astype(np.int64)
    return RootSample(
        root=root,
        latency_ms=traces["duration_ns"].to_numpy().astype(np.float64) / 1e6,
        by_kind_ms=traces.select(KIND_NS).to_numpy().astype(np.float64) / 1e6,
        ops=tuple((str(s), str(n)) for s, n in kinds.select("service", "name").iter_rows()),
        op_kind=tuple(str(k) for k in kinds["kind"].to_list()),
        op_start=np.concatenate(
            [[0], np.cumsum(np.bincount(op_of_row, minlength=kinds.height))]
        ).astype(np.int64),
        row_trace=local[rows["_t"].to_numpy()],
        row_ms=rows["ms"].to_numpy().astype(np.float64),
    )


def _brief(f: Finding) -> FindingBrief:
    p50 = f.saving_ms.get("p50")
    return FindingBrief(
        type=f.type.value,
        names=tuple(f.names),
        parent=f.parent,
        confidence=f.confidence,
        traces=f.traces,
        saving_p50_ms=None if p50 is None else float(p50),
    )


__all__ = ["KINDS", "FindingBrief", "Op", "Profile", "RootSample", "profile"]
