"""``tracelens collect``: an OTLP receiver (HTTP and gRPC) that owns the DuckDB store while it runs.

Requests are decoded on arrival and queued to one writer thread, which appends each group of them
to a journal next to the store, fsyncs it and only then answers them (``writer``, ``journal``); a
merger thread moves the decoded spans into DuckDB in large transactions, about once a second
(``merger``).  A full queue answers 503 / gRPC UNAVAILABLE with a retry delay instead of growing.
Readers (``reader.read_store``) go through the collector's ``GET /v1/spans`` while it holds the
file (it merges everything acknowledged first), and open the file directly otherwise (merging what
a killed collector left in its journal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracelens.collector.config import CollectorConfig
    from tracelens.collector.reader import read_store
    from tracelens.collector.service import run_collector

__all__ = ["CollectorConfig", "read_store", "run_collector"]

# Imported on first use (PEP 562): reading a store (``analyze --db``) needs ``reader`` only, and
# the server side (gRPC, the protobuf decoder, prometheus-client) cost a quarter second to import.
_HOMES = {
    "CollectorConfig": "tracelens.collector.config",
    "read_store": "tracelens.collector.reader",
    "run_collector": "tracelens.collector.service",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tracelens.collector' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
