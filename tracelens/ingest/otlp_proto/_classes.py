"""The Python decoder: OTLP protobuf through the generated ``opentelemetry-proto`` classes.

The protobuf library (upb) parses the request and decides what is valid protobuf (wire types,
varints, lengths, UTF-8 of string fields, nesting depth); this walks the parsed messages span by
span into ``SpanColumns``, the builder the JSON importer uses too.  It is the fallback where the
compiled decoder is not built or switched off, the decoder of every request the compiled one
leaves aside, and the oracle ``tests/test_otlp_native.py`` checks the compiled one against.
It is the slower of the two: about 65k spans/s on ``bench/ingest.py``'s payload, against over 1M.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracelens.ingest._common import repeated_limit
from tracelens.ingest.otlp_proto._anyvalue import key_values
from tracelens.ingest.otlp_proto._parts import (
    BAD_END,
    BAD_KIND,
    BAD_LINK,
    BAD_START,
    BAD_STATUS,
    INT64_MAX,
    NO_SPAN_ID,
    NO_TRACE_ID,
    Decoded,
    Group,
    bad_links,
    check_groups,
    count_empty,
    event_dict,
    link_dict,
    problems,
    resource_parts,
    scope_parts,
    status_parts,
)
from tracelens.schema import SPAN_KINDS, STATUS_CODES, SpanColumns


def decode(data: bytes) -> Decoded:
    """Every span of an encoded ``ExportTraceServiceRequest`` (or ``TracesData``), and which are
    invalid; malformed protobuf raises ``DecodeError``, a request over a limit ``ValueError``."""
    request = ExportTraceServiceRequest.FromString(data)
    groups: list[Group] = []
    parts: list[tuple[tuple[str, str | None], tuple[str | None, str | None]]] = []
    scope_spans: list[Any] = []
    empty = 0
    for r, rs in enumerate(request.resource_spans):
        resource: tuple[str, str | None] | None = None
        for s, ss in enumerate(rs.scope_spans):
            if not ss.spans:
                empty += 1
                continue
            if resource is None:
                resource = resource_parts(rs.resource)
            groups.append(Group(r, s, len(ss.spans)))
            parts.append((resource, scope_parts(ss.scope)))
            scope_spans.append(ss)
        if resource is None:
            empty += 1
    count_empty(empty)
    check_groups(
        {
            "service": [res[0] for res, _ in parts],
            "resource": [res[1] for res, _ in parts],
            "scope_name": [scope[0] for _, scope in parts],
            "scope_version": [scope[1] for _, scope in parts],
        },
        [g.count for g in groups],
        repeated_limit(len(data)),
    )
    cols = SpanColumns()
    flags: list[int] = []
    for ss, ((service, res_json), (scope_name, scope_version)) in zip(
        scope_spans, parts, strict=True
    ):
        for span in ss.spans:
            flags.append(_append(cols, span, service, res_json, scope_name, scope_version))
    return Decoded(cols.to_arrow(), problems(np.array(flags, np.int64), groups))


def _append(
    cols: SpanColumns,
    span: Any,
    service: str,
    res_json: str | None,
    scope_name: str | None,
    scope_version: str | None,
) -> int:
    """Append one span; returns its problem bits (``_parts.PROBLEMS``)."""
    flags = 0
    if not span.trace_id:
        flags |= NO_TRACE_ID
    if not span.span_id:
        flags |= NO_SPAN_ID
    kind = span.kind
    if not 0 <= kind < len(SPAN_KINDS):
        flags, kind = flags | BAD_KIND, 0
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    if start > INT64_MAX:
        flags, start = flags | BAD_START, INT64_MAX
    if end > INT64_MAX:
        flags, end = flags | BAD_END, INT64_MAX
    code, message = status_parts(span.status)
    if not 0 <= code < len(STATUS_CODES):
        flags, code = flags | BAD_STATUS, 0
    links = [link_dict(link) for link in span.links] or None
    if links and bad_links(links):
        flags |= BAD_LINK
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
        status_message=message,
        attributes=key_values(span.attributes),
        resource_json=res_json,
        scope_name=scope_name,
        scope_version=scope_version,
        events=[event_dict(ev) for ev in span.events] or None,
        links=links,
    )
    return flags
