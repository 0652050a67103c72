"""The embedded engine: the whole analysis in this process (the default)."""

from __future__ import annotations

import os
from typing import Any

from tracelens.analysis import ANALYSIS_COLUMNS, TraceAnalysis, analyze_traces
from tracelens.engines import Engine


class EmbeddedEngine(Engine):
    """Reads a Parquet span set (or any Parquet with the span columns) with Arrow and analyses
    it here.  Files and stores go through ``tracelens.api.load_spans`` instead."""

    name = "embedded"

    def traces(self, source: Any) -> TraceAnalysis:
        from tracelens.parquet import read_parquet

        if not isinstance(source, (str, os.PathLike)):
            raise TypeError("the embedded engine reads a Parquet path")
        return analyze_traces(read_parquet(source, ANALYSIS_COLUMNS))
