"""OTLP JSON Lines span exporter: one ``TracesData`` object per line.

The Python SDK has no file exporter, and offline analysis (``tracelens analyze FILE``) wants the
spans of a run in a file.  Each ``export`` call writes one line holding that batch, encoded as
the OTLP/JSON specification says (which is *not* protobuf's generic JSON mapping): trace and
span ids as lower-case hex, 64-bit integers (timestamps, ``intValue``) as decimal strings, enums
(span kind, status code) as integers, ``bytesValue`` in base64, non-finite doubles as
``"NaN"``/``"Infinity"``/``"-Infinity"``, default values omitted.  The OpenTelemetry Collector's
file exporter writes the same shape, so either can feed the same importer.

Exporting never raises into the application: an unwritable path or an unencodable batch is
logged and reported as ``FAILURE``.

The exporter writes ``traces_data_json``: the document written as text directly (a span's
attributes are most of the work, and json.dumps of the OTLP/JSON shape, three containers per
attribute, costs about five times as much).  The same document built as dicts is the reference
in ``tests/reference_jsonl.py``; tests compare the two.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from json.encoder import encode_basestring as _json_str  # what json.dumps does to a str
from typing import IO, TYPE_CHECKING, Any, Final

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext

_log = logging.getLogger(__name__)

HAS_IS_REMOTE: Final = 0x100  # SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
IS_REMOTE: Final = 0x200  # SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK


def any_value(value: Any) -> dict[str, Any]:
    """An OTLP ``AnyValue`` in OTLP/JSON form."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": _double(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"bytesValue": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": key_values(value)}}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _double(value: float) -> float | str:
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def key_values(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not attributes:
        return []
    return [{"key": str(k), "value": any_value(v)} for k, v in attributes.items()]


def _flags(context: SpanContext | None, trace_flags: int) -> int:
    flags = (trace_flags & 0xFF) | HAS_IS_REMOTE
    if context is not None and context.is_remote:
        flags |= IS_REMOTE
    return flags


def _trace_state(ctx: SpanContext) -> str:
    return ",".join(f"{k}={v}" for k, v in ctx.trace_state.items())


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    """Sets ``key`` unless ``value`` is the proto3 default (omitted in OTLP/JSON)."""
    if value:
        out[key] = value


def _event(event: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"timeUnixNano": str(event.timestamp), "name": event.name}
    _put(out, "attributes", key_values(event.attributes))
    _put(out, "droppedAttributesCount", getattr(event, "dropped_attributes", 0))
    return out


def _link(link: Any) -> dict[str, Any]:
    ctx = link.context
    out: dict[str, Any] = {"traceId": f"{ctx.trace_id:032x}", "spanId": f"{ctx.span_id:016x}"}
    if ctx.trace_state:
        out["traceState"] = _trace_state(ctx)
    _put(out, "attributes", key_values(link.attributes))
    _put(out, "droppedAttributesCount", getattr(link, "dropped_attributes", 0))
    out["flags"] = _flags(ctx, int(ctx.trace_flags))
    return out


def _grouped(
    spans: Iterable[ReadableSpan], encode: Callable[[ReadableSpan], Any]
) -> dict[int, tuple[Any, dict[int, tuple[Any, list[Any]]]]]:
    """Encoded spans by resource, then instrumentation scope, in order of first appearance."""
    groups: dict[int, tuple[Any, dict[int, tuple[Any, list[Any]]]]] = {}
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope
        scopes = groups.setdefault(id(resource), (resource, {}))[1]
        scopes.setdefault(id(scope), (scope, []))[1].append(encode(span))
    return groups


def _scope(scope: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if scope is None:
        return out
    _put(out, "name", scope.name)
    _put(out, "version", scope.version)
    _put(out, "attributes", key_values(getattr(scope, "attributes", None)))
    return out


def _resource(resource: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if resource is not None:
        _put(out, "attributes", key_values(resource.attributes))
    return out


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _value_json(value: Any) -> str:
    """``any_value(value)`` as JSON text: the common types written directly, the rest dumped."""
    t = type(value)
    if t is str:
        return '{"stringValue":' + _json_str(value) + "}"
    if t is int:
        return '{"intValue":"' + int.__str__(value) + '"}'
    if t is bool:
        return '{"boolValue":true}' if value else '{"boolValue":false}'
    if t is float and math.isfinite(value):
        return '{"doubleValue":' + float.__repr__(value) + "}"
    if t is tuple or t is list:
        return '{"arrayValue":{"values":[' + ",".join(map(_value_json, value)) + "]}}"
    return _dumps(any_value(value))


def _key_values_json(attributes: Mapping[str, Any]) -> str:
    return (
        "["
        + ",".join(
            '{"key":' + _json_str(str(k)) + ',"value":' + _value_json(v) + "}"
            for k, v in attributes.items()
        )
        + "]"
    )


def _attributes_of(span: ReadableSpan) -> Mapping[str, Any] | None:
    """The span's attributes; the SDK's own dict when it is one (a finished span's is frozen),
    read directly instead of through two mapping wrappers that fetch each value in Python."""
    raw = getattr(getattr(span, "_attributes", None), "_dict", None)
    if type(raw) is dict and getattr(span._attributes, "_immutable", False):
        return raw
    return span.attributes


def span_json(span: ReadableSpan) -> str:
    """One span as OTLP/JSON text (``encode_span`` in ``tests/reference_jsonl.py`` builds the same
    object as dicts; ``attributes`` may come earlier here)."""
    ctx = span.get_span_context()
    assert ctx is not None
    parts = ['{"traceId":"', format(ctx.trace_id, "032x"), '","spanId":"']
    parts.append(format(ctx.span_id, "016x"))
    if ctx.trace_state:
        parts.append('","traceState":')
        parts.append(_json_str(_trace_state(ctx)))
    else:
        parts.append('"')
    parent = span.parent
    if parent is not None:
        parts.append(',"parentSpanId":"' + format(parent.span_id, "016x") + '"')
    parts.append(',"flags":' + str(_flags(parent, int(ctx.trace_flags))))
    name = span.name
    parts.append(',"name":' + (_json_str(name) if type(name) is str else _dumps(name)))
    parts.append(',"kind":' + str(span.kind.value + 1))
    parts.append(',"startTimeUnixNano":"' + str(span.start_time or 0))
    parts.append('","endTimeUnixNano":"' + str(span.end_time or 0) + '"')
    attributes = _attributes_of(span)
    if attributes:
        parts.append(',"attributes":' + _key_values_json(attributes))
    rare: dict[str, Any] = {}
    _put(rare, "droppedAttributesCount", span.dropped_attributes)
    if span.events:
        rare["events"] = [_event(e) for e in span.events]
    _put(rare, "droppedEventsCount", span.dropped_events)
    if span.links:
        rare["links"] = [_link(link) for link in span.links]
    _put(rare, "droppedLinksCount", span.dropped_links)
    for key, value in rare.items():
        parts.append(',"' + key + '":' + _dumps(value))
    status: dict[str, Any] = {}
    _put(status, "message", span.status.description)
    _put(status, "code", span.status.status_code.value)
    parts.append(',"status":' + _dumps(status) + "}")
    return "".join(parts)


def traces_data_json(spans: Sequence[ReadableSpan]) -> str:
    """Spans grouped by resource, then instrumentation scope, as one ``TracesData`` in one line
    of JSON text."""
    resource_spans = []
    for resource, scopes in _grouped(spans, span_json).values():
        scope_spans = []
        for scope, encoded in scopes.values():
            entry = '{"scope":' + _dumps(_scope(scope)) + ',"spans":[' + ",".join(encoded) + "]"
            schema = getattr(scope, "schema_url", "") if scope else ""
            if schema:
                entry += ',"schemaUrl":' + _json_str(schema)
            scope_spans.append(entry + "}")
        rs = '{"resource":' + _dumps(_resource(resource)) + ',"scopeSpans":['
        rs += ",".join(scope_spans) + "]"
        schema = getattr(resource, "schema_url", "")
        if schema:
            rs += ',"schemaUrl":' + _json_str(schema)
        resource_spans.append(rs + "}")
    return '{"resourceSpans":[' + ",".join(resource_spans) + "]}"


class OTLPJsonLinesExporter(SpanExporter):
    """Appends each exported batch to ``path`` as one OTLP/JSON ``TracesData`` line.

    The file is opened on the first export (so configuring costs nothing until spans exist),
    appended to, and flushed after every line: a crash loses at most the batch in flight, and
    a reader never sees half a line from a finished batch.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._file: IO[str] | None = None
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            line = traces_data_json(spans)
        except Exception:
            _log.exception("tracelens: could not encode %d spans as OTLP JSON", len(spans))
            return SpanExportResult.FAILURE
        with self._lock:
            if self._closed:
                return SpanExportResult.FAILURE
            try:
                if self._file is None:
                    self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
                self._file.write(line + "\n")
                self._file.flush()
            except OSError as exc:
                _log.error("tracelens: cannot write spans to %s: %s", self.path, exc)
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # every line is flushed as it is written

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                try:
                    self._file.close()
                except OSError as exc:
                    _log.error("tracelens: closing %s failed: %s", self.path, exc)
                self._file = None
