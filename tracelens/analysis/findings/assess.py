"""Assess the detectors' candidates by replay: what each would save, which are worth reporting,
one re-timed example trace each, and the order they are reported in.

The outcome is a list of :class:`~tracelens.analysis.findings.finding.Finding` (typed; its JSON
form is ``Analysis.to_dict``'s business).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from tracelens.analysis.core import TraceAnalysis, analyze_traces
from tracelens.analysis.findings.candidate import MAX_PER_TYPE, Candidate, count
from tracelens.analysis.findings.finding import (
    Evidence,
    Example,
    Finding,
    FindingType,
    PathOp,
)
from tracelens.analysis.findings.replay import Change, replay, retime
from tracelens.analysis.findings.timeline import Timeline
from tracelens.analysis.summary import percentiles
from tracelens.schema import COLUMNS


def potential(timeline: Timeline, change: Change) -> float:
    """An upper bound of what ``change`` can save over all traces (ns): the time it removes."""
    dur = timeline.dur
    total = float(dur[change.instant].sum())
    total += float(((1.0 - np.clip(change.factor, 0.0, 1.0)) * dur[change.factor_rows]).sum())
    if len(change.members):
        d = dur[change.members]
        g = change.group
        longest = np.zeros(int(g.max()) + 1)
        np.maximum.at(longest, g, d)
        total += float(d.sum() - longest.sum())
    return total


def shortlist(timeline: Timeline, cands: list[Candidate]) -> list[Candidate]:
    """The ``MAX_PER_TYPE`` candidates of each type with the largest potential saving."""
    by_type: dict[FindingType, list[tuple[float, int, Candidate]]] = {}
    for k, c in enumerate(cands):
        by_type.setdefault(c.type, []).append((potential(timeline, c.change), k, c))
    keep: list[tuple[int, Candidate]] = []
    for items in by_type.values():
        items.sort(key=lambda x: (-x[0], x[1]))
        keep += [(k, c) for _, k, c in items[:MAX_PER_TYPE]]
    return [c for _, c in sorted(keep, key=lambda x: x[0])]


def replay_all(
    timeline: Timeline, changes: list[Change], traces: list[np.ndarray], examples: list[int]
) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """New latency per trace for each change, and the re-timed spans of its example trace
    (rows, new starts, new ends).  Changes touching disjoint traces share a replay (a trace's
    replay only depends on its own spans), so many small findings cost one pass."""
    batches: list[tuple[np.ndarray, list[int]]] = []
    order = sorted(range(len(changes)), key=lambda k: -len(traces[k]))
    for k in order:
        for used, members in batches:
            if not used[traces[k]].any():
                used[traces[k]] = True
                members.append(k)
                break
        else:
            used = np.zeros(timeline.n_traces, dtype=bool)
            used[traces[k]] = True
            batches.append((used, [k]))
    lats: list[np.ndarray] = [np.zeros(0)] * len(changes)
    retimed: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [(_EMPTY, _EMPTY, _EMPTY)] * len(
        changes
    )
    for _, members in batches:
        result = replay(timeline, _merge([changes[k] for k in members]))
        for k in members:
            lats[k] = result.latency
            rows = np.flatnonzero(timeline.trace == examples[k])
            start, end = retime(timeline, result, rows)
            retimed[k] = (rows, start, end)
    return lats, retimed


_EMPTY = np.zeros(0, dtype=np.int64)


def _merge(changes: list[Change]) -> Change:
    if len(changes) == 1:
        return changes[0]
    offset = 0
    groups = []
    for c in changes:
        groups.append(c.group + offset)
        offset += int(c.group.max()) + 1 if len(c.group) else 0
    return Change(
        instant=np.concatenate([c.instant for c in changes]),
        factor_rows=np.concatenate([c.factor_rows for c in changes]),
        factor=np.concatenate([c.factor for c in changes]),
        members=np.concatenate([c.members for c in changes]),
        group=np.concatenate(groups),
        dep_rows=np.concatenate([c.dep_rows for c in changes]),
        dep_on=np.concatenate([c.dep_on for c in changes]),
    )


@dataclass(frozen=True)
class Scored:
    """A finding built outside the detectors (a what-if asked for) and the span rows its change
    touches, so it is ordered and cross-checked with the detectors' findings by ``rank``."""

    finding: Finding
    rows: np.ndarray


def assess(
    trace_analysis: TraceAnalysis,
    timeline: Timeline,
    cands: list[Candidate],
    extra: Sequence[Scored] = (),
) -> list[Finding]:
    """Replayed findings, with the ``extra`` ones joined, most total saving first (``rank``)."""
    cands = shortlist(timeline, cands)
    if not cands:
        return rank(extra)
    touched = [_touched(timeline, c) for c in cands]
    examples = [_example_trace(timeline, c) for c in cands]
    new_lat, retimed = replay_all(timeline, [c.change for c in cands], touched, examples)
    out: list[Scored] = []
    kept: list[int] = []
    for k, cand in enumerate(cands):
        # A shared replay also changed other candidates' traces: take only this one's.
        projected = timeline.latency.astype(np.float64)
        projected[touched[k]] = new_lat[k][touched[k]]
        f = _finding(trace_analysis, timeline, cand, projected)
        if f is not None:
            out.append(Scored(f, np.unique(cand.change.rows(timeline.n))))
            kept.append(k)
    for s, ex in zip(
        out,
        _examples(trace_analysis, timeline, [(cands[k], examples[k], retimed[k]) for k in kept]),
        strict=True,
    ):
        s.finding.example = ex
    return rank([*out, *extra])


def rank(scored: Sequence[Scored]) -> list[Finding]:
    """The one order of findings (docs/analysis-json.md): most total saving first, ties by type
    then names; then the rules over the ordered list: N+1 and parallelizable cross-referenced,
    overlapping changes marked as alternatives, top changes flagged."""
    order = sorted(
        scored,
        key=lambda s: (-s.finding.total_saving_ms, s.finding.type.rank, s.finding.names),
    )
    out, rows = [s.finding for s in order], [s.rows for s in order]
    _cross_reference(out)
    _alternatives(out, rows)
    for f in out:
        f.top_change = top_change(f)
    return out


SAVING_FLOOR_MS = 1.0  # a change saving less than this at p50 is not a top change
SAVING_FLOOR_SHARE = 0.01  # ... nor one saving less than this share of the traces' p50


def _alternatives(found: list[Finding], rows: list[np.ndarray]) -> None:
    """Findings whose changes touch the same spans are alternatives, not additive savings:
    each later one (smaller total saving) names the first better one it overlaps."""
    for k in range(1, len(found)):
        if len(rows[k]) == 0:
            continue
        for j in range(k):
            if found[j].alternative_to is None and np.isin(rows[k], rows[j]).any():
                found[k].alternative_to = j
                found[k].evidence.append(
                    Evidence(
                        "alternative",
                        f"touches some of the same spans as finding #{j + 1} "
                        f"({found[j].type.value} of {', '.join(found[j].names[:3])}): an "
                        "alternative to it, not an "
                        "additive saving; the better one comes first",
                    )
                )
                break


def top_change(f: Finding) -> bool:
    """Whether a finding is shown as a top change: a change that saves at least the floor
    (``SAVING_FLOOR_MS`` and ``SAVING_FLOOR_SHARE`` of its traces' p50 latency), not an
    alternative to a better one, not low-confidence, and not a note (``tail``, polling)."""
    if f.type in (FindingType.TAIL, FindingType.POLLING) or f.alternative_to is not None:
        return False
    if f.confidence == "low":
        return False
    floor = max(SAVING_FLOOR_MS, SAVING_FLOOR_SHARE * f.projected_latency_ms["p50"])
    return f.saving_ms["p50"] >= floor


def _cross_reference(found: list[Finding]) -> None:
    """An N+1 loop is usually also parallelizable: say they are two remedies for one cost."""
    loops = {(f.parent, tuple(f.names)) for f in found if f.type is FindingType.PARALLELIZABLE}
    for f in found:
        if f.type is FindingType.N_PLUS_ONE and (f.parent, tuple(f.names)) in loops:
            note = (
                "the same calls are also reported as parallelizable: batching them or running "
                "them concurrently saves about the same, not both"
            )
            f.evidence.append(Evidence("also_parallelizable", note))


def _touched(timeline: Timeline, cand: Candidate) -> np.ndarray:
    """Every trace the candidate's change touches (its own traces, at least)."""
    return np.union1d(cand.traces, timeline.trace[cand.change.rows(timeline.n)]).astype(np.int64)


def _finding(
    trace_analysis: TraceAnalysis, timeline: Timeline, cand: Candidate, lat: np.ndarray
) -> Finding | None:
    saving_ns = timeline.latency[cand.traces] - lat[cand.traces]
    saving_ms = np.maximum(saving_ns, 0.0) / 1e6
    on_path = int((saving_ns > 0).sum())
    if on_path == 0 and cand.type.needs_saving:
        return None
    sav = percentiles(saving_ms, (50, 95))
    projected = percentiles(lat / 1e6, (50, 95))
    replay_note = (
        f"replay: saves {sav['p50']:,.1f} ms at p50 ({sav['p95']:,.1f} at p95) over "
        f"{count(len(cand.traces), 'trace')}; on the critical path in {on_path}"
    )
    confidence = cand.confidence
    evidence = [*cand.evidence, Evidence("replay", replay_note)]
    if confidence == "high" and sav["p50"] < SAVING_FLOOR_MS:
        # A promise of "high" is a promise of a saving: none shows in the replay here.
        confidence = "medium"
        evidence.append(
            Evidence(
                "saves_little",
                f"the replay saves under {SAVING_FLOOR_MS:g} ms at p50: medium at most",
            )
        )
    if cand.type is FindingType.TAIL:
        evidence.append(
            Evidence(
                "note",
                "a note, not a change: the replay shows what the slow traces would take if "
                "these operations behaved as in the median ones; what makes them slow (a cold "
                "cache, a slow shard, a retry storm) is not in the trace, so no action is named",
            )
        )
    return Finding(
        type=cand.type,
        names=cand.names,
        services=cand.services,
        parent=cand.parent,
        parent_service=cand.parent_service,
        traces=len(cand.traces),
        occurrences=int(cand.occurrences),
        saving_ms=sav,
        projected_latency_ms=projected,
        total_saving_ms=round(float(saving_ms.sum()), 3),
        traces_on_critical_path=on_path,
        confidence=confidence,
        evidence=evidence,
        details=cand.details,
    )


def _example_trace(timeline: Timeline, cand: Candidate) -> int:
    """The trace of the candidate's example occurrence, else its median-latency trace."""
    if cand.example:
        return int(timeline.trace[cand.example[0]])
    lat = timeline.latency[cand.traces]
    return int(cand.traces[int(np.argsort(lat, kind="stable")[len(lat) // 2])])


def _examples(
    trace_analysis: TraceAnalysis,
    timeline: Timeline,
    items: list[tuple[Candidate, int, tuple[np.ndarray, np.ndarray, np.ndarray]]],
) -> list[Example]:
    """Per finding, one affected trace with its latency before and after, as
    ``analyze_traces`` sees it.  All re-timed example traces go through one analysis, each
    under a stand-in trace id (one trace may be the example of several findings)."""
    if not items:
        return []
    keep = [c for c in trace_analysis.spans.columns if c in COLUMNS]
    rows = np.concatenate([r for _, _, (r, _, _) in items])
    sizes = [len(r) for _, _, (r, _, _) in items]
    table = trace_analysis.spans.select(keep)[rows.tolist()].with_columns(
        pl.Series("trace_id", [f"{k:032x}" for k, n in enumerate(sizes) for _ in range(n)]),
        pl.Series("start_ns", np.concatenate([s for _, _, (_, s, _) in items])),
        pl.Series("end_ns", np.concatenate([e for _, _, (_, _, e) in items])),
    )
    re_ta = analyze_traces(table)
    duration = dict(
        zip(re_ta.traces["trace_id"].to_list(), re_ta.traces["duration_ns"], strict=True)
    )
    paths = _path_summaries(re_ta)
    out = []
    for k, (cand, t, (ex_rows, _, _)) in enumerate(items):
        tid = f"{k:032x}"
        out.append(
            Example(
                trace_id=str(trace_analysis.spans["trace_id"][int(ex_rows[0])]),
                span_ids=(
                    trace_analysis.spans["span_id"].gather(cand.example).to_list()
                    if cand.example
                    else None
                ),
                latency_ms=round(float(timeline.latency[t]) / 1e6, 3),
                projected_latency_ms=round(float(duration[tid]) / 1e6, 3),
                projected_critical_path=paths.get(tid, []),
            )
        )
    return out


def _path_summaries(trace_analysis: TraceAnalysis, top: int = 5) -> dict[str, list[PathOp]]:
    """Per trace, the projected critical path's biggest operations (exclusive ms)."""
    main = trace_analysis.sections.filter(pl.col("main"))
    by_op = (
        main.group_by("trace_id", "name")
        .agg(((pl.col("end_ns") - pl.col("start_ns")).sum() / 1e6).alias("ms"))
        .sort(["trace_id", "ms", "name"], descending=[False, True, False])
        .group_by("trace_id", maintain_order=True)
        .head(top)
    )
    out: dict[str, list[PathOp]] = {}
    for tid, name, ms in by_op.select("trace_id", "name", "ms").iter_rows():
        out.setdefault(tid, []).append(PathOp(name=name, ms=round(float(ms), 3)))
    return out


__all__ = [
    "MAX_PER_TYPE",
    "SAVING_FLOOR_MS",
    "Scored",
    "assess",
    "potential",
    "rank",
    "replay_all",
    "shortlist",
    "top_change",
]
