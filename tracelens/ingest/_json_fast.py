"""The compiled OTLP/JSON column builder (``_json_native.c``) turned into span tables.

orjson parses each document; the C builder walks its spans and fills column buffers, which become
Arrow arrays here without a Python object per span or attribute.  It accepts only spans whose
every part it understands and answers False for anything else; ``otlp_json.decode`` then rolls the
builder back to the start of the document and decodes that document with the Python decoder, so
the result (errors included) never depends on which path ran.  What the Python decoder reads
anyway is read here by the very same functions: attribute values other than strings, ints, doubles
and bools (``otlp_json.any_value``), events and links, and promoted ``tracelens.*`` values that
need a conversion (``schema.PROMOTED_CONVERT``).

``tracelens_instrumentation._native.load`` (the one switch, ``TRACELENS_NO_NATIVE``) decides
whether the compiled path is used, as does a failed import
(no compiler at install time); everything then works as before, only slower.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import numpy as np
import pyarrow as pa
from tracelens_instrumentation import _native as native_switch

from tracelens.schema import (
    COLUMNS,
    PROMOTED_ATTRIBUTES,
    PROMOTED_CONVERT,
    SPAN_KINDS,
    SPAN_SCHEMA,
    STATUS_CODES,
)

# Installed without a C compiler, or TRACELENS_NO_NATIVE: the Python decoder does everything.
_native: Any = native_switch.load("tracelens.ingest._json_native")
AVAILABLE: Final = _native is not None
"""Whether the compiled builder is built and not switched off."""

USE_NATIVE: bool = AVAILABLE
"""Decode with the compiled builder where it is built (tests switch it to compare the paths)."""

# The promoted columns in the order the C code knows them (the P_* roles in
# _native_common.h).
_PROMOTED_COLUMNS: Final = ("kind", "cpu_ns", "args_hash", "result_hash", "arg_fps", "result_fps")
_PROMOTED_KEYS: Final = tuple(
    next(key for key, column in PROMOTED_ATTRIBUTES.items() if column == name)
    for name in _PROMOTED_COLUMNS
)
# String columns the C code builds, with the ones that may be null.
_STRINGS: Final = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "service",
    "span_kind",
    "status_code",
    "status_message",
    "resource",
    "scope_name",
    "scope_version",
    "events",
    "links",
    "kind",
    "args_hash",
    "result_hash",
)
_STR_LIST: Final = pa.list_(pa.string())


class NativeColumns:
    """Span columns built by the C code; ``add`` takes the spans of one ScopeSpans entry."""

    def __init__(
        self,
        kind_names: dict[str, str],
        status_names: dict[str, str],
        slow_value: Callable[[Any], tuple[str, bool, Any] | None],
        extras: Callable[[dict[str, Any]], tuple[str | None, str | None] | None],
    ) -> None:
        self._builder = _native.Builder(
            _PROMOTED_KEYS, SPAN_KINDS, STATUS_CODES, kind_names, status_names, slow_value, extras
        )
        self.add: Callable[[list[Any], str, str | None, str | None, str | None], bool] = (
            self._builder.add
        )
        self.mark: Callable[[], None] = self._builder.mark
        self.rollback: Callable[[], None] = self._builder.rollback

    def __len__(self) -> int:
        return len(self._builder)

    def to_arrow(self) -> pa.Table:
        """The spans added so far as a span table; the builder starts empty again."""
        n, cols, promoted = self._builder.take()
        return _table(n, cols, promoted)


def _bitmap(valid: bytes) -> pa.Buffer | None:
    flags = np.frombuffer(valid, np.uint8)
    if flags.all():
        return None
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def _strings(n: int, parts: tuple[bytes, bytes, bytes]) -> pa.Array:
    offsets, data, valid = parts
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data), _bitmap(valid))


def _offsets(lengths: bytes) -> tuple[np.ndarray, pa.Array]:
    counts = np.frombuffer(lengths, np.int32)
    offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return counts, pa.array(offsets, pa.int32())


def _table(n: int, cols: dict[str, Any], promoted: list[tuple[int, int, Any]]) -> pa.Table:
    arrays = {name: _strings(n, cols[name]) for name in _STRINGS}
    for name in ("start_ns", "end_ns"):
        arrays[name] = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols[name])])
    arrays["cpu_ns"] = pa.Array.from_buffers(
        pa.int64(), n, [_bitmap(cols["cpu_ns.valid"]), pa.py_buffer(cols["cpu_ns"])]
    )
    _, map_offsets = _offsets(cols["map_lengths"])
    m = len(cols["keys"][2])
    arrays["attributes"] = pa.MapArray.from_arrays(
        map_offsets, _strings(m, cols["keys"]), _strings(m, cols["values"])
    )
    json_counts, json_offsets = _offsets(cols["json_lengths"])
    j = len(cols["json_keys"][2])
    arrays["json_attributes"] = pa.ListArray.from_arrays(
        json_offsets,
        _strings(j, cols["json_keys"]),
        mask=pa.array(json_counts == 0, pa.bool_()),
    )
    arrays["arg_fps"] = arrays["result_fps"] = pa.nulls(n, _STR_LIST)
    if promoted:
        _convert_promoted(arrays, promoted)
    return pa.table([arrays[name] for name in COLUMNS], schema=SPAN_SCHEMA)


def _convert_promoted(arrays: dict[str, pa.Array], promoted: list[tuple[int, int, Any]]) -> None:
    """Promoted values the C code could not place directly, converted as ``SpanColumns`` converts
    them (a plain string or int converts to what the C code wrote, so mixing is exact)."""
    by_column: dict[str, list[tuple[int, Any]]] = {}
    for role, row, typed in promoted:
        by_column.setdefault(_PROMOTED_COLUMNS[role], []).append((row, typed))
    for column, items in by_column.items():
        values = arrays[column].to_pylist()
        convert = PROMOTED_CONVERT[column]
        for row, typed in items:
            values[row] = convert(typed)
        arrays[column] = pa.array(values, SPAN_SCHEMA.field(column).type)
