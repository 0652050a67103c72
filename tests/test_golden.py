"""The analysis JSON and text output of every fixture, byte for byte, against golden files.

``tests/golden/outputs.json.gz`` was produced by the code BEFORE the typed-results refactor
(main at fdff202, run with main's own environment: ``tests/golden/generate.py``), so it is an
independent record of what the output was, not of what the refactored code writes.  The
contract itself is ``docs/analysis-json.md``; this test guards refactors of the code behind it
(typed findings and summaries, ``Analysis.to_dict`` as the one place the JSON is made).  A
deliberate change of the output regenerates the file and says so in its commit (the one so far
added the latency model and ``cpu_hotspots`` fields, every earlier field byte-identical:
``golden/generate.py``).
"""

from __future__ import annotations

import difflib
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, analysed

from tracelens.analysis import Analysis
from tracelens.analysis.findings.finding import FindingType

sys.path.insert(0, str(ROOT / "tests" / "golden"))
from generate import GOLDEN, SYNTH, fixture_files, name_of, outputs_of, synthetic


def _golden() -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = json.loads(gzip.decompress(GOLDEN.read_bytes()))
    return data


GOLDEN_OUTPUTS = _golden()


def test_every_fixture_has_a_golden_output() -> None:
    assert sorted(GOLDEN_OUTPUTS) == sorted([SYNTH, *(name_of(p) for p in fixture_files())])


def _diff(want: str, got: str) -> str:
    lines = difflib.unified_diff(
        want.splitlines(), got.splitlines(), "golden", "now", lineterm="", n=2
    )
    return "\n".join(list(lines)[:60])


@pytest.mark.parametrize("path", fixture_files(), ids=name_of)
def test_output_is_unchanged(path: Path) -> None:
    want = GOLDEN_OUTPUTS[name_of(path)]
    _check(analysed(path), want)


def test_synthetic_agent_traces_output_is_unchanged() -> None:
    _check(synthetic(), GOLDEN_OUTPUTS[SYNTH])


def _check(result: Analysis, want: dict[str, str]) -> None:
    got = outputs_of(result)
    assert got["json"] == want["json"], _diff(want["json"], got["json"])
    assert got["text"] == want["text"], _diff(want["text"], got["text"])


def test_the_golden_files_cover_every_finding_type() -> None:
    """The comparison means something for findings: every type occurs in some fixture."""
    seen: set[Any] = set()
    for out in GOLDEN_OUTPUTS.values():
        seen |= {f["type"] for f in json.loads(out["json"])["findings"]}
    # Every type of the table (findings/finding.py) but the what-ifs, which only a question asks.
    table = {t.value for t in FindingType} - {FindingType.WHAT_IF.value}
    assert table == {
        "parallelizable",
        "cacheable",
        "retry",
        "n_plus_one",
        "tail",
        "repeated_write",
        "polling",
        "launch_bound",
    }
    assert seen >= table
