"""What-if replay: re-time traces with a change applied and read off their new latency.

Every finding type states its remedy as a :class:`Change` (spans made instant, sibling hops
started together, self time scaled) and gets its saving from :func:`replay`, so all savings come
from one model of how a trace's spans depend on each other.

The model (all times are the observed ones unless said otherwise):

* A span keeps its duration unless the change touches it or its children.  A span's children it
  *waits on* are those the critical-path walk may wait on (not a CONSUMER under a PRODUCER) and
  that overlap its window.  Other children follow their parent rigidly and never delay it.
* Among the waited-on children of one parent, child ``c`` depends on every sibling that had
  ended by the time ``c`` started (its *predecessors*; ties between zero-length siblings go by
  start, then input order).  With predecessors, ``c`` starts at the latest new end among them
  plus the observed gap ``start(c) - max end(predecessors)``; without, it starts at its
  parent's new start plus its observed offset.  This is happens-before by timestamps: anything
  that finished before ``c`` began may have fed it, so nothing is ever moved ahead of its inputs.
* A span with waited-on children ends at the latest new end among them (a child sticking out
  of the parent's end counts up to the parent's end) plus the parent's observed tail, the self
  time after its last child.  A span without them ends at its new start plus its duration.
* Changes: an *instant* span takes no time (its subtree with it); a span with a self-time
  *factor* f has its leaf duration, its children's (positive) offsets and gaps and its tail
  scaled by f; the members of a *together* group (waited-on siblings) all start when the
  group's first member (its lead) starts, except that a member with an in-group dependency (a
  retry after its failed attempt, a repeat of an earlier member) starts after that member
  ends, plus the observed gap.  The parent's own work between the members (the observed gaps
  before the moved members: its CPU, or time nothing explains) is not dropped: the group starts
  that much after its lead did, as if that work ran first.  Spans that followed a group member
  keep depending on all of them, so they wait for the slowest (the join).
* A trace's latency is the duration of its main root, chosen among the re-timed roots by the
  rule of ``tree.main_roots`` (docs/critical-path.md, rule 1).

With no change the model reproduces every observed time exactly, and since every rule is a max
of sums with non-negative coefficients, a change that only shortens spans or starts them earlier
never makes a trace slower.  :func:`retime` turns a replay into new start/end times for whole
traces, so the unchanged critical-path machinery (``analyze_traces``) can walk the projected
trace.

Only spans whose subtree changed are recomputed: the siblings under each changed span's parent,
then under the grandparent, and so on up to the root; everything below an unchanged span moves
rigidly with it.  Parents at the same depth are processed together, one sibling rank at a time,
with NumPy over all traces at once; a few stragglers (very wide or very deep traces) finish in a
plain loop.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from tracelens.analysis.findings.timeline import Timeline, below, build_timeline
from tracelens.analysis.tree import main_roots

# Parents with more children than this are scanned one by one (a rank-by-rank NumPy pass would
# take one step per child); below this many parents in a round, the plain loop is cheaper.
_WIDE = 128
_FEW_PARENTS = 16


_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass
class Change:
    """A what-if, over the rows of a :class:`Timeline` (``TraceAnalysis.spans`` rows).

    ``members``/``group`` list the hops to start together and their group number (members of
    one group are siblings); ``dep_rows``/``dep_on`` the members that must still wait for an
    earlier member; ``factor_rows``/``factor`` the spans whose self time is scaled.
    """

    instant: np.ndarray = field(default_factory=lambda: _EMPTY)
    factor_rows: np.ndarray = field(default_factory=lambda: _EMPTY)
    factor: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    members: np.ndarray = field(default_factory=lambda: _EMPTY)
    group: np.ndarray = field(default_factory=lambda: _EMPTY)
    dep_rows: np.ndarray = field(default_factory=lambda: _EMPTY)
    dep_on: np.ndarray = field(default_factory=lambda: _EMPTY)

    @classmethod
    def of(
        cls,
        *,
        instant: Iterable[int] = (),
        factor: dict[int, float] | None = None,
        groups: Iterable[Iterable[int]] = (),
        deps: dict[int, int] | None = None,
    ) -> Change:
        """Build from plain Python collections (tests, small changes)."""
        members: list[int] = []
        gid: list[int] = []
        for k, g in enumerate(groups):
            for m in g:
                members.append(m)
                gid.append(k)
        factor = factor or {}
        deps = deps or {}
        return cls(
            instant=np.asarray(sorted(set(instant)), dtype=np.int64),
            factor_rows=np.asarray(list(factor), dtype=np.int64),
            factor=np.asarray(list(factor.values()), dtype=np.float64),
            members=np.asarray(members, dtype=np.int64),
            group=np.asarray(gid, dtype=np.int64),
            dep_rows=np.asarray(list(deps), dtype=np.int64),
            dep_on=np.asarray(list(deps.values()), dtype=np.int64),
        )

    def rows(self, n: int) -> np.ndarray:
        mark = np.zeros(n, dtype=bool)
        mark[self.instant] = True
        mark[self.factor_rows] = True
        mark[self.members] = True
        return np.flatnonzero(mark)


@dataclass
class Replayed:
    """New duration of every span, new offset of every child, new latency of every trace."""

    dur: np.ndarray
    rel: np.ndarray  # new start relative to the parent's new start
    collapsed: np.ndarray  # bool: made instant (with its subtree)
    latency: np.ndarray  # per trace (ns, float)
    main_root: np.ndarray


class _State:
    """Mutable arrays of one replay."""

    def __init__(self, timeline: Timeline, change: Change) -> None:
        n = timeline.n
        self.timeline = timeline
        self.D = timeline.dur.copy()
        self.R = timeline.off.copy()
        self.E = np.zeros(n, dtype=np.float64)
        self.f = np.ones(n, dtype=np.float64)
        self.lead = np.full(n, -1, dtype=np.int64)
        self.dep = np.full(n, -1, dtype=np.int64)
        self.delay = np.zeros(n, dtype=np.float64)  # per group lead: the parent work moved
        self.instant = np.zeros(n, dtype=bool)
        self.f[change.factor_rows] = np.clip(change.factor, 0.0, None)
        # Only children their parent waits on take part: the others never delay anything.
        keep = timeline.waited[change.members]
        if keep.any():
            m, g = change.members[keep], change.group[keep]
            order = np.lexsort((timeline.row[m], timeline.start[m], g))
            m, g = m[order], g[order]
            first = np.concatenate([[True], g[1:] != g[:-1]])
            lead = m[first][np.cumsum(first) - 1]
            sibling = timeline.parent[lead] == timeline.parent[m]  # a group is made of siblings
            self.lead[m[~first & sibling]] = lead[~first & sibling]
            # The parent's own work between the members (its CPU, or an unexplained gap) is
            # still done: it moves before the group, which starts that much after its lead did.
            moved = ~first & sibling
            np.add.at(self.delay, lead[moved], np.maximum(timeline.gap[m[moved]], 0.0))
        d, on = change.dep_rows, change.dep_on
        has_lead = (
            (self.lead[d] >= 0)
            & timeline.waited[on]
            & (timeline.parent[on] == timeline.parent[d])
            & (timeline.kpos[on] < timeline.kpos[d])  # an earlier sibling
        )
        self.dep[d[has_lead]] = on[has_lead]
        # A member that waits for an earlier one keeps its own gap after it: not moved.
        chained = d[has_lead]
        np.subtract.at(self.delay, self.lead[chained], np.maximum(timeline.gap[chained], 0.0))
        self.instant[change.instant] = True


def replay(timeline: Timeline, change: Change) -> Replayed:
    """Re-time every trace touched by ``change``; the others keep their observed times."""
    st = _State(timeline, change)
    touched = change.rows(timeline.n)
    leaf = ~timeline.has_kids(touched)
    scaled = touched[leaf & (st.f[touched] != 1.0)]
    st.D[scaled] = timeline.dur[scaled] * st.f[scaled]
    st.D[st.instant] = 0.0
    dirty = np.concatenate(
        [
            timeline.parent[touched[timeline.waited[touched]]],
            touched[~leaf & (st.f[touched] != 1.0)],
        ]
    )
    _run_rounds(st, dirty)
    new_end = np.rint(timeline.start + st.D).astype(np.int64)
    main = main_roots(
        timeline.roots, timeline.trace, timeline.start, new_end, timeline.row, timeline.n_traces
    )
    lat = np.where(main >= 0, st.D[np.maximum(main, 0)], 0.0)
    collapsed = _collapsed(timeline, st.instant)
    return Replayed(dur=st.D, rel=st.R, collapsed=collapsed, latency=lat, main_root=main)


class _Pending:
    """Parents waiting to be re-scanned, bucketed by depth (deepest first), each queued once."""

    def __init__(self, timeline: Timeline) -> None:
        self.depth = timeline.depth
        self.queued = np.zeros(timeline.n, dtype=bool)
        self.buckets: dict[int, list[np.ndarray]] = {}
        self.heap: list[int] = []

    def add(self, rows: np.ndarray) -> None:
        rows = rows[~self.queued[rows]]
        if len(rows) == 0:
            return
        rows = np.unique(rows)
        self.queued[rows] = True
        d = self.depth[rows]
        if (d == d[0]).all():
            self._put(int(d[0]), rows)
            return
        order = np.argsort(d, kind="stable")
        rows, d = rows[order], d[order]
        for part in np.split(rows, np.flatnonzero(d[1:] != d[:-1]) + 1):
            self._put(int(self.depth[part[0]]), part)

    def _put(self, d: int, rows: np.ndarray) -> None:
        if d not in self.buckets:
            self.buckets[d] = []
            heapq.heappush(self.heap, -d)
        self.buckets[d].append(rows)

    def pop(self) -> np.ndarray | None:
        if not self.heap:
            return None
        parts = self.buckets.pop(-heapq.heappop(self.heap))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _run_rounds(st: _State, dirty: np.ndarray) -> None:
    """Re-scan dirty parents deepest first; a parent whose duration changed dirties its own.

    A big batch of parents at one depth goes rank by rank through NumPy; a small one (deep or
    narrow traces) parent by parent, which costs less than NumPy's per-call overhead there.
    """
    timeline = st.timeline
    pending = _Pending(timeline)
    pending.add(dirty)
    while (now := pending.pop()) is not None:
        now = now[~st.instant[now]]
        before = st.D[now].copy()
        if len(now) < _FEW_PARENTS:
            for p in now.tolist():
                _scan_scalar(st, p)
        else:
            wide = (timeline.koff[now + 1] - timeline.koff[now]) > _WIDE
            for p in now[wide].tolist():
                _scan_scalar(st, p)
            _scan_vector(st, now[~wide])
        moved = now[(st.D[now] != before) & timeline.waited[now]]
        pending.add(timeline.parent[moved])


def _scan_scalar(st: _State, p: int) -> None:
    """Re-time the waited-on children of ``p`` and its new duration (the reference version)."""
    timeline = st.timeline
    k0, k1 = int(timeline.koff[p]), int(timeline.koff[p + 1])
    f = float(st.f[p])
    kids = timeline.kids[k0:k1].tolist()
    ekids = timeline.ekids[k0:k1].tolist()
    E, R, D = st.E, st.R, st.D
    runmax = -np.inf
    folded = 0
    max_e = -np.inf
    for c in kids:
        need = int(timeline.lp[c])
        while folded < need:
            runmax = max(runmax, E[ekids[folded]])
            folded += 1
        lead = int(st.lead[c])
        if lead >= 0:
            r = R[lead]
            dep = int(st.dep[c])
            if dep >= 0:
                r = max(r, E[dep] + (timeline.start[c] - timeline.end[dep]) * f)
        elif need > 0:
            r = runmax + timeline.gap[c] * f
        else:
            r = _scaled_offset(float(timeline.off[c]), f)
        r += st.delay[c] * f
        R[c] = r
        E[c] = r + max(D[c] - timeline.oh[c], 0.0)
        max_e = max(max_e, E[c])
    D[p] = max(0.0, max_e + timeline.tail[p] * f)


def _scaled_offset(off: float, f: float) -> float:
    """A child's offset from its parent's start is the parent's own time only when positive
    (a child that started before its parent, by clock skew, keeps its offset)."""
    return off * f if off > 0 else off


def _scaled_offsets(off: np.ndarray, f: np.ndarray) -> np.ndarray:
    """:func:`_scaled_offset` over arrays."""
    return np.where(off > 0, off * f, off)


def _segments(koff: np.ndarray, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flattened CSR slots of ``parents``: (slot, local parent id, rank within the parent)."""
    counts = koff[parents + 1] - koff[parents]
    local = np.repeat(np.arange(len(parents), dtype=np.int64), counts)
    first = np.repeat(koff[parents], counts)
    ends = np.cumsum(counts)
    rank = np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) - np.repeat(
        ends - counts, counts
    )
    return first + rank, local, rank


def _scan_vector(st: _State, parents: np.ndarray) -> None:
    """:func:`_scan_scalar` for many parents at once, one sibling rank per step.

    The children of ``parents`` are copied into compact local arrays first (slot order), so
    each step touches only those, not the whole span table.
    """
    if len(parents) == 0:
        return
    timeline = st.timeline
    slots, local, rank = _segments(timeline.koff, parents)
    c = timeline.kids[slots]
    flat = np.arange(len(slots), dtype=np.int64)
    item = flat + (timeline.e2k[slots] - slots)  # local index of the span in each end-order slot
    f_par = st.f[parents]
    f = f_par[local]
    gap = timeline.gap[c] * f
    off = _scaled_offsets(timeline.off[c], f)
    need = timeline.lp[c]
    dur = np.maximum(st.D[c] - timeline.oh[c], 0.0)
    lead_row = st.lead[c]
    has_lead = lead_row >= 0
    lead = np.where(has_lead, flat + (timeline.kpos[np.maximum(lead_row, 0)] - slots), -1)
    dep_row = st.dep[c]
    has_dep = dep_row >= 0
    d0 = np.maximum(dep_row, 0)
    dep = np.where(has_dep, flat + (timeline.kpos[d0] - slots), -1)
    dep_gap = np.where(has_dep, (timeline.start[c] - timeline.end[d0]) * f, 0.0)
    delay = st.delay[c] * f
    R = np.zeros(len(slots))
    E = np.zeros(len(slots))
    fold = timeline.fold[slots]
    k_order = np.argsort(rank, kind="stable")
    n_ranks = int(rank.max()) + 1
    k_bounds = np.searchsorted(rank[k_order], np.arange(n_ranks + 1))
    # End-order slots folded into a parent's running max at each rank: fold ranks grow along
    # the end order, so each (rank, parent) batch is one contiguous run, reduced in one call.
    f_order = np.argsort(fold, kind="stable")
    f_item = item[f_order]
    f_fold = fold[f_order]
    f_local = local[f_order]
    starts = np.flatnonzero(
        np.concatenate([[True], (f_fold[1:] != f_fold[:-1]) | (f_local[1:] != f_local[:-1])])
    )
    g_fold = f_fold[starts]
    g_local = f_local[starts]
    g_bounds = np.searchsorted(g_fold, np.arange(n_ranks + 1))
    runmax = np.full(len(parents), -np.inf)
    max_e = np.full(len(parents), -np.inf)
    for r in range(n_ranks):
        g0, g1 = g_bounds[r], g_bounds[r + 1]
        if g1 > g0:
            lo = starts[g0]
            hi = starts[g1] if g1 < len(starts) else len(f_item)
            got = np.maximum.reduceat(E[f_item[lo:hi]], starts[g0:g1] - lo)
            lids = g_local[g0:g1]
            runmax[lids] = np.maximum(runmax[lids], got)
        ki = k_order[k_bounds[r] : k_bounds[r + 1]]
        lid = local[ki]
        rr = np.where(need[ki] > 0, runmax[lid] + gap[ki], off[ki]) + delay[ki]
        mem = has_lead[ki]
        if mem.any():
            km = ki[mem]
            rm = R[lead[km]]
            hd = has_dep[km]
            if hd.any():
                kd = km[hd]
                rm[hd] = np.maximum(rm[hd], E[dep[kd]] + dep_gap[kd])
            rr[mem] = rm
        R[ki] = rr
        e = rr + dur[ki]
        E[ki] = e
        max_e[lid] = np.maximum(max_e[lid], e)
    st.R[c] = R
    st.D[parents] = np.maximum(0.0, max_e + timeline.tail[parents] * f_par)


def _collapsed(timeline: Timeline, instant: np.ndarray) -> np.ndarray:
    """Instant spans and everything below them."""
    if not instant.any():
        return instant.copy()
    return instant | below(timeline, instant)


def retime(timeline: Timeline, rp: Replayed, rows: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
    """New (start, end) of ``rows``, which must hold whole traces (every ancestor included)."""
    rows_arr = np.asarray(sorted(set(rows)), dtype=np.int64)
    order = rows_arr[np.argsort(timeline.depth[rows_arr], kind="stable")]
    ns: dict[int, float] = {}
    new_start = np.zeros(len(order), dtype=np.int64)
    new_end = np.zeros(len(order), dtype=np.int64)
    pos = {int(r): k for k, r in enumerate(rows_arr.tolist())}
    for s in order.tolist():
        p = int(timeline.parent[s])
        if p < 0:
            a = float(timeline.start[s])
        elif rp.collapsed[p]:
            a = ns[p]
        else:
            a = ns[p] + float(rp.rel[s])
        ns[s] = a
        d = 0.0 if rp.collapsed[s] else float(rp.dur[s])
        k = pos[s]
        new_start[k] = round(a)
        new_end[k] = round(a + d)
    return new_start, new_end


__all__ = ["Change", "Replayed", "Timeline", "build_timeline", "replay", "retime"]
