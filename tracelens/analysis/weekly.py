"""Weekly figures: the ISO weeks (UTC) traces fall in, the small per-week figures a weekly
page and the index need, and the comparison of a week with the one before it.

A trace belongs to the ISO week in which it started.  ``week_stats`` keeps per week only the
percentiles, per-operation percentiles, shares by kind and the comparison's profile, so that
``tracelens.write_weekly`` holds one week's analysis at a time; ``week_diff`` compares two weeks
with ``tracelens diff``'s own code.  The pages are ``tracelens.render.html.weekly``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

import polars as pl

from tracelens.analysis.diff import Diff, profile
from tracelens.analysis.diff import compare as compare_runs
from tracelens.analysis.diff.compare import MIN_DELTA_MS, MIN_TRACES
from tracelens.analysis.diff.profile import Profile
from tracelens.analysis.result import Analysis

WEEK_NS = 7 * 86_400 * 10**9
_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")

# A regression: a significant rise (tracelens diff: bootstrap intervals over the traces,
# Bonferroni-corrected over the week's comparisons) of THRESHOLD or more at p50, p95 or p99,
# with MIN_SAMPLES traces in both weeks and at least MIN_DELTA_MS of change: diff's own minimums.
THRESHOLD = 0.10
MIN_SAMPLES = MIN_TRACES


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


@dataclass
class WeekStats:
    """What one week's page and the index need from the weeks around it."""

    week: str
    traces: int
    latency: dict[str, float]
    share: dict[str, float]
    critical_ms: dict[str, float]
    ops: pl.DataFrame  # service, name, count, p50_ms, p95_ms, p99_ms, critical_ms
    profile: Profile  # what the comparison with the next week needs


def week_stats(week: str, analysis: Analysis) -> WeekStats:
    trace_analysis = analysis.traces
    summ = analysis.summary
    dur = (pl.col("end_ns") - pl.col("start_ns")).cast(pl.Float64) / 1e6
    ops = trace_analysis.spans.group_by("service", "name").agg(
        pl.len().alias("count"),
        *[dur.quantile(q / 100, interpolation="linear").alias(f"p{q}_ms") for q in (50, 95, 99)],
    )
    crit = (
        trace_analysis.sections.filter(pl.col("main"))
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
        profile=profile(analysis),
    )


def week_diff(
    prev: WeekStats,
    cur: WeekStats,
    *,
    min_samples: int = MIN_SAMPLES,
    min_delta_ms: float = MIN_DELTA_MS,
) -> Diff:
    """``cur`` against the week before, ``prev``, as ``tracelens diff`` judges it (the same
    comparison code, at least ``min_samples`` traces a week)."""
    return compare_runs(
        prev.profile,
        cur.profile,
        min_traces=min_samples,
        min_delta_ms=min_delta_ms,
        base_label=prev.week,
        new_label=cur.week,
    )


__all__ = [
    "MIN_SAMPLES",
    "THRESHOLD",
    "WEEK_NS",
    "WeekStats",
    "iso_week",
    "week_bounds",
    "week_diff",
    "week_stats",
]
