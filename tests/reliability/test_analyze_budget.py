"""``analyze``'s memory budget (``tracelens.analysis.budget``): a store estimated to need more
than ``--memory-mb`` is refused before it is read, with a message that names the budget, the
estimate and the option; under a budget it admits, the real process stays under it.

The stores are generated (bench/synth.py: 50 spans a trace, so the span counts are known without
asking the code under test).  The default tier uses 2,000 spans; the heavy one measures the peak
RSS of a real ``tracelens analyze --db`` subprocess on 1M spans (psutil, every 10 ms) against the
budget it was given, with the JSON of every trace (the costliest output).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from hostile_support import PeakRss, clean_exit_2, cli
from test_collector_support import ROOT

from tracelens import api
from tracelens.errors import BudgetError
from tracelens.store import DuckDBStore
from tracelens.store.duckdb import TABLE

sys.path.insert(0, str(ROOT / "bench"))
from synth import DEFAULT_START_NS, write_store

SPANS_PER_TRACE = 50  # bench/synth.py's template
ATTRIBUTES_PER_TRACE = 37  # its spans' attributes, added up by hand
MINUTE_NS = 60 * 10**9  # synth's spacing between trace starts


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = str(tmp_path_factory.mktemp("budget") / "small.duckdb")
    assert write_store(db, 40) == 40 * SPANS_PER_TRACE
    return db


@pytest.mark.smoke
def test_a_store_over_the_budget_is_refused_and_under_it_analysed(small_store: str) -> None:
    # 2,000 spans, 1,480 attributes: 384 MiB + (2,000 x 2,400 + 1,480 x 100) bytes = 389 MiB
    # estimated (rounded up), over a 300 MiB budget.
    refused = cli("analyze", "--db", small_store, "--memory-mb", "300")
    clean_exit_2(
        refused, small_store, "2,000 spans (1,480 attributes)", "389 MiB", "300 MiB", "--memory-mb"
    )
    assert refused.stdout == ""
    done = cli("analyze", "--db", small_store, "--memory-mb", "1024", "--format", "json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["summary"]["traces"] == 40


def test_the_library_raises_the_same_refusal(small_store: str, tmp_path: Path) -> None:
    with pytest.raises(BudgetError, match=r"2,000 spans .* 300 MiB; raise it with --memory-mb"):
        api.analyze(db=small_store, memory_mb=300)
    # A time window narrows the read, and the estimate with it: 10 traces of the 40.
    window = {"start_ns": DEFAULT_START_NS, "end_ns": DEFAULT_START_NS + 10 * MINUTE_NS}
    with pytest.raises(BudgetError, match=r"500 spans"):
        api.analyze(db=small_store, memory_mb=384, **window)
    assert api.analyze(db=small_store, memory_mb=386, **window).summary.traces == 10
    # A Parquet span set is checked once loaded, before the analysis.
    parquet = tmp_path / "spans"
    assert cli("export", "--db", small_store, "--parquet", str(parquet)).returncode == 0
    with pytest.raises(BudgetError, match=r"spans: 2,000 spans"):
        api.analyze(parquet=parquet, memory_mb=300)
    # Files too: the OpenTelemetry example holds one span (384 MiB + a few KB: 385 MiB).
    example = ROOT / "fixtures" / "otlp" / "opentelemetry-proto_examples_trace.json"
    with pytest.raises(
        BudgetError, match=r"1 file\(s\): 1 span \([0-9]+ attributes\) would need about 385 MiB"
    ):
        api.analyze([example], memory_mb=384)
    assert api.analyze([example], memory_mb=385).summary.traces == 1


def test_report_takes_the_same_budget(small_store: str, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    refused = cli("report", "--db", small_store, "--out", str(page), "--memory-mb", "300")
    clean_exit_2(refused, "2,000 spans", "389 MiB", "300 MiB", "--memory-mb")
    assert not page.exists()
    # --weekly: each week's budget.  synth's 40 traces start a minute apart on one Monday.
    weekly = ["report", "--db", small_store, "--weekly", "--out-dir", str(tmp_path / "weeks")]
    clean_exit_2(cli(*weekly, "--memory-mb", "300"), "2,000 spans", "--memory-mb")
    assert cli(*weekly, "--memory-mb", "1024").returncode == 0
    assert (tmp_path / "weeks" / "index.html").exists()


def test_the_count_is_what_the_read_returns(small_store: str) -> None:
    with DuckDBStore(small_store, read_only=True) as store:
        for start, end in [(None, None), (DEFAULT_START_NS + 5 * MINUTE_NS, None), (0, 1)]:
            read = store.read(["attributes"], start_ns=start, end_ns=end).column("attributes")
            maps = read.to_pylist()
            want = (len(maps), sum(len(m) for m in maps if m))
            assert store.count_spans(start_ns=start, end_ns=end) == want
    assert want == (0, 0)  # the last window holds nothing


@pytest.fixture(scope="module")
def million_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """1M spans (20,000 synth traces), made once for the heavy tests (read-only for them)."""
    db = str(tmp_path_factory.mktemp("budget") / "1m.duckdb")
    assert write_store(db, 20_000) == 1_000_000
    return db


@pytest.mark.heavy
def test_analyze_of_a_million_spans_stays_under_the_budget_it_admits(
    tmp_path: Path, million_store: str
) -> None:
    db = million_store
    # 384 + (1e6 * 2400 + 740,000 * 100) / 2**20 = 2,744 MiB: the smallest budget admitting it.
    refused = cli("analyze", "--db", db, "--memory-mb", "2743")
    clean_exit_2(refused, "1,000,000 spans (740,000 attributes)", "2,744 MiB", "--memory-mb")
    out = tmp_path / "analysis.json"
    args = ["analyze", "--db", db, "--memory-mb", "2744", "--format", "json", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracelens.cli", *args], cwd=ROOT, stderr=subprocess.PIPE
    )
    rss = PeakRss(proc.pid)
    _, err = proc.communicate(timeout=600)
    peak_mib = rss.stop() / 2**20
    assert proc.returncode == 0, err[-2000:]
    assert json.loads(out.read_text())["summary"]["traces"] == 20_000
    assert peak_mib <= 2744, f"peak RSS {peak_mib:,.0f} MiB over the 2,744 MiB budget"


@pytest.mark.heavy
def test_a_three_million_span_store_is_refused_under_2048_mib_before_the_read(
    tmp_path: Path, million_store: str
) -> None:
    """Issue 27's case: ``analyze --db`` on 3M spans took 15.3 GB.  Under a 2,048 MiB budget it
    is refused from the count alone: exit 2, the message, and a peak RSS far under the budget
    (reading the spans alone would hold ~900 MiB: 300 bytes a span, bench/analyze_memory.py).
    The 3M spans are the 1M store's three times over, the copies under other trace ids (md5 of
    the id and the copy's number: 32 hex digits, as a trace id is), made by DuckDB itself."""
    db = str(tmp_path / "3m.duckdb")
    shutil.copyfile(million_store, db)
    con = duckdb.connect(db)
    try:
        con.execute(f"CREATE TEMP TABLE original AS SELECT * FROM {TABLE}")
        for copy in ("1", "2"):
            con.execute(
                f"INSERT INTO {TABLE} SELECT * REPLACE (md5(trace_id || ?) AS trace_id) "
                "FROM original",
                [copy],
            )
    finally:
        con.close()
    with DuckDBStore(db) as store:
        assert store.count() == 3_000_000
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracelens.cli", "analyze", "--db", db, "--memory-mb", "2048"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    rss = PeakRss(proc.pid)
    out, err = proc.communicate(timeout=300)
    peak_mib = rss.stop() / 2**20
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    # 384 + (3e6 * 2400 + 2.22M * 100) / 2**20 = 7,463 MiB.
    clean_exit_2(result, db, "3,000,000 spans", "7,463 MiB", "2,048 MiB", "--memory-mb")
    assert peak_mib < 600, f"the refusal peaked at {peak_mib:,.0f} MiB: was the store read?"
