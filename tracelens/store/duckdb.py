"""The embedded DuckDB span store: Arrow in, Arrow out.

The ``span_rows`` table is derived from ``SPAN_SCHEMA``; its primary key (trace_id, span_id) makes
a re-sent span a no-op (``INSERT OR IGNORE``), which is what exporter retries need.  One deviation:
``attributes`` is stored as a list of (key, value) structs, not a DuckDB ``MAP``.  DuckDB checks
every inserted map for duplicate keys, which doubled the collector's insert cost; the keys are
unique already (the importers dedupe), and the Arrow map is rebuilt on read without copying.  For
SQL by hand, the ``spans`` view shows the attributes as a ``MAP`` (``attributes['http.method']``).

The store version lives in ``tracelens_meta``; a store written by a newer tracelens is refused
instead of being misread, and an older one is upgraded in place when opened for writing.

Failures.  Every DuckDB error leaves as ``StoreError`` (a one-line message, never a raw DuckDB
traceback).  A failed checkpoint (a full disk) invalidates the whole DuckDB database instance:
every later statement fails with "database has been invalidated", on every connection, until all
of them are closed.  The store notices that message and, on its next call, closes both of its
connections and opens the file again (``_heal``), so a long-running process such as the collector
carries on once space is back.  A new store file is made mode 0600.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import duckdb
import pyarrow as pa

from tracelens.errors import StoreError
from tracelens.formats import DUCKDB_STORE
from tracelens.schema import COLUMNS, SPAN_SCHEMA, conform

DEFAULT_DB = "tracelens.duckdb"
TABLE = "span_rows"  # what is stored
VIEW = "spans"  # the same rows with ``attributes`` as a MAP, for SQL by hand
STORE_VERSION = 2  # 1: ``spans`` was the table, with a MAP column
_ENTRY = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.string())])
_ROWS_ATTRIBUTES = pa.list_(_ENTRY)
_MAP = SPAN_SCHEMA.field("attributes").type
_INVALIDATED = "database has been invalidated"
_NEW_ROWS = "_tracelens_new"  # the Arrow table an INSERT reads, registered as a view


class NotNew(Exception):
    """``append_all(..., new=True)`` met a span already stored or repeated: nothing was added."""


def is_invalidated(exc: BaseException) -> bool:
    """DuckDB's answer after a fatal error (a checkpoint that failed for lack of space): the
    database instance is unusable until every connection to it is closed and it is reopened."""
    return _INVALIDATED in str(exc) or isinstance(exc, duckdb.FatalException)


def default_db_path() -> str:
    return os.environ.get("TRACELENS_DB") or DEFAULT_DB


def is_store(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a DuckDB database file: its header (``DUCK`` at byte 8, the rule of
    the formats' table, ``tracelens/formats.py``), not its name, says so."""
    return DUCKDB_STORE.matches(path)


def file_mode(path: str | os.PathLike[str]) -> int | None:
    """The read/write permission bits of the store file at ``path`` (None when it cannot be
    read): what is written from the store (a Parquet export) is kept as private."""
    import stat

    try:
        return stat.S_IMODE(os.stat(path).st_mode) & 0o666
    except OSError:
        return None


def _duck_type(t: pa.DataType) -> str:
    if t == _MAP:
        return "STRUCT(key VARCHAR, value VARCHAR)[]"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_map(t):
        return f"MAP({_duck_type(t.key_type)}, {_duck_type(t.item_type)})"
    if pa.types.is_list(t):
        return f"{_duck_type(t.value_type)}[]"
    raise TypeError(f"no DuckDB type for {t}")  # pragma: no cover - schema is fixed


def table_ddl(name: str = TABLE) -> str:
    cols = ",\n  ".join(
        f"{f.name} {_duck_type(f.type)}{'' if f.nullable else ' NOT NULL'}" for f in SPAN_SCHEMA
    )
    return f"CREATE TABLE IF NOT EXISTS {name} (\n  {cols},\n  PRIMARY KEY (trace_id, span_id)\n)"


def view_ddl() -> str:
    return (
        f"CREATE OR REPLACE VIEW {VIEW} AS SELECT * REPLACE "
        f"(map_from_entries(attributes) AS attributes) FROM {TABLE}"
    )


def to_rows(spans: pa.Table) -> pa.Table:
    """The span table as stored: ``attributes`` as a list of (key, value) (no copy)."""
    i = spans.schema.get_field_index("attributes")
    return spans.set_column(i, "attributes", spans.column(i).cast(_ROWS_ATTRIBUTES))


def _attribute_map(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """``attributes`` as read (a list of key/value structs) back to the schema's map."""
    chunks = []
    for chunk in column.chunks:
        entries = chunk.values.flatten()
        mask = chunk.is_null() if chunk.null_count else None
        chunks.append(
            pa.MapArray.from_arrays(chunk.offsets, entries[0], entries[1], type=_MAP, mask=mask)
        )
    return pa.chunked_array(chunks, _MAP)


class DuckDBStore:
    """One DuckDB file (or ``:memory:``).  Safe to share between threads of one process."""

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_DB, *, read_only: bool = False):
        self.path = str(path)
        self.read_only = read_only
        if read_only and self.path != ":memory:" and not Path(self.path).exists():
            raise StoreError(f"{self.path}: no such store (run `tracelens import` or `collect`)")
        self._lock = threading.Lock()  # the writing connection
        self._read_lock = threading.Lock()  # the reading one: reads never wait for a write
        self._settings: list[tuple[str, list[str]]] = []  # replayed when the store is reopened
        self._broken: str | None = None  # why the next call reopens first
        self._connect()

    def _connect(self) -> None:
        new = self.path != ":memory:" and not self.read_only and not Path(self.path).exists()
        try:
            self._con = duckdb.connect(self.path, read_only=self.read_only)
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot open the store: {_line(exc)}") from None
        try:
            if new:
                with contextlib.suppress(OSError):
                    os.chmod(self.path, 0o600)
            for statement, params in self._settings:
                self._con.execute(statement, params)
            self._init_schema()
            self._reader = self._con.cursor()
        except (duckdb.Error, StoreError) as exc:
            with contextlib.suppress(duckdb.Error):
                self._con.close()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"{self.path}: cannot open the store: {_line(exc)}") from None

    def _reopen_locked(self) -> None:
        """Close both connections and open the file again (after DuckDB invalidated it)."""
        for con in (self._reader, self._con):
            with contextlib.suppress(duckdb.Error):
                con.close()
        self._connect()
        self._broken = None

    def _heal(self) -> None:
        if self._broken is not None:
            with self._lock, self._read_lock:
                if self._broken is not None:
                    self._reopen_locked()

    def _failed(self, exc: duckdb.Error, doing: str) -> StoreError:
        if is_invalidated(exc):
            self._broken = _line(exc)
        return StoreError(f"{self.path}: {doing} failed: {_line(exc)}")

    @property
    def broken(self) -> str | None:
        """Why the store is unusable until reopened (None while it works)."""
        return self._broken

    def _init_schema(self) -> None:
        con = self._con
        self._table = TABLE
        has_meta = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'tracelens_meta'"
        ).fetchone()
        if has_meta and has_meta[0]:
            row = con.execute(
                "SELECT value FROM tracelens_meta WHERE key = 'schema_version'"
            ).fetchone()
            version = int(row[0]) if row else 0
            if version > STORE_VERSION:
                raise StoreError(
                    f"{self.path}: written by a newer tracelens (store schema version {version}, "
                    f"this tracelens reads up to {STORE_VERSION}); upgrade tracelens"
                )
            if version < 2:
                if self.read_only:
                    self._table = VIEW  # version 1: the table itself, with a MAP column
                else:
                    self._upgrade_from_1()
            return
        if self.read_only:
            raise StoreError(f"{self.path}: not a tracelens store (no tracelens_meta table)")
        con.execute("BEGIN")
        con.execute("CREATE TABLE tracelens_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        con.execute("INSERT INTO tracelens_meta VALUES ('schema_version', ?)", [str(STORE_VERSION)])
        con.execute(table_ddl())
        con.execute(view_ddl())
        con.execute("COMMIT")

    def _upgrade_from_1(self) -> None:
        con = self._con
        con.execute("BEGIN")
        con.execute(f"ALTER TABLE {VIEW} RENAME TO {TABLE}")
        con.execute(
            f"ALTER TABLE {TABLE} ALTER attributes TYPE {_duck_type(_MAP)} "
            "USING map_entries(attributes)"
        )
        con.execute(view_ddl())
        con.execute(
            "UPDATE tracelens_meta SET value = ? WHERE key = 'schema_version'", [str(STORE_VERSION)]
        )
        con.execute("COMMIT")

    def _write(self, doing: str, work: Callable[[duckdb.DuckDBPyConnection], int]) -> int:
        """Run ``work`` on the writing connection; DuckDB errors leave as ``StoreError``."""
        self._heal()
        with self._lock:
            try:
                return work(self._con)
            except duckdb.Error as exc:
                raise self._failed(exc, doing) from None

    def append(self, spans: pa.Table) -> int:
        """Add spans; a (trace_id, span_id) already stored is kept once.  Returns rows added."""
        if spans.num_rows == 0:
            return 0
        rows = to_rows(conform(spans))

        def work(con: duckdb.DuckDBPyConnection) -> int:
            before = self._count_on(con)
            cur = con.cursor()
            try:
                cur.register("_tracelens_new", rows)
                cur.execute(
                    f"INSERT OR IGNORE INTO {TABLE} SELECT DISTINCT ON (trace_id, span_id) * "
                    "FROM _tracelens_new"
                )
                cur.unregister("_tracelens_new")
            finally:
                cur.close()
            return self._count_on(con) - before

        return self._write("storing spans", work)

    def append_all(self, chunks: Iterable[pa.Table], *, new: bool = False) -> int:
        """Add every chunk of ``chunks`` in one transaction: all of them, or none when anything
        fails (a DuckDB error, or what iterating ``chunks`` raises, such as a decoder's
        ``InputError``: the import of a bad file).  Chunks are taken as they come, so memory
        holds one (DuckDB writes a large transaction's rows to the file as it goes).

        As ``append``, a (trace_id, span_id) already stored is kept once.  ``new``: the spans are
        expected new (an import into an empty store): each chunk is one plain INSERT, which costs
        about half of what INSERT OR IGNORE with DISTINCT ON does (a probe of the key per span, a
        grouping of every column); a span that turns out stored or repeated rolls everything back
        and raises ``NotNew``, for the caller to run it again without ``new``.  Returns rows
        added."""

        def work(con: duckdb.DuckDBPyConnection) -> int:
            before = 0 if new else self._count_on(con)
            inserted = 0
            con.execute("BEGIN")
            try:
                for chunk in chunks:
                    if chunk.num_rows:
                        _insert(con, to_rows(conform(chunk)), new)
                        inserted += chunk.num_rows
                con.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                with contextlib.suppress(duckdb.Error):
                    con.unregister(_NEW_ROWS)
                if new and _conflict(exc):
                    raise NotNew(_line(exc)) from None
                raise
            return inserted if new else self._count_on(con) - before

        return self._write("storing spans", work)

    def append_new(self, spans: pa.Table) -> int:
        """``append`` for spans expected to be new (the collector's hot path).

        One plain INSERT: in DuckDB, INSERT OR IGNORE joins every batch against all stored ids,
        which slows ingestion as the store grows.  The primary key still refuses a stored or
        repeated (trace_id, span_id); the statement then fails whole and ``append`` dedups.
        """
        if spans.num_rows == 0:
            return 0
        rows = to_rows(conform(spans))

        def work(con: duckdb.DuckDBPyConnection) -> int:
            cur = con.cursor()
            try:
                cur.register("_tracelens_new", rows)
                cur.execute(f"INSERT INTO {TABLE} SELECT * FROM _tracelens_new")
                return rows.num_rows
            except duckdb.ConstraintException:
                return -1
            finally:
                cur.close()

        added = self._write("storing spans", work)
        return added if added >= 0 else self.append(spans)

    def set_memory_limit(self, limit: str) -> None:
        """Cap DuckDB's memory (e.g. ``"1GB"``; its default is 80% of RAM), for long-running
        processes such as the collector that must stay bounded."""
        self._setting("SET memory_limit = ?", [limit])

    def set_threads(self, threads: int) -> None:
        """Cap DuckDB's worker threads (for the whole database, readers too).  The collector
        uses one: its inserts then cost about a quarter less CPU, which the decoder needs more."""
        self._setting(f"SET threads = {int(threads)}", [])

    def _setting(self, statement: str, params: list[str]) -> None:
        def work(con: duckdb.DuckDBPyConnection) -> int:
            con.execute(statement, params)
            return 0

        self._write("configuring the store", work)
        self._settings.append((statement, params))

    def _count_on(self, con: duckdb.DuckDBPyConnection) -> int:
        row = con.execute(f"SELECT count(*) FROM {self._table}").fetchone()
        return int(row[0]) if row else 0

    def count(self) -> int:
        return self._write("counting spans", self._count_on)

    def count_spans(
        self, *, start_ns: int | None = None, end_ns: int | None = None
    ) -> tuple[int, int]:
        """How many spans ``read`` would return for the window, and how many attributes they
        carry, without reading them (the analysis budget is checked against them first)."""
        size = "cardinality" if self._table == VIEW else "len"  # version 1: a MAP column
        sql, params = self._select(f"count(*), sum({size}(attributes))", start_ns, end_ns)
        self._heal()
        with self._read_lock:
            cur = self._reader.cursor()
            try:
                row = cur.execute(sql, params or None).fetchone()
            except duckdb.Error as exc:
                raise self._failed(exc, "counting spans") from None
            finally:
                cur.close()
        return (int(row[0]), int(row[1] or 0)) if row else (0, 0)

    def read(
        self,
        columns: Sequence[str] | None = None,
        *,
        start_ns: int | None = None,
        end_ns: int | None = None,
        trace_ids: Sequence[str] | pa.Array | pa.ChunkedArray | None = None,
        attribute_keys: Sequence[str] | None = None,
    ) -> pa.Table:
        """Whole traces: every span of each trace whose first span starts in [start_ns, end_ns)
        and, with ``trace_ids``, only of those traces (ids not stored are no error: they are
        simply not in the result).  With ``trace_ids`` the cost is one pass over the stored
        trace ids, not a grouping of the whole store.  ``attribute_keys``: only these entries
        of each span's ``attributes`` (what a reader needs, e.g. ``analysis.kinds``'
        ``ANALYSIS_ATTRIBUTES``; less to copy out of the store)."""
        cols = list(columns) if columns else list(COLUMNS)
        unknown = [c for c in cols if c not in COLUMNS]
        if unknown:
            raise ValueError(f"unknown span columns: {', '.join(unknown)}")
        ids = None if trace_ids is None else _id_list(trace_ids)
        by_rows = ids is not None and start_ns is None and end_ns is None and self._table == TABLE
        select = self._projection(cols, attribute_keys)
        self._heal()
        with self._read_lock:
            cur = self._reader.cursor()
            try:
                if by_rows:
                    # Two steps in one snapshot: where the traces' rows lie (a pass over the
                    # trace_id column alone), then the columns of that row range only, so the
                    # cost of the wide columns is the traces', not the store's.
                    cur.execute("BEGIN TRANSACTION").fetchall()
                    lo, hi = cur.execute(
                        f"SELECT min(rowid), max(rowid) FROM {TABLE} "
                        "WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))",
                        [ids],
                    ).fetchall()[0]
                    rows = (0, -1) if lo is None else (int(lo), int(hi))
                    sql, params = self._select(select, None, None, ids, rows)
                    result = cur.sql(sql, params=params).to_arrow_table()
                    cur.execute("COMMIT").fetchall()
                else:
                    sql, params = self._select(select, start_ns, end_ns, ids)
                    result = cur.sql(sql, params=params or None).to_arrow_table()
            except duckdb.Error as exc:
                raise self._failed(exc, "reading spans") from None
            finally:
                cur.close()
        if "attributes" in cols and result.schema.field("attributes").type != _MAP:
            i = result.schema.get_field_index("attributes")
            result = result.set_column(i, "attributes", _attribute_map(result.column(i)))
        return result.cast(pa.schema([SPAN_SCHEMA.field(c) for c in cols]))

    def read_batches(
        self,
        columns: Sequence[str] | None = None,
        *,
        start_ns: int | None = None,
        end_ns: int | None = None,
        trace_ids: Sequence[str] | pa.Array | pa.ChunkedArray | None = None,
        batch_rows: int = 65_536,
    ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
        """What ``read`` returns, as its schema and batches of at most ``batch_rows`` spans made
        as they are taken: memory is one batch (and DuckDB's own limit), whatever the store's
        size.  The query runs on its own cursor, so a slow consumer holds up no other read."""
        cols = list(columns) if columns else list(COLUMNS)
        unknown = [c for c in cols if c not in COLUMNS]
        if unknown:
            raise ValueError(f"unknown span columns: {', '.join(unknown)}")
        schema = pa.schema([SPAN_SCHEMA.field(c) for c in cols])
        sql, params = self._select(
            ", ".join(cols), start_ns, end_ns, None if trace_ids is None else _id_list(trace_ids)
        )
        self._heal()
        with self._read_lock:
            cur = self._reader.cursor()
        try:
            reader = cur.sql(sql, params=params or None).to_arrow_reader(batch_rows)
        except duckdb.Error as exc:
            cur.close()
            raise self._failed(exc, "reading spans") from None

        def batches() -> Iterator[pa.RecordBatch]:
            try:
                while True:
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        return
                    except duckdb.Error as exc:
                        raise self._failed(exc, "reading spans") from None
                    table = pa.Table.from_batches([batch])
                    if "attributes" in cols and table.schema.field("attributes").type != _MAP:
                        i = table.schema.get_field_index("attributes")
                        table = table.set_column(i, "attributes", _attribute_map(table.column(i)))
                    yield from table.cast(schema).to_batches()
            finally:
                cur.close()

        return schema, batches()

    def _projection(self, cols: list[str], attribute_keys: Sequence[str] | None) -> str:
        """The select list: ``cols``, with ``attributes`` cut down to ``attribute_keys``."""
        if attribute_keys is None or "attributes" not in cols:
            return ", ".join(cols)
        if isinstance(attribute_keys, str):
            raise ValueError("attribute_keys: give a sequence of keys, not one string")
        keys = ", ".join("'" + str(k).replace("'", "''") + "'" for k in attribute_keys)
        entries = "attributes" if self._table == TABLE else "map_entries(attributes)"
        kept = f"list_filter({entries}, lambda e: e.key IN ({keys or 'NULL'}))"
        if self._table != TABLE:
            kept = f"map_from_entries({kept})"
        return ", ".join(f"{kept} AS attributes" if c == "attributes" else c for c in cols)

    def _select(
        self,
        select: str,
        start_ns: int | None,
        end_ns: int | None,
        trace_ids: list[str] | None = None,
        rows: tuple[int, int] | None = None,
    ) -> tuple[str, list[object]]:
        """The query ``read`` and ``read_batches`` run: whole traces whose first span starts in
        [start_ns, end_ns), of ``trace_ids`` only when given.  The ids go in as one list
        parameter (a hash semi-join in DuckDB); the time window then groups only their rows.
        ``rows`` (first, last rowid), with ``trace_ids`` only: where those traces' rows lie."""
        params: list[object] = []
        conds = []
        if start_ns is not None:
            conds.append("min(start_ns) >= ?")
            params.append(start_ns)
        if end_ns is not None:
            conds.append("min(start_ns) < ?")
            params.append(end_ns)
        ids: list[object] = [] if trace_ids is None else [trace_ids]
        if conds:
            inner = f"SELECT trace_id FROM {self._table}"
            if ids:
                inner += " WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))"
            inner += f" GROUP BY trace_id HAVING {' AND '.join(conds)}"
            return (
                f"SELECT {select} FROM {self._table} WHERE trace_id IN ({inner})",
                [*ids, *params],
            )
        if ids:
            span = "" if rows is None else "rowid BETWEEN ? AND ? AND "
            return (
                f"SELECT {select} FROM {self._table} "
                f"WHERE {span}trace_id IN (SELECT unnest(?::VARCHAR[]))",
                [*(rows or ()), *ids],
            )
        return f"SELECT {select} FROM {self._table}", []

    def checkpoint(self) -> None:
        def work(con: duckdb.DuckDBPyConnection) -> int:
            con.execute("CHECKPOINT")
            return 0

        self._write("checkpointing the store", work)

    def close(self) -> None:
        with self._lock, self._read_lock:
            for con in (self._reader, self._con):
                with contextlib.suppress(duckdb.Error):
                    con.close()

    def __enter__(self) -> DuckDBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(
    path: str | os.PathLike[str] | None = None, *, read_only: bool = False
) -> DuckDBStore:
    return DuckDBStore(path or default_db_path(), read_only=read_only)


def _insert(con: duckdb.DuckDBPyConnection, rows: pa.Table, new: bool) -> None:
    """One INSERT of ``rows`` (as stored) on ``con``, in its transaction.  The view is left
    registered when the INSERT fails: an aborted transaction refuses even ``unregister``."""
    con.register(_NEW_ROWS, rows)
    if new:
        con.execute(f"INSERT INTO {TABLE} SELECT * FROM {_NEW_ROWS}")
    else:
        con.execute(
            f"INSERT OR IGNORE INTO {TABLE} SELECT DISTINCT ON (trace_id, span_id) * "
            f"FROM {_NEW_ROWS}"
        )
    con.unregister(_NEW_ROWS)


def _conflict(exc: BaseException) -> bool:
    """A primary key refused a span (DuckDB says so at the INSERT, or at COMMIT)."""
    return isinstance(exc, duckdb.ConstraintException) or (
        isinstance(exc, duckdb.Error) and "constraint" in str(exc).lower()
    )


def _id_list(trace_ids: Sequence[str] | pa.Array | pa.ChunkedArray) -> list[str]:
    """``trace_ids`` as the list DuckDB binds; ``ValueError`` for a null or non-string id."""
    if isinstance(trace_ids, (pa.Array, pa.ChunkedArray)):
        if trace_ids.null_count:
            raise ValueError("trace_ids: a trace id is null")
        values = trace_ids.to_pylist()
    else:
        if isinstance(trace_ids, str):
            raise ValueError("trace_ids: give a sequence of trace ids, not one string")
        values = list(trace_ids)
    for value in values:
        if not isinstance(value, str):
            raise ValueError(f"trace_ids: not a trace id string: {value!r}")
    return values


def _line(exc: BaseException) -> str:
    """DuckDB's message on one line (its own run over several, with the original error quoted)."""
    return " ".join(str(exc).split())
