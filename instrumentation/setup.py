"""Build hook for the optional compiled parts: fingerprints (``_speedups.c``) and, on Linux, the
per-span clocks (``_record.c``) and the CPU-clock stack sampler (``_cpusample.c``).

Everything else about the package lives in ``pyproject.toml``.  The extension is optional:
without a C compiler or Python headers the install still succeeds and the decorator uses the
pure Python fingerprints and clocks, which give the same values.
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup

extensions = [
    Extension(
        "tracelens_instrumentation._speedups",
        sources=["tracelens_instrumentation/_speedups.c"],
        optional=True,
    )
]
if sys.platform.startswith("linux"):
    extensions.append(
        Extension(
            "tracelens_instrumentation._record",
            sources=["tracelens_instrumentation/_record.c"],
            optional=True,
        )
    )
    extensions.append(
        Extension(
            "tracelens_instrumentation._cpusample",
            sources=["tracelens_instrumentation/_cpusample.c"],
            optional=True,
        )
    )
setup(ext_modules=extensions)
