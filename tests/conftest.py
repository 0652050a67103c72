from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
sys.path.insert(0, str(Path(__file__).parent))

import os  # noqa: E402

from hypothesis import settings  # noqa: E402

# Results built without tracelens.analyze (analyze_spans, find_all, compare) render through
# the renderers tracelens.render registers (analysis/outputs.py): load them, as the library does.
import tracelens.render  # noqa: E402, F401

# Hypothesis profiles: how many examples each property test gets, and whether they are new ones.
# The profile decides for every test; a test states its own ``max_examples`` only where one
# example is itself an end-to-end run (none today: README, "Testing").
# * dev (the default, make test): 25 examples, a new random draw each run; a failure is saved
#   in .hypothesis/ and replayed first next time, so local runs explore a little each time.
# * ci (CI=1, what .ci/run sets): the same 50 examples every run (derandomize, no example
#   database), so a red build is the change's doing, not a new draw; print_blob prints the
#   @reproduce_failure line of a failure.  Exploring is left to dev runs and nightly.
# * nightly (HYPOTHESIS_PROFILE=nightly): 1,000 random examples per property; minutes more.
# No profile has a deadline: on a shared 2-core machine one slow example is the machine's
# doing, and the per-test time is watched by --durations, not by a timer inside a test.
# HYPOTHESIS_PROFILE names any of them and wins over CI (pytest's --hypothesis-profile too).
settings.register_profile("dev", max_examples=25, deadline=None)
settings.register_profile(
    "ci", max_examples=50, derandomize=True, database=None, deadline=None, print_blob=True
)
settings.register_profile("nightly", max_examples=1000, deadline=None, print_blob=True)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


# One Spark session for the whole run (tests/test_spark*.py): starting the JVM and the Python
# workers is most of a Spark test's cost.  local[2], small shuffles, no UI.
import shutil  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

import pytest  # noqa: E402


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return str(Path(home, "bin", "java"))
    return shutil.which("java")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if _java() is None:
        pytest.skip("Spark needs Java 17+ and there is no `java` here (JAVA_HOME, PATH)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers import tracelens
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tracelens-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# The analysed-fixture cache: each fixture file is analysed once per test session, however many
# tests read its Analysis (the golden bytes, the schema, the per-fixture invariants).  The
# object is shared: a test that changes it, or that tests the analysis run itself (timing,
# progress, a different option), calls tracelens.api.analyze for its own.
import functools  # noqa: E402

if TYPE_CHECKING:
    from tracelens.analysis import Analysis


@functools.cache
def _analysed(path: Path) -> Analysis:
    from tracelens.api import analyze

    return analyze([path])


def analysed(path: str | os.PathLike[str]) -> Analysis:
    """``tracelens.api.analyze([path])`` for one file, computed once per session (read only)."""
    return _analysed(Path(path).resolve())


def trace_fixture_files() -> list[Path]:
    """Every trace file in ``fixtures/``: golden/generate.py's rule (not the READMEs, labels,
    expected results, refused-on-purpose snapshots or device records), the one every sweep
    of the fixtures uses."""
    sys.path.insert(0, str(ROOT / "tests" / "golden"))
    from generate import fixture_files

    return fixture_files()
