"""Regenerate the labelled verdict corpus under ``fixtures/verdicts/`` (issue 12, item 6).

Every case is a small agent pattern run for real and traced by real instrumentation:

* ``source="decorator"``: agent code decorated with tracelens' own ``@trace`` and exported by
  ``configure(file=...)``.  Hops do real work: HTTP requests to a local server that takes a few
  milliseconds, SQLite queries, file writes, ``git`` in a temporary repository, CPU loops; they
  return real values and the agent passes real values on.  Each such case runs in its own
  process (``configure`` is once per process).
* ``source="otel"``: traces as other instrumentations emit them, written with the
  OpenTelemetry SDK directly (a private ``TracerProvider``, explicit ``start_time`` /
  ``end_time``) with semantic-convention attributes; exported by the same OTLP JSON Lines
  exporter.

The cases are a table (``scripts/verdict_corpus/cases_*.py``): each entry names its builder,
its labels (``fixtures/verdicts/labels.json``) and the reasoning behind them
(``docs/verdicts.md``), next to each other.  Labels are never derived from what tracelens
reports.  Structure is deterministic (fixed seeds, fixed timestamps for the OTel cases); the
decorator cases carry real, measured timings.

    python scripts/make_verdict_corpus.py            # all cases (about a minute)
    python scripts/make_verdict_corpus.py CASE ...   # only these
    python scripts/make_verdict_corpus.py --labels   # only labels.json and docs/verdicts.md
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from verdict_corpus.builders import run_decorator_case
from verdict_corpus.docs import write_docs
from verdict_corpus.spans import write_case
from verdict_corpus.table import CASES

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "verdicts"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:  # a decorator case, in its own process
        name = argv[1]
        run_decorator_case(name, CASES[name].build, OUT / f"{name}.jsonl")
        return 0
    labels_only = argv[:1] == ["--labels"]  # labels.json and docs/verdicts.md only
    if labels_only:
        argv = []
    unknown = [n for n in argv if n not in CASES]
    if unknown:
        print(f"unknown cases: {unknown}", file=sys.stderr)
        return 2
    names = argv or list(CASES)
    OUT.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for name in [] if labels_only else names:
        c = CASES[name]
        path = OUT / f"{name}.jsonl"
        path.unlink(missing_ok=True)
        if c.source == "decorator":
            subprocess.run([sys.executable, __file__, "--one", name], check=True)
        else:
            write_case(name, c.build, path)
        print(f"{name:45s} {path.stat().st_size:7d} bytes")
    if not argv:  # labels describe the whole corpus
        labels = [c.label() for c in CASES.values()]
        (OUT / "labels.json").write_text(json.dumps(labels, indent=1) + "\n")
        write_docs(ROOT / "docs" / "verdicts.md", list(CASES.values()))
        for stale in [] if labels_only else OUT.glob("*.jsonl"):
            if stale.stem not in CASES:
                stale.unlink()
    print(f"{len(names)} cases in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
