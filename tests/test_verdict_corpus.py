"""The verdict corpus is its table (``scripts/verdict_corpus/``), and nothing else (issue 28).

The committed data must be what the table says: one fixture file per case and one case per
fixture file, every case reasoned and every label with its why, ``labels.json`` and
``docs/verdicts.md`` exactly as the table writes them, and every OTel case's file exactly what
its builder exports (those are deterministic: a fixed clock and seeded ids; the decorator cases
carry measured timings, so only their presence is checked here).  Fast: no agent runs.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

sys.path.insert(0, str(ROOT / "scripts"))

from verdict_corpus.docs import write_docs
from verdict_corpus.spans import write_case
from verdict_corpus.table import CASES, PARTS

VERDICTS = FIXTURES / "verdicts"
OTEL = [name for name, case in CASES.items() if case.source == "otel"]


def test_every_case_has_a_fixture_and_every_fixture_a_case() -> None:
    assert sum(len(part.CASES) for part in PARTS) == len(CASES), "a case name is used twice"
    files = {p.stem for p in VERDICTS.glob("*.jsonl")}
    assert sorted(set(CASES) - files) == [], "cases without a fixture file"
    assert sorted(files - set(CASES)) == [], "fixture files without a case"


def test_every_case_and_every_label_is_reasoned() -> None:
    unreasoned = [name for name, case in CASES.items() if len(case.why.split()) < 8]
    assert unreasoned == []
    no_why = [
        f"{name}: {label.get('names') or label.get('name')}"
        for name, case in CASES.items()
        for label in [*case.parallel, *case.cache, *([case.saving_ms] if case.saving_ms else [])]
        if not str(label.get("why", "")).strip()
    ]
    assert no_why == []


def test_every_case_has_labels_and_a_builder_of_its_source() -> None:
    for name, case in CASES.items():
        assert case.source in ("decorator", "otel"), name
        assert case.cache, name  # every operation is labelled (test_verdicts checks which)
        params = inspect.signature(case.build).parameters.values()
        unbound = [p.name for p in params if p.default is inspect.Parameter.empty]
        assert unbound == (["rng"] if case.source == "otel" else []), (name, case.build)


def test_labels_json_is_the_table() -> None:
    committed = json.loads((VERDICTS / "labels.json").read_text())
    assert committed == [case.label() for case in CASES.values()]


def test_docs_page_is_the_table(tmp_path: Path) -> None:
    write_docs(tmp_path / "verdicts.md", list(CASES.values()))
    page = (ROOT / "docs" / "verdicts.md").read_text()
    assert page == (tmp_path / "verdicts.md").read_text(), (
        "docs/verdicts.md is stale: run `python scripts/make_verdict_corpus.py --labels`"
    )
    for case in CASES.values():
        assert case.why in " ".join(page.split()), case.name


@pytest.mark.parametrize("name", OTEL)
def test_otel_fixture_is_what_its_builder_exports(name: str, tmp_path: Path) -> None:
    write_case(name, CASES[name].build, tmp_path / f"{name}.jsonl")
    assert (tmp_path / f"{name}.jsonl").read_bytes() == (VERDICTS / f"{name}.jsonl").read_bytes()
