"""One table of finding types (``FindingType`` in ``analysis/findings/finding.py``): each
member's rank, JSON name, headline and detector; a type's details class and detector live in
its own module.  The truths here: the detection, the docs and the schema follow the table, and a
new type, added as a member of the table plus its own module and nothing else (in a copy of the
package, run in a fresh interpreter), comes out in the text, the JSON (valid against
``docs/analysis.schema.json``) and the HTML report.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
from conftest import FIXTURES, ROOT

from tracelens.analysis.findings.detectors import detector
from tracelens.analysis.findings.finding import FindingType

PKG = ROOT / "tracelens"
TABLE = PKG / "analysis" / "findings" / "finding.py"
FIXTURE = FIXTURES / "agent" / "any-agent-LANGCHAIN.otlp.json"

DUMMY = '''"""A dummy finding type: every span of the most frequent operation, twice as fast."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tracelens.analysis.findings.candidate import Candidate
from tracelens.analysis.findings.finding import Evidence, Fact, FindingType, Shown
from tracelens.analysis.findings.replay import Change

if TYPE_CHECKING:
    from tracelens.analysis.findings.detectors import Inputs


@dataclass(frozen=True)
class DummyDetails(Shown):
    dummy_factor: float

    def facts(self) -> list[tuple[str, Fact]]:
        return [("dummy_factor", self.dummy_factor)]

    def text_lines(self) -> list[str]:
        return [f"dummy factor {self.dummy_factor:g}"]


def candidates(inp: Inputs) -> list[Candidate]:
    spans = inp.spans
    name = str(spans["name"].mode().sort()[0])
    rows = np.flatnonzero((spans["name"] == name).to_numpy())
    return [
        Candidate(
            type=FindingType.DUMMY,
            names=[name],
            services=[str(spans["service"][int(rows[0])])],
            change=Change(factor_rows=rows, factor=np.full(len(rows), 0.5)),
            traces=np.unique(inp.timeline.trace[rows]),
            confidence="low",
            evidence=[Evidence("dummy_rule", f"{name} made twice as fast")],
            occurrences=len(rows),
            example=[int(rows[0])],
            details=DummyDetails(dummy_factor=0.5),
        )
    ]
'''

MEMBER = '    DUMMY = ("dummy", "Halve {names}", "dummy:candidates")\n'

RUN = """
import json, sys
import tracelens
from tracelens.api import analyze
from tracelens.render.html import render_report
result = analyze([sys.argv[1]])
print(json.dumps({"where": tracelens.__file__, "text": result.to_text(),
                  "json": result.to_json(), "html": render_report(result)}))
"""


def test_detection_docs_and_schema_follow_the_table() -> None:
    """Each type with a detector in the table has one that loads; the docs and the schema
    name every type of the table."""
    contract = (ROOT / "docs" / "analysis-json.md").read_text(encoding="utf-8")
    schema = json.loads((ROOT / "docs" / "analysis.schema.json").read_text(encoding="utf-8"))
    described = schema["$defs"]["finding"]["properties"]["type"]["description"]
    for kind in FindingType:
        if kind.detector is not None:
            assert callable(detector(kind)), kind
        assert f"`{kind.value}`" in contract, f"docs/analysis-json.md: no {kind.value}"
        if kind is not FindingType.WHAT_IF:
            assert kind.value in described, f"analysis.schema.json: no {kind.value}"
    # the detectors' table order is the rank order (ties between equal savings)
    assert [k.rank for k in FindingType] == list(range(len(FindingType)))


def _changed(original: Path, copy: Path) -> list[str]:
    """Files added or changed in ``copy`` against ``original`` (no caches)."""
    out = []
    for path in sorted(copy.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(copy)
        theirs = original / rel
        if not theirs.exists() or not filecmp.cmp(path, theirs, shallow=False):
            out.append(str(rel))
    return out


def test_a_new_finding_type_is_its_module_and_one_table_entry(tmp_path: Path) -> None:
    src = tmp_path / "src"
    copy = src / "tracelens"
    shutil.copytree(PKG, copy, ignore=shutil.ignore_patterns("__pycache__"))
    table = copy / "analysis" / "findings" / "finding.py"
    text = table.read_text(encoding="utf-8")
    assert "    # fmt: on\n" in text
    table.write_text(text.replace("    # fmt: on\n", MEMBER + "    # fmt: on\n"), "utf-8")
    (copy / "analysis" / "findings" / "dummy.py").write_text(DUMMY, encoding="utf-8")
    assert _changed(PKG, copy) == ["analysis/findings/dummy.py", "analysis/findings/finding.py"]

    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(FIXTURE)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert Path(out["where"]).is_relative_to(copy)  # the copy ran, not the tree

    doc = json.loads(out["json"])
    dummies = [f for f in doc["findings"] if f["type"] == "dummy"]
    assert len(dummies) == 1, [f["type"] for f in doc["findings"]]
    dummy = dummies[0]
    assert dummy["dummy_factor"] == 0.5
    assert dummy["evidence"][0]["code"] == "dummy_rule"
    assert dummy["saving_ms"]["p50"] > 0  # the replay re-timed it like any other finding
    schema = json.loads((ROOT / "docs" / "analysis.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(doc, schema)

    name = dummy["names"][0]
    assert f"- dummy [low]: {name}" in out["text"]
    assert "    dummy factor 0.5" in out["text"]
    assert f"Halve {name}" in out["html"]
    assert "dummy_factor" in out["html"]
