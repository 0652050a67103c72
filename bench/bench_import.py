"""How fast trace files import, against parsing the same file with orjson alone; and how much
memory importing a 2 GB file takes.

    python bench/bench_import.py [--spans 300000] [--repeat 5] [--store] [--format otlp]
    python bench/bench_import.py --memory-gb 2

Speed: writes an OTLP JSON Lines file (the Collector's file exporter: one ExportTraceServiceRequest
of 1000 spans a line, 8 attributes a span, 20 spans a trace; ``--format jaeger`` or ``zipkin``:
the same spans as a Jaeger API response or a Zipkin v2 array a line) to a temporary directory and
reads it with ``tracelens.ingest.read_files`` (with --store, also appends it to a fresh DuckDB
store).  The baseline, in the same run, interleaved: the same lines read the same way and parsed by
``orjson.loads`` alone, objects built and freed.  The importer pauses the cyclic garbage collector
while it decodes (``files.gc_paused``), so the ratio is taken against orjson with the collector
paused too (the strict baseline); orjson with the collector as Python leaves it is printed as
well.  Medians of process CPU seconds (the figure to trust on a shared machine) and wall seconds.

Memory: writes a JSON Lines file of about N GB (same records) and runs ``tracelens import`` on it
in a child process, printing its peak RSS (``ru_maxrss``) beside the file size.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

SPANS_PER_LINE = 1000
SPANS_PER_TRACE = 20
READ_BUFFER = 1 << 20  # as tracelens.ingest.files.READ_BUFFER
LINE_LIMIT = 256 << 20  # as tracelens.ingest.files.MAX_DOCUMENT_MB


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
        "attributes": [  # eight: strings, ints, a double, a bool; two of them tracelens's own
            _attr("http.request.method", "GET"),
            _attr("http.response.status_code", 200),
            _attr("gen_ai.request.model", f"model-{n % 5}"),
            _attr("gen_ai.usage.input_tokens", n % 1000),
            _attr("tracelens.kind", "io"),
            _attr("tracelens.cpu_ns", 12345 + n % 7),
            _attr("latency.ratio", (n % 100) / 8),
            _attr("cache.hit", n % 2 == 0),
        ],
        "status": {"code": 1},
    }
    if not first:
        span["parentSpanId"] = f"{n - n % SPANS_PER_TRACE + 1:016x}"
    return span


_RESOURCE = {
    "attributes": [
        _attr("service.name", "bench-service"),
        _attr("host.name", "bench-host"),
        _attr("telemetry.sdk.language", "python"),
    ]
}


def _record(first: int, count: int) -> bytes:
    batch = [_span(n) for n in range(first, first + count)]
    scope = {"scope": {"name": "bench", "version": "1"}, "spans": batch}
    return orjson.dumps({"resourceSpans": [{"resource": _RESOURCE, "scopeSpans": [scope]}]})


def _jaeger_tag(attribute: dict[str, Any]) -> dict[str, Any]:
    [(kind, value)] = attribute["value"].items()
    types = {"stringValue": "string", "intValue": "int64", "doubleValue": "float64"}
    typed = int(value) if kind == "intValue" else value
    return {"key": attribute["key"], "type": types.get(kind, "bool"), "value": typed}


def _jaeger_record(first: int, count: int) -> bytes:
    """The same spans as a Jaeger API response (``{"data": [trace, ...]}``)."""
    traces: dict[str, list[dict[str, Any]]] = {}
    for n in range(first, first + count):
        span = _span(n)
        parent = span.get("parentSpanId")
        traces.setdefault(span["traceId"], []).append(
            {
                "traceID": span["traceId"],
                "spanID": span["spanId"],
                "operationName": span["name"],
                "references": [
                    {"refType": "CHILD_OF", "traceID": span["traceId"], "spanID": parent}
                ]
                if parent
                else [],
                "startTime": int(span["startTimeUnixNano"]) // 1000,
                "duration": 500,
                "tags": [_jaeger_tag(a) for a in span["attributes"]]
                + [{"key": "span.kind", "type": "string", "value": "server"}],
                "logs": [],
                "processID": "p1",
            }
        )
    process = {"serviceName": "bench-service", "tags": [_jaeger_tag(_RESOURCE["attributes"][1])]}
    data = [{"traceID": t, "spans": s, "processes": {"p1": process}} for t, s in traces.items()]
    return orjson.dumps({"data": data})


def _zipkin_record(first: int, count: int) -> bytes:
    """The same spans as Zipkin v2 JSON (tags are strings there)."""
    spans = []
    for n in range(first, first + count):
        span = _span(n)
        tags = {a["key"]: str(next(iter(a["value"].values()))) for a in span["attributes"]}
        zipkin = {
            "traceId": span["traceId"],
            "id": span["spanId"],
            "name": span["name"],
            "timestamp": int(span["startTimeUnixNano"]) // 1000,
            "duration": 500,
            "kind": "SERVER",
            "localEndpoint": {"serviceName": "bench-service"},
            "tags": tags,
        }
        if "parentSpanId" in span:
            zipkin["parentId"] = span["parentSpanId"]
        spans.append(zipkin)
    return orjson.dumps(spans)


RECORDS = {"otlp": _record, "jaeger": _jaeger_record, "zipkin": _zipkin_record}


def write_jsonl(path: Path, spans: int, fmt: str = "otlp") -> None:
    record = RECORDS[fmt]
    with path.open("wb") as out:
        for first in range(0, spans, SPANS_PER_LINE):
            out.write(record(first, min(SPANS_PER_LINE, spans - first)) + b"\n")


def write_jsonl_of_size(path: Path, size: int) -> int:
    """At least ``size`` bytes of the same records, span numbers going on (ids stay distinct)."""
    spans = 0
    with path.open("wb") as out:
        while out.tell() < size:
            out.write(_record(spans, SPANS_PER_LINE) + b"\n")
            spans += SPANS_PER_LINE
    return spans


def _parse_only(path: Path) -> None:
    """The baseline: the importer's way of reading lines, each parsed by orjson and dropped."""
    with path.open("rb", buffering=READ_BUFFER) as f:
        while line := f.readline(LINE_LIMIT + 1):
            orjson.loads(line)


def _parse_gc_paused(path: Path) -> None:
    gc.disable()
    try:
        _parse_only(path)
    finally:
        gc.enable()


def _import(path: Path, store: bool, tmp: Path, run: int) -> int:
    from tracelens.ingest import read_files

    spans = read_files([path]).spans
    if store:
        from tracelens.store import open_store

        with open_store(tmp / f"bench-{run}.duckdb") as db:
            db.append(spans)
    return int(spans.num_rows)


def _import_timed(
    path: Path, store: bool, tmp: Path, run: int, times: list[tuple[float, float]]
) -> int:
    t0, c0 = time.perf_counter(), time.process_time()
    rows = _import(path, store, tmp, run)
    times.append((time.perf_counter() - t0, time.process_time() - c0))
    return rows


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - t0, time.process_time() - c0


def speed(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        path = tmp / "spans.jsonl"
        write_jsonl(path, args.spans, args.format)
        size_mb = path.stat().st_size / 1e6
        runs: dict[str, list[tuple[float, float]]] = {"plain": [], "paused": [], "import": []}
        _import(path, False, tmp, -1)  # warm up: imports, the compiled builder's key cache
        for run in range(args.repeat):
            runs["plain"].append(_timed(lambda: _parse_only(path)))
            runs["paused"].append(_timed(lambda: _parse_gc_paused(path)))
            rows = _import_timed(path, args.store, tmp, run, runs["import"])
            assert rows == args.spans, (rows, args.spans)
        wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    what = "read_files + DuckDB append" if args.store else "read_files"
    print(
        f"file: {args.spans:,} spans, {size_mb:.0f} MB {args.format} JSON Lines, 8 attributes "
        "a span; "
        f"medians of {args.repeat} runs; load average {os.getloadavg()[0]:.1f}"
    )
    for key, label in (("paused", "gc paused"), ("plain", "gc as is")):
        print(f"orjson.loads per line, {label}: {cpu[key]:.2f} s CPU, {wall[key]:.2f} s wall")
    print(
        f"{what}: {cpu['import']:.2f} s CPU, {wall['import']:.2f} s wall, "
        f"{args.spans / cpu['import']:,.0f} spans per CPU-second"
    )
    print(
        f"import/parse: {cpu['import'] / cpu['paused']:.2f}x CPU "
        f"({wall['import'] / wall['paused']:.2f}x wall) against orjson with gc paused; "
        f"{cpu['import'] / cpu['plain']:.2f}x against orjson as is (target 2x)"
    )


def memory(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        path = tmp / "big.jsonl"
        t0 = time.perf_counter()
        spans = write_jsonl_of_size(path, int(args.memory_gb * 1e9))
        size = path.stat().st_size
        print(f"wrote {size / 1e9:.2f} GB, {spans:,} spans in {time.perf_counter() - t0:.0f} s")
        db = tmp / "big.duckdb"
        cmd = [sys.executable, "-m", "tracelens", "import", str(path), "--db", str(db)]
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        took = time.perf_counter() - t0
        out = child.stdout.read().decode() if child.stdout else ""
        child.returncode = os.waitstatus_to_exitcode(status)
        print(out.strip())
        assert child.returncode == 0, child.returncode
        peak_mib = usage.ru_maxrss / 1024  # kilobytes on Linux
        print(
            f"tracelens import of {size / 1e9:.2f} GB: {took:.0f} s wall, "
            f"{usage.ru_utime + usage.ru_stime:.0f} s CPU, peak RSS {peak_mib:,.0f} MiB "
            f"({peak_mib * 2**20 / size:.2f}x the file); load average {os.getloadavg()[0]:.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--store", action="store_true", help="also append to a DuckDB store")
    parser.add_argument(
        "--format", choices=sorted(RECORDS), default="otlp", help="records of 1000 spans as"
    )
    parser.add_argument(
        "--memory-gb", type=float, help="instead: peak RSS of `tracelens import` of a file this big"
    )
    args = parser.parse_args()
    if args.memory_gb:
        memory(args)
    else:
        speed(args)


if __name__ == "__main__":
    main()
