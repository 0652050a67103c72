"""Deterministic agent-shaped traces for benchmarks and sample reports.

Each trace follows one template of ~50 spans (plan, a queue wait, model calls, tool calls over
HTTP done one after another although independent, a repeated tool call, a retrieval with an
N+1 loop of document reads, a failed call and its retry, post-processing), with per-trace
random durations.  Generation is vectorised over traces: 1M spans take a few seconds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from tracelens.schema import SPAN_SCHEMA

DAY_NS = 86_400 * 10**9
DEFAULT_START_NS = 1_764_547_200 * 10**9  # 2025-12-01T00:00:00Z, a Monday


@dataclass
class Node:
    name: str
    parent: int | None
    span_kind: str = "internal"
    service: str = "agent"
    kind: str | None = None  # tracelens.kind when "instrumented"
    ms: float = 1.0  # median own duration (leaves) or self time (parents)
    sigma: float = 0.35
    attrs: dict[str, str] = field(default_factory=dict)
    args: str | None = None  # args fingerprint; "{i}" varies per trace
    result: str | None = None
    uses: tuple[int, ...] = ()  # template nodes whose result this one consumes
    status: str = "unset"


def template() -> list[Node]:
    t: list[Node] = []

    def add(node: Node) -> int:
        t.append(node)
        return len(t) - 1

    root = add(Node("handle_request", None, "server", ms=2, attrs={"http.route": "/agent"}))
    plan = add(Node("plan", root, kind="cpu", ms=25, args="q{i}", result="plan{i}"))
    add(Node("model_queue.wait", root, kind="wait", ms=40, sigma=0.8))
    llm1 = add(
        Node(
            "chat",
            root,
            "client",
            "agent",
            ms=3,
            attrs={"gen_ai.operation.name": "chat"},
            args="plan{i}",
            result="tools{i}",
            uses=(plan,),
        )
    )
    add(Node("llm_request", llm1, "server", "model", kind="gpu", ms=180, sigma=0.3))
    tools = []
    for name, ms in (("fetch_schema", 60), ("fetch_logs", 90), ("search_docs", 70)):
        tid = add(
            Node(
                name,
                root,
                kind="io",
                ms=1,
                args=f"{name}-args-{{i}}" if name != "fetch_schema" else "schema-v1",
                result=f"{name}-out{{i}}",
                uses=(llm1,),
            )
        )
        add(
            Node(
                "HTTP GET",
                tid,
                "client",
                "agent",
                ms=ms,
                attrs={"http.request.method": "GET", "url.full": f"http://127.0.0.1:8080/{name}"},
            )
        )
        tools.append(tid)
    rep = add(
        Node("fetch_schema", root, kind="io", ms=1, args="schema-v1", result="fetch_schema-out{i}")
    )
    add(
        Node(
            "HTTP GET",
            rep,
            "client",
            "agent",
            ms=60,
            attrs={"http.request.method": "GET", "url.full": "http://127.0.0.1:8080/fetch_schema"},
        )
    )
    retr = add(Node("retrieve", root, kind="io", ms=2, args="q{i}", result="docs{i}"))
    add(
        Node(
            "embed",
            retr,
            "client",
            kind="gpu",
            ms=15,
            attrs={"gen_ai.operation.name": "embeddings"},
        )
    )
    add(
        Node(
            "SELECT chunks",
            retr,
            "client",
            "vectordb",
            ms=20,
            attrs={"db.system.name": "postgresql", "db.query.text": "SELECT * FROM chunks"},
        )
    )
    for d in range(8):
        g = add(
            Node(
                "get_document",
                root,
                kind="io",
                ms=0.5,
                args=f"doc{d}-{{i}}",
                result=f"doc{d}-{{i}}",
            )
        )
        add(
            Node(
                "SELECT documents",
                g,
                "client",
                "docstore",
                ms=6,
                attrs={
                    "db.system.name": "postgresql",
                    "db.query.text": "SELECT body FROM documents WHERE id=$1",
                },
            )
        )
    fail = add(Node("call_api", root, kind="io", ms=1, args="api{i}", status="error"))
    add(
        Node(
            "HTTP POST",
            fail,
            "client",
            ms=30,
            status="error",
            attrs={"http.request.method": "POST", "url.full": "http://127.0.0.1:8080/api"},
        )
    )
    ok = add(Node("call_api", root, kind="io", ms=1, args="api{i}", result="api-out{i}"))
    add(
        Node(
            "HTTP POST",
            ok,
            "client",
            ms=35,
            attrs={"http.request.method": "POST", "url.full": "http://127.0.0.1:8080/api"},
        )
    )
    llm2 = add(
        Node(
            "chat",
            root,
            "client",
            "agent",
            ms=3,
            attrs={"gen_ai.operation.name": "chat"},
            args="tools{i}",
            result="answer{i}",
            uses=(*tools, retr),
        )
    )
    add(Node("llm_request", llm2, "server", "model", kind="gpu", ms=260, sigma=0.4))
    post = add(Node("postprocess", root, kind="cpu", ms=4, uses=(llm2,)))
    for step in ("parse", "validate", "redact", "format", "render", "score", "log"):
        add(Node(f"postprocess.{step}", post, kind="cpu", ms=1.5))
    add(Node("respond", root, "internal", kind="cpu", ms=3))
    while len(t) < 50:
        add(
            Node("cache.lookup", root, "client", "cache", ms=0.4, attrs={"db.system.name": "redis"})
        )
    return t


def _fp(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def make_traces(
    n_traces: int,
    seed: int = 0,
    *,
    start_ns: int = DEFAULT_START_NS,
    spacing_ns: int = 60 * 10**9,
    slowdown: float = 1.0,
) -> pa.Table:
    """``n_traces`` traces of the template, the k-th starting at ``start_ns + k*spacing_ns``.

    ``slowdown`` scales every duration (to fake a regression in a later week).
    """
    tpl = template()
    m = len(tpl)
    rng = np.random.default_rng(seed)
    med = np.array([n.ms for n in tpl]) * 1e6 * slowdown
    sig = np.array([n.sigma for n in tpl])
    own = (med * rng.lognormal(0.0, sig, size=(n_traces, m))).astype(np.int64)  # self / leaf
    gap = rng.integers(20_000, 300_000, size=(n_traces, m))  # between siblings
    children: list[list[int]] = [[] for _ in range(m)]
    for j, node in enumerate(tpl):
        if node.parent is not None:
            children[node.parent].append(j)
    # Bottom-up durations (template indices of children are always larger than the parent's).
    dur = own.copy()
    for j in range(m - 1, -1, -1):
        if children[j]:
            dur[:, j] = own[:, j] + sum(dur[:, c] + gap[:, c] for c in children[j])
    # Top-down starts: children one after another, after half the parent's self time.
    start = np.zeros((n_traces, m), dtype=np.int64)
    start[:, 0] = start_ns + np.arange(n_traces, dtype=np.int64) * spacing_ns
    for j in range(m):
        cursor = start[:, j] + own[:, j] // 2
        for c in children[j]:
            cursor = cursor + gap[:, c]
            start[:, c] = cursor
            cursor = cursor + dur[:, c]
    end = start + dur
    return _to_arrow(tpl, start, end, seed)


def _to_arrow(tpl: list[Node], start: np.ndarray, end: np.ndarray, seed: int) -> pa.Table:
    n, m = start.shape
    trace_ids = [f"{seed & 0xFFFFFFFF:08x}{i:024x}" for i in range(n)]
    span_num = np.arange(n * m, dtype=np.int64).reshape(n, m) + 1 + (seed << 40)
    span_ids = [f"{v:016x}" for v in span_num.ravel().tolist()]
    parent_idx = [node.parent for node in tpl]
    parents = [
        (f"{span_num[i, p]:016x}" if p is not None else None) for i in range(n) for p in parent_idx
    ]

    def per_trace(pattern: str | None, i: int) -> str | None:
        return None if pattern is None else _fp(pattern.replace("{i}", str(i)))

    def fps(j: int, i: int) -> list[str] | None:
        used = [per_trace(tpl[u].result, i) for u in tpl[j].uses if tpl[u].result]
        mine = per_trace(tpl[j].args, i)
        got = [v for v in [mine, *used] if v]
        return got or None

    args_hash = [per_trace(tpl[j].args, i) for i in range(n) for j in range(m)]
    result_hash = [per_trace(tpl[j].result, i) for i in range(n) for j in range(m)]
    arg_fps = [fps(j, i) for i in range(n) for j in range(m)]
    result_fps = [
        ([h] if (h := per_trace(tpl[j].result, i)) else None) for i in range(n) for j in range(m)
    ]
    keys = [list(node.attrs) for node in tpl]
    vals = [list(node.attrs.values()) for node in tpl]
    lens = np.tile(np.array([len(k) for k in keys], dtype=np.int32), n)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    flat_k = [k for _ in range(n) for ks in keys for k in ks]
    flat_v = [v for _ in range(n) for vs in vals for v in vs]
    attributes = pa.MapArray.from_arrays(
        pa.array(offsets), pa.array(flat_k, pa.string()), pa.array(flat_v, pa.string())
    )
    rep = lambda xs: [x for _ in range(n) for x in xs]  # noqa: E731
    resource = [
        f'{{"service.name":"{node.service}","deployment.environment":"bench"}}' for node in tpl
    ]
    cols = {
        "trace_id": [t for t in trace_ids for _ in range(m)],
        "span_id": span_ids,
        "parent_span_id": parents,
        "name": rep([node.name for node in tpl]),
        "service": rep([node.service for node in tpl]),
        "span_kind": rep([node.span_kind for node in tpl]),
        "start_ns": start.ravel(),
        "end_ns": end.ravel(),
        "status_code": rep([node.status for node in tpl]),
        "status_message": rep(
            [("upstream 503" if node.status == "error" else None) for node in tpl]
        ),
        "kind": rep([node.kind for node in tpl]),
        "cpu_ns": [None] * (n * m),
        "args_hash": args_hash,
        "result_hash": result_hash,
        "arg_fps": arg_fps,
        "result_fps": result_fps,
        "attributes": attributes,
        "json_attributes": [None] * (n * m),
        "resource": rep(resource),
        "scope_name": rep(["bench.synth"] * m),
        "scope_version": [None] * (n * m),
        "events": [None] * (n * m),
        "links": [None] * (n * m),
    }
    arrays = [
        cols[f.name] if isinstance(cols[f.name], pa.Array) else pa.array(cols[f.name], f.type)
        for f in SPAN_SCHEMA
    ]
    return pa.Table.from_arrays(arrays, schema=SPAN_SCHEMA)


def write_store(path: str, n_traces: int, seed: int = 0, chunk: int = 2000, **kw: object) -> int:
    """Write ``n_traces`` traces into a DuckDB store in chunks (bounded memory)."""
    from tracelens.store import DuckDBStore

    start_ns = int(kw.pop("start_ns", DEFAULT_START_NS))  # type: ignore[call-overload]
    spacing_ns = int(kw.pop("spacing_ns", 60 * 10**9))  # type: ignore[call-overload]
    added = 0
    with DuckDBStore(path) as store:
        for k in range(0, n_traces, chunk):
            size = min(chunk, n_traces - k)
            table = make_traces(
                size,
                seed=seed * 1_000_003 + k,
                start_ns=start_ns + k * spacing_ns,
                spacing_ns=spacing_ns,
                **kw,  # type: ignore[arg-type]
            )
            added += store.append(table)
    return added


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Write a synthetic agent-trace store (DuckDB).")
    parser.add_argument("out", nargs="?", default="bench-synth.duckdb", help="store path")
    parser.add_argument("traces", nargs="?", type=int, default=20_000, help="traces (50 spans)")
    args = parser.parse_args(argv)
    print(f"{write_store(args.out, args.traces):,} spans written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
