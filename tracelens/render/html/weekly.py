"""Weekly reports: one page per ISO week of the store, each compared with the week before it, and
an index page with the trends across all weeks.

The figures are ``tracelens.analysis.weekly``'s (a week's ``WeekStats``, the comparison with
the week before as a ``Diff``); this module renders the pages from them, and
``tracelens.write_weekly`` loads each week and writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import polars as pl

from tracelens.analysis import Analysis
from tracelens.analysis.diff import Change, Diff, RootDiff, Verdict
from tracelens.analysis.kinds import KINDS
from tracelens.analysis.weekly import MIN_SAMPLES, THRESHOLD, WeekStats, week_bounds
from tracelens.render.html import model

TOP_CHANGES = 20


def week_dates(week: str) -> str:
    """``Mon 1 Dec – Sun 7 Dec 2025``: how a reader names a week."""
    start, _ = week_bounds(week)
    first = datetime.fromtimestamp(start // 10**9, tz=timezone.utc)
    last = first + timedelta(days=6)
    return f"{first:%a} {first.day} {first:%b} – {last:%a} {last.day} {last:%b %Y}"


def _rel(cur: float | None, prev: float | None) -> float | None:
    if cur is None or prev is None or prev <= 0:
        return None
    return (cur - prev) / prev


def compare(
    prev: WeekStats,
    cur: WeekStats,
    diff: Diff,
    *,
    threshold: float = THRESHOLD,
    min_samples: int = MIN_SAMPLES,
) -> dict[str, Any]:
    """What a week's page shows of its changes against the week before: the figures of both
    weeks, and the regressions of ``diff`` (``analysis.weekly.week_diff``: as ``tracelens
    diff`` judges them) that moved by ``threshold`` or more."""
    enough = prev.traces >= min_samples and cur.traces >= min_samples
    overall: list[dict[str, Any]] = [
        {
            "label": q,
            "prev": prev.latency[q],
            "cur": cur.latency[q],
            "delta": _rel(cur.latency[q], prev.latency[q]),
        }
        for q in ("p50", "p95", "p99")
    ]
    overall_flag = any(
        _moved(c, Verdict.REGRESSION, threshold) for root in diff.roots for c in root.latency
    )
    changed = {
        verdict: _op_moves(diff.roots, verdict, threshold)
        for verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    }
    regressions, improvements = changed[Verdict.REGRESSION], changed[Verdict.IMPROVEMENT]
    flagged = {(r["service"], r["name"]) for r in regressions}
    keys = ["service", "name"]
    both = (
        cur.ops.join(prev.ops, on=keys, how="inner", suffix="_prev")
        .with_columns(
            *[
                pl.when(pl.col(f"{q}_ms_prev") > 0)
                .then(pl.col(f"{q}_ms") / pl.col(f"{q}_ms_prev") - 1)
                .otherwise(None)
                .alias(f"{q}_delta")
                for q in ("p50", "p95", "p99")
            ]
        )
        .sort(["critical_ms", "count", "service", "name"], descending=[True, True, False, False])
    )
    table = both.to_dicts()
    for row in table:
        row["regressed"] = (row["service"], row["name"]) in flagged
    p95_of = {(r["service"], r["name"]): r["p95_ms"] for r in cur.ops.iter_rows(named=True)}
    new = [
        {
            "service": o.service,
            "name": o.name,
            "count": o.count,
            "p95_ms": p95_of.get((o.service, o.name)),
        }
        for o in diff.operation_churn.appeared
    ]
    gone = [
        {"service": o.service, "name": o.name, "count": o.count}
        for o in diff.operation_churn.vanished
    ]
    return {
        "prev_week": prev.week,
        "prev_traces": prev.traces,
        "cur_traces": cur.traces,
        "traces_delta": _rel(cur.traces, prev.traces),
        "overall": overall,
        "overall_regressed": overall_flag,
        "enough": enough,
        "share": [
            {
                "kind": k,
                "prev": prev.share[k],
                "cur": cur.share[k],
                "diff": cur.share[k] - prev.share[k],
            }
            for k in KINDS
        ],
        "threshold": threshold,
        "min_samples": min_samples,
        "regressions": regressions[:TOP_CHANGES],
        "regression_count": len(regressions),
        "improvements": improvements[:TOP_CHANGES],
        "improvement_count": len(improvements),
        "ops": table[:TOP_CHANGES],
        "ops_hidden": max(len(table) - TOP_CHANGES, 0),
        "new": new[:TOP_CHANGES],
        "new_count": len(new),
        "gone": gone[:TOP_CHANGES],
        "gone_count": len(gone),
        "headlines": [
            a.headline()
            for root in diff.roots
            for c, a in zip(root.latency, root.attribution, strict=True)
            if _moved(c, Verdict.REGRESSION, threshold)
        ],
    }


def _moved(c: Change, verdict: Verdict, threshold: float) -> bool:
    return c.verdict is verdict and c.relative is not None and abs(c.relative) >= threshold


def _op_moves(
    roots: Sequence[RootDiff], verdict: Verdict, threshold: float
) -> list[dict[str, Any]]:
    """Operations whose critical-path time per trace moved significantly by ``threshold`` or
    more at some percentile (the largest relative move of each), the largest first."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for root in roots:
        for op in root.operations:
            for c in op.changes:
                if not _moved(c, verdict, threshold):
                    continue
                key = (op.service, op.name)
                if key not in best or abs(c.relative or 0) > abs(best[key]["relative"]):
                    best[key] = {
                        "service": op.service,
                        "name": op.name,
                        "metric": c.metric,
                        "prev_ms": c.base_ms,
                        "cur_ms": c.new_ms,
                        "relative": c.relative,
                        "traces": op.new_traces,
                    }
    return sorted(best.values(), key=lambda r: (-abs(r["relative"]), r["service"], r["name"]))


def latency_trend(stats: list[WeekStats]) -> dict[str, Any]:
    """p50/p95/p99 per week as polylines in a 0..100 box (the template scales the box)."""
    n = len(stats)
    top = max((st.latency["p99"] for st in stats), default=0.0)
    ticks = model.axis_ticks(top) if top > 0 else [0.0]
    if len(ticks) > 1 and ticks[-1] < top:
        ticks.append(round(2 * ticks[-1] - ticks[-2], 9))  # one round step above the top
    ymax = max(ticks[-1], top) or 1.0

    def x(i: int) -> float:
        return 50.0 if n == 1 else 8.0 + 84.0 * i / (n - 1)

    series = []
    for q in ("p50", "p95", "p99"):
        pts = [(x(i), 100.0 * st.latency[q] / ymax, st.latency[q]) for i, st in enumerate(stats)]
        series.append({"label": q, "points": pts})
    return {
        "series": series,
        "yticks": [{"y": 100.0 * v / ymax, "value": v} for v in ticks],
        "weeks": [{"x": x(i), "week": st.week} for i, st in enumerate(stats)],
    }


def share_trend(stats: list[WeekStats]) -> list[dict[str, Any]]:
    """Per week, the critical-path share by kind as stacked column pieces (0..100)."""
    out = []
    for st in stats:
        y = 0.0
        pieces = []
        for k in KINDS:
            h = 100.0 * st.share[k]
            if h > 0:
                pieces.append({"kind": k, "y": y, "h": h, "share": st.share[k]})
                y += h
        out.append({"week": st.week, "pieces": pieces})
    return out


def render_week(
    analysis: Analysis,
    stats: WeekStats,
    comparison: dict[str, Any] | None,
    *,
    title: str | None = None,
    source: str,
    index_href: str | None = None,
) -> str:
    """One week's page: the report of its analysis, with the comparison with the week before."""
    from tracelens.render.html.render import render_context, report_context

    ctx = report_context(
        analysis, title=f"{title or 'Agent latency'}, week {stats.week}", sources=[source]
    )
    ctx.update(
        comparison=comparison,
        week=stats.week,
        week_dates=week_dates(stats.week),
        index_href=index_href,
    )
    return render_context("week.html.j2", ctx)


def _index_row(st: WeekStats, comp: dict[str, Any] | None, href: str) -> dict[str, Any]:
    return {
        "week": st.week,
        "dates": week_dates(st.week),
        "href": href,
        "traces": st.traces,
        "latency": st.latency,
        "deltas": {o["label"]: o["delta"] for o in comp["overall"]} if comp else None,
        "regressed": comp["overall_regressed"] if comp else False,
        "regressions": comp["regression_count"] if comp else None,
        "new": comp["new_count"] if comp else None,
        "gone": comp["gone_count"] if comp else None,
        "share": st.share,
        "segments": model.segments(st.critical_ms, sum(st.critical_ms.values())),
    }


def render_index(
    weeks: Sequence[tuple[WeekStats, dict[str, Any] | None, str]],
    *,
    title: str | None = None,
    source: str,
) -> str:
    """The index page over ``weeks`` (oldest first; each its stats, its comparison with the week
    before or ``None``, and the href of its page): trends, and a row per week, newest first."""
    from tracelens.render.html.render import render_context

    stats = [st for st, _, _ in weeks]
    rows = [_index_row(st, comp, href) for st, comp, href in weeks]
    ctx = {
        "title": f"{title or 'Agent latency'}, week by week",
        "sources": [source],
        "weeks": list(reversed(rows)),  # newest first: what a Monday reader opens
        "first_week": stats[0].week,
        "last_week": stats[-1].week,
        "traces": sum(st.traces for st in stats),
        "latency_trend": latency_trend(stats),
        "share_trend": share_trend(stats),
    }
    return render_context("index.html.j2", ctx)
