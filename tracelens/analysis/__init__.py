"""The analysis: pure functions from span tables to result tables and documents."""

from __future__ import annotations

from tracelens.analysis.core import ANALYSIS_COLUMNS, TraceAnalysis, analyze_traces
from tracelens.analysis.result import Analysis, analyze_spans

__all__ = ["ANALYSIS_COLUMNS", "Analysis", "TraceAnalysis", "analyze_spans", "analyze_traces"]
