"""What exporting a decorated span costs, against a bare span, in the exporter's thread.

The decorator's attributes (8 with fresh arguments) are encoded by whatever exporter the
BatchSpanProcessor feeds, in its own thread, holding the GIL: on a busy process that is time
taken from the application.  This measures, per span, for 2000 bare spans and 2000 spans of
the same function decorated with ``@trace`` (a new argument value on every call):

* ``tracelens file=`` exporter (OTLP JSON Lines): the text it writes (``traces_data_json``), and
  the reference ``json.dumps(traces_data(...))`` it replaced (baseline, ``tests/reference_jsonl``);
* the SDK's OTLP protobuf encoding (``encode_spans(...).SerializeToString()``), what
  ``configure(endpoint=...)`` sends.

    python bench/export.py [--spans 2000] [--repeats 9]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tracelens_instrumentation import _runtime, trace
from tracelens_instrumentation.jsonl import traces_data_json

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the reference
from reference_jsonl import traces_data


def plain(a: int, b: str) -> int:
    return a + len(b)


def make_spans(n: int) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _runtime.activate(provider)  # the decorator traces into this provider only
    tracer = provider.get_tracer("bench")
    decorated = trace(name="plain")(plain)
    counter = itertools.count(1_000_000_000)
    for _ in range(n):
        with tracer.start_as_current_span("plain"):
            plain(next(counter), "x")
    bare = list(exporter.get_finished_spans())
    exporter.clear()
    for _ in range(n):
        decorated(next(counter), "x")
    ours = list(exporter.get_finished_spans())
    return bare, ours


Encoder = Callable[[Sequence[ReadableSpan]], Any]


def per_span(fn: Encoder, spans: list[ReadableSpan], k: int) -> float:
    """Median microseconds per span over ``k`` encodings of the whole list."""
    times = []
    for _ in range(k):
        start = time.perf_counter()
        fn(spans)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / len(spans) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    bare, ours = make_spans(args.spans)
    encoders: dict[str, Encoder] = {
        "file=: json.dumps(traces_data) (baseline)": lambda s: json.dumps(
            traces_data(s), separators=(",", ":"), ensure_ascii=False
        ),
        "file=: traces_data_json (written)": traces_data_json,
        "OTLP protobuf (SDK encode_spans)": lambda s: encode_spans(s).SerializeToString(),
    }
    print(f"{args.spans} spans, medians of {args.repeats}; attributes per decorated span: "
          f"{len(ours[-1].attributes or {})}")  # fmt: skip
    print(f"{'encoder':44}{'bare us':>9}{'@trace us':>11}{'extra us':>10}")
    results = {}
    for name, fn in encoders.items():
        b, o = per_span(fn, bare, args.repeats), per_span(fn, ours, args.repeats)
        results[name] = o
        print(f"{name:44}{b:9.2f}{o:11.2f}{o - b:+10.2f}")
    base = results["file=: json.dumps(traces_data) (baseline)"]
    written = results["file=: traces_data_json (written)"]
    print(f"file= exporter, decorated span: {base / written:.2f}x faster than the baseline")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
