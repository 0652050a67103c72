"""Engines: where the analysis runs, behind one narrow interface.

The analysis is one engine-agnostic core: ``tracelens.analysis.core.analyze_traces`` (a pure
function of a table of complete traces) and the cross-trace parts that read its result (the
summary, the operations, the bottleneck finder and its replay).  An engine only decides where
the per-trace part runs and how its results come together:

* ``embedded`` (default): everything in this process, DuckDB/Arrow in, Polars/NumPy inside;
* ``spark``: the per-trace part on Spark executors over a Parquet span set or any table Spark
  reads, bucketed by a hash of ``trace_id``; the cross-trace part on the driver.

Both hand the same ``TraceAnalysis`` to ``complete``, so both give the same document.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Final

from tracelens.analysis import Analysis, TraceAnalysis
from tracelens.analysis.result import complete
from tracelens.errors import TracelensError

ENGINES: Final = ("embedded", "spark")


class EngineError(TracelensError):
    """An engine cannot run here (its package or runtime is missing)."""


class Engine(ABC):
    """Analyse a span source: ``source`` is what the engine reads (a Parquet path for both
    engines; a Spark table name or DataFrame for ``spark``).  An engine runs the per-trace part
    (``traces``); the cross-trace part (``complete``) is the same for all, here."""

    name: str

    @abstractmethod
    def traces(self, source: Any) -> TraceAnalysis:
        """The per-trace part of the analysis over every span of ``source``."""

    def analyze(
        self,
        source: Any,
        *,
        top: int | None = None,
        findings: bool = True,
        warnings: list[str] | None = None,
    ) -> Analysis:
        """The analysis of every span of ``source``; ``warnings`` from loading are carried."""
        return complete(self.traces(source), top=top, findings=findings, warnings=warnings)


def get_engine(name: str, *, master: str | None = None) -> Engine:
    """The engine called ``name`` (one of ``ENGINES``); ``master`` is Spark's master URL."""
    if name == "embedded":
        from tracelens.engines.embedded import EmbeddedEngine

        return EmbeddedEngine()
    if name == "spark":
        from tracelens.engines.spark import SparkEngine

        return SparkEngine(master=master)
    raise ValueError(f"unknown engine {name!r}; one of {', '.join(ENGINES)}")


__all__ = ["ENGINES", "Engine", "EngineError", "complete", "get_engine"]
