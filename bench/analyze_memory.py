"""Benchmark: peak RSS of `tracelens analyze --db` against its memory budget's estimate.

    python bench/analyze_memory.py [--traces 6000,20000] [--keep]

For each size (traces of bench/synth.py, 50 spans each: 6000 = 300k spans, 20000 = 1M), it
writes a DuckDB store, then runs in fresh processes, one after another, with psutil sampling
each one's RSS every 10 ms:
  * the baseline: ``SELECT`` of the analysed columns into an Arrow table (the read alone),
  * ``tracelens analyze --db`` (text: the 10 slowest traces),
  * ``tracelens analyze --db --format json`` (every trace with its critical path: the largest
    output),
and prints each peak, its ratio to the baseline and to the budget's estimate
(``tracelens.analysis.budget``: 384 MiB + 2,400 bytes a span + 100 an attribute), and, with two
sizes or more, the bytes a span between the smallest and the largest (the slope, which the
estimate must cover).
Target: every peak under the estimate (ratio < 1).  Memory: ~2.5 GB at 1M spans; the machine
is shared, so stay at 1M or below and extrapolate.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from tracelens.analysis import ANALYSIS_COLUMNS
from tracelens.analysis.budget import estimate
from tracelens.store import DuckDBStore

HERE = Path(__file__).resolve().parent
MiB = 1 << 20

SCAN = """
import sys, duckdb
cols = sys.argv[2]
con = duckdb.connect(sys.argv[1], read_only=True)
t = con.sql(f"SELECT {cols} FROM span_rows").to_arrow_table()
print(t.num_rows)
"""


def peak_rss(argv: list[str]) -> float:
    """Peak RSS (MiB) of the command, sampled every 10 ms; it must exit 0."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ps = psutil.Process(proc.pid)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            try:
                peak = max(peak, ps.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.01)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    _, err = proc.communicate()
    done.set()
    t.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {err.decode()[-2000:]}")
    return peak / MiB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="6000,20000", help="store sizes, in 50-span traces")
    ap.add_argument("--keep", action="store_true", help="keep the generated stores")
    opts = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from synth import write_store

    tmp = tempfile.mkdtemp(prefix="tracelens-bench-")
    cli = [sys.executable, "-m", "tracelens.cli", "analyze", "--memory-mb", "100000", "--db"]
    rows: list[tuple[int, float, float, float, int]] = []
    print(f"load {os.getloadavg()[0]:.1f}")
    print(
        f"{'spans':>10}{'read MiB':>10}{'text MiB':>10}{'x read':>8}{'json MiB':>10}"
        f"{'x read':>8}{'estimate':>10}{'json/est':>9}"
    )
    for n in (int(x) for x in opts.traces.split(",")):
        db = os.path.join(tmp, f"{n}.duckdb")
        spans = write_store(db, n)
        read = peak_rss([sys.executable, "-c", SCAN, db, ", ".join(ANALYSIS_COLUMNS)])
        text = peak_rss([*cli, db])
        js = peak_rss([*cli, db, "--format", "json", "--out", os.path.join(tmp, "a.json")])
        with DuckDBStore(db, read_only=True) as store:
            est = estimate(*store.count_spans()).need_mb
        print(
            f"{spans:>10,}{read:>10,.0f}{text:>10,.0f}{text / read:>8.2f}{js:>10,.0f}"
            f"{js / read:>8.2f}{est:>10,}{js / est:>9.2f}"
        )
        rows.append((spans, read, text, js, est))
        if not opts.keep:
            Path(db).unlink()
    if len(rows) > 1:
        (n0, r0, t0, j0, _), (n1, r1, t1, j1, _) = rows[0], rows[-1]
        per = lambda a, b: (b - a) * MiB / (n1 - n0)  # noqa: E731
        print(
            f"bytes a span ({n0:,} -> {n1:,} spans): read {per(r0, r1):,.0f}, "
            f"text {per(t0, t1):,.0f}, json {per(j0, j1):,.0f} (estimate: 2,400)"
        )
    worst = max(js / est for _, _, _, js, est in rows)
    print(
        f"  {'met    ' if worst < 1 else 'NOT met'}  every peak under the budget's estimate "
        f"(worst {worst:.2f}x)"
    )


if __name__ == "__main__":
    main()
