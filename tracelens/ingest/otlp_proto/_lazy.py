"""Message classes that parse OTLP trace requests without materialising attributes.

The generated ``ExportTraceServiceRequest`` turns every attribute into a ``KeyValue`` and an
``AnyValue`` Python object when it is read, which costs more than everything else per span.  These
classes describe the same wire format with ``Span.attributes`` (and events, links, resource, scope,
status) declared as ``bytes``: upb parses the structure at C speed and hands back each attribute's
encoded ``KeyValue``, which ``_keyvalues`` parses for all spans at once with NumPy.  Field numbers
are OTLP's (opentelemetry/proto/trace/v1/trace.proto); fields tracelens does not store are left
out and kept by upb as unknown fields.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_PACKAGE = "tracelens.otlp_lazy"

# (number, name, type, repeated, message type name)
_MESSAGES: dict[str, list[tuple[int, str, int, bool, str | None]]] = {
    "Span": [
        (1, "trace_id", _F.TYPE_BYTES, False, None),
        (2, "span_id", _F.TYPE_BYTES, False, None),
        (4, "parent_span_id", _F.TYPE_BYTES, False, None),
        (5, "name", _F.TYPE_STRING, False, None),
        (6, "kind", _F.TYPE_INT32, False, None),
        (7, "start_time_unix_nano", _F.TYPE_FIXED64, False, None),
        (8, "end_time_unix_nano", _F.TYPE_FIXED64, False, None),
        (9, "attributes", _F.TYPE_BYTES, True, None),
        (11, "events", _F.TYPE_BYTES, True, None),
        (13, "links", _F.TYPE_BYTES, True, None),
        (15, "status", _F.TYPE_BYTES, False, None),
    ],
    "ScopeSpans": [
        (1, "scope", _F.TYPE_BYTES, False, None),
        (2, "spans", _F.TYPE_MESSAGE, True, "Span"),
    ],
    "ResourceSpans": [
        (1, "resource", _F.TYPE_BYTES, False, None),
        (2, "scope_spans", _F.TYPE_MESSAGE, True, "ScopeSpans"),
    ],
    "ExportTraceServiceRequest": [
        (1, "resource_spans", _F.TYPE_MESSAGE, True, "ResourceSpans"),
    ],
}


def _build() -> dict[str, Any]:
    fd = descriptor_pb2.FileDescriptorProto(
        name="tracelens/otlp_lazy_trace.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        msg = fd.message_type.add(name=name)
        for number, fname, ftype, repeated, type_name in fields:
            field = msg.field.add(
                name=fname,
                number=number,
                type=ftype,
                label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL,
            )
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _MESSAGES
    }


_CLASSES = _build()
LazyRequest: Any = _CLASSES["ExportTraceServiceRequest"]
