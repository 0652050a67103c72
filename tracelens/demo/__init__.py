"""The demo agent behind ``tracelens demo`` and the README's main job (``scripts/demo.py``).

An asyncio agent that plans, calls tools over real HTTP on a local tool server, retrieves,
waits for a bounded model queue and calls a model (a real vLLM engine when available, else a
local inference server that simulates prefill and decode time and says so), exporting its spans
with the real OTLP exporter.  It makes the mistakes real agents make (independent calls one
after another, the same call twice) so that the analysis has something true to find.
"""

from __future__ import annotations

from tracelens.demo.runner import DEFAULT_ENDPOINT, DemoOptions, DemoSummary, run_demo

__all__ = ["DEFAULT_ENDPOINT", "DemoOptions", "DemoSummary", "run_demo"]
