"""OTLP ``AnyValue`` messages as the Python values the JSON importer produces for them.

Every value the generated-class decoder reads goes through here, and of the compiled decoder's,
those of resources, scopes, events and links and every attribute value it leaves aside (arrays,
kvlists, bytes, odd encodings), so both decoders turn a value into the same Python value.
Nesting is bounded by upb's parse depth limit (100), so recursion here is bounded too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tracelens.schema import json_scalar


def any_value(value: AnyValue) -> Any:
    """The typed value: str, bool, int, float, bytes, list, dict; None for an empty AnyValue."""
    which = value.WhichOneof("value")
    if which is None or which == "string_value_strindex":
        return None
    if which == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return key_values(value.kvlist_value.values)
    return getattr(value, which)


def key_values(items: Iterable[KeyValue]) -> dict[str, Any]:
    """A ``KeyValue`` list as a dict (a repeated key keeps its first place and its last value)."""
    return {kv.key: any_value(kv.value) for kv in items}


def json_text(value: Any) -> str:
    """JSON text of a non-string attribute value, exactly as ``SpanColumns`` writes it."""
    return json_scalar(value)
