"""The demo's model: a simulated local inference server, or the tiny real vLLM engine.

The simulated server is an HTTP endpoint shaped like an OpenAI-compatible one that spends
``PREFILL_MS_PER_TOKEN`` per prompt token and ``DECODE_MS_PER_TOKEN`` per generated token, the
two phases that decide a real server's latency, and labels every answer ``"simulated": true``.
It exists so the demo runs anywhere in seconds; nothing it returns means anything.

With ``tracelens[vllm]`` installed and ``TRACELENS_VLLM_MODEL`` naming a model directory (see
``scripts/make_tiny_model.py``), a real in-process ``AsyncLLM`` answers instead, instrumented by
``tracelens_instrumentation.vllm`` (queue/prefill/decode child spans from vLLM's own timings).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import math
import os
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from opentelemetry import propagate

from tracelens.demo.http import BadRequest, JsonServer, Request, request_json
from tracelens.demo.tools import unit

SIMULATED_MODEL: Final = "tracelens-demo-sim"
CHARS_PER_TOKEN: Final = 4
MAX_TOKENS_LIMIT: Final = 4096
PREFILL_MS_PER_TOKEN: Final = 0.15  # the simulated server's cost per prompt token
DECODE_MS_PER_TOKEN: Final = 3.0  # and per generated token (both times its speed)
_WORDS: Final = (
    "the", "orders", "job", "failed", "because", "schema", "changed", "retry", "after",
    "migration", "logs", "show", "timeout", "payments", "latency", "check", "index", "plan",
)  # fmt: skip


def count_tokens(text: str) -> int:
    """A tokenizer stand-in: about four characters a token, as for English with BPE."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def prompt_text(messages: list[dict[str, str]]) -> str:
    return "\n".join(f"<|{m.get('role', 'user')}|>{m.get('content', '')}" for m in messages)


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    output_tokens: int
    model: str
    simulated: bool
    provider: str


class Model(Protocol):
    name: str
    simulated: bool
    provider: str

    async def complete(self, messages: list[dict[str, str]], max_tokens: int) -> Completion: ...

    async def close(self) -> None: ...


@dataclass
class SimulatedModelServer:
    """``POST /v1/chat/completions``: sleeps the modelled prefill and decode time, then answers."""

    seed: int = 0
    speed: float = 1.0  # scales both costs
    server: JsonServer = field(init=False)

    def __post_init__(self) -> None:
        routes = {
            ("POST", "/v1/chat/completions"): self.chat,
            ("GET", "/health"): self.health,
        }
        self.server = JsonServer(routes, name="simulated model server")

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        return await self.server.start(host, port)

    async def health(self, request: Request) -> Any:
        return {"status": "ok", "simulated": True}

    def timing_ms(self, prompt_tokens: int, output_tokens: int) -> tuple[float, float]:
        """(prefill, decode) milliseconds for a request of this shape."""
        return (
            prompt_tokens * PREFILL_MS_PER_TOKEN * self.speed,
            output_tokens * DECODE_MS_PER_TOKEN * self.speed,
        )

    async def chat(self, request: Request) -> Any:
        messages, max_tokens = _chat_request(request.json())
        prompt = prompt_text(messages)
        prompt_tokens = count_tokens(prompt)
        low = max(1, max_tokens // 2)
        output_tokens = low + int((max_tokens - low + 1) * unit(self.seed, "out", prompt))
        output_tokens = min(output_tokens, max_tokens)
        prefill_ms, decode_ms = self.timing_ms(prompt_tokens, output_tokens)
        await asyncio.sleep(prefill_ms / 1000.0)
        await asyncio.sleep(decode_ms / 1000.0)
        words = [
            _WORDS[int(unit(self.seed, prompt, i) * len(_WORDS))] for i in range(output_tokens)
        ]
        return {
            "object": "chat.completion",
            "model": SIMULATED_MODEL,
            "simulated": True,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": " ".join(words)}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": output_tokens},
            "timing_ms": {"prefill": round(prefill_ms, 3), "decode": round(decode_ms, 3)},
        }


def _chat_request(body: Any) -> tuple[list[dict[str, str]], int]:
    if not isinstance(body, dict):
        raise BadRequest("body: expected a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("body.messages: expected a non-empty list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str):
            raise BadRequest(f"body.messages[{i}]: expected an object with a string 'content'")
    max_tokens = body.get("max_tokens", 64)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise BadRequest("body.max_tokens: expected an integer")
    if not 1 <= max_tokens <= MAX_TOKENS_LIMIT:
        raise BadRequest(f"body.max_tokens: expected 1..{MAX_TOKENS_LIMIT}, got {max_tokens}")
    return messages, max_tokens


@dataclass
class SimulatedModel:
    """The client of ``SimulatedModelServer``; passes the caller's ``traceparent`` on."""

    url: str
    name: str = SIMULATED_MODEL
    simulated: bool = True
    provider: str = "tracelens-demo-simulator"

    async def complete(self, messages: list[dict[str, str]], max_tokens: int) -> Completion:
        headers: dict[str, str] = {}
        propagate.inject(headers)
        body = {"model": self.name, "messages": messages, "max_tokens": max_tokens}
        answer = await request_json(
            "POST", f"{self.url}/v1/chat/completions", body=body, headers=headers
        )
        usage = answer["usage"]
        return Completion(
            text=answer["choices"][0]["message"]["content"],
            prompt_tokens=int(usage["prompt_tokens"]),
            output_tokens=int(usage["completion_tokens"]),
            model=str(answer["model"]),
            simulated=bool(answer.get("simulated", True)),
            provider=self.provider,
        )

    async def close(self) -> None:
        return None


VLLM_MODEL_ENV: Final = "TRACELENS_VLLM_MODEL"


def vllm_model_dir() -> tuple[str | None, str]:
    """(model directory, None) when the real engine can run; else (None, why not)."""
    path = os.environ.get(VLLM_MODEL_ENV, "").strip()
    if not path:
        return None, f"{VLLM_MODEL_ENV} is not set"
    if not os.path.isfile(os.path.join(path, "config.json")):
        return None, f"{VLLM_MODEL_ENV}={path} has no config.json"
    if importlib.util.find_spec("vllm") is None:
        return None, f"{VLLM_MODEL_ENV} is set but vllm is not installed (tracelens[vllm])"
    return path, ""


@dataclass
class VllmModel:
    """A real in-process ``AsyncLLM`` (CPU or GPU, as vLLM is built), instrumented."""

    engine: Any
    name: str
    simulated: bool = False
    provider: str = "vllm"
    _ids: int = 0

    @classmethod
    def create(cls, model_dir: str) -> VllmModel:
        """Starts the engine (seconds to a minute).

        Call it before tracing is configured: vLLM traces its own start-up (model loading,
        worker init) with whatever tracer provider is installed, and those half-minute
        "traces" would swamp the agent's.  The call spans and their queue/prefill/decode
        children come from ``instrument_async_llm``, so vLLM's own exporter is not needed.
        """
        for key, value in {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_NO_USAGE_STATS": "1",
        }.items():
            os.environ.setdefault(key, value)
        from tracelens_instrumentation.vllm import instrument_async_llm
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        args: dict[str, Any] = {
            "model": model_dir,
            "dtype": "float32",
            "enforce_eager": True,
            "disable_log_stats": False,  # fills RequestOutput.metrics: the phase spans
        }
        engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**args))
        return cls(instrument_async_llm(engine), os.path.basename(model_dir.rstrip("/")))

    async def complete(self, messages: list[dict[str, str]], max_tokens: int) -> Completion:
        from vllm import SamplingParams

        self._ids += 1
        params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        ids = list(self.engine.get_tokenizer().encode(prompt_text(messages)))
        budget = max(1, int(self.engine.model_config.max_model_len) - max_tokens)
        ids = ids[-budget:]  # a tiny model's context is short: keep the prompt's end
        last: Any = None
        async for out in self.engine.generate(
            {"prompt_token_ids": ids}, params, request_id=f"demo-{self._ids}"
        ):
            last = out
        if last is None:
            raise RuntimeError("vLLM returned no output")
        return Completion(
            text=last.outputs[0].text,
            prompt_tokens=len(last.prompt_token_ids or ()),
            output_tokens=len(last.outputs[0].token_ids),
            model=self.name,
            simulated=False,
            provider=self.provider,
        )

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self.engine.shutdown()
        await asyncio.sleep(0)  # lets vLLM close its sockets inside the loop
