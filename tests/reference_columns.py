"""The simple, obviously-right span column builder: the reference ``SpanColumns`` must equal.

``tracelens.schema.SpanColumns`` builds flat attribute arrays for speed; this one keeps one
Python list of pairs per span and lets Arrow convert them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from tracelens.schema import COLUMNS, PROMOTED_ATTRIBUTES, SPAN_SCHEMA, json_value


class ReferenceSpanColumns:
    """Collects spans column by column and turns them into one Arrow table.

    Importers that walk a document span by span append here; ``to_arrow`` builds the table in one
    go.  Values for promoted attributes (``tracelens.*``) are taken out of ``attributes``.
    """

    def __init__(self) -> None:
        self._cols: dict[str, list[Any]] = {name: [] for name in COLUMNS}

    def __len__(self) -> int:
        return len(self._cols["span_id"])

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
        """Append one span.  ``attributes`` values keep their Python types (str stays str)."""
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
        promoted: dict[str, Any] = {}
        pairs: list[tuple[str, str]] = []
        json_keys: list[str] = []
        for key, value in (attributes or {}).items():
            if key in PROMOTED_ATTRIBUTES:
                promoted[PROMOTED_ATTRIBUTES[key]] = value
            elif isinstance(value, str):
                pairs.append((key, value))
            else:
                pairs.append((key, json_value(value)))
                json_keys.append(key)
        c["kind"].append(_as_str(promoted.get("kind")))
        c["cpu_ns"].append(_as_int(promoted.get("cpu_ns")))
        c["args_hash"].append(_as_str(promoted.get("args_hash")))
        c["result_hash"].append(_as_str(promoted.get("result_hash")))
        c["arg_fps"].append(_as_str_list(promoted.get("arg_fps")))
        c["result_fps"].append(_as_str_list(promoted.get("result_fps")))
        c["attributes"].append(pairs)
        c["json_attributes"].append(json_keys or None)
        if resource_json is None and resource:
            resource_json = json_value(dict(resource))
        c["resource"].append(resource_json)
        c["scope_name"].append(scope_name or None)
        c["scope_version"].append(scope_version or None)
        c["events"].append(json_value(events) if events else None)
        c["links"].append(json_value(links) if links else None)

    def to_arrow(self) -> pa.Table:
        return pa.table(
            [pa.array(self._cols[f.name], type=f.type) for f in SPAN_SCHEMA], schema=SPAN_SCHEMA
        )


def _as_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _as_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if -(2**63) <= number < 2**63 else None  # beyond int64: no value


def _as_str_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        return [str(v) for v in value]
    return [str(value)]
