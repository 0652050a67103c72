"""Turn a flat span table into a forest of flat arrays, whatever state the spans are in.

Everything here is vectorised over all traces at once (Polars joins, NumPy gathers); only the
rare broken parts of a trace (parent cycles) are walked in Python.  The forest is CSR-shaped:
``children[child_off[i]:child_off[i+1]]`` are span ``i``'s children in the order the critical
path walk wants them (latest end first, then earliest start, then input order).

The arrays (:class:`Tree`) are kept in the analysis result (``TraceAnalysis.tree``), so the
what-if replay's timeline derives from them instead of resolving parents again; whether a
parent waits for a child (:func:`waits_for`) is decided here, once, for both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")


@dataclass
class Tree:
    """Index arrays over the rows of the analysed spans (row i is span i of
    ``TraceAnalysis.spans``); computed once per analysis and only read afterwards."""

    parent: np.ndarray  # row of the parent in the tree, -1 for a root
    trace: np.ndarray  # trace number of each row (0..n_traces-1)
    trace_ids: list[str]
    main_root: np.ndarray  # per trace: row of the main root
    roots: np.ndarray  # rows of every root, all traces
    child_off: np.ndarray  # CSR offsets, len n+1
    children: np.ndarray  # CSR payload (rows), only children the walk may wait on
    start: np.ndarray  # int64 ns (end clamped to start where it was earlier)
    end: np.ndarray
    row: np.ndarray  # int64 input order (ties in the walk and the replay)
    waits: np.ndarray  # bool: the span's parent waits for it (``waits_for``)

    @property
    def n(self) -> int:
        return len(self.parent)

    @property
    def n_traces(self) -> int:
        return len(self.main_root)


@dataclass
class Forest(Tree):
    """A :class:`Tree` with the spans it indexes (deduplicated, grouped by trace)."""

    spans: pl.DataFrame  # has _row (input order) and _trace (trace number)
    warnings: list[str] = field(default_factory=list)

    def tree(self) -> Tree:
        """The index arrays alone (shared, not copied), without the span table."""
        return Tree(**{name: getattr(self, name) for name in Tree.__dataclass_fields__})


def depth_first(tree: Tree, rows: np.ndarray, first: int) -> list[tuple[int, int]]:
    """(row, depth) of ``rows`` (the rows of one trace) depth first, for display: children by
    start, then input order; the roots (rows whose parent is not among ``rows``) in that order
    too, with ``first`` (the main root) before them all.  The walk orders children its own way
    (``children``); this order is what a reader of a waterfall expects.  An explicit stack:
    traces can be 50,000 levels deep."""
    rows = np.asarray(rows, dtype=np.int64)
    parent = tree.parent[rows]
    is_root = ~np.isin(parent, rows)
    kids: dict[int, list[int]] = {}
    roots: list[int] = []
    for j in np.lexsort((rows, tree.start[rows])).tolist():
        if is_root[j]:
            roots.append(int(rows[j]))
        else:
            kids.setdefault(int(parent[j]), []).append(int(rows[j]))
    roots.sort(key=lambda r: r != first)  # stable: the rest keep their order
    out: list[tuple[int, int]] = []
    stack = [(r, 0) for r in reversed(roots)]
    while stack:
        node, depth = stack.pop()
        out.append((node, depth))
        stack.extend((k, depth + 1) for k in reversed(kids.get(node, ())))
    return out


def waits_for(parent: np.ndarray, span_kind: pl.Series) -> np.ndarray:
    """Per span: whether its parent waits for it.  Every child blocks its parent except a
    CONSUMER under a PRODUCER: the message is handled asynchronously (docs/critical-path.md)."""
    has_parent = parent >= 0
    consumer = (span_kind == "consumer").to_numpy()
    producer = (span_kind == "producer").to_numpy()
    return has_parent & ~(consumer & producer[np.where(has_parent, parent, 0)])


def build_forest(spans: pl.DataFrame) -> Forest:
    """Resolve parents, break cycles, pick main roots and order children for the walk."""
    warnings: list[str] = []
    df = _numbered(_grouped_by_trace(spans.with_row_index("_row")))
    parent = _parent_rows(df)
    if parent is None:  # two spans share a hash key: maybe duplicate ids, settle it exactly
        deduped = _drop_duplicates(df, warnings)
        if deduped.height != df.height:
            df = _numbered(deduped)
        parent = _parent_rows(df)
        if parent is None:
            parent = _parent_rows_exact(df)
    df = _fix_times(df, warnings)
    _check_ids(df, warnings)
    parent = _resolve_parents(df, parent, warnings)
    return Forest(spans=df, warnings=warnings, **_index(df, parent))


def tree_of(spans: pl.DataFrame) -> Tree:
    """The :class:`Tree` of spans analysed already (``TraceAnalysis.spans``: their ``_parent``,
    ``_trace`` and ``_row`` resolved), e.g. per-trace results concatenated by a distributed
    engine: the same arrays ``build_forest`` gives for the same rows."""
    parent = spans["_parent"].to_numpy().astype(np.int64)
    return Tree(**_index(spans, parent))


def _index(df: pl.DataFrame, parent: np.ndarray) -> dict[str, Any]:
    """The index arrays of :class:`Tree` over ``df`` (grouped by trace, numbered) and its
    resolved ``parent`` rows."""
    start = df["start_ns"].to_numpy().astype(np.int64, copy=False)
    end = df["end_ns"].to_numpy().astype(np.int64, copy=False)
    trace = df["_trace"].to_numpy()
    trace_ids = df.select(pl.col("trace_id").unique(maintain_order=True))["trace_id"].to_list()
    roots = np.flatnonzero(parent < 0)
    row = df["_row"].to_numpy().astype(np.int64)
    main_root = main_roots(roots, trace, start, end, row, len(trace_ids))
    waits = waits_for(parent, df["span_kind"])
    child_off, children = _children(waits, parent, start, end, row)
    return {
        "parent": parent,
        "trace": trace,
        "trace_ids": trace_ids,
        "main_root": main_root,
        "roots": roots,
        "child_off": child_off,
        "children": children,
        "start": start,
        "end": end,
        "row": row,
        "waits": waits,
    }


def _grouped_by_trace(df: pl.DataFrame) -> pl.DataFrame:
    """Spans of each trace together, in input order within the trace.

    A store or a file usually holds each trace's spans together already; checking that (one run
    per distinct trace id) is much cheaper than sorting a million ids, so only sort if needed.
    """
    # Runs of equal ids (exact) against distinct id hashes (never more than the distinct ids):
    # equal only when every trace is one run.
    runs, distinct = df.select(
        (pl.col("trace_id") != pl.col("trace_id").shift(1)).sum().alias("runs"),
        pl.col("trace_id").hash(seed=3).n_unique().alias("distinct"),
    ).row(0)
    if df.height == 0 or runs + 1 == distinct:
        return df
    return df.sort(["trace_id", "_row"])


def _numbered(df: pl.DataFrame) -> pl.DataFrame:
    """Trace numbers and row numbers for a frame sorted by (trace_id, input order)."""
    return df.with_columns(
        pl.col("trace_id").rle_id().cast(pl.Int64).alias("_trace"),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_i"),
    )


def _drop_duplicates(df: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    first = df.select(pl.struct("trace_id", "span_id").is_first_distinct())
    mask = first.to_series()
    dups = int(len(mask) - mask.sum())
    if dups:
        warnings.append(f"{dups} spans repeated a (trace_id, span_id) already seen; kept the first")
        df = df.filter(mask)
    return df


def _fix_times(df: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    bad = int(df.select((pl.col("end_ns") < pl.col("start_ns")).sum()).item())
    if bad:
        warnings.append(f"{bad} spans ended before they started; analysed as zero-length")
        df = df.with_columns(
            pl.when(pl.col("end_ns") < pl.col("start_ns"))
            .then(pl.col("start_ns"))
            .otherwise(pl.col("end_ns"))
            .alias("end_ns")
        )
    return df


def _check_ids(df: pl.DataFrame, warnings: list[str]) -> None:
    counts = df.select(
        (~pl.col("trace_id").str.contains(_HEX32.pattern)).sum().alias("t"),
        (~pl.col("span_id").str.contains(_HEX16.pattern)).sum().alias("s"),
    ).row(0)
    if counts[0]:
        warnings.append(f"{counts[0]} spans have a trace id that is not 32 lower-case hex digits")
    if counts[1]:
        warnings.append(f"{counts[1]} spans have a span id that is not 16 lower-case hex digits")


def _resolve_parents(df: pl.DataFrame, parent: np.ndarray, warnings: list[str]) -> np.ndarray:
    orphans = int((df["parent_span_id"].is_not_null().to_numpy() & (parent < 0)).sum())
    if orphans:
        warnings.append(f"{orphans} spans had no parent in the trace and were analysed as roots")
    n = len(parent)
    self_loops = parent == np.arange(n)
    cut = int(self_loops.sum())
    parent[self_loops] = -1
    cut += _break_cycles(parent, df["start_ns"].to_numpy(), df["_row"].to_numpy())
    if cut:
        warnings.append(f"{cut} parent cycles were broken (a span in each became a root)")
    return parent


def _parent_rows(df: pl.DataFrame) -> np.ndarray | None:
    """Row of each span's parent in the same trace, -1 if absent; None if two spans share a key.

    Looks up a 64-bit hash of (trace, id) with a sorted NumPy search instead of joining on two
    strings (several times faster).  Distinct keys also prove there are no duplicate ids, so the
    exact duplicate check runs only when keys collide.  Every match is checked against the real
    ids, and an exact string join settles things if a hash collision confused any row.
    """
    keys = df.select(
        (pl.col("span_id").hash(seed=7) ^ pl.col("_trace").hash(seed=11)).alias("k"),
        (pl.col("parent_span_id").hash(seed=7) ^ pl.col("_trace").hash(seed=11)).alias("pk"),
    )
    k = keys["k"].to_numpy()
    pk = keys["pk"].to_numpy()
    order = np.argsort(k)
    sk = k[order]
    if len(sk) > 1 and bool((sk[1:] == sk[:-1]).any()):
        return None
    pos = np.searchsorted(sk, pk)
    pos[pos >= len(sk)] = 0
    has = (sk[pos] == pk) & df["parent_span_id"].is_not_null().to_numpy() if len(sk) else pk < 0
    parent = np.where(has, order[pos] if len(sk) else -1, -1).astype(np.int64)
    matched = df["span_id"].gather(parent[has]) == df["parent_span_id"].filter(pl.Series(has))
    if not matched.all():
        return _parent_rows_exact(df)
    return parent


def _parent_rows_exact(df: pl.DataFrame) -> np.ndarray:
    lookup = df.select(
        "trace_id", pl.col("span_id").alias("parent_span_id"), pl.col("_i").alias("_p")
    )
    joined = df.select("trace_id", "parent_span_id").join(
        lookup, on=["trace_id", "parent_span_id"], how="left", maintain_order="left"
    )
    return joined["_p"].fill_null(-1).to_numpy().astype(np.int64, copy=True)


def _break_cycles(parent: np.ndarray, start: np.ndarray, row: np.ndarray) -> int:
    """Make one span of each parent cycle a root: the earliest-starting one (then input order).

    Pointer jumping finds every span whose ancestor chain reaches a root in O(log depth) NumPy
    passes; whatever is left leads into a cycle and is walked in Python (rare).
    """
    n = len(parent)
    if n == 0:
        return 0
    ids = np.arange(n)
    anc = np.where(parent >= 0, parent, ids)
    for _ in range(int(np.ceil(np.log2(n + 1))) + 2):
        nxt = anc[anc]
        if np.array_equal(nxt, anc):
            break
        anc = nxt
    stuck = np.flatnonzero(parent[anc] >= 0)
    if len(stuck) == 0:
        return 0
    state = dict.fromkeys(stuck.tolist(), 0)  # 0 unseen, 1 on current path, 2 done
    cut = 0
    for first in stuck.tolist():
        if state[first]:
            continue
        path = []
        node = first
        while node in state and state[node] == 0:
            state[node] = 1
            path.append(node)
            node = int(parent[node])
        if node in state and state[node] == 1:
            cycle = path[path.index(node) :]
            head = min(cycle, key=lambda i: (start[i], row[i]))
            parent[head] = -1
            cut += 1
        for p in path:
            state[p] = 2
    return cut


def main_roots(
    roots: np.ndarray,
    trace: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    row: np.ndarray,
    n_traces: int,
) -> np.ndarray:
    """Per trace, the longest root (ties: earliest start, then input order)."""
    t = trace[roots]
    order = np.lexsort((row[roots], start[roots], -(end[roots] - start[roots]), t))
    ordered = roots[order]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = t[order][1:] != t[order][:-1]
    main = np.full(n_traces, -1, dtype=np.int64)
    main[t[order][first]] = ordered[first]
    return main


def _children(
    waits: np.ndarray, parent: np.ndarray, start: np.ndarray, end: np.ndarray, row: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """CSR children lists of the children their parents wait for (``waits_for``)."""
    n = len(parent)
    edge = np.flatnonzero(waits)
    order = np.lexsort((row[edge], start[edge], -end[edge], parent[edge]))
    children = edge[order]
    counts = np.bincount(parent[children], minlength=n)
    child_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=child_off[1:])
    return child_off, children
