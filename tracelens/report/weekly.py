"""Weekly reports: one page per ISO week of the store, each compared with the week before it, and
an index page with the trends across all weeks.

A trace belongs to the ISO week (UTC) in which it started; the store filters whole traces by
their first span's start, so each week's analysis loads only that week.  Only small per-week
figures (percentiles, per-operation percentiles, shares by kind) are kept between weeks, so
memory stays that of the largest week.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelens.analysis import Analysis
from tracelens.analysis.kinds import KINDS
from tracelens.errors import TracelensError
from tracelens.progress import Progress
from tracelens.report import model

WEEK_NS = 7 * 86_400 * 10**9
_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")

# A regression: p95 up by THRESHOLD or more, with MIN_SAMPLES spans (or traces) in both weeks
# and at least MIN_DELTA_MS of absolute change (a 0.1 ms span doubling is noise, not news).
THRESHOLD = 0.10
MIN_SAMPLES = 20
MIN_DELTA_MS = 1.0
TOP_CHANGES = 20


def week_bounds(week: str) -> tuple[int, int]:
    """[start, end) of an ISO week such as ``2026-W48``, in ns since the epoch (UTC)."""
    m = _WEEK.match(week.strip())
    if not m:
        raise ValueError(f"{week!r} is not an ISO week like 2026-W48")
    year, num = int(m[1]), int(m[2])
    try:
        monday = datetime.fromisocalendar(year, num, 1).replace(tzinfo=timezone.utc)
    except ValueError:
        raise ValueError(f"{week!r}: {year} has no ISO week {num}") from None
    start = int(monday.timestamp()) * 10**9
    return start, start + WEEK_NS


def iso_week(ns: int) -> str:
    year, num, _ = datetime.fromtimestamp(ns // 10**9, tz=timezone.utc).isocalendar()
    return f"{year}-W{num:02d}"


def week_dates(week: str) -> str:
    """``Mon 1 Dec – Sun 7 Dec 2025``: how a reader names a week."""
    start, _ = week_bounds(week)
    first = datetime.fromtimestamp(start // 10**9, tz=timezone.utc)
    last = first + timedelta(days=6)
    return f"{first:%a} {first.day} {first:%b} – {last:%a} {last.day} {last:%b %Y}"


def weeks_in(db: str | None = None) -> list[tuple[str, int]]:
    """(ISO week, traces) for every week with a trace in the store, oldest first."""
    from tracelens.api import load_spans

    spans = load_spans(db=db, columns=["trace_id", "start_ns"]).spans
    df = pl.from_arrow(spans)
    assert isinstance(df, pl.DataFrame)
    if df.height == 0:
        return []
    firsts = df.group_by("trace_id").agg(pl.col("start_ns").min().alias("t0"))
    when = pl.from_epoch(pl.col("t0"), time_unit="ns")
    counts = (
        firsts.select(when.dt.iso_year().alias("y"), when.dt.week().alias("w"))
        .group_by("y", "w")
        .len()
        .sort("y", "w")
    )
    return [(f"{y}-W{w:02d}", int(n)) for y, w, n in counts.iter_rows()]


@dataclass
class WeekStats:
    """What one week's page and the index need from the weeks around it."""

    week: str
    traces: int
    latency: dict[str, float]
    share: dict[str, float]
    critical_ms: dict[str, float]
    ops: pl.DataFrame  # service, name, count, p50_ms, p95_ms, p99_ms, critical_ms


def week_stats(week: str, analysis: Analysis) -> WeekStats:
    ta = analysis.traces
    summ = analysis.summary
    dur = (pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64) / 1e6
    ops = ta.spans.group_by("service", "name").agg(
        pl.len().alias("count"),
        *[dur.quantile(q / 100, interpolation="linear").alias(f"p{q}_ms") for q in (50, 95, 99)],
    )
    crit = (
        ta.sections.filter(pl.col("main"))
        .group_by("service", "name")
        .agg(((pl.col("end_ns") - pl.col("start_ns")).sum() / 1e6).alias("critical_ms"))
    )
    ops = (
        ops.join(crit, on=["service", "name"], how="left")
        .with_columns(pl.col("critical_ms").fill_null(0.0))
        .sort("service", "name")
    )
    return WeekStats(
        week=week,
        traces=summ.traces,
        latency=summ.latency_ms,
        share=summ.critical_path_share,
        critical_ms=summ.critical_path_ms,
        ops=ops,
    )


def _rel(cur: float | None, prev: float | None) -> float | None:
    if cur is None or prev is None or prev <= 0:
        return None
    return (cur - prev) / prev


def compare(
    prev: WeekStats,
    cur: WeekStats,
    *,
    threshold: float = THRESHOLD,
    min_samples: int = MIN_SAMPLES,
    min_delta_ms: float = MIN_DELTA_MS,
) -> dict[str, Any]:
    """Week-over-week changes of ``cur`` against ``prev``, regressions flagged."""
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
    p95_delta = overall[1]["delta"]
    overall_flag = bool(
        enough
        and p95_delta is not None
        and p95_delta >= threshold
        and cur.latency["p95"] - prev.latency["p95"] >= min_delta_ms
    )
    ops = _op_changes(prev.ops, cur.ops, threshold, min_samples, min_delta_ms)
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
        **ops,
    }


def _op_changes(
    prev: pl.DataFrame, cur: pl.DataFrame, threshold: float, min_samples: int, min_delta_ms: float
) -> dict[str, Any]:
    keys = ["service", "name"]
    both = cur.join(prev, on=keys, how="inner", suffix="_prev")
    rel = {
        q: pl.when(pl.col(f"{q}_ms_prev") > 0)
        .then(pl.col(f"{q}_ms") / pl.col(f"{q}_ms_prev") - 1)
        .otherwise(None)
        .alias(f"{q}_delta")
        for q in ("p50", "p95", "p99")
    }
    enough = (pl.col("count") >= min_samples) & (pl.col("count_prev") >= min_samples)
    moved = (pl.col("p95_ms") - pl.col("p95_ms_prev")).abs() >= min_delta_ms
    both = both.with_columns(*rel.values()).with_columns(
        (enough & moved & (pl.col("p95_delta") >= threshold)).fill_null(False).alias("regressed"),
        (enough & moved & (pl.col("p95_delta") <= -threshold)).fill_null(False).alias("improved"),
    )
    regressions = both.filter(pl.col("regressed")).sort(
        ["p95_delta", "service", "name"], descending=[True, False, False]
    )
    improvements = both.filter(pl.col("improved")).sort(
        ["p95_delta", "service", "name"], descending=[False, False, False]
    )
    table = both.sort(
        ["critical_ms", "count", "service", "name"], descending=[True, True, False, False]
    )
    new = cur.join(prev, on=keys, how="anti").sort(
        ["count", "service", "name"], descending=[True, False, False]
    )
    gone = prev.join(cur, on=keys, how="anti").sort(
        ["count", "service", "name"], descending=[True, False, False]
    )
    return {
        "regressions": regressions.head(TOP_CHANGES).to_dicts(),
        "regression_count": regressions.height,
        "improvements": improvements.head(TOP_CHANGES).to_dicts(),
        "improvement_count": improvements.height,
        "ops": table.head(TOP_CHANGES).to_dicts(),
        "ops_hidden": max(table.height - TOP_CHANGES, 0),
        "new": new.head(TOP_CHANGES).to_dicts(),
        "new_count": new.height,
        "gone": gone.head(TOP_CHANGES).to_dicts(),
        "gone_count": gone.height,
    }


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


def _analyze_week(db: str | None, week: str, findings: bool, bar: Progress) -> Analysis:
    from tracelens.api import analyze

    start, end = week_bounds(week)
    bar.set_label(f"{week}: reading the store")
    return analyze(db=db, findings=findings, start_ns=start, end_ns=end, bar=bar)


def write_weekly(
    db: str | None = None,
    out_dir: str | os.PathLike[str] = "reports",
    week: str | None = None,
    *,
    findings: bool = True,
    title: str | None = None,
    threshold: float = THRESHOLD,
    min_samples: int = MIN_SAMPLES,
    bar: Progress | None = None,
) -> list[Path]:
    """One report per ISO week with traces in the store, plus ``index.html``; or, with ``week``,
    that week's report only (compared with the latest earlier week that has traces).

    Returns the paths written, the index last.
    """
    from tracelens.report.render import render_context, report_context

    bar = bar or Progress(enabled=False)
    if week is not None:
        week_bounds(week)  # a malformed week is a usage error before any reading
    bar.set_label("finding the weeks in the store")
    found = [w for w, _ in weeks_in(db)]
    if not found:
        raise TracelensError(f"{db or _default_db()}: the store holds no traces")
    if week is not None and week not in found:
        raise TracelensError(
            f"no traces in {week}; weeks with traces: {', '.join(found[:10])}"
            + (" …" if len(found) > 10 else "")
        )
    targets = [week] if week else found
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prev: WeekStats | None = None
    if week is not None and found.index(week) > 0:
        earlier = found[found.index(week) - 1]
        prev = week_stats(earlier, _analyze_week(db, earlier, False, bar))
    source = f"store {Path(db or _default_db()).name}"
    paths: list[Path] = []
    rows: list[dict[str, Any]] = []
    stats: list[WeekStats] = []
    bar.total = len(targets)
    for i, w in enumerate(targets):
        analysis = _analyze_week(db, w, findings, bar)
        st = week_stats(w, analysis)
        comp = compare(prev, st, threshold=threshold, min_samples=min_samples) if prev else None
        bar.set_label(f"{w}: rendering")
        ctx = report_context(
            analysis, title=f"{title or 'Agent latency'}, week {w}", sources=[source]
        )
        has_index = week is None or (out / "index.html").exists()
        ctx.update(
            comparison=comp,
            week=w,
            week_dates=week_dates(w),
            index_href="index.html" if has_index else None,
        )
        path = out / f"{w}.html"
        path.write_text(render_context("week.html.j2", ctx), encoding="utf-8")
        paths.append(path)
        rows.append(_index_row(st, comp, path.name))
        stats.append(st)
        prev = st
        bar.done = i + 1
    if week is None:
        paths.append(_write_index(out, title, source, stats, rows))
    return paths


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


def _write_index(
    out: Path, title: str | None, source: str, stats: list[WeekStats], rows: list[dict[str, Any]]
) -> Path:
    from tracelens.report.render import render_context

    traces = int(np.sum([st.traces for st in stats]))
    ctx = {
        "title": f"{title or 'Agent latency'}, week by week",
        "sources": [source],
        "weeks": list(reversed(rows)),  # newest first: what a Monday reader opens
        "first_week": stats[0].week,
        "last_week": stats[-1].week,
        "traces": traces,
        "latency_trend": latency_trend(stats),
        "share_trend": share_trend(stats),
    }
    path = out / "index.html"
    path.write_text(render_context("index.html.j2", ctx), encoding="utf-8")
    return path


def _default_db() -> str:
    from tracelens.store import default_db_path

    return default_db_path()
