"""What-ifs are an input of the analysis (issue 28): ``analyze``, the HTML report and the Spark
engine carry the same what-if findings, ranked with the detectors' findings by total saving.

The truth is a trace set built by hand, four traces of one shape (times in ms from the trace's
start; every span on the critical path, since each starts when the one before it ends)::

    handle                          [0, 70]
      lookup   (args q_k, result r_k) [0, 10]
      lookup   (args q_k, result r_k) [10, 20]   <- the same call again, same result
      call_api (CLIENT)              [20, 70]
        api    (SERVER, backend)     [30, 60]

* ``--what-if co-locate=1``: ``call_api``'s own time around the traced server span is the
  transfer, 50 - 30 = 20 ms; brought down to a 1 ms round trip it saves 20 - 1 = 19 ms in every
  trace: p50 = p95 = 19 ms, total 4 x 19 = 76 ms, projected latency 70 - 19 = 51 ms.
* the detectors' ``cacheable`` ``lookup``: the second call served from a cache is instant and
  saves its 10 ms: p50 = p95 = 10 ms, total 4 x 10 = 40 ms, projected latency 60 ms.

Findings are ordered by total saving, so the what-if (76 ms) comes first and the cacheable
finding (40 ms) second; the two changes touch different spans, so neither is an alternative
to the other and both are top changes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from click.testing import CliRunner
from spans import make_spans
from tracelens_instrumentation import attributes as A

from tracelens import api
from tracelens.cli import main
from tracelens.parquet import write_parquet
from tracelens.render.html.model import findings as findings_view
from tracelens.render.json import finding_json
from tracelens.store import open_store

MS = 1_000_000
TRACES = 4
WHAT_IF = ["co-locate=1"]
# (type, names, p50 saving, total saving, projected p50) in the order the contract states.
WANT = [
    ("what_if", ["call_api"], 19.0, 76.0, 51.0),
    ("cacheable", ["lookup"], 10.0, 40.0, 60.0),
]


def hand_built() -> pa.Table:
    rows: list[dict[str, Any]] = []
    for k in range(TRACES):
        trace, t0 = f"{k + 1:032x}", 10**12 + k * 10**10
        lookup = {
            A.GEN_AI_OPERATION_NAME: "execute_tool",
            A.ARGS_HASH: f"q{k}",
            A.RESULT_HASH: f"r{k}",
        }
        rows += [
            {"id": 0, "trace": trace, "start": t0, "end": t0 + 70 * MS, "name": "handle"},
            {
                "id": 1,
                "trace": trace,
                "parent": 0,
                "start": t0,
                "end": t0 + 10 * MS,
                "name": "lookup",
                "attributes": lookup,
            },
            {
                "id": 2,
                "trace": trace,
                "parent": 0,
                "start": t0 + 10 * MS,
                "end": t0 + 20 * MS,
                "name": "lookup",
                "attributes": lookup,
            },
            {
                "id": 3,
                "trace": trace,
                "parent": 0,
                "start": t0 + 20 * MS,
                "end": t0 + 70 * MS,
                "name": "call_api",
                "span_kind": "client",
            },
            {
                "id": 4,
                "trace": trace,
                "parent": 3,
                "start": t0 + 30 * MS,
                "end": t0 + 60 * MS,
                "name": "api",
                "service": "backend",
                "span_kind": "server",
            },
        ]
    return make_spans(rows)


def check_hand_derived(doc: dict[str, Any]) -> None:
    got = [
        (
            f["type"],
            f["names"],
            f["saving_ms"]["p50"],
            f["total_saving_ms"],
            f["projected_latency_ms"]["p50"],
        )
        for f in doc["findings"]
    ]
    assert got == WANT  # the figures are rounded to the microsecond: exact here
    totals = [f["total_saving_ms"] for f in doc["findings"]]
    assert totals == sorted(totals, reverse=True)
    what_if, cacheable = doc["findings"]
    assert cacheable["confidence"] == "high" and cacheable["traces"] == TRACES
    assert what_if["what_if"] == "co_locate=1" and what_if["traces"] == TRACES
    assert what_if["saving_ms"]["p95"] == pytest.approx(19.0)
    assert [f["alternative_to"] for f in doc["findings"]] == [None, None]
    assert [f["top_change"] for f in doc["findings"]] == [True, True]
    assert doc["what_ifs"] == [{"what_if": "co_locate=1", "finding": True, "reason": None}]


@pytest.fixture
def store(tmp_path: Path) -> str:
    db = str(tmp_path / "store.duckdb")
    with open_store(db) as s:
        s.append(hand_built())
    return db


@pytest.mark.smoke
def test_analyze_and_report_carry_the_same_ranked_what_if_findings(
    store: str, tmp_path: Path
) -> None:
    analysis = api.analyze(db=store, what_if=WHAT_IF)
    doc = analysis.to_dict()
    check_hand_derived(doc)

    written = api.write_report(db=store, out=tmp_path / "r.html", what_if=WHAT_IF)
    assert written.analysis is not None
    assert [finding_json(f) for f in written.analysis.findings] == doc["findings"]
    view = findings_view(written.analysis)  # what the page shows, in its order
    assert [(v["type"], v["saving_p50"]) for v in view["top"]] == [
        ("what_if", 19.0),
        ("cacheable", 10.0),
    ]
    page = written.paths[0].read_text(encoding="utf-8")
    assert page.index("What if co_locate=1: call_api") < page.index("Cache lookup")

    # The command line: the same options, the same page.
    html = tmp_path / "cli.html"
    args = ["report", "--db", store, "--what-if", "co-locate=1", "--out", str(html)]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    assert html.read_text(encoding="utf-8") == page  # deterministic for the same input
    bad = CliRunner().invoke(main, [*args[:-4], "--what-if", "faster=2", "--out", str(html)])
    assert bad.exit_code == 2 and "unknown what-if" in bad.output

    # Under a threshold above the saving, no what-if finding: the reason names the saving.
    high = api.analyze(db=store, what_if=WHAT_IF, what_if_threshold_ms=20.0).to_dict()
    assert [f["type"] for f in high["findings"]] == ["cacheable"]
    (said,) = high["what_ifs"]
    assert not said["finding"] and "saves 19.0 ms at p50" in said["reason"]


def test_no_findings_keeps_the_what_if_findings(store: str) -> None:
    doc = api.analyze(db=store, what_if=WHAT_IF, findings=False).to_dict()
    assert [(f["type"], f["total_saving_ms"]) for f in doc["findings"]] == [("what_if", 76.0)]


def test_parquet_on_the_embedded_engine_equals_the_store(store: str, tmp_path: Path) -> None:
    out = tmp_path / "spans"
    write_parquet(hand_built(), out)
    from_parquet = api.analyze(parquet=out, what_if=WHAT_IF).to_dict()
    check_hand_derived(from_parquet)
    assert from_parquet == api.analyze(db=store, what_if=WHAT_IF).to_dict()


@pytest.mark.system
def test_spark_carries_the_same_what_if_findings(spark: Any, tmp_path: Path) -> None:
    out = tmp_path / "spans"
    write_parquet(hand_built(), out)
    embedded = api.analyze(parquet=out, what_if=WHAT_IF).to_dict()
    on_spark = api.analyze(parquet=out, engine="spark", what_if=WHAT_IF).to_dict()
    check_hand_derived(on_spark)
    assert on_spark == embedded

    html = tmp_path / "spark.html"
    args = ["report", "--parquet", str(out), "--engine", "spark", "--out", str(html)]
    rep = CliRunner().invoke(main, [*args, "--what-if", "co-locate=1"])
    assert rep.exit_code == 0, rep.output
    page = html.read_text(encoding="utf-8")
    assert page.index("What if co_locate=1: call_api") < page.index("Cache lookup")
    args = ["analyze", "--parquet", str(out), "--engine", "spark", "--format", "json"]
    cli = CliRunner().invoke(main, [*args, "--what-if", "co-locate=1"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.output) == embedded


def test_each_engine_names_the_sources_it_does_not_read() -> None:
    from tracelens.engines import EngineError, SpanTable, SparkTable
    from tracelens.engines.embedded import EmbeddedEngine
    from tracelens.engines.spark import SparkEngine

    with pytest.raises(EngineError, match="the embedded engine does not read SparkTable"):
        EmbeddedEngine().traces(SparkTable("spans"))
    # Refused before any Spark session starts: spans in this process are the embedded engine's.
    with pytest.raises(EngineError, match="the spark engine does not read SpanTable"):
        SparkEngine(spark=object()).frame(SpanTable(hand_built()))  # type: ignore[arg-type]
