"""tracelens: why is my agent slow?

``from tracelens import trace, configure`` is all an application needs; it loads only the light
instrumentation (no DuckDB, Polars or Arrow).  The library calls, one per command with the
command's option names as parameters (``tracelens.analyze``, ``diff``, ``import_files``,
``write_report`` for ``tracelens report``, ``write_weekly``, ``collect``, ``export``,
``run_demo``, ``size``), are loaded from ``tracelens.api`` on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tracelens_instrumentation as _instrumentation

if TYPE_CHECKING:
    from tracelens_instrumentation import configure, flush, trace

    from tracelens.api import (
        analyze,
        collect,
        diff,
        export,
        import_files,
        run_demo,
        size,
        write_report,
        write_weekly,
    )

_INSTRUMENTATION = ("configure", "flush", "trace")
_API = (
    "analyze",
    "collect",
    "diff",
    "export",
    "import_files",
    "run_demo",
    "size",
    "write_report",
    "write_weekly",
)

__all__ = [
    "analyze",
    "collect",
    "configure",
    "diff",
    "export",
    "flush",
    "import_files",
    "run_demo",
    "size",
    "trace",
    "write_report",
    "write_weekly",
]


def __getattr__(name: str) -> Any:
    if name in _API:
        from tracelens import api

        return getattr(api, name)
    if name in _INSTRUMENTATION:
        return getattr(_instrumentation, name)
    raise AttributeError(f"module 'tracelens' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
