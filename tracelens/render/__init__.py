"""The renderers: each reads a typed result and writes one output (as pyinstrument keeps one
``Renderer.render(session)`` per output, and its session imports no renderer).

* ``text``: an ``Analysis`` as terminal tables (``tracelens analyze --format text``);
* ``diff_text``: a ``Diff`` as terminal text (``tracelens diff --format text``);
* ``folded``: the CPU stacks of ``CpuHotspots`` in flamegraph.pl's folded format;
* the HTML pages are the ``tracelens.report`` package's; the JSON is each result's contract,
  written by the result itself (``to_dict``/``to_json``, ``docs/analysis-json.md``).

Importing the package registers the text renderers with ``tracelens.analysis.outputs``, which is
how ``Analysis.to_text`` and ``Diff.to_text`` find them without importing them.
"""

from __future__ import annotations

from tracelens.render import diff_text, folded, text

__all__ = ["diff_text", "folded", "text"]
