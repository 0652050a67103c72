"""The library calls the CLI wraps, with the same parameter names as its options."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from tracelens.analysis import ANALYSIS_COLUMNS, Analysis, analyze_spans
from tracelens.errors import InputError


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
) -> Loaded:
    """Spans from files when any are given, else from the store (through a running collector
    when one holds it)."""
    if files:
        from tracelens.ingest import read_files

        got = read_files(list(files), input_format=input_format, keep_going=keep_going)
        spans = got.spans
        if columns:
            spans = spans.select(list(columns))
        return Loaded(spans=spans, warnings=list(got.warnings), errors=list(got.errors))
    return Loaded(spans=_read_store(db, columns, start_ns, end_ns))


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
    from tracelens.store import open_store

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
) -> Analysis:
    """Where each trace's end-to-end latency went: the library form of ``tracelens analyze``.

    Errors in files raise ``InputError`` unless ``keep_going``, in which case they are listed in
    ``Analysis.errors`` and the other files are analysed.
    """
    loaded = load_spans(
        files, db=db, input_format=input_format, keep_going=keep_going, columns=ANALYSIS_COLUMNS
    )
    notes = [*loaded.warnings, *(f"skipped {e}" for e in loaded.errors)]
    result = analyze_spans(loaded.spans, top=top, findings=findings, warnings=notes)
    result.errors = list(loaded.errors)
    return result
