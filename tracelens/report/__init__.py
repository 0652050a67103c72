"""HTML reports: one self-contained page per analysis, and weekly pages with an index.

The library is the interface (``render_report``, ``write_report``, ``write_weekly``); the
``tracelens report`` command only parses options and calls these.
"""

from __future__ import annotations

from tracelens.report.render import render_report, report_context, write_report
from tracelens.report.weekly import iso_week, week_bounds, weeks_in, write_weekly

__all__ = [
    "iso_week",
    "render_report",
    "report_context",
    "week_bounds",
    "weeks_in",
    "write_report",
    "write_weekly",
]
