"""One traced call: its span, its measurements and the attributes written when it ends.

Every step here is guarded: a failure inside the instrumentation is logged (a few times) and the
application's call goes on untouched.  The user's own exceptions never pass through these
guards; the wrappers re-raise them unchanged.
"""

from __future__ import annotations

import inspect
import json
import reprlib
import sys
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace
from opentelemetry.context.context import Context
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace import propagation as otel_propagation

from tracelens_instrumentation import _runtime, fingerprint, gpu, measure, stacks
from tracelens_instrumentation import attributes as A

MAX_OURS: Final = 16  # room left for the attributes written at a span's end
CAPTURE_LIMIT: Final = 2048  # characters of tracelens.args / tracelens.result when captured
_SELF_NAMES: Final = ("self", "cls")
_repr = reprlib.Repr()
_repr.maxstring = 256
_repr.maxother = 256
_repr.maxlong = 64

# Attribute names as module constants: read on every call, cheaper than ``A.NAME``.
ARGS_HASH: Final = A.ARGS_HASH
KIND: Final = A.KIND
IO_NS: Final = A.IO_NS
WAIT_NS: Final = A.WAIT_NS
CPU_NS: Final = A.CPU_NS
RESULT_HASH: Final = A.RESULT_HASH
RESULT_FPS: Final = A.RESULT_FPS
RESULT_VALUE: Final = A.RESULT_VALUE
ERROR_TYPE: Final = A.ERROR_TYPE
ARG_FPS: Final = A.ARG_FPS
CPU_STACKS: Final = A.CPU_STACKS
GPU_WAIT_NS: Final = A.GPU_WAIT_NS
GPU_SOURCE: Final = A.GPU_SOURCE
GPU_SOURCE_STACKS: Final = A.GPU_SOURCE_STACKS
small_args_hash = fingerprint.small_args_hash
args_fingerprint = fingerprint.args_fingerprint
MIN_TEXT: Final = fingerprint.MIN_TEXT
set_span_in_context = otel_trace.set_span_in_context
perf = measure.perf
records = measure.records
device_waits = measure.device_waits
device_split = measure.device_split
GPU_ON = gpu.ON


def _context_var() -> ContextVar[Any] | None:
    """The ContextVar behind OpenTelemetry's default runtime context, if that is the one in use.

    ``context.get_current`` / ``attach`` / ``detach`` are two Python calls deep around this
    variable's ``get`` / ``set`` / ``reset``, and a traced call makes one of each: calling the
    variable directly does the same for less.  Any other runtime context (``OTEL_PYTHON_CONTEXT``)
    goes through the public functions.
    """
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    var = getattr(runtime, "_current_context", None)
    if type(runtime).__name__ == "ContextVarsRuntimeContext" and isinstance(var, ContextVar):
        return var
    return None


def _span_key() -> str | None:
    """The key ``set_span_in_context`` stores the span under, if it does just that (checked), so
    that the hot path can build the span's context with one dict copy instead of two calls."""
    key = getattr(otel_propagation, "_SPAN_KEY", None)
    try:
        probe = otel_trace.INVALID_SPAN
        made = set_span_in_context(probe, Context({"k": 1}))
    except Exception:
        return None
    if isinstance(key, str) and type(made) is Context and made == {"k": 1, key: probe}:
        return key
    return None


SPAN_KEY: Final = _span_key()
# The SDK's span class, once a traced call has seen it: its attributes are written directly.
_sdk_span: list[type | None] = [None]


def _is_sdk_span(span: Any) -> bool:
    sdk = sys.modules.get("opentelemetry.sdk.trace")
    cls = getattr(sdk, "_Span", None)
    if isinstance(cls, type) and type(span) is cls:
        _sdk_span[0] = cls
        return True
    return False


_var = _context_var()
get_current: Callable[[], Any] = _var.get if _var is not None else otel_context.get_current
attach: Callable[[Any], Any] = _var.set if _var is not None else otel_context.attach
# raises where ``context.detach`` logs: every caller here guards it
detach: Callable[[Any], Any] = _var.reset if _var is not None else otel_context.detach


class Spec:
    """What the decorator knows about a function once, at decoration time."""

    __slots__ = (
        "capture", "index", "kind", "measured", "memo", "name", "plain", "positional", "skip",
        "star",
    )  # fmt: skip

    def __init__(self, func: Callable[..., Any], kind: str | None, name: str | None, capture: bool):
        self.kind = kind
        self.measured = kind is None
        qualname = getattr(func, "__qualname__", None) or type(func).__name__
        self.name = name or str(qualname).replace("<locals>.", "")
        self.capture = capture
        # a plain function runs in one step on one thread: it can push a CUPTI correlation id
        self.plain = not (
            inspect.iscoroutinefunction(func)
            or inspect.isgeneratorfunction(func)
            or inspect.isasyncgenfunction(func)
        )
        self.memo: dict[tuple[Any, ...], str] = {}  # args_hash of small argument lists
        self.positional: tuple[bytes, ...] = ()
        self.star = b"*args\0"
        self.index: dict[str, int] = {}
        self.skip = False
        try:
            params = list(inspect.signature(func).parameters.values())
        except (TypeError, ValueError):
            return
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        positional = [p.name for p in params if p.kind in kinds]
        self.skip = bool(positional) and positional[0] in _SELF_NAMES
        if self.skip:
            positional = positional[1:]
        self.positional = tuple(n.encode("utf-8", "surrogatepass") + b"\0" for n in positional)
        self.index = {p.name: i for i, p in enumerate(params)}
        for p in params:
            if p.kind == inspect.Parameter.VAR_POSITIONAL:
                self.star = b"*" + p.name.encode("utf-8", "surrogatepass") + b"\0"

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[bytes], list[Any]]:
        """Arguments named by parameter, in parameter order, whether passed by position or name."""
        if self.skip and args:
            args = args[1:]
        names = self.positional
        if len(args) <= len(names):
            out_names = list(names[: len(args)])
            values = list(args)
        else:
            out_names = [*names, self.star]
            values = [*args[: len(names)], list(args[len(names) :])]
        if kwargs:
            index = self.index
            for key in sorted(kwargs, key=lambda k: (index.get(k, 1 << 30), k)):
                out_names.append(key.encode("utf-8", "surrogatepass") + b"\0")
                values.append(kwargs[key])
        return out_names, values


if TYPE_CHECKING:
    _Record = measure.Record
else:
    _Record = measure.Base  # the compiled record when built


class Call(_Record):
    """A Record plus the span it measures and the attributes it will write."""

    __slots__ = ("ctx", "parent", "room", "span", "span_id", "spec", "token", "values")

    def __init__(self, spec: Spec, span: Any, values: dict[str, Any], ctx: Any, room: int) -> None:
        # Record.__init__ inlined (this runs on every traced call)
        self.measured = spec.measured
        self.t0 = perf()
        self.spec = spec
        self.span = span
        self.values = values
        self.ctx = ctx  # the context with this span current
        self.room = room  # > 0: ``values`` is the span's own attribute dict, with this much room
        self.token: Any = None
        self.span_id = span_id = span.get_span_context().span_id
        parent_ctx = getattr(span, "parent", None)
        self.parent = records.get(parent_ctx.span_id) if parent_ctx is not None else None
        records[span_id] = self


class Passive:
    """A span that is not recording (sampled out): kept current so children follow suit."""

    __slots__ = ("span", "token")

    def __init__(self, span: Any, attach_now: bool, current: Any) -> None:
        self.span = span
        self.token = attach(set_span_in_context(span, current)) if attach_now else None

    def end(self) -> None:
        try:
            if self.token is not None:
                detach(self.token)
            self.span.end()
        except Exception:
            _runtime.complain("end", "tracelens: ending a span failed")


def begin(
    spec: Spec, tracer: Any, args: tuple[Any, ...], kwargs: dict[str, Any], attach_now: bool
) -> Call | Passive | None:
    """Starts the span for a call; None (after logging) if the instrumentation failed.

    The current context is read once and handed to the SDK and to ``set_span_in_context``
    (each would otherwise read it again: three reads saved per call).
    """
    try:
        current = get_current()
        span = tracer.start_span(spec.name, current)
        if not span.is_recording():
            return Passive(span, attach_now, current)
        # The attributes go straight into an SDK span's own attribute dict (see ``end``).
        values: dict[str, Any] | None = None
        room = 0
        if type(span) is _sdk_span[0] or _is_sdk_span(span):
            store = span._attributes
            raw = getattr(store, "_dict", None)
            room = (store.maxlen or 1 << 30) - MAX_OURS
            if type(raw) is dict and store.max_value_len is None and 0 < room >= len(raw):
                values = raw
        if values is None:
            values = {}
            room = 0
        own = args[1:] if spec.skip and args else args
        if kwargs or spec.capture or len(own) > len(spec.positional):
            _bound_values(spec, args, kwargs, values)
        else:  # the common call: positional args, no binding (zip stops at the last one given)
            known = small_args_hash(spec.positional, own, spec.memo)  # small: memoised
            if known is not None:
                values[ARGS_HASH] = known
                values[ARG_FPS] = ()  # every argument seen, none worth linking (docs/verdicts.md)
            else:
                known, fps = args_fingerprint(spec.positional, own)
                values[ARGS_HASH] = known
                values[ARG_FPS] = fps
        if SPAN_KEY is not None:
            ctx = current.copy()  # set_span_in_context(span, current), in line
            ctx[SPAN_KEY] = span
            ctx = Context(ctx)
        else:
            ctx = set_span_in_context(span, current)
        call = Call(spec, span, values, ctx, room)
        if GPU_ON[0]:  # a CUDA runtime is in use and the collector runs (gpu.py)
            gpu.begin(call, values, spec.plain)
        if attach_now:
            call.token = attach(ctx)
        return call
    except Exception:
        _runtime.complain("begin", "tracelens: starting a span failed; the call is not traced")
        return None


def _bound_values(
    spec: Spec, args: tuple[Any, ...], kwargs: dict[str, Any], out: dict[str, Any]
) -> None:
    """The attributes of the arguments, bound to parameter names: the general path."""
    names, values = spec.bind(args, kwargs)
    args_hash, arg_fps = fingerprint.args_fingerprint(names, values)
    out[A.ARGS_HASH] = args_hash
    out[A.ARG_FPS] = arg_fps  # empty: every argument seen, none worth linking
    if spec.capture:
        out[A.ARGS_VALUE] = _captured_args(names, values)


def _captured_args(names: list[bytes], values: list[Any]) -> str:
    shown = {
        n[:-1].decode("utf-8", "replace"): safe_repr(v) for n, v in zip(names, values, strict=False)
    }
    return json.dumps(shown, ensure_ascii=False)[:CAPTURE_LIMIT]


def safe_repr(value: Any) -> str:
    try:
        return _repr.repr(value)[:CAPTURE_LIMIT]
    except Exception:
        return f"<{type(value).__module__}.{type(value).__qualname__}>"


def end(
    call: Call,
    result: tuple[str, tuple[str, ...]] | None,
    raw_result: Any = None,
    exc: BaseException | None = None,
) -> None:
    """Writes the measurements and fingerprints, ends the span, restores the context.

    One function rather than several helpers: this runs on every traced call.
    """
    span = call.span
    held = False
    try:
        if call.suspended:  # a generator closed between items: its last gap ends now
            now = perf()
            call.resume(now)
        else:
            now = call.last_w if call.last_w and not call.in_step else perf()
        parent = call.parent
        if parent is not None:
            parent.child_close(now, call.thread, call.last_c if call.last_w == now else None)
        kind, cpu, io, wait = call.finish(now)
        split = (kind, io, wait, now - call.t0 - call.cov_w) if call.measured else None
        values = call.values
        # ``values`` is the SDK span's own attribute dict when ``begin`` found it had room
        # (``room``): ``span.set_attributes`` minus the SDK's per-value validation and copying,
        # for 1.45 about a third of a bare span's cost for the handful written here.  Ours are
        # valid already (str, int, tuples of str).  If the application filled the span's
        # attributes meanwhile, or ended it, the rest takes the public path.
        direct = call.room > 0
        if direct and (len(values) > call.room or span._end_time is not None):
            values = {}
            direct = False
        if device_waits:  # the sampler saw some span wait for a device
            seen = device_waits.pop(call, None)
            if seen is not None and split is not None:
                kind, wait, gpu_wait = device_split(kind, io, wait, split[3], *seen)
                values[GPU_WAIT_NS] = gpu_wait
                values[GPU_SOURCE] = GPU_SOURCE_STACKS
        if call.measured:
            values[KIND] = kind
            values[IO_NS] = io  # always, even 0: their presence marks a measured kind
            values[WAIT_NS] = wait
        else:
            values[KIND] = call.spec.kind
        values[CPU_NS] = cpu
        prof = call.prof
        if prof is not None:  # profiling on, and the sampler saw this span compute
            call.prof = None
            values[CPU_STACKS] = stacks.encode(dict(prof))  # (a copy: the sampler may add)
        if result is not None:
            values[RESULT_HASH] = result[0]
            if result[1]:
                values[RESULT_FPS] = result[1]
            if call.spec.capture:
                values[RESULT_VALUE] = safe_repr(raw_result)
        if exc is not None:
            _record_error(span, values, exc)
        if not direct:
            span.set_attributes(values)
        if GPU_ON[0]:  # held until its device records are in: gpu.py ends it
            held = gpu.end(call, split)
    except Exception:
        _runtime.complain("end", "tracelens: recording a span's measurements failed")
    records.pop(call.span_id, None)
    token = call.token
    if token is not None:
        call.token = None
        try:
            detach(token)
        except Exception:
            _runtime.complain("detach", "tracelens: restoring the context failed")
    if held:
        return
    try:
        span.end()
    except Exception:
        _runtime.complain("end", "tracelens: ending a span failed")


def _record_error(span: Any, values: dict[str, Any], exc: BaseException) -> None:
    values[ERROR_TYPE] = f"{type(exc).__module__}.{type(exc).__qualname__}"
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:512]))


def result_of(value: Any) -> tuple[str, tuple[str, ...]] | None:
    try:
        got: tuple[str, tuple[str, ...]] = fingerprint.result_fingerprint(value)
        if type(value) is str and len(value) >= MIN_TEXT:
            return got[0], fingerprint.text_fps(value, got[1])
        return got
    except Exception:
        _runtime.complain("result", "tracelens: fingerprinting a result failed")
        return None
