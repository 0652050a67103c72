"""OTLP protobuf (``ExportTraceServiceRequest`` / ``TracesData``) to the span table, fast.

Used for binary OTLP files and by the collector, where it is the hot path: a request of 512 spans
with 8 attributes each must become Arrow columns at several hundred thousand spans a second.
Reading each attribute through the generated classes (a ``KeyValue`` and an ``AnyValue`` object
per attribute) tops out near 100k spans/s, so the request is parsed with lazy message classes
(``_lazy``), span fields are read one list comprehension per column (``_spans``) and attributes are
parsed for the whole request at once with NumPy (``_keyvalues``).  The table equals what the OTLP
JSON importer produces for the same content; ``tests/test_otlp_proto.py`` checks that against the
JSON importer and against a plain reference decoder.

A compiled decoder (``_native.c``, wrapped by ``_fastpath``) does the same several times faster
where it is built; it hands every request it is not sure of to the Python path, so the result never
depends on which path ran.  ``USE_NATIVE`` (default: built and ``TRACELENS_NO_NATIVE`` unset) picks
the path; ``tests/test_otlp_native.py`` checks that both give the same answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError

from tracelens.errors import InputError
from tracelens.ingest.otlp_proto import _fastpath, _keyvalues
from tracelens.ingest.otlp_proto._lazy import LazyRequest
from tracelens.ingest.otlp_proto._small import small_table
from tracelens.ingest.otlp_proto._spans import Problems, repeated_limit, span_fields
from tracelens.schema import (
    COLUMNS,
    PROMOTED_ATTRIBUTES,
    PROMOTED_CONVERT,
    SPAN_SCHEMA,
    empty_spans,
)

__all__ = ["CheckedSpans", "check_spans", "decode_export_request", "decode_export_request_checked"]

_STR_LIST: Final = pa.list_(pa.string())
SMALL_REQUEST: Final = 24  # spans; up to this many, a plain loop beats the vectorised path
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
"""Decode with the compiled decoder where it is built (tests switch it per call instead)."""


@dataclass
class CheckedSpans:
    """The valid spans of a request, and how many were rejected (with the first reason)."""

    spans: pa.Table
    rejected: int
    message: str | None = None


def decode_export_request(data: bytes, source: str = "<request>") -> pa.Table:
    """Every span of an encoded ``ExportTraceServiceRequest`` (or ``TracesData``: same wire
    format); malformed bytes or a span the JSON importer would refuse raise ``InputError``."""
    table, problems = _decode(data, source)
    if problems.first is not None:
        raise InputError(source, problems.first)
    return table


def decode_export_request_checked(data: bytes, source: str = "<request>") -> CheckedSpans:
    """For the collector: malformed bytes still raise ``InputError`` (the request is refused), but
    spans with invalid ids or times are dropped one by one and counted (OTLP partial success)."""
    table, problems, checks = _decode_full(data, source)
    if checks is not None:
        return _checked_by_flags(table, problems, checks)
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


def _decode(
    data: bytes, source: str, small: int = SMALL_REQUEST, native: bool | None = None
) -> tuple[pa.Table, Any]:
    """The table and its invalid spans; ``native`` overrides ``USE_NATIVE``."""
    table, problems, _ = _decode_full(data, source, small, native)
    return table, problems


def _decode_full(
    data: bytes, source: str, small: int = SMALL_REQUEST, native: bool | None = None
) -> tuple[pa.Table, Any, np.ndarray | None]:
    """As ``_decode``, plus the compiled decoder's ``check_spans`` flags where it ran."""
    if USE_NATIVE if native is None else native:
        try:
            decoded = _fastpath.decode(data, small)
            if isinstance(decoded, int):
                return (*small_table(data), None)  # in the try: it checks sizes too
        except _DECODE_ERRORS as exc:
            raise InputError(source, f"not a valid OTLP protobuf trace request: {exc}") from None
        if decoded is not None:
            return decoded.table, decoded.problems, decoded.checks
    table, problems = _decode_python(data, source, small)
    return table, problems, None


def _decode_python(data: bytes, source: str, small: int) -> tuple[pa.Table, Any]:
    try:
        request = LazyRequest.FromString(data)
        if _span_count(request, small) <= small:
            return small_table(data)
        fields = span_fields(request, repeated_limit(len(data)))
        kv = _keyvalues.parse(fields.flat_attributes)
    except _DECODE_ERRORS as exc:
        raise InputError(source, f"not a valid OTLP protobuf trace request: {exc}") from None
    n = len(fields.counts)
    if n == 0:
        return empty_spans(), fields.problems
    span_of = np.repeat(np.arange(n, dtype=np.int64), fields.counts)
    kv, span_of = _keyvalues.dedupe(kv, span_of)
    cols = fields.columns
    promoted = _promoted(kv, n, span_of)
    cols.update(promoted.columns)
    keep = ~promoted.mask
    cols["attributes"] = _map(kv.keys, kv.values, span_of, keep, n)
    cols["json_attributes"] = _key_lists(kv.keys, span_of, keep & kv.is_json, n)
    table = pa.table([cols[name] for name in COLUMNS], schema=SPAN_SCHEMA)
    return table, fields.problems


def _span_count(request: Any, limit: int) -> int:
    """Spans in ``request``, counting no further than past ``limit``."""
    n = 0
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            n += len(ss.spans)
            if n > limit:
                return n
    return n


def _counts_offsets(span_of: np.ndarray, mask: np.ndarray, n: int) -> tuple[np.ndarray, pa.Array]:
    counts = np.bincount(span_of[mask], minlength=n)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return counts, pa.array(offsets)


def _map(
    keys: pa.Array, values: pa.Array, span_of: np.ndarray, keep: np.ndarray, n: int
) -> pa.Array:
    _, offsets = _counts_offsets(span_of, keep, n)
    if keep.all():
        return pa.MapArray.from_arrays(offsets, keys, values)
    where = pa.array(keep)
    return pa.MapArray.from_arrays(offsets, keys.filter(where), values.filter(where))


def _key_lists(keys: pa.Array, span_of: np.ndarray, mask: np.ndarray, n: int) -> pa.Array:
    counts, offsets = _counts_offsets(span_of, mask, n)
    return pa.ListArray.from_arrays(
        offsets, keys.filter(pa.array(mask)), type=_STR_LIST, mask=pa.array(counts == 0)
    )


@dataclass
class _Promoted:
    columns: dict[str, pa.Array]
    mask: np.ndarray  # attributes that went to a column of their own


def _promoted(kv: _keyvalues.KeyValues, n: int, span_of: np.ndarray) -> _Promoted:
    mask = np.zeros(len(span_of), np.bool_)
    columns: dict[str, pa.Array] = {}
    codes = {name: j for j, name in enumerate(kv.key_names) if name in PROMOTED_ATTRIBUTES}
    for key, column in PROMOTED_ATTRIBUTES.items():
        field_type = SPAN_SCHEMA.field(column).type
        if key not in codes:
            columns[column] = pa.nulls(n, field_type)
            continue
        hit = kv.key_codes == codes[key]
        mask |= hit
        idx = np.flatnonzero(hit)
        columns[column] = _promoted_column(kv, idx, span_of, n, column, field_type)
    return _Promoted(columns, mask)


def _promoted_column(
    kv: _keyvalues.KeyValues,
    idx: np.ndarray,
    span_of: np.ndarray,
    n: int,
    column: str,
    field_type: pa.DataType,
) -> pa.Array:
    if not len(idx):
        return pa.nulls(n, field_type)
    cls = kv.cls[idx]
    if column in ("kind", "args_hash", "result_hash") and np.all(
        (cls == _keyvalues.STRING) | (cls == _keyvalues.INT)
    ):
        return _scatter(kv.values, idx, span_of, n)  # str(int) is the int's JSON text
    if column == "cpu_ns" and np.all(cls == _keyvalues.INT):
        out = np.zeros(n, np.int64)
        out[span_of[idx]] = kv.ints[idx]
        present = np.zeros(n, np.bool_)
        present[span_of[idx]] = True
        return pa.array(out, pa.int64(), mask=~present)
    values: list[Any] = [None] * n
    convert = PROMOTED_CONVERT[column]
    for i in idx.tolist():
        values[int(span_of[i])] = convert(kv.typed(i))
    return pa.array(values, field_type)


def _scatter(values: pa.Array, idx: np.ndarray, span_of: np.ndarray, n: int) -> pa.Array:
    pick = np.full(n, -1, np.int64)
    pick[span_of[idx]] = idx
    return values.take(pa.array(pick, mask=pick < 0))
