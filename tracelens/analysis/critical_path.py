"""The critical path of every root, exactly as ``docs/critical-path.md`` defines it.

The walk is iterative (an explicit stack of frames), so a 50,000-level trace is no harder than a
flat one, and it touches each child once per visit of its parent: O(spans) after the sort that
``tree.build_forest`` already did.  Children are clamped into their parent's (clamped) window as
the walk reaches them, which is the "parents before children" order the contract asks for.

``_walk.c`` is the same walk compiled, used where it is built (about 1 s saved per million spans);
this Python walk is the reference and the fallback, and ``tests/test_critical_path_native.py``
checks that the two agree, ties and broken trees included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from tracelens_instrumentation import _native as native_switch

from tracelens.analysis.tree import Forest

# The same walk compiled (``_walk.c``), where it is built and allowed.
_native: Any = native_switch.load("tracelens.analysis._walk")

USE_NATIVE: bool = _native is not None
"""Walk with the compiled code where it is built; the Python walk below is the reference."""


@dataclass
class Sections:
    """Flat section arrays: section k belongs to ``root[k]`` and is owned by span ``span[k]``."""

    root: np.ndarray
    span: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.span)


def critical_paths(forest: Forest, roots: np.ndarray | None = None) -> Sections:
    """Sections of every root in ``roots`` (default: every root of every trace), chronological."""
    if roots is None:
        roots = forest.roots
    if USE_NATIVE:
        return _native_walk(forest, roots)
    start = forest.start.tolist()
    end = forest.end.tolist()
    off = forest.child_off.tolist()
    kids = forest.children.tolist()
    row = forest.spans["_row"].to_list()
    out_root: list[int] = []
    out_span: list[int] = []
    out_start: list[int] = []
    out_end: list[int] = []
    for r in roots.tolist():
        spans, starts, ends = _walk(r, start, end, off, kids, row)
        out_root.extend([r] * len(spans))
        out_span.extend(spans)
        out_start.extend(starts)
        out_end.extend(ends)
    return Sections(
        root=np.asarray(out_root, dtype=np.int64),
        span=np.asarray(out_span, dtype=np.int64),
        start=np.asarray(out_start, dtype=np.int64),
        end=np.asarray(out_end, dtype=np.int64),
    )


def _native_walk(forest: Forest, roots: np.ndarray) -> Sections:
    def i64(a: Any) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=np.int64)

    row = forest.spans["_row"].to_numpy()
    parts = _native.walk(
        i64(forest.start),
        i64(forest.end),
        i64(forest.child_off),
        i64(forest.children),
        i64(row),
        i64(roots),
    )
    root, span, start, end = (np.frombuffer(p, dtype=np.int64) for p in parts)
    return Sections(root=root, span=span, start=start, end=end)


def _walk(
    root: int,
    start: list[int],
    end: list[int],
    off: list[int],
    kids: list[int],
    row: list[int],
) -> tuple[list[int], list[int], list[int]]:
    """Walk back from the root's end; returns the sections in chronological order, merged."""
    spans: list[int] = []
    starts: list[int] = []
    ends: list[int] = []

    def own_section(span: int, first: int, last: int) -> None:
        # The parent's own time [first, last): a repeat of the newest section's span extends it.
        if spans and spans[-1] == span:
            starts[-1] = first
        else:
            spans.append(span)
            starts.append(first)
            ends.append(last)

    def new_frame(span: int, ws: int, we: int) -> list:
        # [span, window start, window end, cursor, child list, position, stop]
        a, b = off[span], off[span + 1]
        if b - a > 1 and end[kids[a + 1]] >= we:
            # Several children reach past the (clamped) end and so tie there: the contract
            # orders ties by original start, then input order.
            local = kids[a:b]
            tied = [k for k in local if end[k] >= we]
            tied.sort(key=lambda k: (start[k], row[k]))
            return [span, ws, we, we, tied + local[len(tied) :], 0, b - a]
        return [span, ws, we, we, kids, a, b]

    stack: list[list] = [new_frame(root, start[root], end[root])]
    while stack:
        frame = stack[-1]
        span, ws, we, cursor, lst, pos, stop = frame
        chosen = -1
        cs = ce = 0
        while pos < stop:
            c = lst[pos]
            pos += 1
            cs = start[c]
            if cs >= we:
                continue  # starts at or after the parent's end: not part of this parent
            ce = end[c]
            if ce <= ws:
                continue  # ends at or before the parent's start
            if ce > we:
                ce = we
            if ce > cursor:
                continue  # overlaps the path already walked
            chosen = c
            break
        # Sections come out newest first and contiguous: a repeat of the last span merges.
        if chosen < 0:
            if ws < cursor:
                own_section(span, ws, cursor)
            stack.pop()
            continue
        if ce < cursor:
            own_section(span, ce, cursor)
        if cs < ws:
            cs = ws
        frame[3] = cs
        frame[5] = pos
        if off[chosen] == off[chosen + 1]:
            # A leaf (most spans): its whole window is its section; no frame to push and pop.
            if cs < ce:
                spans.append(chosen)
                starts.append(cs)
                ends.append(ce)
            continue
        stack.append(new_frame(chosen, cs, ce))
    spans.reverse()
    starts.reverse()
    ends.reverse()
    return spans, starts, ends
