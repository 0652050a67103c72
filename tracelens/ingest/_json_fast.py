"""The compiled JSON column builder (``_json_native.c``: OTLP/JSON, Jaeger, Zipkin) turned into
span tables.

orjson parses each document; the C builder walks its spans and fills column buffers, which become
Arrow arrays here without a Python object per span or attribute.  It accepts only spans whose
every part it understands and answers False for anything else; ``decode`` then rolls the builder
back to the start of the document and the format's Python decoder decodes that document, so the
result (errors included) never depends on which path ran.  What the Python decoder reads anyway
is read through callbacks by the very same functions (each format's module says which: attribute
values of unusual types, events and links, ...), and promoted ``tracelens.*`` values that need a
conversion by ``schema.PROMOTED_CONVERT``.

``tracelens_instrumentation._native.load`` (the one switch, ``TRACELENS_NO_NATIVE``) decides
whether the compiled path is used, as does a failed import
(no compiler at install time); everything then works as before, only slower.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import numpy as np
import pyarrow as pa
from tracelens_instrumentation import _native as native_switch

from tracelens.ingest._common import SpanBatch
from tracelens.ingest._native_columns import PROMOTED_KEYS, convert_promoted, int64_columns
from tracelens.schema import COLUMNS, SPAN_KINDS, SPAN_SCHEMA, STATUS_CODES, json_scalar

# Installed without a C compiler, or TRACELENS_NO_NATIVE: the Python decoder does everything.
_native: Any = native_switch.load("tracelens.ingest._json_native")
AVAILABLE: Final = _native is not None
"""Whether the compiled builder is built and not switched off."""

USE_NATIVE: bool = AVAILABLE
"""Decode with the compiled builder where it is built (tests switch it to compare the paths)."""

# The span table's string columns: the C code builds each of them (with a validity byte a row).
_STRINGS: Final = tuple(f.name for f in SPAN_SCHEMA if f.type == pa.string())


class Slow(Exception):
    """The compiled builder leaves this document to the Python decoder."""


class NativeColumns:
    """Span columns built by the C code: ``add`` takes the spans of one OTLP ScopeSpans entry,
    ``add_jaeger`` one Jaeger trace's, ``add_zipkin`` one Zipkin array, ``add_otlp_bytes`` one
    OTLP document's bytes and ``add_jaeger_bytes`` one Jaeger API response's, never parsed into
    objects (the C docstrings say more).  The
    callbacks are the format's Python decoder's own functions."""

    def __init__(
        self,
        kind_names: dict[str, str],
        status_names: dict[str, str],
        slow_value: Callable[[Any], tuple[str, bool, Any] | None],
        extras: Callable[[dict[str, Any]], Any],
        resource: Callable[[str], str] | None = None,
        server_id: Callable[[str, int], str] | None = None,
    ) -> None:
        self._builder = _native.Builder(
            PROMOTED_KEYS,
            SPAN_KINDS,
            STATUS_CODES,
            kind_names,
            status_names,
            slow_value,
            extras,
            resource,
            server_id,
        )
        self.add: Callable[[list[Any], str, str | None, str | None, str | None], bool] = (
            self._builder.add
        )
        self.add_jaeger: Callable[
            [list[Any], Any, dict[str, tuple[str, str]], tuple[str, ...]], bool
        ] = self._builder.add_jaeger
        self.add_zipkin: Callable[
            [list[Any], str, tuple[str, ...]], tuple[int, int, int] | None
        ] = self._builder.add_zipkin
        self.add_otlp_bytes: Callable[
            [bytes, Callable[[bytes], Any], Callable[[bytes], Any]], list[int] | None
        ] = self._builder.add_otlp_bytes
        self.add_jaeger_bytes: Callable[
            [bytes, Callable[[bytes], Any], tuple[str, ...]], list[int] | None
        ] = self._builder.add_jaeger_bytes
        self.mark: Callable[[], None] = self._builder.mark
        self.rollback: Callable[[], None] = self._builder.rollback

    def __len__(self) -> int:
        return len(self._builder)

    def to_arrow(self) -> pa.Table:
        """The spans added so far as a span table; the builder starts empty again."""
        n, cols, promoted = self._builder.take()
        return _table(n, cols, promoted)


def decode(
    batch: SpanBatch,
    make: Callable[[], NativeColumns],
    document: Callable[[NativeColumns | None], None],
) -> None:
    """``document(builder)`` where the compiled builder is used, and, when it raises ``Slow``,
    the builder and ``batch`` rolled back and ``document(None)``: the Python decoder, which alone
    words errors, decodes the document from its start."""
    if USE_NATIVE:
        native = batch.native(make)
        state = batch.state()
        native.mark()
        try:
            document(native)
        except Slow:
            native.rollback()
            batch.restore(state)
        else:
            batch.tick()
            return
    document(None)


def decode_direct(
    batch: SpanBatch,
    make: Callable[[], NativeColumns],
    add: Callable[[NativeColumns], list[int] | None],
) -> bool:
    """A document read straight from its bytes by ``add(builder)`` (``add_otlp_bytes``,
    ``add_jaeger_bytes``), which answers what each part's shared values repeat (for
    ``SpanBatch.may_repeat``) or None for the parsed way.  False, with the builder and ``batch``
    rolled back, where it declines or raises (the parsed way meets the same and words it)."""
    if not USE_NATIVE:
        return False
    native = batch.native(make)
    state = batch.state()
    native.mark()
    try:
        repeats = add(native)
    except Exception:
        repeats = None
    if repeats is None or not all(batch.may_repeat(r) for r in repeats):
        native.rollback()
        batch.restore(state)
        return False
    batch.tick()
    return True


def stored(typed: Any) -> tuple[str, bool, Any]:
    """What a slow_value callback answers for a typed attribute value: the map's text, whether it
    is JSON, and the value (as ``SpanColumns`` stores it)."""
    if type(typed) is str:
        return typed, False, typed
    return json_scalar(typed), True, typed


def _bitmap(valid: bytes) -> pa.Buffer | None:
    flags = np.frombuffer(valid, np.uint8)
    if flags.all():
        return None
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def _strings(n: int, parts: tuple[bytes, bytes, bytes]) -> pa.Array:
    offsets, data, valid = parts
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data), _bitmap(valid))


def _offsets(lengths: bytes) -> tuple[np.ndarray, pa.Array]:
    counts = np.frombuffer(lengths, np.int32)
    offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return counts, pa.Array.from_buffers(pa.int32(), len(offsets), [None, pa.py_buffer(offsets)])


def _bools(flags: np.ndarray) -> pa.Array:
    packed = np.packbits(flags, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(flags), [None, pa.py_buffer(packed)])


def _table(n: int, cols: dict[str, Any], promoted: list[tuple[int, int, Any]]) -> pa.Table:
    arrays = int64_columns(n, cols, _bitmap(cols["cpu_ns.valid"]))
    arrays.update((name, _strings(n, cols[name])) for name in _STRINGS)
    _, map_offsets = _offsets(cols["map_lengths"])
    m = len(cols["keys"][2])
    arrays["attributes"] = pa.MapArray.from_arrays(
        map_offsets, _strings(m, cols["keys"]), _strings(m, cols["values"])
    )
    json_counts, json_offsets = _offsets(cols["json_lengths"])
    j = len(cols["json_keys"][2])
    arrays["json_attributes"] = pa.ListArray.from_arrays(
        json_offsets,
        _strings(j, cols["json_keys"]),
        mask=_bools(json_counts == 0),
    )
    if promoted:
        convert_promoted(arrays, promoted)
    return pa.table([arrays[name] for name in COLUMNS], schema=SPAN_SCHEMA)
