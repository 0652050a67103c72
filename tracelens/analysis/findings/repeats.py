"""Calls made again with the same arguments: cache candidates, retries, duplicated writes.

A *retry* is a call that repeats a failed one (ERROR status) once it has ended: with the same
arguments in the same trace, or, when the arguments are unknown, the next call of the same
operation under the same parent.  Retries are never cache candidates: the remedy is to stop
the failure, and the replay makes the failed attempts take no time.

A *cacheable* repeat is a read (see ``features`` for what counts as changing state) whose
arguments equal those of an earlier call of the same operation, in the same trace or in
another trace that started at most ``window_s`` earlier, where the earlier call succeeded and,
when both results are known, returned the same result.  The replay makes every such repeat
instant (the first call stays).  Repeats nested inside another counted repeat are left to it.

A *repeated write* is a call that changes state made twice with the same arguments in one
trace: it is never offered as a cache candidate; the finding asks whether it must run twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from tracelens.analysis.findings.candidate import Candidate, count
from tracelens.analysis.findings.features import KEY_SOURCES, Features
from tracelens.analysis.findings.replay import Change
from tracelens.analysis.findings.timeline import Timeline, below

DEFAULT_WINDOW_S = 3600.0
_NICE_TTL_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
_MIX = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class _Prev:
    """For each keyed span: the previous call with the same operation and arguments."""

    rows: np.ndarray  # keyed spans, in (op, key, start) order
    prev: np.ndarray  # row of the previous call of the same (op, key), -1 for the first


def _previous(tl: Timeline, fe: Features, rows: np.ndarray, same_trace: bool) -> _Prev:
    ident = fe.key[rows] * _MIX + fe.op[rows]
    lead = [tl.trace[rows]] if same_trace else []
    order = np.lexsort((tl.row[rows], tl.start[rows], ident, *lead))
    r = rows[order]
    same = ident[order][1:] == ident[order][:-1]
    if same_trace:
        same &= tl.trace[r][1:] == tl.trace[r][:-1]
    prev = np.full(len(r), -1, dtype=np.int64)
    prev[1:][same] = r[:-1][same]
    return _Prev(rows=r, prev=prev)


def find_retries(tl: Timeline, fe: Features) -> tuple[np.ndarray, np.ndarray]:
    """(retry mask, failed attempt of each retry or -1) over all spans."""
    n = tl.n
    failed = np.full(n, -1, dtype=np.int64)
    keyed = np.flatnonzero(fe.has_key)
    pv = _previous(tl, fe, keyed, same_trace=True)
    a, b = pv.prev, pv.rows
    hit = (a >= 0) & fe.error[np.maximum(a, 0)] & (tl.end[np.maximum(a, 0)] <= tl.start[b])
    failed[b[hit]] = a[hit]
    # Unknown arguments: the next call of the same operation under the same parent.
    c = tl.kids
    if len(c) > 1:
        same = (tl.parent[c][1:] == tl.parent[c][:-1]) & (fe.op[c][1:] == fe.op[c][:-1])
        prev_c, next_c = c[:-1], c[1:]
        hit = same & fe.error[prev_c] & ~fe.has_key[next_c] & (tl.end[prev_c] <= tl.start[next_c])
        failed[next_c[hit]] = prev_c[hit]
    return failed >= 0, failed


def _inside(tl: Timeline, marked: np.ndarray) -> np.ndarray:
    """Spans with a marked ancestor (not counting themselves)."""
    if not marked.any():
        return np.zeros(tl.n, dtype=bool)
    return below(tl, marked)


def _by_op(fe: Features, rows: np.ndarray) -> list[np.ndarray]:
    """``rows`` split by operation, each part in row order."""
    if len(rows) == 0:
        return []
    order = np.lexsort((rows, fe.op[rows]))
    r = rows[order]
    cuts = np.flatnonzero(fe.op[r][1:] != fe.op[r][:-1]) + 1
    return np.split(r, cuts)


def _nice_ttl(seconds: float, upper: float | None) -> float:
    """The smallest round TTL at least ``seconds``, but below ``upper`` when given."""
    pick = float(next((t for t in _NICE_TTL_S if t >= seconds), _NICE_TTL_S[-1]))
    if upper is not None:
        below = [t for t in _NICE_TTL_S if t < upper]
        pick = min(pick, below[-1]) if below else max(upper / 2, 0.001)
    return float(pick)


def retry_candidates(
    tl: Timeline, fe: Features, spans: pl.DataFrame, retry: np.ndarray, failed: np.ndarray
) -> list[Candidate]:
    """One finding per operation whose calls were repeated after failing."""
    inner = _inside(tl, retry) | _inside(tl, failed_mask(failed))
    rows = np.flatnonzero(retry & ~inner)
    out = []
    for r in _by_op(fe, rows):
        attempts = failed[r]
        row0 = spans.row(int(r[0]), named=True)
        name, service = str(row0["name"]), str(row0["service"])
        keyed = bool(fe.has_key[r].all())
        lost_ms = float((tl.end[attempts] - tl.start[attempts]).sum()) / 1e6
        out.append(
            Candidate(
                type="retry",
                names=[name],
                services=[service],
                change=Change(instant=np.unique(attempts)),
                traces=np.unique(tl.trace[r]),
                confidence="high" if keyed else "medium",
                evidence=[
                    f"{count(len(r), 'call')} of {name} repeated "
                    + ("a call with the same arguments" if keyed else "the call before them")
                    + " right after it failed (ERROR status): retries, not cache hits",
                    f"the failed attempts took {lost_ms:,.1f} ms in all; the replay makes "
                    "them succeed at once",
                ],
                occurrences=len(r),
                example=[int(attempts[0]), int(r[0])],
            )
        )
    return out


def failed_mask(failed: np.ndarray) -> np.ndarray:
    mask = np.zeros(len(failed), dtype=bool)
    mask[failed[failed >= 0]] = True
    return mask


def cacheable_candidates(
    tl: Timeline,
    fe: Features,
    spans: pl.DataFrame,
    retry: np.ndarray,
    window_s: float = DEFAULT_WINDOW_S,
) -> list[Candidate]:
    """One finding per read operation called again with arguments seen before."""
    # A wait (queue slot, lock, sleep) with the same arguments is not a result to cache.
    waiting = (spans["kind_resolved"] == "wait").to_numpy()
    reads = np.flatnonzero(fe.has_key & (fe.write < 0) & ~waiting)
    pv = _previous(tl, fe, reads, same_trace=False)
    b, a = pv.rows, pv.prev
    has_prev = a >= 0
    a0 = np.maximum(a, 0)
    same_trace = tl.trace[a0] == tl.trace[b]
    in_window = same_trace | (tl.start[b] - tl.start[a0] <= window_s * 1e9)
    ok_prev = ~fe.error[a0] & ~retry[a0]
    repeat = has_prev & in_window & ~retry[b] & ~fe.error[b]
    known = fe.has_result[a0] & fe.has_result[b]
    stale = repeat & known & (fe.result[a0] != fe.result[b])
    counted = repeat & ok_prev & ~stale
    mark = np.zeros(tl.n, dtype=bool)
    mark[b[counted]] = True
    nested = _inside(tl, mark)
    keep = counted & ~nested[b]
    frame = pl.DataFrame(
        {
            "b": b,
            "op": fe.op[b],
            "keep": keep,
            "repeat": repeat,
            "stale": stale,
            "known": known & repeat,
            "nested": counted & nested[b],
            "after_error": has_prev & in_window & ~retry[b] & fe.error[a0],
            "same_trace": same_trace,
            "gap_s": np.maximum(tl.start[b] - tl.end[a0], 0) / 1e9,
            "source": fe.key_source[b],
        }
    ).filter(pl.col("repeat") | pl.col("after_error"))
    retried_ops, retried_n = np.unique(
        fe.op[retry & fe.has_key & (fe.write < 0)], return_counts=True
    )
    n_retries = dict(zip(retried_ops.tolist(), retried_n.tolist(), strict=True))
    wanted = frame.filter(pl.col("keep"))["op"].unique()
    out = []
    for part in frame.filter(pl.col("op").is_in(wanted.implode())).partition_by("op"):
        got = part.filter("keep")
        n_retry = int(n_retries.get(int(part["op"][0]), 0))
        out.append(_cacheable(part, got, tl, spans, window_s, n_retry))
    return out


def _cacheable(
    part: pl.DataFrame,
    got: pl.DataFrame,
    tl: Timeline,
    spans: pl.DataFrame,
    window_s: float,
    n_retry: int,
) -> Candidate:
    rows = got["b"].to_numpy()
    r0 = spans.row(int(rows[0]), named=True)
    name, service = str(r0["name"]), str(r0["service"])
    n_stale = int(part["stale"].sum())
    # Repeats whose result differed were left out, so what is counted returned the same result
    # whenever both results are known; unknown results leave it open.
    identical: bool | None = True if bool(got["known"].all()) else None
    gaps = got["gap_s"].to_numpy()
    stale_gaps = part.filter("stale")["gap_s"].to_numpy()
    ttl = _nice_ttl(
        float(np.percentile(gaps, 95)) if len(gaps) else 1.0,
        float(stale_gaps.min()) if len(stale_gaps) else None,
    )
    sources = {KEY_SOURCES[int(s)] for s in got["source"].unique().to_list() if s >= 0}
    by_hash = sources == {"args_hash"}
    confidence = (
        "high"
        if by_hash and identical
        else "medium"
        if (by_hash or identical or sources & {KEY_SOURCES[1], KEY_SOURCES[2], KEY_SOURCES[3]})
        else "low"
    )
    within = int(got["same_trace"].sum())
    across = got.height - within
    left_out = []
    if n_retry:
        left_out.append(f"{n_retry} retries after an error")
    if n_stale:
        left_out.append(
            f"{n_stale} whose result differed from the previous call's "
            f"(after {float(stale_gaps.min()):,.1f} s at the soonest)"
        )
    if int(part["nested"].sum()):
        left_out.append(f"{int(part['nested'].sum())} inside another cached call")
    if int(part["after_error"].sum()):
        left_out.append(f"{int(part['after_error'].sum())} after a failed call")
    results = {True: "same results", None: "results not all recorded"}
    evidence = [
        f"{count(got.height, 'call')} of {name} repeated the arguments "
        f"({', '.join(sorted(sources))}) of an earlier call: {within} within a trace, "
        f"{across} across traces within "
        f"{window_s:,.0f} s; {results[identical]}",
    ]
    if left_out:
        evidence.append("left out: " + "; ".join(left_out))
    return Candidate(
        type="cacheable",
        names=[name],
        services=[service],
        change=Change(instant=np.sort(rows)),
        traces=np.unique(tl.trace[rows]),
        confidence=confidence,
        evidence=evidence,
        occurrences=got.height,
        example=[int(rows[0])],
        extra={
            "identical_results": identical,
            "suggested_ttl_s": ttl,
            "changed_results": n_stale,
        },
    )


def repeated_write_candidates(
    tl: Timeline, fe: Features, spans: pl.DataFrame, retry: np.ndarray
) -> list[Candidate]:
    """Calls that change state, made again with the same arguments in the same trace."""
    writes = np.flatnonzero(fe.has_key & (fe.write >= 0))
    pv = _previous(tl, fe, writes, same_trace=True)
    dup = (pv.prev >= 0) & ~retry[pv.rows]
    rows = pv.rows[dup]
    mark = np.zeros(tl.n, dtype=bool)
    mark[rows] = True
    rows = rows[~_inside(tl, mark)[rows]]
    out = []
    for r in _by_op(fe, rows):
        row0 = spans.row(int(r[0]), named=True)
        reason = fe.write_reasons[int(fe.write[r[0]])]
        out.append(
            Candidate(
                type="repeated_write",
                names=[str(row0["name"])],
                services=[str(row0["service"])],
                change=Change(instant=r),
                traces=np.unique(tl.trace[r]),
                confidence="low",
                evidence=[
                    f"{count(len(r), 'call')} of {row0['name']} repeated an earlier call's "
                    f"arguments in the same trace; not a cache candidate: {reason}",
                    "check whether the second call is needed (an idempotent write could be "
                    "skipped)",
                ],
                occurrences=len(r),
                example=[int(r[0])],
            )
        )
    return out
