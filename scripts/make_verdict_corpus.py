"""Regenerate the labelled verdict corpus under ``fixtures/verdicts/`` (issue 12, item 6).

Every case is a small agent pattern run for real and traced by real instrumentation:

* ``source="decorator"``: agent code decorated with tracelens' own ``@trace`` and exported by
  ``configure(file=...)``.  Hops do real work: HTTP requests to a local server that takes a few
  milliseconds, SQLite queries, file writes, ``git`` in a temporary repository, CPU loops; they
  return real values and the agent passes real values on.  Each such case runs in its own
  process (``configure`` is once per process).
* ``source="otel"``: traces as other instrumentations emit them, written with the
  OpenTelemetry SDK directly (a private ``TracerProvider``, explicit ``start_time`` /
  ``end_time``) with semantic-convention attributes; exported by the same OTLP JSON Lines
  exporter.

The labels (``fixtures/verdicts/labels.json``) are written here, next to the code whose data
flow they describe, and are reasoned in ``docs/verdicts.md``.  They are never derived from what
tracelens reports.  Structure is deterministic (fixed seeds, fixed timestamps for the OTel
cases); the decorator cases carry real, measured timings.

    python scripts/make_verdict_corpus.py            # all cases (about a minute)
    python scripts/make_verdict_corpus.py CASE ...   # only these
    python scripts/make_verdict_corpus.py --labels   # only labels.json and docs/verdicts.md
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse
from urllib.request import urlopen

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "verdicts"
MS = 1_000_000
BASE_NS = 1_764_590_400 * 1_000_000_000  # 2025-12-01T12:00:00Z: the OTel cases' clock

Label = dict[str, Any]


# --- labels ---------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    pattern: list[str]
    source: str
    run: Callable[[], None]
    parallel: list[Label] = field(default_factory=list)
    cache: list[Label] = field(default_factory=list)
    saving_ms: Label | None = None
    expect_one_finding: bool = False

    def label(self) -> Label:
        doc: Label = {
            "case": self.name,
            "pattern": self.pattern,
            "source": self.source,
            "parallel": self.parallel,
            "cache": self.cache,
        }
        if self.saving_ms is not None:
            doc["saving_ms"] = self.saving_ms
        if self.expect_one_finding:
            doc["expect_one_finding"] = True
        return doc


def dep(parent: str, a: str, b: str | None, why: str, **extra: Any) -> Label:
    """``harmful=...``: running them together would do damage (state-changing, consumed...):
    no parallelizable finding at any confidence may cover the pair."""
    names = [a] if b is None else [a, b]
    return {"parent": parent, "names": names, "truth": "dependent", "why": why, **extra}


def ind(parent: str, a: str, b: str | None, why: str) -> Label:
    names = [a] if b is None else [a, b]
    return {"parent": parent, "names": names, "truth": "independent", "why": why}


def cache(name: str, truth: str, why: str, **extra: Any) -> Label:
    return {"name": name, "truth": truth, "why": why, **extra}


def nc(name: str, why: str, **extra: Any) -> Label:
    """``harmful=...``: a cache would do damage (state-changing, tenant-keyed, volatile,
    consumed): no cacheable finding at any confidence."""
    return cache(name, "not_cacheable", why, **extra)


ROOT_NC = "one call per trace, each trace a different request: nothing repeats"

CASES: dict[str, Case] = {}


def case(
    name: str,
    pattern: list[str],
    source: str,
    parallel: list[Label],
    cache_labels: list[Label],
    saving_ms: Label | None = None,
    expect_one_finding: bool = False,
) -> Callable[[Callable[[], None]], Callable[[], None]]:
    def register(run: Callable[[], None]) -> Callable[[], None]:
        CASES[name] = Case(
            name, pattern, source, run, parallel, cache_labels, saving_ms, expect_one_finding
        )
        return run

    return register


# --- real work for the decorator cases ------------------------------------------------------


class _Slow(BaseHTTPRequestHandler):
    """A local backend: ``GET /any?ms=N`` answers after N ms (the hop's network time)."""

    def do_GET(self) -> None:
        query = parse_qs(urlparse(self.path).query)
        time.sleep(int(query.get("ms", ["10"])[0]) / 1000)
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


_server: list[ThreadingHTTPServer] = []


def _port() -> int:
    if not _server:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        _server.append(server)
    return int(_server[0].server_address[1])


def net(ms: int) -> None:
    """A real HTTP round trip to the local backend that takes about ``ms`` milliseconds."""
    with urlopen(f"http://127.0.0.1:{_port()}/x?ms={ms}", timeout=5) as response:
        response.read()


async def anet(ms: int) -> None:
    """The same round trip over asyncio streams (what an async HTTP client awaits)."""
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", _port())
    writer.write(f"GET /x?ms={ms} HTTP/1.0\r\nHost: backend\r\n\r\n".encode())
    await writer.drain()
    await reader.read()  # HTTP/1.0: the server closes after the response
    writer.close()
    await writer.wait_closed()


def burn(ms: float, data: str = "") -> str:
    """Real CPU for about ``ms`` milliseconds (hashing ``data`` over and over)."""
    import hashlib

    digest = data.encode() or b"seed"
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        for _ in range(200):
            digest = hashlib.blake2b(digest).digest()
    return digest.hex()[:16]


# The decorator cases import tracelens lazily: the OTel cases and the parent process never
# configure it.
def _t() -> Any:
    from tracelens import trace

    return trace


# --- decorator cases ------------------------------------------------------------------------

CITIES = ["Oslo", "Lima", "Porto", "Hanoi", "Quito"]
USERS = ["u-48213", "u-51907", "u-60442", "u-73318", "u-80951"]
TOPICS = ["semiconductors", "rail strikes", "monsoon season", "chess olympiad", "bird flu"]


@case(
    "indep_fetch_instrumented",
    ["independent", "independent_instrumented"],
    "decorator",
    [
        ind(
            "handle_request", "fetch_weather", "fetch_calendar", "different inputs, no result used"
        ),
        ind("handle_request", "fetch_weather", "fetch_news", "different inputs, no result used"),
        ind("handle_request", "fetch_calendar", "fetch_news", "different inputs, no result used"),
        dep("handle_request", "fetch_weather", "compose_briefing", "compose takes the weather"),
        dep("handle_request", "fetch_calendar", "compose_briefing", "compose takes the events"),
        dep("handle_request", "fetch_news", "compose_briefing", "compose takes the headlines"),
    ],
    [
        nc("handle_request", ROOT_NC),
        nc("fetch_weather", "a different city in every trace"),
        nc("fetch_calendar", "a different user and day in every trace"),
        nc("fetch_news", "a different topic in every trace"),
        nc("compose_briefing", "different inputs in every trace"),
    ],
)
def indep_fetch_instrumented() -> None:
    """A morning-briefing handler fetches the weather for the request's city, the user's
    calendar for the request's day and the news for the request's topic, one after another, then
    composes the briefing from the three results.  Each fetch takes only fields of the incoming
    request; none takes another fetch's result, and all three are reads over HTTP, so running
    them together (asyncio.gather) cannot change what any of them returns.  compose_briefing
    takes all three results, so it depends on each.  Every argument is fingerprinted by @trace,
    so the independence is provable from the trace.
    """

    trace = _t()

    @trace(name="fetch_weather")
    def fetch_weather(city: str) -> dict[str, Any]:
        net(25)
        return {"city": city, "temp_c": 3 + len(city) * 2, "sky": "overcast"}

    @trace(name="fetch_calendar")
    def fetch_calendar(user: str, day: str) -> list[dict[str, str]]:
        net(30)
        return [{"at": "09:30", "what": f"standup {user[-3:]}"}, {"at": "14:00", "what": day}]

    @trace(name="fetch_news")
    def fetch_news(topic: str) -> list[str]:
        net(20)
        return [f"{topic}: update {i}" for i in range(3)]

    @trace(name="compose_briefing")
    def compose(weather: dict[str, Any], events: list[dict[str, str]], news: list[str]) -> str:
        burn(3)
        return f"{weather['sky']} {weather['temp_c']}C; {len(events)} events; {news[0]}"

    @trace(name="handle_request")
    def handle(req: dict[str, str]) -> str:
        w = fetch_weather(req["city"])
        e = fetch_calendar(req["user"], req["day"])
        n = fetch_news(req["topic"])
        return compose(w, e, n)

    for i in range(5):
        handle(
            {"city": CITIES[i], "user": USERS[i], "day": f"2026-12-0{i + 1}", "topic": TOPICS[i]}
        )


@case(
    "loop_over_items",
    ["independent", "n_plus_one", "loop"],
    "decorator",
    [
        ind(
            "sync_orders",
            "fetch_order",
            None,
            "each order id comes from the listing, not "
            "from the previous fetch_order; the fetches read different rows",
        ),
        dep(
            "sync_orders",
            "list_open_orders",
            "fetch_order",
            "fetch_order takes an id from list_open_orders' result",
        ),
        dep(
            "sync_orders",
            "list_open_orders",
            "summarize_orders",
            "summarizes the fetched orders, which need the listing",
        ),
        dep("sync_orders", "fetch_order", "summarize_orders", "takes the fetched orders"),
    ],
    [
        nc("sync_orders", ROOT_NC),
        nc("list_open_orders", "a different customer in every trace"),
        nc("fetch_order", "every order id is fetched once"),
        nc("summarize_orders", "different orders every time"),
    ],
)
def loop_over_items() -> None:
    """The classic N+1: list a customer's open orders (real ids, 5-digit ints), then fetch each
    order by id in a loop, then summarize.  Each fetch_order takes an id from the listing, not
    from the previous fetch, and reads a different row, so the loop's iterations are independent
    of each other (a batched or concurrent fetch gives the same orders).  Every fetch depends on
    list_open_orders (the id is in its result), and the summary depends on all of them.
    """

    trace = _t()
    rng = random.Random(2)

    @trace(name="list_open_orders")
    def list_open_orders(customer: str) -> list[int]:
        net(15)
        return sorted(rng.sample(range(10_000, 99_999), 4))

    @trace(name="fetch_order")
    def fetch_order(order_id: int) -> dict[str, Any]:
        net(20)
        return {"id": order_id, "total_cents": order_id % 977 * 13, "state": "open"}

    @trace(name="summarize_orders")
    def summarize(orders: list[dict[str, Any]]) -> str:
        burn(2)
        return f"{len(orders)} open, {sum(o['total_cents'] for o in orders) / 100:.2f} EUR"

    @trace(name="sync_orders")
    def sync(customer: str) -> str:
        ids = list_open_orders(customer)
        return summarize([fetch_order(i) for i in ids])

    for i in range(4):
        sync(f"cust-{7310 + i}")


@case(
    "parent_cpu_between_hops",
    ["independent", "parent_work_between"],
    "decorator",
    [
        ind(
            "price_order",
            "fetch_quote",
            "fetch_fx_rate",
            "the quote and the FX rate take "
            "different request fields; neither takes the other's result",
        ),
    ],
    [
        nc("price_order", ROOT_NC),
        nc("fetch_quote", "a different symbol in every trace"),
        nc("fetch_fx_rate", "a different currency in every trace"),
    ],
    saving_ms={
        "parent": "price_order",
        "names": ["fetch_quote", "fetch_fx_rate"],
        "min": 22,
        "max": 60,
        "why": "hops of ~40 ms each with ~40 ms of parent CPU (validating the quote) between: "
        "started together, the FX fetch overlaps the quote fetch, but the validation must "
        "follow the quote, so ~40 ms (one hop) can be had, not the ~80 ms a replay that "
        "drops the parent's work would claim",
    },
)
def parent_cpu_between_hops() -> None:
    """price_order fetches a quote (~40 ms of network), validates the quote's signature in its
    own code (~40 ms of real CPU, hashing), then fetches an FX rate (~40 ms).  The FX fetch
    takes only the request's currency, so it is independent of the quote.  The validation needs
    the quote, and it runs in the parent, not in a span.  The best real rewrite starts both
    fetches together, and validates when the quote arrives: 40 + 40 = ~80 ms instead of ~120 ms,
    a saving of ~40 ms (one hop), not the ~80 ms that a replay which drops the parent's own work
    between the hops would report.  The labelled range (22-60 ms) allows for timing noise on a
    loaded 2-core machine.
    """

    trace = _t()

    @trace(name="fetch_quote")
    def fetch_quote(symbol: str) -> dict[str, Any]:
        net(40)
        return {"symbol": symbol, "bid": 101.25, "ask": 101.75, "sig": symbol.lower() * 4}

    @trace(name="fetch_fx_rate")
    def fetch_fx_rate(currency: str) -> float:
        net(40)
        return 1.0 + len(currency) / 100

    @trace(name="price_order")
    def price_order(req: dict[str, Any]) -> float:
        quote = fetch_quote(req["symbol"])
        burn(40, quote["sig"])  # validate the quote's signature: parent CPU between the hops
        rate = fetch_fx_rate(req["currency"])
        return round(req["qty"] * quote["ask"] * rate, 2)

    symbols = ["ACME", "GLOBX", "INITECH", "UMBR", "HOOLI"]
    currencies = ["EUR", "JPY", "GBP", "CHF", "SEK"]
    for i in range(5):
        price_order({"symbol": symbols[i], "currency": currencies[i], "qty": 10 + i})


@case(
    "both_orders_instrumented",
    ["independent", "both_orders"],
    "decorator",
    [
        ind(
            "load_account_page",
            "fetch_profile",
            "fetch_settings",
            "different inputs; the code even runs them in either order depending on the request",
        ),
    ],
    [
        nc("load_account_page", ROOT_NC),
        nc("fetch_profile", "a different user in every trace"),
        nc("fetch_settings", "a different account in every trace"),
    ],
    expect_one_finding=True,
)
def both_orders_instrumented() -> None:
    """An account page loads the user's profile and the account's settings; which one is fetched
    first depends on the request (alternating in the six traces).  The two reads take different
    request fields and neither uses the other's result.  The same pair seen in both orders is
    one pattern, so a tool must report one finding for it, not one per order.
    """

    trace = _t()

    @trace(name="fetch_profile")
    def fetch_profile(user: str) -> dict[str, str]:
        net(25)
        return {"user": user, "display": user.upper()}

    @trace(name="fetch_settings")
    def fetch_settings(account: int) -> dict[str, Any]:
        net(25)
        return {"account": account, "theme": "dark", "locale": "en-GB"}

    @trace(name="load_account_page")
    def load(user: str, account: int, settings_first: bool) -> str:
        if settings_first:
            s = fetch_settings(account)
            p = fetch_profile(user)
        else:
            p = fetch_profile(user)
            s = fetch_settings(account)
        return f"{p['display']} {s['theme']}"

    for i in range(6):
        load(USERS[i % 5] + str(i), 880_100 + i, settings_first=i % 2 == 1)


@case(
    "small_int_id_chain",
    ["dependent", "small_int_id"],
    "decorator",
    [
        dep(
            "answer_order_question",
            "lookup_user",
            "get_orders",
            "get_orders takes the small integer user id lookup_user returned",
        ),
        dep("answer_order_question", "lookup_user", "render_reply", "transitively, via the orders"),
        dep("answer_order_question", "get_orders", "render_reply", "renders the orders"),
    ],
    [
        nc("answer_order_question", ROOT_NC),
        nc("lookup_user", "a different e-mail in every trace"),
        nc("get_orders", "a different user id in every trace"),
        nc("render_reply", "different orders every time"),
    ],
)
def small_int_id_chain() -> None:
    """lookup_user(email) returns a small integer id (3, 7, 9, 12); get_orders(user_id) takes
    exactly that integer; render_reply formats the orders.  A strict chain: get_orders cannot
    start before lookup_user returned.  This is the issue's first false positive: small ints
    that were not fingerprinted made "no fingerprint matched" look like independence.
    """

    trace = _t()
    users = {"ana@example.com": 7, "bo@example.com": 12, "cy@example.com": 3, "di@example.com": 9}

    @trace(name="lookup_user")
    def lookup_user(email: str) -> int:
        net(15)
        return users[email]

    @trace(name="get_orders")
    def get_orders(user_id: int) -> list[str]:
        net(20)
        return [f"#{user_id * 1000 + k}" for k in range(user_id % 4 + 1)]

    @trace(name="render_reply")
    def render_reply(orders: list[str]) -> str:
        burn(2)
        return "Your orders: " + ", ".join(orders)

    @trace(name="answer_order_question")
    def answer(email: str) -> str:
        return render_reply(get_orders(lookup_user(email)))

    for email in users:
        answer(email)


@case(
    "short_string_id_chain",
    ["dependent", "short_string_id"],
    "decorator",
    [
        dep(
            "quote_product",
            "resolve_sku",
            "get_price",
            "get_price takes the two-character SKU resolve_sku returned",
        ),
        dep("quote_product", "resolve_sku", "format_quote", "transitively, via the price"),
        dep("quote_product", "get_price", "format_quote", "formats the price"),
    ],
    [
        nc("quote_product", ROOT_NC),
        nc("resolve_sku", "a different product name in every trace"),
        nc("get_price", "a different SKU in every trace"),
        nc("format_quote", "different prices every time"),
    ],
)
def short_string_id_chain() -> None:
    """resolve_sku(product name) returns a two-character SKU ("A1", "B7"...), and get_price
    takes it.  A strict chain through a short string, which a minimum-length rule for
    fingerprints would miss.
    """

    trace = _t()
    skus = {"walnut desk": "A1", "oak shelf": "B7", "pine stool": "C3", "ash bench": "D9"}

    @trace(name="resolve_sku")
    def resolve_sku(product: str) -> str:
        net(15)
        return skus[product]

    @trace(name="get_price")
    def get_price(sku: str) -> float:
        net(20)
        return 40.0 + (ord(sku[0]) - 64) * 25 + int(sku[1])

    @trace(name="format_quote")
    def format_quote(price: float) -> str:
        burn(1)
        return f"{price:.2f} EUR incl. VAT"

    @trace(name="quote_product")
    def quote(product: str) -> str:
        return format_quote(get_price(resolve_sku(product)))

    for product in skus:
        quote(product)


@case(
    "llm_substring_to_tool",
    ["dependent", "llm_transformed_output", "llm_substring"],
    "decorator",
    [
        dep(
            "answer_question",
            "chat",
            "search_docs",
            "search_docs' query is a substring cut out of the first chat's output text",
        ),
        dep(
            "answer_question",
            "chat",
            None,
            "the second chat takes the search results found with the first chat's query",
        ),
    ],
    [
        nc("answer_question", ROOT_NC),
        nc("chat", "different prompts every time"),
        nc("search_docs", "a different query in every trace"),
    ],
)
def llm_substring_to_tool() -> None:
    """A model call (@trace(kind="gpu", name="chat")) answers "I need more context. I will
    search the docs for: retries configuration"; the agent cuts the text after "search the docs
    for:" and passes it to search_docs; a second chat takes the search results.  The tool's
    argument is a substring of the model's output, not equal to it, so an equality check on
    fingerprints misses the link.  Every pair here is dependent.
    """

    trace = _t()

    @trace(name="chat", kind="gpu")
    def chat(prompt: str) -> str:
        burn(8, prompt)
        if prompt.startswith("Question:"):
            topic = prompt.split(":", 1)[1].strip().rstrip("?").split(" about ")[-1]
            return f"I need more context. I will search the docs for: {topic} configuration\n"
        return "Answer: " + prompt.splitlines()[-1][:60]

    @trace(name="search_docs")
    def search_docs(query: str) -> list[str]:
        net(25)
        return [f"doc://{query.replace(' ', '-')}/{k}" for k in range(3)]

    @trace(name="answer_question")
    def answer(question: str) -> str:
        plan = chat(f"Question: {question}")
        query = plan.split("search the docs for:", 1)[1].strip()
        hits = search_docs(query)
        return chat("Context:\n" + "\n".join(hits))

    for q in ["How do I tune about retries?", "What is the default about timeouts?",
              "Where do I set about proxies?", "Can I change about log levels?"]:  # fmt: skip
        answer(q)


@case(
    "llm_json_field_to_tool",
    ["dependent", "llm_transformed_output", "llm_json_field"],
    "decorator",
    [
        dep(
            "run_agent_step",
            "chat",
            "get_weather",
            "get_weather's city is a field parsed out of the chat's JSON output",
        ),
    ],
    [
        nc("run_agent_step", ROOT_NC),
        nc("chat", "different prompts every time"),
        nc("get_weather", "a different city in every trace"),
    ],
)
def llm_json_field_to_tool() -> None:
    """The model returns JSON ({"tool": "get_weather", "arguments": {"city": "Oslo", "unit":
    "celsius"}}); the agent parses it and calls get_weather(city, unit) with its fields.  The
    tool's arguments are fields of the model's output, so the tool depends on the model call.
    """

    trace = _t()

    @trace(name="chat", kind="gpu")
    def chat(messages: list[dict[str, str]]) -> str:
        burn(8, messages[-1]["content"])
        city = messages[-1]["content"].rsplit(" in ", 1)[1].rstrip("?")
        return json.dumps({"tool": "get_weather", "arguments": {"city": city, "unit": "celsius"}})

    @trace(name="get_weather")
    def get_weather(city: str, unit: str) -> dict[str, Any]:
        net(25)
        return {"city": city, "unit": unit, "temp": len(city) * 3}

    @trace(name="run_agent_step")
    def step(question: str) -> dict[str, Any]:
        call = json.loads(chat([{"role": "user", "content": question}]))
        return get_weather(**call["arguments"])

    for city in CITIES[:4]:
        step(f"Should I take an umbrella in {city}?")


@case(
    "shared_resource_patch_then_tests",
    ["dependent", "shared_resource"],
    "decorator",
    [
        dep(
            "fix_bug",
            "read_source",
            "apply_patch",
            "the patch is computed from the source read_source returned",
        ),
        dep(
            "fix_bug",
            "apply_patch",
            "run_tests",
            "run_tests runs the files apply_patch "
            "changed: the data flows through the file system, not the arguments",
        ),
        dep(
            "fix_bug",
            "read_source",
            "run_tests",
            "transitively: run_tests must follow apply_patch, which needs read_source's content",
        ),
    ],
    [
        nc("fix_bug", ROOT_NC),
        nc("read_source", "a different repository every trace; also the file changes"),
        nc("apply_patch", "a write"),
        nc("run_tests", "its result depends on the files, which apply_patch changed"),
    ],
)
def shared_resource_patch_then_tests() -> None:
    """A coding agent reads calc.py from a fresh repository, computes a fix from its content,
    writes it with apply_patch(repo, path, old, new), then run_tests(repo) executes the patched
    file and returns pass/fail counts.  run_tests takes none of apply_patch's results (it
    returns True); the data flows through the file system.  Running the two together would test
    unpatched code, so they are dependent.  read_source precedes apply_patch (the patch is
    computed from its content) and so, transitively, run_tests.
    """

    trace = _t()

    @trace(name="read_source")
    def read_source(repo: str, path: str) -> str:
        return (Path(repo) / path).read_text()

    @trace(name="apply_patch")
    def apply_patch(repo: str, path: str, old: str, new: str) -> bool:
        file = Path(repo) / path
        file.write_text(file.read_text().replace(old, new))
        time.sleep(0.005)
        return True

    @trace(name="run_tests")
    def run_tests(repo: str) -> dict[str, int]:
        ns: dict[str, Any] = {}
        exec(compile((Path(repo) / "calc.py").read_text(), "calc.py", "exec"), ns)
        cases = [(2, 3, 5), (0, 0, 0), (-1, 1, 0)]
        passed = sum(ns["add"](a, b) == c for a, b, c in cases)
        time.sleep(0.02)
        return {"passed": passed, "failed": len(cases) - passed}

    @trace(name="fix_bug")
    def fix_bug(repo: str) -> dict[str, int]:
        src = read_source(repo, "calc.py")
        bad = next(line for line in src.splitlines() if "return" in line)
        apply_patch(repo, "calc.py", bad, "    return a + b")
        return run_tests(repo)

    for i in range(4):
        repo = tempfile.mkdtemp(prefix=f"verdict-repo{i}-")
        Path(repo, "calc.py").write_text(f"def add(a, b):\n    return a - b + {i}\n")
        fix_bug(repo)


def _git(repo: str, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", repo, *args], capture_output=True, text=True, check=True,
        env={**os.environ, "GIT_AUTHOR_NAME": "bot", "GIT_AUTHOR_EMAIL": "bot@example.com",
             "GIT_COMMITTER_NAME": "bot", "GIT_COMMITTER_EMAIL": "bot@example.com"},
    )  # fmt: skip
    return done.stdout.strip()


@case(
    "shell_chain_git",
    ["dependent", "shell_chain", "shared_resource"],
    "decorator",
    [
        dep(
            "ship_fix",
            "git_checkout",
            "git_apply",
            "git apply writes into the branch "
            "git_checkout created (same repository: state flows through the working tree)",
        ),
        dep("ship_fix", "git_checkout", "git_commit", "commits on the checked-out branch"),
        dep("ship_fix", "git_checkout", "git_push", "pushes the checked-out branch"),
        dep("ship_fix", "git_apply", "git_commit", "commits what git apply changed"),
        dep("ship_fix", "git_apply", "git_push", "pushes the commit of the applied change"),
        dep("ship_fix", "git_commit", "git_push", "pushes the commit git_commit made"),
    ],
    [
        nc("ship_fix", ROOT_NC),
        nc("git_checkout", "changes the working tree"),
        nc("git_apply", "changes the working tree"),
        nc("git_commit", "writes a commit"),
        nc("git_push", "writes to the remote"),
    ],
)
def shell_chain_git() -> None:
    """Real git in temporary repositories: git_checkout -b, git apply of a patch, git commit
    -am, git push to a local bare remote.  Each step changes the repository (working tree,
    index, refs) the next one operates on; none passes a value on except the repository path and
    branch name they share.  Every pair is dependent; none is cacheable (all are state-changing,
    even where the arguments repeat).
    """

    trace = _t()

    @trace(name="git_checkout")
    def git_checkout(repo: str, branch: str) -> str:
        return _git(repo, "checkout", "-q", "-b", branch) or branch

    @trace(name="git_apply")
    def git_apply(repo: str, patch: str) -> str:
        (Path(repo) / "fix.patch").write_text(patch)
        out = _git(repo, "apply", "fix.patch")
        (Path(repo) / "fix.patch").unlink()
        return out

    @trace(name="git_commit")
    def git_commit(repo: str, message: str) -> str:
        _git(repo, "commit", "-q", "-am", message)
        return _git(repo, "rev-parse", "HEAD")

    @trace(name="git_push")
    def git_push(repo: str, remote: str, branch: str) -> str:
        _git(repo, "push", "-q", remote, branch)
        return "ok"

    @trace(name="ship_fix")
    def ship(repo: str, issue: int) -> str:
        branch = f"fix-{issue}"
        git_checkout(repo, branch)
        patch = "--- a/README\n+++ b/README\n@@ -1 +1 @@\n-version 1\n+version " + str(issue) + "\n"
        git_apply(repo, patch)
        sha = git_commit(repo, f"Fix #{issue}")
        git_push(repo, "origin", branch)
        return sha

    base = tempfile.mkdtemp(prefix="verdict-git-")
    remote = os.path.join(base, "remote.git")
    subprocess.run(["git", "init", "-q", "--bare", remote], check=True)
    for i in range(3):
        repo = os.path.join(base, f"work{i}")
        subprocess.run(["git", "init", "-q", repo], check=True)
        Path(repo, "README").write_text("version 1\n")
        _git(repo, "add", "README")
        _git(repo, "commit", "-q", "-m", "init")
        _git(repo, "remote", "add", "origin", remote)
        ship(repo, 4100 + i)


@case(
    "cursor_pagination_instrumented",
    ["dependent", "pagination", "cursor_pagination"],
    "decorator",
    [
        dep(
            "triage_issues",
            "list_issues",
            None,
            "each call takes the cursor the previous call returned",
        ),
        dep("triage_issues", "list_issues", "label_batch", "labels the issues the pages returned"),
    ],
    [
        nc("triage_issues", ROOT_NC),
        nc("list_issues", "every page is fetched once (different cursor, different repo)"),
        nc("label_batch", "different issues every time"),
    ],
)
def cursor_pagination_instrumented() -> None:
    """list_issues(repo, cursor) returns a page and next_cursor (base64 text); the loop calls
    list_issues again with that cursor until it is None; label_batch takes all items.  Each page
    request needs the cursor from the previous response, so the loop is sequential.
    """

    import base64

    trace = _t()

    @trace(name="list_issues")
    def list_issues(repo: str, cursor: str | None) -> dict[str, Any]:
        net(15)
        start = int(base64.b64decode(cursor).decode().split(":")[1]) if cursor else 0
        items = [f"{repo}#{n}" for n in range(start, min(start + 25, 80))]
        nxt = start + 25
        return {"items": items, "next_cursor": base64.b64encode(f"c:{nxt}".encode()).decode()
                if nxt < 80 else None}  # fmt: skip

    @trace(name="label_batch")
    def label_batch(items: list[str]) -> int:
        burn(3)
        return len(items)

    @trace(name="triage_issues")
    def triage(repo: str) -> int:
        items: list[str] = []
        cursor: str | None = None
        while True:
            page = list_issues(repo, cursor)
            items += page["items"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        return label_batch(items)

    for r in ["acme/api", "acme/web", "acme/cli"]:
        triage(r)


@case(
    "polling_job_status_instrumented",
    ["polling", "dependent"],
    "decorator",
    [
        dep(
            "export_report",
            "submit_export",
            "get_job_status",
            "polls the job id submit_export returned",
        ),
        dep(
            "export_report",
            "get_job_status",
            None,
            "each poll happens after the previous one said the job is not done and the agent slept",
        ),
        dep(
            "export_report",
            "get_job_status",
            "download_export",
            "downloads only once a poll said done",
        ),
        dep("export_report", "submit_export", "download_export", "downloads the job submitted"),
    ],
    [
        nc("export_report", ROOT_NC),
        nc("submit_export", "starts a job (a write)"),
        cache(
            "get_job_status",
            "polling",
            "the same read of a changing job status with "
            "sleeps between, inside one trace: a cache would return 'running' forever",
        ),
        nc("download_export", "a different job every trace"),
    ],
)
def polling_job_status_instrumented() -> None:
    """submit_export starts a background job and returns its id; the agent calls
    get_job_status(job_id) and sleeps 25 ms in its own code until the status is "done" (the job
    finishes ~90 ms after submission), then download_export(job_id).  Every poll repeats the
    same read with the same argument, but the answer changes over time (queued, running, done):
    a cache would keep answering "queued" and the loop would never end, so this is polling, not
    cacheable.  The polls are sequential by nature (each one is made because the previous said
    "not done"), and the download is control-dependent on the last poll (it runs only once the
    status says done) even though its argument came from submit_export.
    """

    trace = _t()
    jobs: dict[str, float] = {}

    @trace(name="submit_export")
    def submit_export(spec: dict[str, str]) -> str:
        net(10)
        job = f"job-{zlib.crc32(spec['query'].encode()) % 10**6:06d}-{len(jobs)}"
        jobs[job] = time.monotonic() + 0.09
        return job

    @trace(name="get_job_status")
    def get_job_status(job_id: str) -> str:
        net(8)
        left = jobs[job_id] - time.monotonic()
        return "done" if left <= 0 else ("running" if left < 0.06 else "queued")

    @trace(name="download_export")
    def download_export(job_id: str) -> bytes:
        net(15)
        return job_id.encode() * 10

    @trace(name="export_report")
    def export_report(query: str) -> int:
        job = submit_export({"query": query, "format": "csv"})
        while get_job_status(job) != "done":
            time.sleep(0.025)
        return len(download_export(job))

    for q in ["weekly revenue", "churn by plan", "top errors"]:
        export_report(q)


@case(
    "cacheable_schema_lookup",
    ["cacheable"],
    "decorator",
    [
        dep(
            "answer_with_sql",
            "plan_query",
            "validate_query",
            "validates the SQL plan_query drafted",
        ),
        dep("answer_with_sql", "plan_query", "run_query", "runs the drafted SQL"),
        dep("answer_with_sql", "validate_query", "run_query", "runs only a validated query"),
        dep("plan_query", "fetch_schema", "draft_sql", "the SQL is drafted from the schema"),
        ind(
            "validate_query",
            "fetch_schema",
            "explain_query",
            "EXPLAIN takes the SQL, not the schema; the two results are compared afterwards. "
            "Re-checked (issue 25): the pair label is per name, so it must also hold for the "
            "transitive link: the SQL explain_query takes was drafted from the *first* "
            "fetch_schema (under plan_query), a different span that has ended before "
            "validate_query starts; the second fetch_schema feeds nothing explain_query takes. "
            "Independent stands. Caching that second fetch and starting it with EXPLAIN touch "
            "the same span, so they are alternatives, not additive savings",
        ),
    ],
    [
        nc("answer_with_sql", ROOT_NC),
        nc("plan_query", "different questions"),
        nc("validate_query", "different SQL"),
        nc("run_query", "different SQL every trace"),
        nc("draft_sql", "different questions"),
        nc("explain_query", "different SQL every trace"),
        cache(
            "fetch_schema",
            "cacheable",
            "the same table's schema, read twice per trace and "
            "in every trace seconds apart; the schema never changes and every recorded "
            "result is identical",
        ),
    ],
)
def cacheable_schema_lookup() -> None:
    """A text-to-SQL agent: plan_query fetches the schema of the events table and drafts SQL
    from it; validate_query fetches the same schema again and runs EXPLAIN on the SQL (a
    database round trip), then checks the plan against the schema; run_query runs it.
    fetch_schema("events") is called twice per trace and in every trace, with identical results
    (the table never changes): the one true cache candidate here.  Within validate_query,
    EXPLAIN takes the SQL, not the schema, so fetch_schema and explain_query are independent.
    The four questions give four different SQL texts, so nothing else repeats.
    """

    import sqlite3

    trace = _t()
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, kind TEXT, at TEXT, user_id INT)")
    db.executemany("INSERT INTO events VALUES (?, ?, ?, ?)",
                   [(i, ["click", "view", "buy"][i % 3], f"2026-11-{i % 28 + 1:02d}", i % 17)
                    for i in range(500)])  # fmt: skip

    @trace(name="fetch_schema")
    def fetch_schema(table: str) -> list[tuple[str, str]]:
        net(20)
        return [(r[1], r[2]) for r in db.execute(f"PRAGMA table_info({table})")]

    @trace(name="draft_sql")
    def draft_sql(question: str, schema: list[tuple[str, str]]) -> str:
        burn(4, question)
        kind = question.split()[-1].rstrip("?s")
        cols = ", ".join(c for c, _ in schema[:2])
        return f"SELECT {cols} FROM events WHERE kind = '{kind}'"

    @trace(name="explain_query")
    def explain_query(sql: str) -> list[str]:
        net(15)  # the database round trip
        return [str(r) for r in db.execute("EXPLAIN QUERY PLAN " + sql)]

    @trace(name="run_query")
    def run_query(sql: str) -> int:
        net(10)
        return len(db.execute(sql).fetchall())

    @trace(name="plan_query")
    def plan_query(question: str) -> str:
        return draft_sql(question, fetch_schema("events"))

    @trace(name="validate_query")
    def validate_query(sql: str) -> bool:
        schema = fetch_schema("events")
        plan = explain_query(sql)
        return bool(plan) and all(c in {n for n, _ in schema} for c in ("id", "kind"))

    @trace(name="answer_with_sql")
    def answer(question: str) -> int:
        sql = plan_query(question)
        validate_query(sql)
        return run_query(sql)

    for q in ["how many clicks", "how many views", "how many buys", "how many refunds"]:
        answer(q)


@case(
    "cacheable_tax_rate_sqlite",
    ["cacheable", "independent", "loop"],
    "decorator",
    [
        ind(
            "price_cart",
            "get_product",
            None,
            "different SKUs from the cart; no product lookup uses another's result",
        ),
        ind(
            "price_cart",
            "get_tax_rate",
            None,
            "the same static read repeated; no data flow between the calls",
        ),
        ind(
            "price_cart",
            "get_product",
            "get_tax_rate",
            "the region comes from the cart, not from the product",
        ),
    ],
    [
        nc("price_cart", ROOT_NC),
        nc("get_product", "every SKU once per trace and different carts"),
        cache(
            "get_tax_rate",
            "cacheable",
            "the same region's rate from a table that never "
            "changes, several times per trace and across traces; identical results",
        ),
    ],
)
def cacheable_tax_rate_sqlite() -> None:
    """Pricing a cart against a real SQLite database: for each SKU, get_product(sku) and
    get_tax_rate(region).  The region comes from the request and is the same ("EU") for every
    line and every trace; the tax table never changes, so get_tax_rate returns the identical
    rate every time: cacheable.  The product lookups read different SKUs and take nothing from
    each other or from the tax rate, so the loop and the pair are independent (reads of static
    tables).
    """

    import sqlite3

    trace = _t()
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE TABLE tax (region TEXT PRIMARY KEY, rate REAL)")
    db.executemany("INSERT INTO tax VALUES (?, ?)", [("EU", 0.21), ("UK", 0.2), ("US", 0.07)])
    db.execute("CREATE TABLE product (sku TEXT PRIMARY KEY, cents INT)")
    db.executemany("INSERT INTO product VALUES (?, ?)", [(f"P{i:03d}", 500 + i * 37)
                                                           for i in range(40)])  # fmt: skip

    @trace(name="get_product")
    def get_product(sku: str) -> dict[str, Any]:
        net(12)
        (cents,) = db.execute("SELECT cents FROM product WHERE sku = ?", (sku,)).fetchone()
        return {"sku": sku, "cents": cents}

    @trace(name="get_tax_rate")
    def get_tax_rate(region: str) -> float:
        net(12)
        return float(db.execute("SELECT rate FROM tax WHERE region = ?", (region,)).fetchone()[0])

    @trace(name="price_cart")
    def price_cart(cart: list[str], region: str) -> int:
        total = 0.0
        for sku in cart:
            p = get_product(sku)
            total += p["cents"] * (1 + get_tax_rate(region))
        return round(total)

    for i in range(4):
        price_cart([f"P{3 * i + k:03d}" for k in range(3)], "EU")


@case(
    "cacheable_embedding",
    ["cacheable", "independent", "model_call"],
    "decorator",
    [
        ind(
            "route_request",
            "embed",
            None,
            "the instructions and the user's message are "
            "embedded separately; neither embedding takes the other",
        ),
        dep("route_request", "embed", "nearest_route", "compares both embeddings"),
    ],
    [
        nc("route_request", ROOT_NC),
        cache(
            "embed",
            "cacheable",
            "the same routing instructions are embedded in every "
            "trace with the same deterministic model: identical input, identical vector. "
            "Re-checked (issue 25): safe only if the key includes the model revision (a new "
            "embedding model gives other vectors for the same text); the traces record no "
            "revision, so the text alone is not a key a careful engineer signs: at most medium",
            max_confidence="medium",
        ),
        nc("nearest_route", "different vectors every trace"),
    ],
)
def cacheable_embedding() -> None:
    """A router embeds its fixed routing instructions and the user's message (two calls to an
    embedding server, ~20 ms each), then compares the vectors.  The instruction text is the same
    in every trace and the embedding is deterministic, so those calls return identical vectors:
    cacheable (keyed by the text).  The two embed calls of one trace take different texts and
    neither uses the other's vector: independent.
    """

    import hashlib

    trace = _t()
    instructions = "Route to billing, support or sales. Prefer support when unsure."

    @trace(name="embed", kind="gpu")
    def embed(text: str) -> list[float]:
        net(20)  # the embedding server
        burn(1, text)
        digest = hashlib.sha256(text.encode()).digest()
        return [round(b / 255, 4) for b in digest[:16]]

    @trace(name="nearest_route")
    def nearest_route(query: list[float], reference: list[float]) -> str:
        burn(1)
        score = sum(a * b for a, b in zip(query, reference, strict=True))
        return ["billing", "support", "sales"][int(score * 7) % 3]

    @trace(name="route_request")
    def route(message: str) -> str:
        ref = embed(instructions)
        q = embed(message)
        return nearest_route(q, ref)

    for m in ["refund my last invoice", "the app crashes on start", "bulk pricing for 50 seats",
              "cannot log in"]:  # fmt: skip
        route(m)


@case(
    "changing_results_stock",
    ["changing_results", "dependent"],
    "decorator",
    [
        dep(
            "reserve_item",
            "get_stock",
            "reserve_stock",
            "reserves only if get_stock said "
            "enough are left; reserve_stock changes what get_stock reads",
        ),
        dep(
            "reserve_item",
            "get_stock",
            None,
            "the second read confirms the reservation made in between",
        ),
    ],
    [
        nc("reserve_item", ROOT_NC),
        nc(
            "get_stock",
            "same SKU, but the stock changes with every reservation: the recorded results differ",
        ),
        nc("reserve_stock", "a write"),
    ],
)
def changing_results_stock() -> None:
    """reserve_item reads the stock of SKU-1, reserves qty if enough is left (reserve_stock
    decrements it), then reads the stock again to confirm.  get_stock's argument never changes,
    but its result does (50, 48, 45, ...), and reserve_stock is a write whose name does not say
    so: a cache would either return a stale count or skip a reservation.  reserve_stock runs
    only when the first read says enough is left (a control dependency), and the confirming read
    must follow the reservation.
    """

    trace = _t()
    stock = {"SKU-1": 50}

    @trace(name="get_stock")
    def get_stock(sku: str) -> int:
        net(10)
        return stock[sku]

    @trace(name="reserve_stock")
    def reserve_stock(sku: str, qty: int) -> bool:
        net(15)
        stock[sku] -= qty
        return True

    @trace(name="reserve_item")
    def reserve(sku: str, qty: int) -> int:
        if get_stock(sku) >= qty:
            reserve_stock(sku, qty)
        return get_stock(sku)

    for q in [2, 3, 1, 4, 2]:
        reserve("SKU-1", q)


@case(
    "retry_after_error_instrumented",
    ["retry", "dependent"],
    "decorator",
    [
        dep(
            "convert_amount",
            "fetch_rates",
            None,
            "each call retries the previous one after it failed",
        ),
        dep("convert_amount", "fetch_rates", "convert", "converts with the rates"),
    ],
    [
        nc("convert_amount", ROOT_NC),
        nc("fetch_rates", "repeats are retries after errors, each trace a different base currency"),
        nc("convert", "different amounts"),
    ],
)
def retry_after_error_instrumented() -> None:
    """fetch_rates(base) fails with ConnectionError on its first one or two attempts and the
    agent retries after 10 ms.  Repeats with the same arguments after an ERROR status are
    retries: sequential (each attempt is made because the previous failed) and never a cache hit
    (there is no successful result to serve).  Each trace converts from a different base
    currency.
    """

    trace = _t()
    failures = {"USD": 2, "EUR": 1, "GBP": 1, "JPY": 2}

    @trace(name="fetch_rates")
    def fetch_rates(base: str) -> dict[str, float]:
        net(15)
        if failures[base] > 0:
            failures[base] -= 1
            raise ConnectionError(f"rates upstream reset ({base})")
        return {"XAU": 0.0005 * len(base), "CHF": 0.9}

    @trace(name="convert")
    def convert(amount: float, rate: float) -> float:
        burn(1)
        return round(amount * rate, 2)

    @trace(name="convert_amount")
    def convert_amount(base: str, amount: float) -> float:
        for _attempt in range(4):
            try:
                rates = fetch_rates(base)
                break
            except ConnectionError:
                time.sleep(0.01)
        return convert(amount, rates["CHF"])

    for i, base in enumerate(failures):
        convert_amount(base, 100.0 + i)


@case(
    "repeated_write_checkpoint",
    ["write", "dependent"],
    "decorator",
    [
        dep("run_task", "plan_step", "act_step", "act executes the plan"),
        dep("run_task", "plan_step", "save_checkpoint", "saves the plan's state"),
        dep("run_task", "act_step", "save_checkpoint", "saves the state act produced"),
        dep(
            "run_task", "save_checkpoint", None, "both write the same file; the last write must win"
        ),
    ],
    [
        nc("run_task", ROOT_NC),
        nc("plan_step", "different tasks"),
        nc("act_step", "different plans"),
        nc(
            "save_checkpoint",
            "a write (to a file), even though its name does not say so and its arguments repeat",
        ),
    ],
)
def repeated_write_checkpoint() -> None:
    """After planning and after acting, the agent calls save_checkpoint(run_id, state), which
    writes and fsyncs a JSON file.  When the act step fails, the state is unchanged and the
    second save has exactly the same arguments as the first.  It is still a write (its name does
    not say so): it can never be cached, and two writes of the same file must keep their order.
    """

    trace = _t()
    folder = Path(tempfile.mkdtemp(prefix="verdict-ckpt-"))

    @trace(name="save_checkpoint")
    def save_checkpoint(run_id: str, state: dict[str, Any]) -> int:
        data = json.dumps(state, sort_keys=True)
        (folder / f"{run_id}.json").write_text(data)
        os.fsync(os.open(folder / f"{run_id}.json", os.O_RDONLY))
        return len(data)

    @trace(name="plan_step")
    def plan_step(task: str) -> list[str]:
        burn(5, task)
        return [f"{task}: step {k}" for k in range(2)]

    @trace(name="act_step")
    def act_step(plan: list[str], ok: bool) -> list[str]:
        net(20)
        return [p + " done" for p in plan] if ok else plan

    @trace(name="run_task")
    def run_task(run_id: str, task: str, ok: bool) -> None:
        state: dict[str, Any] = {"task": task, "plan": plan_step(task)}
        save_checkpoint(run_id, state)
        state["plan"] = act_step(state["plan"], ok)
        save_checkpoint(run_id, state)  # unchanged when the act failed: same arguments

    for i in range(4):
        run_task(f"run-{i}", f"task {i}", ok=i % 2 == 0)


@case(
    "per_session_cart",
    ["per_user"],
    "decorator",
    [
        dep("show_checkout", "get_cart", "price_items", "prices the cart's items"),
    ],
    [
        nc("show_checkout", ROOT_NC),
        nc(
            "get_cart",
            "no arguments, but it reads the cart of the session in the request "
            "context (session.id / enduser.id on the span): one user's cart must never be "
            "served to another",
        ),
        nc("price_items", "different carts"),
    ],
)
def per_session_cart() -> None:
    """get_cart() takes no arguments: it reads the cart of the session in the request context,
    and records session.id and enduser.id on its span, as web frameworks do.  Three of the four
    sessions have the same cart (["mug"]), so arguments and recorded results are identical
    across traces, yet serving one session's cart to another would be a data leak: the caller's
    identity is part of the key, and no user repeats, so nothing is cacheable.
    """

    from opentelemetry import trace as otel

    trace = _t()
    carts = {"s-01": ["mug"], "s-02": ["mug"], "s-03": ["lamp", "mug"], "s-04": ["mug"]}
    current: dict[str, str] = {}

    @trace(name="get_cart")
    def get_cart() -> list[str]:
        span = otel.get_current_span()
        span.set_attribute("session.id", current["session"])
        span.set_attribute("enduser.id", current["user"])
        net(15)
        return carts[current["session"]]

    @trace(name="price_items")
    def price_items(items: list[str]) -> int:
        burn(2)
        return sum(len(i) * 100 for i in items)

    @trace(name="show_checkout")
    def show(session: str) -> int:
        return price_items(get_cart())

    for i, s in enumerate(carts):
        current.update(session=s, user=f"user-{i + 101}")
        show(s)


@case(
    "rag_two_retrievers_same_query",
    ["independent", "shared_read_only_arg"],
    "decorator",
    [
        ind(
            "retrieve_context",
            "retrieve_bm25",
            "retrieve_dense",
            "both read the same query (read-only indexes); neither uses the other's result",
        ),
        dep("retrieve_context", "retrieve_bm25", "rerank", "reranks the BM25 hits"),
        dep("retrieve_context", "retrieve_dense", "rerank", "reranks the dense hits"),
    ],
    [
        nc("retrieve_context", ROOT_NC),
        nc("retrieve_bm25", "a different query every trace"),
        nc("retrieve_dense", "a different query every trace"),
        nc("rerank", "different hits every trace"),
    ],
)
def rag_two_retrievers_same_query() -> None:
    """Hybrid retrieval: a BM25 search and a dense search over read-only indexes, both taking
    the same query string, then a rerank of both hit lists.  The two retrievers share an
    argument value, but both are reads, so the shared value is not a resource one of them
    changes: they are independent.  (A rule that treats every shared argument as a dependency is
    safe but misses this.)
    """

    trace = _t()
    docs = [
        f"doc{i}: {w}"
        for i, w in enumerate(
            ["gpu memory", "retry policy", "cache ttl", "rate limits", "batch size", "timeouts"]
        )
    ]

    @trace(name="retrieve_bm25")
    def retrieve_bm25(query: str) -> list[str]:
        net(20)
        return [d for d in docs if any(w in d for w in query.split())][:3] or docs[:1]

    @trace(name="retrieve_dense")
    def retrieve_dense(query: str) -> list[str]:
        burn(3, query)
        net(15)
        return sorted(docs, key=lambda d: -len(set(d) & set(query)))[:3]

    @trace(name="rerank")
    def rerank(query: str, a: list[str], b: list[str]) -> list[str]:
        burn(4)
        return sorted(set(a) | set(b))[:3]

    @trace(name="retrieve_context")
    def retrieve(query: str) -> list[str]:
        return rerank(query, retrieve_bm25(query), retrieve_dense(query))

    for q in ["cache ttl tuning", "retry policy defaults", "gpu memory errors", "batch size"]:
        retrieve(q)


@case(
    "map_reduce_llm",
    ["independent", "model_call", "loop"],
    "decorator",
    [
        ind(
            "summarize_report",
            "summarize_chunk",
            None,
            "each chunk is summarized from the "
            "input document alone; no call takes another's summary",
        ),
        dep(
            "summarize_report",
            "summarize_chunk",
            "combine_summaries",
            "combines the chunk summaries",
        ),
    ],
    [
        nc("summarize_report", ROOT_NC),
        nc("summarize_chunk", "every chunk is different"),
        nc("combine_summaries", "different summaries every trace"),
    ],
)
def map_reduce_llm() -> None:
    """Map-reduce summarization: the report is cut into chunks, each summarized by a model call
    (kind gpu, a round trip to a model server), then combined.  Each summarize_chunk takes only
    its own chunk of the input; none takes another's summary, so the map calls are independent
    even though they are model calls.  combine_summaries takes them all.
    """

    trace = _t()

    @trace(name="summarize_chunk", kind="gpu")
    def summarize_chunk(chunk: str) -> str:
        burn(4, chunk)
        net(15)  # the model server
        return "summary: " + " ".join(chunk.split()[:4])

    @trace(name="combine_summaries", kind="gpu")
    def combine(summaries: list[str]) -> str:
        net(15)
        return " / ".join(s[9:] for s in summaries)

    @trace(name="summarize_report")
    def summarize(report: str) -> str:
        chunks = [report[i : i + 60] for i in range(0, len(report), 60)]
        return combine([summarize_chunk(c) for c in chunks])

    rng = random.Random(5)
    words = "revenue churn latency outage hiring roadmap margin backlog pricing".split()  # noqa: SIM905
    for _ in range(4):
        summarize(" ".join(rng.choice(words) for _ in range(28)))


@case(
    "nested_subagents",
    ["independent", "dependent", "nested"],
    "decorator",
    [
        ind(
            "orchestrate",
            "research",
            None,
            "the two research subagents take different topics from the request and share nothing",
        ),
        dep("orchestrate", "research", "write_report", "writes from the research notes"),
        dep(
            "research", "search_web", "fetch_page", "fetch_page takes URLs from the search results"
        ),
        ind(
            "research",
            "fetch_page",
            None,
            "both URLs come from the same search result; neither fetch uses the other's page",
        ),
    ],
    [
        nc("orchestrate", ROOT_NC),
        nc("research", "different topics"),
        nc("search_web", "different topics"),
        nc("fetch_page", "different URLs"),
        nc("write_report", "different notes"),
    ],
)
def nested_subagents() -> None:
    """An orchestrator runs two research subagents on two topics from the request, then writes a
    report from their notes.  Inside each research span, search_web returns URLs and fetch_page
    fetches each of them.  The two research calls share nothing and are independent; fetch_page
    depends on search_web (its URL is in the search result), and the two fetch_page calls are
    independent of each other.
    """

    trace = _t()

    @trace(name="search_web")
    def search_web(topic: str) -> list[str]:
        net(20)
        slug = topic.replace(" ", "-")
        return [f"https://example.org/{slug}/{k}" for k in range(2)]

    @trace(name="fetch_page")
    def fetch_page(url: str) -> str:
        net(15)
        return f"<p>{url.rsplit('/', 2)[1]} facts</p>"

    @trace(name="research")
    def research(topic: str) -> list[str]:
        return [fetch_page(u) for u in search_web(topic)]

    @trace(name="write_report")
    def write_report(notes: list[list[str]]) -> str:
        burn(3)
        return "\n".join(p for n in notes for p in n)

    @trace(name="orchestrate")
    def orchestrate(topics: tuple[str, str]) -> str:
        return write_report([research(t) for t in topics])

    for pair in [("solar", "wind"), ("rust", "zig"), ("tea", "coffee")]:
        orchestrate(pair)


@case(
    "permission_gate",
    ["dependent", "control_dependency"],
    "decorator",
    [
        dep(
            "open_document",
            "check_access",
            "fetch_document",
            "fetch_document runs only if "
            "check_access returned True: a control dependency (fetching first would read "
            "data the user may not see)",
        ),
    ],
    [
        nc("open_document", ROOT_NC),
        nc("check_access", "a different user and document every trace"),
        nc("fetch_document", "a different document every trace"),
    ],
)
def permission_gate() -> None:
    """check_access(user, doc_id) returns a boolean; fetch_document(doc_id) is called only if it
    is True.  No value flows from check_access into fetch_document's arguments, but the fetch is
    control-dependent on the check: running them together fetches documents for users who may
    not see them (extra load, an access in the audit log, and a security review that fails).  A
    careful engineer does not parallelize an authorization check with the access it guards;
    labelled dependent.
    """

    trace = _t()

    @trace(name="check_access")
    def check_access(user: str, doc_id: int) -> bool:
        net(12)
        return doc_id % 5 != 0

    @trace(name="fetch_document")
    def fetch_document(doc_id: int) -> str:
        net(25)
        return f"contents of {doc_id}"

    @trace(name="open_document")
    def open_document(user: str, doc_id: int) -> str:
        if not check_access(user, doc_id):
            return "denied"
        return fetch_document(doc_id)

    for i in range(4):
        open_document(USERS[i], 3301 + 7 * i)


@case(
    "write_then_read_file",
    ["dependent", "shared_resource", "small_int_id"],
    "decorator",
    [
        dep(
            "ingest_upload",
            "store_upload",
            "scan_file",
            "scan_file reads the file "
            "store_upload wrote (same path): data flows through the file system",
        ),
        dep("ingest_upload", "store_upload", "index_file", "indexes the stored file"),
        dep("ingest_upload", "scan_file", "index_file", "indexes only a clean file"),
    ],
    [
        nc("ingest_upload", ROOT_NC),
        nc("store_upload", "a write"),
        nc("scan_file", "different files"),
        nc("index_file", "different files"),
    ],
)
def write_then_read_file() -> None:
    """store_upload(path, data) writes a file and returns its size (a small int);
    scan_file(path) reads the same file; index_file(path) runs only if the scan is clean.  The
    data flows through the file system under a shared path argument: dependent.
    """

    import hashlib

    trace = _t()
    folder = Path(tempfile.mkdtemp(prefix="verdict-up-"))

    @trace(name="store_upload")
    def store_upload(path: str, data: bytes) -> int:
        Path(path).write_bytes(data)
        time.sleep(0.005)
        return len(data)

    @trace(name="scan_file")
    def scan_file(path: str) -> bool:
        data = Path(path).read_bytes()
        burn(5, hashlib.md5(data).hexdigest())
        return b"EICAR" not in data

    @trace(name="index_file")
    def index_file(path: str) -> int:
        net(10)
        return len(Path(path).read_text().split())

    @trace(name="ingest_upload")
    def ingest(name: str, data: bytes) -> int:
        path = str(folder / name)
        store_upload(path, data)
        return index_file(path) if scan_file(path) else 0

    for i in range(4):
        ingest(f"up{i}.txt", (f"quarterly notes {i} " * (10 + i)).encode())


@case(
    "independent_common_values",
    ["independent", "common_values"],
    "decorator",
    [
        ind(
            "build_dashboard",
            "get_feature_flag",
            "count_unread",
            "independent reads; the "
            "flag's True and the count's small values coincide with later arguments by chance",
        ),
        ind(
            "build_dashboard",
            "get_feature_flag",
            "list_alerts",
            "list_alerts(active=True, page=1) uses constants, not the flag's True",
        ),
        ind(
            "build_dashboard",
            "count_unread",
            "list_alerts",
            "the count (often 1) is not the page number 1 passed to list_alerts. Re-checked "
            "(issue 25): page=1 is exactly the pagination trigger, but a pagination dependency "
            "is between pages of one listing (page 2 needs page 1's answer); list_alerts is "
            "called once per trace with the constant page=1, the first page, which needs "
            "nothing from count_unread or anything else: independent stands",
        ),
        dep("build_dashboard", "get_feature_flag", "render_dashboard", "renders with the flag"),
        dep("build_dashboard", "count_unread", "render_dashboard", "renders the count"),
        dep("build_dashboard", "list_alerts", "render_dashboard", "renders the alerts"),
    ],
    [
        nc("build_dashboard", ROOT_NC),
        nc("get_feature_flag", "a different flag every trace"),
        nc("count_unread", "a different user every trace"),
        cache(
            "list_alerts",
            "not_cacheable",
            "same arguments every trace, but alerts are live data and the recorded results differ",
        ),
        nc("render_dashboard", "different inputs"),
    ],
)
def independent_common_values() -> None:
    """A dashboard reads a feature flag (True), a user's unread count (0 or 1) and the list of
    active alerts (list_alerts(active=True, page=1): constants), then renders.  The three reads
    take different inputs; that the flag's True equals the alert call's active=True, or that a
    count of 1 equals page=1, is a coincidence of values that are everywhere.  A tool that links
    on such values would wrongly chain these.  list_alerts is called with the same arguments in
    every trace but returns different (live) alerts: not cacheable.
    """

    trace = _t()

    @trace(name="get_feature_flag")
    def get_feature_flag(flag: str) -> bool:
        net(10)
        return True

    @trace(name="count_unread")
    def count_unread(user: str) -> int:
        net(15)
        return 1 if user[-1] in "13579" else 0

    alerts = iter(range(100))

    @trace(name="list_alerts")
    def list_alerts(active: bool, page: int) -> list[str]:
        net(15)
        return [f"alert-{next(alerts)}"]

    @trace(name="render_dashboard")
    def render(flag: bool, unread: int, items: list[str]) -> str:
        burn(2)
        return f"{flag}:{unread}:{len(items)}"

    @trace(name="build_dashboard")
    def build(user: str, flag_name: str) -> str:
        f = get_feature_flag(flag_name)
        n = count_unread(user)
        a = list_alerts(active=True, page=1)
        return render(f, n, a)

    for i in range(5):
        build(USERS[i], ["beta_search", "new_nav", "dark_mode", "ai_summary", "fast_export"][i])


@case(
    "reads_share_user_id",
    ["independent", "shared_read_only_arg"],
    "decorator",
    [
        ind(
            "profile_page",
            "get_profile",
            "get_orders",
            "both read by the same user id (read-only); neither takes the other's result",
        ),
        ind("profile_page", "get_profile", "get_recommendations", "same: read-only by user id"),
        ind("profile_page", "get_orders", "get_recommendations", "same: read-only by user id"),
        dep("profile_page", "get_profile", "render_profile", "renders the profile"),
        dep("profile_page", "get_orders", "render_profile", "renders the orders"),
        dep("profile_page", "get_recommendations", "render_profile", "renders the picks"),
    ],
    [
        nc("profile_page", ROOT_NC),
        nc("get_profile", "a different user every trace"),
        nc("get_orders", "a different user every trace"),
        nc("get_recommendations", "a different user every trace"),
        nc("render_profile", "different inputs"),
    ],
)
def reads_share_user_id() -> None:
    """A profile page reads the profile, the orders and the recommendations of the same user id,
    then renders.  All three take the same argument (the user id) and all three are reads: no
    hop changes what another reads, so they are independent.  Counterpart of the shared-resource
    cases: a shared argument means a dependency only when an earlier hop changes the resource.
    """

    trace = _t()

    @trace(name="get_profile")
    def get_profile(user_id: str) -> dict[str, str]:
        net(20)
        return {"name": user_id.replace("u-", "User ")}

    @trace(name="get_orders")
    def get_orders(user_id: str) -> list[int]:
        net(25)
        return [int(user_id[2:]) * 10 + k for k in range(2)]

    @trace(name="get_recommendations")
    def get_recommendations(user_id: str) -> list[str]:
        net(20)
        return [f"item-{int(user_id[2:]) % 97}"]

    @trace(name="render_profile")
    def render(p: dict[str, str], o: list[int], r: list[str]) -> str:
        burn(2)
        return f"{p['name']} {len(o)} {r[0]}"

    @trace(name="profile_page")
    def page(user_id: str) -> str:
        return render(get_profile(user_id), get_orders(user_id), get_recommendations(user_id))

    for u in USERS:
        page(u)


@case(
    "embedding_then_search",
    ["dependent", "model_call"],
    "decorator",
    [
        dep(
            "semantic_search",
            "embed_query",
            "vector_search",
            "searches with the vector embed_query returned",
        ),
    ],
    [
        nc("semantic_search", ROOT_NC),
        nc("embed_query", "a different query every trace"),
        nc("vector_search", "a different vector every trace"),
    ],
)
def embedding_then_search() -> None:
    """embed_query returns a vector (a list of floats); vector_search takes exactly that vector.
    A plain data chain through a structured value.
    """

    import hashlib

    trace = _t()

    @trace(name="embed_query", kind="gpu")
    def embed_query(text: str) -> list[float]:
        burn(5, text)
        return [round(b / 255, 3) for b in hashlib.sha256(text.encode()).digest()[:8]]

    @trace(name="vector_search")
    def vector_search(vector: list[float], k: int) -> list[int]:
        net(20)
        return sorted(range(100), key=lambda i: abs(vector[i % 8] - i / 100))[:k]

    @trace(name="semantic_search")
    def search(q: str) -> list[int]:
        return vector_search(embed_query(q), 5)

    for q in ["late delivery", "broken screen", "invoice copy", "change address"]:
        search(q)


@case(
    "async_awaits_in_sequence",
    ["independent", "independent_instrumented", "async"],
    "decorator",
    [
        ind(
            "handle_chat_turn",
            "load_history",
            "load_user_prefs",
            "different request fields; neither takes the other's result",
        ),
        ind(
            "handle_chat_turn",
            "load_history",
            "search_kb",
            "the KB query is the user's message, not anything from the history",
        ),
        ind(
            "handle_chat_turn",
            "load_user_prefs",
            "search_kb",
            "the KB query is the user's message, not anything from the preferences",
        ),
        dep("handle_chat_turn", "load_history", "build_prompt", "the prompt includes the history"),
        dep("handle_chat_turn", "load_user_prefs", "build_prompt", "uses the preferred tone"),
        dep("handle_chat_turn", "search_kb", "build_prompt", "includes the KB passages"),
    ],
    [
        nc("handle_chat_turn", ROOT_NC),
        nc("load_history", "a different conversation every trace"),
        nc("load_user_prefs", "a different user every trace"),
        nc("search_kb", "a different message every trace"),
        nc("build_prompt", "different inputs"),
    ],
)
def async_awaits_in_sequence() -> None:
    """The most common shape in async agent code: three awaits in a row where one asyncio.gather
    would do.  A chat turn loads the conversation history (by conversation id), the user's
    preferences (by user id) and knowledge-base passages (by the message text) over real
    asyncio streams, then builds the prompt from all three.  The three loads take different
    request fields and none takes another's result: independent.  build_prompt depends on each.
    """
    import asyncio

    trace = _t()

    @trace(name="load_history")
    async def load_history(conversation: str) -> list[str]:
        await anet(20)
        return [f"{conversation}: earlier message {k}" for k in range(2)]

    @trace(name="load_user_prefs")
    async def load_user_prefs(user: str) -> dict[str, str]:
        await anet(15)
        return {"tone": "brief" if user[-1] in "13579" else "friendly"}

    @trace(name="search_kb")
    async def search_kb(text: str) -> list[str]:
        await anet(25)
        return [f"kb:{w}" for w in text.split()[:2]]

    @trace(name="build_prompt")
    async def build_prompt(history: list[str], prefs: dict[str, str], kb: list[str]) -> str:
        return "\n".join([f"tone={prefs['tone']}", *history, *kb])

    @trace(name="handle_chat_turn")
    async def turn(conversation: str, user: str, message: str) -> str:
        history = await load_history(conversation)
        prefs = await load_user_prefs(user)
        kb = await search_kb(message)
        return await build_prompt(history, prefs, kb)

    async def main() -> None:
        for i, message in enumerate(["reset password", "export data", "delete account"]):
            await turn(f"conv-{501 + i}", USERS[i], message)

    asyncio.run(main())


@case(
    "async_token_chain",
    ["dependent", "short_string_id", "async"],
    "decorator",
    [
        dep(
            "call_partner_api",
            "get_access_token",
            "fetch_statement",
            "fetch_statement sends the short token get_access_token returned",
        ),
    ],
    [
        nc("call_partner_api", ROOT_NC),
        nc("get_access_token", "a different client every trace"),
        nc("fetch_statement", "a different token and account every trace"),
    ],
)
def async_token_chain() -> None:
    """Async OAuth-style chain: get_access_token(client_id) returns an 8-character token, and
    fetch_statement(token, account) sends it.  A strict chain through a short string."""
    import asyncio
    import hashlib

    trace = _t()

    @trace(name="get_access_token")
    async def get_access_token(client_id: str) -> str:
        await anet(15)
        return hashlib.sha1(client_id.encode()).hexdigest()[:8]

    @trace(name="fetch_statement")
    async def fetch_statement(token: str, account: int) -> dict[str, Any]:
        await anet(25)
        return {"account": account, "balance_cents": int(token[:4], 16)}

    @trace(name="call_partner_api")
    async def call(client_id: str, account: int) -> int:
        token = await get_access_token(client_id)
        return int((await fetch_statement(token, account))["balance_cents"])

    async def main() -> None:
        for i in range(4):
            await call(f"client-{i + 40}", 7_000_100 + i)

    asyncio.run(main())


# --- OpenTelemetry SDK cases ----------------------------------------------------------------


@dataclass
class Node:
    name: str
    start: float  # ms from the trace's start
    dur: float
    kind: str = "internal"
    attrs: dict[str, Any] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    error: str | None = None


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


def write_otel(path: Path, service: str, traces: list[tuple[float, Node]], seed: int) -> None:
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


def invoke(items: list[Node | float], agent: str = "assistant") -> Node:
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}
    return root(f"invoke_agent {agent}", items, kind="internal", **attrs)


def jitter(rng: random.Random, ms: float) -> float:
    return round(ms * rng.uniform(0.85, 1.15), 3)


def otel_case(name: str, traces: Callable[[random.Random], list[tuple[float, Node]]]) -> None:
    rng = random.Random(name)
    write_otel(OUT / f"{name}.jsonl", f"verdict-{name}", traces(rng), seed=len(name))


API = "https://api.example.com"


@case(
    "indep_http_overlap_uninstrumented",
    ["independent", "independent_uninstrumented", "overlap"],
    "otel",
    [
        ind(
            "GET /dashboard",
            "GET /v1/weather",
            "GET /v1/news",
            "different URLs from the "
            "request; in some traces the service already ran them concurrently",
        ),
    ],
    [
        nc("GET /dashboard", ROOT_NC),
        nc("GET /v1/weather", "a different city every trace (results not recorded)"),
        nc("GET /v1/news", "a different topic every trace (results not recorded)"),
    ],
)
def indep_http_overlap_uninstrumented() -> None:
    """A service's /dashboard handler calls GET /v1/weather and GET /v1/news (HTTP CLIENT spans,
    http.request.method + url.full, no fingerprints).  In two of the six traces the service ran
    them concurrently already (a code path that uses asyncio.gather); in the others,
    sequentially.  The URLs come from the request, the calls are reads, and having run
    overlapped without changing anything is positive evidence that they are independent.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(6):
            w = http("GET", "GET /v1/weather", f"{API}/v1/weather?city={CITIES[i % 5]}{i}",
                     jitter(rng, 30))  # fmt: skip
            n = http("GET", "GET /v1/news", f"{API}/v1/news?topic=t{i}", jitter(rng, 35))
            if i in (1, 4):  # the cached-config path runs them together
                w.start, n.start = 1.0, 1.5
                end = max(w.start + w.dur, n.start + n.dur) + 1.0
                top = Node("GET /dashboard", 0, end, "server", {"http.request.method": "GET"},
                           [w, n])  # fmt: skip
            else:
                top = root("GET /dashboard", [w, n], **{"http.request.method": "GET"})
            out.append((i * 7.0, top))
        return out

    otel_case("indep_http_overlap_uninstrumented", build)


@case(
    "indep_http_both_orders",
    ["independent", "independent_uninstrumented", "both_orders"],
    "otel",
    [
        ind(
            "GET /account",
            "GET /v1/profile",
            "GET /v1/settings",
            "different URLs from the request; seen in both orders",
        ),
    ],
    [
        nc("GET /account", ROOT_NC),
        nc("GET /v1/profile", "a different user every trace"),
        nc("GET /v1/settings", "a different account every trace"),
    ],
    expect_one_finding=True,
)
def indep_http_both_orders() -> None:
    """Uninstrumented GET /v1/profile/{user} and GET /v1/settings/{account}, sequential, but in
    alternating order across six traces.  A call that ran both before and after the other cannot
    need the other's output: independent, and one pattern (expect one finding).
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(6):
            p = http("GET", "GET /v1/profile", f"{API}/v1/profile/{USERS[i % 5]}{i}",
                     jitter(rng, 30))  # fmt: skip
            s = http("GET", "GET /v1/settings", f"{API}/v1/settings/{900 + i}", jitter(rng, 30))
            hops: list[Node | float] = [p, s] if i % 2 == 0 else [s, p]
            out.append((i * 5.0, root("GET /account", hops, **{"http.request.method": "GET"})))
        return out

    otel_case("indep_http_both_orders", build)


@case(
    "genai_parallel_tool_calls",
    ["independent", "model_call", "genai"],
    "otel",
    [
        ind(
            "invoke_agent assistant",
            "execute_tool get_weather",
            "execute_tool get_news",
            "three tool calls the model asked for in one turn; each takes its own arguments",
        ),
        ind(
            "invoke_agent assistant",
            "execute_tool get_weather",
            "execute_tool get_stock_quote",
            "same",
        ),
        ind(
            "invoke_agent assistant",
            "execute_tool get_news",
            "execute_tool get_stock_quote",
            "same",
        ),
        dep(
            "invoke_agent assistant",
            "chat gpt-4o-mini",
            None,
            "the second chat takes the tool results",
        ),
        dep(
            "invoke_agent assistant",
            "chat gpt-4o-mini",
            "execute_tool get_weather",
            "arguments from the first chat; the second chat takes the result",
        ),
        dep("invoke_agent assistant", "chat gpt-4o-mini", "execute_tool get_news", "same"),
        dep("invoke_agent assistant", "chat gpt-4o-mini", "execute_tool get_stock_quote", "same"),
    ],
    [
        nc("invoke_agent assistant", ROOT_NC),
        nc("chat gpt-4o-mini", "different conversations"),
        nc("execute_tool get_weather", "a different city every trace"),
        nc("execute_tool get_news", "a different topic every trace"),
        nc("execute_tool get_stock_quote", "a different ticker every trace"),
    ],
)
def genai_parallel_tool_calls() -> None:
    """A GenAI agent (gen_ai.* semantic conventions): the first chat asks for three tools in one
    turn; the agent executes get_weather, get_news and get_stock_quote one after another (each
    with recorded gen_ai.tool.call.arguments and result), then a second chat reads the results.
    The three tool calls take their arguments from the first chat's output and none takes
    another tool's result: they are independent of each other (this is what "parallel tool
    calls" are for).  Each depends on the first chat, and the final chat on all three.
    """

    tickers = ["ACME", "GLOBX", "INITECH", "UMBR", "HOOLI"]

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            calls = {"city": CITIES[i], "topic": TOPICS[i], "ticker": tickers[i]}
            first = chat(jitter(rng, 30), json.dumps(calls), tout=60)
            hops: list[Node | float] = [
                first,
                tool("get_weather", jitter(rng, 25), {"city": calls["city"]},
                     {"temp_c": 4 + i, "sky": "rain"}),
                tool("get_news", jitter(rng, 30), {"topic": calls["topic"]},
                     [f"{calls['topic']} headline"]),
                tool("get_stock_quote", jitter(rng, 20), {"ticker": calls["ticker"]},
                     {"price": 100 + 3 * i}),
                chat(jitter(rng, 35), "Here is your morning briefing.", tin=900),
            ]  # fmt: skip
            out.append((i * 9.0, invoke(hops)))
        return out

    otel_case("genai_parallel_tool_calls", build)


WORKFLOW = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support_workflow"}


@case(
    "small_int_id_tool_chain",
    ["dependent", "small_int_id"],
    "otel",
    [
        dep(
            "support_workflow",
            "execute_tool find_customer",
            "execute_tool get_invoices",
            "get_invoices' customer_id is the small integer find_customer returned",
        ),
    ],
    [
        nc("support_workflow", ROOT_NC),
        nc("execute_tool find_customer", "a different e-mail every trace"),
        nc("execute_tool get_invoices", "a different customer every trace"),
    ],
)
def small_int_id_tool_chain() -> None:
    """A deterministic support workflow (no model in between): execute_tool find_customer
    returns "7" (gen_ai.tool.call.result), and execute_tool get_invoices is called with
    {"customer_id": 7}.  The small integer flows from one tool's result into the next tool's
    arguments: dependent.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i, cid in enumerate([7, 12, 3, 9, 5]):
            hops: list[Node | float] = [
                tool("find_customer", jitter(rng, 20), {"email": f"c{i}@example.com"}, str(cid)),
                tool("get_invoices", jitter(rng, 30), {"customer_id": cid},
                     [{"invoice": 1000 + cid, "due": "2026-12-31"}]),
            ]  # fmt: skip
            out.append((i * 4.0, root("support_workflow", hops, kind="internal", **WORKFLOW)))
        return out

    otel_case("small_int_id_tool_chain", build)


@case(
    "short_string_id_tool_chain",
    ["dependent", "short_string_id"],
    "otel",
    [
        dep(
            "support_workflow",
            "execute_tool lookup_ticket",
            "execute_tool get_comments",
            "get_comments takes the short ticket key lookup_ticket returned",
        ),
    ],
    [
        nc("support_workflow", ROOT_NC),
        nc("execute_tool lookup_ticket", "a different subject every trace"),
        nc("execute_tool get_comments", "a different ticket every trace"),
    ],
)
def short_string_id_tool_chain() -> None:
    """execute_tool lookup_ticket returns a short key ("T-9", "Q7"...), and execute_tool
    get_comments is called with {"ticket": <that key>}: dependent through a short string.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i, key in enumerate(["T-9", "T-4", "Q7", "T-12", "B2"]):
            hops: list[Node | float] = [
                tool("lookup_ticket", jitter(rng, 20), {"subject": f"printer jam {i}"}, key),
                tool("get_comments", jitter(rng, 25), {"ticket": key},
                     [{"author": "sam", "text": "on it"}]),
            ]  # fmt: skip
            out.append((i * 4.0, root("support_workflow", hops, kind="internal", **WORKFLOW)))
        return out

    otel_case("short_string_id_tool_chain", build)


@case(
    "llm_substring_to_tool_genai",
    ["dependent", "llm_transformed_output", "llm_substring", "genai"],
    "otel",
    [
        dep(
            "invoke_agent assistant",
            "chat gpt-4o-mini",
            "execute_tool search_orders",
            "the query is a substring of the chat's output text",
        ),
        dep(
            "invoke_agent assistant",
            "chat gpt-4o-mini",
            None,
            "the second chat takes the search result",
        ),
    ],
    [
        nc("invoke_agent assistant", ROOT_NC),
        nc("chat gpt-4o-mini", "different conversations"),
        nc("execute_tool search_orders", "a different order every trace"),
    ],
)
def llm_substring_to_tool_genai() -> None:
    """A chat's output text (gen_ai.output.messages) says "Let me look up the status of order
    88410 placed last week..."; the following tool call's arguments are {"query": "order
    88410"}, a substring of that text.  The tool depends on the chat, and the second chat reads
    the tool's result.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            order = f"order {88410 + 17 * i}"
            text = f"Let me look up the status of {order} placed last week by the customer."
            hops: list[Node | float] = [
                chat(jitter(rng, 30), text),
                tool("search_orders", jitter(rng, 25), {"query": order},
                     {"status": "shipped", "eta": f"2026-12-{10 + i}"}),
                chat(jitter(rng, 30), "It has shipped.", tin=700),
            ]  # fmt: skip
            out.append((i * 6.0, invoke(hops)))
        return out

    otel_case("llm_substring_to_tool_genai", build)


@case(
    "llm_json_field_to_tool_genai",
    ["dependent", "llm_transformed_output", "llm_json_field", "genai"],
    "otel",
    [
        dep(
            "invoke_agent assistant",
            "chat gpt-4o-mini",
            "execute_tool get_product",
            "the SKU is a field of the chat's JSON output",
        ),
    ],
    [
        nc("invoke_agent assistant", ROOT_NC),
        nc("chat gpt-4o-mini", "different conversations"),
        nc("execute_tool get_product", "a different SKU every trace"),
    ],
)
def llm_json_field_to_tool_genai() -> None:
    """The chat's output is JSON ({"action": "lookup", "sku": "KB-204", ...}); the tool
    get_product is called with {"sku": "KB-204"}, a field of that output: dependent.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i, sku in enumerate(["KB-204", "MS-311", "HD-870", "CB-015", "DK-442"]):
            hops: list[Node | float] = [
                chat(jitter(rng, 30), json.dumps({"action": "lookup", "sku": sku, "qty": 1})),
                tool("get_product", jitter(rng, 25), {"sku": sku}, {"name": "thing", "stock": 3}),
            ]
            out.append((i * 6.0, invoke(hops)))
        return out

    otel_case("llm_json_field_to_tool_genai", build)


@case(
    "usage_only_llm_chain",
    ["dependent", "usage_only_llm", "model_call"],
    "otel",
    [
        dep(
            "agent_run",
            "call_llm",
            None,
            "each model call takes the conversation so far, "
            "including the previous call's output and the tool result",
        ),
        dep(
            "agent_run",
            "call_llm",
            "execute_tool web_search",
            "the model picks the search; the next model call reads its result",
        ),
        dep(
            "agent_run",
            "execute_tool web_search",
            None,
            "the second search is chosen by the model call after the first search",
        ),
    ],
    [
        nc("agent_run", ROOT_NC),
        nc("call_llm", "different conversations"),
        nc("execute_tool web_search", "different queries (arguments not recorded)"),
    ],
)
def usage_only_llm_chain() -> None:
    """An any-agent style run: model calls are spans named call_llm that carry only
    gen_ai.request.model and gen_ai.usage.* (no gen_ai.operation.name), alternating with
    execute_tool web_search spans that carry only the tool name.  Each model call reads the
    conversation so far, including the previous search result, and each search is chosen by the
    model call before it: a strict chain.  The kind rules call these spans model calls because
    of their token usage; a parallel finder that treats only gen_ai.operation.name as a model
    call would see "no evidence against" here.
    """

    def llm(rng: random.Random, tin: int) -> Node:
        # any-agent style: a model call known only by its token usage
        return Node("call_llm", 0, jitter(rng, 35), "internal", {
            "gen_ai.request.model": "mistral-small-latest",
            "gen_ai.usage.input_tokens": tin,
            "gen_ai.usage.output_tokens": 50,
        })  # fmt: skip

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            hops: list[Node | float] = [
                llm(rng, 300 + i),
                Node("execute_tool web_search", 0, jitter(rng, 25), "internal",
                     {"gen_ai.tool.name": "web_search"}),
                llm(rng, 520 + i),
                Node("execute_tool web_search", 0, jitter(rng, 25), "internal",
                     {"gen_ai.tool.name": "web_search"}),
                llm(rng, 760 + i),
            ]  # fmt: skip
            out.append((i * 8.0, root("agent_run", hops, kind="internal")))
        return out

    otel_case("usage_only_llm_chain", build)


@case(
    "usage_only_draft_critique",
    ["dependent", "usage_only_llm", "model_call"],
    "otel",
    [
        dep("write_email", "llm draft", "llm critique", "the critique reads the draft"),
        dep("write_email", "llm draft", "llm revise", "revises the draft"),
        dep("write_email", "llm critique", "llm revise", "applies the critique"),
    ],
    [
        nc("write_email", ROOT_NC),
        nc("llm draft", "different requests"),
        nc("llm critique", "different drafts"),
        nc("llm revise", "different drafts"),
    ],
)
def usage_only_draft_critique() -> None:
    """Draft, critique, revise: three model calls (CLIENT spans with gen_ai.usage.* only), each
    reading the previous one's output (the critique reads the draft; the revision applies the
    critique to the draft).  A chain; nothing repeats.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            hops: list[Node | float] = [
                Node(f"llm {step}", 0, jitter(rng, 30), "client", {
                    "gen_ai.request.model": "llama-3.1-8b",
                    "gen_ai.usage.input_tokens": 200 + 150 * k + i,
                    "gen_ai.usage.output_tokens": 120,
                })
                for k, step in enumerate(["draft", "critique", "revise"])
            ]  # fmt: skip
            out.append((i * 5.0, root("write_email", hops, kind="internal")))
        return out

    otel_case("usage_only_draft_critique", build)


@case(
    "openinference_llm_tool_chain",
    ["dependent", "model_call", "openinference"],
    "otel",
    [
        dep(
            "Agent.run",
            "ChatCompletion",
            "lookup_flight",
            "the flight number is taken from the LLM's output",
        ),
        dep("Agent.run", "ChatCompletion", None, "the second completion reads the tool output"),
    ],
    [
        nc("Agent.run", ROOT_NC),
        nc("ChatCompletion", "different conversations"),
        nc("lookup_flight", "a different flight every trace"),
    ],
)
def openinference_llm_tool_chain() -> None:
    """OpenInference conventions (openinference.span.kind LLM / TOOL, input.value /
    output.value): the LLM's output names the flight, the lookup_flight tool is called with it,
    and a second LLM call reads the tool's output.  A model → tool → model chain recognised
    through a different convention.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            flight = f"BA{270 + i}"
            hops: list[Node | float] = [
                Node("ChatCompletion", 0, jitter(rng, 30), "internal", {
                    "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
                    "input.value": f"Where is my flight {flight} today?",
                    "output.value": json.dumps({"tool": "lookup_flight", "flight": flight}),
                    "llm.token_count.prompt": 80, "llm.token_count.completion": 20,
                }),
                Node("lookup_flight", 0, jitter(rng, 25), "internal", {
                    "openinference.span.kind": "TOOL", "tool.name": "lookup_flight",
                    "input.value": json.dumps({"flight": flight}),
                    "output.value": json.dumps({"gate": f"B{i + 3}", "delay_min": 5 * i}),
                }),
                Node("ChatCompletion", 0, jitter(rng, 30), "internal", {
                    "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
                    "output.value": f"Your flight leaves from gate B{i + 3}.",
                    "llm.token_count.prompt": 160, "llm.token_count.completion": 20,
                }),
            ]  # fmt: skip
            out.append((i * 5.0, root("Agent.run", hops, kind="internal",
                                      **{"openinference.span.kind": "AGENT"})))  # fmt: skip
        return out

    otel_case("openinference_llm_tool_chain", build)


@case(
    "shared_resource_ticket",
    ["dependent", "shared_resource"],
    "otel",
    [
        dep(
            "support_workflow",
            "execute_tool jira_transition",
            "execute_tool jira_get_issue",
            "reads the issue the transition just changed (same issue key)",
        ),
        dep(
            "support_workflow",
            "execute_tool jira_transition",
            "execute_tool slack_post",
            "announces the transition",
        ),
        dep(
            "support_workflow",
            "execute_tool jira_get_issue",
            "execute_tool slack_post",
            "posts the issue's new summary",
        ),
    ],
    [
        nc("support_workflow", ROOT_NC),
        nc("execute_tool jira_transition", "a write"),
        nc("execute_tool jira_get_issue", "a different issue every trace, and it just changed"),
        nc("execute_tool slack_post", "a write"),
    ],
)
def shared_resource_ticket() -> None:
    """A workflow transitions a Jira issue to Done, reads the issue back, then posts to Slack.
    jira_get_issue takes the same issue key as the transition and must see its effect; the Slack
    post announces the transition with the summary read back.  All pairs dependent; the
    transition and the post are writes.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            key = f"OPS-{1042 + i}"
            hops: list[Node | float] = [
                tool("jira_transition", jitter(rng, 30), {"issue": key, "to": "Done"}, "ok"),
                tool("jira_get_issue", jitter(rng, 20), {"issue": key},
                     {"key": key, "status": "Done", "summary": f"disk full on node {i}"}),
                tool("slack_post", jitter(rng, 25),
                     {"channel": "#ops", "text": f"{key} Done: disk full on node {i}"}, "ok"),
            ]  # fmt: skip
            out.append((i * 6.0, root("support_workflow", hops, kind="internal", **WORKFLOW)))
        return out

    otel_case("shared_resource_ticket", build)


@case(
    "shell_chain_bash_tool",
    ["dependent", "shell_chain"],
    "otel",
    [
        dep(
            "invoke_agent coder",
            "execute_tool bash",
            None,
            "checkout, apply, commit, push: "
            "each command changes the repository the next one works on",
        ),
    ],
    [
        nc("invoke_agent coder", ROOT_NC),
        nc(
            "execute_tool bash",
            "shell commands change state; the same command text would still not be a read",
        ),
    ],
)
def shell_chain_bash_tool() -> None:
    """A coding agent runs four bash tool calls: git checkout -b, git apply, git commit, git
    push (gen_ai.tool.name "bash", the command in the arguments).  Each command changes the
    repository the next one works on; the span name is the same for all four.  Sequential and
    never cacheable, even though "git apply /tmp/patch.diff" has identical arguments and result
    in every trace.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            b = f"fix-{310 + i}"
            cmds = [
                (f"git checkout -b {b}", f"Switched to a new branch '{b}'"),
                ("git apply /tmp/patch.diff", ""),
                (f"git commit -am 'Fix #{310 + i}'", f"[{b} 3f{i}a91c] Fix #{310 + i}"),
                (f"git push origin {b}", f"To github.com:acme/api.git\n * [new branch] {b}"),
            ]
            hops: list[Node | float] = [
                tool("bash", jitter(rng, 25), {"command": c}, r) for c, r in cmds
            ]
            out.append((i * 10.0, invoke(hops, "coder")))
        return out

    otel_case("shell_chain_bash_tool", build)


@case(
    "shell_code_interpreter",
    ["dependent", "shell_chain", "shared_resource"],
    "otel",
    [
        dep(
            "invoke_agent analyst",
            "execute_tool python",
            "execute_tool shell",
            "the shell command reads the CSV the Python code wrote",
        ),
    ],
    [
        nc("invoke_agent analyst", ROOT_NC),
        nc("execute_tool python", "code execution changes state"),
        nc("execute_tool shell", "reads a file that was just rewritten"),
    ],
)
def shell_code_interpreter() -> None:
    """A data-analysis agent runs Python code that writes out.csv, then a shell command that
    counts its lines.  The second reads the file the first wrote: dependent through the file
    system.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            code = f"import pandas as pd\npd.DataFrame({{'x': range({10 + i})}}).to_csv('out.csv')"
            hops: list[Node | float] = [
                tool("python", jitter(rng, 35), {"code": code}, ""),
                tool("shell", jitter(rng, 15), {"command": "wc -l out.csv"}, f"{11 + i} out.csv"),
            ]
            out.append((i * 6.0, invoke(hops, "analyst")))
        return out

    otel_case("shell_code_interpreter", build)


def _paged(name: str, urls: list[str], rng: random.Random) -> list[Node | float]:
    return [http("GET", name, u, jitter(rng, 20)) for u in urls]


@case(
    "cursor_pagination_http",
    ["dependent", "pagination", "cursor_pagination", "uninstrumented"],
    "otel",
    [
        dep(
            "sync_issues",
            "GET /v1/issues",
            None,
            "each request carries the cursor the previous response returned",
        ),
    ],
    [
        nc("sync_issues", ROOT_NC),
        nc("GET /v1/issues", "every page once; live data"),
    ],
)
def cursor_pagination_http() -> None:
    """Uninstrumented pagination: GET /v1/issues?...&cursor=<opaque> where each cursor came from
    the previous response body, which the trace does not record.  Only the URL's cursor
    parameter shows it: sequential.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            cursors = [""] + [f"&cursor=eyJpZCI6{1000 * i + 100 * k}fQ" for k in range(1, 4)]
            urls = [f"{API}/v1/issues?repo=r{i}&limit=100{c}" for c in cursors]
            out.append((i * 8.0, root("sync_issues", _paged("GET /v1/issues", urls, rng),
                                      kind="internal")))  # fmt: skip
        return out

    otel_case("cursor_pagination_http", build)


@case(
    "page_token_pagination_http",
    ["dependent", "pagination", "uninstrumented"],
    "otel",
    [
        dep(
            "list_bucket",
            "GET /storage/v1/b/data/o",
            None,
            "each request carries the page_token of the previous response",
        ),
    ],
    [
        nc("list_bucket", ROOT_NC),
        nc("GET /storage/v1/b/data/o", "every page once; live listing"),
    ],
)
def page_token_pagination_http() -> None:
    """The same with a storage listing's page_token (GET ...?prefix=...&page_token=...): each
    request needs the token of the previous response.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            tokens = [""] + [f"&page_token=CgZ{i}x{k}QAA" for k in range(1, 3)]
            urls = [f"https://storage.example.com/storage/v1/b/data/o?prefix=d{i}/{t}"
                    for t in tokens]  # fmt: skip
            out.append((i * 8.0, root("list_bucket", _paged("GET /storage/v1/b/data/o", urls,
                                                            rng), kind="internal")))  # fmt: skip
        return out

    otel_case("page_token_pagination_http", build)


@case(
    "offset_pagination_http",
    ["dependent", "pagination", "uninstrumented"],
    "otel",
    [
        dep(
            "export_contacts",
            "GET /v1/contacts",
            None,
            "the loop fetches the next offset "
            "only while the previous page came back full: how many requests there are depends "
            "on each response",
        ),
    ],
    [
        nc("export_contacts", ROOT_NC),
        nc("GET /v1/contacts", "every page once"),
    ],
)
def offset_pagination_http() -> None:
    """Offset pagination (limit=50&offset=0, 50, 100 ...) until a short page comes back.  The
    offsets could be computed in advance, but how many requests are made depends on each
    response (the loop stops at the first short page), and the code as written issues the next
    request only after reading the previous one.  Labelled dependent, as the issue's pagination
    rule says; fetching pages speculatively in parallel is a redesign, not the reordering a
    parallelizable finding proposes.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            urls = [
                f"{API}/v1/contacts?list=l{i}&limit=50&offset={50 * k}" for k in range(3 + i % 2)
            ]
            out.append((i * 8.0, root("export_contacts", _paged("GET /v1/contacts", urls, rng),
                                      kind="internal")))  # fmt: skip
        return out

    otel_case("offset_pagination_http", build)


@case(
    "keyset_pagination_sql",
    ["dependent", "pagination", "uninstrumented"],
    "otel",
    [
        dep(
            "backfill_events",
            "SELECT events",
            None,
            "each query starts after the last id the previous one returned (keyset pagination)",
        ),
    ],
    [
        nc("backfill_events", ROOT_NC),
        nc("SELECT events", "every page once"),
    ],
)
def keyset_pagination_sql() -> None:
    """Keyset pagination in SQL: SELECT ... WHERE tenant_id = t AND id > <last id of the
    previous page> ORDER BY id LIMIT 1000.  The literal in each query comes from the previous
    query's rows, which DB spans never record: sequential, and nothing in the trace but the
    query shape says so.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            last = [0, 1187 + i * 3, 2391 + i * 5]
            hops: list[Node | float] = [
                sql("SELECT events", f"SELECT id, kind FROM events WHERE tenant_id = {20 + i} "
                    f"AND id > {lo} ORDER BY id LIMIT 1000", jitter(rng, 20)) for lo in last
            ]  # fmt: skip
            out.append((i * 8.0, root("backfill_events", hops, kind="internal")))
        return out

    otel_case("keyset_pagination_sql", build)


@case(
    "n_plus_one_sql",
    ["independent", "n_plus_one", "loop", "uninstrumented"],
    "otel",
    [
        ind(
            "GET /orders",
            "SELECT order_items",
            None,
            "one query per order id from the listing; the queries read different rows",
        ),
        dep(
            "GET /orders",
            "SELECT orders",
            "SELECT order_items",
            "the ids come from the orders query",
        ),
    ],
    [
        nc("GET /orders", ROOT_NC),
        nc("SELECT orders", "a different customer every trace"),
        nc("SELECT order_items", "every order once"),
    ],
)
def n_plus_one_sql() -> None:
    """An ORM N+1: SELECT id FROM orders WHERE customer_id = ..., then one SELECT * FROM
    order_items WHERE order_id = <id> per order.  The item queries take ids from the first query
    and read different rows: independent of each other, each dependent on the first.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            ids = [5000 + 40 * i + k for k in range(5)]
            hops: list[Node | float] = [
                sql("SELECT orders", f"SELECT id FROM orders WHERE customer_id = {300 + i}",
                    jitter(rng, 10)),
                *[sql("SELECT order_items", f"SELECT * FROM order_items WHERE order_id = {o}",
                      jitter(rng, 12)) for o in ids],
            ]  # fmt: skip
            out.append((i * 5.0, root("GET /orders", hops, **{"http.request.method": "GET"})))
        return out

    otel_case("n_plus_one_sql", build)


@case(
    "indep_db_queries",
    ["independent", "independent_uninstrumented", "uninstrumented"],
    "otel",
    [
        ind(
            "GET /home",
            "SELECT users",
            "SELECT invoices",
            "the user row and the account's "
            "invoices are read by different ids from the session; neither query uses the "
            "other's result",
        ),
    ],
    [
        nc("GET /home", ROOT_NC),
        nc("SELECT users", "a different user every trace"),
        nc("SELECT invoices", "a different account every trace"),
    ],
)
def indep_db_queries() -> None:
    """A home page reads the user row by user id and the account's latest invoices by account id
    (both from the session), sequentially, as two DB CLIENT spans.  Neither query's text
    contains anything from the other's result: independent.  No order evidence exists (always
    the same order), so a tool can offer this at most at medium confidence.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            hops: list[Node | float] = [
                sql("SELECT users", f"SELECT name, plan FROM users WHERE id = {4100 + i}",
                    jitter(rng, 20)),
                sql("SELECT invoices", "SELECT * FROM invoices WHERE account_id = "
                    f"{77000 + 13 * i} ORDER BY due DESC LIMIT 5", jitter(rng, 25)),
            ]  # fmt: skip
            out.append((i * 5.0, root("GET /home", hops, **{"http.request.method": "GET"})))
        return out

    otel_case("indep_db_queries", build)


@case(
    "cacheable_tool_genai",
    ["cacheable", "genai"],
    "otel",
    [
        dep(
            "invoke_agent assistant",
            "chat gpt-4o-mini",
            None,
            "each chat reads the previous tool result",
        ),
        dep(
            "invoke_agent assistant",
            "chat gpt-4o-mini",
            "execute_tool get_exchange_rate",
            "the model asks for the rate and reads it",
        ),
        dep(
            "invoke_agent assistant",
            "execute_tool get_exchange_rate",
            None,
            "the second call is requested by the chat between the two",
        ),
    ],
    [
        nc("invoke_agent assistant", ROOT_NC),
        nc("chat gpt-4o-mini", "different conversations"),
        cache(
            "execute_tool get_exchange_rate",
            "cacheable",
            "the same arguments twice per "
            "trace and across traces seconds apart; every recorded result identical",
        ),
    ],
)
def cacheable_tool_genai() -> None:
    """The model asks for the EUR→USD exchange rate twice in a conversation, and each
    conversation repeats a few seconds apart; every recorded gen_ai.tool.call.result is
    identical.  The tool is a read with identical arguments and results: cacheable.  The chats
    are sequential with the tools (each reads the previous result).
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            rate = tool("get_exchange_rate", jitter(rng, 25), {"from": "EUR", "to": "USD"},
                        {"rate": 1.0825, "as_of": "2026-12-01"})  # fmt: skip
            rate2 = tool("get_exchange_rate", jitter(rng, 25), {"from": "EUR", "to": "USD"},
                         {"rate": 1.0825, "as_of": "2026-12-01"})  # fmt: skip
            hops: list[Node | float] = [
                chat(jitter(rng, 30), '{"tool": "get_exchange_rate"}'), rate,
                chat(jitter(rng, 30), '{"tool": "get_exchange_rate"}'), rate2,
                chat(jitter(rng, 30), f"That is {round(100 * 1.0825 + i, 2)} USD."),
            ]  # fmt: skip
            out.append((i * 12.0, invoke(hops)))
        return out

    otel_case("cacheable_tool_genai", build)


@case(
    "get_results_unrecorded",
    ["cacheable", "unknown_results", "uninstrumented"],
    "otel",
    [
        dep(
            "GET /recommendations",
            "GET /v1/config",
            "GET /v1/reco",
            "the reco request's model parameter comes from the config response",
        ),
    ],
    [
        nc("GET /recommendations", ROOT_NC),
        cache(
            "GET /v1/config",
            "cacheable",
            "the same GET seconds apart; the service config "
            "did not change, but the trace does not record the responses, so a tool can "
            "only say so at low confidence",
            max_confidence="low",
        ),
        nc("GET /v1/reco", "a different user every trace"),
    ],
)
def get_results_unrecorded() -> None:
    """GET /v1/config (no query) in every request, seconds apart; the HTTP client spans do not
    record response bodies.  The config did not change in this run, so a cache would have served
    correct data (truth: cacheable), but nothing in the trace shows it, so a tool may say so
    only at low confidence (max_confidence: low).  The recommendations request takes a value
    from the config (model=v7): dependent.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            hops: list[Node | float] = [
                http("GET", "GET /v1/config", f"{API}/v1/config", jitter(rng, 25)),
                http("GET", "GET /v1/reco", f"{API}/v1/reco?user={USERS[i]}&model=v7",
                     jitter(rng, 30)),
            ]  # fmt: skip
            out.append((i * 10.0, root("GET /recommendations", hops,
                                       **{"http.request.method": "GET"})))  # fmt: skip
        return out

    otel_case("get_results_unrecorded", build)


@case(
    "polling_http_with_sleep",
    ["polling", "dependent", "uninstrumented"],
    "otel",
    [
        dep("render_video", "POST /v1/jobs", "GET /v1/jobs/{id}", "polls the job the POST created"),
        dep(
            "render_video",
            "GET /v1/jobs/{id}",
            None,
            "each poll follows a 'not done yet' and a sleep",
        ),
        dep("render_video", "POST /v1/jobs", "sleep", "waits for the job"),
        dep("render_video", "GET /v1/jobs/{id}", "sleep", "sleeps because the poll said not done"),
        dep("render_video", "sleep", None, "successive backoff sleeps"),
    ],
    [
        nc("render_video", ROOT_NC),
        nc("POST /v1/jobs", "a write"),
        cache(
            "GET /v1/jobs/{id}",
            "polling",
            "the same status URL read repeatedly with sleeps between in one trace",
        ),
        nc("sleep", "a wait, not a call"),
    ],
)
def polling_http_with_sleep() -> None:
    """POST /v1/jobs creates a render job; the service then alternates sleep spans (200 ms) and
    GET /v1/jobs/{id} for the same job until done.  The same read separated by sleeps inside one
    trace is polling: its result changes by design (the trace does not record it), so it is not
    cacheable, and the polls are sequential.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            job = f"j{7700 + i}"
            hops: list[Node | float] = [http("POST", "POST /v1/jobs", f"{API}/v1/jobs", 30)]
            for _ in range(3 + i % 2):
                hops.append(Node("sleep", 0, 200.0, "internal", {}))
                hops.append(http("GET", "GET /v1/jobs/{id}", f"{API}/v1/jobs/{job}",
                                 jitter(rng, 12)))  # fmt: skip
            out.append((i * 20.0, root("render_video", hops, kind="internal")))
        return out

    otel_case("polling_http_with_sleep", build)


@case(
    "volatile_sql_nextval",
    ["volatile_sql", "write"],
    "otel",
    [
        dep(
            "POST /orders",
            "SELECT nextval",
            "INSERT orders",
            "inserts with the id nextval returned",
        ),
    ],
    [
        nc("POST /orders", ROOT_NC),
        nc(
            "SELECT nextval",
            "nextval() returns a new number every call: a cached id would be reused",
        ),
        nc("INSERT orders", "a write"),
    ],
)
def volatile_sql_nextval() -> None:
    """SELECT nextval('orders_id_seq') then INSERT INTO orders with that id.  nextval returns a
    new number on every call, so the identical query text must never be served from a cache (two
    orders would get the same id); the INSERT is a write.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            hops: list[Node | float] = [
                sql("SELECT nextval", "SELECT nextval('orders_id_seq')", jitter(rng, 5)),
                sql("INSERT orders", "INSERT INTO orders (id, customer_id) VALUES ($1, $2)",
                    jitter(rng, 12)),
            ]  # fmt: skip
            out.append((i * 3.0, root("POST /orders", hops, **{"http.request.method": "POST"})))
        return out

    otel_case("volatile_sql_nextval", build)


@case(
    "volatile_sql_now_random",
    ["volatile_sql", "independent"],
    "otel",
    [
        ind(
            "GET /home",
            "SELECT now",
            "SELECT featured",
            "the clock and the random pick read nothing from each other",
        ),
    ],
    [
        nc("GET /home", ROOT_NC),
        nc("SELECT now", "now() changes every call"),
        nc("SELECT featured", "ORDER BY random(): a different pick every call by design"),
    ],
)
def volatile_sql_now_random() -> None:
    """SELECT now() and SELECT ... ORDER BY random() LIMIT 3 (featured products), sequential.
    Both change on every call by design: never cacheable.  Neither reads anything from the
    other: independent.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            hops: list[Node | float] = [
                sql("SELECT now", "SELECT now()", jitter(rng, 15)),
                sql("SELECT featured", "SELECT id, title FROM products ORDER BY random() LIMIT 3",
                    jitter(rng, 25)),
            ]  # fmt: skip
            out.append((i * 3.0, root("GET /home", hops, **{"http.request.method": "GET"})))
        return out

    otel_case("volatile_sql_now_random", build)


@case(
    "per_user_enduser_id",
    ["per_user", "uninstrumented"],
    "otel",
    [
        dep(
            "GET /feed",
            "GET /v1/me/preferences",
            "GET /v1/feed",
            "the feed request's language comes from the preferences",
        ),
    ],
    [
        nc("GET /feed", ROOT_NC),
        nc(
            "GET /v1/me/preferences",
            "the same URL for a different enduser.id in every trace: /me is the caller's own data",
        ),
        nc("GET /v1/feed", "a different user every trace"),
    ],
)
def per_user_enduser_id() -> None:
    """GET /v1/me/preferences: the same URL in every trace, but each trace is a different
    enduser.id, and /me returns the caller's own data.  A cache keyed by the URL would serve one
    user's preferences to another: not cacheable (no user repeats).  The feed request takes the
    language from the preferences: dependent.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            hops: list[Node | float] = [
                http("GET", "GET /v1/me/preferences", f"{API}/v1/me/preferences",
                     jitter(rng, 20), extra={"enduser.id": USERS[i]}),
                http("GET", "GET /v1/feed", f"{API}/v1/feed?lang=en&u={USERS[i]}",
                     jitter(rng, 30), extra={"enduser.id": USERS[i]}),
            ]  # fmt: skip
            out.append((i * 4.0, root("GET /feed", hops, **{"http.request.method": "GET",
                                                             "enduser.id": USERS[i]})))  # fmt: skip
        return out

    otel_case("per_user_enduser_id", build)


@case(
    "per_user_tool_same_result",
    ["per_user", "genai"],
    "otel",
    [
        dep(
            "invoke_agent assistant",
            "execute_tool get_my_calendar",
            "chat gpt-4o-mini",
            "the chat reads the calendar",
        ),
    ],
    [
        nc("invoke_agent assistant", ROOT_NC),
        nc(
            "execute_tool get_my_calendar",
            "no arguments and the same empty result for two of "
            "the users, but it reads the calling user's (user.id) calendar: across users a "
            "cache would leak one user's calendar to another",
        ),
        nc("chat gpt-4o-mini", "different conversations"),
    ],
)
def per_user_tool_same_result() -> None:
    """execute_tool get_my_calendar with empty arguments, each trace a different user.id; three
    of the four users have an empty calendar, so arguments and recorded results are identical
    for them.  The tool still reads the calling user's calendar: across users it is not
    cacheable (identity is part of the key).
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        results = ["[]", "[]", '[{"at": "10:00", "what": "dentist"}]', "[]"]
        for i in range(4):
            hops: list[Node | float] = [
                tool("get_my_calendar", jitter(rng, 25), {}, results[i], **{"user.id": USERS[i]}),
                chat(jitter(rng, 30), "You are free today." if results[i] == "[]" else "Dentist."),
            ]
            top = invoke(hops)
            top.attrs["user.id"] = USERS[i]
            out.append((i * 5.0, top))
        return out

    otel_case("per_user_tool_same_result", build)


@case(
    "per_tenant_api_key",
    ["per_user", "uninstrumented"],
    "otel",
    [],
    [
        nc("GET /billing", ROOT_NC),
        nc(
            "GET /v1/usage",
            "the same URL, but each request authenticates as a different "
            "tenant (authorization header): the usage of one tenant is not another's",
        ),
    ],
)
def per_tenant_api_key() -> None:
    """GET /v1/usage?period=2026-11: the same URL in every trace, each request authenticated as
    a different tenant; the instrumentation records the authorization header as present
    (redacted), nothing else.  The usage belongs to the caller, so a cache keyed by the URL
    would serve one tenant's usage to another.  The trace cannot tell the callers apart, which
    is exactly why the presence of an authorization header must keep the calls apart (not
    cacheable across traces).
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            call = http("GET", "GET /v1/usage", f"{API}/v1/usage?period=2026-11", jitter(rng, 25),
                        extra={"http.request.header.authorization": ["REDACTED"]})  # fmt: skip
            out.append((i * 3.0, root("GET /billing", [call], **{"http.request.method": "GET"})))
        return out

    otel_case("per_tenant_api_key", build)


@case(
    "changing_results_tool_genai",
    ["changing_results", "genai"],
    "otel",
    [
        dep("invoke_agent trader", "chat gpt-4o-mini", None, "each chat reads the previous price"),
        dep(
            "invoke_agent trader",
            "chat gpt-4o-mini",
            "execute_tool get_stock_price",
            "the model asks for the price and reads it",
        ),
        dep(
            "invoke_agent trader",
            "execute_tool get_stock_price",
            None,
            "the second price check is asked for by the chat in between",
        ),
    ],
    [
        nc("invoke_agent trader", ROOT_NC),
        nc("chat gpt-4o-mini", "different conversations"),
        nc(
            "execute_tool get_stock_price",
            "same arguments, but the recorded price differs on every call",
        ),
    ],
)
def changing_results_tool_genai() -> None:
    """A trading assistant checks get_stock_price({"ticker": "ACME"}) twice per conversation;
    every recorded result differs (the price moves).  Identical arguments, changing results: not
    cacheable at any TTL seen here.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        price = 101.0
        for i in range(5):
            hops: list[Node | float] = [chat(jitter(rng, 25), '{"tool": "get_stock_price"}')]
            for _ in range(2):
                price = round(price + rng.uniform(-0.8, 0.9), 2)
                quote = tool(
                    "get_stock_price", jitter(rng, 20), {"ticker": "ACME"}, {"price": price}
                )
                hops += [quote, chat(jitter(rng, 25), f"ACME at {price}")]
            out.append((i * 4.0, invoke(hops, "trader")))
        return out

    otel_case("changing_results_tool_genai", build)


@case(
    "repeats_60s_apart_changing",
    ["changing_results", "ttl"],
    "otel",
    [],
    [
        nc("nightly_sync", ROOT_NC),
        nc(
            "execute_tool get_feature_flags",
            "one call per trace, traces 60 s apart, and the "
            "flags change every 30 s: every repeat's recorded result differs from the one "
            "before, so no TTL would ever give a correct hit",
        ),
    ],
)
def repeats_60s_apart_changing() -> None:
    """A nightly job reads execute_tool get_feature_flags({"env": "prod"}) once per trace; the
    traces are 60 s apart (explicit timestamps) and the flags change every 30 s, so every
    recorded result differs from the one before.  No TTL gives a correct hit.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            flags = {"checkout_v2": i % 2 == 0, "revision": 40 + 2 * i}  # changes every 30 s
            call = tool("get_feature_flags", jitter(rng, 25), {"env": "prod"}, flags)
            out.append((i * 60.0, root("nightly_sync", [call], kind="internal")))
        return out

    otel_case("repeats_60s_apart_changing", build)


@case(
    "repeats_within_trace_60s_between_traces",
    ["ttl", "changing_results"],
    "otel",
    [
        dep(
            "render_page",
            "execute_tool get_feature_flags",
            "render_template",
            "renders with the flags",
        ),
        dep("render_page", "render_template", "publish", "publishes the rendered page"),
        dep(
            "render_page",
            "execute_tool get_feature_flags",
            "publish",
            "transitively, via the rendered page",
        ),
    ],
    [
        nc("render_page", ROOT_NC),
        nc(
            "execute_tool get_feature_flags",
            "re-checked (issue 25), was cacheable with one hit per trace: the second read is "
            "made inside publish, on purpose, to publish with the flags as they are at publish "
            "time; the flags change every 30 s, so a value cached 3 s earlier is stale one "
            "time in ten, and serving it changes what is published. The identical results in "
            "these five traces are luck, not a guarantee: not cacheable",
        ),
        nc("render_template", "different pages"),
        nc("publish", "different pages"),
    ],
)
def repeats_within_trace_60s_between_traces() -> None:
    """Each trace reads the feature flags twice, 3 s apart (the second time when publishing, in
    a child span), with identical results; traces are 60 s apart and the flags change every 30
    s.  Issue 12 labelled it cacheable with one hit per trace; issue 25 re-checked it: the
    re-read at publish time exists to publish with fresh flags, so it is not cacheable (see the
    label).  Counting the 60 s repeats as hits would be wrong either way.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            flags = {"checkout_v2": i % 2 == 0, "revision": 40 + 2 * i}
            first = tool("get_feature_flags", jitter(rng, 25), {"env": "prod"}, flags)
            second = tool("get_feature_flags", jitter(rng, 25), {"env": "prod"}, flags)
            render = Node("render_template", 0, jitter(rng, 15), "internal", {"page": f"p{i}"})
            second.start = 1.0
            publish = Node("publish", 0, second.dur + 12.0, "internal", {"page": f"p{i}"},
                           [second])  # fmt: skip
            hops: list[Node | float] = [first, render, 3000.0, publish]
            out.append((i * 60.0, root("render_page", hops, kind="internal")))
        return out

    otel_case("repeats_within_trace_60s_between_traces", build)


@case(
    "retry_http_503",
    ["retry", "uninstrumented"],
    "otel",
    [
        dep(
            "GET /quote",
            "GET /v1/quotes",
            None,
            "each request retries the one before, which failed with 503",
        ),
    ],
    [
        nc("GET /quote", ROOT_NC),
        nc(
            "GET /v1/quotes",
            "repeats are retries after errors; each trace asks for a different symbol",
        ),
    ],
)
def retry_http_503() -> None:
    """GET /v1/quotes?symbol=... fails with 503 (span status ERROR) once or twice, and the
    service retries after 10 ms until it succeeds.  Retries, not cache hits: sequential by
    nature, and each trace asks for a different symbol.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i, sym in enumerate(["ACME", "GLOBX", "INITECH", "UMBR"]):
            url = f"{API}/v1/quotes?symbol={sym}"
            hops: list[Node | float] = []
            for _ in range(1 + i % 2):
                hops += [http("GET", "GET /v1/quotes", url, jitter(rng, 30), status=503), 10.0]
            hops.append(http("GET", "GET /v1/quotes", url, jitter(rng, 25)))
            out.append((i * 5.0, root("GET /quote", hops, **{"http.request.method": "GET"})))
        return out

    otel_case("retry_http_503", build)


@case(
    "repeated_put",
    ["write"],
    "otel",
    [
        dep(
            "publish_report",
            "PUT /v1/objects/{key}",
            None,
            "two uploads of the same object: the order decides which version stays",
        ),
        dep(
            "publish_report",
            "PUT /v1/objects/{key}",
            "POST /v1/notify",
            "notifies after the upload",
        ),
    ],
    [
        nc("publish_report", ROOT_NC),
        nc("PUT /v1/objects/{key}", "a write, even with identical URL and body"),
        nc("POST /v1/notify", "a write"),
    ],
)
def repeated_put() -> None:
    """The report is uploaded twice with the same PUT URL (a retry-happy client), then a
    notification is POSTed.  PUTs are writes, never cached, even with identical URLs; the two
    PUTs' order decides which version stays; the notification follows the upload.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            url = f"https://storage.example.com/v1/objects/reports/daily-{i}.json"
            hops: list[Node | float] = [
                http("PUT", "PUT /v1/objects/{key}", url, jitter(rng, 30)),
                http("PUT", "PUT /v1/objects/{key}", url, jitter(rng, 30)),
                http("POST", "POST /v1/notify", f"{API}/v1/notify", jitter(rng, 10)),
            ]
            out.append((i * 30.0, root("publish_report", hops, kind="internal")))
        return out

    otel_case("repeated_put", build)


@case(
    "cacheable_sql_select_unrecorded",
    ["cacheable", "unknown_results", "uninstrumented"],
    "otel",
    [
        ind(
            "GET /checkout",
            "SELECT tax_rates",
            "SELECT shipping_zones",
            "different tables read by constants from the request",
        ),
    ],
    [
        nc("GET /checkout", ROOT_NC),
        cache(
            "SELECT tax_rates",
            "cacheable",
            "the same SELECT of a reference table in every "
            "trace seconds apart; rows are not recorded, so at most low confidence",
            max_confidence="low",
        ),
        nc("SELECT shipping_zones", "a different zone every trace"),
    ],
)
def cacheable_sql_select_unrecorded() -> None:
    """SELECT rate FROM tax_rates WHERE region = 'EU' in every checkout, seconds apart, next to
    a per-request shipping-zone lookup.  The tax table is reference data (truth: cacheable), but
    DB spans never record rows, so a tool can offer it only at low confidence.  The two SELECTs
    read different tables with constants from the request: independent.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            hops: list[Node | float] = [
                sql("SELECT tax_rates", "SELECT rate FROM tax_rates WHERE region = 'EU'",
                    jitter(rng, 15)),
                sql("SELECT shipping_zones",
                    f"SELECT * FROM shipping_zones WHERE zip = '{1000 + 7 * i}'", jitter(rng, 20)),
            ]  # fmt: skip
            out.append((i * 6.0, root("GET /checkout", hops, **{"http.request.method": "GET"})))
        return out

    otel_case("cacheable_sql_select_unrecorded", build)


# --- issue 25: values that flow transformed, effects no verb list names, unsafe caches --------

SECRETS = ["s3cr3t-alpha-7", "s3cr3t-bravo-9", "s3cr3t-charl-2", "s3cr3t-delta-4"]


@case(
    "bearer_base64_secret",
    ["dependent", "transformed_flow", "base64"],
    "decorator",
    [
        dep(
            "sync_account",
            "get_secret",
            "call_api",
            "call_api's authorization header carries the secret get_secret returned, "
            "base64-decoded",
        ),
    ],
    [
        nc("sync_account", ROOT_NC),
        nc("get_secret", "a different vault path every trace"),
        nc("call_api", "a different secret every trace"),
    ],
)
def bearer_base64_secret() -> None:
    """get_secret(path) returns the secret base64-encoded (as a vault's HTTP API does); the agent
    decodes it and calls the API with the header ``Bearer <secret>``.  call_api cannot start
    before get_secret returned: the value flows transformed (decoded, then embedded in a header
    value), so no equality of fingerprints shows it.
    """
    import base64

    trace = _t()

    @trace(name="get_secret")
    def get_secret(path: str) -> str:
        net(15)
        return base64.b64encode(SECRETS[int(path[-1])].encode()).decode()

    @trace(name="call_api")
    def call_api(endpoint: str, authorization: str) -> int:
        net(20)
        return len(authorization)

    @trace(name="sync_account")
    def sync(k: int) -> int:
        token = base64.b64decode(get_secret(f"kv/app/{k}")).decode()
        return call_api(f"/v1/sync/{k}", "Bearer " + token)

    for k in range(4):
        sync(k)


@case(
    "id_in_url_path",
    ["dependent", "transformed_flow", "url_path"],
    "decorator",
    [
        dep(
            "show_order",
            "find_order",
            "get_items",
            "the items URL embeds the order id find_order returned (/orders/{id}/items)",
        ),
    ],
    [
        nc("show_order", ROOT_NC),
        nc("find_order", "a different customer every trace"),
        nc("get_items", "a different order every trace"),
    ],
)
def id_in_url_path() -> None:
    """find_order(customer) returns {"id": 48213, ...}; the agent then GETs the URL
    ``/orders/48213/items``.  The id flows as a path segment of a string argument, not as an
    argument of its own: dependent.
    """
    trace = _t()

    @trace(name="find_order")
    def find_order(customer: str) -> dict[str, Any]:
        net(15)
        return {"id": 48213 + 17 * int(customer[-1]), "status": "open"}

    @trace(name="get_items")
    def get_items(url: str) -> list[str]:
        net(20)
        return [f"item-{url.count('/')}"]

    @trace(name="show_order")
    def show(customer: str) -> int:
        order = find_order(customer)
        return len(get_items(f"https://shop.example.com/orders/{order['id']}/items"))

    for c in USERS[:4]:
        show(c)


@case(
    "proof_over_nonce",
    ["dependent", "derived_value", "hash"],
    "decorator",
    [
        dep(
            "login",
            "get_nonce",
            "submit_proof",
            "the proof is sha256(nonce + secret) over the nonce get_nonce returned",
        ),
    ],
    [
        nc("login", ROOT_NC),
        nc("get_nonce", "a fresh nonce every call", harmful="volatile"),
        nc("submit_proof", "a different proof every trace"),
    ],
)
def proof_over_nonce() -> None:
    """A challenge-response login: get_nonce() returns a fresh nonce; the agent computes
    sha256(nonce + secret) in its own code and submits it.  The proof is derived by computation
    from the nonce, so no fingerprint of the nonce appears in submit_proof's arguments; the two
    are strictly sequential.  (A nonce is also never cacheable: a cached one is a replay.)
    """
    import hashlib

    trace = _t()
    nonces = iter(["n-8f3a21", "n-77c0e9", "n-1b9d44", "n-c2e7a0"])

    @trace(name="get_nonce")
    def get_nonce(client: str) -> str:
        net(12)
        return next(nonces)

    @trace(name="submit_proof")
    def submit_proof(client: str, proof: str) -> bool:
        net(18)
        return proof[0] in "0123456789abcdef"

    @trace(name="login")
    def login(client: str) -> bool:
        nonce = get_nonce(client)
        return submit_proof(client, hashlib.sha256((nonce + "k3y").encode()).hexdigest())

    for c in ["cli-1", "cli-2", "cli-3", "cli-4"]:
        login(c)


@case(
    "json_string_output_field",
    ["dependent", "transformed_flow", "json_in_string"],
    "decorator",
    [
        dep(
            "make_report",
            "run_execution",
            "get_report",
            "get_report takes the report id inside the JSON string of run_execution's "
            "'output' field",
        ),
    ],
    [
        nc("make_report", ROOT_NC),
        nc("run_execution", "a different input every trace"),
        nc("get_report", "a different report every trace"),
    ],
)
def json_string_output_field() -> None:
    """A Step Functions style run: run_execution returns {"status": "SUCCEEDED", "output":
    "{\\"report_id\\": \\"rpt-5521\\"}"} (the output is a JSON document inside a string field);
    the agent parses it and calls get_report(report_id).  Dependent.
    """
    trace = _t()

    @trace(name="run_execution")
    def run_execution(state_machine: str, payload: str) -> dict[str, str]:
        net(25)
        return {
            "status": "SUCCEEDED",
            "output": json.dumps({"report_id": f"rpt-{len(payload)}{payload[-1]}"}),
        }

    @trace(name="get_report")
    def get_report(report_id: str) -> str:
        net(15)
        return report_id.upper()

    @trace(name="make_report")
    def make(k: int) -> str:
        done = run_execution("monthly-report", f"region-{k}")
        return get_report(json.loads(done["output"])["report_id"])

    for k in range(4):
        make(k)


@case(
    "switch_context_returns_nothing",
    ["dependent", "state_change_unnamed", "returns_nothing"],
    "decorator",
    [
        dep(
            "inspect_cluster",
            "switch_context",
            "list_pods",
            "list_pods reads the CLI context switch_context just changed",
            harmful="state-changing",
        ),
    ],
    [
        nc("inspect_cluster", ROOT_NC),
        nc("switch_context", "changes the CLI state", harmful="state-changing"),
        nc("list_pods", "a different cluster every trace"),
    ],
)
def switch_context_returns_nothing() -> None:
    """A kubectl-like agent: switch_context(name) returns nothing and changes the CLI's current
    context (a file in the working directory); list_pods(namespace) reads that context to know
    which cluster to ask.  No value flows between them, only state: dependent.
    """
    import os

    trace = _t()
    state = os.path.join(tempfile.gettempdir(), "kubeconfig")

    @trace(name="switch_context")
    def switch_context(name: str) -> None:
        net(10)
        with open(state, "w") as f:
            f.write(name)

    @trace(name="list_pods")
    def list_pods(namespace: str) -> list[str]:
        net(15)
        with open(state) as f:
            return [f"{f.read()}/{namespace}/pod-1"]

    @trace(name="inspect_cluster")
    def inspect(k: int) -> int:
        switch_context(f"cluster-{k}")
        return len(list_pods("default"))

    for k in range(4):
        inspect(k)


@case(
    "args_hash_without_arg_fps",
    ["dependent", "small_int_id", "no_arg_fps"],
    "otel",
    [
        dep(
            "answer",
            "lookup_user",
            "get_orders",
            "get_orders takes the small user id lookup_user returned (the producer wrote "
            "only args_hash, no per-argument fingerprints)",
        ),
    ],
    [
        nc("answer", ROOT_NC),
        nc("lookup_user", "a different e-mail every trace"),
        nc("get_orders", "a different user every trace"),
    ],
)
def args_hash_without_arg_fps() -> None:
    """Spans as an older tracelens (or another producer) writes them: ``tracelens.args_hash``
    and ``tracelens.result_hash`` but no ``tracelens.arg_fps`` / ``result_fps``.  lookup_user
    returns a small id that get_orders takes.  Without per-argument fingerprints nothing shows
    what was passed: absence of a link is no evidence of independence.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            h = zlib.crc32(f"{i}".encode())
            a = Node(
                "lookup_user",
                0,
                jitter(rng, 15),
                "internal",
                {"tracelens.args_hash": f"{h:032x}", "tracelens.result_hash": f"{h + 1:032x}"},
            )
            b = Node(
                "get_orders",
                0,
                jitter(rng, 20),
                "internal",
                {"tracelens.args_hash": f"{h + 2:032x}", "tracelens.result_hash": f"{h + 3:032x}"},
            )
            out.append((i * 4.0, root("answer", [a, b], kind="internal")))
        return out

    otel_case("args_hash_without_arg_fps", build)


@case(
    "unzip_then_read_file",
    ["dependent", "state_change_unnamed", "genai"],
    "otel",
    [
        dep(
            "invoke_agent coder",
            "execute_tool unzip",
            "execute_tool read_file",
            "read_file reads a file unzip just extracted into the working directory",
            harmful="state-changing",
        ),
    ],
    [
        nc("invoke_agent coder", ROOT_NC),
        nc("execute_tool unzip", "writes files", harmful="state-changing"),
        nc("execute_tool read_file", "a different file every trace"),
    ],
)
def unzip_then_read_file() -> None:
    """unzip({"archive": "bundle-N.zip"}) extracts into the working directory and returns an empty
    result; read_file({"path": "bundle/config.yaml"}) then reads a file it extracted.  Nothing of
    unzip's (empty) result is in read_file's arguments: the data flows through the file system.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            u = tool("unzip", jitter(rng, 30), {"archive": f"bundle-{i}.zip"}, "")
            r = tool(
                "read_file",
                jitter(rng, 12),
                {"path": f"bundle-{i}/config.yaml"},
                f"name: svc{i}\nreplicas: {i + 2}",
            )
            out.append((i * 5.0, invoke([u, r], agent="coder")))
        return out

    otel_case("unzip_then_read_file", build)


@case(
    "place_order_then_positions",
    ["dependent", "state_change_unnamed", "genai", "write"],
    "otel",
    [
        dep(
            "invoke_agent trader",
            "execute_tool place_order",
            "execute_tool get_positions",
            "the positions include the order just placed",
            harmful="state-changing",
        ),
    ],
    [
        nc("invoke_agent trader", ROOT_NC),
        nc(
            "execute_tool place_order",
            "places a real order every run, even with the same arguments",
            harmful="state-changing",
        ),
        nc("execute_tool get_positions", "changes with every order placed"),
    ],
)
def place_order_then_positions() -> None:
    """A trading agent places the same order every run (place_order({"symbol": "ACME", "qty":
    10}), result {"status": "accepted"}), then reads its positions (get_positions({})).  Each
    place_order is a new order: never cacheable, whatever repeats; the positions read after it
    depends on it.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            p = tool(
                "place_order",
                jitter(rng, 40),
                {"symbol": "ACME", "qty": 10},
                {"status": "accepted"},
            )
            g = tool("get_positions", jitter(rng, 20), {}, {"ACME": 10 * (i + 1)})
            out.append((i * 3.0, invoke([p, g], agent="trader")))
        return out

    otel_case("place_order_then_positions", build)


@case(
    "graphql_mutation_then_query",
    ["dependent", "state_change_unnamed", "graphql"],
    "otel",
    [
        dep(
            "POST /checkout",
            "graphql.execute",
            None,
            "the query reads the cart the mutation just changed",
            harmful="state-changing",
        ),
    ],
    [
        nc("POST /checkout", ROOT_NC),
        nc(
            "graphql.execute",
            "a mutation, then a query of what it changed",
            harmful="state-changing",
        ),
    ],
)
def graphql_mutation_then_query() -> None:
    """One operation name for everything (``graphql.execute``): an addToCart mutation, then a
    cart query of the same cart; the split is only in ``graphql.operation.type`` and
    ``graphql.document``.  The query reads what the mutation wrote: dependent.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            m = Node(
                "graphql.execute",
                0,
                jitter(rng, 25),
                "client",
                {
                    "graphql.operation.type": "mutation",
                    "graphql.operation.name": "AddToCart",
                    "graphql.document": f'mutation AddToCart {{ addToCart(cartId: "c{i}", '
                    f'sku: "k{i}") {{ id }} }}',
                },
            )
            q = Node(
                "graphql.execute",
                0,
                jitter(rng, 20),
                "client",
                {
                    "graphql.operation.type": "query",
                    "graphql.operation.name": "Cart",
                    "graphql.document": f'query Cart {{ cart(id: "c{i}") {{ items {{ sku }} }} }}',
                },
            )
            out.append((i * 4.0, root("POST /checkout", [m, q], **{"http.request.method": "POST"})))
        return out

    otel_case("graphql_mutation_then_query", build)


@case(
    "semaphore_per_domain",
    ["dependent", "contention"],
    "otel",
    [
        dep(
            "crawl_site",
            "GET page",
            None,
            "each fetch holds the domain's one-permit semaphore (acquire_domain_slot): run "
            "together they still queue, one at a time",
        ),
    ],
    [
        nc("crawl_site", ROOT_NC),
        nc("GET page", "a different page every call"),
        nc("acquire_domain_slot", "a wait, not a call"),
    ],
)
def semaphore_per_domain() -> None:
    """A crawler fetches four pages of one site; each fetch first takes the site's one-permit
    semaphore (an ``acquire_domain_slot`` child span) and holds it for the request.  The fetches
    take different URLs and nothing of each other, but concurrently they would queue on the
    semaphore: no time is saved.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            pages: list[Node | float] = []
            for k in range(4):
                dur = jitter(rng, 70)
                slot = Node("acquire_domain_slot", 0.1, 0.4, "internal", {"semaphore.permits": 1})
                page = http("GET", "GET page", f"https://docs.example.org/p/{i}-{k}", dur)
                page.children = [slot]
                pages.append(page)
            out.append((i * 5.0, root("crawl_site", pages, kind="internal")))
        return out

    otel_case("semaphore_per_domain", build)


@case(
    "tenant_header_get",
    ["per_user", "tenant_keyed"],
    "otel",
    [],
    [
        nc("GET /reports", ROOT_NC),
        nc(
            "GET /v1/reports/summary",
            "the same URL for a different x-tenant-id every trace: "
            "one tenant's report is not another's",
            harmful="tenant-keyed",
        ),
    ],
)
def tenant_header_get() -> None:
    """GET /v1/reports/summary, the same URL in every trace, told apart per tenant only by the
    ``http.request.header.x-tenant-id`` header.  A cache keyed by the URL would leak one
    tenant's report to another.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(5):
            call = http(
                "GET",
                "GET /v1/reports/summary",
                f"{API}/v1/reports/summary",
                jitter(rng, 30),
                extra={"http.request.header.x-tenant-id": [f"t-{100 + i}"]},
            )
            out.append((i * 2.0, root("GET /reports", [call], **{"http.request.method": "GET"})))
        return out

    otel_case("tenant_header_get", build)


@case(
    "cart_write_between",
    ["write_between", "dependent"],
    "otel",
    [
        dep(
            "POST /add",
            "GET /v1/cart",
            "POST /v1/cart/items",
            "the item is added to the cart just read, and the second read shows it",
            harmful="state-changing",
        ),
        dep("POST /add", "GET /v1/cart", None, "the second read follows the write"),
    ],
    [
        nc("POST /add", ROOT_NC),
        nc(
            "GET /v1/cart",
            "GET cart, POST item, GET cart: the write changes what the second read returns",
            harmful="state-changing",
        ),
        nc("POST /v1/cart/items", "a write", harmful="state-changing"),
    ],
)
def cart_write_between() -> None:
    """GET the cart, POST an item to it, GET the cart again (the same URL twice in a trace).
    The second read must see the item: a cache filled by the first read would serve the stale
    cart.  Response bodies are not recorded.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            cart = f"{API}/v1/cart/c-{70 + i}"
            hops: list[Node | float] = [
                http("GET", "GET /v1/cart", cart, jitter(rng, 20)),
                http("POST", "POST /v1/cart/items", cart + "/items", jitter(rng, 30)),
                http("GET", "GET /v1/cart", cart, jitter(rng, 20)),
            ]
            out.append((i * 3.0, root("POST /add", hops, **{"http.request.method": "POST"})))
        return out

    otel_case("cart_write_between", build)


@case(
    "quota_count_between_inserts",
    ["write_between", "dependent"],
    "otel",
    [
        dep(
            "POST /events",
            "SELECT quota",
            "INSERT quota",
            "inserts only if the count was under quota",
            harmful="state-changing",
        ),
        dep("POST /events", "SELECT quota", None, "the count after the insert differs"),
        dep("POST /events", "INSERT quota", None, "two inserts: the order matters"),
    ],
    [
        nc("POST /events", ROOT_NC),
        nc("SELECT quota", "a count of rows the inserts between change", harmful="state-changing"),
        nc("INSERT quota", "a write", harmful="state-changing"),
    ],
)
def quota_count_between_inserts() -> None:
    """A rate limiter: SELECT COUNT(*) FROM quota_usage WHERE tenant = 't1', INSERT INTO
    quota_usage, and again, twice per request.  The same SELECT text repeats, but every insert
    changes the count: a cached count would let the tenant past its quota.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            count = "SELECT COUNT(*) FROM quota_usage WHERE tenant = 't1'"
            hops: list[Node | float] = []
            for k in range(2):
                hops.append(sql("SELECT quota", count, jitter(rng, 8)))
                hops.append(
                    sql(
                        "INSERT quota",
                        f"INSERT INTO quota_usage (tenant, ev) VALUES ('t1', 'e{i}{k}')",
                        jitter(rng, 10),
                    )
                )
            out.append((i * 2.0, root("POST /events", hops, **{"http.request.method": "POST"})))
        return out

    otel_case("quota_count_between_inserts", build)


@case(
    "get_current_time",
    ["volatile", "uninstrumented"],
    "otel",
    [dep("GET /stamp", "GET /v1/time", "GET /v1/sign", "signs the time just read")],
    [
        nc("GET /stamp", ROOT_NC),
        nc("GET /v1/time", "the current time: a different answer every call", harmful="volatile"),
        nc("GET /v1/sign", "a different time every call"),
    ],
)
def get_current_time() -> None:
    """GET https://time.example.com/v1/time (no query) in every request, seconds apart, then a
    signature over the time.  The same URL returns a different answer every call by nature:
    never cacheable (the bodies are not recorded, so nothing in the trace says so but the URL).
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            hops: list[Node | float] = [
                http("GET", "GET /v1/time", "https://time.example.com/v1/time", jitter(rng, 10)),
                http(
                    "GET", "GET /v1/sign", f"{API}/v1/sign?t={1700000000 + 3 * i}", jitter(rng, 15)
                ),
            ]
            out.append((i * 3.0, root("GET /stamp", hops, **{"http.request.method": "GET"})))
        return out

    otel_case("get_current_time", build)


@case(
    "pg_notify_select",
    ["volatile_sql", "write"],
    "otel",
    [],
    [
        nc("POST /jobs", ROOT_NC),
        nc(
            "SELECT pg_notify",
            "sends a notification every call (a SELECT with a side effect)",
            harmful="state-changing",
        ),
    ],
)
def pg_notify_select() -> None:
    """SELECT pg_notify('jobs', 'refresh') in every request: a SELECT by its verb, but every call
    sends a notification to the listeners.  Serving it from a cache would drop them.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            n = sql("SELECT pg_notify", "SELECT pg_notify('jobs', 'refresh')", jitter(rng, 6))
            out.append((i * 2.0, root("POST /jobs", [n], **{"http.request.method": "POST"})))
        return out

    otel_case("pg_notify_select", build)


@case(
    "queue_pop_get",
    ["consumed", "dependent"],
    "otel",
    [
        dep(
            "render_worker",
            "GET /v1/queues/render/pop",
            None,
            "each pop consumes the next job; the order is the queue's",
            harmful="consumed",
        )
    ],
    [
        nc("render_worker", ROOT_NC),
        nc(
            "GET /v1/queues/render/pop",
            "a GET that consumes a job: every call takes a different one",
            harmful="consumed",
        ),
    ],
)
def queue_pop_get() -> None:
    """A worker takes jobs with GET /v1/queues/render/pop (a GET, but it removes the job it
    returns), three times per trace, same URL.  Each call consumes a job: never cacheable, and
    the pops are the queue's order.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            pops: list[Node | float] = [
                http(
                    "GET",
                    "GET /v1/queues/render/pop",
                    f"{API}/v1/queues/render/pop",
                    jitter(rng, 15),
                )
                for _ in range(3)
            ]
            out.append((i * 2.0, root("render_worker", pops, kind="internal")))
        return out

    otel_case("queue_pop_get", build)


# --- issue 25, held out: written after the rules above were done, never tuned to -----------


@case(
    "held_hex_token_header",
    ["dependent", "transformed_flow", "held_out"],
    "decorator",
    [
        dep(
            "push_metrics",
            "get_token",
            "post_metrics",
            "the header carries the token get_token returned hex-encoded, decoded",
        )
    ],
    [
        nc("push_metrics", ROOT_NC),
        nc("get_token", "a different service account every trace"),
        nc("post_metrics", "a different token every trace", harmful="state-changing"),
    ],
)
def held_hex_token_header() -> None:
    """get_token(account) returns the token hex-encoded; the agent decodes it and sends
    ``Token <token>`` with post_metrics.  Dependent through a decoding.
    """
    trace = _t()

    @trace(name="get_token")
    def get_token(account: str) -> str:
        net(12)
        return f"tok_{account}_{len(account) * 7}".encode().hex()

    @trace(name="post_metrics")
    def post_metrics(series: str, auth: str) -> int:
        net(18)
        return len(series)

    @trace(name="push_metrics")
    def push(k: int) -> int:
        token = bytes.fromhex(get_token(f"sa-{k}")).decode()
        return post_metrics(f"cpu.host{k}", "Token " + token)

    for k in range(4):
        push(k)


@case(
    "held_url_encoded_title",
    ["dependent", "transformed_flow", "held_out"],
    "decorator",
    [
        dep(
            "open_doc",
            "search_titles",
            "fetch_doc",
            "the document URL carries the title search_titles returned, URL-encoded",
        )
    ],
    [
        nc("open_doc", ROOT_NC),
        nc("search_titles", "a different query every trace"),
        nc("fetch_doc", "a different document every trace"),
    ],
)
def held_url_encoded_title() -> None:
    """search_titles(query) returns {"title": "Q3 report & plan 2"}; the agent fetches
    ``https://docs.example.com/doc?title=Q3%20report%20%26%20plan%202``.  Dependent.
    """
    from urllib.parse import quote

    trace = _t()

    @trace(name="search_titles")
    def search_titles(query: str) -> dict[str, str]:
        net(15)
        return {"title": f"Q{len(query) % 4 + 1} report & plan {len(query)}"}

    @trace(name="fetch_doc")
    def fetch_doc(url: str) -> int:
        net(20)
        return len(url)

    @trace(name="open_doc")
    def open_doc(q: str) -> int:
        title = search_titles(q)["title"]
        return fetch_doc("https://docs.example.com/doc?title=" + quote(title))

    for q in ["quarterly numbers", "plans", "budget review", "hiring"]:
        open_doc(q)


@case(
    "held_independent_path_reads",
    ["independent", "held_out"],
    "decorator",
    [
        ind(
            "load_home",
            "fetch_user",
            "fetch_repo",
            "both URLs come from the request; neither takes the other's result",
        )
    ],
    [
        nc("load_home", ROOT_NC),
        nc("fetch_user", "a different user every trace"),
        nc("fetch_repo", "a different repository every trace"),
    ],
)
def held_independent_path_reads() -> None:
    """A home page fetches /users/{user} and /repos/{repo}, both from the request, sequentially.
    Their URLs share words (https, api, example) but no value of one's result is in the other's
    URL: independent (every argument fingerprinted, with its parts).
    """
    trace = _t()

    @trace(name="fetch_user")
    def fetch_user(url: str) -> dict[str, str]:
        net(20)
        return {"login": url.rsplit("/", 1)[-1], "plan": "pro"}

    @trace(name="fetch_repo")
    def fetch_repo(url: str) -> dict[str, int]:
        net(20)
        return {"stars": len(url), "forks": 3}

    @trace(name="load_home")
    def load(user: str, repo: str) -> int:
        u = fetch_user(f"https://api.example.com/users/{user}")
        r = fetch_repo(f"https://api.example.com/repos/{repo}")
        return len(u) + r["stars"]

    for k in range(4):
        load(USERS[k], f"r-{900 + 13 * k}")


@case(
    "held_dequeue_tool",
    ["consumed", "genai", "held_out"],
    "otel",
    [
        dep(
            "invoke_agent mailer",
            "execute_tool dequeue_task",
            None,
            "each dequeue takes the next task",
            harmful="consumed",
        )
    ],
    [
        nc("invoke_agent mailer", ROOT_NC),
        nc(
            "execute_tool dequeue_task",
            "consumes a task every call, even when the answers look alike",
            harmful="consumed",
        ),
    ],
)
def held_dequeue_tool() -> None:
    """dequeue_task({"queue": "emails"}) twice per conversation; the recorded results are the
    same ({"task": "send-digest"}: the queue holds digests), but each call removes one.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            calls: list[Node | float] = [
                tool("dequeue_task", jitter(rng, 15), {"queue": "emails"}, {"task": "send-digest"})
                for _ in range(2)
            ]
            out.append((i * 3.0, invoke(calls, agent="mailer")))
        return out

    otel_case("held_dequeue_tool", build)


@case(
    "held_workspace_header_get",
    ["per_user", "tenant_keyed", "held_out"],
    "otel",
    [],
    [
        nc("GET /home", ROOT_NC),
        nc(
            "GET /v1/dashboard",
            "the same URL per x-workspace-id: one workspace's dashboard is not another's",
            harmful="tenant-keyed",
        ),
    ],
)
def held_workspace_header_get() -> None:
    """GET /v1/dashboard, the same URL in every trace, per workspace only by the header
    ``http.request.header.x-workspace-id``.  A cache keyed by the URL would leak across
    workspaces.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            call = http(
                "GET",
                "GET /v1/dashboard",
                f"{API}/v1/dashboard",
                jitter(rng, 25),
                extra={"http.request.header.x-workspace-id": [f"ws-{40 + i}"]},
            )
            out.append((i * 2.0, root("GET /home", [call], **{"http.request.method": "GET"})))
        return out

    otel_case("held_workspace_header_get", build)


@case(
    "held_pool_wait_db",
    ["dependent", "contention", "held_out"],
    "otel",
    [
        dep("GET /report", "SELECT sales", "SELECT refunds", "one pooled connection: they queue"),
        dep("GET /report", "SELECT sales", "SELECT visits", "one pooled connection: they queue"),
        dep("GET /report", "SELECT refunds", "SELECT visits", "one pooled connection: they queue"),
    ],
    [
        nc("GET /report", ROOT_NC),
        nc("SELECT sales", "a different day every trace"),
        nc("SELECT refunds", "a different day every trace"),
        nc("SELECT visits", "a different day every trace"),
        nc("db.pool.wait", "a wait, not a call"),
    ],
)
def held_pool_wait_db() -> None:
    """Three report queries on different tables, each first waiting for the pool's one
    connection (a ``db.pool.wait`` child span).  Independent by data, but concurrently they
    queue on the connection: nothing is saved.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            qs: list[Node | float] = []
            for t in ("sales", "refunds", "visits"):
                q = sql(
                    f"SELECT {t}",
                    f"SELECT sum(x) FROM {t} WHERE day = '2026-11-0{i + 1}'",
                    jitter(rng, 40),
                )
                q.children = [Node("db.pool.wait", 0.1, 0.3, "internal", {"db.pool.size": 1})]
                qs.append(q)
            out.append((i * 3.0, root("GET /report", qs, **{"http.request.method": "GET"})))
        return out

    otel_case("held_pool_wait_db", build)


@case(
    "held_delete_then_get",
    ["dependent", "write", "held_out"],
    "otel",
    [
        dep(
            "POST /cleanup",
            "DELETE /v1/files",
            "GET /v1/files",
            "checks the file is gone",
            harmful="state-changing",
        )
    ],
    [
        nc("POST /cleanup", ROOT_NC),
        nc("DELETE /v1/files", "a write", harmful="state-changing"),
        nc("GET /v1/files", "a different file every trace"),
    ],
)
def held_delete_then_get() -> None:
    """DELETE /v1/files/f-N, then GET /v1/files/f-N/meta to confirm it is gone: the read
    depends on the delete.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            f = f"{API}/v1/files/f-{9 + i}"
            hops: list[Node | float] = [
                http("DELETE", "DELETE /v1/files", f, jitter(rng, 25)),
                http("GET", "GET /v1/files", f + "/meta", jitter(rng, 15)),
            ]
            out.append((i * 2.0, root("POST /cleanup", hops, **{"http.request.method": "POST"})))
        return out

    otel_case("held_delete_then_get", build)


@case(
    "held_setval_sql",
    ["volatile_sql", "write", "held_out"],
    "otel",
    [],
    [
        nc("POST /reset", ROOT_NC),
        nc("SELECT setval", "moves a sequence every call", harmful="state-changing"),
    ],
)
def held_setval_sql() -> None:
    """SELECT setval('invoice_seq', 1000) in every request: a SELECT that moves a sequence."""

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            n = sql("SELECT setval", "SELECT setval('invoice_seq', 1000)", jitter(rng, 5))
            out.append((i * 2.0, root("POST /reset", [n], **{"http.request.method": "POST"})))
        return out

    otel_case("held_setval_sql", build)


@case(
    "held_graphql_document_only",
    ["dependent", "graphql", "write_between", "held_out"],
    "otel",
    [
        dep(
            "POST /cart",
            "graphql.execute",
            None,
            "query, mutation of the cart, query again",
            harmful="state-changing",
        )
    ],
    [
        nc("POST /cart", ROOT_NC),
        nc(
            "graphql.execute",
            "the mutation between the two identical queries changes the answer",
            harmful="state-changing",
        ),
    ],
)
def held_graphql_document_only() -> None:
    """``graphql.execute`` three times: query Cart, mutation RemoveItem, query Cart again (the
    same document); only ``graphql.document`` says which is which (no operation type
    attribute).
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            q = f'query Cart {{ cart(id: "k{i}") {{ items {{ sku }} }} }}'
            m = f'mutation RemoveItem {{ removeItem(cartId: "k{i}", sku: "s1") {{ id }} }}'
            ops: list[Node | float] = [
                Node("graphql.execute", 0, jitter(rng, 20), "client", {"graphql.document": d})
                for d in (q, m, q)
            ]
            out.append((i * 3.0, root("POST /cart", ops, **{"http.request.method": "POST"})))
        return out

    otel_case("held_graphql_document_only", build)


@case(
    "held_cacheable_currency_list",
    ["cacheable", "genai", "held_out"],
    "otel",
    [
        dep(
            "invoke_agent shop",
            "execute_tool list_currencies",
            "chat gpt-4o-mini",
            "the chat reads the list",
        )
    ],
    [
        nc("invoke_agent shop", ROOT_NC),
        cache(
            "execute_tool list_currencies",
            "cacheable",
            "reference data: the same empty "
            "arguments and the same recorded list in every trace seconds apart",
        ),
        nc("chat gpt-4o-mini", "different conversations"),
    ],
)
def held_cacheable_currency_list() -> None:
    """list_currencies({}) in every conversation seconds apart, always the same recorded list:
    reference data, cacheable.
    """

    def build(rng: random.Random) -> list[tuple[float, Node]]:
        out = []
        for i in range(4):
            t = tool("list_currencies", jitter(rng, 30), {}, ["EUR", "USD", "JPY", "NOK"])
            c = chat(jitter(rng, 300), f"We accept EUR, USD, JPY and NOK ({i}).")
            out.append((i * 3.0, invoke([t, c], agent="shop")))
        return out

    otel_case("held_cacheable_currency_list", build)


# --- docs/verdicts.md ------------------------------------------------------------------------

DOC_INTRO = """\
# The verdict corpus: labelled agent patterns

`fixtures/verdicts/` holds {n} small cases, each a named agent pattern run for real and traced by
real instrumentation, with the verdict a careful engineer gives it.  They are the independent
truth the analyzer's `parallelizable`, `cacheable` and `polling` findings are scored against
(`tests/test_verdicts.py`, issue 12).  This page and `labels.json` are written by
`python scripts/make_verdict_corpus.py` from the case code itself: the reasoning below is the
docstring of the function that runs the agent, next to the data flow it describes.  **No label
was derived from what tracelens reports.**

## How the cases are made

* **decorator** ({n_dec} cases): Python agent code decorated with tracelens' `@trace`, exported by
  `configure(file=...)` (OTLP JSON Lines), one process per case.  Hops do real work: HTTP
  requests to a local server that answers after 8-40 ms, SQLite queries, file writes and
  fsyncs, `git` in temporary repositories, CPU loops (hashing); they return real values and the
  agent passes real values on (ids, dicts, strings cut out of model output...).  Timings are
  measured, so they vary a little from run to run; the structure does not.
* **otel** ({n_otel} cases): traces as other instrumentations emit them, written with the
  OpenTelemetry SDK directly (a private `TracerProvider`, explicit `start_time` / `end_time`
  in ns from 2025-12-01T12:00:00Z, seeded ids and jitter), carrying semantic-convention
  attributes: `gen_ai.operation.name`, `gen_ai.usage.*`, `gen_ai.tool.name`,
  `gen_ai.tool.call.arguments` / `.result`, `gen_ai.output.messages`, `http.request.method` +
  `url.full` on CLIENT spans, `db.system.name` + `db.query.text`, `enduser.id`, `user.id`,
  `session.id`, `http.request.header.authorization`, OpenInference's `openinference.span.kind`,
  `input.value` / `output.value`.

Each file holds 3-6 traces of its pattern, so cross-trace evidence (orders, overlaps) and cache
windows exist.  Regenerate with `python scripts/make_verdict_corpus.py` (about 15 s); the
decorator cases pick up whatever the instrumentation currently writes.

## What a label means

Labels are per case, under `parallel` and `cache`, and are exhaustive: every pair of distinct
sibling operations under a parent, every operation repeated under one parent (a loop, `names:
[A]`) and every operation name in the file has one (a test checks this against the traces'
structure), so any finding can be scored.

* **independent** (a pair, or a loop's iterations): running them concurrently, e.g. under
  `asyncio.gather`, gives every hop the same inputs and leaves every result and every side effect
  the same, and saves time (the hops wait on I/O, not on the GIL).
* **dependent**: anything else. A value flows from one to the other (equal, a substring, a
  field of JSON, a cursor); one changes a resource the other uses (files, a repository, a
  ticket); one only runs because of the other's result (an authorization check, a poll saying
  "done", a retry after a failure, a loop stopping on a short page); or transitively so
  through a third hop.
* **cacheable**: a cache keyed by the call's arguments (and by the caller's identity where the
  call reads per-caller data) would have served the repeats seen in these traces with exactly
  the result the real call returned.  `max_confidence` caps the confidence where the traces
  cannot show it (results never recorded); `max_hits_per_trace` caps how many repeats a cache
  could really serve (repeats further apart than the results stay the same).
* **not_cacheable**: writes and state-changing calls (whatever their name), volatile reads
  (`nextval`, `now()`, `random()`), results that change between calls, per-caller reads seen
  only for different callers, retries, and operations that never repeat with the same
  arguments (a cache would never hit).
* **polling**: the same read repeated inside one trace with a sleep or wait between, waiting for
  its result to change: its own finding, never cacheable.
* **harmful** (on a `dependent` pair or loop, or a `not_cacheable` operation; issue 25):
  acting on a parallelizable or cacheable finding there does damage, not just wastes effort:
  `state-changing` (a write, a context switch, an order placed, a write between repeats),
  `tenant-keyed` (one caller's data served to another), `volatile` (the clock, a nonce),
  `consumed` (a queue pop).  No such finding may cover it at any confidence.
* **saving_ms**: the range a correct replay's p50 saving must fall in (parent work kept).
* **expect_one_finding**: one pattern seen in both orders must be one finding.

## What the tests check

Precision of **high**-confidence `parallelizable` and `cacheable` findings is 100% (a
parallelizable finding is right only if every pair of its names, or its loop, is labelled
independent under its parent; unlabelled counts as wrong); recall of independent pairs / loops,
of cacheable operations and of polling operations is at least 80% at any confidence; nothing
labelled `not_cacheable` or `polling` is offered as `cacheable` at any confidence; the labelled
confidence caps and hit caps hold; the both-orders cases give one finding; the parent-work case's
saving is in range; every false-positive class of the issue has a case (pattern tags); no
parallelizable or cacheable finding at any confidence covers a label marked `harmful`; every
high-confidence finding saves something.
`python tests/test_verdicts.py` prints what the analyzer says for every case next to the label.

## Round two (issue 25)

Issue 25 added a case for each class it named: values that flow transformed (a base64 secret
sent decoded in a `Bearer` header, an id in a URL path, a hash over a fetched nonce, an id in a
JSON string field, a tool that returns nothing and changes state), `args_hash` without
`arg_fps`, state changes the old verb list missed (`unzip`, `place_order`, a GraphQL mutation
under one operation name), a shared semaphore, and caches that must never serve (a tenant
header, a write between repeats, a quota count between inserts, the current time,
`pg_notify`, a queue pop).  It re-checked four labels, with the reasoning written next to each:
`repeats_within_trace_60s_between_traces` (now not cacheable: the re-read at publish time is
there to be fresh), `cacheable_schema_lookup` (the per-name pair still holds through the
transitive link), `independent_common_values` (`page=1` is a first page, not a dependency),
`cacheable_embedding` (cacheable at most medium: the key must hold the model revision).

**Held out.**  The ten `held_*` cases were written after the round-two rules were in place, as
variants of the classes (a hex-encoded token, a URL-encoded title, independent reads whose URLs
share words, a dequeue tool with identical answers, a workspace header, a one-connection pool,
DELETE then GET, `setval`, a GraphQL mutation known only from its document, a true cacheable
reference list) and checked once, honestly: nine came out right; `held_workspace_header_get`
did not (a cacheable-low finding: the identity rule named tenant/user/session keys, and an
`x-workspace-id` header is none of them).  The rule was then generalised, not special-cased: a
read's recorded request headers that are not transport-only are part of its key.  That case
no longer counts as held out.  Two other changes came after the held-out cases were written,
prompted by tuned cases (`cacheable_schema_lookup`, `args_hash_without_arg_fps`): a value the
parent already had links no sibling by data flow, and a hop with `args_hash` but no `arg_fps`
is judged like one without fingerprints; the held-out cases were re-checked after them and
stayed right.

## The cases
"""


def wrap(text: str) -> str:
    import textwrap

    indent = "  " if text.startswith("- ") else ""
    return textwrap.fill(
        text, width=100, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False
    )


def write_docs(path: Path) -> None:
    import inspect

    cases = list(CASES.values())
    lines = [
        DOC_INTRO.format(
            n=len(cases),
            n_dec=sum(c.source == "decorator" for c in cases),
            n_otel=sum(c.source == "otel" for c in cases),
        )
    ]
    for c in cases:
        lines.append(f"### `{c.name}`\n")
        lines.append(f"*{c.source}*; patterns: {', '.join(c.pattern)}\n")
        lines.append(wrap(" ".join((inspect.getdoc(c.run) or "").split())) + "\n")
        for p in c.parallel:
            names = " / ".join(f"`{n}`" for n in p["names"])
            loop = " (loop)" if len(p["names"]) == 1 else ""
            lines.append(
                wrap(f"- {names}{loop} under `{p['parent']}`: **{p['truth']}**: {p['why']}")
            )
        for k in c.cache:
            caps = "".join(
                f"; {key} {k[key]}" for key in ("max_confidence", "max_hits_per_trace") if key in k
            )
            lines.append(wrap(f"- `{k['name']}`: **{k['truth']}**{caps}: {k['why']}"))
        if c.saving_ms:
            sv = c.saving_ms
            lines.append(
                wrap(
                    f"- saving of `{' + '.join(sv['names'])}` under `{sv['parent']}`: "
                    f"**{sv['min']}-{sv['max']} ms**: {sv['why']}"
                )
            )
        if c.expect_one_finding:
            lines.append("- one finding for the pair, whichever order it ran in")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


# --- driver ---------------------------------------------------------------------------------


def run_decorator_case(name: str) -> None:
    """In a fresh process: configure tracelens to write the case's file and run the agent."""
    from tracelens import configure, flush

    configure(service_name=f"verdict-{name}", file=OUT / f"{name}.jsonl")
    random.seed(name)
    with tempfile.TemporaryDirectory(prefix="verdict-") as scratch:
        tempfile.tempdir = scratch  # the repositories and files the agents write
        CASES[name].run()
        flush()
    tempfile.tempdir = None


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        run_decorator_case(argv[1])
        return 0
    labels_only = argv[:1] == ["--labels"]  # labels.json and docs/verdicts.md only
    if labels_only:
        argv = []
    unknown = [n for n in argv if n not in CASES]
    if unknown:
        print(f"unknown cases: {unknown}", file=sys.stderr)
        return 2
    names = argv or list(CASES)
    OUT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for name in [] if labels_only else names:
        c = CASES[name]
        path = OUT / f"{name}.jsonl"
        path.unlink(missing_ok=True)
        if c.source == "decorator":
            subprocess.run([sys.executable, __file__, "--one", name], check=True)
        else:
            c.run()
        print(f"{name:45s} {path.stat().st_size:7d} bytes")
    if not argv:  # labels describe the whole corpus
        labels = [CASES[n].label() for n in CASES]
        (OUT / "labels.json").write_text(json.dumps(labels, indent=1) + "\n")
        write_docs(ROOT / "docs" / "verdicts.md")
        for stale in [] if labels_only else OUT.glob("*.jsonl"):
            if stale.stem not in CASES:
                stale.unlink()
    print(f"{len(names)} cases in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
