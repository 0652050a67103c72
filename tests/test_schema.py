"""The JSON output against its contract: ``docs/analysis.schema.json`` (a JSON Schema, checked
with the ``jsonschema`` library) on every fixture, and ``docs/analysis-json.md``'s list of
evidence codes against the codes the analyzer emits.

The schema was written from the prose contract, not from the output: it is the independent
truth here.  The negative cases show the schema has teeth (a test whose schema accepted
anything could not fail).
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import analysed, trace_fixture_files

from tracelens.analysis import analyze_spans
from tracelens.analysis.whatif import WhatIf
from tracelens.analysis.whatif import findings as what_if_findings

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = ROOT / "docs" / "analysis.schema.json"
CONTRACT = ROOT / "docs" / "analysis-json.md"

# Inputs of every format and shape the repository holds: agent frameworks, OTLP, Jaeger,
# Zipkin, vLLM, the CRISP cases and the labelled verdict corpus (many finding types).
# (which fixture files are traces is golden/generate.py's one rule)
INPUTS = [
    p
    for p in trace_fixture_files()
    if p.relative_to(ROOT / "fixtures").parts[0]
    in ("agent", "otlp", "jaeger", "zipkin", "vllm", "crisp_test_cases", "verdicts", "gpu")
    and p.suffix in (".json", ".jsonl")
]


@cache
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@cache
def output(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(analysed(path).to_json())
    return doc


def errors(doc: dict[str, Any]) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(doc)
    ]


def test_the_inputs_cover_every_finding_type() -> None:
    types = {f["type"] for p in INPUTS for f in output(p)["findings"]}
    assert {"parallelizable", "cacheable", "retry", "polling", "n_plus_one"} <= types, types


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_output_matches_the_schema(path: Path) -> None:
    assert errors(output(path)) == []


def test_documented_evidence_codes() -> None:
    """Every evidence code the analyzer emits is listed in the contract's prose."""
    text = CONTRACT.read_text(encoding="utf-8")
    listed = set(re.findall(r"`([a-z][a-z0-9_]*)`", text.split("Evidence codes:", 1)[1]))
    emitted = {e["code"] for p in INPUTS for f in output(p)["findings"] for e in f["evidence"]}
    assert emitted - listed == set()


def _valid() -> dict[str, Any]:
    for p in INPUTS:
        doc = output(p)
        if any(f["type"] == "cacheable" for f in doc["findings"]):
            return copy.deepcopy(doc)
    raise AssertionError("no fixture has a cacheable finding")


def _cacheable(doc: dict[str, Any]) -> dict[str, Any]:
    finding: dict[str, Any] = next(f for f in doc["findings"] if f["type"] == "cacheable")
    return finding


@pytest.mark.parametrize(
    "breaks",
    [
        "no_summary",
        "evidence_as_string",
        "confidence_word",
        "share_above_one",
        "kind_unknown_word",
        "cacheable_without_ttl",
        "high_without_positive_evidence",
        "negative_trace_count",
    ],
)
def test_schema_rejects_broken_output(breaks: str) -> None:
    doc = _valid()
    f = _cacheable(doc)
    if breaks == "no_summary":
        del doc["summary"]
    elif breaks == "evidence_as_string":
        f["evidence"] = f["explanation"]  # the contract before issue 12
    elif breaks == "confidence_word":
        f["confidence"] = "very high"
    elif breaks == "share_above_one":
        doc["summary"]["critical_path_share"]["cpu"] = 1.5
    elif breaks == "kind_unknown_word":
        doc["operations"][0]["kind"] = "network"
    elif breaks == "cacheable_without_ttl":
        del f["suggested_ttl_s"]
    elif breaks == "high_without_positive_evidence":
        f["confidence"] = "high"
        f["evidence"] = [e for e in f["evidence"] if e["code"] in ("same_arguments", "replay")]
    elif breaks == "negative_trace_count":
        doc["summary"]["traces"] = -1
    assert errors(doc), breaks


@cache
def latency_model_output() -> dict[str, Any]:
    """Hand-built traces the fixtures lack: model calls with fitted per-token costs (the
    latency tests' workload), a what-if finding, and spans with CPU stacks."""
    from spans import make_spans
    from test_flame_browser import traces as profiled_traces
    from test_latency import workload

    analysis = analyze_spans(workload())
    analysis.findings.extend(
        what_if_findings(analysis.traces, [WhatIf.parse("cap-output=20")], threshold_ms=1.0)
    )
    doc: dict[str, Any] = json.loads(analysis.to_json())
    profiled = json.loads(analyze_spans(make_spans(profiled_traces()), findings=False).to_json())
    doc["cpu_hotspots"] = profiled["cpu_hotspots"]
    return doc


def test_latency_model_and_cpu_hotspots_match_the_schema() -> None:
    doc = latency_model_output()
    assert {m["status"] for m in doc["summary"]["models"]} == {"ok"}
    assert any(f["type"] == "what_if" for f in doc["findings"])
    assert doc["cpu_hotspots"]["critical_path"]["functions"]
    assert errors(doc) == []


@pytest.mark.parametrize(
    "breaks",
    [
        "no_cpu_hotspots",
        "stage_word",
        "stage_missing",
        "model_status_word",
        "too_few_calls_with_costs",
        "ok_without_costs",
        "what_if_without_label",
        "hotspot_share_above_one",
        "cold_start_without_trace",
    ],
)
def test_schema_rejects_broken_latency_model_output(breaks: str) -> None:
    doc = copy.deepcopy(latency_model_output())
    summ = doc["summary"]
    model = summ["models"][0]
    if breaks == "no_cpu_hotspots":
        del doc["cpu_hotspots"]
    elif breaks == "stage_word":
        summ["stages"]["operations"][0]["stages"][0]["stage"] = "network"
    elif breaks == "stage_missing":
        summ["stages"]["operations"][0]["stages"].pop()
    elif breaks == "model_status_word":
        model["status"] = "great"
    elif breaks == "too_few_calls_with_costs":
        model["status"] = "too_few_calls"
    elif breaks == "ok_without_costs":
        model["prefill_ms_per_token"] = None
    elif breaks == "what_if_without_label":
        del next(f for f in doc["findings"] if f["type"] == "what_if")["what_if"]
    elif breaks == "hotspot_share_above_one":
        doc["cpu_hotspots"]["critical_path"]["entry_points"][0]["share"] = 1.5
    elif breaks == "cold_start_without_trace":
        summ["cold_starts"] = [{"service": "s", "name": "init", "duration_ms": 1.0}]
    assert errors(doc), breaks
