"""The engine interface: the ``Engine`` base class, the typed sources an engine reads and
``EngineError``.  Apart from ``engines/__init__.py`` (which picks an engine by name and imports
the engines) so that the engines import their base class without importing the package that
imports them (no import circle, ``tests/test_architecture.py``).
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
]
