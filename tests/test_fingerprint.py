"""Fingerprints: stable across processes and versions, value-based, bounded, never raising."""

from __future__ import annotations

import array
import asyncio
import dataclasses
import datetime
import decimal
import enum
import math
import socket
import sys
import threading
import uuid
from collections import OrderedDict, deque
from pathlib import PurePosixPath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_instrumentation_helpers import attrs, named, ok, run_python, spans
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation import fingerprint as F
from tracelens_instrumentation import trace
from tracelens_instrumentation.fingerprint import (
    MAX_BYTES,
    MAX_NODES,
    OPAQUE_FP,
    StreamFingerprint,
    args_fingerprint,
    fingerprint,
    result_fingerprint,
    small_args_hash,
)

__all__ = ["spans"]


@dataclasses.dataclass
class Doc:
    text: str
    score: float


class Color(enum.Enum):
    RED = 1
    BLUE = 2


def rh(value: Any) -> str:
    return result_fingerprint(value)[0]


def fps(value: Any) -> list[str]:
    return result_fingerprint(value)[1]


GOLDEN_CODE = """
from tracelens_instrumentation.fingerprint import result_fingerprint, args_fingerprint
values = [None, 7, "hello world", [1, "two", 3.0], {"b": [1, 2], "a": "xxxxxxxxxxxx"},
          {"set", "of", "strings", "whose", "order", "depends", "on", "the", "hash", "seed"},
          frozenset(range(50)), {"k" + str(i): i for i in range(40)}]
for v in values:
    print(result_fingerprint(v)[0], ",".join(result_fingerprint(v)[1]))
print(args_fingerprint([b"a\\0", b"b\\0"], [1, "x"])[0])
"""


def test_stable_across_processes_and_hash_seeds() -> None:
    outputs = {
        ok(run_python(GOLDEN_CODE, env={"PYTHONHASHSEED": seed})) for seed in ("0", "1", "12345")
    }
    assert len(outputs) == 1
    lines = outputs.pop().splitlines()
    assert lines[4].split()[0] == "8a0d29d0b2c99bc00c9406f95514da19"


def test_pinned_values() -> None:
    # Computed once and written down; any change of encoding breaks comparisons with stored data.
    # (Re-pinned when every int but -1/0/1 and every non-empty string became content-bearing:
    # those are now referenced by digest, not inline.)
    assert rh({"b": [1, 2], "a": "xxxxxxxxxxxx"}) == "8a0d29d0b2c99bc00c9406f95514da19"
    assert rh([1, 2, "hello world"]) == "87a968dd94bff92fc064d8fcb82adc46"
    assert args_fingerprint([b"a\0", b"b\0"], [1, "x"])[0] == "a565e59d6513d487f5d1cd9e13206375"


def test_equal_values_equal_fingerprints() -> None:
    assert rh({"a": 1, "b": 2}) == rh({"b": 2, "a": 1}) == rh(OrderedDict(b=2, a=1))
    # A JSON round trip turns tuples into lists: sequences are one kind of value.
    assert rh([1, 2]) == rh((1, 2)) == rh(deque([1, 2]))
    assert rh({3, 1, 2}) == rh(frozenset({1, 2, 3}))
    assert rh(0.0) == rh(-0.0) and rh(math.nan) == rh(float("nan"))
    assert rh(Doc("a", 1.0)) == rh(Doc("a", 1.0)) != rh(Doc("a", 2.0))
    assert rh(Color.RED) == rh(Color.RED) != rh(Color.BLUE)


def test_type_tags_keep_different_values_apart() -> None:
    distinct = [1, 1.0, True, "1", b"1", [1], {1}, {"1": 1}, None, 0, "", [], {}, (), Color.RED]
    hashes = [rh(v) for v in distinct]
    assert len(set(hashes)) == len(distinct) - 1  # [] and () are the same value


def test_value_like_objects() -> None:
    when = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.timezone.utc)
    assert rh(when) == rh(datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.timezone.utc))
    assert rh(when) != rh(when + datetime.timedelta(seconds=1))
    assert rh(decimal.Decimal("1.10")) != rh(decimal.Decimal("1.1"))  # str() differs: documented
    assert rh(uuid.UUID(int=5)) == rh(uuid.UUID(int=5))
    assert rh(PurePosixPath("/a/b")) != rh("/a/b")

    class Point:
        def __init__(self, x: int, y: int) -> None:
            self.x, self.y = x, y

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)

        __hash__ = None  # type: ignore[assignment]

    assert rh(Point(1, 2)) == rh(Point(1, 2)) != rh(Point(2, 1))


def test_arrays_by_contents() -> None:
    np = pytest.importorskip("numpy")
    a = np.arange(12.0).reshape(3, 4)
    assert rh(a) == rh(np.arange(12.0).reshape(3, 4))
    assert rh(a) != rh(np.arange(12.0).reshape(4, 3))  # shape counts
    assert rh(a) != rh(a.astype(np.float32))  # dtype counts
    assert rh(array.array("d", [1.0, 2.0])) == rh(array.array("d", [1.0, 2.0]))
    assert fps(np.arange(100))  # an array is content: it can link hops


def test_opaque_values_never_raise_and_are_not_flow_evidence() -> None:
    sock = socket.socket()
    try:
        gen = (i for i in range(3))
        values = [
            threading.Lock(),
            sock,
            gen,
            lambda: 1,
            sys,
            object(),
            asyncio.Event(),
            memoryview(bytes(range(10)))[::2],
        ]
        for value in values:
            digest, parts = result_fingerprint(value)
            assert len(digest) == 32
            # Only the marker that says "not covered": never a content fingerprint.
            assert parts == (OPAQUE_FP,) or isinstance(value, memoryview)
        assert rh(threading.Lock()) == rh(threading.Lock())  # by type: stable, says nothing more
        assert list(gen) == [0, 1, 2]  # never iterated
    finally:
        sock.close()


def test_hostile_objects() -> None:
    class Explodes:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("eq")

        __hash__ = object.__hash__

        @property
        def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
            raise RuntimeError("dict")

    class BadDict(dict[str, Any]):
        def items(self) -> Any:
            raise RuntimeError("items")

        def __iter__(self) -> Any:
            raise RuntimeError("iter")

    for value in (Explodes(), BadDict(a=1), [Explodes()], {"k": Explodes()}):
        digest, _ = result_fingerprint(value)
        assert len(digest) == 32
    assert rh(BadDict(a=1)) == rh({"a": 1}) == rh(BadDict(a=1))


def test_bounded_work_on_large_values() -> None:
    big = "a" * (10 * MAX_BYTES)
    changed = big[: 5 * MAX_BYTES + 7] + "b" + big[5 * MAX_BYTES + 8 :]  # between the samples
    assert rh(big) == rh(changed)  # documented: long strings are sampled
    assert rh(big) != rh(big + "a")  # the length always counts
    assert rh("x" + big[1:]) != rh(big)  # the head is hashed

    long_list = list(range(10 * MAX_NODES))
    tail_changed = [*long_list[:-1], -1]
    assert rh(long_list) == rh(tail_changed)  # documented: values past the budget are counted
    assert rh(long_list) != rh(long_list[:-1])

    deep: list[Any] = []
    node = deep
    for _ in range(100_000):  # far deeper than any recursion limit
        node.append([])
        node = node[0]
    assert len(rh(deep)) == 32

    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    assert rh(cyclic) == rh(cyclic)

    huge_int = 7**200_000  # str() of it would raise in Python >= 3.11
    assert len(rh(huge_int)) == 32


def test_embedding_vectors() -> None:
    vec = [i / 7 for i in range(1536)]
    assert rh(vec) == rh(list(vec)) != rh([*vec[:-1], 0.5])
    assert fps(vec)[0] == result_fingerprint(vec)[0][:16]


def test_stream_fingerprint_matches_the_list() -> None:
    items = ["first item", 2, {"k": "value value"}]
    stream = StreamFingerprint()
    for item in items:
        stream.add(item)
    assert stream.finish() == result_fingerprint(items)


def test_fps_link_a_result_to_the_argument_that_consumed_it(spans: InMemorySpanExporter) -> None:
    @trace
    def retrieve(query: str) -> dict[str, Any]:
        return {"docs": [{"id": 123456789, "text": "alpha " * 5}, {"id": 2, "text": "beta " * 5}]}

    @trace
    def rerank(docs: list[dict[str, Any]], query: str) -> list[str]:
        return [d["text"] for d in docs]

    @trace
    def answer(passage: str) -> str:
        return passage.upper()

    @trace
    def unrelated(n: int) -> int:
        return n

    @trace
    def lookup(name: str) -> int:
        return 7  # a small id

    @trace
    def fetch(user_id: int, flag: bool) -> None:
        return None

    found = retrieve("what is alpha?")
    texts = rerank(found["docs"], "what is alpha?")
    answer(texts[0])
    unrelated(1)
    fetch(lookup("bob"), True)
    r = attrs(named(spans, "retrieve"))
    rr = attrs(named(spans, "rerank"))
    a = attrs(named(spans, "answer"))
    u = attrs(named(spans, "unrelated"))
    assert set(r[A.RESULT_FPS]) & set(rr[A.ARG_FPS])  # rerank consumed retrieve's docs
    assert set(rr[A.RESULT_FPS]) & set(a[A.ARG_FPS])  # answer consumed a reranked text
    assert set(r[A.RESULT_FPS]) & set(a[A.ARG_FPS])  # ... which was inside retrieve's result
    # 1 is everywhere: no evidence of flow; the empty list says every argument was seen
    # (docs/attributes.md), so the hop still counts as fully fingerprinted.
    assert tuple(u[A.ARG_FPS]) == ()
    # A small id is: the lookup's 7 is the fetch's argument.
    assert set(attrs(named(spans, "lookup"))[A.RESULT_FPS]) == set(
        attrs(named(spans, "fetch"))[A.ARG_FPS]
    )


def test_generator_results_are_the_yielded_items(spans: InMemorySpanExporter) -> None:
    @trace
    def stream() -> Any:
        yield "chunk number one"
        yield "chunk number two"

    @trace
    def consume(chunks: list[str]) -> int:
        return len(chunks)

    consume(list(stream()))
    s = attrs(named(spans, "stream"))
    c = attrs(named(spans, "consume"))
    assert s[A.RESULT_HASH] == rh(["chunk number one", "chunk number two"])
    assert set(s[A.RESULT_FPS]) & set(c[A.ARG_FPS])


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.binary(max_size=30),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=6)
    ),
    max_leaves=20,
)


def _reordered(value: Any) -> Any:
    """The same value with every dict's insertion order reversed and lists as tuples."""
    if isinstance(value, dict):
        return {k: _reordered(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return tuple(_reordered(v) for v in value)
    return value


@settings(deadline=None)
@given(json_values)
def test_fingerprint_depends_on_the_value_only(value: Any) -> None:
    digest, parts = result_fingerprint(value)
    assert (digest, sorted(parts)) == (rh(_reordered(value)), sorted(fps(_reordered(value))))
    assert len(parts) <= 16 and len(set(parts)) == len(parts)


@settings(deadline=None)
@given(st.lists(json_values, min_size=1, max_size=4))
def test_nested_content_is_findable(values: list[Any]) -> None:
    """A content-bearing value nested at depth 1 is among the parent's fps (when few)."""
    parent = {"items": values}
    parent_fps = set(fps(parent))
    for value in values:
        own = fps(value)
        if own and len(parent_fps) < 16:
            assert own[0] in parent_fps or result_fingerprint(value)[0][:16] in parent_fps


@settings(deadline=None)
@given(json_values, json_values)
def test_different_values_differ(a: Any, b: Any) -> None:
    if _canonical(a) != _canonical(b):
        assert rh(a) != rh(b)


def _canonical(value: Any) -> Any:
    """Python equality with the encoding's distinctions (bool vs int vs float, list == tuple)."""
    if isinstance(value, dict):
        return ("m", tuple(sorted((k, _canonical(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("l", tuple(_canonical(v) for v in value))
    if isinstance(value, float):
        return ("d", value + 0.0)
    return (type(value).__name__, value)


small_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 21), max_value=1 << 21),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=9),
)


@settings(deadline=None)
@given(st.lists(small_scalars, max_size=4), st.lists(small_scalars, max_size=4))
def test_memoised_args_hash_is_the_full_one(first: list[Any], second: list[Any]) -> None:
    """The hot path's memoised args_hash is args_fingerprint's, and a memo shared by two
    argument lists (1 and True, 1 and 1.0 are equal in Python) never mixes them up."""
    names = [b"a\0", b"b\0", b"c\0", b"d\0"]
    memo: dict[tuple[Any, ...], str] = {}
    for values in (tuple(first), tuple(second), tuple(first)):
        full_hash, full_fps = args_fingerprint(names[: len(values)], values)
        fast = small_args_hash(names[: len(values)], values, memo)
        assert fast is None or (fast == full_hash and not full_fps)


def test_memoised_args_hash_takes_only_small_values() -> None:
    names = [b"a\0"]
    value: Any
    for value in (True, 1.0, 2, -2, 1 << 20, "a", "eight ch", "\udc80", b"x", [1], (1,)):
        assert small_args_hash(names, (value,), {}) is None, value
    for value in (None, 0, 1, -1, ""):
        assert small_args_hash(names, (value,), {}) == args_fingerprint(names, [value])[0]


@settings(deadline=None)
@given(small_scalars)
def test_result_fast_paths_match_the_general_walk(value: Any) -> None:
    for _ in range(2):  # the second time from the tables
        fp = fingerprint(value)
        parts = sorted(fp.parts)
        assert result_fingerprint(value) == (fp.hex, tuple(d[:8].hex() for _, d in parts)[:1])


def test_text_results_export_their_json_fields_and_tokens() -> None:
    from tracelens_instrumentation.fingerprint import TEXT_FP, short, text_fps

    def fp_of(value: Any) -> str:
        return fps(value)[0]  # a content-bearing scalar's own entry

    # A JSON document: its fields, as the values they are (the next hop takes the id 4217).
    doc = text_fps('{"user": {"id": 4217, "name": "ada"}, "ok": true}', ())
    assert fp_of(4217) in doc and fp_of("ada") in doc and TEXT_FP not in doc
    # Free text: its tokens, a number also as the int it spells, and the free-text marker.
    text = text_fps("Found ticket PROJ-42 in src/app.py, owner 7.", ())
    for token in ("PROJ-42", "src/app.py", "owner", "7"):
        assert fp_of(token) in text, token
    assert fp_of(7) in text and TEXT_FP in text
    # One word is a value, not free text; the result's own entry is kept first.
    own = ("abc",)
    assert text_fps("deploy", own)[0] == "abc" and TEXT_FP not in text_fps("deploy", own)
    # Bounded, however long the text.
    many = text_fps(" ".join(f"w{i}" for i in range(10_000)), ())
    assert len(many) <= 1 + 48 + 1
    assert short(b"\0" * 16) not in many


def test_trivial_values_link_nothing_and_opaque_ones_say_so() -> None:
    from tracelens_instrumentation.fingerprint import OPAQUE_FP

    # None, booleans, "", -1, 0, 1 and floats are everywhere: no entry.
    for value in (None, True, False, "", -1, 0, 1, 0.5):
        assert args_fingerprint([b"a\0"], [value])[1] == (), value
    # Everything else is content: a small id, a two-letter key.
    for value in (2, -7, 42, "ab", "x"):
        assert args_fingerprint([b"a\0"], [value])[1], value
    # A value whose content is not fingerprinted marks the list as incomplete.
    assert OPAQUE_FP in args_fingerprint([b"a\0", b"b\0"], [threading.Lock(), 42])[1]


# --- forms (issue 25): values that flow transformed ---------------------------------------


def _args(*values: Any) -> set[str]:
    names = [f"a{k}".encode() + b"\0" for k in range(len(values))]
    return set(F.py_args_fingerprint(names, list(values))[1])


def _result(value: Any) -> set[str]:
    _, fps = F.py_result_fingerprint(value)
    return set(F.text_fps(value, fps) if isinstance(value, str) else fps)


def test_forms_link_parts_and_encodings() -> None:
    """Hand-made flows: each result feeds the argument in a transformed form."""
    import base64

    secret = "s3cr3t-alpha-7"
    assert _result(base64.b64encode(secret.encode()).decode()) & _args("Bearer " + secret)
    assert _result(secret.encode().hex()) & _args("Token " + secret)
    assert _result({"id": 48213}) & _args("https://shop.example.com/orders/48213/items")
    assert _result({"output": '{"report_id": "rpt-5521"}'}) & _args("rpt-5521")
    assert _result("Q3 report & plan") & _args(
        "https://x.example/doc?title=Q3%20report%20%26%20plan"
    )
    assert _result("ACME") & _args("acme")
    # ... and values that do not flow stay apart.
    assert not _result({"login": "u-48213"}) & _args("https://api.example.com/repos/r-900")
    assert not _result("s3cr3t-bravo-9") & _args("Bearer " + secret)


def test_a_digest_shaped_argument_is_marked_derived() -> None:
    import hashlib

    proof = hashlib.sha256(b"n-8f3a21k3y").hexdigest()
    assert F.DERIVED_FP in _args(proof)
    assert F.DERIVED_FP in _args("sig=" + proof)
    assert F.DERIVED_FP not in _args("Oslo") | _args("2026-11-01") | _args("a" * 40)
