"""The case table, round one (issue 12), OTel cases, part a.

Each entry names its pattern tags, source and builder (with its parameters), its labels, and the
reasoning behind them, next to each other.
"""

from __future__ import annotations

from . import traces_round1
from .labels import ROOT_NC, Case, dep, ind, nc

CASES: list[Case] = [
    Case(
        name="indep_http_overlap_uninstrumented",
        pattern=["independent", "independent_uninstrumented", "overlap"],
        source="otel",
        build=traces_round1.indep_http_overlap_uninstrumented,
        reasoning="""
        A service's /dashboard handler calls GET /v1/weather and GET /v1/news (HTTP CLIENT
        spans, http.request.method + url.full, no fingerprints). In two of the six traces
        the service ran them concurrently already (a code path that uses asyncio.gather);
        in the others, sequentially. The URLs come from the request, the calls are reads,
        and having run overlapped without changing anything is positive evidence that they
        are independent.
        """,
        parallel=[
            ind(
                "GET /dashboard",
                "GET /v1/weather",
                "GET /v1/news",
                "different URLs from the "
                "request; in some traces the service already ran them concurrently",
            ),
        ],
        cache=[
            nc("GET /dashboard", ROOT_NC),
            nc("GET /v1/weather", "a different city every trace (results not recorded)"),
            nc("GET /v1/news", "a different topic every trace (results not recorded)"),
        ],
    ),
    Case(
        name="indep_http_both_orders",
        pattern=["independent", "independent_uninstrumented", "both_orders"],
        source="otel",
        build=traces_round1.indep_http_both_orders,
        reasoning="""
        Uninstrumented GET /v1/profile/{user} and GET /v1/settings/{account}, sequential,
        but in alternating order across six traces. A call that ran both before and after
        the other cannot need the other's output: independent, and one pattern (expect one
        finding).
        """,
        parallel=[
            ind(
                "GET /account",
                "GET /v1/profile",
                "GET /v1/settings",
                "different URLs from the request; seen in both orders",
            ),
        ],
        cache=[
            nc("GET /account", ROOT_NC),
            nc("GET /v1/profile", "a different user every trace"),
            nc("GET /v1/settings", "a different account every trace"),
        ],
        expect_one_finding=True,
    ),
    Case(
        name="genai_parallel_tool_calls",
        pattern=["independent", "model_call", "genai"],
        source="otel",
        build=traces_round1.genai_parallel_tool_calls,
        reasoning="""
        A GenAI agent (gen_ai.* semantic conventions): the first chat asks for three tools
        in one turn; the agent executes get_weather, get_news and get_stock_quote one
        after another (each with recorded gen_ai.tool.call.arguments and result), then a
        second chat reads the results. The three tool calls take their arguments from the
        first chat's output and none takes another tool's result: they are independent of
        each other (this is what "parallel tool calls" are for). Each depends on the first
        chat, and the final chat on all three.
        """,
        parallel=[
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
            dep(
                "invoke_agent assistant", "chat gpt-4o-mini", "execute_tool get_stock_quote", "same"
            ),
        ],
        cache=[
            nc("invoke_agent assistant", ROOT_NC),
            nc("chat gpt-4o-mini", "different conversations"),
            nc("execute_tool get_weather", "a different city every trace"),
            nc("execute_tool get_news", "a different topic every trace"),
            nc("execute_tool get_stock_quote", "a different ticker every trace"),
        ],
    ),
    Case(
        name="small_int_id_tool_chain",
        pattern=["dependent", "small_int_id"],
        source="otel",
        build=traces_round1.small_int_id_tool_chain,
        reasoning="""
        A deterministic support workflow (no model in between): execute_tool find_customer
        returns "7" (gen_ai.tool.call.result), and execute_tool get_invoices is called
        with {"customer_id": 7}. The small integer flows from one tool's result into the
        next tool's arguments: dependent.
        """,
        parallel=[
            dep(
                "support_workflow",
                "execute_tool find_customer",
                "execute_tool get_invoices",
                "get_invoices' customer_id is the small integer find_customer returned",
            ),
        ],
        cache=[
            nc("support_workflow", ROOT_NC),
            nc("execute_tool find_customer", "a different e-mail every trace"),
            nc("execute_tool get_invoices", "a different customer every trace"),
        ],
    ),
    Case(
        name="short_string_id_tool_chain",
        pattern=["dependent", "short_string_id"],
        source="otel",
        build=traces_round1.short_string_id_tool_chain,
        reasoning="""
        execute_tool lookup_ticket returns a short key ("T-9", "Q7"...), and execute_tool
        get_comments is called with {"ticket": <that key>}: dependent through a short
        string.
        """,
        parallel=[
            dep(
                "support_workflow",
                "execute_tool lookup_ticket",
                "execute_tool get_comments",
                "get_comments takes the short ticket key lookup_ticket returned",
            ),
        ],
        cache=[
            nc("support_workflow", ROOT_NC),
            nc("execute_tool lookup_ticket", "a different subject every trace"),
            nc("execute_tool get_comments", "a different ticket every trace"),
        ],
    ),
    Case(
        name="llm_substring_to_tool_genai",
        pattern=["dependent", "llm_transformed_output", "llm_substring", "genai"],
        source="otel",
        build=traces_round1.llm_substring_to_tool_genai,
        reasoning="""
        A chat's output text (gen_ai.output.messages) says "Let me look up the status of
        order 88410 placed last week..."; the following tool call's arguments are
        {"query": "order 88410"}, a substring of that text. The tool depends on the chat,
        and the second chat reads the tool's result.
        """,
        parallel=[
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
        cache=[
            nc("invoke_agent assistant", ROOT_NC),
            nc("chat gpt-4o-mini", "different conversations"),
            nc("execute_tool search_orders", "a different order every trace"),
        ],
    ),
    Case(
        name="llm_json_field_to_tool_genai",
        pattern=["dependent", "llm_transformed_output", "llm_json_field", "genai"],
        source="otel",
        build=traces_round1.llm_json_field_to_tool_genai,
        reasoning="""
        The chat's output is JSON ({"action": "lookup", "sku": "KB-204", ...}); the tool
        get_product is called with {"sku": "KB-204"}, a field of that output: dependent.
        """,
        parallel=[
            dep(
                "invoke_agent assistant",
                "chat gpt-4o-mini",
                "execute_tool get_product",
                "the SKU is a field of the chat's JSON output",
            ),
        ],
        cache=[
            nc("invoke_agent assistant", ROOT_NC),
            nc("chat gpt-4o-mini", "different conversations"),
            nc("execute_tool get_product", "a different SKU every trace"),
        ],
    ),
    Case(
        name="usage_only_llm_chain",
        pattern=["dependent", "usage_only_llm", "model_call"],
        source="otel",
        build=traces_round1.usage_only_llm_chain,
        reasoning="""
        An any-agent style run: model calls are spans named call_llm that carry only
        gen_ai.request.model and gen_ai.usage.* (no gen_ai.operation.name), alternating
        with execute_tool web_search spans that carry only the tool name. Each model call
        reads the conversation so far, including the previous search result, and each
        search is chosen by the model call before it: a strict chain. The kind rules call
        these spans model calls because of their token usage; a parallel finder that
        treats only gen_ai.operation.name as a model call would see "no evidence against"
        here.
        """,
        parallel=[
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
        cache=[
            nc("agent_run", ROOT_NC),
            nc("call_llm", "different conversations"),
            nc("execute_tool web_search", "different queries (arguments not recorded)"),
        ],
    ),
    Case(
        name="usage_only_draft_critique",
        pattern=["dependent", "usage_only_llm", "model_call"],
        source="otel",
        build=traces_round1.usage_only_draft_critique,
        reasoning="""
        Draft, critique, revise: three model calls (CLIENT spans with gen_ai.usage.*
        only), each reading the previous one's output (the critique reads the draft; the
        revision applies the critique to the draft). A chain; nothing repeats.
        """,
        parallel=[
            dep("write_email", "llm draft", "llm critique", "the critique reads the draft"),
            dep("write_email", "llm draft", "llm revise", "revises the draft"),
            dep("write_email", "llm critique", "llm revise", "applies the critique"),
        ],
        cache=[
            nc("write_email", ROOT_NC),
            nc("llm draft", "different requests"),
            nc("llm critique", "different drafts"),
            nc("llm revise", "different drafts"),
        ],
    ),
    Case(
        name="openinference_llm_tool_chain",
        pattern=["dependent", "model_call", "openinference"],
        source="otel",
        build=traces_round1.openinference_llm_tool_chain,
        reasoning="""
        OpenInference conventions (openinference.span.kind LLM / TOOL, input.value /
        output.value): the LLM's output names the flight, the lookup_flight tool is called
        with it, and a second LLM call reads the tool's output. A model → tool → model
        chain recognised through a different convention.
        """,
        parallel=[
            dep(
                "Agent.run",
                "ChatCompletion",
                "lookup_flight",
                "the flight number is taken from the LLM's output",
            ),
            dep("Agent.run", "ChatCompletion", None, "the second completion reads the tool output"),
        ],
        cache=[
            nc("Agent.run", ROOT_NC),
            nc("ChatCompletion", "different conversations"),
            nc("lookup_flight", "a different flight every trace"),
        ],
    ),
    Case(
        name="shared_resource_ticket",
        pattern=["dependent", "shared_resource"],
        source="otel",
        build=traces_round1.shared_resource_ticket,
        reasoning="""
        A workflow transitions a Jira issue to Done, reads the issue back, then posts to
        Slack. jira_get_issue takes the same issue key as the transition and must see its
        effect; the Slack post announces the transition with the summary read back. All
        pairs dependent; the transition and the post are writes.
        """,
        parallel=[
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
        cache=[
            nc("support_workflow", ROOT_NC),
            nc("execute_tool jira_transition", "a write"),
            nc("execute_tool jira_get_issue", "a different issue every trace, and it just changed"),
            nc("execute_tool slack_post", "a write"),
        ],
    ),
    Case(
        name="shell_chain_bash_tool",
        pattern=["dependent", "shell_chain"],
        source="otel",
        build=traces_round1.shell_chain_bash_tool,
        reasoning="""
        A coding agent runs four bash tool calls: git checkout -b, git apply, git commit,
        git push (gen_ai.tool.name "bash", the command in the arguments). Each command
        changes the repository the next one works on; the span name is the same for all
        four. Sequential and never cacheable, even though "git apply /tmp/patch.diff" has
        identical arguments and result in every trace.
        """,
        parallel=[
            dep(
                "invoke_agent coder",
                "execute_tool bash",
                None,
                "checkout, apply, commit, push: "
                "each command changes the repository the next one works on",
            ),
        ],
        cache=[
            nc("invoke_agent coder", ROOT_NC),
            nc(
                "execute_tool bash",
                "shell commands change state; the same command text would still not be a read",
            ),
        ],
    ),
    Case(
        name="shell_code_interpreter",
        pattern=["dependent", "shell_chain", "shared_resource"],
        source="otel",
        build=traces_round1.shell_code_interpreter,
        reasoning="""
        A data-analysis agent runs Python code that writes out.csv, then a shell command
        that counts its lines. The second reads the file the first wrote: dependent
        through the file system.
        """,
        parallel=[
            dep(
                "invoke_agent analyst",
                "execute_tool python",
                "execute_tool shell",
                "the shell command reads the CSV the Python code wrote",
            ),
        ],
        cache=[
            nc("invoke_agent analyst", ROOT_NC),
            nc("execute_tool python", "code execution changes state"),
            nc("execute_tool shell", "reads a file that was just rewritten"),
        ],
    ),
    Case(
        name="cursor_pagination_http",
        pattern=["dependent", "pagination", "cursor_pagination", "uninstrumented"],
        source="otel",
        build=traces_round1.cursor_pagination_http,
        reasoning="""
        Uninstrumented pagination: GET /v1/issues?...&cursor=<opaque> where each cursor
        came from the previous response body, which the trace does not record. Only the
        URL's cursor parameter shows it: sequential.
        """,
        parallel=[
            dep(
                "sync_issues",
                "GET /v1/issues",
                None,
                "each request carries the cursor the previous response returned",
            ),
        ],
        cache=[
            nc("sync_issues", ROOT_NC),
            nc("GET /v1/issues", "every page once; live data"),
        ],
    ),
    Case(
        name="page_token_pagination_http",
        pattern=["dependent", "pagination", "uninstrumented"],
        source="otel",
        build=traces_round1.page_token_pagination_http,
        reasoning="""
        The same with a storage listing's page_token (GET ...?prefix=...&page_token=...):
        each request needs the token of the previous response.
        """,
        parallel=[
            dep(
                "list_bucket",
                "GET /storage/v1/b/data/o",
                None,
                "each request carries the page_token of the previous response",
            ),
        ],
        cache=[
            nc("list_bucket", ROOT_NC),
            nc("GET /storage/v1/b/data/o", "every page once; live listing"),
        ],
    ),
    Case(
        name="offset_pagination_http",
        pattern=["dependent", "pagination", "uninstrumented"],
        source="otel",
        build=traces_round1.offset_pagination_http,
        reasoning="""
        Offset pagination (limit=50&offset=0, 50, 100 ...) until a short page comes back.
        The offsets could be computed in advance, but how many requests are made depends
        on each response (the loop stops at the first short page), and the code as written
        issues the next request only after reading the previous one. Labelled dependent,
        as the issue's pagination rule says; fetching pages speculatively in parallel is a
        redesign, not the reordering a parallelizable finding proposes.
        """,
        parallel=[
            dep(
                "export_contacts",
                "GET /v1/contacts",
                None,
                "the loop fetches the next offset "
                "only while the previous page came back full: how many requests there are depends "
                "on each response",
            ),
        ],
        cache=[
            nc("export_contacts", ROOT_NC),
            nc("GET /v1/contacts", "every page once"),
        ],
    ),
    Case(
        name="keyset_pagination_sql",
        pattern=["dependent", "pagination", "uninstrumented"],
        source="otel",
        build=traces_round1.keyset_pagination_sql,
        reasoning="""
        Keyset pagination in SQL: SELECT ... WHERE tenant_id = t AND id > <last id of the
        previous page> ORDER BY id LIMIT 1000. The literal in each query comes from the
        previous query's rows, which DB spans never record: sequential, and nothing in the
        trace but the query shape says so.
        """,
        parallel=[
            dep(
                "backfill_events",
                "SELECT events",
                None,
                "each query starts after the last id the previous one returned (keyset pagination)",
            ),
        ],
        cache=[
            nc("backfill_events", ROOT_NC),
            nc("SELECT events", "every page once"),
        ],
    ),
    Case(
        name="n_plus_one_sql",
        pattern=["independent", "n_plus_one", "loop", "uninstrumented"],
        source="otel",
        build=traces_round1.n_plus_one_sql,
        reasoning="""
        An ORM N+1: SELECT id FROM orders WHERE customer_id = ..., then one SELECT * FROM
        order_items WHERE order_id = <id> per order. The item queries take ids from the
        first query and read different rows: independent of each other, each dependent on
        the first.
        """,
        parallel=[
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
        cache=[
            nc("GET /orders", ROOT_NC),
            nc("SELECT orders", "a different customer every trace"),
            nc("SELECT order_items", "every order once"),
        ],
    ),
]
