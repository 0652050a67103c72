"""What-ifs from the latency model, each through the findings' replay so savings are end to end.

* ``trim_context`` (fraction f): every fitted model call's input tokens cut by f, so its model
  time loses f·L_in·T_prefill;
* ``cap_output`` (n tokens): output capped at n, losing (L_out - n)·T_decode where L_out > n;
* ``model_queue``: the queueing of model calls removed (one more replica, or light calls routed
  to a smaller model): vLLM's ``time_in_queue`` and ``wait`` spans directly under a model call;
* ``stream``: the latency a user perceives when each trace's final model call streams: the
  time to that call's first token (its queueing plus TTFT: the span's own TTFT attribute, else
  the fit's a + L_in·T_prefill + 1·T_decode);
* ``co_locate`` (round trip ms): the transfer of CLIENT spans that called a traced SERVER span
  (their own time around it) brought down to a same-region round trip;
* ``prefetch``: reads that run early (before any model call) on the critical path of most
  traces of an operation, always with the same arguments, moved off the path (warmed at start or
  refreshed in the background): made instant.

A model call's time is shortened as a *uniform compression* of its subtree: every span in it
except its ``wait`` spans gets the replay's self-time factor (model time left / model time),
so the same change works on a leaf engine span, a client span around a traced HTTP hop, or an
instrumented call whose queue/prefill/decode are child spans.  The replay (``findings.replay``)
then re-times whole traces: a call off the critical path saves nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from tracelens_instrumentation import attributes as A

from tracelens.analysis.core import TraceAnalysis
from tracelens.analysis.findings.assess import Scored, rank
from tracelens.analysis.findings.finding import Evidence, Finding, FindingType, WhatIfDetails
from tracelens.analysis.findings.replay import Change, replay
from tracelens.analysis.findings.timeline import Timeline, build_timeline
from tracelens.analysis.stages import calls_a_server, inherited_classes, span_classes
from tracelens.analysis.tokens import ModelFit, calls, token_fits
from tracelens.errors import OptionError

KINDS = ("trim_context", "cap_output", "model_queue", "stream", "co_locate", "prefetch")
DEFAULTS: dict[str, float | None] = {
    "trim_context": 0.5,
    "cap_output": 256.0,
    "model_queue": None,
    "stream": None,
    "co_locate": 1.0,  # ms: a same-region round trip
    "prefetch": None,
}
DEFAULT_THRESHOLD_MS = 10.0  # a what-if is a finding when it saves at least this at p50
PREFETCH_SHARE = 0.5  # a read on the critical path of at least this share of traces


@dataclass(frozen=True)
class WhatIf:
    kind: str
    value: float | None = None

    @classmethod
    def parse(cls, text: str) -> WhatIf:
        """``trim-context=0.5``, ``cap-output=128``, ``stream``, ``co-locate=2`` (ms)."""
        name, _, raw = text.partition("=")
        kind = name.strip().lower().replace("-", "_")
        if kind not in KINDS:
            raise ValueError(f"unknown what-if {name!r}: one of {', '.join(KINDS)}")
        value: float | None = DEFAULTS[kind]
        if raw.strip():
            if DEFAULTS[kind] is None and kind != "co_locate":
                raise ValueError(f"what-if {kind} takes no value")
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"what-if {kind}: {raw!r} is not a number") from None
        if kind == "trim_context" and value is not None and not 0.0 < value <= 1.0:
            raise ValueError("trim-context takes a fraction in (0, 1]")
        if kind in ("cap_output", "co_locate") and value is not None and value < 0:
            raise ValueError(f"{kind} takes a non-negative number")
        return cls(kind, value)

    @property
    def label(self) -> str:
        return self.kind if self.value is None else f"{self.kind}={self.value:g}"


@dataclass
class Projection:
    """One what-if over every trace: observed and projected latency (ns), the spans it changed."""

    what: WhatIf
    observed: np.ndarray
    projected: np.ndarray
    change: Change
    calls: int  # spans (model calls, hops, reads) the change touched

    @property
    def saving_ns(self) -> np.ndarray:
        out: np.ndarray = np.maximum(self.observed - self.projected, 0.0)
        return out

    def to_dict(self) -> dict[str, Any]:
        s = self.saving_ns / 1e6
        return {
            "what_if": self.what.label,
            "spans_changed": self.calls,
            "saving_ms": _pcts(s),
            "projected_latency_ms": _pcts(self.projected / 1e6),
            "total_saving_ms": round(float(s.sum()), 3),
        }


def _pcts(v: np.ndarray) -> dict[str, float]:
    if len(v) == 0:
        return {"p50": 0.0, "p95": 0.0}
    p = np.percentile(v, (50, 95))
    return {"p50": round(float(p[0]), 3), "p95": round(float(p[1]), 3)}


class _Model:
    """Per-span facts the model what-ifs need, computed once."""

    def __init__(
        self, trace_analysis: TraceAnalysis, timeline: Timeline, fits: list[ModelFit] | None
    ) -> None:
        self.trace_analysis, self.timeline = trace_analysis, timeline
        self.fits = {
            (f.model, f.server): f
            for f in (fits if fits is not None else token_fits(trace_analysis))
        }
        self.calls = calls(trace_analysis)
        sp = trace_analysis.spans
        self.parent = sp["_parent"].to_numpy().astype(np.int64)
        self.wait = (sp["kind_resolved"] == A.WAIT).to_numpy()

    def subtree(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(span rows, index into ``rows`` of their call) for every span under each call."""
        owner = np.full(self.timeline.n, -1, dtype=np.int64)
        owner[rows] = np.arange(len(rows))
        # Pointer jumping: each span's nearest ancestor-or-self that is one of ``rows``.
        anc = self.parent.copy()
        open_ = (owner < 0) & (anc >= 0)
        while open_.any():
            idx = np.flatnonzero(open_)
            a = anc[idx]
            oa, aa = owner[a], anc[a]
            owner[idx] = oa
            anc[idx] = np.where(oa < 0, aa, -1)
            open_[idx] = (owner[idx] < 0) & (anc[idx] >= 0)
        span = np.flatnonzero(owner >= 0)
        return span, owner[span]

    def compress(self, rows: np.ndarray, keep: np.ndarray) -> Change:
        """Each call ``rows[k]`` keeps the share ``keep[k]`` of its non-wait time."""
        span, owner = self.subtree(rows)
        not_wait = ~self.wait[span]
        span, owner = span[not_wait], owner[not_wait]
        return Change(factor_rows=span, factor=np.clip(keep[owner], 0.0, 1.0))

    def fitted(self) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
        """Calls of a group with a usable fit, with that fit's prefill and decode (s/token)."""
        rows, tp, td = [], [], []
        for r in self.calls.iter_rows(named=True):
            f = self.fits.get((r["model"], r["server"]))
            if f is None or not f.reliable:  # no reliable fit: no per-token costs to use
                continue
            rows.append(r)
            tp.append(f.coefficients.prefill)
            td.append(f.coefficients.decode)
        return pl.DataFrame(rows, schema=self.calls.schema), np.array(tp), np.array(td)


def _change_model(m: _Model, what: WhatIf) -> tuple[Change, int]:
    c, tp, td = m.fitted()
    if c.height == 0:
        return Change(), 0
    rows = c["_i"].to_numpy().astype(np.int64)
    # A call made through another traced call (a client span around the engine's own span) is
    # changed once, where the model works: the innermost; the outer one follows in the replay.
    inner = ~np.isin(rows, _nearest_above(rows, m.parent))
    c, tp, td, rows = c.filter(pl.Series(inner)), tp[inner], td[inner], rows[inner]
    model_s = c["model_s"].to_numpy()
    l_in, l_out = c["l_in"].to_numpy(), c["l_out"].to_numpy()
    if what.kind == "trim_context":
        cut = float(what.value or 0.0) * l_in * tp
    else:
        cap = float(what.value or 0.0)
        cut = np.maximum(l_out - cap, 0.0) * td
    with np.errstate(divide="ignore", invalid="ignore"):
        keep = np.where(model_s > 0, 1.0 - cut / model_s, 1.0)
    touched = keep < 1.0
    return m.compress(rows[touched], keep[touched]), int(touched.sum())


def _nearest_above(rows: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: its nearest strict ancestor that is also in ``rows`` (-1 when none),
    by pointer jumping."""
    mark = np.full(len(parent), -1, dtype=np.int64)
    mark[rows] = rows
    val = np.where(parent >= 0, mark[np.maximum(parent, 0)], -1)
    anc = np.where(parent >= 0, parent[np.maximum(parent, 0)], -1)
    anc[parent < 0] = -1
    open_ = (val < 0) & (anc >= 0)
    while open_.any():
        idx = np.flatnonzero(open_)
        a = anc[idx]
        va, aa = np.where(mark[a] >= 0, mark[a], -1), parent[a]
        # One step at a time on the chain above (calls nest shallowly; no recursion).
        val[idx] = va
        anc[idx] = np.where(va < 0, aa, -1)
        open_[idx] = (val[idx] < 0) & (anc[idx] >= 0)
    out: np.ndarray = val[rows]
    return out


def _change_queue(m: _Model) -> tuple[Change, int]:
    c = m.calls
    rows = c["_i"].to_numpy().astype(np.int64)
    engine_q = c["engine_timings"].to_numpy() & (c["queue_s"].to_numpy() > 0)
    dur = c["duration_s"].to_numpy()
    # An engine span: its queueing is inside its own time.
    keep = np.where(dur > 0, 1.0 - c["queue_s"].to_numpy() / np.maximum(dur, 1e-12), 1.0)
    factor_rows = rows[engine_q]
    factor = np.clip(keep[engine_q], 0.0, 1.0)
    # A traced queue: wait spans directly under any model call.
    model = m.trace_analysis.spans["model_call"].to_numpy()
    p = m.parent
    waits = np.flatnonzero(m.wait & (p >= 0) & model[np.maximum(p, 0)])
    return Change(instant=waits, factor_rows=factor_rows, factor=factor), len(waits) + len(
        factor_rows
    )


def final_calls(trace_analysis: TraceAnalysis) -> np.ndarray:
    """Per trace: the row of the model call on its main critical path that ends last (-1)."""
    main = trace_analysis.sections.filter(pl.col("main"))
    rows = main["_i"].to_numpy().astype(np.int64)
    model = trace_analysis.spans["model_call"].to_numpy()
    trace = trace_analysis.spans["_trace"].to_numpy()
    end = trace_analysis.spans["end_ns"].to_numpy()
    # Sections of spans under a model call count for that call: take the outermost call.
    parent = trace_analysis.spans["_parent"].to_numpy().astype(np.int64)
    top = _outermost(model, parent)
    on = top[rows]
    on = on[on >= 0]
    out = np.full(trace_analysis.traces.height, -1, dtype=np.int64)
    if len(on) == 0:
        return out
    order = np.argsort(end[on], kind="stable")
    on = on[order]
    out[trace[on]] = on  # the last write per trace is the latest-ending call
    return out


def _outermost(model: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per span: the outermost model call at or above it (-1 when none), by pointer jumping."""
    n = len(parent)
    best = np.where(model, np.arange(n), -1)
    anc = parent.copy()
    open_ = anc >= 0
    while open_.any():
        idx = np.flatnonzero(open_)
        a = anc[idx]
        ba, aa = best[a], anc[a]
        best[idx] = np.where(ba >= 0, ba, best[idx])
        anc[idx] = aa
        open_[idx] = anc[idx] >= 0
    return best


def _project_stream(m: _Model) -> Projection:
    """Perceived latency: time from the trace's start to its final model call's first token."""
    trace_analysis, timeline = m.trace_analysis, m.timeline
    final = final_calls(trace_analysis)
    c = m.calls
    row_of = {int(r): k for k, r in enumerate(c["_i"].to_list())}
    rows, keep = [], []
    for call in final[final >= 0].tolist():
        k = row_of.get(call)
        if k is None:
            continue
        model_s = float(c["model_s"][k])
        ttft = c["ttft_s"][k]
        queue = float(c["queue_s"][k])
        if ttft is not None and c["engine_timings"][k]:
            first = max(float(ttft) - queue, 0.0)  # vLLM's TTFT counts from arrival
        elif ttft is not None:
            first = float(ttft)
        else:
            f = m.fits.get((c["model"][k], c["server"][k]))
            if f is None or not f.reliable:  # no reliable fit: no per-token costs to use
                continue
            first = float(f.predict_s(np.array([c["l_in"][k]]), np.array([1.0]))[0])
        rows.append(call)
        keep.append(min(first / model_s, 1.0) if model_s > 0 else 1.0)
    rows_a = np.asarray(rows, dtype=np.int64)
    change = m.compress(rows_a, np.asarray(keep, dtype=np.float64))
    rp = replay(timeline, change)
    projected = timeline.latency.astype(np.float64).copy()
    main = timeline.main_root
    for call in rows_a.tolist():
        t = int(timeline.trace[call])
        # Only the call and what is under it changed: its start is the observed one.
        projected[t] = float(timeline.start[call] - timeline.start[main[t]]) + float(rp.dur[call])
    return Projection(
        WhatIf("stream"), timeline.latency.astype(np.float64), projected, change, len(rows)
    )


def _change_co_locate(m: _Model, rtt_ms: float) -> tuple[Change, int]:
    sp = m.trace_analysis.spans
    hops = np.flatnonzero(calls_a_server(sp, m.parent))
    self_ns = sp["self_ns"].to_numpy().astype(np.float64)[hops]
    keep = np.where(self_ns > 0, np.minimum(rtt_ms * 1e6 / np.maximum(self_ns, 1.0), 1.0), 1.0)
    touched = keep < 1.0
    return Change(factor_rows=hops[touched], factor=keep[touched]), int(touched.sum())


def prefetch_reads(trace_analysis: TraceAnalysis, share: float = PREFETCH_SHARE) -> np.ndarray:
    """Rows of reads to prefetch: tool hops (not under a model call) that start before the
    first model call of their trace, lie on the main critical path, and whose (service, name)
    is on the path of at least ``share`` of its root operation's traces with one set of
    arguments (``tracelens.args_hash``, else ``url.full`` / ``http.url`` / ``db.query.text``)."""
    sp = trace_analysis.spans
    parent = sp["_parent"].to_numpy().astype(np.int64)
    cls = inherited_classes(span_classes(sp), parent)
    own = span_classes(sp)
    n_traces = trace_analysis.traces.height
    trace = sp["_trace"].to_numpy()
    start = sp["start_ns"].to_numpy()
    model = sp["model_call"].to_numpy()
    first_model = np.full(n_traces, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_model, trace[model], start[model])
    on_path = np.zeros(sp.height, dtype=bool)
    on_path[trace_analysis.sections.filter(pl.col("main"))["_i"].to_numpy()] = True
    # A read: a tool hop whose own class is tool (the outermost tool span of the hop).
    outer_tool = (own == 2) & (cls[np.maximum(parent, 0)] != 2) | ((own == 2) & (parent < 0))
    cand = outer_tool & on_path & (start < first_model[trace])
    if not cand.any():
        return np.zeros(0, dtype=np.int64)
    attrs = pl.col("attributes")
    key = sp.select(
        pl.coalesce(
            pl.col("args_hash"),
            attrs.map.get(A.URL_FULL),
            attrs.map.get(A.HTTP_URL),
            attrs.map.get(A.DB_QUERY_TEXT),
        ).alias("args")
    )["args"]
    roots = trace_analysis.traces.select("root_service", "root_name")
    op_of_trace = (roots["root_service"] + "\x00" + roots["root_name"]).to_numpy()
    df = pl.DataFrame(
        {
            "row": np.flatnonzero(cand),
            "trace": trace[cand],
            "op": op_of_trace[trace[cand]],
            "service": sp["service"].to_numpy()[cand],
            "name": sp["name"].to_numpy()[cand],
            "args": key.to_numpy()[cand],
        }
    )
    per_op = pl.DataFrame({"op": op_of_trace}).group_by("op").agg(pl.len().alias("op_traces"))
    good = (
        df.group_by("op", "service", "name")
        .agg(
            pl.col("trace").n_unique().alias("traces"),
            pl.col("args").n_unique().alias("arg_sets"),
            pl.col("args").null_count().alias("no_args"),
        )
        .join(per_op, on="op")
        .filter(
            (pl.col("traces") >= share * pl.col("op_traces"))
            & (pl.col("arg_sets") == 1)
            & (pl.col("no_args") == 0)
        )
    )
    rows = df.join(good.select("op", "service", "name"), on=["op", "service", "name"])["row"]
    return np.sort(rows.to_numpy().astype(np.int64))


def project(
    trace_analysis: TraceAnalysis,
    what: WhatIf,
    *,
    fits: list[ModelFit] | None = None,
    timeline: Timeline | None = None,
) -> Projection:
    """Every trace's latency with ``what`` applied, from the replay."""
    timeline = build_timeline(trace_analysis.tree) if timeline is None else timeline
    m = _Model(trace_analysis, timeline, fits)
    if what.kind == "stream":
        return _project_stream(m)
    if what.kind in ("trim_context", "cap_output"):
        change, n = _change_model(m, what)
    elif what.kind == "model_queue":
        change, n = _change_queue(m)
    elif what.kind == "co_locate":
        change, n = _change_co_locate(m, float(what.value or 0.0))
    else:
        rows = prefetch_reads(trace_analysis)
        change, n = Change(instant=rows), len(rows)
    observed = timeline.latency.astype(np.float64)
    if n == 0:
        return Projection(what, observed, observed.copy(), change, 0)
    return Projection(
        what, observed, replay(timeline, change).latency.astype(np.float64), change, n
    )


_TITLES = {
    "trim_context": "cut each model call's input by {v:.0%}",
    "cap_output": "cap model output at {v:g} tokens",
    "model_queue": "remove the queueing before model calls (a replica, or routing light calls)",
    "stream": "stream the final model call: the user waits for its first token",
    "co_locate": "run the called services in the same region ({v:g} ms round trip)",
    "prefetch": "prefetch the request-independent reads (warm at start or refresh in background)",
}


@dataclass(frozen=True)
class Answer:
    """What a requested what-if came to: a finding, or the reason there is none."""

    what_if: str  # the what-if and its parameter, e.g. "trim_context=0.5"
    finding: bool
    reason: str | None  # why there is no finding (None when there is one)

    def to_dict(self) -> dict[str, Any]:
        return {"what_if": self.what_if, "finding": self.finding, "reason": self.reason}


def _why_nothing(m: _Model, what: WhatIf) -> str:
    """Why a what-if touched no span: what it needs that the traces do not have."""
    if what.kind in ("trim_context", "cap_output"):
        fitted, _, _ = m.fitted()
        if fitted.height == 0:
            return (
                "no token counts: no model call has gen_ai.usage.* input/output tokens with "
                "enough calls for a per-token latency fit"
            )
        if what.kind == "cap_output":
            return f"no model call produced more than {what.value:g} output tokens"
        statuses = sorted({f.status for f in m.fits.values() if f.status != "too_few_calls"})
        return (
            "no input-token cost measured: the per-token fit gives the model calls no prefill "
            f"time per token (fit status: {', '.join(statuses) or 'none'}; input lengths that "
            "vary less than 2x cannot show it), so cutting input saves nothing the traces show"
        )
    if what.kind == "co_locate":
        return (
            "no transfer measured: no CLIENT span calls a traced SERVER span, so the time on "
            "the wire is not in the trace"
        )
    if what.kind == "prefetch":
        return (
            "no request-independent read found: no tool read runs before the first model call "
            f"on the critical path of at least {PREFETCH_SHARE:.0%} of its operation's traces "
            "with one set of arguments"
        )
    if what.kind == "model_queue":
        return "no queueing measured before model calls (no time_in_queue, no wait span under one)"
    return "no final model call with a TTFT or a per-token fit to stream"


def assessed(
    trace_analysis: TraceAnalysis,
    whats: Sequence[WhatIf],
    *,
    threshold_ms: float = DEFAULT_THRESHOLD_MS,
    fits: list[ModelFit] | None = None,
    timeline: Timeline | None = None,
) -> tuple[list[Scored], list[Answer]]:
    """The what-ifs that save at least ``threshold_ms`` at p50 over the traces they touch, as
    findings of docs/analysis-json.md (type ``what_if``) with the span rows they change, for
    ``findings.rank`` to order with the detectors' findings; and for every what-if asked for,
    an answer: a finding, or the reason there is none (issue 25).  ``timeline`` is the replay's
    timeline of ``trace_analysis`` (built here when not given)."""
    if not whats:
        return [], []
    if trace_analysis.spans.height == 0:
        return [], [Answer(w.label, False, "no spans") for w in whats]
    timeline = build_timeline(trace_analysis.tree) if timeline is None else timeline
    fits = token_fits(trace_analysis) if fits is None else fits
    out: list[Scored] = []
    said: list[Answer] = []
    for what in whats:
        p = project(trace_analysis, what, fits=fits, timeline=timeline)
        touched = (
            np.unique(timeline.trace[p.change.rows(timeline.n)]) if p.calls else np.zeros(0, int)
        )
        if len(touched) == 0:
            said.append(
                Answer(
                    what.label, False, _why_nothing(_Model(trace_analysis, timeline, fits), what)
                )
            )
            continue
        saving = p.saving_ns[touched] / 1e6
        p50 = float(np.percentile(saving, 50))
        if p50 < threshold_ms:
            said.append(
                Answer(
                    what.label,
                    False,
                    f"saves {p50:,.1f} ms at p50 over {len(touched)} traces ({p.calls} spans "
                    f"changed), under the threshold of {threshold_ms:g} ms",
                )
            )
            continue
        said.append(Answer(what.label, True, None))
        title = _TITLES[what.kind].format(v=what.value if what.value is not None else 0)
        detail = (
            f"{what.label}: {title}: saves {p50:,.1f} ms at p50 over {len(touched)} traces "
            f"({p.calls} spans changed), through the replay"
        )
        rows = np.unique(p.change.rows(timeline.n))
        found = Finding(
            type=FindingType.WHAT_IF,
            names=sorted(set(trace_analysis.spans["name"].gather(rows).to_list()))[:10],
            services=sorted(set(trace_analysis.spans["service"].gather(rows).to_list()))[:10],
            parent=None,
            parent_service=None,
            traces=len(touched),
            occurrences=p.calls,
            saving_ms=_pcts(saving),
            projected_latency_ms=_pcts(p.projected / 1e6),
            total_saving_ms=round(float(saving.sum()), 3),
            traces_on_critical_path=int((saving > 0).sum()),
            confidence="medium",
            evidence=[Evidence("what_if", detail)],
            details=WhatIfDetails(what.label),
        )
        out.append(Scored(found, rows))
    return out, said


def answers(
    trace_analysis: TraceAnalysis,
    whats: Sequence[WhatIf],
    *,
    threshold_ms: float = DEFAULT_THRESHOLD_MS,
    fits: list[ModelFit] | None = None,
) -> tuple[list[Finding], list[Answer]]:
    """The what-if findings alone, in the findings' order (``findings.rank``), and the answers
    of :func:`assessed`.  An analysis joins them with the detectors' findings instead
    (``analysis.result.complete``)."""
    scored, said = assessed(trace_analysis, whats, threshold_ms=threshold_ms, fits=fits)
    return rank(scored), said


def findings(
    trace_analysis: TraceAnalysis,
    whats: Sequence[WhatIf],
    *,
    threshold_ms: float = DEFAULT_THRESHOLD_MS,
    fits: list[ModelFit] | None = None,
) -> list[Finding]:
    """The what-if findings of :func:`answers` (without the reasons)."""
    return answers(trace_analysis, whats, threshold_ms=threshold_ms, fits=fits)[0]


def parse_all(texts: Sequence[str]) -> tuple[WhatIf, ...]:
    """The ``--what-if`` values, parsed before any span is read (on any engine);
    ``OptionError`` names the bad one."""
    try:
        return tuple(WhatIf.parse(t) for t in texts)
    except ValueError as exc:
        raise OptionError(f"--what-if: {exc}") from None


__all__ = [
    "DEFAULTS",
    "KINDS",
    "Answer",
    "Projection",
    "WhatIf",
    "answers",
    "assessed",
    "final_calls",
    "findings",
    "parse_all",
    "prefetch_reads",
    "project",
]
