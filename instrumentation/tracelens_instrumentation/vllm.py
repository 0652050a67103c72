"""vLLM integration: ``gpu`` spans with queue/prefill/decode children for in-process
engines, and ``traceparent`` propagation to vLLM's OpenAI-compatible server.

In-process (``vllm.LLM``, ``AsyncLLM``)::

    llm = instrument_llm(LLM(model=..., disable_log_stats=False))
    llm.generate(prompts)   # span "text_completion <model>", kind gpu, with per request
                            # vllm.queue (wait), vllm.prefill (gpu), vllm.decode (gpu)

``disable_log_stats=False`` is what makes vLLM fill ``RequestOutput.metrics``; without it
the call span (with token counts) is still recorded, but not its children.  (vLLM 0.32's
own tracing, ``otlp_traces_endpoint=...``, also fails an assertion without it.)

Over HTTP, vLLM records its own ``llm_request`` span when started with
``--otlp-traces-endpoint`` (point it at ``tracelens collect``); it only needs the
caller's ``traceparent`` to join the agent's trace: ``instrument_http_client(client)``
for an httpx or openai client, or ``traceparent_headers()`` for anything else.

Importing this module does not import vLLM: it is an optional extra (``tracelens[vllm]``).
"""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from opentelemetry import trace

from tracelens_instrumentation._vllm_http import instrument_http_client, traceparent_headers
from tracelens_instrumentation._vllm_spans import (
    TokenTally,
    headers_given,
    is_delta,
    model_name,
    start_call,
    tracing_enabled,
)

__all__ = [
    "instrument_async_llm",
    "instrument_http_client",
    "instrument_llm",
    "traceparent_headers",
    "uninstrument",
]

log = logging.getLogger("tracelens_instrumentation.vllm")
E = TypeVar("E")
_WRAPPED = "__tracelens_wrapped__"
# LLM method -> gen_ai.operation.name (OpenTelemetry GenAI semantic conventions).
_SYNC_METHODS = {"generate": "text_completion", "chat": "chat"}
_TRACER_NAME = "tracelens_instrumentation.vllm"
# Set while a wrapped call runs, so a wrapped method calling another (chat -> generate in
# some vLLM versions) records one span, not two with double-counted tokens.
_IN_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("tracelens_vllm", default=False)


def _tracer(provider: trace.TracerProvider | None) -> trace.Tracer:
    return trace.get_tracer(_TRACER_NAME, tracer_provider=provider)


def instrument_llm(llm: E, tracer_provider: trace.TracerProvider | None = None) -> E:
    """Wrap ``llm.generate`` and ``llm.chat`` of one ``vllm.LLM`` instance; idempotent.

    The instance, not the class, is patched, so other engines in the process are left
    alone and ``uninstrument(llm)`` restores the original methods.  ``enqueue`` /
    ``wait_for_completion`` are not wrapped: their requests outlive any one call.
    """
    tracer = _tracer(tracer_provider)
    model = model_name(llm)
    for method, operation in _SYNC_METHODS.items():
        original = getattr(llm, method, None)
        if original is None or getattr(original, _WRAPPED, False):
            continue
        setattr(llm, method, _wrap_sync(original, tracer, operation, model))
    return llm


def _wrap_sync(
    original: Callable[..., Any], tracer: trace.Tracer, operation: str, model: str
) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = None if _IN_CALL.get() else start_call(tracer, operation, model)
        if call is None:
            return original(*args, **kwargs)
        _safely(call.attach)
        inside = _IN_CALL.set(True)
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            _IN_CALL.reset(inside)
            _safely(call.detach)
            call.fail(exc)
            raise
        _IN_CALL.reset(inside)
        _safely(call.detach)
        call.finish(result if isinstance(result, list) else [])
        return result

    setattr(wrapper, _WRAPPED, True)
    return wrapper


def instrument_async_llm(engine: E, tracer_provider: trace.TracerProvider | None = None) -> E:
    """Wrap ``engine.generate`` of one ``AsyncLLM`` (an async generator); idempotent.

    The span covers the whole stream, from the first ``__anext__`` to the last output
    (or to the consumer closing it early).  When the engine exports its own spans and the
    caller passed no ``trace_headers``, the call span's context is handed to vLLM so its
    ``llm_request`` span nests under this one.
    """
    original = getattr(engine, "generate", None)
    if original is not None and not getattr(original, _WRAPPED, False):
        wrapper = _wrap_async(original, _tracer(tracer_provider), model_name(engine), engine)
        engine.generate = wrapper  # type: ignore[attr-defined]
    return engine


def _wrap_async(
    original: Callable[..., AsyncIterator[Any]], tracer: trace.Tracer, model: str, engine: Any
) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        call = start_call(tracer, "text_completion", model)
        if call is None:
            async for out in original(*args, **kwargs):
                yield out
            return
        if not headers_given(kwargs) and tracing_enabled(engine):
            kwargs["trace_headers"] = _safely(call.trace_headers) or None
        params = kwargs.get("sampling_params", args[1] if len(args) > 1 else None)
        tally = TokenTally(delta=is_delta(params))
        last: Any = None
        stream = original(*args, **kwargs)
        try:
            async for out in stream:
                last = out
                _safely(tally.add, out)
                yield out
        except BaseException as exc:
            await _aclose(stream)
            if isinstance(exc, Exception):
                call.fail(exc, tally)
            else:  # closed early or cancelled: keep what the request did so far
                call.finish([last] if last is not None else [], tally)
            raise
        call.finish([last] if last is not None else [], tally)

    setattr(wrapper, _WRAPPED, True)
    return wrapper


async def _aclose(stream: AsyncIterator[Any]) -> None:
    """Close vLLM's generator now (it aborts the request) instead of at garbage collection."""
    try:
        await stream.aclose()  # type: ignore[attr-defined]
    except Exception:
        log.warning("tracelens: closing the vLLM stream failed", exc_info=True)


def uninstrument(engine: Any) -> None:
    """Undo ``instrument_llm`` / ``instrument_async_llm`` on this instance."""
    for method in (*_SYNC_METHODS, "generate"):
        if getattr(engine.__dict__.get(method), _WRAPPED, False):
            delattr(engine, method)


def _safely(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a bookkeeping step; a failure is logged and never reaches the host app."""
    try:
        return fn(*args)
    except Exception:
        log.warning("tracelens: vLLM instrumentation step failed", exc_info=True)
        return None
