"""OTLP protobuf (``ExportTraceServiceRequest`` / ``TracesData``) to the span table.

Used for binary OTLP files and by the collector, where it is the hot path: a request of 512 spans
with 8 attributes each must become Arrow columns at several hundred thousand spans a second.
Two decoders, one table:

- the compiled one (``_native.c``, wrapped by ``_fastpath``) walks the wire format once into
  column buffers, over 1M spans/s; it accepts only requests in a shape it fully understands
  (``docs/otlp-proto.md``) and hands every other one, malformed bytes included, to
- the generated-class one (``_classes``): the protobuf library's ``ExportTraceServiceRequest``
  walked span by span, about 65k spans/s; the fallback where the compiled one is not built or
  ``TRACELENS_NO_NATIVE=1`` is set, and the oracle the compiled one is tested against
  (``tests/test_otlp_native.py``).

The table equals what the OTLP JSON importer produces for the same content
(``tests/test_otlp_proto.py`` checks that against the JSON importer reading proto3's own JSON
mapping of the request).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError

from tracelens.errors import InputError
from tracelens.ingest.otlp_proto import _classes, _fastpath
from tracelens.ingest.otlp_proto._parts import Decoded, Problems

__all__ = [
    "CheckedSpans",
    "check_spans",
    "decode_bytes",
    "decode_export_request",
    "decode_export_request_checked",
]

_ZERO_TRACE: Final = pa.scalar("0" * 32, pa.string())
_ZERO_SPAN: Final = pa.scalar("0" * 16, pa.string())
_ZERO: Final = pa.scalar(0, pa.int64())
_CHECK_REASONS: Final = (
    "trace id is not 16 bytes (32 hex digits) or is all zeros",
    "span id is not 8 bytes (16 hex digits) or is all zeros",
    "parent span id is not 8 bytes",
    "start or end time is zero",
    "end time before start time",
)
_DECODE_ERRORS: Final = (DecodeError, pa.ArrowInvalid, UnicodeDecodeError, ValueError, RuntimeError)

USE_NATIVE: bool = _fastpath.AVAILABLE
"""Decode with the compiled decoder where it is built and allowed (tests switch it per call)."""


@dataclass
class CheckedSpans:
    """The valid spans of a request, and how many were rejected (with the first reason)."""

    spans: pa.Table
    rejected: int
    message: str | None = None


def decode_export_request(data: bytes, source: str = "<request>") -> pa.Table:
    """Every span of an encoded ``ExportTraceServiceRequest`` (or ``TracesData``: same wire
    format); malformed bytes or a span the JSON importer would refuse raise ``InputError``."""
    decoded = _decode(data, source)
    if decoded.problems.first is not None:
        raise InputError(source, decoded.problems.first)
    return decoded.table


def decode_export_request_checked(data: bytes, source: str = "<request>") -> CheckedSpans:
    """For the collector: malformed bytes still raise ``InputError`` (the request is refused), but
    spans with invalid ids or times are dropped one by one and counted (OTLP partial success)."""
    decoded = _decode(data, source)
    table, problems = decoded.table, decoded.problems
    if decoded.checks is not None:
        return _checked_by_flags(table, problems, decoded.checks)
    rejected = int(problems.mask.sum())
    message = problems.first
    if rejected:
        table = table.filter(pa.array(~problems.mask))
    checked = check_spans(table)
    if checked.rejected:
        rejected += checked.rejected
        message = message or checked.message
    return CheckedSpans(checked.spans, rejected, message)


def check_spans(table: pa.Table) -> CheckedSpans:
    """Drop spans a trace analysis cannot place: ids that are not 16/8 bytes of lower-case hex or
    all zeros, a parent id that is not 8 bytes, a zero start or end time, or an end before the
    start.  Works on any span table, so the collector applies it to JSON requests too."""
    if table.num_rows == 0:
        return CheckedSpans(table, 0)
    tid, sid, parent = table["trace_id"], table["span_id"], table["parent_span_id"]
    start, end = table["start_ns"], table["end_ns"]
    masks = [
        pc.and_(pc.match_substring_regex(tid, "^[0-9a-f]{32}$"), pc.not_equal(tid, _ZERO_TRACE)),
        pc.and_(pc.match_substring_regex(sid, "^[0-9a-f]{16}$"), pc.not_equal(sid, _ZERO_SPAN)),
        pc.or_kleene(pc.is_null(parent), pc.match_substring_regex(parent, "^[0-9a-f]{16}$")),
        pc.and_(pc.greater(start, _ZERO), pc.greater(end, _ZERO)),
        pc.greater_equal(end, start),
    ]
    checks = list(zip(masks, _CHECK_REASONS, strict=True))
    good = checks[0][0]
    for mask, _ in checks[1:]:
        good = pc.and_(good, mask)
    good = pc.fill_null(good, False)
    rejected = table.num_rows - int(pc.sum(good).as_py() or 0)
    if not rejected:
        return CheckedSpans(table, 0)
    message = None
    for mask, why in checks:
        bad = pc.index(pc.fill_null(mask, False), False).as_py()
        if bad >= 0:
            message = f"span {table['span_id'][bad].as_py()!r}: {why}"
            break
    return CheckedSpans(table.filter(good), rejected, message)


def _checked_by_flags(table: pa.Table, problems: Problems, checks: np.ndarray) -> CheckedSpans:
    """``decode_export_request_checked``'s answer from the compiled decoder's check flags: the
    same spans, count and message as ``check_spans`` on the table without the invalid spans."""
    bad = problems.mask | (checks != 0)
    rejected = int(bad.sum())
    if not rejected:
        return CheckedSpans(table, 0)
    message = problems.first
    if message is None:
        for bit, why in enumerate(_CHECK_REASONS):
            rows = np.flatnonzero((checks & (1 << bit)) != 0)
            if len(rows):
                message = f"span {table['span_id'][int(rows[0])].as_py()!r}: {why}"
                break
    return CheckedSpans(table.filter(pa.array(~bad)), rejected, message)


def _decode(data: bytes, source: str, native: bool | None = None) -> Decoded:
    """The table and its invalid spans; ``native`` overrides ``USE_NATIVE``."""
    try:
        if USE_NATIVE if native is None else native:
            decoded = _fastpath.decode(data)
            if decoded is not None:
                return decoded
        return _classes.decode(data)
    except _DECODE_ERRORS as exc:
        raise InputError(source, f"not a valid OTLP protobuf trace request: {exc}") from None


decode_bytes = decode_export_request  # the binary formats' decoder (tracelens/formats.py)
