"""The agents of the decorator cases, round one (issue 12), part b: agent code run under ``@trace``.

From ``retry_after_error_instrumented`` to ``async_token_chain``. Each function is one case's
agent, doing real work and passing real values on; its labels and the reasoning behind them are
its entry in the table (``cases_*``).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from .builders import USERS, anet, burn, net, traced


def retry_after_error_instrumented() -> None:
    trace = traced()
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


def repeated_write_checkpoint() -> None:
    trace = traced()
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


def per_session_cart() -> None:
    from opentelemetry import trace as otel

    trace = traced()
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


def rag_two_retrievers_same_query() -> None:
    trace = traced()
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


def map_reduce_llm() -> None:
    trace = traced()

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


def nested_subagents() -> None:
    trace = traced()

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


def permission_gate() -> None:
    trace = traced()

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


def write_then_read_file() -> None:
    import hashlib

    trace = traced()
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


def independent_common_values() -> None:
    trace = traced()

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


def reads_share_user_id() -> None:
    trace = traced()

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


def embedding_then_search() -> None:
    import hashlib

    trace = traced()

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


def async_awaits_in_sequence() -> None:
    import asyncio

    trace = traced()

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


def async_token_chain() -> None:
    import asyncio
    import hashlib

    trace = traced()

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
