"""W3C ``traceparent`` on HTTP calls to a vLLM OpenAI-compatible server.

A vLLM server started with ``--otlp-traces-endpoint`` opens its ``llm_request`` span as a
child of the ``traceparent`` it receives, so the only thing the agent side must do is
send that header; the analyzer later splits the server span into wait + gpu.  Neither
httpx nor openai is imported: clients are recognised by their shape.
"""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

from opentelemetry import propagate
from opentelemetry.context import Context

C = TypeVar("C")
_MARK = "__tracelens_traceparent__"


def traceparent_headers(context: Context | None = None) -> dict[str, str]:
    """The propagation headers (``traceparent``, ``tracestate``, baggage) of ``context``.

    Empty when there is no recording span, so callers can always merge the result into
    their headers: ``client.post(url, headers={**headers, **traceparent_headers()})``.
    """
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    return carrier


def _inject_sync(request: Any) -> None:
    propagate.inject(request.headers)


async def _inject_async(request: Any) -> None:
    propagate.inject(request.headers)


setattr(_inject_sync, _MARK, True)
setattr(_inject_async, _MARK, True)


def _is_httpx_like(obj: Any) -> bool:
    return all(hasattr(obj, name) for name in ("event_hooks", "send", "build_request"))


def _httpx_of(client: Any) -> Any:
    """The httpx-style client that actually sends ``client``'s requests.

    Duck-typed rather than imported: openai 3.x sends through ``httpx2`` (an httpx fork
    with the same ``event_hooks``), older openai through httpx itself.
    """
    for candidate in (client, getattr(client, "_client", None)):
        if candidate is not None and _is_httpx_like(candidate):
            return candidate
    raise TypeError(
        f"instrument_http_client: {type(client).__name__} is neither an httpx-style client "
        "nor an openai client; send traceparent_headers() with each request instead"
    )


def instrument_http_client(client: C) -> C:
    """Add a request hook that puts the current trace context on every request.

    Works for ``httpx.Client`` / ``AsyncClient`` (and httpx2's), ``openai.OpenAI`` and
    ``openai.AsyncOpenAI``; idempotent.  The hook runs in the caller's task or thread at
    send time, so each request carries the span that is current when it is made.
    """
    target = _httpx_of(client)
    hooks = {k: list(v) for k, v in target.event_hooks.items()}
    request_hooks = hooks.setdefault("request", [])
    if not any(getattr(h, _MARK, False) for h in request_hooks):
        is_async = inspect.iscoroutinefunction(target.send)
        request_hooks.append(_inject_async if is_async else _inject_sync)
        target.event_hooks = hooks
    return client
