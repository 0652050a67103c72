"""The what-if replay (tracelens.analysis.findings.replay) on hand-made and random trees."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spans import make_spans

from tracelens.analysis import analyze_traces
from tracelens.analysis.findings import replay as rp
from tracelens.analysis.findings.replay import Change, Replayed, replay, retime
from tracelens.analysis.findings.timeline import Timeline, build_timeline
from tracelens.schema import COLUMNS

MS = 1_000_000


def timeline(rows: list[dict]) -> tuple[object, Timeline]:
    ta = analyze_traces(make_spans(rows))
    return ta, build_timeline(ta.tree)


def retimed_spans(
    spans: pl.DataFrame, tl: Timeline, result: Replayed, traces: Iterable[int]
) -> pl.DataFrame:
    """The span table of ``traces`` (trace numbers) with the replay's times, for re-analysis."""
    rows = np.flatnonzero(np.isin(tl.trace, np.fromiter(traces, dtype=np.int64)))
    start, end = retime(tl, result, rows.tolist())
    keep = [c for c in spans.columns if c in COLUMNS]
    sub = spans.select(keep)[rows.tolist()]
    return sub.with_columns(pl.Series("start_ns", start), pl.Series("end_ns", end))


def row_of(ta: object, span: int) -> int:
    """The analysis row of test span ``span`` (rows are reordered by trace)."""
    ids = ta.spans["span_id"].to_list()  # type: ignore[attr-defined]
    return ids.index(f"{span + 1:016x}")


SEQUENTIAL = [
    {"id": 0, "start": 0, "end": 230 * MS, "name": "agent"},
    {"id": 1, "parent": 0, "start": 10 * MS, "end": 110 * MS, "name": "fetch_a"},
    {"id": 2, "parent": 0, "start": 110 * MS, "end": 210 * MS, "name": "fetch_b"},
    {"id": 3, "parent": 0, "start": 215 * MS, "end": 225 * MS, "name": "answer"},
]


def test_no_change_gives_the_observed_latency() -> None:
    _, tl = timeline(SEQUENTIAL)
    assert replay(tl, Change()).latency.tolist() == [230 * MS]


def test_two_sequential_independent_hops_in_parallel_save_one_hop() -> None:
    ta, tl = timeline(SEQUENTIAL)
    a, b = row_of(ta, 1), row_of(ta, 2)
    got = replay(tl, Change.of(groups=[[a, b]])).latency[0]
    assert got == pytest.approx(130 * MS)  # 100 ms saved; answer keeps its 5 ms gap


def test_the_hop_after_a_group_waits_for_the_slowest_member() -> None:
    rows = [dict(r) for r in SEQUENTIAL]
    rows[1]["end"] = 40 * MS  # fetch_a 30 ms, then fetch_b 100 ms (starting at 110)
    ta, tl = timeline(rows)
    got = replay(tl, Change.of(groups=[[row_of(ta, 1), row_of(ta, 2)]])).latency[0]
    # The 70 ms between fetch_a's end and fetch_b's start is the agent's own time: it stays,
    # before the group.  So both start at 80 ms; fetch_b (100 ms) ends at 180, answer follows
    # 5 ms later (185-195) and the agent's 5 ms tail: 200 ms.
    assert got == pytest.approx(200 * MS)


def test_the_parent_work_between_moved_hops_is_kept() -> None:
    # The case: a parent computes for 50 ms between two 50 ms hops.  Running the hops
    # together can save one hop (50 ms), never the parent's work as well (100 ms).
    rows = [
        {"id": 0, "start": 0, "end": 150 * MS, "name": "agent"},
        {"id": 1, "parent": 0, "start": 0, "end": 50 * MS, "name": "fetch_a"},
        {"id": 2, "parent": 0, "start": 100 * MS, "end": 150 * MS, "name": "fetch_b"},
    ]
    ta, tl = timeline(rows)
    got = replay(tl, Change.of(groups=[[row_of(ta, 1), row_of(ta, 2)]])).latency[0]
    assert got == pytest.approx(100 * MS)


def test_a_retry_inside_a_group_still_follows_its_failed_attempt() -> None:
    rows = [
        {"id": 0, "start": 0, "end": 300 * MS},
        {"id": 1, "parent": 0, "start": 0, "end": 100 * MS},  # fails
        {"id": 2, "parent": 0, "start": 100 * MS, "end": 200 * MS},  # its retry
        {"id": 3, "parent": 0, "start": 200 * MS, "end": 300 * MS},  # independent
    ]
    ta, tl = timeline(rows)
    a, b, c = (row_of(ta, i) for i in (1, 2, 3))
    got = replay(tl, Change.of(groups=[[a, b, c]], deps={b: a})).latency[0]
    assert got == pytest.approx(200 * MS)


def test_an_instant_repeat_moves_what_follows_it() -> None:
    ta, tl = timeline(SEQUENTIAL)
    got = replay(tl, Change.of(instant=[row_of(ta, 2)])).latency[0]
    assert got == pytest.approx(130 * MS)


def test_halving_self_time_scales_offsets_gaps_and_tail() -> None:
    ta, tl = timeline(SEQUENTIAL)
    # The root's own time: 10 ms before fetch_a, 5 ms gap before answer, 5 ms tail.
    got = replay(tl, Change.of(factor={row_of(ta, 0): 0.5})).latency[0]
    assert got == pytest.approx(230 * MS - 10 * MS)


def test_overlapping_siblings_are_not_serialised() -> None:
    rows = [
        {"id": 0, "start": 0, "end": 100},
        {"id": 1, "parent": 0, "start": 0, "end": 90},
        {"id": 2, "parent": 0, "start": 10, "end": 50},  # inside 1's window: not after it
        {"id": 3, "parent": 0, "start": 95, "end": 100},  # after both
    ]
    ta, tl = timeline(rows)
    # Making span 2 instant changes nothing: span 1 still decides when 3 can start.
    assert replay(tl, Change.of(instant=[row_of(ta, 2)])).latency[0] == 100
    # Making span 1 instant: 3 still waits for 2 (ends at 50), then keeps its 5 ns gap.
    assert replay(tl, Change.of(instant=[row_of(ta, 1)])).latency[0] == pytest.approx(60)


def test_async_consumer_children_never_delay_their_parent() -> None:
    rows: list[dict] = [
        {"id": 0, "start": 0, "end": 100, "span_kind": "producer"},
        {"id": 1, "parent": 0, "start": 10, "end": 500, "span_kind": "consumer"},
        {"id": 2, "parent": 0, "start": 20, "end": 80},
    ]
    ta, tl = timeline(rows)
    assert replay(tl, Change.of(instant=[row_of(ta, 2)])).latency[0] == pytest.approx(40)


def test_deep_trace_replays_without_recursion() -> None:
    depth = 20_000
    rows = [
        {"id": i, "parent": i - 1 if i else None, "start": i, "end": 4 * depth - i}
        for i in range(depth)
    ]
    ta, tl = timeline(rows)
    leaf = row_of(ta, depth - 1)
    got = replay(tl, Change.of(instant=[leaf])).latency[0]
    leaf_ns = (4 * depth - (depth - 1)) - (depth - 1)
    assert got == pytest.approx(4 * depth - leaf_ns)


# --- random forests ------------------------------------------------------------------------


@st.composite
def forests(draw: st.DrawFn) -> list[dict]:
    """Several traces of random shape: nested, overlapping, sticking out, zero-length, tied."""
    rows: list[dict] = []
    n_traces = draw(st.integers(1, 4))
    next_id = 0
    for t in range(n_traces):
        n = draw(st.integers(1, 25))
        base = next_id
        for i in range(n):
            start = draw(st.integers(0, 1000))
            dur = draw(st.sampled_from([0, 1, 5, 50, draw(st.integers(0, 600))]))
            parent = None if i == 0 else base + draw(st.integers(0, i - 1))
            rows.append(
                {
                    "id": next_id,
                    "parent": parent,
                    "start": start,
                    "end": start + dur,
                    "trace": f"{t + 1:032x}",
                    "span_kind": draw(
                        st.sampled_from(["internal", "client", "producer", "consumer"])
                    ),
                }
            )
            next_id += 1
    return rows


@st.composite
def forests_and_changes(draw: st.DrawFn) -> tuple[list[dict], dict]:
    rows = draw(forests())
    n = len(rows)
    pick = st.integers(0, n - 1)
    instant = draw(st.lists(pick, max_size=4))
    factor = {k: draw(st.floats(0.0, 1.0)) for k in draw(st.lists(pick, max_size=3))}
    group_of = draw(st.lists(pick, max_size=6))
    return rows, {"instant": instant, "factor": factor, "group": group_of}


def _change(ta: object, tl: Timeline, spec: dict) -> Change:
    rows = [row_of(ta, i) for i in spec["group"]]
    # A group is made of siblings: keep those sharing the first one's parent.
    groups = []
    if rows:
        p = tl.parent[rows[0]]
        sib = sorted({r for r in rows if tl.parent[r] == p and p >= 0})
        if len(sib) >= 2:
            groups.append(sib)
    return Change.of(
        instant=[row_of(ta, i) for i in spec["instant"]],
        factor={row_of(ta, k): v for k, v in spec["factor"].items()},
        groups=groups,
    )


@settings(deadline=None)
@given(forests())
def test_no_change_reproduces_every_latency(rows: list[dict]) -> None:
    ta, tl = timeline(rows)
    got = replay(tl, Change()).latency
    assert got.tolist() == ta.traces["duration_ns"].to_list()  # type: ignore[attr-defined]


@settings(deadline=None)
@given(forests_and_changes())
def test_shorter_or_earlier_never_makes_a_trace_slower(case: tuple[list[dict], dict]) -> None:
    rows, spec = case
    ta, tl = timeline(rows)
    got = replay(tl, _change(ta, tl, spec)).latency
    assert np.all(got <= tl.latency + 1e-6)
    assert np.all(got >= 0)


@settings(deadline=None)
@given(forests_and_changes())
def test_retimed_traces_reanalysed_give_the_replayed_latency(
    case: tuple[list[dict], dict],
) -> None:
    """The projected trace goes through the unchanged critical-path analysis."""
    rows, spec = case
    ta, tl = timeline(rows)
    result = replay(tl, _change(ta, tl, spec))
    again = analyze_traces(retimed_spans(ta.spans, tl, result, range(tl.n_traces)))  # type: ignore[attr-defined]
    assert again.traces["duration_ns"].to_list() == pytest.approx(result.latency.tolist(), abs=1)


@pytest.mark.system
@settings(deadline=None)
@given(forests_and_changes())
def test_vectorised_rounds_agree_with_the_plain_loop(case: tuple[list[dict], dict]) -> None:
    rows, spec = case
    ta, tl = timeline(rows)
    change = _change(ta, tl, spec)
    saved = rp._FEW_PARENTS, rp._WIDE
    try:
        rp._FEW_PARENTS, rp._WIDE = 0, 1 << 30  # every round vectorised
        vector = replay(tl, change)
        rp._WIDE = 2  # vectorised, but parents of three or more children one by one
        mixed = replay(tl, change)
        rp._FEW_PARENTS = 1 << 30  # every round one parent at a time
        scalar = replay(tl, change)
    finally:
        rp._FEW_PARENTS, rp._WIDE = saved
    assert np.allclose(vector.latency, scalar.latency)
    assert np.allclose(vector.dur, scalar.dur)
    assert np.allclose(mixed.dur, scalar.dur)


def pred_counts_reference(
    kids: np.ndarray,
    ekids: np.ndarray,
    parent: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    row: np.ndarray,
    koff: np.ndarray,
) -> np.ndarray:
    """``timeline._pred_counts`` by one sort of children and queries together (any time range):
    the reference the merge of composite keys is checked against."""
    m = len(kids)
    kp = np.concatenate([parent[ekids], parent[kids]])
    k1 = np.concatenate([end[ekids], start[kids]])
    k2 = np.concatenate([start[ekids], start[kids]])
    k3 = np.concatenate([row[ekids], row[kids]])
    is_item = np.concatenate([np.ones(m, dtype=np.int64), np.zeros(m, dtype=np.int64)])
    # On a full tie the query sorts first: only strictly smaller siblings are predecessors.
    order = np.lexsort((is_item, k3, k2, k1, kp))
    items_before = np.cumsum(is_item[order]) - is_item[order]
    counts = np.empty(2 * m, dtype=np.int64)
    counts[order] = items_before
    q = counts[m:]
    return q - koff[parent[kids]]


@pytest.mark.system
@settings(deadline=None)
@given(forests(), st.sampled_from([1, 1 << 52]))
def test_predecessor_counts_match_the_sort_based_reference(rows: list[dict], scale: int) -> None:
    """``scale`` 2**52 makes the windows too long for the composite keys (up to 7e18 ns), so
    the counts come from the times' ranks instead."""
    rows = [{**r, "start": r["start"] * scale, "end": r["end"] * scale} for r in rows]
    _, tl = timeline(rows)
    ref = pred_counts_reference(tl.kids, tl.ekids, tl.parent, tl.start, tl.end, tl.row, tl.koff)
    assert tl.lp[tl.kids].tolist() == ref.tolist()


@settings(deadline=None)
@given(forests())
def test_depths_count_ancestors(rows: list[dict]) -> None:
    _, tl = timeline(rows)
    for i in range(tl.n):
        d, p = 0, int(tl.parent[i])
        while p >= 0:
            d, p = d + 1, int(tl.parent[p])
        assert tl.depth[i] == d
