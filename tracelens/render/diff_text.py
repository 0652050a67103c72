"""Terminal text for ``tracelens diff --format text``: the verdict first, then the tables.

The text renderer of a ``Diff`` (registered as its ``"text"`` output: ``Diff.to_text``).
"""

from __future__ import annotations

from tracelens.analysis.diff.profile import FindingBrief
from tracelens.analysis.diff.result import Attribution, Change, Diff, OperationDiff, RootDiff
from tracelens.analysis.outputs import register
from tracelens.render.text import clip, table

TOP_OPERATIONS = 12
MARK = {"regression": "REGRESSION", "improvement": "improvement", "unchanged": "", "too_few": "?"}


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:,.1f}"


def _signed(v: float | None) -> str:
    return "–" if v is None else f"{v:+,.1f}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:+.1%}"


def _ci(c: Change) -> str:
    if c.ci_low_ms is None or c.ci_high_ms is None:
        return "too few traces"
    return f"{c.ci_low_ms:+,.1f} .. {c.ci_high_ms:+,.1f}"


def render_text(diff: Diff) -> str:
    """The verdict (runs, method, regressions, tripped rules), each root's tables, then what
    appeared and vanished, then the warnings."""
    out = _head(diff)
    for root in diff.roots:
        out += _root(root)
    out += _churn(diff)
    if diff.warnings:
        out += ["", "Warnings"] + [f"  {w}" for w in diff.warnings[:20]]
    return "\n".join(out) + "\n"


def _head(diff: Diff) -> list[str]:
    m = diff.method
    out = [
        f"base: {diff.base.label}: {diff.base.traces:,} traces, {diff.base.spans:,} spans",
        f"new:  {diff.new.label}: {diff.new.traces:,} traces, {diff.new.spans:,} spans",
        f"{m.comparisons} comparisons, {m.confidence:.0%} confidence for all of them together "
        f"({m.per_comparison_confidence:.4%} each, Bonferroni), {m.resamples:,} bootstrap "
        f"resamples of the traces, seed {m.seed}",
    ]
    regressions = diff.regressions()
    out.append(
        f"{len(regressions)} significant regression{'s' if len(regressions) != 1 else ''}"
        if regressions
        else "no significant regression"
    )
    out += [
        f"FAILED --fail-on {rule.rule}: {rule.name} ({rule.service})"
        for rule in diff.rules
        if rule.tripped
    ]
    return out


def _root(root: RootDiff) -> list[str]:
    """One root operation: its latency table, where the change went, its operations."""
    out = [
        "",
        f"Root {root.name} ({root.service}): {root.base_traces:,} -> {root.new_traces:,} traces",
        table(
            ["latency", "base ms", "new ms", "change ms", "change", "interval ms", "verdict"],
            [_latency_row(c) for c in root.latency],
            [False, True, True, True, True, True, False],
        ),
        "",
        "Where the change went (critical-path time in the traces around each percentile)",
    ]
    for attribution in root.attribution:
        out += _attribution(attribution)
    rows = [_operation_row(op) for op in root.operations[:TOP_OPERATIONS]]
    if rows:
        out += [
            "",
            "Critical-path time per trace, by operation (ms; ! = significant regression)",
            table(["operation", "kind", "p50", "p95", "p99"], rows, [False, False] + [True] * 3),
        ]
    if len(root.operations) > TOP_OPERATIONS:
        out.append(f"... and {len(root.operations) - TOP_OPERATIONS} more operations")
    return out


def _latency_row(c: Change) -> list[str]:
    return [
        c.metric,
        _ms(c.base_ms),
        _ms(c.new_ms),
        _signed(c.delta_ms),
        _pct(c.relative),
        _ci(c),
        MARK[c.verdict.value],
    ]


def _attribution(a: Attribution) -> list[str]:
    parts = [f"{_signed(c.delta_ms)} ms {clip(c.name, 40)} ({c.kind})" for c in a.operations[:4]]
    kinds = ", ".join(
        f"{k} {_signed(n - b)}" for k, (b, n) in a.kinds.items() if abs(n - b) >= 0.05
    )
    out = [f"  {a.headline()}"]
    if parts:
        out.append(f"      {'; '.join(parts)}")
    if kinds:
        out.append(f"      by kind (ms): {kinds}")
    return out


def _operation_row(op: OperationDiff) -> list[str]:
    cells = [clip(op.name), op.kind]
    for c in op.changes:
        flag = " !" if c.verdict.value == "regression" else ""
        cells.append(f"{_ms(c.base_ms)} -> {_ms(c.new_ms)}{flag}")
    return cells


def _churn(diff: Diff) -> list[str]:
    """Root operations, operations and findings that appeared or vanished (20 of each)."""
    out: list[str] = []
    for title, items in (
        ("Root operations only in new", diff.root_churn.appeared),
        ("Root operations only in base", diff.root_churn.vanished),
        ("New operations", diff.operation_churn.appeared),
        ("Vanished operations", diff.operation_churn.vanished),
    ):
        if items:
            out += ["", f"{title} ({len(items)})"]
            out += [f"  {c.name} ({c.service}): {c.count:,}" for c in items[:20]]
    for title, found in (
        ("Findings that appeared", diff.finding_churn.appeared),
        ("Findings that went away", diff.finding_churn.vanished),
    ):
        if found:
            out += ["", f"{title} ({len(found)})"]
            out += [_finding_line(f) for f in found[:20]]
    return out


def _finding_line(f: FindingBrief) -> str:
    return (
        f"  {f.type}: {', '.join(f.names)}"
        + (f" under {f.parent}" if f.parent else "")
        + (f", saving p50 {f.saving_p50_ms:,.1f} ms" if f.saving_p50_ms else "")
    )


__all__ = ["render_text"]


register(Diff, "text", render_text)

__all__ = ["render_text"]
