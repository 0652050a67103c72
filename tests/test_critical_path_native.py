"""The compiled critical-path walk (``analysis/_walk.c``) against the Python walk it replaces.

The Python walk is the reference: it is what the contract tests in test_critical_path.py check
(they run on whichever walk is active).  Here both walks get the same forests, including what
those tests avoid on purpose: tied ends and starts (the input-order rule), children outside
their parent's window, several traces and roots, and deep chains.
"""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spans import make_spans, sid

from tracelens.analysis import analyze_traces
from tracelens.analysis import critical_path as cp

pytest.importorskip("tracelens.analysis._walk")
pytestmark = pytest.mark.skipif(cp._native is None, reason="TRACELENS_NO_NATIVE is set")


def _sections(table, native: bool, monkeypatch: pytest.MonkeyPatch) -> pl.DataFrame:
    with monkeypatch.context() as m:
        m.setattr(cp, "USE_NATIVE", native)
        return analyze_traces(table).sections


@st.composite
def forests(draw: st.DrawFn) -> list[dict]:
    n = draw(st.integers(min_value=1, max_value=60))
    span = draw(st.sampled_from([8, 40, 1000]))  # small ranges: many ties
    rows = []
    for i in range(n):
        a = draw(st.integers(0, span))
        b = draw(st.integers(a, span + 5))
        parent = None if i == 0 or draw(st.integers(0, 9)) == 0 else draw(st.integers(0, i - 1))
        rows.append(
            {
                "id": i,
                "trace": draw(st.sampled_from(["a" * 32, "b" * 32])),
                "parent": parent,
                "start": a,
                "end": b,
                "span_kind": draw(st.sampled_from(["internal", "client", "producer", "consumer"])),
            }
        )
    return rows


@settings(deadline=None)
@given(forests())
def test_compiled_walk_equals_the_python_walk(rows: list[dict]) -> None:
    table = make_spans(rows)
    with pytest.MonkeyPatch.context() as mp:
        ours = _sections(table, True, mp)
        reference = _sections(table, False, mp)
    assert ours.equals(reference)


def test_deep_chain_with_ties(monkeypatch: pytest.MonkeyPatch) -> None:
    """20k levels (the frame stack grows many times) and a wide fan of tied children."""
    depth = 20_000
    rows = [
        {"id": i, "parent": i - 1 if i else None, "start": i, "end": 2 * depth - i}
        for i in range(depth)
    ]
    rows += [
        {"id": depth + j, "parent": 7, "start": 7 + j % 3, "end": 2 * depth} for j in range(500)
    ]
    table = make_spans(rows)
    ours = _sections(table, True, monkeypatch)
    assert ours.equals(_sections(table, False, monkeypatch))
    # the tied fan reaches past span 7's end: the earliest start, then input order, wins
    assert sid(depth) in ours["span_id"].to_list()


def test_bad_arrays_raise_instead_of_crashing() -> None:
    import numpy as np

    from tracelens.analysis import _walk  # type: ignore[attr-defined]

    z = np.zeros(3, np.int64)
    off = np.array([0, 1, 1, 1], np.int64)
    with pytest.raises(ValueError, match="out of range"):
        _walk.walk(z, z, off, np.array([9], np.int64), z, np.array([0], np.int64))
    with pytest.raises(ValueError, match="out of range"):
        _walk.walk(z, z, np.zeros(4, np.int64), np.zeros(0, np.int64), z, np.array([3], np.int64))
    with pytest.raises(TypeError, match="int64"):
        _walk.walk(z.astype(np.int32), z, off, np.array([1], np.int64), z, z)
