"""Small requests (a few spans: SDKs exporting one span at a time) through the generated classes.

The vectorised path costs about a millisecond per request whatever its size (dozens of Arrow and
NumPy calls); for a handful of spans a plain loop is cheaper.  Both paths produce the same table:
``tests/test_otlp_proto.py`` runs every case through each of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from tracelens_instrumentation import attributes as attrs

from tracelens.ingest.otlp_proto._anyvalue import key_values
from tracelens.ingest.otlp_proto._spans import (
    UNKNOWN_SERVICE,
    Problems,
    check_repeated,
    repeated_limit,
)
from tracelens.schema import SPAN_KINDS, STATUS_CODES, SpanColumns, json_value

_INT64_MAX = 2**63 - 1
MAX_EMPTY_ENTRIES = 10_000
"""Entries without spans cost work but carry nothing; the compiled decoder has the same limit."""


def small_table(data: bytes) -> tuple[pa.Table, Problems]:
    request = ExportTraceServiceRequest.FromString(data)
    cols = SpanColumns()
    bad: list[bool] = []
    first: str | None = None
    empty = 0
    lengths: list[int] = []  # service, resource JSON, scope name and version per span group
    counts: list[int] = []
    for r, rs in enumerate(request.resource_spans):
        if not any(ss.spans for ss in rs.scope_spans):
            empty += 1 + len(rs.scope_spans)
            if empty > MAX_EMPTY_ENTRIES:
                raise ValueError(
                    f"more than {MAX_EMPTY_ENTRIES} ResourceSpans or ScopeSpans entries "
                    "without spans"
                )
            continue  # nothing to decode: its resource would cost work for no span
        res_attrs = key_values(rs.resource.attributes)
        svc = res_attrs.get(attrs.SERVICE_NAME)
        service = UNKNOWN_SERVICE if svc is None or svc == "" else str(svc)
        res_json = json_value(res_attrs) if res_attrs else None
        for s, ss in enumerate(rs.scope_spans):
            lengths.append(
                len(service) + len(res_json or "") + len(ss.scope.name + ss.scope.version)
            )
            counts.append(len(ss.spans))
            check_repeated(lengths, counts, 2 * repeated_limit(len(data)))
            for i, span in enumerate(ss.spans):
                problem = _append(cols, span, service, res_json, ss.scope)
                bad.append(problem is not None)
                if problem is not None and first is None:
                    first = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]: {problem}"
    return cols.to_arrow(), Problems(np.array(bad, np.bool_), first)


def _append(
    cols: SpanColumns, span: Any, service: str, res_json: str | None, scope: Any
) -> str | None:
    problem = None
    if not span.trace_id:
        problem = "traceId: empty"
    elif not span.span_id:
        problem = "spanId: empty"
    kind, code = span.kind, span.status.code
    if not 0 <= kind < len(SPAN_KINDS):
        problem, kind = problem or "kind: not a span kind", 0
    if not 0 <= code < len(STATUS_CODES):
        problem, code = problem or "status.code: not a status code", 0
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    if start > _INT64_MAX:
        problem, start = problem or "startTimeUnixNano: beyond int64", _INT64_MAX
    if end > _INT64_MAX:
        problem, end = problem or "endTimeUnixNano: beyond int64", _INT64_MAX
    attributes = key_values(span.attributes)
    cpu = attributes.get(attrs.CPU_NS)
    if cpu is not None and not _fits_int64(cpu):
        attributes[attrs.CPU_NS] = None
    links = [_link(link) for link in span.links] or None
    if links and any(not x["trace_id"] or not x["span_id"] for x in links):
        problem = problem or "links: a link without traceId or spanId"
    cols.append(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex() or None,
        name=span.name,
        service=service,
        span_kind=SPAN_KINDS[kind],
        start_ns=start,
        end_ns=end,
        status_code=STATUS_CODES[code],
        status_message=span.status.message or None,
        attributes=attributes,
        resource_json=res_json,
        scope_name=scope.name or None,
        scope_version=scope.version or None,
        events=[_event(ev) for ev in span.events] or None,
        links=links,
    )
    return problem


def _fits_int64(value: Any) -> bool:
    if isinstance(value, bool):
        return True  # becomes None anyway
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return True  # not a number: becomes None anyway
    return -(2**63) <= number <= _INT64_MAX


def _event(event: Any) -> dict[str, Any]:
    return {
        "time_ns": event.time_unix_nano,
        "name": event.name,
        "attributes": key_values(event.attributes),
    }


def _link(link: Any) -> dict[str, Any]:
    return {
        "trace_id": link.trace_id.hex(),
        "span_id": link.span_id.hex(),
        "attributes": key_values(link.attributes),
    }
