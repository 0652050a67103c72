"""The per-token latency fit against a real vLLM CPU engine (issue 13's acceptance).

A small random-weight Llama (4 layers, hidden 512: large enough that a prompt token costs a
measurable time) is served by an in-process ``vllm.LLM`` instrumented with tracelens; ≥ 30
requests with input lengths spread over 12x and four output lengths are each one traced agent
request.  The fit reads only the client-side call spans (duration, token counts, queue); the
truth is vLLM's own per-request timings (``RequestOutput.metrics``).

Run through ``scripts/test-vllm.sh``; the plain suite has no vLLM and skips this module.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

for _key, _value in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_NO_USAGE_STATS": "1",
}.items():
    os.environ.setdefault(_key, _value)

vllm = pytest.importorskip("vllm")

from latency_support import table_of  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from tracelens_instrumentation.vllm import instrument_llm, uninstrument  # noqa: E402

from tracelens.analysis.core import analyze_traces  # noqa: E402
from tracelens.analysis.tokens import calls, fit_tokens, mdape, token_fits  # noqa: E402
from tracelens.analysis.whatif import WhatIf, project  # noqa: E402

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[1]
INPUT_LENGTHS = (40, 80, 160, 320, 480)  # 12x
OUTPUT_LENGTHS = (2, 6, 10, 16)
REPEATS = 2  # 5 x 4 x 2 = 40 requests
SEED = 13


def small_model(out: Path) -> Path:
    """The tiny model's tokenizer with a bigger (still random) Llama: a prompt token must cost
    enough to be measured against the per-step overhead."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_tiny_model as mtm
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = mtm.build_tokenizer()
    torch.manual_seed(mtm.SEED)
    config = LlamaConfig(
        hidden_size=512,
        num_attention_heads=8,
        num_key_value_heads=8,
        intermediate_size=1024,
        num_hidden_layers=4,
        max_position_embeddings=1024,
        vocab_size=len(tok),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    tok.save_pretrained(out)
    LlamaForCausalLM(config).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    model = small_model(tmp_path_factory.mktemp("small-llama"))
    engine = vllm.LLM(
        model=str(model),
        dtype="float32",
        enforce_eager=True,
        max_model_len=1024,
        disable_log_stats=False,
    )
    yield engine
    engine.llm_engine.engine_core.shutdown()


def run_requests(llm: Any) -> tuple[Any, list[dict[str, float]]]:
    """Each request one trace: an ``agent.answer`` span around one instrumented generate()."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    rng = random.Random(SEED)
    plan = [(li, lo) for li in INPUT_LENGTHS for lo in OUTPUT_LENGTHS] * REPEATS
    rng.shuffle(plan)
    for li, lo in plan[:4]:  # warm-up, untraced
        ids = [rng.randrange(10, 380) for _ in range(li)]
        params = vllm.SamplingParams(max_tokens=lo, ignore_eos=True, temperature=0.0)
        llm.generate([{"prompt_token_ids": ids}], params, use_tqdm=False)
    instrument_llm(llm, tracer_provider=provider)
    truth = []
    try:
        for li, lo in plan:
            ids = [rng.randrange(10, 380) for _ in range(li)]
            params = vllm.SamplingParams(max_tokens=lo, ignore_eos=True, temperature=0.0)
            with tracer.start_as_current_span("agent.answer") as root:
                out = llm.generate([{"prompt_token_ids": ids}], params, use_tqdm=False)[0]
            m = out.metrics
            truth.append(
                {
                    "trace_id": f"{root.get_span_context().trace_id:032x}",
                    "l_in": float(len(out.prompt_token_ids)),
                    "l_out": float(len(out.outputs[0].token_ids)),
                    "prefill_s": m.first_token_ts - m.scheduled_ts,
                    "decode_s": m.last_token_ts - m.first_token_ts,
                    "queued_s": m.scheduled_ts - m.queued_ts,
                }
            )
    finally:
        uninstrument(llm)
    return analyze_traces(table_of(exporter.get_finished_spans())), truth


@pytest.mark.smoke
def test_token_fit_predicts_held_out_calls_and_agrees_with_vllm(llm: Any) -> None:
    ta, truth = run_requests(llm)
    table = calls(ta)
    assert table.height == len(truth) >= 30
    assert not table["engine_timings"].any()  # the client-side view only
    l_in = table["l_in"].to_numpy()
    assert l_in.max() / l_in.min() >= 10
    assert len(set(table["l_out"].to_list())) >= 3
    # Fit on half (every other request in trace order), predict the other half.
    by_trace = {t["trace_id"]: t for t in truth}
    order = np.argsort(table["trace_id"].to_numpy())
    fit_half, test_half = order[::2], order[1::2]
    t = table["model_s"].to_numpy()
    l_out = table["l_out"].to_numpy()
    coef, status = fit_tokens(l_in[fit_half], l_out[fit_half], t[fit_half])
    assert status == "ok"
    err = mdape(coef.predict(l_in[test_half], l_out[test_half]), t[test_half])
    print(f"held-out MdAPE {err:.1%}; fit {coef}")
    assert err <= 0.15

    # vLLM's own per-token costs on the same requests. A prompt token costs its prefill and also
    # the attention every decode step of the call spends on it, so the engine's prefill slope
    # alone is not what T_prefill measures (on this model the whole-call slope ran 3-22% above
    # it over 8 runs). The truth is the same model, T = a + L_in·T_prefill + L_out·T_decode,
    # fitted by ordinary least squares to vLLM's engine time for each request (scheduled to last
    # token), against the robust fit on all the client-side call spans.
    tr = [by_trace[tid] for tid in table["trace_id"].to_list()]
    v_in = np.array([x["l_in"] for x in tr])
    v_out = np.array([x["l_out"] for x in tr])
    v_time = np.array([x["prefill_s"] + x["decode_s"] for x in tr])
    design = np.column_stack([np.ones(len(tr)), v_in, v_out])
    _, v_prefill, v_decode = np.linalg.lstsq(design, v_time, rcond=None)[0]
    whole, _ = fit_tokens(l_in, l_out, t)
    print(
        f"prefill ms/token: fit {whole.prefill * 1e3:.4f} vLLM {v_prefill * 1e3:.4f}; "
        f"decode ms/token: fit {whole.decode * 1e3:.4f} vLLM {v_decode * 1e3:.4f}"
    )
    # 8 runs here: both within 2.7% (the fit on half the calls: 0.81-1.15x, hence all of them).
    assert abs(whole.prefill - v_prefill) <= 0.1 * v_prefill
    assert abs(whole.decode - v_decode) <= 0.1 * v_decode

    # The stream what-if (from the fit on all calls) against the measured time to first token:
    # trace start to vLLM's first token.
    fits = token_fits(ta)
    p = project(ta, WhatIf("stream"), fits=fits)
    measured = []
    trace_no = {tid: k for k, tid in enumerate(ta.traces["trace_id"].to_list())}
    starts = ta.traces["start_ns"].to_numpy()
    spans = ta.spans
    first_token = dict(
        zip(
            spans.filter(spans["name"] == "vllm.prefill")["trace_id"].to_list(),
            spans.filter(spans["name"] == "vllm.prefill")["end_ns"].to_list(),
            strict=True,
        )
    )
    projected = []
    for tid, k in trace_no.items():
        measured.append((first_token[tid] - starts[k]) / 1e9)
        projected.append(p.projected[k] / 1e9)
    stream_err = mdape(np.array(projected), np.array(measured))
    print(f"stream what-if vs measured TTFT: MdAPE {stream_err:.1%}")
    assert stream_err <= 0.20
