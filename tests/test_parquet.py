"""Parquet span sets (tracelens/parquet.py): layout, partitions, lossless round trip, reading."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from tracelens.cli import main
from tracelens.errors import InputError
from tracelens.ingest import read_files
from tracelens.parquet import LAYOUT_FILE, read_parquet, write_parquet
from tracelens.schema import SPAN_SCHEMA, SpanColumns
from tracelens.store import open_store

# 2025-12-01T23:59:59.5Z and half a second later, the next day.
LATE = 1_764_633_599_500_000_000
NEXT_DAY = LATE + 1_000_000_000


def _mixed_spans() -> pa.Table:
    """Real fixtures of every format (typed attributes: ints, doubles, bools, arrays)."""
    files = [
        FIXTURES / "otlp" / "opentelemetry-proto_examples_trace.json",
        FIXTURES / "otlp" / "hotrod_dispatch_jaeger-ui_v3_getTrace-response.json",
        FIXTURES / "vllm" / "vllm-offline-engine.otlp.json",
        *sorted((FIXTURES / "zipkin").glob("*.json")),
        FIXTURES / "jaeger" / "genaiTestTrace.json",
    ]
    return read_files(files).spans


def _midnight_trace() -> pa.Table:
    cols = SpanColumns()
    tid = "ab" * 16
    cols.append(
        trace_id=tid,
        span_id="1" * 16,
        parent_span_id=None,
        name="root",
        service="s",
        span_kind="server",
        start_ns=LATE,
        end_ns=NEXT_DAY + 5,
        attributes={"n": 3, "ok": True, "xs": [1, "a"], "f": 0.1},
    )
    cols.append(
        trace_id=tid,
        span_id="2" * 16,
        parent_span_id="1" * 16,
        name="after midnight",
        service="s",
        span_kind="client",
        start_ns=NEXT_DAY,
        end_ns=NEXT_DAY + 1,
    )
    return cols.to_arrow()


def test_round_trip_store_export_import_gives_the_identical_table(tmp_path: Path) -> None:
    spans = pa.concat_tables([_mixed_spans(), _midnight_trace()])
    db1, db2, out = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "spans"
    with open_store(db1) as store:
        store.append(spans)
        stored = store.read()
    runner = CliRunner()
    got = runner.invoke(main, ["export", "--db", str(db1), "--parquet", str(out)])
    assert got.exit_code == 0, got.output
    n_traces = len(set(spans["trace_id"].to_pylist()))
    assert f"wrote {stored.num_rows} spans in {n_traces} traces" in got.output
    # The span set reads back as the store's table, row for row (order included).
    back = read_parquet(out)
    assert back.schema == SPAN_SCHEMA
    assert back.equals(stored)
    # `tracelens import DIR` into a new store: the same table (a store keeps no row order).
    got = runner.invoke(main, ["import", str(out), "--db", str(db2)])
    assert got.exit_code == 0, got.output
    with open_store(db2) as store:
        again = store.read()
    key = [("trace_id", "ascending"), ("span_id", "ascending")]
    assert again.sort_by(key).equals(stored.sort_by(key))
    # Typed attributes survived: the midnight root's values decode to what was appended.
    # (found by trace and span id: a Zipkin fixture has a span "1" * 16 too)
    midnight = _midnight_trace()["trace_id"][0]
    is_root = pa.compute.and_(
        pa.compute.equal(back["span_id"], "1" * 16), pa.compute.equal(back["trace_id"], midnight)
    )
    root = back.filter(is_root).to_pylist()[0]
    attrs = dict(root["attributes"])
    assert {k: json.loads(attrs[k]) for k in root["json_attributes"]} == {
        "n": 3,
        "ok": True,
        "xs": [1, "a"],
        "f": 0.1,
    }


def test_partitions_are_days_of_the_trace_start_and_the_layout_is_stated(tmp_path: Path) -> None:
    out = tmp_path / "spans"
    done = write_parquet(_midnight_trace(), out)
    assert (done.spans, done.traces, done.partitions) == (2, 1, 1)
    # Both spans lie in the day the trace started, though one started the next day.
    dirs = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert dirs == ["day=2025-12-01"]
    rows = pq.read_table(next((out / "day=2025-12-01").glob("*.parquet")))
    assert rows.num_rows == 2
    assert rows.schema.field("start_ns").type == pa.int64()
    assert rows.column("seq").to_pylist() == [0, 1]
    doc = json.loads((out / LAYOUT_FILE).read_text())
    assert doc["format"] == "tracelens.spans.parquet"
    assert doc["version"] == 1
    assert doc["order"] == "seq"
    assert doc["days"] == ["2025-12-01"]


def test_a_newer_layout_and_a_non_empty_target_are_refused_with_the_place(tmp_path: Path) -> None:
    out = tmp_path / "spans"
    write_parquet(_midnight_trace(), out)
    with pytest.raises(InputError, match="not an empty directory"):
        write_parquet(_midnight_trace(), out)
    doc = json.loads((out / LAYOUT_FILE).read_text())
    doc["version"] = 2
    (out / LAYOUT_FILE).write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        read_parquet(out)
    assert str(out / LAYOUT_FILE) in str(err.value)
    assert "field version" in str(err.value)
    with pytest.raises(InputError, match="no such file"):
        read_parquet(tmp_path / "nowhere")


def test_plain_parquet_without_the_layout_is_read_in_canonical_order(tmp_path: Path) -> None:
    spans = _midnight_trace()
    reversed_rows = spans.take(pa.array([1, 0]))
    pq.write_table(reversed_rows, tmp_path / "x.parquet")
    back = read_parquet(tmp_path / "x.parquet")
    # Ordered by trace, then start: the root (earlier start) first.
    assert back["name"].to_pylist() == ["root", "after midnight"]
    with pytest.raises(InputError, match="no column"):
        pq.write_table(pa.table({"trace_id": ["a"]}), tmp_path / "bad.parquet")
        read_parquet(tmp_path / "bad.parquet")


def test_analyze_parquet_equals_analyze_of_the_store(tmp_path: Path) -> None:
    files = [
        FIXTURES / "otlp" / "hotrod_dispatch_jaeger-ui_v3_getTrace-response.json",
        *sorted((FIXTURES / "agent").glob("*.json")),
    ]
    db, out = tmp_path / "a.duckdb", tmp_path / "spans"
    runner = CliRunner()
    assert runner.invoke(main, ["import", *map(str, files), "--db", str(db)]).exit_code == 0
    assert runner.invoke(main, ["export", "--db", str(db), "--parquet", str(out)]).exit_code == 0
    from_db = runner.invoke(main, ["analyze", "--db", str(db), "--format", "json"])
    from_pq = runner.invoke(main, ["analyze", "--parquet", str(out), "--format", "json"])
    assert from_db.exit_code == 0 and from_pq.exit_code == 0, from_pq.output
    doc = json.loads(from_pq.output)
    assert doc["summary"]["traces"] == 8 and doc["findings"]
    assert doc == json.loads(from_db.output)
    refused = runner.invoke(main, ["analyze", str(files[0]), "--parquet", str(out)])
    assert refused.exit_code == 2 and "give no FILES" in refused.output


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"files": ["a.json"], "parquet": "dir"}, "give no FILES"),
        ({"spark_table": "spans"}, "--spark-table needs --engine spark"),
        ({"engine": "spark"}, "needs --parquet PATH or --spark-table NAME"),
        ({"engine": "spark", "parquet": "d", "spark_table": "t"}, "not both"),
        ({"engine": "spark", "files": ["a.json"]}, "export or import the files first"),
    ],
)
def test_the_library_refuses_sources_that_do_not_go_together(
    kwargs: dict[str, Any], message: str
) -> None:
    """One rule for the library and both commands (analyze, report): refused before anything
    is read or a Spark session starts."""
    from tracelens import api
    from tracelens.errors import OptionError

    files = kwargs.pop("files", ())
    with pytest.raises(OptionError, match=re.escape(message)):
        api.analyze(files, **kwargs)


def test_a_store_beside_a_parquet_set_is_refused_by_the_library_and_dropped_from_the_env(
    tmp_path: Path,
) -> None:
    """``write_report`` and ``analyze`` (the library) refuse a store and a Parquet span set
    together; the commands take ``--db`` from TRACELENS_DB as the default source only, so
    ``report --parquet`` with that set reads the span set."""
    from tracelens import api
    from tracelens.errors import OptionError

    fixture = FIXTURES / "otlp" / "hotrod_dispatch_jaeger-ui_v3_getTrace-response.json"
    db, out = tmp_path / "a.duckdb", tmp_path / "spans"
    runner = CliRunner()
    assert runner.invoke(main, ["import", str(fixture), "--db", str(db)]).exit_code == 0
    assert runner.invoke(main, ["export", "--db", str(db), "--parquet", str(out)]).exit_code == 0
    html = tmp_path / "r.html"
    with pytest.raises(OptionError, match="not several"):
        api.analyze(db=str(db), parquet=str(out))
    with pytest.raises(OptionError, match="not several"):
        api.write_report(db=str(db), parquet=str(out), out=str(html))
    assert not html.exists()
    env = {"TRACELENS_DB": str(tmp_path / "elsewhere.duckdb")}
    for args in (["report", "--parquet", str(out), "--out", str(html)],
                 ["analyze", "--parquet", str(out), "--format", "json"]):  # fmt: skip
        res = runner.invoke(main, args, env=env)
        assert res.exit_code == 0, res.output
    assert html.exists() and not (tmp_path / "elsewhere.duckdb").exists()
