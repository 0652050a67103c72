"""``@trace``: one decorator for every function shape.

The wrapper keeps the shape of what it wraps (``inspect.iscoroutinefunction``,
``isgeneratorfunction``, ``isasyncgenfunction`` and ``inspect.signature`` answer as for the
original, through ``functools.wraps``), returns the value and raises the exception the function
does, and does nothing but call the function while no tracer provider is installed.

Coroutines and generators are driven step by step (``send``/``throw``/``close`` forwarded as
``yield from``/``await`` would), so their CPU time is measured only while they run and what they
wait for can be judged each time they suspend.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any, Final, TypeVar, overload

from tracelens_instrumentation import _call, _runtime, classify, fingerprint, measure, sampler
from tracelens_instrumentation import attributes as A

F = TypeVar("F", bound=Callable[..., Any])
EXPLICIT_KINDS: Final = frozenset(A.MEASURED_KINDS)


def _py_step(coro: Any, value: Any) -> tuple[bool, Any]:
    """``(finished, value)`` of one ``send``: the compiled ``send`` does it without raising."""
    try:
        return False, coro.send(value)
    except StopIteration as stop:
        return True, stop.value


_step: Callable[[Any, Any], tuple[bool, Any]] = getattr(fingerprint.native, "send", _py_step)
_perf = measure.perf
_ident = measure.ident
_attach = _call.attach
_detach = _call.otel_context.detach  # (logs rather than raises: the generator drivers' finally)


@overload
def trace(func: F, /) -> F: ...


@overload
def trace(
    func: None = None, /, *, kind: str | None = None, name: str | None = None,
    capture_args: bool = False,
) -> Callable[[F], F]: ...  # fmt: skip


def trace(
    func: Any = None,
    /,
    *,
    kind: str | None = None,
    name: str | None = None,
    capture_args: bool = False,
) -> Any:
    """Trace calls of ``func`` as spans.

    ``kind``: ``"cpu"``, ``"gpu"``, ``"io"`` or ``"wait"`` to state where the span's time goes
    (a GPU step must say so); by default it is measured.  ``name``: the span name (default: the
    function's qualified name).  ``capture_args``: also export the arguments and the result,
    truncated (by default only their fingerprints are exported).
    """
    if kind is not None and kind not in EXPLICIT_KINDS:
        raise ValueError(f"trace(kind=...) must be one of {sorted(EXPLICIT_KINDS)}, not {kind!r}")
    if func is None:
        return lambda f: _decorate(f, kind, name, capture_args)
    return _decorate(func, kind, name, capture_args)


def _decorate(func: Any, kind: str | None, name: str | None, capture_args: bool) -> Any:
    if isinstance(func, classmethod):
        return classmethod(_decorate(func.__func__, kind, name, capture_args))
    if isinstance(func, staticmethod):
        return staticmethod(_decorate(func.__func__, kind, name, capture_args))
    if not callable(func):
        raise TypeError(f"@trace needs a function, got {type(func).__name__}")
    spec = _call.Spec(func, kind, name, capture_args)
    if inspect.isasyncgenfunction(func):
        wrapper = _wrap_async_gen(func, spec)
    elif inspect.iscoroutinefunction(func):
        wrapper = _wrap_async(func, spec)
    elif inspect.isgeneratorfunction(func):
        wrapper = _wrap_gen(func, spec)
    else:
        wrapper = _wrap_sync(func, spec)
    sampler.add_boundary(wrapper.__code__)
    return functools.wraps(func)(wrapper)


def _wrap_sync(func: Callable[..., Any], spec: _call.Spec) -> Any:
    # Bound once here, read as closure cells on every call: cheaper than module attributes.
    runtime, begin, end, result_of, call_type, ident = (
        _runtime, _call.begin, _call.end, _call.result_of, _call.Call, _ident
    )  # fmt: skip

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tracer = runtime.TRACER or runtime.tracer()
        if tracer is None:
            return func(*args, **kwargs)
        call = begin(spec, tracer, args, kwargs, True)
        if not isinstance(call, call_type):
            try:
                return func(*args, **kwargs)
            finally:
                if call is not None:
                    call.end()
        thread = ident()
        call.step_begin(thread)
        parent = call.parent
        if parent is not None:
            parent.child_open(call.step_w, thread, call.step_c)
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            call.step_end()
            end(call, None, None, exc)
            raise
        call.step_end()
        end(call, result_of(result), result)
        return result

    return wrapper


class _Stepper:
    """Drives a suspended coroutine one ``send`` at a time for the span measuring it.

    The wrapper runs the first step itself (most coroutines finish without suspending, and then
    need no stepper); this picks up at the first suspension, ``yielded`` being what it yielded.
    """

    __slots__ = ("call", "coro", "yielded")

    def __init__(self, coro: Any, call: _call.Call, yielded: Any) -> None:
        self.coro = coro
        self.call = call
        self.yielded = yielded

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, call, yielded = self.coro, self.call, self.yielded
        throw, measured, step = coro.throw, call.measured, _step
        while True:
            call.suspend(call.last_w, _awaiting(coro, yielded, call) if measured else None)
            value: Any = None
            error: BaseException | None = None
            try:
                value = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                error = exc
            call.step_begin(_ident())
            call.resume(call.step_w)
            try:
                if error is None:
                    finished, yielded = step(coro, value)
                    if finished:
                        call.step_end()
                        return yielded
                else:
                    yielded = throw(error)
            except StopIteration as stop:
                call.step_end()
                return stop.value
            except BaseException:
                call.step_end()
                raise
            call.step_end()


def _awaiting(obj: Any, yielded: Any, call: _call.Call) -> str | None:
    try:
        kind = classify.awaiting(obj, yielded)
        if kind == classify.DEFER:
            _judge_later(obj, call)
            return A.WAIT
        return kind
    except Exception:
        return A.WAIT


def _unmeasured(yielded: Any) -> None:
    return None


def _judge_later(obj: Any, call: _call.Call) -> None:
    """Judges the suspension again right after the awaited task's first step has run."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return
    step = call.step_no
    asyncio.get_running_loop().call_soon(_judge_again, obj, call, step)


def _judge_again(obj: Any, call: _call.Call, step: int) -> None:
    if not call.suspended or call.step_no != step:
        return
    try:
        kind = classify.awaiting(obj, None)
    except Exception:
        return
    if kind is not None and kind != classify.DEFER:
        call.susp_kind = kind


def _wrap_async(func: Callable[..., Any], spec: _call.Spec) -> Any:
    runtime, begin, end, result_of, call_type, ident, step = (
        _runtime, _call.begin, _call.end, _call.result_of, _call.Call, _ident, _step
    )  # fmt: skip

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        tracer = runtime.TRACER or runtime.tracer()
        if tracer is None:
            return await func(*args, **kwargs)
        call = begin(spec, tracer, args, kwargs, True)
        if not isinstance(call, call_type):
            try:
                return await func(*args, **kwargs)
            finally:
                if call is not None:
                    call.end()
        thread = ident()
        parent = call.parent
        if parent is not None:
            parent.child_open(call.t0, thread, None)
        try:
            coro = func(*args, **kwargs)
            call.step_begin(thread)  # the first step, run here: no stepper if it finishes
            try:
                finished, yielded = step(coro, None)
            except BaseException:
                call.step_end()
                raise
            call.step_end()
            result = yielded if finished else await _Stepper(coro, call, yielded)
        except BaseException as exc:
            end(call, None, None, exc)
            raise
        end(call, result_of(result), result)
        return result

    return wrapper


def _wrap_gen(func: Callable[..., Any], spec: _call.Spec) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        tracer = _runtime.TRACER or _runtime.tracer()
        if tracer is None:
            return (yield from func(*args, **kwargs))
        call = _call.begin(spec, tracer, args, kwargs, False)
        if not isinstance(call, _call.Call):
            try:
                return (yield from func(*args, **kwargs))
            finally:
                if call is not None:
                    call.end()
        parent = call.parent
        if parent is not None:
            parent.child_open(call.t0, _ident(), None)
        items = fingerprint.StreamFingerprint()

        def waiting(item: Any) -> str:  # until the consumer asks for the next item
            _add(items, item)
            return A.WAIT

        try:
            result = yield from _drive(func(*args, **kwargs), call, waiting)
        except GeneratorExit:
            _call.end(call, _finish(items))
            raise
        except BaseException as exc:
            _call.end(call, None, None, exc)
            raise
        _call.end(call, _finish(items), result)
        return result

    return wrapper


def _drive(
    it: Any, call: _call.Call, waiting: Callable[[Any], str | None]
) -> Generator[Any, Any, Any]:
    """Runs ``it`` (a generator, or one ``asend``/``athrow`` of an async generator) a ``send`` at
    a time inside ``call``'s span, passing what it yields out and what comes back in; returns
    what it returns.  Between steps the span is suspended, ``waiting(yielded)`` saying on what.
    """
    value: Any = None
    error: BaseException | None = None
    while True:
        call.step_begin(_ident())
        call.resume(call.step_w)
        token = _attach(call.ctx)
        try:
            yielded = it.send(value) if error is None else it.throw(error)
        except StopIteration as stop:
            return stop.value
        finally:
            _detach(token)
            call.step_end()
        call.suspend(call.last_w, waiting(yielded))
        try:
            value = yield yielded
            error = None
        except GeneratorExit:
            it.close()
            raise
        except BaseException as exc:
            value, error = None, exc


def _add(items: fingerprint.StreamFingerprint, item: Any) -> None:
    try:
        items.add(item)
    except Exception:
        _runtime.complain("result", "tracelens: fingerprinting a yielded item failed")


def _finish(items: fingerprint.StreamFingerprint) -> tuple[str, tuple[str, ...]] | None:
    try:
        return items.finish()
    except Exception:
        _runtime.complain("result", "tracelens: fingerprinting yielded items failed")
        return None


class _AsyncGenStep:
    """One ``asend``/``athrow`` of an async generator; ``_drive`` runs it for a measured span."""

    __slots__ = ("agen", "call", "error", "value", "waiting")

    def __init__(
        self,
        agen: Any,
        call: _call.Call | None,
        waiting: Callable[[Any], str | None],
        value: Any,
        error: BaseException | None,
    ) -> None:
        self.agen, self.call, self.waiting = agen, call, waiting
        self.value, self.error = value, error

    def __await__(self) -> Generator[Any, Any, Any]:
        agen = self.agen
        step = agen.asend(self.value) if self.error is None else agen.athrow(self.error)
        if self.call is None:
            return step.__await__()
        return _drive(step, self.call, self.waiting)


def _wrap_async_gen(func: Callable[..., Any], spec: _call.Spec) -> Any:
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        tracer = _runtime.TRACER or _runtime.tracer()
        began = None if tracer is None else _call.begin(spec, tracer, args, kwargs, False)
        call = began if isinstance(began, _call.Call) else None
        if isinstance(began, _call.Passive):
            began.end()  # sampled out: nothing to record
        agen = func(*args, **kwargs)
        if call is not None and call.parent is not None:
            call.parent.child_open(call.t0, _ident(), None)
        items = fingerprint.StreamFingerprint() if call is not None else None
        waiting: Callable[[Any], str | None] = _unmeasured
        if call is not None and call.measured:
            waiting = functools.partial(_awaiting, agen, call=call)
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    item = await _AsyncGenStep(agen, call, waiting, value, error)
                except StopAsyncIteration:
                    break
                if call is not None and items is not None:
                    call.suspend(_perf(), A.WAIT)  # until the consumer asks for more
                    _add(items, item)
                try:
                    value = yield item
                    error = None
                except GeneratorExit:
                    await agen.aclose()
                    raise
                except BaseException as exc:
                    value, error = None, exc
        except GeneratorExit:
            if call is not None and items is not None:
                _call.end(call, _finish(items))
            raise
        except BaseException as exc:
            if call is not None:
                _call.end(call, None, None, exc)
            raise
        if call is not None and items is not None:
            _call.end(call, _finish(items), None)

    return wrapper


sampler.add_boundary(_Stepper.__await__.__code__)
sampler.add_boundary(_drive.__code__)
