"""Hostile HTTP clients against a real collector: bad framing, slow and idle connections, tokens.

Each test checks what a client sees (the status it reads, how fast a well-behaved client is
served meanwhile) against RFC 9112 and the issue's numbers, not against the server's code.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from hostile_support import (
    PROTO,
    MiB,
    no_tracebacks,
    port_of,
    probing,
    raise_nofile,
    raw_exchange,
    status_of,
    valid_body,
)
from test_collector_support import Collector, start_collector

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
IDLE = 2_100  # more than the collector's 2,048 connection slots


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    raise_nofile(3 * IDLE)  # before the collector starts: it inherits the limit
    col = start_collector(tmp_path_factory.mktemp("http") / "t.duckdb", "--max-body-mb", "8")
    yield col
    assert col.stop() == 0
    no_tracebacks(col)


def _head(extra: bytes, body: bytes = b"") -> bytes:
    return (
        b"POST /v1/traces HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-protobuf\r\n"
        + extra
        + b"\r\n"
        + body
    )


GOOD = valid_body(2, prefix="framing")


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (_head(b"Content-Length: +%d\r\n" % len(GOOD), GOOD), 400),
        (_head(b"Content-Length: 1_0\r\n", b"x" * 10), 400),
        (_head(b"Content-Length: 0x10\r\n", b"x" * 16), 400),
        (_head(b"Content-Length: -1\r\n"), 400),
        (_head(b"Content-Length: %d\r\nContent-Length: 5\r\n" % len(GOOD), GOOD), 400),
        (_head(b"Content-Length: %d, 5\r\n" % len(GOOD), GOOD), 400),
        (
            _head(b"Content-Length: %d\r\nContent-Length: %d\r\n" % (len(GOOD), len(GOOD)), GOOD),
            200,
        ),
        (_head(b"Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n"), 501),
        (_head(b"Transfer-Encoding: chunked, gzip\r\n", b"0\r\n\r\n"), 400),
        (_head(b"Transfer-Encoding: , chunked\r\n", b"0\r\n\r\n"), 400),
        (_head(b"Transfer-Encoding: chunked,\r\n", b"0\r\n\r\n"), 400),
        (_head(b"Transfer-Encoding: identity\r\n", b"0\r\n\r\n"), 400),
        (_head(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"), 400),
        (_head(b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", b"0\r\n\r\n"), 400),
        (_head(b"Transfer-Encoding: chunked\r\n", b"-1\r\nx\r\n0\r\n\r\n"), 400),
        (_head(b"Transfer-Encoding: chunked\r\n", b"0x5\r\nhello\r\n0\r\n\r\n"), 400),
        (_head(b"Transfer-Encoding: chunked\r\n", b"+5\r\nhello\r\n0\r\n\r\n"), 400),
        (_head(b"Transfer-Encoding: chunked\r\n", b"zz\r\n"), 400),
        (_head(b"Transfer-Encoding: chunked\r\n", b"5\r\nhelloXX0\r\n\r\n"), 400),
        (_head(b" Folded: x\r\nContent-Length: 0\r\n"), 400),
        (
            _head(
                b"Transfer-Encoding: chunked\r\n",
                b"%x\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n" % (len(GOOD), GOOD),
            ),
            200,
        ),
    ],
    ids=[
        "cl-plus",
        "cl-underscore",
        "cl-hex",
        "cl-negative",
        "cl-duplicate-differing",
        "cl-list-differing",
        "cl-duplicate-same",
        "te-gzip-chunked",
        "te-chunked-not-last",
        "te-empty-first",
        "te-empty-last",
        "te-identity",
        "te-chunked-twice",
        "te-and-cl",
        "chunk-negative",
        "chunk-0x",
        "chunk-plus",
        "chunk-garbage",
        "chunk-framing",
        "obs-fold",
        "chunked-with-trailer",
    ],
)
def test_framing_is_strict_and_always_answered(
    collector: Collector, raw: bytes, status: int
) -> None:
    answer = raw_exchange(port_of(collector), raw)
    assert status_of(answer) == status, answer[:300]


def test_error_answer_is_readable_while_the_client_is_still_sending(collector: Collector) -> None:
    """A client that sends its whole 40 MiB body before reading (as most do) finishes sending
    without a reset and then reads the 413: the collector answers, half-closes and drops what
    still comes (RFC 9112 9.6), instead of closing on unread data."""
    body = b"\0" * (40 * MiB)
    with socket.create_connection(("127.0.0.1", port_of(collector)), timeout=30) as s:
        s.sendall(_head(b"Content-Length: %d\r\n" % len(body)))
        time.sleep(0.2)  # the answer is sent (and the old code closed) before the body comes
        s.sendall(body)  # a reset here (EPIPE / ECONNRESET) is what clients used to see
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert status_of(answer) == 413, answer[:200]


@pytest.mark.system
def test_dripping_trailers_are_cut_off_while_others_are_served(collector: Collector) -> None:
    port = port_of(collector)
    outcomes: list[tuple[int, float]] = []

    def dripper() -> None:
        started = time.monotonic()
        answer = b""
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(_head(b"Transfer-Encoding: chunked\r\n"))
            s.sendall(b"%x\r\n%s\r\n0\r\n" % (len(GOOD), GOOD))  # the body, then trailers ...
            try:
                for i in range(30):  # ... one line a second, for 30 s if let
                    s.sendall(b"X-Drip-%d: 1\r\n" % i)
                    time.sleep(1)
            except OSError:
                pass
            try:
                while chunk := s.recv(4096):
                    answer += chunk
            except OSError:
                pass
        outcomes.append((status_of(answer), time.monotonic() - started))

    drippers = [threading.Thread(target=dripper) for _ in range(4)]
    with probing(collector) as prober:
        for t in drippers:
            t.start()
        for t in drippers:
            t.join(40)
    prober.assert_all_fast(minimum=10)
    assert len(outcomes) == 4
    for status, took in outcomes:
        assert status == 408
        assert took < 12  # the trailer section gets 5 s in all, not 5 s per line


@pytest.mark.system
def test_idle_connections_never_lock_out_a_well_behaved_client(collector: Collector) -> None:
    if raise_nofile(3 * IDLE) < 2 * IDLE + 100:
        pytest.skip("the open-file limit is too low for 2 x 2,100 sockets here")
    port = port_of(collector)
    idle: list[socket.socket] = []
    try:
        with probing(collector, every=0.1) as prober:
            for i in range(IDLE):
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
                if i % 500 == 499:
                    time.sleep(0.2)
            time.sleep(2)  # hold them all while the prober keeps going
            # And slow-header clients: half a request head each.
            for s in idle[:200]:
                with contextlib.suppress(OSError):  # an evicted one may be closed already
                    s.send(b"POST /v1/traces HTTP/1.1\r\nHost: t\r\n")
            time.sleep(1)
        prober.assert_all_fast(minimum=15)
    finally:
        for s in idle:
            s.close()
    stats = httpx.get(f"{collector.http}/stats", timeout=10).json()
    assert stats["connections_evicted"] > 0


# ---- the token ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Collector, str]]:
    token = "s3cret-" + os.urandom(8).hex()
    d = tmp_path_factory.mktemp("token")
    token_file = d / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    col = start_collector(d / "t.duckdb", "--token-file", str(token_file))
    yield col, token
    assert col.stop() == 0


def test_token_file_keeps_the_token_out_of_ps(guarded: tuple[Collector, str]) -> None:
    col, token = guarded
    cmdline = Path(f"/proc/{col.proc.pid}/cmdline").read_bytes()
    assert token.encode() not in cmdline
    url = f"{col.http}/v1/traces"
    good = valid_body(1, prefix="tok")
    assert httpx.post(url, content=good, headers=PROTO).status_code == 401
    for scheme in ("Bearer", "bearer", "BEARER"):
        auth = {**PROTO, "Authorization": f"{scheme} {token}"}
        assert httpx.post(url, content=good, headers=auth).status_code == 200
        wrong = {**PROTO, "Authorization": f"{scheme} {token}x"}
        assert httpx.post(url, content=good, headers=wrong).status_code == 401
    basic = {**PROTO, "Authorization": f"Basic {token}"}
    assert httpx.post(url, content=good, headers=basic).status_code == 401


@pytest.mark.system
def test_token_from_the_environment(tmp_path: Path) -> None:
    col = start_collector(tmp_path / "t.duckdb", env={"TRACELENS_TOKEN": "from-env"})
    try:
        assert b"from-env" not in Path(f"/proc/{col.proc.pid}/cmdline").read_bytes()
        url = f"{col.http}/v1/traces"
        auth = {**PROTO, "Authorization": "Bearer from-env"}
        assert httpx.post(url, content=valid_body(1), headers=auth).status_code == 200
        assert httpx.post(url, content=valid_body(1), headers=PROTO).status_code == 401
    finally:
        assert col.stop() == 0


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_grpc_bearer_scheme_is_case_insensitive(
    guarded: tuple[Collector, str], scheme: str
) -> None:
    col, token = guarded
    assert col.grpc
    with grpc.insecure_channel(col.grpc) as channel:
        export = channel.unary_unary(EXPORT)
        export(valid_body(1), metadata=(("authorization", f"{scheme} {token}"),), timeout=10)
        with pytest.raises(grpc.RpcError) as err:
            export(valid_body(1), metadata=(("authorization", f"{scheme} wrong"),), timeout=10)
        assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED


@pytest.mark.system
def test_token_file_mistakes_are_usage_errors(tmp_path: Path) -> None:
    import subprocess
    import sys

    from test_collector_support import ROOT

    empty = tmp_path / "empty"
    empty.write_text("\n")
    token = tmp_path / "token"
    token.write_text("t\n")
    for args, env in (
        (["--token-file", str(tmp_path / "missing")], {}),
        (["--token-file", str(empty)], {}),
        (["--token-file", str(token), "--token", "x"], {}),
        (["--token-file", str(token)], {"TRACELENS_TOKEN": "y"}),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "tracelens.cli", "collect", "--db", str(tmp_path / "t"), *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=60,
            env={**os.environ, **env},
        )
        assert result.returncode == 2, (args, result.stderr)
        assert "token" in result.stderr.lower() and "Traceback" not in result.stderr
