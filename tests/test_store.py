"""The DuckDB store: Arrow in and out, one row per (trace_id, span_id), schema versions."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from spans import make_spans

from tracelens.errors import StoreError
from tracelens.schema import SPAN_SCHEMA, attribute_dict
from tracelens.store import DuckDBStore


def test_round_trip_is_lossless(tmp_path: Path) -> None:
    attrs = {
        "s": "text",
        "i": 42,
        "f": 1.5,
        "b": True,
        "arr": [1, "x"],
        "kv": {"a": 1},
        "tracelens.kind": "io",
        "tracelens.arg_fps": ["aa", "bb"],
        "tracelens.cpu_ns": 7,
    }
    t = make_spans([{"id": 0, "start": 1, "end": 2, "attributes": attrs}])
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        assert store.append(t) == 1
        back = store.read()
    assert back.schema.equals(SPAN_SCHEMA, check_metadata=False)
    row = back.to_pylist()[0]
    assert row["kind"] == "io" and row["cpu_ns"] == 7 and row["arg_fps"] == ["aa", "bb"]
    assert attribute_dict(row["attributes"], row["json_attributes"]) == {
        "s": "text",
        "i": 42,
        "f": 1.5,
        "b": True,
        "arr": [1, "x"],
        "kv": {"a": 1},
    }


def test_appending_the_same_span_keeps_one_row(tmp_path: Path) -> None:
    rows = [{"id": i, "start": i, "end": i + 1} for i in range(5)]
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        assert store.append(make_spans(rows)) == 5
        assert store.append(make_spans([*rows[2:], {"id": 9, "start": 0, "end": 1}])) == 1
        dup_in_batch = make_spans([{"id": 20, "start": 0, "end": 1}] * 3)
        assert store.append(dup_in_batch) == 1
        assert store.count() == 7


def test_time_filter_keeps_whole_traces(tmp_path: Path) -> None:
    a = [
        {"id": 0, "trace": "a" * 32, "start": 100, "end": 300},
        {"id": 1, "trace": "a" * 32, "parent": 0, "start": 250, "end": 290},
    ]
    b = [{"id": 2, "trace": "b" * 32, "start": 400, "end": 500}]
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        store.append(make_spans(a + b))
        got = store.read(["trace_id", "span_id"], start_ns=0, end_ns=200)
    assert sorted(got.column("trace_id").to_pylist()) == ["a" * 32, "a" * 32]


def test_newer_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.duckdb"
    DuckDBStore(path).close()
    con = duckdb.connect(str(path))
    con.execute("UPDATE tracelens_meta SET value = '999' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreError, match="newer tracelens"):
        DuckDBStore(path)


def test_missing_store_read_only(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such store"):
        DuckDBStore(tmp_path / "missing.duckdb", read_only=True)
