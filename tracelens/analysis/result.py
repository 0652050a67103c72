"""The analysis result: one object that renders as the JSON contract or as terminal tables."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa

from tracelens.analysis import summary as s
from tracelens.analysis.core import TraceAnalysis, analyze_traces


@dataclass
class Analysis:
    traces: TraceAnalysis
    findings: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    top: int | None = None
    errors: list[Exception] = field(default_factory=list)  # inputs skipped with keep_going

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": s.SCHEMA,
            "summary": s.summary(self.traces),
            "operations": s.operations_list(self.traces),
            "traces": s.traces_list(self.traces, self.top),
            "findings": self.findings,
            "warnings": self.warnings,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def to_text(self, top: int | None = None) -> str:
        from tracelens.analysis.text import render_text

        return render_text(self, top=top or self.top or 10)


def analyze_spans(
    spans: pa.Table | pl.DataFrame,
    *,
    top: int | None = None,
    findings: bool = True,
    warnings: list[str] | None = None,
) -> Analysis:
    """Analyse a table of complete traces; ``warnings`` from loading are carried along."""
    ta = analyze_traces(spans)
    found: list[dict[str, Any]] = []
    if findings:
        found = _find(ta)
    return Analysis(traces=ta, findings=found, warnings=[*(warnings or []), *ta.warnings], top=top)


def _find(ta: TraceAnalysis) -> list[dict[str, Any]]:
    import importlib
    import importlib.util

    if importlib.util.find_spec("tracelens.analysis.findings") is None:
        return []  # the bottleneck finder has not landed yet
    module = importlib.import_module("tracelens.analysis.findings")
    result: list[dict[str, Any]] = module.find_all(ta)
    return result
