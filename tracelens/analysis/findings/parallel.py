"""Parallelizable and N+1 findings from the groups of ``hops``.

A group of two or more independent hops under one parent is a parallelizable finding; groups
are gathered by pattern (parent operation + hop operations, in order) across traces, and the
remedy replayed is "start the group together" (retries and repeats inside it still wait for
the call they repeat).  A block of one operation called at least ``N_PLUS_ONE_MIN_CALLS`` times
in a row with at least ``N_PLUS_ONE_MIN_DISTINCT`` different arguments is also an N+1 loop; its
remedy, one batched call, is replayed as the same group started together (a batch taking as
long as its slowest call).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from tracelens.analysis.findings.candidate import (
    CONFIDENCE,
    MAX_PER_TYPE,
    Candidate,
    Evidence,
    count,
    weakest,
)
from tracelens.analysis.findings.features import MIX1, MIX2
from tracelens.analysis.findings.finding import (
    Confidence,
    FindingType,
    LoopDetails,
    ParallelDetails,
)
from tracelens.analysis.findings.hops import BASES
from tracelens.analysis.findings.replay import Change

N_PLUS_ONE_MIN_CALLS = 4
N_PLUS_ONE_MIN_DISTINCT = 3


MIN_OBSERVED = 2  # parents where two operations overlapped or swapped, for high confidence


def _group_table(h: pl.DataFrame) -> pl.DataFrame:
    """One row per group of two or more independent hops."""
    return (
        h.group_by("gid", maintain_order=True)
        .agg(
            pl.col("c"),
            pl.col("chain_c"),
            pl.col("op").unique().sort().alias("opset"),
            pl.col("trace").first(),
            pl.col("p").first(),
            pl.col("pop").first(),
            pl.col("level").min(),
            pl.col("basis").drop_nulls().unique().alias("basis"),
            pl.col("unknown_kind").any(),
            pl.col("contended").any(),
            pl.col("chain").is_null().sum().alias("units"),
        )
        .filter(pl.col("units") >= 2)
    )


def _most_promising(h: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """The hops of the groups whose pattern is among the ``MAX_PER_TYPE`` with the largest
    potential saving (what starting each group together removes at most: its hops' time minus
    its longest hop's).  Only those are replayed (``report.shortlist`` would pick the same), so
    only those are built.  Groups are contiguous in ``h`` (``gid`` grows), so this is a few
    NumPy reductions over all hops, with no per-group query."""
    gid = h["gid"].to_numpy()
    heads = np.flatnonzero(np.concatenate([[True], gid[1:] != gid[:-1]]))
    n_groups = len(heads)
    units = np.add.reduceat(h["chain"].is_null().to_numpy().astype(np.int64), heads)
    dur = (spans["end_ns"] - spans["start_ns"]).to_numpy().astype(np.float64)
    d = dur[h["c"].to_numpy()]
    pot = np.add.reduceat(d, heads) - np.maximum.reduceat(d, heads)
    # The pattern of a group: its parent operation and the *set* of its operations, as one
    # hash (a sum over the distinct operations: their order and repeats do not count).
    op = h["op"].to_numpy()
    order = np.lexsort((op, gid))
    go, oo = gid[order], op[order]
    distinct = np.concatenate([[True], (go[1:] != go[:-1]) | (oo[1:] != oo[:-1])])
    with np.errstate(over="ignore"):
        mixed = oo[distinct] * MIX1
        group_of = go[distinct]
        first = np.flatnonzero(np.concatenate([[True], group_of[1:] != group_of[:-1]]))
        opset = np.add.reduceat(mixed, first)
        pattern = h["pop"].to_numpy()[heads] * MIX2 + opset
    ok = units >= 2
    if not ok.any():
        return h.clear()
    uniq, inv = np.unique(pattern[ok], return_inverse=True)
    total = np.bincount(inv, weights=pot[ok], minlength=len(uniq))
    top = uniq[np.lexsort((uniq, -total))[:MAX_PER_TYPE]]
    chosen = np.zeros(n_groups, dtype=bool)
    chosen[ok] = np.isin(pattern[ok], top)
    return h.filter(pl.Series(np.repeat(chosen, np.diff(np.append(heads, len(gid))))))


def _changes(g: pl.DataFrame, pattern: np.ndarray, n_patterns: int) -> list[Change]:
    """Per pattern: start each group's ``c`` list together; ``chain_c`` holds in-group
    dependencies.  Built for all patterns at once, then cut by pattern."""
    flat = g.select(
        pl.Series("pat", pattern), pl.int_range(pl.len()).alias("g"), "c", "chain_c"
    ).explode("c", "chain_c")
    pat = flat["pat"].to_numpy()
    order = np.argsort(pat, kind="stable")
    cuts = np.searchsorted(pat[order], np.arange(n_patterns + 1))
    members = flat["c"].to_numpy().astype(np.int64)[order]
    group = flat["g"].to_numpy().astype(np.int64)[order]
    on = flat["chain_c"].fill_null(-1).to_numpy().astype(np.int64)[order]
    out = []
    for k in range(n_patterns):
        sl = slice(int(cuts[k]), int(cuts[k + 1]))
        m, gr, o = members[sl], group[sl], on[sl]
        d = o >= 0
        out.append(Change(members=m, group=gr, dep_rows=m[d], dep_on=o[d]))
    return out


def parallel_candidates(
    spans: pl.DataFrame, h: pl.DataFrame, evidence: pl.DataFrame
) -> list[Candidate]:
    """One finding per pattern of groups: parent operation + the *set* of hop operations (a
    pattern seen in both orders is one finding).  Everything per pattern is computed in a few
    whole-table queries; the loop at the end only assembles the results."""
    if h.height == 0:
        return []
    g = _group_table(_most_promising(h, spans))
    if g.height == 0:
        return []
    pat_ids = g.select(pl.struct("pop", "opset").rank("dense").cast(pl.Int64) - 1).to_series()
    g = g.with_columns(pat_ids.alias("pat")).sort("pat", maintain_order=True)
    pattern = g["pat"].to_numpy()
    n_pat = int(pattern.max()) + 1
    per = (
        g.with_columns(pl.col("c").list.len().alias("size"))
        .group_by("pat", maintain_order=True)
        .agg(
            pl.col("c").first().alias("example"),
            pl.col("p").first(),
            pl.col("pop").first(),
            pl.col("opset").first(),
            pl.col("trace").unique().alias("traces"),
            pl.col("level").min(),
            pl.col("unknown_kind").any(),
            pl.col("contended").any(),
            pl.col("basis")
            .list.explode(keep_nulls=False, empty_as_null=False)
            .unique()
            .alias("basis"),
            pl.col("size"),
        )
        .sort("pat")
    )
    observed = _observed_counts(per, evidence)
    changes = _changes(g, pattern, n_pat)
    # Labels of every example row and parent, gathered once.
    ex_rows = per["example"].explode().to_numpy().astype(np.int64)
    ex_len = per["example"].list.len().to_numpy()
    ex_names = spans["name"].gather(ex_rows).to_list()
    ex_services = spans["service"].gather(ex_rows).to_list()
    p_rows = per["p"].to_numpy().astype(np.int64)
    p_names = spans["name"].gather(p_rows).to_list()
    p_services = spans["service"].gather(p_rows).to_list()
    out = []
    at = 0
    for k, row in enumerate(per.iter_rows(named=True)):
        n_ex = int(ex_len[k])
        names, services = _ordered(ex_names[at : at + n_ex], ex_services[at : at + n_ex])
        example = ex_rows[at : at + n_ex].tolist()
        at += n_ex
        basis = {BASES[b] for b in row["basis"]}
        level = CONFIDENCE[int(row["level"])]
        n_over, n_both, n_min = observed[k]
        if "observed" in basis and n_min < MIN_OBSERVED:
            level = weakest(level, "medium")
        if row["unknown_kind"]:
            level = weakest(level, "medium")
        if row["contended"]:
            level = weakest(level, "medium")
        sizes = row["size"]
        n_traces = len(row["traces"])
        what = f"{len(names)} operations" if len(names) > 1 else f"{max(sizes)} calls of {names[0]}"
        ev = [
            Evidence(
                "sequential",
                f"{what} ran one after another under {p_names[k]} in {count(n_traces, 'trace')}",
            ),
            *_basis_evidence(basis, n_over, n_both, n_min),
        ]
        if row["contended"]:
            ev.append(
                Evidence(
                    "contention",
                    "some hops wait on the same lock, semaphore, rate limit or pool (a child "
                    "span says so): the replay keeps them one after another, so only the "
                    "others overlap; medium at most",
                )
            )
        out.append(
            Candidate(
                type=FindingType.PARALLELIZABLE,
                names=names,
                services=services,
                change=changes[k],
                traces=np.asarray(sorted(row["traces"]), dtype=np.int64),
                confidence=level,
                evidence=ev,
                occurrences=int(sum(sizes)),
                parent=p_names[k],
                parent_service=p_services[k],
                example=example,
                details=ParallelDetails(hops_per_trace=float(np.median(sizes))),
            )
        )
    return out


def _observed_counts(per: pl.DataFrame, evidence: pl.DataFrame) -> list[tuple[int, int, int]]:
    """Per pattern: (most parents where a pair of its operations overlapped or swapped, most
    parents where both ran, fewest parents with such evidence over the pairs that have any)."""
    n = per.height
    if evidence.height == 0:
        return [(0, 0, 0)] * n
    pairs = (
        per.select("pat", "pop", pl.col("opset").alias("op_a"))
        .explode("op_a")
        .join(per.select("pat", pl.col("opset").alias("op_b")).explode("op_b"), on="pat")
        .filter(pl.col("op_a") != pl.col("op_b"))
    )
    ev = pairs.join(evidence, on=["pop", "op_a", "op_b"]).filter(pl.col("n_overlap") > 0)
    agg = ev.group_by("pat").agg(
        pl.col("n_overlap").max().alias("hi"),
        pl.col("n_both").max().alias("both"),
        pl.col("n_overlap").min().alias("lo"),
    )
    out = [(0, 0, 0)] * n
    for pat, hi, both, lo in agg.iter_rows():
        out[int(pat)] = (int(hi), int(both), int(lo))
    return out


def _ordered(names: list[str], services: list[str]) -> tuple[list[str], list[str]]:
    """Distinct (name, service) labels in example order."""
    seen: set[tuple[str, str]] = set()
    n_out: list[str] = []
    s_out: list[str] = []
    for n, s in zip(names, services, strict=True):
        if (n, s) not in seen:
            seen.add((n, s))
            n_out.append(str(n))
            s_out.append(str(s))
    return n_out, s_out


def _basis_evidence(basis: set[str], n_over: int, n_both: int, n_min: int) -> list[Evidence]:
    out = []
    if "fingerprints" in basis:
        out.append(
            Evidence(
                "fingerprints_complete",
                "every argument of every hop was fingerprinted, and none came from an earlier "
                "hop's result (value, JSON field or token) or from a resource an earlier hop "
                "may have changed",
            )
        )
    if "fingerprints-partial" in basis:
        out.append(
            Evidence(
                "fingerprints_partial",
                "no argument fingerprint links the hops, but the fingerprints do not cover "
                "everything (an opaque argument, a list cut off, or a free-text or unrecorded "
                "result that may flow in transformed form): medium at most",
            )
        )
    if "observed" in basis:
        out.append(
            Evidence(
                "observed_independent",
                f"the same operations overlapped or ran in another order in {n_over} of "
                f"{n_both} parents (so neither waits for the other)"
                + (
                    ""
                    if n_min >= MIN_OBSERVED
                    else f"; fewer than {MIN_OBSERVED} parents for some pair: medium at most"
                ),
            )
        )
    if "loop" in basis:
        out.append(
            Evidence(
                "loop",
                "repeated calls of one operation with different arguments (a loop over items)",
            )
        )
    if "recorded" in basis:
        out.append(
            Evidence(
                "recorded_values_unlinked",
                "the hops recorded their arguments and results (gen_ai.tool.call.*, query "
                "text, URLs) and nothing of an earlier hop's result is in a later hop's "
                "arguments (a reworded value would not show: medium at most)",
            )
        )
    if "loop-unknown" in basis:
        out.append(
            Evidence(
                "loop_unknown_args",
                "repeated calls of one operation whose arguments are not recorded (low)",
            )
        )
    return out


def _change(part: pl.DataFrame) -> Change:
    """Start each row's ``c`` list together (one pattern's rows)."""
    return _changes(part, np.zeros(part.height, dtype=np.int64), 1)[0]


def _label(spans: pl.DataFrame, row: int) -> tuple[str, str]:
    r = spans.row(row, named=True)
    return str(r["name"]), str(r["service"])


def n_plus_one_candidates(spans: pl.DataFrame, h: pl.DataFrame) -> list[Candidate]:
    """Runs of one operation called many times in a row with varying arguments."""
    if h.height == 0:
        return []
    # Only blocks long enough can be loops: keep their hops (blocks are contiguous in ``h``).
    key = h["gid"].to_numpy() * np.int64(1 << 32) + h["block"].to_numpy()
    edges = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1], [True]]))
    sizes = np.diff(edges)
    if sizes.max(initial=0) < N_PLUS_ONE_MIN_CALLS:
        return []
    h = h.filter(pl.Series(np.repeat(sizes >= N_PLUS_ONE_MIN_CALLS, sizes)))
    blocks = (
        h.group_by("gid", "block", maintain_order=True)
        .agg(
            pl.col("c"),
            pl.col("chain_c"),
            pl.col("trace").first(),
            pl.col("p").first(),
            pl.col("pop").first(),
            pl.col("op").first(),
            pl.col("has_key").all().alias("known"),
            pl.col("key").n_unique().alias("distinct"),
            pl.col("instr").all().alias("instr"),
            pl.len().alias("calls"),
        )
        .filter(
            (pl.col("calls") >= N_PLUS_ONE_MIN_CALLS)
            & pl.col("known")
            & (pl.col("distinct") >= N_PLUS_ONE_MIN_DISTINCT)
        )
    )
    out = []
    for part in blocks.partition_by("pop", "op", maintain_order=True):
        members = part["c"].to_list()
        change = _change(part)
        name, service = _label(spans, int(members[0][0]))
        parent, parent_service = _label(spans, int(part["p"][0]))
        calls = part["calls"].to_numpy()
        distinct = part["distinct"].to_numpy()
        level: Confidence = "high" if bool(part["instr"].all()) else "medium"
        out.append(
            Candidate(
                type=FindingType.N_PLUS_ONE,
                names=[name],
                services=[service],
                change=change,
                traces=part["trace"].unique().to_numpy(),
                confidence=level,
                evidence=[
                    Evidence(
                        "loop",
                        f"{name} called {int(np.median(calls))} times in a row under {parent} "
                        f"(median; {int(np.median(distinct))} distinct arguments) in "
                        f"{count(part['trace'].n_unique(), 'trace')}: one batched call instead",
                    ),
                    Evidence(
                        "assumes_batch_as_slow_as_slowest",
                        "the replay assumes the batch takes as long as the slowest single call",
                    ),
                ],
                occurrences=int(calls.sum()),
                parent=parent,
                parent_service=parent_service,
                example=list(members[0]),
                details=LoopDetails(calls_per_trace=float(np.median(calls))),
            )
        )
    return out
