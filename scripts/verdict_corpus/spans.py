"""Builders of the OTel cases: span trees in ms, semantic-convention spans, the SDK writer.

The ``otel`` cases are traces as other instrumentations emit them, written with the
OpenTelemetry SDK directly (a private ``TracerProvider``, explicit ``start_time`` / ``end_time``
from a fixed clock, ids from a seeded ``random``), so their files are byte-for-byte stable.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

MS = 1_000_000
BASE_NS = 1_764_590_400 * 1_000_000_000  # 2025-12-01T12:00:00Z: the OTel cases' clock
API = "https://api.example.com"
WORKFLOW = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_workflow"}


@dataclass
class Node:
    name: str
    start: float  # ms from the trace's start
    dur: float
    kind: str = "internal"
    attrs: dict[str, Any] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    error: str | None = None


Trace = tuple[float, Node]  # (start offset in seconds, root span)


def seq(items: list[Node | float], t0: float = 1.0) -> tuple[list[Node], float]:
    """Lay hops out one after another from ``t0``; a float is a gap (parent work) in ms."""
    t = t0
    out: list[Node] = []
    for item in items:
        if isinstance(item, (int, float)):
            t += item
            continue
        item.start = t
        t += item.dur + 0.3
        out.append(item)
    return out, t


def root(name: str, items: list[Node | float], kind: str = "server", **attrs: Any) -> Node:
    children, end = seq(items)
    return Node(name, 0.0, end + 1.0, kind, attrs, children)


def write_otel(path: Path, service: str, traces: list[Trace], seed: int) -> None:
    """Export ``traces`` (start offset in seconds, root) through the real SDK."""
    from opentelemetry import trace as otel
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from tracelens_instrumentation.jsonl import OTLPJsonLinesExporter

    random.seed(seed)  # the SDK's id generator draws from `random`: stable ids
    provider = TracerProvider(
        resource=Resource.create({"service.name": service, "service.instance.id": service})
    )
    exporter = OTLPJsonLinesExporter(path)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("verdict-corpus", "1.0")
    kinds = {
        "internal": otel.SpanKind.INTERNAL,
        "server": otel.SpanKind.SERVER,
        "client": otel.SpanKind.CLIENT,
    }

    def emit(node: Node, base: int, ctx: Any) -> None:
        start = base + int(node.start * MS)
        span = tracer.start_span(
            node.name, context=ctx, kind=kinds[node.kind], attributes=node.attrs,
            start_time=start,
        )  # fmt: skip
        inner = otel.set_span_in_context(span)
        for child in node.children:
            emit(child, start, inner)
        if node.error:
            span.set_status(otel.Status(otel.StatusCode.ERROR, node.error))
        span.end(end_time=start + int(node.dur * MS))

    for offset_s, top in traces:
        emit(top, BASE_NS + int(offset_s * 1e9), None)
    provider.shutdown()


# semantic-convention builders


def chat(dur: float, output: str | None = None, model: str = "gpt-4o-mini", tin: int = 420,
         tout: int = 40) -> Node:  # fmt: skip
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": tin,
        "gen_ai.usage.output_tokens": tout,
    }
    if output is not None:
        attrs["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": output}]}]
        )
    return Node(f"chat {model}", 0, dur, "client", attrs)


def tool(name: str, dur: float, args: dict[str, Any] | None, result: Any = None,
         **extra: Any) -> Node:  # fmt: skip
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if args is not None:
        attrs["gen_ai.tool.call.arguments"] = json.dumps(args)
    if result is not None:
        attrs["gen_ai.tool.call.result"] = result if isinstance(result, str) else json.dumps(result)
    attrs.update(extra)
    return Node(f"execute_tool {name}", 0, dur, "internal", attrs)


def http(
    method: str,
    name: str,
    url: str,
    dur: float,
    status: int = 200,
    extra: dict[str, Any] | None = None,
) -> Node:
    attrs: dict[str, Any] = {
        "http.request.method": method,
        "url.full": url,
        "server.address": urlparse(url).hostname,
        "http.response.status_code": status,
        **(extra or {}),
    }
    node = Node(name, 0, dur, "client", attrs)
    if status >= 500:
        node.error = f"HTTP {status}"
        node.attrs["error.type"] = str(status)
    return node


def sql(name: str, text: str, dur: float, **extra: Any) -> Node:
    attrs = {
        "db.system.name": "postgresql",
        "db.namespace": "shop",
        "db.query.text": text,
        "server.address": "db.internal",
        **extra,
    }
    return Node(name, 0, dur, "client", attrs)


def server(name: str, items: list[Node | float], method: str = "GET") -> Node:
    """A service's own endpoint (an HTTP SERVER span) over its hops."""
    return root(name, items, **{"http.request.method": method})


def workflow(items: list[Node | float]) -> Node:
    """A deterministic support workflow (an agent span, no model in between) over its hops."""
    return root("support_workflow", items, kind="internal", **WORKFLOW)


def invoke(items: list[Node | float], agent: str = "assistant") -> Node:
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
    return root(f"invoke_agent {agent}", items, kind="internal", **attrs)


def jitter(rng: random.Random, ms: float) -> float:
    return round(ms * rng.uniform(0.85, 1.15), 3)


def paged(name: str, urls: list[str], rng: random.Random) -> list[Node | float]:
    """One GET span per page URL, one after another."""
    return [http("GET", name, u, jitter(rng, 20)) for u in urls]


def write_case(name: str, build: Callable[[random.Random], Iterable[Trace]], path: Path) -> None:
    """Build the case's traces from its own seeded generator and export them to ``path``."""
    rng = random.Random(name)
    traces = list(build(rng))  # all drawn before the SDK seeds `random`
    write_otel(path, f"verdict-{name}", traces, seed=len(name))
