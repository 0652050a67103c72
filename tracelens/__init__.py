"""tracelens: why is my agent slow?

``from tracelens import trace, configure`` is all an application needs; it loads only the light
instrumentation (no DuckDB, Polars or Arrow).  The analysis API (``tracelens.analyze``) is loaded
on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tracelens_instrumentation as _instrumentation

if TYPE_CHECKING:
    from tracelens_instrumentation import configure, flush, trace

    from tracelens.api import analyze

__all__ = ["analyze", "configure", "flush", "trace"]


def __getattr__(name: str) -> Any:
    if name == "analyze":
        from tracelens.api import analyze

        return analyze
    if name in ("trace", "configure", "flush"):
        return getattr(_instrumentation, name)
    raise AttributeError(f"module 'tracelens' has no attribute {name!r}")
