"""HTML reports: one self-contained page per analysis, and weekly pages with an index.

This package only renders: it turns an ``Analysis`` (and per-week figures,
``tracelens.analysis.weekly``) into HTML strings.
Loading, analysing and writing files is the library's (``tracelens.write_report``,
``tracelens.write_weekly``), which the ``tracelens report`` command wraps.
"""

from __future__ import annotations

from tracelens.render.html.render import render_report, report_context
from tracelens.render.html.weekly import render_index, render_week

__all__ = ["render_index", "render_report", "render_week", "report_context"]
