"""Process-wide tracing state: which tracer the decorator uses, if any.

Why a module of its own: the decorator's hot path reads one module global (``TRACER``); only
when it is None does it look (cheaply) for a tracer provider the application may have installed
since, so that ``@trace`` works with or without ``configure`` and costs next to nothing while no
SDK is set up.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any, Final

from opentelemetry import trace as otel_trace

SCOPE: Final = "tracelens"
VERSION: Final = "0.1.0"

log = logging.getLogger("tracelens")

TRACER: otel_trace.Tracer | None = None
DISABLED: list[bool] = [False]  # OTEL_SDK_DISABLED, or configure() found tracing switched off

_lock = threading.Lock()
_tracked: set[int] = set()
_complaints: dict[str, int] = {}
MAX_COMPLAINTS: Final = 5


def tracer() -> otel_trace.Tracer | None:
    """The decorator's tracer, or None when no real tracer provider is installed."""
    found = TRACER
    if found is not None or DISABLED[0]:
        return found
    provider = otel_trace.get_tracer_provider()
    if isinstance(provider, (otel_trace.ProxyTracerProvider, otel_trace.NoOpTracerProvider)):
        return None
    return activate(provider)


def activate(provider: Any) -> otel_trace.Tracer | None:
    """Starts using ``provider``: child tracking on SDK providers, the sampler, our tracer."""
    global TRACER
    with _lock:
        try:
            track_children(provider)
            from tracelens_instrumentation import sampler

            sampler.install()
            TRACER = provider.get_tracer(SCOPE, VERSION)
        except Exception:
            complain("activate", "tracelens: could not start tracing; calls pass through")
            DISABLED[0] = True
            return None
    return TRACER


def is_sdk_provider(provider: Any) -> bool:
    sdk = sys.modules.get("opentelemetry.sdk.trace")
    return sdk is not None and isinstance(provider, sdk.TracerProvider)


def track_children(provider: Any) -> None:
    """Adds the child tracker to an SDK provider, once."""
    if not is_sdk_provider(provider) or id(provider) in _tracked:
        return
    from tracelens_instrumentation.children import ChildTracker

    provider.add_span_processor(ChildTracker())
    _tracked.add(id(provider))


def complain(key: str, message: str, *args: Any) -> None:
    """Logs a failure inside the instrumentation, a few times per kind, with its traceback."""
    count = _complaints.get(key, 0)
    if count >= MAX_COMPLAINTS:
        return
    _complaints[key] = count + 1
    log.warning(message, *args, exc_info=sys.exc_info()[0] is not None)
