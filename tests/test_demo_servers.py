"""The demo's tool server and simulated model server, over real sockets on 127.0.0.1.

They must answer the same arguments the same way (that is what makes the demo's repeats
cacheable), take the time they claim to model, label the model as simulated, and survive any
bytes a client sends.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracelens.demo.model import count_tokens, prompt_text
from tracelens.demo.runner import ServerThread
from tracelens.demo.tools import BASE_MS, SLOW_FACTOR, delay_ms

SPEED = 0.2


@pytest.fixture(scope="module")
def servers() -> Iterator[ServerThread]:
    with ServerThread(seed=7, speed=SPEED, simulate_model=True) as s:
        yield s


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def post(url: str, body: bytes) -> tuple[int, Any]:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def raw(url: str, data: bytes) -> bytes:
    """Sends bytes as they are and returns whatever comes back before the server closes."""
    split = urlsplit(url)
    assert split.hostname is not None and split.port is not None
    with socket.create_connection((split.hostname, split.port), timeout=15) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_same_arguments_same_answer_and_traceparent_recorded(servers: ServerThread) -> None:
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    url = f"{servers.tools_url}/fetch_schema?table=orders"
    first = get(url, {"traceparent": tp})
    assert first == get(url) and first[0] == 200
    assert [c["name"] for c in first[1]["columns"]][:3] == ["id", "customer_id", "status"]
    assert get(f"{servers.tools_url}/weather?city=Osaka") != get(
        f"{servers.tools_url}/weather?city=Lisbon"
    )
    assert tp in servers.tools.traceparents


def test_tool_delays_follow_the_model(servers: ServerThread) -> None:
    for path in BASE_MS:
        for args in (("a",), ("b", "c"), ("zz",)):
            ms = delay_ms(7, path, args)
            assert BASE_MS[path] * 0.75 <= ms <= BASE_MS[path] * 1.25 * SLOW_FACTOR
            assert ms == delay_ms(7, path, args)
    t0 = time.perf_counter()
    status, _ = get(f"{servers.tools_url}/fetch_logs?service=api&since=2026-01-01")
    took_ms = (time.perf_counter() - t0) * 1000
    assert status == 200
    assert took_ms >= delay_ms(7, "/fetch_logs", ("api", "2026-01-01")) * SPEED


def test_simulated_model_takes_prefill_plus_decode_and_says_so(servers: ServerThread) -> None:
    assert servers.model is not None and servers.model_url is not None
    messages = [{"role": "user", "content": "why is my agent slow? " * 40}]
    body = json.dumps({"messages": messages, "max_tokens": 20}).encode()
    t0 = time.perf_counter()
    status, answer = post(f"{servers.model_url}/v1/chat/completions", body)
    took_ms = (time.perf_counter() - t0) * 1000
    assert status == 200 and answer["simulated"] is True
    usage = answer["usage"]
    assert usage["prompt_tokens"] == count_tokens(prompt_text(messages))
    assert 10 <= usage["completion_tokens"] <= 20
    assert len(answer["choices"][0]["message"]["content"].split()) == usage["completion_tokens"]
    prefill, decode = servers.model.timing_ms(usage["prompt_tokens"], usage["completion_tokens"])
    assert answer["timing_ms"] == {"prefill": round(prefill, 3), "decode": round(decode, 3)}
    assert took_ms >= prefill + decode
    again = post(f"{servers.model_url}/v1/chat/completions", body)[1]
    assert again["choices"] == answer["choices"]  # deterministic for a prompt


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"not json", "body: not JSON"),
        (b"[1, 2]", "body: expected a JSON object"),
        (b'{"messages": []}', "body.messages"),
        (b'{"messages": [{"role": "user"}]}', "body.messages[0]"),
        (b'{"messages": [{"content": "x"}], "max_tokens": "9"}', "body.max_tokens"),
        (b'{"messages": [{"content": "x"}], "max_tokens": 0}', "body.max_tokens"),
    ],
)
def test_model_server_names_the_bad_field(servers: ServerThread, body: bytes, field: str) -> None:
    status, answer = post(f"{servers.model_url}/v1/chat/completions", body)
    assert status == 400 and field in answer["error"]


def test_tool_server_refusals(servers: ServerThread) -> None:
    assert get(f"{servers.tools_url}/weather") == (
        400,
        {"error": "query parameter 'city' is required"},
    )
    assert get(f"{servers.tools_url}/nope")[0] == 404
    assert post(f"{servers.tools_url}/weather?city=x", b"{}")[0] == 405
    answer = raw(servers.tools_url, b"GARBAGE\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 ")
    long_header = b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
    assert raw(servers.tools_url, long_header).startswith(b"HTTP/1.1 400 ")
    bad_length = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n"
    assert b"Content-Length" in raw(servers.model_url or "", bad_length)
    short = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 50\r\n\r\n{}"
    assert b"shorter than Content-Length" in raw(servers.model_url or "", short)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=st.binary(max_size=400))
def test_servers_survive_any_bytes(servers: ServerThread, junk: bytes) -> None:
    for url in (servers.tools_url, servers.model_url or ""):
        answer = raw(url, junk)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 ")
    assert get(f"{servers.tools_url}/health") == (200, {"status": "ok"})
