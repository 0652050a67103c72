"""The analysis result: typed data, and the JSON contract it is written as.

:class:`Analysis` holds typed results (the per-trace tables and tree, the findings) and computes
the summary and the operations table once, on first use.  ``Analysis.to_dict`` is the one place
the ``tracelens.analysis/1`` document (``docs/analysis-json.md``) is produced; the helpers
below it write each typed object in the document's field order, and ``to_json`` its text (the
JSON is the result's contract, written here once).  It imports no renderer: the terminal tables
are ``tracelens.render.text``'s, found through ``analysis.outputs``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from tracelens.analysis import summary as s
from tracelens.analysis.core import TraceAnalysis, analyze_traces
from tracelens.analysis.fields import fields_dict
from tracelens.analysis.outputs import render

if TYPE_CHECKING:  # the finder is imported when it runs: --no-findings does not pay for it
    from tracelens.analysis.coldstart import Headline
    from tracelens.analysis.findings.finding import Example, Finding
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
        """The ``tracelens.analysis/1`` document (docs/analysis-json.md)."""
        return self._document([_trace_json(t) for t in self.slowest(self.top)])

    def _document(self, traces: list[Any]) -> dict[str, Any]:
        from tracelens.analysis.gpu import MAX_MODEL_CALLS

        return {
            "schema": s.SCHEMA,
            "summary": {
                **_summary_json(self.summary),
                "stages": self.stages.to_dict(),
                "models": [m.to_dict() for m in self.models],
                "gpu_model_calls": [c.to_dict() for c in self.gpu_model_calls[:MAX_MODEL_CALLS]],
                **self.request_latency.to_dict(),
            },
            "operations": [_operation_json(o) for o in self.operations],
            "traces": traces,
            "findings": [finding_json(f) for f in self.findings],
            "what_ifs": [a.to_dict() for a in self.what_ifs],
            "warnings": self.warnings,
            "cpu_hotspots": self.cpu_hotspots.to_dict(),
        }

    def to_json(self, indent: int | None = 2) -> str:
        """``to_dict`` as JSON text.  Indented, the traces (every trace without ``top``: about
        100 critical-path rows each) are encoded one at a time into the text, never held all as
        dicts at once: that held 1.1 GB for 1M spans, and the encoder's pieces 1.9 GB more."""
        slowest = self.slowest(self.top)
        if indent is None or not slowest:
            return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)
        text = json.dumps(self._document([_MARK]), indent=indent, ensure_ascii=False)
        pad = "\n" + " " * (2 * indent)  # a trace is at depth 2: document, "traces" list
        # Real newlines only come from the layout (strings escape theirs): this is the one place.
        mark = f'"traces": [{pad}{json.dumps(_MARK)}'
        head, tail = text.split(mark)
        parts = [head, '"traces": [', pad]
        for i, t in enumerate(slowest):
            if i:
                parts.append("," + pad)
            parts.append(
                json.dumps(_trace_json(t), indent=indent, ensure_ascii=False).replace("\n", pad)
            )
        parts.append(tail)
        return "".join(parts)

    def to_text(self, top: int | None = None) -> str:
        """The terminal tables (``tracelens.render.text``, once ``tracelens.render`` is
        imported)."""
        return render(self, "text", top=top or self.top or 10)


_MARK = "\x00traces\x00"  # where ``to_json`` writes the traces (a control character: escaped)


def _summary_json(summ: s.Summary) -> dict[str, Any]:
    return fields_dict(summ)


def _operation_json(op: s.Operation) -> dict[str, Any]:
    return fields_dict(op.rounded())


# A trace's fields but its critical path: a table, written out as rows.
_TRACE_FIELDS = tuple(f.name for f in fields(s.TraceSummary) if f.name != "critical_path")


def _trace_json(t: s.TraceSummary) -> dict[str, Any]:
    return {
        **fields_dict(t, *_TRACE_FIELDS),
        "critical_path": t.critical_path.to_dicts(),
    }


def finding_json(f: Finding) -> dict[str, Any]:
    """One finding as ``docs/analysis-json.md`` states it: the common fields, then the type's
    own (``details``), then its example trace."""
    out: dict[str, Any] = {"type": f.type.value, "names": f.names, "services": f.services}
    if f.parent is not None:
        out["parent"] = f.parent
        out["parent_service"] = f.parent_service
    out.update(
        fields_dict(
            f,
            *("traces", "occurrences", "saving_ms", "projected_latency_ms", "total_saving_ms"),
            *("traces_on_critical_path", "confidence", "evidence", "explanation"),
        )
    )
    out["alternative_to"] = f.alternative_to
    out["top_change"] = f.top_change
    if f.details is not None:
        out.update(asdict(f.details))
    if f.example is not None:
        out.update(_example_json(f.example))
    return out


def _example_json(ex: Example) -> dict[str, Any]:
    out: dict[str, Any] = {"example_trace_id": ex.trace_id}
    if ex.span_ids is not None:
        out["span_ids"] = ex.span_ids
    out.update(
        example_latency_ms=ex.latency_ms,
        example_projected_latency_ms=ex.projected_latency_ms,
        example_projected_critical_path=[
            {"name": p.name, "ms": p.ms} for p in ex.projected_critical_path
        ],
    )
    return out


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
