"""``decode_files`` and the import path: the same spans as ``read_files``, a chunk at a time,
into one store transaction, all or nothing."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FIXTURES

from tracelens.api import import_files
from tracelens.errors import InputError
from tracelens.ingest import Decoded, _common, decode_files, read_files, stream, streamable
from tracelens.store import DuckDBStore

FILES = sorted(
    p
    for p in FIXTURES.rglob("*")
    if p.suffix in (".json", ".jsonl")
    and not p.name.endswith(".expected.json")
    and p.name != "labels.json"  # the verdict corpus's labels, not traces
)


def _line(first: int, count: int, ids: int | None = None) -> str:
    """A record of ``count`` spans, names op-first...; span ids from ``ids`` (default first)."""
    base = first if ids is None else ids
    spans = [
        {
            "traceId": f"{(base + k) // 4:032x}",
            "spanId": f"{base + k + 1:016x}",
            "name": f"op-{first + k}",
            "startTimeUnixNano": str(1_000 + first + k),
            "endTimeUnixNano": str(2_000 + first + k),
        }
        for k in range(count)
    ]
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def _decoders() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tracelens-decode"]


def test_decoded_fixtures_equal_read_files() -> None:
    expected = read_files(FILES)
    decoded = Decoded()
    got = pa.concat_tables(list(decode_files(FILES, decoded)))
    assert got.equals(expected.spans)
    assert decoded.num_rows == expected.spans.num_rows
    assert decoded.trace_ids == set(expected.spans["trace_id"].to_pylist())
    assert decoded.warnings == expected.warnings
    assert _decoders() == []


def test_chunks_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """30 records of 10 spans with chunks of 25 rows: chunks of at most 25 + one record (a record
    is never split), and every span arrives once, in order."""
    monkeypatch.setattr(_common, "CHUNK_ROWS", 25)
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join(_line(10 * i, 10) for i in range(30)) + "\n")
    decoded = Decoded()
    tables = list(decode_files([path], decoded))
    sizes = [t.num_rows for t in tables]
    assert sum(sizes) == 300 and max(sizes) <= 25 + 10 and len(sizes) >= 300 // 35
    assert [n for t in tables for n in t["name"].to_pylist()] == [f"op-{n}" for n in range(300)]
    assert decoded.num_rows == 300 and len(decoded.trace_ids) == 75


def test_a_bad_file_raises_after_the_chunks_before_it(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(_line(0, 8) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_line(100, 8) + "\n" + _line(200, 8) + "\n{not json\n")
    decoded = Decoded()
    seen: list[str] = []
    with pytest.raises(InputError) as raised:
        for table in decode_files([good, bad], decoded):
            seen.extend(table["name"].to_pylist())
    assert str(raised.value).startswith(f"{bad}:3: invalid JSON Lines record")
    assert seen[:8] == [f"op-{n}" for n in range(8)]
    assert _decoders() == []


def test_a_consumer_that_stops_early_stops_the_decoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_common, "CHUNK_ROWS", 10)
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join(_line(10 * i, 10) for i in range(50)) + "\n")
    chunks = decode_files([path], Decoded())
    assert next(chunks).num_rows == 10
    chunks.close()
    assert _decoders() == []


def test_import_of_a_bad_file_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bad record comes after chunks were inserted: the transaction is rolled back.  With
    keep_going, the good file is stored and the bad one listed."""
    monkeypatch.setattr(_common, "CHUNK_ROWS", 10)
    good = tmp_path / "good.jsonl"
    good.write_text(_line(0, 8) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(_line(100 + 10 * i, 10) for i in range(5)) + "\n{not json\n")
    db = tmp_path / "s.duckdb"
    with pytest.raises(InputError):
        import_files([good, bad], db=str(db))
    assert not db.exists()  # it was made for the import, and nothing was stored
    with DuckDBStore(db) as store:
        store.append(read_files([good]).spans)
    with pytest.raises(InputError):
        import_files([bad], db=str(db))
    with DuckDBStore(db) as store:
        assert store.count() == 8
    db.unlink()
    done = import_files([bad, good], db=str(db), keep_going=True)
    assert (done.added, done.spans, done.traces) == (8, 8, 2)
    assert [e.source for e in done.errors] == [str(bad)]
    with DuckDBStore(db) as store:
        assert sorted(store.read(["name"])["name"].to_pylist()) == sorted(
            f"op-{n}" for n in range(8)
        )


def test_a_large_import_goes_through_the_spool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``STREAM_BYTES`` the files are spooled first: the same spans stored, a bad file
    still stores nothing, repeated spans are stored once."""
    monkeypatch.setattr(stream, "STREAM_BYTES", 0)
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join([_line(0, 10), _line(10, 10), _line(20, 10, ids=0)]) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_line(100, 8) + "\n{not json\n")
    assert not streamable([good])
    db = tmp_path / "s.duckdb"
    with pytest.raises(InputError):
        import_files([good, bad], db=str(db))
    assert not db.exists()
    done = import_files([good, bad], db=str(db), keep_going=True)
    assert (done.spans, done.added, done.traces, len(done.errors)) == (30, 20, 5, 1)
    with DuckDBStore(db) as store:
        names = sorted(store.read(["name"])["name"].to_pylist(), key=lambda n: int(n[3:]))
    assert names == [f"op-{n}" for n in range(20)]
    assert import_files([good], db=str(db)).added == 0


def test_repeated_spans_in_a_fresh_store_are_stored_once(tmp_path: Path) -> None:
    """Into an empty store spans go in without a look-up; a span repeated in the file (here the
    third record repeats the first's ids, with other names) makes the import run again with
    one: 20 spans stored, the first of each id kept, the counts those of one decode."""
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join([_line(0, 10), _line(10, 10), _line(20, 10, ids=0)]) + "\n")
    db = tmp_path / "s.duckdb"
    done = import_files([path], db=str(db))
    assert (done.spans, done.added, done.traces) == (30, 20, 5)
    assert _decoders() == []  # the first attempt's decoder stopped
    with DuckDBStore(db) as store:
        names = sorted(store.read(["name"])["name"].to_pylist(), key=lambda n: int(n[3:]))
    assert names == [f"op-{n}" for n in range(20)]
    again = import_files([path], db=str(db))
    assert (again.spans, again.added) == (30, 0)


def test_an_import_does_not_load_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas for ``pa.array``/``pa.scalar`` of Python values and for
    ``Schema.empty_table``: ~0.4 s of every ``tracelens import`` of a small file, none of it
    needed.  The three JSON formats, in a fresh process."""
    import subprocess
    import sys

    files = [
        FIXTURES / "otlp" / "opentelemetry-proto_examples_trace.json",
        FIXTURES / "jaeger" / "genaiTestTrace.json",
        FIXTURES / "zipkin" / "yelp.json",
    ]
    code = (
        "import sys\nfrom tracelens.api import import_files\n"
        f"done = import_files({[str(f) for f in files]!r}, db={str(tmp_path / 's.duckdb')!r})\n"
        "assert done.added > 0, done\nprint('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
