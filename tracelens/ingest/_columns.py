"""A faster ``SpanColumns`` for bulk imports: same ``append``, same table, flat attribute arrays.

``tracelens.schema.SpanColumns`` keeps one Python list of pairs per span and lets Arrow convert
them; with millions of spans that conversion and the generic ``json_value`` call per typed value
dominate an import.  Here attribute keys and values go into flat lists with offsets (a ``MapArray``
is built from them directly) and scalars are JSON-encoded without ``json.dumps``.  The result must
equal ``SpanColumns``' for the same input; ``tests/test_ingest_columns.py`` checks that.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

import pyarrow as pa

from tracelens.schema import COLUMNS, PROMOTED_ATTRIBUTES, SPAN_SCHEMA, json_value

# Columns appended one Python value per span; the attribute columns are handled apart.
_PLAIN: Final = tuple(
    n for n in COLUMNS if n not in ("attributes", "json_attributes", "arg_fps", "result_fps")
)


def json_scalar(value: Any) -> str:
    """``json_value`` with the common scalars encoded directly (identical text)."""
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is float and math.isfinite(value):
        return repr(value)
    return json_value(value)


class FastSpanColumns:
    """Drop-in for ``SpanColumns`` (``append``, ``len``, ``to_arrow``)."""

    def __init__(self) -> None:
        self._cols: dict[str, list[Any]] = {name: [] for name in _PLAIN}
        self._keys: list[str] = []
        self._values: list[str] = []
        self._offsets: list[int] = [0]
        self._json_keys: list[str] = []
        self._json_offsets: list[int] = [0]
        self._json_valid: list[bool] = []
        self._arg_fps: list[list[str] | None] = []
        self._result_fps: list[list[str] | None] = []

    def __len__(self) -> int:
        return len(self._json_valid)

    def append(
        self,
        *,
        trace_id: str,
        span_id: str,
        parent_span_id: str | None,
        name: str,
        service: str,
        span_kind: str,
        start_ns: int,
        end_ns: int,
        status_code: str = "unset",
        status_message: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        resource: Mapping[str, Any] | None = None,
        scope_name: str | None = None,
        scope_version: str | None = None,
        events: list[dict[str, Any]] | None = None,
        links: list[dict[str, Any]] | None = None,
        resource_json: str | None = None,
    ) -> None:
        c = self._cols
        c["trace_id"].append(trace_id)
        c["span_id"].append(span_id)
        c["parent_span_id"].append(parent_span_id or None)
        c["name"].append(name)
        c["service"].append(service)
        c["span_kind"].append(span_kind)
        c["start_ns"].append(start_ns)
        c["end_ns"].append(end_ns)
        c["status_code"].append(status_code)
        c["status_message"].append(status_message or None)
        promoted = self._attributes(attributes) if attributes else None
        if promoted:
            c["kind"].append(_as_str(promoted.get("kind")))
            c["cpu_ns"].append(_as_int(promoted.get("cpu_ns")))
            c["args_hash"].append(_as_str(promoted.get("args_hash")))
            c["result_hash"].append(_as_str(promoted.get("result_hash")))
            self._arg_fps.append(_as_str_list(promoted.get("arg_fps")))
            self._result_fps.append(_as_str_list(promoted.get("result_fps")))
        else:
            for col in ("kind", "cpu_ns", "args_hash", "result_hash"):
                c[col].append(None)
            self._arg_fps.append(None)
            self._result_fps.append(None)
        self._offsets.append(len(self._keys))
        self._json_offsets.append(len(self._json_keys))
        self._json_valid.append(self._json_offsets[-1] != self._json_offsets[-2])
        if resource_json is None and resource:
            resource_json = json_value(dict(resource))
        c["resource"].append(resource_json)
        c["scope_name"].append(scope_name or None)
        c["scope_version"].append(scope_version or None)
        c["events"].append(json_value(events) if events else None)
        c["links"].append(json_value(links) if links else None)

    def _attributes(self, attributes: Mapping[str, Any]) -> dict[str, Any] | None:
        """Flatten one span's attributes; returns the promoted ones (None when there are none)."""
        keys, values, json_keys = self._keys, self._values, self._json_keys
        promoted: dict[str, Any] | None = None
        for key, value in attributes.items():
            if key in PROMOTED_ATTRIBUTES:
                if promoted is None:
                    promoted = {}
                promoted[PROMOTED_ATTRIBUTES[key]] = value
            elif type(value) is str or isinstance(value, str):
                keys.append(key)
                values.append(value)
            else:
                keys.append(key)
                values.append(json_scalar(value))
                json_keys.append(key)
        return promoted

    def to_arrow(self) -> pa.Table:
        arrays = {n: pa.array(self._cols[n], type=SPAN_SCHEMA.field(n).type) for n in _PLAIN}
        offsets = pa.array(self._offsets, type=pa.int32())
        arrays["attributes"] = pa.MapArray.from_arrays(
            offsets, pa.array(self._keys, pa.string()), pa.array(self._values, pa.string())
        )
        arrays["json_attributes"] = pa.ListArray.from_arrays(
            pa.array(self._json_offsets, type=pa.int32()),
            pa.array(self._json_keys, pa.string()),
            mask=pa.array([not v for v in self._json_valid], type=pa.bool_()),
        )
        list_type = SPAN_SCHEMA.field("arg_fps").type
        arrays["arg_fps"] = pa.array(self._arg_fps, type=list_type)
        arrays["result_fps"] = pa.array(self._result_fps, type=list_type)
        return pa.table([arrays[name] for name in COLUMNS], schema=SPAN_SCHEMA)


def _as_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if -(2**63) <= number < 2**63 else None  # what an int64 column can hold


def _as_str_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return [str(v) for v in value]
    return [str(value)]
