"""Turn one vLLM generate call and its ``RequestOutput``s into OpenTelemetry spans.

vLLM measures each request's phases itself (``RequestOutput.metrics``, a
``RequestStateStats`` when the engine runs with ``disable_log_stats=False``), so the
children are drawn from those timestamps after the call returns rather than guessed from
the outside: ``queued_ts -> scheduled_ts`` is queueing (``wait``), ``scheduled_ts ->
first_token_ts`` is prefill and ``first_token_ts -> last_token_ts`` is decode (``gpu``).

Those four timestamps are ``time.monotonic()`` seconds taken by the engine core, which may
be another process (``AsyncLLM`` always spawns one); on Linux ``CLOCK_MONOTONIC`` is one
clock for the whole machine, so a single offset ``time.time_ns() - time.monotonic_ns()``,
sampled when the call ends, maps them to the wall-clock nanoseconds spans use.  The
offset is sampled per call, not once per process, so NTP steps of the wall clock between
calls do not shift later spans.  Children are clamped into the call span so that a few
microseconds of sampling error never make a child outlive its parent.

Nothing here may break the host application: every step that could fail on an unexpected
vLLM version is caught and logged, and the caller's result is never touched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from tracelens_instrumentation import attributes as A

log = logging.getLogger("tracelens_instrumentation.vllm")

PROVIDER = "vllm"
QUEUE_SPAN = "vllm.queue"
PREFILL_SPAN = "vllm.prefill"
DECODE_SPAN = "vllm.decode"


@dataclass(frozen=True)
class Phase:
    """One timed phase of one request, already in wall-clock nanoseconds."""

    name: str
    kind: str
    start_ns: int
    end_ns: int


def clock_offset_ns() -> int:
    """Wall clock minus monotonic clock, sampled as tightly as Python allows."""
    before = time.monotonic_ns()
    wall = time.time_ns()
    after = time.monotonic_ns()
    return wall - (before + after) // 2


def _mono_to_wall_ns(seconds: float, offset_ns: int) -> int:
    return round(seconds * 1e9) + offset_ns


def request_phases(metrics: Any, offset_ns: int) -> list[Phase]:
    """The queue, prefill and decode phases that ``metrics`` proves happened.

    A timestamp of 0.0 means vLLM never recorded that event (stats off, request aborted),
    so a phase is emitted only when both of its ends are known and in order.
    """
    marks = [getattr(metrics, name, 0.0) or 0.0 for name in _MARKS]
    phases: list[Phase] = []
    for (name, kind), start, end in zip(_PHASES, marks, marks[1:], strict=False):
        if start > 0 and end >= start:
            wall_start = _mono_to_wall_ns(start, offset_ns)
            phases.append(Phase(name, kind, wall_start, _mono_to_wall_ns(end, offset_ns)))
    return [p for p in phases if p.name != DECODE_SPAN or p.end_ns > p.start_ns]


_MARKS = ("queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts")
_PHASES = ((QUEUE_SPAN, A.WAIT), (PREFILL_SPAN, A.GPU), (DECODE_SPAN, A.GPU))


@dataclass
class TokenTally:
    """Input and output token counts of one call, summed over its requests.

    Streaming outputs come either cumulative (each output holds every token so far) or as
    deltas; ``delta`` says which, so a streamed request is counted once either way.
    """

    delta: bool = False
    prompt: dict[str, int] = field(default_factory=dict)
    completion: dict[tuple[str, int], int] = field(default_factory=dict)

    def add(self, output: Any) -> None:
        rid = str(getattr(output, "request_id", ""))
        prompt_ids = getattr(output, "prompt_token_ids", None) or ()
        self.prompt[rid] = max(self.prompt.get(rid, 0), len(prompt_ids))
        for seq in getattr(output, "outputs", None) or ():
            key = (rid, int(getattr(seq, "index", 0)))
            n = len(getattr(seq, "token_ids", None) or ())
            self.completion[key] = self.completion.get(key, 0) + n if self.delta else n

    @property
    def input_tokens(self) -> int:
        return sum(self.prompt.values())

    @property
    def output_tokens(self) -> int:
        return sum(self.completion.values())


class CallSpan:
    """The ``gpu`` span of one generate/chat call and the per-request children under it."""

    def __init__(self, tracer: trace.Tracer, operation: str, model: str) -> None:
        self._tracer = tracer
        self.start_ns = time.time_ns()
        self.span: Span = tracer.start_span(
            f"{operation} {model}",
            kind=SpanKind.INTERNAL,
            start_time=self.start_ns,
            attributes={
                A.KIND: A.GPU,
                A.GEN_AI_OPERATION_NAME: operation,
                A.GEN_AI_REQUEST_MODEL: model,
                A.GEN_AI_PROVIDER_NAME: PROVIDER,
            },
        )
        self._token: object | None = None

    def attach(self) -> None:
        """Make the call span current, so spans opened inside the call nest under it."""
        self._token = otel_context.attach(trace.set_span_in_context(self.span))

    def detach(self) -> None:
        if self._token is not None:
            token, self._token = self._token, None
            otel_context.detach(token)  # type: ignore[arg-type]

    def trace_headers(self) -> dict[str, str]:
        """W3C headers naming this span as parent, for vLLM's own ``llm_request`` span."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(self.span))
        return carrier

    def finish(self, outputs: Iterable[Any], tally: TokenTally | None = None) -> None:
        """Record children and token counts from the outputs, then end the span."""
        end_ns = time.time_ns()
        try:
            outputs = list(outputs)
            if tally is None:
                tally = TokenTally()
                for out in outputs:
                    tally.add(out)
            self.span.set_attribute(A.GEN_AI_USAGE_INPUT_TOKENS, tally.input_tokens)
            self.span.set_attribute(A.GEN_AI_USAGE_OUTPUT_TOKENS, tally.output_tokens)
            self._children(outputs, end_ns)
        except Exception:
            log.warning("tracelens: could not record vLLM request timings", exc_info=True)
        finally:
            self.span.end(end_time=end_ns)

    def fail(self, exc: BaseException, tally: TokenTally | None = None) -> None:
        """End the span for a call that raised, with the tokens streamed before it did."""
        end_ns = time.time_ns()
        try:
            if tally is not None:
                self.span.set_attribute(A.GEN_AI_USAGE_INPUT_TOKENS, tally.input_tokens)
                self.span.set_attribute(A.GEN_AI_USAGE_OUTPUT_TOKENS, tally.output_tokens)
            if isinstance(exc, Exception):
                self.span.set_attribute(A.ERROR_TYPE, type(exc).__qualname__)
                self.span.record_exception(exc)
                self.span.set_status(Status(StatusCode.ERROR, str(exc)))
        except Exception:
            log.warning("tracelens: could not record a vLLM failure", exc_info=True)
        finally:
            self.span.end(end_time=end_ns)

    def _children(self, outputs: list[Any], end_ns: int) -> None:
        offset = clock_offset_ns()
        parent = trace.set_span_in_context(self.span)
        missing = 0
        for out in outputs:
            metrics = getattr(out, "metrics", None)
            if metrics is None:
                missing += 1
                continue
            rid = str(getattr(out, "request_id", ""))
            for phase in request_phases(metrics, offset):
                self._child(parent, phase, rid, end_ns)
        if missing:
            log.debug(
                "tracelens: %d vLLM outputs carry no metrics; start the engine with "
                "disable_log_stats=False to get queue/prefill/decode spans",
                missing,
            )

    def _child(self, parent: Any, phase: Phase, request_id: str, end_ns: int) -> None:
        start = min(max(phase.start_ns, self.start_ns), end_ns)
        end = min(max(phase.end_ns, start), end_ns)
        span = self._tracer.start_span(
            phase.name,
            context=parent,
            start_time=start,
            attributes={A.KIND: phase.kind, A.GEN_AI_REQUEST_ID: request_id},
        )
        span.end(end_time=end)


def start_call(tracer: trace.Tracer, operation: str, model: str) -> CallSpan | None:
    """Open a call span, or None (logged) if even that fails: the call then runs bare."""
    try:
        return CallSpan(tracer, operation, model)
    except Exception:
        log.warning("tracelens: could not start a vLLM span", exc_info=True)
        return None


def model_name(engine: Any) -> str:
    """The model name vLLM reports for ``engine`` (an ``LLM`` or an ``AsyncLLM``)."""
    try:
        config = getattr(engine, "model_config", None)
        if config is None and hasattr(engine, "llm_engine"):
            config = engine.llm_engine.model_config
        name = getattr(config, "served_model_name", None) or getattr(config, "model", None)
        if isinstance(name, list | tuple):
            name = name[0] if name else None
        return str(name) if name else "unknown"
    except Exception:
        return "unknown"


def tracing_enabled(engine: Any) -> bool:
    """Whether the engine exports its own spans (then it accepts ``trace_headers``)."""
    try:
        return bool(engine.observability_config.otlp_traces_endpoint)
    except Exception:
        return False


def is_delta(sampling_params: Any) -> bool:
    kind = getattr(sampling_params, "output_kind", None)
    return getattr(kind, "name", "") == "DELTA"


def headers_given(kwargs: Mapping[str, Any]) -> bool:
    return bool(kwargs.get("trace_headers"))
