"""``tracelens size`` checked by measurement on the demo agent (issue 13, "Sizing").

Each case runs the real demo (its tool server and simulated model server on a thread, the
agent on the main thread's event loop, spans exported to an OTLP JSON Lines file) in a child
process: this file run as a script.  The child brackets the agent's run (the demo's ``probe``
hook) with psutil and reports

* the agent's CPU seconds: the process's CPU times over the run, minus the servers' thread
  (they stand for other services), plus what exporting the run's spans cost at the final flush;
* the wall time of the run, so the agent's measured utilisation of its one core (one event
  loop: ``--cores 1``) is CPU seconds / wall seconds;
* how busy the event loop was: the main thread's time on a CPU plus its time runnable but
  waiting for one (``/proc/.../schedstat``), over wall time; 1.0 is a saturated loop.

The sizing sees only the traces: asked for the concurrency the run had and the mean latency
its traces show (Little's law: the arrival rate that concurrency and latency imply), it must
predict that utilisation within 20%, and name the binding resource: the model when one model
slot serves eight requests in flight (the demo's own counter says nearly every call queued,
while the loop had time to spare), the CPU when there are more slots than requests and the
simulated delays are cut to 2% (no call queued, the loop measured saturated).  The loop's
busy time needs Linux's schedstat; elsewhere only the queue counts are checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Measured clocks of real runs (the demo agent's), judged against thresholds: run alone.
pytestmark = pytest.mark.measures

ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = 0.20


@dataclass(frozen=True)
class Case:
    name: str
    requests: int
    concurrency: int
    model_slots: int
    speed: float


CASES = (
    Case("low", requests=16, concurrency=2, model_slots=2, speed=0.3),
    # One model slot for eight requests in flight.
    Case("model_bound", requests=32, concurrency=8, model_slots=1, speed=0.5),
    # Delays cut to 2%, more model slots than requests in flight: the agent's CPU is left.
    Case("cpu_bound", requests=36, concurrency=6, model_slots=12, speed=0.02),
)


# -- the child: one demo run, measured ------------------------------------------------------
def _schedstat_s() -> float | None:
    """This thread's time on a CPU plus time runnable waiting for one (Linux), seconds."""
    try:
        with open("/proc/thread-self/schedstat") as fh:
            on_cpu, waiting, _ = fh.read().split()
    except OSError:
        return None
    return (int(on_cpu) + int(waiting)) / 1e9


def _drive(case: Case, file: str) -> dict[str, Any]:
    import psutil

    from tracelens.demo.runner import DemoOptions, ServerThread, run_demo

    proc = psutil.Process()

    def cpu() -> float:
        t = proc.cpu_times()
        return float(t.user + t.system)

    def thread_cpu(tid: int | None) -> float:
        return sum(t.user_time + t.system_time for t in proc.threads() if t.id == tid)

    marks: dict[str, tuple[float, float, float, float | None]] = {}

    def probe(phase: str, servers: ServerThread) -> None:
        # Called on the agent's loop thread, so schedstat is the loop's.
        marks[phase] = (time.perf_counter(), cpu(), thread_cpu(servers.native_id), _schedstat_s())

    options = DemoOptions(
        requests=case.requests,
        concurrency=case.concurrency,
        seed=1,
        endpoint=None,
        file=file,
        model_slots=case.model_slots,
        speed=case.speed,
        use_vllm=False,
    )
    summary = run_demo(options, echo=lambda _: None, probe=probe)
    after = cpu()  # the spans' export, flushed when the run is over
    (t0, c0, s0, b0), (t1, c1, s1, b1) = marks["start"], marks["end"]
    wall = t1 - t0
    return {
        "summary": summary.to_dict(),
        "wall_s": wall,
        "process_cpu_s": c1 - c0,
        "servers_cpu_s": s1 - s0,
        "flush_cpu_s": after - c1,
        "agent_cpu_s": (c1 - c0) - (s1 - s0) + (after - c1),
        "loop_busy": None if b0 is None or b1 is None else (b1 - b0) / wall,
    }


# -- the test ------------------------------------------------------------------------------
@dataclass
class Measured:
    case: Case
    run: dict[str, Any]
    file: Path

    @property
    def utilisation(self) -> float:
        return float(self.run["agent_cpu_s"]) / float(self.run["wall_s"])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.pop("TRACELENS_VLLM_MODEL", None)
    return env


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Measured]:
    pytest.importorskip("psutil")
    tmp = tmp_path_factory.mktemp("sizing")
    out: dict[str, Measured] = {}
    for case in CASES:
        file = tmp / f"{case.name}.jsonl"
        done = subprocess.run(
            [sys.executable, __file__, case.name, str(file)],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
            cwd=ROOT,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        run = json.loads(done.stdout.strip().splitlines()[-1])
        assert run["summary"]["requests"] == case.requests and run["summary"]["failed"] == 0
        out[case.name] = Measured(case, run, file)
    return out


def _mean_latency_ms(file: Path) -> float:
    """Mean end-to-end latency of the run's requests, straight from the root spans."""
    from tracelens.api import load_spans

    spans = load_spans([file]).spans
    rows = [
        (s, e)
        for s, e, p in zip(
            spans["start_ns"].to_pylist(),
            spans["end_ns"].to_pylist(),
            spans["parent_span_id"].to_pylist(),
            strict=True,
        )
        if p is None
    ]
    return sum(e - s for s, e in rows) / len(rows) / 1e6


def _size(m: Measured) -> Any:
    from tracelens.api import size

    return size(
        [m.file],
        concurrency=m.case.concurrency,
        latency_target_ms=_mean_latency_ms(m.file),
        cores=1,
        model_slots=m.case.model_slots,
    )


@pytest.mark.parametrize("name", [c.name for c in CASES])
@pytest.mark.system
def test_predicted_cpu_utilisation_matches_psutil(runs: dict[str, Measured], name: str) -> None:
    m = runs[name]
    sizing = _size(m)
    cpu = next(r for r in sizing.resources if r.name == "cpu")
    predicted = cpu.current_utilisation
    assert predicted is not None
    err = predicted / m.utilisation - 1
    assert abs(err) <= TOLERANCE, (name, predicted, m.utilisation, m.run)


@pytest.mark.system
def test_model_binds_when_one_slot_serves_eight_requests(runs: dict[str, Measured]) -> None:
    m = runs["model_bound"]
    # Truth: nearly every model call found the one slot taken while the agent's loop had time
    # to spare, so the slot, not the CPU, held the requests back.  (Queueing alone would not
    # say so: a saturated loop holds slots longer too.)
    s = m.run["summary"]
    assert s["queue_waits"] >= 0.8 * s["model_calls"], s
    if m.run["loop_busy"] is not None:
        assert m.run["loop_busy"] < 0.7, m.run
    sizing = _size(m)
    assert sizing.binding == "model", sizing.to_dict()
    model = next(r for r in sizing.resources if r.name == "model")
    assert model.current_utilisation is not None and model.current_utilisation > 0.8


@pytest.mark.system
def test_cpu_binds_when_slots_are_plenty_and_delays_short(runs: dict[str, Measured]) -> None:
    m = runs["cpu_bound"]
    # Truth: no model call ever queued (more slots than requests in flight) and the agent's
    # loop was never idle.
    assert m.run["summary"]["queue_waits"] == 0, m.run
    if m.run["loop_busy"] is not None:
        assert m.run["loop_busy"] >= 0.8, m.run
    sizing = _size(m)
    assert sizing.binding == "cpu", sizing.to_dict()


# -- the new fields, on traces with hand-derived answers ------------------------------------
MS = 1_000_000


def _hand_traces(engine: bool) -> list[dict[str, Any]]:
    """Four requests of 100, 100, 100 and 300 ms (mean 150, median 100), each with 20 ms of
    CPU in ``plan`` and one 60 ms model call; ``engine``: the call carries vLLM's own timings
    (10 + 30 ms), as an engine span does."""
    from tracelens_instrumentation import attributes as A

    rows: list[dict[str, Any]] = []
    for k, dur in enumerate((100, 100, 100, 300)):
        t, tr = 10**12 + k * 10**9, f"{k + 1:032x}"
        call: dict[str, Any] = {
            A.GEN_AI_OPERATION_NAME: "chat",
            A.GEN_AI_USAGE_INPUT_TOKENS: 10,
            A.GEN_AI_USAGE_OUTPUT_TOKENS: 5,
        }
        if engine:
            call[A.GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL] = 0.010
            call[A.GEN_AI_LATENCY_TIME_IN_MODEL_DECODE] = 0.030
        rows += [
            {"id": 0, "trace": tr, "start": t, "end": t + dur * MS, "name": "handle"},
            {"id": 1, "trace": tr, "parent": 0, "start": t, "end": t + 20 * MS, "name": "plan",
             "attributes": {A.KIND: "cpu", A.CPU_NS: 20 * MS}},
            {"id": 2, "trace": tr, "parent": 0, "start": t + 30 * MS, "end": t + 90 * MS,
             "name": "chat", "attributes": call},
        ]  # fmt: skip
    return rows


@pytest.mark.parametrize("engine", [False, True])
def test_current_utilisation_and_mean_latency_by_hand(engine: bool) -> None:
    from spans import make_spans

    from tracelens.analysis.core import analyze_traces
    from tracelens.analysis.sizing import size_traces

    ta = analyze_traces(make_spans(_hand_traces(engine)))
    s = size_traces(ta, concurrency=3, latency_target_ms=150, cores=1, model_slots=2)
    d = s.to_dict()["measured"]
    assert d["latency_p50_ms"] == 100 and d["latency_mean_ms"] == 150
    assert d["model_timing"] == ("engine" if engine else "client")
    # 3 in flight at a mean of 150 ms: 20 requests/s.  CPU: 20/s x 20 ms on 1 core = 40 %.
    cpu, model = s.resources
    assert s.arrival_per_s == pytest.approx(20.0)
    assert cpu.current_utilisation == pytest.approx(0.4)
    # Model: 20/s x 60 ms (client view) or 40 ms (engine) over 2 slots: 60 % or 40 %.
    assert model.current_utilisation == pytest.approx(0.4 if engine else 0.6)
    # Binds: the higher utilisation over what its headroom allows (0.4/0.7 = 0.57 for CPU).
    assert s.binding == ("cpu" if engine else "model")
    no_capacity = size_traces(ta, concurrency=3, latency_target_ms=150)
    assert [r.current_utilisation for r in no_capacity.resources] == [None, None]


if __name__ == "__main__":  # the child: ``python tests/test_sizing_measured.py CASE FILE``
    sys.path.insert(0, str(ROOT))
    chosen = next(c for c in CASES if c.name == sys.argv[1])
    print(json.dumps(_drive(chosen, sys.argv[2])))
