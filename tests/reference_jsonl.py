"""The OTLP JSON Lines document built as dicts: the reference ``jsonl.traces_data_json`` must equal.

``tracelens_instrumentation.jsonl`` writes the document as text directly, for speed; this builds
the same ``TracesData`` object field by field, so a test can compare the two and another can check
this one against the SDK's own protobuf encoding.  ``bench/export.py`` uses it as its baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from tracelens_instrumentation.jsonl import (
    _event,
    _flags,
    _grouped,
    _link,
    _put,
    _resource,
    _scope,
    _trace_state,
    key_values,
)


def traces_data(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Spans grouped by resource, then instrumentation scope, as one ``TracesData``."""
    resource_spans = []
    for resource, scopes in _grouped(spans, encode_span).values():
        scope_spans = []
        for scope, encoded in scopes.values():
            entry: dict[str, Any] = {"scope": _scope(scope), "spans": encoded}
            _put(entry, "schemaUrl", getattr(scope, "schema_url", "") if scope else "")
            scope_spans.append(entry)
        rs: dict[str, Any] = {"resource": _resource(resource), "scopeSpans": scope_spans}
        _put(rs, "schemaUrl", getattr(resource, "schema_url", ""))
        resource_spans.append(rs)
    return {"resourceSpans": resource_spans}


def encode_span(span: ReadableSpan) -> dict[str, Any]:
    ctx = span.get_span_context()
    assert ctx is not None
    out: dict[str, Any] = {"traceId": f"{ctx.trace_id:032x}", "spanId": f"{ctx.span_id:016x}"}
    if ctx.trace_state:
        out["traceState"] = _trace_state(ctx)
    if span.parent is not None:
        out["parentSpanId"] = f"{span.parent.span_id:016x}"
    out["flags"] = _flags(span.parent, int(ctx.trace_flags))
    out["name"] = span.name
    out["kind"] = span.kind.value + 1  # SDK INTERNAL=0.., OTLP SPAN_KIND_INTERNAL=1..
    out["startTimeUnixNano"] = str(span.start_time or 0)
    out["endTimeUnixNano"] = str(span.end_time or 0)
    _put(out, "attributes", key_values(span.attributes))
    _put(out, "droppedAttributesCount", span.dropped_attributes)
    _put(out, "events", [_event(e) for e in span.events])
    _put(out, "droppedEventsCount", span.dropped_events)
    _put(out, "links", [_link(link) for link in span.links])
    _put(out, "droppedLinksCount", span.dropped_links)
    status: dict[str, Any] = {}
    _put(status, "message", span.status.description)
    _put(status, "code", span.status.status_code.value)
    out["status"] = status
    return out
