"""The vLLM integration's parts that need no vLLM: ``traceparent`` on real HTTP requests
to a real local server, the monotonic -> wall-clock phase arithmetic, and the promise that
the wrapper never breaks the host app.  These run in the plain suite.

The engines below are stand-ins with vLLM's method shapes, used only where a real engine
cannot be made to misbehave on purpose; everything about a real engine is in
test_vllm.py / test_vllm_server.py.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation._vllm_spans import TokenTally, request_phases
from tracelens_instrumentation.vllm import (
    instrument_async_llm,
    instrument_http_client,
    instrument_llm,
    traceparent_headers,
    uninstrument,
)

NS = 1_000_000_000


class _Echo(BaseHTTPRequestHandler):
    """Answers every GET with the request's headers as JSON (lower-cased names)."""

    def do_GET(self) -> None:
        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def recorder() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def expected_traceparent(span: Any) -> str:
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def test_traceparent_headers_name_the_current_span(recorder: Any) -> None:
    provider, _ = recorder
    assert "traceparent" not in traceparent_headers()
    with provider.get_tracer("t").start_as_current_span("agent") as span:
        assert traceparent_headers()["traceparent"] == expected_traceparent(span)


def test_httpx_client_sends_the_current_span(echo_url: str, recorder: Any) -> None:
    httpx = pytest.importorskip("httpx")
    provider, _ = recorder
    with httpx.Client() as client:
        instrument_http_client(client)
        instrument_http_client(client)  # idempotent
        assert len(client.event_hooks["request"]) == 1
        assert "traceparent" not in client.get(echo_url).json()
        with provider.get_tracer("t").start_as_current_span("agent") as span:
            seen = client.get(echo_url).json()
    assert seen["traceparent"] == expected_traceparent(span)


def test_async_httpx_client_sends_each_tasks_span(echo_url: str, recorder: Any) -> None:
    httpx = pytest.importorskip("httpx")
    tracer = recorder[0].get_tracer("t")

    async def call(client: Any, name: str) -> tuple[str, str]:
        with tracer.start_as_current_span(name) as span:
            await asyncio.sleep(0)
            seen = (await client.get(echo_url)).json()
            return seen["traceparent"], expected_traceparent(span)

    async def main() -> list[tuple[str, str]]:
        async with instrument_http_client(httpx.AsyncClient()) as client:
            return list(await asyncio.gather(*(call(client, f"s{i}") for i in range(4))))

    for seen, expected in asyncio.run(main()):
        assert seen == expected


def test_unknown_client_is_refused_with_advice() -> None:
    with pytest.raises(TypeError, match="traceparent_headers"):
        instrument_http_client(object())


@st.composite
def timestamps(draw: Any) -> tuple[float, float, float, float]:
    start = draw(st.floats(min_value=1.0, max_value=1e6))
    gaps = draw(st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=3, max_size=3))
    queued = start
    scheduled = queued + gaps[0]
    first = scheduled + gaps[1]
    return queued, scheduled, first, first + gaps[2]


@given(marks=timestamps(), offset=st.integers(min_value=0, max_value=2 * 10**18))
def test_phases_are_contiguous_and_keep_vllms_durations(marks: Any, offset: int) -> None:
    queued, scheduled, first, last = marks
    metrics = SimpleNamespace(
        queued_ts=queued, scheduled_ts=scheduled, first_token_ts=first, last_token_ts=last
    )
    phases = request_phases(metrics, offset)
    names = [p.name for p in phases]
    # A decode shorter than a nanosecond rounds to nothing and is left out.
    decoded = round(last * NS) > round(first * NS)
    expected = ["vllm.queue", "vllm.prefill"] + (["vllm.decode"] if decoded else [])
    assert names == expected
    assert [p.kind for p in phases] == [A.WAIT, A.GPU, A.GPU][: len(phases)]
    for a, b in itertools.pairwise(phases):
        assert a.end_ns == b.start_ns
    assert abs(phases[0].start_ns - (round(queued * NS) + offset)) <= 1
    for phase, (a, b) in zip(phases, itertools.pairwise(marks), strict=False):
        assert abs((phase.end_ns - phase.start_ns) - (b - a) * NS) <= 2


def test_unrecorded_events_give_no_phase() -> None:
    # vLLM leaves 0.0 where an event never happened (e.g. a request aborted in the queue).
    metrics = SimpleNamespace(queued_ts=5.0, scheduled_ts=0.0, first_token_ts=0.0)
    assert request_phases(metrics, 0) == []


def test_streamed_tokens_are_counted_once_cumulative_or_delta() -> None:
    def out(n: int) -> Any:
        seq = SimpleNamespace(index=0, token_ids=list(range(n)))
        return SimpleNamespace(request_id="r", prompt_token_ids=[1, 2, 3], outputs=[seq])

    cumulative, delta = TokenTally(), TokenTally(delta=True)
    for n in (1, 2, 3):
        cumulative.add(out(n))
        delta.add(out(1))
    assert (cumulative.input_tokens, cumulative.output_tokens) == (3, 3)
    assert (delta.input_tokens, delta.output_tokens) == (3, 3)


class StandInLLM:
    """vLLM's ``LLM`` method shapes, returning whatever the test asks for."""

    def __init__(self, result: Any = None, error: Exception | None = None) -> None:
        self.result, self.error = result, error
        self.model_config = SimpleNamespace(served_model_name="stand-in", model="/m")

    def generate(self, prompts: Any, *args: Any, **kwargs: Any) -> Any:
        if self.error is not None:
            raise self.error
        return self.result

    def chat(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self.generate(messages)


@pytest.mark.parametrize("result", [None, "text", [object(), 3], [SimpleNamespace(metrics=1)]])
def test_odd_results_are_returned_untouched(result: Any, recorder: Any) -> None:
    provider, exporter = recorder
    llm = instrument_llm(StandInLLM(result), tracer_provider=provider)
    assert llm.generate(["p"]) is result
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})[A.KIND] == A.GPU and span.end_time is not None


def test_engine_errors_propagate_and_mark_the_span(recorder: Any) -> None:
    provider, exporter = recorder
    error = RuntimeError("engine died")
    llm = instrument_llm(StandInLLM(error=error), tracer_provider=provider)
    with pytest.raises(RuntimeError) as raised:
        llm.chat([{"role": "user", "content": "x"}])
    assert raised.value is error
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})[A.ERROR_TYPE] == "RuntimeError"
    assert (span.attributes or {})[A.GEN_AI_OPERATION_NAME] == "chat"


def test_instrumenting_twice_wraps_once_and_uninstrument_restores(recorder: Any) -> None:
    provider, exporter = recorder
    llm = StandInLLM([])
    instrument_llm(instrument_llm(llm, tracer_provider=provider), tracer_provider=provider)
    llm.generate(["p"])
    assert len(exporter.get_finished_spans()) == 1
    uninstrument(llm)
    assert llm.generate.__func__ is StandInLLM.generate  # type: ignore[attr-defined]


class StandInAsyncLLM:
    def __init__(self, fail_after: int | None = None) -> None:
        self.fail_after = fail_after
        self.closed = False
        self.model_config = SimpleNamespace(served_model_name="stand-in")

    async def generate(self, prompt: Any, sampling_params: Any, request_id: str) -> Any:
        try:
            for n in (1, 2, 3):
                if self.fail_after is not None and n > self.fail_after:
                    raise ValueError("bad request")
                seq = SimpleNamespace(index=0, token_ids=list(range(n)))
                yield SimpleNamespace(request_id=request_id, prompt_token_ids=[7], outputs=[seq])
        finally:
            self.closed = True


async def consume(agen: AsyncIterator[Any], limit: int | None = None) -> list[Any]:
    seen: list[Any] = []
    async for out in agen:
        seen.append(out)
        if limit is not None and len(seen) == limit:
            await agen.aclose()  # type: ignore[attr-defined]
            break
    return seen


@pytest.mark.parametrize(("fail_after", "limit"), [(None, None), (None, 1), (1, None)])
def test_async_stream_ends_its_span_however_it_ends(
    fail_after: int | None, limit: int | None, recorder: Any
) -> None:
    provider, exporter = recorder
    engine = instrument_async_llm(StandInAsyncLLM(fail_after), tracer_provider=provider)
    agen = engine.generate("p", None, request_id="r")
    if fail_after is None:
        seen = asyncio.run(consume(agen, limit))
        assert len(seen) == (limit or 3)
    else:
        with pytest.raises(ValueError, match="bad request"):
            asyncio.run(consume(agen))
    assert engine.closed  # vLLM's own generator was closed (it aborts the request there)
    (span,) = exporter.get_finished_spans()
    attrs = span.attributes or {}
    assert attrs[A.GEN_AI_USAGE_INPUT_TOKENS] == 1
    assert attrs[A.GEN_AI_USAGE_OUTPUT_TOKENS] == (limit or fail_after or 3)
    failed = span.status.status_code is StatusCode.ERROR
    assert failed == (fail_after is not None)
