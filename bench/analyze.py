"""Benchmark: `tracelens analyze` on ~1M spans against a plain DuckDB scan of the same rows, the
bottleneck finder on varied traces, and the whole analysis against CRISP's critical path.

    python bench/analyze.py [--traces 20000] [--varied 10000] [--crisp 10000] [--repeat 3]
                            [--db PATH] [--keep]

Three workloads, one after the other in the same run:
  * *template*: agent-shaped traces that all follow one template (bench/synth.py, ~50 spans
    each; 20k traces = 1M spans);
  * *varied*: 10k traces whose steps call varying sets of tools (bench/varied.py, ~210k spans,
    ~1.5k distinct hop patterns), where a per-pattern loop of queries used to cost 10x;
  * *agent*: 10k varied traces of 5-7 steps (~250k spans, ~1.2k (step, tool set) patterns), vs
    CRISP (uber-research/CRISP, ``../shared/anchors/crisp``, unchanged, in a venv of its own):
    see bench/vs_crisp.py for exactly what is timed on each side.  Interleaved, medians of
    ``--repeat``: CRISP's in-process critical path over the traces' Jaeger files, against the
    whole ``tracelens analyze --db`` command (``--format``, default text) with findings in a
    fresh process (interpreter start to exit); then tracelens's phases (imports, store read,
    critical path, findings, summaries, output) timed apart in another fresh process.
    Target: >= 3x CRISP.
For the first two, it writes a DuckDB store, then, interleaved and each in a fresh process, times
  * the baseline: ``SELECT * FROM span_rows`` (the stored table) into an Arrow table,
  * ``tracelens analyze --db`` with critical paths only (``--no-findings``),
  * ``tracelens analyze --db`` with the bottleneck finder,
and prints medians, the ratios to the baseline and each run's peak RSS.  The packages are
byte-compiled first, as pip does at install: on a machine that sets PYTHONDONTWRITEBYTECODE,
each fresh process would otherwise compile the finder's modules from source (~0.1 s, a tenth
of the varied run) and the ratio would measure the compiler, not the analysis.
Targets (2-core machine): the critical-path analysis within 10x the scan and under 20 s, peak
RSS under 3 GB; with findings, within 2x the critical-path-only analysis on the template
workload and within 1.5x on the varied one.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracelens.store.duckdb import TABLE

HERE = Path(__file__).resolve().parent

SCAN = """
import duckdb, time, resource, json, sys
t0 = time.perf_counter()
con = duckdb.connect(sys.argv[1], read_only=True)
table = con.sql(f"SELECT * FROM {sys.argv[2]}").to_arrow_table()
elapsed = time.perf_counter() - t0
print(json.dumps({"s": elapsed, "rows": table.num_rows,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

ANALYZE = """
import time, resource, json, sys
t0 = time.perf_counter()
from click.testing import CliRunner
from tracelens.cli import main
args = ["analyze", "--db", sys.argv[1], "--format", sys.argv[2], "--out", sys.argv[3]]
if sys.argv[4] == "0":
    args.append("--no-findings")
res = CliRunner().invoke(main, args, catch_exceptions=False)
assert res.exit_code == 0, res.output
elapsed = time.perf_counter() - t0
print(json.dumps({"s": elapsed,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(code: str, *args: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def bench(db: str, opts: argparse.Namespace, findings_target: float) -> dict[str, bool]:
    """Time the three commands on ``db``; print medians and ratios; return the checks."""
    out = os.path.join(os.path.dirname(db), "analysis.out")
    scans, plain, full = [], [], []
    for _ in range(opts.repeat):  # interleaved, so noise hits all three alike
        scans.append(run(SCAN, db, TABLE))
        plain.append(run(ANALYZE, db, opts.format, out, "0"))
        full.append(run(ANALYZE, db, opts.format, out, "1"))
    rows = int(scans[0]["rows"])

    def med(xs: list[dict[str, float]]) -> float:
        return statistics.median(x["s"] for x in xs)

    def peak(xs: list[dict[str, float]]) -> float:
        return max(x["rss_mb"] for x in xs)

    s, p, f = med(scans), med(plain), med(full)
    print(f"spans: {rows:,}   runs: {opts.repeat} (medians)")
    print(f"{'':34}{'seconds':>9}{'x scan':>9}{'peak RSS MB':>13}")
    print(f"{'DuckDB scan into Arrow (baseline)':34}{s:9.2f}{1.0:9.2f}{peak(scans):13.0f}")
    print(f"{'analyze, critical path only':34}{p:9.2f}{p / s:9.2f}{peak(plain):13.0f}")
    print(f"{'analyze, with findings':34}{f:9.2f}{f / s:9.2f}{peak(full):13.0f}")
    print(f"findings cost: {f / p:.2f}x the critical-path-only analysis")
    return {
        "critical path within 10x the scan": p / s <= 10,
        "critical path under 20 s": p < 20,
        "peak RSS under 3 GB": max(peak(plain), peak(full)) < 3072,
        f"findings within {findings_target:g}x the critical-path-only analysis": (
            f / p <= findings_target
        ),
    }


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def bench_crisp(tmp: str, opts: argparse.Namespace) -> dict[str, bool]:
    """The agent workload: CRISP's critical path against the whole tracelens command."""

    import vs_crisp as crisp

    src = crisp.crisp_source()
    if not (src / "crisp" / "graph.py").exists():
        print(f"== agent workload vs CRISP: skipped, no CRISP at {src} (set TRACELENS_CRISP_SRC)")
        return {"CRISP found": False}
    py = crisp.crisp_python(src)
    if opts.before:
        import compileall

        compileall.compile_dir(str(Path(opts.before, "tracelens")), quiet=1)
    t0 = time.perf_counter()
    table = crisp.agent_table(opts.crisp)
    db = os.path.join(tmp, "agent.duckdb")
    jaeger = Path(tmp, "agent-jaeger")
    n = crisp.write_store(db, table)
    files = crisp.write_jaeger(table, jaeger)
    sets, seqs = crisp.hop_patterns(table)
    print(
        f"wrote {n:,} spans ({opts.crisp:,} agent traces; distinct (step, tool set) patterns: "
        f"{sets:,}, in call order: {seqs:,}) as a store and {files:,} Jaeger files in "
        f"{time.perf_counter() - t0:.1f} s"
    )
    del table
    out = os.path.join(tmp, "agent-analysis.json")
    cli = [sys.executable, "-m", "tracelens", "analyze", "--db", db, "--format", opts.format]
    cli += ["--out", out]
    crisp_cmd = [py, "-c", crisp.CRISP_RUN, str(jaeger), crisp.SERVICE, crisp.OPERATION]
    theirs: list[dict[str, float]] = []
    ours: list[dict[str, float]] = []
    before: list[dict[str, float]] = []
    phases: list[dict[str, float]] = []
    loads = [_load()]
    for _ in range(opts.repeat):  # interleaved, so noise hits both alike
        got = json.loads(subprocess.run(crisp_cmd, check=True, capture_output=True).stdout)
        assert got["skipped"] == 0, f"CRISP skipped {got['skipped']} traces"
        theirs.append(got)
        ours.append(timed(cli))
        if opts.before:  # (its own output file: the phases are checked against ours)
            env = {**os.environ, "PYTHONPATH": opts.before}
            cli_before = [*cli[:-1], out + ".before"]
            before.append(timed(cli_before, env=env, cwd=opts.before))
        phases.append(run_phases(db, out + ".phases", opts.format))
        # The phases did what the command does: the same output, byte for byte.
        assert Path(out).read_bytes() == Path(out + ".phases").read_bytes(), "phases differ"
        loads.append(_load())
    if not opts.keep:
        shutil.rmtree(jaeger, ignore_errors=True)
        Path(db).unlink(missing_ok=True)

    def med(xs: list[dict[str, float]], key: str = "s") -> float:
        return statistics.median(x[key] for x in xs)

    c, t = med(theirs), med(ours)
    print("== agent workload vs CRISP")
    print(f"spans: {n:,}   traces: {files:,}   runs: {opts.repeat} (medians, interleaved)")
    print(f"load average (1, 5, 15 min) before and after each round: {' | '.join(loads)}")
    print(f"{'':52}{'seconds':>9}{'CPU s':>8}")
    print(
        f"{'CRISP: json.load + Graph + findCriticalPath, per file':52}{c:9.2f}"
        f"{med(theirs, 'cpu_s'):8.2f}"
    )
    print(
        f"{'tracelens analyze --db, whole command (' + opts.format + ')':52}{t:9.2f}"
        f"{med(ours, 'cpu_s'):8.2f}"
    )
    if before:
        b = med(before)
        print(
            f"{'tracelens before (--before ' + opts.before + ')':52}{b:9.2f}"
            f"{med(before, 'cpu_s'):8.2f}"
        )
        print(f"before vs CRISP: {c / b:.2f}x; after vs before: {b / t:.2f}x faster")
    cpu_ratio = med(theirs, "cpu_s") / med(ours, "cpu_s")
    print(f"CPU seconds, CRISP over tracelens: {cpu_ratio:.2f}x")
    print(
        f"CRISP's imports, not counted above: {med(theirs, 'import_s'):.2f} s; "
        f"critical-path spans found by CRISP: {int(theirs[0]['on_path']):,}"
    )
    print(
        f"tracelens vs CRISP: **{c / t:.2f}x** faster (target 3x); runs: "
        + ", ".join(f"{a['s']:.2f}/{b['s']:.2f}" for a, b in zip(theirs, ours, strict=True))
    )
    print("tracelens phases (a separate fresh process, medians):")
    print(f"  {'':48}{'seconds':>9}{'CPU s':>8}")
    for name in phases[0]:
        if not name.endswith("(CPU)"):
            cpu = med(phases, name + " (CPU)")
            print(f"  {name:48}{med(phases, name):9.3f}{cpu:8.3f}")
    total = med(phases, "in-process total")
    print(f"  {'interpreter start and exit (whole - in-process)':48}{t - total:9.3f}")
    return {"analysis at least 3x CRISP": c / t >= 3}


def timed(cmd: list[str], **kw: object) -> dict[str, float]:
    """Wall clock from spawn to exit and the CPU seconds of ``cmd``."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, **kw)  # type: ignore[call-overload]
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"s": wall, "cpu_s": cpu}


def run_phases(db: str, out: str, fmt: str) -> dict[str, float]:
    import vs_crisp as crisp

    got = subprocess.run(
        [sys.executable, "-c", crisp.PHASES, db, out, fmt],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(got.stdout.strip().splitlines()[-1])
    return result


def byte_compile() -> None:
    """Write the bytecode of tracelens and tracelens_instrumentation, as an install does."""
    import compileall

    import tracelens_instrumentation

    import tracelens

    for pkg in (tracelens, tracelens_instrumentation):
        compileall.compile_dir(str(Path(str(pkg.__file__)).parent), quiet=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=int, default=20_000, help="template traces (0: skip)")
    ap.add_argument("--varied", type=int, default=10_000, help="varied traces (0: skip)")
    ap.add_argument("--crisp", type=int, default=10_000, help="agent traces vs CRISP (0: skip)")
    ap.add_argument(
        "--before",
        default=None,
        help="a tracelens source tree (its C extensions built) to time too on the agent "
        "workload, interleaved: e.g. an earlier commit's, for a before/after in one run",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--db", default=None, help="template store to use (created if missing)")
    ap.add_argument("--keep", action="store_true", help="keep the generated stores")
    ap.add_argument("--format", default="text", choices=["text", "json"])
    opts = ap.parse_args()
    sys.path.insert(0, str(HERE))
    byte_compile()
    tmp = tempfile.mkdtemp(prefix="tracelens-bench-")
    checks: dict[str, bool] = {}
    if opts.traces:
        db = opts.db or os.path.join(tmp, "bench.duckdb")
        if not Path(db).exists():
            from synth import write_store

            t0 = time.perf_counter()
            n = write_store(db, opts.traces)
            print(f"wrote {n:,} spans ({opts.traces:,} traces) in {time.perf_counter() - t0:.1f} s")
        print("== template workload")
        for what, ok in bench(db, opts, 2.0).items():
            checks[f"template: {what}"] = ok
        if not opts.keep and not opts.db:
            Path(db).unlink(missing_ok=True)
    if opts.varied:
        from varied import write_store as write_varied

        vdb = os.path.join(tmp, "varied.duckdb")
        t0 = time.perf_counter()
        n = write_varied(vdb, opts.varied)
        print(
            f"wrote {n:,} spans ({opts.varied:,} varied traces) in {time.perf_counter() - t0:.1f} s"
        )
        print("== varied workload")
        for what, ok in bench(vdb, opts, 1.5).items():
            checks[f"varied: {what}"] = ok
        if not opts.keep:
            Path(vdb).unlink(missing_ok=True)
    if opts.crisp:
        for what, ok in bench_crisp(tmp, opts).items():
            checks[f"agent: {what}"] = ok
    print(f"load average (1, 5, 15 min) at the end: {_load()}")
    for what, ok in checks.items():
        print(f"  {'met    ' if ok else 'NOT met'}  {what}")


if __name__ == "__main__":
    main()
