"""Span-level columns of a lazily parsed OTLP request, one list comprehension per field.

Resources and scopes repeat across requests (one SDK, one process), so their decoded form is cached
by their encoded bytes.  Events and links are rare and go through the exact generated classes.
Each span may be *invalid*: ``Problems`` records which and why, and the caller decides whether that
fails the whole input (file import) or rejects that span (the collector's partial success).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Final

import numpy as np
import pyarrow as pa
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from tracelens_instrumentation import attributes as attrs

from tracelens.ingest._common import repeated_limit
from tracelens.ingest.otlp_proto._anyvalue import key_values
from tracelens.schema import SPAN_KINDS, STATUS_CODES, json_value

UNKNOWN_SERVICE: Final = "unknown_service"
_INT64_MAX: Final = np.uint64(2**63 - 1)
_CACHE_LIMIT: Final = 4096

_cache_lock = threading.Lock()
_resources: dict[bytes, tuple[str, str | None]] = {}
_scopes: dict[bytes, tuple[str | None, str | None]] = {}
_statuses: dict[bytes, tuple[int, str | None]] = {}


def _cached(cache: dict[bytes, Any], raw: bytes, make: Any) -> Any:
    hit = cache.get(raw)
    if hit is None:
        hit = make(raw)
        with _cache_lock:
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()
            cache[raw] = hit
    return hit


def _resource(raw: bytes) -> tuple[str, str | None]:
    res_attrs = key_values(Resource.FromString(raw).attributes)
    svc = res_attrs.get(attrs.SERVICE_NAME)
    service = UNKNOWN_SERVICE if svc is None or svc == "" else str(svc)
    return service, (json_value(res_attrs) if res_attrs else None)


def _scope(raw: bytes) -> tuple[str | None, str | None]:
    scope = InstrumentationScope.FromString(raw)
    return scope.name or None, scope.version or None


def _status(raw: bytes) -> tuple[int, str | None]:
    status = Status.FromString(raw)
    return int(status.code), status.message or None


@dataclass
class Problems:
    """Invalid spans: a mask, and the first reason with where it was found."""

    mask: np.ndarray
    first: str | None = None
    where: dict[int, str] = field(default_factory=dict)

    def add(self, rows: np.ndarray, message: str, locate: Any) -> None:
        rows = np.flatnonzero(rows) if rows.dtype == np.bool_ else rows
        if not len(rows):
            return
        self.mask[rows] = True
        if self.first is None:
            self.first = f"{locate(int(rows[0]))}: {message}"


@dataclass
class SpanFields:
    """Everything but the attributes, as Arrow arrays (one row per span)."""

    columns: dict[str, pa.Array]
    flat_attributes: list[bytes]
    counts: np.ndarray
    problems: Problems


def span_fields(request: Any, limit: int | None = None) -> SpanFields:
    """The span columns of a parsed request; ``limit``: see ``repeated_limit``."""
    spans: list[Any] = []
    groups: list[tuple[int, int, int, str, str | None, str | None, str | None]] = []
    for r, rs in enumerate(request.resource_spans):
        service, res_json = _cached(_resources, rs.resource, _resource)
        for s, ss in enumerate(rs.scope_spans):
            scope_name, scope_version = _cached(_scopes, ss.scope, _scope)
            group = ss.spans
            spans.extend(group)
            groups.append((len(group), r, s, service, res_json, scope_name, scope_version))
    n = len(spans)
    sizes = np.array([g[0] for g in groups], np.int64)
    group_of = np.repeat(np.arange(len(groups)), sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)])[:-1] if len(groups) else sizes

    def locate(row: int) -> str:
        g = int(group_of[row])
        _, r, s, *_ = groups[g]
        return f"resourceSpans[{r}].scopeSpans[{s}].spans[{row - int(starts[g])}]"

    problems = Problems(np.zeros(n, np.bool_))
    cols: dict[str, pa.Array] = {}
    for col, at in (("service", 3), ("resource", 4), ("scope_name", 5), ("scope_version", 6)):
        cols[col] = _per_group([g[at] for g in groups], group_of, n, limit)  # type: ignore[misc]

    trace_ids = [x.trace_id for x in spans]
    span_ids = [x.span_id for x in spans]
    cols["trace_id"] = pa.array([b.hex() for b in trace_ids], pa.string())
    cols["span_id"] = pa.array([b.hex() for b in span_ids], pa.string())
    cols["parent_span_id"] = pa.array([x.parent_span_id.hex() or None for x in spans], pa.string())
    problems.add(np.array([not b for b in trace_ids], np.bool_), "traceId: empty", locate)
    problems.add(np.array([not b for b in span_ids], np.bool_), "spanId: empty", locate)
    cols["name"] = pa.array([x.name for x in spans], pa.string())
    _kinds(cols, np.array([x.kind for x in spans], np.int64), problems, locate)
    _times(cols, spans, problems, locate)
    _statuses_column(cols, [x.status for x in spans], problems, locate)

    attrs_lists = [x.attributes for x in spans]
    counts = np.fromiter(map(len, attrs_lists), np.int64, n)
    flat = list(chain.from_iterable(attrs_lists))
    cols["events"], cols["links"] = _events_links(spans, problems, locate)
    return SpanFields(cols, flat, counts, problems)


__all__ = ["check_repeated", "repeated_limit", "span_fields"]


def check_repeated(lengths: list[int], counts: Any, limit: int) -> None:
    """``ValueError`` when values of these lengths, repeated ``counts`` times, exceed ``limit``."""
    total = int(np.dot(np.asarray(lengths, np.int64), np.asarray(counts, np.int64)))
    if total > limit:
        raise ValueError(
            f"resource or scope values repeated on each span would take {total >> 20} MiB "
            f"(more than {limit >> 20} MiB): resource attributes are too large for this many spans"
        )


def _per_group(
    values: list[str | None], group_of: np.ndarray, n: int, limit: int | None = None
) -> pa.Array:
    """One value per span from one value per (resource, scope) group, no larger than ``limit``
    bytes in all."""
    if limit is not None:
        counts = np.bincount(group_of, minlength=len(values)) if n else np.zeros(len(values))
        check_repeated([len(v) if v else 0 for v in values], counts, limit)
    if len(set(values)) == 1:
        return pa.repeat(pa.scalar(values[0], pa.string()), n)
    return pa.array(values, pa.string()).take(pa.array(group_of))


def _kinds(cols: dict[str, pa.Array], kinds: np.ndarray, problems: Problems, locate: Any) -> None:
    bad = (kinds < 0) | (kinds >= len(SPAN_KINDS))
    problems.add(bad, "kind: not a span kind", locate)
    cols["span_kind"] = pa.array(SPAN_KINDS, pa.string()).take(pa.array(np.where(bad, 0, kinds)))


def _times(cols: dict[str, pa.Array], spans: list[Any], problems: Problems, locate: Any) -> None:
    n = len(spans)
    start = np.fromiter((x.start_time_unix_nano for x in spans), np.uint64, n)
    end = np.fromiter((x.end_time_unix_nano for x in spans), np.uint64, n)
    problems.add(start > _INT64_MAX, "startTimeUnixNano: beyond int64", locate)
    problems.add(end > _INT64_MAX, "endTimeUnixNano: beyond int64", locate)
    cols["start_ns"] = pa.array(np.minimum(start, _INT64_MAX).view(np.int64))
    cols["end_ns"] = pa.array(np.minimum(end, _INT64_MAX).view(np.int64))


def _statuses_column(
    cols: dict[str, pa.Array], raws: list[bytes], problems: Problems, locate: Any
) -> None:
    decoded = [_cached(_statuses, raw, _status) if raw else (0, None) for raw in raws]
    codes = np.array([c for c, _ in decoded], np.int64)
    bad = (codes < 0) | (codes >= len(STATUS_CODES))
    problems.add(bad, "status.code: not a status code", locate)
    cols["status_code"] = pa.array(STATUS_CODES, pa.string()).take(
        pa.array(np.where(bad, 0, codes))
    )
    cols["status_message"] = pa.array([m for _, m in decoded], pa.string())


def _events_links(spans: list[Any], problems: Problems, locate: Any) -> tuple[pa.Array, pa.Array]:
    n = len(spans)
    events: list[str | None] = [None] * n
    links: list[str | None] = [None] * n
    for row in [i for i, x in enumerate(spans) if x.events or x.links]:
        span = spans[row]
        if span.events:
            events[row] = json_value([_event(raw) for raw in span.events])
        if span.links:
            decoded = [_link(raw) for raw in span.links]
            if any(not d["trace_id"] or not d["span_id"] for d in decoded):
                problems.add(np.array([row]), "links: a link without traceId or spanId", locate)
            links[row] = json_value(decoded)
    return pa.array(events, pa.string()), pa.array(links, pa.string())


def _event(raw: bytes) -> dict[str, Any]:
    event = Span.Event.FromString(raw)
    return {
        "time_ns": event.time_unix_nano,
        "name": event.name,
        "attributes": key_values(event.attributes),
    }


def _link(raw: bytes) -> dict[str, Any]:
    link = Span.Link.FromString(raw)
    return {
        "trace_id": link.trace_id.hex(),
        "span_id": link.span_id.hex(),
        "attributes": key_values(link.attributes),
    }
