"""The library calls the CLI wraps, with the same parameter names as its options."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from tracelens.analysis import ANALYSIS_COLUMNS, Analysis, analyze_spans
from tracelens.errors import InputError
from tracelens.progress import Progress
from tracelens.store import default_db_path, open_store


@dataclass
class Loaded:
    spans: pa.Table
    warnings: list[str] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)


def load_spans(
    files: Sequence[str | os.PathLike[str]] = (),
    *,
    db: str | None = None,
    input_format: str | None = None,
    keep_going: bool = False,
    columns: Sequence[str] | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
    bar: Progress | None = None,
    parquet: str | os.PathLike[str] | None = None,
) -> Loaded:
    """Spans from files when any are given, from the Parquet span set ``parquet`` when given,
    else from the store (through a running collector when one holds it).  Files are read one by
    one so ``bar`` can show how far it got."""
    bar = bar or Progress(enabled=False)
    if parquet is not None:
        from tracelens.parquet import read_parquet

        if files or db:
            raise ValueError("read spans from files, a store or a Parquet span set, not several")
        bar.set_label(f"reading {os.fspath(parquet)}")
        return Loaded(spans=read_parquet(parquet, columns))
    if not files:
        bar.set_label(f"reading the store {db or default_db_path()}")
        return Loaded(spans=_read_store(db, columns, start_ns, end_ns))
    from tracelens.ingest import read_files

    tables: list[pa.Table] = []
    loaded = Loaded(spans=pa.table({}))
    bar.total = len(files)
    for i, path in enumerate(files):
        bar.set_label(f"reading {os.fspath(path)}")
        got = read_files([path], input_format=input_format, keep_going=keep_going)
        tables.append(got.spans.select(list(columns)) if columns else got.spans)
        loaded.warnings.extend(got.warnings)
        loaded.errors.extend(got.errors)
        bar.done = i + 1
    bar.total = None
    loaded.spans = pa.concat_tables(tables)
    return loaded


def _read_store(
    db: str | None, columns: Sequence[str] | None, start_ns: int | None, end_ns: int | None
) -> pa.Table:
    try:
        from tracelens.collector.reader import read_store
    except ModuleNotFoundError as exc:  # the collector has not landed yet
        if not (exc.name or "").startswith("tracelens.collector"):
            raise
    else:
        table: pa.Table = read_store(db, columns=columns, start_ns=start_ns, end_ns=end_ns)
        return table
    with open_store(db, read_only=True) as store:
        return store.read(columns, start_ns=start_ns, end_ns=end_ns)


def analyze(
    files: Sequence[str | os.PathLike[str]] = (),
    *,
    db: str | None = None,
    input_format: str | None = None,
    top: int | None = None,
    keep_going: bool = False,
    findings: bool = True,
    start_ns: int | None = None,
    end_ns: int | None = None,
    bar: Progress | None = None,
    parquet: str | os.PathLike[str] | None = None,
    engine: str = "embedded",
    master: str | None = None,
    spark_table: str | None = None,
) -> Analysis:
    """Where each trace's end-to-end latency went: the library form of ``tracelens analyze``.

    Errors in files raise ``InputError`` unless ``keep_going``, in which case they are listed in
    ``Analysis.errors`` (and its warnings) and the other files are analysed.  ``start_ns`` /
    ``end_ns`` keep the store's traces that started in that window.  ``parquet`` reads a
    Parquet span set instead (``tracelens.parquet``).  ``engine="spark"`` runs the analysis on
    Apache Spark (``tracelens.engines.spark``, master URL ``master``) over ``parquet`` or the
    catalog table ``spark_table``, with the same result.
    """
    bar = bar or Progress(enabled=False)
    if engine != "embedded":
        from tracelens.engines import get_engine
        from tracelens.engines.spark import SparkTable

        if files or db or start_ns is not None or end_ns is not None:
            raise ValueError(f"engine {engine!r} reads a Parquet span set or a Spark table only")
        if (parquet is None) == (spark_table is None):
            raise ValueError(f"engine {engine!r} needs a Parquet path or a Spark table (one)")
        bar.set_label(f"analysing on {engine}")
        source = SparkTable(spark_table) if spark_table else parquet
        return get_engine(engine, master=master).analyze(source, top=top, findings=findings)
    loaded = load_spans(
        files,
        db=db,
        input_format=input_format,
        keep_going=keep_going,
        columns=ANALYSIS_COLUMNS,
        start_ns=start_ns,
        end_ns=end_ns,
        bar=bar,
        parquet=parquet,
    )
    bar.set_label(f"analysing {loaded.spans.num_rows:,} spans")
    notes = [*loaded.warnings, *(f"skipped {e}" for e in loaded.errors)]
    result = analyze_spans(loaded.spans, top=top, findings=findings, warnings=notes)
    result.errors = list(loaded.errors)
    return result
