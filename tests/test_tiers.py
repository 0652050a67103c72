"""The suite's tiers hold (README, "Testing"): each independent truth keeps a smoke test in the
default tier, heavy cases are gated by their marker alone, and example counts come from the
Hypothesis profiles in conftest.py, not from the tests.

The truth is the tests' own source, read with ``ast`` (what a decorator says, not what runs).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

TESTS = ROOT / "tests"

# The truths issue 28 names, each with the file that holds its smoke test.
SMOKE = {
    "the demo end to end": "test_demo.py",
    "kill -9": "test_collector_kill.py",
    "Spark": "test_spark.py",
    "the report in a browser": "test_report_browser.py",
    "the flame graphs in a browser": "test_flame_browser.py",
    "the real-vLLM fit (make test-vllm)": "test_vllm_latency.py",
    "the Prometheus scrape": "test_metrics_prometheus.py",
    "span metrics counted from what a collector receives": "test_metrics_ingest.py",
    "diff significance": "test_diff.py",
    "the memory budget": "reliability/test_memory.py",
    "analyze's memory budget": "reliability/test_analyze_budget.py",
    "what-ifs on every path (analyze, report)": "test_what_if_paths.py",
}
NOT_DEFAULT = {"system", "heavy"}

# Tests that may set their own max_examples, each with its reason (README, "Testing").
OWN_EXAMPLE_COUNT: dict[str, str] = {}


def _marks(node: ast.expr) -> set[str]:
    """The names of ``pytest.mark.X`` in a decorator or a ``pytestmark`` value."""
    return {
        sub.attr
        for sub in ast.walk(node)
        if isinstance(sub, ast.Attribute)
        and isinstance(sub.value, ast.Attribute)
        and sub.value.attr == "mark"
    }


def _tests(path: Path) -> tuple[set[str], dict[str, set[str]]]:
    """(the module's pytestmark marks, {test function: its marks})."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module: set[str] = set()
    functions: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            module |= _marks(node.value)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test_"
        ):
            functions[node.name] = set().union(*map(_marks, node.decorator_list))
    return module, functions


def _sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if p.name != "conftest.py")


@pytest.mark.parametrize("truth", SMOKE, ids=list(SMOKE))
def test_every_truth_keeps_a_smoke_test_in_the_default_tier(truth: str) -> None:
    module, functions = _tests(TESTS / SMOKE[truth])
    smoke = [name for name, marks in functions.items() if "smoke" in marks | module]
    assert smoke, f"{SMOKE[truth]}: no @pytest.mark.smoke test for {truth}"
    for name in smoke:
        tiers = (functions[name] | module) & NOT_DEFAULT
        assert not tiers, f"{SMOKE[truth]}::{name} is the smoke test but is marked {tiers}"


def test_smoke_tests_are_only_where_the_readme_lists_them() -> None:
    marked = {
        path.relative_to(TESTS).as_posix()
        for path in _sources()
        for marks in _tests(path)[1].values()
        if "smoke" in marks
    }
    assert marked == set(SMOKE.values())


def test_heavy_cases_are_gated_by_their_marker_alone() -> None:
    """One gate: ``-m heavy`` (make test-all).  The environment variable that gated them a
    second way (and that test_memory.py read while ignoring ``-m heavy``) is gone."""
    retired = ("TRACELENS" + "_HEAVY", "TRACELENS" + "_NATIVE_EXAMPLES", "mark." + "slow")
    found = [
        f"{path.relative_to(TESTS)}: {word}"
        for path in _sources()
        for word in retired
        if word in path.read_text(encoding="utf-8")
    ]
    assert found == []


def test_example_counts_come_from_the_profiles() -> None:
    own = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "max_examples":
                own.append(f"{path.relative_to(TESTS)}:{node.value.lineno}")
    allowed = {k for k in own if k.split(":")[0] in OWN_EXAMPLE_COUNT}
    assert sorted(set(own) - allowed) == [], "set the count in a profile (tests/conftest.py)"


def test_the_checks_see_marks_and_counts() -> None:
    """The readers above find what they look for (a reader that found nothing would pass)."""
    sample = TESTS / "reliability" / "test_memory.py"
    _, functions = _tests(sample)
    assert functions["test_forty_concurrent_60_mib_grpc_messages_stay_within_the_budget"] == {
        "heavy",
        "measures",
    }
    (assign,) = ast.parse("pytestmark = [pytest.mark.vllm, pytest.mark.system]").body
    assert isinstance(assign, ast.Assign) and _marks(assign.value) == {"vllm", "system"}
    tree = ast.parse("@settings(max_examples=5)\ndef test_x(): ...")
    assert any(isinstance(n, ast.keyword) and n.arg == "max_examples" for n in ast.walk(tree))
