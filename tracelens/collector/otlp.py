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
