"""@trace on every function shape, with the real OpenTelemetry SDK and an in-memory exporter."""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from test_instrumentation_helpers import attrs, named, ok, provider, run_python, spans
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation import configure, flush, trace

pytestmark = pytest.mark.measures

__all__ = ["spans"]  # the fixture, imported for pytest


@trace
def add(a: int, b: int = 2) -> int:
    return a + b


@trace(kind="gpu", name="generate")
def generate(prompt: str) -> str:
    return prompt.upper()


@trace
async def fetch(key: str, *, scale: int = 1) -> list[str]:
    await asyncio.sleep(0)
    return [key] * scale


@trace
def count(n: int) -> Generator[int, None, int]:
    yield from range(n)
    return n


@trace
async def acount(n: int) -> AsyncIterator[int]:
    for i in range(n):
        await asyncio.sleep(0)
        yield i


class Agent:
    def __init__(self, name: str) -> None:
        self.name = name

    @trace
    def run(self, task: str) -> str:
        return f"{self.name}:{task}"

    @trace
    async def arun(self, task: str) -> str:
        return f"{self.name}:{task}"

    @trace
    @classmethod
    def make(cls, name: str) -> Agent:
        return cls(name)

    @classmethod
    @trace
    def make2(cls, name: str) -> Agent:
        return cls(name)

    @trace
    @staticmethod
    def helper(x: int) -> int:
        return x * 3


class Boom(Exception):
    pass


@trace
def fails(x: int) -> int:
    raise Boom(f"bad {x}")


@trace
async def afails() -> None:
    await asyncio.sleep(0)
    raise Boom("async bad")


def test_sync_function(spans: InMemorySpanExporter) -> None:
    assert add(1, 5) == 6
    span = named(spans, "add")
    a = attrs(span)
    # A call of a few microseconds has no samples: whether it reads cpu or wait depends on
    # whether the machine preempted it. tests/test_kinds_measured.py checks the verdicts
    # against measured truth.
    assert a[A.KIND] in (A.CPU, A.WAIT), a
    assert isinstance(a[A.CPU_NS], int) and a[A.CPU_NS] >= 0
    assert len(a[A.ARGS_HASH]) == 32 and len(a[A.RESULT_HASH]) == 32
    assert span.status.status_code == StatusCode.UNSET
    assert span.kind == otel_trace.SpanKind.INTERNAL


def test_same_arguments_by_position_or_name_hash_alike(spans: InMemorySpanExporter) -> None:
    add(1, 2)
    add(a=1, b=2)
    add(1, b=2)
    add(2, 1)
    hashes = [attrs(s)[A.ARGS_HASH] for s in spans.get_finished_spans()]
    assert hashes[0] == hashes[1] == hashes[2] != hashes[3]


def test_async_function(spans: InMemorySpanExporter) -> None:
    assert asyncio.run(fetch("k", scale=2)) == ["k", "k"]
    a = attrs(named(spans, "fetch"))
    assert a[A.KIND] in A.MEASURED_KINDS and A.CPU_NS in a


def test_generator_keeps_send_throw_close_and_return_value(spans: InMemorySpanExporter) -> None:
    @trace
    def echo() -> Generator[Any, Any, Any]:
        received = yield "ready"
        while received is not None:
            try:
                received = yield f"got {received}"
            except KeyError:
                received = yield "caught"
        return "finished"

    gen: Any = echo()
    assert type(gen).__name__ == "generator"
    assert next(gen) == "ready"
    assert gen.send(1) == "got 1"
    assert gen.throw(KeyError("k")) == "caught"
    with pytest.raises(StopIteration) as stop:
        gen.send(None)
    assert stop.value.value == "finished"
    assert list(count(3)) == [0, 1, 2]

    closing = echo()
    next(closing)
    closing.close()
    echo_name = "test_generator_keeps_send_throw_close_and_return_value.echo"
    assert [s.name for s in spans.get_finished_spans()] == [echo_name, "count", echo_name]
    assert all(s.status.status_code == StatusCode.UNSET for s in spans.get_finished_spans())


def test_async_generator_keeps_asend_athrow_aclose(spans: InMemorySpanExporter) -> None:
    @trace
    async def echo() -> AsyncGenerator[Any, Any]:
        received = yield "ready"
        while True:
            try:
                received = yield f"got {received}"
            except KeyError:
                received = yield "caught"

    async def main() -> list[Any]:
        out: list[Any] = [item async for item in acount(3)]
        agen = echo()
        out.append(await agen.asend(None))
        out.append(await agen.asend(5))
        out.append(await agen.athrow(KeyError("k")))
        await agen.aclose()
        return out

    assert asyncio.run(main()) == [0, 1, 2, "ready", "got 5", "caught"]
    assert sorted(s.name for s in spans.get_finished_spans()) == [
        "acount",
        "test_async_generator_keeps_asend_athrow_aclose.echo",
    ]


def test_methods_classmethods_staticmethods(spans: InMemorySpanExporter) -> None:
    agent = Agent.make("a")
    assert isinstance(agent, Agent) and Agent.make2("b").name == "b"
    assert agent.run("t") == "a:t"
    assert asyncio.run(agent.arun("u")) == "a:u"
    assert Agent.helper(2) == 6 and agent.helper(3) == 9
    names = [s.name for s in spans.get_finished_spans()]
    assert names == [
        "Agent.make",
        "Agent.make2",
        "Agent.run",
        "Agent.arun",
        "Agent.helper",
        "Agent.helper",
    ]
    run_a = attrs(named(spans, "Agent.run"))
    agent_b = Agent("zzz")
    agent_b.run("t")
    run_b = attrs(spans.get_finished_spans()[-1])
    assert run_a[A.ARGS_HASH] == run_b[A.ARGS_HASH]  # self is not an argument


def test_wraps_and_signature_preserved() -> None:
    assert add.__name__ == "add" and add.__qualname__ == "add"
    assert str(inspect.signature(add)) == "(a: 'int', b: 'int' = 2) -> 'int'"
    assert inspect.signature(fetch).parameters["scale"].kind == inspect.Parameter.KEYWORD_ONLY
    assert inspect.iscoroutinefunction(fetch) and inspect.iscoroutinefunction(Agent.arun)
    assert inspect.isgeneratorfunction(count)
    assert inspect.isasyncgenfunction(acount)
    assert not inspect.iscoroutinefunction(add)
    assert add.__wrapped__(1, 1) == 2  # type: ignore[attr-defined]
    assert isinstance(Agent.__dict__["make"], classmethod)
    assert isinstance(Agent.__dict__["helper"], staticmethod)


def test_exceptions_recorded_and_reraised_unchanged(spans: InMemorySpanExporter) -> None:
    with pytest.raises(Boom) as info:
        fails(7)
    assert str(info.value) == "bad 7"
    span = named(spans, "fails")
    assert span.status.status_code == StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]
    assert span.events[0].attributes is not None
    assert str(span.events[0].attributes["exception.type"]).endswith("Boom")
    assert str(attrs(span)[A.ERROR_TYPE]).endswith("Boom")
    assert A.RESULT_HASH not in attrs(span)

    with pytest.raises(Boom, match="async bad"):
        asyncio.run(afails())
    assert named(spans, "afails").status.status_code == StatusCode.ERROR


def test_the_same_exception_object_propagates(spans: InMemorySpanExporter) -> None:
    err = Boom("mine")

    @trace
    def raiser() -> None:
        raise err

    @trace
    def gen() -> Iterator[int]:
        yield 1
        raise err

    @trace
    async def araiser() -> None:
        raise err

    for call in (raiser, lambda: list(gen()), lambda: asyncio.run(araiser())):
        with pytest.raises(Boom) as info:
            call()
        assert info.value is err


def test_return_values_untouched(spans: InMemorySpanExporter) -> None:
    sentinel = object()

    @trace
    def ident(x: Any) -> Any:
        return x

    @trace
    async def aident(x: Any) -> Any:
        return x

    assert ident(sentinel) is sentinel
    assert asyncio.run(aident(sentinel)) is sentinel
    big = list(range(100_000))
    assert ident(big) is big


def test_explicit_kind_and_name(spans: InMemorySpanExporter) -> None:
    assert generate("hi") == "HI"
    a = attrs(named(spans, "generate"))
    assert a[A.KIND] == A.GPU
    assert A.CPU_NS in a
    assert A.IO_NS not in a and A.WAIT_NS not in a


def test_invalid_kind_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="kind"):
        trace(kind="disk")


def test_capture_args_exports_truncated_values(spans: InMemorySpanExporter) -> None:
    @trace(capture_args=True)
    def echo(text: str, n: int = 1) -> str:
        return text * n

    echo("abc" * 5000, n=2)
    add(1, 2)
    a = attrs(named(spans, "echo"))
    assert '"n": "2"' in a[A.ARGS_VALUE]
    assert len(a[A.ARGS_VALUE]) <= 2048 and len(a[A.RESULT_VALUE]) <= 2048
    assert "abcabc" in a[A.RESULT_VALUE]
    plain = attrs(named(spans, "add"))
    assert A.ARGS_VALUE not in plain and A.RESULT_VALUE not in plain


def test_spans_nest_through_the_context(spans: InMemorySpanExporter) -> None:
    @trace
    async def leaf(i: int) -> int:
        await asyncio.sleep(0)
        return add(i, 1)

    @trace
    async def root() -> list[int]:
        return list(await asyncio.gather(leaf(1), leaf(2)))

    assert asyncio.run(root()) == [2, 3]
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    root_span = named(spans, "root")
    leaves = [s for s in finished if s.name.endswith("leaf")]
    adds = [s for s in finished if s.name == "add"]
    assert len(leaves) == 2 and len(adds) == 2
    assert all(
        s.parent is not None and s.parent.span_id == root_span.context.span_id for s in leaves
    )
    for s in adds:
        assert s.parent is not None and by_id[s.parent.span_id].name.endswith("leaf")
    assert {s.context.trace_id for s in finished} == {root_span.context.trace_id}


def test_foreign_spans_nest_both_ways(spans: InMemorySpanExporter) -> None:
    tracer = provider().get_tracer("someone-else")

    @trace
    def ours() -> None:
        with tracer.start_as_current_span("theirs-inner"):
            pass

    with tracer.start_as_current_span("theirs-outer"):
        ours()
    outer, mine, inner = (named(spans, n) for n in ("theirs-outer", "ours", "theirs-inner"))
    assert mine.parent is not None and mine.parent.span_id == outer.context.span_id
    assert inner.parent is not None and inner.parent.span_id == mine.context.span_id


def test_pass_through_without_a_provider() -> None:
    out = ok(
        run_python(
            """
            import asyncio, inspect
            from tracelens_instrumentation import trace, _runtime

            @trace
            def f(x):
                return x + 1

            @trace
            async def g(x):
                await asyncio.sleep(0)
                return x * 2

            @trace
            def gen():
                got = yield 1
                yield got

            @trace
            async def agen():
                got = yield 1
                yield got

            async def use_agen():
                a = agen()
                return [await a.asend(None), await a.asend("back")]

            it = gen()
            print(f(1), asyncio.run(g(2)), next(it), it.send("sent"), asyncio.run(use_agen()))
            print(_runtime.TRACER is None)
            """
        )
    )
    assert out.split("\n")[:2] == ["2 4 1 sent [1, 'back']", "True"]


def test_import_is_light() -> None:
    out = ok(
        run_python(
            """
            import sys, time
            start = time.perf_counter()
            import tracelens_instrumentation
            from tracelens_instrumentation import trace, configure, flush
            took = time.perf_counter() - start
            heavy = [m for m in ("duckdb", "polars", "pyarrow", "numpy", "google.protobuf",
                                 "opentelemetry.sdk", "grpc", "requests") if m in sys.modules]
            print(heavy, tracelens_instrumentation.__all__)
            """
        )
    )
    assert out.strip() == "[] ['configure', 'flush', 'trace']"


def test_top_level_names() -> None:
    import tracelens_instrumentation as ti

    assert ti.trace is trace and ti.configure is configure and ti.flush is flush
    assert set(ti.__all__) == {"trace", "configure", "flush"}


def test_sampled_out_calls_behave_the_same() -> None:
    out = ok(
        run_python(
            """
            import asyncio
            from tracelens_instrumentation import trace, configure, flush
            configure(service_name="s", file="spans.jsonl", sample_rate=0.0)

            @trace
            def f(x):
                return x + 1

            @trace
            async def g(x):
                return f(x)

            @trace
            def gen():
                yield from range(3)

            print(f(1), asyncio.run(g(2)), list(gen()), flush())
            """,
            cwd=_tmp_cwd(),
        )
    )
    assert out.strip() == "2 3 [0, 1, 2] True"


def _tmp_cwd() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="tl-test-")


def test_decorator_never_breaks_on_hostile_arguments(spans: InMemorySpanExporter) -> None:
    class Hostile:
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("no eq")

        __hash__ = object.__hash__

        def __getattribute__(self, name: str) -> Any:
            if name in ("__class__", "__dict__"):
                raise RuntimeError(f"no {name}")
            return object.__getattribute__(self, name)

        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    @trace(capture_args=True)
    def takes(x: Any) -> Any:
        return x

    h = Hostile()
    assert takes(h) is h
    assert A.ARGS_HASH in attrs(named(spans, "takes"))


def test_functools_partial_and_callable_objects(spans: InMemorySpanExporter) -> None:
    class Scorer:
        def __call__(self, text: str) -> int:
            return len(text)

    scored = trace(name="score")(Scorer())
    assert scored("abcd") == 4
    partial_add = trace(functools.partial(lambda a, b: a + b, 1))
    assert partial_add(2) == 3
    assert next(s.name for s in spans.get_finished_spans()) == "score"


@pytest.mark.skipif(sys.platform != "linux", reason="schedstat and CPU clocks by kernel id")
def test_kernel_thread_readers() -> None:
    import threading

    from tracelens_instrumentation import measure, sampler

    me = threading.get_native_id()
    delay = sampler.run_delay(me)
    assert delay is not None and delay >= 0
    assert sampler.run_delay(2**22 + 12345) is None
    cpu = measure.other_thread_cpu(me)
    assert cpu is not None and abs(cpu - time.thread_time_ns()) < 50_000_000
    assert measure.other_thread_cpu(2**22 + 12345) is None  # no such thread: no crash


def test_a_reused_clock_reading_never_turns_computing_into_waiting() -> None:
    """The reference record: a reading taken 10 µs ago, the thread off the CPU since, is reused at
    the start of a step; the step computes for 12 µs and its end, past the reuse window, reads
    the clock.  Its CPU time must not come out short (nor beyond its wall time)."""
    import threading

    from tracelens_instrumentation import measure

    me = threading.get_ident()
    saved = measure._recent[0]
    try:
        for _ in range(50):  # until the start reused the reading (a preemption can spoil one)
            rec = measure.Record(False)
            now, cpu = measure.perf(), measure.thread_cpu()
            fake = measure._recent[0] = (me, now - 10_000, cpu)  # no CPU in the last 10 µs
            rec.step_begin(me)
            reused = measure._recent[0] is fake
            stop = rec.step_w + 12_000
            while measure.perf() < stop:  # compute
                pass
            rec.step_end()
            if reused and measure._recent[0] is not fake:  # reused at the start, read at the end
                break
        else:
            pytest.fail("the start of a step never reused a fresh reading")
    finally:
        measure._recent[0] = saved
    wall = rec.last_w - rec.step_w
    assert wall // 2 < rec.cpu <= wall


def _limited(limits: Any) -> tuple[Any, InMemorySpanExporter]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from tracelens_instrumentation import _runtime

    exporter = InMemorySpanExporter()
    limited = TracerProvider(span_limits=limits)
    limited.add_span_processor(SimpleSpanProcessor(exporter))
    return _runtime.activate(limited), exporter


def test_span_limits_are_kept(spans: InMemorySpanExporter) -> None:
    """Our attributes go into an SDK span's attribute dict directly only while that cannot break
    the provider's limits; otherwise through ``set_attributes``, which enforces them."""
    from opentelemetry.sdk.trace import SpanLimits

    @trace
    def busy(n: int) -> str:
        span = otel_trace.get_current_span()
        for i in range(n):
            span.set_attribute(f"app.{i}", i)
        return "a result long enough"

    for limits, filled in (
        (SpanLimits(max_span_attributes=20), 3),  # room for ours at the start and the end
        (SpanLimits(max_span_attributes=20), 19),  # the application fills it meanwhile
        (SpanLimits(max_span_attributes=6), 0),  # too few for ours from the start
        (SpanLimits(max_span_attribute_length=8), 0),  # values truncated: the public path
    ):
        _, exporter = _limited(limits)
        busy(filled)
        [span] = exporter.get_finished_spans()
        got = attrs(span)
        cap = limits.max_span_attributes
        assert len(got) <= cap, (limits, len(got))
        if limits.max_span_attribute_length:
            assert all(len(v) <= 8 for v in got.values() if isinstance(v, str))
            assert got[A.KIND] in A.MEASURED_KINDS
        elif cap >= 20:
            # the newest survive the limit: what we write at the end is there
            assert got[A.KIND] in ("cpu", "wait") and A.CPU_NS in got and A.RESULT_HASH in got
            if filled == 3:
                assert got[A.ARGS_HASH] and got["app.2"] == 2 and got[A.RESULT_FPS]
