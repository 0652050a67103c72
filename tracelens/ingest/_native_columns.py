"""Arrow columns from the buffers the compiled importers return (``_json_fast``,
``otlp_proto._fastpath``).

Why one module: both C extensions share their attribute rules (``_native_common.h``), so the
promoted columns come back in the same order (the P_* roles there) and the same way, and the int64
columns in the same layout; turning those into Arrow arrays is written here once.
"""

from __future__ import annotations

from typing import Any, Final

import pyarrow as pa

from tracelens.schema import PROMOTED_ATTRIBUTES, PROMOTED_CONVERT, SPAN_SCHEMA

# The promoted columns in the order the C code knows them (the P_* roles in _native_common.h).
PROMOTED_COLUMNS: Final = ("kind", "cpu_ns", "args_hash", "result_hash", "arg_fps", "result_fps")
PROMOTED_KEYS: Final = tuple(
    next(key for key, column in PROMOTED_ATTRIBUTES.items() if column == name)
    for name in PROMOTED_COLUMNS
)
STR_LIST: Final = pa.list_(pa.string())


def int64_columns(n: int, cols: dict[str, Any], cpu_valid: pa.Buffer | None) -> dict[str, pa.Array]:
    """``start_ns``, ``end_ns`` and ``cpu_ns`` over their little-endian int64 buffers, with no
    fingerprints (the C code leaves ``arg_fps`` / ``result_fps`` to ``convert_promoted``)."""
    arrays = {
        name: pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols[name])])
        for name in ("start_ns", "end_ns")
    }
    arrays["cpu_ns"] = pa.Array.from_buffers(
        pa.int64(), n, [cpu_valid, pa.py_buffer(cols["cpu_ns"])]
    )
    arrays["arg_fps"] = arrays["result_fps"] = pa.nulls(n, STR_LIST)
    return arrays


def convert_promoted(arrays: dict[str, pa.Array], promoted: list[tuple[int, int, Any]]) -> None:
    """Promoted values the C code could not place directly: (role, row, typed value), converted
    as ``SpanColumns`` converts them (a plain string or int converts to what the C code wrote, so
    mixing is exact)."""
    by_column: dict[str, list[tuple[int, Any]]] = {}
    for role, row, typed in promoted:
        by_column.setdefault(PROMOTED_COLUMNS[role], []).append((row, typed))
    for column, items in by_column.items():
        values = arrays[column].to_pylist()
        convert = PROMOTED_CONVERT[column]
        for row, typed in items:
            values[row] = convert(typed)
        arrays[column] = pa.array(values, SPAN_SCHEMA.field(column).type)
