"""Encoded ``KeyValue`` attributes of many spans parsed at once with NumPy.

A span's attributes arrive (from ``_lazy``) as the bytes of each ``KeyValue``:
``0x0a len key 0x12 len AnyValue``, with the AnyValue one of ``0x0a len string``, ``0x10 varint``
(bool), ``0x18 varint`` (int), ``0x21 8 bytes`` (double).  Every attribute of a request is checked
against that layout in a handful of array operations; keys and string values are then cut out of
the request's bytes by Arrow ``take`` without a Python object per attribute.  Anything else (arrays,
kvlists, bytes, a field order other than canonical, an empty value) goes through the exact slow path
in ``_anyvalue``, one attribute at a time, so the result never depends on which path was taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from tracelens.ingest.otlp_proto._anyvalue import any_value, json_text

_PAD: Final = 16  # zero bytes after the data so a 10-byte varint read never runs off the end
_TAG_KEY: Final = 0x0A
_TAG_VALUE: Final = 0x12
_TAG_STRING: Final = 0x0A
_TAG_BOOL: Final = 0x10
_TAG_INT: Final = 0x18
_TAG_DOUBLE: Final = 0x21

# Per-attribute value classes.
STRING: Final = 0
INT: Final = 1
BOOL: Final = 2
DOUBLE: Final = 3
SLOW: Final = 4


@dataclass
class KeyValues:
    """Every attribute of a request, in order; ``span`` says which span each belongs to."""

    keys: pa.StringArray
    values: pa.StringArray  # string values as they are, every other value as JSON text
    is_json: np.ndarray  # bool per attribute
    cls: np.ndarray  # STRING / INT / BOOL / DOUBLE / SLOW per attribute
    ints: np.ndarray  # int64 value where cls == INT
    slow: dict[int, Any]  # typed value of each SLOW attribute
    key_codes: np.ndarray  # index of each attribute's key in ``key_names``
    key_names: list[str]  # the distinct keys

    def typed(self, i: int) -> Any:
        """Attribute ``i``'s value as the Python value the JSON importer would hold."""
        c = self.cls[i]
        if c == SLOW:
            return self.slow[i]
        if c == INT:
            return int(self.ints[i])
        if c == STRING:
            return self.values[i].as_py()
        if c == BOOL:
            return self.values[i].as_py() == "true"
        return float(self.values[i].as_py())


def _varint(
    buf: np.ndarray, pos: np.ndarray, active: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Varints at ``pos``: (values, positions after them, well-formed).  Lanes not ``active``
    are not read (their results are meaningless but harmless)."""
    value = np.zeros(len(pos), np.uint64)
    more = np.ones(len(pos), np.bool_) if active is None else active.copy()
    length = np.zeros(len(pos), np.int64)
    for k in range(10):
        if not more.any():
            break
        byte = buf[pos + k]
        part = (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        value |= np.where(more, part, np.uint64(0))
        length += more
        more &= byte >= 0x80
    return value, pos + length, ~more


def parse(flat: list[bytes]) -> KeyValues:
    """Parse every encoded ``KeyValue`` in ``flat``; raises ``ValueError`` on malformed bytes."""
    n = len(flat)
    joined = b"".join(flat)
    data = pa.py_buffer(joined)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.fromiter(map(len, flat), np.int64, n), out=offsets[1:])
    limit = len(joined)
    buf = np.zeros(limit + _PAD, np.uint8)
    buf[:limit] = np.frombuffer(joined, np.uint8)
    start, end = offsets[:-1], offsets[1:]

    ok = (end - start >= 4) & (buf[start] == _TAG_KEY)
    klen, kstart, good = _varint(buf, np.minimum(start + 1, limit))
    ok &= good & (klen < np.uint64(limit))
    kend = kstart + klen.astype(np.int64) * ok
    ok &= kend < end
    ok &= buf[np.minimum(kend, limit)] == _TAG_VALUE
    vlen, vstart, good = _varint(buf, np.minimum(kend + 1, limit))
    ok &= good & (vlen < np.uint64(limit))
    ok &= (vstart + vlen.astype(np.int64) * ok == end) & (vlen > 0)
    vstart = np.minimum(vstart, limit)
    tag = buf[vstart]
    varint_tag = ok & ((tag == _TAG_STRING) | (tag == _TAG_INT) | (tag == _TAG_BOOL))
    inner, after, good = _varint(buf, np.minimum(vstart + 1, limit), varint_tag)
    ok &= good | ~varint_tag
    cls = np.full(n, SLOW, np.int8)
    cls[ok & (tag == _TAG_STRING) & (after + inner.astype(np.int64) * ok == end)] = STRING
    cls[ok & (tag == _TAG_INT) & (after == end)] = INT
    cls[ok & (tag == _TAG_BOOL) & (after == end)] = BOOL
    cls[ok & (tag == _TAG_DOUBLE) & (vstart + 9 == end)] = DOUBLE
    fast = cls != SLOW

    # Keys and string values cut from the data by offsets; slow ones are patched in below.
    kstart = np.where(fast, kstart, start)
    kend = np.where(fast, kend, start)
    is_str = cls == STRING
    sstart = np.where(is_str, after, end)
    keys = _cut(data, kstart, kend, n)
    str_idx = np.flatnonzero(is_str)
    strings = _cut(data, sstart[str_idx], end[str_idx], len(str_idx))

    ints = inner.view(np.int64)
    slow: dict[int, Any] = {}
    texts = _texts(flat, buf, cls, ints, inner, vstart, slow)
    is_json = (cls == INT) | (cls == BOOL) | (cls == DOUBLE)
    slow_idx = np.flatnonzero(cls == SLOW)
    if len(slow_idx):
        slow_keys = [slow[i][0] for i in slow_idx.tolist()]
        keys = _patch(keys, cls == SLOW, pa.array(slow_keys, pa.string()))
        for i in slow_idx.tolist():
            _, value = slow[i]
            slow[i] = value
            is_json[i] = type(value) is not str
    values = _merge(strings, str_idx, texts, n)
    encoded = keys.dictionary_encode()
    encoded.dictionary.validate(full=True)  # UTF-8 of every distinct key
    strings.validate(full=True)
    codes = np.asarray(encoded.indices, np.int64)
    return KeyValues(keys, values, is_json, cls, ints, slow, codes, encoded.dictionary.to_pylist())


def _merge(strings: pa.Array, str_idx: np.ndarray, texts: pa.Array, n: int) -> pa.StringArray:
    """String values at ``str_idx``, the texts (in order) everywhere else, as one array."""
    if len(str_idx) == n:
        return strings
    if not len(str_idx):
        return texts
    order = np.empty(n, np.int64)
    order[str_idx] = np.arange(len(str_idx))
    rest = np.ones(n, np.bool_)
    rest[str_idx] = False
    order[rest] = len(str_idx) + np.arange(n - len(str_idx))
    merged: pa.StringArray = pa.concat_arrays([strings, texts]).take(pa.array(order))
    return merged


def _cut(data: pa.Buffer, starts: np.ndarray, ends: np.ndarray, n: int) -> pa.StringArray:
    """Strings ``data[starts[i]:ends[i]]`` (ranges ascending, not overlapping) as one array."""
    if n == 0:
        return pa.array([], pa.string())
    bounds = np.empty(2 * n, np.int32)
    bounds[0::2] = starts
    bounds[1::2] = ends
    # Even entries are the wanted strings, odd ones the gaps between them.
    spaced = pa.StringArray.from_buffers(2 * n - 1, pa.py_buffer(bounds), data)
    return spaced.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int32)))


def _patch(arr: pa.StringArray, mask: np.ndarray, replacements: pa.Array) -> pa.StringArray:
    import pyarrow.compute as pc

    result: pa.StringArray = pc.replace_with_mask(arr, pa.array(mask), replacements)
    return result


def _texts(
    flat: list[bytes],
    buf: np.ndarray,
    cls: np.ndarray,
    ints: np.ndarray,
    raw: np.ndarray,
    vstart: np.ndarray,
    slow: dict[int, Any],
) -> pa.StringArray:
    """The replacement text of every non-fast-string attribute, in attribute order."""
    parts: list[pa.Array] = []
    order: list[np.ndarray] = []
    idx = np.flatnonzero(cls == INT)
    if len(idx):
        parts.append(pa.array(ints[idx]).cast(pa.string()))
        order.append(idx)
    idx = np.flatnonzero(cls == BOOL)
    if len(idx):
        parts.append(pa.array(np.where(raw[idx] != 0, "true", "false"), pa.string()))
        order.append(idx)
    idx = np.flatnonzero(cls == DOUBLE)
    if len(idx):
        cells = buf[(vstart[idx] + 1)[:, None] + np.arange(8)].copy()
        doubles = cells.view("<f8").ravel().tolist()
        parts.append(pa.array([json_text(d) for d in doubles], pa.string()))
        order.append(idx)
    idx = np.flatnonzero(cls == SLOW)
    if len(idx):
        texts = []
        for i in idx.tolist():
            kv = KeyValue.FromString(flat[i])
            value = any_value(kv.value)
            slow[i] = (kv.key, value)
            texts.append(value if type(value) is str else json_text(value))
        parts.append(pa.array(texts, pa.string()))
        order.append(idx)
    if not parts:
        return pa.array([], pa.string())
    combined = pa.concat_arrays(parts)
    if len(parts) == 1:
        return combined
    return combined.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))


def dedupe(kv: KeyValues, span_of: np.ndarray) -> tuple[KeyValues, np.ndarray]:
    """A key repeated within one span keeps its first place and its last value (dict semantics,
    as the JSON importer reads it); DuckDB maps would refuse the repeat anyway."""
    n = len(span_of)
    if n < 2:
        return kv, span_of
    code = span_of * (len(kv.key_names) + 1) + kv.key_codes
    _, first = np.unique(code, return_index=True)
    if len(first) == n:
        return kv, span_of
    _, last_rev = np.unique(code[::-1], return_index=True)
    last = n - 1 - last_rev  # same group order as ``first`` (both sorted by code)
    order = np.argsort(first, kind="stable")
    first, last = first[order], last[order]
    take_last = pa.array(last)
    slow = {new: kv.slow[int(old)] for new, old in enumerate(last.tolist()) if old in kv.slow}
    deduped = KeyValues(
        keys=kv.keys.take(pa.array(first)),
        values=kv.values.take(take_last),
        is_json=kv.is_json[last],
        cls=kv.cls[last],
        ints=kv.ints[last],
        slow=slow,
        key_codes=kv.key_codes[first],
        key_names=kv.key_names,
    )
    return deduped, span_of[first]
