"""The formats' table (``tracelens/formats.py``) is the one place each input is recognised: the
binary formats' magic bytes, gzip, a DuckDB store and a Parquet span set are told by its
entries, on real files, and the magic bytes are the ones their own specifications give.  A
binary format added to the table with its module (and nothing else) is detected, read and
named in the "tried" message; ``docs/architecture.md``'s "How to add" names the table's fields.

The CLI's choices, the JSON shapes and README's ``--input-format`` line against the table:
``tests/test_ingest_cli.py``.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FIXTURES, ROOT
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tracelens import formats
from tracelens.errors import InputError
from tracelens.formats import DUCKDB_STORE, GZIP, PARQUET_SPAN_SET, InputFormat, Magic
from tracelens.ingest import detect, read_bytes, read_files
from tracelens.parquet import is_span_set, write_parquet
from tracelens.store import is_store, open_store

OTLP = FIXTURES / "otlp/opentelemetry-proto_examples_trace.json"
ZIPKIN = FIXTURES / "zipkin/yelp.json"


def _proto_bytes() -> bytes:
    """The OTLP example as a real protobuf ExportTraceServiceRequest."""
    request = json_format.Parse(OTLP.read_text(encoding="utf-8"), ExportTraceServiceRequest())
    return request.SerializeToString()


def test_the_magic_bytes_are_their_specifications() -> None:
    """Independent truths: a protobuf message starting with field 1 (``resource_spans``),
    wire type 2 (length-delimited) begins with the tag byte ``1 << 3 | 2``; gzip's ID1 ID2 are
    31, 139 (RFC 1952, 2.3.1); a DuckDB database file carries ``DUCK`` at byte 8 (what
    DuckDB writes, checked on a real store below)."""
    proto = next(f for f in formats.INPUT_FORMATS if f.name == "otlp-proto")
    assert proto.magic == Magic(bytes([1 << 3 | 2]))
    assert _proto_bytes()[:1] == bytes([1 << 3 | 2])
    assert formats.GZIP_MAGIC == Magic(bytes([31, 139])) == GZIP.magic
    assert gzip.compress(b"{}")[:2] == bytes([31, 139])
    assert DUCKDB_STORE.magic == Magic(b"DUCK", 8)
    assert proto.recognised_by == "binary, first byte 0x0a"  # the "tried ..." words
    assert DUCKDB_STORE.magic.words() == "bytes 8-11 0x4455434b"


def test_real_files_are_told_by_the_table(tmp_path: Path) -> None:
    proto = tmp_path / "spans.binpb"
    proto.write_bytes(_proto_bytes())
    gz = tmp_path / "spans.json.gz"
    gz.write_bytes(gzip.compress(ZIPKIN.read_bytes()))
    store = tmp_path / "spans.duckdb"
    with open_store(str(store)) as s:
        s.append(read_files([ZIPKIN]).spans)
    span_set = tmp_path / "set"
    write_parquet(read_files([ZIPKIN]).spans, span_set)

    # Binary trace formats, from the first bytes: the protobuf file, and no JSON file.
    assert detect.binary_format(proto.read_bytes()) == "otlp-proto"
    assert detect.binary_format(ZIPKIN.read_bytes()) is None
    assert detect.binary_format(OTLP.read_bytes()) is None
    # What a path is: each container by its rule, a plain trace file none.
    assert formats.container(gz) is GZIP
    assert formats.container(store) is DUCKDB_STORE
    assert formats.container(span_set) is PARQUET_SPAN_SET
    for plain in (proto, ZIPKIN, OTLP, tmp_path / "missing.json", tmp_path):
        assert formats.container(plain) is None, plain
    # The modules that read them ask the same entries.
    assert detect.is_gzip(gz.read_bytes()[: detect.GZIP_HEAD])
    assert not detect.is_gzip(proto.read_bytes()[: detect.GZIP_HEAD])
    assert is_store(store) and not is_store(gz) and not is_store(span_set)
    assert is_span_set(span_set) and not is_span_set(store) and not is_span_set(tmp_path)
    # And each reads: the protobuf and the gzip file detected, not named.
    assert read_files([proto]).spans.num_rows == read_files([OTLP]).spans.num_rows > 0
    assert read_files([gz]).spans.equals(read_files([ZIPKIN]).spans)


_DUMMY = '''
"""A test's binary format: the magic TLDUMMY1, then an OTLP JSON document."""
from tracelens.ingest import read_bytes

MAGIC = b"TLDUMMY1"


def decode_bytes(data, source):
    return read_bytes(data[len(MAGIC):], source, "otlp-json")
'''


@pytest.fixture
def dummy_format(tmp_path: Path) -> Iterator[str]:
    """A binary format added as the "How to add" section says: its module, one table entry."""
    name = "tracelens.ingest.dummy_binary"
    path = tmp_path / "dummy_binary.py"
    path.write_text(_DUMMY, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    table = formats.INPUT_FORMATS
    entry = InputFormat(
        "dummy", False, "binary, TLDUMMY1", "dummy_binary", "dummy", Magic(b"TLDUMMY1")
    )
    formats.INPUT_FORMATS = (*table, entry)  # type: ignore[misc]
    importlib.reload(detect)
    try:
        yield "dummy"
    finally:
        formats.INPUT_FORMATS = table  # type: ignore[misc]
        importlib.reload(detect)
        del sys.modules[name]


def test_a_binary_format_is_one_entry_and_its_module(dummy_format: str) -> None:
    plain = OTLP.read_bytes()
    want = read_bytes(plain, "plain")
    data = b"TLDUMMY1" + plain
    assert dummy_format in detect.FORMATS
    assert detect.binary_format(data) == dummy_format
    got = read_bytes(data, "dummy.bin")  # detected by its magic
    assert isinstance(got, pa.Table) and got.equals(want)
    assert read_bytes(data, "dummy.bin", dummy_format).equals(want)  # named
    with pytest.raises(InputError) as err:
        read_bytes(b"\x00\x01 nothing known", "odd.bin")
    assert "dummy (binary, TLDUMMY1)" in err.value.message


def test_the_table_is_back_after_the_dummy() -> None:
    assert detect.FORMATS == ("otlp-json", "otlp-proto", "jaeger", "zipkin")
    assert detect.binary_format(b"TLDUMMY1{}") is None


def test_how_to_add_names_the_tables_fields() -> None:
    """The "How to add / An input format" section of ``docs/architecture.md`` describes the
    table as it is: both tables by name and every field of their entries."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("### An input format", 1)[1].split("\n### ", 1)[0]
    assert "`INPUT_FORMATS`" in section and "`CONTAINERS`" in section
    words = {
        "name": "name",
        "json": "JSON or binary",
        "recognised_by": "what detection looks for in words",
        "decoder": "the decoder module",
        "label": "its name in messages",
        "magic": "`magic`",
    }
    assert {f.name for f in dataclasses.fields(InputFormat)} == set(words)
    for field, text in words.items():
        assert text in " ".join(section.split()), field
    container = {"name", "what", "magic", "marker"}
    assert {f.name for f in dataclasses.fields(formats.Container)} == container
    assert "magic bytes of a file" in section and "marker file of a directory" in section
