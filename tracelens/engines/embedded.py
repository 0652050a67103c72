"""The embedded engine: the whole analysis in this process (the default)."""

from __future__ import annotations

import os
from typing import Any

from tracelens.analysis import ANALYSIS_COLUMNS, Analysis, analyze_spans


class EmbeddedEngine:
    """Reads a Parquet span set (or any Parquet with the span columns) with Arrow and analyses
    it here.  Files and stores go through ``tracelens.api.load_spans`` instead."""

    name = "embedded"

    def analyze(
        self,
        source: Any,
        *,
        top: int | None = None,
        findings: bool = True,
        warnings: list[str] | None = None,
    ) -> Analysis:
        from tracelens.parquet import read_parquet

        if not isinstance(source, (str, os.PathLike)):
            raise TypeError("the embedded engine reads a Parquet path")
        spans = read_parquet(source, ANALYSIS_COLUMNS)
        return analyze_spans(spans, top=top, findings=findings, warnings=warnings)
