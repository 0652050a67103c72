"""The bottleneck finder on real traces (HotROD, a GenAI agent, any-agent runs) and made-up ones."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from conftest import FIXTURES, ROOT
from hypothesis import given
from hypothesis import strategies as st
from spans import make_spans

from tracelens.analysis import analyze_spans, analyze_traces
from tracelens.analysis.findings import FindingType, find_all
from tracelens.ingest import read_files
from tracelens.render.json import finding_json

MS = 1_000_000
HOTROD = FIXTURES / "otlp" / "hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"
GENAI = FIXTURES / "jaeger" / "genaiTestTrace.json"
ANY_AGENT = sorted((FIXTURES / "agent").glob("any-agent-*.otlp.json"))


def findings_of(path_or_table: Any) -> list[dict[str, Any]]:
    table = (
        read_files([path_or_table]).spans
        if not hasattr(path_or_table, "schema")
        else (path_or_table)
    )
    return [finding_json(f) for f in find_all(analyze_traces(table))]


def of_type(found: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [f for f in found if f["type"] == kind]


# --- the acceptance cases -------------------------------------------------------------------


def test_hotrod_sequential_getdriver_calls_are_parallelizable() -> None:
    found = findings_of(HOTROD)
    par = of_type(found, "parallelizable")
    assert [f["names"] for f in par] == [["GetDriver"]]
    f = par[0]
    assert f["parent"] == "driver.DriverService/FindNearest"
    assert f["occurrences"] == 13
    # 13 calls took 205 ms back to back; together (three of them retries, which still follow
    # their failed attempt) they take about as long as the slowest chain.
    assert 120 < f["saving_ms"]["p50"] < 205
    assert f["projected_latency_ms"]["p50"] == pytest.approx(702.608 - f["saving_ms"]["p50"], 1e-3)
    assert f["example_projected_latency_ms"] == pytest.approx(f["projected_latency_ms"]["p50"])
    assert f["confidence"] in ("medium", "high") and "loop" in f["explanation"]


def test_hotrod_getdriver_after_an_error_is_a_retry_not_cacheable() -> None:
    found = findings_of(HOTROD)
    retry = of_type(found, "retry")
    assert [f["names"] for f in retry] == [["GetDriver"]]
    assert retry[0]["occurrences"] == 3
    assert retry[0]["saving_ms"]["p50"] > 90  # the three failed attempts were on the path
    assert not [f for f in of_type(found, "cacheable") if "GetDriver" in f["names"]]


def test_hotrod_getdriver_loop_is_an_n_plus_one() -> None:
    n1 = of_type(findings_of(HOTROD), "n_plus_one")
    assert [f["names"] for f in n1] == [["GetDriver"]]
    assert n1[0]["calls_per_trace"] == 13


def test_genai_repeated_tool_calls_are_cacheable() -> None:
    found = findings_of(GENAI)
    cache = {f["names"][0]: f for f in of_type(found, "cacheable")}
    for tool in ("execute_tool list_dashboards", "execute_tool search_traces"):
        assert tool in cache
        assert cache[tool]["occurrences"] == 2  # three calls, the first one stays
        assert "gen_ai.tool.call.arguments" in cache[tool]["explanation"]
        assert cache[tool]["identical_results"] is True  # gen_ai.tool.call.result agrees
        assert cache[tool]["suggested_ttl_s"] >= 1
    assert not of_type(found, "parallelizable")


@pytest.mark.parametrize("path", ANY_AGENT, ids=lambda p: p.name)
def test_any_agent_chains_have_nothing_to_parallelize(path: Any) -> None:
    found = findings_of(path)
    assert not of_type(found, "parallelizable")
    assert not of_type(found, "n_plus_one")


def test_findings_follow_the_json_contract_and_are_ordered() -> None:
    analysis = analyze_spans(read_files([HOTROD]).spans)
    doc = json.loads(analysis.to_json())
    found = doc["findings"]
    assert found
    totals = [f["total_saving_ms"] for f in found]
    assert totals == sorted(totals, reverse=True)
    for f in found:
        assert {
            "type",
            "names",
            "traces",
            "saving_ms",
            "projected_latency_ms",
            "evidence",
            "confidence",
        } <= set(f)
        assert f["confidence"] in ("low", "medium", "high")
        assert set(f["saving_ms"]) == {"p50", "p95"}
        assert f["explanation"]
    text = analysis.to_text()
    assert "Findings" in text and "GetDriver" in text


# --- parallelizable: evidence ---------------------------------------------------------------


def hop(i: int, parent: int, start: int, end: int, name: str, **attrs: Any) -> dict[str, Any]:
    return {
        "id": i,
        "parent": parent,
        "start": start * MS,
        "end": end * MS,
        "name": name,
        "span_kind": "client",
        "attributes": attrs or None,
    }


def agent_trace(t: int, hops: list[tuple[str, int, int, dict[str, Any]]]) -> list[dict]:
    """One trace: a root and its sequential hops (name, start ms, end ms, attributes)."""
    base = 100 * t
    end = max(e for _, _, e, _ in hops) + 5
    rows = [{"id": base, "start": 0, "end": end * MS, "name": "handle", "trace": f"{t + 1:032x}"}]
    for k, (name, s, e, attrs) in enumerate(hops):
        r = hop(base + k + 1, base, s, e, name, **attrs)
        r["trace"] = f"{t + 1:032x}"
        rows.append(r)
    return rows


def fp(*values: str) -> list[str]:
    return list(values)


def instrumented(args: str, arg_fps: list[str], result_fps: list[str], kind: str = "io") -> dict:
    return {
        "tracelens.args_hash": args,
        "tracelens.arg_fps": arg_fps,
        "tracelens.result_fps": result_fps,
        "tracelens.result_hash": result_fps[0] if result_fps else None,
        "tracelens.kind": kind,
    }


def test_fingerprints_keep_a_consumer_after_its_producer() -> None:
    rows = agent_trace(
        0,
        [
            ("search", 0, 100, instrumented("q1", fp("q1"), fp("hits1"))),
            ("fetch", 100, 200, instrumented("hits1", fp("hits1"), fp("doc1"))),  # uses search
            ("weather", 200, 300, instrumented("city", fp("city"), fp("sunny"))),  # independent
        ],
    )
    par = of_type(findings_of(make_spans(rows)), "parallelizable")
    assert [f["names"] for f in par] == [["fetch", "weather"]]
    assert par[0]["confidence"] == "high"
    assert "fingerprints_complete" in [e["code"] for e in par[0]["evidence"]]
    assert par[0]["saving_ms"]["p50"] == pytest.approx(100, abs=0.01)


def test_different_operations_without_fingerprints_need_evidence_from_other_traces() -> None:
    alone = agent_trace(0, [("a", 0, 100, {}), ("b", 100, 150, {})])
    assert not of_type(findings_of(make_spans(alone)), "parallelizable")
    # In another trace of the same operation, b ran while a was still running: b does not
    # need a's output, so in the first trace they could have overlapped too.
    other = agent_trace(1, [("a", 0, 100, {}), ("b", 20, 70, {})])
    par = of_type(findings_of(make_spans(alone + other)), "parallelizable")
    assert [f["names"] for f in par] == [["a", "b"]]
    assert "overlapped or ran in another order in 1 of 2" in par[0]["explanation"]
    assert par[0]["traces"] == 1 and par[0]["saving_ms"]["p50"] == pytest.approx(50, abs=0.01)


def test_cpu_hops_are_never_promised_to_overlap() -> None:
    cpu = {"tracelens.kind": "cpu"}
    rows = agent_trace(
        0,
        [
            ("parse", 0, 50, {"k": "1", **cpu}),
            ("parse", 50, 100, {"k": "2", **cpu}),
            ("parse", 100, 150, {"k": "3", **cpu}),
        ],
    )
    assert not of_type(findings_of(make_spans(rows)), "parallelizable")


def test_model_calls_without_fingerprints_order_their_neighbours() -> None:
    llm = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    rows = agent_trace(
        0,
        [
            ("chat m", 0, 100, llm),
            ("chat m", 100, 200, llm),
            ("execute_tool x", 200, 210, {"gen_ai.tool.call.arguments": "{}"}),
        ],
    )
    assert not of_type(findings_of(make_spans(rows)), "parallelizable")


def test_a_loop_of_calls_with_varying_arguments_is_an_n_plus_one() -> None:
    loop = [("get_item", 10 * k, 10 * k + 10, {"param.id": str(k)}) for k in range(6)]
    found = findings_of(make_spans(agent_trace(0, loop)))
    assert [f["names"] for f in of_type(found, "n_plus_one")] == [["get_item"]]
    assert of_type(found, "n_plus_one")[0]["saving_ms"]["p50"] == pytest.approx(50, abs=0.01)
    same = [("get_item", 10 * k, 10 * k + 10, {"param.id": "1"}) for k in range(6)]
    found = findings_of(make_spans(agent_trace(0, same)))
    assert not of_type(found, "n_plus_one")  # the same arguments: a cache, not a batch
    assert [f["names"] for f in of_type(found, "cacheable")] == [["get_item"]]


# --- cacheable / retry / writes -------------------------------------------------------------


def test_state_changing_calls_are_never_cacheable() -> None:
    hops = [
        ("update_profile", 0, 10, {"param.user": "u1"}),
        ("update_profile", 10, 20, {"param.user": "u1"}),
        ("HTTP POST", 20, 30, {"http.request.method": "POST", "url.full": "http://x/a?b=1"}),
        ("HTTP POST", 30, 40, {"http.request.method": "POST", "url.full": "http://x/a?b=1"}),
        ("SQL", 40, 50, {"db.query.text": "DELETE FROM t WHERE id = 4"}),
        ("SQL", 50, 60, {"db.query.text": "DELETE FROM t WHERE id = 4"}),
        ("sendEmail", 60, 70, {"param.to": "a@b"}),
        ("sendEmail", 70, 80, {"param.to": "a@b"}),
    ]
    found = findings_of(make_spans(agent_trace(0, hops)))
    assert not of_type(found, "cacheable")
    writes = {f["names"][0]: f for f in of_type(found, "repeated_write")}
    assert "its name says 'update'" in writes["update_profile"]["explanation"]
    assert "SQL DELETE changes state" in writes["SQL"]["explanation"]
    assert "its name says 'send'" in writes["sendEmail"]["explanation"]
    assert "HTTP POST" not in writes  # a POST's arguments are in its body: unknown here


def test_reads_repeated_across_traces_are_cacheable_with_a_ttl_from_the_gaps() -> None:
    rows = []
    for t in range(5):
        trace = agent_trace(t, [("get_config", 0, 40, instrumented("v1", fp("v1"), fp("cfg")))])
        for r in trace:
            r["start"] += t * 30_000 * MS  # a request every 30 s
            r["end"] += t * 30_000 * MS
        rows += trace
    cache = of_type(findings_of(make_spans(rows)), "cacheable")
    assert len(cache) == 1
    f = cache[0]
    assert f["occurrences"] == 4 and f["traces"] == 4
    assert f["identical_results"] is True
    assert f["suggested_ttl_s"] >= 30
    assert f["confidence"] == "high"
    assert f["saving_ms"]["p50"] == pytest.approx(40, abs=0.01)


def test_a_changed_result_is_not_counted_as_a_cache_hit() -> None:
    # A request every 30 s; the result changed between the second and the third.  Only a TTL
    # under 30 s never serves a wrong answer, and under it none of these repeats is a hit: no
    # finding (it used to count two, 30 s apart, as hits of a TTL shorter than that).
    rows = []
    for t in range(4):
        out = "cfg-old" if t < 2 else "cfg-new"
        trace = agent_trace(t, [("get_config", 0, 40, instrumented("v1", fp("v1"), fp(out)))])
        for r in trace:
            r["start"] += t * 30_000 * MS
            r["end"] += t * 30_000 * MS
        rows += trace
    assert not of_type(findings_of(make_spans(rows)), "cacheable")


def test_changed_results_bound_the_ttl_and_only_repeats_within_it_count() -> None:
    # Each request reads the config twice, 1 s apart; the config changed between requests 1
    # and 2 (30 s apart).  A TTL under 30 s serves the second read of each request: 4 hits, 40 ms
    # each, and results are not identical overall.
    rows = []
    for t in range(4):
        out = fp("cfg-old" if t < 2 else "cfg-new")
        trace = agent_trace(
            t,
            [
                ("get_config", 0, 40, instrumented("v1", fp("v1"), out)),
                ("get_config", 1040, 1080, instrumented("v1", fp("v1"), out)),
            ],
        )
        for r in trace:
            r["start"] += t * 30_000 * MS
            r["end"] += t * 30_000 * MS
        rows += trace
    f = of_type(findings_of(make_spans(rows)), "cacheable")[0]
    assert f["occurrences"] == 4
    assert f["identical_results"] is False
    assert f["changed_results"] == 1
    assert 1 <= f["suggested_ttl_s"] < 30
    assert f["confidence"] == "medium"
    codes = [e["code"] for e in f["evidence"]]
    assert "results_changed" in codes and "ttl_bounded" in codes


def test_a_failed_call_repeated_is_a_retry_and_not_cacheable() -> None:
    failed = {"param.id": "7"}
    rows = agent_trace(0, [("lookup", 0, 30, failed), ("lookup", 30, 50, failed)])
    rows[1]["status"] = "error"
    found = findings_of(make_spans(rows))
    assert [f["names"] for f in of_type(found, "retry")] == [["lookup"]]
    assert not of_type(found, "cacheable")
    assert of_type(found, "retry")[0]["saving_ms"]["p50"] == pytest.approx(30, abs=0.01)


# --- tail ------------------------------------------------------------------------------------


def test_tail_names_the_operation_that_grows_in_the_slowest_traces() -> None:
    rows = []
    for t in range(100):
        slow = t % 20 == 0  # 5 of 100
        db = 400 if slow else 50 + t % 7
        rows += agent_trace(
            t,
            [
                ("plan", 0, 20, {}),
                ("db", 20, 20 + db, {"tracelens.kind": "io"}),
                ("answer", 20 + db, 40 + db, {}),
            ],
        )
    tail = of_type(findings_of(make_spans(rows)), "tail")
    assert [f["names"] for f in tail] == [["db"]]
    f = tail[0]
    assert f["traces"] == 5
    assert f["saving_ms"]["p50"] == pytest.approx(400 - 53, abs=5)
    assert f["growth_ms"]["db"] > 300


# --- the benchmark's synthetic agent traces -------------------------------------------------


def test_synthetic_agent_traces_give_every_finding_type() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from synth import make_traces

    found = findings_of(make_traces(200, seed=3))
    kinds = {(f["type"], tuple(f["names"])) for f in found}
    assert ("cacheable", ("fetch_schema",)) in kinds
    assert ("retry", ("call_api",)) in kinds
    assert ("n_plus_one", ("get_document",)) in kinds
    par = next(f for f in of_type(found, "parallelizable") if "fetch_logs" in f["names"])
    assert {"fetch_schema", "fetch_logs", "search_docs", "get_document"} <= set(par["names"])
    assert "chat" not in par["names"] and "plan" not in par["names"]
    assert not [
        f for f in of_type(found, "cacheable") if f["names"][0] in ("call_api", "HTTP POST")
    ]
    assert of_type(found, "tail")


def test_every_finding_type_is_named_in_the_contract() -> None:
    doc = (ROOT / "docs" / "analysis-json.md").read_text(encoding="utf-8")
    assert [t for t in FindingType if f"`{t.value}`" not in doc] == []


def test_empty_input_has_no_findings() -> None:
    assert find_all(analyze_traces(make_spans([]))) == []


def test_single_span_has_no_findings() -> None:
    assert find_all(analyze_traces(make_spans([{"id": 0, "start": 0, "end": 5}]))) == []


def test_each_finding_projects_only_its_own_change() -> None:
    loop = [("get_item", 10 * k, 10 * k + 10, {"param.id": str(k)}) for k in range(4)]
    repeat = [("get_config", 0, 40, {"param.v": "1"}), ("get_config", 40, 80, {"param.v": "1"})]
    rows = agent_trace(0, loop) + agent_trace(1, repeat)  # 45 ms and 85 ms
    found = findings_of(make_spans(rows))
    par = of_type(found, "parallelizable")[0]
    cache = of_type(found, "cacheable")[0]
    # Replayed together (disjoint traces), but each projection has only its own saving.
    assert par["saving_ms"]["p50"] == pytest.approx(30, abs=0.01)
    assert par["projected_latency_ms"]["p50"] == pytest.approx((15 + 85) / 2, abs=0.01)
    assert cache["saving_ms"]["p50"] == pytest.approx(40, abs=0.01)
    assert cache["projected_latency_ms"]["p50"] == pytest.approx((45 + 45) / 2, abs=0.01)


def test_only_the_most_promising_candidates_of_a_type_are_replayed() -> None:
    from tracelens.analysis.findings.candidate import MAX_PER_TYPE

    rows = []
    for t in range(MAX_PER_TYPE + 5):
        name, ms = f"get_{t}", 10 + t  # later operations repeat longer calls
        rows += agent_trace(
            t, [(name, 0, ms, {"param.v": "1"}), (name, ms, 2 * ms, {"param.v": "1"})]
        )
    cache = of_type(findings_of(make_spans(rows)), "cacheable")
    assert len(cache) == MAX_PER_TYPE
    assert {f["names"][0] for f in cache} == {f"get_{t}" for t in range(5, MAX_PER_TYPE + 5)}


def test_an_n_plus_one_also_parallelizable_says_so() -> None:
    n1 = of_type(findings_of(HOTROD), "n_plus_one")[0]
    assert "also reported as parallelizable" in n1["explanation"]


def test_a_very_deep_trace_is_handled_without_recursion() -> None:
    """20,000 levels, a repeated call at each: every detector and replay stays iterative."""
    depth = 20_000
    rows: list[dict[str, Any]] = []
    for i in range(depth):
        parent = 2 * (i - 1) if i else None
        top = 100 * depth - 10 * i
        rows.append(
            {
                "id": 2 * i,
                "parent": parent,
                "start": 10 * i,
                "end": top,
                "name": "lvl",
                "span_kind": "client",
                "attributes": {"param.k": str(i)},
            }
        )
        if i:
            rows.append(
                {
                    "id": 2 * i + 1,
                    "parent": parent,
                    "start": top - 5,
                    "end": top - 1,
                    "name": "audit_read",
                    "span_kind": "client",
                    "attributes": {"param.k": "same"},
                }
            )
    cache = of_type(findings_of(make_spans(rows)), "cacheable")
    assert [f["names"] for f in cache] == [["audit_read"]]
    assert cache[0]["occurrences"] == depth - 2


# --- issue 25: effects by evidence, unsafe caches, contention, savings that add up ----------


def test_the_effects_table_names_what_the_old_verb_list_missed() -> None:
    from tracelens.analysis.findings.features import features

    rows = agent_trace(
        0,
        [
            ("execute_tool unzip", 0, 10, {"gen_ai.tool.name": "unzip"}),
            ("execute_tool place_order", 10, 20, {"gen_ai.tool.name": "place_order"}),
            ("graphql.execute", 20, 30, {"graphql.operation.type": "mutation"}),
            ("graphql.execute", 30, 40, {"graphql.document": "mutation A { a { id } }"}),
            ("graphql.execute", 40, 50, {"graphql.document": "query B { b { id } }"}),
            ("SQL", 50, 60, {"db.query.text": "SELECT pg_notify('jobs', 'x')"}),
            (
                "HTTP GET",
                60,
                70,
                {"http.request.method": "GET", "url.full": "http://q/v1/queues/r/pop"},
            ),
            ("SQL", 70, 80, {"db.query.text": "SELECT now()"}),
        ],
    )
    ta = analyze_traces(make_spans(rows))
    fe = features(ta.spans)
    writes = dict(zip(ta.spans["_i"].to_list(), fe.write.tolist(), strict=True))
    names = ta.spans["name"].to_list()
    says = [fe.write_reasons[writes[k]] if writes[k] >= 0 else None for k in range(len(names))]
    assert says[1] and "unzip" in says[1]
    assert says[2] and "place" in says[2]
    assert says[3] == "GraphQL mutation changes state" == says[4]
    assert says[5] is None  # a query
    assert says[6] == "SQL pg_notify() has a side effect"
    assert says[7] == "its URL path says 'pop'"
    assert says[8] is None and bool(fe.volatile[8])  # now(): volatile, but no write


def test_resources_are_the_table_or_the_url_prefix() -> None:
    from tracelens.analysis.findings.features import resource_of_sql, resource_of_url

    assert resource_of_url("https://a.io/v1/cart/c-17") == resource_of_url(
        "https://a.io/v1/cart/c-17/items"
    )
    assert resource_of_url("https://a.io/v1/cart/c-17") != resource_of_url(
        "https://a.io/v1/cart/c-18"
    )
    assert resource_of_url("https://a.io/api/usage?period=2026-11") == "u:a.io/usage"
    assert resource_of_sql("SELECT COUNT(*) FROM quota_usage WHERE t = 1") == "t:quota_usage"
    assert resource_of_sql("INSERT INTO quota_usage VALUES (1)") == "t:quota_usage"


def _repeats_around(middle: tuple[str, dict[str, Any]] | None) -> list[dict[str, Any]]:
    get = {"http.request.method": "GET", "url.full": "http://s/v1/cart/c-7"}
    hops = [("GET cart", 0, 20, get)]
    if middle is not None:
        hops.append((middle[0], 20, 30, middle[1]))
    hops.append(("GET cart", 30, 50, get))
    return [r for t in range(3) for r in agent_trace(t, hops)]


def test_a_write_between_repeats_means_not_cacheable() -> None:
    assert of_type(findings_of(make_spans(_repeats_around(None))), "cacheable")
    post = {"http.request.method": "POST", "url.full": "http://s/v1/cart/c-7/items"}
    assert not of_type(findings_of(make_spans(_repeats_around(("POST", post)))), "cacheable")
    # A write elsewhere (another resource) does not make the cart unsafe to cache.
    other = {"http.request.method": "POST", "url.full": "http://s/v1/audit/a-1"}
    assert of_type(findings_of(make_spans(_repeats_around(("POST", other)))), "cacheable")


def test_a_scoping_request_header_is_part_of_the_key() -> None:
    rows = []
    for t in range(4):
        attrs = {
            "http.request.method": "GET",
            "url.full": "http://s/v1/dashboard",
            "http.request.header.x-workspace-id": f"ws-{t}",
            "http.request.header.accept": "application/json",
        }
        rows += agent_trace(t, [("GET dash", 0, 20, attrs)])
    assert not of_type(findings_of(make_spans(rows)), "cacheable")


def test_hops_holding_one_semaphore_are_no_saving() -> None:
    rows = []
    for t in range(3):
        trace = agent_trace(
            t, [("fetch", 40 * k, 40 * k + 40, {"url.full": f"http://d/p{t}{k}"}) for k in range(3)]
        )
        base = 100 * t
        for k in range(3):  # each fetch first takes the domain's one slot
            slot = hop(base + 50 + k, base + k + 1, 40 * k, 40 * k + 1, "acquire_domain_slot")
            slot["trace"] = f"{t + 1:032x}"
            trace.append(slot)
        rows += trace
    # Without the slots the loop over different URLs would be a finding (see n_plus_one).
    found = findings_of(make_spans(rows))
    assert not of_type(found, "parallelizable")
    assert not of_type(found, "repeated_write")  # taking a slot again is a wait, not a write


def test_overlapping_findings_are_alternatives_and_the_smaller_is_no_top_change() -> None:
    rows = []
    for t in range(4):
        hops = [
            ("fetch_schema", 0, 60, instrumented("s", fp("s"), fp("schema"))),
            ("fetch_logs", 60, 100, instrumented(f"l{t}", fp(f"l{t}"), fp(f"logs{t}"))),
        ]
        trace = agent_trace(t, hops)
        for r in trace:
            r["start"] += t * 2_000 * MS
            r["end"] += t * 2_000 * MS
        rows += trace
    found = findings_of(make_spans(rows))
    par, cache = of_type(found, "parallelizable"), of_type(found, "cacheable")
    assert len(par) == 1 and len(cache) == 1
    # Parallel saves the 40 ms fetch_logs in 4 traces (160 ms); the cache saves 60 ms in 3 (180).
    first, second = (
        (cache[0], par[0]) if found.index(cache[0]) < found.index(par[0]) else (par[0], cache[0])
    )
    assert first["total_saving_ms"] >= second["total_saving_ms"]
    assert second["alternative_to"] == found.index(first)
    assert first["alternative_to"] is None and first["top_change"] and not second["top_change"]
    assert "alternative" in [e["code"] for e in second["evidence"]]


def test_a_high_finding_that_saves_nothing_is_medium() -> None:
    from tracelens.analysis.findings.assess import SAVING_FLOOR_MS

    # The genaiTestTrace cacheable repeats are off the critical path: no saving, so no "high".
    cache = of_type(findings_of(GENAI), "cacheable")
    assert cache
    for f in cache:
        assert f["saving_ms"]["p50"] < SAVING_FLOOR_MS
        assert f["confidence"] != "high" and not f["top_change"]
    # And the rule itself, on a finding that would be high: identical results, a read, but the
    # repeats are off the critical path (the parent waits for a longer sibling).
    rows = []
    for t in range(3):
        hops = [("get_config", 0, 10, instrumented("v", fp("v"), fp("cfg")))]
        trace = agent_trace(t, hops)
        slow = hop(100 * t + 9, 100 * t, 0, 80, "long_wait")
        slow["trace"] = f"{t + 1:032x}"
        trace[0]["end"] = 85 * MS
        trace.append(slow)
        for r in trace:
            r["start"] += t * 1_000 * MS
            r["end"] += t * 1_000 * MS
        rows += trace
    (f,) = of_type(findings_of(make_spans(rows)), "cacheable")
    assert f["saving_ms"]["p50"] == 0.0 and f["confidence"] == "medium"
    assert "saves_little" in [e["code"] for e in f["evidence"]]


def test_every_what_if_asked_for_answers_with_a_reason() -> None:
    from tracelens.analysis.whatif import WhatIf, answers

    # Tool hops only: no model call, no client span calling a traced server.
    rows = [r for t in range(3) for r in agent_trace(t, [("get_a", 0, 10, {"p": str(t)})])]
    ta = analyze_traces(make_spans(rows))
    asked = [WhatIf.parse(w) for w in ("trim-context=0.5", "cap-output=64", "co-locate=2")]
    found, said = answers(ta, asked, threshold_ms=0)
    assert found == []
    assert [a.what_if for a in said] == ["trim_context=0.5", "cap_output=64", "co_locate=2"]
    assert said[0].reason and said[0].reason.startswith("no token counts")
    assert said[1].reason and said[1].reason.startswith("no token counts")
    assert said[2].reason and said[2].reason.startswith("no transfer measured")


# Texts made of the pieces the URL and volatility rules split and match on (schemes, slashes,
# queries, fragments, volatile words in both cases, letters that fold to ASCII ones), and
# arbitrary text besides.
_URLISH = st.one_of(
    st.lists(
        st.sampled_from(
            [
                *("http", "://", "/", "//", "?", "#", ":", "-", "_", " ", "\n", ".", "(", ")"),
                *("x", "api", "v1", "c-17", "{id}", "now", "Now", "TIME", "uuid", "UUID(", "rand"),
                *("nextval(", "getDate", "latest", "pop", "Delete", "K", "ſ", "İ", "é", "carts"),
            ]
        ),
        max_size=14,
    ).map("".join),
    st.text(max_size=30),
)


@given(st.lists(st.one_of(_URLISH, st.none()), max_size=12))
def test_url_rules_read_the_canonical_url_as_the_url(values: list[str | None]) -> None:
    """The vectorised canonical URL (query, fragment and scheme dropped) answers every URL rule
    as the URL itself does, and ``volatile`` is the per-value regexes value by value: the oracle
    is the per-value Python each replaces (issue 26: 90k distinct URLs cost 1.5 s there)."""
    import polars as pl

    from tracelens.analysis.findings import features as _  # noqa: F401
    from tracelens.analysis.findings.features import (
        _url_path,
        _url_reason,
        _volatile_call,
        _volatile_words,
        resource_of_url,
        url_canonical,
        volatile,
    )

    series = pl.Series("v", values, dtype=pl.String)
    canon = url_canonical(series).to_list()
    whole = url_canonical(series, bare_whole=True).to_list()
    for v, c, w in zip(values, canon, whole, strict=True):
        if v is None:
            assert c is None and w is None
            continue
        assert _url_path(c) == _url_path(v)
        assert _url_reason(c) == _url_reason(v)
        assert resource_of_url(c) == resource_of_url(v)
        assert _volatile_words(w) == _volatile_words(v)
    # The per-value reference: the SQL rule on the text, the words on it (or its URL's path).
    expected = [v is not None and (_volatile_call(v) or _volatile_words(v)) for v in values]
    assert volatile(series).tolist() == expected
    assert volatile(series, url_canonical(series)).tolist() == expected
