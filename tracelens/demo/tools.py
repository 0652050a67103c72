"""The demo's tool server: five read-only HTTP APIs with realistic, reproducible latencies.

Each endpoint's answer depends only on its arguments and the seed, so the same call made twice
returns the same thing (what makes a repeat *cacheable*).  Its delay too: a base latency per
endpoint, jitter from a hash of the arguments, and one call in about fifteen hitting a slow
backend (three times slower), so traces have a tail without random numbers drawn at run time.

The server is deliberately not traced: it stands for third-party APIs the agent's team does not
own.  It records the ``traceparent`` headers it receives, so a test can check that the agent
really propagates its context over HTTP.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from tracelens.demo.http import JsonServer, Request

# endpoint -> base latency in ms (what a typical SaaS API answers in from a nearby region)
BASE_MS: Final = {
    "/weather": 45.0,
    "/search_docs": 85.0,
    "/fetch_schema": 55.0,
    "/fetch_logs": 95.0,
    "/calendar": 40.0,
}
SLOW_FACTOR: Final = 3.0
SLOW_ONE_IN: Final = 15

_CONDITIONS: Final = ("clear", "cloudy", "light rain", "showers", "windy", "fog")
_COLUMNS: Final = {
    "orders": ("id", "customer_id", "status", "total_cents", "created_at", "shipped_at"),
    "customers": ("id", "email", "country", "tier", "created_at"),
    "payments": ("id", "order_id", "provider", "amount_cents", "state", "settled_at"),
    "shipments": ("id", "order_id", "carrier", "eta", "delivered_at"),
}
_LEVELS: Final = ("INFO", "INFO", "INFO", "WARN", "ERROR")
_EVENTS: Final = ("standup", "incident review", "1:1", "planning", "customer call", "focus time")


def unit(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts`` (stable across processes, unlike ``hash``)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def delay_ms(seed: int, path: str, args: tuple[str, ...]) -> float:
    """How long ``path`` takes for these arguments: base, +-25% jitter, sometimes a slow hit."""
    base = BASE_MS[path]
    ms = base * (0.75 + 0.5 * unit(seed, path, *args))
    if unit(seed, "slow", path, *args) < 1.0 / SLOW_ONE_IN:
        ms *= SLOW_FACTOR
    return ms


@dataclass
class ToolServer:
    """The five tool endpoints on one ``JsonServer``; ``speed`` scales every delay."""

    seed: int = 0
    speed: float = 1.0
    traceparents: deque[str] = field(default_factory=lambda: deque(maxlen=10_000))
    server: JsonServer = field(init=False)

    def __post_init__(self) -> None:
        handlers = {
            "/weather": self.weather,
            "/search_docs": self.search_docs,
            "/fetch_schema": self.fetch_schema,
            "/fetch_logs": self.fetch_logs,
            "/calendar": self.calendar,
        }
        routes = {("GET", path): handler for path, handler in handlers.items()}
        routes[("GET", "/health")] = self.health
        self.server = JsonServer(routes, name="tool server")

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        return await self.server.start(host, port)

    async def _wait(self, request: Request, *args: str) -> None:
        tp = request.headers.get("traceparent")
        if tp:
            self.traceparents.append(tp)
        await asyncio.sleep(delay_ms(self.seed, request.path, args) * self.speed / 1000.0)

    async def health(self, request: Request) -> Any:
        return {"status": "ok"}

    async def weather(self, request: Request) -> Any:
        city = request.arg("city")
        await self._wait(request, city)
        u = unit(self.seed, "weather", city)
        return {
            "city": city,
            "condition": _CONDITIONS[int(u * len(_CONDITIONS))],
            "temp_c": round(-5 + 35 * unit(self.seed, "temp", city), 1),
        }

    async def search_docs(self, request: Request) -> Any:
        query = request.arg("q")
        await self._wait(request, query)
        n = 3 + int(3 * unit(self.seed, "hits", query))
        hits = []
        for i in range(n):
            page = int(1000 * unit(self.seed, "page", query, i))
            hits.append({"title": f"Runbook {page}: {query[:40]}", "url": f"/docs/{page}"})
        return {"query": query, "hits": hits}

    async def fetch_schema(self, request: Request) -> Any:
        table = request.arg("table")
        await self._wait(request, table)
        columns = _COLUMNS.get(table, ("id", "name", "created_at"))
        return {"table": table, "columns": [{"name": c, "type": _type(c)} for c in columns]}

    async def fetch_logs(self, request: Request) -> Any:
        service = request.arg("service")
        since = request.arg("since")
        await self._wait(request, service, since)
        lines = []
        for i in range(8):
            level = _LEVELS[int(unit(self.seed, "lvl", service, since, i) * len(_LEVELS))]
            lines.append(f"{since}+{i * 7}s {level} {service}: event {i}")
        return {"service": service, "since": since, "lines": lines}

    async def calendar(self, request: Request) -> Any:
        user = request.arg("user")
        day = request.arg("day")
        await self._wait(request, user, day)
        n = 1 + int(4 * unit(self.seed, "n", user, day))
        events = [
            {
                "at": f"{9 + i * 2:02d}:00",
                "title": _EVENTS[int(unit(self.seed, "e", user, day, i) * len(_EVENTS))],
            }
            for i in range(n)
        ]
        return {"user": user, "day": day, "events": events}


def _type(column: str) -> str:
    if column == "id" or column.endswith("_id") or column.endswith("_cents"):
        return "bigint"
    if column.endswith("_at") or column == "eta":
        return "timestamp"
    return "text"
