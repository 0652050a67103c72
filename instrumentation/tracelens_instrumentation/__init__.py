"""Light instrumentation for tracelens: ``@trace``, ``configure()``, ``flush()``.

Importable without DuckDB, Polars or Arrow, and cheap to import: the OpenTelemetry SDK and the
exporters load only when ``configure`` is called.
"""

from __future__ import annotations

from tracelens_instrumentation.config import configure, flush
from tracelens_instrumentation.decorator import trace

__all__ = ["configure", "flush", "trace"]
