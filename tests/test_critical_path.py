"""The critical path contract (docs/critical-path.md) on hand-made and random trees."""

from __future__ import annotations

import random
from itertools import pairwise

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spans import TRACE, make_spans, sid

from tracelens.analysis import analyze_traces


def paths(table) -> dict[str, list[tuple[str, int, int]]]:
    ta = analyze_traces(table)
    out: dict[str, list[tuple[str, int, int]]] = {}
    for r in ta.sections.iter_rows(named=True):
        out.setdefault(r["root_span_id"], []).append((r["span_id"], r["start_ns"], r["end_ns"]))
    return out


def test_spec_example_case_2() -> None:
    # Root X [1, 101] with A [10, 50] and C [20, 60]: X[1,20], C[20,60], X[60,101].
    t = make_spans(
        [
            {"id": 0, "start": 1, "end": 101},
            {"id": 1, "parent": 0, "start": 10, "end": 50},
            {"id": 2, "parent": 0, "start": 20, "end": 60},
        ]
    )
    assert paths(t)[sid(0)] == [(sid(0), 1, 20), (sid(2), 20, 60), (sid(0), 60, 101)]


def test_touching_siblings_both_count() -> None:
    # A ends exactly when B starts: both are on the path (jaeger-ui dropped A).
    t = make_spans(
        [
            {"id": 0, "start": 0, "end": 100},
            {"id": 1, "parent": 0, "start": 10, "end": 40},
            {"id": 2, "parent": 0, "start": 40, "end": 90},
        ]
    )
    assert paths(t)[sid(0)] == [
        (sid(0), 0, 10),
        (sid(1), 10, 40),
        (sid(2), 40, 90),
        (sid(0), 90, 100),
    ]


def test_time_zero_is_a_time() -> None:
    t = make_spans([{"id": 0, "start": 0, "end": 10}, {"id": 1, "parent": 0, "start": 0, "end": 5}])
    assert paths(t)[sid(0)] == [(sid(1), 0, 5), (sid(0), 5, 10)]


def test_orphans_are_analysed_and_main_root_is_longest() -> None:
    t = make_spans(
        [
            {"id": 0, "start": 0, "end": 10},
            {"id": 1, "parent": 99, "start": 0, "end": 50},  # parent not exported
            {"id": 2, "parent": 1, "start": 5, "end": 20},
        ]
    )
    ta = analyze_traces(t)
    assert ta.traces["root_span_id"].to_list() == [sid(1)]
    assert ta.traces["duration_ns"].to_list() == [50]
    assert set(ta.sections["root_span_id"].unique()) == {sid(0), sid(1)}
    assert any("no parent" in w for w in ta.warnings)


def test_ties_on_clamped_end_prefer_earliest_start() -> None:
    # Both children overflow the parent's end, so both clamp to 100; the earlier start wins.
    t = make_spans(
        [
            {"id": 0, "start": 0, "end": 100},
            {"id": 1, "parent": 0, "start": 50, "end": 120},
            {"id": 2, "parent": 0, "start": 30, "end": 150},
        ]
    )
    assert paths(t)[sid(0)] == [(sid(0), 0, 30), (sid(2), 30, 100)]


def test_broken_input_warns_and_never_hangs() -> None:
    t = make_spans(
        [
            {"id": 0, "parent": 2, "start": 0, "end": 10},  # 0 -> 2 -> 1 -> 0: a cycle
            {"id": 1, "parent": 0, "start": 1, "end": 9},
            {"id": 2, "parent": 1, "start": 2, "end": 8},
            {"id": 3, "parent": 3, "start": 0, "end": 5},  # its own parent
            {"id": 4, "start": 20, "end": 10},  # ends before it starts
            {"id": 4, "start": 0, "end": 1},  # duplicate id
            {"id": "abc", "start": 0, "end": 1},  # id of the wrong length
        ]
    )
    ta = analyze_traces(t)
    text = " ".join(ta.warnings)
    assert "cycles were broken" in text
    assert "ended before they started" in text
    assert "repeated a (trace_id, span_id)" in text
    assert "span id that is not 16" in text
    # The cycle 0->2->1->0 is cut at its earliest-starting span, 0, which becomes the root.
    assert ta.traces["root_span_id"].to_list() == [sid(0)]


def test_deep_and_wide_trace() -> None:
    """100k spans, 50k levels: iterative, so no recursion limit and linear time."""
    depth, width = 50_000, 50_000
    rows = [
        {"id": i, "parent": i - 1 if i else None, "start": i, "end": 2 * depth - i}
        for i in range(depth)
    ]
    rows += [{"id": depth + j, "parent": 0, "start": 1, "end": 2 + j % 7} for j in range(width)]
    t = make_spans(rows)
    ta = analyze_traces(t)
    main = ta.sections.filter(pl.col("main"))
    assert main["start_ns"][0] == 0 and main["end_ns"][-1] == 2 * depth
    assert (main["end_ns"] - main["start_ns"]).sum() == 2 * depth
    # Every level of the chain owns its two 1 ns slivers, merged or not, and the deepest span
    # owns its whole window.
    assert main.filter(pl.col("span_id") == sid(depth - 1)).height == 1


# --- property tests on random trees -------------------------------------------------------


@st.composite
def trees(draw: st.DrawFn) -> list[dict]:
    n = draw(st.integers(min_value=1, max_value=40))
    kinds = ["internal", "client", "server", "producer", "consumer"]
    # Distinct starts and ends everywhere, so no tie needs the input-order rule.
    times = draw(st.lists(st.integers(0, 10_000), min_size=2 * n, max_size=2 * n, unique=True))
    rows = []
    for i in range(n):
        a, b = sorted(times[2 * i : 2 * i + 2])
        parent = None if i == 0 else draw(st.integers(0, i - 1))
        rows.append(
            {
                "id": i,
                "parent": parent,
                "start": a,
                "end": b,
                "span_kind": draw(st.sampled_from(kinds)),
            }
        )
    return rows


def descendants(rows: list[dict], root: int) -> set[int]:
    kids: dict[int, list[int]] = {}
    for r in rows:
        if r["parent"] is not None:
            kids.setdefault(r["parent"], []).append(r["id"])
    seen, stack = {root}, [root]
    while stack:
        for k in kids.get(stack.pop(), []):
            seen.add(k)
            stack.append(k)
    return seen


@settings(deadline=None)
@given(trees())
def test_sections_partition_the_root_window(rows: list[dict]) -> None:
    path = paths(make_spans(rows))[sid(0)]
    root = rows[0]
    assert path[0][1] == root["start"] and path[-1][2] == root["end"]
    for (_, _, e1), (_, s2, _) in pairwise(path):
        assert e1 == s2  # contiguous, no overlap, no gap
    assert all(s < e for _, s, e in path)  # zero-length sections dropped
    assert all(a[0] != b[0] for a, b in pairwise(path))  # merged
    assert sum(e - s for _, s, e in path) == root["end"] - root["start"]


@settings(deadline=None)
@given(trees())
def test_every_section_span_is_in_the_tree(rows: list[dict]) -> None:
    path = paths(make_spans(rows))[sid(0)]
    inside = {sid(i) for i in descendants(rows, 0)}
    assert {s for s, _, _ in path} <= inside


@settings(deadline=None)
@given(trees(), st.randoms(use_true_random=False))
def test_input_order_does_not_matter(rows: list[dict], rnd: random.Random) -> None:
    shuffled = rows[:]
    rnd.shuffle(shuffled)
    assert paths(make_spans(rows)) == paths(make_spans(shuffled))


@settings(deadline=None)
@given(trees(), st.data())
def test_shortening_an_off_path_span_keeps_the_path(rows: list[dict], data: st.DataObject) -> None:
    """A span off the path starts later (it got shorter): the path is the same.

    Shortening from the *end* is not covered on purpose: a sibling skipped because it overlapped
    the path can then end before the cursor and join it, under these (jaeger-ui) semantics.
    """
    before = paths(make_spans(rows))[sid(0)]
    # On the path: every span the walk went through, i.e. the owners and their ancestors.
    parent = {sid(r["id"]): r["parent"] for r in rows}
    on_path = set()
    for owner, _, _ in before:
        node: str | None = owner
        while node is not None and node not in on_path:
            on_path.add(node)
            p = parent[node]
            node = sid(p) if p is not None else None
    off = [r for r in rows if sid(r["id"]) not in on_path]
    if not off:
        return
    victim = data.draw(st.sampled_from(off))
    new_start = data.draw(st.integers(victim["start"], victim["end"]))
    changed = [dict(r, start=new_start) if r is victim else r for r in rows]
    assert paths(make_spans(changed))[sid(0)] == before


def test_multiple_traces_are_independent() -> None:
    a = [{"id": 0, "start": 0, "end": 10}, {"id": 1, "parent": 0, "start": 2, "end": 8}]
    b = [dict(r, trace="f" * 32) for r in a]
    one = analyze_traces(make_spans(a))
    both = analyze_traces(make_spans(a + b))
    assert both.traces.height == 2
    assert (
        both.sections.filter(pl.col("trace_id") == TRACE)
        .drop("_root", "_i")
        .equals(one.sections.drop("_root", "_i"))
    )


@pytest.mark.parametrize("n", [1, 7])
def test_latency_is_main_root_duration(n: int) -> None:
    rows = [{"id": i, "trace": f"{i:032x}", "start": 0, "end": (i + 1) * 1000} for i in range(n)]
    ta = analyze_traces(make_spans(rows))
    assert sorted(ta.traces["duration_ns"].to_list()) == [(i + 1) * 1000 for i in range(n)]
    assert np.all(ta.traces["spans"].to_numpy() == 1)
