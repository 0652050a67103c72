"""Weekly reports from a real DuckDB store: weeks split in UTC, week-over-week deltas, flagged
regressions, new and vanished operations, and an index that links every week."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from spans import make_spans
from test_report import parse

from tracelens.analysis.weekly import iso_week, week_bounds
from tracelens.api import weeks_in, write_weekly
from tracelens.cli import main
from tracelens.store import DuckDBStore

MS = 1_000_000
W49 = 1_764_547_200 * 10**9  # Monday 2025-12-01 00:00 UTC: ISO week 2025-W49
WEEK = 7 * 86_400 * 10**9
PER_WEEK = 25


def _trace(tid: str, t: int, *, model_ms: int, tool_ms: int, extra: str) -> list[dict]:
    return [
        {"trace": tid, "id": 0, "start": t, "end": t + (model_ms + tool_ms + 10) * MS,
         "name": "handle_request"},
        {"trace": tid, "id": 1, "parent": 0, "start": t + 1 * MS, "end": t + (1 + model_ms) * MS,
         "name": "chat", "span_kind": "client", "attributes": {"gen_ai.operation.name": "chat"}},
        {"trace": tid, "id": 2, "parent": 0, "start": t + (2 + model_ms) * MS,
         "end": t + (2 + model_ms + tool_ms) * MS, "name": "search_docs", "span_kind": "client",
         "attributes": {"http.request.method": "GET"}},
        {"trace": tid, "id": 3, "parent": 0, "start": t + (3 + model_ms + tool_ms) * MS,
         "end": t + (8 + model_ms + tool_ms) * MS, "name": extra},
    ]  # fmt: skip


def _week(w: int, *, tool_ms: int, extra: str) -> list[dict]:
    rows = []
    for k in range(PER_WEEK):
        t = W49 + w * WEEK + k * 3_600 * 10**9
        rows += _trace(f"{w + 1:08x}{k:024x}", t, model_ms=200 + k % 7, tool_ms=tool_ms + k % 5,
                       extra=extra)  # fmt: skip
    return rows


@pytest.fixture()
def store(tmp_path: Path) -> str:
    """Three weeks: W50 swaps an operation, W51's search_docs takes twice as long."""
    rows = (
        _week(0, tool_ms=40, extra="legacy_lookup")
        + _week(1, tool_ms=40, extra="rerank")
        + _week(2, tool_ms=80, extra="rerank")
    )
    # A trace that starts in the last second of W49 and ends in W50 belongs to W49.
    late = W49 + WEEK - 10**9
    rows += _trace("ff" * 16, late, model_ms=2000, tool_ms=40, extra="legacy_lookup")
    path = tmp_path / "weeks.duckdb"
    with DuckDBStore(path) as db:
        db.append(make_spans(rows))
    return str(path)


@given(st.integers(min_value=946_684_800 * 10**9, max_value=4_102_444_800 * 10**9))
def test_every_instant_is_inside_its_week(ns: int) -> None:
    week = iso_week(ns)
    start, end = week_bounds(week)
    assert start <= ns < end and end - start == WEEK
    monday = datetime.fromtimestamp(start / 1e9, tz=timezone.utc)
    assert monday.weekday() == 0 and monday.hour == 0


def test_week_bounds_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="not an ISO week"):
        week_bounds("2026-48")
    with pytest.raises(ValueError, match="no ISO week 53"):
        week_bounds("2025-W53")
    assert week_bounds("2026-W53")[0] < week_bounds("2027-W01")[0]


def test_weeks_in_the_store(store: str) -> None:
    assert weeks_in(store) == [
        ("2025-W49", PER_WEEK + 1),
        ("2025-W50", PER_WEEK),
        ("2025-W51", PER_WEEK),
    ]


def test_weekly_reports_and_index(store: str, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    paths = write_weekly(store, out)
    assert [p.name for p in paths] == [
        "2025-W49.html",
        "2025-W50.html",
        "2025-W51.html",
        "index.html",
    ]

    first = parse(paths[0].read_text(encoding="utf-8"))
    assert first.by_id["fig-traces"] == str(PER_WEEK + 1)  # only that week was loaded
    assert "nothing to compare with" in first.by_id["week-over-week"]

    second = parse(paths[1].read_text(encoding="utf-8"))
    assert "rerank" in second.by_id["new-ops"] and "legacy_lookup" in second.by_id["gone-ops"]
    assert "regressions" not in second.by_id  # search_docs did not change

    third_html = paths[2].read_text(encoding="utf-8")
    third = parse(third_html)
    assert third.by_id["fig-traces"] == str(PER_WEEK)
    regressions = third.by_id["regressions"]
    assert "search_docs" in regressions and "chat" not in regressions
    assert re.search(r"search_docs.*\+\d+%", regressions)
    assert "What changed since 2025-W50" in third.by_id["week-over-week"]
    assert "new-ops" not in third.by_id and "gone-ops" not in third.by_id
    assert 'href="index.html"' in third_html

    index_html = paths[3].read_text(encoding="utf-8")
    index = parse(index_html)
    links = re.findall(r'href="([^"]+)"', index_html)
    assert links == ["2025-W51.html", "2025-W50.html", "2025-W49.html"]  # newest first
    assert all((out / link).exists() for link in links)
    assert index_html.count("<polyline") == 3  # p50, p95, p99 across the weeks
    assert "Critical-path share by kind, week by week" in index.by_id["share-trend"]


def test_regressions_need_enough_samples(store: str, tmp_path: Path) -> None:
    paths = write_weekly(store, tmp_path, min_samples=PER_WEEK + 5)
    third = parse(paths[2].read_text(encoding="utf-8"))
    assert "regressions" not in third.by_id
    assert "No operation got significantly slower" in third.by_id["week-over-week"]


def test_one_week_compares_with_the_week_before(store: str, tmp_path: Path) -> None:
    paths = write_weekly(store, tmp_path, week="2025-W51")
    assert [p.name for p in paths] == ["2025-W51.html"]
    page = paths[0].read_text(encoding="utf-8")
    assert "What changed since 2025-W50" in page
    assert 'href="index.html"' not in page  # no index was written here


def test_weekly_output_is_deterministic(store: str, tmp_path: Path) -> None:
    a = write_weekly(store, tmp_path / "a")
    b = write_weekly(store, tmp_path / "b")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


def test_weekly_command(store: str, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "r"
    res = runner.invoke(main, ["report", "--weekly", "--db", store, "--out-dir", str(out)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == [
        "2025-W49.html",
        "2025-W50.html",
        "2025-W51.html",
        "index.html",
    ]
    res = runner.invoke(
        main, ["report", "--week", "2025-W40", "--db", store, "--out-dir", str(out)]
    )
    assert res.exit_code == 2
    assert "no traces in 2025-W40" in res.output and "2025-W49" in res.output


def test_weekly_on_an_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.duckdb"
    DuckDBStore(path).close()
    res = CliRunner().invoke(
        main, ["report", "--weekly", "--db", str(path), "--out-dir", str(tmp_path)]
    )
    assert res.exit_code == 2 and "holds no traces" in res.output
