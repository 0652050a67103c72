"""Regenerate, or check, the sample reports committed under ``reports/``.

    python scripts/make_sample_report.py          # rewrite reports/sample.html and reports/weekly/
    python scripts/make_sample_report.py --check  # exit 1, naming the files, if reports/ is stale

``reports/sample.html`` is ``tracelens report`` over real fixture traces (HotROD, seven agent
frameworks, vLLM, a GenAI trace).  ``reports/weekly/`` is ``tracelens report --weekly`` over a
synthetic four-week store (bench/synth.py): week three is 30% slower, week four renames a tool,
so the weekly pages show a regression and new / vanished operations.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"

# Paths relative to the repository root, as a user would type them (they appear in the report).
SAMPLE_FILES = [
    "fixtures/otlp/hotrod_dispatch_jaeger-ui_v3_getTrace-response.json",
    *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "fixtures" / "agent").glob("*.json")),
    "fixtures/vllm/vllm-offline-engine.otlp.json",
    "fixtures/vllm/vllm-openai-server.otlp.json",
    "fixtures/jaeger/genaiTestTrace.json",
]
SAMPLE_TITLE = "Sample report: HotROD, agent-framework and vLLM traces"
WEEKLY_TITLE = "Sample agent (synthetic)"
TRACES_PER_WEEK = 200
WEEK_NS = 7 * 86_400 * 10**9
# (slowdown, renamed operation) per week.
WEEKS = [(1.0, None), (1.0, None), (1.3, None), (1.0, ("search_docs", "search_docs_v2"))]


def _cli(args: list[str]) -> None:
    from tracelens.cli import main

    main.main(args=args, prog_name="tracelens", standalone_mode=False)


def make_weekly_store(path: Path) -> None:
    import pyarrow.compute as pc

    sys.path.insert(0, str(ROOT / "bench"))
    from synth import DEFAULT_START_NS, make_traces

    from tracelens.store import DuckDBStore

    with DuckDBStore(path) as store:
        for w, (slowdown, rename) in enumerate(WEEKS):
            table = make_traces(
                TRACES_PER_WEEK,
                seed=w + 1,
                start_ns=DEFAULT_START_NS + w * WEEK_NS + 3_600 * 10**9,
                spacing_ns=(WEEK_NS - 7_200 * 10**9) // TRACES_PER_WEEK,
                slowdown=slowdown,
            )
            if rename:
                old, new = rename
                names = table["name"]
                fixed = pc.if_else(pc.equal(names, old), new, names)
                table = table.set_column(table.schema.get_field_index("name"), "name", fixed)
            store.append(table)


def build(out: Path) -> list[Path]:
    """Write the sample reports under ``out``; returns the files written."""
    os.chdir(ROOT)  # the fixture paths in the report read as typed from the repository root
    out.mkdir(parents=True, exist_ok=True)
    sample = out / "sample.html"
    _cli(["report", *SAMPLE_FILES, "--out", str(sample), "--title", SAMPLE_TITLE])
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sample-weekly.duckdb"
        make_weekly_store(db)
        _cli(
            [
                "report",
                "--weekly",
                "--db",
                str(db),
                "--out-dir",
                str(out / "weekly"),
                "--title",
                WEEKLY_TITLE,
            ]
        )
    return sorted(p for p in out.rglob("*.html"))


def check() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh_root = Path(tmp) / "reports"
        fresh = {p.relative_to(fresh_root) for p in build(fresh_root)}
        committed = {p.relative_to(REPORTS) for p in REPORTS.rglob("*.html")}
        stale = sorted(
            str(rel)
            for rel in fresh | committed
            if rel not in fresh
            or rel not in committed
            or not filecmp.cmp(fresh_root / rel, REPORTS / rel, shallow=False)
        )
    if stale:
        print(
            "stale sample reports under reports/: "
            + ", ".join(stale)
            + "\nregenerate them with `make sample-report` "
            "(python scripts/make_sample_report.py) and commit the result",
            file=sys.stderr,
        )
        return 1
    print("reports/ is current")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check that reports/ is current")
    args = parser.parse_args()
    if args.check:
        return check()
    for path in build(REPORTS):
        print(f"{path.relative_to(ROOT)}  {path.stat().st_size / 1024:,.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
