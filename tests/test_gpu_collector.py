"""The live GPU collector where it cannot run: this machine has no GPU, no CUDA and no
cupti-python, which is the common case it must survive.  Each fallback is taken for real (the
import really fails, the environment really names an injection tool), logged once, and the
traced application goes on with spans that carry no GPU fields.  The trace-level fraction is
checked against its definition (the trace id's low 64 bits under fraction x 2^64).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_instrumentation_helpers import attrs, named, ok, run_python, spans
from tracelens_instrumentation import attributes as A
from tracelens_instrumentation import gpu, trace

__all__ = ["spans"]  # fixture, imported for pytest


@pytest.fixture
def fresh() -> Iterator[None]:
    gpu.reset()
    try:
        yield
    finally:
        gpu.reset()


def test_no_cuda_in_use_nothing_starts(fresh: None) -> None:
    assert not gpu.device_runtime_in_use()  # nothing imported torch / cupy here
    gpu.detect(10**12)
    assert gpu.STATE["status"] == "idle" and not gpu.ON[0]


def test_no_cupti_falls_back_once_and_the_app_goes_on(
    fresh: None, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tracelens"):
        assert gpu.start() is False
        assert gpu.start() is False
    assert gpu.STATE["status"] == "off" and "cupti-python unavailable" in gpu.STATE["reason"]
    logged = [r for r in caplog.records if "GPU activity not recorded" in r.getMessage()]
    assert len(logged) == 1, caplog.text
    assert not gpu.ON[0]

    @trace
    def step() -> int:
        return 41 + 1

    assert step() == 42
    a = attrs(named(spans, "step"))
    assert not any(k.startswith("tracelens.gpu") for k in a), a


def test_another_profiler_owning_cupti_falls_back(
    fresh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nsight/libToolsInjection64.so")
    assert gpu.start() is False
    assert "Nsight" in gpu.STATE["reason"]


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.25, 1.0])
def test_fraction_of_traces_measured(fraction: float) -> None:
    before = gpu.FRACTION[0]
    gpu.set_fraction(fraction)
    try:
        rng = random.Random(7)
        n = 20_000
        hits = sum(gpu.measured(rng.getrandbits(128)) for _ in range(n))
    finally:
        gpu.set_fraction(before)
    sigma = (n * fraction * (1 - fraction)) ** 0.5
    assert abs(hits - n * fraction) <= 4 * sigma + 1, (hits, fraction)
    # a trace's answer is the same in every span: it depends on the trace id alone
    tid = 0x0123456789ABCDEF_0000000000000001
    assert gpu.measured(tid) == gpu.measured(tid)


def test_fraction_from_configure_and_environment() -> None:
    out = ok(
        run_python(
            "from tracelens_instrumentation import configure, gpu\n"
            "print(gpu.FRACTION[0])\n"
            "configure(service_name='t', file='/dev/null', gpu_fraction=0.5)\n"
            "print(gpu.FRACTION[0])\n"
            "configure(gpu_fraction=7)\n"
            "print(gpu.FRACTION[0])\n",
            env={"TRACELENS_GPU_FRACTION": "0.3", "OTEL_TRACES_EXPORTER": "none"},
        )
    )
    assert out.split() == ["0.3", "0.5", "1.0"], out
    out = ok(
        run_python(
            "from tracelens_instrumentation import gpu\nprint(gpu.FRACTION[0])\n",
            env={"TRACELENS_GPU_FRACTION": "lots"},
        )
    )
    assert out.split()[-1] == str(gpu.DEFAULT_FRACTION), out


def test_import_loads_no_gpu_library() -> None:
    out = ok(
        run_python(
            "import sys\nimport tracelens_instrumentation\n"
            "from tracelens_instrumentation import trace\n"
            "print(sorted(m for m in ('torch', 'cupti', 'cupy', 'jax') if m in sys.modules))\n"
        )
    )
    assert out.strip().splitlines()[-1] == "[]", out


def test_spans_carry_the_measured_mark_only_while_collecting(
    fresh: None, spans: InMemorySpanExporter
) -> None:
    @trace
    def step() -> None:
        return None

    step()
    assert A.GPU_MEASURED not in attrs(named(spans, "step"))
