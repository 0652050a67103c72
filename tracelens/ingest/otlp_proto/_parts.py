"""What the two decoders of this package share, so that each rule exists once.

A resource, scope, status, event or link becomes the same values whichever decoder read the span;
a span is invalid for the same reasons, reported in the same order; the values repeated on every
span of a resource or scope may take the same number of bytes; a request may hold the same number
of entries without spans.  The compiled decoder hands resources, scopes, events, links and unusual
statuses over as bytes (``*_from_bytes``: resources and scopes repeat across requests, so their
decoded form is cached by their bytes); the generated-class decoder has them parsed already.
The OTLP definitions are opentelemetry/proto/trace/v1/trace.proto; ``docs/otlp-proto.md`` says
what is accepted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import numpy as np
import pyarrow as pa
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from tracelens_instrumentation import attributes as A

from tracelens.ingest.otlp_json import UNKNOWN_SERVICE
from tracelens.ingest.otlp_proto._anyvalue import key_values
from tracelens.schema import json_value

INT64_MAX: Final = 2**63 - 1
MAX_EMPTY_ENTRIES: Final = 10_000
"""ResourceSpans and ScopeSpans entries without a span a request may hold (``_native.c`` has the
same limit): they cost work but carry nothing, and 60 MiB of them took 96 s to decode."""

# Why a span is invalid, as bits (``_native.c`` sets the first six: its PB_* bits).
NO_TRACE_ID: Final = 1
NO_SPAN_ID: Final = 2
BAD_KIND: Final = 4
BAD_START: Final = 8
BAD_END: Final = 16
BAD_STATUS: Final = 32
BAD_LINK: Final = 64
PROBLEMS: Final = (  # in the order a span's problems are reported
    (NO_TRACE_ID, "traceId: empty"),
    (NO_SPAN_ID, "spanId: empty"),
    (BAD_KIND, "kind: not a span kind"),
    (BAD_START, "startTimeUnixNano: beyond int64"),
    (BAD_END, "endTimeUnixNano: beyond int64"),
    (BAD_STATUS, "status.code: not a status code"),
    (BAD_LINK, "links: a link without traceId or spanId"),
)


@dataclass
class Problems:
    """Invalid spans: a mask, and the first invalid span with its first problem."""

    mask: np.ndarray
    first: str | None = None


@dataclass
class Decoded:
    """A request's span table and its invalid spans; from the compiled decoder also, per span,
    the ``check_spans`` failures (bit ``i`` set when check ``i`` fails), so the collector need not
    run those checks again."""

    table: pa.Table
    problems: Problems
    checks: np.ndarray | None = None


@dataclass(frozen=True)
class Group:
    """One ``ScopeSpans`` entry: where it is, and how many spans it holds."""

    resource: int
    scope: int
    count: int


def locate(groups: Sequence[Group], row: int) -> str:
    """Where span ``row`` (counted over the whole request) is, as the JSON importer words it."""
    for g in groups:
        if row < g.count:
            return f"resourceSpans[{g.resource}].scopeSpans[{g.scope}].spans[{row}]"
        row -= g.count
    raise IndexError(row)


def problems(flags: np.ndarray, groups: Sequence[Group]) -> Problems:
    """``Problems`` from each span's problem bits: the first invalid span, its lowest bit."""
    bad = flags != 0
    if not bad.any():
        return Problems(bad)
    row = int(np.argmax(bad))
    why = next(message for bit, message in PROBLEMS if int(flags[row]) & bit)
    return Problems(bad, f"{locate(groups, row)}: {why}")


def count_empty(empty: int) -> None:
    if empty > MAX_EMPTY_ENTRIES:
        raise ValueError(
            f"more than {MAX_EMPTY_ENTRIES} ResourceSpans or ScopeSpans entries without spans"
        )


def check_repeated(lengths: Sequence[int], counts: Sequence[int], limit: int) -> None:
    """``ValueError`` when values of these lengths, repeated ``counts`` times, exceed ``limit``."""
    total = int(np.dot(np.asarray(lengths, np.int64), np.asarray(counts, np.int64)))
    if total > limit:
        raise ValueError(
            f"resource or scope values repeated on each span would take {total >> 20} MiB "
            f"(more than {limit >> 20} MiB): resource attributes are too large for this many spans"
        )


def check_groups(values: dict[str, list[str | None]], counts: Sequence[int], limit: int) -> None:
    """Each of ``service``, ``resource``, ``scope_name``, ``scope_version`` (one value per group)
    repeated on every span of its group must fit in ``limit`` bytes (see ``repeated_limit``)."""
    for column in values.values():
        check_repeated([len(v) if v else 0 for v in column], counts, limit)


def per_group(values: list[str | None], counts: Sequence[int]) -> pa.Array:
    """One value per span from one value per group."""
    n = int(sum(counts))
    if len(set(values)) == 1:
        return pa.repeat(pa.scalar(values[0], pa.string()), n)
    group_of = np.repeat(np.arange(len(values)), np.asarray(counts, np.int64))
    return pa.array(values, pa.string()).take(pa.array(group_of))


def resource_parts(resource: Resource) -> tuple[str, str | None]:
    """The service name (``unknown_service`` when absent or empty) and the attributes as JSON."""
    res_attrs = key_values(resource.attributes)
    svc = res_attrs.get(A.SERVICE_NAME)
    service = UNKNOWN_SERVICE if svc is None or svc == "" else str(svc)
    return service, (json_value(res_attrs) if res_attrs else None)


def scope_parts(scope: InstrumentationScope) -> tuple[str | None, str | None]:
    return scope.name or None, scope.version or None


def status_parts(status: Status) -> tuple[int, str | None]:
    return int(status.code), status.message or None


def event_dict(event: Span.Event) -> dict[str, Any]:
    return {
        "time_ns": event.time_unix_nano,
        "name": event.name,
        "attributes": key_values(event.attributes),
    }


def link_dict(link: Span.Link) -> dict[str, Any]:
    return {
        "trace_id": link.trace_id.hex(),
        "span_id": link.span_id.hex(),
        "attributes": key_values(link.attributes),
    }


def bad_links(links: list[dict[str, Any]]) -> bool:
    return any(not x["trace_id"] or not x["span_id"] for x in links)


# -- the same from bytes, cached ---------------------------------------------------------------

_CACHE_LIMIT: Final = 4096
_T = TypeVar("_T")
_cache_lock = threading.Lock()
_resources: dict[bytes, tuple[str, str | None]] = {}
_scopes: dict[bytes, tuple[str | None, str | None]] = {}
_statuses: dict[bytes, tuple[int, str | None]] = {}


def _cached(cache: dict[bytes, _T], raw: bytes, make: Callable[[bytes], _T]) -> _T:
    hit = cache.get(raw)
    if hit is None:
        hit = make(raw)
        with _cache_lock:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[raw] = hit
    return hit


def resource_from_bytes(raw: bytes) -> tuple[str, str | None]:
    return _cached(_resources, raw, lambda b: resource_parts(Resource.FromString(b)))


def scope_from_bytes(raw: bytes) -> tuple[str | None, str | None]:
    return _cached(_scopes, raw, lambda b: scope_parts(InstrumentationScope.FromString(b)))


def status_from_bytes(raw: bytes) -> tuple[int, str | None]:
    return _cached(_statuses, raw, lambda b: status_parts(Status.FromString(b)))


def event_from_bytes(raw: bytes) -> dict[str, Any]:
    return event_dict(Span.Event.FromString(raw))


def link_from_bytes(raw: bytes) -> dict[str, Any]:
    return link_dict(Span.Link.FromString(raw))
