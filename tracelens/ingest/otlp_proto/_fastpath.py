"""The compiled decoder (``_native.c``) turned into the span table.

The C code walks the request once and returns column buffers, which become Arrow arrays here
without a Python object per span.  It accepts only requests whose every part it understands and
answers None for anything else, so the generated-class decoder (``_classes``) decides every unusual
or malformed request; ``docs/otlp-proto.md`` lists what it accepts.  What the C code does not decode
itself is decoded here by the functions the generated-class decoder uses (``_parts``): resources
and scopes (cached by their bytes), the events and links of a shape the C code leaves aside, and,
called back from C, attribute values other than plain strings, ints, bools, doubles and arrays
of those, and statuses in an unusual encoding.  Promoted
``tracelens.*`` attributes that need a conversion come back typed and go through the same
``as_str`` / ``as_int`` / ``as_str_list``.

It is used where it is built and ``tracelens_instrumentation._native.load`` allows it (the one
switch: ``TRACELENS_NO_NATIVE=1`` turns every compiled part off).
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pyarrow as pa
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from tracelens_instrumentation import _native as native_switch

from tracelens.ingest._common import repeated_limit
from tracelens.ingest._native_columns import (
    PROMOTED_KEYS,
    STR_LIST,
    convert_promoted,
    int64_columns,
)
from tracelens.ingest.otlp_proto._anyvalue import any_value, json_text
from tracelens.ingest.otlp_proto._parts import (
    BAD_LINK,
    Decoded,
    Group,
    bad_links,
    check_groups,
    event_from_bytes,
    link_from_bytes,
    per_group,
    problems,
    resource_from_bytes,
    scope_from_bytes,
    status_from_bytes,
)
from tracelens.schema import COLUMNS, SPAN_KINDS, SPAN_SCHEMA, STATUS_CODES, empty_spans, json_value

_native: Any = native_switch.load("tracelens.ingest.otlp_proto._native")
AVAILABLE: Final = _native is not None
"""Whether the compiled decoder is built and not switched off."""


def decode(data: bytes) -> Decoded | None:
    """The decoded request, or None when the generated-class decoder must decode it.  Errors
    raised by the Python decoders it calls (``DecodeError`` and the like) propagate, as does the
    C code's ``ValueError`` for a request over a limit."""
    if _native is None:
        return None
    out = _native.decode(
        data, PROMOTED_KEYS, SPAN_KINDS, STATUS_CODES, _slow_attribute, _slow_status
    )
    if out is None:
        return None
    n, resources, groups, cols, extras, promoted = out
    return _decoded(n, resources, groups, cols, extras, promoted, repeated_limit(len(data)))


def _decoded(
    n: int,
    resources: list[bytes],
    raw_groups: list[tuple[int, int, bytes, int]],
    cols: dict[str, Any],
    extras: list[tuple[int, list[bytes], list[bytes]]],
    promoted: list[tuple[int, int, Any]],
    limit: int,
) -> Decoded:
    decoded_resources = [resource_from_bytes(raw) for raw in resources]
    scopes = [scope_from_bytes(raw) for _, _, raw, _ in raw_groups]
    groups = [Group(r, s, count) for r, s, _, count in raw_groups]
    flags = np.frombuffer(cols["problems"], np.uint8).astype(np.int64)
    checks = np.frombuffer(cols["checks"], np.uint8)
    if n == 0:
        return Decoded(empty_spans(), problems(flags, groups), checks)
    counts = [g.count for g in groups]
    # The r-th ResourceSpans entry's resource: ``resources`` holds one per entry, in order.
    per_group_values: dict[str, list[str | None]] = {
        "service": [decoded_resources[g.resource][0] for g in groups],
        "resource": [decoded_resources[g.resource][1] for g in groups],
        "scope_name": [s[0] for s in scopes],
        "scope_version": [s[1] for s in scopes],
    }
    check_groups(per_group_values, counts, limit)
    arrays = _columns(n, cols)
    for column, values in per_group_values.items():
        arrays[column] = per_group(values, counts)
    arrays["events"], arrays["links"] = _events_links(n, cols, extras, flags)
    if promoted:
        convert_promoted(arrays, promoted)
    table = pa.table([arrays[name] for name in COLUMNS], schema=SPAN_SCHEMA)
    return Decoded(table, problems(flags, groups), checks)


def _slow_attribute(raw: bytes) -> tuple[str, str, bool, Any]:
    """An attribute the C code leaves aside, as ``SpanColumns`` stores it: key, text for the map,
    whether the text is JSON, and the typed value (for a promoted attribute)."""
    kv = KeyValue.FromString(raw)
    value = any_value(kv.value)
    if type(value) is str:
        return kv.key, value, False, value
    return kv.key, json_text(value), True, value


def _slow_status(raw: bytes) -> tuple[int, str | None]:
    return status_from_bytes(raw)


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
    arrays = int64_columns(n, cols, pa.py_buffer(cols["cpu_ns.valid"]))
    arrays |= {
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
    m = len(cols["keys"][0]) // 4 - 1
    map_offsets = pa.Array.from_buffers(
        pa.int32(), n + 1, [None, pa.py_buffer(cols["map_offsets"])]
    )
    arrays["attributes"] = pa.MapArray.from_arrays(
        map_offsets, _strings(m, cols["keys"]), _strings(m, cols["values"])
    )
    j = len(cols["json_keys"][0]) // 4 - 1
    arrays["json_attributes"] = pa.Array.from_buffers(
        STR_LIST,
        n,
        [pa.py_buffer(cols["json_valid"]), pa.py_buffer(cols["json_offsets"])],
        children=[_strings(j, cols["json_keys"])],
    )
    return arrays


def _events_links(
    n: int,
    cols: dict[str, Any],
    extras: list[tuple[int, list[bytes], list[bytes]]],
    flags: np.ndarray,
) -> tuple[pa.Array, pa.Array]:
    """Events and links as JSON text for the spans that have any: the C code's, and for the
    spans it left aside (``extras``: their events and links as bytes) the generated classes'; a
    link without ids sets the span's ``BAD_LINK`` bit in ``flags`` (the C code sets its own)."""
    written = _strings(n, cols["events"]), _strings(n, cols["links"])
    if not extras:
        return written
    events: list[str | None] = written[0].to_pylist()
    links: list[str | None] = written[1].to_pylist()
    for row, raw_events, raw_links in extras:
        if raw_events:
            events[row] = json_value([event_from_bytes(raw) for raw in raw_events])
        if raw_links:
            decoded = [link_from_bytes(raw) for raw in raw_links]
            if bad_links(decoded):
                flags[row] |= BAD_LINK
            links[row] = json_value(decoded)
    return pa.array(events, pa.string()), pa.array(links, pa.string())
