"""The traces of the OTel cases, round one (issue 12), laid out span by span.

From ``indep_http_overlap_uninstrumented`` to ``cacheable_sql_select_unrecorded``. Each function
lays out one case's span trees with semantic-convention attributes, drawing its jitter from the
case's seeded generator; its labels and the reasoning behind them are its entry in the table
(``cases_*``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from .builders import CITIES, TOPICS, USERS
from .spans import (
    API,
    Node,
    Trace,
    chat,
    http,
    invoke,
    jitter,
    paged,
    root,
    server,
    sql,
    tool,
    workflow,
)


def indep_http_overlap_uninstrumented(rng: random.Random) -> Iterator[Trace]:
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
            top = server("GET /dashboard", [w, n])
        yield i * 7.0, top


def indep_http_both_orders(rng: random.Random) -> Iterator[Trace]:
    for i in range(6):
        p = http("GET", "GET /v1/profile", f"{API}/v1/profile/{USERS[i % 5]}{i}",
                 jitter(rng, 30))  # fmt: skip
        s = http("GET", "GET /v1/settings", f"{API}/v1/settings/{900 + i}", jitter(rng, 30))
        hops: list[Node | float] = [p, s] if i % 2 == 0 else [s, p]
        yield i * 5.0, server("GET /account", hops)


def genai_parallel_tool_calls(rng: random.Random) -> Iterator[Trace]:
    tickers = ["ACME", "GLOBX", "INITECH", "UMBR", "HOOLI"]

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
        yield i * 9.0, invoke(hops)


def small_int_id_tool_chain(rng: random.Random) -> Iterator[Trace]:
    for i, cid in enumerate([7, 12, 3, 9, 5]):
        hops: list[Node | float] = [
            tool("find_customer", jitter(rng, 20), {"email": f"c{i}@example.com"}, str(cid)),
            tool("get_invoices", jitter(rng, 30), {"customer_id": cid},
                 [{"invoice": 1000 + cid, "due": "2026-12-31"}]),
        ]  # fmt: skip
        yield i * 4.0, workflow(hops)


def short_string_id_tool_chain(rng: random.Random) -> Iterator[Trace]:
    for i, key in enumerate(["T-9", "T-4", "Q7", "T-12", "B2"]):
        hops: list[Node | float] = [
            tool("lookup_ticket", jitter(rng, 20), {"subject": f"printer jam {i}"}, key),
            tool("get_comments", jitter(rng, 25), {"ticket": key},
                 [{"author": "sam", "text": "on it"}]),
        ]  # fmt: skip
        yield i * 4.0, workflow(hops)


def llm_substring_to_tool_genai(rng: random.Random) -> Iterator[Trace]:
    for i in range(5):
        order = f"order {88410 + 17 * i}"
        text = f"Let me look up the status of {order} placed last week by the customer."
        hops: list[Node | float] = [
            chat(jitter(rng, 30), text),
            tool("search_orders", jitter(rng, 25), {"query": order},
                 {"status": "shipped", "eta": f"2026-12-{10 + i}"}),
            chat(jitter(rng, 30), "It has shipped.", tin=700),
        ]  # fmt: skip
        yield i * 6.0, invoke(hops)


def llm_json_field_to_tool_genai(rng: random.Random) -> Iterator[Trace]:
    for i, sku in enumerate(["KB-204", "MS-311", "HD-870", "CB-015", "DK-442"]):
        hops: list[Node | float] = [
            chat(jitter(rng, 30), json.dumps({"action": "lookup", "sku": sku, "qty": 1})),
            tool("get_product", jitter(rng, 25), {"sku": sku}, {"name": "thing", "stock": 3}),
        ]
        yield i * 6.0, invoke(hops)


def usage_only_llm_chain(rng: random.Random) -> Iterator[Trace]:
    def llm(rng: random.Random, tin: int) -> Node:
        # any-agent style: a model call known only by its token usage
        return Node("call_llm", 0, jitter(rng, 35), "internal", {
            "gen_ai.request.model": "mistral-small-latest",
            "gen_ai.usage.input_tokens": tin,
            "gen_ai.usage.output_tokens": 50,
        })  # fmt: skip

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
        yield i * 8.0, root("agent_run", hops, kind="internal")


def usage_only_draft_critique(rng: random.Random) -> Iterator[Trace]:
    for i in range(5):
        hops: list[Node | float] = [
            Node(f"llm {step}", 0, jitter(rng, 30), "client", {
                "gen_ai.request.model": "llama-3.1-8b",
                "gen_ai.usage.input_tokens": 200 + 150 * k + i,
                "gen_ai.usage.output_tokens": 120,
            })
            for k, step in enumerate(["draft", "critique", "revise"])
        ]  # fmt: skip
        yield i * 5.0, root("write_email", hops, kind="internal")


def openinference_llm_tool_chain(rng: random.Random) -> Iterator[Trace]:
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
        yield (
            i * 5.0,
            root("Agent.run", hops, kind="internal", **{"openinference.span.kind": "AGENT"}),
        )


def shared_resource_ticket(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        key = f"OPS-{1042 + i}"
        hops: list[Node | float] = [
            tool("jira_transition", jitter(rng, 30), {"issue": key, "to": "Done"}, "ok"),
            tool("jira_get_issue", jitter(rng, 20), {"issue": key},
                 {"key": key, "status": "Done", "summary": f"disk full on node {i}"}),
            tool("slack_post", jitter(rng, 25),
                 {"channel": "#ops", "text": f"{key} Done: disk full on node {i}"}, "ok"),
        ]  # fmt: skip
        yield i * 6.0, workflow(hops)


def shell_chain_bash_tool(rng: random.Random) -> Iterator[Trace]:
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
        yield i * 10.0, invoke(hops, "coder")


def shell_code_interpreter(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        code = f"import pandas as pd\npd.DataFrame({{'x': range({10 + i})}}).to_csv('out.csv')"
        hops: list[Node | float] = [
            tool("python", jitter(rng, 35), {"code": code}, ""),
            tool("shell", jitter(rng, 15), {"command": "wc -l out.csv"}, f"{11 + i} out.csv"),
        ]
        yield i * 6.0, invoke(hops, "analyst")


def cursor_pagination_http(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        cursors = [""] + [f"&cursor=eyJpZCI6{1000 * i + 100 * k}fQ" for k in range(1, 4)]
        urls = [f"{API}/v1/issues?repo=r{i}&limit=100{c}" for c in cursors]
        yield i * 8.0, root("sync_issues", paged("GET /v1/issues", urls, rng), kind="internal")


def page_token_pagination_http(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        tokens = [""] + [f"&page_token=CgZ{i}x{k}QAA" for k in range(1, 3)]
        urls = [f"https://storage.example.com/storage/v1/b/data/o?prefix=d{i}/{t}"
                for t in tokens]  # fmt: skip
        yield (
            i * 8.0,
            root("list_bucket", paged("GET /storage/v1/b/data/o", urls, rng), kind="internal"),
        )


def offset_pagination_http(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        urls = [f"{API}/v1/contacts?list=l{i}&limit=50&offset={50 * k}" for k in range(3 + i % 2)]
        yield (
            i * 8.0,
            root("export_contacts", paged("GET /v1/contacts", urls, rng), kind="internal"),
        )


def keyset_pagination_sql(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        last = [0, 1187 + i * 3, 2391 + i * 5]
        hops: list[Node | float] = [
            sql("SELECT events", f"SELECT id, kind FROM events WHERE tenant_id = {20 + i} "
                f"AND id > {lo} ORDER BY id LIMIT 1000", jitter(rng, 20)) for lo in last
        ]  # fmt: skip
        yield i * 8.0, root("backfill_events", hops, kind="internal")


def n_plus_one_sql(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        ids = [5000 + 40 * i + k for k in range(5)]
        hops: list[Node | float] = [
            sql("SELECT orders", f"SELECT id FROM orders WHERE customer_id = {300 + i}",
                jitter(rng, 10)),
            *[sql("SELECT order_items", f"SELECT * FROM order_items WHERE order_id = {o}",
                  jitter(rng, 12)) for o in ids],
        ]  # fmt: skip
        yield i * 5.0, server("GET /orders", hops)


def indep_db_queries(rng: random.Random) -> Iterator[Trace]:
    for i in range(5):
        hops: list[Node | float] = [
            sql("SELECT users", f"SELECT name, plan FROM users WHERE id = {4100 + i}",
                jitter(rng, 20)),
            sql("SELECT invoices", "SELECT * FROM invoices WHERE account_id = "
                f"{77000 + 13 * i} ORDER BY due DESC LIMIT 5", jitter(rng, 25)),
        ]  # fmt: skip
        yield i * 5.0, server("GET /home", hops)


def cacheable_tool_genai(rng: random.Random) -> Iterator[Trace]:
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
        yield i * 12.0, invoke(hops)


def get_results_unrecorded(rng: random.Random) -> Iterator[Trace]:
    for i in range(5):
        hops: list[Node | float] = [
            http("GET", "GET /v1/config", f"{API}/v1/config", jitter(rng, 25)),
            http("GET", "GET /v1/reco", f"{API}/v1/reco?user={USERS[i]}&model=v7",
                 jitter(rng, 30)),
        ]  # fmt: skip
        yield i * 10.0, server("GET /recommendations", hops)


def polling_http_with_sleep(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        job = f"j{7700 + i}"
        hops: list[Node | float] = [http("POST", "POST /v1/jobs", f"{API}/v1/jobs", 30)]
        for _ in range(3 + i % 2):
            hops.append(Node("sleep", 0, 200.0, "internal", {}))
            hops.append(http("GET", "GET /v1/jobs/{id}", f"{API}/v1/jobs/{job}",
                             jitter(rng, 12)))  # fmt: skip
        yield i * 20.0, root("render_video", hops, kind="internal")


def sql_pair(
    rng: random.Random, *, route: str, method: str, queries: list[tuple[str, str, float]]
) -> Iterator[Trace]:
    """Five requests to ``route``, each running the same queries (name, text, ms), in order."""
    for i in range(5):
        hops: list[Node | float] = [sql(name, text, jitter(rng, ms)) for name, text, ms in queries]
        yield i * 3.0, server(route, hops, method)


def per_user_enduser_id(rng: random.Random) -> Iterator[Trace]:
    for i in range(5):
        hops: list[Node | float] = [
            http("GET", "GET /v1/me/preferences", f"{API}/v1/me/preferences",
                 jitter(rng, 20), extra={"enduser.id": USERS[i]}),
            http("GET", "GET /v1/feed", f"{API}/v1/feed?lang=en&u={USERS[i]}",
                 jitter(rng, 30), extra={"enduser.id": USERS[i]}),
        ]  # fmt: skip
        yield (
            i * 4.0,
            root("GET /feed", hops, **{"http.request.method": "GET", "enduser.id": USERS[i]}),
        )


def per_user_tool_same_result(rng: random.Random) -> Iterator[Trace]:
    results = ["[]", "[]", '[{"at": "10:00", "what": "dentist"}]', "[]"]
    for i in range(4):
        hops: list[Node | float] = [
            tool("get_my_calendar", jitter(rng, 25), {}, results[i], **{"user.id": USERS[i]}),
            chat(jitter(rng, 30), "You are free today." if results[i] == "[]" else "Dentist."),
        ]
        top = invoke(hops)
        top.attrs["user.id"] = USERS[i]
        yield i * 5.0, top


def per_tenant_api_key(rng: random.Random) -> Iterator[Trace]:
    for i in range(5):
        call = http("GET", "GET /v1/usage", f"{API}/v1/usage?period=2026-11", jitter(rng, 25),
                    extra={"http.request.header.authorization": ["REDACTED"]})  # fmt: skip
        yield i * 3.0, server("GET /billing", [call])


def changing_results_tool_genai(rng: random.Random) -> Iterator[Trace]:
    price = 101.0
    for i in range(5):
        hops: list[Node | float] = [chat(jitter(rng, 25), '{"tool": "get_stock_price"}')]
        for _ in range(2):
            price = round(price + rng.uniform(-0.8, 0.9), 2)
            quote = tool("get_stock_price", jitter(rng, 20), {"ticker": "ACME"}, {"price": price})
            hops += [quote, chat(jitter(rng, 25), f"ACME at {price}")]
        yield i * 4.0, invoke(hops, "trader")


def repeats_60s_apart_changing(rng: random.Random) -> Iterator[Trace]:
    for i in range(5):
        flags = {"checkout_v2": i % 2 == 0, "revision": 40 + 2 * i}  # changes every 30 s
        call = tool("get_feature_flags", jitter(rng, 25), {"env": "prod"}, flags)
        yield i * 60.0, root("nightly_sync", [call], kind="internal")


def repeats_within_trace_60s_between_traces(rng: random.Random) -> Iterator[Trace]:
    for i in range(5):
        flags = {"checkout_v2": i % 2 == 0, "revision": 40 + 2 * i}
        first = tool("get_feature_flags", jitter(rng, 25), {"env": "prod"}, flags)
        second = tool("get_feature_flags", jitter(rng, 25), {"env": "prod"}, flags)
        render = Node("render_template", 0, jitter(rng, 15), "internal", {"page": f"p{i}"})
        second.start = 1.0
        publish = Node("publish", 0, second.dur + 12.0, "internal", {"page": f"p{i}"},
                       [second])  # fmt: skip
        hops: list[Node | float] = [first, render, 3000.0, publish]
        yield i * 60.0, root("render_page", hops, kind="internal")


def retry_http_503(rng: random.Random) -> Iterator[Trace]:
    for i, sym in enumerate(["ACME", "GLOBX", "INITECH", "UMBR"]):
        url = f"{API}/v1/quotes?symbol={sym}"
        hops: list[Node | float] = []
        for _ in range(1 + i % 2):
            hops += [http("GET", "GET /v1/quotes", url, jitter(rng, 30), status=503), 10.0]
        hops.append(http("GET", "GET /v1/quotes", url, jitter(rng, 25)))
        yield i * 5.0, server("GET /quote", hops)


def repeated_put(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        url = f"https://storage.example.com/v1/objects/reports/daily-{i}.json"
        hops: list[Node | float] = [
            http("PUT", "PUT /v1/objects/{key}", url, jitter(rng, 30)),
            http("PUT", "PUT /v1/objects/{key}", url, jitter(rng, 30)),
            http("POST", "POST /v1/notify", f"{API}/v1/notify", jitter(rng, 10)),
        ]
        yield i * 30.0, root("publish_report", hops, kind="internal")


def cacheable_sql_select_unrecorded(rng: random.Random) -> Iterator[Trace]:
    for i in range(5):
        hops: list[Node | float] = [
            sql("SELECT tax_rates", "SELECT rate FROM tax_rates WHERE region = 'EU'",
                jitter(rng, 15)),
            sql("SELECT shipping_zones",
                f"SELECT * FROM shipping_zones WHERE zip = '{1000 + 7 * i}'", jitter(rng, 20)),
        ]  # fmt: skip
        yield i * 6.0, server("GET /checkout", hops)
