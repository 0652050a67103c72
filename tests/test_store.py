"""The DuckDB store: Arrow in and out, one row per (trace_id, span_id), schema versions."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from spans import make_spans

from tracelens.errors import StoreError
from tracelens.schema import SPAN_SCHEMA, attribute_dict
from tracelens.store import DuckDBStore
from tracelens.store.duckdb import STORE_VERSION, table_ddl


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


def _three_traces() -> tuple[list[dict], str, str, str]:
    """a: two spans from t=100; b: one span at 400; c: two spans from 150, appended in a
    later batch (so its rows lie apart from a's)."""
    a, b, c = "a" * 32, "b" * 32, "c" * 32
    first = [
        {"id": 0, "trace": a, "start": 100, "end": 300},
        {"id": 1, "trace": a, "parent": 0, "start": 250, "end": 290},
        {"id": 2, "trace": b, "start": 400, "end": 500},
    ]
    later = [
        {"id": 3, "trace": c, "start": 150, "end": 900},
        {"id": 4, "trace": c, "parent": 3, "start": 600, "end": 700},
    ]
    return first + later, a, b, c


def _pairs(table: pa.Table) -> list[tuple[str, str]]:
    return sorted(zip(*(table.column(c).to_pylist() for c in ("trace_id", "span_id")), strict=True))


def test_read_by_trace_ids_returns_just_those_traces_whole(tmp_path: Path) -> None:
    rows, a, b, c = _three_traces()
    ids = [f"{i + 1:016x}" for i in range(5)]  # make_spans: span id = id + 1
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        store.append(make_spans(rows[:3]))
        store.append(make_spans(rows[3:]))
        both = store.read(["trace_id", "span_id"], trace_ids=[a, c])
        arrow = store.read(["trace_id", "span_id"], trace_ids=pa.array([c, "f" * 32]))
        whole = store.read(trace_ids=[b])
        none = store.read(["trace_id"], trace_ids=[])
        unknown = store.read(["trace_id"], trace_ids=["e" * 32])
        windowed = store.read(["trace_id", "span_id"], trace_ids=[a, b, c], start_ns=120)
        batches = store.read_batches(["trace_id", "span_id"], trace_ids=[b, c], batch_rows=1)[1]
        streamed = pa.Table.from_batches(list(batches))
    assert _pairs(both) == [(a, ids[0]), (a, ids[1]), (c, ids[3]), (c, ids[4])]
    assert _pairs(arrow) == [(c, ids[3]), (c, ids[4])]  # an id not stored is no error
    assert whole.schema.equals(SPAN_SCHEMA, check_metadata=False) and whole.num_rows == 1
    assert none.num_rows == 0 and unknown.num_rows == 0
    assert _pairs(windowed) == [(b, ids[2]), (c, ids[3]), (c, ids[4])]  # a starts at 100
    assert _pairs(streamed) == [(b, ids[2]), (c, ids[3]), (c, ids[4])]


def test_read_can_keep_only_some_attribute_keys(tmp_path: Path) -> None:
    attrs = {"gen_ai.operation.name": "chat", "url.full": "http://x/'q'", "n": 3}
    t = make_spans([{"id": 0, "start": 1, "end": 2, "attributes": attrs}])
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        store.append(t)
        (tid,) = set(store.read(["trace_id"]).column("trace_id").to_pylist())
        kept = store.read(attribute_keys=["gen_ai.operation.name", "n", "absent"])
        by_id = store.read(["attributes"], trace_ids=[tid], attribute_keys=["url.full"])
        quoted = store.read(["attributes"], attribute_keys=["it's"])
        none = store.read(["attributes"], attribute_keys=[])
    row = kept.to_pylist()[0]
    assert sorted(k for k, _ in row["attributes"]) == ["gen_ai.operation.name", "n"]
    assert attribute_dict(row["attributes"], row["json_attributes"]) == {
        "gen_ai.operation.name": "chat",
        "n": 3,
    }
    assert by_id.column("attributes").to_pylist() == [[("url.full", "http://x/'q'")]]
    assert quoted.column("attributes").to_pylist() == [[]]
    assert none.column("attributes").to_pylist() == [[]]


def test_read_by_trace_ids_refuses_what_is_not_a_list_of_ids(tmp_path: Path) -> None:
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        with pytest.raises(ValueError, match="not one string"):
            store.read(trace_ids="a" * 32)
        with pytest.raises(ValueError, match="not a trace id string: 7"):
            store.read(trace_ids=["a" * 32, 7])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="null"):
            store.read(trace_ids=pa.array(["a" * 32, None]))


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


def test_sql_view_shows_attributes_as_a_map(tmp_path: Path) -> None:
    """Stored as key/value lists (cheaper to insert); the ``spans`` view is for SQL by hand."""
    t = make_spans([{"id": 0, "start": 1, "end": 2, "attributes": {"http.method": "GET"}}])
    path = tmp_path / "s.duckdb"
    with DuckDBStore(path) as store:
        store.append(t)
    con = duckdb.connect(str(path), read_only=True)
    assert con.sql("SELECT attributes['http.method'] FROM spans").fetchall() == [("GET",)]
    con.close()


def _version_1_store(path: Path) -> None:
    """A store as tracelens wrote it before attributes were stored as lists."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE tracelens_meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO tracelens_meta VALUES ('schema_version', '1')")
    ddl = table_ddl("spans").replace(
        "STRUCT(key VARCHAR, value VARCHAR)[]", "MAP(VARCHAR, VARCHAR)"
    )
    con.execute(ddl)
    spans = make_spans(
        [
            {"id": 0, "start": 1, "end": 5, "attributes": {"a": "1", "n": 2}},
            {"id": 1, "parent": 0, "start": 2, "end": 3},
        ]
    )
    con.register("new", spans)
    con.execute("INSERT INTO spans SELECT * FROM new")
    con.close()


def test_version_1_store_is_read_and_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _version_1_store(path)
    with DuckDBStore(path, read_only=True) as store:  # read as it is
        before = store.read()
    assert before.num_rows == 2
    with DuckDBStore(path) as store:  # opened for writing: upgraded in place
        assert store.read().equals(before)
        assert store.append(make_spans([{"id": 7, "start": 1, "end": 2}])) == 1
        assert store.count() == 3
    con = duckdb.connect(str(path), read_only=True)
    version = con.sql("SELECT value FROM tracelens_meta WHERE key = 'schema_version'").fetchall()
    assert version == [(str(STORE_VERSION),)]
    got = con.sql("SELECT attributes['a'] FROM spans ORDER BY span_id").fetchall()
    assert got == [("1",), (None,), (None,)]
    con.close()


def test_null_and_empty_attributes_round_trip(tmp_path: Path) -> None:
    t = make_spans([{"id": i, "start": 1, "end": 2} for i in range(3)])
    i = t.schema.get_field_index("attributes")
    attrs = pa.array([None, [], [("k", "v")]], SPAN_SCHEMA.field("attributes").type)
    t = t.set_column(i, "attributes", attrs)
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        store.append(t.slice(1))  # a sliced table: offsets do not start at zero
        store.append(t.slice(0, 1))
        back = store.read().sort_by("span_id")
    assert back.column("attributes").to_pylist() == [None, [], [("k", "v")]]


def test_append_new_falls_back_to_dedup_on_stored_ids(tmp_path: Path) -> None:
    """The collector's plain INSERT meets a re-sent batch: nothing fails, nothing doubles."""
    t = make_spans([{"id": i, "start": 1, "end": 2, "attributes": {"a": "b"}} for i in range(3)])
    more = make_spans([{"id": i, "start": 1, "end": 2} for i in range(2, 5)])
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        assert store.append_new(t) == 3
        assert store.append_new(t) == 0
        assert store.append_new(more) == 2
        assert store.count() == 5
