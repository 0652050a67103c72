"""Stable fingerprints of argument and result values (``tracelens.args_hash`` and friends).

Why this shape:

* The analyzer links hops by value: hop B consumed hop A's output when one of B's
  ``tracelens.arg_fps`` equals one of A's ``tracelens.result_fps``.  So a value's fingerprint must
  not depend on where it sits (top-level argument, nested in a result, yielded by a generator):
  each container is hashed Merkle-style from its children's digests, and a value's digest is the
  same wherever it appears.
* Fingerprints are compared across processes, hosts and Python versions, so they never use
  ``hash()`` (salted per process) or ``repr()`` (addresses, versions): a canonical, type-tagged
  byte encoding goes through BLAKE2b.
* Instrumentation must never break or stall the host: the walk is iterative (no recursion), the
  number of values visited per argument and the bytes hashed per string are bounded, and nothing
  the user's objects define is called except ``__dict__`` access of value-like classes.

Encoding (``enc``), each node starting with a one-byte tag:

* ``n`` None; ``t``/``f`` booleans; ``i`` + signed big-endian int; ``d`` + IEEE double (0.0 and
  NaN canonicalised); ``c`` complex; ``s`` + UTF-8 (surrogates passed) + length; ``y`` bytes.
* ``l`` sequence (list, tuple, deque), ``m`` mapping (dict; entries sorted by their digests so
  insertion order does not matter), ``e`` set: child references + count.  A child reference is
  its digest (16 bytes), or its encoding inline when that is short.
* ``o`` value-like objects: qualified type name + fields (dataclasses, attrs, pydantic and any
  class that defines ``__eq__`` and has a ``__dict__``); enums, dates, decimals, UUIDs, paths by
  their type name and ``str()``.
* ``a`` numpy arrays and ``array.array`` (C-contiguous): type, format, shape and contents, read
  through the buffer protocol.
* ``x`` anything else (sockets, clients, locks, generators, GPU tensors): the qualified type name
  only.  Such "opaque" values still change ``args_hash`` by type, but are left out of the
  ``*_fps`` lists, since equal type names say nothing about data flow.

Speed: ``args_fingerprint``, ``small_args_hash`` and ``result_fingerprint`` run on every traced
call, so an optional compiled module (``_speedups.c``, built by ``pip install``) takes their
builtin-scalar cases, hashing with an embedded BLAKE2b; everything else it hands back to the
Python functions here, which are the reference (``py_*``) and give the same values.
``TRACELENS_NO_NATIVE=1`` switches it off.

Bounds: ``MAX_NODES`` values per top-level value (children past it are counted, not hashed),
``MAX_DEPTH`` levels, strings and byte strings longer than ``MAX_BYTES`` hashed from their head,
tail, length and evenly spaced middle samples.  Values equal in their hashed part therefore get
equal fingerprints even when they differ beyond the bounds.
"""

from __future__ import annotations

import json
import re
import struct
from base64 import b64decode, b64encode, urlsafe_b64decode, urlsafe_b64encode
from binascii import Error as B64Error
from collections import deque
from collections.abc import Sequence
from hashlib import blake2b
from typing import Any, Final
from urllib.parse import unquote_plus

from tracelens_instrumentation import _native

DIGEST_SIZE: Final = 16  # bytes of args_hash / result_hash (32 hex digits)
FP_SIZE: Final = 8  # bytes of one entry of arg_fps / result_fps (16 hex digits)
MAX_NODES: Final = 256
MAX_VECTOR: Final = 16384  # floats of a numeric vector (an embedding), hashed in one go
MAX_DEPTH: Final = 12
MAX_BYTES: Final = 16384
MAX_FPS: Final = 16
# An argument list keeps more: forms (parts, decodings, runs of an id's tokens) add entries, and
# a link cut off the list is a dependency missed.  A list of ``MAX_FPS`` or more entries is
# never counted as complete by the analyzer (older instrumentation cut it there).
ARG_MAX_FPS: Final = 32
# The values too common to say anything about data flow (docs/attributes.md, "Value fingerprints"):
# None, booleans, "", -1, 0 and 1.  Every other int and string is fingerprinted, small ids and
# short keys included: a lookup that returns id 7 which the next hop takes is a data flow.
MIN_FP_STR: Final = 1
MIN_FP_INT: Final = 2
_INLINE: Final = 15  # encodings up to this long are referenced inline, not by digest
_SAMPLES: Final = 16
_SAMPLE_LEN: Final = 64
_SEQ_TYPES: Final = (list, tuple, deque)
_SET_TYPES: Final = (set, frozenset)
_BUFFER_MODULES: Final = frozenset({"numpy", "array"})
_STR_MODULES: Final = frozenset(
    {"datetime", "decimal", "uuid", "fractions", "pathlib", "ipaddress"}
)

_pack_double = struct.Struct(">d").pack
_pack_len = struct.Struct(">Q").pack


def _digest(data: bytes) -> bytes:
    # BLAKE2b-512 truncated: stable like any fixed-size variant, and the default constructor
    # is twice as fast as one with a ``digest_size`` keyword.
    return blake2b(data).digest()[:DIGEST_SIZE]


def _qualname(obj: object) -> str:
    typ = type(obj)
    return f"{getattr(typ, '__module__', '?')}.{getattr(typ, '__qualname__', typ.__name__)}"


def _sampled(data: Sequence[Any], length: int) -> list[Any]:
    """Head, tail and evenly spaced middle slices of a long str/bytes: bounded work."""
    half = MAX_BYTES // 2
    parts = [data[:half], data[length - half :]]
    step = (length - MAX_BYTES) // (_SAMPLES + 1)
    for k in range(1, _SAMPLES + 1):
        at = half + k * step
        parts.append(data[at : at + _SAMPLE_LEN])
    return parts


def _enc_str(value: str) -> bytes:
    n = len(value)
    if n <= MAX_BYTES:
        return b"s" + value.encode("utf-8", "surrogatepass")
    parts = _sampled(value, n)
    return b"S" + b"\0".join(p.encode("utf-8", "surrogatepass") for p in parts) + _pack_len(n)


def _enc_bytes(value: bytes | bytearray | memoryview) -> bytes:
    data: bytes | bytearray | memoryview = value
    if isinstance(value, memoryview):
        data = value if value.ndim == 1 and value.format == "B" else value.cast("B")
    n = len(data)
    if n <= MAX_BYTES:
        return b"y" + bytes(data)
    return b"Y" + b"\0".join(bytes(p) for p in _sampled(data, n)) + _pack_len(n)


def _enc_int(value: int) -> bytes:
    bits = value.bit_length()
    if bits > 8 * MAX_BYTES:
        low = value & ((1 << (8 * MAX_BYTES)) - 1)
        sign = b"-" if value < 0 else b"+"
        return b"I" + low.to_bytes(MAX_BYTES, "big") + _pack_len(bits) + sign
    return b"i" + value.to_bytes(bits // 8 + 1, "big", signed=True)


def _enc_float(value: float) -> bytes:
    if value != value:  # NaN: one encoding for all NaNs
        return b"dnan"
    return b"d" + _pack_double(value + 0.0)  # -0.0 + 0.0 == 0.0: equal values, equal bytes


def scalar_encoding(value: Any) -> bytes | None:
    """Encoding of a leaf value, or None for containers and objects."""
    typ = type(value)
    if typ is str:
        return _enc_str(value)
    if typ is int:
        return _enc_int(value)
    if value is None:
        return b"n"
    if typ is bool:
        return b"t" if value else b"f"
    if typ is float:
        return _enc_float(value)
    if typ is bytes or typ is bytearray:
        return _enc_bytes(value)
    # Subclasses (IntEnum, numpy scalars that subclass float, str subclasses) fall through to
    # the generic path so they keep their type in the encoding.
    return None


def _is_candidate_scalar(value: Any, typ: type) -> bool:
    if typ is str or typ is bytes or typ is bytearray:
        return len(value) >= MIN_FP_STR
    if typ is int:
        return value >= MIN_FP_INT or value <= -MIN_FP_INT
    return False


class Fingerprint:
    """The digest of one top-level value plus the digests of its content-bearing parts."""

    __slots__ = ("digest", "parts")

    def __init__(self, digest: bytes, parts: list[tuple[int, bytes]]) -> None:
        self.digest = digest
        self.parts = parts  # (depth, digest) of candidate values, in walk order

    @property
    def hex(self) -> str:
        return self.digest.hex()


class _Frame:
    """A container being walked: its header, its children's references so far, what is left."""

    __slots__ = ("candidate", "depth", "head", "index", "kids", "mode", "refs", "tail")

    def __init__(self, head: bytes, mode: int, kids: list[Any], count: int, depth: int) -> None:
        self.head = head
        self.mode = mode  # _SEQ, _KEYED or _SET: how children's references combine
        self.kids = kids
        self.index = 0
        self.refs: list[bytes] = []
        self.depth = depth
        self.candidate = count > 0
        truncated = len(kids) < (2 * count if mode == _KEYED else count)
        self.tail = _pack_len(count) + (b"!" if truncated else b"")

    def digest(self) -> bytes:
        refs = self.refs
        if self.mode == _KEYED:
            body = b"".join(sorted(refs[i] + refs[i + 1] for i in range(0, len(refs) - 1, 2)))
        elif self.mode == _SET:
            body = b"".join(sorted(refs))
        else:
            body = b"".join(refs)
        return _digest(self.head + b"\0" + body + self.tail)


_SEQ: Final = 0
_KEYED: Final = 1
_SET: Final = 2
Leaf = tuple[bytes, bool]  # encoding, whether it is content-bearing


def _object_fields(value: Any) -> dict[str, Any] | None:
    """Field values of a value-like object, or None when it has no value semantics."""
    typ = type(value)
    fields = getattr(typ, "__dataclass_fields__", None)
    if isinstance(fields, dict):
        return {name: getattr(value, name, None) for name in fields}
    if getattr(typ, "__eq__", object.__eq__) is object.__eq__:
        return None
    state = getattr(value, "__dict__", None)
    return state if type(state) is dict else None


def _take(items: Any, room: int, pairs: bool) -> list[Any]:
    kids: list[Any] = []
    if pairs:
        for key, val in items:
            if len(kids) + 2 > room:
                break
            kids.append(key)
            kids.append(val)
    else:
        for item in items:
            if len(kids) >= room:
                break
            kids.append(item)
    return kids


def _open(value: Any, depth: int, budget: list[int]) -> Leaf | _Frame:
    """A leaf encoding for ``value``, or a frame whose children still need walking."""
    typ = type(value)
    enc = scalar_encoding(value)
    if enc is not None:
        return enc, _is_candidate_scalar(value, typ)
    if depth >= MAX_DEPTH:
        return b"D" + _qualname(value).encode("utf-8", "surrogatepass"), False
    if isinstance(value, _SEQ_TYPES):
        if value and type(value[0]) is float:
            vector = _vector(value)
            if vector is not None:
                return vector, True
        return _frame(b"l", _SEQ, value, len(value), depth, budget)
    if isinstance(value, dict):
        return _frame(b"m", _KEYED, dict.items(value), len(value), depth, budget)
    if isinstance(value, _SET_TYPES):
        return _frame(b"e", _SET, value, len(value), depth, budget)
    return _open_object(value, typ, depth, budget)


def _vector(value: Any) -> bytes | None:
    """Encoding of a sequence of floats (embeddings, scores) packed in C, or None if not one."""
    n = len(value)
    items = value if n <= MAX_VECTOR else [*value[: MAX_VECTOR // 2], *value[-MAX_VECTOR // 2 :]]
    try:
        packed = struct.pack(f">{len(items)}d", *items)
    except (struct.error, TypeError):
        return None
    if any(type(x) is not float for x in items[:: max(1, len(items) // 64)]):
        return None  # mixed with ints or other numbers: walk it item by item
    return b"L" + packed + _pack_len(n)


def _frame(head: bytes, mode: int, items: Any, count: int, depth: int, budget: list[int]) -> _Frame:
    kids = _take(items, budget[0], mode == _KEYED)
    budget[0] -= len(kids)
    return _Frame(head, mode, kids, count, depth)


def _open_object(value: Any, typ: type, depth: int, budget: list[int]) -> Leaf | _Frame:
    name = _qualname(value).encode("utf-8", "surrogatepass")
    if isinstance(value, complex):
        c = complex(value)
        return b"o" + name + b"\0c" + _pack_double(c.real + 0.0) + _pack_double(c.imag + 0.0), False
    if isinstance(value, (str, int, float, bytes, bytearray)):
        # Subclasses of builtins (IntEnum, numpy.float64, str enums): the builtin value + type.
        enc = scalar_encoding(_builtin(value)) or b""
        return b"o" + name + b"\0" + enc, _is_candidate_scalar(_builtin(value), _base(value))
    if isinstance(value, memoryview):
        return b"o" + name + b"\0" + _enc_bytes(value), value.nbytes >= MIN_FP_STR
    if getattr(typ, "__module__", "").split(".", 1)[0] in _BUFFER_MODULES:
        array = _array(value, name)
        if array is not None:
            return array
    if hasattr(typ, "_member_map_"):  # an Enum member: its name says which
        return b"o" + name + b"\0" + str(getattr(value, "_name_", "")).encode(), False
    if getattr(typ, "__module__", "").split(".", 1)[0] in _STR_MODULES:
        text = str(value)
        return b"o" + name + b"\0" + _enc_str(text), len(text) >= MIN_FP_STR
    fields = _object_fields(value)
    if fields is None:
        return b"x" + name, False
    return _frame(b"o" + name, _KEYED, fields.items(), len(fields), depth, budget)


def _array(value: Any, name: bytes) -> Leaf | None:
    """numpy arrays and ``array.array`` by dtype, shape and contents (read through the buffer
    protocol: no copy of a contiguous array, nothing touched on a GPU)."""
    try:
        view = memoryview(value)
    except TypeError:
        return None
    if not view.c_contiguous:
        return None
    head = f"{view.format}:{view.shape}".encode()
    return b"a" + name + b"\0" + head + b"\0" + _enc_bytes(view), view.nbytes >= MIN_FP_STR


def _base(value: Any) -> type:
    for base in (bool, int, float, str, bytes):
        if isinstance(value, base):
            return base
    return type(value)


def _builtin(value: Any) -> Any:
    return _base(value)(value)


def fingerprint(value: Any) -> Fingerprint:
    """Digest of ``value`` and of its content-bearing nested values; never raises."""
    try:
        return _fingerprint(value)
    except Exception:  # a hostile __dict__, a buffer that refuses export, ...
        return Fingerprint(_digest(b"x" + _safe_qualname(value).encode("utf-8", "replace")), [])


def _safe_qualname(value: Any) -> str:
    try:
        return _qualname(value)
    except Exception:
        return "?"


def _leaf_ref(leaf: Leaf, depth: int, parts: list[tuple[int, bytes]]) -> bytes:
    enc, candidate = leaf
    if enc[:1] in _UNSEEN_TAGS:
        parts.append((depth, OPAQUE_DIGEST))
    if not candidate and len(enc) <= _INLINE:
        return bytes((len(enc),)) + enc
    digest = _digest(enc)
    if candidate:
        parts.append((depth, digest))
    return b"\xff" + digest


def _fingerprint(value: Any) -> Fingerprint:
    parts: list[tuple[int, bytes]] = []
    budget = [MAX_NODES]
    top = _open(value, 0, budget)
    if not isinstance(top, _Frame):
        digest = _digest(top[0])
        if top[0][:1] in _UNSEEN_TAGS:
            return Fingerprint(digest, [(0, OPAQUE_DIGEST)])
        return Fingerprint(digest, [(0, digest)] if top[1] else [])
    stack = [top]
    while True:
        frame = stack[-1]
        if frame.index < len(frame.kids):
            child = frame.kids[frame.index]
            is_key = frame.mode == _KEYED and frame.index % 2 == 0
            frame.index += 1
            typ = type(child)
            if typ is str and len(child) < MIN_FP_STR and child.isascii():
                frame.refs.append(bytes((len(child) + 1,)) + b"s" + child.encode())
                continue
            if typ is int and -MIN_FP_INT < child < MIN_FP_INT:
                enc = b"i" + child.to_bytes(child.bit_length() // 8 + 1, "big", signed=True)
                frame.refs.append(bytes((len(enc),)) + enc)
                continue
            opened = _open(child, frame.depth + 1, budget)
            if isinstance(opened, _Frame):
                opened.candidate = opened.candidate and not is_key
                stack.append(opened)
            else:
                leaf = (opened[0], opened[1] and not is_key)
                frame.refs.append(_leaf_ref(leaf, frame.depth + 1, parts))
            continue
        digest = frame.digest()
        if frame.candidate:
            parts.append((frame.depth, digest))
        stack.pop()
        if not stack:
            return Fingerprint(digest, parts)
        stack[-1].refs.append(b"\xff" + digest)


def short(digest: bytes) -> str:
    return digest[:FP_SIZE].hex()


# Two marker entries of the ``*_fps`` lists (docs/attributes.md).  ``OPAQUE_FP``: a value whose
# content was not fingerprinted (a client, a socket, a value nested deeper than ``MAX_DEPTH``),
# so the list does not cover every argument.  ``TEXT_FP``: the result is free text, which a
# later hop may take in transformed form (a phrase out of it) that no fingerprint shows.
_UNSEEN_TAGS: Final = (b"x", b"D")
OPAQUE_DIGEST: Final = _digest(b"tracelens:opaque")
OPAQUE_FP: Final = short(OPAQUE_DIGEST)
TEXT_FP: Final = short(_digest(b"tracelens:text"))
# ``DERIVED_FP`` (in ``arg_fps``): an argument shaped like a digest or a signature (32+ hex
# digits, a long base64 run).  Such a value is computed (sha256(nonce + secret)), so it may come
# from an earlier result that no fingerprint of it shows: fingerprints cannot prove independence.
DERIVED_FP: Final = short(_digest(b"tracelens:derived"))
MIN_TEXT: Final = 3  # string results this long or longer also get their tokens' fingerprints
MAX_TEXT_FPS: Final = 48  # token and JSON-field fingerprints of one string result
MAX_JSON: Final = 1 << 16  # string results up to this long are tried as JSON
_TOKEN_RE: Final = re.compile(r"[^\s\"'`()\[\]{}<>,;|=]+")
_TOKEN_STRIP: Final = ".:!?*#"


# --- Forms: what a value may turn into on its way from one hop to the next (issue 25). --------
# A later hop may take a *part* of a string (a path segment, a query parameter, a header's
# credential) or a *re-encoded* one (base64, hex, URL encoding, another case).  Arguments that
# carry structure (separators ``/ ? & = %`` or whitespace) add the fingerprints of their parts;
# string results add those of their tokens' decoded and re-cased forms, and of JSON documents
# inside string fields.  Equal forms link, as equal values do.
_STRUCTURE: Final = "/?&=% \t\r\n"  # (the compiled fast path hands such strings back here)
_PARTS_RE: Final = re.compile(r"[/?&=#\s,;]+")
_DIGEST_RE: Final = re.compile(r"[0-9a-fA-F]{32,128}|[A-Za-z0-9+/_-]{40,}={0,2}")
_B64_RE: Final = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")
_HEX_RE: Final = re.compile(r"(?:[0-9a-fA-F]{2}){4,}")
DERIVED_MIN: Final = 32  # strings this long may be digests (the fast path hands them back)
MAX_FORMS: Final = 24  # form fingerprints added per value


def looks_derived(value: str) -> bool:
    """A string shaped like a digest or a signature: 32-128 hex digits, or a base64 run of 40+
    characters mixing letters and digits, and nothing else."""
    return (
        len(value) >= DERIVED_MIN
        and _DIGEST_RE.fullmatch(value) is not None
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


def has_forms(value: str) -> bool:
    """Whether an argument string is split into parts (or marked derived) by ``arg_forms``."""
    return len(value) <= MAX_BYTES and (any(c in _STRUCTURE for c in value) or looks_derived(value))


def _str_fp(value: str) -> str:
    return short(_digest(b"s" + value.encode("utf-8", "surrogatepass")))


def _decoded(token: str) -> list[str]:
    """The forms a token may be the encoding of: URL-decoded, base64- and hex-decoded (when
    that gives printable text), and its lower / upper / capitalised cases."""
    out: list[str] = []
    if "%" in token or "+" in token:
        out.append(unquote_plus(token))
    raw: bytes | None = None
    if _HEX_RE.fullmatch(token) and not token.isdigit():
        raw = bytes.fromhex(token)
    elif _B64_RE.fullmatch(token) and len(token.rstrip("=")) % 4 != 1:
        padded = token + "=" * (-len(token) % 4)
        try:
            raw = (urlsafe_b64decode if ("-" in token or "_" in token) else b64decode)(padded)
        except (B64Error, ValueError):
            raw = None
    if raw is not None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if len(text) >= 2 and text.isprintable():
            out.append(text)
    for cased in (token.lower(), token.upper(), token.capitalize()):
        if cased != token:
            out.append(cased)
    return out


def arg_forms(value: str) -> list[str]:
    """Fingerprints of an argument string's parts (path segments, query values, a header's
    credential), their URL-decoded forms and lower case, then the runs of their fine tokens
    (``_joins``), the last part's first (ids sit at the end of a URL more often than in its
    host); ``[DERIVED_FP]`` for a digest-shaped value.  At most about ``MAX_FORMS``."""
    if looks_derived(value):
        return [DERIVED_FP]
    out: list[str] = []

    def add(form: str) -> None:
        fp = _str_fp(form)
        if fp not in out:
            out.append(fp)
        if form.isascii() and form.isdigit() and len(form) <= 18:
            out.append(short(_digest(_enc_int(int(form)))))

    runs: list[str] = []
    for part in _PARTS_RE.split(value):
        part = part.strip(_TOKEN_STRIP)
        if not part or part == value:
            continue
        # (The result side adds every case and decoding of its tokens: here, a few forms do.)
        plain = unquote_plus(part) if ("%" in part or "+" in part) else part
        # The decoded part's own parts (``name=invoice%20INV-7.pdf``).
        inner = [p.strip(_TOKEN_STRIP) for p in _PARTS_RE.split(plain)] if plain != part else []
        for form in dict.fromkeys((part, plain, plain.lower(), *inner)):  # ordered: stable
            if form:
                add(form)
        if looks_derived(part) and DERIVED_FP not in out:
            out.append(DERIVED_FP)
        runs = [j for p in (*inner, plain) if p for j in _joins(p)] + runs
        if len(out) >= MAX_FORMS:
            return out
    for run in dict.fromkeys(runs):
        add(run)
        if len(out) >= MAX_FORMS:
            break
    return out


def _encoded(token: str) -> list[str]:
    """The encodings a later hop may send a token in: base64 (standard and URL-safe, with and
    without padding: a ``Basic`` credential, a token in a header) and hex."""
    raw = token.encode("utf-8", "surrogatepass")
    std = b64encode(raw).decode()
    out = [std, std.rstrip("=")]
    safe = urlsafe_b64encode(raw).decode()
    if safe != std:
        out += [safe, safe.rstrip("=")]
    out.append(raw.hex())
    return list(dict.fromkeys(out))


def _token_forms(token: str, encode: bool = True) -> list[str]:
    """A result token's parts (split at separators), their decoded / re-cased forms, and the
    token's base64 and hex encodings (a value sent encoded, as a ``Basic`` credential is)."""
    found: list[str] = []
    for part in dict.fromkeys((token, *(p for p in _PARTS_RE.split(token) if p))):
        part = part.strip(_TOKEN_STRIP)
        if not part:
            continue
        found.append(part)
        for form in _decoded(part):
            found.append(form)
            found.extend(p for p in _PARTS_RE.split(form) if p and p != form)
    if encode and len(token) >= MIN_ENCODED:
        found.extend(_encoded(token))
    return found


_FINE_RE: Final = re.compile(r"([._:@+~-])")
MIN_ENCODED: Final = 4  # result tokens this long also get their encodings
MAX_FINE: Final = 6  # an argument part of more fine tokens gets only single tokens and pairs


def _joins(part: str) -> list[str]:
    """Runs of an argument part's fine tokens (split at ``. _ : @ + ~ -``) with their
    separators, the part itself left out: ``INV-7-485.pdf`` gives ``INV-7-485``, ``7-485``,
    ``485.pdf``, ...  A value taken into a file name, a slug or a compound id links through
    them."""
    pieces = _FINE_RE.split(part)
    words = pieces[0::2]
    if len(words) < 2:
        return []
    longest = len(words) if len(words) <= MAX_FINE else 2
    out: list[str] = []
    for size in range(longest, 0, -1):
        for i in range(len(words) - size + 1):
            if size == len(words):
                continue
            run = "".join(pieces[2 * i : 2 * (i + size) - 1])
            if run and any(c.isalnum() for c in run):
                out.append(run)
    return out


def _json_in_strings(doc: Any) -> list[Any]:
    """JSON documents inside string fields of a parsed document (a Step Functions ``output``),
    one level deep, bounded by ``MAX_NODES`` values visited."""
    out: list[Any] = []
    todo: list[Any] = [doc]
    seen = 0
    while todo and seen < MAX_NODES:
        item = todo.pop()
        seen += 1
        if isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, str) and item[:1] in ("{", "[") and len(item) <= MAX_JSON:
            try:
                inner = json.loads(item)
            except (ValueError, RecursionError):
                continue
            if isinstance(inner, (dict, list)):
                out.append(inner)
    return out


def value_forms(value: Any) -> list[str]:
    """Form fingerprints of a non-string result: the fields of JSON documents inside its string
    fields, and the forms of its structured string fields."""
    out: list[str] = []
    for inner in _json_in_strings(value):
        out.extend(collect_fps([fingerprint(inner).parts], MAX_TEXT_FPS))
    return out


def text_fps(value: str, fps: tuple[str, ...]) -> tuple[str, ...]:
    """``fps`` of a string result plus the fingerprints of what a later hop may take out of it:
    the fields of a JSON document, else its tokens (words, ids, paths, URLs), each fingerprinted
    as the string it is; and ``TEXT_FP`` when it is free text of several tokens.  Bounded:
    ``MAX_TEXT_FPS`` entries, JSON up to ``MAX_JSON`` characters."""
    out = list(fps)
    seen = set(out)
    head = value[:1] if value[:1] not in " \t\r\n" else value.lstrip()[:1]
    if head in ("{", "[") and len(value) <= MAX_JSON:
        try:
            doc = json.loads(value)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, (dict, list)):
            nested = [fingerprint(d).parts for d in _json_in_strings(doc)]
            for fp in collect_fps([fingerprint(doc).parts, *nested], MAX_TEXT_FPS):
                if fp not in seen:
                    seen.add(fp)
                    out.append(fp)
            return tuple(out)
    tokens = _TOKEN_RE.findall(value[:MAX_BYTES])
    if len(tokens) > 1 or len(value) > MAX_BYTES:
        out.append(TEXT_FP)
    added = 0
    whole = [value] if len(tokens) <= 1 else []  # a one-token result's own forms count too
    for token in [*tokens, *whole]:
        token = token.strip(_TOKEN_STRIP)
        if not token:
            continue
        found = []
        for form in _token_forms(token):
            if form == value:
                continue
            found.append(_str_fp(form))
            if form.isascii() and form.isdigit() and len(form) <= 18:  # "user 42": f(42), f("42")
                found.append(short(_digest(_enc_int(int(form)))))
        for fp in found:
            if fp not in seen:
                seen.add(fp)
                out.append(fp)
                added += 1
        if added >= MAX_TEXT_FPS:
            break
    return tuple(out)


MAX_RECORDED_TOKENS: Final = 2048  # tokens of one recorded text expanded by ``recorded_forms``


def _recorded_tokens(text: str) -> list[str]:
    """The tokens of a recorded text (``MAX_BYTES`` of it, JSON string escapes undone),
    stripped, at most ``MAX_RECORDED_TOKENS``: what ``recorded_forms`` and ``has_derived`` read."""
    plain = text[:MAX_BYTES].replace("\\", " ")
    tokens = (t.strip(_TOKEN_STRIP) for t in _TOKEN_RE.findall(plain)[:MAX_RECORDED_TOKENS])
    return [t for t in tokens if t]


def recorded_forms(text: str, encode: bool = False) -> str:
    """A recorded text (a tool call's arguments or result, a URL, a message) followed by every
    form its tokens may take on the way to the next hop, in lower case: each token's parts and
    its URL-, base64- and hex-decoded forms (and, with ``encode``, for a result, its base64 and
    hex encodings), with JSON string escapes undone.  The analyzer compares recorded values of
    spans it did not fingerprint in this space, so a value that flows re-encoded, re-cased or
    inside a JSON string links as the decorator's fingerprints link it (issue 25;
    docs/attributes.md, "Forms").  Bounded by ``MAX_BYTES`` characters and
    ``MAX_RECORDED_TOKENS`` tokens."""
    out = [text[:MAX_BYTES].replace("\\", " ")]
    for token in _recorded_tokens(text):
        out.extend(_token_forms(token, encode))
    return " ".join(out).lower()


def has_derived(text: str) -> bool:
    """Whether a recorded text holds a token shaped like a digest or a signature
    (``looks_derived``): a value only computation makes, which no text match can trace back."""
    return any(looks_derived(t) for t in _recorded_tokens(text))


def collect_fps(parts: Sequence[list[tuple[int, bytes]]], limit: int = MAX_FPS) -> list[str]:
    """Short fingerprints of several values' candidate parts: shallow first, unique, bounded."""
    merged: list[tuple[int, bytes]] = []
    for value_parts in parts:
        merged.extend(value_parts)
    merged.sort()  # shallow first, then by digest: the same set of values, the same list
    out: list[str] = []
    seen: set[bytes] = set()
    for _, digest in merged:
        if digest in seen:
            continue
        seen.add(digest)
        out.append(short(digest))
        if len(out) >= limit:
            break
    return out


def value_ref(value: Any) -> tuple[bytes, list[tuple[int, bytes]]]:
    """Reference to ``value`` inside a parent encoding, and its candidate parts.

    Short non-candidate scalars (small ints, None, booleans, short strings) are referenced by
    their encoding, which spares a hash per argument on the common fast path.
    """
    enc = scalar_encoding(value)
    if enc is not None and len(enc) <= _INLINE and not _is_candidate_scalar(value, type(value)):
        return bytes((len(enc),)) + enc, []
    fp = fingerprint(value)
    return b"\xff" + fp.digest, fp.parts


def arg_value_ref(value: Any) -> tuple[bytes, list[tuple[int, bytes]]]:
    """``value_ref`` of an argument: a container's parts also hold the forms of the structured
    strings inside it (``nested_arg_forms``)."""
    ref, parts = value_ref(value)
    typ = type(value)
    if typ is dict or typ is list or typ is tuple:
        forms = nested_arg_forms(value)
        if forms:
            return ref, [*parts, *((1, bytes.fromhex(f)) for f in forms)]
    return ref, parts


MAX_NESTED: Final = 64  # values of a container argument looked at for forms
MAX_NESTED_CHARS: Final = 512  # nested strings longer than this (or of more than
MAX_NESTED_WORDS: Final = 4  # this many words: prose, a prompt) keep their whole value only


def nested_arg_forms(value: Any) -> list[str]:
    """``arg_forms`` of the structured strings inside a container argument (a header's
    ``Basic <base64>`` in ``headers={...}``, a URL in a request dict), visited breadth-first
    and iteratively, at most ``MAX_NESTED`` values and ``MAX_FORMS`` forms.  Prose (a chat
    message) is left whole: its words are no ids, and splitting it would cost more than the
    call's whole fingerprint."""
    out: list[str] = []
    todo: list[Any] = [value]
    seen = 0
    while todo and seen < MAX_NESTED and len(out) < MAX_FORMS:
        item = todo.pop(0)
        seen += 1
        typ = type(item)
        if typ is dict:
            todo.extend(item.values())
        elif typ is list or typ is tuple:
            todo.extend(item)
        elif (
            typ is str
            and len(item) <= MAX_NESTED_CHARS
            and item.count(" ") < MAX_NESTED_WORDS
            and has_forms(item)
        ):
            out.extend(f for f in arg_forms(item) if f not in out)
    return out[:MAX_FORMS]


_NONE_HEX: Final = _digest(b"n").hex()


def _small_int_ref(value: int) -> bytes:
    enc = b"i" + value.to_bytes(value.bit_length() // 8 + 1, "big", signed=True)
    return bytes((len(enc),)) + enc


_SMALL_INT_REFS: Final = {i: _small_int_ref(i) for i in range(1 - MIN_FP_INT, MIN_FP_INT)}
_NONE_REF: Final = b"\x01n"
_MAX_INT_BITS: Final = 8 * MAX_BYTES
_STR_TAGS: Final = [bytes((n + 1,)) + b"s" for n in range(MIN_FP_STR)]


def args_fingerprint(names: Sequence[bytes], values: Sequence[Any]) -> tuple[str, tuple[str, ...]]:
    """``tracelens.args_hash`` and ``tracelens.arg_fps`` of a call bound to parameter names.

    ``names`` are the parameter names UTF-8 encoded with a trailing NUL (precomputed per
    function).  Builtin scalars, the bulk of arguments, are encoded and referenced right here
    (the bytes ``value_ref`` would give, without its calls and objects): this runs on every
    traced call whose arguments are not all small and repeated.
    """
    chunks: list[bytes] = []
    found: list[tuple[int, bytes]] | None = None
    small_ints = _SMALL_INT_REFS
    for name, value in zip(names, values):  # noqa: B905 (strict=False costs a keyword call)
        chunks.append(name)
        typ = type(value)
        if typ is int:
            ref = small_ints.get(value)
            if ref is not None:
                chunks.append(ref)
                continue
            bits = value.bit_length()
            if bits > _MAX_INT_BITS:
                enc = _enc_int(value)
            else:
                enc = b"i" + value.to_bytes(bits // 8 + 1, "big", signed=True)
            small = -MIN_FP_INT < value < MIN_FP_INT
        elif typ is str:
            small = len(value) < MIN_FP_STR
            if small and value.isascii():
                chunks.append(_STR_TAGS[len(value)] + value.encode())
                continue
            enc = _enc_str(value)
            if not small and has_forms(value):
                forms = arg_forms(value)
                if forms:
                    if found is None:
                        found = []
                    found.extend((1, bytes.fromhex(fp)) for fp in forms)
        elif value is None:
            chunks.append(_NONE_REF)
            continue
        elif typ is bytes:
            enc = _enc_bytes(value)
            small = len(value) < MIN_FP_STR
        elif typ is float:
            enc = _enc_float(value)
            chunks.append(bytes((len(enc),)) + enc)  # 9 bytes or 4: always inline
            continue
        else:
            ref, value_parts = arg_value_ref(value)
            chunks.append(ref)
            if value_parts:
                if found is None:
                    found = []
                found.extend(value_parts)
            continue
        if small:  # referenced by value: inline when short enough, else by its digest
            if len(enc) <= _INLINE:
                chunks.append(bytes((len(enc),)) + enc)
            else:
                chunks.append(b"\xff" + blake2b(enc).digest()[:DIGEST_SIZE])
            continue
        # a content-bearing scalar: referenced by digest, and one of the arg_fps
        digest = blake2b(enc).digest()[:DIGEST_SIZE]
        chunks.append(b"\xff" + digest)
        if found is None:
            found = [(0, digest)]
        else:
            found.append((0, digest))
    args_hash = blake2b(b"A" + b"".join(chunks)).digest()[:DIGEST_SIZE].hex()
    if found is None:
        return args_hash, ()
    if len(found) == 1:
        return args_hash, (found[0][1][:FP_SIZE].hex(),)
    return args_hash, tuple(collect_fps([found], ARG_MAX_FPS))


def collect_arg_fps(parts: Sequence[list[tuple[int, bytes]]]) -> list[str]:
    """``collect_fps`` for an argument list (``ARG_MAX_FPS`` entries)."""
    return collect_fps(parts, ARG_MAX_FPS)


def _scalar_hex(value: Any) -> str:
    enc = scalar_encoding(value)
    return _digest(enc if enc is not None else b"").hex()


# Digests of the commonest results (None, booleans, small ints), computed once: hashing one
# costs a third of what the whole result fingerprint may add to a traced call.
_SMALL_RESULTS: Final = {
    (typ, v): _scalar_hex(v)
    for typ, values in ((int, range(1 - MIN_FP_INT, MIN_FP_INT)), (bool, (False, True)))
    for v in values
}
_SHORT_STR_HEX: dict[str, str] = {}  # short ASCII results seen, bounded by MEMO_MAX
MEMO_MAX: Final = 4096


def small_args_hash(
    names: Sequence[bytes], values: tuple[Any, ...], memo: dict[tuple[Any, ...], str]
) -> str | None:
    """``args_hash`` of a call whose arguments are all small ints, short strings or None (no
    ``arg_fps`` then), else None: ``args_fingerprint``'s digest, computed once per distinct
    argument tuple (these repeat: ids, flags, modes) and then found in ``memo``.

    The tuple itself is the key: ints, strings and None never compare equal across types, and
    equal values of one of these exact types encode alike.  Strings and ints are bounded by
    the ``arg_fps`` thresholds, so keys stay small.  ``memo``: one per function (``names``
    are its parameters), cleared at ``MEMO_MAX`` entries.
    """
    for value in values:
        typ = type(value)
        if typ is int:
            if not -MIN_FP_INT < value < MIN_FP_INT:
                return None
        elif typ is str:
            if len(value) >= MIN_FP_STR:
                return None
        elif value is not None:
            return None
    known = memo.get(values)
    if known is None:
        known, fps = args_fingerprint(names, values)
        if fps:  # (cannot happen for these values; never memoise what would lose fps)
            return known
        if len(memo) >= MEMO_MAX:
            memo.clear()
        memo[values] = known
    return known


def result_fingerprint(value: Any) -> tuple[str, tuple[str, ...]]:
    """``tracelens.result_hash`` and ``tracelens.result_fps`` of a return value."""
    if value is None:  # fast paths: the most common results
        return _NONE_HEX, ()
    typ = type(value)
    if typ is int or typ is bool:
        known = _SMALL_RESULTS.get((typ, value))
        if known is not None:
            return known, ()
        if typ is int:  # (a bool is always among the small results)
            hexed = blake2b(_enc_int(value)).digest()[:DIGEST_SIZE].hex()
            candidate = value >= MIN_FP_INT or value <= -MIN_FP_INT
            return hexed, (hexed[: 2 * FP_SIZE],) if candidate else ()
    elif typ is str and len(value) < MIN_FP_STR and value.isascii():
        known = _SHORT_STR_HEX.get(value)
        if known is None:
            if len(_SHORT_STR_HEX) >= MEMO_MAX:
                _SHORT_STR_HEX.clear()
            known = _SHORT_STR_HEX[value] = _digest(b"s" + value.encode()).hex()
        return known, ()
    elif typ is str or typ is bytes:
        digest = blake2b(_enc_str(value) if typ is str else _enc_bytes(value)).digest()
        hexed = digest[:DIGEST_SIZE].hex()
        return hexed, (hexed[: 2 * FP_SIZE],) if len(value) >= MIN_FP_STR else ()
    fp = fingerprint(value)
    fps = collect_fps([fp.parts]) if fp.parts else []
    if typ is dict or typ is list:
        fps += [f for f in value_forms(value) if f not in fps][:MAX_FORMS]
    return fp.hex, tuple(fps)


class StreamFingerprint:
    """Fingerprint of the items a generator yields, equal to that of the list of those items
    as long as there are at most ``MAX_NODES`` of them (later items are counted, not hashed)."""

    __slots__ = ("_count", "_hash", "_parts")

    def __init__(self) -> None:
        self._hash = blake2b(b"l\0")
        self._count = 0
        self._parts: list[tuple[int, bytes]] = []

    def add(self, item: Any) -> None:
        self._count += 1
        if self._count > MAX_NODES:
            return
        ref, parts = value_ref(item)
        self._hash.update(ref)
        if parts and len(self._parts) < 4 * MAX_FPS:
            self._parts.extend((depth + 1, digest) for depth, digest in parts)

    def finish(self) -> tuple[str, tuple[str, ...]]:
        tail = _pack_len(self._count) + (b"!" if self._count > MAX_NODES else b"")
        h = self._hash.copy()
        h.update(tail)
        digest = h.digest()[:DIGEST_SIZE]
        parts = [(0, digest), *self._parts] if self._count else self._parts
        return digest.hex(), tuple(collect_fps([parts]))


# The Python reference implementations, kept under their own names (tests compare them with the
# compiled ones); the public names become the compiled ones when ``_speedups`` is built.
py_args_fingerprint = args_fingerprint
py_small_args_hash = small_args_hash
py_result_fingerprint = result_fingerprint


def _load_native() -> Any:
    module: Any = _native.load("tracelens_instrumentation._speedups")
    if module is None:
        return None
    module.install(py_args_fingerprint, py_result_fingerprint, arg_value_ref, collect_arg_fps)
    return module


native = _load_native()
if native is not None:
    args_fingerprint = native.args_fingerprint
    small_args_hash = native.small_args_hash
    result_fingerprint = native.result_fingerprint
