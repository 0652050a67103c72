"""Benchmark: `tracelens diff` over two 1M-span windows of one store against analysing them.

    python bench/diff.py [--traces 20000] [--repeat 3] [--db PATH] [--keep]

Writes a DuckDB store with two windows of template traces (bench/synth.py, ~50 spans each, so
20k traces = 1M spans per window; the second window 10% slower), then, interleaved and each in
a fresh process, times
  * the baseline: ``tracelens.analyze`` of the first window, then of the second (findings on),
  * ``tracelens diff --db S --base-since .. --base-until .. --since ..``: both analyses, the
    profiles, the bootstrap (20,000 resamples per percentile) and the attribution,
and prints medians, the ratio and each run's peak RSS.  Target: the diff within 2x the baseline.
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

HERE = Path(__file__).resolve().parent
WEEK_NS = 7 * 86_400 * 10**9

ANALYZE = """
import time, resource, json, sys
t0 = time.perf_counter()
import tracelens
db, a, b, c = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
spans = 0
for lo, hi in ((a, b), (b, c)):
    result = tracelens.analyze(db=db, start_ns=lo, end_ns=hi)
    spans += result.traces.spans.height
    del result
print(json.dumps({"s": time.perf_counter() - t0, "spans": spans,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

DIFF = """
import time, resource, json, sys
t0 = time.perf_counter()
from click.testing import CliRunner
from tracelens.cli import main
db, a, b, c, out = sys.argv[1:6]
res = CliRunner().invoke(main, ["diff", "--db", db, "--base-since", a, "--base-until", b,
                                "--since", b, "--until", c, "--format", "json", "--out", out],
                         catch_exceptions=False)
assert res.exit_code == 0, res.output
doc = json.load(open(out))
print(json.dumps({"s": time.perf_counter() - t0, "regressions": doc["regressions"],
                  "comparisons": doc["method"]["comparisons"],
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(code: str, *args: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def iso(ns: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ns // 10**9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=20_000, help="template traces per window")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--db", default=None, help="store to use (created if missing)")
    ap.add_argument("--keep", action="store_true", help="keep the generated store")
    opts = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from analyze import byte_compile
    from synth import DEFAULT_START_NS, write_store

    byte_compile()
    tmp = tempfile.mkdtemp(prefix="tracelens-bench-diff-")
    db = opts.db or os.path.join(tmp, "diff.duckdb")
    spacing = (WEEK_NS - 3_600 * 10**9) // opts.traces
    a, b, c = DEFAULT_START_NS, DEFAULT_START_NS + WEEK_NS, DEFAULT_START_NS + 2 * WEEK_NS
    if not Path(db).exists():
        t0 = time.perf_counter()
        n = write_store(db, opts.traces, seed=1, start_ns=a, spacing_ns=spacing)
        n += write_store(db, opts.traces, seed=2, start_ns=b, spacing_ns=spacing, slowdown=1.1)
        print(f"wrote {n:,} spans (2 windows of {opts.traces:,} traces) in "
              f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
    out = os.path.join(tmp, "diff.json")
    base, diffs = [], []
    for _ in range(opts.repeat):  # interleaved, so noise hits both alike
        base.append(run(ANALYZE, db, str(a), str(b), str(c)))
        diffs.append(run(DIFF, db, iso(a), iso(b), iso(c), out))
    s = statistics.median(x["s"] for x in base)
    d = statistics.median(x["s"] for x in diffs)
    print(f"spans: {int(base[0]['spans']):,} in two windows   runs: {opts.repeat} (medians)")
    print(f"{'':40}{'seconds':>9}{'ratio':>8}{'peak RSS MB':>13}")
    print(f"{'analyze both windows (baseline)':40}{s:9.2f}{1.0:8.2f}"
          f"{max(x['rss_mb'] for x in base):13.0f}")  # fmt: skip
    print(f"{'diff of the two windows':40}{d:9.2f}{d / s:8.2f}"
          f"{max(x['rss_mb'] for x in diffs):13.0f}")  # fmt: skip
    print(f"diff: {int(diffs[0]['comparisons'])} comparisons, "
          f"{int(diffs[0]['regressions'])} significant regressions (the second window is 10% "
          "slower)")  # fmt: skip
    ok = d / s <= 2.0
    print(f"  {'met    ' if ok else 'NOT met'}  diff within 2x the analysis of its two windows")
    if not opts.keep and not opts.db:
        Path(db).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
