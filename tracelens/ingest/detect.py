"""Which format a document is in, told from its content (never from the file name).

Bytes first: gzip by its magic; JSON when the first non-blank byte is ``{`` or ``[``; OTLP
protobuf when the first byte is ``0x0a`` (field 1, length-delimited: ``resource_spans``, how every
non-empty ExportTraceServiceRequest and TracesData begins).  A parsed JSON document is then told
apart by its shape: ``resourceSpans`` (OTLP, also inside Jaeger v3's ``result``), ``data`` or
``traceID`` + ``spans`` (Jaeger), an array of ``{traceId, id}`` (Zipkin v2).  The formats are
``tracelens.formats``' table; ``JSON_CODECS`` loads the decoder module it names for each JSON
one.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Final

from tracelens.formats import INPUT_FORMATS, NAMES, tried

OTLP_JSON: Final = "otlp-json"
OTLP_PROTO: Final = "otlp-proto"
JAEGER: Final = "jaeger"
ZIPKIN: Final = "zipkin"
FORMATS: Final = NAMES
JSON_FORMATS: Final = tuple(f.name for f in INPUT_FORMATS if f.json)

# Each JSON format's module: ``looks_like(doc)`` (its shape) and ``decode(doc, batch, warnings)``.
JSON_CODECS: Final[dict[str, ModuleType]] = {
    f.name: importlib.import_module(f"{__package__}.{f.decoder}")
    for f in INPUT_FORMATS
    if f.json and f.decoder is not None
}

GZIP_MAGIC: Final = b"\x1f\x8b"
_PROTO_FIRST_BYTE: Final = 0x0A
_BOM: Final = b"\xef\xbb\xbf"

TRIED: Final = tried()


def check_format(input_format: str | None) -> str | None:
    if input_format is not None and input_format not in FORMATS:
        raise ValueError(f"unknown input format {input_format!r}; choose from {', '.join(FORMATS)}")
    return input_format


def is_gzip(head: bytes) -> bool:
    return head[:2] == GZIP_MAGIC


def starts_json(line: bytes) -> bool:
    """Whether a (first non-blank) line opens a JSON object or array."""
    stripped = line.lstrip()
    if stripped.startswith(_BOM):
        stripped = stripped[len(_BOM) :].lstrip()
    return stripped[:1] in (b"{", b"[")


def may_be_proto(data: bytes) -> bool:
    return bool(data) and data[0] == _PROTO_FIRST_BYTE


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
