"""Every compiled fast path is built where CI builds the package.

The extensions are optional at install (``setup.py``: a machine without a C compiler gets the
Python fallbacks), so a C file that stopped compiling would not fail the install: the native
versus Python comparison tests would simply have nothing to compare and the build would stay
green.  CI has a compiler, so there every extension must load.
"""

from __future__ import annotations

import importlib
import os

import pytest

COMPILED = (
    "tracelens.ingest.otlp_proto._native",
    "tracelens.ingest._json_native",
    "tracelens.analysis._walk",
    "tracelens_instrumentation._speedups",
    "tracelens_instrumentation._record",
)


@pytest.mark.skipif(not os.environ.get("CI"), reason="only CI promises a C compiler")
@pytest.mark.parametrize("name", COMPILED)
def test_compiled_module_is_built(name: str) -> None:
    importlib.import_module(name)  # ImportError: the .so was not built (see the install log)
