"""The static part of the what-if replay: each trace's waited-on children and what each
child depends on, as flat arrays over the rows of ``TraceAnalysis.spans``.

Computed once per analysis from the analysis' own tree (``TraceAnalysis.tree``: parents, main
roots, and which children their parent waits for), vectorised over all traces: children sorted
by start and by end under each parent (CSR), each child's predecessors as a prefix of its
siblings in end order, the observed offsets, gaps and tails the replay keeps, and each span's
depth.  See ``replay`` for the model these arrays encode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracelens.analysis.tree import Tree


@dataclass
class Timeline:
    """The static part of the replay model, computed once per analysis."""

    parent: np.ndarray
    start: np.ndarray
    end: np.ndarray
    dur: np.ndarray
    trace: np.ndarray
    row: np.ndarray
    n_traces: int
    roots: np.ndarray
    waited: np.ndarray  # bool: the parent waits on this span
    depth: np.ndarray
    koff: np.ndarray  # CSR over parents: waited children in start order ...
    kids: np.ndarray
    ekids: np.ndarray  # ... and the same children in end order (end, start, row)
    kpos: np.ndarray  # per span: its slot in ``kids`` (-1 when not waited on)
    e2k: np.ndarray  # per ``ekids`` slot: the ``kids`` slot of the same span
    lp: np.ndarray  # per child: how many siblings (a prefix of ekids) it depends on
    fold: np.ndarray  # per ekids slot: the start rank of the first child depending on it
    off: np.ndarray  # start - parent start
    gap: np.ndarray  # start - latest predecessor end
    oh: np.ndarray  # how far a child sticks out of its parent's end
    tail: np.ndarray  # per parent: end - latest (capped) child end
    main_root: np.ndarray  # per trace, observed
    latency: np.ndarray  # per trace, observed (ns)

    @property
    def n(self) -> int:
        return len(self.parent)

    def has_kids(self, rows: np.ndarray) -> np.ndarray:
        return self.koff[rows + 1] > self.koff[rows]


def build_timeline(tree: Tree) -> Timeline:
    """The replay structure of the tree of ``TraceAnalysis.spans`` (``TraceAnalysis.tree``).

    A child is waited on when its parent waits for it (``tree.waits``) and it overlaps the
    parent's window; a child wholly outside it cannot hold the parent up.
    """
    parent, start, end, trace, row = tree.parent, tree.start, tree.end, tree.trace, tree.row
    n = len(parent)
    n_traces = tree.n_traces
    has_p = parent >= 0
    p = np.where(has_p, parent, 0)
    waited = tree.waits & (start < end[p]) & (end > start[p])
    w = np.flatnonzero(waited)
    kids, ekids = _sorted_children(w, parent, start, end)
    koff = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(parent[w], minlength=n), out=koff[1:])
    lp = np.zeros(n, dtype=np.int64)
    lp[kids] = _pred_counts(kids, ekids, parent, start, end, row, koff)
    gap = np.zeros(n, dtype=np.float64)
    hp = kids[lp[kids] > 0]
    last_pred = ekids[koff[parent[hp]] + lp[hp] - 1]
    gap[hp] = start[hp] - end[last_pred]
    off = np.where(has_p, start - start[p], 0).astype(np.float64)
    oh = np.where(waited, np.maximum(end - end[p], 0), 0).astype(np.float64)
    tail = np.zeros(n, dtype=np.float64)
    par = np.flatnonzero(koff[1:] > koff[:-1])
    last = ekids[koff[par + 1] - 1]
    tail[par] = end[par] - np.minimum(end[last], end[par])
    fold = _fold_ranks(kids, ekids, parent, lp, koff, n)
    kpos = np.full(n, -1, dtype=np.int64)
    kpos[kids] = np.arange(len(kids), dtype=np.int64)
    main = tree.main_root
    return Timeline(
        parent=parent,
        start=start,
        end=end,
        dur=(end - start).astype(np.float64),
        trace=trace,
        row=row,
        n_traces=n_traces,
        roots=tree.roots,
        waited=waited,
        depth=_depths(parent),
        koff=koff,
        kids=kids,
        ekids=ekids,
        kpos=kpos,
        e2k=kpos[ekids],
        lp=lp,
        fold=fold,
        off=off,
        gap=gap,
        oh=oh,
        tail=tail,
        main_root=main,
        latency=np.where(main >= 0, end[main] - start[main], 0) if n else main,
    )


def _sorted_children(
    w: np.ndarray, parent: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Waited-on children by (parent, start, row) and by (parent, end, start, row).

    Rows of one trace are in input order and ``w`` is ascending, so the stable sort keeps input
    order on ties.  Children mostly follow their parents and each other, so the keys are nearly
    sorted already and the sort is cheap.
    """
    p, s = parent[w], start[w]
    kids = w[np.lexsort((s, p))]
    # From start order, a stable sort on (parent, end) leaves ties in (start, row) order.
    ekids = kids[np.lexsort((end[kids], parent[kids]))]
    return kids, ekids


def _pred_counts(
    kids: np.ndarray,
    ekids: np.ndarray,
    parent: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    row: np.ndarray,
    koff: np.ndarray,
) -> np.ndarray:
    """Per child (in ``kids`` order): siblings whose (end, start, row) < (start, start, row).

    Both lists are sorted by parent, then time, so one merge (a searchsorted of composite
    parent-and-time keys) counts the siblings that ended by each child's start; the rare exact
    ties with zero-length siblings are then settled one by one.
    """
    m = len(kids)
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    p_k = parent[kids]
    seg_first = np.concatenate([[True], p_k[1:] != p_k[:-1]])
    sid = np.cumsum(seg_first) - 1
    sid_e = _segment_of(ekids, parent, kids, seg_first)
    n_seg = int(sid[-1]) + 1
    keys = _merge_keys(start[kids], end[ekids], sid, sid_e, seg_first, n_seg)
    if keys is None:  # windows too long for the keys: compare the times' ranks (same order)
        ranks = np.unique(np.concatenate([start, end]), return_inverse=True)[1].reshape(-1)
        keys = _merge_keys(
            ranks[: len(start)][kids], ranks[len(start) :][ekids], sid, sid_e, seg_first, n_seg
        )
        assert keys is not None  # ranks are fewer than 2 * n: the keys always fit
    k_items, k_query = keys
    right = np.searchsorted(k_items, k_query, side="right")
    left = np.searchsorted(k_items, k_query, side="left")
    counts = right - koff[p_k]
    # Only a zero-length sibling at exactly this start can sort after it; it would be the last
    # of the tied block (ties are ordered by start, then row).
    tied = right > left
    maybe = np.flatnonzero(tied)
    maybe = maybe[start[ekids[right[maybe] - 1]] == start[kids[maybe]]]
    for j in maybe.tolist():
        # Siblings ending exactly at this start: only those that started earlier, or
        # zero-length ones earlier in input order, come before it.
        b = int(kids[j])
        tied = ekids[left[j] : right[j]]
        late = (start[tied] == start[b]) & (row[tied] >= row[b])
        counts[j] -= int(late.sum())
    return counts


def _merge_keys(
    kid_start: np.ndarray,
    ekid_end: np.ndarray,
    sid: np.ndarray,
    sid_e: np.ndarray,
    seg_first: np.ndarray,
    n_seg: int,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Composite (segment, time since the segment's first start) keys of the sibling ends
    (items) and starts (queries), or None when they would not fit in 62 bits."""
    seg_base = kid_start[seg_first]  # earliest child start of each segment
    rel_e = ekid_end - seg_base[sid_e]
    rel_s = kid_start - seg_base[sid]
    span = int(max(rel_e.max(), rel_s.max())) + 1
    if n_seg * span >= 2**62:
        return None
    return sid_e * span + rel_e, sid * span + rel_s


def _segment_of(
    ekids: np.ndarray, parent: np.ndarray, kids: np.ndarray, seg_first: np.ndarray
) -> np.ndarray:
    """For each ``ekids`` entry, the index of its parent's segment in ``kids`` order."""
    heads = parent[kids[seg_first]]  # parents in segment order (ascending)
    return np.searchsorted(heads, parent[ekids])


def _fold_ranks(
    kids: np.ndarray,
    ekids: np.ndarray,
    parent: np.ndarray,
    lp: np.ndarray,
    koff: np.ndarray,
    n: int,
) -> np.ndarray:
    """For each end-order slot j of a parent: the first start rank r with lp(kids[r]) > j."""
    if len(kids) == 0:
        return np.zeros(0, dtype=np.int64)
    big = np.int64(n + 2)
    keys = parent[kids] * big + lp[kids]  # sorted: by parent, then lp grows with start rank
    slot = np.arange(len(ekids), dtype=np.int64) - koff[parent[ekids]]
    q = parent[ekids] * big + slot
    return np.searchsorted(keys, q, side="right") - koff[parent[ekids]]


def _depths(parent: np.ndarray) -> np.ndarray:
    """Number of ancestors of every span, by pointer jumping (O(log depth) passes)."""
    n = len(parent)
    ids = np.arange(n, dtype=np.int64)
    anc = np.where(parent >= 0, parent, ids)
    dist = (parent >= 0).astype(np.int64)
    while True:
        nxt = anc[anc]
        if np.array_equal(nxt, anc):
            return dist
        dist = dist + dist[anc] * (anc != ids)
        anc = nxt


def below(timeline: Timeline, marked: np.ndarray) -> np.ndarray:
    """Spans with a marked ancestor (not counting themselves).

    Pointer jumping: after k passes each span knows its ancestors up to 2**k levels up, so a
    50,000-level trace takes 16 passes, and a usual one three or four.
    """
    ids = np.arange(timeline.n, dtype=np.int64)
    has_parent = timeline.parent >= 0
    anc = np.where(has_parent, timeline.parent, ids)
    flag = marked[anc] & has_parent
    while True:
        nxt = anc[anc]
        if np.array_equal(nxt, anc):
            return flag
        flag = flag | flag[anc]
        anc = nxt
