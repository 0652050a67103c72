from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
sys.path.insert(0, str(Path(__file__).parent))

import os  # noqa: E402

from hypothesis import settings  # noqa: E402

# CI explores the same examples every run, so a red build is the change's doing; locally each
# run explores new ones.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


# One Spark session for the whole run (tests/test_spark*.py): starting the JVM and the Python
# workers is most of a Spark test's cost.  local[2], small shuffles, no UI.
import shutil  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

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
