"""The one span table every part of tracelens speaks.

Importers and the collector produce it, the store persists it, the analysis consumes it; nothing
downstream knows where a span came from.  The DuckDB table is derived from this schema.

Attribute values are kept losslessly in a ``map<string, string>``: string values as they are,
every other OTLP value (int, double, bool, bytes, array, kvlist) JSON-encoded, with its key listed
in ``json_attributes`` so a reader can tell ``"42"`` from ``42``.  A map keeps the common lookup
(``attributes['http.request.method']`` in SQL, ``pl.col("attributes").map.get(...)`` in Polars)
vectorised.  Resource attributes, events and links are JSON text: they are read rarely.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

import pyarrow as pa
from tracelens_instrumentation import attributes as A

SCHEMA_VERSION: Final = 1

SPAN_KINDS: Final = ("unspecified", "internal", "server", "client", "producer", "consumer")
STATUS_CODES: Final = ("unset", "ok", "error")

_ATTR_MAP = pa.map_(pa.string(), pa.string())

SPAN_SCHEMA: Final = pa.schema(
    [
        pa.field("trace_id", pa.string(), nullable=False),  # 32 lower-case hex
        pa.field("span_id", pa.string(), nullable=False),  # 16 lower-case hex
        pa.field("parent_span_id", pa.string()),  # null for a root
        pa.field("name", pa.string(), nullable=False),
        pa.field("service", pa.string(), nullable=False),
        pa.field("span_kind", pa.string(), nullable=False),  # one of SPAN_KINDS
        pa.field("start_ns", pa.int64(), nullable=False),
        pa.field("end_ns", pa.int64(), nullable=False),
        pa.field("status_code", pa.string(), nullable=False),  # one of STATUS_CODES
        pa.field("status_message", pa.string()),
        pa.field("kind", pa.string()),  # tracelens.kind when the span carries it
        pa.field("cpu_ns", pa.int64()),  # tracelens.cpu_ns
        pa.field("args_hash", pa.string()),  # tracelens.args_hash
        pa.field("result_hash", pa.string()),  # tracelens.result_hash
        pa.field("arg_fps", pa.list_(pa.string())),  # tracelens.arg_fps
        pa.field("result_fps", pa.list_(pa.string())),  # tracelens.result_fps
        pa.field("attributes", _ATTR_MAP),  # every other span attribute
        pa.field("json_attributes", pa.list_(pa.string())),  # keys whose values are JSON
        pa.field("resource", pa.string()),  # resource attributes, a JSON object
        pa.field("scope_name", pa.string()),
        pa.field("scope_version", pa.string()),
        pa.field("events", pa.string()),  # JSON list of {time_ns, name, attributes}
        pa.field("links", pa.string()),  # JSON list of {trace_id, span_id, attributes}
    ],
    metadata={"tracelens.schema_version": str(SCHEMA_VERSION)},
)

COLUMNS: Final = tuple(SPAN_SCHEMA.names)

# Span attributes that have columns of their own (they are not repeated in ``attributes``).
PROMOTED_ATTRIBUTES: Final = {
    A.KIND: "kind",
    A.CPU_NS: "cpu_ns",
    A.ARGS_HASH: "args_hash",
    A.RESULT_HASH: "result_hash",
    A.ARG_FPS: "arg_fps",
    A.RESULT_FPS: "result_fps",
}


def empty_spans() -> pa.Table:
    return SPAN_SCHEMA.empty_table()


def json_value(value: Any) -> str:
    """JSON text for a non-string attribute value (bytes become base64 strings)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


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


class SpanColumns:
    """Collects spans column by column and turns them into one Arrow table.

    Importers that walk a document span by span append here; ``to_arrow`` builds the table in one
    go.  Values for promoted attributes (``tracelens.*``) are taken out of ``attributes``.
    Attribute keys and values go into flat lists with offsets (the ``MapArray`` is built from
    them directly) and scalars are JSON-encoded without ``json.dumps``: with millions of spans a
    list of pairs per span and a generic encoder per value dominated imports.
    """

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
            c["kind"].append(as_str(promoted.get("kind")))
            c["cpu_ns"].append(as_int(promoted.get("cpu_ns")))
            c["args_hash"].append(as_str(promoted.get("args_hash")))
            c["result_hash"].append(as_str(promoted.get("result_hash")))
            self._arg_fps.append(as_str_list(promoted.get("arg_fps")))
            self._result_fps.append(as_str_list(promoted.get("result_fps")))
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


def as_str(value: Any) -> str | None:
    """How a promoted value becomes a string column (shared with the protobuf decoder)."""
    return None if value is None else str(value)


def as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if -(2**63) <= number < 2**63 else None  # what an int64 column can hold


def as_str_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return [str(v) for v in value]
    return [str(value)]


# How a promoted attribute's value becomes its column's value, by column.
PROMOTED_CONVERT: Final = {
    "kind": as_str,
    "args_hash": as_str,
    "result_hash": as_str,
    "cpu_ns": as_int,
    "arg_fps": as_str_list,
    "result_fps": as_str_list,
}


def attribute_dict(
    pairs: Iterable[tuple[str, str]], json_keys: Iterable[str] | None
) -> dict[str, Any]:
    """Decode one row's ``attributes`` + ``json_attributes`` back into typed Python values."""
    typed = set(json_keys or ())
    return {k: (json.loads(v) if k in typed else v) for k, v in pairs}


def conform(table: pa.Table) -> pa.Table:
    """Cast a table with the span columns (any order, compatible types) to ``SPAN_SCHEMA``."""
    missing = [n for n in COLUMNS if n not in table.column_names]
    if missing:
        raise ValueError(f"span table lacks columns: {', '.join(missing)}")
    return table.select(list(COLUMNS)).cast(SPAN_SCHEMA)
