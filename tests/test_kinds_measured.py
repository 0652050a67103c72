"""Measured kinds against a workload whose truth is known.

Each workload function measures its own truth: the CPU time of the segments where it runs
(``thread_time`` deltas between its awaits or yields), and knows what it blocks on (a CPU
burner, an HTTP server with a known delay, sleeps, locks, queues, events, other tasks, pipes).
Every span must get the right ``tracelens.kind``, and ``tracelens.cpu_ns`` must be within
10 % (or 5 ms) of the truth; a coroutine's suspended time and a generator's gaps must not count.
"""

from __future__ import annotations

import asyncio
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import requests
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_instrumentation_helpers import (
    DelayServer,
    attrs,
    delay_server,
    named,
    provider,
    spans,
    spin,
    within,
)
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation import trace

pytestmark = pytest.mark.measures

__all__ = ["delay_server", "spans"]  # fixtures, imported for pytest

DELAY = 0.15
truth: dict[str, int] = {}


class Segments:
    """Sums this thread's CPU time over the segments a function runs (its own truth)."""

    def __init__(self) -> None:
        self.total = 0
        self.start = time.thread_time_ns()

    def pause(self) -> None:
        self.total += time.thread_time_ns() - self.start

    def resume(self) -> None:
        self.start = time.thread_time_ns()

    def done(self, name: str) -> None:
        self.pause()
        truth[name] = self.total


def check(exporter: InMemorySpanExporter, name: str, kind: str) -> dict[str, Any]:
    a = attrs(named(exporter, name))
    assert a[A.KIND] == kind, (name, a)
    if name in truth:
        assert within(a[A.CPU_NS], truth[name]), (name, a[A.CPU_NS], truth[name])
    return a


@pytest.fixture(scope="module")
def clients(delay_server: DelayServer) -> Iterator[dict[str, Any]]:
    """HTTP clients warmed up outside any span (imports and TLS setup are not the workload)."""
    session = requests.Session()
    client = httpx.Client()
    session.get(delay_server.url(0)).raise_for_status()
    client.get(delay_server.url(0)).raise_for_status()
    urllib.request.urlopen(delay_server.url(0)).read()
    yield {"requests": session, "httpx": client, "url": delay_server.url(DELAY)}
    session.close()
    client.close()


# -- sync, on the calling thread ---------------------------------------------------------------


@trace
def burn() -> None:
    seg = Segments()
    spin(60)
    seg.done("burn")


@trace
def get_requests(session: requests.Session, url: str) -> int:
    seg = Segments()
    status = session.get(url).status_code
    seg.done("get_requests")
    return status


@trace
def get_httpx(client: httpx.Client, url: str) -> int:
    seg = Segments()
    status = client.get(url).status_code
    seg.done("get_httpx")
    return status


@trace
def get_urllib(url: str) -> bytes:
    seg = Segments()
    body = urllib.request.urlopen(url).read()
    seg.done("get_urllib")
    return bytes(body)


@trace
def nap() -> None:
    time.sleep(0.1)


@trace
def take_lock(lock: Any) -> None:
    with lock:
        pass


@trace
def take_item(q: queue.Queue[int]) -> int:
    return q.get()


@trace
def await_event(event: threading.Event) -> None:
    event.wait()


@trace
def read_pipe(fd: int) -> bytes:
    return os.read(fd, 16)


@trace(kind="gpu")
def gpu_step() -> None:
    time.sleep(0.05)


def _later(seconds: float, fn: Any, *args: Any) -> None:
    timer = threading.Timer(seconds, fn, args)
    timer.daemon = True
    timer.start()


def test_sync_kinds(spans: InMemorySpanExporter, clients: dict[str, Any]) -> None:
    burn()
    get_requests(clients["requests"], clients["url"])
    get_httpx(clients["httpx"], clients["url"])
    get_urllib(clients["url"])
    nap()
    lock = threading.Lock()
    lock.acquire()
    _later(0.1, lock.release)
    take_lock(lock)
    q: queue.Queue[int] = queue.Queue()
    _later(0.1, q.put, 1)
    take_item(q)
    event = threading.Event()
    _later(0.1, event.set)
    await_event(event)
    r, w = os.pipe()
    _later(0.1, os.write, w, b"data")
    read_pipe(r)
    os.close(r)
    os.close(w)
    gpu_step()

    check(spans, "burn", A.CPU)
    for name in ("get_requests", "get_httpx", "get_urllib"):
        a = check(spans, name, A.IO)
        assert a[A.IO_NS] >= 0.8 * DELAY * 1e9, (name, a)
    for name in ("nap", "take_lock", "take_item", "await_event"):
        a = check(spans, name, A.WAIT)
        assert a[A.WAIT_NS] >= 80e6 and within(a[A.CPU_NS], 0), (name, a)
    assert check(spans, "read_pipe", A.IO)[A.IO_NS] >= 80e6
    assert check(spans, "gpu_step", A.GPU)[A.CPU_NS] < 5e6


# -- async, on one event loop ------------------------------------------------------------------


@trace
async def think_then_sleep() -> None:
    """CPU, a sleep during which another task burns CPU on the same loop, CPU again."""
    seg = Segments()
    spin(15)
    seg.pause()
    await asyncio.sleep(0.25)
    seg.resume()
    spin(15)
    seg.done("think_then_sleep")


async def hog() -> None:
    await asyncio.sleep(0.01)
    spin(60)


@trace
async def athink() -> None:
    seg = Segments()
    spin(40)
    seg.pause()
    await asyncio.sleep(0)
    seg.resume()
    spin(20)
    seg.done("athink")


@trace
async def aget_httpx(client: httpx.AsyncClient, url: str) -> int:
    seg = Segments()
    request = client.get(url)
    seg.pause()
    response = await request
    seg.done("aget_httpx")
    return response.status_code


@trace
async def aget_stream(host: str, port: int) -> int:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET /delay/{DELAY} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    await writer.wait_closed()
    return len(data)


@trace
async def aget_with_timeout(client: httpx.AsyncClient, url: str) -> int:
    response = await asyncio.wait_for(client.get(url), timeout=10)
    return response.status_code


@trace
async def asleep() -> None:
    await asyncio.sleep(0.1)


@trace
async def aqueue(q: asyncio.Queue[int]) -> int:
    return await q.get()


@trace
async def alock(lock: asyncio.Lock) -> None:
    async with lock:
        pass


@trace
async def asemaphore(sem: asyncio.Semaphore) -> None:
    async with sem:
        pass


@trace
async def aevent(event: asyncio.Event) -> None:
    await event.wait()


@trace
async def another_task() -> None:
    await asyncio.create_task(asyncio.sleep(0.1))


class RateLimiter:
    """A token bucket that sleeps until the next token: the typical agent rate limiter."""

    def __init__(self, per_second: float) -> None:
        self.interval = 1 / per_second
        self.next = time.monotonic()

    async def acquire(self) -> None:
        now = time.monotonic()
        wait = max(0.0, self.next - now)
        self.next = max(now, self.next) + self.interval
        await asyncio.sleep(wait)


@trace
async def rate_limited(limiter: RateLimiter) -> None:
    await limiter.acquire()


@trace(kind="gpu")
async def agpu_step() -> None:
    await asyncio.sleep(0.05)


async def _async_workload(delay_server: DelayServer) -> None:
    loop = asyncio.get_running_loop()
    hogging = asyncio.create_task(hog())
    await think_then_sleep()
    await hogging
    await athink()
    async with httpx.AsyncClient() as client:
        await client.get(delay_server.url(0))  # warm-up outside the spans
        await aget_httpx(client, delay_server.url(DELAY))
        await aget_with_timeout(client, delay_server.url(DELAY))
    await aget_stream("127.0.0.1", delay_server.server.server_address[1])
    await asleep()
    q: asyncio.Queue[int] = asyncio.Queue()
    loop.call_later(0.1, q.put_nowait, 1)
    await aqueue(q)
    lock = asyncio.Lock()
    await lock.acquire()
    loop.call_later(0.1, lock.release)
    await alock(lock)
    sem = asyncio.Semaphore(1)
    await sem.acquire()
    loop.call_later(0.1, sem.release)
    await asemaphore(sem)
    event = asyncio.Event()
    loop.call_later(0.1, event.set)
    await aevent(event)
    await another_task()
    limiter = RateLimiter(per_second=10)
    await limiter.acquire()
    await rate_limited(limiter)
    await agpu_step()


def test_async_kinds(spans: InMemorySpanExporter, delay_server: DelayServer) -> None:
    asyncio.run(_async_workload(delay_server))
    a = check(spans, "think_then_sleep", A.WAIT)  # 30 ms CPU, > 250 ms suspended
    assert a[A.WAIT_NS] >= 200e6
    check(spans, "athink", A.CPU)
    for name in ("aget_httpx", "aget_stream", "aget_with_timeout"):
        a = check(spans, name, A.IO)
        assert a[A.IO_NS] >= 0.8 * DELAY * 1e9, (name, a)
    for name in ("asleep", "aqueue", "alock", "asemaphore", "aevent", "another_task"):
        a = check(spans, name, A.WAIT)
        assert a[A.WAIT_NS] >= 80e6 and a[A.CPU_NS] < 5e6, (name, a)
    assert check(spans, "rate_limited", A.WAIT)[A.WAIT_NS] >= 50e6
    check(spans, "agpu_step", A.GPU)


# -- threads doing each ------------------------------------------------------------------------


def test_threads_each_kind(spans: InMemorySpanExporter, clients: dict[str, Any]) -> None:
    lock = threading.Lock()
    lock.acquire()
    _later(0.15, lock.release)
    jobs = [
        burn,
        lambda: get_requests(clients["requests"], clients["url"]),
        nap,
        lambda: take_lock(lock),
    ]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()
    check(spans, "burn", A.CPU)
    check(spans, "get_requests", A.IO)
    check(spans, "nap", A.WAIT)
    check(spans, "take_lock", A.WAIT)


# -- generators, nesting, other instrumentations -------------------------------------------


@trace
def produce(n: int) -> Iterator[int]:
    seg = Segments()
    for i in range(n):
        spin(10)
        seg.pause()
        yield i
        seg.resume()
    seg.done("produce")


@trace
async def aproduce(n: int) -> AsyncIterator[int]:
    seg = Segments()
    for i in range(n):
        spin(10)
        seg.pause()
        await asyncio.sleep(0.05)
        yield i
        seg.resume()
    seg.done("aproduce")


def test_generators_count_only_while_running(spans: InMemorySpanExporter) -> None:
    for _ in produce(3):
        spin(30)  # the consumer's CPU is not the generator's

    async def consume() -> None:
        async for _ in aproduce(3):
            await asyncio.sleep(0.01)

    asyncio.run(consume())
    a = check(spans, "produce", A.WAIT)  # 30 ms of its own, ~90 ms waiting for its consumer
    assert a[A.WAIT_NS] >= 60e6
    b = check(spans, "aproduce", A.WAIT)
    assert b[A.WAIT_NS] >= 120e6


@trace
def parent_of_sleeper() -> None:
    seg = Segments()
    spin(40)
    seg.pause()
    nap()
    seg.resume()
    spin(40)
    seg.done("parent_of_sleeper")


def test_children_are_not_self_time(spans: InMemorySpanExporter) -> None:
    parent_of_sleeper()
    a = check(spans, "parent_of_sleeper", A.CPU)  # 80 ms own CPU; the 100 ms nap is the child's
    assert a.get(A.WAIT_NS, 0) < 10e6 and a.get(A.IO_NS, 0) < 5e6
    check(spans, "nap", A.WAIT)


def test_other_instrumentations_children_are_not_self_time(
    spans: InMemorySpanExporter, clients: dict[str, Any]
) -> None:
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    client = httpx.Client()
    HTTPXClientInstrumentor().instrument_client(client, tracer_provider=provider())
    try:
        client.get(clients["url"].rsplit("/", 1)[0] + "/0")

        @trace
        def calls_api() -> int:
            spin(20)
            return client.get(clients["url"]).status_code

        calls_api()
    finally:
        HTTPXClientInstrumentor().uninstrument_client(client)
        client.close()
    http_span = [s for s in spans.get_finished_spans() if s.name == "GET"][-1]
    ours = named(spans, "calls_api")
    assert http_span.parent is not None and http_span.parent.span_id == ours.context.span_id
    a = attrs(ours)
    # The 150 ms the server takes lie inside the GET span: not this span's own io.  (What
    # remains, reading the body after the GET span ended, competes for the GIL with the
    # in-process server thread, so it is not asserted to be zero.)
    assert a.get(A.IO_NS, 0) + a.get(A.WAIT_NS, 0) < 0.5 * DELAY * 1e9, a


def test_blocking_call_inside_a_coroutine(spans: InMemorySpanExporter) -> None:
    """A sync sleep on the event loop thread is caught by the stack sampler."""

    @trace
    async def blocks_the_loop() -> None:
        time.sleep(0.1)

    asyncio.run(blocks_the_loop())
    a = check(spans, "blocks_the_loop", A.WAIT)
    assert a[A.WAIT_NS] >= 80e6


# -- an overloaded machine -----------------------------------------------------------------------


@trace
def doze() -> None:
    time.sleep(0.05)


def _run_delay() -> int:
    """This thread's time runnable but waiting for a CPU, from the kernel (schedstat)."""
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as fh:
        return int(fh.read().split()[1])


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/schedstat"), reason="Linux schedstat")
def test_an_overloaded_machine_stretches_what_a_span_does_without_changing_it(
    spans: InMemorySpanExporter,
) -> None:
    """A loop preempted by other processes stays CPU; a sleep they delay stays a wait.

    One busy process more than there are cores takes turns with the loop (``parent_of_sleeper``:
    80 ms of computing around a child that sleeps), so it spends much
    of its time runnable, waiting for a core.  The truth is the kernel's: the test reads the
    thread's run delay around the call and checks its own premise (the parent was off the CPU
    for at least 20 ms of its own time, nine tenths of that runnable).  Preemption is not
    waiting: wait_ns may hold only the off-CPU time the run delay does not explain, plus a tenth
    of the off-CPU time (a step's ends fall between the sampler's ticks)."""
    cores = len(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores + 1)]
    try:
        time.sleep(0.2)  # the hogs are running
        doze()  # the sampler is awake
        before = _run_delay()
        t0 = time.perf_counter_ns()
        parent_of_sleeper()
        wall = time.perf_counter_ns() - t0
        delay = _run_delay() - before
        doze()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    a = check(spans, "parent_of_sleeper", A.CPU)
    child = named(spans, "nap")
    off = wall - (child.end_time or 0) + (child.start_time or 0) - a[A.CPU_NS]
    assert off >= 20e6 and delay >= 0.9 * off, (off, delay)  # the premise: preempted
    assert a.get(A.WAIT_NS, 0) <= max(0, off - delay) + 0.1 * off, (a, off, delay)
    assert a.get(A.IO_NS, 0) == 0
    dozes = [s for s in spans.get_finished_spans() if s.name.endswith("doze")]
    assert [attrs(s)[A.KIND] for s in dozes] == [A.WAIT, A.WAIT]
