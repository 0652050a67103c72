"""Trace files in, one span table out.

Every importer produces ``tracelens.schema.SPAN_SCHEMA``; nothing downstream knows which format a
span came from.  Formats are told from content (see ``detect``): OTLP JSON (also JSON Lines and
Jaeger's /api/v3 envelope), OTLP protobuf, Jaeger JSON, Zipkin v2 JSON, any of them gzip-compressed.
``decode_files`` hands the same on a chunk at a time as it decodes (``spool_files``: through a
temporary on-disk spool), for imports of any size.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from tracelens.errors import InputError
from tracelens.ingest.detect import FORMATS, check_format
from tracelens.ingest.files import read_path, read_stream
from tracelens.ingest.spool import Spooled, spool_files
from tracelens.ingest.stream import STREAM_BYTES, Decoded, decode_files, streamable
from tracelens.schema import empty_spans

__all__ = [
    "FORMATS",
    "STREAM_BYTES",
    "Decoded",
    "IngestResult",
    "InputError",
    "Spooled",
    "decode_files",
    "read_bytes",
    "read_files",
    "spool_files",
    "streamable",
]


@dataclass
class IngestResult:
    """The spans of every file that could be read, what was odd about them, and what failed."""

    spans: pa.Table
    warnings: list[str] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)


def read_files(
    paths: Sequence[str | os.PathLike[str]],
    *,
    input_format: str | None = None,
    keep_going: bool = False,
) -> IngestResult:
    """Read trace files into one span table.

    ``input_format`` (one of ``FORMATS``) skips detection.  The first bad file raises
    ``InputError``, unless ``keep_going``: then bad files are listed in ``errors`` and the others
    are read.
    """
    check_format(input_format)
    tables: list[pa.Table] = []
    warnings: list[str] = []
    errors: list[InputError] = []
    for path in paths:
        file_warnings: list[str] = []
        try:
            tables.append(read_path(path, input_format, file_warnings))
        except InputError as exc:
            if not keep_going:
                raise
            errors.append(exc)
            continue
        warnings.extend(file_warnings)
    spans = pa.concat_tables(tables) if tables else empty_spans()
    return IngestResult(spans=spans, warnings=warnings, errors=errors)


def read_bytes(
    data: bytes,
    source: str,
    input_format: str | None = None,
    *,
    warnings: list[str] | None = None,
) -> pa.Table:
    """The spans of one document (or JSON Lines, or gzip of either) held in memory.

    ``source`` names it in errors; warnings are appended to ``warnings`` when given.
    """
    sink: list[str] = [] if warnings is None else warnings
    return read_stream(io.BytesIO(data), source, input_format, sink)
