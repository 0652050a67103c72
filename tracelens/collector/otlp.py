"""OTLP request bodies in, span tables and OTLP answers out; shared by both transports.

Protobuf goes through the fast decoder, JSON through the JSON importer; both then drop invalid spans
one by one (``check_spans``), which the answer reports as ``partial_success.rejected_spans``.
Errors are ``google.rpc.Status`` messages, encoded like the request (protobuf or JSON), as the OTLP
specification asks.
"""

from __future__ import annotations

import json
import zlib
from typing import Final

import pyarrow as pa
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tracelens.errors import InputError
from tracelens.ingest import inflate
from tracelens.ingest.otlp_proto import CheckedSpans, check_spans, decode_export_request_checked

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
_MEDIA: Final = {PROTOBUF: PROTOBUF, "application/protobuf": PROTOBUF, JSON: JSON}
# What one span and one span attribute cost while a protobuf body is decoded (peak RSS over the
# table and the decoder's buffers): measured 206 bytes a span on 2M empty spans and 302 on 500k
# minimal valid ones; an attribute is a map entry (key and value offsets, the value struct).
# Memory follows the number of spans and attributes, not the body's bytes: a 2-byte span costs
# 100x its size.
SPAN_COST: Final = 320
ATTRIBUTE_COST: Final = 64
_SPAN_TAG: Final = b"\x12"  # ScopeSpans.spans (and Span.span_id: an upper bound either way)
_ATTRIBUTE_TAG: Final = b"\x4a"  # Span.attributes


class BodyTooLarge(Exception):
    """The body (or what it decompresses to) is over the limit."""


class UnsupportedMedia(Exception):
    """A content type or encoding the collector does not take."""


def media_type(content_type: str | None) -> str:
    """The request's encoding: ``PROTOBUF`` or ``JSON``; anything else is ``UnsupportedMedia``."""
    media = (content_type or "").split(";")[0].strip().lower()
    found = _MEDIA.get(media)
    if found is None:
        raise UnsupportedMedia(
            f"unsupported content type {media or '(none)'!r}: send {PROTOBUF} or {JSON}"
        )
    return found


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """Undo ``Content-Encoding`` (gzip, deflate, identity), never producing more than ``limit``
    bytes: a gzip bomb is refused after ``limit`` bytes of output, not after all of them.

    Several gzip members (or zlib streams) one after another are one body (RFC 1952), inflated
    in time linear in the body whatever its layout (``tracelens.ingest.inflate``).
    """
    name = (encoding or "identity").strip().lower()
    if name in ("", "identity"):
        return body
    if name in ("gzip", "x-gzip"):
        wbits = inflate.GZIP
    elif name == "deflate":
        wbits = inflate.ZLIB
    else:
        raise UnsupportedMedia(f"unsupported content encoding {name!r}: send gzip, deflate or none")
    try:
        return inflate.inflate(body, wbits, limit)
    except zlib.error as exc:
        raise InputError("<request>", f"bad {name} body: {exc}") from None
    except inflate.Truncated:
        raise InputError("<request>", f"truncated {name} body") from None
    except inflate.TooLarge:
        raise BodyTooLarge(f"body decompresses to more than {limit} bytes") from None


def check_decode_cost(body: bytes, allowance: int) -> None:
    """``BodyTooLarge`` when decoding the protobuf ``body`` would take more than ``allowance``
    bytes: its spans and span attributes at ``SPAN_COST`` / ``ATTRIBUTE_COST`` each.

    A body too short to reach the allowance whatever it holds is not looked at: a span and a
    span attribute each take at least two bytes of it (a tag and a length), so it holds at most
    ``len(body) // 2`` of them together (at ``SPAN_COST``, the dearer, each).  That covers
    ordinary bodies (up to ~860 KiB under the default budget); counting their tag bytes cost
    a sixth of a decoding thread's time.  Longer bodies have the counts bounded from above at
    C speed (every span is preceded by a 0x12 tag byte, every span attribute by 0x4a).  Only
    when that bound is over the allowance are they counted exactly, walking the request down to
    each span
    (and into spans for their attributes when the attribute bound is over), and the walk stops
    as soon as the count is over: a hostile body costs at most ``allowance / ATTRIBUTE_COST``
    steps.  Malformed bytes end the count; the decoder then refuses them.
    """
    if len(body) // 2 * SPAN_COST <= allowance:
        return
    spans = body.count(_SPAN_TAG)
    attributes = body.count(_ATTRIBUTE_TAG)
    if spans * SPAN_COST + attributes * ATTRIBUTE_COST <= allowance:
        return
    spans, attributes = _count(body, allowance, walk_spans=attributes * ATTRIBUTE_COST > allowance)
    cost = spans * SPAN_COST + attributes * ATTRIBUTE_COST
    if cost > allowance:
        raise BodyTooLarge(
            f"this body holds over {spans} spans and {attributes} span attributes: decoding it "
            f"would take over {cost >> 20} MiB, more than the {allowance >> 20} MiB --memory-mb "
            "allows one body; send smaller batches (or raise --memory-mb)"
        )


def _count(body: bytes, allowance: int, walk_spans: bool) -> tuple[int, int]:
    """Spans and span attributes of an ExportTraceServiceRequest, counted until their cost is
    over ``allowance``; attributes only when ``walk_spans`` (else the 0x4a bound)."""
    spans = 0
    attributes = 0 if walk_spans else body.count(_ATTRIBUTE_TAG)
    view = memoryview(body)
    # (start, end, depth): 0 the request, 1 ResourceSpans, 2 ScopeSpans, 3 a Span.  Fixed depth,
    # no recursion: each level is one loop over its fields.
    stack = [(0, len(body), 0)]
    try:
        while stack:
            pos, end, depth = stack.pop()
            while pos < end:
                key, pos = _varint(view, pos)
                wire = key & 7
                if wire == 0:
                    _, pos = _varint(view, pos)
                    continue
                if wire == 1:
                    pos += 8
                    continue
                if wire == 5:
                    pos += 4
                    continue
                if wire != 2:
                    return spans, attributes
                size, pos = _varint(view, pos)
                field = key >> 3
                if (depth == 0 and field == 1) or (depth == 1 and field == 2):
                    stack.append((pos, min(pos + size, end), depth + 1))
                elif depth == 2 and field == 2:
                    spans += 1
                    if walk_spans:
                        stack.append((pos, min(pos + size, end), 3))
                elif depth == 3 and field == 9:
                    attributes += 1
                pos += size
                if spans * SPAN_COST + attributes * ATTRIBUTE_COST > allowance:
                    return spans, attributes
    except IndexError:
        pass
    return spans, attributes


def _varint(view: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80 or shift > 63:
            return value, pos
        shift += 7


def decode(body: bytes, media: str) -> CheckedSpans:
    """The valid spans of a request body; ``InputError`` when the body itself is malformed."""
    if media == PROTOBUF:
        return decode_export_request_checked(body)
    from tracelens.ingest import read_bytes

    if not body.strip():
        raise InputError("<request>", "empty JSON body")
    table = read_bytes(body, "<request>", "otlp-json")
    return check_spans(table)


def decode_record(kind: int, body: bytes) -> pa.Table:
    """The spans of a journal record (a request body accepted earlier)."""
    from tracelens.collector import journal

    return decode(body, PROTOBUF if kind == journal.PROTOBUF else JSON).spans


def success_body(checked: CheckedSpans, media: str) -> bytes:
    if media == PROTOBUF:
        response = ExportTraceServiceResponse()
        if checked.rejected:
            response.partial_success.rejected_spans = checked.rejected
            response.partial_success.error_message = checked.message or ""
        return response.SerializeToString()
    if not checked.rejected:
        return b"{}"
    partial = {"rejectedSpans": str(checked.rejected), "errorMessage": checked.message or ""}
    return json.dumps({"partialSuccess": partial}).encode()


def status_body(code: int, message: str, media: str) -> bytes:
    """A ``google.rpc.Status`` (``code`` from google.rpc.Code), in the request's encoding."""
    if media == JSON:
        return json.dumps({"code": code, "message": message}).encode()
    return status_pb2.Status(code=code, message=message).SerializeToString()


INVALID_ARGUMENT: Final = code_pb2.INVALID_ARGUMENT
UNAVAILABLE: Final = code_pb2.UNAVAILABLE
UNAUTHENTICATED: Final = code_pb2.UNAUTHENTICATED
NOT_FOUND: Final = code_pb2.NOT_FOUND
UNIMPLEMENTED: Final = code_pb2.UNIMPLEMENTED
DEADLINE_EXCEEDED: Final = code_pb2.DEADLINE_EXCEEDED  # 408: a client too slow to send
RESOURCE_EXHAUSTED: Final = code_pb2.RESOURCE_EXHAUSTED
INTERNAL: Final = code_pb2.INTERNAL
