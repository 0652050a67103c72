"""OTLP/JSON (ExportTraceServiceRequest or TracesData, also inside Jaeger's /api/v3 envelope).

Follows the OTLP/JSON encoding leniently, the way real producers write it: ids in hex of either
case (lower-cased here; base64 ids from proto3's generic JSON mapping are converted to hex), int64
as strings or numbers, enums (span kind, status code) as integers or their names.  Attribute values
keep their types: strings stay strings, every other ``AnyValue`` is handed to ``SpanColumns`` as the
matching Python value (int, float, bool, bytes, list, dict), which JSON-encodes it losslessly.

Events become ``{time_ns, name, attributes}`` and links ``{trace_id, span_id, attributes}``; the
OTLP protobuf decoder (``otlp_proto``) produces the same shapes, so a trace reads the same whichever
way it was encoded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from tracelens_instrumentation import attributes as A

from tracelens.ingest import _json_fast
from tracelens.ingest._common import (
    DECODE_ERRORS,
    FieldError,
    SpanBatch,
    as_bytes,
    as_dict,
    as_float,
    as_int,
    as_list,
    as_str,
    b64_to_hex,
    item_error,
    list_field,
    loads,
    located,
    norm_span_id,
    norm_trace_id,
    opt_str,
)
from tracelens.schema import SPAN_KINDS, STATUS_CODES, json_value

UNKNOWN_SERVICE: Final = "unknown_service"


def _enum_names(prefix: str, values: tuple[str, ...]) -> dict[str, str]:
    """How OTLP/JSON may spell an enum value by name (upper case, with or without the proto
    prefix), to the value."""
    return {**{f"{prefix}{v.upper()}": v for v in values}, **{v.upper(): v for v in values}}


_KIND_NAMES: Final = _enum_names("SPAN_KIND_", SPAN_KINDS)
_STATUS_NAMES: Final = _enum_names("STATUS_CODE_", STATUS_CODES)


def looks_like(doc: Any) -> bool:
    """A TracesData / ExportTraceServiceRequest, bare or in a Jaeger v3 ``{"result": ...}``."""
    if type(doc) is not dict:
        return False
    if "resourceSpans" in doc:
        return True
    result = doc.get("result")
    return type(result) is dict and "resourceSpans" in result


_Native = _json_fast.NativeColumns


def decode(doc: Any, batch: SpanBatch, warnings: list[str]) -> None:
    """Append every span of one OTLP JSON document to ``batch``; bad values raise ``FieldError``.

    Where the compiled builder is built (``_json_fast``), it takes the spans; a document it leaves
    aside is decoded again from its start by the Python decoder below, which alone words errors.
    """
    _json_fast.decode(batch, _native_columns, lambda native: _document(doc, batch, native))


def _native_columns() -> _Native:
    return _json_fast.NativeColumns(_KIND_NAMES, _STATUS_NAMES, _slow_value, _extras)


def _document(doc: Any, batch: SpanBatch, native: _Native | None) -> None:
    if type(doc) is dict and "resourceSpans" not in doc and type(doc.get("result")) is dict:
        try:
            _request(doc["result"], batch, native)
        except FieldError as exc:
            raise exc.under("result") from None
        return
    if type(doc) is not dict or "resourceSpans" not in doc:
        raise FieldError("resourceSpans", "missing: not an OTLP JSON document")
    _request(doc, batch, native)


def _request(doc: dict[str, Any], batch: SpanBatch, native: _Native | None) -> None:
    for r, rs in enumerate(as_list(doc, "resourceSpans")):
        try:
            _resource_spans(as_dict(rs, ""), batch, native)
        except FieldError as exc:
            raise exc.under(f"resourceSpans[{r}]") from None


def _resource_spans(rs: dict[str, Any], batch: SpanBatch, native: _Native | None) -> None:
    key = "scopeSpans" if "scopeSpans" in rs else "instrumentationLibrarySpans"
    scopes = rs.get(key) or []
    if type(scopes) is list:  # else as_list below says what is wrong
        empty = sum(1 for ss in scopes if type(ss) is not dict or not ss.get("spans"))
        if empty == len(scopes):
            batch.empty(1 + empty)
        elif empty:
            batch.empty(empty)
    service, res_json = _resource(as_dict(rs.get("resource") or {}, "resource"))
    shared = len(service) + len(res_json or "")
    for s, ss in enumerate(as_list(rs, key)):
        try:
            _scope_spans(as_dict(ss, ""), service, res_json, shared, batch, native)
        except FieldError as exc:
            raise exc.under(f"{key}[{s}]") from None


def _resource(resource: dict[str, Any]) -> tuple[str, str | None]:
    """A resource's service and its attributes as JSON (None without attributes)."""
    try:
        res_attrs = attributes(resource.get("attributes"))
    except FieldError as exc:
        raise exc.under("resource.attributes") from None
    svc = res_attrs.get(A.SERVICE_NAME)
    service = UNKNOWN_SERVICE if svc is None or svc == "" else str(svc)
    return service, json_value(res_attrs) if res_attrs else None


def _scope(scope: dict[str, Any]) -> tuple[str | None, str | None]:
    """A scope's name and version."""
    return opt_str(scope.get("name"), "scope.name"), opt_str(scope.get("version"), "scope.version")


_DIRECT: Final = re.compile(rb'[ \t\r\n]*\{[ \t\r\n]*"resourceSpans"[ \t\r\n]*:')


def decode_bytes(data: bytes, batch: SpanBatch) -> bool:
    """One OTLP JSON document given as its bytes, read straight from them into the compiled
    builder's columns (``_json_direct.h``: no Python object per value, no parse, no walk).
    False, with nothing added, where that reader leaves the document to the parsed way (anything
    but the common shape; invalid JSON too): the caller then parses and decodes it, which alone
    words errors.  The result is what parsing and ``decode`` give (the tests compare them)."""
    return _DIRECT.match(data, 0, 64) is not None and _json_fast.decode_direct(
        batch,
        _native_columns,
        lambda native: native.add_otlp_bytes(data, _direct_resource, _direct_scope),
    )


def _direct_resource(data: bytes) -> tuple[str, str | None] | None:
    """``_resource`` of a resource's bytes, for ``add_otlp_bytes``; None when it is bad."""
    try:
        return _resource(as_dict(loads(data) or {}, "resource"))
    except Exception:  # FieldError or a parse error: the parsed way words it
        return None


def _direct_scope(data: bytes) -> tuple[str | None, str | None] | None:
    """``_scope`` of a scope's bytes, for ``add_otlp_bytes``; None when it is bad."""
    try:
        return _scope(as_dict(loads(data) or {}, "scope"))
    except Exception:  # FieldError or a parse error: the parsed way words it
        return None


def _scope_spans(
    ss: dict[str, Any],
    service: str,
    res_json: str | None,
    shared: int,
    batch: SpanBatch,
    native: _Native | None,
) -> None:
    scope_name, scope_version = _scope(
        as_dict(ss.get("scope") or ss.get("instrumentationLibrary") or {}, "scope")
    )
    shared += len(scope_name or "") + len(scope_version or "")
    spans = as_list(ss, "spans")
    if native is not None:
        try:
            done = batch.may_repeat(shared * len(spans)) and native.add(
                spans, service, res_json, scope_name, scope_version
            )
        except Exception:  # the Python decoder below meets the same and words it
            done = False
        if not done:
            raise _json_fast.Slow
        return
    for i, span in enumerate(spans):
        try:
            batch.repeat(shared)
            _span(as_dict(span, ""), service, res_json, scope_name, scope_version, batch)
        except DECODE_ERRORS as exc:
            raise located(exc, f"spans[{i}]") from None
        batch.tick()


def _span(
    span: dict[str, Any],
    service: str,
    res_json: str | None,
    scope_name: str | None,
    scope_version: str | None,
    batch: SpanBatch,
) -> None:
    parent = span.get("parentSpanId")
    status = span.get("status")
    code, message = ("unset", None) if not status else _status(as_dict(status, "status"))
    try:
        attributes_ = attributes(span.get("attributes"))
    except FieldError as exc:
        raise exc.under("attributes") from None
    batch.cols.append(
        trace_id=trace_id(span.get("traceId"), "traceId"),
        span_id=span_id(span.get("spanId"), "spanId"),
        parent_span_id=span_id(parent, "parentSpanId") if parent else None,
        name=as_str(span.get("name", ""), "name"),
        service=service,
        span_kind=span_kind(span.get("kind", 0), "kind"),
        start_ns=unix_nano(span, "startTimeUnixNano"),
        end_ns=unix_nano(span, "endTimeUnixNano"),
        status_code=code,
        status_message=message,
        attributes=attributes_,
        resource_json=res_json,
        scope_name=scope_name,
        scope_version=scope_version,
        events=_events(span) if "events" in span else None,
        links=_links(span) if "links" in span else None,
    )


def unix_nano(obj: dict[str, Any], key: str) -> int:
    """A ``fixed64`` time: absent or null is 0, as in proto3 JSON (a field at its default is not
    written; the protobuf decoder reads 0 for it too).  ``files`` warns about zero times."""
    value = obj.get(key)
    return 0 if value is None else as_int(value, key)


def _status(status: dict[str, Any]) -> tuple[str, str | None]:
    return (
        status_code(status.get("code", 0), "status.code"),
        opt_str(status.get("message"), "status.message"),
    )


def trace_id(value: Any, field: str) -> str:
    return _id(norm_trace_id(as_str(value, field)), field, 16)


def span_id(value: Any, field: str) -> str:
    return _id(norm_span_id(as_str(value, field)), field, 8)


def _id(text: str, field: str, nbytes: int) -> str:
    """An id as OTLP/JSON writes it (hex, normalised by the caller), or base64 (proto3's generic
    JSON mapping of ``bytes``) turned into hex."""
    hexed = b64_to_hex(text, nbytes)
    if hexed is not None:
        return hexed
    if not text:
        raise FieldError(field, "empty")
    return text


def span_kind(value: Any, field: str) -> str:
    return _enum(value, field, SPAN_KINDS, _KIND_NAMES, "a span kind")


def status_code(value: Any, field: str) -> str:
    return _enum(value, field, STATUS_CODES, _STATUS_NAMES, "a status code")


def _enum(value: Any, field: str, values: tuple[str, ...], names: dict[str, str], what: str) -> str:
    """An OTLP enum as its number (an index into ``values``) or its name (see ``_enum_names``)."""
    if type(value) is int and 0 <= value < len(values):
        return values[value]
    if type(value) is str and value.upper() in names:
        return names[value.upper()]
    raise FieldError(field, f"not {what}: {value!r:.60}")


# AnyValues nest (arrays and kvlists of AnyValues); the readers below recurse one call level
# per nesting level, so nesting is refused past this depth: recursion stays bounded by a small
# stated constant whatever the input (the protobuf decoder is bounded by upb's limit of 100).
MAX_VALUE_DEPTH: Final = 64


def attributes(items: Any, depth: int = 0) -> dict[str, Any]:
    """A list of ``{key, value: AnyValue}`` as a dict of typed Python values (last key wins);
    ``depth``: how deep inside other AnyValues the list is."""
    out: dict[str, Any] = {}
    for j, kv in enumerate(list_field(items)):
        try:
            key, value = kv.get("key"), kv.get("value")
            if type(key) is str and type(value) is dict:  # the common case, checked inline
                string = value.get("stringValue")
                if type(string) is str:
                    out[key] = string
                    continue
            out[as_str(key, "key")] = any_value(value, depth)
        except (FieldError, AttributeError) as exc:
            raise item_error(exc, j, "{key, value}") from None
    return out


def any_value(v: Any, depth: int = 0) -> Any:
    """One OTLP ``AnyValue`` as a Python value (an empty AnyValue is None); ``depth``: how many
    AnyValues it is inside (at most ``MAX_VALUE_DEPTH``)."""
    if type(v) is not dict:
        if v is None:
            return None
        raise FieldError("value", "not an AnyValue object")
    if "stringValue" in v:
        return as_str(v["stringValue"], "value.stringValue")
    if "intValue" in v:
        return as_int(v["intValue"], "value.intValue")
    if "doubleValue" in v:
        return as_float(v["doubleValue"], "value.doubleValue")
    if "boolValue" in v:
        if type(v["boolValue"]) is not bool:
            raise FieldError("value.boolValue", f"not a boolean: {v['boolValue']!r:.60}")
        return v["boolValue"]
    if ("arrayValue" in v or "kvlistValue" in v) and depth >= MAX_VALUE_DEPTH:
        raise FieldError("value", f"values nested more than {MAX_VALUE_DEPTH} deep")
    if "arrayValue" in v:
        return _array(v["arrayValue"], depth + 1)
    if "kvlistValue" in v:
        try:
            return attributes(as_dict(v["kvlistValue"] or {}, "").get("values"), depth + 1)
        except FieldError as exc:
            raise exc.under("value.kvlistValue.values") from None
    if "bytesValue" in v:
        return as_bytes(v["bytesValue"], "value.bytesValue")
    if not v:
        return None
    raise FieldError("value", f"unknown AnyValue type: {', '.join(map(str, v))}")


def _array(arr: Any, depth: int) -> list[Any]:
    values = as_dict(arr or {}, "value.arrayValue").get("values") or []
    if type(values) is not list:
        raise FieldError("value.arrayValue.values", "not a list")
    return _read_all(values, "value.arrayValue.values", lambda item: any_value(item, depth))


def _events(span: dict[str, Any]) -> list[dict[str, Any]] | None:
    return _each(span, "events", _event)


def _links(span: dict[str, Any]) -> list[dict[str, Any]] | None:
    return _each(span, "links", _link)


def _event(ev: Any) -> dict[str, Any]:
    return {
        "time_ns": unix_nano(ev, "timeUnixNano"),
        "name": as_str(ev.get("name", ""), "name"),
        "attributes": _sub_attributes(ev),
    }


def _link(link: Any) -> dict[str, Any]:
    return {
        "trace_id": trace_id(link.get("traceId"), "traceId"),
        "span_id": span_id(link.get("spanId"), "spanId"),
        "attributes": _sub_attributes(link),
    }


def _each(
    span: dict[str, Any], field: str, read: Callable[[Any], dict[str, Any]]
) -> list[dict[str, Any]] | None:
    """``read`` of each object of the list ``span[field]``; None when there are none."""
    items = as_list(span, field)
    return _read_all(items, field, read) if items else None


def _read_all(items: list[Any], path: str, read: Callable[[Any], Any]) -> list[Any]:
    """``read`` of each item, an error in one under ``path[i]``."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(read(item))
        except FieldError as exc:
            raise exc.under(f"{path}[{i}]") from None
    return out


def _slow_value(value: Any) -> tuple[str, bool, Any] | None:
    """An attribute value for the compiled builder, as ``attributes`` and ``SpanColumns`` store
    it (``_json_fast.stored``); None on a bad value."""
    try:
        return _json_fast.stored(any_value(value))
    except FieldError:
        return None


def _extras(span: dict[str, Any]) -> tuple[str | None, str | None] | None:
    """A span's events and links as ``_span`` and ``SpanColumns`` store them; None when bad."""
    try:
        events = _events(span) if "events" in span else None
        links = _links(span) if "links" in span else None
    except Exception:  # FieldError or a structural surprise: the Python decoder words it
        return None
    return (json_value(events) if events else None, json_value(links) if links else None)


def _sub_attributes(obj: dict[str, Any]) -> dict[str, Any]:
    try:
        return attributes(obj.get("attributes"))
    except FieldError as exc:
        raise exc.under("attributes") from None
