"""Varied agent traces for the findings benchmark: many distinct hop patterns.

    python bench/varied.py [OUT.duckdb] [TRACES]

Each trace is a request whose agent runs 4-6 steps (of 8 kinds); each step calls 2-4 tools
drawn from its own 8 of a vocabulary of 60 (half traced with tracelens fingerprints, half plain
HTTP client spans), one after another; a third of the steps run two of their tools overlapping.
With 10k traces that is ~210k spans and ~1.5k distinct (step, tool set) patterns: the shape
that made a per-pattern loop of DataFrame queries expensive (issue 12).  Deterministic for a seed.
"""

from __future__ import annotations

import hashlib
import sys

import numpy as np
import pyarrow as pa

from tracelens.schema import SPAN_SCHEMA

MS = 1_000_000
START_NS = 1_764_547_200 * 10**9
TOOLS = 60
STEPS = 8  # distinct step operations
POOL = 8  # tools each step draws from: 8 steps x 154 tool sets of 2-4 out of 8


def _fp(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class _Rows:
    """Span rows as column lists."""

    def __init__(self, seed: int) -> None:
        self.cols: dict[str, list[object]] = {f.name: [] for f in SPAN_SCHEMA}
        self.seed = seed
        self.count = 0

    def add(self, **row: object) -> str:
        self.count += 1
        sid = f"{(self.seed << 40) + self.count:016x}"
        row.setdefault("service", "agent")
        row.setdefault("span_kind", "internal")
        row.setdefault("status_code", "unset")
        row["span_id"] = sid
        for k, col in self.cols.items():
            col.append(row.get(k))
        return sid

    def table(self) -> pa.Table:
        arrays = [pa.array(self.cols[f.name], f.type) for f in SPAN_SCHEMA]
        return pa.Table.from_arrays(arrays, schema=SPAN_SCHEMA)


def make_varied(
    n_traces: int, seed: int = 0, first: int = 0, n_steps: tuple[int, int] = (4, 7)
) -> pa.Table:
    """``n_traces`` varied traces (~21 spans each), numbered from ``first``, as a span table.
    Each agent runs ``n_steps[0]`` to ``n_steps[1] - 1`` steps ((5, 8): ~25 spans a trace)."""
    rng = np.random.default_rng(seed * 1_000_003 + first)
    rows = _Rows(seed * 1_000_003 + first)
    for i in range(first, first + n_traces):
        trace = f"{seed & 0xFFFF:04x}{i:028x}"  # unique per (seed, trace number)
        t0 = START_NS + i * 30 * 10**9
        steps: list[tuple[str, int, int, list[tuple[int, int, int]]]] = []
        cursor = t0 + int(rng.integers(1, 5)) * MS
        for _ in range(int(rng.integers(*n_steps))):
            step_start = cursor
            step = int(rng.integers(STEPS))
            pool = np.arange(step * POOL, (step + 1) * POOL) % TOOLS  # the tools a step uses
            tools = rng.choice(pool, size=int(rng.integers(2, 5)), replace=False).tolist()
            overlap = rng.random() < 0.33
            at = step_start + 200_000
            calls: list[tuple[int, int, int]] = []
            for k, tool in enumerate(tools):
                dur = int(rng.lognormal(np.log(30), 0.5) * MS)
                start = calls[0][2] - dur // 2 if overlap and k == 1 else at
                start = max(start, step_start + 1)
                calls.append((tool, start, start + dur))
                at = max(c[2] for c in calls) + int(rng.integers(50, 400)) * 1000
            step_end = max(c[2] for c in calls) + 300_000
            steps.append((f"step_{step}", step_start, step_end, calls))
            cursor = step_end + int(rng.integers(1, 3)) * MS
        root = rows.add(
            trace_id=trace, name="handle_request", span_kind="server", start_ns=t0, end_ns=cursor
        )
        for s, (name, start, end, calls) in enumerate(steps):
            step = rows.add(
                trace_id=trace, parent_span_id=root, name=name, start_ns=start, end_ns=end
            )
            for tool, ts, te in calls:
                tool_name = f"tool_{tool:02d}"
                if tool % 2 == 0:  # traced with fingerprints
                    fp = _fp(f"{tool_name}:{i}:{s}")
                    rows.add(
                        trace_id=trace,
                        parent_span_id=step,
                        name=tool_name,
                        start_ns=ts,
                        end_ns=te,
                        kind="io",
                        args_hash=fp,
                        result_hash=_fp(fp),
                        arg_fps=[fp],
                        result_fps=[_fp(fp)],
                    )
                else:  # a plain OpenTelemetry HTTP client span
                    rows.add(
                        trace_id=trace,
                        parent_span_id=step,
                        name=f"GET /{tool_name}",
                        span_kind="client",
                        start_ns=ts,
                        end_ns=te,
                        attributes=[
                            ("http.request.method", "GET"),
                            ("url.full", f"http://api.internal/{tool_name}?q={i}-{s}"),
                        ],
                    )
    return rows.table()


def write_store(
    path: str, n_traces: int, seed: int = 0, chunk: int = 2000, n_steps: tuple[int, int] = (4, 7)
) -> int:
    """Write ``n_traces`` varied traces into a DuckDB store in chunks."""
    from tracelens.store import DuckDBStore

    added = 0
    with DuckDBStore(path) as store:
        for k in range(0, n_traces, chunk):
            table = make_varied(min(chunk, n_traces - k), seed=seed, first=k, n_steps=n_steps)
            added += store.append(table)
    return added


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "bench-varied.duckdb"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    print(f"wrote {write_store(out, n):,} spans to {out}")
