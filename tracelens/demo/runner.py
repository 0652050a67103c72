"""``run_demo``: start the tool and model servers, export with the real OTLP exporter, run.

The servers run on their own event loop in a background thread, as separate services would:
the agent's CPU-bound steps hold up the agent's loop, not the servers' clocks.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor

from tracelens.demo.agent import Agent, Stats, make_tasks
from tracelens.demo.model import (
    DECODE_MS_PER_TOKEN,
    PREFILL_MS_PER_TOKEN,
    Model,
    SimulatedModel,
    SimulatedModelServer,
    VllmModel,
    vllm_model_dir,
)
from tracelens.demo.retrieval import Corpus
from tracelens.demo.tools import ToolServer

SERVICE_NAME = "demo-agent"
DEFAULT_ENDPOINT = "http://127.0.0.1:4318"


@dataclass
class DemoOptions:
    requests: int = 36
    concurrency: int = 6
    seed: int = 0
    endpoint: str | None = DEFAULT_ENDPOINT  # OTLP/HTTP collector; None: no network export
    file: str | None = None  # also (or only) append OTLP JSON Lines here
    model_slots: int = 2
    speed: float = 1.0  # scales every simulated delay (tests run faster)
    use_vllm: bool = True  # when vLLM and TRACELENS_VLLM_MODEL are there


@dataclass
class DemoSummary:
    """What the demo did: the agent's counts (its first 20 errors) and where the spans went."""

    stats: Stats
    spans: int
    traces: int
    wall_s: float
    model: str
    simulated: bool
    endpoint: str | None
    file: str | None
    flushed: bool
    tools_url: str
    model_url: str | None
    traceparents_seen_by_tools: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The counts at the top level, beside the rest (``--summary-json``)."""
        out = asdict(self)
        return {**out.pop("stats"), **out}


class ServerThread:
    """The tool server and (unless vLLM answers) the simulated model server, on one loop."""

    def __init__(self, seed: int, speed: float, simulate_model: bool) -> None:
        self.tools = ToolServer(seed=seed, speed=speed)
        self.model = SimulatedModelServer(seed=seed, speed=speed) if simulate_model else None
        self.loop = asyncio.new_event_loop()
        self.tools_url = ""
        self.model_url: str | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="demo-servers", daemon=True)

    @property
    def native_id(self) -> int | None:
        """The servers' thread's kernel id (once started)."""
        return self._thread.native_id

    def __enter__(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the demo servers did not start within 30 s")
        if self._error is not None:
            raise RuntimeError(f"the demo servers did not start: {self._error}")
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            await self.tools.server.close()
            if self.model is not None:
                await self.model.server.close()

        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            port = self.loop.run_until_complete(self.tools.start())
            self.tools_url = f"http://127.0.0.1:{port}"
            if self.model is not None:
                mport = self.loop.run_until_complete(self.model.start())
                self.model_url = f"http://127.0.0.1:{mport}"
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.close()


class _SpanCounter(SpanProcessor):
    """Counts spans that ended in this process (and their traces), for the summary."""

    def __init__(self) -> None:
        self.spans = 0
        self.traces: set[int] = set()
        self._lock = threading.Lock()

    def on_end(self, span: Any) -> None:
        with self._lock:
            self.spans += 1
            self.traces.add(span.context.trace_id)


_counter: list[_SpanCounter] = []


def _configure(options: DemoOptions) -> _SpanCounter:
    from opentelemetry import trace as otel_trace
    from tracelens_instrumentation import configure

    configure(
        service_name=SERVICE_NAME,
        endpoint=options.endpoint,
        protocol="http/protobuf",
        file=options.file,
    )
    if not _counter:
        _counter.append(_SpanCounter())
        provider: Any = otel_trace.get_tracer_provider()
        if hasattr(provider, "add_span_processor"):
            provider.add_span_processor(_counter[0])
    return _counter[0]


Echo = Callable[[str], None]
# Called with "start" just before the agent's first request and "end" just after its last,
# while the servers still run: lets a measurement (tests/test_sizing_measured.py) bracket the
# agent's run and tell the servers' thread (``ServerThread.native_id``) from the agent's.
Probe = Callable[[str, "ServerThread"], None]


@dataclass
class _Run:
    model: str
    simulated: bool
    stats: Stats
    wall_s: float
    spans: int
    traces: int


def run_demo(options: DemoOptions, echo: Echo = print, probe: Probe | None = None) -> DemoSummary:
    """Runs the agent on ``options.requests`` questions and exports its spans."""
    from tracelens_instrumentation import flush

    model_dir, why = vllm_model_dir() if options.use_vllm else (None, "--no-vllm")
    corpus = Corpus(seed=options.seed)
    with ServerThread(options.seed, options.speed, simulate_model=model_dir is None) as servers:
        echo(f"tool server on {servers.tools_url} (weather, search_docs, fetch_schema, ...)")
        run = asyncio.run(_main(options, servers, corpus, model_dir, why, echo, probe))
        seen = list(servers.tools.traceparents)
    flushed = flush(30.0)
    return DemoSummary(
        stats=replace(run.stats, errors=run.stats.errors[:20]),
        spans=run.spans,
        traces=run.traces,
        wall_s=round(run.wall_s, 3),
        model=run.model,
        simulated=run.simulated,
        endpoint=options.endpoint,
        file=options.file,
        flushed=flushed,
        tools_url=servers.tools_url,
        model_url=servers.model_url,
        traceparents_seen_by_tools=seen,
    )


async def _main(
    options: DemoOptions,
    servers: ServerThread,
    corpus: Corpus,
    model_dir: str | None,
    why: str,
    echo: Echo,
    probe: Probe | None = None,
) -> _Run:
    model = _model(servers, model_dir, why, echo)
    counter = _configure(options)  # after vLLM's start-up: see VllmModel.create
    spans0, traces0 = counter.spans, set(counter.traces)
    agent = Agent(servers.tools_url, model, corpus, options.model_slots)
    tasks = make_tasks(options.requests, options.seed)
    if probe is not None:
        probe("start", servers)
    t0 = time.perf_counter()
    try:
        stats = await agent.run(tasks, options.concurrency)
    finally:
        wall = time.perf_counter() - t0
        if probe is not None:
            probe("end", servers)
        await model.close()
    return _Run(
        model.name,
        model.simulated,
        stats,
        wall,
        counter.spans - spans0,
        len(counter.traces - traces0),
    )


def _model(servers: ServerThread, model_dir: str | None, why: str, echo: Echo) -> Model:
    if model_dir is not None:
        echo(f"model: real vLLM engine on {model_dir} (starting it takes a while)")
        t0 = time.perf_counter()
        model = VllmModel.create(model_dir)
        echo(f"model: vLLM engine started in {time.perf_counter() - t0:.1f} s")
        return model
    assert servers.model is not None and servers.model_url is not None
    sim = servers.model
    echo(
        f"model: SIMULATED local inference server on {servers.model_url} "
        f"({PREFILL_MS_PER_TOKEN * sim.speed:g} ms/token prefill, "
        f"{DECODE_MS_PER_TOKEN * sim.speed:g} ms/token "
        f"decode); no real engine: {why}"
    )
    return SimulatedModel(servers.model_url)
