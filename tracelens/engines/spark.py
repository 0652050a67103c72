"""The Spark engine: the per-trace analysis on executors, the cross-trace part on the driver.

Phase one (executors).  Rows are bucketed by a hash of ``trace_id`` (``xxhash64``), so every
span of a trace reaches the same Python worker whatever file or partition it was read from;
``groupBy(bucket).applyInArrow`` hands each bucket to ``analyze_bucket`` as one Arrow table.
That runs the embedded engine's own pure function, ``analysis.core.analyze_traces``, and
returns its three tables (analysed spans, critical-path sections, per-trace rows) as Arrow IPC,
plus per-trace order facts and the bucket's warnings: one row per bucket.

Phase two (driver).  ``merge`` renumbers the buckets' rows and traces into the order the
embedded engine would have given them and concatenates them into one ``TraceAnalysis``;
``analysis.result.complete`` then runs the cross-trace part (percentiles, operations, the finder's
evidence over all traces, the replay) exactly as the embedded engine does.  The result, as JSON,
equals the embedded engine's on the same rows (``tests/test_spark.py``).

Order is the whole difficulty (``docs/design.md``, "Engines"): Spark delivers rows in no fixed
order, and the analysis breaks ties (equal starts, equal durations, duplicate span ids) by input
order.  A tracelens span set carries ``seq``, each row's position in the exported table, and
input order is ``seq``; any other table is taken in ``parquet.CANONICAL_ORDER``.  Each bucket is
sorted explicitly before the analysis, and phase two orders traces the way
``analysis.tree`` does: by first appearance when every trace's rows were contiguous, else by
trace id.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tracelens.analysis import ANALYSIS_COLUMNS, Analysis, TraceAnalysis, analyze_traces
from tracelens.analysis.tree import tree_of
from tracelens.engines.base import (
    Engine,
    EngineError,
    ParquetSpans,
    Source,
    SpanTable,
    SparkTable,
    complete,
)
from tracelens.errors import InputError
from tracelens.parquet import CANONICAL_ORDER, SEQ, is_span_set, layout, order_indices
from tracelens.schema import SPAN_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tracelens.analysis.whatif import WhatIf

BUCKET: Final = "_tracelens_bucket"
KEY: Final = "_tracelens_key"
ORDER: Final = "_seq"  # a row's input position inside phase one
SPANS_PER_BUCKET: Final = 200_000
"""Buckets are sized for about this many spans: a bucket is one Arrow table in one Python
worker (with the analysis, a few hundred MB), and many small buckets keep every core busy."""

PART_SCHEMA: Final = (
    f"{KEY} string, ordered boolean, spans binary, sections binary, traces binary, stats binary, "
    "warnings string"
)
_INPUT_SCHEMA: Final = pa.schema([SPAN_SCHEMA.field(c) for c in ANALYSIS_COLUMNS])


def session(master: str | None = None) -> SparkSession:
    """The active Spark session, else a new one (``master`` e.g. ``local[2]``; under
    ``spark-submit`` leave it None and the submitted master is used)."""
    try:
        from pyspark.sql import SparkSession
    except ModuleNotFoundError:
        raise EngineError("--engine spark needs pyspark: pip install 'tracelens[spark]'") from None
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    builder = SparkSession.builder.appName("tracelens")
    if master:
        builder = builder.master(master)
        if master.startswith("local"):
            # Local workers must import tracelens: run them on this interpreter.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        return builder.getOrCreate()
    except Exception as exc:  # the JVM did not start: no Java, or a bad master URL
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise EngineError(
            f"cannot start Spark (master {master or 'default'}): {first}; Spark 4 needs Java 17 "
            "or later (`java -version`, JAVA_HOME)"
        ) from None


class SparkEngine(Engine):
    name = "spark"

    def __init__(self, master: str | None = None, spark: SparkSession | None = None) -> None:
        self._master = master
        self._spark = spark

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = session(self._master)
        return self._spark

    def frame(self, source: Source | DataFrame) -> DataFrame:
        """A DataFrame of spans: a DataFrame as it is, a ``SparkTable``, or ``ParquetSpans`` (a
        tracelens span set, whose layout is checked when it is local, or any Parquet).  Spans
        in this process's memory (``SpanTable``) are the embedded engine's."""
        from pyspark.sql import DataFrame

        if isinstance(source, DataFrame):
            return source
        if isinstance(source, SparkTable):
            return self.spark.table(source.name)
        if isinstance(source, SpanTable):
            raise self.refuse(source)
        path = source.path
        if os.path.isdir(path) and is_span_set(path):
            layout(path)
        elif "://" not in path and not os.path.exists(path):
            raise InputError(path, "no such file or directory")
        return self.spark.read.parquet(path)

    def traces(self, source: Source | DataFrame) -> TraceAnalysis:
        """The per-trace part over every span of ``source`` (see ``frame``), on the executors."""
        return merge(self.phase_one(self.frame(source), name=_name(source)).get("", []))

    def analyze_by(
        self,
        source: Source | DataFrame,
        by: str,
        *,
        top: int | None = None,
        findings: bool = True,
        what_ifs: Sequence[WhatIf] = (),
        what_if_threshold_ms: float | None = None,
    ) -> dict[str, Analysis]:
        """One analysis per value of the column ``by`` (a day, a week, a tenant...), all in one
        Spark job: the buckets are formed within each value."""
        parts = self.phase_one(self.frame(source), by=by, name=_name(source))
        return {
            key: complete(
                merge(p),
                top=top,
                findings=findings,
                what_ifs=what_ifs,
                what_if_threshold_ms=what_if_threshold_ms,
            )
            for key, p in sorted(parts.items())
        }

    def phase_one(
        self, df: DataFrame, *, by: str | None = None, name: str = "the table"
    ) -> dict[str, list[Part]]:
        """Run ``analyze_bucket`` on the executors; the parts, by value of ``by``."""
        from pyspark.sql import functions as F

        missing = [c for c in ANALYSIS_COLUMNS if c not in df.columns]
        if missing:
            raise InputError(name, f"no span column(s) {', '.join(missing)}")
        cols = [*ANALYSIS_COLUMNS, *([SEQ] if SEQ in df.columns else [])]
        key = F.col(by).cast("string") if by else F.lit("")
        df = df.select(*cols, key.alias(KEY))
        buckets = self.buckets(df)
        bucket = F.pmod(F.xxhash64("trace_id"), F.lit(buckets))
        # repartition on the grouping keys: the groupBy then needs no second shuffle.
        grouped = (
            df.withColumn(BUCKET, bucket)
            .repartition(buckets, KEY, BUCKET)
            .groupBy(KEY, BUCKET)
            .applyInArrow(analyze_bucket, PART_SCHEMA)
        )
        out: dict[str, list[Part]] = {}
        for row in grouped.toArrow().to_pylist():
            out.setdefault(row[KEY], []).append(Part.from_row(row))
        return out

    def buckets(self, df: DataFrame) -> int:
        """How many buckets: enough for ``SPANS_PER_BUCKET`` each, at least two per core."""
        cores = self.spark.sparkContext.defaultParallelism
        return max(2 * cores, math.ceil(df.count() / SPANS_PER_BUCKET))


def _name(source: Source | DataFrame) -> str:
    if isinstance(source, SparkTable):
        return source.name
    if isinstance(source, ParquetSpans):
        return source.path
    return "the DataFrame"


# ---- phase one: runs in the Python workers --------------------------------------------------


def analyze_bucket(table: pa.Table) -> pa.Table:
    """Phase one for one bucket: its traces are complete (all their rows hash here), its rows
    in no particular order."""
    key = table[KEY][0].as_py() if table.num_rows else ""
    has_seq = SEQ in table.column_names
    # Explicit order first: the analysis breaks ties by input order.
    if has_seq:
        table = table.take(pc.sort_indices(table, [(SEQ, "ascending")]))
        seq = table[SEQ].cast(pa.int64())
    else:
        table = table.take(order_indices(table, list(CANONICAL_ORDER)))
        seq = pa.array(np.arange(table.num_rows, dtype=np.int64))
    spans = table.select(list(ANALYSIS_COLUMNS)).cast(_INPUT_SCHEMA)
    spans = spans.append_column(ORDER, seq)
    stats = (
        pa.table({"trace_id": spans["trace_id"], "seq": seq})
        .group_by("trace_id")
        .aggregate([("seq", "min"), ("seq", "max"), ("seq", "count")])
    )
    trace_analysis = analyze_traces(spans)
    return pa.table(
        {
            KEY: [key],
            "ordered": [has_seq],
            "spans": [_ipc(trace_analysis.spans)],
            "sections": [_ipc(trace_analysis.sections)],
            "traces": [_ipc(trace_analysis.traces)],
            "stats": [_ipc(pl.from_arrow(stats))],  # type: ignore[arg-type]
            "warnings": [json.dumps(trace_analysis.warnings)],
        }
    )


def _ipc(df: pl.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.write_ipc(buf, compression="lz4")
    return buf.getvalue()


# ---- phase two: on the driver ---------------------------------------------------------------


@dataclass
class Part:
    """What phase one returns for one bucket."""

    spans: pl.DataFrame
    sections: pl.DataFrame
    traces: pl.DataFrame
    stats: pl.DataFrame  # per trace: trace_id, seq_min, seq_max, seq_count (raw rows)
    ordered: bool  # the rows had ``seq`` (else ``CANONICAL_ORDER``)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Part:
        def read(name: str) -> pl.DataFrame:
            return pl.read_ipc(io.BytesIO(row[name]))

        return cls(
            spans=read("spans"),
            sections=read("sections"),
            traces=read("traces"),
            stats=read("stats"),
            ordered=bool(row["ordered"]),
            warnings=json.loads(row["warnings"]),
        )


def merge(parts: list[Part]) -> TraceAnalysis:
    """One ``TraceAnalysis`` from the buckets', numbered as the embedded engine numbers it."""
    parts = [p for p in parts if p.traces.height]
    if not parts:
        empty = _INPUT_SCHEMA.empty_table().append_column(ORDER, pa.array([], pa.int64()))
        trace_analysis = analyze_traces(empty)
        trace_analysis.spans = trace_analysis.spans.drop(ORDER)
        return trace_analysis
    order = _trace_order(parts)
    spans, sections, traces = [], [], []
    n_traces = sum(p.traces.height for p in parts)
    for b, p in enumerate(parts):
        mine = order.filter(pl.col("part") == b).sort("local")
        new_trace = np.full(int(p.traces["_trace"].to_numpy().max()) + 1, -1, dtype=np.int64)
        new_trace[mine["local"].to_numpy()] = mine["global"].to_numpy()
        first_row = mine["start"].to_numpy()  # new row of each local trace's first span
        tr = p.spans["_trace"].to_numpy()
        runs = np.flatnonzero(np.r_[True, tr[1:] != tr[:-1]])
        run_of_row = np.repeat(np.arange(len(runs)), np.diff(np.r_[runs, len(tr)]))
        rank = np.searchsorted(mine["local"].to_numpy(), tr[runs])
        new_i = first_row[rank][run_of_row] + (np.arange(len(tr)) - runs[run_of_row])
        old_i = p.spans["_i"].to_numpy()
        lut = np.full(int(old_i.max()) + 1, -1, dtype=np.int64)
        lut[old_i] = new_i
        parent = p.spans["_parent"].to_numpy()
        spans.append(
            p.spans.with_columns(
                pl.Series("_i", new_i),
                pl.Series("_trace", new_trace[tr]),
                pl.Series("_parent", np.where(parent >= 0, lut[np.maximum(parent, 0)], -1)),
            )
        )
        sections.append(
            p.sections.with_columns(
                pl.Series("_root", lut[p.sections["_root"].to_numpy()]),
                pl.Series("_i", lut[p.sections["_i"].to_numpy()]),
            )
        )
        traces.append(
            p.traces.with_columns(pl.Series("_trace", new_trace[p.traces["_trace"].to_numpy()]))
        )
    sp = _like(pl.concat(spans).sort("_i"), parts[0].spans)
    seq = sp[ORDER]
    # ``_row`` is the input position: ``seq`` when the rows had one (else the canonical order,
    # which is the new row order).  Only its order within a trace matters to the analysis.
    had_seq = all(p.ordered for p in parts)
    row = seq if had_seq and seq.max() < 2**32 else sp["_i"]  # type: ignore[operator]
    sp = sp.with_columns(row.cast(sp.schema["_row"]).alias("_row")).drop(ORDER)
    secs = _like(pl.concat(sections).sort("_root", maintain_order=True), parts[0].sections)
    trs = _like(pl.concat(traces).sort("_trace"), parts[0].traces)
    assert trs.height == n_traces and bool((trs["_trace"].to_numpy() == np.arange(n_traces)).all())
    return TraceAnalysis(
        spans=sp,
        sections=secs,
        traces=trs,
        tree=tree_of(sp),
        warnings=merge_warnings([p.warnings for p in parts]),
    )


def _like(df: pl.DataFrame, model: pl.DataFrame) -> pl.DataFrame:
    return df.cast(dict(model.schema))  # type: ignore[arg-type]


def _trace_order(parts: list[Part]) -> pl.DataFrame:
    """Every trace: its part, local and global number and its first new row.

    The embedded engine (``analysis.tree``) keeps traces in order of first appearance when the
    rows of each trace are contiguous in its input, else sorts them by trace id.
    """
    rows = []
    for b, p in enumerate(parts):
        sp = p.spans.select("_trace", "trace_id", ORDER)
        per = sp.group_by("_trace").agg(
            pl.col("trace_id").first(), pl.col(ORDER).min().alias("first"), pl.len().alias("n")
        )
        rows.append(per.with_columns(pl.lit(b).alias("part")).rename({"_trace": "local"}))
    per_trace = pl.concat(rows)
    stats = pl.concat([p.stats for p in parts])
    contiguous = bool(
        ((stats["seq_max"] - stats["seq_min"] + 1) == stats["seq_count"].cast(pl.Int64)).all()
    )
    by_seq = contiguous and all(p.ordered for p in parts)
    ordered = per_trace.sort(["first", "trace_id"] if by_seq else ["trace_id"])
    counts = ordered["n"].to_numpy()
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    return ordered.with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("global"),
        pl.Series("start", starts.astype(np.int64)),
    )


# The order ``analysis.tree.build_forest`` emits its warnings in; each is "<count> <text>".
_WARNING_ORDER: Final = (
    "spans repeated a (trace_id, span_id)",
    "spans ended before they started",
    "spans have a trace id",
    "spans have a span id",
    "spans had no parent",
    "parent cycles were broken",
)
_COUNTED = re.compile(r"^(\d+) (.*)$", re.DOTALL)


def merge_warnings(lists: list[list[str]]) -> list[str]:
    """The buckets' warnings as one analysis of all their traces would give them: counts of the
    same kind added up, in ``analysis.tree``'s order (unknown kinds after, as first seen)."""
    totals: dict[str, int] = {}
    plain: list[str] = []
    for warnings in lists:
        for w in warnings:
            m = _COUNTED.match(w)
            if m is None:
                if w not in plain:
                    plain.append(w)
                continue
            totals[m.group(2)] = totals.get(m.group(2), 0) + int(m.group(1))

    def rank(text: str) -> int:
        for k, prefix in enumerate(_WARNING_ORDER):
            if text.startswith(prefix):
                return k
        return len(_WARNING_ORDER)

    ordered = sorted(totals, key=rank)  # stable: unknown kinds stay as first seen
    return [*(f"{totals[t]} {t}" for t in ordered), *plain]
