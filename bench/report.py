"""Benchmark: `tracelens report` on ~1M spans against `tracelens analyze` of the same store.

    python bench/report.py [--traces 20000] [--repeat 3] [--db PATH] [--keep]

Writes agent-shaped traces (bench/synth.py, ~50 spans each) into a DuckDB store, then, in the
same run and each in a fresh process, times
  * the baseline: ``tracelens analyze --db`` (load + analysis + findings, text tables),
  * ``tracelens report --db --out report.html`` (the same, plus aggregation and rendering),
  * ``tracelens report --weekly --db --out-dir DIR`` (the store split by ISO week),
and prints medians, the ratios to the baseline and the HTML sizes.
Targets (2-core machine): the report under 30 s and under 5 MB; the report within 1.3x of the
analysis it is built on (aggregation and rendering are not where time should go).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def timed(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tracelens", *args],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "TRACELENS_PROGRESS": "0"},
    )
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--db", default=None, help="store to use (created if missing)")
    ap.add_argument("--keep", action="store_true", help="keep the generated store")
    opts = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="tracelens-bench-report-"))
    db = opts.db or str(tmp / "bench.duckdb")
    if not Path(db).exists():
        sys.path.insert(0, str(HERE))
        from synth import write_store

        t0 = time.perf_counter()
        n = write_store(db, opts.traces)
        print(f"wrote {n:,} spans ({opts.traces:,} traces) in {time.perf_counter() - t0:.1f} s")
    html = tmp / "report.html"
    weekly = tmp / "weekly"
    base, single, weeks = [], [], []
    for _ in range(opts.repeat):  # interleaved, so noise hits all three alike
        base.append(timed("analyze", "--db", db, "--out", str(tmp / "a.txt")))
        single.append(timed("report", "--db", db, "--out", str(html)))
        shutil.rmtree(weekly, ignore_errors=True)
        weeks.append(timed("report", "--weekly", "--db", db, "--out-dir", str(weekly)))
    b, r, w = (statistics.median(x) for x in (base, single, weeks))
    size = html.stat().st_size
    week_sizes = sorted(p.stat().st_size for p in weekly.glob("*.html"))
    print(f"runs: {opts.repeat} (medians)")
    print(f"{'':40}{'seconds':>9}{'x analyze':>11}")
    print(f"{'analyze, text (baseline)':40}{b:9.2f}{1.0:11.2f}")
    print(f"{'report --out':40}{r:9.2f}{r / b:11.2f}")
    print(f"{'report --weekly':40}{w:9.2f}{w / b:11.2f}")
    print(f"report size: {size / 1024:,.0f} KiB; weekly pages: {len(week_sizes)}, largest "
          f"{week_sizes[-1] / 1024:,.0f} KiB")  # fmt: skip
    ok = r < 30 and size < 5 * 2**20 and r / b <= 1.3
    print("targets (<30 s, <5 MB, <=1.3x analyze):", "met" if ok else "NOT met")
    if not opts.keep and not opts.db:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
