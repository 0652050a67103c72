"""Benchmark: one round of the collector's /metrics analysis against the analysis alone.

    python bench/metrics.py [--traces 20000] [--round 500] [--repeat 5]

Writes a store of ``--traces`` agent traces (bench/synth.py, ~50 spans each: 20k = 1M spans), then
times a round of ``AnalysisLoop.run_once`` for the ``--round`` most recent traces (500 traces =
~25k spans: 5 s of traffic at 5k spans/s): the read back from the store (``DuckDBStore.read`` by
trace ids: one pass over the stored ids, then just those traces' rows), ``analyze_traces`` and
adding the result to the span metrics.  The baseline, in the same run, is ``analyze_traces`` alone
on the same spans held in memory.  It prints medians, the ratio of a round to the baseline, and the
wait the loop then takes before its next round (``READ_LOAD`` x the read: the loop's share of a
core stays under about 1/``READ_LOAD`` whatever the store's size).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synth import DEFAULT_START_NS, write_store

from tracelens.analysis.core import ANALYSIS_COLUMNS, analyze_traces
from tracelens.analysis.kinds import ANALYSIS_ATTRIBUTES
from tracelens.collector.completion import CompletionTracker
from tracelens.collector.metrics import READ_LOAD, AnalysisLoop
from tracelens.collector.span_metrics import SpanMetrics
from tracelens.store import DuckDBStore

SPACING_NS = 10**9 // 100  # a trace every 10 ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--round", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.duckdb")
        t = time.perf_counter()
        spans = write_store(db, args.traces, spacing_ns=SPACING_NS)
        print(f"store: {spans} spans in {args.traces} traces ({time.perf_counter() - t:.1f} s)")
        lo = DEFAULT_START_NS + (args.traces - args.round) * SPACING_NS
        with DuckDBStore(db) as store:
            recent = store.read(ANALYSIS_COLUMNS, start_ns=lo)
            print(f"round: {recent.num_rows} spans of {args.round} traces")
            rounds, reads, baselines = [], [], []
            for _ in range(args.repeat):
                t = time.perf_counter()
                analyze_traces(recent)
                baselines.append(time.perf_counter() - t)

                tracker = CompletionTracker(quiet_s=1.0)
                tracker.seen(recent, 0.0)
                loop = AnalysisLoop(store, tracker, SpanMetrics())
                t = time.perf_counter()
                counted = loop.run_once(10.0)
                rounds.append(time.perf_counter() - t)
                assert counted == args.round, counted

                t = time.perf_counter()  # the read alone, as the round does it
                store.read(
                    ANALYSIS_COLUMNS,
                    trace_ids=pc.unique(recent["trace_id"]),
                    attribute_keys=ANALYSIS_ATTRIBUTES,
                )
                reads.append(time.perf_counter() - t)
    base, one, read = (statistics.median(x) for x in (baselines, rounds, reads))
    print(f"analyze_traces alone (baseline): {base:.3f} s")
    print(f"read back from the store:        {read:.3f} s")
    print(f"a round (read, analyse, add):    {one:.3f} s = {one / base:.2f}x the baseline")
    print(f"the loop's next wait:            {max(READ_LOAD * read, 0.5):.1f} s (READ_LOAD x read)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
