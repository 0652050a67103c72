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

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tracelens.analysis import Analysis, TraceAnalysis
from tracelens.analysis.result import complete
from tracelens.errors import TracelensError

if TYPE_CHECKING:
    import pyarrow as pa

    from tracelens.analysis.whatif import WhatIf

ENGINES: Final = ("embedded", "spark")


class EngineError(TracelensError):
    """An engine cannot run here (its package or runtime is missing, or it cannot read the
    source it was given)."""


@dataclass(frozen=True)
class SpanTable:
    """Spans already in memory (read from files or a store), in the span schema with at least
    ``analysis.ANALYSIS_COLUMNS``."""

    spans: pa.Table


@dataclass(frozen=True)
class ParquetSpans:
    """A Parquet span set (``tracelens export --parquet``) or any Parquet with the span
    columns: a local path, or a URL the engine's reader understands (Spark: ``s3a://...``)."""

    path: str

    @classmethod
    def at(cls, path: str | os.PathLike[str]) -> ParquetSpans:
        return cls(os.fspath(path))


@dataclass(frozen=True)
class SparkTable:
    """A table in Spark's catalog (``spark.table(name)``)."""

    name: str


Source = SpanTable | ParquetSpans | SparkTable


def describe(source: Source) -> str:
    """The source as a person names it (in errors and report headers)."""
    if isinstance(source, SpanTable):
        return f"{source.spans.num_rows:,} spans"
    if isinstance(source, ParquetSpans):
        return source.path
    return source.name


class Engine(ABC):
    """Analyse a ``Source``.  An engine runs the per-trace part (``traces``); the cross-trace
    part (``complete``) is the same for all, here."""

    name: str

    @abstractmethod
    def traces(self, source: Source) -> TraceAnalysis:
        """The per-trace part of the analysis over every span of ``source``; ``EngineError``
        for a kind of source this engine does not read."""

    def analyze(
        self,
        source: Source,
        *,
        top: int | None = None,
        findings: bool = True,
        warnings: list[str] | None = None,
        what_ifs: Sequence[WhatIf] = (),
        what_if_threshold_ms: float | None = None,
    ) -> Analysis:
        """The analysis of every span of ``source``, with the findings (``findings``) and the
        what-ifs asked for (``analysis.result.complete``); ``warnings`` from loading are
        carried."""
        return complete(
            self.traces(source),
            top=top,
            findings=findings,
            warnings=warnings,
            what_ifs=what_ifs,
            what_if_threshold_ms=what_if_threshold_ms,
        )

    def refuse(self, source: Source) -> EngineError:
        return EngineError(f"the {self.name} engine does not read {type(source).__name__}")


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
