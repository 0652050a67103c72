"""A span processor that tells our spans when another instrumentation opens a child under them.

Why: a span's self time excludes its children's windows, and children made by OpenTelemetry's
own instrumentations (an httpx client span, a DB driver span) are invisible to the decorator.
Seeing them start and end lets ``measure.Record`` stop charging that time to the parent's own
io/wait.  Our own child spans notify their parent directly and are skipped here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from opentelemetry.sdk.trace import SpanProcessor

from tracelens_instrumentation import measure

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, Span

SCOPE: Final = "tracelens"

# Foreign children currently open under one of our spans: child span id -> parent record.
_open: dict[int, measure.Record] = {}


class ChildTracker(SpanProcessor):
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        parent = span.parent
        if parent is None:
            return
        rec = measure.records.get(parent.span_id)
        if rec is None:
            return
        scope = span.instrumentation_scope
        if scope is not None and scope.name == SCOPE:
            return
        ctx = span.get_span_context()
        if ctx is None:
            return
        _open[ctx.span_id] = rec
        rec.child_open(measure.perf(), measure.ident(), None)

    def on_end(self, span: ReadableSpan) -> None:
        if not _open:
            return
        ctx = span.get_span_context()
        rec = _open.pop(ctx.span_id, None) if ctx is not None else None
        if rec is not None:
            rec.child_close(measure.perf(), measure.ident(), None)

    def shutdown(self) -> None:
        _open.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
