"""The library calls the CLI wraps, with the same parameter names as its options."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
) -> Loaded:
    """Spans from files when any are given, else from the store (through a running collector
    when one holds it).  Files are read one by one so ``bar`` can show how far it got."""
    bar = bar or Progress(enabled=False)
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
    what_if: Sequence[str] = (),
    what_if_threshold_ms: float | None = None,
) -> Analysis:
    """Where each trace's end-to-end latency went: the library form of ``tracelens analyze``.

    Errors in files raise ``InputError`` unless ``keep_going``, in which case they are listed in
    ``Analysis.errors`` (and its warnings) and the other files are analysed.  ``start_ns`` /
    ``end_ns`` keep the store's traces that started in that window.  ``what_if`` (e.g.
    ``["trim-context=0.5", "stream"]``) adds the latency model's what-if findings that save at
    least ``what_if_threshold_ms`` at p50.
    """
    bar = bar or Progress(enabled=False)
    loaded = load_spans(
        files,
        db=db,
        input_format=input_format,
        keep_going=keep_going,
        columns=ANALYSIS_COLUMNS,
        start_ns=start_ns,
        end_ns=end_ns,
        bar=bar,
    )
    bar.set_label(f"analysing {loaded.spans.num_rows:,} spans")
    notes = [*loaded.warnings, *(f"skipped {e}" for e in loaded.errors)]
    result = analyze_spans(loaded.spans, top=top, findings=findings, warnings=notes)
    result.errors = list(loaded.errors)
    if what_if:
        from tracelens.analysis.whatif import DEFAULT_THRESHOLD_MS, WhatIf
        from tracelens.analysis.whatif import findings as what_if_findings

        whats = [WhatIf.parse(w) for w in what_if]
        threshold = DEFAULT_THRESHOLD_MS if what_if_threshold_ms is None else what_if_threshold_ms
        result.findings.extend(what_if_findings(result.traces, whats, threshold_ms=threshold))
    return result


def size(
    files: Sequence[str | os.PathLike[str]] = (),
    *,
    concurrency: int,
    latency_target_ms: float,
    db: str | None = None,
    input_format: str | None = None,
    cores: int | None = None,
    model_slots: int | None = None,
    start_ns: int | None = None,
    end_ns: int | None = None,
) -> Any:
    """Cores and model-server capacity for ``concurrency`` requests at ``latency_target_ms``,
    from measured per-request demand: the library form of ``tracelens size``."""
    from tracelens.analysis.core import analyze_traces
    from tracelens.analysis.sizing import size_traces

    loaded = load_spans(
        files,
        db=db,
        input_format=input_format,
        columns=ANALYSIS_COLUMNS,
        start_ns=start_ns,
        end_ns=end_ns,
    )
    return size_traces(
        analyze_traces(loaded.spans),
        concurrency=concurrency,
        latency_target_ms=latency_target_ms,
        cores=cores,
        model_slots=model_slots,
    )
