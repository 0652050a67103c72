"""Benchmark: the Spark engine against the embedded one on ~1M spans, and local[1] vs local[2].

    python bench/spark.py [--traces 20000] [--repeat 3] [--masters local[1],local[2]]

Writes ``--traces`` template traces (bench/synth.py, 50 spans each: 20k = 1M spans) as a Parquet
span set, then times, in this one process, median of ``--repeat`` runs each:
  * embedded: ``EmbeddedEngine().analyze(ParquetSpans(DIR))`` (read, per-trace analysis,
    findings), with its per-trace part (``analyze_traces``) timed apart;
  * Spark, for each master: phase one (the Spark job: shuffle by trace-id bucket,
    ``analyze_traces`` in the Python workers, results collected as Arrow IPC), phase two's
    merge, and phase two's cross-trace part (``engines.complete``: findings, replay) on the
    driver, after one warm-up run that starts the Python workers.
It prints the times, the ratios (Spark / embedded; local[1] / local[2] for phase one), the
per-bucket cost, checks that every Spark result equals the embedded one as JSON, and prints the
driver's peak RSS.  The README's "Scaling" section is derived from these figures.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from synth import make_traces  # noqa: E402

import tracelens.render  # noqa: E402, F401  (registers Analysis.to_dict's writer)
from tracelens.analysis import ANALYSIS_COLUMNS, analyze_traces  # noqa: E402
from tracelens.engines import ParquetSpans, complete  # noqa: E402
from tracelens.engines.embedded import EmbeddedEngine  # noqa: E402
from tracelens.engines.spark import SparkEngine, merge  # noqa: E402
from tracelens.parquet import read_parquet, write_parquet  # noqa: E402


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def spark_session(master: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master)
        .appName("tracelens-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def bench_spark(path: str, master: str, repeat: int, want: dict[str, Any]) -> dict[str, float]:
    spark = spark_session(master)
    engine = SparkEngine(spark=spark)
    frame = engine.frame(ParquetSpans(path))
    buckets = engine.buckets(frame)
    one, two, three, equal = [], [], [], True
    for k in range(repeat + 1):
        t1, parts = timed(lambda: engine.phase_one(frame)[""])
        t2, ta = timed(lambda p=parts: merge(p))
        t3, result = timed(lambda t=ta: complete(t))
        if k == 0:  # warm-up: starts the Python workers
            equal = result.to_dict() == want
            print(f"  {master}: warm-up {t1 + t2 + t3:.1f} s; JSON equals embedded: {equal}")
            continue
        one.append(t1)
        two.append(t2)
        three.append(t3)
        print(f"  {master}: phase one {t1:.2f} s, merge {t2:.2f} s, cross-trace {t3:.2f} s")
    spark.stop()
    return {
        "phase_one": med(one),
        "merge": med(two),
        "cross": med(three),
        "total": med([a + b + c for a, b, c in zip(one, two, three, strict=True)]),
        "buckets": float(buckets),
        "equal": float(equal),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--traces", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--masters", default="local[1],local[2]")
    opts = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tracelens-spark-bench-"))
    try:
        path = str(tmp / "spans")
        t, done = timed(lambda: write_parquet(make_traces(opts.traces, seed=1), path))
        print(f"span set: {done.spans:,} spans, {done.traces:,} traces, written in {t:.1f} s")

        emb, per_trace = [], []
        want: dict[str, Any] = {}
        for _ in range(opts.repeat):
            te, result = timed(lambda: EmbeddedEngine().analyze(ParquetSpans(path)))
            spans = read_parquet(path, ANALYSIS_COLUMNS)
            tp, _ = timed(lambda s=spans: analyze_traces(s))
            emb.append(te)
            per_trace.append(tp)
            want = result.to_dict()
            print(f"  embedded: {te:.2f} s (of which analyze_traces {tp:.2f} s)")
        e = med(emb)
        print(f"embedded: {e:.2f} s; analyze_traces alone {med(per_trace):.2f} s")

        results = {m: bench_spark(path, m, opts.repeat, want) for m in opts.masters.split(",")}
        print()
        print(f"{'engine':<14}{'total s':>9}{'phase one':>11}{'merge':>8}{'cross':>8}{'x emb':>7}")
        print(f"{'embedded':<14}{e:>9.2f}{med(per_trace):>11.2f}{'':>8}{e - med(per_trace):>8.2f}")
        for m, r in results.items():
            print(
                f"{'spark ' + m:<14}{r['total']:>9.2f}{r['phase_one']:>11.2f}"
                f"{r['merge']:>8.2f}{r['cross']:>8.2f}{r['total'] / e:>7.2f}"
            )
        if "local[1]" in results and "local[2]" in results:
            one, two = results["local[1]"], results["local[2]"]
            print(f"phase one local[1] / local[2]: {one['phase_one'] / two['phase_one']:.2f}x")
        for m, r in results.items():
            per = r["phase_one"] / r["buckets"]
            print(
                f"{m}: {int(r['buckets'])} buckets of ~{done.spans / r['buckets']:,.0f} spans, "
                f"{per:.2f} s of phase one each; equal JSON: {bool(r['equal'])}"
            )
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"driver peak RSS {rss:,.0f} MiB ({os.cpu_count()} CPUs)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
