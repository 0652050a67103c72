"""``tracelens.cpu_stacks``: the decorator's CPU stacks, checked on real workloads.

Each workload knows which functions it runs and (by ``thread_time``) for how long, so the
exported stacks are checked against that: the span's own function is the outermost frame, the
code it calls appears below it, no frame of the decorator appears, a child span's code is in the
child's stacks and not the parent's, the bounds hold, and the attribute survives ingestion into
the store's ``attributes`` column.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_instrumentation_helpers import attrs, named, ok, run_python, spans
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation import stacks, trace

__all__ = ["spans"]  # fixture, imported for pytest

pytestmark = [
    pytest.mark.measures,
    pytest.mark.skipif(
        not sys.platform.startswith("linux"),
        reason="the sampler reads per-thread CPU clocks (Linux)",
    ),
]
LINE = re.compile(r"^(?P<stack>[^ ;]+(?:;[^ ;]+)*) (?P<us>[1-9][0-9]*)$")
MODULE = __name__


@pytest.fixture
def profiling() -> Iterator[None]:
    before = stacks.ENABLED[0]
    stacks.ENABLED[0] = True
    try:
        yield
    finally:
        stacks.ENABLED[0] = before


def parse(values: object) -> list[tuple[list[str], int]]:
    assert isinstance(values, tuple), values  # an OTLP string array
    out = []
    for line in values:
        m = LINE.match(line)
        assert m, line
        out.append((m["stack"].split(";"), int(m["us"])))
    return out


def burn_json(seconds: float) -> None:
    """``json.dumps`` for ``seconds`` of this thread's CPU.  The calls run 50 at a time inside
    ``map`` so that this function's own loop, where the sampler would often find the thread (it
    reads stacks where the thread yields the GIL, at a loop's jump back among other places),
    turns once per 50 calls: nearly all of the time, and of the samples, is in ``json``."""
    data = [{"id": i, "text": "x" * 40, "tags": list(range(12))} for i in range(40)]
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        deque(map(json.dumps, repeat(data, 50)), maxlen=0)


def spin_here(seconds: float) -> None:
    end = time.thread_time() + seconds
    total = 0
    while time.thread_time() < end:
        for i in range(200):
            total += i * i


@trace
def serialise_step() -> None:
    burn_json(0.25)


@trace
def child_step() -> None:
    spin_here(0.15)


@trace
def parent_step() -> None:
    burn_json(0.15)
    child_step()


def test_stacks_name_the_code_below_the_span(spans: InMemorySpanExporter, profiling: None) -> None:
    start = time.thread_time_ns()
    serialise_step()
    used = time.thread_time_ns() - start
    a = attrs(named(spans, "serialise_step"))
    got = parse(a[A.CPU_STACKS])
    for frames, _ in got:
        assert frames[0] == f"{MODULE}:serialise_step", frames
        assert not any(f.startswith("tracelens_instrumentation") for f in frames), frames
        assert not any(f.endswith((":wrapper", ":_Stepper.__await__")) for f in frames), frames
    total_us = sum(us for _, us in got)
    json_us = sum(us for frames, us in got if "json:dumps" in frames)
    # Samples cover the CPU the thread used between them: most of the measured total.
    assert 0.6 * used / 1000 <= total_us <= 1.05 * used / 1000, (total_us, used)
    assert json_us >= 0.9 * total_us, got
    assert any(f"{MODULE}:burn_json" in frames for frames, _ in got)


def test_child_code_is_in_the_childs_stacks(spans: InMemorySpanExporter, profiling: None) -> None:
    parent_step()
    parent = parse(attrs(named(spans, "parent_step"))[A.CPU_STACKS])
    child = parse(attrs(named(spans, "child_step"))[A.CPU_STACKS])
    assert all(frames[0] == f"{MODULE}:parent_step" for frames, _ in parent)
    assert not any(f"{MODULE}:spin_here" in frames for frames, _ in parent), parent
    assert all(frames[0] == f"{MODULE}:child_step" for frames, _ in child), child
    assert sum(us for f, us in child if f"{MODULE}:spin_here" in f) >= 0.9 * sum(
        us for _, us in child
    )


def test_coroutines_and_generators(spans: InMemorySpanExporter, profiling: None) -> None:
    @trace
    async def coro_step() -> None:
        await asyncio.sleep(0)
        burn_json(0.1)
        await asyncio.sleep(0)
        spin_here(0.1)

    @trace
    def gen_step() -> Iterator[int]:
        for i in range(2):
            burn_json(0.06)
            yield i

    asyncio.run(coro_step())
    assert list(gen_step()) == [0, 1]
    for name, fn in (("coro_step", "test_coroutines_and_generators.coro_step"),
                     ("gen_step", "test_coroutines_and_generators.gen_step")):  # fmt: skip
        got = parse(attrs(named(spans, name))[A.CPU_STACKS])
        assert got, name
        for frames, _ in got:
            assert frames[0] == f"{MODULE}:{fn}", frames
            assert not any(f.startswith("tracelens_instrumentation") for f in frames), frames
    coro = parse(attrs(named(spans, "coro_step"))[A.CPU_STACKS])
    assert any(f"{MODULE}:burn_json" in f for f, _ in coro)
    assert any(f"{MODULE}:spin_here" in f for f, _ in coro)


def test_switched_off(spans: InMemorySpanExporter) -> None:
    before = stacks.ENABLED[0]
    stacks.ENABLED[0] = False
    try:
        serialise_step()
    finally:
        stacks.ENABLED[0] = before
    assert A.CPU_STACKS not in attrs(named(spans, "serialise_step"))


def test_default_and_switches() -> None:
    """On by default; ``TRACELENS_PROFILE=0`` or ``configure(profile=False)`` switch it off."""
    code = """
        from tracelens_instrumentation import configure, stacks
        print(stacks.ENABLED[0])
        configure(profile=False)
        print(stacks.ENABLED[0])
        configure(profile=True)
        print(stacks.ENABLED[0])
        """
    env = {"OTEL_TRACES_EXPORTER": "none", "TRACELENS_PROFILE": ""}
    assert ok(run_python(code, env=env)).split() == ["True", "False", "True"]
    env["TRACELENS_PROFILE"] = "0"
    assert ok(run_python(code, env=env)).split()[0] == "False"


def test_deep_recursion_is_cut_to_the_stated_depth(
    spans: InMemorySpanExporter, profiling: None
) -> None:
    def down(n: int) -> None:
        if n:
            down(n - 1)
        else:
            spin_here(0.1)

    @trace
    def deep() -> None:
        down(100)

    deep()
    got = parse(attrs(named(spans, "deep"))[A.CPU_STACKS])
    assert got
    for frames, _ in got:
        assert len(frames) <= stacks.MAX_DEPTH
    longest = max((f for f, _ in got), key=len)
    assert longest[0].endswith(":test_deep_recursion_is_cut_to_the_stated_depth.deep")
    assert stacks.TRUNCATED in longest
    assert longest[-1].endswith(":spin_here") or longest[-2].endswith(":spin_here")


def test_encode_bounds() -> None:
    """Many distinct, long stacks: the stated bounds hold and no CPU time is lost."""
    prof = {
        ("mod:root", *(f"pkg.module_{i}:function_{j}_{'x' * 60}" for j in range(30))): 1000 + i
        for i in range(500)
    }
    out = stacks.encode(prof)
    assert len(out) <= stacks.MAX_STACKS
    assert sum(len(s) + 1 for s in out) <= stacks.MAX_ATTR_CHARS
    assert out[-1].startswith(f"mod:root;{stacks.OTHER} ")
    total_us = sum(int(s.rsplit(" ", 1)[1]) for s in out)
    assert abs(total_us - sum(prof.values()) / 1000) <= len(out)  # rounding per entry only
    kept = [int(s.rsplit(" ", 1)[1]) for s in out[:-1]]
    assert kept == sorted(kept, reverse=True)  # the heaviest are the ones kept


def test_frame_names_cannot_break_the_format() -> None:
    code = compile("def f(): pass", "<x>", "exec").co_consts[0]
    hostile = code.replace(co_name="a b;c\nd", co_qualname="a b;c\nd")
    name = stacks.frame_name(hostile, "my mod")
    assert " " not in name and ";" not in name and "\n" not in name
    assert name == "my_mod:a_b_c_d"


def test_cpu_stacks_reach_the_store(tmp_path: Path) -> None:
    """configure(profile=True) in a fresh process, OTLP JSON Lines, `tracelens import` into
    DuckDB: the store's ``attributes`` column holds the stacks as the string array written."""
    spans_file = tmp_path / "spans.jsonl"
    ok(
        run_python(
            f"""
            import json, time
            from tracelens_instrumentation import configure, flush, trace
            configure(service_name="stacks", file={str(spans_file)!r}, profile=True)

            @trace
            def work():
                data = [{{"k": i, "v": "x" * 30}} for i in range(50)]
                end = time.thread_time() + 0.2
                while time.thread_time() < end:
                    json.dumps(data)

            work()
            assert flush()
            """,
            env={"OTEL_TRACES_EXPORTER": "none"},
        )
    )
    db = tmp_path / "spans.duckdb"
    imported = subprocess.run(
        [sys.executable, "-m", "tracelens", "import", str(spans_file), "--db", str(db)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    from tracelens.schema import attribute_dict
    from tracelens.store import open_store

    with open_store(str(db), read_only=True) as store:
        table = store.read(["name", "attributes", "json_attributes"])
    rows = table.to_pylist()
    assert [r["name"] for r in rows] == ["work"]
    row = attribute_dict([(k, v) for k, v in rows[0]["attributes"]], rows[0]["json_attributes"])
    got = parse(tuple(row[A.CPU_STACKS]))
    assert got and all(f[0] == "__main__:work" for f, _ in got)
    assert any("json:dumps" in f for f, _ in got)
