"""Engines: where the analysis runs, behind one narrow interface.

The analysis is one engine-agnostic core: ``tracelens.analysis.core.analyze_traces`` (a pure
function of a table of complete traces) and the cross-trace parts that read its result
(``analysis.result.complete``: the summary, the operations, the bottleneck finder, the what-ifs
asked for and their replay).  An engine only decides where the per-trace part runs and how its
results come together:

* ``embedded`` (default): everything in this process, DuckDB/Arrow in, Polars/NumPy inside;
* ``spark``: the per-trace part on Spark executors over a Parquet span set or any table Spark
  reads, bucketed by a hash of ``trace_id``; the cross-trace part on the driver.

What an engine reads is a typed ``Source``: spans already loaded (``SpanTable``: files and
stores are read by ``tracelens.api.load_spans``), a Parquet path (``ParquetSpans``) or a Spark
catalog table (``SparkTable``).  Every caller (``tracelens.api.analyze``, the HTML report, the
collector's metrics loop) goes through ``get_engine(...).analyze`` or ``.traces``, so both
engines hand the same ``TraceAnalysis`` to ``complete`` and give the same document by
construction.
"""

from __future__ import annotations

from tracelens.analysis.result import complete
from tracelens.engines.base import (
    ENGINES,
    Engine,
    EngineError,
    ParquetSpans,
    Source,
    SpanTable,
    SparkTable,
    describe,
)


def get_engine(name: str, *, master: str | None = None) -> Engine:
    """The engine called ``name`` (one of ``ENGINES``); ``master`` is Spark's master URL."""
    if name == "embedded":
        from tracelens.engines.embedded import EmbeddedEngine

        return EmbeddedEngine()
    if name == "spark":
        from tracelens.engines.spark import SparkEngine

        return SparkEngine(master=master)
    raise ValueError(f"unknown engine {name!r}; one of {', '.join(ENGINES)}")


__all__ = [
    "ENGINES",
    "Engine",
    "EngineError",
    "ParquetSpans",
    "Source",
    "SpanTable",
    "SparkTable",
    "complete",
    "describe",
    "get_engine",
]
