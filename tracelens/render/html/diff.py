"""The HTML page of a ``Diff`` (``tracelens diff --format html``): one self-contained file
under the same Content-Security-Policy as the report (no script, no fetch); every name from the
traces goes through Jinja's autoescape."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracelens.render.json import diff_document

if TYPE_CHECKING:
    from tracelens.analysis.diff import Diff

TOP_OPERATIONS = 25


def diff_context(diff: Diff, *, title: str | None = None) -> dict[str, Any]:
    """What ``diff.html.j2`` shows: the contract's document, capped where it is long."""
    doc = diff_document(diff)
    for root in doc["roots"]:
        root["hidden_operations"] = max(len(root["operations"]) - TOP_OPERATIONS, 0)
        root["operations"] = root["operations"][:TOP_OPERATIONS]
        for a in root["attribution"]:
            top = max((abs(c["delta_ms"]) for c in a["operations"]), default=0.0)
            for c in a["operations"]:
                c["width"] = 100.0 * abs(c["delta_ms"]) / top if top > 0 else 0.0
    return {"title": title or "What changed", "d": doc}


def render_diff(diff: Diff, *, title: str | None = None) -> str:
    from tracelens.render.html.render import render_context

    return render_context("diff.html.j2", diff_context(diff, title=title))


__all__ = ["diff_context", "render_diff"]
