"""Light instrumentation for tracelens: importable without DuckDB, Polars or Arrow."""

from __future__ import annotations

__all__: list[str] = []
