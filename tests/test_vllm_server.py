"""vLLM exporting its own ``llm_request`` spans over OTLP/HTTP to a real receiver, joined
to the caller's trace: a real OpenAI-compatible server called with ``traceparent`` by an
agent span, and a real in-process ``AsyncLLM`` whose instrumented ``generate`` hands vLLM
the call span's context.

Run through ``scripts/test-vllm.sh``; the plain suite has no vLLM and skips this module.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
}.items():
    os.environ.setdefault(_key, _value)
pytest.importorskip("vllm")
openai = pytest.importorskip("openai")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from test_vllm import (  # noqa: E402
    ENGINE_ARGS,
    MAX_TOKENS,
    PROMPTS,
    check_request,
    sampling,
    split,
    tiny_model,
)
from tracelens_instrumentation import attributes as A  # noqa: E402
from tracelens_instrumentation.vllm import (  # noqa: E402
    instrument_async_llm,
    instrument_http_client,
    traceparent_headers,
    uninstrument,
)

pytestmark = [pytest.mark.vllm, pytest.mark.system]
ROOT = Path(__file__).resolve().parents[1]
STARTUP_TIMEOUT_S = 150.0
SPAN_TIMEOUT_S = 30.0


class Receiver(ThreadingHTTPServer):
    """The smallest OTLP/HTTP protobuf trace receiver: keeps every span it is sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.spans: list[ProtoSpan] = []
        self.changed = threading.Condition()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def wait_for(self, count: int, name: str, timeout: float) -> list[ProtoSpan]:
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                found = [s for s in self.spans if s.name == name]
                left = deadline - time.monotonic()
                if len(found) >= count or left <= 0:
                    return found
                self.changed.wait(left)


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest.FromString(body)
        except Exception:
            self.send_error(400, "not an OTLP ExportTraceServiceRequest")
            return
        with self.server.changed:
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    self.server.spans.extend(scope_spans.spans)
            self.server.changed.notify_all()
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"vLLM server exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"vLLM server not healthy in {STARTUP_TIMEOUT_S} s:\n{log.read_text()[-4000:]}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver) -> Iterator[str]:
    """``python -m vllm.entrypoints.openai.api_server`` on 127.0.0.1; yields its base URL."""
    model = tiny_model(tmp_path_factory)
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "VLLM_NO_USAGE_STATS": "1",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # export within 0.1 s, not the default 5 s
    }
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model), "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--enforce-eager", "--max-model-len", "512",
        "--otlp-traces-endpoint", receiver.endpoint,
    ]  # fmt: skip
    with log.open("wb") as sink:
        proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_healthy(proc, f"http://127.0.0.1:{port}/health", log)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def tracer() -> Any:
    return TracerProvider().get_tracer("agent")


def only(spans: list[ProtoSpan], trace_id: int) -> ProtoSpan:
    mine = [s for s in spans if int.from_bytes(s.trace_id, "big") == trace_id]
    assert len(mine) == 1, f"{len(mine)} llm_request spans in trace {trace_id:032x}"
    return mine[0]


def attr(span: ProtoSpan, key: str) -> Any:
    for kv in span.attributes:
        if kv.key == key:
            return getattr(kv.value, kv.value.WhichOneof("value"))
    raise KeyError(key)


def test_llm_request_spans_join_the_agent_trace(server: str, receiver: Receiver, tracer: Any):
    client = instrument_http_client(openai.OpenAI(base_url=f"{server}/v1", api_key="none"))
    aclient = instrument_http_client(openai.AsyncOpenAI(base_url=f"{server}/v1", api_key="none"))
    before = len(receiver.wait_for(0, "llm_request", 0))

    with tracer.start_as_current_span("agent.plan") as plan:
        done = client.completions.create(model="tiny", prompt="hello", max_tokens=4)

    async def ask() -> Any:
        with tracer.start_as_current_span("agent.answer") as span:
            reply = await aclient.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=4
            )
            return span, reply

    answer, chat = asyncio.run(ask())
    # No current span: no traceparent, so vLLM starts a trace of its own.
    client.completions.create(model="tiny", prompt="alone", max_tokens=2)

    spans = receiver.wait_for(before + 3, "llm_request", SPAN_TIMEOUT_S)
    assert len(spans) >= before + 3
    for agent, response in ((plan, done), (answer, chat)):
        ctx = agent.get_span_context()
        served = only(spans, ctx.trace_id)
        assert served.parent_span_id == ctx.span_id.to_bytes(8, "big")
        assert served.kind == ProtoSpan.SPAN_KIND_SERVER
        assert attr(served, A.GEN_AI_USAGE_COMPLETION_TOKENS) == response.usage.completion_tokens
        assert attr(served, A.GEN_AI_USAGE_PROMPT_TOKENS) == response.usage.prompt_tokens
        for key in (A.GEN_AI_LATENCY_TIME_IN_QUEUE, A.GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL):
            assert attr(served, key) >= 0.0
    roots = [s for s in spans[before:] if not s.parent_span_id]
    assert len(roots) == 1
    assert int.from_bytes(roots[0].trace_id, "big") not in {
        plan.get_span_context().trace_id,
        answer.get_span_context().trace_id,
    }


def test_plain_headers_work_with_any_client(server: str, receiver: Receiver, tracer: Any):
    import json

    before = len(receiver.wait_for(0, "llm_request", 0))
    with tracer.start_as_current_span("agent.raw") as agent:
        body = json.dumps({"model": "tiny", "prompt": "x", "max_tokens": 2}).encode()
        headers = {"Content-Type": "application/json", **traceparent_headers()}
        request = urllib.request.Request(f"{server}/v1/completions", body, headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
    spans = receiver.wait_for(before + 1, "llm_request", SPAN_TIMEOUT_S)
    served = only(spans, agent.get_span_context().trace_id)
    assert served.parent_span_id == agent.get_span_context().span_id.to_bytes(8, "big")


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One loop for the module: AsyncLLM's output handler task dies with the first loop."""
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


@pytest.fixture(scope="module")
def async_engine(
    tmp_path_factory: pytest.TempPathFactory, receiver: Receiver, loop: asyncio.AbstractEventLoop
) -> Iterator[Any]:
    """An ``AsyncLLM`` exporting its own spans to ``receiver`` (about 15 s to start: it
    always runs its engine core in a spawned process)."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "100"  # read when vLLM makes its exporter
    args = AsyncEngineArgs(
        model=str(tiny_model(tmp_path_factory)),
        otlp_traces_endpoint=receiver.endpoint,
        **ENGINE_ARGS,
    )
    engine = AsyncLLM.from_engine_args(args)
    yield engine

    async def shutdown() -> None:
        # Inside the loop vLLM closes its zmq sockets at once; from outside it only
        # schedules that, and the zmq context then hangs the interpreter at exit.
        engine.shutdown()
        await asyncio.sleep(0)

    loop.run_until_complete(shutdown())


@pytest.fixture
def recorder() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def stream(engine: Any, request_id: str, stop_after: int | None = None) -> list[Any]:
    outputs: list[Any] = []
    agen = engine.generate(PROMPTS[1], sampling(), request_id=request_id)
    async for out in agen:
        outputs.append(out)
        if stop_after is not None and len(outputs) >= stop_after:
            await agen.aclose()
            break
    return outputs


def test_async_generate_is_one_gpu_span_that_parents_vllms_own(
    async_engine: Any, loop: asyncio.AbstractEventLoop, recorder: Any, receiver: Receiver
) -> None:
    provider, exporter = recorder
    before = len(receiver.wait_for(0, "llm_request", 0))
    instrument_async_llm(async_engine, tracer_provider=provider)
    instrument_async_llm(async_engine, tracer_provider=provider)  # idempotent
    try:
        outputs = loop.run_until_complete(stream(async_engine, "async-1"))
    finally:
        uninstrument(async_engine)
    assert len(outputs) > 1 and outputs[-1].finished  # really streamed
    call, children = split(exporter.get_finished_spans())
    attrs = call.attributes
    assert attrs[A.KIND] == A.GPU
    assert attrs[A.GEN_AI_USAGE_OUTPUT_TOKENS] == MAX_TOKENS  # cumulative outputs, counted once
    assert attrs[A.GEN_AI_USAGE_INPUT_TOKENS] == len(outputs[-1].prompt_token_ids)
    # The engine core runs in another process: its monotonic clock is the machine's.
    check_request(call, children, outputs[-1])
    # vLLM's own span for the request nests under the call span and agrees on the phases.
    arrived = receiver.wait_for(before + 1, "llm_request", SPAN_TIMEOUT_S)
    served = only(arrived, call.context.trace_id)
    assert served.parent_span_id == call.context.span_id.to_bytes(8, "big")
    prefill = next(s for s in children if s.name == "vllm.prefill")
    prefill_s = (prefill.end_time - prefill.start_time) / 1e9
    assert abs(attr(served, A.GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL) - prefill_s) < 1e-5
    assert attr(served, A.GEN_AI_USAGE_COMPLETION_TOKENS) == MAX_TOKENS


def test_async_stream_closed_early_still_ends_its_span(
    async_engine: Any, loop: asyncio.AbstractEventLoop, recorder: Any
) -> None:
    provider, exporter = recorder
    instrument_async_llm(async_engine, tracer_provider=provider)
    try:
        outputs = loop.run_until_complete(stream(async_engine, "async-2", stop_after=1))
    finally:
        uninstrument(async_engine)
    assert len(outputs) == 1 and not outputs[0].finished
    call, _ = split(exporter.get_finished_spans())
    assert call.status.is_ok and call.attributes[A.GEN_AI_USAGE_OUTPUT_TOKENS] >= 1
