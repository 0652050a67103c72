"""Span stores.  DuckDB is the embedded default; engines sit behind ``SpanStore``."""

from __future__ import annotations

from tracelens.store._base import SpanStore
from tracelens.store.duckdb import DEFAULT_DB, DuckDBStore, default_db_path, open_store

__all__ = ["DEFAULT_DB", "DuckDBStore", "SpanStore", "default_db_path", "open_store"]
