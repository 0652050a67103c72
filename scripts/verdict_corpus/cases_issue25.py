"""The case table, round two (issue 25).

Each entry names its pattern tags, source and builder (with its parameters), its labels, and the
reasoning behind them, next to each other.
"""

from __future__ import annotations

from functools import partial

from . import agents_round2, traces_round2
from .labels import ROOT_NC, Case, dep, nc

CASES: list[Case] = [
    Case(
        name="bearer_base64_secret",
        pattern=["dependent", "transformed_flow", "base64"],
        source="decorator",
        build=agents_round2.bearer_base64_secret,
        reasoning="""
        get_secret(path) returns the secret base64-encoded (as a vault's HTTP API does);
        the agent decodes it and calls the API with the header ``Bearer <secret>``.
        call_api cannot start before get_secret returned: the value flows transformed
        (decoded, then embedded in a header value), so no equality of fingerprints shows
        it.
        """,
        parallel=[
            dep(
                "sync_account",
                "get_secret",
                "call_api",
                "call_api's authorization header carries the secret get_secret returned, "
                "base64-decoded",
            ),
        ],
        cache=[
            nc("sync_account", ROOT_NC),
            nc("get_secret", "a different vault path every trace"),
            nc("call_api", "a different secret every trace"),
        ],
    ),
    Case(
        name="id_in_url_path",
        pattern=["dependent", "transformed_flow", "url_path"],
        source="decorator",
        build=agents_round2.id_in_url_path,
        reasoning="""
        find_order(customer) returns {"id": 48213, ...}; the agent then GETs the URL
        ``/orders/48213/items``. The id flows as a path segment of a string argument, not
        as an argument of its own: dependent.
        """,
        parallel=[
            dep(
                "show_order",
                "find_order",
                "get_items",
                "the items URL embeds the order id find_order returned (/orders/{id}/items)",
            ),
        ],
        cache=[
            nc("show_order", ROOT_NC),
            nc("find_order", "a different customer every trace"),
            nc("get_items", "a different order every trace"),
        ],
    ),
    Case(
        name="proof_over_nonce",
        pattern=["dependent", "derived_value", "hash"],
        source="decorator",
        build=agents_round2.proof_over_nonce,
        reasoning="""
        A challenge-response login: get_nonce() returns a fresh nonce; the agent computes
        sha256(nonce + secret) in its own code and submits it. The proof is derived by
        computation from the nonce, so no fingerprint of the nonce appears in
        submit_proof's arguments; the two are strictly sequential. (A nonce is also never
        cacheable: a cached one is a replay.)
        """,
        parallel=[
            dep(
                "login",
                "get_nonce",
                "submit_proof",
                "the proof is sha256(nonce + secret) over the nonce get_nonce returned",
            ),
        ],
        cache=[
            nc("login", ROOT_NC),
            nc("get_nonce", "a fresh nonce every call", harmful="volatile"),
            nc("submit_proof", "a different proof every trace"),
        ],
    ),
    Case(
        name="json_string_output_field",
        pattern=["dependent", "transformed_flow", "json_in_string"],
        source="decorator",
        build=agents_round2.json_string_output_field,
        reasoning="""
        A Step Functions style run: run_execution returns {"status": "SUCCEEDED",
        "output": "{\\"report_id\\": \\"rpt-5521\\"}"} (the output is a JSON document
        inside a string field); the agent parses it and calls get_report(report_id).
        Dependent.
        """,
        parallel=[
            dep(
                "make_report",
                "run_execution",
                "get_report",
                "get_report takes the report id inside the JSON string of run_execution's "
                "'output' field",
            ),
        ],
        cache=[
            nc("make_report", ROOT_NC),
            nc("run_execution", "a different input every trace"),
            nc("get_report", "a different report every trace"),
        ],
    ),
    Case(
        name="switch_context_returns_nothing",
        pattern=["dependent", "state_change_unnamed", "returns_nothing"],
        source="decorator",
        build=agents_round2.switch_context_returns_nothing,
        reasoning="""
        A kubectl-like agent: switch_context(name) returns nothing and changes the CLI's
        current context (a file in the working directory); list_pods(namespace) reads that
        context to know which cluster to ask. No value flows between them, only state:
        dependent.
        """,
        parallel=[
            dep(
                "inspect_cluster",
                "switch_context",
                "list_pods",
                "list_pods reads the CLI context switch_context just changed",
                harmful="state-changing",
            ),
        ],
        cache=[
            nc("inspect_cluster", ROOT_NC),
            nc("switch_context", "changes the CLI state", harmful="state-changing"),
            nc("list_pods", "a different cluster every trace"),
        ],
    ),
    Case(
        name="args_hash_without_arg_fps",
        pattern=["dependent", "small_int_id", "no_arg_fps"],
        source="otel",
        build=traces_round2.args_hash_without_arg_fps,
        reasoning="""
        Spans as an older tracelens (or another producer) writes them:
        ``tracelens.args_hash`` and ``tracelens.result_hash`` but no ``tracelens.arg_fps``
        / ``result_fps``. lookup_user returns a small id that get_orders takes. Without
        per-argument fingerprints nothing shows what was passed: absence of a link is no
        evidence of independence.
        """,
        parallel=[
            dep(
                "answer",
                "lookup_user",
                "get_orders",
                "get_orders takes the small user id lookup_user returned (the producer wrote "
                "only args_hash, no per-argument fingerprints)",
            ),
        ],
        cache=[
            nc("answer", ROOT_NC),
            nc("lookup_user", "a different e-mail every trace"),
            nc("get_orders", "a different user every trace"),
        ],
    ),
    Case(
        name="unzip_then_read_file",
        pattern=["dependent", "state_change_unnamed", "genai"],
        source="otel",
        build=traces_round2.unzip_then_read_file,
        reasoning="""
        unzip({"archive": "bundle-N.zip"}) extracts into the working directory and returns
        an empty result; read_file({"path": "bundle/config.yaml"}) then reads a file it
        extracted. Nothing of unzip's (empty) result is in read_file's arguments: the data
        flows through the file system.
        """,
        parallel=[
            dep(
                "invoke_agent coder",
                "execute_tool unzip",
                "execute_tool read_file",
                "read_file reads a file unzip just extracted into the working directory",
                harmful="state-changing",
            ),
        ],
        cache=[
            nc("invoke_agent coder", ROOT_NC),
            nc("execute_tool unzip", "writes files", harmful="state-changing"),
            nc("execute_tool read_file", "a different file every trace"),
        ],
    ),
    Case(
        name="place_order_then_positions",
        pattern=["dependent", "state_change_unnamed", "genai", "write"],
        source="otel",
        build=traces_round2.place_order_then_positions,
        reasoning="""
        A trading agent places the same order every run (place_order({"symbol": "ACME",
        "qty": 10}), result {"status": "accepted"}), then reads its positions
        (get_positions({})). Each place_order is a new order: never cacheable, whatever
        repeats; the positions read after it depends on it.
        """,
        parallel=[
            dep(
                "invoke_agent trader",
                "execute_tool place_order",
                "execute_tool get_positions",
                "the positions include the order just placed",
                harmful="state-changing",
            ),
        ],
        cache=[
            nc("invoke_agent trader", ROOT_NC),
            nc(
                "execute_tool place_order",
                "places a real order every run, even with the same arguments",
                harmful="state-changing",
            ),
            nc("execute_tool get_positions", "changes with every order placed"),
        ],
    ),
    Case(
        name="graphql_mutation_then_query",
        pattern=["dependent", "state_change_unnamed", "graphql"],
        source="otel",
        build=traces_round2.graphql_mutation_then_query,
        reasoning="""
        One operation name for everything (``graphql.execute``): an addToCart mutation,
        then a cart query of the same cart; the split is only in
        ``graphql.operation.type`` and ``graphql.document``. The query reads what the
        mutation wrote: dependent.
        """,
        parallel=[
            dep(
                "POST /checkout",
                "graphql.execute",
                None,
                "the query reads the cart the mutation just changed",
                harmful="state-changing",
            ),
        ],
        cache=[
            nc("POST /checkout", ROOT_NC),
            nc(
                "graphql.execute",
                "a mutation, then a query of what it changed",
                harmful="state-changing",
            ),
        ],
    ),
    Case(
        name="semaphore_per_domain",
        pattern=["dependent", "contention"],
        source="otel",
        build=traces_round2.semaphore_per_domain,
        reasoning="""
        A crawler fetches four pages of one site; each fetch first takes the site's
        one-permit semaphore (an ``acquire_domain_slot`` child span) and holds it for the
        request. The fetches take different URLs and nothing of each other, but
        concurrently they would queue on the semaphore: no time is saved.
        """,
        parallel=[
            dep(
                "crawl_site",
                "GET page",
                None,
                "each fetch holds the domain's one-permit semaphore (acquire_domain_slot): run "
                "together they still queue, one at a time",
            ),
        ],
        cache=[
            nc("crawl_site", ROOT_NC),
            nc("GET page", "a different page every call"),
            nc("acquire_domain_slot", "a wait, not a call"),
        ],
    ),
    Case(
        name="tenant_header_get",
        pattern=["per_user", "tenant_keyed"],
        source="otel",
        build=partial(
            traces_round2.header_keyed_get,
            route="GET /reports",
            path="/v1/reports/summary",
            ms=30,
            header="x-tenant-id",
            keys=[f"t-{100 + i}" for i in range(5)],
        ),
        reasoning="""
        GET /v1/reports/summary, the same URL in every trace, told apart per tenant only
        by the ``http.request.header.x-tenant-id`` header. A cache keyed by the URL would
        leak one tenant's report to another.
        """,
        parallel=[],
        cache=[
            nc("GET /reports", ROOT_NC),
            nc(
                "GET /v1/reports/summary",
                "the same URL for a different x-tenant-id every trace: "
                "one tenant's report is not another's",
                harmful="tenant-keyed",
            ),
        ],
    ),
    Case(
        name="cart_write_between",
        pattern=["write_between", "dependent"],
        source="otel",
        build=traces_round2.cart_write_between,
        reasoning="""
        GET the cart, POST an item to it, GET the cart again (the same URL twice in a
        trace). The second read must see the item: a cache filled by the first read would
        serve the stale cart. Response bodies are not recorded.
        """,
        parallel=[
            dep(
                "POST /add",
                "GET /v1/cart",
                "POST /v1/cart/items",
                "the item is added to the cart just read, and the second read shows it",
                harmful="state-changing",
            ),
            dep("POST /add", "GET /v1/cart", None, "the second read follows the write"),
        ],
        cache=[
            nc("POST /add", ROOT_NC),
            nc(
                "GET /v1/cart",
                "GET cart, POST item, GET cart: the write changes what the second read returns",
                harmful="state-changing",
            ),
            nc("POST /v1/cart/items", "a write", harmful="state-changing"),
        ],
    ),
    Case(
        name="quota_count_between_inserts",
        pattern=["write_between", "dependent"],
        source="otel",
        build=traces_round2.quota_count_between_inserts,
        reasoning="""
        A rate limiter: SELECT COUNT(*) FROM quota_usage WHERE tenant = 't1', INSERT INTO
        quota_usage, and again, twice per request. The same SELECT text repeats, but every
        insert changes the count: a cached count would let the tenant past its quota.
        """,
        parallel=[
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
        cache=[
            nc("POST /events", ROOT_NC),
            nc(
                "SELECT quota",
                "a count of rows the inserts between change",
                harmful="state-changing",
            ),
            nc("INSERT quota", "a write", harmful="state-changing"),
        ],
    ),
    Case(
        name="get_current_time",
        pattern=["volatile", "uninstrumented"],
        source="otel",
        build=traces_round2.get_current_time,
        reasoning="""
        GET https://time.example.com/v1/time (no query) in every request, seconds apart,
        then a signature over the time. The same URL returns a different answer every call
        by nature: never cacheable (the bodies are not recorded, so nothing in the trace
        says so but the URL).
        """,
        parallel=[dep("GET /stamp", "GET /v1/time", "GET /v1/sign", "signs the time just read")],
        cache=[
            nc("GET /stamp", ROOT_NC),
            nc(
                "GET /v1/time",
                "the current time: a different answer every call",
                harmful="volatile",
            ),
            nc("GET /v1/sign", "a different time every call"),
        ],
    ),
    Case(
        name="pg_notify_select",
        pattern=["volatile_sql", "write"],
        source="otel",
        build=traces_round2.pg_notify_select,
        reasoning="""
        SELECT pg_notify('jobs', 'refresh') in every request: a SELECT by its verb, but
        every call sends a notification to the listeners. Serving it from a cache would
        drop them.
        """,
        parallel=[],
        cache=[
            nc("POST /jobs", ROOT_NC),
            nc(
                "SELECT pg_notify",
                "sends a notification every call (a SELECT with a side effect)",
                harmful="state-changing",
            ),
        ],
    ),
    Case(
        name="queue_pop_get",
        pattern=["consumed", "dependent"],
        source="otel",
        build=traces_round2.queue_pop_get,
        reasoning="""
        A worker takes jobs with GET /v1/queues/render/pop (a GET, but it removes the job
        it returns), three times per trace, same URL. Each call consumes a job: never
        cacheable, and the pops are the queue's order.
        """,
        parallel=[
            dep(
                "render_worker",
                "GET /v1/queues/render/pop",
                None,
                "each pop consumes the next job; the order is the queue's",
                harmful="consumed",
            )
        ],
        cache=[
            nc("render_worker", ROOT_NC),
            nc(
                "GET /v1/queues/render/pop",
                "a GET that consumes a job: every call takes a different one",
                harmful="consumed",
            ),
        ],
    ),
]
