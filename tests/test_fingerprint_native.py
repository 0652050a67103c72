"""The compiled fingerprints (``_speedups.c``) give exactly the Python reference's values.

The Python functions in fingerprint.py are the reference (``py_*``); the compiled ones take the
builtin-scalar cases and hand the rest back.  Both are run on the same generated values here:
scalars at every encoding boundary (int sizes, the content-bearing thresholds, long strings and
bytes that are sampled, surrogates, NaN and -0.0), containers, objects and subclasses.
"""

from __future__ import annotations

import enum
import gc
import hashlib
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracelens_instrumentation import fingerprint as F

pytestmark = pytest.mark.skipif(F.native is None, reason="compiled fingerprints not built or off")


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 1 << 30


EDGE_INTS = [
    0, 1, -1, 127, 128, -128, -129, 255, 256, -256, -257, 1024, 1025,
    (1 << 20) - 1, 1 << 20, -(1 << 20) + 1, -(1 << 20), (1 << 31), -(1 << 31) - 1,
    (1 << 62) - 1, 1 << 62, -(1 << 62) + 1, -(1 << 62), (1 << 63) - 1, -(1 << 63), 1 << 64,
    1 << 200, -(1 << 200),
]  # fmt: skip
ints = st.one_of(
    st.sampled_from(EDGE_INTS),
    st.integers(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
)
texts = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=8),
    st.integers(min_value=F.MAX_BYTES - 2, max_value=F.MAX_BYTES + 2).map(lambda n: "é" * n),
    st.integers(min_value=F.MAX_BYTES - 2, max_value=F.MAX_BYTES + 2).map(lambda n: "a" * n),
)
blobs = st.one_of(
    st.binary(max_size=20),
    st.integers(min_value=F.MAX_BYTES - 1, max_value=F.MAX_BYTES + 1).map(lambda n: b"\1" * n),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    ints,
    st.floats(),
    st.sampled_from([0.0, -0.0, float("nan"), float("inf"), -float("inf")]),
    texts,
    blobs,
    st.binary(max_size=12).map(bytearray),
    st.sampled_from([Level.LOW, Level.HIGH]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
    ),
    max_leaves=10,
)
NAMES = [b"a\0", b"bee\0", b"*args\0", "\u00e9".encode() + b"\0", b"e\0", b"f\0"]


def same(a: Any, b: Any) -> bool:
    return bool(a == b and type(a) is type(b) and [type(x) for x in a] == [type(x) for x in b])


@settings(deadline=None)
@given(st.binary(max_size=600))
def test_embedded_blake2b_is_hashlibs(data: bytes) -> None:
    assert F.native.digest(data) == hashlib.blake2b(data).digest()[:16]


def test_embedded_blake2b_at_block_boundaries() -> None:
    for n in (0, 1, 111, 112, 127, 128, 129, 255, 256, 257, 1000, 100_000):
        data = bytes(range(256)) * (n // 256 + 1)
        assert F.native.digest(data[:n]) == hashlib.blake2b(data[:n]).digest()[:16], n


@settings(deadline=None)
@given(st.lists(values, max_size=6))
def test_args_fingerprint_matches_the_reference(args: list[Any]) -> None:
    names = NAMES[: len(args)]
    assert same(F.native.args_fingerprint(names, args), F.py_args_fingerprint(names, args))
    assert same(
        F.native.args_fingerprint(tuple(names), tuple(args)),
        F.py_args_fingerprint(tuple(names), tuple(args)),
    )


@settings(deadline=None)
@given(values)
def test_result_fingerprint_matches_the_reference(value: Any) -> None:
    assert F.native.result_fingerprint(value) == F.py_result_fingerprint(value)


@settings(deadline=None)
@given(st.lists(st.one_of(scalars, st.sampled_from(["", "seven c", "eight ch"])), max_size=4))
def test_small_args_hash_matches_the_reference(args: list[Any]) -> None:
    names = NAMES[: len(args)]
    memo_c: dict[tuple[Any, ...], str] = {}
    memo_py: dict[tuple[Any, ...], str] = {}
    for _ in range(2):  # the second time from the memo
        got = F.native.small_args_hash(names, tuple(args), memo_c)
        assert got == F.py_small_args_hash(names, tuple(args), memo_py)
    assert memo_c == memo_py


def test_ints_beyond_the_hashed_bound() -> None:
    for value in (1 << (8 * F.MAX_BYTES + 5), -(1 << (8 * F.MAX_BYTES + 5))):
        args = [value, "x"]
        assert F.native.args_fingerprint(NAMES[:2], args) == F.py_args_fingerprint(NAMES[:2], args)
        assert F.native.result_fingerprint(value) == F.py_result_fingerprint(value)


def test_names_that_are_not_bytes_take_the_python_path() -> None:
    class Name(bytes):
        pass

    names = [Name(b"a\0"), b"b\0"]
    assert F.native.args_fingerprint(names, [1 << 30, "x"]) == F.py_args_fingerprint(
        names, [1 << 30, "x"]
    )


def test_strings_with_forms_are_left_to_the_reference() -> None:
    """Strings with parts (separators) or a digest's length go to the Python ``arg_forms``:
    both paths give the same ``args_hash`` and ``arg_fps`` (issue 25)."""
    import hashlib

    for value in (
        "/orders/48213/items",
        "Bearer s3cr3t-alpha-7",
        "q=a%20b&page=2",
        "tab\tseparated",
        hashlib.sha256(b"x").hexdigest(),
        "ünïcode/päth",
        "x" * 31,
        "x" * 32,
    ):
        names = [b"a\0", b"b\0"]
        assert F.native.args_fingerprint(names, [value, 7]) == F.py_args_fingerprint(
            names, [value, 7]
        ), value


def test_fewer_names_than_values_zip_like_the_reference() -> None:
    for names, args in (([b"a\0"], [1, 2, 3]), ([b"a\0", b"b\0"], [1 << 40])):
        assert F.native.args_fingerprint(names, args) == F.py_args_fingerprint(names, args)


def test_fingerprint_tuples_are_left_to_reference_counting() -> None:
    """A span's fingerprint tuples hold only strings: the collector would untrack them at its
    next pass; the compiled path hands them over untracked (and equal)."""
    _, arg_fps = F.native.args_fingerprint([b"a\0", b"b\0"], [1 << 30, "a-long-string"])
    _, result_fps = F.native.result_fingerprint("a long result string")
    assert len(arg_fps) == 2 and len(result_fps) == 1
    assert not gc.is_tracked(arg_fps) and not gc.is_tracked(result_fps)
    attributes = {"tracelens.arg_fps": arg_fps, "tracelens.result_fps": result_fps}
    assert not gc.is_tracked(attributes)


def test_no_reference_leaks() -> None:
    mix: list[Any] = [1 << 30, "x", "a longer string", None, 2.5, b"12345678", [1, 2], {"k": 1}]
    memo: dict[tuple[Any, ...], str] = {}

    def work() -> None:
        for _ in range(2000):
            F.native.args_fingerprint(NAMES, mix)
            F.native.small_args_hash(NAMES[:2], (1, "x"), memo)
            for value in mix:
                F.native.result_fingerprint(value)

    work()
    before = sys.getallocatedblocks()
    work()
    assert sys.getallocatedblocks() - before < 200


CHECK = """
import json
from tracelens_instrumentation import fingerprint as F
values = [None, True, 7, 1 << 30, 1 << 70, 2.5, float("nan"), "x", "a long string",
          "\\u00e9t\\u00e9!!", b"bytes long enough", [1, "two", 1 << 30], {"k": [1.5, None]}]
print(json.dumps({
    "native": F.native is not None,
    "args": F.args_fingerprint([b"a\\0", b"b\\0", b"c\\0"], values[:3]),
    "args2": F.args_fingerprint([b"a\\0", b"b\\0"], values[3:5]),
    "results": [F.result_fingerprint(v) for v in values],
}))
"""


def test_switching_it_off_gives_the_same_values() -> None:
    def run(env: dict[str, str]) -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, "-c", CHECK], env={**os.environ, **env}, capture_output=True,
            text=True, check=True,
        )  # fmt: skip
        loaded: dict[str, Any] = json.loads(out.stdout)
        return loaded

    on, off = run({"TRACELENS_NO_NATIVE": ""}), run({"TRACELENS_NO_NATIVE": "1"})
    assert on.pop("native") is True and off.pop("native") is False
    assert on == off


def test_compiled_send_steps_like_the_python_one() -> None:
    from tracelens_instrumentation.decorator import _py_step

    class Boom(Exception):
        pass

    def gen(fail: bool) -> Any:
        got = yield "first"
        if fail:
            raise Boom(got)
        return ("done", got)

    for step in (F.native.send, _py_step):
        g = gen(False)
        assert step(g, None) == (False, "first")
        assert step(g, 5) == (True, ("done", 5))
        g = gen(True)
        step(g, None)
        with pytest.raises(Boom) as info:
            step(g, "why")
        assert info.value.args == ("why",)
        with pytest.raises(AttributeError):
            step(42, None)  # no ``send``: the error of calling it, not a crash

    async def coro(x: int) -> int:
        return x * 2

    c = coro(21)
    assert F.native.send(c, None) == (True, 42)
    with pytest.raises(TypeError):
        F.native.send(c)  # type: ignore[call-arg]
