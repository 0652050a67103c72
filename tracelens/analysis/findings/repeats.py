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

from tracelens.analysis.findings.candidate import Candidate, Evidence, count
from tracelens.analysis.findings.features import KEY_SOURCES, MIX1, Features, is_lock
from tracelens.analysis.findings.finding import CacheDetails, Confidence, FindingType
from tracelens.analysis.findings.replay import Change
from tracelens.analysis.findings.timeline import Timeline, below

DEFAULT_WINDOW_S = 3600.0
_NICE_TTL_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)


@dataclass
class _Prev:
    """For each keyed span: the previous call with the same operation and arguments."""

    rows: np.ndarray  # keyed spans: those with a unique key first, then by (op, key, start)
    prev: np.ndarray  # row of the previous call of the same (op, key), -1 for the first


def _previous(
    timeline: Timeline,
    span_features: Features,
    rows: np.ndarray,
    same_trace: bool,
    key: np.ndarray | None = None,
) -> _Prev:
    with np.errstate(over="ignore"):
        ident = (span_features.key if key is None else key)[rows] * MIX1 + span_features.op[rows]
    # Calls whose key occurs once are first calls: only the others need the full sort (they
    # follow, each key's calls together in time order).
    _, inv, counts = np.unique(ident, return_inverse=True, return_counts=True)
    dup = counts[inv.reshape(-1)] > 1
    once, rows, ident = rows[~dup], rows[dup], ident[dup]
    lead = [timeline.trace[rows]] if same_trace else []
    order = np.lexsort((timeline.row[rows], timeline.start[rows], ident, *lead))
    r = rows[order]
    same = ident[order][1:] == ident[order][:-1]
    if same_trace:
        same &= timeline.trace[r][1:] == timeline.trace[r][:-1]
    prev = np.full(len(r), -1, dtype=np.int64)
    prev[1:][same] = r[:-1][same]
    return _Prev(
        rows=np.concatenate([once, r]),
        prev=np.concatenate([np.full(len(once), -1, dtype=np.int64), prev]),
    )


def find_retries(timeline: Timeline, span_features: Features) -> tuple[np.ndarray, np.ndarray]:
    """(retry mask, failed attempt of each retry or -1) over all spans."""
    n = timeline.n
    failed = np.full(n, -1, dtype=np.int64)
    keyed = np.flatnonzero(span_features.has_key)
    # Only a call whose key some failed call had can be a retry: sort just those.
    with np.errstate(over="ignore"):
        ident = span_features.key[keyed] * MIX1 + span_features.op[keyed]
    keyed = keyed[np.isin(ident, ident[span_features.error[keyed]])]
    pv = _previous(timeline, span_features, keyed, same_trace=True)
    a, b = pv.prev, pv.rows
    hit = (
        (a >= 0)
        & span_features.error[np.maximum(a, 0)]
        & (timeline.end[np.maximum(a, 0)] <= timeline.start[b])
    )
    failed[b[hit]] = a[hit]
    # Unknown arguments: the next call of the same operation under the same parent.
    c = timeline.kids
    if len(c) > 1:
        same = (timeline.parent[c][1:] == timeline.parent[c][:-1]) & (
            span_features.op[c][1:] == span_features.op[c][:-1]
        )
        prev_c, next_c = c[:-1], c[1:]
        hit = (
            same
            & span_features.error[prev_c]
            & ~span_features.has_key[next_c]
            & (timeline.end[prev_c] <= timeline.start[next_c])
        )
        failed[next_c[hit]] = prev_c[hit]
    return failed >= 0, failed


def _inside(timeline: Timeline, marked: np.ndarray) -> np.ndarray:
    """Spans with a marked ancestor (not counting themselves)."""
    if not marked.any():
        return np.zeros(timeline.n, dtype=bool)
    return below(timeline, marked)


def _by_op(span_features: Features, rows: np.ndarray) -> list[np.ndarray]:
    """``rows`` split by operation, each part in row order."""
    if len(rows) == 0:
        return []
    order = np.lexsort((rows, span_features.op[rows]))
    r = rows[order]
    cuts = np.flatnonzero(span_features.op[r][1:] != span_features.op[r][:-1]) + 1
    return np.split(r, cuts)


def retry_candidates(
    timeline: Timeline,
    span_features: Features,
    spans: pl.DataFrame,
    retry: np.ndarray,
    failed: np.ndarray,
) -> list[Candidate]:
    """One finding per operation whose calls were repeated after failing."""
    inner = _inside(timeline, retry) | _inside(timeline, failed_mask(failed))
    rows = np.flatnonzero(retry & ~inner)
    out = []
    for r in _by_op(span_features, rows):
        attempts = failed[r]
        row0 = spans.row(int(r[0]), named=True)
        name, service = str(row0["name"]), str(row0["service"])
        keyed = bool(span_features.has_key[r].all())
        lost_ms = float((timeline.end[attempts] - timeline.start[attempts]).sum()) / 1e6
        out.append(
            Candidate(
                type=FindingType.RETRY,
                names=[name],
                services=[service],
                change=Change(instant=np.unique(attempts)),
                traces=np.unique(timeline.trace[r]),
                confidence="high" if keyed else "medium",
                evidence=[
                    Evidence(
                        "repeat_after_error" if keyed else "next_call_after_error",
                        f"{count(len(r), 'call')} of {name} repeated "
                        + ("a call with the same arguments" if keyed else "the call before them")
                        + " right after it failed (ERROR status): retries, not cache hits",
                    ),
                    Evidence(
                        "assumes_first_attempt_succeeds",
                        f"the failed attempts took {lost_ms:,.1f} ms in all; the replay makes "
                        "them succeed at once",
                    ),
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


_POLL_NAME = r"(?i)(^|[^a-z])(poll|polling|status|state|progress|is_?ready|is_?done)([^a-z]|$)"
_SLEEP_NAME = r"(?i)(^|[^a-z])(sleep|sleeping|wait|waiting|backoff|delay|pause)([^a-z]|$)"
_CACHE_KEY_SOURCES = {KEY_SOURCES[0], KEY_SOURCES[1], KEY_SOURCES[2], KEY_SOURCES[3]}


@dataclass
class Repeats:
    """Reads and what they repeat, shared by the polling and the cacheable finders."""

    b: np.ndarray  # keyed reads, in (key, start) order
    a: np.ndarray  # the previous call with the same key, -1 for the first
    polled: np.ndarray  # per ``b``: a poll (a repeat in one trace across a wait, a status read)
    polling: np.ndarray  # per span: takes part in polling (the polls and what they repeat)


def find_repeats(
    timeline: Timeline, span_features: Features, spans: pl.DataFrame, retry: np.ndarray
) -> Repeats:
    """Reads repeated with the same key, and which of them poll.

    The key of a call is its operation, its arguments and who asked (the trace's caller
    identity: ``enduser.id``, ``user.id``, ``session.id``, an authorization header, ...): a
    cached answer for one caller is not an answer for another.  A repeat in one trace under
    the same parent polls when a sleep or wait lies between the two calls or the operation
    reads a status (its name says poll, status, progress, ...): each
    such call is made because the previous answer said "not yet", and what follows waits for
    the last one (the polling finder reports them; the parallel finder never moves them).
    """
    # A wait (queue slot, lock, sleep) with the same arguments is not a result to cache.
    waiting = (spans["kind_resolved"] == "wait").to_numpy()
    reads = np.flatnonzero(span_features.has_key & (span_features.write < 0) & ~waiting)
    # Between two polls: a sleep, backoff or wait by name (a measured "wait" may be any slow
    # network call).
    sleeping = spans["name"].str.contains(_SLEEP_NAME).fill_null(False).to_numpy()
    ckey = np.where(
        span_features.identity != 0,
        span_features.key * MIX1 + span_features.identity,
        span_features.key,
    )
    pv = _previous(timeline, span_features, reads, same_trace=False, key=ckey)
    b, a = pv.rows, pv.prev
    a0 = np.maximum(a, 0)
    polled = (
        (a >= 0) & (timeline.trace[a0] == timeline.trace[b]) & ~retry[b] & ~span_features.error[b]
    )
    polled[polled] = _polled(timeline, spans, a0[polled], b[polled], sleeping)
    polling = np.zeros(timeline.n, dtype=bool)
    polling[b[polled]] = True
    polling[a0[polled]] = True
    return Repeats(b=b, a=a, polled=polled, polling=polling)


def cacheable_candidates(
    timeline: Timeline,
    span_features: Features,
    spans: pl.DataFrame,
    retry: np.ndarray,
    window_s: float = DEFAULT_WINDOW_S,
    rp: Repeats | None = None,
) -> list[Candidate]:
    """One ``cacheable`` finding per read operation a cache would really serve, and one
    ``polling`` finding per read that polls (see :func:`find_repeats`)."""
    rp = rp or find_repeats(timeline, span_features, spans, retry)
    b, a, polled = rp.b, rp.a, rp.polled
    has_prev = a >= 0
    a0 = np.maximum(a, 0)
    same_trace = timeline.trace[a0] == timeline.trace[b]
    in_window = same_trace | (timeline.start[b] - timeline.start[a0] <= window_s * 1e9)
    repeat = has_prev & in_window & ~retry[b] & ~span_features.error[b]
    poll_ops = np.unique(span_features.op[b[polled]])
    out = _polling(timeline, span_features, spans, b[polled])
    # Every call of a polled operation is left to the polling finding.
    keep_op = ~np.isin(span_features.op[b], poll_ops)
    retried_ops, retried_n = np.unique(
        span_features.op[retry & span_features.has_key & (span_features.write < 0)],
        return_counts=True,
    )
    n_retries = dict(zip(retried_ops.tolist(), retried_n.tolist(), strict=True))
    cand_ops = np.unique(span_features.op[b[repeat & keep_op]])
    if len(cand_ops) == 0:
        return out
    in_ops = np.isin(span_features.op[b], cand_ops)
    seq_b, seq_first = b[in_ops], ~has_prev[in_ops]
    op_of = span_features.op[seq_b]
    order = np.argsort(op_of, kind="stable")  # rows stay in (ident, start) order per op
    seq_b, seq_first, op_of = seq_b[order], seq_first[order], op_of[order]
    cuts = np.flatnonzero(op_of[1:] != op_of[:-1]) + 1
    for rows, first in zip(np.split(seq_b, cuts), np.split(seq_first, cuts), strict=True):
        cand = _cacheable(
            rows,
            first,
            timeline,
            span_features,
            spans,
            retry,
            window_s,
            n_retries.get(int(span_features.op[rows[0]]), 0),
        )
        if cand is not None:
            out.append(cand)
    return out


def _polled(
    timeline: Timeline, spans: pl.DataFrame, a: np.ndarray, b: np.ndarray, waiting: np.ndarray
) -> np.ndarray:
    """Repeats ``b`` of ``a`` (same trace) that poll: under the same parent with a sleep or
    wait between them, or a status-like read."""
    same_parent = (timeline.parent[a] == timeline.parent[b]) & (timeline.parent[b] >= 0)
    # Waited-on children are contiguous per parent in start order: count the waits between.
    w = np.zeros(len(timeline.kids) + 1, dtype=np.int64)
    np.cumsum(waiting[timeline.kids], out=w[1:])
    ka, kb = timeline.kpos[a], timeline.kpos[b]
    ok = same_parent & (ka >= 0) & (kb > ka)
    between = np.zeros(len(b), dtype=bool)
    between[ok] = (w[kb[ok]] - w[ka[ok] + 1]) > 0
    names = spans["name"].gather(b)
    status = names.str.contains(_POLL_NAME).fill_null(False).to_numpy()
    return same_parent & (between | status)


def _polling(
    timeline: Timeline, span_features: Features, spans: pl.DataFrame, b: np.ndarray
) -> list[Candidate]:
    out = []
    for r in _by_op(span_features, b):
        row0 = spans.row(int(r[0]), named=True)
        name = str(row0["name"])
        traces = np.unique(timeline.trace[r])
        out.append(
            Candidate(
                type=FindingType.POLLING,
                names=[name],
                services=[str(row0["service"])],
                change=Change(),
                traces=traces,
                confidence="medium",
                evidence=[
                    Evidence(
                        "same_read_across_wait",
                        f"{count(len(r), 'call')} of {name} repeated the same read in the same "
                        f"trace after a sleep or wait (or it reads a status) in "
                        f"{count(len(traces), 'trace')}: polling, not a cache candidate (a "
                        "cache would hide the change it waits for)",
                    ),
                    Evidence(
                        "no_saving_estimate",
                        "the time between the job finishing and the poll that saw it is not "
                        "in the trace: a completion signal (webhook, blocking call) would "
                        "save up to one polling interval per trace; no replay saving is given",
                    ),
                ],
                occurrences=len(r),
                example=[int(r[0])],
            )
        )
    return out


def _simulate(
    rows: np.ndarray,
    first: np.ndarray,
    timeline: Timeline,
    span_features: Features,
    ok: np.ndarray,
    ttl_ns: float,
) -> tuple[np.ndarray, int, float]:
    """Replay a cache with ``ttl_ns`` over call sequences of one operation (``rows`` in
    (key, start) order, ``first`` marking each key's first call).  A call is a hit when an
    entry filled by an earlier successful call is younger than the TTL at its start; a hit
    whose recorded result differs from the entry's is *stale* (a wrong answer served).
    Returns (hits, stale hits, the shortest age at which a stale hit happened)."""
    hits = np.zeros(len(rows), dtype=bool)
    stale = 0
    stale_age = np.inf
    start, end = timeline.start[rows].tolist(), timeline.end[rows].tolist()
    good = ok[rows].tolist()
    has_res = span_features.has_result[rows].tolist()
    res = span_features.result[rows].tolist()
    fill = -1
    for j in range(len(rows)):
        if first[j]:
            fill = -1
        if fill >= 0 and start[j] - end[fill] <= ttl_ns:
            if has_res[j] and has_res[fill] and res[j] != res[fill]:
                stale += 1
                stale_age = min(stale_age, (start[j] - end[fill]) / 1e9)
            else:
                hits[j] = True
            continue
        if good[j]:
            fill = j
    return hits, stale, stale_age


@dataclass
class _Gaps:
    """Consecutive calls with the same key: the gaps a TTL must span, and where results
    changed (``changed`` per row of the operation's sequence)."""

    same: np.ndarray  # gaps (s) between calls whose results stayed the same (or are unknown)
    stale: np.ndarray  # gaps (s) after which the result had changed
    changed: np.ndarray


def _gaps(
    rows: np.ndarray, first: np.ndarray, timeline: Timeline, span_features: Features, ok: np.ndarray
) -> _Gaps:
    prev = np.concatenate([[-1], rows[:-1]])
    pair = ~first & ok[rows] & ok[np.maximum(prev, 0)]
    p0 = np.maximum(prev, 0)
    gap_s = np.maximum(timeline.start[rows] - timeline.end[p0], 0) / 1e9
    known = pair & span_features.has_result[rows] & span_features.has_result[p0]
    changed = known & (span_features.result[rows] != span_features.result[p0])
    return _Gaps(same=gap_s[pair & ~changed], stale=gap_s[changed], changed=changed)


def _best_ttl(
    rows: np.ndarray,
    first: np.ndarray,
    timeline: Timeline,
    span_features: Features,
    ok: np.ndarray,
    gaps: _Gaps,
    window_s: float,
) -> tuple[float, np.ndarray] | None:
    """The TTL: of the round values no longer than the window and shorter than the soonest
    change seen, the one under which a replayed cache serves the most repeats with no wrong
    answer (the shortest such on a tie).  The evidence for it is in the trace: results stayed
    the same for at least that long.  (TTL, hits) or None when no TTL serves anything."""
    upper = min(float(gaps.stale.min()) if len(gaps.stale) else np.inf, window_s)
    ttls = [t for t in _NICE_TTL_S if t < upper or (t == upper and not len(gaps.stale))]
    # A repeat can be a hit only if the call just before it is within the TTL: that count bounds
    # each TTL's hits from above, so the replays stop once no other TTL could do better.
    bound = np.searchsorted(np.sort(gaps.same), ttls, side="right")
    best: tuple[int, float, np.ndarray] | None = None
    for k in sorted(range(len(ttls)), key=lambda k: (-bound[k], ttls[k])):
        if best is not None and (bound[k] < best[0] or (bound[k] == best[0] and ttls[k] > best[1])):
            break  # (same bound: tried shortest first, and a tie goes to the shorter TTL)
        got, n_stale, _ = _simulate(rows, first, timeline, span_features, ok, ttls[k] * 1e9)
        hits_k = int(got.sum())
        if n_stale == 0 and (
            best is None or hits_k > best[0] or (hits_k == best[0] and ttls[k] < best[1])
        ):
            best = (hits_k, float(ttls[k]), got)
    if best is None or best[0] == 0:
        return None
    return best[1], best[2]


def _written_between(
    timeline: Timeline, span_features: Features, fills: np.ndarray, hits: np.ndarray
) -> bool:
    """Whether a call that changes state may have touched what the hit reads between the call
    that filled the entry and the hit: a write to the same resource (table, URL prefix, GraphQL
    schema) anywhere, or a write whose resource is unknown in the hit's own trace (it may have
    touched anything there: GET cart, POST item, GET cart).  A tool or client call of unknown
    effect (``Features.may_write``) counts as such a write: unsure is no finding."""
    writes = np.flatnonzero((span_features.write >= 0) | span_features.may_write)
    if len(writes) == 0 or len(hits) == 0:
        return False
    with np.errstate(over="ignore"):
        w_trace = timeline.trace[writes].astype(np.uint64) * MIX1 + np.uint64(0x5EED)
        h_trace = timeline.trace[hits].astype(np.uint64) * MIX1 + np.uint64(0x5EED)
    w_res = span_features.resource[writes]
    h_res = span_features.resource[hits]
    known = h_res != 0
    # For each hit, the first write of its key at or after the filling call ended (an as-of
    # join per key): a write between when it started before the hit.
    w = pl.DataFrame(
        {"k": np.where(w_res != 0, w_res, w_trace), "t": timeline.start[writes].astype(np.int64)}
    ).sort("k", "t")
    after, before = timeline.end[fills].astype(np.int64), timeline.start[hits].astype(np.int64)
    q = pl.DataFrame(
        {
            "k": np.concatenate([h_res[known], h_trace]),
            "t": np.concatenate([after[known], after]),
            "before": np.concatenate([before[known], before]),
        }
    ).sort("k", "t")
    got = q.join_asof(
        w.with_columns(pl.col("t").alias("w")),
        on="t",
        by="k",
        strategy="forward",
        check_sortedness=False,  # sorted by (k, t) above: sorted within every k
    )
    return bool((got["w"] < got["before"]).fill_null(False).any())


def _never_cached(
    timeline: Timeline, span_features: Features, fills: np.ndarray, hits: np.ndarray
) -> bool:
    """The rules that make a call no cache candidate at any confidence: its answer changes by
    nature (the clock, a random pick, a nonce: ``Features.volatile``); a write to what it reads
    happened between the repeats; or the caller is known for some repeats and not for others
    (who asked is part of the key, and unsure is no finding)."""
    if span_features.volatile[hits].any() or span_features.volatile[fills].any():
        return True
    who = np.concatenate([span_features.identity[hits], span_features.identity[fills]]) != 0
    if who.any() and not who.all():
        return True
    return _written_between(timeline, span_features, fills, hits)


def _cache_confidence(
    span_features: Features, hit_rows: np.ndarray, identical: bool | None, sources: set[str]
) -> Confidence:
    """High needs identical recorded results, a call known to only read and a key from its
    arguments; unknown results are low; a model call is medium at most (its answer also depends
    on the model's revision, which no key here holds); anything else medium."""
    if identical is None:
        return "low"
    read_only = bool(span_features.read_only[hit_rows].all())
    if (
        identical
        and read_only
        and sources <= _CACHE_KEY_SOURCES
        and not span_features.model[hit_rows].any()
    ):
        return "high"
    return "medium"


def _cacheable(
    rows: np.ndarray,
    first: np.ndarray,
    timeline: Timeline,
    span_features: Features,
    spans: pl.DataFrame,
    retry: np.ndarray,
    window_s: float,
    n_retry: int,
) -> Candidate | None:
    ok = ~span_features.error & ~retry
    gaps = _gaps(rows, first, timeline, span_features, ok)
    if len(gaps.same) == 0:
        return None
    best = _best_ttl(rows, first, timeline, span_features, ok, gaps, window_s)
    if best is None:
        return None
    ttl, hits = best
    outside = int(len(rows) - first.sum()) - int(hits.sum())
    hit_rows = rows[hits]
    fills = _fill_of(rows, first, hits)
    # Repeats nested inside another counted repeat are left to it.
    mark = np.zeros(timeline.n, dtype=bool)
    mark[hit_rows] = True
    nested = _inside(timeline, mark)[hit_rows]
    hit_rows, fills = hit_rows[~nested], fills[~nested]
    if len(hit_rows) == 0 or _never_cached(timeline, span_features, fills, hit_rows):
        return None
    results_known = bool(span_features.has_result[hit_rows].all())
    n_changed = int(gaps.changed.sum())
    identical: bool | None = (n_changed == 0) if results_known else None
    if n_changed:
        identical = False
    if identical is None and not span_features.read_only[hit_rows].all():
        # Neither what it does nor what it answers is known: nothing positive says a cache
        # may serve it (it may take a job, place an order, read the clock), so no finding.
        return None
    sources = {KEY_SOURCES[int(s)] for s in np.unique(span_features.key_source[hit_rows]) if s >= 0}
    r0 = spans.row(int(hit_rows[0]), named=True)
    name, service = str(r0["name"]), str(r0["service"])
    within = int((timeline.trace[hit_rows] == timeline.trace[fills]).sum())
    facts = _CacheFacts(
        name=name,
        hits=len(hit_rows),
        within=within,
        sources=sources,
        identical=identical,
        n_changed=n_changed,
        soonest_change_s=float(gaps.stale.min()) if len(gaps.stale) else 0.0,
        ttl=ttl,
        outside=outside,
        read_only=bool(span_features.read_only[hit_rows].all()),
        model=bool(span_features.model[hit_rows].any()),
        identity=bool((span_features.identity[hit_rows] != 0).all()),
        n_retry=n_retry,
        n_nested=int(nested.sum()),
    )
    hit_rows = np.sort(hit_rows)
    return Candidate(
        type=FindingType.CACHEABLE,
        names=[name],
        services=[service],
        change=Change(instant=hit_rows),
        traces=np.unique(timeline.trace[hit_rows]),
        confidence=_cache_confidence(span_features, hit_rows, identical, sources),
        evidence=_cache_evidence(facts),
        occurrences=len(hit_rows),
        example=[int(hit_rows[0])],
        details=CacheDetails(
            identical_results=identical, suggested_ttl_s=ttl, changed_results=n_changed
        ),
    )


@dataclass
class _CacheFacts:
    """What the cacheable evidence says, gathered by ``_cacheable``."""

    name: str
    hits: int
    within: int
    sources: set[str]
    identical: bool | None
    n_changed: int
    soonest_change_s: float
    ttl: float
    outside: int
    read_only: bool
    model: bool
    identity: bool
    n_retry: int
    n_nested: int


def _cache_evidence(f: _CacheFacts) -> list[Evidence]:
    evidence = [
        Evidence(
            "same_arguments",
            f"{count(f.hits, 'call')} of {f.name} repeated the arguments "
            f"({', '.join(sorted(f.sources))}) of an earlier call: {f.within} within a trace, "
            f"{f.hits - f.within} across traces",
        ),
        _results_evidence(f),
        Evidence(
            "ttl_bounded",
            f"counted as hits: only repeats within {f.ttl:g} s (the suggested TTL) of the call "
            f"that would have filled the cache entry; {count(f.outside, 'repeat')} fell outside "
            "it",
        ),
        Evidence(
            "no_write_between",
            "nothing that changes state touched what it reads (same table, URL prefix, or the "
            "same trace where that is unknown) between a repeat and the call it repeats",
        ),
    ]
    if not f.read_only:
        evidence.append(
            Evidence(
                "not_known_read_only",
                f"nothing says {f.name} only reads (an HTTP GET, a SELECT, a reading verb in its "
                "name): if it changes state, a cache would skip that: medium at most",
            )
        )
    if f.model:
        evidence.append(
            Evidence(
                "model_revision_not_in_key",
                "a model call: its answer also depends on the model's revision, which the key "
                "here does not hold; key the cache on it too: medium at most",
            )
        )
    evidence.append(
        Evidence(
            "caller_identity_in_key",
            "the key includes the caller's identity (user, tenant, session or credentials)",
        )
        if f.identity
        else Evidence(
            "no_caller_identity",
            "no caller identity was recorded: if answers depend on who asks, key the cache on it",
        )
    )
    left_out = []
    if f.n_retry:
        left_out.append(f"{f.n_retry} retries after an error")
    if f.n_nested:
        left_out.append(f"{f.n_nested} inside another cached call")
    if left_out:
        evidence.append(Evidence("left_out", "left out: " + "; ".join(left_out)))
    return evidence


def _results_evidence(f: _CacheFacts) -> Evidence:
    if f.identical:
        return Evidence("identical_results", "every repeat returned the recorded result it repeats")
    if f.identical is None:
        return Evidence(
            "results_unknown",
            "results are not recorded for every repeat: whether a cache would return the "
            "right answer is unknown (low)",
        )
    return Evidence(
        "results_changed",
        f"{count(f.n_changed, 'repeat')} returned a different result than the call before "
        f"(after {f.soonest_change_s:,.1f} s at the soonest): cacheable only "
        f"under a TTL shorter than that",
    )


def _fill_of(rows: np.ndarray, first: np.ndarray, hits: np.ndarray) -> np.ndarray:
    """For each hit, the call that filled the entry serving it (the last non-hit before)."""
    idx = np.arange(len(rows))
    last_fill = np.maximum.accumulate(np.where(~hits, idx, 0))
    return rows[last_fill[hits]]


def repeated_write_candidates(
    timeline: Timeline, span_features: Features, spans: pl.DataFrame, retry: np.ndarray
) -> list[Candidate]:
    """Calls that change state, made again with the same arguments in the same trace (a lock
    or semaphore taken again is a wait, not a write)."""
    writes = np.flatnonzero(
        span_features.has_key & (span_features.write >= 0) & ~is_lock(spans["name"])
    )
    pv = _previous(timeline, span_features, writes, same_trace=True)
    dup = (pv.prev >= 0) & ~retry[pv.rows]
    rows = pv.rows[dup]
    mark = np.zeros(timeline.n, dtype=bool)
    mark[rows] = True
    rows = rows[~_inside(timeline, mark)[rows]]
    out = []
    for r in _by_op(span_features, rows):
        row0 = spans.row(int(r[0]), named=True)
        reason = span_features.write_reasons[int(span_features.write[r[0]])]
        out.append(
            Candidate(
                type=FindingType.REPEATED_WRITE,
                names=[str(row0["name"])],
                services=[str(row0["service"])],
                change=Change(instant=r),
                traces=np.unique(timeline.trace[r]),
                confidence="low",
                evidence=[
                    Evidence(
                        "changes_state",
                        f"{count(len(r), 'call')} of {row0['name']} repeated an earlier call's "
                        f"arguments in the same trace; not a cache candidate: {reason}",
                    ),
                    Evidence(
                        "check_idempotent",
                        "check whether the second call is needed (an idempotent write could be "
                        "skipped)",
                    ),
                ],
                occurrences=len(r),
                example=[int(r[0])],
            )
        )
    return out
