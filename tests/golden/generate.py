"""Write ``tests/golden/outputs.json.gz``: for every loadable trace file under ``fixtures/``, the
exact ``Analysis.to_json()`` and ``Analysis.to_text()`` strings (gzip: ~1 MB of text in ~150 kB),
plus the benchmark's synthetic agent traces (``bench/synth.py``, 200 traces, seed 3, top 20),
the one input here with every finding type (a ``tail`` needs many traces).

The committed file was produced by the code BEFORE the typed-results refactor (main at fdff202),
by running this script with main's own virtual environment (so main's code):
``/work/main/.venv/bin/python tests/golden/generate.py``.  ``tests/test_golden.py`` checks that
the refactored code still writes the same bytes.  Re-run only on purpose, after a deliberate
change of the output contract (docs/analysis-json.md).

Since then, one deliberate change: the latency model and CPU profile fields were added
(``summary.stages``, ``models``, ``request_latency_ms``, ``latency_by_operation``,
``cold_starts``; top-level ``cpu_hotspots``; their text sections).  That regeneration was
checked to ADD only: with the added fields removed, every JSON output equalled the earlier
golden bytes, and every text output was the earlier one with lines inserted, none changed.
Then issue 25 (verdicts round two): every finding gained ``alternative_to`` and ``top_change``,
the document ``what_ifs``; cacheable evidence ``no_write_between``, alternatives and the tail
note were added; the verdict corpus (``fixtures/verdicts/``) was regenerated and grew.  Checked
with those fields removed, outside the corpus only two outputs changed in their findings:
jaeger ``genaiTestTrace`` (two cacheable findings at high saving 0.0 ms are now medium,
``saves_little``: a high finding must save something) and zipkin
``smartthings-oauth-authorization`` (two cacheable-low findings gone: the access-token selects
are token reads, volatile by nature; the client selects repeat with writes of unknown resource
(store, post, delete spans) between them in the same trace: unsure is no finding).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from tracelens.analysis import Analysis, analyze_spans
from tracelens.api import analyze
from tracelens.render import text as _text  # noqa: F401  (registers to_text)

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "outputs.json.gz"
# (``.snapshot``: a real file refused on purpose, fixtures/README.md, tests/reliability;
# ``.tsv.gz``: the reduced CUPTI records of fixtures/gpu, device records, not spans)
SKIP = ("README.md", "labels.json", ".expected.json", ".snapshot", ".tsv.gz")
SYNTH = "bench/synth.py make_traces(200, seed=3), top 20"


def fixture_files() -> list[Path]:
    """Every trace file in ``fixtures/`` (not the READMEs, labels and expected results)."""
    return sorted(
        p for p in (ROOT / "fixtures").rglob("*") if p.is_file() and not p.name.endswith(SKIP)
    )


def name_of(path: Path) -> str:
    return path.relative_to(ROOT / "fixtures").as_posix()


def outputs_of(result: Analysis) -> dict[str, str]:
    """JSON and text, with this checkout's path to ``fixtures/`` written as ``fixtures`` (the
    warnings name the file)."""
    here = str(ROOT / "fixtures")
    return {
        "json": result.to_json().replace(here, "fixtures"),
        "text": result.to_text().replace(here, "fixtures"),
    }


def synthetic() -> Analysis:
    sys.path.insert(0, str(ROOT / "bench"))
    from synth import make_traces

    return analyze_spans(make_traces(200, seed=3), top=20)


def main() -> None:
    outputs = {}
    for path in fixture_files():
        outputs[name_of(path)] = outputs_of(analyze([path]))
    outputs[SYNTH] = outputs_of(synthetic())
    data = json.dumps(outputs, indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")
    GOLDEN.write_bytes(gzip.compress(data, mtime=0))


if __name__ == "__main__":
    main()
