"""The case table, round one (issue 12), OTel cases, part b.

Each entry names its pattern tags, source and builder (with its parameters), its labels, and the
reasoning behind them, next to each other.
"""

from __future__ import annotations

from functools import partial

from . import traces_round1
from .labels import ROOT_NC, Case, cache, dep, ind, nc

CASES: list[Case] = [
    Case(
        name="indep_db_queries",
        pattern=["independent", "independent_uninstrumented", "uninstrumented"],
        source="otel",
        build=traces_round1.indep_db_queries,
        reasoning="""
        A home page reads the user row by user id and the account's latest invoices by
        account id (both from the session), sequentially, as two DB CLIENT spans. Neither
        query's text contains anything from the other's result: independent. No order
        evidence exists (always the same order), so a tool can offer this at most at
        medium confidence.
        """,
        parallel=[
            ind(
                "GET /home",
                "SELECT users",
                "SELECT invoices",
                "the user row and the account's "
                "invoices are read by different ids from the session; neither query uses the "
                "other's result",
            ),
        ],
        cache=[
            nc("GET /home", ROOT_NC),
            nc("SELECT users", "a different user every trace"),
            nc("SELECT invoices", "a different account every trace"),
        ],
    ),
    Case(
        name="cacheable_tool_genai",
        pattern=["cacheable", "genai"],
        source="otel",
        build=traces_round1.cacheable_tool_genai,
        reasoning="""
        The model asks for the EUR→USD exchange rate twice in a conversation, and each
        conversation repeats a few seconds apart; every recorded gen_ai.tool.call.result
        is identical. The tool is a read with identical arguments and results: cacheable.
        The chats are sequential with the tools (each reads the previous result).
        """,
        parallel=[
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
        cache=[
            nc("invoke_agent assistant", ROOT_NC),
            nc("chat gpt-4o-mini", "different conversations"),
            cache(
                "execute_tool get_exchange_rate",
                "cacheable",
                "the same arguments twice per "
                "trace and across traces seconds apart; every recorded result identical",
            ),
        ],
    ),
    Case(
        name="get_results_unrecorded",
        pattern=["cacheable", "unknown_results", "uninstrumented"],
        source="otel",
        build=traces_round1.get_results_unrecorded,
        reasoning="""
        GET /v1/config (no query) in every request, seconds apart; the HTTP client spans
        do not record response bodies. The config did not change in this run, so a cache
        would have served correct data (truth: cacheable), but nothing in the trace shows
        it, so a tool may say so only at low confidence (max_confidence: low). The
        recommendations request takes a value from the config (model=v7): dependent.
        """,
        parallel=[
            dep(
                "GET /recommendations",
                "GET /v1/config",
                "GET /v1/reco",
                "the reco request's model parameter comes from the config response",
            ),
        ],
        cache=[
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
    ),
    Case(
        name="polling_http_with_sleep",
        pattern=["polling", "dependent", "uninstrumented"],
        source="otel",
        build=traces_round1.polling_http_with_sleep,
        reasoning="""
        POST /v1/jobs creates a render job; the service then alternates sleep spans (200
        ms) and GET /v1/jobs/{id} for the same job until done. The same read separated by
        sleeps inside one trace is polling: its result changes by design (the trace does
        not record it), so it is not cacheable, and the polls are sequential.
        """,
        parallel=[
            dep(
                "render_video",
                "POST /v1/jobs",
                "GET /v1/jobs/{id}",
                "polls the job the POST created",
            ),
            dep(
                "render_video",
                "GET /v1/jobs/{id}",
                None,
                "each poll follows a 'not done yet' and a sleep",
            ),
            dep("render_video", "POST /v1/jobs", "sleep", "waits for the job"),
            dep(
                "render_video",
                "GET /v1/jobs/{id}",
                "sleep",
                "sleeps because the poll said not done",
            ),
            dep("render_video", "sleep", None, "successive backoff sleeps"),
        ],
        cache=[
            nc("render_video", ROOT_NC),
            nc("POST /v1/jobs", "a write"),
            cache(
                "GET /v1/jobs/{id}",
                "polling",
                "the same status URL read repeatedly with sleeps between in one trace",
            ),
            nc("sleep", "a wait, not a call"),
        ],
    ),
    Case(
        name="volatile_sql_nextval",
        pattern=["volatile_sql", "write"],
        source="otel",
        build=partial(
            traces_round1.sql_pair,
            route="POST /orders",
            method="POST",
            queries=[
                ("SELECT nextval", "SELECT nextval('orders_id_seq')", 5),
                ("INSERT orders", "INSERT INTO orders (id, customer_id) VALUES ($1, $2)", 12),
            ],
        ),
        reasoning="""
        SELECT nextval('orders_id_seq') then INSERT INTO orders with that id. nextval
        returns a new number on every call, so the identical query text must never be
        served from a cache (two orders would get the same id); the INSERT is a write.
        """,
        parallel=[
            dep(
                "POST /orders",
                "SELECT nextval",
                "INSERT orders",
                "inserts with the id nextval returned",
            ),
        ],
        cache=[
            nc("POST /orders", ROOT_NC),
            nc(
                "SELECT nextval",
                "nextval() returns a new number every call: a cached id would be reused",
            ),
            nc("INSERT orders", "a write"),
        ],
    ),
    Case(
        name="volatile_sql_now_random",
        pattern=["volatile_sql", "independent"],
        source="otel",
        build=partial(
            traces_round1.sql_pair,
            route="GET /home",
            method="GET",
            queries=[
                ("SELECT now", "SELECT now()", 15),
                ("SELECT featured", "SELECT id, title FROM products ORDER BY random() LIMIT 3", 25),
            ],
        ),
        reasoning="""
        SELECT now() and SELECT ... ORDER BY random() LIMIT 3 (featured products),
        sequential. Both change on every call by design: never cacheable. Neither reads
        anything from the other: independent.
        """,
        parallel=[
            ind(
                "GET /home",
                "SELECT now",
                "SELECT featured",
                "the clock and the random pick read nothing from each other",
            ),
        ],
        cache=[
            nc("GET /home", ROOT_NC),
            nc("SELECT now", "now() changes every call"),
            nc("SELECT featured", "ORDER BY random(): a different pick every call by design"),
        ],
    ),
    Case(
        name="per_user_enduser_id",
        pattern=["per_user", "uninstrumented"],
        source="otel",
        build=traces_round1.per_user_enduser_id,
        reasoning="""
        GET /v1/me/preferences: the same URL in every trace, but each trace is a different
        enduser.id, and /me returns the caller's own data. A cache keyed by the URL would
        serve one user's preferences to another: not cacheable (no user repeats). The feed
        request takes the language from the preferences: dependent.
        """,
        parallel=[
            dep(
                "GET /feed",
                "GET /v1/me/preferences",
                "GET /v1/feed",
                "the feed request's language comes from the preferences",
            ),
        ],
        cache=[
            nc("GET /feed", ROOT_NC),
            nc(
                "GET /v1/me/preferences",
                "the same URL for a different enduser.id in every trace: /me is the caller's own "
                "data",
            ),
            nc("GET /v1/feed", "a different user every trace"),
        ],
    ),
    Case(
        name="per_user_tool_same_result",
        pattern=["per_user", "genai"],
        source="otel",
        build=traces_round1.per_user_tool_same_result,
        reasoning="""
        execute_tool get_my_calendar with empty arguments, each trace a different user.id;
        three of the four users have an empty calendar, so arguments and recorded results
        are identical for them. The tool still reads the calling user's calendar: across
        users it is not cacheable (identity is part of the key).
        """,
        parallel=[
            dep(
                "invoke_agent assistant",
                "execute_tool get_my_calendar",
                "chat gpt-4o-mini",
                "the chat reads the calendar",
            ),
        ],
        cache=[
            nc("invoke_agent assistant", ROOT_NC),
            nc(
                "execute_tool get_my_calendar",
                "no arguments and the same empty result for two of "
                "the users, but it reads the calling user's (user.id) calendar: across users a "
                "cache would leak one user's calendar to another",
            ),
            nc("chat gpt-4o-mini", "different conversations"),
        ],
    ),
    Case(
        name="per_tenant_api_key",
        pattern=["per_user", "uninstrumented"],
        source="otel",
        build=traces_round1.per_tenant_api_key,
        reasoning="""
        GET /v1/usage?period=2026-11: the same URL in every trace, each request
        authenticated as a different tenant; the instrumentation records the authorization
        header as present (redacted), nothing else. The usage belongs to the caller, so a
        cache keyed by the URL would serve one tenant's usage to another. The trace cannot
        tell the callers apart, which is exactly why the presence of an authorization
        header must keep the calls apart (not cacheable across traces).
        """,
        parallel=[],
        cache=[
            nc("GET /billing", ROOT_NC),
            nc(
                "GET /v1/usage",
                "the same URL, but each request authenticates as a different "
                "tenant (authorization header): the usage of one tenant is not another's",
            ),
        ],
    ),
    Case(
        name="changing_results_tool_genai",
        pattern=["changing_results", "genai"],
        source="otel",
        build=traces_round1.changing_results_tool_genai,
        reasoning="""
        A trading assistant checks get_stock_price({"ticker": "ACME"}) twice per
        conversation; every recorded result differs (the price moves). Identical
        arguments, changing results: not cacheable at any TTL seen here.
        """,
        parallel=[
            dep(
                "invoke_agent trader",
                "chat gpt-4o-mini",
                None,
                "each chat reads the previous price",
            ),
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
        cache=[
            nc("invoke_agent trader", ROOT_NC),
            nc("chat gpt-4o-mini", "different conversations"),
            nc(
                "execute_tool get_stock_price",
                "same arguments, but the recorded price differs on every call",
            ),
        ],
    ),
    Case(
        name="repeats_60s_apart_changing",
        pattern=["changing_results", "ttl"],
        source="otel",
        build=traces_round1.repeats_60s_apart_changing,
        reasoning="""
        A nightly job reads execute_tool get_feature_flags({"env": "prod"}) once per
        trace; the traces are 60 s apart (explicit timestamps) and the flags change every
        30 s, so every recorded result differs from the one before. No TTL gives a correct
        hit.
        """,
        parallel=[],
        cache=[
            nc("nightly_sync", ROOT_NC),
            nc(
                "execute_tool get_feature_flags",
                "one call per trace, traces 60 s apart, and the "
                "flags change every 30 s: every repeat's recorded result differs from the one "
                "before, so no TTL would ever give a correct hit",
            ),
        ],
    ),
    Case(
        name="repeats_within_trace_60s_between_traces",
        pattern=["ttl", "changing_results"],
        source="otel",
        build=traces_round1.repeats_within_trace_60s_between_traces,
        reasoning="""
        Each trace reads the feature flags twice, 3 s apart (the second time when
        publishing, in a child span), with identical results; traces are 60 s apart and
        the flags change every 30 s. Issue 12 labelled it cacheable with one hit per
        trace; issue 25 re-checked it: the re-read at publish time exists to publish with
        fresh flags, so it is not cacheable (see the label). Counting the 60 s repeats as
        hits would be wrong either way.
        """,
        parallel=[
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
        cache=[
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
    ),
    Case(
        name="retry_http_503",
        pattern=["retry", "uninstrumented"],
        source="otel",
        build=traces_round1.retry_http_503,
        reasoning="""
        GET /v1/quotes?symbol=... fails with 503 (span status ERROR) once or twice, and
        the service retries after 10 ms until it succeeds. Retries, not cache hits:
        sequential by nature, and each trace asks for a different symbol.
        """,
        parallel=[
            dep(
                "GET /quote",
                "GET /v1/quotes",
                None,
                "each request retries the one before, which failed with 503",
            ),
        ],
        cache=[
            nc("GET /quote", ROOT_NC),
            nc(
                "GET /v1/quotes",
                "repeats are retries after errors; each trace asks for a different symbol",
            ),
        ],
    ),
    Case(
        name="repeated_put",
        pattern=["write"],
        source="otel",
        build=traces_round1.repeated_put,
        reasoning="""
        The report is uploaded twice with the same PUT URL (a retry-happy client), then a
        notification is POSTed. PUTs are writes, never cached, even with identical URLs;
        the two PUTs' order decides which version stays; the notification follows the
        upload.
        """,
        parallel=[
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
        cache=[
            nc("publish_report", ROOT_NC),
            nc("PUT /v1/objects/{key}", "a write, even with identical URL and body"),
            nc("POST /v1/notify", "a write"),
        ],
    ),
    Case(
        name="cacheable_sql_select_unrecorded",
        pattern=["cacheable", "unknown_results", "uninstrumented"],
        source="otel",
        build=traces_round1.cacheable_sql_select_unrecorded,
        reasoning="""
        SELECT rate FROM tax_rates WHERE region = 'EU' in every checkout, seconds apart,
        next to a per-request shipping-zone lookup. The tax table is reference data
        (truth: cacheable), but DB spans never record rows, so a tool can offer it only at
        low confidence. The two SELECTs read different tables with constants from the
        request: independent.
        """,
        parallel=[
            ind(
                "GET /checkout",
                "SELECT tax_rates",
                "SELECT shipping_zones",
                "different tables read by constants from the request",
            ),
        ],
        cache=[
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
    ),
]
