"""Which format a document is in, told from its content (never from the file name).

Bytes first: gzip by its magic; JSON when the first non-blank byte is ``{`` or ``[``; a binary
format by its magic (OTLP protobuf: first byte ``0x0a``, field 1, length-delimited:
``resource_spans``, how every non-empty ExportTraceServiceRequest and TracesData begins).  A
parsed JSON document is then told apart by its shape: ``resourceSpans`` (OTLP, also inside
Jaeger v3's ``result``), ``data`` or ``traceID`` + ``spans`` (Jaeger), an array of
``{traceId, id}`` (Zipkin v2).  Every rule is ``tracelens.formats``' table: the magic bytes are
its entries', each shape its decoder module's ``looks_like`` (``JSON_CODECS`` loads the module
the table names for each JSON format; ``binary_codec`` a binary format's, when one is read).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Final

from tracelens.formats import GZIP_MAGIC, INPUT_FORMATS, InputFormat, tried

OTLP_JSON: Final = "otlp-json"
OTLP_PROTO: Final = "otlp-proto"
JAEGER: Final = "jaeger"
ZIPKIN: Final = "zipkin"
FORMATS: Final = tuple(f.name for f in INPUT_FORMATS)
JSON_FORMATS: Final = tuple(f.name for f in INPUT_FORMATS if f.json)
BINARY_FORMATS: Final = tuple(f.name for f in INPUT_FORMATS if not f.json)
_BINARY: Final[dict[str, InputFormat]] = {f.name: f for f in INPUT_FORMATS if not f.json}

# Each JSON format's module: ``looks_like(doc)`` (its shape) and ``decode(doc, batch, warnings)``.
JSON_CODECS: Final[dict[str, ModuleType]] = {
    f.name: importlib.import_module(f"{__package__}.{f.decoder}") for f in INPUT_FORMATS if f.json
}

GZIP_HEAD: Final = GZIP_MAGIC.size  # the bytes ``is_gzip`` reads
_BOM: Final = b"\xef\xbb\xbf"

TRIED: Final = tried()


def check_format(input_format: str | None) -> str | None:
    if input_format is not None and input_format not in FORMATS:
        raise ValueError(f"unknown input format {input_format!r}; choose from {', '.join(FORMATS)}")
    return input_format


def is_gzip(head: bytes) -> bool:
    return GZIP_MAGIC.matches(head)


def starts_json(line: bytes) -> bool:
    """Whether a (first non-blank) line opens a JSON object or array."""
    stripped = line.lstrip()
    if stripped.startswith(_BOM):
        stripped = stripped[len(_BOM) :].lstrip()
    return stripped[:1] in (b"{", b"[")


def binary_format(data: bytes) -> str | None:
    """The binary format whose magic ``data`` starts with, or None."""
    for f in _BINARY.values():
        if f.magic is not None and f.magic.matches(data):
            return f.name
    return None


def binary_codec(name: str) -> ModuleType:
    """A binary format's decoder module (``decode_bytes(data, source)``), loaded when a file in
    it is read (OTLP protobuf brings the protobuf runtime)."""
    return importlib.import_module(f"{__package__}.{_BINARY[name].decoder}")


def label(name: str) -> str:
    """A format's name in messages (``OTLP protobuf``)."""
    return next(f.label for f in INPUT_FORMATS if f.name == name)


def json_format(doc: Any) -> str | None:
    """The format a parsed JSON document is in, or None."""
    for name in JSON_FORMATS:
        if JSON_CODECS[name].looks_like(doc):
            return name
    return None


def describe(doc: Any) -> str:
    """A few words on an unrecognised JSON document, for the error message."""
    if type(doc) is dict:
        keys = ", ".join(list(doc)[:8]) or "none"
        return f"a JSON object with keys: {keys}"
    if type(doc) is list:
        return f"a JSON array of {type(doc[0]).__name__}" if doc else "an empty JSON array"
    return f"a JSON {type(doc).__name__}"
