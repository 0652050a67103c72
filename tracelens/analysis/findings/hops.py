"""Which sibling hops could have run together: runs, dependencies and groups.

Under each parent, the waited-on children in start order split into *runs*: stretches where
each child started only after every earlier sibling had ended.  A child that overlapped an
earlier one starts a new run, and so does a *barrier*, which is never moved: a CPU-bound hop
(Python hops under one GIL do not overlap, so their overlap is never promised), a call that
changes state (what follows may read what it wrote), and a model call without fingerprints
(its input is the conversation so far and its output picks what runs next), and a poll
(each is made because the previous answer said "not yet"; what follows waits for the last).

Inside a run, hop ``b`` depends on an earlier hop ``a`` when

* both carry tracelens fingerprints and ``b``'s argument fingerprints include one of ``a``'s
  result fingerprints (the strongest evidence, both ways);
* otherwise, when they are different operations, unless the same two operations under the
  same parent operation overlapped or ran the other way round in some trace (happens-before
  inferred over many traces, as in The Mystery Machine);
* repeats of one operation (a loop) are independent of each other, except a call with the same
  arguments as an earlier one or that follows a failed attempt: it stays after that one (a
  repeat or a retry; the cacheable and retry findings deal with those).

A group starts after the latest hop any of its members depends on, so members are pairwise
independent apart from the repeat/retry chains, which the replay keeps in order.  Groups of
two or more independent hops are grouped by pattern (parent operation + hop operations) across
traces; a run of one operation called many times with varying arguments is also an N+1 loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from tracelens_instrumentation.fingerprint import OPAQUE_FP, TEXT_FP

from tracelens.analysis.findings.features import MIX1, MIX2, Features
from tracelens.analysis.findings.timeline import Timeline

_LOOKBACK = 8  # blocks checked back for a dependency before assuming one
BASES = (
    "fingerprints",
    "observed",
    "loop",
    "loop-unknown",
    "fingerprints-partial",
    "recorded",
)


def _shift(x: np.ndarray, fill: object) -> np.ndarray:
    out = np.empty_like(x)
    out[0:1] = fill
    out[1:] = x[:-1]
    return out


def _starts(flags: np.ndarray) -> np.ndarray:
    """Segment number of each row, given flags marking each segment's first row."""
    return np.cumsum(flags) - 1


def hops(
    timeline: Timeline,
    span_features: Features,
    spans: pl.DataFrame,
    fixed: np.ndarray | None = None,
) -> pl.DataFrame:
    """Waited-on children in runs of two or more movable hops: run, block, position."""
    c = timeline.kids
    if len(c) == 0:
        return pl.DataFrame()
    p = timeline.parent[c]
    pos = np.arange(len(c), dtype=np.int64)
    rank = pos - timeline.koff[p]
    sequential = timeline.lp[c] == rank  # every earlier sibling had ended when it started
    barrier = (
        span_features.cpu[c]
        | (span_features.model[c] & ~span_features.instrumented[c])
        | (span_features.write[c] >= 0)
    )
    if fixed is not None:
        barrier |= fixed[c]  # polls: each waits for the previous answer, what follows for them
    brk = (rank == 0) | ~sequential | barrier | _shift(barrier, False)
    run = _starts(brk)
    keep = (np.bincount(run)[run] > 1) & ~barrier
    op = span_features.op[c]
    block = _starts(brk | (op != _shift(op, op[0] + np.uint64(1))))
    unknown = (spans["kind_resolved"] == "unknown").to_numpy()[c]
    k = np.flatnonzero(keep)
    return pl.DataFrame(
        {
            "c": c[k],
            "p": p[k],
            "pos": pos[k],
            "trace": timeline.trace[c[k]],
            "op": op[k],
            "pop": span_features.op[p[k]],
            "key": span_features.key[c[k]],
            "has_key": span_features.has_key[c[k]],
            "instr": span_features.instrumented[c[k]],
            "error": span_features.error[c[k]],
            "ro": span_features.read_only[c[k]],
            "paged": span_features.paged[c[k]],
            "covered": span_features.covered[c[k]],
            "text": span_features.text_result[c[k]],
            "decision": span_features.decision[c[k]],
            # Fingerprints that cannot show independence: a computed value (a hash, a
            # signature) among the arguments, or no per-argument fingerprints at all.
            "blind": (
                span_features.derived | (span_features.instrumented & ~span_features.has_arg_fps)
            )[c[k]],
            "lock": span_features.contended[c[k]],
            "model": span_features.model[c[k]],
            "unknown_kind": unknown[k],
            "run": run[k],
            "block": block[k],
        }
    )


@dataclass
class _Fps:
    """The fingerprint entries of the instrumented hops, exploded once, as dense ids.

    ``*_k``: the hop (row of ``h``); ``*_v``: the entry's value id (equal ids, equal values;
    markers dropped).  Args and results of the hops, and the args of their parents.
    """

    arg_k: np.ndarray
    arg_v: np.ndarray
    res_k: np.ndarray
    res_v: np.ndarray
    par_k: np.ndarray  # hop whose parent took the value
    par_v: np.ndarray


def _exploded(h: pl.DataFrame, spans: pl.DataFrame, parents: bool) -> _Fps:
    """``parents``: also the parents' arguments (only the ``explained`` check reads them)."""
    k = np.flatnonzero(h["instr"].to_numpy())
    c = h["c"].to_numpy()[k]
    p = h["p"].to_numpy()[k] if parents else k[:0]
    cols = []
    for rows, col in ((c, "arg_fps"), (c, "result_fps"), (p, "arg_fps")):
        lists = spans[col].gather(rows)
        lens = lists.list.len().fill_null(0).to_numpy()
        vals = lists.explode().drop_nulls()
        cols.append((np.repeat(k[: len(rows)], lens), vals))
    # Value ids: a 64-bit hash of each entry (no sort of the strings); a collision could only
    # add a link, never hide one.
    every = pl.concat([v for _, v in cols]).cast(pl.String)
    ids = every.hash(seed=11).to_numpy()
    markers = pl.Series([OPAQUE_FP, TEXT_FP]).hash(seed=11).to_numpy()
    out: list[np.ndarray] = []
    at = 0
    for hop, vals in cols:
        v = ids[at : at + len(vals)]
        at += len(vals)
        keep = ~np.isin(v, markers)
        out += [hop[keep], v[keep]]
    return _Fps(*out)


def _latest_before(
    q_k: np.ndarray,
    q_v: np.ndarray,
    i_k: np.ndarray,
    i_v: np.ndarray,
    run: np.ndarray,
    pos: np.ndarray,
) -> np.ndarray:
    """Per query entry (hop q_k, value q_v): the largest position of an item entry (hop i_k,
    value i_v) in the same run with the same value and an earlier position, or -1."""
    out = np.full(len(q_k), -1, dtype=np.int64)
    if len(q_k) == 0 or len(i_k) == 0:
        return out
    span = np.int64(int(pos.max()) + 2)
    # One sorted composite key: (run, value) as a dense id, then the position.
    with np.errstate(over="ignore"):
        pair = np.concatenate([i_v, q_v]) * MIX1 + np.concatenate([run[i_k], run[q_k]]).astype(
            np.uint64
        )
    dense = np.unique(pair, return_inverse=True)[1].reshape(-1).astype(np.int64)
    items = np.sort(dense[: len(i_k)] * span + pos[i_k])
    qd = dense[len(i_k) :]
    at = np.searchsorted(items, qd * span + pos[q_k], "left") - 1
    ok = (at >= 0) & (items[np.maximum(at, 0)] // span == qd)
    out[ok] = items[at[ok]] % span
    return out


def _hop_value(k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """One 64-bit key per (hop, value id)."""
    with np.errstate(over="ignore"):
        return v * MIX2 + k.astype(np.uint64)


def _fps_deps(h: pl.DataFrame, fx: _Fps) -> np.ndarray:
    """Per hop: the latest earlier hop of its run it depends on by its fingerprints, or -1.

    Two links count.  *Data flow*: one of its argument fingerprints is one of the earlier
    hop's result fingerprints (a value, a nested field, a JSON field or a token of a text
    result) that was not among that hop's own arguments.  *Shared resource*: it takes an
    argument value that the earlier hop also took, and the earlier hop is not known to only read
    or answered yes/no (a patch applied to a repo, then the tests run on it: the data flows
    through the file system, not the arguments; a permission check, then the fetch it guards).
    The marker entries (``OPAQUE_FP``, ``TEXT_FP``) are no values and link nothing.
    """
    dep = np.full(h.height, -1, dtype=np.int64)
    if len(fx.arg_k) == 0:
        return dep
    run, pos = h["run"].to_numpy(), h["pos"].to_numpy()
    # A value a hop's result merely echoes from its own arguments (a search result quoting its
    # query) was available before it ran: it links the hop to nothing.
    echo = np.isin(_hop_value(fx.res_k, fx.res_v), _hop_value(fx.arg_k, fx.arg_v))
    # A boolean answer about a resource (may the user see this document? is this file clean?)
    # gates what is done with it next, whatever the asking call is.
    reads = (h["ro"].to_numpy() & ~h["decision"].to_numpy())[fx.arg_k]
    # Data flow.  A value the parent already had when it started (one of its own arguments, or
    # a part of one) needs no earlier sibling's result, whatever else returned it too.
    given = np.isin(_hop_value(fx.arg_k, fx.arg_v), _hop_value(fx.par_k, fx.par_v))
    q_k, q_v = fx.arg_k[~given], fx.arg_v[~given]
    found = _latest_before(q_k, q_v, fx.res_k[~echo], fx.res_v[~echo], run, pos)
    np.maximum.at(dep, q_k, found)
    # Shared resource: whoever passed the value, an earlier hop that may change it comes first.
    found = _latest_before(fx.arg_k, fx.arg_v, fx.arg_k[~reads], fx.arg_v[~reads], run, pos)
    np.maximum.at(dep, fx.arg_k, found)
    return dep


def _explained(h: pl.DataFrame, fx: _Fps) -> np.ndarray:
    """Per hop: every argument value it took was there before its run started: among its
    parent's arguments, or an earlier hop's arguments in the run.  Such a hop took nothing out
    of an earlier hop's free-text result, whatever that text said."""
    out = h["instr"].to_numpy().copy()
    if len(fx.arg_k) == 0:
        return out
    run, pos = h["run"].to_numpy(), h["pos"].to_numpy()
    known = np.isin(_hop_value(fx.arg_k, fx.arg_v), _hop_value(fx.par_k, fx.par_v))
    seen = _latest_before(fx.arg_k, fx.arg_v, fx.arg_k, fx.arg_v, run, pos) >= 0
    unexplained = fx.arg_k[~(known | seen)]
    out[unexplained] = False
    return out


def _model_deps(h: pl.DataFrame) -> np.ndarray:
    """Per hop: the latest earlier model call of its run when the hop took any argument that
    was not there before the run (not its parent's, not an earlier hop's), or -1.  A model's
    output may feed any later hop in a form no fingerprint shows (a phrase cut out of it,
    reworded): unless every argument is accounted for, the hop waits for the model.  And a
    model call likewise waits for the hop before it."""
    run = h["run"].to_numpy()
    pos = h["pos"].to_numpy()
    latest = np.maximum.accumulate(np.where(h["model"].to_numpy(), pos, -1))
    prev = np.concatenate([[-1], latest[:-1]])
    rfirst = np.concatenate([[True], run[1:] != run[:-1]])
    run0 = pos[rfirst][_starts(rfirst)]
    explained = h["explained"].to_numpy()
    waits = (prev >= run0) & ~explained
    dep = np.where(waits, prev, -1)
    # The other way round: a model call's input is the conversation so far, built from what
    # came before it (a prompt quoting search results shows in no fingerprint): unless its
    # every argument was there before the run, it waits for the hop before it.
    model = h["model"].to_numpy()
    after = np.zeros(len(pos), dtype=bool)
    after[1:] = run[1:] == run[:-1]
    follows = model & after & ~explained
    dep[follows] = np.maximum(dep[follows], pos[np.flatnonzero(follows) - 1])
    return dep


def _paged_deps(h: pl.DataFrame) -> np.ndarray:
    """Per hop: the previous call of its block when it pages (cursor, page token, offset):
    each page needs the previous one's answer, so a listing is sequential, or -1."""
    block = h["block"].to_numpy()
    paged = h["paged"].to_numpy()
    pos = h["pos"].to_numpy()
    dep = np.full(h.height, -1, dtype=np.int64)
    follows = np.zeros(h.height, dtype=bool)
    follows[1:] = (block[1:] == block[:-1]) & paged[1:]
    dep[follows] = pos[np.flatnonzero(follows) - 1]
    return dep


_PAIR_CAP = 50  # spans per (parent, operation) compared pairwise for the overlap evidence


EVIDENCE_PARENTS = 1000  # parents per parent operation looked at for the overlap evidence


def _all_hops(timeline: Timeline, span_features: Features) -> pl.DataFrame:
    """The waited-on children of the first ``EVIDENCE_PARENTS`` parents of each parent
    operation (in input order): what the overlap evidence is counted over.  A thousand
    parents show whether two operations ever overlap or swap; more only cost time."""
    c = timeline.kids
    p = timeline.parent[c]
    pop = span_features.op[p]
    head = np.concatenate([[True], p[1:] != p[:-1]]) if len(p) else np.zeros(0, bool)
    parents, parent_pop = p[head], pop[head]
    order = np.argsort(parent_pop, kind="stable")
    sorted_pop = parent_pop[order]
    starts = np.concatenate([[True], sorted_pop[1:] != sorted_pop[:-1]]) if len(order) else head
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - np.flatnonzero(starts)[_starts(starts)]
    keep_parent = np.zeros(timeline.n, dtype=bool)
    keep_parent[parents[rank < EVIDENCE_PARENTS]] = True
    k = keep_parent[p]
    return pl.DataFrame(
        {
            "p": p[k],
            "pop": pop[k],
            "op": span_features.op[c][k],
            "s": timeline.start[c][k],
            "e": timeline.end[c][k],
        }
    )


def _overlap_evidence(allk: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """Per (pop, op_a, op_b): in how many parents both ran, and in how many b did not wait.

    "Did not wait": an ``a`` and a ``b`` under the same parent overlapped in time, or (each
    called once there) ``b`` started first.  Either shows that ``b`` does not need ``a``'s
    output, whatever order the trace at hand has them in.

    Parents where each operation of interest ran once (nearly all) are counted with NumPy
    lookups; the others (loops) go through :func:`_overlap_evidence_pairwise`.
    """
    if pairs.height == 0:
        return pl.DataFrame(schema=_EVIDENCE_SCHEMA)
    k_pop, k_a, k_b = (pairs[c].to_numpy() for c in ("pop", "op_a", "op_b"))
    op, pop, p = allk["op"].to_numpy(), allk["pop"].to_numpy(), allk["p"].to_numpy()
    uniq, inv = np.unique(np.concatenate([op, pop, k_pop, k_a, k_b]), return_inverse=True)
    m, n = np.int64(len(uniq)), len(op)
    op_i, pop_i = inv[:n], inv[n : 2 * n]
    q = len(k_pop)
    kp_i, ka_i, kb_i = inv[2 * n : 2 * n + q], inv[2 * n + q : 2 * n + 2 * q], inv[2 * n + 2 * q :]
    # The spans of interest: an operation of a wanted pair under its parent operation.
    side = np.unique(np.concatenate([kp_i * m + ka_i, kp_i * m + kb_i]))
    mine = np.isin(pop_i * m + op_i, side)
    rows = np.flatnonzero(mine)
    key = p[rows].astype(np.int64) * m + op_i[rows]  # (parent, operation)
    order = np.argsort(key, kind="stable")
    skey = key[order]
    repeated = skey[1:][skey[1:] == skey[:-1]]
    multi = np.zeros(len(p) and int(p.max()) + 1, dtype=bool)
    multi[repeated // m] = True  # parents with a loop among the operations of interest
    # Fast path: every (parent, a) row looks up the b of each wanted pair under that parent.
    fast = rows[~multi[p[rows]]]
    pkey = kp_i * m + ka_i
    porder = np.argsort(pkey, kind="stable")
    spkey = pkey[porder]
    akey = pop_i[fast] * m + op_i[fast]
    plo = np.searchsorted(spkey, akey, "left")
    cnt = np.searchsorted(spkey, akey, "right") - plo
    rep = np.repeat(np.arange(len(fast)), cnt)
    at = np.repeat(plo, cnt) + (np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt))
    pair = porder[at]
    ra = fast[rep]
    bkey = p[ra].astype(np.int64) * m + kb_i[pair]
    pos = np.searchsorted(skey, bkey, "left")
    hit = (pos < len(skey)) & (skey[np.minimum(pos, len(skey) - 1)] == bkey)
    pair, ra = pair[hit], ra[hit]
    rb = rows[order[pos[hit]]]
    s, e = allk["s"].to_numpy(), allk["e"].to_numpy()
    free = ((s[ra] < e[rb]) & (s[rb] < e[ra])) | (s[rb] < s[ra])
    n_both = np.bincount(pair, minlength=q)
    n_free = np.bincount(pair[free], minlength=q)
    out = pl.DataFrame(
        {"pop": k_pop, "op_a": k_a, "op_b": k_b, "n_both": n_both, "n_overlap": n_free},
        schema=_EVIDENCE_SCHEMA,
    )
    slow_parents = np.flatnonzero(multi)
    if len(slow_parents):
        slow = _overlap_evidence_pairwise(allk.filter(pl.Series(np.isin(p, slow_parents))), pairs)
        out = (
            pl.concat([out, slow.cast(_EVIDENCE_SCHEMA)])  # type: ignore[arg-type]
            .group_by("pop", "op_a", "op_b", maintain_order=True)
            .agg(pl.col("n_both").sum(), pl.col("n_overlap").sum())
        )
    return out.filter(pl.col("n_both") > 0)


def _overlap_evidence_pairwise(allk: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """:func:`_overlap_evidence` by joining every ``a`` with every ``b`` of a parent (at most
    ``_PAIR_CAP`` of each per parent): for parents that call an operation more than once."""
    wanted = pl.concat(
        [
            pairs.select("pop", pl.col("op_a").alias("op")),
            pairs.select("pop", pl.col("op_b").alias("op")),
        ]
    ).unique()
    per = allk.join(wanted, on=["pop", "op"], how="semi").sort("p", "op", "s")
    first = (pl.col("p") != pl.col("p").shift(1)) | (pl.col("op") != pl.col("op").shift(1))
    per = per.with_columns(first.fill_null(True).cum_sum().alias("_g"))
    per = per.with_columns(
        (pl.int_range(pl.len()) - pl.col("_g").search_sorted(pl.col("_g"))).alias("_r")
    )
    counts = per.group_by("_g").agg(pl.len().alias("k"))
    per = per.join(counts, on="_g").filter(pl.col("_r") < _PAIR_CAP)
    a = pairs.join(per, left_on=["pop", "op_a"], right_on=["pop", "op"])
    both = a.join(
        per.select(
            "p",
            pl.col("op").alias("op_b"),
            pl.col("s").alias("bs"),
            pl.col("e").alias("be"),
            pl.col("k").alias("kb"),
        ),
        on=["p", "op_b"],
    )
    free = ((pl.col("s") < pl.col("be")) & (pl.col("bs") < pl.col("e"))) | (
        (pl.col("k") == 1) & (pl.col("kb") == 1) & (pl.col("bs") < pl.col("s"))
    )
    return (
        both.group_by("pop", "op_a", "op_b", "p")
        .agg(free.any().alias("free"))
        .group_by("pop", "op_a", "op_b")
        .agg(pl.len().alias("n_both"), pl.col("free").sum().alias("n_overlap"))
    )


_EVIDENCE_SCHEMA = {
    "pop": pl.UInt64,
    "op_a": pl.UInt64,
    "op_b": pl.UInt64,
    "n_both": pl.UInt32,
    "n_overlap": pl.UInt32,
}


def _name_deps(
    h: pl.DataFrame, timeline: Timeline, span_features: Features, fps: np.ndarray
) -> tuple[np.ndarray, pl.DataFrame, np.ndarray]:
    """Per hop: the last hop of the latest earlier block it depends on by the rule for hops
    without fingerprints (different operations, no overlap seen anywhere), or -1.

    Blocks look back at most ``_LOOKBACK`` blocks, and never past a hop they already depend on
    by fingerprints (the group starts after that one anyway).  The overlap evidence is
    computed only for the pairs actually looked at.
    """
    block = h["block"].to_numpy()
    first = np.concatenate([[True], block[1:] != block[:-1]])
    bid = _starts(first)
    heads = np.flatnonzero(first)
    run = h["run"].to_numpy()[heads]
    op = h["op"].to_numpy()[heads]
    pop = h["pop"].to_numpy()[heads]
    last_pos = h["pos"].to_numpy()[np.append(heads[1:], h.height) - 1]
    instr = np.minimum.reduceat(h["instr"].to_numpy(), heads)
    # A hop taking a computed value (a hash, a signature), or one whose arguments were not
    # fingerprinted one by one (``args_hash`` alone), is judged like one without fingerprints:
    # only overlap or both orders seen across traces show it need not wait.
    blind = np.maximum.reduceat(h["blind"].to_numpy(), heads)
    # A group never starts before a hop some earlier member depends on by fingerprints, so
    # nothing before that can matter to any later block either (positions grow through runs).
    floor = np.maximum.accumulate(np.maximum.reduceat(fps, heads) + 1)
    m = len(heads)
    dep = np.full(m, -1, dtype=np.int64)
    open_ = np.ones(m, dtype=bool)
    recorded = np.zeros(m, dtype=bool)
    any_recorded = span_features.recorded_result.null_count() < len(span_features.recorded_result)
    c_all = h["c"].to_numpy()
    c_head = c_all[heads]
    c_last = c_all[np.append(heads[1:], h.height) - 1]
    c_args_last = c_last
    seen: list[pl.DataFrame] = []
    # Pairs as one 64-bit hash each, so the per-round set operations stay in NumPy.
    free_pairs = np.zeros(0, dtype=np.uint64)
    asked = np.zeros(0, dtype=np.uint64)
    allk: pl.DataFrame | None = None
    for d in range(1, _LOOKBACK + 2):
        j = np.flatnonzero(open_)
        j = j[j >= d]
        if len(j) == 0:
            break
        i = j - d
        reach = (run[i] == run[j]) & (last_pos[i] >= floor[j])
        open_[j[~reach]] = False  # nothing earlier can matter
        j, i = j[reach], i[reach]
        if d > _LOOKBACK:
            dep[j] = last_pos[i]  # looked far enough: assume the nearest unexplained one
            break
        judged = (~(instr[i] & instr[j]) | blind[j]) & (op[i] != op[j])
        ji, ii = j[judged], i[judged]
        cand = _pair_hash(pop[ji], op[ii], op[ji])
        uniq, first_at = np.unique(cand, return_index=True)
        fresh = ~np.isin(uniq, asked)
        if fresh.any():
            at = first_at[fresh]
            new = pl.DataFrame(
                {"pop": pop[ji][at], "op_a": op[ii][at], "op_b": op[ji][at]},
                schema={"pop": pl.UInt64, "op_a": pl.UInt64, "op_b": pl.UInt64},
            )
            allk = _all_hops(timeline, span_features) if allk is None else allk
            ev = _overlap_evidence(allk, new)
            seen.append(ev)
            asked = np.concatenate([asked, uniq[fresh]])
            got = ev.filter(pl.col("n_overlap") > 0)
            free_pairs = np.concatenate(
                [
                    free_pairs,
                    _pair_hash(
                        got["pop"].to_numpy(), got["op_a"].to_numpy(), got["op_b"].to_numpy()
                    ),
                ]
            )
        free = np.isin(cand, free_pairs)
        # Without order evidence, recorded values can still show independence: both calls
        # recorded their arguments and the earlier one its result, and nothing of that result
        # is in the later one's arguments.  Medium: a reworded value would not show.
        look = np.flatnonzero(~free) if any_recorded else np.zeros(0, dtype=np.int64)
        if len(look):
            unlinked = _recorded_unlinked(
                span_features, c_last[ii[look]], c_head[ji[look]], c_args_last[ii[look]]
            )
            shown = look[unlinked]
            recorded[ji[shown]] = True
            free[shown] = True
        dep[ji[~free]] = last_pos[ii[~free]]
        open_[ji[~free]] = False
    evidence = pl.concat(seen) if seen else pl.DataFrame(schema=_EVIDENCE_SCHEMA)
    return dep[bid], evidence, recorded[bid]


_TOKEN = r"[A-Za-z0-9_@./:+-]{2,}|[0-9]+"


def _recorded_unlinked(
    span_features: Features, a: np.ndarray, b: np.ndarray, a_args: np.ndarray
) -> np.ndarray:
    """Per pair of spans (a before b): both recorded their arguments, a its result, no token of
    a's arguments is in b's when a may change state, and no token of a's result (2+ characters
    or a number, not one a took as an argument itself) occurs in b's arguments, compared in
    every form a value takes on the way (``Features.recorded_forms_*``: parts, decodings, lower
    case); and b takes no digest-shaped value, which only computation makes."""
    args, out = span_features.recorded_forms_args, span_features.recorded_forms_result
    frame = pl.DataFrame(
        {
            "k": np.arange(len(a)),
            "out": out.gather(a),
            "own": args.gather(a_args),
            "arg": args.gather(b),
            # A digest or signature among b's arguments may be computed from a's result:
            # no text match can show it is not (issue 25).
            "derived": span_features.recorded_derived[b],
            # A call not known to only read may change what its arguments name (a ticket
            # moved to another state, then read): the resource links it to what takes it next.
            "writes": ~span_features.read_only[a] | span_features.decision[a],
        }
    )
    known = (
        frame["out"].is_not_null()
        & frame["arg"].is_not_null()
        & frame["own"].is_not_null()
        & ~frame["derived"]
    )
    hit = np.zeros(len(a), dtype=bool)
    if not known.any():
        return hit
    toks = (
        frame.filter(known)
        .with_columns(pl.col("out").str.extract_all(_TOKEN).alias("tok"))
        .explode("tok")
        .drop_nulls("tok")
        .filter(~pl.col("own").str.contains(pl.col("tok"), literal=True))
        .with_columns(pl.col("arg").str.contains(pl.col("tok"), literal=True).alias("in_b"))
        .group_by("k")
        .agg(pl.col("in_b").any())
    )
    shared = (
        frame.filter(known & pl.col("writes"))
        .with_columns(pl.col("own").str.extract_all(_TOKEN).alias("tok"))
        .explode("tok")
        .drop_nulls("tok")
        .filter(pl.col("arg").str.contains(pl.col("tok"), literal=True))
    )
    linked = np.zeros(len(a), dtype=bool)
    linked[toks.filter("in_b")["k"].to_numpy()] = True
    linked[shared["k"].to_numpy()] = True
    return known.to_numpy() & ~linked


def _pair_hash(pop: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One 64-bit value per (parent operation, a, b): operation ids are 64-bit hashes already,
    so a wrapping multiply-add keeps collisions as unlikely as theirs."""
    with np.errstate(over="ignore"):
        return (pop * MIX1 + a) * MIX2 + b


def _chains(h: pl.DataFrame) -> np.ndarray:
    """Per hop: the earlier hop of its run it repeats (same operation and arguments) or
    retries (the call just before it in its block failed), or -1."""
    n = h.height
    chain = np.full(n, -1, dtype=np.int64)
    run = h["run"].to_numpy()
    op = h["op"].to_numpy()
    key = h["key"].to_numpy()
    pos = h["pos"].to_numpy()
    keyed = np.flatnonzero(h["has_key"].to_numpy())
    if len(keyed):
        with np.errstate(over="ignore"):
            ident = key[keyed] * MIX1 + op[keyed]
            both = ident * MIX2 + run[keyed].astype(np.uint64)
        # Only (run, call) pairs that occur more than once can repeat: sort just those.
        _, inv, counts = np.unique(both, return_inverse=True, return_counts=True)
        dup = counts[inv.reshape(-1)] > 1
        keyed, ident = keyed[dup], ident[dup]
        # Rows are in position order, so a stable sort keeps it within equal (run, ident).
        order = np.lexsort((ident, run[keyed]))
        o = keyed[order]
        same = (run[o][1:] == run[o][:-1]) & (ident[order][1:] == ident[order][:-1])
        chain[o[1:][same]] = pos[o[:-1][same]]
    block = h["block"].to_numpy()
    err = h["error"].to_numpy()
    retry = np.zeros(n, dtype=bool)
    retry[1:] = (block[1:] == block[:-1]) & err[:-1] & ~h["has_key"].to_numpy()[1:]
    chain[retry] = pos[np.flatnonzero(retry) - 1]
    return chain


def _contention(
    h: pl.DataFrame, gs: np.ndarray, chain: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Hops of one group that wait on the same lock, semaphore, rate limit or pool (a child
    span says so, ``Features.contended``) cannot overlap while they hold it: each stays after
    the previous one, so the replay serialises them and the saving is what the others can
    overlap.  Returns the chain with those links and, per hop, whether it is contended."""
    lock = h["lock"].to_numpy()
    run = h["run"].to_numpy()
    pos = h["pos"].to_numpy()
    held = np.flatnonzero(lock != 0)
    contended = np.zeros(h.height, dtype=bool)
    if len(held) == 0:
        return chain, contended
    with np.errstate(over="ignore"):
        ident = (lock[held] * MIX1 + run[held].astype(np.uint64)) * MIX2 + gs[held].astype(
            np.uint64
        )
    order = np.lexsort((pos[held], ident))
    o = held[order]
    same = ident[order][1:] == ident[order][:-1]
    later, earlier = o[1:][same], o[:-1][same]
    contended[later] = True
    contended[earlier] = True
    free = chain[later] < 0
    chain = chain.copy()
    chain[later[free]] = pos[earlier[free]]
    return chain, contended


def groups(
    timeline: Timeline,
    span_features: Features,
    spans: pl.DataFrame,
    fixed: np.ndarray | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Hops with their group (``gs``: the position the group starts at), in-group chain
    (``chain``, a position, or null) and confidence; and the overlap evidence used."""
    h = hops(timeline, span_features, spans, fixed)
    if h.height == 0:
        return h, pl.DataFrame(schema=_EVIDENCE_SCHEMA)
    # Whether every argument predates the run matters only next to a model call or a text
    # result; without either, skip the check (as if explained: nothing uses it then).
    needs = bool((h["model"] | (h["instr"] & h["text"])).any())
    fx = _exploded(h, spans, parents=True)
    explained = _explained(h, fx) if needs else np.ones(h.height, dtype=bool)
    h = h.with_columns(pl.Series("explained", explained))
    fps = np.maximum(np.maximum(_fps_deps(h, fx), _paged_deps(h)), _model_deps(h))
    names, evidence, recorded = _name_deps(h, timeline, span_features, fps)
    run = h["run"].to_numpy()
    pos = h["pos"].to_numpy()
    rfirst = np.concatenate([[True], run[1:] != run[:-1]])
    run0 = pos[rfirst][_starts(rfirst)]
    # Positions grow through runs, so one running max over everything is the per-run one.
    gs = np.maximum.accumulate(np.maximum(np.maximum(fps, names) + 1, run0))
    h = h.with_columns(pl.Series("recorded", recorded))
    chain = _chains(h)
    chain = np.where(chain >= gs, chain, -1)
    chain, contended = _contention(h, gs, chain)
    h = h.with_columns(
        pl.Series("gs", gs),
        pl.Series("chain", chain).replace(-1, None),
        pl.Series("contended", contended),
        pl.Series("chain_c", np.where(chain >= 0, timeline.kids[np.maximum(chain, 0)], -1)).replace(
            -1, None
        ),
    )
    return _with_confidence(h), evidence


def _with_confidence(h: pl.DataFrame) -> pl.DataFrame:
    """Per hop: how sure we are it need not wait for the earlier members of its group."""
    n = h.height
    run = h["run"].to_numpy()
    gs = h["gs"].to_numpy()
    pos = h["pos"].to_numpy()
    block = h["block"].to_numpy()
    gfirst = np.concatenate([[True], (run[1:] != run[:-1]) | (gs[1:] != gs[:-1])])
    gid = _starts(gfirst)
    heads = np.flatnonzero(gfirst)
    all_instr = np.minimum.reduceat(h["instr"].to_numpy(), heads)[gid]
    # Fingerprints are positive evidence only where they cover everything: every argument of
    # every member fingerprinted (no opaque value, no list cut off) and no member's result free
    # text or unrecorded (a phrase taken out of it shows in no fingerprint).
    # (A member whose every argument was there before the run took nothing out of any text.)
    # A boolean result is a decision: what follows may be control-dependent on it, whatever
    # its arguments say.
    complete = (
        np.minimum.reduceat(h["covered"].to_numpy(), heads)
        & ~np.maximum.reduceat(h["decision"].to_numpy(), heads)
        & (
            ~np.maximum.reduceat(h["text"].to_numpy(), heads)
            | np.minimum.reduceat(h["explained"].to_numpy() | (pos == gs), heads)
        )
    )[gid]
    bfirst = np.concatenate([[True], block[1:] != block[:-1]])
    bheads = np.flatnonzero(bfirst)
    keys_known = np.minimum.reduceat(h["has_key"].to_numpy(), bheads)[_starts(bfirst)]
    same_block = np.zeros(n, dtype=bool)
    same_block[1:] = (block[1:] == block[:-1]) & (gid[1:] == gid[:-1])
    lead = (pos == gs) | h["chain"].is_not_null().to_numpy()
    recorded = np.maximum.reduceat(h["recorded"].to_numpy(), heads)[gid]
    level = np.where(
        lead | (all_instr & complete),
        2,
        np.where(
            all_instr,
            1,
            np.where(same_block, np.where(keys_known, 1, 0), np.where(recorded, 1, 2)),
        ),
    )
    basis = np.where(
        lead,
        -1,
        np.where(
            all_instr,
            np.where(complete, BASES.index("fingerprints"), BASES.index("fingerprints-partial")),
            np.where(
                same_block,
                np.where(keys_known, BASES.index("loop"), BASES.index("loop-unknown")),
                np.where(recorded, BASES.index("recorded"), BASES.index("observed")),
            ),
        ),
    )
    return h.with_columns(
        pl.Series("gid", gid),
        pl.Series("level", level),
        pl.Series("basis", basis).replace(-1, None),
    )
