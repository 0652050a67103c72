"""Capacity sizing on traces with known per-request demand (hand-derived), Erlang C against
its textbook values, and ``tracelens size`` mirroring the library."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from spans import make_spans
from tracelens_instrumentation import attributes as A

from tracelens.analysis.core import analyze_traces
from tracelens.analysis.sizing import erlang_c, size_traces
from tracelens.cli import main
from tracelens.store import open_store

MS = 1_000_000


def traces(n: int = 10) -> list[dict[str, object]]:
    """Each request: 20 ms of measured CPU, one 60 ms model call (10 in, 5 out), 100 ms total."""
    rows: list[dict[str, object]] = []
    for k in range(n):
        t = 10**12 + k * 10**9
        tr = f"{k + 1:032x}"
        rows += [
            {"id": 0, "trace": tr, "start": t, "end": t + 100 * MS, "name": "handle"},
            {
                "id": 1,
                "trace": tr,
                "parent": 0,
                "start": t,
                "end": t + 20 * MS,
                "name": "plan",
                "attributes": {A.KIND: "cpu", A.CPU_NS: 20 * MS},
            },
            {
                "id": 2,
                "trace": tr,
                "parent": 0,
                "start": t + 30 * MS,
                "end": t + 90 * MS,
                "name": "chat",
                "attributes": {
                    A.GEN_AI_OPERATION_NAME: "chat",
                    A.GEN_AI_USAGE_INPUT_TOKENS: 10,
                    A.GEN_AI_USAGE_OUTPUT_TOKENS: 5,
                },
            },
        ]
    return rows


def test_erlang_c_textbook_values() -> None:
    assert erlang_c(1, 0.5) == pytest.approx(0.5)  # M/M/1: P(wait) = rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    assert erlang_c(2, 2.5) == 1.0


def test_sizing_from_measured_demand() -> None:
    ta = analyze_traces(make_spans(traces()))
    s = size_traces(ta, concurrency=10, latency_target_ms=200, cores=2, model_slots=4)
    d = s.demand
    assert d.cpu_s == pytest.approx(0.020) and d.model_s == pytest.approx(0.060)
    assert d.cpu_share == pytest.approx(0.2) and d.model_share == pytest.approx(0.6)
    assert d.model_calls == 1 and d.tool_calls == 0
    assert s.arrival_per_s == pytest.approx(50.0)
    cpu, model = s.resources
    # 50/s x 20 ms = 1.0 core busy; at 70 % utilisation at most: 2 cores (50 %).
    assert cpu.needed == 2 and cpu.utilisation == pytest.approx(0.5)
    # 50/s x 60 ms = 3 slots busy; at 80 % at most: 4 slots (75 %).
    assert model.needed == 4 and model.utilisation == pytest.approx(0.75)
    # Today: 2 cores carry 2 x 0.7 x 0.2 / 0.02 = 14 requests, 4 slots 4 x 0.8 x 0.2 / 0.06.
    assert cpu.max_concurrency == pytest.approx(14.0)
    assert model.max_concurrency == pytest.approx(32 / 3)
    assert s.binding == "model"


def test_size_cli_mirrors_the_library(tmp_path: Path) -> None:
    db = str(tmp_path / "store.duckdb")
    with open_store(db) as store:
        store.append(make_spans(traces()))
    out = CliRunner().invoke(
        main,
        ["size", "--db", db, "--concurrency", "10", "--latency-target-ms", "200", "--cores", "2",
         "--model-slots", "4", "--format", "json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert got["binding"] == "model"
    assert [r["needed"] for r in got["resources"]] == [2, 4]
