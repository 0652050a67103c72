"""The input formats, one table: each format's name (``--input-format``, detection's answer),
whether it is a JSON document (told apart by its shape) or binary (by its first byte), how it
is recognised (the "tried ..." of an unrecognised file) and, for a JSON format, its decoder
module in ``tracelens.ingest`` (``looks_like(doc)``, ``decode(doc, batch, warnings)``, loaded by
``ingest/detect.py``).  Pure data, so the CLI's choices read it without loading an importer.
Adding a format: ``docs/architecture.md``, "How to add".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class InputFormat:
    name: str
    json: bool  # a JSON document (JSON or JSON Lines), else binary
    recognised_by: str  # what detection looks for, in words
    decoder: str | None = None  # a JSON format's module in tracelens.ingest


INPUT_FORMATS: Final = (
    InputFormat(
        "otlp-json",
        True,
        "{resourceSpans} or a Jaeger v3 {result: {resourceSpans}}",
        "otlp_json",
    ),
    InputFormat("otlp-proto", False, "binary, first byte 0x0a"),  # ingest/files.py reads it
    InputFormat("jaeger", True, "{data: [...]} or {traceID, spans, processes}", "jaeger"),
    InputFormat("zipkin", True, "a JSON array of {traceId, id, ...}", "zipkin"),
)
NAMES: Final = tuple(f.name for f in INPUT_FORMATS)


def tried() -> str:
    """What detection tried, for the error of an unrecognised file: the JSON shapes in the
    order they are tried, then the binary formats."""
    order = [f for f in INPUT_FORMATS if f.json] + [f for f in INPUT_FORMATS if not f.json]
    parts = [f"{f.name} ({f.recognised_by})" for f in order]
    return "tried " + ", ".join(parts[:-1]) + " and " + parts[-1]


__all__ = ["INPUT_FORMATS", "NAMES", "InputFormat", "tried"]
