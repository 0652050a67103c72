"""Decoding traps: the wedge body, gzip bombs, deep nesting, lone surrogates, empty entries.

Each case is checked where users meet it: the collector (a real process: the answer, then a
valid request still answered at once) and the file readers (``analyze``/``import``: a clean
error naming file and line, exit 2, never a traceback).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from hostile_support import (
    JSON,
    PROTO,
    MiB,
    PeakRss,
    clean_exit_2,
    cli,
    gzip_bomb,
    no_tracebacks,
    valid_body,
)
from test_collector_support import ROOT, Collector, start_collector

from tracelens.collector import otlp
from tracelens.errors import InputError
from tracelens.ingest import read_files
from tracelens.ingest.otlp_proto import _decode

TRACE = "0123456789abcdef0123456789abcdef"


def _doc(service: str = "svc", name: str = "op") -> dict[str, object]:
    """One OTLP/JSON span, written out by hand (the truth the readers are checked against)."""
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": service}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": TRACE,
                                "spanId": "0123456789abcdef",
                                "name": name,
                                "startTimeUnixNano": "1000",
                                "endTimeUnixNano": "2000",
                            }
                        ]
                    }
                ],
            }
        ]
    }


def _wedge() -> bytes:
    """The issue's body: a gzip member inflating to 2 MiB, then another member."""
    return gzip.compress(b"x" * (2 * MiB)) + gzip.compress(b"y")


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 127:
        out.append(n & 127 | 128)
        n >>= 7
    out.append(n)
    return bytes(out)


def _in_thread(fn: object, timeout: float) -> object:
    """``fn()`` in a daemon thread: its result, or a failure if it has not ended in time."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(fn())  # type: ignore[operator]
        except Exception as exc:
            box.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), f"still running after {timeout} s"
    return box[0]


# ---- the collector's decompression, in-process ---------------------------------------------------


def test_wedge_body_inflates_every_member_and_ends() -> None:
    body = _wedge()
    assert 2000 < len(body) < 2200  # the 2,089 bytes, give or take gzip's header
    out = _in_thread(lambda: otlp.decompress(body, "gzip", 64 * MiB), 5)
    assert out == b"x" * (2 * MiB) + b"y"
    too_large = _in_thread(lambda: otlp.decompress(body, "gzip", 2 * MiB), 5)
    assert isinstance(too_large, otlp.BodyTooLarge)


def test_members_share_one_limit_and_bad_tails_are_errors() -> None:
    one = gzip.compress(b"a" * 1000)
    assert otlp.decompress(one * 5, "gzip", 5000) == b"a" * 5000
    assert isinstance(_in_thread(lambda: otlp.decompress(one * 6, "gzip", 5000), 5), Exception)
    deflated = zlib.compress(b"p" * 300) + zlib.compress(b"q")
    assert otlp.decompress(deflated, "deflate", 1000) == b"p" * 300 + b"q"
    with pytest.raises(InputError, match="truncated"):
        otlp.decompress(one[:-6], "gzip", 5000)
    with pytest.raises(InputError, match="bad gzip"):
        otlp.decompress(one + b"trailing junk", "gzip", 5000)


def test_a_bomb_is_refused_after_the_limit_not_after_inflating_it() -> None:
    bomb = gzip_bomb(256 * MiB)
    started = time.monotonic()
    with pytest.raises(otlp.BodyTooLarge):
        otlp.decompress(bomb, "gzip", 4 * MiB)
    assert time.monotonic() - started < 2


def _empty_spans(n: int) -> bytes:
    spans = b"\x12\x00" * n  # ScopeSpans.spans, each an empty Span
    scope = b"\x12" + _varint(len(spans)) + spans
    return b"\x0a" + _varint(len(scope)) + scope  # one ResourceSpans


def test_the_decode_cost_is_refused_at_the_allowance_whatever_the_body_length() -> None:
    """A body is refused exactly when its spans would cost more than the allowance: at 1,000
    empty spans (2 bytes each, the least a span takes) and an allowance of 1,000 spans, the
    length alone can no longer clear it (so they are counted), and one span more is refused."""
    allowance = 1000 * otlp.SPAN_COST
    otlp.check_decode_cost(_empty_spans(1000), allowance)
    with pytest.raises(otlp.BodyTooLarge, match="over 1001 spans"):
        otlp.check_decode_cost(_empty_spans(1001), allowance)
    otlp.check_decode_cost(_empty_spans(500), allowance)  # short enough not to be counted


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "python"])
def test_entries_without_spans_are_capped(native: bool) -> None:
    assert _decode(b"\x0a\x00" * 10_000, "<r>", native=native).table.num_rows == 0
    with pytest.raises(InputError, match="without spans"):
        _decode(b"\x0a\x00" * 10_001, "<r>", native=native)
    # One resource holding 10,001 empty scopes: each of them counts.
    scopes = b"\x12\x00" * 10_001
    one_resource = b"\x0a" + _varint(len(scopes)) + scopes
    with pytest.raises(InputError, match="without spans"):
        _decode(one_resource, "<r>", native=native)
    # The same beside a scope with a span: the empty ones still count.
    span = b"\x0a\x10" + b"\x01" * 16 + b"\x12\x08" + b"\x02" * 8
    with_span = b"\x12" + _varint(len(span) + 2) + b"\x12" + _varint(len(span)) + span + scopes
    with pytest.raises(InputError, match="without spans"):
        _decode(b"\x0a" + _varint(len(with_span)) + with_span, "<r>", native=native)


def test_sixty_mib_of_empty_resource_spans_is_refused_fast() -> None:
    started = time.monotonic()
    with pytest.raises(InputError, match="without spans"):
        _decode(b"\x0a\x00" * (30 * MiB), "<r>", native=True)
    assert time.monotonic() - started < 2  # was 96 s on the only decode thread


# ---- the collector, a real process ------------------------------------------------------------


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    col = start_collector(tmp_path_factory.mktemp("decoding") / "t.duckdb")
    yield col
    assert col.stop() == 0
    no_tracebacks(col)


def _post(col: Collector, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{col.http}/v1/traces", content=body, headers=headers, timeout=30)


def _prompt(col: Collector) -> None:
    started = time.monotonic()
    assert _post(col, valid_body(), PROTO).status_code == 200
    assert time.monotonic() - started < 1


def test_collector_answers_the_wedge_body_and_stays_prompt(collector: Collector) -> None:
    answer = _post(collector, _wedge(), {**PROTO, "Content-Encoding": "gzip"})
    assert answer.status_code == 400  # 2 MiB of "x" is no protobuf request
    _prompt(collector)
    real = gzip.compress(valid_body(2)) + gzip.compress(b"")  # two members, the second empty
    assert _post(collector, real, {**PROTO, "Content-Encoding": "gzip"}).status_code == 200


@pytest.mark.system
def test_collector_refuses_a_1_gib_bomb_without_inflating_it(collector: Collector) -> None:
    bomb = gzip_bomb(1 << 30)
    assert len(bomb) < 2 * MiB
    peak = PeakRss(collector.proc.pid)
    answer = _post(collector, bomb, {**PROTO, "Content-Encoding": "gzip"})
    rss = peak.stop()
    assert answer.status_code == 413
    assert rss < 700 * MiB, rss / MiB
    _prompt(collector)


def test_collector_refuses_surrogates_and_deep_json_with_400(collector: Collector) -> None:
    lone = json.dumps(_doc(service="a\ud800")).encode()
    assert b"\\ud800" in lone  # json.dumps escapes it: the wire holds the escape
    answer = _post(collector, lone, JSON)
    assert answer.status_code == 400
    assert "surrogate" in answer.json()["message"]
    deep = b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    answer = _post(collector, deep, JSON)
    assert answer.status_code == 400
    assert "nested deeper" in answer.json()["message"]
    pair = json.dumps(_doc(service="\U0001f600")).encode()  # a valid surrogate pair escape
    assert b"\\ud83d\\ude00" in pair
    assert _post(collector, pair, JSON).status_code == 200
    _prompt(collector)


def test_collector_refuses_60_mib_of_empty_resource_spans_and_keeps_serving(
    collector: Collector,
) -> None:
    from hostile_support import probing

    with probing(collector, every=0.1) as prober:
        time.sleep(0.3)
        started = time.monotonic()
        answer = _post(collector, b"\x0a\x00" * (30 * MiB), PROTO)
        took = time.monotonic() - started
        time.sleep(0.5)
    assert answer.status_code == 400
    assert took < 10
    prober.assert_all_fast()


# ---- files: analyze and import ------------------------------------------------------------------


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("files")
    good = json.dumps(_doc())
    files = {
        "deep": (good + "\n" + "[" * 100_000 + "]" * 100_000 + "\n").encode(),
        "surrogate": (good + "\n" + json.dumps(_doc(service="b\udc00")) + "\n").encode(),
        "surrogate-doc": json.dumps(_doc(service="a\ud800"), indent=1).encode(),
    }
    paths = {}
    for name, data in files.items():
        paths[name] = d / f"{name}.jsonl"
        paths[name].write_bytes(data)
    return paths


@pytest.mark.parametrize("command", ["analyze", "import"])
def test_deep_jsonl_is_a_clean_error_naming_file_and_line(
    command: str, bad_files: dict[str, Path], tmp_path: Path
) -> None:
    extra = ["--db", str(tmp_path / "s.duckdb")] if command == "import" else []
    result = cli(command, str(bad_files["deep"]), *extra, timeout=120)
    clean_exit_2(result, f"{bad_files['deep']}:2", "nested deeper than")


@pytest.mark.parametrize("command", ["analyze", "import"])
def test_lone_surrogate_is_a_clean_error_naming_file_and_line(
    command: str, bad_files: dict[str, Path], tmp_path: Path
) -> None:
    extra = ["--db", str(tmp_path / "s.duckdb")] if command == "import" else []
    result = cli(command, str(bad_files["surrogate"]), *extra, timeout=120)
    clean_exit_2(result, f"{bad_files['surrogate']}:2", "lone surrogate \\udc00")


def test_lone_surrogate_in_a_document_names_its_line(bad_files: dict[str, Path]) -> None:
    with pytest.raises(InputError, match="lone surrogate") as err:
        read_files([bad_files["surrogate-doc"]])
    text = bad_files["surrogate-doc"].read_text()
    assert err.value.line == text[: text.index("\\ud800")].count("\n") + 1


def test_escaped_backslash_before_u_is_plain_text(tmp_path: Path) -> None:
    doc = json.dumps(_doc(service="\\ud800", name="x")).encode() + b"\n"
    assert b"\\\\ud800" in doc  # a backslash, then the letters u d 8 0 0
    path = tmp_path / "t.json"
    path.write_bytes(doc.replace(b'"x"', b'"x", "droppedAttributesCount": NaN'))  # fallback path
    spans = read_files([path]).spans
    assert spans["service"].to_pylist() == ["\\ud800"]


def test_multi_member_gzip_file_reads_every_member(tmp_path: Path) -> None:
    a = json.dumps(_doc(name="first")).encode() + b"\n"
    b = json.dumps(_doc(name="second")).encode() + b"\n"
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(a) + gzip.compress(b))
    assert read_files([path]).spans["name"].to_pylist() == ["first", "second"]


@pytest.mark.system
def test_1_gib_gzip_bomb_file_is_refused_with_bounded_memory(tmp_path: Path) -> None:
    prefix = b'{"resourceSpans":[{"resource":{"attributes":[{"key":"a","value":{"stringValue":"'
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip_bomb(1 << 30, prefix))
    assert path.stat().st_size < 2 * MiB
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracelens.cli", "analyze", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    peak = PeakRss(proc.pid)
    _, stderr = proc.communicate(timeout=120)
    rss = peak.stop()
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr
    assert f"{path}:1" in stderr and "larger than 256 MiB" in stderr
    # The 256 MiB cap read as one line (held about twice while it is joined), plus the
    # interpreter; the issue measured 4.2 GB for a smaller bomb.
    assert rss < 900 * MiB, rss / MiB
    assert psutil.pid_exists(proc.pid) is False or proc.poll() is not None


@pytest.mark.system
def test_large_bodies_decoding_do_not_hold_up_small_requests(collector: Collector) -> None:
    """Three 8 MiB requests of real spans take seconds to decode and store; small requests keep
    their second (large bodies take turns on one decode thread, small ones use the other)."""
    from concurrent.futures import ThreadPoolExecutor

    from hostile_support import probing
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    base = ExportTraceServiceRequest.FromString(valid_body(100, "large"))
    spans = base.resource_spans[0].scope_spans[0].spans
    template = list(spans)
    per_span = len(base.SerializeToString()) / len(template)
    bodies = []
    for k in range(3):
        request = ExportTraceServiceRequest()
        request.CopyFrom(base)
        out = request.resource_spans[0].scope_spans[0].spans
        del out[:]
        for i in range(int(8 * MiB / per_span)):
            span = out.add()
            span.CopyFrom(template[i % len(template)])
            span.span_id = (k << 40 | i + 1).to_bytes(8, "big")
        bodies.append(request.SerializeToString())
    with probing(collector, every=0.1) as prober, ThreadPoolExecutor(3) as pool:
        time.sleep(0.3)
        started = time.monotonic()
        statuses = list(pool.map(lambda b: _post(collector, b, PROTO).status_code, bodies))
        took = time.monotonic() - started
        time.sleep(0.3)
    assert set(statuses) <= {200, 503}, statuses
    print(f"3 x 8 MiB: {statuses} in {took:.1f} s; probes {len(prober.results)}")
    prober.assert_all_fast(minimum=5)


def test_json_entries_without_spans_are_capped_like_protobuf() -> None:
    from tracelens.ingest import read_bytes

    def doc(resources: str) -> bytes:
        return ('{"resourceSpans":[' + resources + "]}").encode()

    assert read_bytes(doc(",".join(["{}"] * 10_000)), "<r>").num_rows == 0
    with pytest.raises(InputError, match="without spans"):
        read_bytes(doc(",".join(["{}"] * 10_001)), "<r>")
    scopes = '{"scopeSpans":[' + ",".join(['{"spans":[]}'] * 10_000) + "]}"
    with pytest.raises(InputError, match="without spans"):
        read_bytes(doc(scopes), "<r>")
    # Empty entries beside real spans count too; the real spans alone are fine.
    real = json.dumps(_doc())[len('{"resourceSpans": [') : -2]
    assert read_bytes(doc(",".join([real] * 3)), "<r>").num_rows == 3
