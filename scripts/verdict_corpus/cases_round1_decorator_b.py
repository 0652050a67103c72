"""The case table, round one (issue 12), decorator cases, part b.

Each entry names its pattern tags, source and builder (with its parameters), its labels, and the
reasoning behind them, next to each other.
"""

from __future__ import annotations

from . import agents_round1_a, agents_round1_b
from .labels import ROOT_NC, Case, cache, dep, ind, nc

CASES: list[Case] = [
    Case(
        name="cacheable_embedding",
        pattern=["cacheable", "independent", "model_call"],
        source="decorator",
        build=agents_round1_a.cacheable_embedding,
        reasoning="""
        A router embeds its fixed routing instructions and the user's message (two calls
        to an embedding server, ~20 ms each), then compares the vectors. The instruction
        text is the same in every trace and the embedding is deterministic, so those calls
        return identical vectors: cacheable (keyed by the text). The two embed calls of
        one trace take different texts and neither uses the other's vector: independent.
        """,
        parallel=[
            ind(
                "route_request",
                "embed",
                None,
                "the instructions and the user's message are "
                "embedded separately; neither embedding takes the other",
            ),
            dep("route_request", "embed", "nearest_route", "compares both embeddings"),
        ],
        cache=[
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
    ),
    Case(
        name="changing_results_stock",
        pattern=["changing_results", "dependent"],
        source="decorator",
        build=agents_round1_a.changing_results_stock,
        reasoning="""
        reserve_item reads the stock of SKU-1, reserves qty if enough is left
        (reserve_stock decrements it), then reads the stock again to confirm. get_stock's
        argument never changes, but its result does (50, 48, 45, ...), and reserve_stock
        is a write whose name does not say so: a cache would either return a stale count
        or skip a reservation. reserve_stock runs only when the first read says enough is
        left (a control dependency), and the confirming read must follow the reservation.
        """,
        parallel=[
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
        cache=[
            nc("reserve_item", ROOT_NC),
            nc(
                "get_stock",
                "same SKU, but the stock changes with every reservation: the recorded results "
                "differ",
            ),
            nc("reserve_stock", "a write"),
        ],
    ),
    Case(
        name="retry_after_error_instrumented",
        pattern=["retry", "dependent"],
        source="decorator",
        build=agents_round1_b.retry_after_error_instrumented,
        reasoning="""
        fetch_rates(base) fails with ConnectionError on its first one or two attempts and
        the agent retries after 10 ms. Repeats with the same arguments after an ERROR
        status are retries: sequential (each attempt is made because the previous failed)
        and never a cache hit (there is no successful result to serve). Each trace
        converts from a different base currency.
        """,
        parallel=[
            dep(
                "convert_amount",
                "fetch_rates",
                None,
                "each call retries the previous one after it failed",
            ),
            dep("convert_amount", "fetch_rates", "convert", "converts with the rates"),
        ],
        cache=[
            nc("convert_amount", ROOT_NC),
            nc(
                "fetch_rates",
                "repeats are retries after errors, each trace a different base currency",
            ),
            nc("convert", "different amounts"),
        ],
    ),
    Case(
        name="repeated_write_checkpoint",
        pattern=["write", "dependent"],
        source="decorator",
        build=agents_round1_b.repeated_write_checkpoint,
        reasoning="""
        After planning and after acting, the agent calls save_checkpoint(run_id, state),
        which writes and fsyncs a JSON file. When the act step fails, the state is
        unchanged and the second save has exactly the same arguments as the first. It is
        still a write (its name does not say so): it can never be cached, and two writes
        of the same file must keep their order.
        """,
        parallel=[
            dep("run_task", "plan_step", "act_step", "act executes the plan"),
            dep("run_task", "plan_step", "save_checkpoint", "saves the plan's state"),
            dep("run_task", "act_step", "save_checkpoint", "saves the state act produced"),
            dep(
                "run_task",
                "save_checkpoint",
                None,
                "both write the same file; the last write must win",
            ),
        ],
        cache=[
            nc("run_task", ROOT_NC),
            nc("plan_step", "different tasks"),
            nc("act_step", "different plans"),
            nc(
                "save_checkpoint",
                "a write (to a file), even though its name does not say so and its arguments "
                "repeat",
            ),
        ],
    ),
    Case(
        name="per_session_cart",
        pattern=["per_user"],
        source="decorator",
        build=agents_round1_b.per_session_cart,
        reasoning="""
        get_cart() takes no arguments: it reads the cart of the session in the request
        context, and records session.id and enduser.id on its span, as web frameworks do.
        Three of the four sessions have the same cart (["mug"]), so arguments and recorded
        results are identical across traces, yet serving one session's cart to another
        would be a data leak: the caller's identity is part of the key, and no user
        repeats, so nothing is cacheable.
        """,
        parallel=[
            dep("show_checkout", "get_cart", "price_items", "prices the cart's items"),
        ],
        cache=[
            nc("show_checkout", ROOT_NC),
            nc(
                "get_cart",
                "no arguments, but it reads the cart of the session in the request "
                "context (session.id / enduser.id on the span): one user's cart must never be "
                "served to another",
            ),
            nc("price_items", "different carts"),
        ],
    ),
    Case(
        name="rag_two_retrievers_same_query",
        pattern=["independent", "shared_read_only_arg"],
        source="decorator",
        build=agents_round1_b.rag_two_retrievers_same_query,
        reasoning="""
        Hybrid retrieval: a BM25 search and a dense search over read-only indexes, both
        taking the same query string, then a rerank of both hit lists. The two retrievers
        share an argument value, but both are reads, so the shared value is not a resource
        one of them changes: they are independent. (A rule that treats every shared
        argument as a dependency is safe but misses this.)
        """,
        parallel=[
            ind(
                "retrieve_context",
                "retrieve_bm25",
                "retrieve_dense",
                "both read the same query (read-only indexes); neither uses the other's result",
            ),
            dep("retrieve_context", "retrieve_bm25", "rerank", "reranks the BM25 hits"),
            dep("retrieve_context", "retrieve_dense", "rerank", "reranks the dense hits"),
        ],
        cache=[
            nc("retrieve_context", ROOT_NC),
            nc("retrieve_bm25", "a different query every trace"),
            nc("retrieve_dense", "a different query every trace"),
            nc("rerank", "different hits every trace"),
        ],
    ),
    Case(
        name="map_reduce_llm",
        pattern=["independent", "model_call", "loop"],
        source="decorator",
        build=agents_round1_b.map_reduce_llm,
        reasoning="""
        Map-reduce summarization: the report is cut into chunks, each summarized by a
        model call (kind gpu, a round trip to a model server), then combined. Each
        summarize_chunk takes only its own chunk of the input; none takes another's
        summary, so the map calls are independent even though they are model calls.
        combine_summaries takes them all.
        """,
        parallel=[
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
        cache=[
            nc("summarize_report", ROOT_NC),
            nc("summarize_chunk", "every chunk is different"),
            nc("combine_summaries", "different summaries every trace"),
        ],
    ),
    Case(
        name="nested_subagents",
        pattern=["independent", "dependent", "nested"],
        source="decorator",
        build=agents_round1_b.nested_subagents,
        reasoning="""
        An orchestrator runs two research subagents on two topics from the request, then
        writes a report from their notes. Inside each research span, search_web returns
        URLs and fetch_page fetches each of them. The two research calls share nothing and
        are independent; fetch_page depends on search_web (its URL is in the search
        result), and the two fetch_page calls are independent of each other.
        """,
        parallel=[
            ind(
                "orchestrate",
                "research",
                None,
                "the two research subagents take different topics from the request and share "
                "nothing",
            ),
            dep("orchestrate", "research", "write_report", "writes from the research notes"),
            dep(
                "research",
                "search_web",
                "fetch_page",
                "fetch_page takes URLs from the search results",
            ),
            ind(
                "research",
                "fetch_page",
                None,
                "both URLs come from the same search result; neither fetch uses the other's page",
            ),
        ],
        cache=[
            nc("orchestrate", ROOT_NC),
            nc("research", "different topics"),
            nc("search_web", "different topics"),
            nc("fetch_page", "different URLs"),
            nc("write_report", "different notes"),
        ],
    ),
    Case(
        name="permission_gate",
        pattern=["dependent", "control_dependency"],
        source="decorator",
        build=agents_round1_b.permission_gate,
        reasoning="""
        check_access(user, doc_id) returns a boolean; fetch_document(doc_id) is called
        only if it is True. No value flows from check_access into fetch_document's
        arguments, but the fetch is control-dependent on the check: running them together
        fetches documents for users who may not see them (extra load, an access in the
        audit log, and a security review that fails). A careful engineer does not
        parallelize an authorization check with the access it guards; labelled dependent.
        """,
        parallel=[
            dep(
                "open_document",
                "check_access",
                "fetch_document",
                "fetch_document runs only if "
                "check_access returned True: a control dependency (fetching first would read "
                "data the user may not see)",
            ),
        ],
        cache=[
            nc("open_document", ROOT_NC),
            nc("check_access", "a different user and document every trace"),
            nc("fetch_document", "a different document every trace"),
        ],
    ),
    Case(
        name="write_then_read_file",
        pattern=["dependent", "shared_resource", "small_int_id"],
        source="decorator",
        build=agents_round1_b.write_then_read_file,
        reasoning="""
        store_upload(path, data) writes a file and returns its size (a small int);
        scan_file(path) reads the same file; index_file(path) runs only if the scan is
        clean. The data flows through the file system under a shared path argument:
        dependent.
        """,
        parallel=[
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
        cache=[
            nc("ingest_upload", ROOT_NC),
            nc("store_upload", "a write"),
            nc("scan_file", "different files"),
            nc("index_file", "different files"),
        ],
    ),
    Case(
        name="independent_common_values",
        pattern=["independent", "common_values"],
        source="decorator",
        build=agents_round1_b.independent_common_values,
        reasoning="""
        A dashboard reads a feature flag (True), a user's unread count (0 or 1) and the
        list of active alerts (list_alerts(active=True, page=1): constants), then renders.
        The three reads take different inputs; that the flag's True equals the alert
        call's active=True, or that a count of 1 equals page=1, is a coincidence of values
        that are everywhere. A tool that links on such values would wrongly chain these.
        list_alerts is called with the same arguments in every trace but returns different
        (live) alerts: not cacheable.
        """,
        parallel=[
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
        cache=[
            nc("build_dashboard", ROOT_NC),
            nc("get_feature_flag", "a different flag every trace"),
            nc("count_unread", "a different user every trace"),
            cache(
                "list_alerts",
                "not_cacheable",
                "same arguments every trace, but alerts are live data and the recorded results "
                "differ",
            ),
            nc("render_dashboard", "different inputs"),
        ],
    ),
    Case(
        name="reads_share_user_id",
        pattern=["independent", "shared_read_only_arg"],
        source="decorator",
        build=agents_round1_b.reads_share_user_id,
        reasoning="""
        A profile page reads the profile, the orders and the recommendations of the same
        user id, then renders. All three take the same argument (the user id) and all
        three are reads: no hop changes what another reads, so they are independent.
        Counterpart of the shared-resource cases: a shared argument means a dependency
        only when an earlier hop changes the resource.
        """,
        parallel=[
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
        cache=[
            nc("profile_page", ROOT_NC),
            nc("get_profile", "a different user every trace"),
            nc("get_orders", "a different user every trace"),
            nc("get_recommendations", "a different user every trace"),
            nc("render_profile", "different inputs"),
        ],
    ),
    Case(
        name="embedding_then_search",
        pattern=["dependent", "model_call"],
        source="decorator",
        build=agents_round1_b.embedding_then_search,
        reasoning="""
        embed_query returns a vector (a list of floats); vector_search takes exactly that
        vector. A plain data chain through a structured value.
        """,
        parallel=[
            dep(
                "semantic_search",
                "embed_query",
                "vector_search",
                "searches with the vector embed_query returned",
            ),
        ],
        cache=[
            nc("semantic_search", ROOT_NC),
            nc("embed_query", "a different query every trace"),
            nc("vector_search", "a different vector every trace"),
        ],
    ),
    Case(
        name="async_awaits_in_sequence",
        pattern=["independent", "independent_instrumented", "async"],
        source="decorator",
        build=agents_round1_b.async_awaits_in_sequence,
        reasoning="""
        The most common shape in async agent code: three awaits in a row where one
        asyncio.gather would do. A chat turn loads the conversation history (by
        conversation id), the user's preferences (by user id) and knowledge-base passages
        (by the message text) over real asyncio streams, then builds the prompt from all
        three. The three loads take different request fields and none takes another's
        result: independent. build_prompt depends on each.
        """,
        parallel=[
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
            dep(
                "handle_chat_turn",
                "load_history",
                "build_prompt",
                "the prompt includes the history",
            ),
            dep("handle_chat_turn", "load_user_prefs", "build_prompt", "uses the preferred tone"),
            dep("handle_chat_turn", "search_kb", "build_prompt", "includes the KB passages"),
        ],
        cache=[
            nc("handle_chat_turn", ROOT_NC),
            nc("load_history", "a different conversation every trace"),
            nc("load_user_prefs", "a different user every trace"),
            nc("search_kb", "a different message every trace"),
            nc("build_prompt", "different inputs"),
        ],
    ),
    Case(
        name="async_token_chain",
        pattern=["dependent", "short_string_id", "async"],
        source="decorator",
        build=agents_round1_b.async_token_chain,
        reasoning="""
        Async OAuth-style chain: get_access_token(client_id) returns an 8-character token,
        and fetch_statement(token, account) sends it. A strict chain through a short
        string.
        """,
        parallel=[
            dep(
                "call_partner_api",
                "get_access_token",
                "fetch_statement",
                "fetch_statement sends the short token get_access_token returned",
            ),
        ],
        cache=[
            nc("call_partner_api", ROOT_NC),
            nc("get_access_token", "a different client every trace"),
            nc("fetch_statement", "a different token and account every trace"),
        ],
    ),
]
