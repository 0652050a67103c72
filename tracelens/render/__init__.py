"""The renderers: each reads a typed result and writes one output (as pyinstrument keeps one
``Renderer.render(session)`` per output, and its session imports no renderer).

* ``text``: an ``Analysis`` (and a ``Sizing``) as terminal tables (``--format text``);
* ``diff_text``: a ``Diff`` as terminal text (``tracelens diff --format text``);
* ``json``: the JSON documents of an ``Analysis`` and a ``Diff`` (``docs/analysis-json.md``);
* ``folded``: the CPU stacks of ``CpuHotspots`` in flamegraph.pl's folded format;
* ``html``: the self-contained HTML pages (the report, the weekly pages, a ``Diff``'s page).

Importing the package registers the renderers with ``tracelens.analysis.outputs``, which is how
``Analysis.to_text``/``to_json``/``to_dict`` and ``Diff``'s conveniences find them without
importing them.  The HTML package is loaded when a page is written (it brings Jinja2).
"""

from __future__ import annotations

from tracelens.analysis.diff.result import Diff
from tracelens.analysis.outputs import register
from tracelens.render import diff_text, folded, json, text


def _diff_html(diff: Diff, *, title: str | None = None) -> str:
    from tracelens.render.html.diff import render_diff

    return render_diff(diff, title=title)


register(Diff, "html", _diff_html)

__all__ = ["diff_text", "folded", "json", "text"]
