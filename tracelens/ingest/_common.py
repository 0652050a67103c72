"""Pieces every importer shares: field errors with paths, ids, numbers, batching.

Decoders walk plain JSON values (dicts, lists, str, int, float).  A bad value deep inside a document
raises ``FieldError`` at the leaf; each enclosing loop prepends its part of the path while the error
travels up, so the user sees ``resourceSpans[0].scopeSpans[1].spans[3].startTimeUnixNano`` without
the happy path ever building a path string.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any, Final, Protocol, TypeVar

import pyarrow as pa

from tracelens.schema import SPAN_SCHEMA, SpanColumns, conform, empty_spans

# Rows per Arrow chunk: bounds the Python-object memory a large import holds at once.
CHUNK_ROWS: Final = 65_536

_HEX32 = re.compile(r"[0-9a-fA-F]{32}").fullmatch
_HEX16 = re.compile(r"[0-9a-fA-F]{16}").fullmatch


try:  # orjson parses several times faster; the standard library is the reference
    import orjson

    _fast_loads: Any = orjson.loads
except ImportError:  # pragma: no cover - orjson is a dependency
    _fast_loads = json.loads


MAX_JSON_DEPTH: Final = 512
"""Deepest nesting of arrays and objects the standard-library fallback parses.  orjson (the fast
path) stops at 1024 levels by itself; the fallback would recurse once per level, so nesting is
measured first, without recursion, and deeper documents are refused with their place."""

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_STEP: Final = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE_HINT = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
# A surrogate pair, a lone surrogate escape, any other escape; left to right, so an escaped
# backslash (``\\\\ud800``) is never taken for the start of an escape.
_ESCAPE = re.compile(
    r"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|(u[dD][89a-fA-F][0-9a-fA-F]{2})|.)",
    re.S,
)
_RAW_SURROGATE = re.compile(r"[\ud800-\udfff]")


MAX_INT_DIGITS: Final = 400
"""Longest integer literal the standard-library fallback turns into an ``int``.  No field holds
more digits (int64 has 19, the largest finite double 309); ``int()`` of a long literal costs time
quadratic in its length and is refused past 4,300 digits with a bare ``ValueError``.  A longer
integer is a ``LongNumberError`` naming the field it stands in."""


class LongNumberError(json.JSONDecodeError):
    """An integer literal of more than ``MAX_INT_DIGITS`` digits at ``field`` (its path from the
    document's root, as ``FieldError`` paths are written)."""

    def __init__(self, msg: str, doc: str, pos: int, field: str) -> None:
        super().__init__(msg, doc, pos)
        self.field = field


class _LongInt(Exception):
    """Raised by ``_parse_int`` through ``json.loads``, which gives no place: ``loads`` finds it."""


def _parse_int(literal: str) -> int:
    if len(literal) > MAX_INT_DIGITS + 1 and len(literal.lstrip("-")) > MAX_INT_DIGITS:
        raise _LongInt
    return int(literal)


def loads(data: bytes | str) -> Any:
    """Parse JSON; on failure the standard library parses again, for its exact error place and
    for what it alone accepts (NaN, integers beyond 64 bits).  An integer of more than
    ``MAX_INT_DIGITS`` digits is a ``LongNumberError`` naming its field.

    Before the fallback parses, its two traps are ruled out with their place in the text
    (``json.JSONDecodeError``): nesting deeper than ``MAX_JSON_DEPTH`` (it recurses per level) and
    a lone surrogate escape such as ``"\\ud800"`` (it would build a ``str`` that cannot be
    encoded, failing far from the input).  Text that is not UTF-8 raises ``UnicodeDecodeError``.
    """
    try:
        return _fast_loads(data)
    except ValueError:
        pass
    text = data if isinstance(data, str) else _text(data)
    check_json_text(text)
    try:
        return json.loads(text, parse_int=_parse_int)
    except _LongInt:
        pass
    pos, field = long_int_place(text)
    digits = _LONG_INT.match(text, pos)
    length = len(digits.group().lstrip("-")) if digits else 0
    raise LongNumberError(
        f"a number of {length} digits (more than {MAX_INT_DIGITS} are not read)", text, pos, field
    ) from None


_LONG_DIGITS: Final = "-?[0-9]{" + str(MAX_INT_DIGITS + 1) + ",}"
_LONG_INT = re.compile(_LONG_DIGITS)
# Tokens that move the path (strings, brackets, ``,`` and ``:``) and integer literals too long
# to read (not a fraction's or an exponent's digits: those follow ``.``, ``e`` or a sign).
_PATH_TOKEN = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]|(?<![0-9.eE+-])' + _LONG_DIGITS + r"(?![0-9.eE])",
    re.S,
)


def long_int_place(text: str) -> tuple[int, str]:
    """Where the first integer literal of more than ``MAX_INT_DIGITS`` digits stands in the JSON
    ``text`` and its path (``resourceSpans[0].scopeSpans[0].spans[2].startTimeUnixNano``); one
    pass, no recursion.  ``(len(text), "")`` when there is none."""
    path: list[str | int] = []  # a key (in an object) or an index (in an array) per level
    last = ""
    for match in _PATH_TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if first == '"':
            last = token
        elif first == ":":
            if path:
                path[-1] = json.loads(last)
        elif first == ",":
            if path and type(path[-1]) is int:
                path[-1] += 1
        elif first == "[":
            path.append(0)
        elif first == "{":
            path.append("")
        elif first in "]}":
            if path:
                path.pop()
        else:
            return match.start(), _path_text(path)
    return len(text), ""


def _path_text(path: list[str | int]) -> str:
    out = ""
    for part in path:
        if type(part) is int:
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _text(data: bytes) -> str:
    """The text of a JSON document, as ``json.loads`` would decode it, but strict UTF-8 (it lets
    encoded surrogates through)."""
    encoding = json.detect_encoding(data)
    if encoding.startswith("utf-8"):
        return data.decode(encoding)
    return data.decode(encoding, "surrogatepass")


def check_json_text(text: str) -> None:
    """``json.JSONDecodeError`` at the first place nested deeper than ``MAX_JSON_DEPTH`` or
    holding a lone surrogate; linear time, no recursion."""
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:
        brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
        if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_JSON_DEPTH:
            depth = 0
            for match in _BRACKET_TOKEN.finditer(text):
                depth += _STEP.get(match.group(), 0)
                if depth > MAX_JSON_DEPTH:
                    raise json.JSONDecodeError(
                        f"nested deeper than {MAX_JSON_DEPTH} levels", text, match.start()
                    )
    if _SURROGATE_HINT.search(text) is None:
        return
    for match in _ESCAPE.finditer(text):
        if match.group(1):
            raise json.JSONDecodeError(
                f"lone surrogate \\{match.group(1)} in a string (not a Unicode character)",
                text,
                match.start(),
            )
    raw = _RAW_SURROGATE.search(text)
    if raw is not None:
        raise json.JSONDecodeError("a lone surrogate in a string", text, raw.start())


class FieldError(Exception):
    """A bad value at ``field`` (a path relative to the object being decoded)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message

    def under(self, prefix: str) -> FieldError:
        """Re-root the path below ``prefix`` (``spans[3]`` + ``name`` -> ``spans[3].name``)."""
        if not prefix:
            return self
        if not self.field:
            self.field = prefix
        elif self.field.startswith("["):
            self.field = prefix + self.field
        else:
            self.field = f"{prefix}.{self.field}"
        return self


def list_field(value: Any) -> list[Any]:
    """A list of objects where absent, null or any empty value means none."""
    if not value:
        return []
    if type(value) is not list:
        raise FieldError("", "not a list")
    return value


def item_error(exc: FieldError | AttributeError, j: int, shape: str) -> FieldError:
    """What went wrong with the j-th object of a list: its own field error under ``[j]``, or (an
    AttributeError: it is no object at all) that it is not a ``shape`` object."""
    if isinstance(exc, FieldError):
        return exc.under(f"[{j}]")
    return FieldError(f"[{j}]", f"not a {shape} object")


# What decoding one span may raise, caught around each span and placed by ``located``: a bad
# value's FieldError, or what code raises when a value has another structure than it reads (a
# list where an object belongs, a string where a number does).
DECODE_ERRORS: Final = (FieldError, TypeError, AttributeError, KeyError, ValueError)


def located(exc: Exception, where: str) -> FieldError:
    """The error ``exc`` (one of ``DECODE_ERRORS``) raised while decoding the item at ``where``
    (``spans[3]``): its own ``FieldError`` re-rooted there, anything else as ``malformed``."""
    if isinstance(exc, FieldError):
        return exc.under(where)
    return FieldError(where, f"malformed ({type(exc).__name__}: {exc})")


_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def as_int(value: Any, field: str) -> int:
    """OTLP JSON writes int64 as strings or numbers; both are accepted, nothing else is."""
    if type(value) is int:
        number = value
    elif type(value) is str:
        try:
            number = int(value)
        except ValueError:
            raise FieldError(field, f"not an integer: {value!r:.60}") from None
    elif type(value) is float and value.is_integer():
        number = int(value)
    elif value is None:
        raise FieldError(field, "missing")
    else:
        raise FieldError(field, f"not an integer: {value!r:.60}")
    if not _INT64_MIN <= number <= _INT64_MAX:
        raise FieldError(field, f"out of the 64-bit integer range: {number!r:.60}")
    return number


def as_float(value: Any, field: str) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:  # beyond the largest double (1.8e308)
            raise FieldError(field, f"out of the range of a double: {value!r:.60}") from None
    if type(value) is str:  # proto3 JSON spells NaN and infinities as strings
        try:
            return float(value)
        except ValueError:
            pass
    raise FieldError(field, f"not a number: {value!r:.60}")


def micros_to_ns(value: Any, field: str) -> int:
    """Jaeger and Zipkin count microseconds; fractional microseconds are kept to the nanosecond."""
    if type(value) is float and math.isfinite(value):
        ns = round(value * 1000)
    else:
        ns = as_int(value, field) * 1000
    if not _INT64_MIN <= ns <= _INT64_MAX:
        raise FieldError(field, f"out of range in nanoseconds: {value!r:.60}")
    return ns


def as_str(value: Any, field: str) -> str:
    if type(value) is str:
        return value
    if value is None:
        raise FieldError(field, "missing")
    raise FieldError(field, f"not a string: {value!r:.60}")


def opt_str(value: Any, field: str) -> str | None:
    return None if value is None else as_str(value, field)


def as_list(obj: dict[str, Any], key: str) -> list[Any]:
    """``obj[key]`` as a list; absent or null is empty (proto3 JSON omits empty repeated fields)."""
    value = obj.get(key)
    if value is None:
        return []
    if type(value) is not list:
        raise FieldError(key, "not a list")
    return value


def as_bytes(value: Any, field: str) -> bytes:
    """A base64 string's bytes (proto3 JSON's ``bytes``, a Jaeger ``binary`` tag)."""
    try:
        return base64.b64decode(as_str(value, field), validate=True)
    except (binascii.Error, ValueError):
        raise FieldError(field, "not base64") from None


def as_dict(value: Any, field: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise FieldError(field, "not an object")
    return value


def norm_trace_id(value: str) -> str:
    """Lower-case a 32-hex id; anything else is kept as it is (the analysis reports it)."""
    return value.lower() if _HEX32(value) else value


def norm_span_id(value: str) -> str:
    return value.lower() if _HEX16(value) else value


def pad_trace_id(value: str) -> str:
    """64-bit trace ids (Zipkin, Jaeger) become 128-bit ones the way OpenTelemetry widens them."""
    if _HEX16(value):
        return "0" * 16 + value.lower()
    return norm_trace_id(value)


def b64_to_hex(value: str, nbytes: int) -> str | None:
    """The hex of a base64 id (proto3's generic JSON mapping of ``bytes``), else None."""
    if len(value) != 4 * ((nbytes + 2) // 3) or not value.endswith("="):
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw.hex() if len(raw) == nbytes else None


MIN_REPEATED_LIMIT: Final = 256 << 20
MAX_EMPTY_ENTRIES: Final = 10_000
JSON_BYTES_PER_VALUE: Final = 192


def json_cost(data: bytes) -> int:
    """About how many bytes of Python objects parsing ``data`` as JSON builds, found without
    parsing: a value per ``,`` or ``:`` (each a ``dict``, ``list``, ``str`` or number of 28-230
    bytes) plus the text.  Measured: OTLP/JSON from the SDK builds ~20x its size (this estimate:
    ~23x); 1M ``{}`` 36x (this: 60x).  An upper bound in practice, and linear in the input."""
    return JSON_BYTES_PER_VALUE * (data.count(b",") + data.count(b":")) + 4 * len(data)


def max_json_cost(size: int) -> int:
    """The most ``json_cost`` can say for ``size`` bytes (every byte a ``,`` or ``:``): below a
    limit, the bytes need not be counted."""
    return (JSON_BYTES_PER_VALUE + 4) * size


def repeated_limit(size: int) -> int:
    """How many bytes the values a document shares between spans (its resources, processes,
    scopes) may take once stored on each span, for a document of ``size`` bytes: 8x the document,
    at least 256 MiB.  A resource is sent once but stored per span, so without a limit a 32 MiB
    service name over a million tiny spans would ask for terabytes (a 50 MB one on a few spans
    took 3-4 GB)."""
    return max(MIN_REPEATED_LIMIT, 8 * size)


class NativeColumns(Protocol):
    """A compiled column builder (``_json_fast.NativeColumns``) as ``SpanBatch`` sees it."""

    def __len__(self) -> int: ...

    def to_arrow(self) -> pa.Table: ...


_Native = TypeVar("_Native", bound=NativeColumns)


class SpanBatch:
    """Span columns cut into Arrow chunks so a million-span file never sits in Python lists; with
    a ``sink``, each chunk is handed to it instead of being kept (memory for one chunk).

    Spans come either through ``cols`` (decoders appending span by span) or through a compiled
    builder (``native``); whichever is used flushes the other first, so rows keep their order.
    """

    def __init__(
        self, chunk_rows: int | None = None, sink: Callable[[pa.Table], None] | None = None
    ) -> None:
        self._sink = sink
        self._cols = SpanColumns()
        self._native: NativeColumns | None = None
        self._native_make: Callable[[], NativeColumns] | None = None
        self._chunk_rows = chunk_rows or CHUNK_ROWS
        self._tables: list[pa.Table] = []
        self._repeated = 0
        self._repeated_limit: int | None = None
        self._empty = 0

    @property
    def cols(self) -> SpanColumns:
        """The columns decoders append to span by span."""
        if self._native is not None and len(self._native):
            self._put(self._native.to_arrow())
        return self._cols

    def native(self, make: Callable[[], _Native]) -> _Native:
        """The compiled builder ``make`` makes (one per format: a file may mix formats line by
        line; the previous builder's rows are flushed first), ready to take spans."""
        if len(self._cols) or (self._native_make is not make and self._native is not None):
            self._flush()
        if self._native_make is not make:
            self._native = make()
            self._native_make = make
        return self._native  # type: ignore[return-value]

    def state(self) -> tuple[int, int]:
        """What ``restore`` returns to when a document is decoded again by another path."""
        return self._repeated, self._empty

    def restore(self, state: tuple[int, int]) -> None:
        self._repeated, self._empty = state

    def document(self, size: int) -> None:
        """A document of ``size`` bytes starts: what its shared values may grow to restarts."""
        self._repeated = 0
        self._repeated_limit = repeated_limit(size)
        self._empty = 0

    def empty(self, entries: int = 1) -> None:
        """Count resource or scope entries without spans: they cost work and carry nothing, so a
        document may hold ``MAX_EMPTY_ENTRIES`` of them (as the protobuf decoders)."""
        self._empty += entries
        if self._empty > MAX_EMPTY_ENTRIES:
            raise FieldError(
                "", f"more than {MAX_EMPTY_ENTRIES} resource or scope entries without spans"
            )

    def repeat(self, nbytes: int) -> None:
        """Count ``nbytes`` of shared values (resource, process, scope) stored again for one
        more span; ``FieldError`` once the document's allowance is spent."""
        self._repeated += nbytes
        if self._repeated_limit is not None and self._repeated > self._repeated_limit:
            raise FieldError(
                "",
                f"resource or scope values repeated on each span take more than "
                f"{self._repeated_limit >> 20} MiB: resource attributes are too large for this "
                "many spans",
            )

    def may_repeat(self, nbytes: int) -> bool:
        """Whether ``repeat(nbytes)`` would pass (then it is counted)."""
        if self._repeated_limit is not None and self._repeated + nbytes > self._repeated_limit:
            return False
        self._repeated += nbytes
        return True

    def tick(self) -> None:
        """Call after each append (or document, for the compiled builder): flushes a full chunk
        to Arrow."""
        if len(self._cols) >= self._chunk_rows or (
            self._native is not None and len(self._native) >= self._chunk_rows
        ):
            self._flush()

    def _put(self, table: pa.Table) -> None:
        if self._sink is None:
            self._tables.append(table)
        else:
            self._sink(table)

    def _flush(self) -> None:
        if self._native is not None and len(self._native):
            self._put(self._native.to_arrow())
        if len(self._cols):
            self._put(self._cols.to_arrow())
            self._cols = SpanColumns()

    def extend(self, table: pa.Table) -> None:
        """Add spans another decoder already turned into a span table."""
        self._flush()
        self._put(conform(table))

    def finish(self) -> pa.Table:
        """The spans not handed to the sink (all of them when there is none)."""
        self._flush()
        if not self._tables:
            if self._sink is not None:  # no chunk of its own (empty_table would import pandas)
                return pa.Table.from_batches([], schema=SPAN_SCHEMA)
            return empty_spans()
        if len(self._tables) == 1:
            return self._tables[0]
        return pa.concat_tables(self._tables)
