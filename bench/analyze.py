"""Benchmark: `tracelens analyze` on ~1M spans against a plain DuckDB scan of the same rows, and
the bottleneck finder on varied traces.

    python bench/analyze.py [--traces 20000] [--varied 10000] [--repeat 3] [--db PATH] [--keep]

Two workloads, one after the other in the same run:
  * *template*: agent-shaped traces that all follow one template (bench/synth.py, ~50 spans
    each; 20k traces = 1M spans);
  * *varied*: 10k traces whose steps call varying sets of tools (bench/varied.py, ~210k spans,
    ~1.5k distinct hop patterns), where a per-pattern loop of queries used to cost 10x.
For each, it writes a DuckDB store, then, interleaved and each in a fresh process, times
  * the baseline: ``SELECT * FROM span_rows`` (the stored table) into an Arrow table,
  * ``tracelens analyze --db`` with critical paths only (``--no-findings``),
  * ``tracelens analyze --db`` with the bottleneck finder,
and prints medians, the ratios to the baseline and each run's peak RSS.  The packages are
byte-compiled first, as pip does at install: on a machine that sets PYTHONDONTWRITEBYTECODE,
each fresh process would otherwise compile the finder's modules from source (~0.1 s, a tenth
of the varied run) and the ratio would measure the compiler, not the analysis.
Targets (2-core machine): the critical-path analysis within 10x the scan and under 20 s, peak
RSS under 3 GB; with findings, within 2x the critical-path-only analysis on the template
workload and within 1.5x on the varied one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracelens.store.duckdb import TABLE

HERE = Path(__file__).resolve().parent

SCAN = """
import duckdb, time, resource, json, sys
t0 = time.perf_counter()
con = duckdb.connect(sys.argv[1], read_only=True)
table = con.sql(f"SELECT * FROM {sys.argv[2]}").to_arrow_table()
elapsed = time.perf_counter() - t0
print(json.dumps({"s": elapsed, "rows": table.num_rows,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

ANALYZE = """
import time, resource, json, sys
t0 = time.perf_counter()
from click.testing import CliRunner
from tracelens.cli import main
args = ["analyze", "--db", sys.argv[1], "--format", sys.argv[2], "--out", sys.argv[3]]
if sys.argv[4] == "0":
    args.append("--no-findings")
res = CliRunner().invoke(main, args, catch_exceptions=False)
assert res.exit_code == 0, res.output
elapsed = time.perf_counter() - t0
print(json.dumps({"s": elapsed,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(code: str, *args: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def bench(db: str, opts: argparse.Namespace, findings_target: float) -> dict[str, bool]:
    """Time the three commands on ``db``; print medians and ratios; return the checks."""
    out = os.path.join(os.path.dirname(db), "analysis.out")
    scans, plain, full = [], [], []
    for _ in range(opts.repeat):  # interleaved, so noise hits all three alike
        scans.append(run(SCAN, db, TABLE))
        plain.append(run(ANALYZE, db, opts.format, out, "0"))
        full.append(run(ANALYZE, db, opts.format, out, "1"))
    rows = int(scans[0]["rows"])

    def med(xs: list[dict[str, float]]) -> float:
        return statistics.median(x["s"] for x in xs)

    def peak(xs: list[dict[str, float]]) -> float:
        return max(x["rss_mb"] for x in xs)

    s, p, f = med(scans), med(plain), med(full)
    print(f"spans: {rows:,}   runs: {opts.repeat} (medians)")
    print(f"{'':34}{'seconds':>9}{'x scan':>9}{'peak RSS MB':>13}")
    print(f"{'DuckDB scan into Arrow (baseline)':34}{s:9.2f}{1.0:9.2f}{peak(scans):13.0f}")
    print(f"{'analyze, critical path only':34}{p:9.2f}{p / s:9.2f}{peak(plain):13.0f}")
    print(f"{'analyze, with findings':34}{f:9.2f}{f / s:9.2f}{peak(full):13.0f}")
    print(f"findings cost: {f / p:.2f}x the critical-path-only analysis")
    return {
        "critical path within 10x the scan": p / s <= 10,
        "critical path under 20 s": p < 20,
        "peak RSS under 3 GB": max(peak(plain), peak(full)) < 3072,
        f"findings within {findings_target:g}x the critical-path-only analysis": (
            f / p <= findings_target
        ),
    }


def byte_compile() -> None:
    """Write the bytecode of tracelens and tracelens_instrumentation, as an install does."""
    import compileall

    import tracelens_instrumentation

    import tracelens

    for pkg in (tracelens, tracelens_instrumentation):
        compileall.compile_dir(str(Path(str(pkg.__file__)).parent), quiet=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=20_000, help="template traces (0: skip)")
    ap.add_argument("--varied", type=int, default=10_000, help="varied traces (0: skip)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--db", default=None, help="template store to use (created if missing)")
    ap.add_argument("--keep", action="store_true", help="keep the generated stores")
    ap.add_argument("--format", default="text", choices=["text", "json"])
    opts = ap.parse_args()
    sys.path.insert(0, str(HERE))
    byte_compile()
    tmp = tempfile.mkdtemp(prefix="tracelens-bench-")
    checks: dict[str, bool] = {}
    if opts.traces:
        db = opts.db or os.path.join(tmp, "bench.duckdb")
        if not Path(db).exists():
            from synth import write_store

            t0 = time.perf_counter()
            n = write_store(db, opts.traces)
            print(f"wrote {n:,} spans ({opts.traces:,} traces) in {time.perf_counter() - t0:.1f} s")
        print("== template workload")
        for what, ok in bench(db, opts, 2.0).items():
            checks[f"template: {what}"] = ok
        if not opts.keep and not opts.db:
            Path(db).unlink(missing_ok=True)
    if opts.varied:
        from varied import write_store as write_varied

        vdb = os.path.join(tmp, "varied.duckdb")
        t0 = time.perf_counter()
        n = write_varied(vdb, opts.varied)
        print(
            f"wrote {n:,} spans ({opts.varied:,} varied traces) in {time.perf_counter() - t0:.1f} s"
        )
        print("== varied workload")
        for what, ok in bench(vdb, opts, 1.5).items():
            checks[f"varied: {what}"] = ok
        if not opts.keep:
            Path(vdb).unlink(missing_ok=True)
    for what, ok in checks.items():
        print(f"  {'met    ' if ok else 'NOT met'}  {what}")


if __name__ == "__main__":
    main()
