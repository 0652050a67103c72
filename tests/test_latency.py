"""The latency model on traces with known timing: stages, cold starts, the token fit and the
model what-ifs (hand-derived numbers), and stages / co-location / prefetch against real servers
with an injected, measured network delay."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from latency_support import DelayProxy, TracedServer, table_of
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from spans import make_spans
from tracelens_instrumentation import attributes as A

from tracelens.analysis import analyze_spans
from tracelens.analysis.coldstart import cold_start_mask, headline
from tracelens.analysis.core import analyze_traces
from tracelens.analysis.findings.finding import FindingType, WhatIfDetails
from tracelens.analysis.stages import Stage, stage_table, stages
from tracelens.analysis.tokens import fit_tokens, token_fits
from tracelens.analysis.whatif import WhatIf, findings, prefetch_reads, project
from tracelens.api import load_spans
from tracelens.demo.pipeline import tracelens_cmd
from tracelens.schema import COLUMNS

ROOT = Path(__file__).resolve().parent.parent
MS = 1_000_000


def agent_trace(trace: str, base: int, l_in: int, l_out: int) -> list[dict[str, object]]:
    """plan (cpu 10 ms), a tool (30 ms), a model call over HTTP whose engine span is traced
    (client 50 ms around a 40 ms server span), 10 ms the root does not explain."""
    model_ms = 5 + 0.2 * l_in + 3 * l_out
    t0 = base
    c0 = t0 + 40 * MS
    c1 = c0 + int((model_ms + 10) * MS)
    end = c1 + 10 * MS
    return [
        {"id": 0, "trace": trace, "start": t0, "end": end, "name": "handle"},
        {
            "id": 1,
            "trace": trace,
            "parent": 0,
            "start": t0,
            "end": t0 + 10 * MS,
            "name": "plan",
            "attributes": {A.KIND: "cpu"},
        },
        {
            "id": 2,
            "trace": trace,
            "parent": 0,
            "start": t0 + 10 * MS,
            "end": c0,
            "name": "search",
            "attributes": {A.GEN_AI_OPERATION_NAME: "execute_tool"},
        },
        {
            "id": 3,
            "trace": trace,
            "parent": 0,
            "start": c0,
            "end": c1,
            "name": "chat",
            "span_kind": "client",
            "attributes": {
                A.GEN_AI_OPERATION_NAME: "chat",
                A.GEN_AI_REQUEST_MODEL: "m",
                A.GEN_AI_USAGE_INPUT_TOKENS: l_in,
                A.GEN_AI_USAGE_OUTPUT_TOKENS: l_out,
            },
        },
        {
            "id": 4,
            "trace": trace,
            "parent": 3,
            "start": c0 + 5 * MS,
            "end": c1 - 5 * MS,
            "name": "llm_server",
            "service": "engine",
            "span_kind": "server",
            "attributes": {
                A.GEN_AI_OPERATION_NAME: "chat",
                A.GEN_AI_REQUEST_MODEL: "m",
                A.GEN_AI_USAGE_INPUT_TOKENS: l_in,
                A.GEN_AI_USAGE_OUTPUT_TOKENS: l_out,
            },
        },
    ]


WORKLOAD = [(li, lo) for li in (50, 100, 200, 400, 800) for lo in (10, 20, 40)]


def workload() -> pl.DataFrame:
    rows: list[dict[str, object]] = []
    for k, (li, lo) in enumerate(WORKLOAD):
        rows += agent_trace(f"{k + 1:032x}", 10**12 + k * 10**10, li, lo)
    return pl.from_arrow(make_spans(rows))  # type: ignore[return-value]


def test_stages_of_a_hand_built_trace() -> None:
    ta = analyze_traces(workload())
    table = stage_table(ta)
    for k, (li, lo) in enumerate(WORKLOAD):
        row = table.filter(pl.col("trace_id") == f"{k + 1:032x}").row(0, named=True)
        model_ms = 5 + 0.2 * li + 3 * lo
        assert row["schedule_ns"] == pytest.approx(10 * MS)
        assert row["tool_ns"] == pytest.approx(30 * MS)
        assert row["transfer_ns"] == pytest.approx(10 * MS)
        assert row["llm_ns"] == pytest.approx(model_ms * MS, abs=1)
        assert row["other_ns"] == pytest.approx(10 * MS)
    st = stages(ta)
    (op,) = st.operations
    assert op.traces == len(WORKLOAD)
    # The slowest trace (800 in, 40 out: llm 285 ms of 345) dominates the p99 traces.
    assert op.stages[0].stage is Stage.LLM
    assert op.stages[0].p99_share == pytest.approx(285 / 345, abs=1e-3)


def test_token_fit_recovers_known_costs_despite_outliers() -> None:
    rng = np.random.default_rng(0)
    l_in = rng.integers(20, 2000, 60).astype(float)
    l_out = rng.integers(5, 300, 60).astype(float)
    t = 0.005 + 0.0002 * l_in + 0.003 * l_out
    t[:4] *= 5  # four calls slowed by something else
    coef, status = fit_tokens(l_in, l_out, t)
    assert status == "ok"
    assert coef.prefill == pytest.approx(0.0002, rel=0.01)
    assert coef.decode == pytest.approx(0.003, rel=0.01)
    assert coef.intercept == pytest.approx(0.005, rel=0.05)
    assert fit_tokens(l_in[:5], l_out[:5], t[:5])[1] == "too_few_calls"
    same = np.full(20, 100.0)
    assert fit_tokens(same, l_out[:20], t[:20])[1] == "no_input_spread"


def test_token_fit_per_model_and_server_from_spans() -> None:
    ta = analyze_traces(workload())
    fits = {(f.model, f.server): f for f in token_fits(ta)}
    engine = fits[("m", "engine")]  # the server span: 5 + 0.2 L_in + 3 L_out ms exactly
    assert engine.n == len(WORKLOAD) and engine.status == "ok"
    assert engine.prefill_ms_per_token == pytest.approx(0.2, rel=1e-3)
    assert engine.decode_ms_per_token == pytest.approx(3.0, rel=1e-3)
    client = fits[("m", "svc")]  # what the caller sees: 10 ms of transfer more
    assert client.coefficients.intercept * 1e3 == pytest.approx(15.0, rel=1e-3)


def test_model_what_ifs_through_the_replay_match_hand_derived_savings() -> None:
    ta = analyze_traces(workload())
    lat = ta.traces["duration_ns"].to_numpy()
    order = {tid: k for k, tid in enumerate(ta.traces["trace_id"].to_list())}
    trim = project(ta, WhatIf.parse("trim-context=0.5"))
    cap = project(ta, WhatIf.parse("cap-output=20"))
    for k, (li, lo) in enumerate(WORKLOAD):
        t = order[f"{k + 1:032x}"]
        # Half the prompt: 0.5 * L_in * 0.2 ms less, whichever fit (client or engine) is used.
        assert lat[t] - trim.projected[t] == pytest.approx(0.1 * li * MS, rel=0.01, abs=2_000)
        assert lat[t] - cap.projected[t] == pytest.approx(
            max(lo - 20, 0) * 3 * MS, rel=0.01, abs=2_000
        )
    found = findings(ta, [WhatIf.parse("cap-output=20")], threshold_ms=1.0)
    assert found and found[0].type is FindingType.WHAT_IF
    assert found[0].details == WhatIfDetails("cap_output=20")
    # A stated threshold above every saving: no finding.
    assert findings(ta, [WhatIf.parse("cap-output=20")], threshold_ms=10_000.0) == []
    with pytest.raises(ValueError, match="unknown what-if"):
        WhatIf.parse("faster=2")


def test_cold_starts_apart_from_the_headline() -> None:
    spans = load_spans([ROOT / "fixtures/vllm/vllm-offline-engine.otlp.json"]).spans
    ta = analyze_traces(spans)
    cold = cold_start_mask(ta)
    assert ta.traces.filter(pl.Series(cold))["root_name"].to_list() == ["SyncMPClient init"]
    df = pl.from_arrow(spans)
    assert isinstance(df, pl.DataFrame)
    req = df.filter(pl.col("name") == "llm_request")
    req_ms = ((req["end_ns"] - req["start_ns"]) / 1e6).to_numpy()
    h = headline(ta)
    assert h.latency_ms["p95"] == pytest.approx(float(np.percentile(req_ms, 95)), abs=1e-3)
    assert h.latency_ms["p95"] < 200  # not the 20 s the start-up trace puts in it
    assert h.cold_starts[0].duration_ms > 20_000
    assert [o.name for o in h.by_operation] == ["llm_request"]


def test_demo_stages_sum_to_its_critical_path(tmp_path: Path) -> None:
    out = tmp_path / "demo.jsonl"
    cmd = tracelens_cmd("demo", "--file", str(out), "--no-vllm", "--speed", "0.3")
    subprocess.run([*cmd, "--requests", "12"], check=True, capture_output=True, timeout=120)
    result = analyze_spans(load_spans([out]).spans, findings=False)
    ta = result.traces
    table = stage_table(ta)
    stage_total = sum(float(table[f"{s.value}_ns"].sum()) for s in Stage) / 1e6
    critical = sum(result.to_dict()["summary"]["critical_path_ms"].values())
    assert stage_total == pytest.approx(critical, rel=1e-6)
    per_trace = sum(table[f"{s.value}_ns"] for s in Stage)
    assert np.allclose(per_trace.to_numpy(), table["duration_ns"].to_numpy(), rtol=1e-6)
    st = stages(ta)
    assert {s.stage for s in st.operations[0].stages if s.mean_ms > 0} >= {
        Stage.TOOL,
        Stage.LLM,
        Stage.SCHEDULE,
    }


# --- real client -> server pairs with an injected network delay ---------------------------


class TwoServices:
    """An agent process calling a traced service, directly or through a DelayProxy."""

    def __init__(self, work_s: float = 0.02) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("agent")
        self.server = TracedServer(provider.get_tracer("service-b"), work_s)

    def call(self, port: int, path: str) -> None:
        url = f"http://127.0.0.1:{port}{path}"
        attrs = {A.HTTP_REQUEST_METHOD: "GET", A.URL_FULL: f"http://service-b{path}"}
        with self.tracer.start_as_current_span(
            f"GET {path.split('?')[0]}", kind=trace.SpanKind.CLIENT, attributes=attrs
        ):
            headers: dict[str, str] = {}
            propagate.inject(headers)
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as r:
                r.read()

    def request(
        self, port: int, paths: list[str], cpu_s: float = 0.005, name: str = "agent.request"
    ) -> None:
        with self.tracer.start_as_current_span(name):
            t0 = time.process_time()
            while time.process_time() - t0 < cpu_s:
                pass
            for p in paths:
                self.call(port, p)

    def analysis(self) -> object:
        spans = self.exporter.get_finished_spans()
        self.exporter.clear()
        return analyze_traces(table_of(spans))


@pytest.mark.measures  # wall clocks of real sockets in this process: run alone
def test_transfer_equals_the_measured_network_delay() -> None:
    svc = TwoServices()
    proxy = DelayProxy(svc.server.address, delay_s=0.04)
    try:
        held = []
        for k in range(5):
            before = len(proxy.held)
            svc.request(proxy.port, [f"/data?id={k}"])
            held.append(sum(proxy.held[before:]))
        ta = svc.analysis()
    finally:
        proxy.close()
        svc.server.shutdown()
    table = stage_table(ta)  # type: ignore[arg-type]
    transfer_ms = np.sort(table["transfer_ns"].to_numpy() / 1e6)
    measured_ms = np.sort(np.array(held) * 1e3)
    print(f"transfer {transfer_ms} ms, measured delay {measured_ms} ms")
    assert abs(np.median(transfer_ms) - np.median(measured_ms)) <= 0.1 * np.median(measured_ms)


def only(ta: Any, root_name: str) -> Any:
    """The analysis of the traces whose root is ``root_name``."""
    ids = ta.traces.filter(pl.col("root_name") == root_name)["trace_id"]
    keep = [c for c in COLUMNS if c in ta.spans.columns]
    return analyze_traces(ta.spans.filter(pl.col("trace_id").is_in(ids.implode())).select(keep))


def median_latency_ms(ta: object) -> float:
    return float(np.median(ta.traces["duration_ns"].to_numpy())) / 1e6  # type: ignore[attr-defined]


@pytest.mark.measures  # wall clocks of real sockets in this process: run alone
def test_co_locate_projects_what_removing_the_delay_saves() -> None:
    svc = TwoServices()
    proxy = DelayProxy(svc.server.address, delay_s=0.03)
    try:
        for k in range(10):  # interleaved, so both see the same machine load
            svc.request(proxy.port, [f"/a?id={k}", f"/b?id={k}"], name="far")
            svc.request(svc.server.address[1], [f"/a?id={k}", f"/b?id={k}"], name="near")
        both = svc.analysis()
    finally:
        proxy.close()
        svc.server.shutdown()
    far, near = (only(both, name) for name in ("far", "near"))
    # The stated same-region round trip: what a direct call's transfer measures here.
    rtt_ms = float(np.median(stage_table(near)["transfer_ns"].to_numpy() / 2e6))  # type: ignore[arg-type]
    p = project(far, WhatIf("co_locate", rtt_ms))  # type: ignore[arg-type]
    projected = float(np.median(p.saving_ns)) / 1e6
    real = median_latency_ms(far) - median_latency_ms(near)
    print(f"co_locate: projected {projected:.1f} ms, real {real:.1f} ms")
    assert abs(projected - real) <= 0.2 * real


@pytest.mark.measures  # wall clocks of real sockets in this process: run alone
def test_prefetch_projects_what_warming_the_read_saves() -> None:
    svc = TwoServices(work_s=0.03)
    port = svc.server.address[1]
    try:
        svc.call(port, "/config")  # the warm agent's fetch at start ...
        svc.exporter.clear()
        for k in range(16):  # interleaved, so both see the same machine load
            svc.request(port, ["/config", f"/data?id={k}"], name="cold")
            svc.request(port, [f"/data?id={k}"], name="warm")  # ... not fetched per request
        both = svc.analysis()
    finally:
        svc.server.shutdown()
    cold, warm = (only(both, name) for name in ("cold", "warm"))
    reads = prefetch_reads(cold)  # type: ignore[arg-type]
    names = set(cold.spans["name"].gather(reads).to_list())  # type: ignore[attr-defined]
    assert names == {"GET /config"}
    p = project(cold, WhatIf("prefetch"))  # type: ignore[arg-type]
    projected = float(np.median(p.saving_ns)) / 1e6
    real = median_latency_ms(cold) - median_latency_ms(warm)
    print(f"prefetch: projected {projected:.1f} ms, real {real:.1f} ms")
    assert abs(projected - real) <= 0.2 * real


def test_analyze_what_if_option_adds_the_finding(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from tracelens.cli import main
    from tracelens.store import open_store

    db = str(tmp_path / "store.duckdb")
    with open_store(db) as store:
        store.append(workload().to_arrow())
    args = ["analyze", "--db", db, "--no-findings", "--format", "json"]
    out = CliRunner().invoke(main, [*args, "--what-if", "cap-output=20"])
    assert out.exit_code == 0, out.output
    (found,) = json.loads(out.output)["findings"]
    # Hand-derived: 20 of the 40-token calls' outputs cut at 3 ms each, in 5 of 15 traces.
    assert found["what_if"] == "cap_output=20" and found["traces"] == 5
    assert found["saving_ms"]["p50"] == pytest.approx(60.0, rel=0.01)
    bad = CliRunner().invoke(main, [*args, "--what-if", "faster=2"])
    assert bad.exit_code == 2 and "unknown what-if" in bad.output
