"""The HTML report calls of the library (wrapped by ``tracelens.api`` and re-exported by
``tracelens``): load, analyse, hand the analysis to ``tracelens.render.html`` to render, write the
pages.  The loading and analysing are the library's own calls, handed in by ``tracelens.api``
(``Library``): this module does not import ``api`` back (no import circle,
``tests/test_architecture.py``).

``write_report`` is the library form of ``tracelens report`` (``weekly=True`` is its
``--weekly``), ``write_weekly`` the weekly pages alone.  The call is not named ``report``:
that was the name of the rendering package (now ``tracelens.render.html``), and an attribute of
a package's name on ``tracelens`` is replaced by the package as soon as anything imports it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from tracelens.analysis import Analysis
from tracelens.analysis.weekly import (
    MIN_SAMPLES,
    THRESHOLD,
    WeekStats,
    week_bounds,
    week_diff,
    week_stats,
)
from tracelens.analysis.whatif import parse_all
from tracelens.errors import OptionError, TracelensError
from tracelens.progress import Progress
from tracelens.render.html import render_report
from tracelens.render.html.weekly import compare, render_index, render_week


@dataclass(frozen=True)
class Library:
    """The library calls the report calls read through: ``tracelens.api.analyze`` and
    ``tracelens.api.load_spans`` (same parameters)."""

    analyze: Callable[..., Analysis]
    load_spans: Callable[..., Any]


@dataclass
class Written:
    """The pages ``write_report`` wrote (for weekly reports, the index last) and, for a single
    report, its analysis; ``errors`` are the files skipped with ``keep_going``."""

    paths: list[Path]
    analysis: Analysis | None = None
    errors: list[Exception] = field(default_factory=list)


def write_report(
    lib: Library,
    files: Sequence[str | os.PathLike[str]] = (),
    *,
    db: str | None = None,
    input_format: str | None = None,
    out: str | os.PathLike[str] | None = None,
    weekly: bool = False,
    week: str | None = None,
    out_dir: str | os.PathLike[str] = "reports",
    title: str | None = None,
    keep_going: bool = False,
    findings: bool = True,
    what_if: Sequence[str] = (),
    what_if_threshold_ms: float | None = None,
    bar: Progress | None = None,
    parquet: str | os.PathLike[str] | None = None,
    engine: str = "embedded",
    master: str | None = None,
    spark_table: str | None = None,
    memory_mb: int | None = None,
) -> Written:
    """A self-contained HTML report of ``files`` (or the store ``db``, or the Parquet span set
    ``parquet``, or with ``engine="spark"`` the Spark table ``spark_table``: as for
    ``tracelens.analyze``) written to ``out``; with ``weekly`` (implied by ``week``), one page per
    ISO week of the store plus an index in ``out_dir`` (see ``write_weekly``).  ``what_if`` and
    ``what_if_threshold_ms`` add the what-if findings, as for ``tracelens.analyze``, to the
    report (and to every week's).  ``bar`` shows the phases when given.  ``memory_mb``: the
    analysis' memory budget, as for ``tracelens.analyze`` (each week's, with ``weekly``).

    ``OptionError`` for a combination that cannot work, ``InputError`` for a bad file (unless
    ``keep_going``: the file is skipped and listed in ``errors``).
    """
    parse_all(what_if)  # a bad --what-if is a usage error before any reading
    weekly = weekly or week is not None
    if weekly and (parquet or spark_table):
        raise OptionError("--weekly reads the store; --parquet makes one report (--out)")
    if weekly and files:
        raise OptionError(
            "--weekly reads the store; import the files first (`tracelens import FILES --db ...`)"
        )
    if weekly and out:
        raise OptionError("--weekly writes one file per week: use --out-dir, not --out")
    if weekly:
        paths = write_weekly(
            lib,
            db,
            out_dir,
            week,
            findings=findings,
            what_if=what_if,
            what_if_threshold_ms=what_if_threshold_ms,
            title=title,
            bar=bar,
            memory_mb=memory_mb,
        )
        return Written(paths=paths)
    if not out:
        raise OptionError("say where to write the report: --out FILE.html (or --weekly)")
    bar = bar or Progress(enabled=False)
    analysis = lib.analyze(
        files,
        db=db,
        input_format=input_format,
        keep_going=keep_going,
        findings=findings,
        what_if=what_if,
        what_if_threshold_ms=what_if_threshold_ms,
        bar=bar,
        parquet=parquet,
        engine=engine,
        master=master,
        spark_table=spark_table,
        memory_mb=memory_mb,
    )
    bar.set_label("rendering the report")
    sources = [os.fspath(f) for f in files] if files else [f"store {_db_path(db)}"]
    if parquet or spark_table:
        sources = [f"{os.fspath(parquet or spark_table or '')} ({engine})"]
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(analysis, title=title, sources=sources), encoding="utf-8")
    return Written(paths=[path], analysis=analysis, errors=list(analysis.errors))


def weeks_in(lib: Library, db: str | None = None) -> list[tuple[str, int]]:
    """(ISO week, traces) for every week with a trace in the store, oldest first; a trace
    belongs to the week (UTC) in which its first span started."""
    spans = lib.load_spans(db=db, columns=["trace_id", "start_ns"]).spans
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


def write_weekly(
    lib: Library,
    db: str | None = None,
    out_dir: str | os.PathLike[str] = "reports",
    week: str | None = None,
    *,
    findings: bool = True,
    what_if: Sequence[str] = (),
    what_if_threshold_ms: float | None = None,
    title: str | None = None,
    threshold: float | None = None,
    min_samples: int | None = None,
    bar: Progress | None = None,
    memory_mb: int | None = None,
) -> list[Path]:
    """One report per ISO week with traces in the store, plus ``index.html``; or, with ``week``,
    that week's report only (compared with the latest earlier week that has traces).

    ``what_if`` / ``what_if_threshold_ms``: the what-ifs asked for, in every week's analysis.
    Each week's analysis loads only that week, and only small per-week figures are kept between
    weeks, so memory stays that of the largest week.  Returns the paths written, the index last.
    """
    bar = bar or Progress(enabled=False)
    parse_all(what_if)
    if week is not None:
        week = week.strip()
        try:
            week_bounds(week)  # a malformed week is a usage error before any reading
        except ValueError as exc:
            raise OptionError(f"--week: {exc}") from None
    bar.set_label("finding the weeks in the store")
    found = [w for w, _ in weeks_in(lib, db)]
    if not found:
        raise TracelensError(f"{_db_path(db)}: the store holds no traces")
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
        prev = week_stats(earlier, _analyze_week(lib, db, earlier, False, (), None, bar, memory_mb))
    source = f"store {Path(_db_path(db)).name}"
    paths: list[Path] = []
    weeks: list[tuple[WeekStats, dict[str, Any] | None, str]] = []
    bar.total = len(targets)
    for i, w in enumerate(targets):
        analysis = _analyze_week(
            lib, db, w, findings, what_if, what_if_threshold_ms, bar, memory_mb
        )
        st = week_stats(w, analysis)
        samples = MIN_SAMPLES if min_samples is None else min_samples
        comp = (
            compare(
                prev,
                st,
                week_diff(prev, st, min_samples=samples),
                threshold=THRESHOLD if threshold is None else threshold,
                min_samples=samples,
            )
            if prev
            else None
        )
        bar.set_label(f"{w}: rendering")
        has_index = week is None or (out / "index.html").exists()
        path = out / f"{w}.html"
        html = render_week(
            analysis,
            st,
            comp,
            title=title,
            source=source,
            index_href="index.html" if has_index else None,
        )
        path.write_text(html, encoding="utf-8")
        paths.append(path)
        weeks.append((st, comp, path.name))
        prev = st
        bar.done = i + 1
    if week is None:
        index = out / "index.html"
        index.write_text(render_index(weeks, title=title, source=source), encoding="utf-8")
        paths.append(index)
    return paths


def _analyze_week(
    lib: Library,
    db: str | None,
    week: str,
    findings: bool,
    what_if: Sequence[str],
    what_if_threshold_ms: float | None,
    bar: Progress,
    memory_mb: int | None,
) -> Analysis:
    start, end = week_bounds(week)
    bar.set_label(f"{week}: reading the store")
    return lib.analyze(
        db=db,
        findings=findings,
        what_if=what_if,
        what_if_threshold_ms=what_if_threshold_ms,
        start_ns=start,
        end_ns=end,
        bar=bar,
        memory_mb=memory_mb,
    )


def _db_path(db: str | None) -> str:
    from tracelens.store import default_db_path

    return db or default_db_path()
