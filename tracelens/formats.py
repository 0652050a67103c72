"""The input formats, one table, with how each is recognised.

``INPUT_FORMATS``: the trace file formats.  Each has its name (``--input-format``, detection's
answer), whether it is a JSON document (told apart by its shape) or binary (told by its first
bytes, its ``magic`` here), how it is recognised in words (the "tried ..." of an unrecognised
file) and its decoder module in ``tracelens.ingest``, which ``ingest/detect.py`` loads: a JSON
format's has ``looks_like(doc)`` and ``decode(doc, batch, warnings)``, a binary one's
``decode_bytes(data, source)``.

``CONTAINERS``: what else a path given to tracelens can be, each with its rule here too: a
gzip-compressed trace file (``ingest/``), a DuckDB store (``store/``), a Parquet span set
(``parquet.py``).  Their modules ask the table (``GZIP.magic``, ``DUCKDB_STORE.matches``,
``PARQUET_SPAN_SET.matches``), so no rule is spelled twice.

Pure data and the standard library, so the CLI's choices read it without loading an importer.
Adding a format: ``docs/architecture.md``, "How to add".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Magic:
    """A file's magic bytes: ``data`` at byte ``offset``."""

    data: bytes
    offset: int = 0

    @property
    def size(self) -> int:
        """How many leading bytes of a file to read to test it."""
        return self.offset + len(self.data)

    def matches(self, head: bytes) -> bool:
        """Whether ``head`` (a file's first bytes, at least ``size`` of them) starts so."""
        return head[self.offset : self.size] == self.data

    def in_file(self, path: str | os.PathLike[str]) -> bool:
        """Whether the file at ``path`` starts so (False when it cannot be read)."""
        try:
            with open(path, "rb") as file:
                return self.matches(file.read(self.size))
        except OSError:
            return False

    def words(self) -> str:
        """The rule in words, for messages: ``first byte 0x0a``."""
        where = "first byte" if len(self.data) == 1 else "first bytes"
        if self.offset:
            where = f"bytes {self.offset}-{self.size - 1}"
        return f"{where} 0x{self.data.hex()}"


@dataclass(frozen=True)
class InputFormat:
    name: str
    json: bool  # a JSON document (JSON or JSON Lines), else binary
    recognised_by: str  # what detection looks for, in words
    decoder: str  # its module in tracelens.ingest
    label: str  # its name in messages
    magic: Magic | None = None  # a binary format's first bytes: how detection tells it


_PROTO: Final = Magic(b"\x0a")  # field 1, length-delimited: resource_spans

INPUT_FORMATS: Final = (
    InputFormat(
        "otlp-json",
        True,
        "{resourceSpans} or a Jaeger v3 {result: {resourceSpans}}",
        "otlp_json",
        "OTLP JSON",
    ),
    InputFormat(
        "otlp-proto", False, f"binary, {_PROTO.words()}", "otlp_proto", "OTLP protobuf", _PROTO
    ),
    InputFormat(
        "jaeger", True, "{data: [...]} or {traceID, spans, processes}", "jaeger", "Jaeger JSON"
    ),
    InputFormat("zipkin", True, "a JSON array of {traceId, id, ...}", "zipkin", "Zipkin v2 JSON"),
)
NAMES: Final = tuple(f.name for f in INPUT_FORMATS)


@dataclass(frozen=True)
class Container:
    """What holds spans other than a trace file read as it is: a file told by its ``magic``,
    or a directory by the ``marker`` file in it."""

    name: str
    what: str  # in words
    magic: Magic | None = None
    marker: str = ""

    def matches(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` is one (its content says so, never its name)."""
        if self.magic is not None:
            return self.magic.in_file(path)
        return os.path.isfile(os.path.join(path, self.marker))


GZIP_MAGIC: Final = Magic(b"\x1f\x8b")
GZIP: Final = Container("gzip", "a gzip-compressed trace file", GZIP_MAGIC)
DUCKDB_STORE: Final = Container("duckdb", "a DuckDB store", Magic(b"DUCK", 8))
PARQUET_SPAN_SET: Final = Container(
    "parquet", "a Parquet span set (tracelens export --parquet)", marker="_tracelens_layout.json"
)
CONTAINERS: Final = (GZIP, DUCKDB_STORE, PARQUET_SPAN_SET)


def container(path: str | os.PathLike[str]) -> Container | None:
    """What ``path`` is, the first of ``CONTAINERS`` that matches, or None (a trace file as it
    is, or nothing readable)."""
    return next((c for c in CONTAINERS if c.matches(path)), None)


def tried() -> str:
    """What detection tried, for the error of an unrecognised file: the JSON shapes in the
    order they are tried, then the binary formats."""
    order = [f for f in INPUT_FORMATS if f.json] + [f for f in INPUT_FORMATS if not f.json]
    parts = [f"{f.name} ({f.recognised_by})" for f in order]
    return "tried " + ", ".join(parts[:-1]) + " and " + parts[-1]


__all__ = [
    "CONTAINERS",
    "DUCKDB_STORE",
    "GZIP",
    "GZIP_MAGIC",
    "INPUT_FORMATS",
    "NAMES",
    "PARQUET_SPAN_SET",
    "Container",
    "InputFormat",
    "Magic",
    "container",
    "tried",
]
