"""A real in-process ``vllm.LLM`` on a tiny random-weight model, instrumented, recorded
with the real OpenTelemetry SDK (``AsyncLLM`` is in test_vllm_server.py: it exports
vLLM's own spans too).

Run through ``scripts/test-vllm.sh`` (it builds the venv and the model); the plain suite
has no vLLM and skips this module.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# vLLM and huggingface_hub read these at import time or engine start.
for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_NO_USAGE_STATS": "1",
}.items():
    os.environ.setdefault(_key, _value)

vllm = pytest.importorskip("vllm")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from tracelens_instrumentation import attributes as A  # noqa: E402
from tracelens_instrumentation.vllm import (  # noqa: E402
    instrument_llm,
    uninstrument,
)

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[1]
ENGINE_ARGS: dict[str, Any] = {
    "dtype": "float32",
    "enforce_eager": True,
    "max_model_len": 512,
    "disable_log_stats": False,
}
PROMPTS = ["hello world", "the quick brown fox jumps", "why is my agent slow?"]
MAX_TOKENS = 8
NS = 1_000_000_000


def tiny_model(factory: pytest.TempPathFactory) -> Path:
    """The model from scripts/test-vllm.sh, or one built now (about 10 s)."""
    given = os.environ.get("TRACELENS_VLLM_MODEL")
    if given and (Path(given) / "config.json").is_file():
        return Path(given)
    out = factory.mktemp("tiny-llama") / "model"
    script = ROOT / "scripts" / "make_tiny_model.py"
    subprocess.run([sys.executable, str(script), str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_model(tmp_path_factory)


@pytest.fixture(scope="module")
def llm(model_dir: Path) -> Iterator[Any]:
    engine = vllm.LLM(model=str(model_dir), **ENGINE_ARGS)
    yield engine
    engine.llm_engine.engine_core.shutdown()


@pytest.fixture
def recorder() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def sampling() -> Any:
    return vllm.SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True, temperature=0.0)


def split(spans: tuple[ReadableSpan, ...]) -> tuple[Any, list[Any]]:
    calls = [s for s in spans if s.attributes and A.GEN_AI_OPERATION_NAME in s.attributes]
    assert len(calls) == 1, [s.name for s in spans]
    call = calls[0]
    children = [s for s in spans if s is not call and s.context.trace_id == call.context.trace_id]
    return call, children


def check_request(call: Any, children: list[Any], output: Any) -> None:
    """The children of one request mirror vLLM's own timings, inside the call span."""
    mine = {
        s.name: s
        for s in children
        if s.attributes and s.attributes[A.GEN_AI_REQUEST_ID] == output.request_id
    }
    assert set(mine) == {"vllm.queue", "vllm.prefill", "vllm.decode"}
    queue, prefill, decode = mine["vllm.queue"], mine["vllm.prefill"], mine["vllm.decode"]
    assert [s.attributes[A.KIND] for s in (queue, prefill, decode)] == [A.WAIT, A.GPU, A.GPU]
    for span in (queue, prefill, decode):
        assert span.parent is not None and span.parent.span_id == call.context.span_id
        assert call.start_time <= span.start_time <= span.end_time <= call.end_time
    m = output.metrics
    # Durations equal vLLM's own (so nothing was clamped) and the phases are contiguous.
    for span, (a, b) in (
        (queue, (m.queued_ts, m.scheduled_ts)),
        (prefill, (m.scheduled_ts, m.first_token_ts)),
        (decode, (m.first_token_ts, m.last_token_ts)),
    ):
        assert abs((span.end_time - span.start_time) - (b - a) * NS) < 2_000
    assert queue.end_time == prefill.start_time and prefill.end_time == decode.start_time
    # The monotonic -> wall conversion agrees with vLLM's wall-clock arrival time: the
    # request is queued after it arrives, within the call.
    assert 0 <= queue.start_time - m.arrival_time * NS < call.end_time - call.start_time


def test_generate_is_a_gpu_span_with_queue_prefill_decode(llm: Any, recorder: Any) -> None:
    provider, exporter = recorder
    instrument_llm(llm, tracer_provider=provider)
    instrument_llm(llm, tracer_provider=provider)  # idempotent: still one span per call
    try:
        outputs = llm.generate(PROMPTS, sampling(), use_tqdm=False)
    finally:
        uninstrument(llm)
    call, children = split(exporter.get_finished_spans())
    attrs = call.attributes or {}
    assert attrs[A.KIND] == A.GPU
    assert attrs[A.GEN_AI_OPERATION_NAME] == "text_completion"
    assert attrs[A.GEN_AI_REQUEST_MODEL] == llm.model_config.served_model_name
    tokenizer = llm.get_tokenizer()
    assert attrs[A.GEN_AI_USAGE_INPUT_TOKENS] == sum(len(tokenizer.encode(p)) for p in PROMPTS)
    assert attrs[A.GEN_AI_USAGE_OUTPUT_TOKENS] == MAX_TOKENS * len(PROMPTS)
    assert len(children) == 3 * len(PROMPTS)
    for output in outputs:
        check_request(call, children, output)


def test_chat_nests_under_the_current_span(llm: Any, recorder: Any) -> None:
    provider, exporter = recorder
    instrument_llm(llm, tracer_provider=provider)
    tracer = provider.get_tracer("agent")
    try:
        with tracer.start_as_current_span("agent.step") as agent:
            outputs = llm.chat([{"role": "user", "content": "hi"}], sampling(), use_tqdm=False)
    finally:
        uninstrument(llm)
    spans = [s for s in exporter.get_finished_spans() if s.name != "agent.step"]
    call, children = split(tuple(spans))
    assert call.parent is not None and call.parent.span_id == agent.get_span_context().span_id
    assert (call.attributes or {})[A.GEN_AI_OPERATION_NAME] == "chat"
    assert (call.attributes or {})[A.GEN_AI_USAGE_OUTPUT_TOKENS] == MAX_TOKENS
    check_request(call, children, outputs[0])


def test_uninstrumented_engine_records_nothing(llm: Any, recorder: Any) -> None:
    provider, exporter = recorder
    instrument_llm(llm, tracer_provider=provider)
    uninstrument(llm)
    llm.generate(PROMPTS[:1], sampling(), use_tqdm=False)
    assert exporter.get_finished_spans() == ()
