"""The embedded engine: the whole analysis in this process (the default, for files, stores and
Parquet span sets alike)."""

from __future__ import annotations

from tracelens.analysis import ANALYSIS_COLUMNS, TraceAnalysis, analyze_traces
from tracelens.engines.base import Engine, ParquetSpans, Source, SpanTable


class EmbeddedEngine(Engine):
    """Analyses spans in memory (``SpanTable``) or a Parquet span set read with Arrow
    (``ParquetSpans``) here; a Spark table needs the Spark engine."""

    name = "embedded"

    def traces(self, source: Source) -> TraceAnalysis:
        if isinstance(source, SpanTable):
            return analyze_traces(source.spans)
        if isinstance(source, ParquetSpans):
            from tracelens.parquet import read_parquet

            return analyze_traces(read_parquet(source.path, ANALYSIS_COLUMNS))
        raise self.refuse(source)
