"""Parquet span sets: the span table as a directory of Hive-partitioned Parquet files.

A store is one DuckDB file on one machine; a platform team keeps its spans in object storage
and analyses them where they lie (``tracelens analyze --engine spark``).  The layout, version
``LAYOUT_VERSION``, is a contract (``docs/design.md``, "Parquet span sets"):

* ``DIR/_tracelens_layout.json`` states the layout (format, version, partitioning, order).
  Spark and Hive skip files whose names start with ``_``.
* ``DIR/day=YYYY-MM-DD/*.parquet``: Hive partitions by the UTC day of the *trace's* start (its
  earliest span), so every span of a trace lies in one partition.
* The files hold ``tracelens.schema.SPAN_SCHEMA`` as it is (times int64 ns, attributes as the
  lossless ``map<string, string>`` plus ``json_attributes``) and ``seq``: the row's position in
  the exported table.  Readers order by ``seq``, which gives back the exported table exactly
  (Parquet readers, Spark's in particular, return files and rows in no fixed order).

A directory of Parquet files without the layout file is read too (any table with the span
columns); its rows are then ordered by ``CANONICAL_ORDER``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from tracelens.errors import InputError
from tracelens.formats import PARQUET_SPAN_SET
from tracelens.schema import COLUMNS, SCHEMA_VERSION, SPAN_SCHEMA

if TYPE_CHECKING:  # imported where used: pyarrow.dataset loads pandas (~1 s of a CLI start)
    import pyarrow.dataset as ds

LAYOUT_FILE: Final = PARQUET_SPAN_SET.marker  # what tells a span set (tracelens/formats.py)
LAYOUT_FORMAT: Final = "tracelens.spans.parquet"
LAYOUT_VERSION: Final = 1
SEQ: Final = "seq"  # the row's position in the exported table
PARTITION: Final = "day"  # UTC day (YYYY-MM-DD) of the trace's earliest span start
# How rows of a table without ``seq`` are ordered (the embedded and the Spark engine alike).
CANONICAL_ORDER: Final = ("trace_id", "start_ns", "end_ns", "span_id", "parent_span_id", "name")
MAX_LAYOUT_BYTES: Final = 1 << 20  # the layout file is a few hundred bytes


@dataclass(frozen=True)
class Exported:
    path: Path
    spans: int
    traces: int
    partitions: int


def is_span_set(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory holding a tracelens Parquet span set (its layout file:
    the formats' table's rule)."""
    return PARQUET_SPAN_SET.matches(path)


def layout(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The layout file of a span set, checked; ``InputError`` names what is wrong."""
    where = Path(path) / LAYOUT_FILE
    try:
        with where.open("rb") as file:
            text = file.read(MAX_LAYOUT_BYTES + 1)
        if len(text) > MAX_LAYOUT_BYTES:
            raise InputError(
                os.fspath(where), f"unreadable layout file: larger than {MAX_LAYOUT_BYTES} bytes"
            )
        doc = json.loads(text.decode("utf-8"))
    except FileNotFoundError:
        raise InputError(
            os.fspath(path), f"not a tracelens Parquet span set (no {LAYOUT_FILE})"
        ) from None
    except (OSError, ValueError) as exc:
        raise InputError(os.fspath(where), f"unreadable layout file: {exc}") from None
    except RecursionError:  # json.loads recurses per level of nesting
        raise InputError(os.fspath(where), "unreadable layout file: nested too deeply") from None
    if not isinstance(doc, dict) or doc.get("format") != LAYOUT_FORMAT:
        raise InputError(os.fspath(where), f"expected {LAYOUT_FORMAT!r}", field="format")
    version = doc.get("version")
    if not isinstance(version, int) or version > LAYOUT_VERSION or version < 1:
        raise InputError(
            os.fspath(where),
            f"layout {version!r}; this tracelens reads 1 to {LAYOUT_VERSION}",
            field="version",
        )
    return doc


def trace_days(spans: pa.Table) -> pa.Array:
    """Per row, the UTC day (YYYY-MM-DD) of its trace's earliest span start."""
    if spans.num_rows == 0:
        return pa.array([], pa.string())
    first = spans.group_by("trace_id").aggregate([("start_ns", "min")])
    starts = first["start_ns_min"].cast(pa.timestamp("ns", tz="UTC"))
    days = pc.strftime(starts, format="%Y-%m-%d")
    index = pc.index_in(spans["trace_id"], value_set=first["trace_id"])
    return pc.take(days, index).combine_chunks()


def write_parquet(
    spans: pa.Table,
    parquet: str | os.PathLike[str],
    *,
    max_rows_per_file: int = 1_000_000,
    mode: int | None = None,
) -> Exported:
    """Write ``spans`` (the span table) as a span set in the new or empty directory ``parquet``.

    With ``mode`` (permission bits, e.g. the store's 0600), every file written gets that mode and
    every directory written that mode plus search where it reads (0700): an export is as private
    as the store it came from.  The set is written in a fresh 0700 directory inside ``parquet``
    and moved into place only then, so no file is readable to others even for a moment."""
    out = Path(parquet)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(os.fspath(out), "exists and is not an empty directory")
    table = spans.select(list(COLUMNS)).cast(SPAN_SCHEMA)
    table = table.append_column(SEQ, pa.array(range(table.num_rows), pa.int64()))
    table = table.append_column(PARTITION, trace_days(table))
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    if created and mode is not None:
        out.chmod(_dir_mode(mode))
    work = Path(tempfile.mkdtemp(prefix=".tracelens-export-", dir=out))
    import pyarrow.dataset as ds

    try:
        ds.write_dataset(
            table,
            work,
            format="parquet",
            partitioning=ds.partitioning(pa.schema([(PARTITION, pa.string())]), flavor="hive"),
            basename_template="part-{i}.parquet",
            preserve_order=True,
            max_rows_per_file=max_rows_per_file,
            max_rows_per_group=min(max_rows_per_file, 128 * 1024),
            existing_data_behavior="error",
        )
        if mode is not None:
            _set_modes(work, mode)
        for part in sorted(work.iterdir()):
            part.rename(out / part.name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    traces = pc.count_distinct(table["trace_id"]).as_py() if table.num_rows else 0
    days = pc.unique(table[PARTITION]).to_pylist()
    doc = {
        "format": LAYOUT_FORMAT,
        "version": LAYOUT_VERSION,
        "span_schema_version": SCHEMA_VERSION,
        "partitioning": {
            "flavor": "hive",
            "column": PARTITION,
            "meaning": "UTC day (YYYY-MM-DD) of the trace's earliest span start",
        },
        "order": SEQ,
        "spans": table.num_rows,
        "traces": traces,
        "days": sorted(days),
    }
    text = (json.dumps(doc, indent=2) + "\n").encode("utf-8")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    fd = os.open(out / LAYOUT_FILE, flags, 0o666 if mode is None else mode)
    with os.fdopen(fd, "wb") as file:
        if mode is not None:
            os.fchmod(file.fileno(), mode)  # whatever the umask
        file.write(text)
    return Exported(path=out, spans=table.num_rows, traces=traces, partitions=len(days))


def _dir_mode(mode: int) -> int:
    """A directory's mode for files of ``mode``: search (x) wherever read (r) is allowed."""
    return mode | ((mode & 0o444) >> 2)


def _set_modes(top: Path, mode: int) -> None:
    for root, dirs, files in os.walk(top):
        for name in dirs:
            os.chmod(os.path.join(root, name), _dir_mode(mode))
        for name in files:
            os.chmod(os.path.join(root, name), mode)


def order_indices(table: pa.Table, keys: list[str]) -> pa.Array:
    """Row order by ``keys`` ascending, nulls last (as ``is_null`` then the value: Spark's
    ascending sort puts nulls first unless told, and so may other engines)."""
    cols: dict[str, Any] = {}
    for k in keys:
        col = table[k]
        cols[f"{k}:null"] = pc.is_null(col)
        cols[k] = col
    helper = pa.table(cols)
    return pc.sort_indices(helper, sort_keys=[(k, "ascending") for k in helper.column_names])


def count_parquet(parquet: str | os.PathLike[str]) -> int | None:
    """The rows of a Parquet span set or file from its metadata (nothing is read), or None when
    it cannot be opened (``read_parquet`` then says why)."""
    import pyarrow.dataset as ds

    try:
        return int(ds.dataset(Path(parquet), format="parquet", partitioning="hive").count_rows())
    except (pa.ArrowInvalid, OSError, ValueError):
        return None


def read_parquet(parquet: str | os.PathLike[str], columns: Sequence[str] | None = None) -> pa.Table:
    """The span table of a span set (in its ``seq`` order) or of any Parquet directory or file
    with the span columns (in ``CANONICAL_ORDER``)."""
    path = Path(parquet)
    if not path.exists():
        raise InputError(os.fspath(path), "no such file or directory")
    cols = list(columns) if columns else list(COLUMNS)
    unknown = [c for c in cols if c not in COLUMNS]
    if unknown:
        raise ValueError(f"unknown span columns: {', '.join(unknown)}")
    ours = path.is_dir() and is_span_set(path)
    if ours:
        layout(path)
    import pyarrow.dataset as ds

    try:
        dataset = ds.dataset(path, format="parquet", partitioning="hive")
        names = set(dataset.schema.names)
        order = [SEQ] if ours else [c for c in CANONICAL_ORDER if c not in cols]
        missing = [c for c in [*cols, *order] if c not in names]
        if missing:
            raise InputError(os.fspath(path), f"no column(s) {', '.join(missing)}")
        table = dataset.to_table(columns=[*cols, *order])
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(os.fspath(path), f"cannot read as Parquet: {exc}") from None
    table = _checked(table, path, dataset)
    table = table.take(order_indices(table, [SEQ] if ours else list(CANONICAL_ORDER)))
    return table.select(cols).cast(pa.schema([SPAN_SCHEMA.field(c) for c in cols]))


_ARROW_ERRORS: Final = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


def _checked(table: pa.Table, path: Path, dataset: ds.Dataset) -> pa.Table:
    """``table`` in the span schema's types, every column checked against the layout (its type,
    nulls where a span needs a value, valid UTF-8 text: Polars and DuckDB fail on anything else,
    far from the file).  ``InputError`` names the file (the first one of the set holding the bad
    value) and the column."""
    columns = []
    for name in table.column_names:
        problem, column = _check_column(name, table[name])
        if problem is not None:
            where = _bad_file(dataset, name) or os.fspath(path)
            raise InputError(where, f"column {name}: {problem}")
        columns.append(column)
    return pa.table(columns, names=table.column_names)


def _check_column(name: str, column: pa.ChunkedArray) -> tuple[str | None, pa.ChunkedArray]:
    """What is wrong with a column (None when nothing), and the column in the schema's type."""
    expected = pa.field(SEQ, pa.int64(), nullable=False) if name == SEQ else SPAN_SCHEMA.field(name)
    try:
        column.validate(full=True)  # UTF-8 of every string, offsets, nested lists and maps
    except _ARROW_ERRORS as exc:
        what = "not valid UTF-8 text" if "UTF8" in str(exc) else "invalid values"
        return f"{what} ({_short(exc)})", column
    if column.type != expected.type:
        try:
            column = column.cast(expected.type)
        except _ARROW_ERRORS as exc:
            return f"{_short(column.type)}, not {expected.type} ({_short(exc)})", column
    if not expected.nullable and column.null_count:
        return f"{column.null_count} null values: every span needs a {name}", column
    return None, column


def _bad_file(dataset: ds.Dataset, name: str) -> str | None:
    """The first file of ``dataset`` whose column ``name`` fails ``_check_column``."""
    import pyarrow.dataset as ds

    for file in dataset.files:
        try:
            column = ds.dataset(file, format="parquet").to_table(columns=[name])[name]
        except (*_ARROW_ERRORS, OSError, KeyError):
            return str(file)
        if _check_column(name, column)[0] is not None:
            return str(file)
    return None


def _short(what: object) -> str:
    """A type or an error as text, cut short (a type nested thousands deep is a long text)."""
    text = str(what)
    return text if len(text) <= 200 else text[:200] + "..."
