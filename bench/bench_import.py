"""How long ``tracelens import`` takes, store included, against parsing the same file with orjson
alone; and how much memory importing a 2 GB file takes.

    python bench/bench_import.py [--spans 300000] [--repeat 3] [--formats otlp,jaeger,zipkin]
                                 [--compare OTHER_CHECKOUT] [--no-phases]
    python bench/bench_import.py --memory-gb 2

Speed: for each format, a file of ``--spans`` spans in records of 1000 spans a line, 8
attributes a span, 20 spans a trace: OTLP JSON Lines (the Collector's file exporter: one
ExportTraceServiceRequest a line), the same spans as Jaeger API responses (``{"data": [...]}``)
and as Zipkin v2 arrays, one a line (the importer reads each the same way: a line, then one
JSON document).  What the user waits for: ``python -m tracelens import FILE --db NEW`` in a
fresh process, interpreter start, imports, decoding and the store write (commit and close)
included, into a store that does not exist yet.  The baseline, in the same run and
interleaved: the bare parse, ``orjson.loads`` of each line of the same file, read the
importer's way, the objects built and freed, with the cyclic garbage collector paused (as the
importer pauses it; the strict baseline: the fastest parse, timed in this process with no
start-up).  Medians of ``--repeat`` rounds of wall seconds (what the user waits for; the target,
2x) and of CPU seconds (the import's: the child's user + system time, DuckDB's threads
included).  The load average is printed before and after: the machine is shared.  With
``--compare DIR``, each round also imports with DIR first on PYTHONPATH (a copy of an older
tree's ``tracelens/``, its compiled extensions included): a before/after in one run.  Then,
unless ``--no-phases``, one more fresh process a format does the import's work one phase after
the other (the imports, decoding every chunk, storing them in one transaction) and prints each
phase's wall and CPU seconds against the parse's CPU: where the time goes, and the floor each
phase sets on the ratio (the import itself overlaps decoding with storing on two threads).

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


def _parse_gc_paused(path: Path) -> tuple[float, float]:
    gc.disable()
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        _parse_only(path)
        return time.perf_counter() - t0, time.process_time() - c0
    finally:
        gc.enable()


def _import_cli(path: Path, db: Path, tree: str | None = None) -> tuple[float, float]:
    """``tracelens import`` in a fresh process (with ``tree`` first on PYTHONPATH: another
    checkout's tracelens): its wall and CPU seconds (user + system)."""
    cmd = [sys.executable, "-m", "tracelens", "import", str(path), "--db", str(db)]
    env = dict(os.environ, PYTHONPATH=tree) if tree else None
    t0 = time.perf_counter()
    child = subprocess.Popen(  # run in db's directory: `-m` puts the working directory first
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=db.parent
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    out = child.stdout.read().decode() if child.stdout else ""
    if child.stdout:
        child.stdout.close()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"tracelens import failed ({child.returncode}):\n{out}")
    return wall, usage.ru_utime + usage.ru_stime


_PHASES = """
import json, sys, time
marks = [(time.perf_counter(), time.process_time())]  # the interpreter started before this line


def mark():
    marks.append((time.perf_counter(), time.process_time()))


import tracelens.api  # what `tracelens import` loads before it reads a byte
import pyarrow.compute
from tracelens.ingest import Decoded, decode_files
from tracelens.store import open_store
mark()
chunks = list(decode_files([sys.argv[1]], Decoded()))
mark()
with open_store(sys.argv[2]) as store:
    store.set_threads(1)
    store.append_all(iter(chunks), new=True)
mark()
print(json.dumps([[w1 - w0, c1 - c0] for (w0, c0), (w1, c1) in zip(marks, marks[1:])]))
"""
PHASES = ("imports", "decode", "store")


def _phases(path: Path, db: Path) -> list[tuple[float, float]]:
    """Where an import's time goes, one phase after the other in a fresh process (the import
    itself overlaps decoding with storing): the imports `tracelens import` makes, decoding every
    chunk (its thread included), storing them in one transaction (insert and commit); wall and
    CPU seconds of each.  The interpreter's own start is not in it (about 0.03 s)."""
    out = subprocess.run(
        [sys.executable, "-c", _PHASES, str(path), str(db)],
        capture_output=True,
        text=True,
        cwd=db.parent,
        check=True,
    )
    return [(w, c) for w, c in orjson.loads(out.stdout.strip().splitlines()[-1])]


def _stored(db: Path) -> int:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM span_rows").fetchone()
    return int(row[0]) if row else 0


def _remove_store(db: Path) -> None:
    for leftover in (db, db.with_name(db.name + ".wal")):
        leftover.unlink(missing_ok=True)


def byte_compile(tree: str | None) -> None:
    """Write tracelens's bytecode (and ``tree``'s), as an install does (this machine sets
    PYTHONDONTWRITEBYTECODE: otherwise every fresh process would compile it again)."""
    import compileall

    import tracelens

    compileall.compile_dir(str(Path(str(tracelens.__file__)).parent), quiet=1)
    if tree:
        compileall.compile_dir(str(Path(tree) / "tracelens"), quiet=1)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} {five:.1f} {fifteen:.1f}"


def speed(args: argparse.Namespace) -> None:
    formats = [f for f in args.formats.split(",") if f]
    unknown = sorted(set(formats) - set(RECORDS))
    if unknown:
        raise SystemExit(f"unknown formats: {', '.join(unknown)} (known: {', '.join(RECORDS)})")
    byte_compile(args.compare)
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        files = {f: tmp / f"{f}.jsonl" for f in formats}
        for fmt, path in files.items():
            write_jsonl(path, args.spans, fmt)
        parse: dict[str, list[tuple[float, float]]] = {f: [] for f in formats}
        imp: dict[str, list[tuple[float, float]]] = {f: [] for f in formats}
        other: dict[str, list[tuple[float, float]]] = {f: [] for f in formats}
        db = tmp / "store.duckdb"
        _import_cli(files[formats[0]], db)  # warm up: the page cache, the OS's file tables
        _remove_store(db)
        for _ in range(args.repeat):
            for fmt, path in files.items():
                parse[fmt].append(_parse_gc_paused(path))
                imp[fmt].append(_import_cli(path, db))
                stored = _stored(db)
                _remove_store(db)
                assert stored == args.spans, (fmt, stored, args.spans)
                if args.compare:
                    other[fmt].append(_import_cli(path, db, args.compare))
                    _remove_store(db)
        phases = {}
        if args.phases:
            for fmt, path in files.items():
                phases[fmt] = _phases(path, db)
                _remove_store(db)
        sizes = {f: p.stat().st_size / 1e6 for f, p in files.items()}
    print(
        f"{args.spans:,} spans a file (1000 a line, 8 attributes a span, 20 a trace); medians of "
        f"{args.repeat} interleaved rounds; load average (1, 5, 15 min) {load_before} before, "
        f"{_load()} after, on {os.cpu_count()} cores"
    )
    print(
        "import: `python -m tracelens import FILE --db NEW` in a fresh process (start-up and "
        "store included); parse: orjson.loads of each line, gc paused, in process"
    )
    print(
        f"{'format':<8} {'MB':>5} {'parse wall':>10} {'import wall':>11} {'ratio':>6} "
        f"{'parse CPU':>9} {'import CPU':>10} {'ratio':>6} {'spans/s':>9}"
    )
    verdicts = []
    for fmt in formats:
        pw = statistics.median(w for w, _ in parse[fmt])
        pc_ = statistics.median(c for _, c in parse[fmt])
        iw = statistics.median(w for w, _ in imp[fmt])
        ic = statistics.median(c for _, c in imp[fmt])
        print(
            f"{fmt:<8} {sizes[fmt]:>5.0f} {pw:>9.2f}s {iw:>10.2f}s {iw / pw:>5.2f}x "
            f"{pc_:>8.2f}s {ic:>9.2f}s {ic / pc_:>5.2f}x {args.spans / iw:>9,.0f}"
        )
        verdicts.append(f"{fmt} {iw / pw:.2f}x {'met' if iw / pw <= 2 else 'MISSED'}")
        if args.compare:
            ow = statistics.median(w for w, _ in other[fmt])
            oc = statistics.median(c for _, c in other[fmt])
            print(
                f"{'  --compare':<14} {ow:>22.2f}s {ow / pw:>5.2f}x {oc:>20.2f}s "
                f"{oc / pc_:>5.2f}x {args.spans / ow:>9,.0f}"
            )
    print(f"import/parse, wall (target <= 2x): {'; '.join(verdicts)}")
    if phases:
        print(
            "where the import's time goes, one phase after the other in a fresh process "
            "(wall / CPU s; the import overlaps decoding and storing on two threads), each as a "
            "multiple of the parse's CPU:"
        )
        for fmt, measured in phases.items():
            pc_ = statistics.median(c for _, c in parse[fmt])
            cells = [
                f"{name} {w:.2f} / {c:.2f} ({c / pc_:.2f}x)"
                for name, (w, c) in zip(PHASES, measured, strict=True)
            ]
            print(f"{fmt:<8} " + ", ".join(cells))


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
    parser.add_argument("--spans", type=int, default=300_000, help="spans a file")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    parser.add_argument(
        "--formats", default=",".join(RECORDS), help="comma-separated: " + ", ".join(RECORDS)
    )
    parser.add_argument(
        "--compare",
        metavar="DIR",
        help="also time the import of another checkout (DIR holds its tracelens/), interleaved",
    )
    parser.add_argument(
        "--no-phases",
        dest="phases",
        action="store_false",
        help="leave out the breakdown (imports, decode, store) of one more import a format",
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
