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

from tracelens.analysis.findings.candidate import CONFIDENCE, Candidate, count, weakest
from tracelens.analysis.findings.hops import BASES
from tracelens.analysis.findings.replay import Change

N_PLUS_ONE_MIN_CALLS = 4
N_PLUS_ONE_MIN_DISTINCT = 3


def _group_table(h: pl.DataFrame) -> pl.DataFrame:
    """One row per group of two or more independent hops."""
    return (
        h.group_by("gid", maintain_order=True)
        .agg(
            pl.col("c"),
            pl.col("chain_c"),
            pl.col("op").unique(maintain_order=True).alias("ops"),
            pl.col("trace").first(),
            pl.col("p").first(),
            pl.col("pop").first(),
            pl.col("level").min(),
            pl.col("basis").drop_nulls().unique().alias("basis"),
            pl.col("unknown_kind").any(),
            pl.col("chain").is_null().sum().alias("units"),
        )
        .filter(pl.col("units") >= 2)
    )


def parallel_candidates(
    spans: pl.DataFrame, h: pl.DataFrame, evidence: pl.DataFrame
) -> list[Candidate]:
    """One finding per pattern of groups (parent operation + hop operations)."""
    if h.height == 0:
        return []
    g = _group_table(h)
    if g.height == 0:
        return []
    out = []
    for part in g.partition_by("pop", "ops", maintain_order=True):
        out.append(_parallel_candidate(part, spans, evidence))
    return out


def _change(part: pl.DataFrame) -> Change:
    """Start each row's ``c`` list together; ``chain_c`` holds in-group dependencies."""
    flat = part.select(pl.int_range(pl.len()).alias("g"), pl.col("c"), pl.col("chain_c")).explode(
        "c", "chain_c"
    )
    deps = flat.filter(pl.col("chain_c").is_not_null())
    return Change(
        members=flat["c"].to_numpy().astype(np.int64),
        group=flat["g"].to_numpy().astype(np.int64),
        dep_rows=deps["c"].to_numpy().astype(np.int64),
        dep_on=deps["chain_c"].to_numpy().astype(np.int64),
    )


def _label(spans: pl.DataFrame, row: int) -> tuple[str, str]:
    r = spans.row(row, named=True)
    return str(r["name"]), str(r["service"])


def _parallel_candidate(
    part: pl.DataFrame, spans: pl.DataFrame, evidence: pl.DataFrame
) -> Candidate:
    members = part["c"].to_list()
    change = _change(part)
    example = list(members[0])
    names, services = _ordered_labels(spans, example)
    parent, parent_service = _label(spans, int(part["p"].to_numpy()[0]))
    level = CONFIDENCE[int(part["level"].to_numpy().min())]
    if part["unknown_kind"].any():
        level = weakest(level, "medium")
    basis = {BASES[b] for bs in part["basis"].to_list() for b in bs}
    sizes = [len(m) for m in members]
    ev = [
        f"{len(names) if len(names) > 1 else max(sizes)} "
        f"{'operations' if len(names) > 1 else 'calls of ' + names[0]} ran one after another "
        f"under {parent} in {count(part['trace'].n_unique(), 'trace')}",
        *_basis_text(basis, part, evidence, names),
    ]
    return Candidate(
        type="parallelizable",
        names=names,
        services=services,
        change=change,
        traces=part["trace"].unique().to_numpy(),
        confidence=level,
        evidence=ev,
        occurrences=int(sum(sizes)),
        parent=parent,
        parent_service=parent_service,
        example=example,
        extra={"hops_per_trace": float(np.median(sizes))},
    )


def _ordered_labels(spans: pl.DataFrame, rows: list[int]) -> tuple[list[str], list[str]]:
    names: list[str] = []
    services: list[str] = []
    seen = set()
    for r in rows:
        n, s = _label(spans, r)
        if (n, s) not in seen:
            seen.add((n, s))
            names.append(n)
            services.append(s)
    return names, services


def _basis_text(
    basis: set[str], part: pl.DataFrame, evidence: pl.DataFrame, names: list[str]
) -> list[str]:
    out = []
    if "fingerprints" in basis:
        out.append("no hop's argument fingerprints contain another hop's result fingerprints")
    if "observed" in basis and evidence.height:
        ops = part["ops"][0].to_list()
        ev = evidence.filter(
            pl.col("pop") == part["pop"][0],
            pl.col("op_a").is_in(ops),
            pl.col("op_b").is_in(ops),
            pl.col("n_overlap") > 0,
        )
        n_over = int(ev["n_overlap"].to_numpy().max(initial=0))
        n_both = int(ev["n_both"].to_numpy().max(initial=0))
        out.append(
            f"the same operations overlapped or ran in another order in {n_over} of {n_both} "
            "parents (so neither waits for the other)"
        )
    if "loop" in basis:
        out.append("repeated calls of one operation with different arguments (a loop over items)")
    if "loop-unknown" in basis:
        out.append("repeated calls of one operation whose arguments are not recorded (low)")
    return out


def n_plus_one_candidates(spans: pl.DataFrame, h: pl.DataFrame) -> list[Candidate]:
    """Runs of one operation called many times in a row with varying arguments."""
    if h.height == 0:
        return []
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
        level = "high" if bool(part["instr"].all()) else "medium"
        out.append(
            Candidate(
                type="n_plus_one",
                names=[name],
                services=[service],
                change=change,
                traces=part["trace"].unique().to_numpy(),
                confidence=level,
                evidence=[
                    f"{name} called {int(np.median(calls))} times in a row under {parent} "
                    f"(median; {int(np.median(distinct))} distinct arguments) in "
                    f"{count(part['trace'].n_unique(), 'trace')}: one batched call instead",
                    "the replay assumes the batch takes as long as the slowest single call",
                ],
                occurrences=int(calls.sum()),
                parent=parent,
                parent_service=parent_service,
                example=list(members[0]),
                extra={"calls_per_trace": float(np.median(calls))},
            )
        )
    return out
