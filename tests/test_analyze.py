"""`tracelens analyze` end to end on the real public traces in fixtures/."""

from __future__ import annotations

import gzip
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, analysed

from tracelens.cli import main

HOTROD = FIXTURES / "otlp/hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"
ALL_TRACE_FILES = sorted(
    p
    for p in FIXTURES.rglob("*.json")
    if not p.name.endswith(".expected.json") and p.name not in ("README.md", "labels.json")
)


def analyze_json(*args: str) -> dict:
    res = CliRunner().invoke(main, ["analyze", "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("case", range(1, 10))
def test_official_jaeger_ui_cases(case: int) -> None:
    src = FIXTURES / f"critical-path/jaeger-test{case}.otlp.json"
    expected = json.loads((FIXTURES / f"critical-path/jaeger-test{case}.expected.json").read_text())
    doc = analyze_json(str(src))
    (trace,) = doc["traces"]
    (root,) = expected["roots"]
    assert trace["trace_id"] == expected["trace_id"]
    assert trace["root_span_id"] == root["root_span_id"]
    got = [{k: s[k] for k in ("span_id", "start_ns", "end_ns")} for s in trace["critical_path"]]
    assert got == root["critical_path"]


def test_console_script_runs_in_a_subprocess() -> None:
    src = FIXTURES / "critical-path/jaeger-test2.otlp.json"
    out = subprocess.run(
        [sys.executable, "-m", "tracelens", "analyze", "--format", "json", str(src)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["schema"] == "tracelens.analysis/1"


def test_hotrod_critical_path_and_share_by_kind() -> None:
    """Worked out by hand from the span times in the fixture (ms from the root's start).

    GET /dispatch (frontend, SERVER, no protocol attributes: kind unknown) lasts 702.608 ms and
    does three things one after another:
    1. customer: HTTP GET -> GET /customer -> SQL SELECT [9.661, 266.972]: the query alone is
       257.310 ms of io on the path.
    2. drivers: FindNearest gRPC client [268.182, 495.035] -> driver server -> FindDriverIDs,
       then 13 GetDriver redis calls strictly one after another: all 13 are on the path.
    3. routes: 10 HTTP GET /route calls in a 3-wide worker pool.  Walking back from the end, the
       last to finish is the one ending at 702.496; before its start (641.941) the latest to end
       is the one ending at 641.778, then 601.001, then 532.695: four GET /route server spans
       (route service, unknown kind) of 36.403 + 67.894 + 40.309 + 60.099 = 204.705 ms.
    Everything else on the path is the SERVER spans' own time between children (unknown, 10.232
    ms in all) and the HTTP/gRPC/redis/SQL client spans (io).  So io = 487.673 ms and
    unknown = 214.937 ms: io is 69.4% of the latency, unknown 30.6%.
    """
    doc = analyze_json(str(HOTROD))
    s = doc["summary"]
    assert s["traces"] == 1 and s["spans"] == 40
    assert s["latency_ms"]["p50"] == pytest.approx(702.608, abs=0.001)
    assert s["critical_path_ms"]["io"] == pytest.approx(487.673, abs=0.002)
    assert s["critical_path_ms"]["unknown"] == pytest.approx(214.937, abs=0.002)
    assert s["critical_path_ms"]["cpu"] == s["critical_path_ms"]["gpu"] == 0
    assert s["critical_path_share"]["io"] == pytest.approx(0.6941, abs=0.0001)
    assert sum(s["critical_path_share"].values()) == pytest.approx(1.0)

    path = doc["traces"][0]["critical_path"]
    t0 = path[0]["start_ns"]
    names = [p["name"] for p in path]
    assert names.count("GetDriver") == 13
    assert names.count("GET /route") == 4
    sql = next(p for p in path if p["name"] == "SQL SELECT")
    assert (sql["end_ns"] - sql["start_ns"]) / 1e6 == pytest.approx(257.310, abs=0.001)
    route_ends = [round((p["end_ns"] - t0) / 1e6, 3) for p in path if p["name"] == "GET /route"]
    assert route_ends == [532.487, 600.916, 641.455, 702.268]
    ops = {(o["service"], o["name"]): o for o in doc["operations"]}
    assert ops[("route", "GET /route")]["critical_ms"] == pytest.approx(204.705, abs=0.002)
    assert ops[("redis-manual", "GetDriver")]["count"] == 13


@pytest.mark.parametrize("path", ALL_TRACE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_imports_and_analyses(path: Path) -> None:
    doc = json.loads(analysed(path).to_json())  # the CLI's own output: the tests above
    assert doc["summary"]["traces"] >= 1
    for trace in doc["traces"]:
        sections = trace["critical_path"]
        assert sections, trace["trace_id"]
        total = sum(s["end_ns"] - s["start_ns"] for s in sections)
        assert total == round(trace["duration_ms"] * 1e6)
        for a, b in itertools.pairwise(sections):
            assert a["end_ns"] == b["start_ns"]


def test_json_contract_shapes() -> None:
    files = [str(HOTROD), *map(str, sorted((FIXTURES / "agent").glob("*.json")))]
    doc = analyze_json(*files)
    assert doc["schema"] == "tracelens.analysis/1"
    assert set(doc) >= {"summary", "operations", "traces", "findings", "warnings"}
    lat = [t["duration_ms"] for t in doc["traces"]]
    assert lat == sorted(lat, reverse=True)
    assert doc["summary"]["latency_ms"]["max"] == pytest.approx(lat[0], abs=0.001)
    for t in doc["traces"]:
        assert re.fullmatch(r"[0-9a-f]{32}", t["trace_id"])
        assert re.fullmatch(r"[0-9a-f]{16}", t["root_span_id"])
        for s in t["critical_path"]:
            assert set(s) >= {"span_id", "name", "kind", "start_ns", "end_ns"}
            assert isinstance(s["start_ns"], int)
            assert s["kind"] in {"cpu", "gpu", "io", "wait", "unknown"}
    shares = doc["summary"]["critical_path_share"]
    assert sum(shares.values()) == pytest.approx(1.0)
    # The agent runs call a model: GPU (model inference) shows up on their critical paths.
    assert doc["summary"]["critical_path_ms"]["gpu"] > 0
    top = analyze_json("--top", "2", *files)
    assert [t["trace_id"] for t in top["traces"]] == [t["trace_id"] for t in doc["traces"][:2]]


def test_text_output_has_the_tables() -> None:
    res = CliRunner().invoke(main, ["analyze", str(HOTROD)])
    assert res.exit_code == 0, res.output
    for heading in (
        "End-to-end latency",
        "Critical-path time by kind",
        "Top operations",
        "Slowest traces",
    ):
        assert heading in res.stdout
    assert "SQL SELECT" in res.stdout


def test_out_file(tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    res = CliRunner().invoke(main, ["analyze", str(HOTROD), "--format", "json", "--out", str(out)])
    assert res.exit_code == 0 and res.stdout == ""
    assert json.loads(out.read_text())["summary"]["spans"] == 40


def test_bad_file_names_the_file_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "truncated.json"
    bad.write_text(HOTROD.read_text()[:5000])
    res = CliRunner().invoke(main, ["analyze", str(bad)])
    assert res.exit_code == 2
    assert str(bad) in res.stderr

    res = CliRunner().invoke(
        main, ["analyze", "--keep-going", "--format", "json", str(bad), str(HOTROD)]
    )
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["summary"]["spans"] == 40
    assert any(str(bad) in w for w in doc["warnings"])


def test_gzip_and_store_give_the_same_answer(tmp_path: Path) -> None:
    gz = tmp_path / "hotrod.json.gz"
    gz.write_bytes(gzip.compress(HOTROD.read_bytes()))
    db = tmp_path / "t.duckdb"
    runner = CliRunner()
    res = runner.invoke(main, ["import", str(gz), "--db", str(db)])
    assert res.exit_code == 0, res.output
    from_store = analyze_json("--db", str(db))
    from_file = analyze_json(str(gz))
    assert from_store["summary"] == from_file["summary"]
    assert from_store["traces"] == from_file["traces"]


def test_missing_store_is_a_clear_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["analyze", "--db", str(tmp_path / "nope.duckdb")])
    assert res.exit_code == 2
    assert "nope.duckdb" in res.stderr
