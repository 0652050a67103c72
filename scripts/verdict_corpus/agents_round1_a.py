"""The agents of the decorator cases, round one (issue 12), part a: agent code run under ``@trace``.

From ``indep_fetch_instrumented`` to ``changing_results_stock``. Each function is one case's
agent, doing real work and passing real values on; its labels and the reasoning behind them are
its entry in the table (``cases_*``).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

from .builders import CITIES, TOPICS, USERS, burn, git, net, sqlite, traced


def indep_fetch_instrumented() -> None:
    trace = traced()

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


def loop_over_items() -> None:
    trace = traced()
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


def parent_cpu_between_hops() -> None:
    trace = traced()

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


def both_orders_instrumented() -> None:
    trace = traced()

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


def small_int_id_chain() -> None:
    trace = traced()
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


def short_string_id_chain() -> None:
    trace = traced()
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


def llm_substring_to_tool() -> None:
    trace = traced()

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


def llm_json_field_to_tool() -> None:
    trace = traced()

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


def shared_resource_patch_then_tests() -> None:
    trace = traced()

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


def shell_chain_git() -> None:
    trace = traced()

    @trace(name="git_checkout")
    def git_checkout(repo: str, branch: str) -> str:
        return git(repo, "checkout", "-q", "-b", branch) or branch

    @trace(name="git_apply")
    def git_apply(repo: str, patch: str) -> str:
        (Path(repo) / "fix.patch").write_text(patch)
        out = git(repo, "apply", "fix.patch")
        (Path(repo) / "fix.patch").unlink()
        return out

    @trace(name="git_commit")
    def git_commit(repo: str, message: str) -> str:
        git(repo, "commit", "-q", "-am", message)
        return git(repo, "rev-parse", "HEAD")

    @trace(name="git_push")
    def git_push(repo: str, remote: str, branch: str) -> str:
        git(repo, "push", "-q", remote, branch)
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
        git(repo, "add", "README")
        git(repo, "commit", "-q", "-m", "init")
        git(repo, "remote", "add", "origin", remote)
        ship(repo, 4100 + i)


def cursor_pagination_instrumented() -> None:
    import base64

    trace = traced()

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


def polling_job_status_instrumented() -> None:
    trace = traced()
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


def cacheable_schema_lookup() -> None:
    trace = traced()
    db = sqlite(
        (
            "events (id INTEGER PRIMARY KEY, kind TEXT, at TEXT, user_id INT)",
            [(i, ["click", "view", "buy"][i % 3], f"2026-11-{i % 28 + 1:02d}", i % 17)
             for i in range(500)],
        ),
    )  # fmt: skip

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


def cacheable_tax_rate_sqlite() -> None:
    trace = traced()
    db = sqlite(
        ("tax (region TEXT PRIMARY KEY, rate REAL)", [("EU", 0.21), ("UK", 0.2), ("US", 0.07)]),
        (
            "product (sku TEXT PRIMARY KEY, cents INT)",
            [(f"P{i:03d}", 500 + i * 37) for i in range(40)],
        ),
    )

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


def cacheable_embedding() -> None:
    import hashlib

    trace = traced()
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


def changing_results_stock() -> None:
    trace = traced()
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
