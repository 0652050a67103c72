"""Build hook for the optional compiled fast path of the OTLP protobuf decoder.

Everything else about the package lives in ``pyproject.toml``.  The extension is optional: without a
C compiler or Python headers the install still succeeds and ``tracelens.ingest.otlp_proto`` uses its
pure Python/NumPy path.
"""

from __future__ import annotations

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracelens.ingest.otlp_proto._native",
            sources=["tracelens/ingest/otlp_proto/_native.c"],
            optional=True,
        )
    ]
)
