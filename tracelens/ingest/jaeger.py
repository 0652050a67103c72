"""Jaeger JSON: the API/UI download ``{"data": [trace, ...]}`` and one bare trace.

Mapped the way OpenTelemetry's Jaeger translator maps it, so a trace reads the same whether it
arrived through Jaeger or as OTLP:

* ``startTime``/``duration`` are microseconds; 16-hex (64-bit) trace ids are widened to 32 hex.
  Other odd ids (CRISP's ``"A"``) are kept as they are.
* tags keep their declared ``type`` (string, bool, int64, float64, binary = base64 bytes).
* ``span.kind`` becomes the span kind (absent: ``internal``: OpenTracing tags only RPC spans);
  ``otel.status_code`` (else ``error=true``) the status, ``otel.status_description`` its message;
  ``otel.scope.name``/``version`` (or the older ``otel.library.*``) the scope.  These tags are
  consumed, not repeated as attributes.
* The process's ``serviceName`` is the service; ``service.name`` plus the process tags are the
  resource.
* References: the first ``CHILD_OF`` is the parent (a ``FOLLOWS_FROM`` when there is no
  ``CHILD_OF``); every other reference becomes a link with ``opentracing.ref_type``.
* Logs become events; a log's ``event`` field is the event name.

Where it is built, the compiled builder (``_json_fast``, ``_json_jaeger.h``) reads the spans; this
module decodes each trace's processes for it and answers its callbacks (unusual tag values,
logs, references other than one parent), and decodes any document the builder leaves aside.
"""

from __future__ import annotations

import re
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
    item_error,
    list_field,
    loads,
    located,
    micros_to_ns,
    norm_span_id,
    pad_trace_id,
)
from tracelens.ingest.otlp_json import UNKNOWN_SERVICE
from tracelens.schema import SPAN_KINDS, json_value

REF_TYPE_ATTRIBUTE: Final = "opentracing.ref_type"

_TAG_SPAN_KIND: Final = "span.kind"
_TAG_STATUS_CODE: Final = "otel.status_code"
_TAG_STATUS_DESCRIPTION: Final = "otel.status_description"
_TAG_ERROR: Final = "error"
_SCOPE_NAME_TAGS: Final = ("otel.scope.name", "otel.library.name")
_SCOPE_VERSION_TAGS: Final = ("otel.scope.version", "otel.library.version")
_STATUS: Final = {"OK": "ok", "ERROR": "error", "UNSET": "unset"}
# The tags a span's columns consume, in the order the compiled builder takes them.
_CONSUMED: Final = (
    _TAG_SPAN_KIND,
    _TAG_STATUS_CODE,
    _TAG_STATUS_DESCRIPTION,
    _TAG_ERROR,
    _SCOPE_NAME_TAGS[0],
    _SCOPE_NAME_TAGS[1],
    _SCOPE_VERSION_TAGS[0],
    _SCOPE_VERSION_TAGS[1],
)


def looks_like(doc: Any) -> bool:
    if type(doc) is dict:
        return type(doc.get("data")) is list or ("spans" in doc and "traceID" in doc)
    return type(doc) is list and bool(doc) and type(doc[0]) is dict and "spans" in doc[0]


def decode(doc: Any, batch: SpanBatch, warnings: list[str]) -> None:
    """Append the spans of every trace in ``doc`` to ``batch``."""
    _json_fast.decode(
        batch, _native_columns, lambda native: _document(doc, batch, warnings, native)
    )


# A Jaeger API response ({"data": [...]}) read straight from its bytes (_json_jaeger_direct.h).
_DIRECT: Final = re.compile(rb'[ \t\r\n]*\{[ \t\r\n]*"data"[ \t\r\n]*:')


def decode_bytes(data: bytes, batch: SpanBatch) -> bool:
    """One Jaeger API response given as its bytes, read straight from them into the compiled
    builder's columns: no parse into Python objects, no walk.  False, with nothing added, where
    that reader leaves the document to the parsed way (anything but the common shape; invalid
    JSON too): the caller then parses and decodes it, which alone words errors and warnings.  The
    result is what parsing and ``decode`` give (the tests compare them)."""
    return _DIRECT.match(data, 0, 64) is not None and _json_fast.decode_direct(
        batch,
        _native_columns,
        lambda native: native.add_jaeger_bytes(data, _direct_processes, _CONSUMED),
    )


_DIRECT_CACHE: dict[bytes, tuple[dict[str, tuple[str, str]], int]] = {}


def _direct_processes(data: bytes) -> tuple[dict[str, tuple[str, str]], int] | None:
    """``_shared_processes`` of a trace's ``processes`` given as bytes (cached by them: a
    download repeats the same few in every trace); None when they are bad (the parsed way words
    it)."""
    found = _DIRECT_CACHE.get(data)
    if found is not None:
        return found
    try:
        found = _shared_processes(loads(data))
    except Exception:
        return None
    if len(data) <= _SHARED_KEY_CHARS:
        if len(_DIRECT_CACHE) >= _SHARED_CACHE_ENTRIES:
            _DIRECT_CACHE.clear()
        _DIRECT_CACHE[data] = found
    return found


def _native_columns() -> _json_fast.NativeColumns:
    return _json_fast.NativeColumns({k: k for k in SPAN_KINDS}, _STATUS, _slow_tag, _extras)


def _document(
    doc: Any, batch: SpanBatch, warnings: list[str], native: _json_fast.NativeColumns | None
) -> None:
    if type(doc) is dict and "data" in doc:
        traces, prefix = as_list(doc, "data"), "data"
    elif type(doc) is dict and "spans" in doc:
        traces, prefix = [doc], ""
    elif type(doc) is list:
        traces, prefix = doc, ""
    else:
        raise FieldError("data", "missing: not a Jaeger JSON document ({data} or {traceID, spans})")
    for t, trace in enumerate(traces):
        try:
            _trace(as_dict(trace, ""), batch, warnings, native)
        except FieldError as exc:
            raise exc.under(f"{prefix}[{t}]" if prefix or type(doc) is list else "") from None


class _Process:
    __slots__ = ("resource_json", "service")

    def __init__(self, process: dict[str, Any]) -> None:
        service = process.get("serviceName")
        self.service = service if type(service) is str and service else UNKNOWN_SERVICE
        try:
            tags = typed_tags(process.get("tags"))
        except FieldError as exc:
            raise exc.under("tags") from None
        self.resource_json = json_value({A.SERVICE_NAME: self.service, **tags})


def _trace(
    trace: dict[str, Any],
    batch: SpanBatch,
    warnings: list[str],
    native: _json_fast.NativeColumns | None,
) -> None:
    raw_processes = trace.get("processes") or {}
    if native is not None:
        shared, most = _shared_processes(raw_processes)
        if "spans" not in trace:
            raise FieldError("spans", "missing: not a Jaeger trace")
        _native_trace(as_list(trace, "spans"), trace.get("traceID"), shared, most, batch, native)
        return
    processes = _processes(raw_processes)
    if "spans" not in trace:
        raise FieldError("spans", "missing: not a Jaeger trace")
    spans = as_list(trace, "spans")
    trace_id = trace.get("traceID")
    missing: set[str] = set()
    for i, span in enumerate(spans):
        try:
            _span(as_dict(span, ""), trace_id, processes, missing, batch)
        except DECODE_ERRORS as exc:
            raise located(exc, f"spans[{i}]") from None
        batch.tick()
    if missing:
        warnings.append(
            f"spans name processes that the trace lacks ({', '.join(sorted(missing))}); "
            f"their service is {UNKNOWN_SERVICE}"
        )


def _processes(raw: Any) -> dict[str, _Process]:
    """A trace's ``processes`` decoded (``FieldError`` naming the bad one)."""
    processes: dict[str, _Process] = {}
    for pid, proc in as_dict(raw, "processes").items():
        try:
            processes[pid] = _Process(as_dict(proc, ""))
        except FieldError as exc:
            raise exc.under(f"processes.{pid}") from None
    return processes


_SHARED_CACHE: dict[str, tuple[dict[str, tuple[str, str]], int]] = {}
_SHARED_CACHE_ENTRIES: Final = 256
_SHARED_KEY_CHARS: Final = 8192


def _shared_processes(raw: Any) -> tuple[dict[str, tuple[str, str]], int]:
    """What the compiled builder takes of a trace's ``processes``: pid -> (service, resource
    JSON), and the longest of them (what a span repeats, at most).

    Why cached: a Jaeger download repeats the same few processes in every trace, and decoding
    them (typed tags, the resource JSON) cost more per trace of 20 spans than the builder took
    for its spans.  The key is the processes' ``repr``: for the JSON values a parser returns
    (str, int, float, bool, None, list, dict) equal reprs are equal values, so a hit is what
    decoding them again would return; a miss decodes them (and raises) as before."""
    key = repr(raw) if type(raw) is dict else None
    found = _SHARED_CACHE.get(key) if key is not None else None
    if found is not None:
        return found
    processes = _processes(raw)
    shared = {pid: (p.service, p.resource_json) for pid, p in processes.items()}
    most = max((len(s) + len(r) for s, r in shared.values()), default=0)
    if key is not None and len(key) <= _SHARED_KEY_CHARS:
        if len(_SHARED_CACHE) >= _SHARED_CACHE_ENTRIES:
            _SHARED_CACHE.clear()
        _SHARED_CACHE[key] = (shared, most)
    return shared, most


def _native_trace(
    spans: list[Any],
    trace_id: Any,
    shared: dict[str, tuple[str, str]],
    most: int,
    batch: SpanBatch,
    native: _json_fast.NativeColumns,
) -> None:
    """One trace's spans through the compiled builder (``_json_fast.Slow`` when it declines).
    What the processes repeat on each span is counted at the most any of them could
    (``most``)."""
    try:
        done = batch.may_repeat(most * len(spans)) and native.add_jaeger(
            spans, trace_id, shared, _CONSUMED
        )
    except Exception:  # the Python decoder meets the same and words it
        done = False
    if not done:
        raise _json_fast.Slow


def _span(
    span: dict[str, Any],
    default_trace_id: Any,
    processes: dict[str, _Process],
    missing: set[str],
    batch: SpanBatch,
) -> None:
    process = _process_of(span, processes, missing)
    batch.repeat(len(process.service) + len(process.resource_json))
    try:
        tags = typed_tags(span.get("tags"))
    except FieldError as exc:
        raise exc.under("tags") from None
    start = micros_to_ns(span.get("startTime"), "startTime")
    parent, links = _references(span)
    status_code, status_message = _status(tags)
    batch.cols.append(
        trace_id=pad_trace_id(as_str(span.get("traceID", default_trace_id), "traceID")),
        span_id=norm_span_id(as_str(span.get("spanID"), "spanID")),
        parent_span_id=parent,
        name=as_str(span.get("operationName", ""), "operationName"),
        service=process.service,
        span_kind=_span_kind(tags.pop(_TAG_SPAN_KIND, None)),
        start_ns=start,
        end_ns=start + micros_to_ns(span.get("duration", 0), "duration"),
        status_code=status_code,
        status_message=status_message,
        scope_name=_pop_first(tags, _SCOPE_NAME_TAGS),
        scope_version=_pop_first(tags, _SCOPE_VERSION_TAGS),
        attributes=tags,
        resource_json=process.resource_json,
        events=_events(span),
        links=links,
    )


def _process_of(
    span: dict[str, Any], processes: dict[str, _Process], missing: set[str]
) -> _Process:
    inline = span.get("process")
    if type(inline) is dict:
        try:
            return _Process(inline)
        except FieldError as exc:
            raise exc.under("process") from None
    pid = span.get("processID")
    found = processes.get(pid) if type(pid) is str else None
    if found is None:
        missing.add(str(pid))
        found = _Process({})
        if type(pid) is str:
            processes[pid] = found
    return found


def typed_tags(tags: Any) -> dict[str, Any]:
    """Jaeger ``[{key, type, value}]`` as typed Python values."""
    out: dict[str, Any] = {}
    for j, tag in enumerate(list_field(tags)):
        try:
            out[as_str(tag.get("key"), "key")] = _tag_value(tag.get("type"), tag.get("value"))
        except (FieldError, AttributeError) as exc:
            raise item_error(exc, j, "{key, type, value}") from None
    return out


def _tag_value(kind: Any, value: Any) -> Any:
    if kind is None or kind == "string":
        return value
    if kind == "bool":
        if type(value) is str and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if type(value) is not bool:
            raise FieldError("value", f"not a bool: {value!r:.60}")
        return value
    if kind == "int64":
        return as_int(value, "value")
    if kind == "float64":
        return as_float(value, "value")
    if kind == "binary":
        return as_bytes(value, "value")
    raise FieldError("type", f"unknown tag type: {kind!r:.60}")


def _span_kind(value: Any) -> str:
    if value is None:
        return "internal"
    kind = str(value).lower()
    return kind if kind in SPAN_KINDS else "unspecified"


def _status(tags: dict[str, Any]) -> tuple[str, str | None]:
    code = tags.pop(_TAG_STATUS_CODE, None)
    message = tags.pop(_TAG_STATUS_DESCRIPTION, None)
    message = None if message is None else str(message)
    if code is not None:
        status = _STATUS.get(str(code).upper())
        if status is not None:
            return status, message
        tags[_TAG_STATUS_CODE] = code  # unknown spelling: keep it visible
    error = tags.get(_TAG_ERROR)
    if error is True or (type(error) is str and error.lower() == "true"):
        del tags[_TAG_ERROR]
        return "error", message
    return "unset", message


def _pop_first(tags: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    found = None
    for key in keys:
        value = tags.pop(key, None)
        if found is None and value is not None:
            found = str(value)
    return found


def _references(span: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]] | None]:
    """The parent (first CHILD_OF, else first FOLLOWS_FROM) and the other references as links."""
    refs = as_list(span, "references")
    parsed: list[tuple[str, str, str]] = []
    for r, ref in enumerate(refs):
        try:
            ref = as_dict(ref, "")
            parsed.append(
                (
                    str(ref.get("refType", "CHILD_OF")).upper(),
                    pad_trace_id(as_str(ref.get("traceID", span.get("traceID")), "traceID")),
                    norm_span_id(as_str(ref.get("spanID"), "spanID")),
                )
            )
        except FieldError as exc:
            raise exc.under(f"references[{r}]") from None
    parent_at = next((k for k, p in enumerate(parsed) if p[0] == "CHILD_OF"), None)
    if parent_at is None:
        parent_at = next((k for k, p in enumerate(parsed) if p[0] == "FOLLOWS_FROM"), None)
    parent = parsed[parent_at][2] if parent_at is not None else None
    if parent is None and span.get("parentSpanID"):
        parent = norm_span_id(as_str(span["parentSpanID"], "parentSpanID"))
    links = [
        {"trace_id": tid, "span_id": sid, "attributes": {REF_TYPE_ATTRIBUTE: kind.lower()}}
        for k, (kind, tid, sid) in enumerate(parsed)
        if k != parent_at
    ]
    return parent, links or None


def _slow_tag(tag: dict[str, Any]) -> tuple[str, bool, Any] | None:
    """A tag the compiled builder does not read itself, as ``typed_tags`` and ``SpanColumns``
    store it; None on a bad one."""
    try:
        return _json_fast.stored(_tag_value(tag.get("type"), tag.get("value")))
    except Exception:  # FieldError, or OverflowError of float(): the Python decoder words it
        return None


def _extras(span: dict[str, Any]) -> tuple[str | None, str | None, str | None] | None:
    """A span's events and links JSON and its parent, as ``_span`` and ``SpanColumns`` store
    them, for the compiled builder; None when bad."""
    try:
        parent, links = _references(span)
        events = _events(span)
    except Exception:  # FieldError or a structural surprise: the Python decoder words it
        return None
    return (json_value(events) if events else None, json_value(links) if links else None, parent)


def _events(span: dict[str, Any]) -> list[dict[str, Any]] | None:
    logs = as_list(span, "logs")
    if not logs:
        return None
    out = []
    for k, log in enumerate(logs):
        try:
            log = as_dict(log, "")
            try:
                fields = typed_tags(log.get("fields"))
            except FieldError as exc:
                raise exc.under("fields") from None
            name = fields.pop("event", "")
            out.append(
                {
                    "time_ns": micros_to_ns(log.get("timestamp"), "timestamp"),
                    "name": name if type(name) is str else json_value(name),
                    "attributes": fields,
                }
            )
        except FieldError as exc:
            raise exc.under(f"logs[{k}]") from None
    return out
