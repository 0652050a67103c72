"""Span stores: the DuckDB store (``DuckDBStore``), the one kind there is."""

from __future__ import annotations

from tracelens.store.duckdb import (
    DEFAULT_DB,
    DuckDBStore,
    default_db_path,
    file_mode,
    is_store,
    open_store,
)

__all__ = ["DEFAULT_DB", "DuckDBStore", "default_db_path", "file_mode", "is_store", "open_store"]
