"""Build hook for the optional compiled fast paths: the OTLP protobuf decoder, the JSON column
builder (OTLP, Jaeger, Zipkin) and the critical path walk.

Everything else about the package lives in ``pyproject.toml``.  The extensions are optional: without
a C compiler or Python headers the install still succeeds and tracelens uses its pure Python/NumPy
paths.
"""

from __future__ import annotations

from setuptools import Extension, setup

# What the two importers' extensions share (the attribute rules, the buffers): one header.
_COMMON = "tracelens/ingest/_native_common.h"
# The JSON importers' builder and the walks _json_native.c includes.
_JSON_PARTS = [
    f"tracelens/ingest/_json_{part}.h" for part in ("builder", "jaeger", "zipkin", "direct", "jaeger_direct")
]

setup(
    ext_modules=[
        Extension(
            "tracelens.ingest.otlp_proto._native",
            sources=["tracelens/ingest/otlp_proto/_native.c"],
            include_dirs=["tracelens/ingest"],
            depends=[_COMMON],
            optional=True,
        ),
        Extension(
            "tracelens.ingest._json_native",
            sources=["tracelens/ingest/_json_native.c"],
            include_dirs=["tracelens/ingest"],
            depends=[_COMMON, *_JSON_PARTS],
            optional=True,
        ),
        Extension(
            "tracelens.analysis._walk",
            sources=["tracelens/analysis/_walk.c"],
            optional=True,
        ),
    ]
)
