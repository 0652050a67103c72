"""Kind inference (docs/attributes.md) and the cpu / off-CPU split of the path."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spans import make_spans, sid

from tracelens.analysis import analyze_traces
from tracelens.analysis.kinds import attribute_columns


def kind_of(name: str = "op", span_kind: str = "internal", **attributes: object) -> str:
    ta = analyze_traces(
        make_spans(
            [
                {
                    "id": 0,
                    "start": 0,
                    "end": 10,
                    "name": name,
                    "span_kind": span_kind,
                    "attributes": attributes,
                }
            ]
        )
    )
    return str(ta.spans["kind_resolved"][0])


@pytest.mark.parametrize(
    ("expected", "name", "span_kind", "attributes"),
    [
        ("gpu", "chat gpt-4o", "client", {"gen_ai.operation.name": "chat"}),
        ("gpu", "embed", "internal", {"gen_ai.operation.name": "embeddings"}),
        ("gpu", "llm", "internal", {"openinference.span.kind": "LLM"}),
        ("gpu", "call_llm", "internal", {"gen_ai.usage.input_tokens": 12}),
        (
            "unknown",
            "invoke_agent",
            "internal",
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.usage.input_tokens": 12},
        ),
        ("io", "SELECT", "client", {"db.system.name": "postgresql"}),
        ("io", "query", "internal", {"db.system": "redis"}),
        ("io", "GET", "client", {"http.request.method": "GET"}),
        ("unknown", "GET /route", "server", {"http.request.method": "GET"}),
        ("io", "Find", "client", {"rpc.system": "grpc"}),
        ("unknown", "Find", "server", {"rpc.system": "grpc"}),
        ("io", "publish", "producer", {}),
        ("unknown", "process", "consumer", {"messaging.system": "kafka"}),
        ("io", "retrieve", "internal", {"openinference.span.kind": "RETRIEVER"}),
        ("wait", "acquire_lock", "internal", {}),
        ("wait", "model_queue.wait", "internal", {}),
        ("wait", "rate-limit backoff", "internal", {}),
        ("unknown", "plan", "internal", {}),
        ("unknown", "blocking_call", "internal", {}),  # "lock" inside a word is not a lock
    ],
)
def test_inference_rules(expected: str, name: str, span_kind: str, attributes: dict) -> None:
    assert kind_of(name, span_kind, **attributes) == expected


def test_explicit_kind_wins() -> None:
    assert (
        kind_of("chat", "client", **{"tracelens.kind": "cpu", "gen_ai.operation.name": "chat"})
        == "cpu"
    )


def test_measured_cpu_splits_the_section() -> None:
    # A 100 ns io span (no children) that spent 25 ns on the CPU: 25 cpu + 75 io on the path.
    t = make_spans(
        [
            {
                "id": 0,
                "start": 0,
                "end": 100,
                "attributes": {"tracelens.kind": "io", "tracelens.cpu_ns": 25},
            }
        ]
    )
    tr = analyze_traces(t).traces
    assert tr["cpu_ns"][0] == pytest.approx(25)
    assert tr["io_ns"][0] == pytest.approx(75)


def test_children_cpu_is_not_the_parents() -> None:
    # Parent [0,100] cpu_ns 60 includes its child's 40 (same thread); the child covers [20,70].
    t = make_spans(
        [
            {
                "id": 0,
                "start": 0,
                "end": 100,
                "attributes": {
                    "tracelens.kind": "cpu",
                    "tracelens.cpu_ns": 60,
                    "tracelens.wait_ns": 30,
                },
            },
            {
                "id": 1,
                "parent": 0,
                "start": 20,
                "end": 70,
                "attributes": {
                    "tracelens.kind": "cpu",
                    "tracelens.cpu_ns": 40,
                    "tracelens.wait_ns": 10,
                },
            },
        ]
    )
    ta = analyze_traces(t)
    sp = {r["span_id"]: r for r in ta.spans.iter_rows(named=True)}
    assert sp[sid(0)]["self_ns"] == 50 and sp[sid(0)]["self_cpu_ns"] == 20
    assert sp[sid(0)]["mix_cpu"] == pytest.approx(0.4)
    assert sp[sid(0)]["mix_wait"] == pytest.approx(0.6)
    tr = ta.traces
    # parent: 50 ns self -> 20 cpu + 30 wait; child: 50 ns -> 40 cpu + 10 wait.
    assert tr["cpu_ns"][0] == pytest.approx(60)
    assert tr["wait_ns"][0] == pytest.approx(40)


def test_vllm_request_is_queue_then_model() -> None:
    # 100 ms llm_request with 25 ms in the queue: 25% wait, 75% gpu.
    t = make_spans(
        [
            {
                "id": 0,
                "start": 0,
                "end": 100_000_000,
                "name": "llm_request",
                "span_kind": "server",
                "attributes": {
                    "gen_ai.latency.time_in_queue": 0.025,
                    "gen_ai.latency.time_in_model_prefill": 0.01,
                    "gen_ai.latency.time_in_model_decode": 0.06,
                },
            }
        ]
    )
    ta = analyze_traces(t)
    assert ta.spans["kind_resolved"][0] == "gpu"
    assert ta.traces["wait_ns"][0] == pytest.approx(25_000_000)
    assert ta.traces["gpu_ns"][0] == pytest.approx(75_000_000)


def test_recorded_vllm_server_trace() -> None:
    from conftest import FIXTURES

    from tracelens.ingest import read_files

    spans = read_files([FIXTURES / "vllm/vllm-openai-server.otlp.json"]).spans
    ta = analyze_traces(spans)
    req = ta.spans.filter(pl.col("name") == "llm_request")
    assert req.height == 3
    assert (req["kind_resolved"] == "gpu").all()
    assert (req["mix_wait"] > 0).all() and (req["mix_gpu"] > 0).all()


# --- attribute_columns: one pass over the map, against Polars' own map.get as the oracle ------

_KEYS = ["a", "b", "gen_ai.operation.name", "c"]
_maps = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.sampled_from([*_KEYS, "x", "y"]), st.one_of(st.none(), st.text(max_size=3))),
        max_size=6,
    ),
)


@settings(deadline=None)
@given(st.lists(_maps, max_size=12), st.lists(st.sampled_from(_KEYS), min_size=1, max_size=5))
def test_attribute_columns_equal_map_get(rows: list[list[tuple[str, str | None]] | None],
                                         keys: list[str]) -> None:  # fmt: skip
    """Null maps, empty maps, null values and a key repeated in one map (its first value wins)
    read exactly as ``map.get`` reads them."""
    offsets, flat_k, flat_v, valid = [0], [], [], []
    for r in rows:
        valid.append(r is not None)
        for k, v in r or []:
            flat_k.append(k)
            flat_v.append(v)
        offsets.append(len(flat_k))
    arr = pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.array(flat_k, pa.string()),
        pa.array(flat_v, pa.string()),
        mask=pa.array([not v for v in valid], pa.bool_()),
    )
    df = pl.from_arrow(pa.table({"attributes": arr}))
    assert isinstance(df, pl.DataFrame)
    got = attribute_columns(df, keys)
    assert [c.name for c in got] == list(dict.fromkeys(keys))
    for col in got:
        want = df.select(pl.col("attributes").map.get(col.name))
        assert col.to_list() == want.to_series().to_list(), col.name
