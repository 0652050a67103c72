"""The case table, round two, held out (issue 25: written after the rules, not tuned to).

Each entry names its pattern tags, source and builder (with its parameters), its labels, and the
reasoning behind them, next to each other.
"""

from __future__ import annotations

from functools import partial

from . import agents_round2, traces_round2
from .labels import ROOT_NC, Case, cache, dep, ind, nc

CASES: list[Case] = [
    Case(
        name="held_hex_token_header",
        pattern=["dependent", "transformed_flow", "held_out"],
        source="decorator",
        build=agents_round2.held_hex_token_header,
        reasoning="""
        get_token(account) returns the token hex-encoded; the agent decodes it and sends
        ``Token <token>`` with post_metrics. Dependent through a decoding.
        """,
        parallel=[
            dep(
                "push_metrics",
                "get_token",
                "post_metrics",
                "the header carries the token get_token returned hex-encoded, decoded",
            )
        ],
        cache=[
            nc("push_metrics", ROOT_NC),
            nc("get_token", "a different service account every trace"),
            nc("post_metrics", "a different token every trace", harmful="state-changing"),
        ],
    ),
    Case(
        name="held_url_encoded_title",
        pattern=["dependent", "transformed_flow", "held_out"],
        source="decorator",
        build=agents_round2.held_url_encoded_title,
        reasoning="""
        search_titles(query) returns {"title": "Q3 report & plan 2"}; the agent fetches
        ``https://docs.example.com/doc?title=Q3%20report%20%26%20plan%202``. Dependent.
        """,
        parallel=[
            dep(
                "open_doc",
                "search_titles",
                "fetch_doc",
                "the document URL carries the title search_titles returned, URL-encoded",
            )
        ],
        cache=[
            nc("open_doc", ROOT_NC),
            nc("search_titles", "a different query every trace"),
            nc("fetch_doc", "a different document every trace"),
        ],
    ),
    Case(
        name="held_independent_path_reads",
        pattern=["independent", "held_out"],
        source="decorator",
        build=agents_round2.held_independent_path_reads,
        reasoning="""
        A home page fetches /users/{user} and /repos/{repo}, both from the request,
        sequentially. Their URLs share words (https, api, example) but no value of one's
        result is in the other's URL: independent (every argument fingerprinted, with its
        parts).
        """,
        parallel=[
            ind(
                "load_home",
                "fetch_user",
                "fetch_repo",
                "both URLs come from the request; neither takes the other's result",
            )
        ],
        cache=[
            nc("load_home", ROOT_NC),
            nc("fetch_user", "a different user every trace"),
            nc("fetch_repo", "a different repository every trace"),
        ],
    ),
    Case(
        name="held_dequeue_tool",
        pattern=["consumed", "genai", "held_out"],
        source="otel",
        build=traces_round2.held_dequeue_tool,
        reasoning="""
        dequeue_task({"queue": "emails"}) twice per conversation; the recorded results are
        the same ({"task": "send-digest"}: the queue holds digests), but each call removes
        one.
        """,
        parallel=[
            dep(
                "invoke_agent mailer",
                "execute_tool dequeue_task",
                None,
                "each dequeue takes the next task",
                harmful="consumed",
            )
        ],
        cache=[
            nc("invoke_agent mailer", ROOT_NC),
            nc(
                "execute_tool dequeue_task",
                "consumes a task every call, even when the answers look alike",
                harmful="consumed",
            ),
        ],
    ),
    Case(
        name="held_workspace_header_get",
        pattern=["per_user", "tenant_keyed", "held_out"],
        source="otel",
        build=partial(
            traces_round2.header_keyed_get,
            route="GET /home",
            path="/v1/dashboard",
            ms=25,
            header="x-workspace-id",
            keys=[f"ws-{40 + i}" for i in range(4)],
        ),
        reasoning="""
        GET /v1/dashboard, the same URL in every trace, per workspace only by the header
        ``http.request.header.x-workspace-id``. A cache keyed by the URL would leak across
        workspaces.
        """,
        parallel=[],
        cache=[
            nc("GET /home", ROOT_NC),
            nc(
                "GET /v1/dashboard",
                "the same URL per x-workspace-id: one workspace's dashboard is not another's",
                harmful="tenant-keyed",
            ),
        ],
    ),
    Case(
        name="held_pool_wait_db",
        pattern=["dependent", "contention", "held_out"],
        source="otel",
        build=traces_round2.held_pool_wait_db,
        reasoning="""
        Three report queries on different tables, each first waiting for the pool's one
        connection (a ``db.pool.wait`` child span). Independent by data, but concurrently
        they queue on the connection: nothing is saved.
        """,
        parallel=[
            dep(
                "GET /report", "SELECT sales", "SELECT refunds", "one pooled connection: they queue"
            ),
            dep(
                "GET /report", "SELECT sales", "SELECT visits", "one pooled connection: they queue"
            ),
            dep(
                "GET /report",
                "SELECT refunds",
                "SELECT visits",
                "one pooled connection: they queue",
            ),
        ],
        cache=[
            nc("GET /report", ROOT_NC),
            nc("SELECT sales", "a different day every trace"),
            nc("SELECT refunds", "a different day every trace"),
            nc("SELECT visits", "a different day every trace"),
            nc("db.pool.wait", "a wait, not a call"),
        ],
    ),
    Case(
        name="held_delete_then_get",
        pattern=["dependent", "write", "held_out"],
        source="otel",
        build=traces_round2.held_delete_then_get,
        reasoning="""
        DELETE /v1/files/f-N, then GET /v1/files/f-N/meta to confirm it is gone: the read
        depends on the delete.
        """,
        parallel=[
            dep(
                "POST /cleanup",
                "DELETE /v1/files",
                "GET /v1/files",
                "checks the file is gone",
                harmful="state-changing",
            )
        ],
        cache=[
            nc("POST /cleanup", ROOT_NC),
            nc("DELETE /v1/files", "a write", harmful="state-changing"),
            nc("GET /v1/files", "a different file every trace"),
        ],
    ),
    Case(
        name="held_setval_sql",
        pattern=["volatile_sql", "write", "held_out"],
        source="otel",
        build=traces_round2.held_setval_sql,
        reasoning="""
        SELECT setval('invoice_seq', 1000) in every request: a SELECT that moves a
        sequence.
        """,
        parallel=[],
        cache=[
            nc("POST /reset", ROOT_NC),
            nc("SELECT setval", "moves a sequence every call", harmful="state-changing"),
        ],
    ),
    Case(
        name="held_graphql_document_only",
        pattern=["dependent", "graphql", "write_between", "held_out"],
        source="otel",
        build=traces_round2.held_graphql_document_only,
        reasoning="""
        ``graphql.execute`` three times: query Cart, mutation RemoveItem, query Cart again
        (the same document); only ``graphql.document`` says which is which (no operation
        type attribute).
        """,
        parallel=[
            dep(
                "POST /cart",
                "graphql.execute",
                None,
                "query, mutation of the cart, query again",
                harmful="state-changing",
            )
        ],
        cache=[
            nc("POST /cart", ROOT_NC),
            nc(
                "graphql.execute",
                "the mutation between the two identical queries changes the answer",
                harmful="state-changing",
            ),
        ],
    ),
    Case(
        name="held_cacheable_currency_list",
        pattern=["cacheable", "genai", "held_out"],
        source="otel",
        build=traces_round2.held_cacheable_currency_list,
        reasoning="""
        list_currencies({}) in every conversation seconds apart, always the same recorded
        list: reference data, cacheable.
        """,
        parallel=[
            dep(
                "invoke_agent shop",
                "execute_tool list_currencies",
                "chat gpt-4o-mini",
                "the chat reads the list",
            )
        ],
        cache=[
            nc("invoke_agent shop", ROOT_NC),
            cache(
                "execute_tool list_currencies",
                "cacheable",
                "reference data: the same empty "
                "arguments and the same recorded list in every trace seconds apart",
            ),
            nc("chat gpt-4o-mini", "different conversations"),
        ],
    ),
]
