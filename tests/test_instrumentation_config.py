"""configure() and flush(): files, OTLP endpoints, environment, reuse, failure modes.

Each case runs in a fresh interpreter, since a process has one global tracer provider.
"""

from __future__ import annotations

import gzip
import http.server
import json
import socket
import textwrap
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from test_instrumentation_helpers import ok, run_python
from tracelens_instrumentation import attributes as A

WORKLOAD = """
import asyncio, time
from tracelens_instrumentation import trace, configure, flush

@trace
def child(x):
    time.sleep(0.002)
    return {"docs": ["alpha beta gamma", "delta epsilon zeta"], "n": x}

@trace
async def parent(x):
    await asyncio.sleep(0.002)
    return child(x)

@trace(kind="gpu")
def generate(prompt):
    return prompt[::-1]

result = asyncio.run(parent(3)), generate("hello")
"""


def script(*parts: str) -> str:
    """Python source from parts, each dedented on its own."""
    return "\n".join(textwrap.dedent(part) for part in parts)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _spans(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for doc in docs:
        for rs in doc["resourceSpans"]:
            resource = {a["key"]: a["value"] for a in rs["resource"].get("attributes", [])}
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    attrs = {a["key"]: a["value"] for a in span.get("attributes", [])}
                    out.append({**span, "attrs": attrs, "resource": resource, "scope": ss["scope"]})
    return out


def _service(span: dict[str, Any]) -> str:
    return str(span["resource"]["service.name"]["stringValue"])


def test_file_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    ok(run_python(WORKLOAD + f"\nconfigure(service_name='agent', file={str(out)!r})\n" + WORKLOAD))
    spans = _spans(_lines(out))
    # The first workload ran before configure: it was not traced, and behaved the same.
    assert sorted(s["name"] for s in spans) == ["child", "generate", "parent"]
    by_name = {s["name"]: s for s in spans}
    assert by_name["child"]["parentSpanId"] == by_name["parent"]["spanId"]
    assert by_name["generate"]["attrs"][A.KIND] == {"stringValue": "gpu"}
    assert by_name["parent"]["attrs"][A.KIND]["stringValue"] in A.MEASURED_KINDS
    assert "intValue" in by_name["child"]["attrs"][A.CPU_NS]
    assert {_service(s) for s in spans} == {"agent"}
    assert {s["scope"]["name"] for s in spans} == {"tracelens"}


def test_file_is_readable_by_the_tracelens_importer(tmp_path: Path) -> None:
    from tracelens.ingest import read_files

    out = tmp_path / "spans.jsonl"
    ok(run_python(f"{WORKLOAD}\nconfigure(service_name='agent', file={str(out)!r})\n{WORKLOAD}"))
    table = read_files([out]).spans
    rows = {r["name"]: r for r in table.to_pylist()}
    assert set(rows) == {"child", "parent", "generate"}
    assert rows["generate"]["kind"] == "gpu"
    assert rows["child"]["cpu_ns"] > 0
    assert rows["child"]["parent_span_id"] == rows["parent"]["span_id"]
    assert {r["service"] for r in rows.values()} == {"agent"}
    assert len(rows["child"]["args_hash"]) == 32


def test_spans_are_flushed_at_exit_without_flush(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    # The batch processor's 5 s schedule is never reached: only the exit hook can write them.
    ok(run_python(f"from tracelens_instrumentation import configure\n"
                  f"configure(file={str(out)!r})\n{WORKLOAD}"))  # fmt: skip
    assert len(_spans(_lines(out))) == 3


def test_flush_writes_now(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    head = f"from tracelens_instrumentation import configure\nconfigure(file={str(out)!r})"
    tail = f"""
        import pathlib
        before = pathlib.Path({str(out)!r}).exists()
        print(before, flush(), len(pathlib.Path({str(out)!r}).read_text().splitlines()))
        """
    assert ok(run_python(script(head, WORKLOAD, tail))).split() == ["False", "True", "1"]


def test_configure_twice_is_harmless(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    code = f"""
        from tracelens_instrumentation import configure
        configure(service_name="a", file={str(out)!r})
        configure(service_name="a", file={str(out)!r})
        configure()
        """
    ok(run_python(script(code, WORKLOAD)))
    assert len(_spans(_lines(out))) == 3  # one exporter: no duplicates


def test_reuses_the_applications_provider(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    code = f"""
        from opentelemetry import trace as ot
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        mine = InMemorySpanExporter()
        app = TracerProvider(resource=Resource.create({{"service.name": "app-svc"}}))
        app.add_span_processor(SimpleSpanProcessor(mine))
        ot.set_tracer_provider(app)
        from tracelens_instrumentation import configure, flush
        configure(service_name="ignored", file={str(out)!r})
        """
    tail = """
        flush()
        print(ot.get_tracer_provider() is app, sorted(s.name for s in mine.get_finished_spans()))
        """
    assert (
        ok(run_python(script(code, WORKLOAD, tail))).strip()
        == "True ['child', 'generate', 'parent']"
    )
    spans = _spans(_lines(out))
    assert len(spans) == 3 and {_service(s) for s in spans} == {"app-svc"}


def test_an_app_provider_without_configure_is_used() -> None:
    code = """
        from opentelemetry import trace as ot
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        """
    tail = """
        mine = InMemorySpanExporter()
        app = TracerProvider()
        app.add_span_processor(SimpleSpanProcessor(mine))
        ot.set_tracer_provider(app)
        result = asyncio.run(parent(1))
        print(sorted(s.name for s in mine.get_finished_spans()))
        """
    assert ok(run_python(script(code, WORKLOAD, tail))).strip() == "['child', 'parent']"


def test_environment_variables(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    code = f"from tracelens_instrumentation import configure\nconfigure(file={str(out)!r})\n"
    env = {"OTEL_SERVICE_NAME": "from-env", "OTEL_RESOURCE_ATTRIBUTES": "deployment.env=test"}
    ok(run_python(code + WORKLOAD, env=env))
    spans = _spans(_lines(out))
    assert {_service(s) for s in spans} == {"from-env"}
    assert spans[0]["resource"]["deployment.env"] == {"stringValue": "test"}


def test_sdk_disabled_by_environment(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    code = f"""
        from tracelens_instrumentation import configure, _runtime
        configure(file={str(out)!r})
        """
    tail = "print(result, _runtime.TRACER)"
    got = ok(run_python(script(code, WORKLOAD, tail), env={"OTEL_SDK_DISABLED": "true"}))
    assert got.strip().endswith("None") and "'n': 3" in got
    assert not out.exists()


class _Receiver(http.server.BaseHTTPRequestHandler):
    """A minimal OTLP/HTTP receiver: decodes each request with the OTLP protobuf schema."""

    requests: list[trace_service_pb2.ExportTraceServiceRequest]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).requests.append(request)
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200 if self.path == "/v1/traces" else 404)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        return


def _names(requests: list[trace_service_pb2.ExportTraceServiceRequest]) -> list[str]:
    return sorted(
        span.name
        for request in requests
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    )


@pytest.fixture
def otlp_http() -> Iterator[tuple[str, list[trace_service_pb2.ExportTraceServiceRequest]]]:
    handler: Any = type("Receiver", (_Receiver,), {"requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.requests
    server.shutdown()
    server.server_close()


def test_otlp_http_round_trip(otlp_http: tuple[str, list[Any]]) -> None:
    endpoint, received = otlp_http
    code = f"from tracelens_instrumentation import configure\nconfigure('svc', {endpoint!r})\n"
    ok(run_python(code + WORKLOAD))
    assert _names(received) == ["child", "generate", "parent"]
    span = received[0].resource_spans[0].scope_spans[0].spans[0]
    assert any(kv.key == A.KIND for kv in span.attributes)


def test_otlp_endpoint_from_environment(otlp_http: tuple[str, list[Any]]) -> None:
    endpoint, received = otlp_http
    code = "from tracelens_instrumentation import configure\nconfigure('svc')\n"
    ok(run_python(code + WORKLOAD, env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint}))
    assert _names(received) == ["child", "generate", "parent"]


def test_otlp_grpc_round_trip() -> None:
    import grpc

    received: list[trace_service_pb2.ExportTraceServiceRequest] = []

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            received.append(request)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        code = (
            "from tracelens_instrumentation import configure\n"
            f"configure('svc', endpoint='127.0.0.1:{port}', protocol='grpc')\n"
        )
        ok(run_python(code + WORKLOAD))
    finally:
        server.stop(0)
    assert _names(received) == ["child", "generate", "parent"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


UNREACHABLE = """
import asyncio, gc, os
from opentelemetry.sdk.trace import ReadableSpan
from tracelens_instrumentation import trace, configure, flush, measure, children
if os.environ.get("MODE") == "unreachable":
    configure("svc", endpoint=os.environ["ENDPOINT"])
elif os.environ.get("MODE") == "on":
    configure("svc", file=os.environ["OUT"])

@trace
def step(i, payload):
    return {"i": i, "text": payload * 3}

@trace
async def astep(i):
    await asyncio.sleep(0)
    return step(i, "abcdefgh")["i"]

async def gather(n):
    return list(await asyncio.gather(*(astep(i) for i in range(n))))

def batch(n):
    return [step(i, "xy")["i"] for i in range(n)] + asyncio.run(gather(n // 10))

def live_spans():
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, ReadableSpan))

first = batch(2000)
live_first = live_spans()
out = batch(8000)  # far more spans than the batch processor keeps (2048 queued + 2 x 512)
live_after = live_spans()
left = len(measure.records) + len(children._open) + sum(map(len, measure.stacks.values()))
print(sum(first), sum(out), live_first, live_after, left, flush(2))
"""


@pytest.mark.system
def test_same_behaviour_on_off_and_unreachable(tmp_path: Path) -> None:
    env_common = {"OTEL_EXPORTER_OTLP_TIMEOUT": "1", "OTEL_BSP_SCHEDULE_DELAY": "200"}
    results = {}
    for mode in ("off", "on", "unreachable"):
        env = {
            **env_common,
            "MODE": mode,
            "OUT": str(tmp_path / "on.jsonl"),
            "ENDPOINT": f"http://127.0.0.1:{_closed_port()}",
        }
        start = time.monotonic()
        proc = run_python(UNREACHABLE, env=env, timeout=120)
        took = time.monotonic() - start
        results[mode] = ok(proc).split()
        assert "Traceback" not in proc.stderr or mode == "unreachable", proc.stderr
        assert took < 45, f"{mode}: the process took {took:.0f} s, exit included"
    sums = {mode: r[:2] for mode, r in results.items()}
    assert sums["off"] == sums["on"] == sums["unreachable"]
    for mode in ("on", "unreachable"):
        _, live_after, left = (int(x) for x in results[mode][2:5])
        # Bounded: spans waiting for the exporter never exceed what the batch processor keeps,
        # however many calls are made, and no per-call bookkeeping outlives its call.  The SDK
        # (1.45, _shared_internal.BatchProcessor._export) keeps its queue (2048) and two
        # batches of 512: the one exported last stays referenced while the next is popped
        # from the queue, which the application refills meanwhile (one run: 2,791 spans).
        assert live_after <= 2048 + 2 * 512 + 64, (mode, results[mode])
        assert left == 0, (mode, results[mode])
    assert int(results["unreachable"][3]) > 1000  # it really could not deliver them
    assert results["on"][5] == "True"


def test_round_trip_into_a_running_tracelens_collector(tmp_path: Path) -> None:
    """Spans sent by configure(endpoint=...) land in the store of a real `tracelens collect`."""
    import importlib.util
    import signal
    import subprocess
    import sys

    if importlib.util.find_spec("tracelens.collector") is None:
        pytest.skip("tracelens collect is not available")
    db = tmp_path / "store.duckdb"
    command = [sys.executable, "-m", "tracelens", "collect", "--db", str(db)]
    collector = subprocess.Popen(
        [*command, "--http", "127.0.0.1:0", "--grpc", "off"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = _collector_url(collector)
        ok(
            run_python(
                f"from tracelens_instrumentation import configure\nconfigure('agent', {url!r})\n"
                + WORKLOAD
            )
        )
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(timeout=60)
    from tracelens.store import open_store

    with open_store(str(db), read_only=True) as store:
        rows = {r["name"]: r for r in store.read(None).to_pylist()}
    assert set(rows) == {"child", "parent", "generate"}
    assert rows["generate"]["kind"] == "gpu"
    assert rows["child"]["parent_span_id"] == rows["parent"]["span_id"]
    assert rows["child"]["cpu_ns"] > 0 and rows["parent"]["service"] == "agent"


def _collector_url(collector: Any) -> str:
    deadline = time.monotonic() + 60
    assert collector.stdout is not None
    while time.monotonic() < deadline:
        line = collector.stdout.readline()
        if not line:
            break
        if "listening on" in line:
            return str(line.rsplit(" ", 1)[-1].strip())
    pytest.fail(f"the collector did not start (exit {collector.poll()})")
