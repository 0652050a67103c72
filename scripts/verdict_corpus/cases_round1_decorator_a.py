"""The case table, round one (issue 12), decorator cases, part a.

Each entry names its pattern tags, source and builder (with its parameters), its labels, and the
reasoning behind them, next to each other.
"""

from __future__ import annotations

from . import agents_round1_a
from .labels import ROOT_NC, Case, cache, dep, ind, nc

CASES: list[Case] = [
    Case(
        name="indep_fetch_instrumented",
        pattern=["independent", "independent_instrumented"],
        source="decorator",
        build=agents_round1_a.indep_fetch_instrumented,
        reasoning="""
        A morning-briefing handler fetches the weather for the request's city, the user's
        calendar for the request's day and the news for the request's topic, one after
        another, then composes the briefing from the three results. Each fetch takes only
        fields of the incoming request; none takes another fetch's result, and all three
        are reads over HTTP, so running them together (asyncio.gather) cannot change what
        any of them returns. compose_briefing takes all three results, so it depends on
        each. Every argument is fingerprinted by @trace, so the independence is provable
        from the trace.
        """,
        parallel=[
            ind(
                "handle_request",
                "fetch_weather",
                "fetch_calendar",
                "different inputs, no result used",
            ),
            ind(
                "handle_request", "fetch_weather", "fetch_news", "different inputs, no result used"
            ),
            ind(
                "handle_request", "fetch_calendar", "fetch_news", "different inputs, no result used"
            ),
            dep("handle_request", "fetch_weather", "compose_briefing", "compose takes the weather"),
            dep("handle_request", "fetch_calendar", "compose_briefing", "compose takes the events"),
            dep("handle_request", "fetch_news", "compose_briefing", "compose takes the headlines"),
        ],
        cache=[
            nc("handle_request", ROOT_NC),
            nc("fetch_weather", "a different city in every trace"),
            nc("fetch_calendar", "a different user and day in every trace"),
            nc("fetch_news", "a different topic in every trace"),
            nc("compose_briefing", "different inputs in every trace"),
        ],
    ),
    Case(
        name="loop_over_items",
        pattern=["independent", "n_plus_one", "loop"],
        source="decorator",
        build=agents_round1_a.loop_over_items,
        reasoning="""
        The classic N+1: list a customer's open orders (real ids, 5-digit ints), then
        fetch each order by id in a loop, then summarize. Each fetch_order takes an id
        from the listing, not from the previous fetch, and reads a different row, so the
        loop's iterations are independent of each other (a batched or concurrent fetch
        gives the same orders). Every fetch depends on list_open_orders (the id is in its
        result), and the summary depends on all of them.
        """,
        parallel=[
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
        cache=[
            nc("sync_orders", ROOT_NC),
            nc("list_open_orders", "a different customer in every trace"),
            nc("fetch_order", "every order id is fetched once"),
            nc("summarize_orders", "different orders every time"),
        ],
    ),
    Case(
        name="parent_cpu_between_hops",
        pattern=["independent", "parent_work_between"],
        source="decorator",
        build=agents_round1_a.parent_cpu_between_hops,
        reasoning="""
        price_order fetches a quote (~40 ms of network), validates the quote's signature
        in its own code (~40 ms of real CPU, hashing), then fetches an FX rate (~40 ms).
        The FX fetch takes only the request's currency, so it is independent of the quote.
        The validation needs the quote, and it runs in the parent, not in a span. The best
        real rewrite starts both fetches together, and validates when the quote arrives:
        40 + 40 = ~80 ms instead of ~120 ms, a saving of ~40 ms (one hop), not the ~80 ms
        that a replay which drops the parent's own work between the hops would report. The
        labelled range (22-60 ms) allows for timing noise on a loaded 2-core machine.
        """,
        parallel=[
            ind(
                "price_order",
                "fetch_quote",
                "fetch_fx_rate",
                "the quote and the FX rate take "
                "different request fields; neither takes the other's result",
            ),
        ],
        cache=[
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
    ),
    Case(
        name="both_orders_instrumented",
        pattern=["independent", "both_orders"],
        source="decorator",
        build=agents_round1_a.both_orders_instrumented,
        reasoning="""
        An account page loads the user's profile and the account's settings; which one is
        fetched first depends on the request (alternating in the six traces). The two
        reads take different request fields and neither uses the other's result. The same
        pair seen in both orders is one pattern, so a tool must report one finding for it,
        not one per order.
        """,
        parallel=[
            ind(
                "load_account_page",
                "fetch_profile",
                "fetch_settings",
                "different inputs; the code even runs them in either order depending on the "
                "request",
            ),
        ],
        cache=[
            nc("load_account_page", ROOT_NC),
            nc("fetch_profile", "a different user in every trace"),
            nc("fetch_settings", "a different account in every trace"),
        ],
        expect_one_finding=True,
    ),
    Case(
        name="small_int_id_chain",
        pattern=["dependent", "small_int_id"],
        source="decorator",
        build=agents_round1_a.small_int_id_chain,
        reasoning="""
        lookup_user(email) returns a small integer id (3, 7, 9, 12); get_orders(user_id)
        takes exactly that integer; render_reply formats the orders. A strict chain:
        get_orders cannot start before lookup_user returned. This is the issue's first
        false positive: small ints that were not fingerprinted made "no fingerprint
        matched" look like independence.
        """,
        parallel=[
            dep(
                "answer_order_question",
                "lookup_user",
                "get_orders",
                "get_orders takes the small integer user id lookup_user returned",
            ),
            dep(
                "answer_order_question",
                "lookup_user",
                "render_reply",
                "transitively, via the orders",
            ),
            dep("answer_order_question", "get_orders", "render_reply", "renders the orders"),
        ],
        cache=[
            nc("answer_order_question", ROOT_NC),
            nc("lookup_user", "a different e-mail in every trace"),
            nc("get_orders", "a different user id in every trace"),
            nc("render_reply", "different orders every time"),
        ],
    ),
    Case(
        name="short_string_id_chain",
        pattern=["dependent", "short_string_id"],
        source="decorator",
        build=agents_round1_a.short_string_id_chain,
        reasoning="""
        resolve_sku(product name) returns a two-character SKU ("A1", "B7"...), and
        get_price takes it. A strict chain through a short string, which a minimum-length
        rule for fingerprints would miss.
        """,
        parallel=[
            dep(
                "quote_product",
                "resolve_sku",
                "get_price",
                "get_price takes the two-character SKU resolve_sku returned",
            ),
            dep("quote_product", "resolve_sku", "format_quote", "transitively, via the price"),
            dep("quote_product", "get_price", "format_quote", "formats the price"),
        ],
        cache=[
            nc("quote_product", ROOT_NC),
            nc("resolve_sku", "a different product name in every trace"),
            nc("get_price", "a different SKU in every trace"),
            nc("format_quote", "different prices every time"),
        ],
    ),
    Case(
        name="llm_substring_to_tool",
        pattern=["dependent", "llm_transformed_output", "llm_substring"],
        source="decorator",
        build=agents_round1_a.llm_substring_to_tool,
        reasoning="""
        A model call (@trace(kind="gpu", name="chat")) answers "I need more context. I
        will search the docs for: retries configuration"; the agent cuts the text after
        "search the docs for:" and passes it to search_docs; a second chat takes the
        search results. The tool's argument is a substring of the model's output, not
        equal to it, so an equality check on fingerprints misses the link. Every pair here
        is dependent.
        """,
        parallel=[
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
        cache=[
            nc("answer_question", ROOT_NC),
            nc("chat", "different prompts every time"),
            nc("search_docs", "a different query in every trace"),
        ],
    ),
    Case(
        name="llm_json_field_to_tool",
        pattern=["dependent", "llm_transformed_output", "llm_json_field"],
        source="decorator",
        build=agents_round1_a.llm_json_field_to_tool,
        reasoning="""
        The model returns JSON ({"tool": "get_weather", "arguments": {"city": "Oslo",
        "unit": "celsius"}}); the agent parses it and calls get_weather(city, unit) with
        its fields. The tool's arguments are fields of the model's output, so the tool
        depends on the model call.
        """,
        parallel=[
            dep(
                "run_agent_step",
                "chat",
                "get_weather",
                "get_weather's city is a field parsed out of the chat's JSON output",
            ),
        ],
        cache=[
            nc("run_agent_step", ROOT_NC),
            nc("chat", "different prompts every time"),
            nc("get_weather", "a different city in every trace"),
        ],
    ),
    Case(
        name="shared_resource_patch_then_tests",
        pattern=["dependent", "shared_resource"],
        source="decorator",
        build=agents_round1_a.shared_resource_patch_then_tests,
        reasoning="""
        A coding agent reads calc.py from a fresh repository, computes a fix from its
        content, writes it with apply_patch(repo, path, old, new), then run_tests(repo)
        executes the patched file and returns pass/fail counts. run_tests takes none of
        apply_patch's results (it returns True); the data flows through the file system.
        Running the two together would test unpatched code, so they are dependent.
        read_source precedes apply_patch (the patch is computed from its content) and so,
        transitively, run_tests.
        """,
        parallel=[
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
                "transitively: run_tests must follow apply_patch, which needs read_source's "
                "content",
            ),
        ],
        cache=[
            nc("fix_bug", ROOT_NC),
            nc("read_source", "a different repository every trace; also the file changes"),
            nc("apply_patch", "a write"),
            nc("run_tests", "its result depends on the files, which apply_patch changed"),
        ],
    ),
    Case(
        name="shell_chain_git",
        pattern=["dependent", "shell_chain", "shared_resource"],
        source="decorator",
        build=agents_round1_a.shell_chain_git,
        reasoning="""
        Real git in temporary repositories: git_checkout -b, git apply of a patch, git
        commit -am, git push to a local bare remote. Each step changes the repository
        (working tree, index, refs) the next one operates on; none passes a value on
        except the repository path and branch name they share. Every pair is dependent;
        none is cacheable (all are state-changing, even where the arguments repeat).
        """,
        parallel=[
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
        cache=[
            nc("ship_fix", ROOT_NC),
            nc("git_checkout", "changes the working tree"),
            nc("git_apply", "changes the working tree"),
            nc("git_commit", "writes a commit"),
            nc("git_push", "writes to the remote"),
        ],
    ),
    Case(
        name="cursor_pagination_instrumented",
        pattern=["dependent", "pagination", "cursor_pagination"],
        source="decorator",
        build=agents_round1_a.cursor_pagination_instrumented,
        reasoning="""
        list_issues(repo, cursor) returns a page and next_cursor (base64 text); the loop
        calls list_issues again with that cursor until it is None; label_batch takes all
        items. Each page request needs the cursor from the previous response, so the loop
        is sequential.
        """,
        parallel=[
            dep(
                "triage_issues",
                "list_issues",
                None,
                "each call takes the cursor the previous call returned",
            ),
            dep(
                "triage_issues",
                "list_issues",
                "label_batch",
                "labels the issues the pages returned",
            ),
        ],
        cache=[
            nc("triage_issues", ROOT_NC),
            nc("list_issues", "every page is fetched once (different cursor, different repo)"),
            nc("label_batch", "different issues every time"),
        ],
    ),
    Case(
        name="polling_job_status_instrumented",
        pattern=["polling", "dependent"],
        source="decorator",
        build=agents_round1_a.polling_job_status_instrumented,
        reasoning="""
        submit_export starts a background job and returns its id; the agent calls
        get_job_status(job_id) and sleeps 25 ms in its own code until the status is "done"
        (the job finishes ~90 ms after submission), then download_export(job_id). Every
        poll repeats the same read with the same argument, but the answer changes over
        time (queued, running, done): a cache would keep answering "queued" and the loop
        would never end, so this is polling, not cacheable. The polls are sequential by
        nature (each one is made because the previous said "not done"), and the download
        is control-dependent on the last poll (it runs only once the status says done)
        even though its argument came from submit_export.
        """,
        parallel=[
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
                "each poll happens after the previous one said the job is not done and the agent "
                "slept",
            ),
            dep(
                "export_report",
                "get_job_status",
                "download_export",
                "downloads only once a poll said done",
            ),
            dep("export_report", "submit_export", "download_export", "downloads the job submitted"),
        ],
        cache=[
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
    ),
    Case(
        name="cacheable_schema_lookup",
        pattern=["cacheable"],
        source="decorator",
        build=agents_round1_a.cacheable_schema_lookup,
        reasoning="""
        A text-to-SQL agent: plan_query fetches the schema of the events table and drafts
        SQL from it; validate_query fetches the same schema again and runs EXPLAIN on the
        SQL (a database round trip), then checks the plan against the schema; run_query
        runs it. fetch_schema("events") is called twice per trace and in every trace, with
        identical results (the table never changes): the one true cache candidate here.
        Within validate_query, EXPLAIN takes the SQL, not the schema, so fetch_schema and
        explain_query are independent. The four questions give four different SQL texts,
        so nothing else repeats.
        """,
        parallel=[
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
        cache=[
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
    ),
    Case(
        name="cacheable_tax_rate_sqlite",
        pattern=["cacheable", "independent", "loop"],
        source="decorator",
        build=agents_round1_a.cacheable_tax_rate_sqlite,
        reasoning="""
        Pricing a cart against a real SQLite database: for each SKU, get_product(sku) and
        get_tax_rate(region). The region comes from the request and is the same ("EU") for
        every line and every trace; the tax table never changes, so get_tax_rate returns
        the identical rate every time: cacheable. The product lookups read different SKUs
        and take nothing from each other or from the tax rate, so the loop and the pair
        are independent (reads of static tables).
        """,
        parallel=[
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
        cache=[
            nc("price_cart", ROOT_NC),
            nc("get_product", "every SKU once per trace and different carts"),
            cache(
                "get_tax_rate",
                "cacheable",
                "the same region's rate from a table that never "
                "changes, several times per trace and across traces; identical results",
            ),
        ],
    ),
]
