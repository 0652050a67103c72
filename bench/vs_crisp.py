"""The CRISP comparison of ``bench/analyze.py``: the agent workload, CRISP's venv, both timed runs.

CRISP (uber-research/CRISP, ``../shared/anchors/crisp``, kept unchanged) reads one Jaeger JSON
file per trace.  This module

* generates the *agent* workload: 10k varied agent traces (``varied.make_varied`` with 5-7 steps
  a request: ~25 spans a trace, ~250k spans; ~1.2k distinct (step, tool set) patterns, ~13k
  distinct in call order; each tool call has its own URL or fingerprints), times floored to whole
  microseconds (Jaeger's unit) so that both tools see the very same numbers, written once as a
  tracelens DuckDB store and once as one Jaeger JSON file per trace (what CRISP reads, and what
  ``tracelens import`` reads too);
* builds a venv of CRISP's own outside the checkout (``~/.cache/tracelens/venv-crisp``): its
  dependencies from the package index, its code copied from the read-only anchor and put on the
  venv's path with a ``.pth`` file;
* times CRISP's critical path in-process, its own code called as its ``process()`` calls it:
  per trace file, ``json.load`` of the file, ``crisp.graph.Graph(data, service, operation,
  filename, rootTrace=True)`` (parse, parent/child links, clamping of overflowing children) and
  ``graph.findCriticalPath()``.  Left out, so CRISP is timed at its fastest: its interpreter start
  and imports (printed apart), and everything ``process()`` does after the critical path (error
  paths, time-saved, metrics, aggregation, HTML, CSV and flame graphs);
* times tracelens the way a user runs it: the whole ``python -m tracelens analyze --db STORE
  --format json --out FILE`` command in a fresh process, findings included, wall clock from
  before the process is spawned to after it exits (interpreter start, imports and exit included);
* times the same run's phases in another fresh process by calling the library the way
  ``tracelens.api.analyze`` calls it, each step apart (``PHASES``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SERVICE = "agent"
OPERATION = "handle_request"
STEPS = (5, 8)  # 5-7 steps a request: ~25 spans a trace
VENV = Path(os.environ.get("TRACELENS_CRISP_VENV", Path.home() / ".cache/tracelens/venv-crisp"))
# CRISP's dependencies (the anchor's ORIGIN.md); ``crisp.graph`` itself needs none of them.
CRISP_DEPS: tuple[str, ...] = ("numpy", "pandas", "pyyaml", "protobuf", "jinja2", "psutil")
CRISP_DEPS += ("python-dateutil", "tenacity", "ratelimit", "requests", "matplotlib")


def crisp_source() -> Path:
    """CRISP's checkout: $TRACELENS_CRISP_SRC, else ``../shared/anchors/crisp`` by the repo."""
    env = os.environ.get("TRACELENS_CRISP_SRC")
    return Path(env) if env else ROOT.parent / "shared" / "anchors" / "crisp"


def crisp_python(src: Path) -> str:
    """The venv's interpreter, CRISP on its path; built (or refreshed) when missing or stale."""
    py = VENV / "bin" / "python"
    stamp = hashlib.sha256(
        b"".join(p.read_bytes() for p in sorted((src / "crisp").rglob("*.py")))
    ).hexdigest()[:16]
    code = VENV / "crisp-src" / stamp
    ready = VENV / f".ready-{stamp}"
    if ready.exists():
        return str(py)
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", *CRISP_DEPS], check=True, timeout=900
        )
    shutil.rmtree(VENV / "crisp-src", ignore_errors=True)
    shutil.copytree(src / "crisp", code / "crisp")  # the anchor is read-only: work on a copy
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "crisp-anchor.pth").write_text(f"{code}\n")
    subprocess.run([str(py), "-c", "import crisp.graph"], check=True)
    ready.touch()
    return str(py)


def agent_table(n_traces: int, seed: int = 0, chunk: int = 2000) -> pa.Table:
    """The agent workload as one span table, times floored to whole microseconds."""
    from varied import make_varied

    parts = [
        make_varied(min(chunk, n_traces - k), seed=seed, first=k, n_steps=STEPS)
        for k in range(0, n_traces, chunk)
    ]
    table = pa.concat_tables(parts)
    for col in ("start_ns", "end_ns"):
        us = pc.multiply(pc.divide(table[col], 1000), 1000)  # integer division: floor (ns >= 0)
        table = table.set_column(table.schema.get_field_index(col), col, us)
    return table


def hop_patterns(table: pa.Table) -> tuple[int, int]:
    """Distinct (step, set of tools it called) and (step, tools in call order) among the steps."""
    import polars as pl

    df = pl.from_arrow(table.select(["span_id", "parent_span_id", "name", "start_ns"]))
    assert isinstance(df, pl.DataFrame)
    steps = df.filter(pl.col("name").str.starts_with("step_")).select(
        pl.col("span_id").alias("parent_span_id"), pl.col("name").alias("step")
    )
    calls = df.join(steps, on="parent_span_id").sort("start_ns")
    grouped = calls.group_by("parent_span_id", "step").agg(
        pl.col("name").alias("seq"), pl.col("name").sort().alias("set")
    )
    sets = grouped.select(pl.struct("step", "set").n_unique()).item()
    seqs = grouped.select(pl.struct("step", "seq").n_unique()).item()
    return sets, seqs


def write_store(path: str, table: pa.Table) -> int:
    from tracelens.store import DuckDBStore

    with DuckDBStore(path) as store:
        return store.append(table)


def _tag(key: str, value: str) -> dict[str, object]:
    return {"key": key, "type": "string", "value": value}


def write_jaeger(table: pa.Table, out: Path) -> int:
    """One Jaeger API JSON file per trace (``{"data": [trace]}``), named by trace id, as the
    OpenTelemetry Jaeger translator writes a span: µs times, ``span.kind`` and the attributes
    as tags (tracelens's own attributes included), the service as the process."""
    import orjson

    out.mkdir(parents=True, exist_ok=True)
    cols = ["trace_id", "span_id", "parent_span_id", "name", "span_kind", "start_ns", "end_ns"]
    cols += ["status_code", "kind", "args_hash", "result_hash", "arg_fps", "result_fps"]
    rows = table.select([*cols, "attributes"]).to_pylist()
    by_trace: dict[str, list[dict[str, object]]] = {}
    for r in rows:
        tags: list[dict[str, object]] = [_tag("span.kind", r["span_kind"])]
        if r["status_code"] == "error":
            tags += [
                _tag("otel.status_code", "ERROR"),
                {"key": "error", "type": "bool", "value": True},
            ]
        for col, key in (
            ("kind", "tracelens.kind"),
            ("args_hash", "tracelens.args_hash"),
            ("result_hash", "tracelens.result_hash"),
        ):
            if r[col] is not None:
                tags.append(_tag(key, r[col]))
        for col, key in (("arg_fps", "tracelens.arg_fps"), ("result_fps", "tracelens.result_fps")):
            if r[col] is not None:  # an array attribute: JSON text, as the translator writes it
                tags.append(_tag(key, json.dumps(r[col])))
        tags += [_tag(k, v) for k, v in (r["attributes"] or [])]
        refs = []
        if r["parent_span_id"] is not None:
            refs.append(
                {"refType": "CHILD_OF", "traceID": r["trace_id"], "spanID": r["parent_span_id"]}
            )
        by_trace.setdefault(r["trace_id"], []).append(
            {
                "traceID": r["trace_id"],
                "spanID": r["span_id"],
                "operationName": r["name"],
                "references": refs,
                "startTime": r["start_ns"] // 1000,
                "duration": (r["end_ns"] - r["start_ns"]) // 1000,
                "tags": tags,
                "logs": [],
                "processID": "p1",
                "warnings": None,
            }
        )
    process = {"p1": {"serviceName": SERVICE, "tags": []}}
    for tid, spans in by_trace.items():
        doc = {"data": [{"traceID": tid, "spans": spans, "processes": process, "warnings": None}]}
        (out / f"{tid}.json").write_bytes(orjson.dumps(doc))
    return len(by_trace)


# Run by CRISP's venv: its critical path over every file of a directory, in-process.
CRISP_RUN = """
import json, os, resource, sys, time
t0 = time.perf_counter()
from crisp.graph import Graph
imported = time.perf_counter() - t0
directory, service, operation = sys.argv[1:4]
files = sorted(os.path.join(directory, f) for f in os.listdir(directory))
cpu0 = resource.getrusage(resource.RUSAGE_SELF)
t1 = time.perf_counter()
on_path = skipped = 0
for filename in files:  # as crisp.process_trace.process() does, up to the critical path
    with open(filename, "r") as f:
        data = json.load(f)
    graph = Graph(data, service, operation, filename, True)
    if graph.rootNode is None:
        skipped += 1
        continue
    on_path += len(graph.findCriticalPath())
elapsed = time.perf_counter() - t1
cpu1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
print(json.dumps({"s": elapsed, "cpu_s": cpu, "import_s": imported, "traces": len(files),
                  "skipped": skipped, "on_path": on_path}))
"""

# Run by the checkout's interpreter: the steps of ``tracelens analyze --db STORE --format FORMAT``
# (``tracelens.api.analyze``, then the CLI's output), each timed apart, in the order the CLI runs
# them.  Arguments: the store, the output file, text or json.
PHASES = """
import json, sys, time
t0 = time.perf_counter()
clock = [t0, time.process_time()]
phases = {}
def lap(name):
    now, cpu = time.perf_counter(), time.process_time()
    phases[name] = now - clock[0]
    phases[name + " (CPU)"] = cpu - clock[1]
    clock[:] = [now, cpu]
import click
import tracelens.cli.analyze
import tracelens.render
from tracelens import api
from tracelens.analysis import ANALYSIS_COLUMNS
from tracelens.analysis.budget import check, table_counts
from tracelens.analysis.core import analyze_traces
from tracelens.analysis.result import Analysis
from tracelens.collector import reader
from tracelens.engines import get_engine
from tracelens.analysis import findings, stages, tokens, gpu, coldstart, hotspots
from tracelens.render import text
lap("imports")
db, out, fmt = sys.argv[1:4]
get_engine("embedded")
named, narrow = api._budget_source((), db, None)
check(reader.count_store(db), None, named, narrow)
loaded = api.load_spans(db=db, columns=ANALYSIS_COLUMNS)
check(table_counts(loaded.spans), None, named, narrow)
lap("store read (budget checks included)")
ta = analyze_traces(loaded.spans)
lap("critical path (tree, kinds, walk)")
found = findings.find_all(ta)
lap("findings")
result = Analysis(traces=ta, findings=found, warnings=[*loaded.warnings, *ta.warnings])
if True:  # what the text and the JSON read (the JSON writes the traces as it goes)
    for name in ("summary", "stages", "models", "gpu_model_calls", "request_latency",
                 "operations", "cpu_hotspots"):
        getattr(result, name)
    result.slowest(10)
lap("summaries")
if fmt == "json":
    rendered = result.to_json()
else:
    rendered = result.to_text(None)
with open(out, "w", encoding="utf-8") as f:
    f.write(rendered if rendered.endswith("\\n") else rendered + "\\n")
lap(f"output ({fmt}: render, write)")
phases["in-process total"] = time.perf_counter() - t0
phases["in-process total (CPU)"] = time.process_time()
print(json.dumps(phases))
"""
