"""``spool_files``: the same spans as ``read_files``, a chunk at a time, all or nothing per file."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FIXTURES

from tracelens.errors import InputError
from tracelens.ingest import _common, read_files, spool_files

FILES = sorted(
    p
    for p in FIXTURES.rglob("*")
    if p.suffix in (".json", ".jsonl")
    and not p.name.endswith(".expected.json")
    and p.name != "labels.json"  # the verdict corpus's labels, not traces
)


def _line(first: int, count: int) -> str:
    spans = [
        {
            "traceId": f"{n // 4:032x}",
            "spanId": f"{n + 1:016x}",
            "name": f"op-{n}",
            "startTimeUnixNano": str(1_000 + n),
            "endTimeUnixNano": str(2_000 + n),
        }
        for n in range(first, first + count)
    ]
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})


def test_spooled_fixtures_equal_read_files() -> None:
    expected = read_files(FILES)
    with spool_files(FILES) as spooled:
        tables = list(spooled.tables())
    got = pa.concat_tables(tables)
    assert got.equals(expected.spans)
    assert spooled.num_rows == expected.spans.num_rows
    assert spooled.traces == len(set(expected.spans["trace_id"].to_pylist()))
    assert spooled.warnings == expected.warnings
    assert spooled.errors == []


def test_chunks_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """30 records of 10 spans with chunks of 25 rows: the spool hands on chunks of at most 25 +
    one record (a record is never split), and every span arrives once, in order."""
    monkeypatch.setattr(_common, "CHUNK_ROWS", 25)
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join(_line(10 * i, 10) for i in range(30)) + "\n")
    with spool_files([path]) as spooled:
        sizes = [t.num_rows for t in spooled.tables()]
        names = [n for t in spooled.tables() for n in t["name"].to_pylist()]
    assert sum(sizes) == 300 and max(sizes) <= 25 + 10 and len(sizes) >= 300 // 35
    assert names == [f"op-{n}" for n in range(300)]
    assert spooled.traces == 75


def test_a_bad_file_spools_nothing(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(_line(0, 8) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_line(100, 8) + "\n" + _line(200, 8) + "\n{not json\n")
    with pytest.raises(InputError) as raised, spool_files([good, bad]):
        pass
    assert str(raised.value).startswith(f"{bad}:3: invalid JSON Lines record")
    with spool_files([bad, good], keep_going=True) as spooled:
        names = [n for t in spooled.tables() for n in t["name"].to_pylist()]
    assert names == [f"op-{n}" for n in range(8)]
    assert [e.source for e in spooled.errors] == [str(bad)]
    assert spooled.num_rows == 8 and spooled.traces == 2
