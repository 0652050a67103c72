"""Build span tables for tests, deterministically, without any importer."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from tracelens.schema import SpanColumns

TRACE = "0af7651916cd43dd8448eb211c80319c"


def sid(i: int) -> str:
    return f"{i + 1:016x}"


def make_spans(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows need id (int), start, end; optional parent (int), name, kind (span kind), trace,
    service, attributes, status."""
    cols = SpanColumns()
    for r in rows:
        parent = r.get("parent")
        cols.append(
            trace_id=r.get("trace", TRACE),
            span_id=sid(r["id"]) if isinstance(r["id"], int) else r["id"],
            parent_span_id=(sid(parent) if isinstance(parent, int) else parent),
            name=r.get("name", f"op{r['id']}"),
            service=r.get("service", "svc"),
            span_kind=r.get("span_kind", "internal"),
            start_ns=r["start"],
            end_ns=r["end"],
            status_code=r.get("status", "unset"),
            attributes=r.get("attributes"),
        )
    return cols.to_arrow()
