"""The demo agent against a real ``tracelens collect``: spans, kinds, propagation, findings.

Everything runs for real: the agent is ``tracelens demo`` in its own process (it installs a
global tracer provider, which must not leak into this one), exporting with the OpenTelemetry
SDK's OTLP/HTTP exporter to a ``tracelens collect`` subprocess on 127.0.0.1; the analysis reads
the store through that running collector.  Delays are scaled down (``--speed``) to keep the
tests quick; the workload (which calls, with which arguments) does not depend on the speed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tracelens.api import analyze, load_spans
from tracelens.demo.pipeline import CollectorProcess, tracelens_cmd
from tracelens.render.json import finding_json
from tracelens.schema import attribute_dict

ROOT = Path(__file__).resolve().parent.parent
SPEED = "0.3"
TOOLS = {"search_docs", "fetch_schema", "fetch_logs", "get_weather", "calendar"}
EXPECTED_KINDS = {
    "handle_request": None,  # the root: its own time is small, whatever it is
    "plan": "cpu",
    "retrieve": "cpu",
    "search_docs": "io",
    "fetch_schema": "io",
    "fetch_logs": "io",
    "model_queue": "wait",
    "chat": "gpu",
    "compose_answer": "cpu",
}
STATED_KINDS = ("model_queue", "chat")  # given by the code, not measured


def _env() -> dict[str, str]:
    """This environment minus OpenTelemetry settings that would redirect the demo's spans."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.pop("TRACELENS_VLLM_MODEL", None)  # the plain suite tests the simulated model
    return env


def run_demo_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tracelens_cmd("demo", *args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        cwd=ROOT,
    )


@dataclass
class Run:
    summary: dict[str, Any]
    stdout: str
    spans: list[dict[str, Any]]  # stored span rows, attributes decoded
    analysis: Any


def _rows(table: Any) -> list[dict[str, Any]]:
    rows = table.to_pylist()
    for r in rows:
        r["attrs"] = attribute_dict(r["attributes"] or [], r["json_attributes"])
    return rows


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    """12 requests exported to a real collector, read back and analysed through it."""
    tmp = tmp_path_factory.mktemp("demo")
    collector = CollectorProcess(tmp / "demo.duckdb")
    try:
        url = collector.start()
        summary_path = tmp / "summary.json"
        done = run_demo_cli(
            "--endpoint", url, "--requests", "12", "--concurrency", "4", "--seed", "3",
            "--speed", SPEED, "--summary-json", str(summary_path),
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        summary = json.loads(summary_path.read_text())
        collector.wait_stored(summary["spans"], timeout_s=30)
        table = load_spans(db=str(tmp / "demo.duckdb")).spans
        analysis = analyze(db=str(tmp / "demo.duckdb"))
        yield Run(summary, done.stdout, _rows(table), analysis)
        assert collector.stop() == 0, collector.log()
        assert "stopped:" in "\n".join(collector.lines)
    finally:
        if collector.proc is not None and collector.proc.poll() is None:
            collector.proc.send_signal(signal.SIGKILL)
            collector.proc.wait(10)


def test_every_exported_span_is_stored_in_one_trace_per_request(collected: Run) -> None:
    s = collected.summary
    assert s["requests"] == 12 and s["failed"] == 0 and s["flushed"]
    assert len(collected.spans) == s["spans"] > 12 * 8
    traces = {r["trace_id"] for r in collected.spans}
    assert len(traces) == s["traces"] == 12
    roots = [r for r in collected.spans if r["parent_span_id"] is None]
    assert sorted(r["name"] for r in roots) == ["handle_request"] * 12
    assert {r["service"] for r in collected.spans} == {"demo-agent"}
    assert "SIMULATED" in collected.stdout


@pytest.mark.measures  # kinds from the demo's measured clocks: run alone
def test_operations_have_the_kinds_the_agent_does(collected: Run) -> None:
    """Stated kinds (chat, model_queue) hold for every span; measured ones for the operation
    and nearly every span (a step preempted by another process before the 5 ms sampler saw it
    may be judged wait, a limit the instrumentation documents)."""
    kinds: dict[str, Counter[str]] = {}
    for r in collected.spans:
        kinds.setdefault(r["name"], Counter())[r["kind"]] += 1
    assert set(EXPECTED_KINDS) <= set(kinds), sorted(kinds)
    for name in STATED_KINDS:
        assert set(kinds[name]) == {EXPECTED_KINDS[name]}, (name, kinds[name])
    for name, kind in {**EXPECTED_KINDS, **dict.fromkeys(TOOLS & set(kinds), "io")}.items():
        if kind is not None:
            assert kinds[name][kind] >= 0.8 * sum(kinds[name].values()), (name, kinds[name])
    ops = {(o["name"], o["kind"]) for o in collected.analysis.to_dict()["operations"]}
    for name, kind in EXPECTED_KINDS.items():
        if kind is not None:
            assert (name, kind) in ops, (name, kind, ops)
    share = collected.analysis.to_dict()["summary"]["critical_path_share"]
    assert all(share[k] > 0 for k in ("cpu", "gpu", "io", "wait")), share


def test_model_calls_are_labelled_simulated_with_token_usage(collected: Run) -> None:
    chats = [r for r in collected.spans if r["name"] == "chat"]
    assert len(chats) == collected.summary["model_calls"] >= 12
    for r in chats:
        a = r["attrs"]
        assert a["gen_ai.operation.name"] == "chat"
        assert a["tracelens.demo.simulated"] is True
        assert a["gen_ai.usage.input_tokens"] > 50 and a["gen_ai.usage.output_tokens"] >= 1
        assert a["gen_ai.provider.name"] == "tracelens-demo-simulator"
    by_id = {r["span_id"]: r for r in collected.spans}
    waits = [r for r in collected.spans if r["name"] == "model_queue"]
    assert len(waits) == len(chats)
    assert all(by_id[w["parent_span_id"]]["name"] == "chat" for w in waits)


def test_tool_calls_carry_the_callers_traceparent(collected: Run) -> None:
    """What the tool server received names exactly the tool spans that called it."""
    seen = set()
    for tp in collected.summary["traceparents_seen_by_tools"]:
        version, trace_id, span_id, flags = tp.split("-")
        assert version == "00" and int(flags, 16) & 1  # sampled
        seen.add((trace_id, span_id))
    tool_spans = {(r["trace_id"], r["span_id"]) for r in collected.spans if r["name"] in TOOLS}
    assert len(tool_spans) == collected.summary["tool_calls"]
    assert seen == tool_spans


# The demo's kinds and savings come from its measured clocks (a busy machine preempts a step
# and changes which hops look independent): run alone, like the other clock truths.
@pytest.mark.measures
def test_sequential_tools_are_parallelizable_and_the_repeat_cacheable(collected: Run) -> None:
    import tracelens.analysis.findings as finder

    assert callable(finder.find_all)
    findings = [finding_json(f) for f in collected.analysis.findings]
    parallel = [f for f in findings if f["type"] == "parallelizable"]
    assert all(f["parent"] == "handle_request" for f in parallel)
    # Where a retrieve was judged waiting rather than computing (preempted on a busy machine
    # before the sampler saw it), it is no barrier, and it truly did not need the schema.
    assert all(set(f["names"]) <= TOOLS | {"retrieve"} for f in parallel), parallel
    tools = [
        f for f in parallel if {"search_docs", "fetch_schema", "fetch_logs"} <= set(f["names"])
    ]
    assert tools, [(f["type"], f["names"]) for f in findings]
    assert all(set(f["names"]) <= TOOLS and f["saving_ms"]["p50"] > 0 for f in tools)
    assert sum(f["traces"] for f in tools) == 12
    cacheable = {f["names"][0]: f for f in findings if f["type"] == "cacheable"}
    assert "fetch_schema" in cacheable, sorted(cacheable)
    schema = cacheable["fetch_schema"]
    assert schema["identical_results"] is True and schema["traces"] == 12
    assert schema["occurrences"] >= 12  # at least the repeat in every request
    assert not {"model_queue", "chat", "plan", "retrieve"} & set(cacheable)
    # Caching fetch_schema and running it together with its siblings touch the same spans:
    # alternatives, the smaller saving naming the bigger (issue 25), never both additive.
    where = {id(f): k for k, f in enumerate(findings)}
    better, worse = sorted((where[id(schema)], where[id(tools[0])]))
    assert findings[worse]["alternative_to"] is not None
    assert findings[worse]["alternative_to"] <= better
    assert findings[worse]["top_change"] is False


def _workload(path: Path) -> Counter[tuple[str, str | None]]:
    """(span name, args_hash) of every span in an OTLP JSONL file: what was called, how."""
    spans = load_spans([path]).spans
    return Counter(zip(spans["name"].to_pylist(), spans["args_hash"].to_pylist(), strict=True))


def test_file_export_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for f in files:
        done = run_demo_cli(
            "--file", str(f), "--requests", "6", "--concurrency", "3", "--seed", "5",
            "--speed", "0.2",
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "exported to " + str(f) in done.stdout
    first, second = (_workload(f) for f in files)
    assert first == second
    assert sum(first.values()) > 6 * 8
    result = analyze([files[0]])
    assert {o["name"] for o in result.to_dict()["operations"]} >= set(EXPECTED_KINDS)


SIX_WHAT_IFS = ("trim-context=0.5", "cap-output", "co-locate", "prefetch", "model-queue", "stream")


def test_every_what_if_asked_for_answers(tmp_path: Path) -> None:
    """On the demo, each of the six what-ifs gives a finding or says why not (issue 25), and
    the text names the what-if with its parameter."""
    f = tmp_path / "demo.jsonl"
    done = run_demo_cli("--file", str(f), "--requests", "8", "--concurrency", "2", "--seed", "5",
                        "--speed", "0.2")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    result = analyze([f], what_if=list(SIX_WHAT_IFS), what_if_threshold_ms=0)
    doc = result.to_dict()
    labels = [a["what_if"] for a in doc["what_ifs"]]
    assert labels == ["trim_context=0.5", "cap_output=256", "co_locate=1", "prefetch",
                      "model_queue", "stream"]  # fmt: skip
    found = {f["what_if"] for f in doc["findings"] if f["type"] == "what_if"}
    for a in doc["what_ifs"]:
        assert a["finding"] == (a["what_if"] in found), a
        assert a["finding"] or (a["reason"] and len(a["reason"]) > 20), a
    text = result.to_text()
    for a in doc["what_ifs"]:
        assert f"- {a['what_if']}: " in text
    for label in found:
        assert f"what_if {label} [" in text


def test_make_tasks_depends_only_on_the_seed() -> None:
    from tracelens.demo.agent import make_tasks

    assert make_tasks(20, 1) == make_tasks(20, 1)
    assert make_tasks(20, 1) != make_tasks(20, 2)
    assert [t.request_id for t in make_tasks(5, 9)] == list(range(5))


def test_demo_without_a_collector_says_so_and_fails() -> None:
    done = run_demo_cli("--endpoint", "http://127.0.0.1:1", "--requests", "1", timeout=60)
    assert done.returncode != 0
    assert "no collector at http://127.0.0.1:1" in done.stderr
    assert "tracelens collect" in done.stderr


@pytest.mark.smoke
def test_main_job_runs_end_to_end(tmp_path: Path) -> None:
    """``scripts/demo.py`` (what ``make demo`` runs) with fewer requests, into tmp_path."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "--out", str(out),
         "--requests", "18", "--speed", "0.5"],
        capture_output=True, text=True, timeout=180, env=_env(), cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for step in range(1, 6):
        assert f"== {step}/5" in done.stdout
    assert "Critical-path time by kind" in done.stdout  # the text analysis was printed
    # The latency model for the demo's own model: the stage table and its per-token fit.
    model = json.loads((out / "demo-summary.json").read_text())["model"]
    assert "Stages (critical-path ms per trace" in done.stdout
    assert re.search(r"^    (tool|llm|schedule) +[0-9]", done.stdout, re.M), done.stdout[-3000:]
    assert re.search(rf"^  {re.escape(model)} @ demo-agent: \d+ calls", done.stdout, re.M)
    # The CPU profile is the demo's planning and retrieval code, not the decorator's frames.
    assert "CPU hotspots (" in done.stdout
    folded = (out / "cpu.folded").read_text().splitlines()
    frames = {f for line in folded for f in line.rsplit(" ", 1)[0].split(";")}
    assert {"tracelens.demo.agent:Agent.plan", "tracelens.demo.retrieval:Corpus.search"} <= frames
    assert not {f for f in frames if f.startswith("tracelens_instrumentation")}
    assert "stopped: " in done.stdout and " spans stored, 0 rejected" in done.stdout
    html = (out / "report.html").read_text()
    assert "<html" in html.lower() and "fetch_schema" in html
    for section in ("stages", "models", "sizing", "flames", "flame-cpu"):
        assert f'id="{section}"' in html, section
    assert "tracelens.demo.retrieval:Corpus.search" in html  # in the CPU flame graph
    result = json.loads((out / "analysis.json").read_text())
    assert result["summary"]["traces"] == 18
    types = {f["type"] for f in result["findings"]}
    assert {"parallelizable", "cacheable"} <= types
    assert not (out / "demo.duckdb.collector.json").exists()  # the collector withdrew
    # The store is closed and complete: it opens without the collector.
    assert (
        load_spans(db=str(out / "demo.duckdb")).spans.num_rows
        == json.loads((out / "demo-summary.json").read_text())["spans"]
    )


@pytest.mark.system
def test_main_job_fails_loudly_and_stops_its_collector(tmp_path: Path) -> None:
    """A step that fails (here: tracing switched off, so no spans) fails the job, and the
    collector it started does not outlive it."""
    out = tmp_path / "out"
    env = {**_env(), "OTEL_SDK_DISABLED": "true"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "demo.py"), "--out", str(out),
         "--requests", "2", "--speed", "0.2"],
        capture_output=True, text=True, timeout=120, env=env, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "main job FAILED: the demo agent exported no spans" in done.stderr
    assert "== 3/5" not in done.stdout
    # Stopped with SIGTERM, it drained and withdrew its discovery file.
    assert not (out / "demo.duckdb.collector.json").exists()
    assert (out / "demo.duckdb").exists()
