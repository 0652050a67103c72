"""Chaos: kill -9 five times during a load whose clients retry (as OTLP exporters do): every span
acknowledged is stored, every span is stored exactly once, and the retries deliver all of them.

The system-tier run sends 150k spans; the heavy one (``-m heavy``, make test-all) sends the
issue's 1M.  tests/test_collector_kill.py is the default tier's kill -9 smoke test.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from reliability.durable_support import PROTO, Bodies, Running, stored_ids, wait_for
from test_collector_support import free_port

KILLS = 5


class _Retrying:
    """Clients that resend each body until it is answered 200 (bounded by ``deadline``)."""

    def __init__(self, url: str, bodies: Bodies, clients: int, deadline: float) -> None:
        self.url, self.bodies, self.deadline = url, bodies, deadline
        self.acked: set[int] = set()
        self.attempts = 0
        self.failures: dict[str, int] = {}
        self._next = 0
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._client) for _ in range(clients)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def join(self) -> None:
        for t in self._threads:
            t.join(max(self.deadline - time.monotonic(), 0) + 60)

    def _take(self) -> int | None:
        with self._lock:
            if self._next >= len(self.bodies.bodies):
                return None
            self._next += 1
            return self._next - 1

    def _client(self) -> None:
        client = httpx.Client(base_url=self.url, timeout=30)
        try:
            while (k := self._take()) is not None:
                while time.monotonic() < self.deadline:
                    with self._lock:
                        self.attempts += 1
                    try:
                        answer = client.post(
                            "/v1/traces", content=self.bodies.bodies[k], headers=PROTO
                        )
                        why = str(answer.status_code)
                    except httpx.HTTPError as exc:  # killed mid-request, or not restarted yet
                        why = type(exc).__name__
                        client.close()
                        client = httpx.Client(base_url=self.url, timeout=30)
                    if why == "200":
                        with self._lock:
                            self.acked.add(k)
                        break
                    with self._lock:
                        self.failures[why] = self.failures.get(why, 0) + 1
                    time.sleep(0.2)
        finally:
            client.close()


def _chaos(tmp_path: Path, spans: int, per_request: int, budget_s: float) -> None:
    db, port = tmp_path / "t.duckdb", free_port()
    sent = Bodies.make(spans // per_request, per_request, salt=7)
    began = time.monotonic()
    col = Running.start(db, port=port)
    load = _Retrying(col.url, sent, clients=6, deadline=began + budget_s)
    load.start()
    kills = 0
    try:
        for k in range(KILLS):
            due = (k + 1) * len(sent.bodies) // (KILLS + 1)
            assert wait_for(lambda due=due: len(load.acked) >= due, budget_s / 2), (
                f"load stalled at {len(load.acked)} of {len(sent.bodies)} requests"
            )
            col.kill9()
            kills += 1
            col = Running.start(db, port=port)
        load.join()
    finally:
        code, _ = col.stop(120)
    took = time.monotonic() - began
    assert kills == KILLS and code == 0, col.text()
    assert "Traceback" not in col.text()
    assert len(load.acked) == len(sent.bodies), (
        f"only {len(load.acked)} of {len(sent.bodies)} delivered in {budget_s} s",
        load.failures,
    )
    ids = stored_ids(db)
    assert len(ids) == len(set(ids)), "a span was stored twice"
    acked = set().union(*(sent.ids[k] for k in load.acked))
    assert set(ids) == acked, f"{len(acked - set(ids))} acknowledged spans lost"
    print(
        f"{len(ids)} spans, {KILLS} kills, {load.attempts} attempts "
        f"(failures {load.failures}) in {took:.1f} s"
    )


@pytest.mark.system
def test_kill_9_five_times_under_a_retrying_load_stores_every_acked_span_once(
    tmp_path: Path,
) -> None:
    _chaos(tmp_path, spans=150_000, per_request=500, budget_s=240)


@pytest.mark.heavy
def test_kill_9_five_times_during_a_million_spans(tmp_path: Path) -> None:
    _chaos(tmp_path, spans=1_000_000, per_request=1000, budget_s=900)
