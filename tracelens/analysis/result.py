"""The analysis result: typed data.

:class:`Analysis` holds typed results (the per-trace tables and tree, the findings) and computes
the summary and the operations table once, on first use.  It imports no renderer: the
``tracelens.analysis/1`` document (``docs/analysis-json.md``) is ``tracelens.render.json``'s and
the terminal tables ``tracelens.render.text``'s, found through ``analysis.outputs`` by the thin
conveniences ``to_dict``, ``to_json`` and ``to_text``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from tracelens.analysis import summary as s
from tracelens.analysis.core import TraceAnalysis, analyze_traces
from tracelens.analysis.outputs import document, render

if TYPE_CHECKING:  # the finder is imported when it runs: --no-findings does not pay for it
    from tracelens.analysis.coldstart import Headline
    from tracelens.analysis.findings.finding import Finding
    from tracelens.analysis.gpu import ModelCallGpu
    from tracelens.analysis.hotspots import CpuHotspots
    from tracelens.analysis.stages import Stages
    from tracelens.analysis.tokens import ModelFit
    from tracelens.analysis.whatif import Answer, WhatIf


@dataclass
class Analysis:
    traces: TraceAnalysis
    findings: list[Finding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    top: int | None = None
    errors: list[Exception] = field(default_factory=list)  # inputs skipped with keep_going
    what_ifs: list[Answer] = field(default_factory=list)  # every --what-if asked: its answer

    @cached_property
    def summary(self) -> s.Summary:
        """Counts, latency percentiles and critical-path time by kind over all traces."""
        return s.summary(self.traces)

    @cached_property
    def stages(self) -> Stages:
        """Critical-path time by stage (transfer, schedule, tool, llm, other) per root
        operation, cold starts left out (``summary.stages``)."""
        from tracelens.analysis.stages import stages

        return stages(self.traces)

    @cached_property
    def models(self) -> list[ModelFit]:
        """The per-token latency fit of each (model, server) (``summary.models``)."""
        from tracelens.analysis.tokens import token_fits

        return token_fits(self.traces)

    @cached_property
    def gpu_model_calls(self) -> list[ModelCallGpu]:
        """The GPU-measured model calls, longest first (``summary.gpu_model_calls``)."""
        from tracelens.analysis.gpu import model_calls

        return model_calls(self.traces)

    @cached_property
    def request_latency(self) -> Headline:
        """Request latency without cold starts, overall and per root operation, and the cold
        starts apart (``summary.request_latency_ms``, ``latency_by_operation``,
        ``cold_starts``)."""
        from tracelens.analysis.coldstart import headline

        return headline(self.traces)

    @cached_property
    def cpu_hotspots(self) -> CpuHotspots:
        """The code behind critical-path CPU time, and off it (``cpu_hotspots``)."""
        from tracelens.analysis.hotspots import cpu_hotspots

        return cpu_hotspots(self.traces)

    @cached_property
    def operations(self) -> list[s.Operation]:
        """Every (service, name), most critical-path time first."""
        return s.operations_list(self.traces)

    def slowest(self, top: int | None = None) -> list[s.TraceSummary]:
        """The ``top`` slowest traces (all when None), each with its critical path."""
        return s.traces_list(self.traces, top)

    def to_dict(self) -> dict[str, Any]:
        """The ``tracelens.analysis/1`` document (docs/analysis-json.md), written by
        ``tracelens.render.json`` (once ``tracelens.render`` is imported)."""
        return document(self)

    def to_json(self, indent: int | None = 2) -> str:
        """``to_dict`` as JSON text (``tracelens.render.json``)."""
        return render(self, "json", indent=indent)

    def to_text(self, top: int | None = None) -> str:
        """The terminal tables (``tracelens.render.text``, once ``tracelens.render`` is
        imported)."""
        return render(self, "text", top=top or self.top or 10)


def analyze_spans(
    spans: pa.Table | pl.DataFrame,
    *,
    top: int | None = None,
    findings: bool = True,
    warnings: list[str] | None = None,
    what_ifs: Sequence[WhatIf] = (),
    what_if_threshold_ms: float | None = None,
) -> Analysis:
    """Analyse a table of complete traces; ``warnings`` from loading are carried along."""
    return complete(
        analyze_traces(spans),
        top=top,
        findings=findings,
        warnings=warnings,
        what_ifs=what_ifs,
        what_if_threshold_ms=what_if_threshold_ms,
    )


def complete(
    trace_analysis: TraceAnalysis,
    *,
    top: int | None = None,
    findings: bool = True,
    warnings: list[str] | None = None,
    what_ifs: Sequence[WhatIf] = (),
    what_if_threshold_ms: float | None = None,
) -> Analysis:
    """The cross-trace part on a whole ``TraceAnalysis`` (per-trace results of every trace,
    however they were computed: here, or per partition on a distributed engine): the findings
    (evidence over all traces, replay); the summary and operations are computed when read.

    ``what_ifs`` (parsed ``--what-if`` values) are findings like the detectors': built on the
    same replay timeline, ordered with them by total saving and put through the same rules
    (alternatives, top change); those saving at least ``what_if_threshold_ms`` at p50
    (``whatif.DEFAULT_THRESHOLD_MS`` when None) are reported, and every one asked for gets an
    answer in ``Analysis.what_ifs``.  ``findings=False`` leaves the detectors out, not them."""
    result = Analysis(
        traces=trace_analysis, warnings=[*(warnings or []), *trace_analysis.warnings], top=top
    )
    if not findings and not what_ifs:
        return result
    from tracelens.analysis.findings import Scored, build_timeline, find_all, rank

    timeline = None
    extra: list[Scored] = []
    if what_ifs:
        from tracelens.analysis.whatif import DEFAULT_THRESHOLD_MS, assessed

        if trace_analysis.spans.height:
            timeline = build_timeline(trace_analysis.tree)
        threshold = DEFAULT_THRESHOLD_MS if what_if_threshold_ms is None else what_if_threshold_ms
        extra, result.what_ifs = assessed(
            trace_analysis, what_ifs, threshold_ms=threshold, fits=result.models, timeline=timeline
        )
    result.findings = (
        find_all(trace_analysis, timeline=timeline, extra=extra) if findings else rank(extra)
    )
    return result
