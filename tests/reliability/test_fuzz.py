"""Fuzz: mutated protobuf and JSON bodies against a real collector, mutated files through the
readers.  A fixed seed makes every run the same; the outcome rules are the issue's: no traceback,
no hang, no 5xx but 503, and valid requests among the bad ones answered 200 within 1 s.
"""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from hostile_support import JSON, PROTO, no_tracebacks, valid_body
from test_collector_support import ROOT, Collector, start_collector

from tracelens.errors import InputError
from tracelens.ingest import read_files

SEED = 18
FIXTURES = ROOT / "fixtures"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

Mutator = Callable[[random.Random, bytes], bytes]


def _flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def _set_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(len(out))] = rng.choice([0x00, 0x0A, 0x12, 0x7F, 0x80, 0xFF])
    return bytes(out)


def _insert(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) + 1)
    return data[:i] + rng.randbytes(rng.randint(1, 16)) + data[i:]


def _delete(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + data[i + rng.randint(1, 32) :]


def _duplicate(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data))
    j = min(len(data), i + rng.randint(1, 256))
    return data[:j] + data[i:j] * rng.randint(1, 40) + data[j:]


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data))]


def _splice(rng: random.Random, data: bytes) -> bytes:
    i, j = sorted(rng.randrange(len(data)) for _ in range(2))
    return data[:i] + data[j:] + data[i:j]


BYTE_MUTATORS: tuple[Mutator, ...] = (
    _flip,
    _set_bytes,
    _insert,
    _delete,
    _duplicate,
    _truncate,
    _splice,
)

_JSON_SNIPPETS = (
    b"[",
    b"]",
    b"{",
    b"}",
    b'"',
    b"\\",
    b",",
    b":",
    b"NaN",
    b"-Infinity",
    b"1e999",
    b"-0",
    b"18446744073709551616",
    b"null",
    b"true",
    b'"\\ud800"',
    b'"\\udc00\\ud800"',
    b'"\\u0000"',
    b"\xed\xa0\x80",
    b"\xff\xfe",
    b"[" * 2000 + b"]" * 2000,
    b'{"a":' * 700 + b"1" + b"}" * 700,
    b'"' + b"x" * 100_000 + b'"',
    b"\n",
)


def _json_token(rng: random.Random, data: bytes) -> bytes:
    i = rng.randrange(len(data) + 1)
    cut = rng.choice([0, 0, 1, 2, 8])
    return data[:i] + rng.choice(_JSON_SNIPPETS) + data[i + cut :]


def _json_value(rng: random.Random, data: bytes) -> bytes:
    """Replace one value of the parsed document with a hostile one (keeps the JSON valid)."""
    try:
        doc = json.loads(data)
    except ValueError:
        return _json_token(rng, data)
    stack: list[object] = [doc]
    containers: list[object] = []
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list):
            containers.append(node)
            stack.extend(node.values() if isinstance(node, dict) else node)
    target = rng.choice(containers)
    hostile = rng.choice(
        [None, 0, -1, 2**70, 1.5, True, "", "x" * 5000, "\ud800", [], {}, [[[[1]]]], "0" * 32]
    )
    if isinstance(target, dict) and target:
        target[rng.choice(list(target))] = hostile
    elif isinstance(target, list) and target:
        target[rng.randrange(len(target))] = hostile
    return json.dumps(doc).encode("utf-8", "surrogatepass")


JSON_MUTATORS: tuple[Mutator, ...] = (*BYTE_MUTATORS, _json_token, _json_token, _json_value)


def _mutate(rng: random.Random, data: bytes, mutators: tuple[Mutator, ...]) -> bytes:
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        data = rng.choice(mutators)(rng, data) if data else rng.randbytes(8)
    return data


def _otlp_json_seeds() -> list[bytes]:
    seeds = [
        (FIXTURES / "otlp" / "opentelemetry-proto_examples_trace.json").read_bytes(),
        (FIXTURES / "otlp" / "hotrod_dispatch_jaeger-ui_v3_getTrace-response.json").read_bytes(),
    ]
    return seeds


# ---- the collector ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    col = start_collector(tmp_path_factory.mktemp("fuzz") / "t.duckdb", "--max-body-mb", "4")
    yield col
    assert col.stop() == 0
    no_tracebacks(col)


def _bodies(rng: random.Random, n: int) -> list[tuple[bytes, dict[str, str]]]:
    proto_seeds = [valid_body(1, "p"), valid_body(7, "q"), valid_body(30, "r")]
    json_seeds = _otlp_json_seeds()
    out: list[tuple[bytes, dict[str, str]]] = []
    for k in range(n):
        if k % 2 == 0:
            body, headers = _mutate(rng, rng.choice(proto_seeds), BYTE_MUTATORS), PROTO
        else:
            body, headers = _mutate(rng, rng.choice(json_seeds), JSON_MUTATORS), JSON
        if k % 10 == 3:  # compressed: mutate before or after compressing
            if rng.random() < 0.5:
                body = gzip.compress(body)
                body = _mutate(rng, body, BYTE_MUTATORS) if rng.random() < 0.5 else body
                headers = {**headers, "Content-Encoding": "gzip"}
            else:
                body = zlib.compress(body)
                body = _mutate(rng, body, BYTE_MUTATORS) if rng.random() < 0.5 else body
                headers = {**headers, "Content-Encoding": "deflate"}
        out.append((body, headers))
    return out


@pytest.mark.system
def test_fuzzed_http_bodies(collector: Collector) -> None:
    rng = random.Random(SEED)
    bodies = _bodies(rng, 1_200)
    good = valid_body(3, "interleaved")
    statuses: Counter[int] = Counter()
    slow_valid: list[tuple[int, int, float]] = []
    started = time.monotonic()
    with httpx.Client(base_url=collector.http, timeout=30) as client:
        for k, (body, headers) in enumerate(bodies):
            answer = client.post("/v1/traces", content=body, headers=headers)
            statuses[answer.status_code] += 1
            assert answer.status_code < 500 or answer.status_code == 503, (
                k,
                answer.status_code,
                answer.content[:300],
            )
            if k % 10 == 9:
                t0 = time.monotonic()
                ok = client.post("/v1/traces", content=good, headers=PROTO)
                took = time.monotonic() - t0
                if ok.status_code != 200 or took > 1:
                    slow_valid.append((k, ok.status_code, took))
    elapsed = time.monotonic() - started
    assert not slow_valid, slow_valid[:5]
    assert elapsed < 60, elapsed
    # The mutations reach both outcomes: some bodies are still valid, most are refused.
    assert statuses[200] > 50 and statuses[400] > 300, statuses
    assert httpx.get(f"{collector.http}/health").status_code == 200


def test_fuzzed_grpc_messages(collector: Collector) -> None:
    assert collector.grpc
    rng = random.Random(SEED + 1)
    seeds = [valid_body(1, "g"), valid_body(12, "h")]
    codes: Counter[str] = Counter()
    allowed = {"OK", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "UNAVAILABLE"}
    with grpc.insecure_channel(collector.grpc) as channel:
        export = channel.unary_unary(EXPORT)
        for k in range(300):
            message = _mutate(rng, rng.choice(seeds), BYTE_MUTATORS)
            try:
                export(message, timeout=10)
                codes["OK"] += 1
            except grpc.RpcError as err:
                codes[err.code().name] += 1
                assert err.code().name in allowed, (k, err.code(), err.details())
            if k % 20 == 19:
                t0 = time.monotonic()
                export(seeds[0], timeout=10)
                assert time.monotonic() - t0 < 1
    assert codes["OK"] > 10 and codes["INVALID_ARGUMENT"] > 100, codes


# ---- files --------------------------------------------------------------------------------------


def _file_seeds() -> list[tuple[str, bytes]]:
    otlp = _otlp_json_seeds()
    lines = b"\n".join(json.dumps(json.loads(s)).encode() for s in otlp[:1] * 3) + b"\n"
    return [
        ("json", otlp[0]),
        ("json", otlp[1]),
        ("jsonl", lines),
        ("jaeger", (FIXTURES / "jaeger" / "genaiTestTrace.json").read_bytes()),
        ("zipkin", (FIXTURES / "zipkin" / "yelp.json").read_bytes()),
        ("zipkin", (FIXTURES / "zipkin" / "skew.json").read_bytes()),
        ("pb", valid_body(9, "f")),
    ]


def _mutated_files(directory: Path, n: int) -> list[Path]:
    rng = random.Random(SEED + 2)
    seeds = _file_seeds()
    paths = []
    for k in range(n):
        kind, seed = rng.choice(seeds)
        data = _mutate(rng, seed, BYTE_MUTATORS if kind == "pb" else JSON_MUTATORS)
        suffix = f".{kind}"
        if k % 7 == 0:
            data = gzip.compress(data)
            if rng.random() < 0.3:
                data = _mutate(rng, data, BYTE_MUTATORS)
            suffix += ".gz"
        path = directory / f"f{k:03d}{suffix}"
        path.write_bytes(data)
        paths.append(path)
    return paths


def test_fuzzed_files_read_or_fail_cleanly(tmp_path: Path) -> None:
    paths = _mutated_files(tmp_path, 420)
    outcomes: Counter[str] = Counter()
    started = time.monotonic()
    for path in paths:
        t0 = time.monotonic()
        try:
            read_files([path])
            outcomes["read"] += 1
        except InputError as exc:
            assert str(path) in str(exc)  # the error names the file
            outcomes["input error"] += 1
        assert time.monotonic() - t0 < 5, path
    assert time.monotonic() - started < 60
    assert outcomes["read"] > 20 and outcomes["input error"] > 150, outcomes


@pytest.mark.system
def test_fuzzed_files_through_the_cli(tmp_path: Path) -> None:
    paths = _mutated_files(tmp_path, 420)
    rng = random.Random(SEED + 3)
    for i, path in enumerate(rng.sample(paths, 8)):
        command = ["analyze", str(path)] if i % 2 else ["import", str(path), "--db"]
        if command[0] == "import":
            command.append(str(tmp_path / f"s{i}.duckdb"))
        result = subprocess.run(
            [sys.executable, "-m", "tracelens.cli", *command],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert result.returncode in (0, 2), (path, result.returncode, result.stderr[-2000:])
        assert "Traceback" not in result.stderr
