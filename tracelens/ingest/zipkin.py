"""Zipkin v2 JSON: an array of spans.

* ``timestamp``/``duration`` are microseconds.  A span without ``duration`` (Zipkin allows it for
  incomplete spans) ends where it starts, and the file gets a warning; a span without
  ``timestamp`` cannot be placed in time and is skipped with a warning.
* 64-bit (16 hex) trace ids are left-padded with zeros to 32 hex.
* ``kind`` CLIENT/SERVER/PRODUCER/CONSUMER; absent means a local span (``internal``).
* ``localEndpoint.serviceName`` is the service (and the resource's ``service.name``).  The local
  address/port become ``network.local.address``/``network.local.port``.
* ``remoteEndpoint``: ``serviceName`` becomes ``peer.service``; its address (ipv4, else ipv6) and
  port become ``client.address``/``client.port`` on a SERVER span (the remote side is the client)
  and ``server.address``/``server.port`` on every other span (the remote side is the server or
  broker), as the OpenTelemetry semantic conventions define them.  Ports are integers.
* ``tags`` become string attributes, but for the status (``span_status``): OpenTelemetry's
  ``otel.status_code`` (OK or ERROR; the message of an error in ``error``, else
  ``otel.status_description``), and without it an ``error`` tag, which makes the span an error,
  its value (when not empty) the message.  ``annotations`` become events named by their value.

**Shared span ids.**  Zipkin's B3 lets the server half of an RPC reuse the client's span id (the
server half is marked ``shared: true``).  tracelens needs one row per span id, and the two halves
are really parent (client) and child (server), so, when a trace holds both halves of an id: the
CLIENT half keeps the id; the SERVER half gets the derived id ``sha256(id + ":server")[:16]`` (hex;
deterministic, so re-importing the file dedups) and the client half as its parent; and spans whose
``parentId`` is the shared id attach to the SERVER half, since the server's work created them.  A
lone server half (its client not in the file) keeps its id.  When several server halves share one
client (a Kafka message received by several consumers), the n-th after the first gets
``sha256(id + ":server:n")[:16]``, and the shared id's children attach to the first.

Where it is built, the compiled builder (``_json_fast``, ``_json_zipkin.h``) reads each array,
shared ids included, calling back here for unusual tag values, annotations, resources and server
ids; an array it leaves aside is decoded by the Python code below.
"""

from __future__ import annotations

import functools
import hashlib
from collections import defaultdict
from typing import Any, Final

from tracelens_instrumentation import attributes as A

from tracelens.ingest import _json_fast
from tracelens.ingest._common import (
    DECODE_ERRORS,
    FieldError,
    SpanBatch,
    as_dict,
    as_str,
    located,
    micros_to_ns,
    norm_span_id,
    opt_str,
    pad_trace_id,
)
from tracelens.ingest.otlp_json import UNKNOWN_SERVICE
from tracelens.schema import json_value

# The attributes an endpoint becomes (OpenTelemetry semantic conventions): its service, and its
# address and port by which side of the call it is (see the module docstring).
PEER_SERVICE: Final = "peer.service"
SERVER_ENDPOINT: Final = ("server.address", "server.port")
CLIENT_ENDPOINT: Final = ("client.address", "client.port")
LOCAL_ENDPOINT: Final = ("network.local.address", "network.local.port")

_KINDS: Final = {
    "CLIENT": "client",
    "SERVER": "server",
    "PRODUCER": "producer",
    "CONSUMER": "consumer",
}
_ERROR_TAG: Final = "error"
# OpenTelemetry's Zipkin exporter writes the status as these tags (opentelemetry-specification,
# specification/trace/sdk_exporters/zipkin.md, "Status"): otel.status_code OK or ERROR, and for
# ERROR the description in ``error`` (empty when there is none); older exporters wrote it in
# otel.status_description.
OTEL_STATUS_CODE: Final = "otel.status_code"
OTEL_STATUS_DESCRIPTION: Final = "otel.status_description"
_OTEL_CODES: Final = {"OK": "ok", "ERROR": "error", "UNSET": "unset"}
# The names the compiled builder writes or leaves to ``span_status``, in its order.
_NAMES: Final = (
    _ERROR_TAG,
    PEER_SERVICE,
    *SERVER_ENDPOINT,
    *CLIENT_ENDPOINT,
    *LOCAL_ENDPOINT,
    OTEL_STATUS_CODE,
    OTEL_STATUS_DESCRIPTION,
)


def looks_like(doc: Any) -> bool:
    if type(doc) is not list:
        return False
    if not doc:
        return True  # an empty Zipkin response
    first = doc[0]
    return type(first) is dict and "traceId" in first and "id" in first


def server_span_id(span_id: str, n: int = 0) -> str:
    """The id of the ``n``-th (from 0) SERVER half that shares the client span id ``span_id``."""
    suffix = ":server" if n == 0 else f":server:{n}"
    return hashlib.sha256(f"{span_id}{suffix}".encode()).hexdigest()[:16]


class _Span:
    """One Zipkin span's ids, validated, before shared ids are resolved."""

    __slots__ = ("is_server_half", "kind", "parent", "raw", "span_id", "split", "trace_id")

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.trace_id = pad_trace_id(as_str(raw.get("traceId"), "traceId"))
        self.span_id = norm_span_id(as_str(raw.get("id"), "id"))
        parent = opt_str(raw.get("parentId"), "parentId")
        self.parent = norm_span_id(parent) if parent else None
        kind = raw.get("kind")
        self.kind = "internal" if kind is None else _KINDS.get(str(kind).upper(), "unspecified")
        self.is_server_half = raw.get("shared") is True or self.kind == "server"
        self.split = False  # set on a server half that was given its own id


def decode(doc: Any, batch: SpanBatch, warnings: list[str]) -> None:
    """Append the spans of one Zipkin v2 array to ``batch`` (shared ids resolved, see module)."""
    _json_fast.decode(
        batch, _native_columns, lambda native: _document(doc, batch, warnings, native)
    )


def _native_columns() -> _json_fast.NativeColumns:
    return _json_fast.NativeColumns(
        _KINDS, {}, _slow_value, _events_json, _resource_json, server_span_id
    )


def _document(
    doc: Any, batch: SpanBatch, warnings: list[str], native: _json_fast.NativeColumns | None
) -> None:
    if type(doc) is not list:
        raise FieldError("", "not a Zipkin v2 document (a JSON array of spans)")
    if native is not None:
        try:
            counts = native.add_zipkin(doc, UNKNOWN_SERVICE, _NAMES)
        except Exception:  # the Python decoder meets the same and words it
            counts = None
        if counts is None:
            raise _json_fast.Slow
        _warn(warnings, *counts)
        return
    spans: list[_Span] = []
    for i, raw in enumerate(doc):
        try:
            spans.append(_Span(as_dict(raw, "")))
        except FieldError as exc:
            raise exc.under(f"[{i}]") from None
    renamed, duplicates = _split_shared(spans)
    no_duration = no_timestamp = 0
    for i, span in enumerate(spans):
        if "timestamp" not in span.raw or span.raw["timestamp"] is None:
            no_timestamp += 1
            continue
        no_duration += span.raw.get("duration") is None
        try:
            _append(span, renamed, batch)
        except DECODE_ERRORS as exc:
            raise located(exc, f"[{i}]") from None
        batch.tick()
    _warn(warnings, no_duration, no_timestamp, duplicates)


def _warn(warnings: list[str], no_duration: int, no_timestamp: int, duplicates: int) -> None:
    if duplicates:
        warnings.append(
            f"{duplicates} Zipkin spans repeat a span id that is not a client/server pair; "
            "the store keeps the first of each"
        )
    if no_duration:
        warnings.append(f"{no_duration} Zipkin spans have no duration; each ends where it starts")
    if no_timestamp:
        warnings.append(f"{no_timestamp} Zipkin spans have no timestamp and were skipped")


def _split_shared(spans: list[_Span]) -> tuple[dict[tuple[str, str], str], int]:
    """Give server halves of shared ids their own id; returns (trace, shared id) -> server id,
    and how many spans repeat an id otherwise (the store keeps one of each)."""
    groups: dict[tuple[str, str], list[_Span]] = defaultdict(list)
    for span in spans:
        groups[(span.trace_id, span.span_id)].append(span)
    renamed: dict[tuple[str, str], str] = {}
    duplicates = 0
    for key, group in groups.items():
        if len(group) == 1:
            continue
        clients = [s for s in group if not s.is_server_half]
        servers = [s for s in group if s.is_server_half]
        if not clients or not servers:
            duplicates += len(group) - 1
            continue
        for n, server in enumerate(servers):
            server.span_id, server.parent, server.split = server_span_id(key[1], n), key[1], True
        renamed[key] = servers[0].span_id
        duplicates += len(clients) - 1
    return renamed, duplicates


def _append(span: _Span, renamed: dict[tuple[str, str], str], batch: SpanBatch) -> None:
    raw = span.raw
    local = as_dict(raw.get("localEndpoint") or {}, "localEndpoint")
    service = local.get("serviceName")
    service = service if type(service) is str and service else UNKNOWN_SERVICE
    tags = dict(as_dict(raw.get("tags") or {}, "tags"))
    status, message = span_status(tags)
    _endpoints(local, as_dict(raw.get("remoteEndpoint") or {}, "remoteEndpoint"), span.kind, tags)
    start = micros_to_ns(raw["timestamp"], "timestamp")
    duration = raw.get("duration")
    parent = span.parent
    if parent is not None and not span.split:
        parent = renamed.get((span.trace_id, parent), parent)
    batch.cols.append(
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=parent,
        name=as_str(raw.get("name", ""), "name"),
        service=service,
        span_kind=span.kind,
        start_ns=start,
        end_ns=start if duration is None else start + micros_to_ns(duration, "duration"),
        status_code=status,
        status_message=message,
        attributes=tags,
        resource_json=_resource_json(service),
        events=_events(raw),
    )


def span_status(tags: dict[str, Any]) -> tuple[str, str | None]:
    """A span's status code and message from its tags, the status tags taken out of them.

    ``otel.status_code`` (``OK``, ``ERROR`` or ``UNSET``, any case, also ``STATUS_CODE_ERROR``)
    decides where it is one of them; the message of an error is the ``error`` tag's value, else
    ``otel.status_description``.  Without it, an ``error`` tag makes the span an error (Zipkin
    treats any span with one as failed), its value (when not empty) the message.  An ``error``
    tag beside ``otel.status_code`` ``OK`` is kept as an attribute: nothing is dropped unread."""
    code = tags.get(OTEL_STATUS_CODE)
    otel = _OTEL_CODES.get(code.upper().removeprefix("STATUS_CODE_")) if type(code) is str else None
    if otel is None:
        if _ERROR_TAG not in tags:
            return "unset", None
        error = tags.pop(_ERROR_TAG)
        return "error", str(error) if error not in ("", None) else None
    del tags[OTEL_STATUS_CODE]
    description = tags.pop(OTEL_STATUS_DESCRIPTION, None)
    if otel != "error":
        return otel, None
    error = tags.pop(_ERROR_TAG, None)
    for text in (error, description):
        if text not in ("", None):
            return otel, str(text)
    return otel, None


def _endpoints(
    local: dict[str, Any], remote: dict[str, Any], kind: str, tags: dict[str, Any]
) -> None:
    _address(local, LOCAL_ENDPOINT, tags)
    if type(remote.get("serviceName")) is str and remote["serviceName"]:
        tags[PEER_SERVICE] = remote["serviceName"]
    _address(remote, CLIENT_ENDPOINT if kind == "server" else SERVER_ENDPOINT, tags)


def _address(endpoint: dict[str, Any], names: tuple[str, str], tags: dict[str, Any]) -> None:
    """The endpoint's address (ipv4, else ipv6) and port as the attributes ``names``."""
    address_key, port_key = names
    address = endpoint.get("ipv4") or endpoint.get("ipv6")
    if address:
        tags[address_key] = str(address)
    port = endpoint.get("port")
    if port:
        tags[port_key] = port if type(port) is int else str(port)


def _slow_value(value: Any) -> tuple[str, bool, Any]:
    """A tag value other than str, int, float or bool, as ``SpanColumns`` stores it."""
    return _json_fast.stored(value)


def _events_json(raw: dict[str, Any]) -> str | None:
    """A span's annotations as the events JSON ``SpanColumns`` stores; None when bad."""
    try:
        events = _events(raw)
    except Exception:  # FieldError or a structural surprise: the Python decoder words it
        return None
    return json_value(events) if events else None


def _events(raw: dict[str, Any]) -> list[dict[str, Any]] | None:
    annotations = raw.get("annotations")
    if not annotations:
        return None
    if type(annotations) is not list:
        raise FieldError("annotations", "not a list")
    out = []
    for k, ann in enumerate(annotations):
        try:
            ann = as_dict(ann, "")
            out.append(
                {
                    "time_ns": micros_to_ns(ann.get("timestamp"), "timestamp"),
                    "name": as_str(ann.get("value", ""), "value"),
                    "attributes": {},
                }
            )
        except FieldError as exc:
            raise exc.under(f"annotations[{k}]") from None
    return out


@functools.lru_cache(maxsize=1024)
def _resource_json(service: str) -> str:
    return json_value({A.SERVICE_NAME: service})
