"""The traces of the OTel cases, round two (issue 25), laid out span by span.

From ``args_hash_without_arg_fps`` to ``held_cacheable_currency_list``. Each function lays out
one case's span trees with semantic-convention attributes, drawing its jitter from the case's
seeded generator; its labels and the reasoning behind them are its entry in the table
(``cases_*``).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator

from .spans import API, Node, Trace, chat, http, invoke, jitter, root, server, sql, tool


def args_hash_without_arg_fps(rng: random.Random) -> Iterator[Trace]:
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
        yield i * 4.0, root("answer", [a, b], kind="internal")


def unzip_then_read_file(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        u = tool("unzip", jitter(rng, 30), {"archive": f"bundle-{i}.zip"}, "")
        r = tool(
            "read_file",
            jitter(rng, 12),
            {"path": f"bundle-{i}/config.yaml"},
            f"name: svc{i}\nreplicas: {i + 2}",
        )
        yield i * 5.0, invoke([u, r], agent="coder")


def place_order_then_positions(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        p = tool(
            "place_order",
            jitter(rng, 40),
            {"symbol": "ACME", "qty": 10},
            {"status": "accepted"},
        )
        g = tool("get_positions", jitter(rng, 20), {}, {"ACME": 10 * (i + 1)})
        yield i * 3.0, invoke([p, g], agent="trader")


def graphql_mutation_then_query(rng: random.Random) -> Iterator[Trace]:
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
        yield i * 4.0, server("POST /checkout", [m, q], "POST")


def semaphore_per_domain(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        pages: list[Node | float] = []
        for k in range(4):
            dur = jitter(rng, 70)
            slot = Node("acquire_domain_slot", 0.1, 0.4, "internal", {"semaphore.permits": 1})
            page = http("GET", "GET page", f"https://docs.example.org/p/{i}-{k}", dur)
            page.children = [slot]
            pages.append(page)
        yield i * 5.0, root("crawl_site", pages, kind="internal")


def header_keyed_get(
    rng: random.Random, *, route: str, path: str, ms: float, header: str, keys: list[str]
) -> Iterator[Trace]:
    """One GET of the same URL per trace, each trace's caller told apart only by a header."""
    for i, key in enumerate(keys):
        call = http(
            "GET",
            f"GET {path}",
            f"{API}{path}",
            jitter(rng, ms),
            extra={f"http.request.header.{header}": [key]},
        )
        yield i * 2.0, server(route, [call])


def cart_write_between(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        cart = f"{API}/v1/cart/c-{70 + i}"
        hops: list[Node | float] = [
            http("GET", "GET /v1/cart", cart, jitter(rng, 20)),
            http("POST", "POST /v1/cart/items", cart + "/items", jitter(rng, 30)),
            http("GET", "GET /v1/cart", cart, jitter(rng, 20)),
        ]
        yield i * 3.0, server("POST /add", hops, "POST")


def quota_count_between_inserts(rng: random.Random) -> Iterator[Trace]:
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
        yield i * 2.0, server("POST /events", hops, "POST")


def get_current_time(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        hops: list[Node | float] = [
            http("GET", "GET /v1/time", "https://time.example.com/v1/time", jitter(rng, 10)),
            http("GET", "GET /v1/sign", f"{API}/v1/sign?t={1700000000 + 3 * i}", jitter(rng, 15)),
        ]
        yield i * 3.0, server("GET /stamp", hops)


def pg_notify_select(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        n = sql("SELECT pg_notify", "SELECT pg_notify('jobs', 'refresh')", jitter(rng, 6))
        yield i * 2.0, server("POST /jobs", [n], "POST")


def queue_pop_get(rng: random.Random) -> Iterator[Trace]:
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
        yield i * 2.0, root("render_worker", pops, kind="internal")


def held_dequeue_tool(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        calls: list[Node | float] = [
            tool("dequeue_task", jitter(rng, 15), {"queue": "emails"}, {"task": "send-digest"})
            for _ in range(2)
        ]
        yield i * 3.0, invoke(calls, agent="mailer")


def held_pool_wait_db(rng: random.Random) -> Iterator[Trace]:
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
        yield i * 3.0, server("GET /report", qs)


def held_delete_then_get(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        f = f"{API}/v1/files/f-{9 + i}"
        hops: list[Node | float] = [
            http("DELETE", "DELETE /v1/files", f, jitter(rng, 25)),
            http("GET", "GET /v1/files", f + "/meta", jitter(rng, 15)),
        ]
        yield i * 2.0, server("POST /cleanup", hops, "POST")


def held_setval_sql(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        n = sql("SELECT setval", "SELECT setval('invoice_seq', 1000)", jitter(rng, 5))
        yield i * 2.0, server("POST /reset", [n], "POST")


def held_graphql_document_only(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        q = f'query Cart {{ cart(id: "k{i}") {{ items {{ sku }} }} }}'
        m = f'mutation RemoveItem {{ removeItem(cartId: "k{i}", sku: "s1") {{ id }} }}'
        ops: list[Node | float] = [
            Node("graphql.execute", 0, jitter(rng, 20), "client", {"graphql.document": d})
            for d in (q, m, q)
        ]
        yield i * 3.0, server("POST /cart", ops, "POST")


def held_cacheable_currency_list(rng: random.Random) -> Iterator[Trace]:
    for i in range(4):
        t = tool("list_currencies", jitter(rng, 30), {}, ["EUR", "USD", "JPY", "NOK"])
        c = chat(jitter(rng, 300), f"We accept EUR, USD, JPY and NOK ({i}).")
        yield i * 3.0, invoke([t, c], agent="shop")
