"""One self-contained HTML file per analysis: inline CSS and SVG, no script, no network.

The page carries a Content-Security-Policy that forbids every fetch and every script, so even a
template mistake cannot make an opened report reach out or run injected code; Jinja's
autoescape is the first line of defence for span names and attributes, the policy the second.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from tracelens.analysis import Analysis
from tracelens.analysis.kinds import KINDS
from tracelens.render.html import fmt, model
from tracelens.render.html.waterfall import waterfalls

KIND_LABELS = {
    "cpu": "CPU",
    "gpu": "GPU / model",
    "io": "I/O",
    "wait": "waiting",
    "unknown": "unknown",
}


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tracelens.render.html", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(fmt.FILTERS)
    env.globals.update(
        KINDS=KINDS,
        KIND_LABELS=KIND_LABELS,
        stylesheet=stylesheet(),
    )
    return env


@functools.lru_cache(maxsize=1)
def stylesheet() -> Markup:
    """The package's own CSS, inlined (it is ours, not data, so it is marked safe)."""
    text = resources.files("tracelens.render.html").joinpath("static/report.css").read_text("utf-8")
    return Markup(text)


def report_context(
    analysis: Analysis, *, title: str | None = None, sources: Sequence[str] = ()
) -> dict[str, Any]:
    """Everything ``report.html.j2`` shows, aggregated and capped (top-N, a few waterfalls)."""
    trace_analysis = analysis.traces
    head = model.headline(analysis)
    return {
        "title": title or "Agent latency report",
        "sources": list(sources),
        "head": head,
        "histogram": model.latency_histogram(trace_analysis.traces["duration_ns"].to_numpy() / 1e6),
        "roots": model.roots_breakdown(trace_analysis),
        "operations": model.top_operations(analysis),
        "gpu": model.gpu_view(analysis),
        "cpu": model.cpu_split(trace_analysis),
        "stages": model.stages_view(analysis),
        "models": model.models_view(analysis),
        "sizing": model.sizing_view(analysis),
        "flames": model.flames(analysis),
        "findings": model.findings(analysis),
        "waterfalls": waterfalls(analysis),
        "warnings": list(analysis.warnings),
        "comparison": None,
        "index_href": None,
    }


def render_context(template: str, context: dict[str, Any]) -> str:
    return environment().get_template(template).render(**context)


def render_report(
    analysis: Analysis, *, title: str | None = None, sources: Sequence[str] = ()
) -> str:
    """The HTML report of an analysis, as one string (deterministic for the same input)."""
    return render_context("report.html.j2", report_context(analysis, title=title, sources=sources))
