"""The compiled decoder (``_native.c``) turned into the span table.

The C code walks the request once and returns column buffers, which become Arrow arrays here
without a Python object per span.  It accepts only requests whose every part it understands and
answers None for anything else, so the Python path (``_lazy`` + ``_spans`` + ``_keyvalues``) decides
every unusual or malformed request.  What the Python path decodes through the generated classes
anyway is done here by the very same functions: resources and scopes (cached by their bytes),
events and links, and, called back from C, attribute values other than plain strings, ints, bools
and doubles, and statuses in an unusual encoding.  Promoted ``tracelens.*`` attributes that need a
conversion come back typed and go through the same ``as_str`` / ``as_int`` / ``as_str_list``.

``TRACELENS_NO_NATIVE=1`` in the environment turns the compiled path off, as does a failed import
(no compiler at install time); everything then works as before, only slower.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from tracelens.ingest.otlp_proto._anyvalue import any_value, json_text
from tracelens.ingest.otlp_proto._spans import (
    Problems,
    _cached,
    _event,
    _link,
    _per_group,
    _resource,
    _resources,
    _scope,
    _scopes,
    _status,
    _statuses,
    repeated_limit,
)
from tracelens.schema import (
    COLUMNS,
    PROMOTED_ATTRIBUTES,
    PROMOTED_CONVERT,
    SPAN_KINDS,
    SPAN_SCHEMA,
    STATUS_CODES,
    empty_spans,
    json_value,
)


def _load() -> Any:
    if os.environ.get("TRACELENS_NO_NATIVE", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("tracelens.ingest.otlp_proto._native")
    except ImportError:  # installed without a C compiler: the Python path does everything
        return None


_native: Any = _load()
AVAILABLE: Final = _native is not None
"""Whether the compiled decoder is built and not switched off."""

# The promoted columns in the order the C code knows them (see the P_* roles in _native.c).
_PROMOTED_COLUMNS: Final = ("kind", "cpu_ns", "args_hash", "result_hash", "arg_fps", "result_fps")
_PROMOTED_KEYS: Final = tuple(
    next(key for key, column in PROMOTED_ATTRIBUTES.items() if column == name)
    for name in _PROMOTED_COLUMNS
)
# Problem bits of the C code, in the order the Python path reports them.
_PROBLEMS: Final = (
    (1, "traceId: empty"),
    (2, "spanId: empty"),
    (4, "kind: not a span kind"),
    (8, "startTimeUnixNano: beyond int64"),
    (16, "endTimeUnixNano: beyond int64"),
    (32, "status.code: not a status code"),
)
_STR_LIST: Final = pa.list_(pa.string())


@dataclass
class Decoded:
    """A request's span table, its invalid spans, and per span the ``check_spans`` failures
    (bit ``i`` set when check ``i`` fails), so the collector need not run those checks again."""

    table: pa.Table
    problems: Problems
    checks: np.ndarray


def decode(data: bytes, small: int) -> Decoded | int | None:
    """The decoded request; its span count when that is at most ``small`` (the caller has a
    cheaper path for those); None when the Python path must decode it.  Errors raised by the
    Python decoders it calls (``DecodeError`` and the like) propagate."""
    if _native is None:
        return None
    out = _native.decode(
        data, small, _PROMOTED_KEYS, SPAN_KINDS, STATUS_CODES, _slow_attribute, _slow_status
    )
    if out is None or isinstance(out, int):
        return out
    n, resources, groups, cols, extras, promoted = out
    return _decoded(n, resources, groups, cols, extras, promoted, repeated_limit(len(data)))


def _decoded(
    n: int,
    resources: list[bytes],
    groups: list[tuple[int, int, bytes, int]],
    cols: dict[str, Any],
    extras: list[tuple[int, list[bytes], list[bytes]]],
    promoted: list[tuple[int, int, Any]],
    limit: int | None = None,
) -> Decoded:
    decoded_resources = [_cached(_resources, raw, _resource) for raw in resources]
    scopes = [_cached(_scopes, raw, _scope) for _, _, raw, _ in groups]
    flags = np.frombuffer(cols["problems"], np.uint8)
    checks = np.frombuffer(cols["checks"], np.uint8)
    problems = Problems(flags != 0)
    if n == 0:
        return Decoded(empty_spans(), problems, checks)
    locate = _locator(groups)
    if problems.mask.any():
        for bit, message in _PROBLEMS:
            problems.add((flags & bit) != 0, message, locate)
    arrays = _columns(n, cols)
    per_group = {
        "service": [decoded_resources[g[0]][0] for g in groups],
        "resource": [decoded_resources[g[0]][1] for g in groups],
        "scope_name": [s[0] for s in scopes],
        "scope_version": [s[1] for s in scopes],
    }
    group_of = np.repeat(np.arange(len(groups)), [g[3] for g in groups])
    for column, values in per_group.items():
        arrays[column] = _per_group(values, group_of, n, limit)
    arrays["events"], arrays["links"] = _events_links(n, extras, problems, locate)
    if promoted:
        _convert_promoted(arrays, promoted)
    table = pa.table([arrays[name] for name in COLUMNS], schema=SPAN_SCHEMA)
    return Decoded(table, problems, checks)


def _slow_attribute(raw: bytes) -> tuple[str, str, bool, Any]:
    """An attribute the C code leaves aside, decoded as ``_keyvalues`` decodes it: key, text for
    the map, whether the text is JSON, and the typed value."""
    kv = KeyValue.FromString(raw)
    value = any_value(kv.value)
    if type(value) is str:
        return kv.key, value, False, value
    return kv.key, json_text(value), True, value


def _slow_status(raw: bytes) -> tuple[int, str | None]:
    result: tuple[int, str | None] = _cached(_statuses, raw, _status)
    return result


def _locator(groups: list[tuple[int, int, bytes, int]]) -> Any:
    """``row -> "resourceSpans[r].scopeSpans[s].spans[i]"``, as the Python path words it."""

    def locate(row: int) -> str:
        for r, s, _, count in groups:
            if row < count:
                return f"resourceSpans[{r}].scopeSpans[{s}].spans[{row}]"
            row -= count
        raise IndexError(row)

    return locate


def _strings(n: int, parts: tuple[bytes, bytes, bytes | None]) -> pa.Array:
    offsets, data, valid = parts
    return pa.StringArray.from_buffers(
        n,
        pa.py_buffer(offsets),
        pa.py_buffer(data),
        None if valid is None else pa.py_buffer(valid),
    )


def _columns(n: int, cols: dict[str, Any]) -> dict[str, pa.Array]:
    """Every column the C code built, as Arrow arrays over its buffers."""
    arrays = {
        name: _strings(n, cols[name])
        for name in (
            "trace_id",
            "span_id",
            "parent_span_id",
            "name",
            "span_kind",
            "status_code",
            "status_message",
            "kind",
            "args_hash",
            "result_hash",
        )
    }
    for name in ("start_ns", "end_ns"):
        arrays[name] = pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(cols[name])])
    arrays["cpu_ns"] = pa.Array.from_buffers(
        pa.int64(), n, [pa.py_buffer(cols["cpu_ns.valid"]), pa.py_buffer(cols["cpu_ns"])]
    )
    m = len(cols["keys"][0]) // 4 - 1
    map_offsets = pa.Array.from_buffers(
        pa.int32(), n + 1, [None, pa.py_buffer(cols["map_offsets"])]
    )
    arrays["attributes"] = pa.MapArray.from_arrays(
        map_offsets, _strings(m, cols["keys"]), _strings(m, cols["values"])
    )
    j = len(cols["json_keys"][0]) // 4 - 1
    arrays["json_attributes"] = pa.Array.from_buffers(
        _STR_LIST,
        n,
        [pa.py_buffer(cols["json_valid"]), pa.py_buffer(cols["json_offsets"])],
        children=[_strings(j, cols["json_keys"])],
    )
    arrays["arg_fps"] = arrays["result_fps"] = pa.nulls(n, _STR_LIST)
    return arrays


def _events_links(
    n: int, extras: list[tuple[int, list[bytes], list[bytes]]], problems: Problems, locate: Any
) -> tuple[pa.Array, pa.Array]:
    """As ``_spans._events_links``, for the spans that have any."""
    if not extras:
        nulls = pa.nulls(n, pa.string())
        return nulls, nulls
    events: list[str | None] = [None] * n
    links: list[str | None] = [None] * n
    for row, raw_events, raw_links in extras:
        if raw_events:
            events[row] = json_value([_event(raw) for raw in raw_events])
        if raw_links:
            decoded = [_link(raw) for raw in raw_links]
            if any(not d["trace_id"] or not d["span_id"] for d in decoded):
                problems.add(np.array([row]), "links: a link without traceId or spanId", locate)
            links[row] = json_value(decoded)
    return pa.array(events, pa.string()), pa.array(links, pa.string())


def _convert_promoted(arrays: dict[str, pa.Array], promoted: list[tuple[int, int, Any]]) -> None:
    """Promoted values the C code could not place directly: converted as ``_promoted_column``
    converts them (a plain string or int converts to what the C code wrote, so mixing is exact)."""
    by_column: dict[str, list[tuple[int, Any]]] = {}
    for role, row, typed in promoted:
        by_column.setdefault(_PROMOTED_COLUMNS[role], []).append((row, typed))
    for column, items in by_column.items():
        values = arrays[column].to_pylist()
        convert = PROMOTED_CONVERT[column]
        for row, typed in items:
            values[row] = convert(typed)
        arrays[column] = pa.array(values, SPAN_SCHEMA.field(column).type)
