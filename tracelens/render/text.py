"""Terminal tables for ``tracelens analyze --format text`` (and ``tracelens size``), read from
the typed results.

The text renderer of an ``Analysis`` (``render_text``, registered as its ``"text"`` output:
``Analysis.to_text``) and of a ``Sizing`` (``sizing_text``: ``Sizing.to_text``).  What a
finding type shows comes from the type (``Finding.label``, its details' ``text_lines``), so
nothing here branches on the type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tracelens.analysis.findings.finding import Finding
from tracelens.analysis.hotspots import CpuHotspots
from tracelens.analysis.kinds import KINDS
from tracelens.analysis.outputs import register
from tracelens.analysis.result import Analysis
from tracelens.analysis.stages import Stages
from tracelens.analysis.summary import TraceSummary
from tracelens.analysis.tokens import ModelFit

if TYPE_CHECKING:  # a Sizing's renderer is registered by name: tracelens size loads the module
    from tracelens.analysis.sizing import Sizing


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        return "  ".join(
            (c.rjust(w) if right[i] else c.ljust(w))
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def clip(text: str, n: int = 48) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def render_text(analysis: Analysis, top: int = 10) -> str:
    summ = analysis.summary
    lat = summ.latency_ms
    out = [
        f"{summ.traces:,} traces, {summ.spans:,} spans",
        "",
        "End-to-end latency (ms)",
        table(
            ["p50", "p95", "p99", "max"],
            [[lat["p50"], lat["p95"], lat["p99"], lat["max"]]],
            [True] * 4,
        ),
        "",
        "Critical-path time by kind",
        table(
            ["kind", "ms", "share"],
            [[k, summ.critical_path_ms[k], f"{summ.critical_path_share[k]:.1%}"] for k in KINDS],
            [False, True, True],
        ),
        *_gpu_lines(analysis, top),
        *_latency_model_lines(analysis, top),
        "",
        f"Top operations by exclusive critical-path time (top {top})",
        _operations_table(analysis, top),
        *_hotspot_lines(analysis, top),
        "",
        f"Slowest traces (top {top})",
        _traces_table(analysis, top),
    ]
    if analysis.findings:
        out += ["", "Findings (most total saving first)"]
        out += [line for f in analysis.findings[:top] for line in _finding_lines(f)]
    if analysis.what_ifs:
        out += ["", "What-ifs asked for"]
        out += [
            f"- {a.what_if}: " + ("a finding (above)" if a.finding else f"no finding: {a.reason}")
            for a in analysis.what_ifs
        ]
    if analysis.warnings:
        out += ["", "Warnings"] + [f"- {w}" for w in analysis.warnings]
    return "\n".join(out) + "\n"


def _traces_table(analysis: Analysis, top: int) -> str:
    """The slowest traces; with GPU measurement in the input, each one's GPU idle share of its
    critical path ("not measured" for a trace nobody GPU-measured)."""
    gpu = analysis.summary.gpu_measured_traces > 0
    head = ["trace_id", "root", "ms", "spans", "critical path (largest kind)"]
    rows = [
        [
            t.trace_id,
            clip(t.root_name, 36),
            t.duration_ms,
            t.spans,
            _largest(t),
            *(
                ["not measured" if t.gpu_idle_share is None else f"{t.gpu_idle_share:.1%}"]
                if gpu
                else []
            ),
        ]
        for t in analysis.slowest(top)
    ]
    extra = ["gpu idle"] if gpu else []
    return table([*head, *extra], rows, [False, False, True, True, False, *[True] * len(extra)])


def _operations_table(analysis: Analysis, top: int) -> str:
    """The operations; with GPU measurement in the input, the on-CPU and GPU busy shares of
    each operation's self time beside each other ("-": not measured)."""
    ops = [op.rounded() for op in analysis.operations[:top]]
    gpu = any(o.gpu_busy_share is not None for o in analysis.operations)
    head = ["service", "operation", "kind", "count", "p50 ms", "p95 ms", "critical ms", "share"]
    rows = [
        [
            clip(o.service, 24),
            clip(o.name),
            o.kind,
            o.count,
            o.p50_ms,
            o.p95_ms,
            o.critical_ms,
            f"{o.critical_share:.1%}",
            *([_share(o.cpu_share), _share(o.gpu_busy_share)] if gpu else []),
        ]
        for o in ops
    ]
    extra = ["cpu busy", "gpu busy"] if gpu else []
    return table([*head, *extra], rows, [False, False, False, *[True] * (5 + len(extra))])


def _share(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _gpu_lines(analysis: Analysis, top: int) -> list[str]:
    """Request-level GPU idle share and the GPU-measured model calls (only with GPU data)."""
    summ = analysis.summary
    if not summ.gpu_measured_traces:
        return []
    n = summ.gpu_measured_traces
    out = [
        "",
        f"GPU ({n:,} trace{'' if n == 1 else 's'} measured): critical path with no GPU "
        f"working for the request: {_share(summ.gpu_idle_share)}",
    ]
    calls = analysis.gpu_model_calls[:top]
    if calls:
        out.append(
            table(
                ["model call", "trace", "ms", "cpu busy", "gpu busy", "gpu ms", "launches"],
                [
                    [
                        clip(c.name, 36),
                        c.trace_id[:16],
                        c.duration_ms,
                        _share(c.cpu_share),
                        _share(c.gpu_busy_share),
                        c.gpu_ms,
                        c.launches,
                    ]
                    for c in calls
                ],
                [False, False, True, True, True, True, True],
            )
        )
    return out


def _latency_model_lines(analysis: Analysis, top: int) -> list[str]:
    """Request latency per root operation (when there are cold starts or several roots), the
    stage breakdown, and the per-model token fits (when any model call has token counts)."""
    out: list[str] = []
    head = analysis.request_latency
    if head.cold_starts or len(head.by_operation) > 1:
        cold = len(head.cold_starts)
        title = "Request latency by root operation (ms)"
        if cold:
            title += f", {cold:,} cold-start trace{'' if cold == 1 else 's'} apart"
        quantiles = ("p50", "p95", "p99", "max")
        rows: list[list[Any]] = [
            ["all requests", "", sum(o.traces for o in head.by_operation)]
            + [head.latency_ms[q] for q in quantiles]
        ]
        rows += [
            [clip(o.service, 24), clip(o.name), o.traces] + [o.latency_ms[q] for q in quantiles]
            for o in head.by_operation[:top]
        ]
        out += [
            "",
            title,
            table(
                ["service", "operation", "traces", "p50", "p95", "p99", "max"],
                rows,
                [False, False, True, True, True, True, True],
            ),
        ]
        out += [f"  cold start: {c.name} ({c.service}) {c.duration_ms:,.1f} ms"
                for c in head.cold_starts[:top]]  # fmt: skip
    out += ["", stages_text(analysis.stages, top=top)]
    if analysis.models:
        out += ["", tokens_text(analysis.models, top=top)]
    return out


def _hotspot_lines(analysis: Analysis, top: int) -> list[str]:
    """The critical-path CPU profile, when any span carries CPU stacks."""
    hot = analysis.cpu_hotspots
    return ["", hotspots_text(hot, top=top).rstrip("\n")] if hot.spans else []


def _finding_lines(f: Finding) -> list[str]:
    head = f"- {f.label} [{f.confidence}]"
    if f.parent:
        head += f" under {f.parent}"
    head += f": {', '.join(f.names)}"
    head += (
        f"  (saves ~{f.saving_ms['p50']:,.1f} ms p50 / {f.saving_ms['p95']:,.1f} p95"
        f" in {f.traces:,} traces)"
    )
    lines = [head]
    if f.alternative_to is not None:
        lines.append(f"    alternative to finding #{f.alternative_to + 1}: not an additive saving")
    elif not f.top_change:
        lines.append("    a note, not a top change")
    if f.details is not None:
        lines += [f"    {line}" for line in f.details.text_lines()]
    if f.explanation:
        lines.append(f"    {f.explanation}")
    return lines


def _largest(t: TraceSummary) -> str:
    largest = t.largest_kind()
    return "-" if largest is None else f"{largest[0]} {largest[1]:.0%}"


def stages_text(st: Stages, top: int = 5) -> str:
    """The stage table for the terminal (``analyze`` text output, ``make demo``)."""
    lines = ["Stages (critical-path ms per trace; share of the p99 traces)"]
    if not st.operations:
        lines.append("  (no request traces)")
    for op in st.operations[:top]:
        lat = op.latency_ms
        lines.append(
            f"  {op.service} / {op.name}: {op.traces:,} trace{'' if op.traces == 1 else 's'}, "
            f"p50 {lat['p50']:,.1f} ms, "
            f"p99 {lat['p99']:,.1f} ms"
        )
        lines.append(f"    {'stage':<10}{'p50':>10}{'p95':>10}{'p99':>10}{'p99 share':>11}")
        for s in op.stages:
            lines.append(
                f"    {s.stage.value:<10}{s.p50_ms:>10,.1f}{s.p95_ms:>10,.1f}"
                f"{s.p99_ms:>10,.1f}{s.p99_share:>11.0%}"
            )
    if st.cold_start_traces:
        n = st.cold_start_traces
        lines.append(f"  ({n:,} cold-start trace{'' if n == 1 else 's'} reported apart)")
    return "\n".join(lines)


def tokens_text(fits: list[ModelFit], top: int = 5) -> str:
    lines = ["Model calls per token (T = a + L_in*prefill + L_out*decode)"]
    if not fits:
        lines.append("  (no model calls with token counts)")
    for f in fits[:top]:
        d = f.to_dict()
        aside = (
            f", {f.warmup_calls} warm-up call{'' if f.warmup_calls == 1 else 's'} set aside "
            "(first at a shape)"
            if f.warmup_calls
            else ""
        )
        if not f.reliable:
            scores = "" if f.status == "too_few_calls" else f" (R2 {f.r2:.2f}, MdAPE {f.mdape:.0%})"
            lines.append(
                f"  {f.model} @ {f.server}: {f.n} calls ({f.source}){aside}: no reliable fit: "
                f"{f.reason}{scores}"
            )
            continue
        lines.append(
            f"  {f.model} @ {f.server}: {f.n} calls ({f.source}){aside}, "
            f"a {d['intercept_ms']:,.1f} ms, "
            f"prefill {d['prefill_ms_per_token']:.3f} ms/token, decode "
            f"{d['decode_ms_per_token']:.3f} ms/token, R2 {f.r2:.2f}, MdAPE {f.mdape:.0%}; "
            f"queue p50 {f.queue_ms['p50']:,.1f} ms; {f.output_tokens_per_s:,.0f} output tokens/s"
            + ("" if f.status == "ok" else f" ({f.note()})")
        )
    return "\n".join(lines)


def hotspots_text(hotspots: CpuHotspots, top: int = 10) -> str:
    """The terminal table: critical-path CPU by entry point, function and module, then the
    same off the path."""
    if hotspots.spans == 0:
        return "CPU hotspots: no span carries tracelens.cpu_stacks (configure(profile=True))\n"
    lines = [f"CPU hotspots ({hotspots.spans:,} profiled spans in {hotspots.traces:,} traces)"]
    for title, side in (
        ("on the critical path (latency)", hotspots.critical_path),
        ("off the critical path (capacity, not latency)", hotspots.off_path),
    ):
        lines.append(f"  {title}: {side.total_ms:,.1f} ms CPU")
        if side.total_ms <= 0:
            continue
        entries = side.entry_points[:top]
        width = min(60, max([len(e.function) for e in entries] + [24]))
        lines.append(f"    {'calls out of the traced code':<{width}}  {'ms':>10} {'share':>6}"
                     f"  {'p50/p95 per trace':>22}")  # fmt: skip
        for e in entries:
            pt = e.per_trace_ms
            lines.append(
                f"    {_cut(e.function, width):<{width}}  {e.ms:>10,.1f} {e.share:>6.1%}  "
                f"{f'{pt.p50:,.1f} / {pt.p95:,.1f} ms':>22}"
            )
        functions = side.functions[:top]
        width = min(60, max([len(f.function) for f in functions] + [24]))
        lines.append(f"    {'function (by self time)':<{width}}  {'self ms':>10} {'self':>6}  "
                     f"{'incl ms':>10} {'incl':>6}")  # fmt: skip
        for f in functions:
            lines.append(
                f"    {_cut(f.function, width):<{width}}  {f.self_ms:>10,.1f} {f.self_share:>6.1%}"
                f"  {f.inclusive_ms:>10,.1f} {f.inclusive_share:>6.1%}"
            )
        mods = ", ".join(f"{m.module} {m.share:.0%}" for m in side.modules[:top])
        lines.append(f"    by module (self time): {mods}")
    for w in hotspots.warnings:
        lines.append(f"  warning: {w}")
    return "\n".join(lines) + "\n"


def _cut(name: str, width: int) -> str:
    return name if len(name) <= width else "…" + name[-(width - 1) :]


def sizing_text(sizing: Sizing) -> str:
    """A ``Sizing`` as the lines ``tracelens size`` prints: the demand per request, each
    resource's size and the one that binds first."""
    d = sizing.demand
    lines = [
        f"Sizing for {sizing.concurrency} concurrent requests at "
        f"{sizing.latency_target_ms:,.0f} ms ({sizing.arrival_per_s:,.1f} requests/s), "
        f"from {d.requests} requests:",
        f"  per request: {d.cpu_s * 1e3:,.1f} ms CPU ({d.cpu_share:.0%} of end-to-end), "
        f"{d.model_s * 1e3:,.1f} ms model ({d.model_share:.0%}), {d.model_calls:.1f} model "
        f"calls, {d.tool_calls:.1f} tool calls",
    ]
    for r in sizing.resources:
        unit = "cores" if r.name == "cpu" else "model slots"
        cur = ""
        if r.current is not None:
            cur = f"; today {r.current}: {r.current_utilisation:.0%} busy"
            if r.max_concurrency is not None:
                cur += f", max {r.max_concurrency:.1f} concurrent"
        lines.append(
            f"  {r.name}: {r.needed} {unit} (utilisation {r.utilisation:.0%} with "
            f"{r.headroom:.0%} headroom; waits {r.wait_probability:.0%}, "
            f"{r.expected_wait_ms:,.1f} ms expected){cur}"
        )
    if sizing.binding:
        lines.append(f"  binds first: {sizing.binding}")
    if not d.cpu_measured:
        lines.append("  (no tracelens.cpu_ns on these spans: CPU demand unknown, shown as 0)")
    if d.model_timing in ("client", "mixed"):
        lines.append(
            "  (model seconds as the client saw them: they include the client's own delays,"
            " which a saturated CPU inflates)"
        )
    return "\n".join(lines)


register(Analysis, "text", render_text)
register("tracelens.analysis.sizing.Sizing", "text", sizing_text)  # by name: not loaded here

__all__ = [
    "clip",
    "hotspots_text",
    "render_text",
    "sizing_text",
    "stages_text",
    "table",
    "tokens_text",
]
