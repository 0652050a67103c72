"""``read_store``: the spans of a store, whether or not a running collector holds its file.

DuckDB lets one process open a file for writing, and no other process may open it meanwhile, not
even read-only.  So while ``tracelens collect`` runs, it answers reads itself (``GET /v1/spans``
from a second connection in its process, which sees every committed, hence every acknowledged,
span); otherwise the file is opened read-only here, after merging what a killed collector left in
its journal (acknowledged spans not yet in DuckDB).  Analyses and reports call this one function.

A collector that cannot serve the read (its store cannot be written, say) answers 503 at once with
the reason, which is raised as ``StoreError``.  One that is alive but does not answer within
``READ_TIMEOUT_S`` (no byte for that long) is reported as such, instead of falling back to the file
it holds and failing, 10 s later, with DuckDB's lock error.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pyarrow as pa

from tracelens.collector import client, discovery, journal
from tracelens.collector.merger import recover
from tracelens.errors import StoreError
from tracelens.store import DuckDBStore, default_db_path

_LOCK_WAIT_S = 10.0  # a collector starting up holds the file before it publishes its address
READ_TIMEOUT_S = 120.0  # the collector waits at most 30 s for merging, then streams


def read_store(
    db: str | None = None,
    columns: Sequence[str] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
) -> pa.Table:
    """Spans of the store ``db`` (default ``$TRACELENS_DB`` or ./tracelens.duckdb): every span of
    each trace whose start falls in [start_ns, end_ns), as ``DuckDBStore.read`` gives them."""
    path = db or default_db_path()
    deadline = time.monotonic() + _LOCK_WAIT_S
    while True:
        info = discovery.find(path)
        if info is not None:
            try:
                return client.read_spans(
                    info, columns, start_ns=start_ns, end_ns=end_ns, timeout=READ_TIMEOUT_S
                )
            except OSError as exc:
                if _timed_out(exc) and discovery.find(path) is not None:
                    raise StoreError(
                        f"{path}: the collector holding it (pid {info.pid}, {info.http}) did not "
                        f"answer within {READ_TIMEOUT_S:.0f} s; see its /health and its log"
                    ) from None
                # otherwise it has just stopped: the file is free, or will be in a moment
        try:
            if journal.segments(path):
                with DuckDBStore(path) as store:
                    _recover(store, path)
            with DuckDBStore(path, read_only=True) as store:
                return store.read(columns, start_ns=start_ns, end_ns=end_ns)
        except StoreError as exc:
            if not _locked(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def count_store(
    db: str | None = None, start_ns: int | None = None, end_ns: int | None = None
) -> tuple[int, int] | None:
    """How many spans ``read_store`` would return, and their attributes, counted in the file
    without reading them; None when that cannot be known before the read: a running collector
    holds the file, or it cannot be opened (``read_store`` then says why). Spans still in a
    killed collector's journal are not counted (``read_store`` merges them first)."""
    path = db or default_db_path()
    if discovery.find(path) is not None:
        return None
    try:
        with DuckDBStore(path, read_only=True) as store:
            return store.count_spans(start_ns=start_ns, end_ns=end_ns)
    except StoreError:
        return None


def _recover(store: DuckDBStore, path: str) -> None:
    try:
        recover(store, path)
    except StoreError as exc:
        if _locked(exc):
            raise
        raise StoreError(
            f"{path}: cannot merge the collector's journal (acknowledged spans not yet in the "
            f"store) into it: {exc}; free disk space and retry (the journal is kept)"
        ) from None


def _timed_out(exc: OSError) -> bool:
    reason = getattr(exc, "reason", exc)  # urllib wraps socket errors in URLError
    return isinstance(reason, TimeoutError) or "timed out" in str(reason)


def _locked(exc: StoreError) -> bool:
    text = str(exc).lower()
    return "lock" in text or "conflicting" in text
