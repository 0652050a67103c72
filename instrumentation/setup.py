"""Build hook for the optional compiled fingerprints (``_speedups.c``).

Everything else about the package lives in ``pyproject.toml``.  The extension is optional:
without a C compiler or Python headers the install still succeeds and the decorator uses the
pure Python fingerprints, which give the same values.
"""

from __future__ import annotations

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracelens_instrumentation._speedups",
            sources=["tracelens_instrumentation/_speedups.c"],
            optional=True,
        )
    ]
)
