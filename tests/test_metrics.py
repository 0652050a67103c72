"""The collector's /metrics parts, in process: when a trace is complete, what one batch of
analysed traces adds (hand-derived numbers), the label cap, and the loop that reads complete
traces back from a real DuckDB store and counts each once.  The end-to-end check against a real
Prometheus is ``test_metrics_prometheus``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from spans import make_spans
from tracelens_instrumentation import attributes as A

from tracelens.analysis import analyze_traces
from tracelens.collector.completion import CompletionTracker
from tracelens.collector.config import CollectorConfig
from tracelens.collector.metrics import AnalysisLoop, CollectorMetrics
from tracelens.collector.span_metrics import OperationCap, SpanMetrics, TraceResult
from tracelens.collector.stats import Stats
from tracelens.store import DuckDBStore

MS = 1_000_000
S = 1_000_000_000


def _span(trace: str, i: int, name: str, start: int, end: int, kind: str, **kw: Any) -> dict:
    return {
        "trace": trace,
        "id": i,
        "name": name,
        "start": start,
        "end": end,
        "service": kw.pop("service", "agent"),
        "attributes": {A.KIND: kind},
        **kw,
    }


T1, T2, T3, T4 = (f"{n:032x}" for n in (1, 2, 3, 4))


def _traces() -> list[dict]:
    """T1: handle 1.2 s (cpu) calls fetch 0.1-0.7 s (io) and chat 0.7-1.1 s (gpu, error):
    critical path cpu 0.2 + io 0.6 + gpu 0.4.  T2: handle 0.3 s alone, cpu, root error.
    T3: batch_job 40 s of wait.  T4: edge, exactly 0.5 s (a bucket bound), cpu."""
    return [
        _span(T1, 0, "handle", 0, 1200 * MS, "cpu"),
        _span(T1, 1, "fetch", 100 * MS, 700 * MS, "io", parent=0),
        _span(T1, 2, "chat", 700 * MS, 1100 * MS, "gpu", parent=0, status="error"),
        _span(T2, 3, "handle", 5 * S, 5 * S + 300 * MS, "cpu", status="error"),
        _span(T3, 4, "batch_job", 0, 40 * S, "wait"),
        _span(T4, 5, "edge", 0, 500 * MS, "cpu"),
    ]


def _scrape(collector: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _get(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


# --- completion ---------------------------------------------------------------------------


def _seen(tracker: CompletionTracker, rows: list[dict], now: float) -> None:
    tracker.seen(make_spans(rows), now)


def test_a_trace_is_complete_once_its_root_came_and_it_was_quiet() -> None:
    tracker = CompletionTracker(quiet_s=5)
    _seen(tracker, [_span(T1, 1, "child", 10, 20, "io", parent=0)], now=0.0)
    _seen(tracker, [_span(T1, 0, "root", 5, 30, "cpu")], now=2.0)
    assert tracker.complete(6.9) == []  # 4.9 s after the last span
    done = tracker.complete(7.0)
    assert [(c.trace_id, c.t0) for c in done] == [(T1, 5)]  # the earliest start of both
    assert tracker.complete(1000.0) == []  # returned once
    assert tracker.pending() == 0


def test_a_trace_without_root_waits_the_longer_period() -> None:
    tracker = CompletionTracker(quiet_s=5, rootless_s=50)
    _seen(tracker, [_span(T2, 1, "orphan", 10, 20, "io", parent=7)], now=0.0)
    assert tracker.complete(49.0) == []
    assert [c.trace_id for c in tracker.complete(50.0)] == [T2]


def test_a_new_span_restarts_the_quiet_period() -> None:
    tracker = CompletionTracker(quiet_s=5)
    _seen(tracker, [_span(T1, 0, "a", 0, 1, "cpu")], now=0.0)
    _seen(tracker, [_span(T2, 1, "b", 0, 1, "cpu")], now=1.0)
    _seen(tracker, [_span(T1, 2, "a2", 0, 1, "cpu", parent=0)], now=3.0)
    assert [c.trace_id for c in tracker.complete(7.0)] == [T2]  # T1 was seen at 3
    assert [c.trace_id for c in tracker.complete(8.0)] == [T1]


def test_spans_after_the_trace_was_counted_are_late_not_a_new_trace() -> None:
    tracker = CompletionTracker(quiet_s=1)
    _seen(tracker, [_span(T1, 0, "a", 0, 1, "cpu")], now=0.0)
    assert len(tracker.complete(2.0)) == 1
    _seen(tracker, [_span(T1, 1, "b", 0, 1, "cpu", parent=0)], now=3.0)
    _seen(tracker, [_span(T1, 0, "a", 0, 1, "cpu")], now=3.5)  # a retried export
    assert tracker.late_spans == 2
    assert tracker.complete(100.0) == [] and tracker.pending() == 0


def test_too_many_pending_traces_complete_the_oldest_early() -> None:
    tracker = CompletionTracker(quiet_s=60, max_pending=2)
    for i, trace in enumerate((T1, T2, T3)):
        _seen(tracker, [_span(trace, i, "x", 100 + i, 200, "cpu")], now=float(i))
    assert tracker.forced == 1 and tracker.pending() == 2
    assert [(c.trace_id, c.t0) for c in tracker.complete(3.0)] == [(T1, 100)]


# --- one batch of analysed traces ---------------------------------------------------------


def test_a_batch_adds_what_the_traces_hold() -> None:
    metrics = SpanMetrics()
    metrics.record(analyze_traces(make_spans(_traces())))
    got = _scrape(metrics)
    root = {"service": "agent", "root_operation": "handle"}
    # End-to-end latency: 0.3 s and 1.2 s; a value on a bound counts in that bucket (le).
    bucket = "tracelens_trace_duration_seconds_bucket"
    assert _get(got, bucket, **root, le="0.25") == 0
    assert _get(got, bucket, **root, le="0.5") == 1
    assert _get(got, bucket, **root, le="1.0") == 1
    assert _get(got, bucket, **root, le="1.5") == 2
    assert _get(got, bucket, **root, le="+Inf") == 2
    assert _get(got, "tracelens_trace_duration_seconds_count", **root) == 2
    assert _get(got, "tracelens_trace_duration_seconds_sum", **root) == pytest.approx(1.5)
    assert _get(got, "tracelens_trace_errors_total", **root) == 1
    edge = {"service": "agent", "root_operation": "edge"}
    assert _get(got, bucket, **edge, le="0.5") == 1 and _get(got, bucket, **edge, le="0.25") == 0
    job = {"service": "agent", "root_operation": "batch_job"}
    assert _get(got, bucket, **job, le="30.0") == 0 and _get(got, bucket, **job, le="45.0") == 1
    # Critical path by kind, per root operation: T1 cpu 0.2 + T2 cpu 0.3; io 0.6; gpu 0.4.
    crit = "tracelens_critical_path_seconds_total"
    assert _get(got, crit, **root, kind="cpu") == pytest.approx(0.5)
    assert _get(got, crit, **root, kind="io") == pytest.approx(0.6)
    assert _get(got, crit, **root, kind="gpu") == pytest.approx(0.4)
    assert _get(got, crit, **root, kind="wait") == 0
    assert _get(got, crit, **job, kind="wait") == pytest.approx(40.0)
    # Per operation on the critical path.
    op = "tracelens_critical_path_operation_seconds_total"
    assert _get(got, op, service="agent", operation="handle", kind="cpu") == pytest.approx(0.5)
    assert _get(got, op, service="agent", operation="fetch", kind="io") == pytest.approx(0.6)
    assert _get(got, op, service="agent", operation="chat", kind="gpu") == pytest.approx(0.4)
    # RED per service, operation and kind.
    calls, errors = "tracelens_span_calls_total", "tracelens_span_errors_total"
    assert _get(got, calls, service="agent", operation="handle", kind="cpu") == 2
    assert _get(got, errors, service="agent", operation="handle", kind="cpu") == 1
    assert _get(got, calls, service="agent", operation="chat", kind="gpu") == 1
    assert _get(got, errors, service="agent", operation="chat", kind="gpu") == 1
    assert _get(got, errors, service="agent", operation="fetch", kind="io") == 0
    dur = "tracelens_span_duration_seconds_bucket"
    fetch = {"service": "agent", "operation": "fetch", "kind": "io"}
    assert _get(got, dur, **fetch, le="0.5") == 0 and _get(got, dur, **fetch, le="0.75") == 1
    assert sum(v for (n, _), v in got.items() if n == calls) == 6


def test_batches_add_up() -> None:
    """Two batches give the same totals as one batch of both."""
    rows = _traces()
    one, two = SpanMetrics(), SpanMetrics()
    one.record(analyze_traces(make_spans(rows)))
    two.record(analyze_traces(make_spans(rows[:3])))
    two.record(analyze_traces(make_spans(rows[3:])))
    a, b = _scrape(one), _scrape(two)
    assert a.keys() == b.keys()
    assert all(math.isclose(a[k], b[k], abs_tol=1e-9) for k in a)


def test_the_cap_folds_later_operations_into_other() -> None:
    cap = OperationCap(2)
    assert cap.fold("agent", "a") == ("agent", "a")
    assert cap.fold("agent", "b") == ("agent", "b")
    assert cap.fold("agent", "c") == ("agent", "other")  # a known service keeps its name
    assert cap.fold("tools", "x") == ("other", "other")  # an unknown one does not
    assert cap.fold("agent", "a") == ("agent", "a")
    metrics = SpanMetrics(max_operations=2)
    metrics.record(analyze_traces(make_spans(_traces())))
    got = _scrape(metrics)
    calls = "tracelens_span_calls_total"
    ops = {dict(labels)["operation"] for (name, labels) in got if name == calls}
    # Admitted in name order: batch_job, chat; the other four operations fold.
    assert ops == {"batch_job", "chat", "other"}
    assert metrics.folded_spans == 4
    other = {"service": "agent", "operation": "other"}
    assert _get(got, "tracelens_span_calls_total", **other, kind="cpu") == 3
    assert _get(got, "tracelens_span_calls_total", **other, kind="io") == 1


def test_the_stage_hook_gets_each_trace_and_its_labels_are_exported() -> None:
    seen: list[TraceResult] = []

    def stages(trace: TraceResult) -> dict[str, float]:
        seen.append(trace)
        return {"tools": float(trace.path.filter(trace.path["kind"] == "io")["io_ns"].sum()) / S}

    metrics = SpanMetrics(stages=stages)
    metrics.record(analyze_traces(make_spans(_traces())))
    by_id = {t.trace_id: t for t in seen}
    assert set(by_id) == {T1, T2, T3, T4}
    t1 = by_id[T1]
    assert t1.root_operation == "handle" and t1.duration_s == pytest.approx(1.2)
    assert t1.critical_s["io"] == pytest.approx(0.6) and t1.critical_s["cpu"] == pytest.approx(0.2)
    assert t1.path["name"].to_list() == ["handle", "fetch", "chat", "handle"]
    got = _scrape(metrics)
    stage = "tracelens_critical_path_stage_seconds_total"
    assert _get(got, stage, service="agent", root_operation="handle", stage="tools") == (
        pytest.approx(0.6)
    )


# --- the loop: read back from the store, count once ----------------------------------------


def test_the_loop_counts_each_trace_once_with_all_its_spans(tmp_path: Path) -> None:
    rows = _traces()
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        tracker = CompletionTracker(quiet_s=5)
        metrics = SpanMetrics()
        loop = AnalysisLoop(store, tracker, metrics)
        first, second = make_spans(rows[:2]), make_spans(rows[2:])  # T1 split across merges
        store.append(first)
        tracker.seen(first, 0.0)
        assert loop.run_once(4.0) == 0
        store.append(second)
        tracker.seen(second, 4.0)  # chat (T1) arrives: T1 waits again
        assert loop.run_once(9.0) == 4
        assert loop.run_once(60.0) == 0  # nothing counted twice
        store.append(make_spans(rows[:1]))  # stored already (a duplicate): late, not counted
        tracker.seen(make_spans(rows[:1]), 61.0)
        assert loop.run_once(120.0) == 0
    assert tracker.late_spans == 1 and loop.traces_counted == 4 and loop.traces_dropped == 0
    got = _scrape(metrics)
    assert sum(v for (n, _), v in got.items() if n == "tracelens_span_calls_total") == 6
    root = {"service": "agent", "root_operation": "handle"}
    assert _get(got, "tracelens_trace_duration_seconds_count", **root) == 2
    crit = "tracelens_critical_path_seconds_total"
    assert _get(got, crit, **root, kind="gpu") == pytest.approx(0.4)  # chat was in the 2nd merge


# --- the registry -------------------------------------------------------------------------


def _names(metrics: CollectorMetrics) -> set[str]:
    text = metrics.exposition().decode()
    return {f.name for f in text_string_to_metric_families(text)}


def test_collectors_in_one_process_have_their_own_registries(tmp_path: Path) -> None:
    """Two collectors (as in tests) register the same names without clashing, and count apart."""
    with DuckDBStore(tmp_path / "a.duckdb") as a, DuckDBStore(tmp_path / "b.duckdb") as b:
        stats_a, stats_b = Stats(), Stats()
        first = CollectorMetrics(CollectorConfig(db="a"), stats_a, a)
        second = CollectorMetrics(CollectorConfig(db="b"), stats_b, b)
        stats_a.add(spans_received=7)
        stats_a.merge(0.02, 7, 0)
        got_a, got_b = _scrape(first.registry), _scrape(second.registry)
    assert _get(got_a, "tracelens_collector_spans_received_total") == 7
    assert _get(got_b, "tracelens_collector_spans_received_total") == 0
    assert _get(got_a, "tracelens_collector_merge_duration_seconds_bucket", le="0.025") == 1
    assert _get(got_a, "tracelens_collector_merge_duration_seconds_bucket", le="0.01") == 0
    assert _get(got_b, "tracelens_collector_merge_duration_seconds_count") == 0
    assert "tracelens_span_calls" in _names(first)


def test_span_metrics_are_on_by_default_and_a_flag_turns_them_off(tmp_path: Path) -> None:
    with DuckDBStore(tmp_path / "a.duckdb") as store:
        on = CollectorMetrics(CollectorConfig(db="a"), Stats(), store)
        metrics = CollectorMetrics(CollectorConfig(db="a", span_metrics=False), Stats(), store)
        metrics.start()
        metrics.merged(make_spans(_traces()))  # ignored
        metrics.close()
        names = _names(metrics)
    assert on.loop is not None and "tracelens_span_calls" in _names(on)
    assert metrics.loop is None
    assert "tracelens_collector_spans_received" in names
    assert not {n for n in names if n.startswith(("tracelens_span_", "tracelens_trace_"))}


def test_a_quiet_period_of_zero_is_refused_with_the_way_to_turn_them_off() -> None:
    with pytest.raises(ValueError, match="--no-span-metrics"):
        CollectorConfig(db="a", metrics_quiet_s=0)
    CollectorConfig(db="a", metrics_quiet_s=0, span_metrics=False)  # off: no quiet period used


# --- the cap on open traces, and what it costs -----------------------------------------------


def test_past_the_cap_the_oldest_open_traces_are_counted_with_what_they_have(
    tmp_path: Path,
) -> None:
    """Cap 2: T1 (root and fetch so far), T2, then T3 arrive; T1 is counted at once with its
    two spans, T3's arrival pushes nothing else out; T1's chat, arriving after, is late."""
    rows = _traces()
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        tracker = CompletionTracker(quiet_s=60, max_pending=2)
        metrics = SpanMetrics()
        loop = AnalysisLoop(store, tracker, metrics)
        for part, now in ((rows[:2], 0.0), (rows[3:4], 1.0), (rows[4:5], 2.0)):
            spans = make_spans(part)
            store.append(spans)
            tracker.seen(spans, now)
        assert tracker.forced == 1 and tracker.pending() == 2
        assert loop.run_once(3.0) == 1  # T1, not quiet yet, counted for the cap
        late = make_spans(rows[2:3])
        store.append(late)
        tracker.seen(late, 4.0)
        assert loop.run_once(200.0) == 2  # T2 and T3 when quiet
    assert tracker.late_spans == 1
    got = _scrape(metrics)
    calls = "tracelens_span_calls_total"
    assert _get(got, calls, service="agent", operation="fetch", kind="io") == 1
    assert ("tracelens_span_calls_total", (("kind", "gpu"), ("operation", "chat"),
            ("service", "agent"))) not in got  # fmt: skip
    assert sum(v for (n, _), v in got.items() if n == calls) == 4  # T1's 2, T2's 1, T3's 1


def test_an_open_trace_costs_at_most_the_stated_bytes() -> None:
    """The README's memory bound: ``BYTES_PER_TRACE`` per open trace, measured with
    tracemalloc over 20,000 traces of real ids (and as many remembered once complete)."""
    import tracemalloc

    from tracelens.collector.completion import BYTES_PER_TRACE

    n = 20_000
    rows = [_span(f"{i + 1:032x}", i, "x", i, i + 10, "cpu") for i in range(n)]
    spans = make_spans(rows)
    tracker = CompletionTracker(quiet_s=5, max_pending=n, remember=n)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tracker.seen(spans, 0.0)
    open_bytes = tracemalloc.get_traced_memory()[0] - before
    done = tracker.complete(10.0)
    remembered = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(done) == n and tracker.pending() == 0
    del done
    assert open_bytes / n <= BYTES_PER_TRACE
    assert remembered / n <= 2 * BYTES_PER_TRACE  # ids kept and the Completed handed out


def test_the_loop_reads_and_analyses_at_most_a_batch_of_spans_at_a_time(tmp_path: Path) -> None:
    """Batches of at most 2 spans: T1 (3 spans) is read alone (a batch holds one trace at
    least), then two one-span traces, then the last; every trace counted once, with the totals
    of one batch of all."""
    rows = _traces()
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        tracker = CompletionTracker(quiet_s=1)
        metrics = SpanMetrics()
        loop = AnalysisLoop(store, tracker, metrics, batch_spans=2)
        spans = make_spans(rows)
        store.append(spans)
        tracker.seen(spans, 0.0)
        seen: list[int] = []
        real_read = store.read

        def read(*args: Any, **kw: Any) -> Any:
            table = real_read(*args, **kw)
            seen.append(table.num_rows)
            return table

        store.read = read  # type: ignore[method-assign]
        assert loop.run_once(5.0) == 4
    assert sorted(seen) == [1, 2, 3]  # T1 alone (over the batch, one trace at least), 2+1 ...
    one = SpanMetrics()
    one.record(analyze_traces(make_spans(rows)))
    a, b = _scrape(one), _scrape(metrics)
    assert a.keys() == b.keys() and all(math.isclose(a[k], b[k], abs_tol=1e-9) for k in a)
