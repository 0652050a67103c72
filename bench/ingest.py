"""How fast ``tracelens collect`` stores spans sent over OTLP/HTTP, and how that compares.

    python bench/ingest.py [--clients 16] [--seconds 15] [--warmup 3] [--no-phoenix]
                           [--memory-mb 2048] [--metrics both|on|off] [--rounds 1]

N client threads (in their own process, so the collector's figures are its own) each send
requests of 512 spans (64 traces of 8 nested spans, 8 attributes each: the shape the OpenTelemetry
SDK's batch processor exports) over keep-alive HTTP/1.1, protobuf, one request at a time, each
answered only after its spans are committed; a 503 is retried after its Retry-After.  Every
request carries new trace ids, so nothing is deduplicated away.

Printed: spans/s *stored* (the collector's committed-span counter over the measured window, not
acknowledgements; a read at each edge of the window makes the collector merge everything
acknowledged so far, so the counter is not off by a pending merge), p50/p99 request latency seen
by the clients, the collector's peak RSS, how many acknowledged spans its store lacks once it
has stopped (every trace of every request answered 200 is looked up, all its spans expected),
and the baseline measured in the same run on the same payloads:
``ExportTraceServiceRequest.FromString`` alone (decode-only, the practical limit of any Python
OTLP receiver), with tracelens's ratio to it.
With ``--metrics both`` (the default) the collector runs twice per round, span metrics off
(``--no-span-metrics``) and on (its default), alternating, on the same stream; for each it prints
the collector's CPU per stored span over the whole job (from the first request until every span
is stored and, with the metrics on, every trace counted: the analysis that happens after the
quiet period is paid for too), and the ratio on/off (medians over ``--rounds``).
Where ``.venv-phoenix`` holds Arize Phoenix, its OTLP receiver gets the same stream and its stored
spans (rows in its SQLite ``spans`` table) are counted the same way.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PHOENIX_VENV = ROOT / ".venv-phoenix"
SPANS, TRACES = 512, 64


# -- payloads ----------------------------------------------------------------------------------


Offsets = tuple[np.ndarray, np.ndarray]


def base_payload() -> tuple[bytes, Offsets]:
    """One request of SPANS spans, and where each trace id and each span id occurs in it."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    kept: list[Any] = []

    class Keep(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            kept.extend(spans)
            return SpanExportResult.SUCCESS

    provider = TracerProvider(resource=Resource.create({"service.name": "agent-bench"}))
    provider.add_span_processor(SimpleSpanProcessor(Keep()))
    tracer = provider.get_tracer("bench.ingest", "1.0")
    per_trace = SPANS // TRACES
    for t in range(TRACES):
        with tracer.start_as_current_span("agent.run", kind=trace.SpanKind.SERVER) as root:
            _attrs(root, t, 0)
            for k in range(1, per_trace):
                with tracer.start_as_current_span(f"tool.call.{k % 5}") as span:
                    _attrs(span, t, k)
    provider.shutdown()
    body = encode_spans(kept).SerializeToString()
    trace_ids = sorted({s.context.trace_id.to_bytes(16, "big") for s in kept})
    span_ids = sorted({s.context.span_id.to_bytes(8, "big") for s in kept})
    return body, (_occurrences(body, trace_ids), _occurrences(body, span_ids))


def _occurrences(body: bytes, ids: list[bytes]) -> np.ndarray:
    """Per id, the offsets where it occurs (its own field, and parent/link references)."""
    offsets = []
    for raw in ids:
        found, at = [], body.find(raw)
        while at >= 0:
            found.append(at)
            at = body.find(raw, at + 1)
        offsets.append(found)
    width = max(len(f) for f in offsets)
    return np.array([f + [f[0]] * (width - len(f)) for f in offsets], np.int64)


def _attrs(span: Any, t: int, k: int) -> None:
    span.set_attribute("gen_ai.operation.name", "chat" if k % 2 else "execute_tool")
    span.set_attribute("gen_ai.request.model", "llama-3.1-8b-instruct")
    span.set_attribute("gen_ai.usage.input_tokens", 1000 + 37 * k + t)
    span.set_attribute("gen_ai.usage.output_tokens", 50 + k)
    span.set_attribute("http.request.method", "POST")
    span.set_attribute("url.full", f"http://tools.internal/v1/run/{t}/{k}")
    span.set_attribute("tracelens.kind", "io" if k % 2 else "gpu")
    span.set_attribute("tracelens.cpu_ns", 120_000 + k)


class Payloads:
    """Copies of the base request with fresh trace and span ids (parents follow; microseconds)."""

    def __init__(self, body: bytes, offsets: Offsets) -> None:
        self._base = np.frombuffer(body, np.uint8)
        self._ids = [
            ((table[:, :, None] + np.arange(size)).reshape(len(table), -1), size)
            for table, size in zip(offsets, (16, 8), strict=True)
        ]

    def make(self) -> bytes:
        return self.make_with_ids()[0]

    def make_with_ids(self) -> tuple[bytes, bytes]:
        """A request, and its trace ids (16 bytes each, concatenated)."""
        out = self._base.copy()
        trace_ids = b""
        for index, size in self._ids:
            n, width = len(index), index.shape[1] // size
            raw = os.urandom(size * n)
            ids = np.frombuffer(raw, np.uint8).reshape(n, 1, size)
            out[index] = np.broadcast_to(ids, (n, width, size)).reshape(n, -1)
            if size == 16:
                trace_ids = raw
        return out.tobytes(), trace_ids


# -- clients -----------------------------------------------------------------------------------


Done = tuple[float, float, bytes]  # (finished at, latency seconds, the request's trace ids)


def _client(args: tuple[str, int, bytes, Offsets, float, float]) -> list[Done]:
    host, port, body, offsets, start_at, stop_at = args
    payloads = Payloads(body, offsets)
    conn = http.client.HTTPConnection(host, port, timeout=60)
    headers = {"Content-Type": "application/x-protobuf"}
    done: list[Done] = []
    while time.time() < start_at:
        time.sleep(0.01)
    while time.time() < stop_at:
        data, trace_ids = payloads.make_with_ids()
        began = time.perf_counter()
        while True:
            try:
                conn.request("POST", "/v1/traces", data, headers)
                response = conn.getresponse()
                response.read()
            except (ConnectionError, http.client.HTTPException, TimeoutError):
                if time.time() >= stop_at:
                    return done
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=60)
                time.sleep(0.2)
                continue
            if response.status == 200:
                break
            if response.status in (429, 503) and time.time() < stop_at:
                time.sleep(float(response.getheader("Retry-After") or 1))
                continue
            if response.status in (429, 503):
                return done  # the window is over: leave the refused request
            raise RuntimeError(f"unexpected answer {response.status}")
        done.append((time.time(), time.perf_counter() - began, trace_ids))
    conn.close()
    return done


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its threads so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_load(
    url: str,
    clients: int,
    warmup: float,
    seconds: float,
    stored: Callable[[], int],
    body: bytes,
    offsets: Offsets,
    pid: int,
    drain: Callable[[int], float] | None = None,
    acknowledged: list[bytes] | None = None,
) -> dict[str, float]:
    """The figures of one run; ``drain(spans)``, when given, waits after the load until the
    collector has done all its work on the spans it stored (returns how long that took), and
    the whole job's CPU per span then includes that work.  ``acknowledged``, when given, gets
    the trace ids of every acknowledged request (16 bytes each, concatenated per request)."""
    if acknowledged is None:
        acknowledged = []
    host, port = url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    start_at = time.time() + 1.0
    window = (start_at + warmup, start_at + warmup + seconds)
    job = (host, int(port), body, offsets, start_at, window[1])
    with mp.get_context("spawn").Pool(1) as pool:
        pending = pool.map_async(_threads, [(job, clients)])
        while time.time() < start_at:
            time.sleep(0.01)
        job0, job_cpu0 = stored(), cpu_seconds(pid)
        while time.time() < window[0]:
            time.sleep(0.05)
        first, cpu0 = stored(), cpu_seconds(pid)
        while time.time() < window[1]:
            time.sleep(0.05)
        last, cpu1 = stored(), cpu_seconds(pid)
        done = pending.get()[0]
    job_spans = stored() - job0
    drain_s = drain(job_spans) if drain is not None else 0.0
    job_cpu = cpu_seconds(pid) - job_cpu0
    latencies = sorted(lat for at, lat, _ in done if window[0] <= at <= window[1])
    acknowledged[:] = [ids for _, _, ids in done]
    return {
        "job_spans": job_spans,
        "job_cpu_us_per_span": 1e6 * job_cpu / max(job_spans, 1),
        "drain_s": drain_s,
        "stored_per_s": (last - first) / seconds,
        "stored_per_cpu_s": (last - first) / max(cpu1 - cpu0, 1e-9),
        "cpu_share": (cpu1 - cpu0) / seconds,
        "requests": len(latencies),
        "acked_per_s": len(latencies) * SPANS / seconds,
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else float("nan"),
        "p99_ms": 1000 * latencies[(len(latencies) * 99) // 100] if latencies else float("nan"),
    }


def _threads(arg: tuple[tuple[Any, ...], int]) -> list[Done]:
    from concurrent.futures import ThreadPoolExecutor

    job, clients = arg
    with ThreadPoolExecutor(clients) as pool:
        return [x for part in pool.map(_client, [job] * clients) for x in part]


# -- systems under test ------------------------------------------------------------------------


def start_tracelens(
    db: Path,
    queue_mb: float | None = None,
    memory_mb: int | None = None,
    span_metrics: bool = True,
) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable,
        "-m",
        "tracelens.cli",
        "collect",
        "--db",
        str(db),
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "off",
        *(["--queue-mb", str(queue_mb)] if queue_mb else []),
        *(["--memory-mb", str(memory_mb)] if memory_mb else []),
        *([] if span_metrics else ["--no-span-metrics"]),
    ]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stderr is not None
    url = ""
    for line in proc.stderr:
        if "OTLP/HTTP listening on" in line:
            url = line.split()[-1]
        if line.strip().endswith("ready"):
            return proc, url
    raise RuntimeError("tracelens collect did not start")


def tracelens_stored(url: str) -> Callable[[], int]:
    def stored() -> int:
        # A read merges every acknowledged span first; asking for none of them makes the
        # counter exact at the window's edges instead of off by up to one merge (131k spans).
        flush = f"{url}/v1/spans?columns=span_id&start_ns={2**63 - 1}"
        with urllib.request.urlopen(flush, timeout=120) as r:
            r.read()
        with urllib.request.urlopen(f"{url}/stats") as r:
            return int(json.load(r)["spans_stored"])

    return stored


def metrics_drained(url: str, timeout_s: float = 300.0) -> Callable[[int], float]:
    """Waits until the span metrics have counted (or given up on) every trace of ``spans``
    stored spans (``SPANS // TRACES`` spans a trace); returns the seconds waited."""

    def drain(spans: int) -> float:
        began = time.time()
        want = spans // (SPANS // TRACES)
        while time.time() - began < timeout_s:
            with urllib.request.urlopen(f"{url}/metrics", timeout=60) as r:
                text = r.read().decode()
            got = {
                line.split()[0]: float(line.split()[1])
                for line in text.splitlines()
                if line.startswith("tracelens_metrics_traces_")
            }
            if (
                got.get("tracelens_metrics_traces_counted_total", 0)
                + got.get("tracelens_metrics_traces_dropped_total", 0)
                >= want
            ):
                return time.time() - began
            time.sleep(0.5)
        raise RuntimeError(f"the span metrics did not count {want} traces in {timeout_s:.0f} s")

    return drain


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_phoenix(workdir: Path) -> tuple[subprocess.Popen[bytes], str] | str:
    exe = PHOENIX_VENV / "bin" / "phoenix"
    if not exe.exists():
        return f"not measured: {exe} is missing (pip install arize-phoenix into {PHOENIX_VENV})"
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_HOST": "127.0.0.1",
    }
    proc = subprocess.Popen(
        [str(exe), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            return f"not measured: phoenix serve exited with {proc.returncode}"
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return proc, url
        except OSError:
            time.sleep(1)
    proc.kill()
    return "not measured: phoenix serve did not answer /healthz within 180 s"


def phoenix_stored(workdir: Path) -> Callable[[], int]:
    def stored() -> int:
        con = sqlite3.connect(f"file:{workdir / 'phoenix.db'}?mode=ro", uri=True, timeout=30)
        try:
            return int(con.execute("SELECT count(*) FROM spans").fetchone()[0])
        except sqlite3.OperationalError:
            return 0
        finally:
            con.close()

    return stored


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- baseline ----------------------------------------------------------------------------------


def decode_rates(payloads: list[bytes]) -> tuple[float, float]:
    """(FromString alone, tracelens's protobuf->Arrow decoder) in spans/s, median of 5, CPU time."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from tracelens.ingest.otlp_proto import decode_export_request

    def rate(fn: Callable[[bytes], Any]) -> float:
        runs = []
        for _ in range(5):
            began = time.process_time()
            for p in payloads:
                fn(p)
            runs.append(len(payloads) * SPANS / (time.process_time() - began))
        return statistics.median(runs)

    decode_export_request(payloads[0])
    return rate(ExportTraceServiceRequest.FromString), rate(decode_export_request)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--no-phoenix", action="store_true")
    parser.add_argument(
        "--queue-mb", type=float, help="the collector's --queue-mb (default: its own)"
    )
    parser.add_argument(
        "--memory-mb",
        type=int,
        default=2048,
        help="the collector's --memory-mb, printed beside its peak RSS (default: 2048, its own)",
    )
    parser.add_argument(
        "--metrics",
        choices=("both", "on", "off"),
        default="both",
        help="span metrics in the collector: off and on alternating in each round (default), "
        "or one of them",
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds (medians are printed)")
    args = parser.parse_args()

    body, offsets = base_payload()
    samples = [Payloads(body, offsets).make() for _ in range(40)]
    from_string, ours = decode_rates(samples)
    print(
        f"payload: {SPANS} spans/request ({TRACES} traces x {SPANS // TRACES}), 8 attributes "
        f"each, {len(body) / 1024:.0f} KiB protobuf; {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"decode-only  ExportTraceServiceRequest.FromString: {from_string:12,.0f} spans/s (CPU)")
    print(
        f"tracelens    protobuf -> Arrow span table:         {ours:12,.0f} spans/s (CPU) "
        f"= {ours / from_string:.2f} x decode-only"
    )

    tmp = Path(tempfile.mkdtemp(prefix="tracelens-ingest-"))
    modes = {"both": (False, True), "on": (True,), "off": (False,)}[args.metrics]
    results: dict[bool, list[dict[str, float]]] = {m: [] for m in modes}
    try:
        for round_ in range(args.rounds):
            for on in modes:
                result = _tracelens(args, tmp / f"bench-{round_}-{on}.duckdb", on, body, offsets)
                results[on].append(result)
                _print_run(args, result, on, from_string)
        if args.rounds > 1 or len(modes) > 1:
            _print_summary(args, results)
        if not args.no_phoenix:
            best = max(r["stored_per_s"] for rs in results.values() for r in rs)
            _phoenix(args, tmp, body, offsets, best)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _tracelens(
    args: argparse.Namespace, db: Path, span_metrics: bool, body: bytes, offsets: Offsets
) -> dict[str, float]:
    proc, url = start_tracelens(db, args.queue_mb, args.memory_mb, span_metrics)
    acknowledged: list[bytes] = []
    try:
        result = run_load(
            url,
            args.clients,
            args.warmup,
            args.seconds,
            tracelens_stored(url),
            body,
            offsets,
            proc.pid,
            metrics_drained(url) if span_metrics else None,
            acknowledged,
        )
        result["rss_mb"] = peak_rss_mb(proc.pid)
        result["load"] = os.getloadavg()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    result["acked_spans"], result["missing"] = missing_spans(db, acknowledged)
    return result


def missing_spans(db: Path, acknowledged: list[bytes]) -> tuple[int, int]:
    """(spans acknowledged, how many of them the stopped collector's store lacks): every trace
    of every acknowledged request must be there with all its ``SPANS // TRACES`` spans."""
    import duckdb
    import pyarrow as pa

    ids = [raw[i : i + 16].hex() for raw in acknowledged for i in range(0, len(raw), 16)]
    per_trace = SPANS // TRACES
    con = duckdb.connect(str(db), read_only=True)
    try:
        wanted = pa.table({"trace_id": pa.array(ids, pa.string())})  # noqa: F841 (read by SQL)
        row = con.execute(
            "SELECT coalesce(sum(least(n, ?)), 0) FROM (SELECT w.trace_id, count(s.trace_id) AS n "
            "FROM wanted w LEFT JOIN span_rows s USING (trace_id) GROUP BY w.trace_id)",
            [per_trace],
        ).fetchone()
    finally:
        con.close()
    found = int(row[0]) if row else 0
    return len(ids) * per_trace, len(ids) * per_trace - found


def _print_run(
    args: argparse.Namespace, result: dict[str, float], on: bool, from_string: float
) -> None:
    print(
        f"tracelens collect, span metrics {'on ' if on else 'off'} "
        f"({args.clients} clients, {args.seconds:.0f} s): "
        f"{result['stored_per_s']:,.0f} spans/s stored "
        f"({result['acked_per_s']:,.0f} acknowledged), "
        f"p50 {result['p50_ms']:.0f} ms, p99 {result['p99_ms']:.0f} ms per request, "
        f"peak RSS {result['rss_mb']:.0f} MiB (budget --memory-mb {args.memory_mb}); "
        f"{result['stored_per_s'] / from_string:.3f} x decode-only; load {result['load']:.1f}"
    )
    print(
        f"  acknowledged spans missing from the store after the collector stopped: "
        f"{result['missing']:,.0f} of {result['acked_spans']:,.0f}"
    )
    print(
        f"  collector CPU: {result['cpu_share']:.2f} cores busy, "
        f"{result['stored_per_cpu_s']:,.0f} spans stored per CPU-second in the window; "
        f"whole job {result['job_cpu_us_per_span']:.2f} CPU-us per span "
        f"({result['job_spans']:,.0f} spans"
        + (f", span metrics done {result['drain_s']:.1f} s after the load)" if on else ")")
    )


def _print_summary(args: argparse.Namespace, results: dict[bool, list[dict[str, float]]]) -> None:
    def med(on: bool, key: str) -> float:
        return statistics.median(r[key] for r in results[on])

    for on, rs in results.items():
        print(
            f"span metrics {'on ' if on else 'off'}: median of {len(rs)}: "
            f"{med(on, 'stored_per_s'):,.0f} spans/s stored, "
            f"{med(on, 'job_cpu_us_per_span'):.2f} CPU-us per span (whole job), "
            f"peak RSS {max(r['rss_mb'] for r in rs):,.0f} MiB at most "
            f"(budget {args.memory_mb}), p99 {med(on, 'p99_ms'):.0f} ms, acknowledged spans "
            f"missing {sum(r['missing'] for r in rs):,.0f} "
            f"of {sum(r['acked_spans'] for r in rs):,.0f}"
        )
    if len(results) == 2:
        ratios = [
            on["job_cpu_us_per_span"] / off["job_cpu_us_per_span"]
            for off, on in zip(results[False], results[True], strict=True)
        ]
        print(
            "span metrics on / off, collector CPU per span (whole job): "
            f"{statistics.median(ratios):.3f} x (median; each round: "
            f"{', '.join(f'{r:.3f}' for r in ratios)}; target <= 1.15)"
        )


def _phoenix(
    args: argparse.Namespace, tmp: Path, body: bytes, offsets: Offsets, ours: float
) -> None:
    workdir = tmp / "phoenix"
    workdir.mkdir()
    started = start_phoenix(workdir)
    if isinstance(started, str):
        print(f"Arize Phoenix: {started}")
        return
    proc, url = started
    try:
        result = run_load(
            url,
            args.clients,
            args.warmup,
            args.seconds,
            phoenix_stored(workdir),
            body,
            offsets,
            proc.pid,
        )
        rss = peak_rss_mb(proc.pid)
        stored_now = phoenix_stored(workdir)()
        time.sleep(30)  # Phoenix answers first and inserts later: what does it store after?
        stored_later = phoenix_stored(workdir)()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    ratio = ours / result["stored_per_s"] if result["stored_per_s"] else float("inf")
    acked_ratio = ours / result["acked_per_s"] if result["acked_per_s"] else float("inf")
    print(
        f"Arize Phoenix OTLP receiver (same stream): {result['stored_per_s']:,.0f} spans/s stored "
        f"({result['acked_per_s']:,.0f} acknowledged; it answers before it stores), "
        f"p50 {result['p50_ms']:.0f} ms, p99 {result['p99_ms']:.0f} ms per request, "
        f"peak RSS {rss:.0f} MiB; {stored_now:,} spans in its store when the load stopped, "
        f"{stored_later:,} 30 s later; tracelens stored / Phoenix stored = {ratio:.1f}, "
        f"tracelens stored / Phoenix acknowledged = {acked_ratio:.1f}"
    )


if __name__ == "__main__":
    main()
