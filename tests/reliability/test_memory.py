"""Bounded memory: the collector's peak RSS stays within ``--memory-mb`` under concurrent large
gRPC messages and HTTP bodies (psutil samples the real process every 10 ms).

The default test uses a 1 GiB budget and messages at the 4 MiB gRPC limit plus 60 MiB ones
(refused from their length prefix); the messages that fit are retried when the collector says
it is busy, as OpenTelemetry's exporters do, and must all be stored in the end.  The heavy one
is the issue's case, 40 concurrent 60 MiB messages with the gRPC limit raised to 64 MiB, in the
heavy tier (``-m heavy``, make test-all).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import httpx
import pytest
from google.rpc import error_details_pb2, status_pb2
from hostile_support import JSON, PROTO, MiB, PeakRss, no_tracebacks, valid_body
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_collector_support import Collector, start_collector

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _sized(target: int) -> bytes:
    """A valid request of about ``target`` bytes: real spans repeated with distinct ids."""
    base = ExportTraceServiceRequest.FromString(valid_body(200, "mem"))
    spans = base.resource_spans[0].scope_spans[0].spans
    per_span = len(base.SerializeToString()) / len(spans)
    template = list(spans)
    del spans[:]
    for i in range(int(target / per_span)):
        span = spans.add()
        span.CopyFrom(template[i % len(template)])
        span.span_id = (i + 1).to_bytes(8, "big")
    return base.SerializeToString()


def _storm(address: str, messages: list[bytes], timeout: float = 120) -> Counter[str]:
    """Every message at once, each on its own channel (as 40 separate exporters would), each
    with the client deadline ``timeout``: how many got each status code."""
    return Counter(_storm_each(address, messages, timeout))


def _storm_each(
    address: str, messages: list[bytes], timeout: float = 120, retries: list[int] | None = None
) -> list[str]:
    """``_storm``, with each message's final status code, in the messages' order.  With
    ``retries`` (one count a message), a message refused UNAVAILABLE is sent again after the
    delay the refusal's RetryInfo names (else 1 s, OpenTelemetry's first backoff), up to that
    many times, as OpenTelemetry's exporters do."""

    def one(message: bytes, retries: int) -> str:
        options = [("grpc.max_send_message_length", 128 * MiB)]
        for attempt in range(retries + 1):
            with grpc.insecure_channel(address, options=options) as channel:
                try:
                    channel.unary_unary(EXPORT)(message, timeout=timeout)
                    return "OK"
                except grpc.RpcError as err:
                    code = err.code()
                    if code is not grpc.StatusCode.UNAVAILABLE or attempt == retries:
                        return str(code.name)
                    delay = _retry_delay(err)
            time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    with ThreadPoolExecutor(len(messages)) as pool:
        return list(pool.map(one, messages, retries or [0] * len(messages)))


def _retry_delay(err: grpc.RpcError) -> float:
    """The delay a refusal's RetryInfo names (the collector's busy answers carry one); 1 s
    where there is none (a stream the HTTP/2 layer refused)."""
    for key, value in err.trailing_metadata() or ():  # type: ignore[attr-defined]
        if key == "google.rpc.retryinfo-bin":
            info = error_details_pb2.RetryInfo.FromString(value)
            return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    return 1.0


def _measured(col: Collector, load: Callable[[], object]) -> tuple[object, int]:
    peak = PeakRss(col.proc.pid)
    try:
        result = load()
    finally:
        rss = peak.stop()
    return result, rss


@pytest.mark.smoke
def test_concurrent_grpc_and_http_stay_within_the_budget(tmp_path: Path) -> None:
    """The smoke size: 12 gRPC messages at the message limit, 4 over it, 6 HTTP bodies."""
    _concurrent_grpc_and_http(tmp_path, at_limit_n=12, over_n=4, http_n=6)


@pytest.mark.system
def test_fifty_grpc_messages_and_sixteen_http_bodies_stay_within_the_budget(
    tmp_path: Path,
) -> None:
    """The acceptance size: 40 gRPC messages at the limit and 10 of 60 MiB, 16 HTTP bodies."""
    _concurrent_grpc_and_http(tmp_path, at_limit_n=40, over_n=10, http_n=16)


def _concurrent_grpc_and_http(tmp_path: Path, *, at_limit_n: int, over_n: int, http_n: int) -> None:
    budget = 1024
    col = start_collector(tmp_path / "t.duckdb", "--memory-mb", str(budget))
    try:
        assert col.grpc
        at_limit = _sized(int(3.8 * MiB))
        assert 3 * MiB < len(at_limit) < 4 * MiB
        over = b"\x0a" + b"\x00" * (60 * MiB)

        def load() -> object:
            # the exporters of messages that fit retry a busy answer as told, 5 times at most
            each = _storm_each(
                col.grpc or "",
                [at_limit] * at_limit_n + [over] * over_n,
                retries=[5] * at_limit_n + [0] * over_n,
            )
            codes = (Counter(each[:at_limit_n]), Counter(each[at_limit_n:]))
            bodies = [_sized(int(7.5 * MiB))] * http_n

            def post(body: bytes) -> int:
                return httpx.post(
                    f"{col.http}/v1/traces", content=body, headers=PROTO, timeout=120
                ).status_code

            with ThreadPoolExecutor(http_n) as pool:
                statuses = Counter(pool.map(post, bodies))
            return codes, statuses

        ((fits, over_limit), statuses), rss = _measured(col, load)  # type: ignore[misc]
        print(f"peak RSS {rss / MiB:.0f} MiB; gRPC {dict(fits)} and over the limit "
              f"{dict(over_limit)}; HTTP {dict(statuses)}")  # fmt: skip
        # A message that fits is stored, at once or after the retries the busy answers asked
        # for (a full queue refuses UNAVAILABLE with a delay rather than growing: with decoding
        # in C a burst of 12 fills it, 4-8 of them refused on the first try, 2026-12-07).
        assert fits == {"OK": at_limit_n}, fits
        # A message over the size limit is never stored.  gRPC says RESOURCE_EXHAUSTED when its
        # length prefix arrives; a client still sending 60 MiB may see the stream reset first
        # and report UNAVAILABLE (one CI run under load: 6 of 10), a definite refusal too.
        assert set(over_limit) <= {"RESOURCE_EXHAUSTED", "UNAVAILABLE"}, over_limit
        assert over_limit["RESOURCE_EXHAUSTED"] >= 1, over_limit
        assert set(statuses) <= {200, 503} and statuses[200] > 0, statuses
        assert rss < budget * MiB, rss / MiB
    finally:
        assert col.stop() == 0
    no_tracebacks(col)


@pytest.mark.heavy
@pytest.mark.measures  # its clients' deadlines hold only with the machine to itself
def test_forty_concurrent_60_mib_grpc_messages_stay_within_the_budget(tmp_path: Path) -> None:
    budget = 2048
    col = start_collector(tmp_path / "t.duckdb", "--memory-mb", str(budget), "--grpc-max-mb", "64")
    try:
        assert col.grpc
        message = _sized(60 * MiB)
        codes, rss = _measured(col, lambda: _storm(col.grpc or "", [message] * 40, timeout=120))
        print(f"peak RSS {rss / MiB:.0f} MiB; gRPC {codes}")
        # 2.4 GB sent at once to 2 cores: since admission charges bytes received (issue 27),
        # more of them are admitted, and while decoding took 7.6 s a message some were still
        # queued when their client's deadline passed (3-12 of 40 at 120 s).  With events and
        # arrays decoded in C (0.6 s a message) the queue fills instead: 6 OK and 34 UNAVAILABLE
        # in 42-44 s, peak RSS 1,750-1,804 MiB, 3 runs (2026-12-07).  A deadline passing is still
        # a definite answer (never acknowledged; the exporter retries); what this test holds is
        # the memory budget and that every answer is a definite one.
        allowed = {"OK", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "DEADLINE_EXCEEDED"}
        assert set(codes) <= allowed, codes  # type: ignore[arg-type]
        assert codes["OK"] >= 1  # type: ignore[index]
        assert rss < budget * MiB, rss / MiB
    finally:
        assert col.stop(timeout=120) == 0
    no_tracebacks(col)


def _big_service(spans: int, size: int) -> tuple[bytes, bytes]:
    """The same request as protobuf and as OTLP/JSON: ``spans`` tiny spans under one resource
    whose service name is ``size`` bytes (sent once, stored on every span)."""
    request = ExportTraceServiceRequest()
    resource = request.resource_spans.add()
    attr = resource.resource.attributes.add()
    attr.key = "service.name"
    attr.value.string_value = "s" * size
    scope = resource.scope_spans.add()
    for i in range(spans):
        span = scope.spans.add()
        span.trace_id = bytes(range(1, 17))
        span.span_id = (i + 1).to_bytes(8, "big")
        span.name = "x"
        span.start_time_unix_nano = 1
        span.end_time_unix_nano = 2
    as_json = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "s" * size}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": bytes(range(1, 17)).hex(),
                                "spanId": (i + 1).to_bytes(8, "big").hex(),
                                "name": "x",
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "2",
                            }
                            for i in range(spans)
                        ]
                    }
                ],
            }
        ]
    }
    return request.SerializeToString(), json.dumps(as_json).encode()


@pytest.mark.system
def test_a_huge_service_name_cannot_multiply_memory(tmp_path: Path) -> None:
    """A 40 MiB service name on 1,000 spans would be 80 GB of span columns (the service and
    the resource JSON, per span): refused with 400 at decoding, with memory in the budget; the
    same name on 3 spans (240 MiB) is stored."""
    budget = 2048
    col = start_collector(tmp_path / "t.duckdb")
    try:
        url = f"{col.http}/v1/traces"
        many_pb, many_json = _big_service(1_000, 40 * MiB)
        few_pb, _ = _big_service(3, 40 * MiB)

        def load() -> object:
            return [
                httpx.post(url, content=many_pb, headers=PROTO, timeout=120),
                httpx.post(url, content=many_json, headers=JSON, timeout=120),
                httpx.post(url, content=few_pb, headers=PROTO, timeout=120),
            ]

        answers, rss = _measured(col, load)
        statuses = [a.status_code for a in answers]  # type: ignore[attr-defined]
        print(f"peak RSS {rss / MiB:.0f} MiB; {statuses}")
        assert statuses == [400, 400, 200], [a.text[:300] for a in answers]  # type: ignore[attr-defined]
        message = status_pb2.Status.FromString(answers[0].content).message  # type: ignore[index]
        assert "too large for this many spans" in message
        assert "too large for this many spans" in answers[1].json()["message"]  # type: ignore[index]
        assert rss < budget * MiB
    finally:
        assert col.stop() == 0
    no_tracebacks(col)


def test_a_compressed_grpc_bomb_is_refused_unread(tmp_path: Path) -> None:
    """256 MiB sent gzip-compressed by gRPC (about 256 KiB on the wire): refused against the
    message limit after decompression, without the collector holding it."""
    col = start_collector(tmp_path / "t.duckdb")
    try:
        assert col.grpc
        message = b"\x0a" + b"\x00" * (256 * MiB)
        options = [("grpc.max_send_message_length", -1)]

        def load() -> object:
            with grpc.insecure_channel(
                col.grpc or "", options=options, compression=grpc.Compression.Gzip
            ) as channel:
                with pytest.raises(grpc.RpcError) as err:
                    channel.unary_unary(EXPORT)(message, timeout=60)
                return err.value.code()

        code, rss = _measured(col, load)
        assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert rss < 400 * MiB, rss / MiB
    finally:
        assert col.stop() == 0
    no_tracebacks(col)


@pytest.mark.parametrize("memory_mb", [512, 1024, 2048, 4096, 65536])
def test_every_share_of_the_budget_fits_it(memory_mb: int) -> None:
    from tracelens.collector.config import BASE_MB, CollectorConfig, MemoryPlan

    plan = MemoryPlan.fit(memory_mb)
    shares = (
        plan.duckdb_bytes,
        plan.queue_bytes,
        plan.inflight_bytes,
        plan.grpc_bytes,
        plan.decode_bytes,
    )
    assert sum(shares) + BASE_MB * MiB <= memory_mb * MiB
    assert plan.grpc_rpcs >= 1
    assert plan.grpc_rpcs * 2 * plan.grpc_message_bytes <= plan.grpc_bytes
    assert 4 * plan.max_body_bytes <= plan.decode_bytes
    assert plan.max_body_bytes <= 64 * MiB and plan.grpc_message_bytes <= 4 * MiB
    config = CollectorConfig.from_budget("x.duckdb", memory_mb)
    assert config.max_queue_bytes == plan.queue_bytes
    assert config.duckdb_memory == f"{plan.duckdb_bytes // MiB}MiB"
    assert config.max_grpc_rpcs == plan.grpc_rpcs


def test_limits_that_do_not_fit_the_budget_are_usage_errors(tmp_path: Path) -> None:
    import subprocess
    import sys

    from test_collector_support import ROOT

    for args in (
        ["--memory-mb", "512", "--max-body-mb", "64"],
        ["--memory-mb", "100"],
        ["--max-body-mb", "8", "--grpc-max-mb", "16"],
    ):
        result = subprocess.run(
            [sys.executable, "-m", "tracelens.cli", "collect", "--db", str(tmp_path / "t"), *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
        )
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert "memory" in result.stderr or "gRPC" in result.stderr, result.stderr


def test_json_that_would_build_too_many_objects_is_refused_before_parsing(
    tmp_path: Path,
) -> None:
    """JSON builds 20-40x its size in Python objects: 15 MiB of ``{},`` took 550 MB and 5 s to
    decode.  The collector refuses it (413) from a count of separators, before parsing; real
    OTLP/JSON of 2 MiB is still stored.  A file of 100 MiB of ``[],`` (a 6 GB parse) ends in a
    clean error."""
    col = start_collector(tmp_path / "t.duckdb")
    try:
        hostile = b'{"resourceSpans":[' + b"{}," * (5 * MiB) + b"{}]}"
        from google.protobuf.json_format import MessageToJson

        real = MessageToJson(ExportTraceServiceRequest.FromString(valid_body(3000))).encode()
        assert len(real) > 2 * MiB

        def load() -> object:
            url = f"{col.http}/v1/traces"
            return [
                httpx.post(url, content=hostile, headers=JSON, timeout=60),
                httpx.post(url, content=real, headers=JSON, timeout=60),
            ]

        answers, rss = _measured(col, load)
        assert [a.status_code for a in answers] == [413, 200]  # type: ignore[attr-defined]
        assert "as objects while decoded" in answers[0].json()["message"]  # type: ignore[index]
        assert rss < 600 * MiB, rss / MiB
    finally:
        assert col.stop() == 0
    no_tracebacks(col)
    import subprocess
    import sys

    from test_collector_support import ROOT

    path = tmp_path / "lists.jsonl"
    with path.open("wb") as f:
        f.write(b"[")
        for _ in range(100):
            f.write(b"[]," * (MiB // 3))
        f.write(b"[]]\n")
    result = subprocess.run(
        [sys.executable, "-m", "tracelens.cli", "analyze", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert f"{path}:1" in result.stderr and "parsing this JSON would take" in result.stderr
    assert "Traceback" not in result.stderr
