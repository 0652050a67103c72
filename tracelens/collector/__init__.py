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

from tracelens.collector.config import CollectorConfig
from tracelens.collector.reader import read_store
from tracelens.collector.service import run_collector

__all__ = ["CollectorConfig", "read_store", "run_collector"]
