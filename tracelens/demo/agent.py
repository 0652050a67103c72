"""The demo agent: one traced ``handle_request`` per question, written the way agents often are.

Per request: ``plan`` (CPU) picks the tools; the tools are called one after another although
none needs another's answer (the classic missed ``asyncio.gather``); ``fetch_schema`` is called
a second time with the same arguments to re-check the columns (a cacheable repeat); ``retrieve``
searches an in-memory corpus (CPU); ``chat`` waits for a slot in the bounded model queue
(``model_queue``, wait) and calls the model (GPU), once more for some requests to refine the
draft; ``compose_answer`` (CPU) formats the result.

Every choice comes from ``make_tasks(n, seed)``, so a seed fixes the workload; what the servers
answer depends only on the arguments, so repeated calls return identical results.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlencode

from opentelemetry import propagate
from opentelemetry import trace as otel_trace
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation import trace

from tracelens.demo.http import request_json
from tracelens.demo.model import Completion, Model
from tracelens.demo.retrieval import Corpus, Doc, tokens

SIMULATED_ATTR: Final = "tracelens.demo.simulated"
REQUEST_ID_ATTR: Final = "tracelens.demo.request_id"
QUEUE_SLOTS_ATTR: Final = "tracelens.demo.queue_slots"
TABLES: Final = ("orders", "payments", "customers", "shipments")
SERVICES: Final = ("checkout-api", "billing-worker", "orders-etl", "search-indexer")
CITIES: Final = ("Lisbon", "Osaka", "Toronto", "Nairobi", "Berlin")
USERS: Final = ("ana", "kenji", "maya", "omar")
DRAFT_TOKENS: Final = 48
REFINE_TOKENS: Final = 24
REFINE_SHARE: Final = 0.4
PLAN_ROUNDS: Final = 15

_tracer = otel_trace.get_tracer("tracelens.demo")

_QUESTIONS: Final = (
    "Why did the nightly {table} job in {service} fail, and will the weather in {city} delay "
    "the on-site fix?",
    "Which {table} columns does {service} write, and when is {user} free on {day} to review "
    "the migration?",
    "Is the {service} latency regression on {table} related to the schema change, and what "
    "is on {user}'s calendar on {day}?",
    "Summarise yesterday's {service} errors touching {table} and check the weather in {city} "
    "for the datacenter visit.",
)
_TOOL_WORDS: Final = {
    "search_docs": ("why", "fail", "regression", "errors", "summarise", "related", "fix"),
    "fetch_schema": ("columns", "schema", "table", "migration", "write", "touching"),
    "fetch_logs": ("fail", "errors", "latency", "regression", "job", "yesterday"),
    "get_weather": ("weather", "delay", "visit", "site"),
    "calendar": ("free", "calendar", "review", "when"),
}
# Each tool's endpoint on the tool server (demo/tools.py), in planning order.
TOOL_PATHS: Final = {
    "search_docs": "/search_docs",
    "fetch_schema": "/fetch_schema",
    "fetch_logs": "/fetch_logs",
    "get_weather": "/weather",
    "calendar": "/calendar",
}
TOOL_ORDER: Final = tuple(TOOL_PATHS)


@dataclass(frozen=True)
class Task:
    """One request of the workload: the question and the values its tool calls use."""

    request_id: int
    question: str
    table: str
    service: str
    city: str
    user: str
    day: str
    since: str
    refine: bool


def make_tasks(n: int, seed: int = 0) -> list[Task]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        table, service = rng.choice(TABLES), rng.choice(SERVICES)
        city, user = rng.choice(CITIES), rng.choice(USERS)
        day = f"2026-03-{rng.randint(2, 27):02d}"
        since = f"{day}T{rng.randint(0, 23):02d}:00:00Z"
        template = _QUESTIONS[rng.randrange(len(_QUESTIONS))]
        question = template.format(table=table, service=service, city=city, user=user, day=day)
        out.append(
            Task(i, question, table, service, city, user, day, since, rng.random() < REFINE_SHARE)
        )
    return out


@dataclass(frozen=True)
class ToolCall:
    """What the planner asks a tool for; tools take it whole, as agent executors do, so the
    trace shows that each call's input came out of ``plan``."""

    tool: str
    arguments: tuple[tuple[str, str], ...]


@dataclass
class Stats:
    requests: int = 0
    failed: int = 0
    tool_calls: int = 0
    model_calls: int = 0
    queue_waits: int = 0
    errors: list[str] = field(default_factory=list)


class Agent:
    """The agent's traced steps; ``tools_url`` is the tool server, ``model`` the model."""

    def __init__(self, tools_url: str, model: Model, corpus: Corpus, model_slots: int) -> None:
        self.tools_url = tools_url
        self.model = model
        self.corpus = corpus
        self.model_slots = model_slots
        self.slots = asyncio.Semaphore(model_slots)
        self.stats = Stats()
        self.tools = {name: self._tool(name, path) for name, path in TOOL_PATHS.items()}

    async def run(self, tasks: list[Task], concurrency: int) -> Stats:
        """Serves ``tasks`` with ``concurrency`` requests in flight at a time."""
        queue: asyncio.Queue[Task] = asyncio.Queue()
        for task in tasks:
            queue.put_nowait(task)

        async def worker() -> None:
            while not queue.empty():
                task = queue.get_nowait()
                try:
                    await self.handle_request(task.request_id, task)
                except Exception as exc:
                    self.stats.failed += 1
                    self.stats.errors.append(f"request {task.request_id}: {exc}")

        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
        return self.stats

    @trace(name="handle_request")
    async def handle_request(self, request_id: int, task: Task) -> str:
        otel_trace.get_current_span().set_attribute(REQUEST_ID_ATTR, request_id)
        self.stats.requests += 1
        calls = self.plan(task)
        results = []
        for call in calls:  # one after another, though none needs another's answer
            results.append(await self.call_tool(call))
        # Re-check the columns before drafting the answer: the same call, the same answer.
        schema_call = next(c for c in calls if c.tool == "fetch_schema")
        results.append(await self.call_tool(schema_call))
        docs = self.retrieve(task.question, 5)
        draft = await self.chat(task.question, results, docs, DRAFT_TOKENS)
        if task.refine:
            draft = await self.chat(task.question, results, docs, REFINE_TOKENS, draft["content"])
        return self.compose_answer(task.question, draft["content"], [d.doc_id for d in docs])

    @trace(name="plan")
    def plan(self, task: Task) -> list[ToolCall]:
        """Scores every tool against the question, the way a rule-based router does (CPU)."""
        words = tokens(task.question)
        scores = dict.fromkeys(TOOL_ORDER, 0.0)
        for r in range(PLAN_ROUNDS):  # fuzzy matching of each word against each tool's cues
            for tool, cues in _TOOL_WORDS.items():
                for w in words:
                    for cue in cues:
                        scores[tool] += _similarity(w, cue) / (1 + r)
        picked = list(TOOL_ORDER[:3])  # docs, schema and logs, always
        picked.append(max(TOOL_ORDER[3:], key=lambda t: scores[t]))
        return [ToolCall(t, _tool_args(t, task)) for t in picked]

    async def call_tool(self, call: ToolCall) -> Any:
        return await self.tools[call.tool](call)

    def _tool(self, name: str, path: str) -> Callable[[ToolCall], Awaitable[Any]]:
        """One tool as a traced call (a span named after the tool) to its endpoint."""

        @trace(name=name)
        async def tool(call: ToolCall) -> Any:
            return await self._get(path, call)

        return tool

    async def _get(self, path: str, call: ToolCall) -> Any:
        url = f"{self.tools_url}{path}?{urlencode(call.arguments)}"
        span = otel_trace.get_current_span()
        span.set_attributes(
            {
                A.GEN_AI_OPERATION_NAME: "execute_tool",
                A.GEN_AI_TOOL_NAME: call.tool,
                A.HTTP_REQUEST_METHOD: "GET",
                A.URL_FULL: url,
            }
        )
        headers: dict[str, str] = {}
        propagate.inject(headers)  # traceparent: the tool server sees our trace
        self.stats.tool_calls += 1
        return await request_json("GET", url, headers=headers)

    @trace(name="retrieve")
    def retrieve(self, query: str, k: int) -> list[Any]:
        return self.corpus.search(query, k)

    async def wait_for_model(self) -> None:
        """Holds a request until one of the model's slots is free (released by ``chat``).

        A plain OpenTelemetry span, as queueing libraries emit them, rather than ``@trace``:
        waiting is not a call, and a traced call without arguments would carry an
        ``args_hash`` that makes every wait look like a repeat of the one before.
        """
        attributes: dict[str, str | int] = {A.KIND: A.WAIT, QUEUE_SLOTS_ATTR: self.model_slots}
        with _tracer.start_as_current_span("model_queue", attributes=attributes):
            if self.slots.locked():
                self.stats.queue_waits += 1
            await self.slots.acquire()

    @trace(name="chat", kind="gpu")
    async def chat(
        self,
        question: str,
        evidence: list[Any],
        docs: list[Doc],
        max_tokens: int,
        draft: str | None = None,
    ) -> dict[str, Any]:
        """One model call.  Its inputs are arguments, not a pre-built prompt, so the trace's
        fingerprints show which tool results, documents and draft it consumed."""
        messages = _messages(question, evidence, [d.title for d in docs], draft)
        await self.wait_for_model()
        try:
            done: Completion = await self.model.complete(messages, max_tokens)
        finally:
            self.slots.release()
        self.stats.model_calls += 1
        otel_trace.get_current_span().set_attributes(
            {
                A.GEN_AI_OPERATION_NAME: "chat",
                A.GEN_AI_REQUEST_MODEL: self.model.name,
                A.GEN_AI_PROVIDER_NAME: done.provider,
                A.GEN_AI_USAGE_INPUT_TOKENS: done.prompt_tokens,
                A.GEN_AI_USAGE_OUTPUT_TOKENS: done.output_tokens,
                SIMULATED_ATTR: done.simulated,
            }
        )
        return {"content": done.text, "output_tokens": done.output_tokens}

    @trace(name="compose_answer")
    def compose_answer(self, question: str, draft: str, doc_ids: list[int]) -> str:
        sources = ", ".join(f"doc {i}" for i in doc_ids)
        return f"Q: {question}\nA: {draft}\nSources: {sources}"


def _similarity(a: str, b: str) -> float:
    """Character-bigram overlap: cheap fuzzy matching, a few microseconds a pair."""
    if a == b:
        return 1.0
    ga = {a[i : i + 2] for i in range(len(a) - 1)}
    gb = {b[i : i + 2] for i in range(len(b) - 1)}
    return 2 * len(ga & gb) / (len(ga) + len(gb)) if ga and gb else 0.0


def _tool_args(tool: str, task: Task) -> tuple[tuple[str, str], ...]:
    args = {
        "search_docs": {"q": f"{task.service} {task.table} failure"},
        "fetch_schema": {"table": task.table},
        "fetch_logs": {"service": task.service, "since": task.since},
        "get_weather": {"city": task.city},
        "calendar": {"user": task.user, "day": task.day},
    }[tool]
    return tuple(args.items())


def _messages(
    question: str, evidence: list[Any], titles: list[str], draft: str | None
) -> list[dict[str, str]]:
    context = "\n".join(str(r) for r in evidence)
    messages = [
        {"role": "system", "content": "You are an on-call assistant. Be precise."},
        {
            "role": "user",
            "content": f"{question}\n\nTool results:\n{context}\n\n"
            f"Related runbooks: {'; '.join(titles)}",
        },
    ]
    if draft is not None:
        messages += [
            {"role": "assistant", "content": draft},
            {"role": "user", "content": "Make it shorter and list the next action."},
        ]
    return messages
