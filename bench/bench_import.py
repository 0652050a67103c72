"""How fast trace files import: OTLP JSON Lines (the Collector's file exporter) of N spans.

    python bench/bench_import.py [--spans 1000000] [--repeat 3] [--store]

Writes a generated file to a temporary directory, reads it with ``tracelens.ingest.read_files``
(and, with --store, appends it to a fresh DuckDB store), and prints the median seconds and spans per
second, wall-clock and process CPU (the CPU figure is the one to trust on a shared machine).  The
baseline measured in the same run is ``json.loads`` of every line alone: the ratio says how much
the conversion to the span table costs on top of parsing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

SPANS_PER_LINE = 1000
SPANS_PER_TRACE = 20


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def _span(n: int) -> dict[str, Any]:
    trace = n // SPANS_PER_TRACE
    first = n % SPANS_PER_TRACE == 0
    start = 1_700_000_000_000_000_000 + n * 1_000_000
    span: dict[str, Any] = {
        "traceId": f"{trace:032x}",
        "spanId": f"{n + 1:016x}",
        "name": f"op-{n % 17}",
        "kind": 1 + n % 3,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 500_000),
        "attributes": [
            _attr("http.request.method", "GET"),
            _attr("http.response.status_code", 200),
            _attr("gen_ai.usage.input_tokens", n % 1000),
            _attr("tracelens.kind", "io"),
            _attr("tracelens.cpu_ns", 12345),
            _attr("latency.ratio", 0.25),
        ],
        "status": {"code": 1},
    }
    if not first:
        span["parentSpanId"] = f"{n - n % SPANS_PER_TRACE + 1:016x}"
    return span


def write_jsonl(path: Path, spans: int) -> None:
    resource = {
        "attributes": [
            _attr("service.name", "bench-service"),
            _attr("host.name", "bench-host"),
            _attr("telemetry.sdk.language", "python"),
        ]
    }
    with path.open("w") as out:
        for first in range(0, spans, SPANS_PER_LINE):
            batch = [_span(n) for n in range(first, min(first + SPANS_PER_LINE, spans))]
            scope = {"scope": {"name": "bench", "version": "1"}, "spans": batch}
            request = {"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]}
            out.write(json.dumps(request, separators=(",", ":")) + "\n")


def _parse_only(path: Path) -> None:
    with path.open("rb") as f:
        for line in f:
            json.loads(line)


def _import(path: Path, store: bool, tmp: Path, run: int) -> int:
    from tracelens.ingest import read_files

    spans = read_files([path]).spans
    if store:
        from tracelens.store import open_store

        with open_store(tmp / f"bench-{run}.duckdb") as db:
            db.append(spans)
    return int(spans.num_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", action="store_true", help="also append to a DuckDB store")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        path = tmp / "spans.jsonl"
        write_jsonl(path, args.spans)
        size_mb = path.stat().st_size / 1e6
        base, base_cpu, ours, ours_cpu = [], [], [], []
        for run in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            _parse_only(path)
            base.append(time.perf_counter() - t0)
            base_cpu.append(time.process_time() - c0)
            t0, c0 = time.perf_counter(), time.process_time()
            rows = _import(path, args.store, tmp, run)
            ours.append(time.perf_counter() - t0)
            ours_cpu.append(time.process_time() - c0)
            assert rows == args.spans, (rows, args.spans)
        b, bc = statistics.median(base), statistics.median(base_cpu)
        o, oc = statistics.median(ours), statistics.median(ours_cpu)
        what = "read_files + DuckDB append" if args.store else "read_files"
        print(f"file: {args.spans} spans, {size_mb:.0f} MB OTLP JSON Lines, {args.repeat} runs")
        print(f"baseline json.loads per line: median {b:.2f} s wall, {bc:.2f} s CPU")
        print(
            f"{what}: median {o:.2f} s wall, {oc:.2f} s CPU "
            f"({args.spans / o:,.0f} spans/s wall), {oc / bc:.1f}x baseline CPU"
        )


if __name__ == "__main__":
    main()
