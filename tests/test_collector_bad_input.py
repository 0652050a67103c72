"""Bad input is answered (400/413/415 with a google.rpc.Status) and never disturbs the collector."""

from __future__ import annotations

import asyncio
import gzip
import os
import socket
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from test_collector_support import Collector, make_spans, start_collector

JSON = {"Content-Type": "application/json"}
PROTO = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    col = start_collector(tmp_path_factory.mktemp("bad") / "t.duckdb", "--max-body-mb", "1")
    yield col
    assert col.stop() == 0


def _post(col: Collector, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{col.http}/v1/traces", content=body, headers=headers, timeout=30)


def _healthy(col: Collector) -> None:
    assert httpx.get(f"{col.http}/health").status_code == 200
    good = encode_spans(make_spans(3)).SerializeToString()
    assert _post(col, good, PROTO).status_code == 200


@pytest.mark.parametrize(
    "body",
    [os.urandom(200), b"\x0a\xff\xff\xff\xff\x0f", b"\x0a\x05abc", b"\xff" * 64],
    ids=["random", "huge-length", "truncated", "bad-tag"],
)
def test_malformed_protobuf_is_400_with_a_status(collector: Collector, body: bytes) -> None:
    r = _post(collector, body, PROTO)
    assert r.status_code == 400
    status = status_pb2.Status.FromString(r.content)
    assert status.code == 3 and status.message
    _healthy(collector)


def test_truncated_real_request_is_400(collector: Collector) -> None:
    body = encode_spans(make_spans(20)).SerializeToString()
    r = _post(collector, body[: len(body) - 7], PROTO)
    assert r.status_code == 400
    _healthy(collector)


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 5}]}]}]}',
        b'{"resourceSpans": "x"}',
        b"",
        b"\xff\xfe",
    ],
    ids=["invalid", "array", "wrong-type", "not-a-list", "empty", "not-utf8"],
)
def test_bad_json_is_400_with_a_json_status(collector: Collector, body: bytes) -> None:
    r = _post(collector, body, JSON)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == 3 and r.json()["message"]
    _healthy(collector)


def test_wrong_content_type_and_encoding_are_415(collector: Collector) -> None:
    assert _post(collector, b"x", {"Content-Type": "text/plain"}).status_code == 415
    assert _post(collector, b"x", {}).status_code == 415
    r = _post(collector, b"x", {**PROTO, "Content-Encoding": "br"})
    assert r.status_code == 415
    _healthy(collector)


def test_oversized_body_is_413_before_it_is_read(collector: Collector) -> None:
    with socket.create_connection(("127.0.0.1", int(collector.http.rsplit(":", 1)[1]))) as s:
        s.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf"
            b"\r\nContent-Length: 999999999\r\n\r\n"
        )
        answer = s.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413")
    r = _post(collector, b"\x0a" * (2 << 20), PROTO)
    assert r.status_code == 413
    _healthy(collector)


def test_gzip_bomb_is_413(collector: Collector) -> None:
    bomb = gzip.compress(b"\0" * (50 << 20))  # 50 MiB of zeros in ~50 KB
    assert len(bomb) < (1 << 20)
    r = _post(collector, bomb, {**PROTO, "Content-Encoding": "gzip"})
    assert r.status_code == 413
    assert _post(collector, b"not gzip", {**PROTO, "Content-Encoding": "gzip"}).status_code == 400
    deflated = zlib.compress(encode_spans(make_spans(2)).SerializeToString())
    assert _post(collector, deflated, {**PROTO, "Content-Encoding": "deflate"}).status_code == 200
    _healthy(collector)


def test_malformed_http_is_answered(collector: Collector) -> None:
    port = int(collector.http.rsplit(":", 1)[1])
    for raw in [
        b"GARBAGE\r\n\r\n",
        b"POST /v1/traces HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        b"GET / HTTP/1.1\r\n" + b"X: " + b"a" * 70_000 + b"\r\n\r\n",
    ]:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(raw)
            assert s.recv(4096).startswith(b"HTTP/1.1 4")
    _healthy(collector)


def test_grpc_garbage_is_invalid_argument(collector: Collector) -> None:
    with grpc.insecure_channel(collector.grpc) as channel:
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as err:
            export(os.urandom(300), timeout=10)
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    _healthy(collector)


@pytest.mark.system
def test_thousands_of_concurrent_tiny_requests(collector: Collector) -> None:
    bodies = [encode_spans([span]).SerializeToString() for span in make_spans(2000, prefix="tiny")]
    statuses = asyncio.run(_flood(collector.http, bodies, connections=200))
    assert len(statuses) == 2000
    assert set(statuses) <= {200, 503}
    assert statuses.count(200) > 0
    _healthy(collector)


async def _flood(url: str, bodies: list[bytes], connections: int) -> list[int]:
    """Raw keep-alive HTTP/1.1 connections, each sending its share of ``bodies`` in turn."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    statuses: list[int] = []

    async def connection(share: list[bytes]) -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        for body in share:
            writer.write(
                b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                b"application/x-protobuf\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            statuses.append(int(head.split()[1]))
            length = int(head.lower().split("content-length:")[1].split()[0])
            await reader.readexactly(length)
            if "connection: close" in head.lower():
                writer.close()
                reader, writer = await asyncio.open_connection(host, int(port))
        writer.close()

    await asyncio.gather(*(connection(bodies[c::connections]) for c in range(connections)))
    return statuses


def test_slow_and_vanishing_clients_do_not_block_others(collector: Collector) -> None:
    port = int(collector.http.rsplit(":", 1)[1])
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(
        b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: 1000\r\n\r\npartial"
    )
    half.close()
    _healthy(collector)
    for s in idle:
        s.close()


def test_collector_survived_everything(collector: Collector, tmp_path: Path) -> None:
    stats = httpx.get(f"{collector.http}/stats").json()
    assert stats["requests_bad"] > 5 and stats["requests_too_large"] >= 2
    assert collector.proc.poll() is None
